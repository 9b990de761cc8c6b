//! Building FIBs for the tests: fibre-fib's request builders, and packets.

#![allow(dead_code)]

pub use fibre_fib::build::*;
use fibre_fib::*;

/// A UDP packet from `src` to `dst` in on `iif`.
pub fn packet(dst: &str, src: &str, iif: u32) -> InputKey {
    InputKey {
        dst: ip(dst),
        src: ip(src),
        iif,
        tos: 0,
        mark: 0,
        proto: 17,
        sport: 1000,
        dport: 53,
        flowlabel: 0,
    }
}

pub fn forward(f: &Fib, k: &InputKey) -> ForwardRoute {
    match f.route_input(k) {
        Ok(InputRoute::Forward(r)) => r,
        other => panic!("{k:?}: {other:?}, not forwarded"),
    }
}
