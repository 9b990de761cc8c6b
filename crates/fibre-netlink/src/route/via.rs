//! RTA_VIA: `struct rtvia`, a gateway address with its own family.

use crate::nla::{ip_from_bytes, RawNla, Value};
use std::net::IpAddr;

/// `struct rtvia`: `rtvia_family` (u16) then the address bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Via<'a> {
    pub family: u16,
    pub addr: &'a [u8],
}

impl<'a> Via<'a> {
    /// The address, when it is 4 or 16 bytes long.
    pub fn ip(&self) -> Option<IpAddr> {
        ip_from_bytes(self.addr)
    }
}

impl<'a> Value<'a> for Via<'a> {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        if nla.kind != nla.number() || nla.value.len() < 2 {
            return None;
        }
        let family = u16::from_ne_bytes([nla.value[0], nla.value[1]]);
        Some(Via {
            family,
            addr: &nla.value[2..],
        })
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.family.to_ne_bytes());
        out.extend_from_slice(self.addr);
    }
}
