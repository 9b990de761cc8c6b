//! Any bytes: parsing a message stream never panics, and every message parsed re-emits
//! exactly as it came and re-parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fibre_netlink::check_round_trip(data);
});
