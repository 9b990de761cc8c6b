//! Links: the interfaces of a fibre instance, as a network namespace has them.
//!
//! Invariants:
//! - `lo` is ifindex 1 and exists from creation to the end; it can be brought up and down but
//!   never deleted (as in the kernel, where deleting `lo` is refused).
//! - ifindexes are allocated increasing and never reused while the instance lives (the
//!   kernel's allocator is cyclic, so a deleted index comes back only after wrap-around).
//! - `by_name` maps exactly the names of the links in `by_index`.
//! - A link's addresses (`v4`, `v6`) are kept in the kernel's list order (see `addr`).
//!
//! This module only stores; the routing effects of link events live in `sync`.

use std::collections::BTreeMap;

use crate::addr::{Addr4, Addr6};
use crate::hash::KeyedMap;
use crate::ids::IfIndex;
use crate::types::{iff, LinkKind};

/// Default MTU of a dummy link (ether_setup's).
pub(crate) const DEFAULT_MTU: u32 = 1500;
/// The loopback device's MTU (64 KiB: the kernel's LOOPBACK_MTU).
pub(crate) const LOOPBACK_MTU: u32 = 65536;
/// Smallest MTU an Ethernet-like link accepts (ETH_MIN_MTU).
pub(crate) const MIN_MTU: u32 = 68;
/// Largest MTU a veth (the kernel-side stand-in for dummy in differential tests) accepts.
pub(crate) const MAX_MTU: u32 = 65535;
/// Default transmit queue length (DEFAULT_TX_QUEUE_LEN).
pub(crate) const DEFAULT_TXQLEN: u32 = 1000;
/// The ifindex of `lo`, which exists from the start as in the kernel; blackhole next hops are
/// on it.
pub const LOOPBACK_IFINDEX: u32 = IfIndex::LOOPBACK.0;

/// The longest link name (IFNAMSIZ less its NUL).
pub(crate) const MAX_NAME: usize = 15;

/// Whether `name` may name a link, as the kernel's dev_valid_name decides: 1 to 15 bytes,
/// not `.` or `..` (they would shadow sysfs directories), and no `/`, `:` (the alias
/// separator) or whitespace.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0x0b)
}

/// The smallest MTU IPv6 runs over (RFC 8200 section 5, the kernel's IPV6_MIN_MTU).
pub const IPV6_MIN_MTU: u32 = 1280;

/// Whether IPv6 runs on a link of this MTU. Below IPv6's minimum the kernel's addrconf tears
/// the link's IPv6 state down and refuses addresses.
pub(crate) fn ipv6_runs_at(mtu: u32) -> bool {
    mtu >= IPV6_MIN_MTU
}

#[derive(Debug, Clone)]
pub(crate) struct LinkState {
    pub ifindex: IfIndex,
    pub name: String,
    pub kind: LinkKind,
    /// Administrative state (IFF_UP).
    pub up: bool,
    /// Carrier (the cable); always on for `lo`.
    pub carrier: bool,
    /// IFF_NOARP: the link resolves no neighbours (`ip link set DEV arp off`). A dummy starts
    /// with it (dummy_setup), `lo` without.
    pub noarp: bool,
    pub mtu: u32,
    pub mac: Vec<u8>,
    pub txqlen: u32,
    /// 0 eui64, 1 none (IN6_ADDR_GEN_MODE_*).
    pub addr_gen_mode: u8,
    pub v4: Vec<Addr4>,
    pub v6: Vec<Addr6>,
}

impl LinkState {
    pub fn is_loopback(&self) -> bool {
        self.kind == LinkKind::Loopback
    }

    /// Usable for forwarding: up with carrier (netif_running && netif_carrier_ok).
    pub fn oper_up(&self) -> bool {
        self.up && self.carrier
    }

    /// IPv6 runs on the link (see [`ipv6_runs_at`]).
    pub fn ipv6_enabled(&self) -> bool {
        ipv6_runs_at(self.mtu)
    }

    /// `ifi_flags` as a dump shows them.
    pub fn flags(&self) -> u32 {
        let mut f = match self.kind {
            LinkKind::Loopback => iff::LOOPBACK,
            LinkKind::Dummy => iff::BROADCAST,
            LinkKind::Port(_) => iff::BROADCAST | iff::MULTICAST,
        };
        if self.noarp {
            f |= iff::NOARP;
        }
        if self.up {
            f |= iff::UP;
            if self.carrier {
                f |= iff::RUNNING | iff::LOWER_UP;
            }
        }
        f
    }
}

/// A locally administered unicast MAC derived from the ifindex, so that runs are reproducible.
pub(crate) fn default_mac(ifindex: IfIndex) -> Vec<u8> {
    let b = ifindex.0.to_be_bytes();
    vec![0x02, 0x66, b[0], b[1], b[2], b[3]]
}

#[derive(Debug, Clone)]
pub(crate) struct Links {
    pub by_index: BTreeMap<IfIndex, LinkState>,
    /// Interface names, chosen by netlink peers: keyed hash.
    by_name: KeyedMap<String, IfIndex>,
    next_index: u32,
}

impl Links {
    pub fn new() -> Links {
        let mut l = Links {
            by_index: BTreeMap::new(),
            by_name: KeyedMap::default(),
            next_index: 2,
        };
        l.insert(LinkState {
            ifindex: IfIndex::LOOPBACK,
            name: "lo".into(),
            kind: LinkKind::Loopback,
            up: false,
            carrier: true,
            noarp: false,
            mtu: LOOPBACK_MTU,
            mac: vec![0; 6],
            txqlen: DEFAULT_TXQLEN,
            addr_gen_mode: 0,
            v4: Vec::new(),
            v6: Vec::new(),
        });
        l
    }

    /// The index a new link gets when the request names none.
    pub fn alloc_index(&mut self) -> IfIndex {
        while self.by_index.contains_key(&IfIndex(self.next_index)) {
            self.next_index += 1;
        }
        let i = IfIndex(self.next_index);
        self.next_index += 1;
        i
    }

    pub fn insert(&mut self, link: LinkState) {
        if link.ifindex.0 >= self.next_index {
            self.next_index = link.ifindex.0 + 1;
        }
        self.by_name.insert(link.name.clone(), link.ifindex);
        self.by_index.insert(link.ifindex, link);
    }

    pub fn remove(&mut self, ifindex: IfIndex) -> Option<LinkState> {
        let l = self.by_index.remove(&ifindex)?;
        self.by_name.remove(&l.name);
        Some(l)
    }

    pub fn rename(&mut self, ifindex: IfIndex, name: &str) {
        if let Some(l) = self.by_index.get_mut(&ifindex) {
            self.by_name.remove(&l.name);
            l.name = name.to_string();
            self.by_name.insert(name.to_string(), ifindex);
        }
    }

    pub fn index_of(&self, name: &str) -> Option<IfIndex> {
        self.by_name.get(name).copied()
    }

    #[inline]
    pub fn get(&self, ifindex: IfIndex) -> Option<&LinkState> {
        self.by_index.get(&ifindex)
    }

    #[inline]
    pub fn get_mut(&mut self, ifindex: IfIndex) -> Option<&mut LinkState> {
        self.by_index.get_mut(&ifindex)
    }

    pub fn iter(&self) -> impl Iterator<Item = &LinkState> {
        self.by_index.values()
    }

    pub fn is_up(&self, ifindex: IfIndex) -> bool {
        self.get(ifindex).is_some_and(|l| l.up)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_has_lo_down() {
        // Kernel: a new namespace shows `1: lo: <LOOPBACK> mtu 65536 ... state DOWN`.
        let l = Links::new();
        let lo = l.get(IfIndex(1)).expect("lo");
        assert_eq!(lo.name, "lo");
        assert_eq!(lo.mtu, 65536);
        assert_eq!(lo.flags(), iff::LOOPBACK);
        assert_eq!(l.index_of("lo"), Some(IfIndex(1)));
    }

    #[test]
    fn indexes_increase_and_are_not_reused() {
        let mut l = Links::new();
        let a = l.alloc_index();
        assert_eq!(a, IfIndex(2));
        let b = l.alloc_index();
        assert_eq!(b, IfIndex(3));
        assert_eq!(l.alloc_index(), IfIndex(4));
    }

    #[test]
    fn mac_is_deterministic_and_local() {
        let m = default_mac(IfIndex(7));
        assert_eq!(m, default_mac(IfIndex(7)));
        assert_eq!(m[0] & 0x02, 0x02);
        assert_eq!(m[0] & 0x01, 0);
    }
}
