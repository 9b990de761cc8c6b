//! Prefixes and addresses as the tables store them: an address of either family as a u128
//! (IPv4 in the low 32 bits), a masked prefix ([`Key`]) and the masks.
//!
//! The crate's lowest layer: this module uses nothing of the crate but `types`.
//!
//! Invariant: a `Key` made by [`Key::new`] is masked (no host bits beyond `len`); the tables
//! rely on it for equality and order.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::types::Family;

/// A masked prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub addr: u128,
    pub len: u8,
}

/// Map order: address ascending, then the longer prefix first (the LC-trie's dump order).
impl Ord for Key {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.addr.cmp(&o.addr).then(o.len.cmp(&self.len))
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// The network mask of `len` bits in an address of `bits` bits, right-aligned in a u128.
#[inline]
pub(crate) fn mask(len: u8, bits: u8) -> u128 {
    if len == 0 {
        return 0;
    }
    let all: u128 = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    let host = bits - len;
    let hostmask: u128 = if host == 0 { 0 } else { (1u128 << host) - 1 };
    all & !hostmask
}

impl Key {
    #[inline]
    pub fn new(addr: u128, len: u8, bits: u8) -> Key {
        Key {
            addr: addr & mask(len, bits),
            len,
        }
    }
    /// The last address covered by the prefix.
    #[inline]
    pub fn last(&self, bits: u8) -> u128 {
        let all: u128 = if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        self.addr | (all & !mask(self.len, bits))
    }
    #[inline]
    pub fn contains(&self, addr: u128, bits: u8) -> bool {
        addr & mask(self.len, bits) == self.addr
    }
}

/// An address as a u128 (IPv4 in the low 32 bits).
#[inline]
pub(crate) fn ip_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u32::from(v) as u128,
        IpAddr::V6(v) => u128::from(v),
    }
}

#[inline]
pub(crate) fn u128_ip(f: Family, v: u128) -> IpAddr {
    match f {
        Family::Inet => IpAddr::V4(Ipv4Addr::from(v as u32)),
        Family::Inet6 => IpAddr::V6(Ipv6Addr::from(v)),
    }
}
