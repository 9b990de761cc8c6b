//! Compiles `csrc/dpdk_shim.c` against Debian's dpdk-dev when the `dpdk` feature is on; does
//! nothing otherwise, so a default workspace build never looks for DPDK.

fn main() {
    #[cfg(feature = "dpdk")]
    dpdk::build();
}

#[cfg(feature = "dpdk")]
mod dpdk {
    use std::process::Command;

    fn pkg_config(arg: &str) -> Vec<String> {
        let out = Command::new("pkg-config")
            .args([arg, "libdpdk"])
            .output()
            .unwrap_or_else(|e| {
                panic!("pkg-config not runnable ({e}); install pkg-config and dpdk-dev")
            });
        if !out.status.success() {
            panic!(
                "pkg-config cannot find libdpdk: install dpdk-dev (crates/fibre-bench/run.sh does)\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    pub fn build() {
        println!("cargo:rerun-if-changed=csrc/dpdk_shim.c");
        let mut cc = cc::Build::new();
        cc.file("csrc/dpdk_shim.c").opt_level(3).warnings(true);
        // DPDK's cflags carry `-include rte_config.h` as two words and its `-march`: pass them
        // all through in order, as DPDK's own build would.
        for flag in pkg_config("--cflags") {
            cc.flag(&flag);
        }
        cc.compile("fibre_dpdk_shim");
        for word in pkg_config("--libs") {
            if let Some(lib) = word.strip_prefix("-l") {
                println!("cargo:rustc-link-lib=dylib={lib}");
            } else if let Some(dir) = word.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={dir}");
            }
        }
    }
}
