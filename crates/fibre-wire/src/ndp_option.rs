//! Neighbor Discovery options (RFC 4861 section 4.6): link-layer addresses, prefix
//! information, MTU, redirected header; any other type is kept as [`NdpOption::Unknown`] with
//! its bytes (RFC 4861 asks receivers to skip unknown options, never to drop the message).
//!
//! Panic contract: nothing here panics except [`NdpOption::emit`] on a buffer shorter than
//! [`NdpOption::buffer_len`] or an option longer than 2040 bytes (the 8-bit length in 8-octet
//! units).

use core::net::Ipv6Addr;

use crate::consts::icmpv6::ndp_option as kind;
use crate::error::{Error, Result};
use crate::ethernet::Address as EthernetAddress;
use crate::field::{array, be32, OptionWalk};

/// Options count their length in 8-octet units, type and length bytes included.
const UNIT: usize = 8;

/// One option; link-layer addresses and unknown options borrow the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdpOption<'a> {
    /// The link-layer address with the option's padding (6 bytes on Ethernet, no padding).
    SourceLinkLayerAddr(&'a [u8]),
    TargetLinkLayerAddr(&'a [u8]),
    PrefixInfo {
        prefix_len: u8,
        /// L (on-link) 0x80, A (autonomous) 0x40, and the rest as read.
        flags: u8,
        valid_lifetime: u32,
        preferred_lifetime: u32,
        prefix: Ipv6Addr,
    },
    /// The quoted packet, after the option's 6 reserved bytes.
    RedirectedHeader(&'a [u8]),
    Mtu(u32),
    /// Any other type, with the bytes after its length byte.
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

impl<'a> NdpOption<'a> {
    pub fn kind(&self) -> u8 {
        match self {
            NdpOption::SourceLinkLayerAddr(_) => kind::SOURCE_LL_ADDR,
            NdpOption::TargetLinkLayerAddr(_) => kind::TARGET_LL_ADDR,
            NdpOption::PrefixInfo { .. } => kind::PREFIX_INFO,
            NdpOption::RedirectedHeader(_) => kind::REDIRECTED_HEADER,
            NdpOption::Mtu(_) => kind::MTU,
            NdpOption::Unknown { kind, .. } => *kind,
        }
    }

    /// The Ethernet address of a link-layer address option, when it has exactly 6 bytes.
    pub fn ethernet_addr(&self) -> Option<EthernetAddress> {
        match self {
            NdpOption::SourceLinkLayerAddr(a) | NdpOption::TargetLinkLayerAddr(a) => {
                EthernetAddress::from_bytes(a).ok()
            }
            _ => None,
        }
    }

    /// Reads the option at the start of `b`, and its length. A zero length is
    /// [`Error::Malformed`], as RFC 4861 requires; so are prefix-information and MTU options
    /// of the wrong length.
    pub fn parse(b: &'a [u8]) -> Result<(NdpOption<'a>, usize)> {
        if b.len() < 2 {
            return Err(Error::Truncated);
        }
        let len = usize::from(b[1]) * UNIT;
        if len == 0 {
            return Err(Error::Malformed);
        }
        let body = b.get(2..len).ok_or(Error::Truncated)?;
        let opt = match b[0] {
            kind::SOURCE_LL_ADDR => NdpOption::SourceLinkLayerAddr(body),
            kind::TARGET_LL_ADDR => NdpOption::TargetLinkLayerAddr(body),
            kind::PREFIX_INFO if len == 4 * UNIT => NdpOption::PrefixInfo {
                prefix_len: body[0],
                flags: body[1],
                valid_lifetime: be32(body, 2),
                preferred_lifetime: be32(body, 6),
                prefix: Ipv6Addr::from(array::<16>(body, 14)),
            },
            kind::MTU if len == UNIT => NdpOption::Mtu(be32(body, 2)),
            kind::REDIRECTED_HEADER => NdpOption::RedirectedHeader(&body[6..]),
            kind::PREFIX_INFO | kind::MTU => return Err(Error::Malformed),
            k => NdpOption::Unknown {
                kind: k,
                data: body,
            },
        };
        Ok((opt, len))
    }

    /// The option's length, padded to 8 bytes.
    pub fn buffer_len(&self) -> usize {
        let unpadded = match self {
            NdpOption::SourceLinkLayerAddr(d)
            | NdpOption::TargetLinkLayerAddr(d)
            | NdpOption::Unknown { data: d, .. } => 2 + d.len(),
            NdpOption::RedirectedHeader(d) => 8 + d.len(),
            NdpOption::PrefixInfo { .. } => 4 * UNIT,
            NdpOption::Mtu(_) => UNIT,
        };
        unpadded.div_ceil(UNIT) * UNIT
    }

    /// Writes the option and its zero padding at the start of `b`; reserved fields are zero.
    pub fn emit(&self, b: &mut [u8]) {
        let len = self.buffer_len();
        let b = &mut b[..len];
        b.fill(0);
        b[0] = self.kind();
        b[1] = u8::try_from(len / UNIT).unwrap_or_else(|_| panic!("NDP option of {len} bytes"));
        match *self {
            NdpOption::SourceLinkLayerAddr(d)
            | NdpOption::TargetLinkLayerAddr(d)
            | NdpOption::Unknown { data: d, .. } => b[2..2 + d.len()].copy_from_slice(d),
            NdpOption::RedirectedHeader(d) => b[8..8 + d.len()].copy_from_slice(d),
            NdpOption::PrefixInfo {
                prefix_len,
                flags,
                valid_lifetime,
                preferred_lifetime,
                prefix,
            } => {
                b[2] = prefix_len;
                b[3] = flags;
                b[4..8].copy_from_slice(&valid_lifetime.to_be_bytes());
                b[8..12].copy_from_slice(&preferred_lifetime.to_be_bytes());
                b[16..32].copy_from_slice(&prefix.octets());
            }
            NdpOption::Mtu(mtu) => b[4..8].copy_from_slice(&mtu.to_be_bytes()),
        }
    }
}

/// The options of one message, in order; stops after the first malformed one.
pub type NdpOptions<'a> = OptionWalk<'a, NdpOption<'a>>;

impl<'a> NdpOptions<'a> {
    pub fn new(bytes: &'a [u8]) -> NdpOptions<'a> {
        OptionWalk::walk(bytes, NdpOption::parse, |_| false)
    }

    /// Every option well-formed, the last one ending with the message.
    pub fn validate(bytes: &[u8]) -> Result<()> {
        NdpOptions::new(bytes).try_for_each(|o| o.map(|_| ()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_round_trips() {
        let mac = [2, 0, 0, 0, 0, 1];
        let quoted = [0x60u8, 0, 0, 0, 0, 8, 17, 64];
        let opts = [
            NdpOption::SourceLinkLayerAddr(&mac),
            NdpOption::TargetLinkLayerAddr(&mac),
            NdpOption::PrefixInfo {
                prefix_len: 64,
                flags: 0xc0,
                valid_lifetime: 2_592_000,
                preferred_lifetime: 604_800,
                prefix: "2001:db8:1::".parse().unwrap(),
            },
            NdpOption::Mtu(1500),
            NdpOption::RedirectedHeader(&quoted),
            NdpOption::Unknown {
                kind: 25,
                data: &[0, 0, 0, 0, 0, 60],
            },
        ];
        let mut buf = vec![0u8; opts.iter().map(|o| o.buffer_len()).sum()];
        let mut at = 0;
        for o in &opts {
            o.emit(&mut buf[at..]);
            at += o.buffer_len();
        }
        NdpOptions::validate(&buf).unwrap();
        let back: Vec<_> = NdpOptions::new(&buf).map(|o| o.unwrap()).collect();
        assert_eq!(back, opts);
        assert_eq!(back[0].ethernet_addr(), Some(EthernetAddress(mac)));
        // The MTU option as RFC 4861 section 4.6.4 lays it out.
        assert_eq!(&buf[48..56], &[5, 1, 0, 0, 0, 0, 0x05, 0xdc]);
    }

    #[test]
    fn zero_length_and_overruns_are_malformed() {
        assert_eq!(
            NdpOptions::validate(&[1, 0, 0, 0, 0, 0, 0, 0]),
            Err(Error::Malformed)
        );
        assert_eq!(
            NdpOptions::validate(&[1, 2, 0, 0, 0, 0, 0, 0]),
            Err(Error::Truncated)
        );
        assert_eq!(
            NdpOptions::validate(&[5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(Error::Malformed)
        );
        assert_eq!(NdpOptions::validate(&[1]), Err(Error::Truncated));
    }
}
