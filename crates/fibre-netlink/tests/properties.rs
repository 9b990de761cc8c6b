//! Property tests: generated well-formed message streams re-emit byte for byte; arbitrary and
//! corrupted bytes never make the parser panic.

#[path = "common/streams.rs"]
mod streams;

use fibre_netlink::{check_round_trip, parse_stream};
use proptest::prelude::*;
use streams::{corrupted_stream, stream};

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn generated_streams_round_trip(bytes in stream()) {
        let messages = parse_stream(&bytes).expect("generated stream parses");
        let mut out = Vec::new();
        fibre_netlink::emit_stream(&messages, &mut out);
        prop_assert_eq!(out, bytes.clone());
        prop_assert_eq!(check_round_trip(&bytes), messages.len());
    }

    #[test]
    fn corrupted_streams_never_panic(bytes in corrupted_stream()) {
        check_round_trip(&bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_round_trip(&bytes);
    }
}
