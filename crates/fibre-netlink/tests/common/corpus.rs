//! The fuzzers' seed corpus (the kernel captures, `tests/captures/*.bin`), the inputs with
//! which fuzzing found bugs (`tests/fuzz-regressions/`) and every truncation of every captured
//! message, as the corpus replays of this crate and of fibre-proto (`#[path]`) read them.

use fibre_netlink::Messages;
use std::path::{Path, PathBuf};

/// A directory of this crate's tests, from either crate's manifest directory.
fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fibre-netlink/tests")
        .join(name)
}

fn files(name: &str, keep: impl Fn(&Path) -> bool) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir(name))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| keep(p))
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

pub fn seeds() -> Vec<Vec<u8>> {
    files("captures", |p| p.extension().is_some_and(|x| x == "bin"))
}

pub fn regressions() -> Vec<Vec<u8>> {
    files("fuzz-regressions", |_| true)
}

/// Calls `f` on every proper prefix of every message of every seed, and on each such prefix of
/// 4 bytes or more with `nlmsg_len` claiming the cut length.
pub fn each_truncation(mut f: impl FnMut(&[u8])) {
    for seed in seeds() {
        for r in Messages::new(&seed) {
            let (offset, msg) = r.unwrap();
            let whole = &seed[offset..offset + msg.header.length as usize];
            for cut in 0..whole.len() {
                let mut part = whole[..cut].to_vec();
                f(&part);
                if cut >= 4 {
                    part[..4].copy_from_slice(&(cut as u32).to_ne_bytes());
                    f(&part);
                }
            }
        }
    }
}
