//! The writer's side of mirror mode: the kernel's dumps and notifications made into fibre's
//! requests.
//!
//! Each message becomes the request that makes fibre hold the same object, through the
//! model's own conversions (`fibre_proto::convert`): a link the kernel has and fibre lacks is
//! created as a dummy with the kernel's index, name, MTU, address and state (fibre models no
//! other kind; routes, addresses and neighbours then name the same indexes); an object
//! fibre has is replaced. Routes the kernel derives itself (RTPROT_KERNEL: connected, local,
//! IPv6 prefix and multicast routes) and cached clones are not mirrored: fibre derives the
//! same from the same addresses and links. An IPv4 route notification carrying NLM_F_APPEND
//! appends (`ip route append` made a route of its own); any other add replaces (an IPv6
//! notification shows the whole route, siblings and all).
//!
//! A [`Event::Sync`](super::Event::Sync) is a whole dump: every object in it is applied, then
//! every object fibre holds that the dump lacks is removed (a mark and sweep); nothing is
//! emptied first, so lookups never see a table missing. After an overrun what the sweep
//! removes is what fibre missed, counted as `corrected`.
//!
//! Invariants: only the writer owns a [`Mirror`], inside an engine batch the caller
//! publishes; requests the engine refuses change nothing and are counted (a rule that
//! exists already, which the kernel allows twice and a dump names once, is not a refusal).

use crate::engine::{Applied, Engine};
use fibre_fib::types::*;
use fibre_fib::Fib;
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::route::RouteAttr;
use fibre_netlink::{NetlinkMessage, Payload};
use fibre_proto::convert::{self, Request};
use std::collections::HashSet;
use std::fmt;
use std::net::IpAddr;

const RTPROT_KERNEL: u8 = 2;
const RTM_F_CLONED: u32 = 0x200;
const RTNH_F_ONLINK: u32 = 4;
const IFF_UP: u32 = 1;
/// `ip route append`'s flags.
const APPEND: ReqFlags = ReqFlags {
    create: true,
    excl: false,
    replace: false,
    append: true,
};

/// What mirroring did, since fibred started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub syncs: u64,
    pub resyncs: u64,
    pub messages: u64,
    pub applied: u64,
    /// Requests the engine refused (any errno).
    pub refused: u64,
    /// Messages not mirrored: the kernel's own routes, clones, other kinds.
    pub skipped: u64,
    /// Objects a resync removed: what fibre held and the kernel no longer did, because
    /// notifications were lost or a derived deletion disagreed with the kernel's.
    pub corrected: u64,
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "syncs={} resyncs={} messages={} applied={} refused={} skipped={} corrected={}",
            self.syncs,
            self.resyncs,
            self.messages,
            self.applied,
            self.refused,
            self.skipped,
            self.corrected
        )
    }
}

/// A route's key: what the kernel tells routes apart by, but for the IPv4 routes
/// `ip route append` adds beside one of the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct RouteKey {
    family: Family,
    table: u32,
    dst: Prefix,
    src: Option<Prefix>,
    tos: u8,
    metric: u32,
}

impl RouteKey {
    fn of(r: &Route) -> RouteKey {
        RouteKey {
            family: r.family,
            table: r.table,
            dst: r.dst,
            src: r.src,
            tos: r.tos,
            metric: r.priority.unwrap_or(0),
        }
    }
}

/// A route's identity for the sweep: its key and, since IPv4 routes of one key can be
/// several, where it leads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RouteId {
    key: RouteKey,
    kind: RouteType,
    nhid: Option<u32>,
    hops: Vec<(Option<IpAddr>, u32)>,
}

impl RouteId {
    fn of(r: &Route) -> RouteId {
        let mut hops: Vec<_> = std::iter::once(&r.nexthop)
            .chain(&r.multipath)
            .filter(|h| h.gateway.is_some() || h.oif != 0)
            .map(|h| (h.gateway, h.oif))
            .collect();
        hops.sort();
        RouteId {
            key: RouteKey::of(r),
            kind: r.rtype,
            // A route through an object shows the object's next hops too (compat mode).
            nhid: r.nhid,
            hops: if r.nhid.is_some() { Vec::new() } else { hops },
        }
    }
}

/// What a dump holds, by identity.
#[derive(Default)]
struct Seen {
    links: HashSet<u32>,
    /// (link, address, prefix length): the local address, or for IPv6 (which a dump
    /// gives as IFA_ADDRESS alone) the address.
    addrs: HashSet<(u32, Option<IpAddr>, u8)>,
    nexthops: HashSet<u32>,
    rules: Vec<Rule>,
    routes: HashSet<RouteId>,
    keys: HashSet<RouteKey>,
    neighbours: HashSet<(u32, IpAddr, bool)>,
}

pub struct Mirror {
    counters: Counters,
    seq: u32,
}

impl Default for Mirror {
    fn default() -> Self {
        Mirror::new()
    }
}

impl Mirror {
    pub fn new() -> Mirror {
        Mirror {
            counters: Counters::default(),
            seq: 0,
        }
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Applies one event inside the caller's engine batch.
    pub fn event(&mut self, engine: &mut Engine, event: super::Event, listening: u64) -> Applied {
        let mut out = Applied::default();
        match event {
            super::Event::Sync { messages, resync } => {
                self.sync(engine, &messages, resync, listening, &mut out)
            }
            super::Event::Changes { messages } => {
                for (_, m) in fibre_netlink::message::Messages::new(&messages).flatten() {
                    self.counters.messages += 1;
                    self.change(engine, &m, listening, &mut out);
                }
            }
        }
        out
    }

    /// Applies a whole dump, then removes what it lacks.
    fn sync(
        &mut self,
        engine: &mut Engine,
        messages: &[u8],
        resync: bool,
        listening: u64,
        out: &mut Applied,
    ) {
        self.counters.syncs += 1;
        if resync {
            self.counters.resyncs += 1;
        }
        let mut seen = Seen::default();
        let total = fibre_netlink::message::Messages::new(messages).count();
        let mut progress = crate::log::Progress::new("mirror: applying the kernel's dump", total);
        for (i, (_, m)) in fibre_netlink::message::Messages::new(messages)
            .flatten()
            .enumerate()
        {
            progress.at(i);
            self.counters.messages += 1;
            let Some(mut req) = translate(engine.fib(), &m, true) else {
                self.counters.skipped += 1;
                continue;
            };
            // IPv4 routes of one key that `ip route append` made come one after another.
            if let Request::NewRoute(r, flags) = &mut req {
                if r.family == Family::Inet && seen.keys.contains(&RouteKey::of(r)) {
                    *flags = APPEND;
                }
            }
            self.request(engine, &req, listening, out);
            seen.note(&req);
        }
        let stale = seen.stale(engine.fib());
        for req in stale {
            if self.request(engine, &req, listening, out) && resync {
                self.counters.corrected += 1;
            }
        }
        tracing::info!(%resync, counters = %self.counters, "mirror synced");
    }

    /// Applies one notification.
    fn change(
        &mut self,
        engine: &mut Engine,
        m: &NetlinkMessage<'_>,
        listening: u64,
        out: &mut Applied,
    ) {
        match translate(engine.fib(), m, false) {
            Some(req) => {
                self.request(engine, &req, listening, out);
            }
            None => self.counters.skipped += 1,
        }
    }

    /// Hands one request to the engine; whether it succeeded.
    fn request(
        &mut self,
        engine: &mut Engine,
        req: &Request,
        listening: u64,
        out: &mut Applied,
    ) -> bool {
        self.seq = self.seq.wrapping_add(1);
        let mut msg = convert::request_message(req, self.seq, 0);
        msg.header.flags |= nf::NLM_F_ACK;
        let (errno, text) = engine.apply_own(&msg.to_bytes(), listening, &mut out.notes);
        let duplicate_rule = errno == -libc::EEXIST && matches!(req, Request::NewRule(..));
        if errno == 0 {
            self.counters.applied += 1;
            out.changed = true;
        } else if !duplicate_rule {
            self.counters.refused += 1;
            tracing::debug!(request = %format_args!("{req:?}"), errno = -errno, why = %text.unwrap_or_default(), "mirror request refused");
        }
        errno == 0
    }
}

/// The request that makes fibre hold what the kernel's message says it holds; `None` for
/// what is not mirrored.
fn translate(fib: &Fib, m: &NetlinkMessage<'_>, dumped: bool) -> Option<Request> {
    let t = m.header.message_type;
    let append = !dumped && m.header.flags & nf::NLM_F_APPEND != 0;
    match &m.payload {
        Payload::Link(l) => {
            let mut link = convert::link_from(l).ok()?;
            if t == mt::RTM_DELLINK {
                return Some(Request::DelLink(Link {
                    ifindex: link.ifindex,
                    ..Link::default()
                }));
            }
            // Only the administrative state is the kernel's to set; the rest of the flags
            // follow from it, in fibre as in the kernel.
            link.flags &= IFF_UP;
            link.change = IFF_UP;
            link.addr_gen_mode = None;
            let existing = fib.links().into_iter().find(|k| k.ifindex == link.ifindex);
            if let Some(k) = existing {
                // A loopback has no carrier or address to set.
                if k.kind == Some(LinkKind::Loopback) {
                    link.carrier = None;
                    link.address = None;
                }
                link.kind = None;
                link.txqlen = None;
                Some(Request::NewLink(link, ReqFlags::CHANGE))
            } else {
                link.kind = Some(LinkKind::Dummy);
                Some(Request::NewLink(link, ReqFlags::ADD))
            }
        }
        Payload::Address(a) => {
            let a = convert::address_from(a).ok()?;
            Some(match t {
                mt::RTM_NEWADDR => Request::NewAddr(a, ReqFlags::REPLACE),
                _ => Request::DelAddr(a),
            })
        }
        Payload::Route(r) => {
            if r.header.protocol == RTPROT_KERNEL || r.header.flags & RTM_F_CLONED != 0 {
                return None;
            }
            // With nexthop_compat_mode (the default) the kernel shows a route through a
            // next-hop object with the object's next hops expanded; a request names only one.
            let mut r = r.clone();
            // State the kernel reports (a dead or linkdown next hop, offload marks) is no
            // request's to give; only on-link is.
            r.header.flags &= RTNH_F_ONLINK;
            for a in &mut r.attributes {
                if let RouteAttr::Multipath(hops) = a {
                    for h in hops {
                        h.header.flags &= RTNH_F_ONLINK as u8;
                    }
                }
            }
            if r.attributes.iter().any(|a| matches!(a, RouteAttr::NhId(_))) {
                r.attributes.retain(|a| {
                    !matches!(
                        a,
                        RouteAttr::Gateway(_)
                            | RouteAttr::Oif(_)
                            | RouteAttr::Multipath(_)
                            | RouteAttr::Via(_)
                    )
                });
            }
            let route = convert::route_from(&r).ok()?;
            // An IPv4 append makes a route of its own, and its notification names it alone;
            // an IPv6 one adds a sibling, and its notification shows the whole route.
            let append = append && route.family == Family::Inet;
            Some(match t {
                mt::RTM_NEWROUTE if append => Request::NewRoute(route, APPEND),
                mt::RTM_NEWROUTE => Request::NewRoute(route, ReqFlags::REPLACE),
                _ => Request::DelRoute(route),
            })
        }
        Payload::Rule(_) => {
            let mut req = m.clone();
            req.header.flags = nf::NLM_F_REQUEST | nf::NLM_F_CREATE | nf::NLM_F_EXCL;
            match convert::request(&req).ok()? {
                // The kernel leaves out the priority of a rule at 0 (FRA_PRIORITY is put
                // only when set); a request without one would be given a priority.
                Request::NewRule(mut r, f) => {
                    r.priority.get_or_insert(0);
                    Some(Request::NewRule(r, f))
                }
                Request::DelRule(mut r) => {
                    r.priority.get_or_insert(0);
                    Some(Request::DelRule(r))
                }
                _ => None,
            }
        }
        Payload::Nexthop(_) | Payload::Neighbour(_) => {
            // The request conversions read flags from the header: give them a request's.
            let mut req = m.clone();
            req.header.flags = nf::NLM_F_REQUEST | nf::NLM_F_CREATE;
            if matches!(t, mt::RTM_NEWNEXTHOP | mt::RTM_NEWNEIGH) {
                req.header.flags |= nf::NLM_F_REPLACE;
            }
            convert::request(&req).ok()
        }
        _ => None,
    }
}

impl Seen {
    fn note(&mut self, req: &Request) {
        match req {
            Request::NewLink(l, _) => {
                self.links.insert(l.ifindex);
            }
            Request::NewAddr(a, _) => {
                self.addrs
                    .insert((a.ifindex, a.local.or(a.address), a.prefixlen));
            }
            Request::NewNexthop(n, _) => {
                self.nexthops.insert(n.id);
            }
            Request::NewRule(r, _) => self.rules.push(r.clone()),
            Request::NewRoute(r, _) => {
                self.keys.insert(RouteKey::of(r));
                self.routes.insert(RouteId::of(r));
            }
            Request::NewNeigh(n, _) => {
                self.neighbours
                    .insert((n.ifindex, n.dst, n.flags & NTF_PROXY != 0));
            }
            _ => {}
        }
    }

    /// The deletions that make `fib` hold only what the dump held (and what fibre derives
    /// itself): routes first, then neighbours, rules, next hops, addresses, links.
    fn stale(&self, fib: &Fib) -> Vec<Request> {
        let mut out = Vec::new();
        for r in fib.routes(None) {
            if r.protocol != RTPROT_KERNEL && !self.routes.contains(&RouteId::of(&r)) {
                out.push(Request::DelRoute(r));
            }
        }
        for n in fib
            .neighbours(None, false)
            .into_iter()
            .chain(fib.neighbours(None, true))
        {
            if !self
                .neighbours
                .contains(&(n.ifindex, n.dst, n.flags & NTF_PROXY != 0))
            {
                out.push(Request::DelNeigh(n));
            }
        }
        for r in fib.rules(None) {
            // Rules are told apart by everything they hold.
            if !self.rules.contains(&r) {
                out.push(Request::DelRule(r));
            }
        }
        for n in fib.nexthops() {
            if !self.nexthops.contains(&n.id) {
                out.push(Request::DelNexthop(n.id));
            }
        }
        for a in fib.addrs(None) {
            if !self
                .addrs
                .contains(&(a.ifindex, a.local.or(a.address), a.prefixlen))
            {
                out.push(Request::DelAddr(a));
            }
        }
        for l in fib.links() {
            if !self.links.contains(&l.ifindex) {
                out.push(Request::DelLink(Link {
                    ifindex: l.ifindex,
                    ..Link::default()
                }));
            }
        }
        out
    }
}

/// NTF_PROXY: a proxy entry, a table of its own.
const NTF_PROXY: u8 = 0x08;

/// Mirror mode's robustness property, for the fuzzer and the tests: any bytes as kernel
/// messages, applied as a dump, then as notifications, then as a resync's dump, never panic,
/// and after the resync fibre holds no route the dump did not (what the sweep promises).
/// Panics when the property fails.
pub fn check_messages(data: &[u8]) {
    let mut engine = Engine::default();
    let mut mirror = Mirror::new();
    for event in [
        super::Event::Sync {
            messages: data.to_vec(),
            resync: false,
        },
        super::Event::Changes {
            messages: data.to_vec(),
        },
        super::Event::Sync {
            messages: data.to_vec(),
            resync: true,
        },
    ] {
        engine.begin();
        mirror.event(&mut engine, event, 0);
        engine.publish();
    }
    let mut seen = Seen::default();
    for (_, m) in fibre_netlink::message::Messages::new(data).flatten() {
        if let Some(req) = translate(engine.fib(), &m, true) {
            seen.note(&req);
        }
    }
    for r in engine.fib().routes(None) {
        assert!(
            r.protocol == RTPROT_KERNEL || seen.routes.contains(&RouteId::of(&r)),
            "a route the dump did not hold survived the sweep: {r:?}"
        );
    }
}
