//! Any datagram handed to fibred's request engine: no panic, every dump encodes to its end,
//! and a datagram in which nothing succeeded leaves the state exactly as it was (compared
//! by dumping every object before and after).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fibred::engine::check_datagram(data);
});
