//! rtnetlink codec for fibre.
//!
//! Parses and emits the rtnetlink messages fibre's daemon serves: the netlink header and its
//! control messages ([`message`]), and one module per rtnetlink object -- [`link`],
//! [`address`], [`route`], [`rule`], [`neighbour`], [`nexthop`] -- each with a fixed header and
//! one file per attribute group; [`lwtunnel`] the encapsulations a route carries (SRv6, IOAM6,
//! RPL); [`policy`] holds the kernel's attribute policies, which
//! requests are checked against before anything reads them; [`fpm`] frames netlink messages in
//! FRR's FPM stream. The codec knows the wire only: turning messages into routing requests and
//! objects is fibre-proto's job, above it.
//!
//! Invariants, relied on by the server and checked by the tests and the fuzzer:
//! - Parsing never panics, whatever the input; malformed framing is a [`DecodeError`] that says
//!   what was wrong and at which byte offset.
//! - Parsing is zero-copy: attribute payloads, strings and unknown attributes borrow the input.
//! - Nothing is dropped: unknown attributes (and known ones whose value is malformed) are kept
//!   raw, so emitting a parsed message reproduces its bytes exactly.
//! - Fixed headers are read through smoltcp-style views (`XxxPacket<T: AsRef<[u8]>>`) whose
//!   `new_checked` constructor guarantees the accessors cannot panic; see [`wire`].
//!
//! The crate has no dependencies beyond std.

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod wire;

pub mod address;
mod error;
pub mod fpm;
pub mod link;
pub mod lwtunnel;
pub mod message;
pub mod neighbour;
pub mod nexthop;
pub mod nla;
pub mod policy;
pub mod route;
pub mod rule;

pub use error::DecodeError;
pub use message::{
    check_round_trip, emit_stream, parse_stream, DoneMessage, ErrorMessage, ExtAckAttr, Messages,
    NetlinkHeader, NetlinkMessage, Payload,
};

/// Reads the native-endian i32 at the start of `buf` (`what` names it in the error).
pub(crate) fn nla_i32(buf: &[u8], offset: usize, what: &'static str) -> Result<i32, DecodeError> {
    match buf.get(..4) {
        Some(b) => Ok(i32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        None => Err(DecodeError::Truncated {
            what,
            offset,
            need: 4,
            have: buf.len(),
        }),
    }
}
