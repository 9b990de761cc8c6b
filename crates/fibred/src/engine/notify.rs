//! Changes and their notifications.
//!
//! The [`Engine`] methods here apply one change to the FIB and announce it to the multicast
//! groups, as the kernel's rtnetlink notifications do; the dispatcher in [`super`] calls them
//! for every request that changes state, and the daemon's GC timer calls [`Engine::expire`].
//! [`Notifier`] builds the messages, stamped with the request's [`Origin`].
//!
//! Invariants:
//! - Nothing is computed for a group nobody listens to (`listening`): a bulk load with no
//!   monitor pays for no snapshot and no diff.
//! - A route add or delete reads only the prefix it names, before and after; link, address,
//!   rule and next-hop changes (rare, with side effects on other objects) diff a [`Snapshot`]
//!   of what listeners watch.
//! - A change that fails announces nothing, except the neighbour events the kernel announces
//!   for a failed neighbour request too.
//! - Notifications follow the kernel's order: a new link before what follows from it, a
//!   deleted link after its addresses and routes.

use super::{Engine, Note, Origin, Outcome};
use crate::view::Change;
use fibre_fib::types::*;
use fibre_fib::Fib;
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::Payload;
use fibre_proto::convert::{self, Request};
use fibre_proto::groups;

/// The state a diff compares, only for the groups somebody listens to.
#[derive(Default)]
struct Snapshot {
    links: Option<Vec<Link>>,
    addrs: Option<Vec<Address>>,
    routes: Option<Vec<Route>>,
    rules: Option<Vec<Rule>>,
    nexthops: Option<Vec<NexthopObj>>,
}

impl Snapshot {
    fn take(fib: &Fib, listening: u64) -> Snapshot {
        let any = |gs: &[u32]| gs.iter().any(|g| groups::has(listening, *g));
        Snapshot {
            links: any(&[groups::LINK]).then(|| fib.links()),
            addrs: any(&[groups::IPV4_IFADDR, groups::IPV6_IFADDR]).then(|| fib.addrs(None)),
            routes: any(&[groups::IPV4_ROUTE, groups::IPV6_ROUTE]).then(|| fib.routes(None)),
            rules: any(&[groups::IPV4_RULE, groups::IPV6_RULE]).then(|| fib.rules(None)),
            nexthops: any(&[groups::NEXTHOP]).then(|| fib.nexthops()),
        }
    }
}

/// Route equality for notifications: next-hop state flags (dead, linkdown) change with links
/// and are not announced by the kernel as route changes.
fn same_route(a: &Route, b: &Route) -> bool {
    a.flags == b.flags && a == b || {
        let (mut x, mut y) = (a.clone(), b.clone());
        x.flags = 0;
        y.flags = 0;
        for n in x.multipath.iter_mut().chain(y.multipath.iter_mut()) {
            n.flags = 0;
        }
        x == y
    }
}

/// Items of `before` missing from `after`, and of `after` missing from `before`.
fn diff<T: Clone>(before: &[T], after: &[T], same: impl Fn(&T, &T) -> bool) -> (Vec<T>, Vec<T>) {
    let gone = before
        .iter()
        .filter(|b| !after.iter().any(|a| same(a, b)))
        .cloned()
        .collect();
    let new = after
        .iter()
        .filter(|a| !before.iter().any(|b| same(a, b)))
        .cloned()
        .collect();
    (gone, new)
}

/// Large lists are diffed through their encodings, in linear time. The encodings hold what
/// peers sent, so the counts are in std's SipHash maps, seeded per map.
fn diff_encoded<T: Clone>(
    before: &[T],
    after: &[T],
    key: impl Fn(&T) -> Vec<u8>,
) -> (Vec<T>, Vec<T>) {
    use std::collections::HashMap;
    let mut count: HashMap<Vec<u8>, isize> = HashMap::new();
    for a in after {
        *count.entry(key(a)).or_default() += 1;
    }
    let mut gone = Vec::new();
    for b in before {
        let c = count.entry(key(b)).or_default();
        if *c > 0 {
            *c -= 1;
        } else {
            gone.push(b.clone());
        }
    }
    let mut new = Vec::new();
    let mut seen: HashMap<Vec<u8>, isize> = HashMap::new();
    for b in before {
        *seen.entry(key(b)).or_default() += 1;
    }
    for a in after {
        let c = seen.entry(key(a)).or_default();
        if *c > 0 {
            *c -= 1;
        } else {
            new.push(a.clone());
        }
    }
    (gone, new)
}

fn route_key(r: &Route) -> Vec<u8> {
    let mut x = r.clone();
    x.flags = 0;
    for n in x.multipath.iter_mut() {
        n.flags = 0;
    }
    let mut out = Vec::new();
    convert::route_message(&x).emit(&mut out);
    out
}

/// Builds notification messages.
struct Notifier<'a> {
    out: &'a mut Vec<Note>,
    origin: Origin,
}

impl Notifier<'_> {
    fn push(&mut self, group: u32, t: u16, flags: u16, payload: Payload<'_>) {
        let bytes =
            convert::message(t, flags, self.origin.seq, self.origin.port, payload).to_bytes();
        self.out.push(Note { group, bytes });
    }

    fn link(&mut self, t: u16, l: &Link) {
        self.push(groups::LINK, t, 0, Payload::Link(convert::link_message(l)));
    }

    fn addr(&mut self, t: u16, a: &Address) {
        let g = match a.family {
            Family::Inet => groups::IPV4_IFADDR,
            Family::Inet6 => groups::IPV6_IFADDR,
        };
        self.push(g, t, 0, Payload::Address(convert::address_message(a)));
    }

    fn route(&mut self, t: u16, flags: u16, r: &Route) {
        let g = match r.family {
            Family::Inet => groups::IPV4_ROUTE,
            Family::Inet6 => groups::IPV6_ROUTE,
        };
        let mut r = r.clone();
        convert::as_reported(&mut r);
        self.push(g, t, flags, Payload::Route(convert::route_message(&r)));
    }

    fn rule(&mut self, t: u16, r: &Rule) {
        let g = match r.family {
            Family::Inet => groups::IPV4_RULE,
            Family::Inet6 => groups::IPV6_RULE,
        };
        self.push(g, t, 0, Payload::Rule(convert::rule_message(r)));
    }

    /// Neighbour changes, stamped as the kernel stamps them: sequence 0, the requester's port
    /// on RTM_NEWNEIGH, port 0 on RTM_DELNEIGH.
    fn neighs(&mut self, events: &[NeighEvent]) {
        for e in events {
            let (t, port) = if e.deleted {
                (mt::RTM_DELNEIGH, 0)
            } else {
                (mt::RTM_NEWNEIGH, self.origin.port)
            };
            let p = Payload::Neighbour(convert::neighbour_message(&e.neigh));
            let bytes = convert::message(t, 0, 0, port, p).to_bytes();
            self.out.push(Note {
                group: groups::NEIGH,
                bytes,
            });
        }
    }

    fn nexthop(&mut self, t: u16, n: &NexthopObj) {
        self.push(
            groups::NEXTHOP,
            t,
            0,
            Payload::Nexthop(convert::nexthop_message(n)),
        );
    }
}

/// The route a change names: a request of the general path, or one read ahead and kept
/// in the log (list number and index, see [`crate::view::FibWriter::keep`]). The flags are
/// those of an add; `None` deletes. Lives for one call on the stack; boxing the route would
/// allocate for every change of the general path.
#[allow(clippy::large_enum_variant)]
pub(super) enum RouteChange {
    Owned(Route, Option<ReqFlags>),
    ReadAhead(u64, usize),
}

impl Engine {
    /// A GC pass if anything is due: expired routes and exceptions are reclaimed, and each
    /// route removed is announced with RTM_DELROUTE to `listening` groups, as the kernel's
    /// fib6 GC announces the routes it ages out (lookups and dumps stopped showing them at
    /// their deadline already). Inside a batch ([`Engine::begin`]) like any change.
    pub fn expire(&mut self, listening: u64, out: &mut Outcome) {
        let fib = self.fib();
        let now = fib.clock().now_ms();
        if fib.next_expiry().is_none_or(|at| at > now) {
            return;
        }
        let mut watched: Vec<(Family, u32, Prefix)> = fib
            .due_routes(now)
            .into_iter()
            .filter(|(f, _, _)| {
                let g = match f {
                    Family::Inet => groups::IPV4_ROUTE,
                    Family::Inet6 => groups::IPV6_ROUTE,
                };
                groups::has(listening, g)
            })
            .collect();
        // A prefix may hold several expiring routes; its before and after cover them all.
        let mut seen = Vec::with_capacity(watched.len());
        watched.retain(|w| {
            let first = !seen.contains(w);
            seen.push(*w);
            first
        });
        let before: Vec<Vec<Route>> = watched
            .iter()
            .map(|&(f, t, p)| fib.routes_at(f, t, p))
            .collect();
        // A GC pass cannot fail.
        let _ = self.view.apply(Change::Expire(now));
        out.changed = true;
        let mut n = Notifier {
            out: &mut out.notes,
            origin: Origin { seq: 0, port: 0 },
        };
        for (&(f, t, p), before) in watched.iter().zip(&before) {
            let after = self.view.latest().routes_at(f, t, p);
            let (gone, _) = diff(before, &after, same_route);
            for g in &gone {
                n.route(mt::RTM_DELROUTE, 0, g);
            }
        }
    }

    /// The neighbour changes a change recorded in the copy it was applied to. Events the
    /// replay of earlier changes recorded in that copy were announced already (from the other
    /// copy) and are dropped first.
    fn apply_recording(&mut self, change: Change) -> (Result<(), RtError>, Vec<NeighEvent>) {
        self.view.with_standby(Fib::take_neigh_events);
        let r = self.view.apply(change);
        (r, self.view.with_standby(Fib::take_neigh_events))
    }

    /// [`Engine::apply_recording`], with the port of a new port link opened first (refused:
    /// nothing is applied) and bound after, and the port of a deleted link closed.
    fn apply_ported(&mut self, change: Change) -> (Result<(), RtError>, Vec<NeighEvent>) {
        let Some(ports) = &mut self.ports else {
            return self.apply_recording(change);
        };
        let fib = self.view.latest();
        match &change {
            Change::NewLink(l, f) if f.create => {
                let (Some(LinkKind::Port(spec)), Some(name)) = (&l.kind, &l.ifname) else {
                    return self.apply_recording(change);
                };
                if fib.link_index(name).is_some() {
                    return self.apply_recording(change);
                }
                let name = name.clone();
                let mac = match ports.open(spec) {
                    Ok(mac) => mac,
                    Err(e) => return (Err(e), Vec::new()),
                };
                let change = match (change, mac) {
                    (Change::NewLink(mut l, f), Some(mac)) if l.address.is_none() => {
                        l.address = Some(mac);
                        Change::NewLink(l, f)
                    }
                    (c, _) => c,
                };
                let r = self.apply_recording(change);
                let ifindex = self.view.latest().link_index(&name);
                if let Some(ports) = &mut self.ports {
                    ports.commit(ifindex.filter(|_| r.0.is_ok()));
                }
                r
            }
            Change::DelLink(l) => {
                let ifindex = match (l.ifindex, &l.ifname) {
                    (0, Some(name)) => fib.link_index(name),
                    (i, _) => Some(i),
                };
                let r = self.apply_recording(change);
                if let (Ok(()), Some(i), Some(ports)) = (&r.0, ifindex, &mut self.ports) {
                    ports.removed(i);
                }
                r
            }
            _ => self.apply_recording(change),
        }
    }

    /// A neighbour add, change or delete, announced as the kernel announces it (a failed one
    /// too can be: the kernel keeps the entry it created and announces flag changes made
    /// before the failure).
    pub(super) fn neigh_change(
        &mut self,
        change: Change,
        origin: Origin,
        listening: u64,
        out: &mut Outcome,
    ) -> Result<(), RtError> {
        let (r, events) = self.apply_recording(change);
        out.changed |= r.is_ok() || !events.is_empty();
        if groups::has(listening, groups::NEIGH) {
            Notifier {
                out: &mut out.notes,
                origin,
            }
            .neighs(&events);
        }
        r
    }

    /// A route add or delete: the prefix it names is read before and after.
    pub(super) fn route_change(
        &mut self,
        change: RouteChange,
        origin: Origin,
        listening: u64,
        out: &mut Outcome,
    ) -> Result<(), RtError> {
        let (family, table, dst, new) = match &change {
            RouteChange::Owned(r, new) => (r.family, r.table, r.dst, *new),
            RouteChange::ReadAhead(list, at) => match self.view.read_ahead(*list, *at) {
                Some((r, new)) => (r.family, r.table, r.dst, new),
                None => return Err(RtError::new(Errno::EINVAL)),
            },
        };
        let group = match family {
            Family::Inet => groups::IPV4_ROUTE,
            Family::Inet6 => groups::IPV6_ROUTE,
        };
        let watch = groups::has(listening, group) && Family::of(&dst.addr) == family;
        let before = if watch {
            self.fib().routes_at(family, table, dst)
        } else {
            Vec::new()
        };
        match change {
            RouteChange::Owned(r, Some(f)) => self.view.apply(Change::NewRoute(r, f))?,
            RouteChange::Owned(r, None) => self.view.apply(Change::DelRoute(r))?,
            RouteChange::ReadAhead(list, at) => self.view.apply_read_ahead(list, at)?,
        }
        out.changed = true;
        if !watch {
            return Ok(());
        }
        let after = self.fib().routes_at(family, table, dst);
        let (gone, added) = diff(&before, &after, same_route);
        let mut n = Notifier {
            out: &mut out.notes,
            origin,
        };
        match new {
            Some(f) if f.replace && gone.len() == 1 && added.len() == 1 => {
                n.route(mt::RTM_NEWROUTE, nf::NLM_F_REPLACE, &added[0]);
            }
            _ => {
                for g in &gone {
                    n.route(mt::RTM_DELROUTE, 0, g);
                }
                let flags = match new {
                    Some(f) if f.append => nf::NLM_F_CREATE | nf::NLM_F_APPEND,
                    _ => nf::NLM_F_CREATE | nf::NLM_F_EXCL,
                };
                for a in &added {
                    n.route(mt::RTM_NEWROUTE, flags, a);
                }
            }
        }
        Ok(())
    }

    /// Links, addresses, rules and next-hop objects: rare changes with side effects on other
    /// objects, announced by diffing what listeners watch.
    pub(super) fn object_change(
        &mut self,
        req: Request,
        origin: Origin,
        listening: u64,
        out: &mut Outcome,
    ) -> Result<(), RtError> {
        let before = Snapshot::take(self.fib(), listening);
        let link_del = matches!(req, Request::DelLink(_));
        // The kernel flushes IPv4 routes of a link that goes down or away without a
        // notification (IPv6 announces them).
        let link_event = matches!(req, Request::NewLink(..) | Request::DelLink(_));
        let change = match req {
            Request::NewLink(l, f) => Change::NewLink(l, f),
            Request::DelLink(l) => Change::DelLink(l),
            Request::NewAddr(a, f) => Change::NewAddr(a, f),
            Request::DelAddr(a) => Change::DelAddr(a),
            Request::NewRule(r, f) => Change::NewRule(r, f),
            Request::DelRule(r) => Change::DelRule(r),
            Request::NewNexthop(nh, f) => Change::NewNexthop(nh, f),
            Request::DelNexthop(id) => Change::DelNexthop(id),
            _ => return Err(RtError::new(Errno::EOPNOTSUPP)),
        };
        let (r, flushed) = self.apply_ported(change);
        r?;
        out.changed = true;
        if listening == 0 {
            return Ok(());
        }
        let after = Snapshot::take(self.fib(), listening);
        let mut n = Notifier {
            out: &mut out.notes,
            origin,
        };
        let links = |n: &mut Notifier<'_>| {
            if let (Some(b), Some(a)) = (&before.links, &after.links) {
                for l in b
                    .iter()
                    .filter(|l| !a.iter().any(|x| x.ifindex == l.ifindex))
                {
                    n.link(mt::RTM_DELLINK, l);
                }
                for l in a.iter().filter(|l| !b.contains(l)) {
                    n.link(mt::RTM_NEWLINK, l);
                }
            }
        };
        // A new or changed link is announced before what follows from it; a deleted one after
        // its addresses and routes are gone, as the kernel unwinds a device.
        if !link_del {
            links(&mut n);
        }
        // Neighbours a link or address event flushed, as its NETDEV_DOWN handlers announce.
        if groups::has(listening, groups::NEIGH) {
            n.neighs(&flushed);
        }
        if let (Some(b), Some(a)) = (&before.addrs, &after.addrs) {
            let (gone, added) = diff(b, a, |x, y| x == y);
            gone.iter().for_each(|x| n.addr(mt::RTM_DELADDR, x));
            added.iter().for_each(|x| n.addr(mt::RTM_NEWADDR, x));
        }
        if let (Some(b), Some(a)) = (&before.rules, &after.rules) {
            let (gone, added) = diff(b, a, |x, y| x == y);
            gone.iter().for_each(|x| n.rule(mt::RTM_DELRULE, x));
            added.iter().for_each(|x| n.rule(mt::RTM_NEWRULE, x));
        }
        if let (Some(b), Some(a)) = (&before.nexthops, &after.nexthops) {
            let (gone, added) = diff(b, a, |x, y| {
                x.id == y.id && x.group == y.group && x.gateway == y.gateway && x.oif == y.oif
            });
            added.iter().for_each(|x| n.nexthop(mt::RTM_NEWNEXTHOP, x));
            gone.iter().for_each(|x| n.nexthop(mt::RTM_DELNEXTHOP, x));
        }
        if let (Some(b), Some(a)) = (&before.routes, &after.routes) {
            let (gone, added) = diff_encoded(b, a, route_key);
            gone.iter()
                .filter(|x| !(link_event && x.family == Family::Inet))
                .for_each(|x| n.route(mt::RTM_DELROUTE, 0, x));
            added
                .iter()
                .for_each(|x| n.route(mt::RTM_NEWROUTE, nf::NLM_F_CREATE | nf::NLM_F_EXCL, x));
        }
        if link_del {
            links(&mut n);
        }
        Ok(())
    }
}
