//! Replays the fuzzers' seed corpus, the inputs with which fuzzing found bugs and every
//! truncation of every captured message through the check the `codec` cargo-fuzz target runs
//! (fuzz/fuzz_targets/codec.rs), so CI exercises it without a nightly compiler.

#[path = "common/corpus.rs"]
mod corpus;

use fibre_netlink::check_round_trip;

#[test]
fn seed_corpus_passes_the_fuzz_checks() {
    let messages: usize = corpus::seeds().iter().map(|s| check_round_trip(s)).sum();
    assert!(messages > 150, "{messages}");
}

#[test]
fn fuzz_regressions_pass_the_fuzz_checks() {
    let regressions = corpus::regressions();
    assert!(!regressions.is_empty());
    for bytes in regressions {
        check_round_trip(&bytes);
    }
}

#[test]
fn truncated_messages_pass_the_fuzz_checks() {
    corpus::each_truncation(|part| {
        check_round_trip(part);
    });
}
