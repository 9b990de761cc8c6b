//! Any bytes, as an RPL source routing header (RFC 6554): read directly, and as the first
//! routing header of an Ethernet frame carrying IPv6 (so whole frames seed it). No view panics
//! once `new_checked` succeeded, addresses decompress and recompress, and every parsed `Repr`
//! re-emits to bytes that parse to the same `Repr`: the assertions of `fibre_wire::check`.
#![no_main]

use fibre_wire::check;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check::rpl(data);
    check::rpl(check::routing_header(data));
});
