//! Any bytes, as a segment routing header (RFC 8754): read directly, and as the first routing
//! header of an Ethernet frame carrying IPv6 (so whole frames seed it). No view panics once
//! `new_checked` succeeded, Linux's validation and the TLV walk never panic, and every parsed
//! `Repr` re-emits the header byte for byte: the assertions of `fibre_wire::check`.
#![no_main]

use fibre_wire::check;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check::srh(data);
    check::srh(check::routing_header(data));
});
