//! Replays the fuzzers' seed corpus (the kernel captures, tests/captures/*.bin), the inputs
//! with which fuzzing found bugs (tests/fuzz-regressions/) and every truncation of every
//! captured message through the same checks the cargo-fuzz targets run (fuzz/fuzz_targets/),
//! so CI exercises them without a nightly compiler.

use fibre_netlink::{check_round_trip, convert, Messages};
use std::path::PathBuf;

fn seeds() -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/captures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn seed_corpus_passes_the_fuzz_checks() {
    let mut messages = 0;
    for seed in seeds() {
        messages += check_round_trip(&seed);
        convert::check_requests(&seed);
    }
    assert!(messages > 150, "{messages}");
}

#[test]
fn fuzz_regressions_pass_the_fuzz_checks() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        check_round_trip(&bytes);
        convert::check_requests(&bytes);
        n += 1;
    }
    assert!(n > 0);
}

#[test]
fn truncated_messages_pass_the_fuzz_checks() {
    for seed in seeds() {
        for r in Messages::new(&seed) {
            let (offset, msg) = r.unwrap();
            let whole = &seed[offset..offset + msg.header.length as usize];
            for cut in 0..whole.len() {
                let mut part = whole[..cut].to_vec();
                check_round_trip(&part);
                convert::check_requests(&part);
                // The same bytes with nlmsg_len claiming the cut length.
                if cut >= 4 {
                    part[..4].copy_from_slice(&(cut as u32).to_ne_bytes());
                    check_round_trip(&part);
                    convert::check_requests(&part);
                }
            }
        }
    }
}
