//! Any bytes, as an IOAM pre-allocated trace option (RFC 9197, RFC 9486): read directly, and as
//! the IOAM option of an Ethernet frame's IPv6 hop-by-hop header (so whole frames seed it). No
//! view panics once `new_checked` succeeded, the next node's slot lies inside the data, and
//! every parsed `Repr` re-emits the option: the assertions of `fibre_wire::check`.
#![no_main]

use fibre_wire::check;
use fibre_wire::ioam6::OPTION_TYPE;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check::ioam6(data);
    check::ioam6(check::hop_by_hop_option(data, OPTION_TYPE));
});
