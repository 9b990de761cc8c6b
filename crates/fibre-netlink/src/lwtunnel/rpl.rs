//! LWTUNNEL_ENCAP_RPL: RPL source routing header insertion (`ip route ... encap rpl segs
//! ...`), one attribute, RPL_IPTUNNEL_SRH: the RPL source routing header (RFC 6554) as
//! iproute2 builds it, uncompressed, kept as bytes (fibre-wire's `rpl` views it).

use crate::nla::attributes;

/// RPL_IPTUNNEL_* attribute numbers.
#[allow(non_snake_case)]
pub mod RPL_IPTUNNEL {
    pub const SRH: u16 = 1;
}

attributes! {
    /// An RPL_IPTUNNEL_* attribute.
    pub enum RplAttr<'a> {
        Srh(&'a [u8]) = RPL_IPTUNNEL::SRH,
    }
}
