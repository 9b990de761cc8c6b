//! Stored routes: entries (the kernel's fib_alias / fib6_info position) pointing at shared
//! route information (fib_info): attributes, next hops, and per-next-hop state with its dst.
//!
//! Invariants:
//! - `Infos` interns [`InfoSpec`]s: two stored routes with equal specs share one [`Info`], as
//!   the kernel shares a fib_info (so "the same route" comparisons are id comparisons).
//! - `refs` counts the entries pointing at an info; an info with no entry is freed at once.
//! - Per-next-hop state (`NhState`) has exactly one element per `spec.nhs` element (or one for
//!   a route using a next-hop object, resolved through the object).
//! - Next-hop state (DEAD, LINKDOWN, upper bound, dst) is never part of the spec, so marking a
//!   device down does not change identities. It changes in place only through
//!   `Infos::update`, which notes the infos whose state compiled answers read (`take_moved`).
//! - `Infos` knows its dependents per link (`on_link`: the live infos with a next hop on it),
//!   the deadlines of the live infos that expire, and hands every stored or changed dst a
//!   generation no other dst of the `Fib` ever had (see `dst`).

use std::collections::HashSet;
use std::net::IpAddr;

use smallvec::SmallVec;

use crate::dst::{Dst, DstAt};
use crate::expiry::{ExpiryQueue, InfoRef};
use crate::hash::{InternalState, KeyedMap};
use crate::ids::{IfIndex, InfoId, NhId, TableId};
use crate::prefix::Key;
use crate::types::Encap;
use crate::types::{Family, Metrics, RouteType};

/// The identity of one next hop as configured.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct NhSpec {
    pub gw: Option<IpAddr>,
    /// Resolved output device (0 for reject routes).
    pub oif: IfIndex,
    pub weight: u32,
    /// Configured RTNH_F_* flags (ONLINK); never DEAD or LINKDOWN.
    pub flags: u32,
    /// An IPv6 route given by its own next hops: this sibling's `mtu` metric. The kernel keeps
    /// each sibling's metrics apart, and a device MTU change moves only those of the siblings
    /// through it (rt6_mtu_change); the route's `metrics.mtu` is its first sibling's. None for
    /// IPv4 and for routes through objects, whose `metrics.mtu` is the route's.
    pub mtu: Option<u32>,
    /// Likewise this sibling's protocol: a route appended as a sibling keeps its own, which a
    /// lookup through it answers; the route's `protocol` is its first sibling's.
    pub protocol: Option<u8>,
    /// The encapsulation this next hop applies, in the form built (see `encap`); part of the
    /// identity, as the kernel compares encapsulations (lwtunnel_cmp_encap).
    pub encap: Option<Encap>,
}

/// Everything that makes two routes "the same route info" for the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct InfoSpec {
    pub family: Family,
    pub table: TableId,
    pub rtype: RouteType,
    pub protocol: u8,
    pub scope: u8,
    /// Metric.
    pub priority: u32,
    pub prefsrc: Option<IpAddr>,
    pub metrics: Metrics,
    pub nhs: Vec<NhSpec>,
    pub nhid: Option<NhId>,
    pub pref: Option<u8>,
    /// Deadline of an expiring route, with its prefix (see `expiry`).
    pub expires: Option<crate::expiry::Expiry>,
    /// IPv6 RTF_ANYCAST: an anycast route addrconf made for an address. A user's `anycast`
    /// route lacks the flag, so answers through it keep its device instead of `lo`.
    pub rtf_anycast: bool,
}

impl InfoSpec {
    /// Whether each next hop carries its own `mtu` metric (see `NhSpec::mtu`).
    #[inline]
    pub fn mtu_per_hop(&self) -> bool {
        self.family == Family::Inet6 && self.nhid.is_none()
    }

    /// The `mtu` metric of next hop `i`.
    #[inline]
    pub fn mtu_of(&self, i: usize) -> Option<u32> {
        if self.mtu_per_hop() {
            self.nhs.get(i).and_then(|n| n.mtu)
        } else {
            self.metrics.mtu
        }
    }

    /// The protocol of next hop `i` (see `NhSpec::protocol`).
    #[inline]
    pub fn protocol_of(&self, i: usize) -> u8 {
        self.nhs
            .get(i)
            .and_then(|n| n.protocol)
            .unwrap_or(self.protocol)
    }
}

/// Run-time state of one next hop.
#[derive(Debug, Clone)]
pub(crate) struct NhState {
    /// RTNH_F_DEAD / RTNH_F_LINKDOWN.
    pub flags: u32,
    /// IPv4 next-hop scope (fib_nh_scope): HOST for device routes, LINK for on-link gateways,
    /// the gateway route's scope otherwise, NOWHERE for host-scope routes.
    pub scope: u8,
    /// Hash-threshold upper bound (fib_nh_upper_bound); -1 = never chosen.
    pub upper_bound: i64,
    pub dst: Dst,
}

#[derive(Debug, Clone)]
pub(crate) struct Info {
    pub spec: InfoSpec,
    pub nh: Vec<NhState>,
    /// fib_info's RTNH_F_DEAD: every next hop is dead; the route is flushed.
    pub dead: bool,
    /// fib_info's RTNH_F_LINKDOWN (IPv4 shows it on multipath routes): one device event took
    /// down every next hop that was still up (a route made with all of them linkdown does not
    /// get it); cleared when a next hop's carrier is back.
    pub linkdown: bool,
    refs: u32,
    /// Distinguishes the infos that use one slot in turn (set by `Infos::insert`).
    pub serial: u64,
}

impl Info {
    pub fn new(spec: InfoSpec, nh: Vec<NhState>) -> Info {
        Info {
            spec,
            nh,
            dead: false,
            linkdown: false,
            refs: 0,
            serial: 0,
        }
    }

    /// What compiled answers read of the run-time state (see `lookup::winner`): whether the
    /// info is dead, and which next hops are. LINKDOWN is not in it: compiled answers are used
    /// only while no link ignores LINKDOWN next hops.
    fn compiled_state(&self) -> (bool, SmallVec<[bool; 4]>) {
        let dead = |s: &NhState| s.flags & crate::types::nh_flags::DEAD != 0;
        (self.dead, self.nh.iter().map(dead).collect())
    }

    /// Recomputes the hash-threshold bounds over the live next hops (fib_rebalance,
    /// rt6_multipath_rebalance): a next hop is out when dead, or LINKDOWN on a link that
    /// ignores such routes at this moment (`ignored`: IPv4, IPv6).
    pub fn rebalance(&mut self, ignored: &[crate::flow::LinkdownIgnored; 2]) {
        let ign = &ignored[(self.spec.family == Family::Inet6) as usize];
        let out = |n: &NhSpec, s: &NhState| {
            s.flags & crate::types::nh_flags::DEAD != 0
                || ign.skips(crate::flow::LookupFlags::packet(), s.flags, n.oif)
        };
        let total: u64 = self
            .spec
            .nhs
            .iter()
            .zip(&self.nh)
            .filter(|(n, s)| !out(n, s))
            .map(|(n, _)| n.weight as u64)
            .sum();
        let mut acc = 0u64;
        for (n, s) in self.spec.nhs.iter().zip(self.nh.iter_mut()) {
            if out(n, s) || total == 0 {
                s.upper_bound = -1;
                continue;
            }
            acc += n.weight as u64;
            // DIV_ROUND_CLOSEST((acc << 31), total) - 1, as the kernel computes it.
            s.upper_bound = (((acc << 31) + total / 2) / total) as i64 - 1;
        }
    }
}

/// A route's position in a table: one per (prefix, tos, info) for IPv4, one per sibling
/// group for IPv6. Two entries are equal when they are the same route (`hops_before` only
/// says where the kernel's dump would show it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub tos: u8,
    /// IPv6 source prefix length; 0 = no source prefix.
    src_len: u8,
    pub info: InfoId,
    /// IPv6: how many next hops of the sibling group of this entry's run (same metric, same
    /// source) come before it in the kernel's leaf list. The kernel adds every route at the
    /// end of its run and keeps a sibling group as separate routes, so an entry added between
    /// two siblings sits between them there; its dump jumps from the group's first route to
    /// its last, and such an entry is never dumped (see `Fib::dump6`).
    pub hops_before: u8,
    /// IPv6 source prefix (`from`), masked, as four words (4-byte aligned keeps entries small).
    src_addr: [u32; 4],
}

impl PartialEq for Entry {
    fn eq(&self, o: &Entry) -> bool {
        (self.tos, self.src_len, self.info, self.src_addr) == (o.tos, o.src_len, o.info, o.src_addr)
    }
}

impl Eq for Entry {}

impl Entry {
    pub fn new(tos: u8, info: InfoId, src: Option<Key>) -> Entry {
        let (src_len, a) = match src {
            Some(k) if k.len > 0 => (k.len, k.addr),
            _ => (0, 0),
        };
        let w = |i: u32| (a >> (96 - 32 * i)) as u32;
        Entry {
            tos,
            src_len,
            info,
            hops_before: 0,
            src_addr: [w(0), w(1), w(2), w(3)],
        }
    }

    /// The source prefix of an IPv6 source-specific route.
    #[inline]
    pub fn src(&self) -> Option<Key> {
        if self.src_len == 0 {
            return None;
        }
        let a = self
            .src_addr
            .iter()
            .fold(0u128, |acc, &w| (acc << 32) | w as u128);
        Some(Key {
            addr: a,
            len: self.src_len,
        })
    }
}

/// The number of siblings of `e` when it stands for an IPv6 sibling group (two or more next
/// hops of its own, not an object).
pub(crate) fn sibling_hops(infos: &Infos, e: &Entry) -> Option<usize> {
    let s = &infos.get(e.info).spec;
    (s.nhs.len() >= 2 && s.nhid.is_none()).then_some(s.nhs.len())
}

/// Where `x`, an entry after the sibling group `group` in a prefix's list, sits among the
/// group's siblings in the kernel's leaf list: after that many of them (`Entry::hops_before`),
/// or None when it is not in the group's run or comes after its last sibling.
pub(crate) fn between_siblings(infos: &Infos, group: &Entry, x: &Entry) -> Option<usize> {
    let n = sibling_hops(infos, group)?;
    let h = x.hops_before as usize;
    let same_run = x.src() == group.src()
        && infos.get(x.info).spec.priority == infos.get(group.info).spec.priority;
    (same_run && h < n).then_some(h)
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Infos {
    slots: Vec<Option<Info>>,
    free: Vec<InfoId>,
    /// Deduplicates infos by what they hold (next hops, metrics, ...), all of it sent by netlink
    /// peers: keyed hash.
    index: KeyedMap<InfoSpec, InfoId>,
    /// How many infos were ever freed: an id remembered elsewhere still names the same info
    /// while this is unchanged.
    frees: u64,
    /// Serials handed out so far.
    serials: u64,
    /// Infos freed since `take_released` was last called (their exceptions are forgotten by
    /// `Fib::reap_released`).
    released: Vec<Released>,
    /// The deadlines of the live infos that expire, and of no other: queued by `insert`,
    /// taken out when the info is freed.
    expiry: ExpiryQueue<InfoRef>,
    /// The dependents of each link: the live infos with a next hop on it (keyed hash: link
    /// indices are chosen by netlink peers).
    by_link: KeyedMap<IfIndex, HashSet<InfoId, InternalState>>,
    /// Dst generations handed out so far (see `dst`): every dst stored or changed takes the
    /// next, so no two results of one `Fib` ever share one.
    dst_gens: u64,
    /// Infos whose state that compiled answers read (dead, next hops DEAD) moved in `update`
    /// since `take_moved`: the keys using them must be recompiled.
    moved: Vec<InfoId>,
}

/// A freed info, as the exception table names it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Released {
    pub id: InfoId,
    pub serial: u64,
}

impl Infos {
    pub fn frees(&self) -> u64 {
        self.frees
    }

    pub fn find(&self, spec: &InfoSpec) -> Option<InfoId> {
        self.index.get(spec).copied()
    }

    /// Stores a new info (not yet referenced).
    pub fn insert(&mut self, mut info: Info) -> InfoId {
        self.serials += 1;
        info.serial = self.serials;
        let spec = info.spec.clone();
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id.slot()] = Some(info);
                id
            }
            None => {
                self.slots.push(Some(info));
                InfoId::new(self.slots.len() - 1)
            }
        };
        if let Some(x) = spec.expires {
            self.expiry.insert(x.at, (id, self.serials));
        }
        for n in &spec.nhs {
            self.by_link.entry(n.oif).or_default().insert(id);
        }
        let info = self.slots[id.slot()].as_mut().expect("just stored");
        for (i, s) in info.nh.iter_mut().enumerate() {
            self.dst_gens += 1;
            s.dst.gen = self.dst_gens;
            s.dst.at = DstAt {
                info: Some(id),
                nh: i,
            };
        }
        self.index.insert(spec, id);
        id
    }

    /// The live infos with a next hop on link `dev`.
    pub fn on_link(&self, dev: IfIndex) -> Vec<InfoId> {
        self.by_link
            .get(&dev)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Applies `f` to the run-time state of each of `ids` (never to its spec, which is its
    /// identity), noting the infos whose compiled-answer state moved (see `take_moved`).
    pub fn update(&mut self, ids: &[InfoId], mut f: impl FnMut(&mut Info)) {
        for &id in ids {
            let Some(info) = self.slots[id.slot()].as_mut() else {
                continue;
            };
            let before = info.compiled_state();
            f(info);
            if info.compiled_state() != before {
                self.moved.push(id);
            }
        }
    }

    /// The live infos whose compiled-answer state moved since the last call. A freed one is
    /// left out: no entry uses it any more, and an info stored in its slot since came with
    /// entries that marked their keys themselves.
    pub fn take_moved(&mut self) -> Vec<InfoId> {
        let mut moved = std::mem::take(&mut self.moved);
        moved.retain(|id| self.slots[id.slot()].is_some());
        moved
    }

    /// Stores `d` as the result of next hop `nh` of info `id`; a changed result takes a new
    /// generation, an unchanged one keeps its own (so holders' copies stay current).
    pub fn set_dst(&mut self, id: InfoId, nh: usize, d: Dst) {
        let Some(s) = self.slots[id.slot()]
            .as_mut()
            .and_then(|i| i.nh.get_mut(nh))
        else {
            return;
        };
        if !s.dst.same_result(&d) {
            self.dst_gens += 1;
            s.dst = Dst {
                gen: self.dst_gens,
                at: s.dst.at,
                ..d
            };
        }
    }

    /// Whether `d` is the current result of its next hop (see `dst`).
    #[inline]
    pub fn dst_is_current(&self, d: &Dst) -> bool {
        self.dst_at(d.at).is_some_and(|x| x.gen == d.gen)
    }

    /// The result stored at `at`, if its info lives.
    #[inline]
    pub fn dst_at(&self, at: DstAt) -> Option<&Dst> {
        at.info
            .and_then(|id| self.slots.get(id.slot())?.as_ref())
            .and_then(|i| i.nh.get(at.nh))
            .map(|s| &s.dst)
    }

    pub fn hold(&mut self, id: InfoId) {
        if let Some(i) = self.slots[id.slot()].as_mut() {
            i.refs += 1;
        }
    }

    /// Drops one reference; frees the info when none is left.
    pub fn put(&mut self, id: InfoId) {
        let slot = &mut self.slots[id.slot()];
        let free = match slot.as_mut() {
            Some(i) => {
                i.refs -= 1;
                i.refs == 0
            }
            None => false,
        };
        if free {
            if let Some(i) = slot.take() {
                if self.index.get(&i.spec) == Some(&id) {
                    self.index.remove(&i.spec);
                }
                self.released(id, &i);
            }
            self.free.push(id);
            self.frees += 1;
        }
    }

    /// Frees an info nobody references (one created for a request that then failed).
    pub fn drop_if_unused(&mut self, id: InfoId) {
        if self.slots[id.slot()].as_ref().is_some_and(|i| i.refs == 0) {
            if let Some(i) = self.slots[id.slot()].take() {
                if self.index.get(&i.spec) == Some(&id) {
                    self.index.remove(&i.spec);
                }
                self.released(id, &i);
            }
            self.free.push(id);
            self.frees += 1;
        }
    }

    /// Forgets freed info `i`, of slot `id`, in the expiry queue, and records it for
    /// `take_released`.
    fn released(&mut self, id: InfoId, i: &Info) {
        if let Some(x) = i.spec.expires {
            self.expiry.remove(x.at, (id, i.serial));
        }
        for n in &i.spec.nhs {
            if let Some(s) = self.by_link.get_mut(&n.oif) {
                s.remove(&id);
                if s.is_empty() {
                    self.by_link.remove(&n.oif);
                }
            }
        }
        self.released.push(Released {
            id,
            serial: i.serial,
        });
    }

    /// The deadlines of the live infos that expire.
    #[inline]
    pub fn expiry(&self) -> &ExpiryQueue<InfoRef> {
        &self.expiry
    }

    /// The earliest live info due at `now`, taken out of the queue (the info stays).
    pub fn pop_due(&mut self, now: u64) -> Option<InfoRef> {
        self.expiry.pop_due(now).map(|(_, r)| r)
    }

    /// Whether slot `id` holds the info of that serial.
    pub fn is_live(&self, id: InfoId, serial: u64) -> bool {
        self.slots
            .get(id.slot())
            .and_then(|s| s.as_ref())
            .is_some_and(|i| i.serial == serial)
    }

    /// The infos freed since the last call.
    pub fn take_released(&mut self) -> Vec<Released> {
        std::mem::take(&mut self.released)
    }

    /// Hints the CPU to fetch the start of info `id` (a batch of lookups does it for each
    /// of its answers before reading any).
    #[inline]
    pub fn prefetch(&self, id: InfoId) {
        if let Some(s) = self.slots.get(id.slot()) {
            fibre_lpm::prefetch(s);
        }
    }

    #[inline]
    pub fn get(&self, id: InfoId) -> &Info {
        self.slots[id.slot()]
            .as_ref()
            .expect("entry points at a live info")
    }

    /// The live infos, by slot.
    pub fn iter(&self) -> impl Iterator<Item = (InfoId, &Info)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((InfoId::new(i), s.as_ref()?)))
    }

    pub fn ids(&self) -> Vec<InfoId> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| InfoId::new(i))
            .collect()
    }
}
