//! The forwarding objects workers read: links ([`FwdLink`], by [`LinkIdx`]) and adjacencies
//! ([`Adjacency`], by [`AdjIdx`]), and the two ways from an input route decision to an
//! adjacency ([`FwdTable::adjacency`]).
//!
//! Invariants (kept by `compile`, which alone makes the [`Edit`]s that change a table):
//! - Every [`AdjIdx`] and [`LinkIdx`] a table hands out indexes its vectors, which never
//!   shrink. An index means what it meant only within the read it came from: a freed
//!   adjacency's place is reused by a later update.
//! - `by_key` holds exactly the live adjacencies that have a neighbour: one per (output link,
//!   neighbour address, packet family). An adjacency's rewrite string and MTU are those of its
//!   link and neighbour entry in the same table.
//! - `by_dst[slot][hop]` holds, for a FIB next hop with a gateway, the adjacency of that
//!   gateway and the generation of the next hop's forwarding result it was compiled from; a
//!   route decision with another generation is not trusted with it.
//!
//! Readers only read (`&self`); a table changes only through [`Edit`]s applied by the writer
//! to a copy no reader is in (`fibre-publish`).

use std::net::IpAddr;

use fibre_fib::hash::KeyedMap;
use fibre_fib::{Family, ForwardRoute};

use crate::encap::{EncapIdx, EncapObj};
use crate::hmac::HmacKey;

/// The Ethernet header a forwarded packet gets: destination MAC, source MAC, ethertype.
pub const REWRITE_LEN: usize = 14;
/// Ethertypes of the packets forwarded.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;

/// A link's place in [`FwdTable`]'s links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkIdx(pub(crate) u32);

/// An adjacency's place in [`FwdTable`]'s adjacencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AdjIdx(pub(crate) u32);

/// A link as forwarding needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FwdLink {
    pub ifindex: u32,
    pub mac: [u8; 6],
    pub mtu: u32,
    /// Administratively up with carrier (netif_running && netif_carrier_ok): packets may
    /// leave by it. A deleted link stays down in its slot (ifindexes are not reused).
    pub up: bool,
    /// IFF_NOARP: neighbours are not resolved; the kernel's neighbour constructor gives them
    /// the link's own address as theirs (arp_constructor, ndisc_constructor).
    pub noarp: bool,
    /// The adjacencies of on-link destinations that have no neighbour entry, for IPv4 and IPv6
    /// packets (VPP's "glean"): resolved to the link's own address on a NOARP link, else
    /// incomplete, the packet's destination being the address to resolve.
    pub glean: [AdjIdx; 2],
}

/// Whether an adjacency's rewrite string can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighState {
    /// The neighbour's link-layer address is known (NUD_VALID: permanent, noarp, reachable,
    /// stale, delay, probe; or the link does no ARP): the rewrite string is complete.
    Resolved,
    /// Not yet known (no entry, NUD_NONE or NUD_INCOMPLETE): the packet waits for
    /// resolution; the rewrite string's destination is zero.
    Incomplete,
    /// Resolution failed (NUD_FAILED): the kernel drops the packet and reports host
    /// unreachable to its sender.
    Failed,
}

/// Where forwarded packets to one neighbour go: the egress link, the link-layer rewrite and
/// the neighbour's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adjacency {
    pub link: LinkIdx,
    /// The neighbour's address; `None` for a link's glean adjacency.
    pub neighbour: Option<IpAddr>,
    /// The family of the packets sent (an IPv4 route's gateway may be IPv6).
    pub family: Family,
    /// Destination MAC, source MAC (the link's), ethertype of `family`.
    pub rewrite: [u8; REWRITE_LEN],
    /// The link's MTU.
    pub mtu: u32,
    pub state: NeighState,
    /// Whether a packet sent through it is reported to the neighbour's state machine (the
    /// kernel's `neigh_event_send`): for every entry but PERMANENT and NOARP ones, whose
    /// state no use changes.
    pub report_use: bool,
}

/// An adjacency's key: output ifindex, neighbour address, packet family.
pub(crate) type AdjKey = (u32, IpAddr, Family);

/// The adjacency compiled for one FIB next hop with a gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DstAdj {
    pub gen: u64,
    pub adj: AdjIdx,
}

/// The encapsulation object compiled for one FIB next hop that has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DstEncap {
    pub gen: u64,
    pub encap: EncapIdx,
}

/// What a route decision's next hop does to the packet before it leaves
/// ([`FwdTable::encap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopEncap {
    /// Nothing: the packet is forwarded as it is.
    None,
    /// The object compiled for the next hop.
    Obj(EncapIdx),
    /// The next hop had an encapsulation in another generation than the decision's: the
    /// objects are older or newer than the route decision, and the packet is dropped rather
    /// than sent with the wrong headers.
    Stale,
}

/// Changes to a table, as the writer applies them to one copy and replays them into the
/// other (made by the writer's update alone: opaque outside the crate).
#[derive(Debug, Clone, Default)]
pub struct Edits(pub(crate) Vec<Edit>);

/// One change to a table.
#[derive(Debug, Clone)]
pub(crate) enum Edit {
    /// Sets link `LinkIdx` (the next new one, or an existing one).
    Link(LinkIdx, FwdLink),
    /// Maps an ifindex to its link, or unmaps it.
    LinkIndex(u32, Option<LinkIdx>),
    /// Sets adjacency `AdjIdx` (the next new one, or an existing one).
    Adj(AdjIdx, Adjacency),
    /// Maps a neighbour key to its adjacency, or unmaps it.
    Key(AdjKey, Option<AdjIdx>),
    /// Sets or clears the adjacency of a FIB next hop (its `DstRef` slot and hop).
    Dst(u32, u32, Option<DstAdj>),
    /// Sets encapsulation object `EncapIdx` (the next new one, or an existing one).
    Encap(EncapIdx, EncapObj),
    /// Sets or clears the encapsulation object of a FIB next hop.
    DstEncap(u32, u32, Option<DstEncap>),
    /// Replaces the HMAC keys.
    HmacKeys(Vec<HmacKey>),
}

/// The forwarding objects, as one copy holds them.
#[derive(Debug, Clone, Default)]
pub struct FwdTable {
    links: Vec<FwdLink>,
    /// Keyed hash: ifindexes are chosen by netlink peers.
    by_ifindex: KeyedMap<u32, LinkIdx>,
    adjs: Vec<Adjacency>,
    /// Keyed hash: addresses come from packets and peers.
    by_key: KeyedMap<AdjKey, AdjIdx>,
    by_dst: Vec<Vec<Option<DstAdj>>>,
    encaps: Vec<EncapObj>,
    /// By `DstRef` slot and hop, as `by_dst`; only next hops with an encapsulation have one.
    by_dst_encap: Vec<Vec<Option<DstEncap>>>,
    /// The SRH HMAC keys, by id. Keyed hash: the id is read from received packets.
    hmac_keys: KeyedMap<u32, HmacKey>,
}

impl FwdTable {
    #[inline]
    pub fn link(&self, i: LinkIdx) -> &FwdLink {
        &self.links[i.0 as usize]
    }

    /// The link of `ifindex`, if it exists.
    #[inline]
    pub fn link_index(&self, ifindex: u32) -> Option<LinkIdx> {
        self.by_ifindex.get(&ifindex).copied()
    }

    #[inline]
    pub fn adj(&self, i: AdjIdx) -> &Adjacency {
        &self.adjs[i.0 as usize]
    }

    /// The adjacency of `neighbour` on `ifindex` for packets of `family`, if one is compiled
    /// (a next hop uses it or the neighbour table has an entry for it).
    #[inline]
    pub fn neighbour(&self, ifindex: u32, neighbour: IpAddr, family: Family) -> Option<AdjIdx> {
        self.by_key.get(&(ifindex, neighbour, family)).copied()
    }

    /// The adjacency a packet to `dst` forwarded by `r` leaves by. Through a gateway: the one
    /// compiled for the route's next hop, found by index and trusted while its generation is
    /// the decision's; else through the keyed hash. On link: the neighbour entry's adjacency,
    /// else the link's glean adjacency. `None` when the link or the gateway is not compiled
    /// yet (the FIB changed since the writer's last update).
    #[inline]
    pub fn adjacency(&self, r: &ForwardRoute, dst: IpAddr) -> Option<AdjIdx> {
        let family = if dst.is_ipv4() {
            Family::Inet
        } else {
            Family::Inet6
        };
        match r.gateway {
            Some(gw) => {
                let compiled = self
                    .by_dst
                    .get(r.dst.slot())
                    .and_then(|hops| *hops.get(r.dst.hop())?);
                match compiled {
                    Some(d) if d.gen == r.dst.gen() => Some(d.adj),
                    _ => self.neighbour(r.oif, gw, family),
                }
            }
            None => self.neighbour(r.oif, dst, family).or_else(|| {
                let link = self.link_index(r.oif)?;
                Some(self.link(link).glean[usize::from(family == Family::Inet6)])
            }),
        }
    }

    #[inline]
    pub fn encap_obj(&self, i: EncapIdx) -> &EncapObj {
        &self.encaps[i.0 as usize]
    }

    /// The encapsulation of the next hop route decision `r` forwards through (see
    /// [`HopEncap`]).
    #[inline]
    pub fn encap(&self, r: &ForwardRoute) -> HopEncap {
        let e = self
            .by_dst_encap
            .get(r.dst.slot())
            .and_then(|hops| *hops.get(r.dst.hop())?);
        match e {
            None => HopEncap::None,
            Some(d) if d.gen == r.dst.gen() => HopEncap::Obj(d.encap),
            Some(_) => HopEncap::Stale,
        }
    }

    /// The HMAC key of id `id` (`ip sr hmac`), to check a received SRH's HMAC with.
    #[inline]
    pub fn hmac_key(&self, id: u32) -> Option<&HmacKey> {
        self.hmac_keys.get(&id)
    }

    /// Applies one change (see [`Edit`]).
    pub(crate) fn edit(&mut self, e: &Edit) {
        match *e {
            Edit::Link(i, l) => set(&mut self.links, i.0 as usize, l),
            Edit::LinkIndex(ifindex, Some(i)) => {
                self.by_ifindex.insert(ifindex, i);
            }
            Edit::LinkIndex(ifindex, None) => {
                self.by_ifindex.remove(&ifindex);
            }
            Edit::Adj(i, a) => set(&mut self.adjs, i.0 as usize, a),
            Edit::Key(k, Some(i)) => {
                self.by_key.insert(k, i);
            }
            Edit::Key(k, None) => {
                self.by_key.remove(&k);
            }
            Edit::Dst(slot, hop, d) => *place(&mut self.by_dst, slot, hop) = d,
            Edit::Encap(i, ref o) => set(&mut self.encaps, i.0 as usize, o.clone()),
            Edit::DstEncap(slot, hop, d) => *place(&mut self.by_dst_encap, slot, hop) = d,
            Edit::HmacKeys(ref keys) => {
                self.hmac_keys.clear();
                for k in keys {
                    self.hmac_keys.insert(k.id(), k.clone());
                }
            }
        }
    }
}

/// The place of FIB next hop (`slot`, `hop`) in a table by `DstRef` place, made when missing.
fn place<T: Clone>(v: &mut Vec<Vec<Option<T>>>, slot: u32, hop: u32) -> &mut Option<T> {
    let (slot, hop) = (slot as usize, hop as usize);
    if v.len() <= slot {
        v.resize_with(slot + 1, Vec::new);
    }
    let hops = &mut v[slot];
    if hops.len() <= hop {
        hops.resize(hop + 1, None);
    }
    &mut hops[hop]
}

/// Sets `v[i]`, where `i` is an existing place or the next one.
fn set<T>(v: &mut Vec<T>, i: usize, x: T) {
    if i == v.len() {
        v.push(x);
    } else {
        v[i] = x;
    }
}

impl fibre_publish::Replica for FwdTable {
    type Op = Edits;
    type Output = ();
    type Log = Edits;

    fn apply(&mut self, op: Edits, log: &mut Edits) {
        for e in &op.0 {
            self.edit(e);
        }
        log.0.extend(op.0);
    }

    fn replay(&mut self, log: &mut Edits) {
        for e in log.0.drain(..) {
            self.edit(&e);
        }
    }
}
