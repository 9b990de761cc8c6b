//! LWTUNNEL_ENCAP_IOAM6: IOAM pre-allocated trace insertion (`ip route ... encap ioam6`):
//! the insertion frequency (k packets of every n), the mode (inline, encap, auto), the tunnel
//! destination of the encap and auto modes, and the trace header to insert, `struct
//! ioam6_trace_hdr` (8 bytes: namespace id, node length and flags, remaining length, trace
//! type; network byte order), kept as bytes (fibre-wire's `ioam6` views the option).

use crate::nla::attributes;
use std::net::Ipv6Addr;

/// IOAM6_IPTUNNEL_* attribute numbers.
#[allow(non_snake_case)]
pub mod IOAM6_IPTUNNEL {
    pub const MODE: u16 = 1;
    pub const DST: u16 = 2;
    pub const TRACE: u16 = 3;
    pub const FREQ_K: u16 = 4;
    pub const FREQ_N: u16 = 5;
}

/// IOAM6_IPTUNNEL_MODE_*.
#[allow(non_snake_case)]
pub mod IOAM6_IPTUNNEL_MODE {
    pub const INLINE: u8 = 1;
    pub const ENCAP: u8 = 2;
    pub const AUTO: u8 = 3;
}

/// The size of `struct ioam6_trace_hdr`.
pub const TRACE_HDR_LEN: usize = 8;

attributes! {
    /// An IOAM6_IPTUNNEL_* attribute.
    pub enum Ioam6Attr<'a> {
        Mode(u8) = IOAM6_IPTUNNEL::MODE,
        Dst(Ipv6Addr) = IOAM6_IPTUNNEL::DST,
        /// `struct ioam6_trace_hdr`, as carried.
        Trace(&'a [u8]) = IOAM6_IPTUNNEL::TRACE,
        FreqK(u32) = IOAM6_IPTUNNEL::FREQ_K,
        FreqN(u32) = IOAM6_IPTUNNEL::FREQ_N,
    }
}
