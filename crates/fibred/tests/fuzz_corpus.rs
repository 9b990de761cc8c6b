//! Replays the server fuzz target's property (`engine::check_datagram`, what
//! fuzz/fuzz_targets/server.rs runs) over its seed corpus -- the kernel captures of
//! crates/fibre-netlink/tests/captures, whole and message by message -- and over every input
//! with which fuzzing found a bug (crates/fibre-netlink/tests/fuzz-regressions/, shared by the
//! targets: each is a stream of netlink messages), so CI checks them without a nightly
//! compiler.

use fibre_netlink::Messages;
use fibred::engine::check_datagram;
use std::path::{Path, PathBuf};

fn files(dir: &Path, ext: Option<&str>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| ext.is_none_or(|x| p.extension().is_some_and(|e| e == x)))
        .collect();
    v.sort();
    v
}

#[test]
fn seed_corpus_passes_the_server_fuzz_check() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fibre-netlink/tests/captures");
    let mut messages = 0;
    for f in files(&dir, Some("bin")) {
        let seed = std::fs::read(&f).unwrap();
        check_datagram(&seed);
        for r in Messages::new(&seed) {
            let (offset, msg) = r.unwrap();
            check_datagram(&seed[offset..offset + msg.header.length as usize]);
            messages += 1;
        }
    }
    assert!(messages > 150, "{messages}");
}

#[test]
fn fuzz_regressions_pass_the_server_fuzz_check() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fibre-netlink/tests/fuzz-regressions");
    let inputs = files(&dir, None);
    assert!(!inputs.is_empty());
    for f in inputs {
        check_datagram(&std::fs::read(&f).unwrap());
    }
}
