//! Any bytes: turning parsed messages into fibre requests never panics, and every request
//! accepted converts back into a message that parses.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fibre_proto::convert::check_requests(data);
});
