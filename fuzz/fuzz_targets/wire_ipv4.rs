//! Any bytes, as IPv4 headers and their options: read directly, and where the target's layer is
//! reached, as that layer of an Ethernet frame (so whole frames seed it). No view panics once
//! `new_checked` succeeded, and every parsed `Repr` re-emits to bytes that parse to the same
//! `Repr`: the assertions of `fibre_wire::check`.
#![no_main]

use fibre_wire::check;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check::ipv4(data);
    check::ipv4(check::network_layer(data));
});
