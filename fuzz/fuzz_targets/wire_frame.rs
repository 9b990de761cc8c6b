//! Any bytes, as whole frames through every layer (`fibre_wire::frame::Frame::parse`): no view
//! panics once `new_checked` succeeded, and every parsed `Repr` re-emits to bytes that parse to the
//! same `Repr`: the assertions of `fibre_wire::check`.
#![no_main]

use fibre_wire::check;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check::frame(data);
});
