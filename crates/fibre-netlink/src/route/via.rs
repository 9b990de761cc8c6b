//! RTA_VIA: `struct rtvia`, a gateway address with its own family.

use crate::nla::{RawNla, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// `struct rtvia`: `rtvia_family` (u16) then the address bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via<'a> {
    /// An IPv4 or IPv6 address of the size its family requires.
    Ip(IpAddr),
    /// Any other family (AF_PACKET for MPLS, ...) or size, undecoded.
    Other { family: u16, addr: &'a [u8] },
}

impl<'a> Value<'a> for Via<'a> {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        if nla.kind != nla.number() || nla.value.len() < 2 {
            return None;
        }
        let family = u16::from_ne_bytes([nla.value[0], nla.value[1]]);
        let addr = &nla.value[2..];
        Some(match (family, addr.len()) {
            (AF_INET, 4) => Via::Ip(IpAddr::V4(Ipv4Addr::from([
                addr[0], addr[1], addr[2], addr[3],
            ]))),
            (AF_INET6, 16) => {
                let mut a = [0u8; 16];
                a.copy_from_slice(addr);
                Via::Ip(IpAddr::V6(Ipv6Addr::from(a)))
            }
            _ => Via::Other { family, addr },
        })
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        match self {
            Via::Ip(IpAddr::V4(a)) => {
                out.extend_from_slice(&AF_INET.to_ne_bytes());
                out.extend_from_slice(&a.octets());
            }
            Via::Ip(IpAddr::V6(a)) => {
                out.extend_from_slice(&AF_INET6.to_ne_bytes());
                out.extend_from_slice(&a.octets());
            }
            Via::Other { family, addr } => {
                out.extend_from_slice(&family.to_ne_bytes());
                out.extend_from_slice(addr);
            }
        }
    }
}
