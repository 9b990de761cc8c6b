//! The writer's side: what the tables were compiled from, and the update that turns a FIB's
//! changes into [`Edit`]s.
//!
//! Dependencies, and what each change reaches:
//! - A link (MAC, MTU, up and carrier, NOARP) reaches its glean adjacencies and the
//!   adjacencies on it.
//! - A neighbour entry (state, link-layer address) reaches the adjacencies of its address on
//!   its link (one per packet family), and keeps its own-family one alive while it exists.
//! - A FIB next hop with a gateway (its forwarding result's generation) holds the adjacency of
//!   its gateway: a new generation re-points its `by_dst` place, and an adjacency no next hop
//!   and no neighbour entry holds is freed (its index reused).
//!
//! - A FIB next hop with an encapsulation holds its own encapsulation object, compiled
//!   again whenever the FIB or the tunnel source (`ip sr tunsrc`) moved (the source the egress
//!   link picks may have changed with its addresses); an edit only when the bytes differ.
//!
//! Finding what changed: nothing at all is looked at while neither [`Fib::gen`] nor
//! [`Fib::neigh_gen`] moved. Otherwise the links are compared with their compiled copies (a
//! few), the neighbour entries only when `neigh_gen` moved, and the next hops' generations
//! (one per next hop of each shared route info: far fewer than routes). Only what differs is
//! recompiled and sent to the tables as edits.

use std::net::IpAddr;

use fibre_fib::hash::KeyedMap;
use fibre_fib::types::{iff, nud};
use fibre_fib::{Family, Fib, Link};

use crate::encap::{self, EncapIdx, EncapObj};
use crate::hmac::HmacKey;
use crate::table::{
    AdjIdx, AdjKey, Adjacency, DstAdj, DstEncap, Edit, Edits, FwdLink, LinkIdx, NeighState,
    ETHERTYPE_IPV4, ETHERTYPE_IPV6, REWRITE_LEN,
};

/// A neighbour entry as adjacencies depend on it (entries in NUD_NONE count as none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Neigh {
    /// NUD_VALID, with its link-layer address, and whether the state is one the kernel's
    /// timers move (not PERMANENT or NOARP).
    Valid([u8; 6], bool),
    Failed,
    /// NUD_INCOMPLETE: being resolved, even on a NOARP link (the kernel queues the packet).
    Incomplete,
}

/// An adjacency and who holds it.
#[derive(Debug, Clone)]
struct AdjState {
    adj: Adjacency,
    /// `None` for a glean adjacency, which its link holds.
    key: Option<AdjKey>,
    /// FIB next hops compiled to it.
    users: u32,
    /// Freed: its place waits for reuse, no table entry leads to it.
    freed: bool,
}

/// What one FIB next hop was compiled to.
#[derive(Debug, Clone, Copy)]
struct Hop {
    gen: u64,
    key: Option<AdjKey>,
    encap: Option<EncapIdx>,
    /// The update pass that last saw the next hop.
    seen: u64,
}

/// The writer's record of what its tables hold and why.
#[derive(Debug, Default)]
pub(crate) struct Compiler {
    /// (`Fib::gen`, `Fib::neigh_gen`, `Fib::seg6_tunsrc`, the HMAC keys' generation) at the
    /// last update; `None` before the first.
    seen: Option<(u64, u64, std::net::Ipv6Addr, u64)>,
    passes: u64,
    links: KeyedMap<u32, LinkIdx>,
    link_views: Vec<FwdLink>,
    adjs: Vec<AdjState>,
    free: Vec<AdjIdx>,
    keys: KeyedMap<AdjKey, AdjIdx>,
    /// Neighbour entries by (ifindex, address).
    neighs: KeyedMap<(u32, IpAddr), Neigh>,
    hops: Vec<Vec<Option<Hop>>>,
    /// Encapsulation objects as the tables hold them; `None`: freed, its place in
    /// `encap_free`.
    encaps: Vec<Option<EncapObj>>,
    encap_free: Vec<EncapIdx>,
}

fn family_of(a: &IpAddr) -> Family {
    if a.is_ipv4() {
        Family::Inet
    } else {
        Family::Inet6
    }
}

/// The link as forwarding sees it (its glean adjacencies are filled in by the caller).
fn view(l: &Link, glean: [AdjIdx; 2]) -> FwdLink {
    let mut mac = [0u8; 6];
    if let Some(a) = &l.address {
        for (d, s) in mac.iter_mut().zip(a) {
            *d = *s;
        }
    }
    FwdLink {
        ifindex: l.ifindex,
        mac,
        mtu: l.mtu.unwrap_or(0),
        up: l.flags & iff::UP != 0 && l.flags & iff::LOWER_UP != 0,
        noarp: l.flags & iff::NOARP != 0,
        glean,
    }
}

/// An adjacency of `family` packets on `link` to a neighbour in state `n` (`None`: no entry).
fn adjacency(
    link: LinkIdx,
    l: &FwdLink,
    neighbour: Option<IpAddr>,
    family: Family,
    n: Option<Neigh>,
) -> Adjacency {
    let (dst, state, report_use) = match n {
        Some(Neigh::Valid(ha, dynamic)) => (ha, NeighState::Resolved, dynamic),
        Some(Neigh::Failed) => ([0; 6], NeighState::Failed, true),
        None if l.noarp => (l.mac, NeighState::Resolved, false),
        Some(Neigh::Incomplete) | None => ([0; 6], NeighState::Incomplete, true),
    };
    let ethertype = match family {
        Family::Inet => ETHERTYPE_IPV4,
        Family::Inet6 => ETHERTYPE_IPV6,
    };
    let mut rewrite = [0u8; REWRITE_LEN];
    rewrite[..6].copy_from_slice(&dst);
    rewrite[6..12].copy_from_slice(&l.mac);
    rewrite[12..].copy_from_slice(&ethertype.to_be_bytes());
    Adjacency {
        link,
        neighbour,
        family,
        rewrite,
        mtu: l.mtu,
        state,
        report_use,
    }
}

impl Compiler {
    /// The edits that bring tables compiled from the FIB as of the last update up to `fib`.
    pub fn update(&mut self, fib: &Fib) -> Edits {
        let now = (
            fib.gen(),
            fib.neigh_gen(),
            fib.seg6_tunsrc(),
            fib.seg6_hmac().gen(),
        );
        let mut out = Vec::new();
        let (fib_moved, neigh_moved, keys_moved) = match self.seen {
            Some((g, n, t, k)) => (
                g != now.0 || t != now.2 || k != now.3,
                n != now.1,
                k != now.3,
            ),
            None => (true, true, true),
        };
        self.seen = Some(now);
        if fib_moved {
            self.update_links(fib, &mut out);
        }
        if neigh_moved {
            self.update_neighbours(fib, &mut out);
        }
        if keys_moved {
            self.update_hmac_keys(fib, &mut out);
        }
        if fib_moved {
            self.update_hops(fib, &mut out);
        }
        Edits(out)
    }

    /// The HMAC keys received SRHs are checked with: every key again (a handful; they change
    /// only when configured).
    fn update_hmac_keys(&mut self, fib: &Fib, out: &mut Vec<Edit>) {
        let keys: Vec<HmacKey> = fib.seg6_hmac().iter().filter_map(HmacKey::new).collect();
        out.push(Edit::HmacKeys(keys));
    }

    fn update_links(&mut self, fib: &Fib, out: &mut Vec<Edit>) {
        // In ifindex order (`Fib::links`).
        let links = fib.links();
        let mut changed = Vec::new();
        for l in &links {
            match self.links.get(&l.ifindex).copied() {
                Some(i) => {
                    let old = self.link_views[i.0 as usize];
                    let new = view(l, old.glean);
                    if new != old {
                        self.link_views[i.0 as usize] = new;
                        out.push(Edit::Link(i, new));
                        changed.push(i);
                    }
                }
                None => {
                    let i = LinkIdx(self.link_views.len() as u32);
                    let mut new = view(l, [AdjIdx(0); 2]);
                    self.link_views.push(new);
                    for (g, family) in [Family::Inet, Family::Inet6].into_iter().enumerate() {
                        let a = adjacency(i, &new, None, family, None);
                        new.glean[g] = self.alloc(a, None, out);
                    }
                    self.link_views[i.0 as usize] = new;
                    self.links.insert(l.ifindex, i);
                    out.push(Edit::Link(i, new));
                    out.push(Edit::LinkIndex(l.ifindex, Some(i)));
                }
            }
        }
        let mut gone: Vec<(u32, LinkIdx)> = self
            .links
            .iter()
            .filter(|(x, _)| links.binary_search_by_key(*x, |l| l.ifindex).is_err())
            .map(|(x, i)| (*x, *i))
            .collect();
        gone.sort_unstable();
        for (ifindex, i) in gone {
            self.links.remove(&ifindex);
            out.push(Edit::LinkIndex(ifindex, None));
            let v = &mut self.link_views[i.0 as usize];
            if v.up {
                v.up = false;
                out.push(Edit::Link(i, *v));
            }
        }
        if !changed.is_empty() {
            for a in 0..self.adjs.len() {
                if !self.adjs[a].freed && changed.contains(&self.adjs[a].adj.link) {
                    self.recompile(AdjIdx(a as u32), out);
                }
            }
        }
    }

    fn update_neighbours(&mut self, fib: &Fib, out: &mut Vec<Edit>) {
        let mut now: KeyedMap<(u32, IpAddr), Neigh> = KeyedMap::default();
        for n in fib.neighbours(None, false) {
            if n.state == nud::NONE {
                continue;
            }
            let lladdr = n
                .lladdr
                .as_deref()
                .filter(|_| n.state & nud::VALID != 0)
                .and_then(|l| l.get(..6)?.try_into().ok());
            let entry = match lladdr {
                Some(ha) => Neigh::Valid(ha, n.state & (nud::PERMANENT | nud::NOARP) == 0),
                None if n.state & nud::FAILED != 0 => Neigh::Failed,
                None => Neigh::Incomplete,
            };
            now.insert((n.ifindex, n.dst), entry);
        }
        let mut moved: Vec<(u32, IpAddr)> = now
            .iter()
            .filter(|(k, n)| self.neighs.get(k) != Some(n))
            .map(|(k, _)| *k)
            .collect();
        moved.extend(self.neighs.keys().filter(|k| !now.contains_key(k)));
        // Keyed maps iterate in a per-map random order: sorted, the adjacencies' places
        // are the same in every run.
        moved.sort_unstable();
        self.neighs = now;
        for (ifindex, addr) in moved {
            for family in [Family::Inet, Family::Inet6] {
                let key = (ifindex, addr, family);
                if let Some(i) = self.keys.get(&key).copied() {
                    self.recompile(i, out);
                    self.release_if_unheld(i, out);
                    continue;
                }
                let n = self.neighs.get(&(ifindex, addr)).copied();
                let link = self.links.get(&ifindex).copied();
                if let (Some(link), Some(n)) = (link, n.filter(|_| family == family_of(&addr))) {
                    let l = self.link_views[link.0 as usize];
                    self.alloc(
                        adjacency(link, &l, Some(addr), family, Some(n)),
                        Some(key),
                        out,
                    );
                }
            }
        }
    }

    fn update_hops(&mut self, fib: &Fib, out: &mut Vec<Edit>) {
        self.passes += 1;
        let pass = self.passes;
        for h in fib.forward_hops() {
            let (slot, hop) = (h.dst.slot(), h.dst.hop());
            if self.hops.len() <= slot {
                self.hops.resize_with(slot + 1, Vec::new);
            }
            if self.hops[slot].len() <= hop {
                self.hops[slot].resize(hop + 1, None);
            }
            if let Some(old) = self.hops[slot][hop].as_mut() {
                if old.gen == h.dst.gen() {
                    old.seen = pass;
                    if let Some(i) = old.encap {
                        if let Some(e) = fib.hop_encap(h.dst) {
                            let obj = encap::compile(fib, h.oif, e);
                            self.set_encap(i, obj, out);
                        }
                    }
                    continue;
                }
            }
            let old_encap = self.hops[slot][hop].and_then(|o| o.encap);
            let encap = match (fib.hop_encap(h.dst), old_encap) {
                (Some(e), Some(i)) => {
                    let obj = encap::compile(fib, h.oif, e);
                    self.set_encap(i, obj, out);
                    Some(i)
                }
                (Some(e), None) => Some(self.alloc_encap(encap::compile(fib, h.oif, e), out)),
                (None, Some(i)) => {
                    self.free_encap(i);
                    None
                }
                (None, None) => None,
            };
            if encap.is_some() || old_encap.is_some() {
                out.push(Edit::DstEncap(
                    slot as u32,
                    hop as u32,
                    encap.map(|encap| DstEncap {
                        gen: h.dst.gen(),
                        encap,
                    }),
                ));
            }
            let key = h
                .gateway
                .filter(|_| self.links.contains_key(&h.oif))
                .map(|gw| (h.oif, gw, h.family));
            let adj = key.map(|k| self.hold(k, out));
            let old = self.hops[slot][hop].replace(Hop {
                gen: h.dst.gen(),
                key,
                encap,
                seen: pass,
            });
            out.push(Edit::Dst(
                slot as u32,
                hop as u32,
                adj.map(|adj| DstAdj {
                    gen: h.dst.gen(),
                    adj,
                }),
            ));
            if let Some(k) = old.and_then(|o| o.key) {
                self.unhold(k, out);
            }
        }
        for slot in 0..self.hops.len() {
            for hop in 0..self.hops[slot].len() {
                let Some(h) = self.hops[slot][hop] else {
                    continue;
                };
                if h.seen == pass {
                    continue;
                }
                self.hops[slot][hop] = None;
                out.push(Edit::Dst(slot as u32, hop as u32, None));
                if let Some(i) = h.encap {
                    self.free_encap(i);
                    out.push(Edit::DstEncap(slot as u32, hop as u32, None));
                }
                if let Some(k) = h.key {
                    self.unhold(k, out);
                }
            }
        }
    }

    /// Stores a new encapsulation object (in a freed place when there is one).
    fn alloc_encap(&mut self, obj: EncapObj, out: &mut Vec<Edit>) -> EncapIdx {
        let i = match self.encap_free.pop() {
            Some(i) => i,
            None => {
                self.encaps.push(None);
                EncapIdx(self.encaps.len() as u32 - 1)
            }
        };
        self.encaps[i.0 as usize] = Some(obj.clone());
        out.push(Edit::Encap(i, obj));
        i
    }

    /// Replaces object `i`; an edit only if it changed.
    fn set_encap(&mut self, i: EncapIdx, obj: EncapObj, out: &mut Vec<Edit>) {
        let held = &mut self.encaps[i.0 as usize];
        if held.as_ref() != Some(&obj) {
            *held = Some(obj.clone());
            out.push(Edit::Encap(i, obj));
        }
    }

    /// Frees object `i` (the caller clears the next hop's place that led to it).
    fn free_encap(&mut self, i: EncapIdx) {
        self.encaps[i.0 as usize] = None;
        self.encap_free.push(i);
    }

    /// The adjacency of `key` with one more next hop holding it (made when there is none).
    fn hold(&mut self, key: AdjKey, out: &mut Vec<Edit>) -> AdjIdx {
        let i = match self.keys.get(&key).copied() {
            Some(i) => i,
            None => {
                let link = self.links[&key.0];
                let l = self.link_views[link.0 as usize];
                let n = self.neighs.get(&(key.0, key.1)).copied();
                self.alloc(adjacency(link, &l, Some(key.1), key.2, n), Some(key), out)
            }
        };
        self.adjs[i.0 as usize].users += 1;
        i
    }

    fn unhold(&mut self, key: AdjKey, out: &mut Vec<Edit>) {
        if let Some(i) = self.keys.get(&key).copied() {
            self.adjs[i.0 as usize].users -= 1;
            self.release_if_unheld(i, out);
        }
    }

    /// Frees adjacency `i` when no next hop and no neighbour entry holds it.
    fn release_if_unheld(&mut self, i: AdjIdx, out: &mut Vec<Edit>) {
        let a = &self.adjs[i.0 as usize];
        let Some(key) = a.key else {
            return;
        };
        let entry = key.2 == family_of(&key.1) && self.neighs.contains_key(&(key.0, key.1));
        if a.users == 0 && !entry {
            self.keys.remove(&key);
            self.adjs[i.0 as usize].key = None;
            self.adjs[i.0 as usize].freed = true;
            out.push(Edit::Key(key, None));
            self.free.push(i);
        }
    }

    /// Stores a new adjacency (in a freed place when there is one).
    fn alloc(&mut self, adj: Adjacency, key: Option<AdjKey>, out: &mut Vec<Edit>) -> AdjIdx {
        let st = AdjState {
            adj,
            key,
            users: 0,
            freed: false,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.adjs[i.0 as usize] = st;
                i
            }
            None => {
                self.adjs.push(st);
                AdjIdx(self.adjs.len() as u32 - 1)
            }
        };
        out.push(Edit::Adj(i, adj));
        if let Some(k) = key {
            self.keys.insert(k, i);
            out.push(Edit::Key(k, Some(i)));
        }
        i
    }

    /// Rebuilds adjacency `i` from its link and neighbour entry; an edit only if it changed.
    fn recompile(&mut self, i: AdjIdx, out: &mut Vec<Edit>) {
        let st = &self.adjs[i.0 as usize];
        let link = st.adj.link;
        let l = self.link_views[link.0 as usize];
        let n = match st.key {
            Some((ifindex, addr, _)) => self.neighs.get(&(ifindex, addr)).copied(),
            None => None,
        };
        let new = adjacency(link, &l, st.adj.neighbour, st.adj.family, n);
        if new != st.adj {
            self.adjs[i.0 as usize].adj = new;
            out.push(Edit::Adj(i, new));
        }
    }
}
