//! A whole Ethernet frame read through every layer at once: link header, VLAN tags, the
//! network header (ARP, IPv4, IPv6 with its extension chain walked), and where the upper
//! layer starts, with its ports when it has them. What the receive stage of the pipeline needs
//! to classify a frame and hash its flow, in one call.
//!
//! Panic contract: [`Frame::parse`] and every method of [`Frame`] never panic; errors are the
//! first layer's that failed. Frames whose EtherType is none of ARP, IPv4, IPv6 (after the
//! tags) come back as [`Network::Other`] with their bytes, as do ARP packets of other
//! hardware or protocol types.

use crate::consts::{ethertype, ip_proto};
use crate::error::{Error, Result};
use crate::ipv6_ext::{self, ChainEnd};
use crate::{arp, ethernet, ipv4, ipv6, vlan};

/// The network layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network<'a> {
    Arp(arp::Repr),
    /// `payload` ends at the total length.
    Ipv4 {
        repr: ipv4::Repr,
        payload: &'a [u8],
    },
    /// `payload` is the whole IPv6 payload; `chain` where its upper layer starts.
    Ipv6 {
        repr: ipv6::Repr,
        chain: ChainEnd,
        payload: &'a [u8],
    },
    Other {
        ethertype: u16,
        payload: &'a [u8],
    },
}

/// A frame read through its layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub ethernet: ethernet::Repr,
    pub tags: vlan::Tags,
    /// Where the network header starts in the frame.
    pub network_offset: usize,
    pub network: Network<'a>,
}

/// The upper layer of an IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upper<'a> {
    /// IPv4's protocol, or the protocol at the end of IPv6's extension chain.
    pub protocol: u8,
    /// From the upper-layer header to the end of the IP packet.
    pub bytes: &'a [u8],
}

impl<'a> Frame<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Frame<'a>> {
        let eth = ethernet::Frame::new_checked(bytes)?;
        let ethernet = ethernet::Repr::parse(&eth)?;
        let (tags, ty, tag_len) = vlan::Tags::parse(ethernet.ethertype, eth.payload())?;
        let network_offset = ethernet::HEADER_LEN + tag_len;
        let payload = bytes.get(network_offset..).ok_or(Error::Truncated)?;
        let network = match ty {
            ethertype::ARP => {
                match arp::Packet::new_checked(payload).and_then(|p| arp::Repr::parse(&p)) {
                    Ok(repr) => Network::Arp(repr),
                    Err(Error::Unsupported) => Network::Other {
                        ethertype: ty,
                        payload,
                    },
                    Err(e) => return Err(e),
                }
            }
            ethertype::IPV4 => {
                let p = ipv4::Packet::new_checked(payload)?;
                let repr = ipv4::Repr::parse(&p)?;
                let start = p.header_len();
                Network::Ipv4 {
                    repr,
                    payload: &payload[start..start + repr.payload_len],
                }
            }
            ethertype::IPV6 => {
                let p = ipv6::Packet::new_checked(payload)?;
                let repr = ipv6::Repr::parse(&p)?;
                let payload = &payload[ipv6::HEADER_LEN..ipv6::HEADER_LEN + repr.payload_len];
                let chain = ipv6_ext::walk(repr.next_header, payload)?;
                Network::Ipv6 {
                    repr,
                    chain,
                    payload,
                }
            }
            ethertype => Network::Other { ethertype, payload },
        };
        Ok(Frame {
            ethernet,
            tags,
            network_offset,
            network,
        })
    }

    /// The upper-layer protocol and bytes, for an unfragmented IP packet or a first fragment
    /// (later fragments carry no upper-layer header: `None`).
    pub fn upper(&self) -> Option<Upper<'a>> {
        match self.network {
            Network::Ipv4 { repr, payload } if repr.frag_offset == 0 => Some(Upper {
                protocol: repr.protocol,
                bytes: payload,
            }),
            Network::Ipv6 { chain, payload, .. } if !chain.later_fragment => Some(Upper {
                protocol: chain.protocol,
                bytes: payload.get(chain.offset..)?,
            }),
            _ => None,
        }
    }

    /// The source and destination ports of a TCP, UDP or SCTP packet's first 4 bytes, when
    /// the upper layer has them.
    pub fn ports(&self) -> Option<(u16, u16)> {
        self.upper().and_then(|u| ports(u.protocol, u.bytes))
    }
}

/// TCP, UDP and SCTP all start with the source and destination ports: what flow hashing reads,
/// even from a truncated header (an ICMP error's quote carries only 8 bytes).
pub fn ports(protocol: u8, bytes: &[u8]) -> Option<(u16, u16)> {
    match (protocol, bytes) {
        (ip_proto::TCP | ip_proto::UDP | ip_proto::SCTP, [a, b, c, d, ..]) => {
            Some((u16::from_be_bytes([*a, *b]), u16::from_be_bytes([*c, *d])))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_ipv6_udp() {
        let mut f = vec![
            0x33, 0x33, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x00, 0x0a, 0x86, 0xdd,
        ];
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 16, 0, 64]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0, 0x04, 0xd2, 0x00, 0x35, 0, 8, 0, 0]);
        let frame = Frame::parse(&f).unwrap();
        assert_eq!(frame.tags.inner_vid(), Some(10));
        assert_eq!(frame.network_offset, 18);
        assert_eq!(frame.upper().map(|u| u.protocol), Some(ip_proto::UDP));
        assert_eq!(frame.ports(), Some((1234, 53)));
    }
}
