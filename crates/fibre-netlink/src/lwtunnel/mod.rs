//! Lightweight tunnel encapsulations: the attribute spaces RTA_ENCAP (and a multipath next
//! hop's RTA_ENCAP) holds, one module per LWTUNNEL_ENCAP_* type fibre models -- [`seg6`]
//! (SRv6 encapsulation and insertion), [`seg6local`] (SRv6 endpoint behaviours), [`ioam6`]
//! (IOAM pre-allocated trace insertion), [`rpl`] (RPL source routing insertion).
//!
//! RTA_ENCAP's space is named by its sibling RTA_ENCAP_TYPE, which the kernel and iproute2
//! put after it, so a route message decodes RTA_ENCAP as bytes ([`NestedBytes`]); [`Encap::decode`]
//! reads them once the type is known. Decoding keeps the codec's rule: framing that does not
//! parse leaves the whole encapsulation raw ([`Encap::Other`]), attributes of a known space
//! that are unknown or of the wrong form are kept raw inside it, so [`Encap::emit_value`]
//! reproduces the bytes it was decoded from.

pub mod ioam6;
pub mod rpl;
pub mod seg6;
pub mod seg6local;

use crate::nla::{emit_attrs, parse_attrs, NestedBytes, RawNla, Value};

/// LWTUNNEL_ENCAP_* (the value of RTA_ENCAP_TYPE and NHA_ENCAP_TYPE).
#[allow(non_snake_case)]
pub mod LWTUNNEL_ENCAP {
    pub const NONE: u16 = 0;
    pub const MPLS: u16 = 1;
    pub const IP: u16 = 2;
    pub const ILA: u16 = 3;
    pub const IP6: u16 = 4;
    pub const SEG6: u16 = 5;
    pub const BPF: u16 = 6;
    pub const SEG6_LOCAL: u16 = 7;
    pub const RPL: u16 = 8;
    pub const IOAM6: u16 = 9;
    pub const XFRM: u16 = 10;
}

/// The inside of RTA_ENCAP, decoded by its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encap<'a> {
    Seg6(Vec<seg6::Seg6Attr<'a>>),
    Seg6Local(Vec<seg6local::Seg6LocalAttr<'a>>),
    Ioam6(Vec<ioam6::Ioam6Attr<'a>>),
    Rpl(Vec<rpl::RplAttr<'a>>),
    /// A type this crate does not decode, or attributes whose framing does not parse.
    Other(&'a [u8]),
}

impl<'a> Encap<'a> {
    /// Decodes RTA_ENCAP's value for RTA_ENCAP_TYPE `kind`.
    pub fn decode(kind: u16, nest: &NestedBytes<'a>) -> Encap<'a> {
        let b = nest.bytes;
        let typed = match kind {
            LWTUNNEL_ENCAP::SEG6 => parse_attrs(b, 0).ok().map(Encap::Seg6),
            LWTUNNEL_ENCAP::SEG6_LOCAL => parse_attrs(b, 0).ok().map(Encap::Seg6Local),
            LWTUNNEL_ENCAP::IOAM6 => parse_attrs(b, 0).ok().map(Encap::Ioam6),
            LWTUNNEL_ENCAP::RPL => parse_attrs(b, 0).ok().map(Encap::Rpl),
            _ => None,
        };
        typed.unwrap_or(Encap::Other(b))
    }

    /// The LWTUNNEL_ENCAP_* type of a decoded encapsulation (`None` for [`Encap::Other`]).
    pub fn kind(&self) -> Option<u16> {
        match self {
            Encap::Seg6(_) => Some(LWTUNNEL_ENCAP::SEG6),
            Encap::Seg6Local(_) => Some(LWTUNNEL_ENCAP::SEG6_LOCAL),
            Encap::Ioam6(_) => Some(LWTUNNEL_ENCAP::IOAM6),
            Encap::Rpl(_) => Some(LWTUNNEL_ENCAP::RPL),
            Encap::Other(_) => None,
        }
    }

    /// Appends the attributes (RTA_ENCAP's value, without its header).
    pub fn emit_value(&self, out: &mut Vec<u8>) {
        match self {
            Encap::Seg6(a) => emit_attrs(a, out),
            Encap::Seg6Local(a) => emit_attrs(a, out),
            Encap::Ioam6(a) => emit_attrs(a, out),
            Encap::Rpl(a) => emit_attrs(a, out),
            Encap::Other(b) => out.extend_from_slice(b),
        }
    }
}

/// Emission only: a route attribute holding an [`Encap`] is one being built, and RTA_ENCAP is
/// read as [`NestedBytes`] (its space comes from a later sibling), so decoding gives nothing.
impl<'a> Value<'a> for Encap<'a> {
    fn decode(_: RawNla<'a>) -> Option<Self> {
        None
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        Encap::emit_value(self, out)
    }
}
