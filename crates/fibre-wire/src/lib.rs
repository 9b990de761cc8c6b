//! Packet header views for fibre's forwarding plane: Ethernet II and 802.1Q/802.1ad tags,
//! ARP, IPv4 with its options, IPv6 with its extension-header chain, ICMP, ICMPv6 with
//! Neighbor Discovery, UDP and TCP, and the Internet checksum with RFC 1624's incremental
//! update.
//!
//! Every header has one module and the same two faces, in the style of smoltcp's `wire`:
//! - `Packet<T: AsRef<[u8]>>` (`Frame`, `Tag` for the link layer) is a zero-copy view over a
//!   buffer: field getters, and setters when `T: AsMut<[u8]>`. `new_unchecked` wraps any
//!   buffer; `new_checked` validates the lengths the header announces, after which no
//!   accessor or setter can panic. Each module's comment states its panic contract.
//! - `Repr` holds the fields by value: `Repr::parse(&packet)` reads a validated header into
//!   it, `repr.buffer_len()` says how many bytes `repr.emit(&mut packet)` writes.
//!   `parse(emit(repr)) == repr` for every `Repr` (the tests and fuzz targets check it).
//!
//! Fields whose value the crate does not know are kept, never refused or dropped: EtherTypes,
//! protocol numbers and message types are plain integers (their names are in [`consts`]),
//! unknown IPv4 options, IPv6 options, NDP options and ICMP types come out as `Unknown`/`Other`
//! with their bytes, and option areas stay as bytes in the `Repr`s so they re-emit exactly.
//! Checksums are never checked by parsing: `verify_checksum` does it, so a receive stage can
//! count a bad checksum as a drop reason of its own; the `emit`s write them (UDP and TCP leave
//! them to `fill_checksum`, as their payload is written after the header).
//!
//! Nothing here allocates, and the crate is `no_std`. [`frame`] walks a whole Ethernet frame
//! through the layers. The module `check` (tests, and the `check` feature, which brings in std)
//! holds the round-trip assertions the fuzz targets and property tests share.

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod checksum;
pub mod consts;
mod error;
mod field;

pub mod arp;
pub mod ethernet;
pub mod vlan;

pub mod ioam6;
pub mod ipv4;
pub mod ipv4_option;
pub mod ipv6;
pub mod ipv6_ext;
pub mod rpl;
pub mod srh;

pub mod icmp;
pub mod icmpv6;
pub mod ndp;
pub mod ndp_option;

pub mod tcp;
pub mod udp;

pub mod frame;

#[cfg(any(test, feature = "check"))]
#[doc(hidden)]
pub mod check;

pub use error::{Error, Result};
pub use field::{OptionBytes, OptionWalk, MAX_OPTION_LEN};
