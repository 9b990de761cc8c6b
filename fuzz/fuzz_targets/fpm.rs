//! Any bytes as an FPM stream (`fibre_netlink::fpm`): the decoder never panics, decodes the
//! stream in pieces as it does whole, and the messages of every frame it hands out, framed
//! again, decode the same: the assertions of `fibre_netlink::fpm::check_stream`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fibre_netlink::fpm::check_stream(data);
});
