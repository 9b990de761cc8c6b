//! The input route decision for a vector of packets: [`Fib::route_input_batch`] answers for
//! each packet exactly what [`Fib::route_input`] answers, at a fraction of the cost for the
//! packets the common case covers.
//!
//! The common case is what the kernel's own fast paths rest on: default rules, compiled tables
//! that reflect every change, no links whose LINKDOWN next hops lookups skip, forwarding on.
//! For it the batch looks every destination up in the compiled structures together (their
//! batched lookups overlap the cache misses of independent packets), prefetches the winners
//! the answers name (in brief: four bytes each) and then their route infos, and finishes each
//! packet from the route info and the forwarding result precomputed on its next hop. Any
//! packet the common case does not cover -- a martian or broadcast address, a local
//! destination, a reject, throw, expiring or dead route, an IPv4 packet leaving by its input
//! link, strict or loose reverse-path filtering, an IPv6 destination looked up strictly on its
//! input link or whose node holds more than one route -- takes [`Fib::route_input`] itself.
//! What decides which path a packet takes is only ever a condition under which the two give
//! the same answer; the property test `route_input_batch_is_route_input` checks that over
//! random configurations.
//!
//! [`Fib::route_input_batch_memo`] also gives each decision's [`InputMemo`], as
//! [`Fib::route_input_memo`] would: the fast path knows the route info and next hop it
//! finished from, so a memo costs it nothing more.
//!
//! Rules for callers: as [`Fib::route_input`] (`&self`, no allocation, no lock).

use std::net::IpAddr;

use crate::fibtable::{Brief, Table, FAST_BATCH};
use crate::flow::{LookupFlags, IPTOS_RT_MASK};
use crate::ids::{IfIndex, TableId};
use crate::input::{
    is_lbcast, is_loopback4, is_multicast4, memo4, memo6, InputDecision, InputDrop, InputKey,
    InputMemo, InputRoute,
};
use crate::lookup::first_good_nh;
use crate::route::{Info, Infos};
use crate::types::{nh_flags, Family, RouteType};
use crate::Fib;

/// The most IPv4 addresses of this host the batch checks a source against by itself (a scan
/// of a stack array per packet, gathered once per batch); above it the local-source check is
/// the general path's. Routers hold a few addresses per link: 32 covers a dozen links.
const LOCAL4_MAX: usize = 32;

/// What the IPv4 common case rests on, gathered once per batch.
struct Fast4<'a> {
    local: &'a Table,
    main: &'a Table,
    /// Whether an entry with a tos sits in `local` or `main`: a packet with a tos takes the
    /// general path then.
    tos_entries: bool,
    /// This host's IPv4 addresses (fib_validate_source's local-source check).
    addrs: [u32; LOCAL4_MAX],
    n_addrs: usize,
}

/// What the IPv6 common case rests on, gathered once per batch.
struct Fast6<'a> {
    local: &'a Table,
    main: &'a Table,
}

/// The packets of one chunk that take the fast path of one family: their places in the chunk
/// and their destinations.
struct Lanes {
    at: [u8; FAST_BATCH],
    dst: [u128; FAST_BATCH],
    n: usize,
}

impl Lanes {
    fn new() -> Lanes {
        Lanes {
            at: [0; FAST_BATCH],
            dst: [0; FAST_BATCH],
            n: 0,
        }
    }

    fn push(&mut self, at: usize, dst: u128) {
        self.at[self.n] = at as u8;
        self.dst[self.n] = dst;
        self.n += 1;
    }

    /// What `main` compiled for each lane's destination that `local` did not claim
    /// ([`Brief::NONE`] for the others), the route infos named prefetched: two passes over
    /// the lanes, each prefetching for the next what the one before found, so that the cache
    /// misses of different packets overlap.
    fn look_up(&self, infos: &Infos, local: &Table, main: &Table) -> [Brief; FAST_BATCH] {
        let (mut vl, mut vm) = ([0; FAST_BATCH], [0; FAST_BATCH]);
        let n = self.n;
        local.fast_values(&self.dst[..n], &mut vl[..n]);
        main.fast_values(&self.dst[..n], &mut vm[..n]);
        for &v in &vm[..n] {
            main.prefetch_brief(v);
        }
        let mut briefs = [Brief::NONE; FAST_BATCH];
        for ((b, &l), &m) in briefs.iter_mut().zip(&vl[..n]).zip(&vm[..n]) {
            if l == fibre_lpm::NO_ROUTE {
                *b = main.brief(m);
                if let Some(i) = b.info() {
                    infos.prefetch(i);
                }
            }
        }
        briefs
    }
}

/// The table a compiled fast path may use for a batch: one that reflects every change.
fn clean(t: Option<&Table>) -> Option<&Table> {
    t.filter(|t| t.is_clean())
}

impl Fib {
    /// [`Fib::route_input`] for each key of `keys`, into the same place of `out`: the same
    /// answers, the common case's lookups made for the whole vector together (see the module
    /// documentation). Panics if the slices differ in length.
    pub fn route_input_batch(&self, keys: &[InputKey], out: &mut [Result<InputRoute, InputDrop>]) {
        assert_eq!(keys.len(), out.len(), "route_input_batch: lengths differ");
        let f4 = self.fast4();
        let f6 = self.fast6();
        for (ks, os) in keys.chunks(FAST_BATCH).zip(out.chunks_mut(FAST_BATCH)) {
            self.input_chunk(f4.as_ref(), f6.as_ref(), ks, os, None);
        }
    }

    /// [`Fib::route_input_batch`] with what a cache may keep of each decision, into the same
    /// place of `memos` (as [`Fib::route_input_memo`] gives it). Panics if the slices differ
    /// in length.
    pub fn route_input_batch_memo(
        &self,
        keys: &[InputKey],
        out: &mut [Result<InputRoute, InputDrop>],
        memos: &mut [Option<InputMemo>],
    ) {
        assert_eq!(
            keys.len(),
            out.len(),
            "route_input_batch_memo: lengths differ"
        );
        assert_eq!(
            keys.len(),
            memos.len(),
            "route_input_batch_memo: lengths differ"
        );
        let f4 = self.fast4();
        let f6 = self.fast6();
        for ((ks, os), ms) in keys
            .chunks(FAST_BATCH)
            .zip(out.chunks_mut(FAST_BATCH))
            .zip(memos.chunks_mut(FAST_BATCH))
        {
            self.input_chunk(f4.as_ref(), f6.as_ref(), ks, os, Some(ms));
        }
    }

    fn fast4(&self) -> Option<Fast4<'_>> {
        // fib_validate_source's shortcut (a scan of the local addresses instead of a lookup
        // back to the source) holds only without custom rules and local routes, and with
        // rp_filter 0 (checked per packet); merged local+main lookups are the general path's.
        if !self.rules.plain(Family::Inet)
            || self.custom_rules4
            || self.custom_local4
            || !self.settings().ipv4_forwarding
            || !self.confs.ignored()[0].is_empty()
            || self.merged4().is_some()
        {
            return None;
        }
        let local = clean(self.table(Family::Inet, TableId::LOCAL))?;
        let main = clean(self.table(Family::Inet, TableId::MAIN))?;
        let mut f = Fast4 {
            local,
            main,
            tos_entries: local.special_entries() + main.special_entries() != 0,
            addrs: [0; LOCAL4_MAX],
            n_addrs: 0,
        };
        for a in self.links.iter().flat_map(|l| &l.v4) {
            *f.addrs.get_mut(f.n_addrs)? = a.local;
            f.n_addrs += 1;
        }
        Some(f)
    }

    fn fast6(&self) -> Option<Fast6<'_>> {
        if !self.rules.plain(Family::Inet6)
            || !self.settings().ipv6_forwarding
            || !self.confs.ignored()[1].is_empty()
        {
            return None;
        }
        let local = clean(self.table(Family::Inet6, TableId::LOCAL))?;
        let main = clean(self.table(Family::Inet6, TableId::MAIN))?;
        // Source-specific routes make every lookup walk the map.
        (local.special_entries() + main.special_entries() == 0).then_some(Fast6 { local, main })
    }

    /// One chunk of at most [`FAST_BATCH`] packets: the fast lanes sorted out, looked up
    /// together, finished one by one; every other packet answered by the general path.
    fn input_chunk(
        &self,
        f4: Option<&Fast4<'_>>,
        f6: Option<&Fast6<'_>>,
        keys: &[InputKey],
        out: &mut [Result<InputRoute, InputDrop>],
        mut memos: Option<&mut [Option<InputMemo>]>,
    ) {
        let mut put = |i: usize, (r, m): InputDecision| {
            out[i] = r;
            if let Some(ms) = memos.as_deref_mut() {
                ms[i] = m;
            }
        };
        let (mut l4, mut l6) = (Lanes::new(), Lanes::new());
        let all = self.settings().rp_filter;
        // The effective rp_filter of the last input link seen: a vector comes mostly from one.
        let mut rpf: Option<(u32, u8)> = None;
        for (i, k) in keys.iter().enumerate() {
            let lane = match (k.dst, k.src) {
                (IpAddr::V4(d), IpAddr::V4(s)) if f4.is_some_and(|f| common4(f, k)) => {
                    let filter = match rpf {
                        Some((iif, f)) if iif == k.iif => f,
                        _ => {
                            let f = self.confs.rp_filter(all, IfIndex(k.iif));
                            rpf = Some((k.iif, f));
                            f
                        }
                    };
                    let (d, s) = (u32::from(d), u32::from(s));
                    (filter == 0 && unicast4(d, s)).then_some((&mut l4, d as u128))
                }
                (IpAddr::V6(d), IpAddr::V6(_)) if f6.is_some() => {
                    // RT6_LOOKUP_F_IFACE: only next hops on the input link qualify.
                    let strict =
                        d.is_multicast() || d.is_loopback() || d.segments()[0] & 0xffc0 == 0xfe80;
                    (!strict).then_some((&mut l6, u128::from(d)))
                }
                _ => None,
            };
            match lane {
                Some((l, dst)) => l.push(i, dst),
                None => put(i, self.route_input_memo(k)),
            }
        }
        if let Some(f) = f4.filter(|_| l4.n != 0) {
            let briefs = l4.look_up(&self.infos, f.local, f.main);
            for (&at, &b) in l4.at[..l4.n].iter().zip(&briefs) {
                let k = &keys[at as usize];
                let d = self.finish4(f, k, b);
                put(at as usize, d.unwrap_or_else(|| self.route_input_memo(k)));
            }
        }
        if let Some(f) = f6.filter(|_| l6.n != 0) {
            let briefs = l6.look_up(&self.infos, f.local, f.main);
            for (&at, &b) in l6.at[..l6.n].iter().zip(&briefs) {
                let k = &keys[at as usize];
                let d = self.finish6(f, k, b);
                put(at as usize, d.unwrap_or_else(|| self.route_input_memo(k)));
            }
        }
    }

    /// The route info of winner `b` when it is a usable unicast route: the result of the
    /// table's walk for a flow without oif (see `fast_table_lookup`). `None` for anything else.
    fn unicast_info(&self, b: Brief) -> Option<&Info> {
        let info = self.infos.get(b.info()?);
        let usable = info.spec.expires.is_none()
            && !info.dead
            && self.effective_type(info) == RouteType::Unicast;
        usable.then_some(info)
    }

    /// ip_route_input_slow's forwarding path for a packet `common4` let through, `main`'s
    /// winner for it `b`.
    fn finish4(&self, f: &Fast4<'_>, k: &InputKey, b: Brief) -> Option<InputDecision> {
        let info = self.unicast_info(b)?;
        let flow = k.flow();
        let ign = &self.confs.ignored()[0];
        let first = first_good_nh(info, &flow, LookupFlags::packet(), false, ign)?;
        let nh = self.multipath_nh(info, first, &flow);
        let (oif, iif) = (info.spec.nhs[nh].oif, IfIndex(k.iif));
        // A packet leaving by its input link may call for a redirect: the general path's.
        if oif == iif {
            return None;
        }
        let (r, checked) = if f.addrs[..f.n_addrs].contains(&(flow.src as u32)) {
            (Err(InputDrop::LocalSource), Err(InputDrop::LocalSource))
        } else {
            let fwd = self.forward4(info, nh, f.main.id, false);
            (Ok(InputRoute::Forward(fwd)), Ok(false))
        };
        // The source check is the local-address scan here (`fast4`), and the rules are the
        // defaults.
        let memo = memo4(
            info,
            first,
            f.main.id,
            (r, checked),
            (oif, iif),
            (true, false),
        );
        Some((r, memo))
    }

    /// ip6_route_input's forwarding path for a destination looked up without
    /// RT6_LOOKUP_F_IFACE, `main`'s winner for it `b`. The input link stands for the flow's
    /// oif, which only prefers next hops through it among those of the node the walk stops at
    /// (`pick6`); with the node holding one route, that is a choice among its next hops, made
    /// here.
    fn finish6(&self, f: &Fast6<'_>, k: &InputKey, b: Brief) -> Option<InputDecision> {
        let info = self.unicast_info(b)?;
        if !b.alone() || info.spec.rtf_anycast {
            return None;
        }
        let live = |i: &usize| info.nh[*i].flags & nh_flags::DEAD == 0;
        let mut hops = 0..info.nh.len();
        let nh = match info.spec.nhid {
            // A route through a next-hop object takes the first live member.
            Some(_) => hops.find(live),
            None => hops
                .clone()
                .filter(live)
                .find(|&i| info.spec.nhs[i].oif == IfIndex(k.iif))
                .or_else(|| hops.find(live)),
        }?;
        let first = nh;
        let nh = self.multipath_nh(info, first, &k.flow());
        let r = Ok(InputRoute::Forward(
            self.forward6(info, nh, f.main.id, k.iif),
        ));
        Some((r, Some(memo6(info, first, f.main.id, r))))
    }
}

/// Whether an IPv4 packet's tos lets the compiled answers stand (see `fast_applies`).
fn common4(f: &Fast4<'_>, k: &InputKey) -> bool {
    !f.tos_entries || k.tos & IPTOS_RT_MASK == 0
}

/// Whether a source and destination pass ip_route_input_slow's address checks as ordinary
/// unicast (no martian, broadcast or multicast address).
fn unicast4(d: u32, s: u32) -> bool {
    let plain = |a: u32| a != 0 && !is_lbcast(a) && !is_multicast4(a) && !is_loopback4(a);
    plain(d) && plain(s)
}
