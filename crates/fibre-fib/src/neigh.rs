//! Neighbours (ARP and NDP entries) and proxy entries, with the kernel's request semantics.
//!
//! The table answers RTM_NEWNEIGH / RTM_DELNEIGH / RTM_GETNEIGH as the kernel's `neigh_add`,
//! `neigh_delete` and `neigh_get` do, and follows link events as `neigh_ifdown` and
//! `neigh_carrier_down` do. Facts checked against Linux 6.18 in a network namespace:
//! - Entries are keyed by (family, ifindex, address); an IPv4 entry on the loopback device is
//!   keyed by 0.0.0.0, whatever address the request names.
//! - A new entry starts as the kernel's constructor leaves it: NOARP with a derived link-layer
//!   address for multicast (01:00:5e:.. / 33:33:..), broadcast-type IPv4 addresses (ff:..:ff)
//!   and the loopback device (its own address); NONE otherwise. The IPv4 type is the local
//!   table's answer for the address on that device (`inet_addr_type_dev_table`): broadcast
//!   while the local table is empty, which is why `neigh add A dev D` without `lladdr` succeeds
//!   (with ff:ff:ff:ff:ff:ff) in a namespace with no addresses.
//! - An entry created by a request that then fails ("No link layer address given") stays, in
//!   state NONE, as in the kernel: a later `add` of it fails with EEXIST.
//! - `__neigh_update`: a state without NUD_VALID drops the link-layer address from view; a
//!   valid state needs an address (given, or known); without NLM_F_REPLACE an existing valid
//!   entry keeps its address; the router flag follows the request on new entries and with
//!   NLM_F_REPLACE; extern_learn always follows the request.
//! - Link down, link deletion and deletion of a link's last IPv4 address (IPv4 only) remove
//!   every entry and proxy entry of the link; carrier loss removes all but PERMANENT entries
//!   and keeps proxies.
//!
//! Entries made or changed by requests never age (a REACHABLE entry added by `neigh add`
//! stays REACHABLE); entries the data plane resolves and learns move through the kernel's
//! states on its clock: see [`resolve`].
//!
//! Notifications: when [`crate::Fib::set_neigh_events`] is on, every change the kernel
//! announces on RTNLGRP_NEIGH is recorded as a [`NeighEvent`] for the daemon to drain with
//! [`crate::Fib::take_neigh_events`] after each request; proxy entries are never announced.

use crate::ids::{IfIndex, TableId};
use crate::prefix::ip_u128;
use crate::types::{ntf, nud, Errno, Family, NeighEvent, Neighbour, ReqFlags, RouteType, RtError};
use crate::Fib;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

pub mod resolve;

/// How long ago (USER_HZ clock ticks) an entry that was never confirmed reads as confirmed:
/// the kernel backdates `confirmed` by twice base_reachable_time (30 s) on creation and when a
/// new address arrives unconfirmed.
pub const UNCONFIRMED_TICKS: u32 = 2 * 30 * 100;

/// States confirmed by an update (NUD_CONNECTED).
const CONNECTED: u16 = nud::PERMANENT | nud::NOARP | nud::REACHABLE;
/// States in which the kernel runs a timer on the entry (NUD_IN_TIMER), which holds a
/// reference.
const IN_TIMER: u16 = nud::INCOMPLETE | nud::REACHABLE | nud::DELAY | nud::PROBE;

/// Length of a link-layer address on every link fibre models (Ethernet-like dummies and `lo`).
pub const LLADDR_LEN: usize = 6;

type Key = (Family, IfIndex, IpAddr);

#[derive(Debug, Clone)]
struct Entry {
    ha: [u8; LLADDR_LEN],
    state: u16,
    flags: u8,
    kind: u8,
    protocol: u8,
    confirmed: u32,
    nud: resolve::Nud,
}

#[derive(Debug, Clone, Copy)]
struct Proxy {
    flags: u8,
    protocol: u8,
}

/// The neighbour tables of one FIB (both families), in (family, ifindex, address) order.
#[derive(Debug, Default)]
pub(crate) struct Neighs {
    entries: BTreeMap<Key, Entry>,
    proxies: BTreeMap<Key, Proxy>,
    record: bool,
    events: Vec<NeighEvent>,
    /// Running timers of data-plane entries by deadline (see [`resolve`]); an entry's own
    /// `nud.timer` says which of its deadlines is current, the others are skipped.
    timers: BTreeSet<(u64, Key)>,
    /// Bumped by every request and link event that may change an entry (see
    /// [`crate::Fib::neigh_gen`]).
    changes: u64,
}

/// `NEIGH_UPDATE_F_*` of one update.
#[derive(Clone, Copy, Default)]
struct Update {
    override_ll: bool,
    override_isrouter: bool,
    isrouter: bool,
    ext_learned: bool,
}

fn answer(k: &Key, e: &Entry) -> Neighbour {
    Neighbour {
        family: k.0,
        ifindex: k.1 .0,
        dst: k.2,
        lladdr: (e.state & nud::VALID != 0).then(|| e.ha.to_vec()),
        state: e.state,
        flags: e.flags,
        kind: e.kind,
        protocol: e.protocol,
        confirmed: e.confirmed,
        refcnt: u32::from(e.state & IN_TIMER != 0),
    }
}

fn proxy_answer(k: &Key, p: &Proxy) -> Neighbour {
    Neighbour {
        family: k.0,
        ifindex: k.1 .0,
        dst: k.2,
        lladdr: None,
        state: nud::NONE,
        flags: p.flags | ntf::PROXY,
        kind: RouteType::Unicast as u8,
        protocol: p.protocol,
        confirmed: 0,
        refcnt: 0,
    }
}

impl Neighs {
    fn note(&mut self, deleted: bool, k: &Key, e: &Entry) {
        // Every change the data plane's resolution makes is announced: the generation moves
        // with it.
        self.changes += 1;
        if self.record {
            self.events.push(NeighEvent {
                deleted,
                neigh: answer(k, e),
            });
        }
    }

    /// `__neigh_update` on the entry at `k`; returns whether the kernel would notify, with
    /// the request's outcome.
    fn update(
        &mut self,
        k: &Key,
        lladdr: Option<[u8; LLADDR_LEN]>,
        new: u16,
        f: Update,
    ) -> (bool, Result<(), RtError>) {
        let e = self.entries.get_mut(k).expect("caller checked");
        let old = e.state;
        let mut notify = false;
        if (e.flags & ntf::EXT_LEARNED != 0) != f.ext_learned {
            e.flags ^= ntf::EXT_LEARNED;
            notify = true;
        }
        if new & nud::VALID == 0 {
            e.state = new;
            notify |= old & nud::VALID != 0;
            if old & (nud::INCOMPLETE | nud::PROBE) != 0 && new & nud::FAILED != 0 {
                notify = true;
            }
            return (notify, Ok(()));
        }
        // `changed` is the kernel's `lladdr != neigh->ha`: an address given for an entry
        // that had none counts as a change even when the bytes are equal.
        let (ll, changed) = match lladdr {
            Some(l) => {
                let same = old & nud::VALID != 0 && l == e.ha;
                (l, !same)
            }
            None if old & nud::VALID == 0 => {
                return (
                    notify,
                    Err(RtError::msg(Errno::EINVAL, "No link layer address given")),
                );
            }
            None => (e.ha, false),
        };
        // An unchanged address with STALE asked is kept as asked: netlink updates are
        // administrative (NEIGH_UPDATE_F_ADMIN), which the kernel's downgrade rule exempts.
        if new & CONNECTED != 0 {
            e.confirmed = 0;
        }
        let mut update_isrouter = f.override_isrouter;
        let skip = old & nud::VALID != 0 && changed && !f.override_ll;
        if skip {
            update_isrouter = false;
        } else {
            if new != old {
                e.state = new;
                notify = true;
            }
            if changed {
                e.ha = ll;
                notify = true;
                if new & CONNECTED == 0 {
                    e.confirmed = UNCONFIRMED_TICKS;
                }
            }
        }
        if update_isrouter && (e.flags & ntf::ROUTER != 0) != f.isrouter {
            e.flags ^= ntf::ROUTER;
            notify = true;
        }
        (notify, Ok(()))
    }

    /// Removes the entries of `dev` in `family` (both when `None`) that `doomed` selects,
    /// announcing each; proxies go too when `proxies`.
    fn flush_dev(
        &mut self,
        dev: IfIndex,
        family: Option<Family>,
        proxies: bool,
        doomed: impl Fn(&Entry) -> bool,
    ) {
        self.changes += 1;
        let hit = |k: &Key| k.1 == dev && family.is_none_or(|f| f == k.0);
        let keys: Vec<Key> = self
            .entries
            .iter()
            .filter(|(k, e)| hit(k) && doomed(e))
            .map(|(k, _)| *k)
            .collect();
        for k in keys.iter().rev() {
            if let Some(e) = self.entries.remove(k) {
                self.note(true, k, &e);
            }
        }
        if proxies {
            self.proxies.retain(|k, _| !hit(k));
        }
    }
}

/// The ARP multicast mapping: 01:00:5e and the low 23 bits of the group.
fn arp_mc_map(a: Ipv4Addr) -> [u8; LLADDR_LEN] {
    let o = a.octets();
    [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
}

/// The NDP multicast mapping: 33:33 and the low 32 bits of the group.
fn ndisc_mc_map(a: std::net::Ipv6Addr) -> [u8; LLADDR_LEN] {
    let o = a.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

fn lladdr_of(given: Option<&[u8]>) -> Option<[u8; LLADDR_LEN]> {
    given.and_then(|l| l.get(..LLADDR_LEN)).map(|l| {
        let mut a = [0u8; LLADDR_LEN];
        a.copy_from_slice(l);
        a
    })
}

impl Fib {
    /// Records neighbour changes as [`NeighEvent`]s (for a daemon's notifications).
    pub fn set_neigh_events(&mut self, on: bool) {
        self.neighs.record = on;
        if !on {
            self.neighs.events.clear();
        }
    }

    /// The neighbour changes recorded since the last call, in the kernel's order.
    pub fn take_neigh_events(&mut self) -> Vec<NeighEvent> {
        std::mem::take(&mut self.neighs.events)
    }

    /// The neighbour generation: unchanged while no neighbour entry changed, so that state
    /// compiled from the entries (forwarding adjacencies) knows when to look at them again.
    pub fn neigh_gen(&self) -> u64 {
        self.neighs.changes
    }

    /// The key an entry of `dst` on `dev` is stored under.
    fn neigh_key(&self, family: Family, dev: IfIndex, dst: IpAddr) -> Key {
        let lo = self.links.get(dev).is_some_and(|l| l.is_loopback());
        let dst = if lo && family == Family::Inet {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            dst
        };
        (family, dev, dst)
    }

    /// The kernel's `inet_addr_type_dev_table` for `a` on `dev` (`inet_addr_type` for dev 0):
    /// the local table's type.
    pub(crate) fn neigh_addr_type4(&self, dev: IfIndex, a: Ipv4Addr) -> RouteType {
        if a.octets()[0] == 0 || a.is_broadcast() {
            return RouteType::Broadcast;
        }
        if a.is_multicast() {
            return RouteType::Multicast;
        }
        let Some(t) = self
            .t4
            .get(&TableId::LOCAL)
            .filter(|t| t.iter().next().is_some())
        else {
            return RouteType::Broadcast;
        };
        let found = t
            .lpm(ip_u128(IpAddr::V4(a)))
            .find_map(|(_, es)| es.first().copied());
        match found {
            Some(e) => {
                let s = &self.infos.get(e.info).spec;
                if dev == IfIndex::NONE || s.nhs.first().is_none_or(|n| n.oif == dev) {
                    s.rtype
                } else {
                    RouteType::Unicast
                }
            }
            None => RouteType::Unicast,
        }
    }

    /// A new entry as the family's constructor leaves it.
    fn neigh_construct(&self, k: &Key) -> Entry {
        let lo = self.links.get(k.1);
        let (is_lo, mac) = match lo {
            Some(l) => {
                let mut m = [0u8; LLADDR_LEN];
                for (d, s) in m.iter_mut().zip(&l.mac) {
                    *d = *s;
                }
                (l.is_loopback(), m)
            }
            None => (false, [0; LLADDR_LEN]),
        };
        let mut e = Entry {
            ha: [0; LLADDR_LEN],
            state: nud::NONE,
            flags: 0,
            kind: RouteType::Unicast as u8,
            protocol: 0,
            confirmed: UNCONFIRMED_TICKS,
            nud: resolve::Nud::default(),
        };
        match k.2 {
            IpAddr::V4(a) => {
                let t = self.neigh_addr_type4(k.1, a);
                e.kind = t as u8;
                if t == RouteType::Multicast {
                    e.state = nud::NOARP;
                    e.ha = arp_mc_map(a);
                } else if is_lo {
                    e.state = nud::NOARP;
                    e.ha = mac;
                } else if t == RouteType::Broadcast {
                    e.state = nud::NOARP;
                    e.ha = [0xff; LLADDR_LEN];
                }
            }
            IpAddr::V6(a) => {
                if a.is_multicast() {
                    e.kind = RouteType::Multicast as u8;
                    e.state = nud::NOARP;
                    e.ha = ndisc_mc_map(a);
                } else if is_lo {
                    e.kind = RouteType::Local as u8;
                    e.state = nud::NOARP;
                    e.ha = mac;
                }
            }
        }
        e
    }

    /// RTM_NEWNEIGH with the given NLM_F_* modifiers (`neigh_add`).
    pub fn neigh_new(&mut self, n: &Neighbour, flags: ReqFlags) -> Result<(), RtError> {
        self.neighs.changes += 1;
        if Family::of(&n.dst) != n.family {
            return Err(RtError::msg(Errno::EINVAL, "Invalid network address"));
        }
        if n.ifindex != 0 {
            if self.links.get(IfIndex(n.ifindex)).is_none() {
                return Err(RtError::new(Errno::ENODEV));
            }
            if n.lladdr.as_ref().is_some_and(|l| l.len() < LLADDR_LEN) {
                return Err(RtError::msg(Errno::EINVAL, "Invalid link address"));
            }
        }
        if n.is_proxy() {
            let p = self
                .neighs
                .proxies
                .entry((n.family, IfIndex(n.ifindex), n.dst))
                .or_insert(Proxy {
                    flags: 0,
                    protocol: 0,
                });
            p.flags = n.flags & !ntf::PROXY;
            if n.protocol != 0 {
                p.protocol = n.protocol;
            }
            return Ok(());
        }
        if n.ifindex == 0 {
            return Err(RtError::msg(Errno::EINVAL, "Device not specified"));
        }
        let k = self.neigh_key(n.family, IfIndex(n.ifindex), n.dst);
        let mut up = Update {
            override_ll: true,
            override_isrouter: true,
            isrouter: n.flags & ntf::ROUTER != 0,
            ext_learned: n.flags & ntf::EXT_LEARNED != 0,
        };
        if self.neighs.entries.contains_key(&k) {
            if flags.excl {
                return Err(RtError::new(Errno::EEXIST));
            }
            if !flags.replace {
                up.override_ll = false;
                up.override_isrouter = false;
            }
        } else {
            if !flags.create {
                return Err(RtError::new(Errno::ENOENT));
            }
            let e = self.neigh_construct(&k);
            self.neighs.entries.insert(k, e);
        }
        if n.protocol != 0 {
            if let Some(e) = self.neighs.entries.get_mut(&k) {
                e.protocol = n.protocol;
            }
        }
        if n.flags & ntf::USE != 0 {
            self.neigh_use(&k, up.ext_learned);
            return Ok(());
        }
        let (notify, r) = self
            .neighs
            .update(&k, lladdr_of(n.lladdr.as_deref()), n.state, up);
        if notify {
            let e = self.neighs.entries[&k].clone();
            self.neighs.note(false, &k, &e);
        }
        r
    }

    /// NTF_USE: the entry loses PERMANENT and is used, which starts resolution
    /// (`neigh_event_send`): NONE and FAILED entries become INCOMPLETE, STALE ones DELAY.
    /// fibre resolves nothing yet, so they stay there.
    fn neigh_use(&mut self, k: &Key, ext_learned: bool) {
        let Some(e) = self.neighs.entries.get_mut(k) else {
            return;
        };
        let mut notify = false;
        if (e.flags & ntf::EXT_LEARNED != 0) != ext_learned {
            e.flags ^= ntf::EXT_LEARNED;
            notify = true;
        }
        e.state &= !nud::PERMANENT;
        if e.state & (nud::PERMANENT | nud::NOARP | nud::REACHABLE | nud::DELAY | nud::PROBE) == 0 {
            e.state = if e.state & nud::STALE != 0 {
                nud::DELAY
            } else {
                nud::INCOMPLETE
            };
        }
        if notify {
            let e = e.clone();
            self.neighs.note(false, k, &e);
        }
    }

    /// RTM_DELNEIGH (`neigh_delete`).
    pub fn neigh_del(&mut self, n: &Neighbour) -> Result<(), RtError> {
        self.neighs.changes += 1;
        if Family::of(&n.dst) != n.family {
            return Err(RtError::msg(Errno::EINVAL, "Invalid network address"));
        }
        if n.ifindex != 0 && self.links.get(IfIndex(n.ifindex)).is_none() {
            return Err(RtError::new(Errno::ENODEV));
        }
        if n.is_proxy() {
            return match self
                .neighs
                .proxies
                .remove(&(n.family, IfIndex(n.ifindex), n.dst))
            {
                Some(_) => Ok(()),
                None => Err(RtError::new(Errno::ENOENT)),
            };
        }
        if n.ifindex == 0 {
            return Err(RtError::new(Errno::EINVAL));
        }
        let k = self.neigh_key(n.family, IfIndex(n.ifindex), n.dst);
        if !self.neighs.entries.contains_key(&k) {
            return Err(RtError::new(Errno::ENOENT));
        }
        let up = Update {
            override_ll: true,
            ..Update::default()
        };
        let (notify, _) = self.neighs.update(&k, None, nud::FAILED, up);
        let e = self.neighs.entries.remove(&k).expect("present");
        if notify {
            self.neighs.note(false, &k, &e);
        }
        self.neighs.note(true, &k, &e);
        Ok(())
    }

    /// RTM_GETNEIGH for one entry (`neigh_get`).
    pub fn neigh_get(&self, n: &Neighbour) -> Result<Neighbour, RtError> {
        if n.ifindex != 0 && self.links.get(IfIndex(n.ifindex)).is_none() {
            return Err(RtError::msg(Errno::ENODEV, "Unknown device ifindex"));
        }
        if n.is_proxy() {
            return self
                .neighs
                .proxies
                .get_key_value(&(n.family, IfIndex(n.ifindex), n.dst))
                .map(|(k, p)| proxy_answer(k, p))
                .ok_or_else(|| RtError::msg(Errno::ENOENT, "Proxy neighbour entry not found"));
        }
        if n.ifindex == 0 {
            return Err(RtError::msg(Errno::EINVAL, "No device specified"));
        }
        let k = self.neigh_key(n.family, IfIndex(n.ifindex), n.dst);
        self.neighs
            .entries
            .get_key_value(&k)
            .map(|(k, e)| answer(k, e))
            .ok_or_else(|| RtError::msg(Errno::ENOENT, "Neighbour entry not found"))
    }

    /// RTM_GETNEIGH dump: the entries of `family` (both when `None`), IPv4 first, or the
    /// proxy entries when `proxy`.
    pub fn neighbours(&self, family: Option<Family>, proxy: bool) -> Vec<Neighbour> {
        let want = |k: &Key| family.is_none_or(|f| f == k.0);
        if proxy {
            self.neighs
                .proxies
                .iter()
                .filter(|(k, _)| want(k))
                .map(|(k, p)| proxy_answer(k, p))
                .collect()
        } else {
            self.neighs
                .entries
                .iter()
                .filter(|(k, _)| want(k))
                .map(|(k, e)| answer(k, e))
                .collect()
        }
    }

    /// The entry for `addr` on `dev`: its NUD state and, while the state is valid, its
    /// link-layer address.
    pub fn neigh_state(&self, dev: u32, addr: IpAddr) -> Option<(u16, Option<[u8; LLADDR_LEN]>)> {
        let k = self.neigh_key(Family::of(&addr), IfIndex(dev), addr);
        let e = self.neighs.entries.get(&k)?;
        Some((e.state, (e.state & nud::VALID != 0).then_some(e.ha)))
    }

    /// `pneigh_lookup`: whether a proxy entry answers for `addr` on `dev` (an entry made
    /// without a device answers on every link).
    pub fn neigh_proxies(&self, dev: u32, addr: IpAddr) -> bool {
        let f = Family::of(&addr);
        self.neighs.proxies.contains_key(&(f, IfIndex(dev), addr))
            || self.neighs.proxies.contains_key(&(f, IfIndex::NONE, addr))
    }

    /// `neigh_ifdown` for link `dev` (down or deleted): every entry and proxy entry of the
    /// link goes; `family` `None` = both tables.
    pub(crate) fn neigh_ifdown(&mut self, dev: IfIndex, family: Option<Family>) {
        self.neighs.flush_dev(dev, family, true, |_| true);
    }

    /// `neigh_changeaddr`: every entry of `dev`, PERMANENT ones too, goes; proxies stay.
    pub(crate) fn neigh_changeaddr(&mut self, dev: IfIndex) {
        self.neighs.flush_dev(dev, None, false, |_| true);
    }

    /// `neigh_carrier_down`: entries of `dev` but the PERMANENT ones go; proxies stay.
    pub(crate) fn neigh_carrier_down(&mut self, dev: IfIndex) {
        self.neighs
            .flush_dev(dev, None, false, |e| e.state & nud::PERMANENT == 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::*;

    fn fib_with_link() -> (Fib, u32) {
        let mut fib = Fib::default();
        let l = Link {
            ifname: Some("d0".into()),
            kind: Some(LinkKind::Dummy),
            flags: iff::UP,
            change: iff::UP,
            ..Link::default()
        };
        fib.link_new(&l, ReqFlags::ADD).unwrap();
        let lo = Link {
            ifindex: 1,
            flags: iff::UP,
            change: iff::UP,
            ..Link::default()
        };
        fib.link_new(&lo, ReqFlags::NONE).unwrap();
        let idx = fib.link_index("d0").unwrap();
        (fib, idx)
    }

    fn req(dst: &str, dev: u32, ll: Option<u8>, state: u16) -> Neighbour {
        let mut n = Neighbour::new(dst.parse().unwrap(), dev);
        n.lladdr = ll.map(|b| vec![2, 0, 0, 0, 0, b]);
        n.state = state;
        n
    }

    #[test]
    fn add_replace_change_del_follow_the_kernel() {
        let (mut fib, d0) = fib_with_link();
        fib.set_neigh_events(true);
        let n = req("10.0.0.2", d0, Some(2), nud::PERMANENT);
        fib.neigh_new(&n, ReqFlags::ADD).unwrap();
        assert_eq!(
            fib.neigh_new(&n, ReqFlags::ADD).unwrap_err().errno,
            Errno::EEXIST
        );
        // change of a missing entry
        let m = req("10.0.0.9", d0, Some(9), nud::PERMANENT);
        assert_eq!(
            fib.neigh_new(&m, ReqFlags::CHANGE).unwrap_err().errno,
            Errno::ENOENT
        );
        // replace to STALE with a new address, then FAILED hides the address
        let r = req("10.0.0.2", d0, Some(3), nud::STALE);
        fib.neigh_new(&r, ReqFlags::REPLACE).unwrap();
        let got = fib.neigh_get(&n).unwrap();
        assert_eq!(got.lladdr, Some(vec![2, 0, 0, 0, 0, 3]));
        assert_eq!(got.state, nud::STALE);
        let f = req("10.0.0.2", d0, None, nud::FAILED);
        fib.neigh_new(&f, ReqFlags::REPLACE).unwrap();
        let got = fib.neigh_get(&n).unwrap();
        assert_eq!((got.lladdr, got.state), (None, nud::FAILED));
        // a valid state needs an address now
        let p = req("10.0.0.2", d0, None, nud::PERMANENT);
        let e = fib.neigh_new(&p, ReqFlags::REPLACE).unwrap_err();
        assert_eq!(e.extack.as_deref(), Some("No link layer address given"));
        fib.neigh_del(&n).unwrap();
        assert_eq!(fib.neigh_del(&n).unwrap_err().errno, Errno::ENOENT);
        let ev = fib.take_neigh_events();
        // add, replace, failed, deleted (FAILED entries are deleted without a NEWNEIGH)
        assert_eq!(
            ev.iter()
                .map(|e| (e.deleted, e.neigh.state))
                .collect::<Vec<_>>(),
            vec![
                (false, nud::PERMANENT),
                (false, nud::STALE),
                (false, nud::FAILED),
                (true, nud::FAILED)
            ]
        );
    }

    #[test]
    fn a_failed_add_leaves_an_entry_in_state_none() {
        let (mut fib, d0) = fib_with_link();
        let a = Address {
            family: Family::Inet,
            prefixlen: 24,
            flags: 0,
            scope: 0,
            ifindex: d0,
            local: Some("10.0.0.1".parse().unwrap()),
            address: Some("10.0.0.1".parse().unwrap()),
            broadcast: None,
            label: None,
            metric: None,
            valid_lft: None,
            preferred_lft: None,
        };
        fib.addr_new(&a, ReqFlags::ADD).unwrap();
        let n = req("10.0.0.6", d0, None, nud::PERMANENT);
        let e = fib.neigh_new(&n, ReqFlags::ADD).unwrap_err();
        assert_eq!(e.extack.as_deref(), Some("No link layer address given"));
        assert_eq!(
            fib.neigh_new(&n, ReqFlags::ADD).unwrap_err().errno,
            Errno::EEXIST
        );
        assert_eq!(fib.neigh_get(&n).unwrap().state, nud::NONE);
    }

    #[test]
    fn arp_flag_changes_on_an_up_link_forget_entries_and_keep_proxies() {
        let (mut fib, d0) = fib_with_link();
        let flags = |fib: &Fib| fib.links().iter().find(|l| l.ifindex == d0).unwrap().flags;
        assert_ne!(flags(&fib) & iff::NOARP, 0, "a dummy starts without ARP");
        let arp = |on: bool| Link {
            ifindex: d0,
            flags: if on { 0 } else { iff::NOARP },
            change: iff::NOARP,
            ..Link::default()
        };
        fib.neigh_new(&req("10.0.0.2", d0, Some(2), nud::PERMANENT), ReqFlags::ADD)
            .unwrap();
        let mut proxy = req("10.0.0.9", d0, None, 0);
        proxy.flags = ntf::PROXY;
        fib.neigh_new(&proxy, ReqFlags::ADD).unwrap();
        fib.link_new(&arp(false), ReqFlags::NONE).unwrap();
        assert_eq!(
            fib.neighbours(None, false).len(),
            1,
            "no change: entries stay"
        );
        fib.link_new(&arp(true), ReqFlags::NONE).unwrap();
        assert_eq!(flags(&fib) & iff::NOARP, 0);
        assert!(fib.neighbours(None, false).is_empty());
        assert_eq!(fib.neighbours(None, true).len(), 1);
    }

    #[test]
    fn without_local_routes_addresses_are_broadcast_and_noarp() {
        let mut fib = Fib::default();
        let l = Link {
            ifname: Some("d0".into()),
            kind: Some(LinkKind::Dummy),
            ..Link::default()
        };
        fib.link_new(&l, ReqFlags::ADD).unwrap();
        let d0 = fib.link_index("d0").unwrap();
        let n = req("10.0.0.6", d0, None, nud::PERMANENT);
        fib.neigh_new(&n, ReqFlags::ADD).unwrap();
        let got = fib.neigh_get(&n).unwrap();
        assert_eq!(got.lladdr, Some(vec![0xff; 6]));
        assert_eq!(got.kind, RouteType::Broadcast as u8);
        let m = req("ff02::1:ff00:1", d0, None, nud::NOARP);
        fib.neigh_new(&m, ReqFlags::ADD).unwrap();
        let got = fib.neigh_get(&m).unwrap();
        assert_eq!(got.lladdr, Some(vec![0x33, 0x33, 0xff, 0, 0, 1]));
    }

    #[test]
    fn router_flag_follows_replace_and_new_entries_only() {
        let (mut fib, d0) = fib_with_link();
        let mut n = req("2001:db8::2", d0, Some(2), nud::PERMANENT);
        n.flags = ntf::ROUTER;
        fib.neigh_new(&n, ReqFlags::ADD).unwrap();
        assert_eq!(fib.neigh_get(&n).unwrap().flags, ntf::ROUTER);
        let plain = req("2001:db8::2", d0, Some(2), nud::PERMANENT);
        // NLM_F_CREATE alone: no override
        fib.neigh_new(&plain, ReqFlags::PREPEND).unwrap();
        assert_eq!(fib.neigh_get(&n).unwrap().flags, ntf::ROUTER);
        fib.neigh_new(&plain, ReqFlags::CHANGE).unwrap();
        assert_eq!(fib.neigh_get(&n).unwrap().flags, 0);
    }

    #[test]
    fn link_events_flush_as_the_kernel_does() {
        let (mut fib, d0) = fib_with_link();
        for (i, s) in [nud::PERMANENT, nud::NOARP, nud::REACHABLE, nud::STALE]
            .into_iter()
            .enumerate()
        {
            let n = req(&format!("10.0.0.{}", i + 1), d0, Some(i as u8), s);
            fib.neigh_new(&n, ReqFlags::ADD).unwrap();
        }
        let mut p = Neighbour::new("10.0.0.9".parse().unwrap(), d0);
        p.flags = ntf::PROXY;
        fib.neigh_new(&p, ReqFlags::ADD).unwrap();
        let carrier_off = Link {
            ifindex: d0,
            carrier: Some(false),
            ..Link::default()
        };
        fib.link_new(&carrier_off, ReqFlags::NONE).unwrap();
        let left: Vec<u16> = fib
            .neighbours(None, false)
            .iter()
            .map(|n| n.state)
            .collect();
        assert_eq!(left, vec![nud::PERMANENT]);
        assert_eq!(fib.neighbours(None, true).len(), 1);
        let down = Link {
            ifindex: d0,
            change: iff::UP,
            ..Link::default()
        };
        fib.link_new(&down, ReqFlags::NONE).unwrap();
        assert!(fib.neighbours(None, false).is_empty());
        assert!(fib.neighbours(None, true).is_empty());
    }

    #[test]
    fn loopback_ipv4_entries_are_keyed_by_zero() {
        let (mut fib, _) = fib_with_link();
        let n = req("10.0.0.19", 1, Some(5), nud::PERMANENT);
        fib.neigh_new(&n, ReqFlags::ADD).unwrap();
        let all = fib.neighbours(Some(Family::Inet), false);
        assert_eq!(all[0].dst, "0.0.0.0".parse::<IpAddr>().unwrap());
        let other = req("10.0.0.20", 1, Some(5), nud::PERMANENT);
        assert_eq!(
            fib.neigh_new(&other, ReqFlags::ADD).unwrap_err().errno,
            Errno::EEXIST
        );
    }
}
