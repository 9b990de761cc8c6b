//! Replays the codec's fuzz corpus (crates/fibre-netlink/tests: the kernel captures, the
//! fuzz regressions and every truncation of every captured message) through the check the
//! `convert` cargo-fuzz target runs (fuzz/fuzz_targets/convert.rs), so CI exercises it
//! without a nightly compiler.

#[path = "../../fibre-netlink/tests/common/corpus.rs"]
mod corpus;

use fibre_proto::convert::check_requests;

#[test]
fn seed_corpus_passes_the_fuzz_checks() {
    let seeds = corpus::seeds();
    assert!(!seeds.is_empty());
    for seed in seeds {
        check_requests(&seed);
    }
}

#[test]
fn fuzz_regressions_pass_the_fuzz_checks() {
    let regressions = corpus::regressions();
    assert!(!regressions.is_empty());
    for bytes in regressions {
        check_requests(&bytes);
    }
}

#[test]
fn truncated_messages_pass_the_fuzz_checks() {
    corpus::each_truncation(|part| {
        check_requests(part);
    });
}
