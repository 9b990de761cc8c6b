//! What the namespace tests share: whether they can run, `ip`, and network namespaces that
//! are deleted with the test and can host a thread.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// True with root and `ip netns`; otherwise says why `test` is skipped.
pub fn can_run(test: &str) -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("{test}: skipped: needs root for network namespaces");
        return false;
    }
    let ok = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("{test}: skipped: `ip netns` is not available");
    }
    ok
}

/// Runs `ip ARGS`, failing the test on error; returns what it printed.
pub fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace, deleted (with its interfaces) when dropped.
pub struct Ns(pub String);

impl Ns {
    pub fn new() -> Ns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "fibre-io-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        // No IPv6 chatter (router solicitations, MLD) from the kernel on the test links.
        for scope in ["all", "default"] {
            let key = format!("net.ipv6.conf.{scope}.disable_ipv6=1");
            ip(&["netns", "exec", &name, "sysctl", "-qw", &key]);
        }
        Ns(name)
    }

    /// Runs `f` on a thread inside the namespace; sockets and devices it creates stay there.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = File::open(&path).expect("open netns");
                // SAFETY: setns with a namespace descriptor changes only this thread's
                // network namespace.
                let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .expect("thread in namespace")
        })
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}
