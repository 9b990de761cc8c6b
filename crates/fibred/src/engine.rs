//! The request engine: rtnetlink datagrams in, answers and notifications out.
//!
//! [`Engine`] owns the [`Fib`] and is driven by exactly one thread (the daemon's writer); it has
//! no I/O, so the fuzzer and the tests drive it directly. One call to [`Engine::handle`] takes
//! one datagram as a client sent it and does what the kernel's `netlink_rcv_skb` does with it:
//! every message in order, an NLMSG_ERROR for each failure (with extended-ACK text and the
//! offending attribute's offset), an ACK when NLM_F_ACK asks for one, answers to GET requests,
//! and dumps as [`DumpStream`]s that the connection encodes lazily, as the client reads.
//!
//! Invariants:
//! - A request that fails leaves the state unchanged (the FIB's entry points are atomic), and a
//!   datagram never stops halfway except where the kernel stops: at a header whose length is
//!   impossible.
//! - Notifications are computed only for groups somebody listens to (`listening`), so a bulk
//!   load with no monitor pays nothing for them; route changes read only the prefix they name.
//! - A dump is a snapshot taken at request time; later changes do not alter it.

use crate::groups;
use fibre_fib::types::*;
use fibre_fib::Fib;
use fibre_netlink::convert::{self, Request, RequestError};
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::{NetlinkHeader, NetlinkMessage, Payload};

/// `nlmsg_type` of fibre's membership request, the Unix-socket stand-in for the
/// NETLINK_ADD_MEMBERSHIP / NETLINK_DROP_MEMBERSHIP socket options and for `nl_groups` in
/// bind(2). Below NLMSG_MIN_TYPE (0x10), beside the ring's setup message (0x0f). Body: a u32
/// operation ([`MEMBERSHIP_ADD`], [`MEMBERSHIP_DROP`], [`MEMBERSHIP_SET_GROUPS`]) and a u32
/// argument (an RTNLGRP_* number, or the legacy `nl_groups` bitmask), native endian.
pub const FIBRE_MEMBERSHIP: u16 = 0x0e;
/// Join the RTNLGRP_* group given as argument (NETLINK_ADD_MEMBERSHIP).
pub const MEMBERSHIP_ADD: u32 = 1;
/// Leave the group (NETLINK_DROP_MEMBERSHIP).
pub const MEMBERSHIP_DROP: u32 = 2;
/// Replace the groups 1..=32 by the `nl_groups` bitmask given as argument (bind(2)).
pub const MEMBERSHIP_SET_GROUPS: u32 = 3;

/// A membership request as bytes (for clients).
pub fn membership_request(op: u32, arg: u32, seq: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(&24u32.to_ne_bytes());
    out.extend_from_slice(&FIBRE_MEMBERSHIP.to_ne_bytes());
    out.extend_from_slice(&(nf::NLM_F_REQUEST | nf::NLM_F_ACK).to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&op.to_ne_bytes());
    out.extend_from_slice(&arg.to_ne_bytes());
    out
}

/// What one client's connection tells the engine about itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientCtx {
    /// The port id stamped on answers (`nlmsg_pid`).
    pub port: u32,
    /// Groups joined, bit `g - 1` for RTNLGRP `g`.
    pub groups: u64,
}

/// One answer to a client, in order.
pub enum Reply {
    /// A complete message (ACK, error, GET answer).
    Message(Vec<u8>),
    /// A dump, encoded as the client reads it.
    Dump(DumpStream),
}

/// A notification for the members of `group`.
#[derive(Debug, Clone)]
pub struct Note {
    pub group: u32,
    pub bytes: Vec<u8>,
}

/// Answers and notifications of one datagram.
#[derive(Default)]
pub struct Outcome {
    pub replies: Vec<Reply>,
    pub notes: Vec<Note>,
    /// The state changed (for the state file).
    pub changed: bool,
}

enum Items {
    Links(Vec<Link>),
    Addrs(Vec<Address>),
    Routes(Vec<Route>),
    Rules(Vec<Rule>),
    Nexthops(Vec<NexthopObj>),
    Neighs(Vec<Neighbour>),
}

impl Items {
    fn len(&self) -> usize {
        match self {
            Items::Links(v) => v.len(),
            Items::Addrs(v) => v.len(),
            Items::Routes(v) => v.len(),
            Items::Rules(v) => v.len(),
            Items::Nexthops(v) => v.len(),
            Items::Neighs(v) => v.len(),
        }
    }

    fn emit(&self, i: usize, seq: u32, port: u32, out: &mut Vec<u8>) {
        let (t, p) = match self {
            Items::Links(v) => (mt::RTM_NEWLINK, Payload::Link(convert::link_message(&v[i]))),
            Items::Addrs(v) => (
                mt::RTM_NEWADDR,
                Payload::Address(convert::address_message(&v[i])),
            ),
            Items::Routes(v) => (
                mt::RTM_NEWROUTE,
                Payload::Route(convert::route_message(&v[i])),
            ),
            Items::Rules(v) => (mt::RTM_NEWRULE, Payload::Rule(convert::rule_message(&v[i]))),
            Items::Nexthops(v) => (
                mt::RTM_NEWNEXTHOP,
                Payload::Nexthop(convert::nexthop_message(&v[i])),
            ),
            Items::Neighs(v) => (
                mt::RTM_NEWNEIGH,
                Payload::Neighbour(convert::neighbour_message(&v[i])),
            ),
        };
        convert::message(t, nf::NLM_F_MULTI, seq, port, p).emit(out);
    }
}

/// A dump in progress: a snapshot of objects, encoded as NLM_F_MULTI messages and ended by
/// NLMSG_DONE, a datagram's worth at a time.
pub struct DumpStream {
    items: Items,
    next: usize,
    seq: u32,
    port: u32,
    done_sent: bool,
}

impl DumpStream {
    /// Appends whole messages to `out` while they fit in `limit` bytes (at least one), the
    /// NLMSG_DONE included after the last object. Returns false once everything was written.
    pub fn fill(&mut self, out: &mut Vec<u8>, limit: usize) -> bool {
        let start = out.len();
        while self.next < self.items.len() {
            let before = out.len();
            self.items.emit(self.next, self.seq, self.port, out);
            if out.len() - start > limit && before > start {
                out.truncate(before);
                return true;
            }
            pad4(out);
            self.next += 1;
        }
        if !self.done_sent {
            let before = out.len();
            convert::done(self.seq, self.port).emit(out);
            if out.len() - start > limit && before > start {
                out.truncate(before);
                return true;
            }
            self.done_sent = true;
        }
        false
    }

    /// Objects left to encode.
    pub fn remaining(&self) -> usize {
        self.items.len() - self.next
    }
}

fn pad4(out: &mut Vec<u8>) {
    out.resize(out.len().next_multiple_of(4), 0);
}

fn error_msg(request: &[u8], e: &RequestError, port: u32) -> Vec<u8> {
    convert::ack(request, Err(e), false, port).to_bytes()
}

fn ack_msg(request: &[u8], port: u32) -> Vec<u8> {
    convert::ack(request, Ok(()), false, port).to_bytes()
}

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

/// Large lists are diffed through their encodings, in linear time.
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

/// Where notifications are stamped from: the request's sequence number and sender port, as
/// the kernel's `nl_info` carries them.
#[derive(Clone, Copy)]
struct Origin {
    seq: u32,
    port: u32,
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
        self.push(g, t, flags, Payload::Route(convert::route_message(r)));
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

/// The FIB and the request semantics around it. See the module documentation.
pub struct Engine {
    fib: Fib,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new(Fib::default())
    }
}

impl Engine {
    pub fn new(mut fib: Fib) -> Engine {
        fib.set_neigh_events(true);
        Engine { fib }
    }

    pub fn fib(&self) -> &Fib {
        &self.fib
    }

    /// Handles one datagram from a client; answers and notifications are appended to `out`.
    /// `listening` is the union of every client's groups.
    pub fn handle(
        &mut self,
        datagram: &[u8],
        client: &mut ClientCtx,
        listening: u64,
        out: &mut Outcome,
    ) {
        let mut off = 0;
        while datagram.len() - off >= NetlinkHeader::LEN {
            let rest = &datagram[off..];
            let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            // The kernel stops reading a datagram at an impossible length, silently.
            if len < NetlinkHeader::LEN || len > rest.len() {
                break;
            }
            self.one(&rest[..len], client, listening, out);
            off += (len + 3) & !3;
            if off >= datagram.len() {
                break;
            }
        }
    }

    fn one(&mut self, msg: &[u8], client: &mut ClientCtx, listening: u64, out: &mut Outcome) {
        let port = client.port;
        let flags = u16::from_ne_bytes([msg[6], msg[7]]);
        let t = u16::from_ne_bytes([msg[4], msg[5]]);
        let want_ack = flags & nf::NLM_F_ACK != 0;
        if t == FIBRE_MEMBERSHIP {
            let r = membership(msg, &mut client.groups);
            self.answer(msg, r.map_err(RequestError::from), want_ack, port, out);
            return;
        }
        // Control messages and messages that are not requests are only acknowledged.
        if t < 0x10 || flags & nf::NLM_F_REQUEST == 0 {
            if want_ack {
                out.replies.push(Reply::Message(ack_msg(msg, port)));
            }
            return;
        }
        let parsed = match NetlinkMessage::parse(msg, 0) {
            Ok((m, _)) => m,
            Err(e) => {
                let err = RequestError {
                    error: RtError::msg(Errno::EINVAL, e.to_string()),
                    offset: u32::try_from(e.offset()).ok(),
                };
                out.replies.push(Reply::Message(error_msg(msg, &err, port)));
                return;
            }
        };
        let origin = Origin {
            seq: parsed.header.sequence,
            port,
        };
        let result = match convert::request(&parsed) {
            Ok(req) => self.apply(req, origin, listening, out),
            Err(e) => Err(e),
        };
        self.answer(msg, result, want_ack, port, out);
    }

    fn answer(
        &self,
        msg: &[u8],
        result: Result<(), RequestError>,
        want_ack: bool,
        port: u32,
        out: &mut Outcome,
    ) {
        match result {
            Err(e) => out.replies.push(Reply::Message(error_msg(msg, &e, port))),
            Ok(()) if want_ack => out.replies.push(Reply::Message(ack_msg(msg, port))),
            Ok(()) => {}
        }
    }

    fn dump(&self, items: Items, origin: Origin, out: &mut Outcome) {
        out.replies.push(Reply::Dump(DumpStream {
            items,
            next: 0,
            seq: origin.seq,
            port: origin.port,
            done_sent: false,
        }));
    }

    fn get_reply(&self, t: u16, payload: Payload<'_>, origin: Origin, out: &mut Outcome) {
        let m = convert::message(t, 0, origin.seq, origin.port, payload).to_bytes();
        out.replies.push(Reply::Message(m));
    }

    fn apply(
        &mut self,
        req: Request,
        origin: Origin,
        listening: u64,
        out: &mut Outcome,
    ) -> Result<(), RequestError> {
        match req {
            Request::DumpLinks => self.dump(Items::Links(self.fib.links()), origin, out),
            Request::DumpAddrs(f) => self.dump(Items::Addrs(self.fib.addrs(f)), origin, out),
            Request::DumpRoutes(f) => self.dump(Items::Routes(self.fib.routes(f)), origin, out),
            Request::DumpRules(f) => self.dump(Items::Rules(self.fib.rules(f)), origin, out),
            Request::DumpNexthops => self.dump(Items::Nexthops(self.fib.nexthops()), origin, out),
            Request::GetLink(l) => {
                let found = self.fib.links().into_iter().find(|x| {
                    if l.ifindex != 0 {
                        x.ifindex == l.ifindex
                    } else {
                        l.ifname.is_some() && x.ifname == l.ifname
                    }
                });
                let Some(link) = found else {
                    return Err(RtError::new(Errno::ENODEV).into());
                };
                self.get_reply(
                    mt::RTM_NEWLINK,
                    Payload::Link(convert::link_message(&link)),
                    origin,
                    out,
                );
            }
            Request::GetRoute(q) => {
                let r = self.fib.route_get(&q)?;
                self.get_reply(
                    mt::RTM_NEWROUTE,
                    Payload::Route(convert::route_message(&r)),
                    origin,
                    out,
                );
            }
            Request::GetNexthop(id) => {
                let Some(nh) = self.fib.nexthops().into_iter().find(|n| n.id == id) else {
                    return Err(RtError::msg(Errno::ENOENT, "Nexthop id does not exist").into());
                };
                self.get_reply(
                    mt::RTM_NEWNEXTHOP,
                    Payload::Nexthop(convert::nexthop_message(&nh)),
                    origin,
                    out,
                );
            }
            Request::DumpNeighs(d) => {
                let v: Vec<Neighbour> = self
                    .fib
                    .neighbours(d.family, d.proxy)
                    .into_iter()
                    .filter(|n| d.ifindex == 0 || n.ifindex == d.ifindex)
                    .collect();
                self.dump(Items::Neighs(v), origin, out)
            }
            Request::GetNeigh(n) => {
                let found = self.fib.neigh_get(&n)?;
                self.get_reply(
                    mt::RTM_NEWNEIGH,
                    Payload::Neighbour(convert::neighbour_message(&found)),
                    origin,
                    out,
                );
            }
            Request::NewNeigh(n, f) => {
                let r = self.fib.neigh_new(&n, f);
                out.changed |= r.is_ok();
                self.neigh_notes(origin, listening, out);
                r?
            }
            Request::DelNeigh(n) => {
                let r = self.fib.neigh_del(&n);
                out.changed |= r.is_ok();
                self.neigh_notes(origin, listening, out);
                r?
            }
            Request::NewRoute(r, f) => self.route_change(&r, Some(f), origin, listening, out)?,
            Request::DelRoute(r) => self.route_change(&r, None, origin, listening, out)?,
            other => self.object_change(other, origin, listening, out)?,
        }
        Ok(())
    }

    /// Announces the neighbour changes the FIB recorded (a failed request can have some: the
    /// kernel keeps the entry it created and announces flag changes made before the failure).
    fn neigh_notes(&mut self, origin: Origin, listening: u64, out: &mut Outcome) {
        let events = self.fib.take_neigh_events();
        if events.is_empty() {
            return;
        }
        out.changed = true;
        if groups::has(listening, groups::NEIGH) {
            Notifier {
                out: &mut out.notes,
                origin,
            }
            .neighs(&events);
        }
    }

    /// A route add or delete: the prefix it names is read before and after.
    fn route_change(
        &mut self,
        r: &Route,
        new: Option<ReqFlags>,
        origin: Origin,
        listening: u64,
        out: &mut Outcome,
    ) -> Result<(), RtError> {
        let group = match r.family {
            Family::Inet => groups::IPV4_ROUTE,
            Family::Inet6 => groups::IPV6_ROUTE,
        };
        let watch = groups::has(listening, group) && Family::of(&r.dst.addr) == r.family;
        let before = if watch {
            self.fib.routes_at(r.family, r.table, r.dst)
        } else {
            Vec::new()
        };
        match new {
            Some(f) => self.fib.route_new(r, f)?,
            None => self.fib.route_del(r)?,
        }
        out.changed = true;
        if !watch {
            return Ok(());
        }
        let after = self.fib.routes_at(r.family, r.table, r.dst);
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
    fn object_change(
        &mut self,
        req: Request,
        origin: Origin,
        listening: u64,
        out: &mut Outcome,
    ) -> Result<(), RtError> {
        let before = Snapshot::take(&self.fib, listening);
        let link_del = matches!(req, Request::DelLink(_));
        // The kernel flushes IPv4 routes of a link that goes down or away without a
        // notification (IPv6 announces them).
        let link_event = matches!(req, Request::NewLink(..) | Request::DelLink(_));
        match &req {
            Request::NewLink(l, f) => self.fib.link_new(l, *f)?,
            Request::DelLink(l) => self.fib.link_del(l)?,
            Request::NewAddr(a, f) => self.fib.addr_new(a, *f)?,
            Request::DelAddr(a) => self.fib.addr_del(a)?,
            Request::NewRule(r, f) => self.fib.rule_new(r, *f)?,
            Request::DelRule(r) => self.fib.rule_del(r)?,
            Request::NewNexthop(nh, f) => self.fib.nexthop_new(nh, *f)?,
            Request::DelNexthop(id) => self.fib.nexthop_del(*id)?,
            _ => return Err(RtError::new(Errno::EOPNOTSUPP)),
        }
        out.changed = true;
        if listening == 0 {
            self.fib.take_neigh_events();
            return Ok(());
        }
        let after = Snapshot::take(&self.fib, listening);
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
        let flushed = self.fib.take_neigh_events();
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

    /// The configuration as a stream of requests that rebuild it ([`Engine::restore`]):
    /// links, next-hop objects, addresses, rules, then routes.
    pub fn save(&self) -> Vec<u8> {
        let create = ReqFlags {
            create: true,
            excl: false,
            replace: false,
            append: false,
        };
        let mut reqs = Vec::new();
        // What a configuration sets on a link; the rest (carrier, queue length, the
        // loopback's fixed attributes) belongs to the device.
        for l in self.fib.links() {
            let kept = Link {
                ifindex: l.ifindex,
                ifname: l.ifname,
                kind: l.kind,
                flags: l.flags & IFF_UP,
                change: IFF_UP,
                mtu: l.mtu,
                address: if l.kind == Some(LinkKind::Dummy) {
                    l.address
                } else {
                    None
                },
                ..Link::default()
            };
            reqs.push(Request::NewLink(kept, create));
        }
        let nhs = self.fib.nexthops();
        // Groups name their members, so plain next hops come first.
        for nh in nhs
            .iter()
            .filter(|n| n.group.is_empty())
            .chain(nhs.iter().filter(|n| !n.group.is_empty()))
        {
            reqs.push(Request::NewNexthop(nh.clone(), ReqFlags::ADD));
        }
        for a in self.fib.addrs(None) {
            reqs.push(Request::NewAddr(a, ReqFlags::ADD));
        }
        // Neighbours with an address, and proxy entries; the types and derived addresses the
        // kernel gives new entries come back from the links and addresses above.
        for n in self
            .fib
            .neighbours(None, false)
            .into_iter()
            .filter(|n| n.lladdr.is_some())
            .chain(self.fib.neighbours(None, true))
        {
            reqs.push(Request::NewNeigh(n, ReqFlags::ADD));
        }
        for r in self.fib.rules(None) {
            reqs.push(Request::NewRule(r, ReqFlags::ADD));
        }
        // Routes the kernel made for addresses and links come back with them.
        for r in self
            .fib
            .routes(None)
            .into_iter()
            .filter(|r| r.protocol != PROTO_KERNEL)
        {
            reqs.push(Request::NewRoute(r, ReqFlags::APPEND));
        }
        let mut out = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            convert::request_message(r, i as u32 + 1, 0).emit(&mut out);
            pad4(&mut out);
        }
        out
    }

    /// Replays a stream written by [`Engine::save`]. Objects that exist already (the
    /// loopback link, default rules, routes that addresses create) are skipped; returns the
    /// number of requests that failed otherwise.
    pub fn restore(&mut self, stream: &[u8]) -> usize {
        let mut ctx = ClientCtx::default();
        let mut out = Outcome::default();
        self.handle(stream, &mut ctx, 0, &mut out);
        out.replies
            .iter()
            .filter(|r| match r {
                Reply::Message(m) => {
                    let code = m
                        .get(16..20)
                        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    let failed = code != 0 && code != -Errno::EEXIST.0;
                    if failed {
                        let req = m.get(20..).and_then(|r| NetlinkMessage::parse(r, 0).ok());
                        crate::log!(
                            crate::log::Level::Warn,
                            "state entry not restored",
                            errno = -code,
                            request = format!("{:?}", req.map(|r| r.0.payload))
                        );
                    }
                    failed
                }
                Reply::Dump(_) => false,
            })
            .count()
    }
}

/// RTPROT_KERNEL: routes made by the FIB itself for addresses and links.
const PROTO_KERNEL: u8 = 2;

/// `IFF_UP`: the only link flag a saved configuration sets.
const IFF_UP: u32 = 1;

fn membership(msg: &[u8], groups: &mut u64) -> Result<(), RtError> {
    let body = &msg[NetlinkHeader::LEN..];
    let (Some(op), Some(arg)) = (body.get(0..4), body.get(4..8)) else {
        return Err(RtError::msg(Errno::EINVAL, "Membership request too short"));
    };
    let op = u32::from_ne_bytes([op[0], op[1], op[2], op[3]]);
    let arg = u32::from_ne_bytes([arg[0], arg[1], arg[2], arg[3]]);
    match op {
        MEMBERSHIP_ADD | MEMBERSHIP_DROP => {
            if arg == 0 || arg > groups::MAX {
                return Err(RtError::msg(Errno::EINVAL, "Unknown multicast group"));
            }
            if op == MEMBERSHIP_ADD {
                *groups |= groups::bit(arg);
            } else {
                *groups &= !groups::bit(arg);
            }
        }
        MEMBERSHIP_SET_GROUPS => *groups = (*groups & !0xffff_ffff) | u64::from(arg),
        _ => return Err(RtError::msg(Errno::EINVAL, "Unknown membership operation")),
    }
    Ok(())
}

/// Every object of a state, as dumps show them.
type Everything = (
    Vec<Link>,
    Vec<Address>,
    Vec<Route>,
    Vec<Rule>,
    Vec<NexthopObj>,
    Vec<Neighbour>,
);

/// Everything a dump shows, for comparing states.
fn everything(fib: &Fib) -> Everything {
    (
        fib.links(),
        fib.addrs(None),
        fib.routes(None),
        fib.rules(None),
        fib.nexthops(),
        // A neighbour request that fails can leave the entry it created, in state NONE, as
        // the kernel does; every other entry and every proxy entry must be unchanged.
        fib.neighbours(None, false)
            .into_iter()
            .filter(|n| n.state != nud::NONE)
            .chain(fib.neighbours(None, true))
            .collect(),
    )
}

/// The engine's robustness property, for the fuzzer and the tests: on a small configured
/// state, handling `datagram` never panics, every dump it starts encodes to NLMSG_DONE, and
/// if no request in it succeeded the state is unchanged. Panics when the property fails.
pub fn check_datagram(datagram: &[u8]) {
    let mut e = Engine::default();
    let mut setup = ClientCtx::default();
    let mut ignored = Outcome::default();
    let eth0 = Link {
        ifname: Some("eth0".into()),
        kind: Some(LinkKind::Dummy),
        flags: IFF_UP,
        change: IFF_UP,
        ..Link::default()
    };
    let mut r = Route::new(
        Family::Inet,
        Prefix {
            addr: std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 1, 0, 0)),
            len: 16,
        },
    );
    r.rtype = RouteType::Blackhole;
    let mut stream = Vec::new();
    for (i, req) in [
        Request::NewLink(eth0, ReqFlags::ADD),
        Request::NewRoute(r, ReqFlags::ADD),
    ]
    .iter()
    .enumerate()
    {
        convert::request_message(req, i as u32 + 1, 0).emit(&mut stream);
    }
    e.handle(&stream, &mut setup, 0, &mut ignored);
    let before = everything(&e.fib);
    let mut ctx = ClientCtx::default();
    let mut out = Outcome::default();
    e.handle(datagram, &mut ctx, u64::MAX, &mut out);
    for r in &mut out.replies {
        if let Reply::Dump(d) = r {
            let mut buf = Vec::new();
            while d.fill(&mut buf, 16 << 10) {
                buf.clear();
            }
        }
    }
    if !out.changed {
        assert!(
            everything(&e.fib) == before,
            "a datagram with no success changed the state"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Valid requests with bytes flipped, truncated and repeated: the fuzz property on a
    /// deterministic sample, so CI checks it on every run.
    #[test]
    fn mangled_requests_never_change_state_unless_they_succeed() {
        let mut r = Route::new(
            Family::Inet,
            Prefix {
                addr: "10.2.0.0".parse().unwrap(),
                len: 16,
            },
        );
        r.nexthop.gateway = Some("10.1.2.3".parse().unwrap());
        let reqs = [
            Request::NewRoute(r.clone(), ReqFlags::ADD),
            Request::DelRoute(r),
            Request::NewLink(
                Link {
                    ifname: Some("x".into()),
                    kind: Some(LinkKind::Dummy),
                    ..Link::default()
                },
                ReqFlags::ADD,
            ),
            Request::DumpRoutes(None),
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..600 {
            let req = &reqs[round % reqs.len()];
            let mut b = convert::request_message(req, 1, 0).to_bytes();
            for _ in 0..(next() % 4) {
                let i = (next() as usize) % b.len();
                b[i] ^= 1 << (next() % 8);
            }
            if next() % 5 == 0 {
                let keep = (next() as usize) % b.len();
                b.truncate(keep);
            }
            check_datagram(&b);
        }
    }

    /// Neighbour notifications are stamped as the kernel stamps them: sequence 0, the
    /// requester's port on RTM_NEWNEIGH and port 0 on RTM_DELNEIGH; a delete of a valid entry
    /// announces its FAILED state first.
    #[test]
    fn neighbour_changes_are_announced_as_the_kernel_does() {
        let mut e = Engine::default();
        let mut ctx = ClientCtx {
            port: 77,
            groups: groups::bit(groups::NEIGH),
        };
        let eth0 = Link {
            ifname: Some("eth0".into()),
            kind: Some(LinkKind::Dummy),
            ..Link::default()
        };
        let mut n = Neighbour::new("192.0.2.10".parse().unwrap(), 2);
        n.lladdr = Some(vec![2, 0, 0, 0, 0, 0x10]);
        let mut stream = Vec::new();
        for (i, req) in [
            Request::NewLink(eth0, ReqFlags::ADD),
            Request::NewNeigh(n.clone(), ReqFlags::ADD),
            Request::DelNeigh(n),
        ]
        .iter()
        .enumerate()
        {
            convert::request_message(req, i as u32 + 1, 0).emit(&mut stream);
        }
        let mut out = Outcome::default();
        let listening = ctx.groups;
        e.handle(&stream, &mut ctx, listening, &mut out);
        let seen: Vec<(u16, u32, u32, u16)> = out
            .notes
            .iter()
            .filter(|n| n.group == groups::NEIGH)
            .map(|n| {
                let (m, _) = NetlinkMessage::parse(&n.bytes, 0).unwrap();
                let Payload::Neighbour(nm) = &m.payload else {
                    panic!("a neighbour message")
                };
                let h = m.header;
                (h.message_type, h.sequence, h.port, nm.header.state)
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (mt::RTM_NEWNEIGH, 0, 77, nud::PERMANENT),
                (mt::RTM_NEWNEIGH, 0, 77, nud::FAILED),
                (mt::RTM_DELNEIGH, 0, 0, nud::FAILED),
            ]
        );
    }

    #[test]
    fn membership_requests_join_and_leave_groups() {
        let mut e = Engine::default();
        let mut ctx = ClientCtx::default();
        let mut out = Outcome::default();
        e.handle(
            &membership_request(MEMBERSHIP_ADD, groups::IPV4_ROUTE, 1),
            &mut ctx,
            0,
            &mut out,
        );
        assert!(groups::has(ctx.groups, groups::IPV4_ROUTE));
        e.handle(
            &membership_request(MEMBERSHIP_DROP, groups::IPV4_ROUTE, 2),
            &mut ctx,
            0,
            &mut out,
        );
        assert_eq!(ctx.groups, 0);
        e.handle(
            &membership_request(MEMBERSHIP_ADD, 0, 3),
            &mut ctx,
            0,
            &mut out,
        );
        let Some(Reply::Message(last)) = out.replies.last() else {
            panic!("an answer")
        };
        assert_eq!(i32::from_ne_bytes(last[16..20].try_into().unwrap()), -22);
    }
}
