//! Any bytes as what fibred follows besides its clients: as zebra's FPM stream
//! (`fibred::fpm::session::check_stream`: no panic, the held routes and groups accounted) and
//! as a kernel namespace's dumps and notifications in mirror mode
//! (`fibred::mirror::session::check_messages`: no panic, a resync leaves no route the kernel
//! lacks). The first byte picks which.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which & 1 == 0 {
        fibred::fpm::session::check_stream(rest);
    } else {
        fibred::mirror::session::check_messages(rest);
    }
});
