//! Any bytes as fibred's state file, and as the payload of a well-framed one: no panic, and
//! a payload that restores saves to a file that restores the same state
//! (`fibred::state::check_state_file`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fibred::state::check_state_file(data);
});
