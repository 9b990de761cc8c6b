//! LWTUNNEL_ENCAP_SEG6: SRv6 encapsulation or insertion (`ip route ... encap seg6`), one
//! attribute, SEG6_IPTUNNEL_SRH: `struct seg6_iptunnel_encap`, a native-endian `int` mode
//! followed by the segment routing header the route pushes, kept as bytes (fibre-wire's
//! `srh` views them).

use crate::nla::{attributes, RawNla, Value};

/// SEG6_IPTUNNEL_* attribute numbers.
#[allow(non_snake_case)]
pub mod SEG6_IPTUNNEL {
    pub const SRH: u16 = 1;
}

/// SEG6_IPTUN_MODE_*.
#[allow(non_snake_case)]
pub mod SEG6_IPTUN_MODE {
    pub const INLINE: i32 = 0;
    pub const ENCAP: i32 = 1;
    pub const L2ENCAP: i32 = 2;
    pub const ENCAP_RED: i32 = 3;
    pub const L2ENCAP_RED: i32 = 4;
}

/// `struct seg6_iptunnel_encap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Seg6Tunnel<'a> {
    /// SEG6_IPTUN_MODE_*.
    pub mode: i32,
    /// The segment routing header, as carried.
    pub srh: &'a [u8],
}

impl<'a> Value<'a> for Seg6Tunnel<'a> {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        if nla.kind != nla.number() || nla.value.len() < 4 {
            return None;
        }
        let (mode, srh) = nla.value.split_at(4);
        let mode = i32::from_ne_bytes([mode[0], mode[1], mode[2], mode[3]]);
        Some(Seg6Tunnel { mode, srh })
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.mode.to_ne_bytes());
        out.extend_from_slice(self.srh);
    }
}

attributes! {
    /// A SEG6_IPTUNNEL_* attribute.
    pub enum Seg6Attr<'a> {
        Srh(Seg6Tunnel<'a>) = SEG6_IPTUNNEL::SRH,
    }
}
