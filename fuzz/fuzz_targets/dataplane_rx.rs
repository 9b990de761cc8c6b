//! Any bytes as a received frame (the first byte picks the link's MAC and MTU): through the
//! receive checks and, when they pass, every later stage of fibre-dataplane (options,
//! forwarding, fragmentation, ICMP errors and echo replies) without a panic, with the
//! invariants of `fibre_dataplane::check`.
#![no_main]

use fibre_dataplane::check;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check::stages(data);
});
