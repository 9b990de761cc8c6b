//! Interface addresses and the kernel's list order for them.
//!
//! Invariants (as the kernel keeps them):
//! - IPv4 (`in_device->ifa_list`): primaries come before secondaries. An address is secondary
//!   when a primary with the same mask covers it. A new primary goes right after the last
//!   primary whose scope is >= its own; secondaries are appended. One (local, mask) pair at
//!   most per link.
//! - IPv6 (`inet6_dev->addr_list`): ordered by source scope, widest first (global, then
//!   link-local, then host); a new address goes before the first one of equal or narrower
//!   scope, so among equals the newest comes first. One address value at most per link.
//!
//! The routes an address implies are computed by `sync`; this module only holds the lists.

use std::net::Ipv6Addr;

use crate::types::{ifa_flags, scope};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Addr4 {
    pub local: u32,
    /// IFA_ADDRESS: the peer on point-to-point configurations, else `local`.
    pub address: u32,
    pub prefixlen: u8,
    /// 0 = no broadcast address.
    pub broadcast: u32,
    pub scope: u8,
    pub flags: u32,
    pub label: String,
    pub metric: u32,
    pub valid_lft: Option<u32>,
    pub preferred_lft: Option<u32>,
}

/// The IPv4 network mask of `len` bits.
#[inline]
pub(crate) fn mask4(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len as u32)
    }
}

impl Addr4 {
    pub fn mask(&self) -> u32 {
        mask4(self.prefixlen)
    }
    pub fn is_secondary(&self) -> bool {
        self.flags & ifa_flags::SECONDARY != 0
    }
    /// inet_ifa_match: `addr` is in this address's subnet.
    pub fn covers(&self, addr: u32) -> bool {
        (addr ^ self.address) & self.mask() == 0
    }
    pub fn prefix(&self) -> u32 {
        self.address & self.mask()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Addr6 {
    pub addr: Ipv6Addr,
    pub peer: Option<Ipv6Addr>,
    pub prefixlen: u8,
    /// rtnetlink scope: universe, link or host.
    pub scope: u8,
    pub flags: u32,
    pub metric: u32,
    pub valid_lft: Option<u32>,
    pub preferred_lft: Option<u32>,
}

/// ipv6_addr_src_scope's ranking: a larger value is a wider scope.
pub(crate) fn v6_src_scope(a: &Ipv6Addr) -> u8 {
    let s = a.segments();
    if a.is_unspecified() {
        0x0
    } else if a.is_loopback() {
        0x1
    } else if a.is_multicast() {
        a.octets()[1] & 0x0f
    } else if s[0] & 0xffc0 == 0xfe80 {
        0x2
    } else if s[0] & 0xffc0 == 0xfec0 {
        0x5
    } else {
        0xe
    }
}

/// The rtnetlink scope the kernel reports for an IPv6 address.
pub(crate) fn v6_rt_scope(a: &Ipv6Addr) -> u8 {
    match v6_src_scope(a) {
        0x1 => scope::HOST,
        0x2 => scope::LINK,
        0x5 => scope::SITE,
        _ => scope::UNIVERSE,
    }
}

/// Why an address could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddrInsertError {
    Exists,
    /// Same subnet as an existing address but another scope.
    ScopeMismatch,
}

/// Inserts `a` into an IPv4 list; returns its position. Sets or clears IFA_F_SECONDARY.
pub(crate) fn insert4(list: &mut Vec<Addr4>, mut a: Addr4) -> Result<usize, AddrInsertError> {
    a.flags &= !ifa_flags::SECONDARY;
    let mut last_primary = 0usize;
    let mut secondary = false;
    for (i, b) in list.iter().enumerate() {
        if !b.is_secondary() && a.scope <= b.scope {
            last_primary = i + 1;
        }
        if b.prefixlen == a.prefixlen && a.covers(b.address) {
            if b.local == a.local {
                return Err(AddrInsertError::Exists);
            }
            if b.scope != a.scope {
                return Err(AddrInsertError::ScopeMismatch);
            }
            secondary = true;
        }
    }
    if secondary {
        a.flags |= ifa_flags::SECONDARY;
        list.push(a);
        Ok(list.len() - 1)
    } else {
        list.insert(last_primary, a);
        Ok(last_primary)
    }
}

/// Inserts `a` into an IPv6 list; returns its position.
pub(crate) fn insert6(list: &mut Vec<Addr6>, a: Addr6) -> Result<usize, AddrInsertError> {
    if list.iter().any(|b| b.addr == a.addr) {
        return Err(AddrInsertError::Exists);
    }
    let sc = v6_src_scope(&a.addr);
    let pos = list
        .iter()
        .position(|b| sc >= v6_src_scope(&b.addr))
        .unwrap_or(list.len());
    list.insert(pos, a);
    Ok(pos)
}

/// The primary address whose subnet (same mask) covers `addr` (inet_ifa_byprefix).
pub(crate) fn primary_for(list: &[Addr4], prefix: u32, prefixlen: u8) -> Option<&Addr4> {
    list.iter().find(|b| {
        !b.is_secondary() && b.prefixlen == prefixlen && b.prefix() == prefix & mask4(prefixlen)
    })
}

/// The modified EUI-64 interface identifier of a 6-byte MAC (RFC 4291 appendix A).
pub(crate) fn eui64(mac: &[u8]) -> Option<[u8; 8]> {
    if mac.len() != 6 {
        return None;
    }
    Some([
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn a4(s: &str, len: u8, scope: u8) -> Addr4 {
        let l = u32::from(s.parse::<Ipv4Addr>().unwrap());
        Addr4 {
            local: l,
            address: l,
            prefixlen: len,
            broadcast: 0,
            scope,
            flags: 0,
            label: String::new(),
            metric: 0,
            valid_lft: None,
            preferred_lft: None,
        }
    }

    #[test]
    fn secondary_when_same_subnet() {
        let mut l = Vec::new();
        insert4(&mut l, a4("10.0.0.1", 24, 0)).unwrap();
        insert4(&mut l, a4("10.0.0.2", 24, 0)).unwrap();
        insert4(&mut l, a4("10.1.0.1", 24, 0)).unwrap();
        // Kernel order: 10.0.0.1 (primary), 10.1.0.1 (primary), 10.0.0.2 (secondary).
        assert_eq!(l[0].local, u32::from(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(l[1].local, u32::from(Ipv4Addr::new(10, 1, 0, 1)));
        assert!(l[2].is_secondary());
        assert_eq!(
            insert4(&mut l, a4("10.0.0.2", 24, 0)),
            Err(AddrInsertError::Exists)
        );
        // The same local with another mask is another address.
        assert!(insert4(&mut l, a4("10.0.0.1", 16, 0)).is_ok());
        assert_eq!(
            insert4(&mut l, a4("10.0.0.9", 24, 253)),
            Err(AddrInsertError::ScopeMismatch)
        );
    }

    #[test]
    fn v6_order_global_first_newest_first() {
        let mk = |s: &str| Addr6 {
            addr: s.parse().unwrap(),
            peer: None,
            prefixlen: 64,
            scope: 0,
            flags: 0,
            metric: 0,
            valid_lft: None,
            preferred_lft: None,
        };
        let mut l = Vec::new();
        insert6(&mut l, mk("fe80::1")).unwrap();
        insert6(&mut l, mk("2001:db8::1")).unwrap();
        insert6(&mut l, mk("2001:db8::2")).unwrap();
        let got: Vec<String> = l.iter().map(|a| a.addr.to_string()).collect();
        assert_eq!(got, ["2001:db8::2", "2001:db8::1", "fe80::1"]);
    }

    #[test]
    fn eui64_flips_ul_bit() {
        // Kernel: MAC 4e:cc:58:63:c6:ce gave fe80::4ccc:58ff:fe63:c6ce.
        assert_eq!(
            eui64(&[0x4e, 0xcc, 0x58, 0x63, 0xc6, 0xce]),
            Some([0x4c, 0xcc, 0x58, 0xff, 0xfe, 0x63, 0xc6, 0xce])
        );
    }
}
