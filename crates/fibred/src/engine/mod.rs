//! The request engine: rtnetlink datagrams in, answers and notifications out.
//!
//! [`Engine`] owns the [`Fib`] (as a [`FibWriter`]: the copy it changes and the copy readers
//! see) and is driven by exactly one thread (the daemon's writer); it has no I/O, so the fuzzer
//! and the tests drive it directly. Reads are also answered without it, from the published
//! copy, by [`handle_reads`] on any thread. One call to [`Engine::handle`] takes
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
//! - Dumps of links, addresses, rules and next-hop objects are snapshots taken at request
//!   time. Route dumps (which can be millions of routes) read the published state a piece at
//!   a time from a cursor, as the kernel's do: each piece is consistent, and a route dump
//!   started after a change shows it.
//! - Changes become visible to readers at [`Engine::publish`] (the daemon publishes after
//!   each batch, before answering it); a route dump requested after changes in the same batch
//!   publishes them first.

use crate::groups;
use crate::view::{Change, FibReader, FibWriter};
use fibre_fib::types::*;
use fibre_fib::{Fib, RouteDumpPos, RouteEntry, Settings};
use fibre_netlink::convert::{self, Request, RequestError};
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::{NetlinkHeader, NetlinkMessage, Payload};
use std::net::IpAddr;

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
    /// The peer may only read (it lacks CAP_NET_ADMIN; the server decides, see
    /// `server::Access`): any other rtnetlink request gets EPERM before it is parsed, as the
    /// kernel's `rtnetlink_rcv_msg` refuses it. The daemon's own contexts leave it false.
    pub read_only: bool,
}

/// Highest rtnetlink message type (the kernel's RTM_MAX); types above it are no request the
/// permission check knows.
const RTM_MAX: u16 = 123;

/// Whether a read-only peer is refused `msg` (of type `t`, from NLMSG_MIN_TYPE on): the
/// kernel lets anyone send the GET kind (type & 3 == 2 counting from RTM_BASE) and checks
/// CAP_NET_ADMIN for the others, after skipping messages with an empty body.
fn needs_admin(msg: &[u8], t: u16) -> bool {
    t <= RTM_MAX && (t - 0x10) & 3 != 2 && msg.len() > NetlinkHeader::LEN
}

/// One answer to a client, in order.
pub enum Reply {
    /// Complete messages (ACKs, errors, GET answers), each padded to 4 bytes, back to back:
    /// consecutive answers share one buffer, so an ACK costs no allocation.
    Messages(Vec<u8>),
    /// A dump, encoded as the client reads it.
    Dump(DumpStream),
}

/// The length of the longest run of whole messages at the start of `bytes` (a
/// [`Reply::Messages`] buffer) that fits in `limit` bytes and may share a datagram, or of the
/// first message if even that does not fit. ACKs and errors share datagrams (a table load is
/// acknowledged a datagram at a time, not a route at a time); any other message goes alone
/// (see [`alone`]).
pub fn fit(bytes: &[u8], limit: usize) -> usize {
    let mut n = 0;
    while let Some(h) = bytes.get(n..n + 4) {
        let len = (u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize)
            .next_multiple_of(4)
            .max(NetlinkHeader::LEN);
        let end = (n + len).min(bytes.len());
        if n > 0 && (end > limit || alone(&bytes[n..])) {
            break;
        }
        n = end;
        if alone(bytes) {
            break;
        }
    }
    n
}

/// True when the first message of `bytes` travels in a datagram of its own: an answer to a
/// GET, or the NLMSG_DONE of a dump that failed. The kernel unicasts each in an skb of its
/// own, and clients (pyroute2) take every message of the datagram that holds the answer as
/// the answer.
pub fn alone(bytes: &[u8]) -> bool {
    bytes
        .get(4..6)
        .is_some_and(|t| u16::from_ne_bytes([t[0], t[1]]) != mt::NLMSG_ERROR)
}

/// The messages of a [`Reply::Messages`] buffer, padding included.
pub fn split_messages(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (m, r) = rest.split_at(fit(rest, 0));
        rest = r;
        Some(m)
    })
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
    /// Bytes the first buffer of messages is made for (see [`Outcome::for_requests`]).
    first_capacity: usize,
}

impl Outcome {
    /// An outcome for answering `bytes` of requests. A table load is answered with an ACK
    /// per request, each smaller than its request: one buffer of that size takes every ACK of
    /// the batch without growing (a growing buffer copies and faults in every ACK again).
    pub fn for_requests(bytes: usize) -> Outcome {
        Outcome {
            first_capacity: bytes,
            ..Outcome::default()
        }
    }

    /// The buffer the next complete message goes into.
    fn messages(&mut self) -> &mut Vec<u8> {
        if !matches!(self.replies.last(), Some(Reply::Messages(_))) {
            let capacity = std::mem::take(&mut self.first_capacity);
            self.replies
                .push(Reply::Messages(Vec::with_capacity(capacity)));
        }
        match self.replies.last_mut() {
            Some(Reply::Messages(b)) => b,
            _ => unreachable!("pushed above"),
        }
    }

    /// Appends one message, padded.
    fn message(&mut self, m: &NetlinkMessage<'_>) {
        let b = self.messages();
        m.emit(b);
        pad4(b);
    }
}

/// A route dump in progress: a cursor into the published state, read a piece at a time.
struct RouteDump {
    reader: FibReader,
    family: Option<Family>,
    pos: RouteDumpPos,
    templates: Templates,
}

/// Most templates one dump keeps: bounds its memory whatever the table holds (a table
/// spread over more distinct route infos than this just encodes more routes in full).
const MAX_TEMPLATES: usize = 4096;

/// Routes already encoded in this dump, by (table, route info): a route whose info and
/// table another route had is that route's bytes with the destination and tos patched in
/// (see [`fibre_fib::RouteEntry::info`]), so a table of a million prefixes over a few
/// dozen next hops encodes a few dozen routes and copies the rest. Valid while the state's
/// generation is the one they were made at; both published copies go through the same
/// changes, so a generation names one state whichever copy shows it.
#[derive(Default)]
struct Templates {
    gen: u64,
    /// Keyed by table << 32 | info.
    map: std::collections::HashMap<u64, Template, TemplateHasher>,
}

/// The table half of a template's key is chosen by netlink peers (the same info in many
/// tables differs only there), so the hash is keyed; foldhash costs two multiplies per
/// key, where SipHash would be a third of a dump's CPU time.
type TemplateHasher = fibre_fib::hash::KeyedState;

/// An encoded route and where its RTA_DST value is.
struct Template {
    bytes: Vec<u8>,
    dst: usize,
}

/// Offsets of `rtm_dst_len` and `rtm_tos` in an encoded route message.
const DST_LEN_AT: usize = NetlinkHeader::LEN + 1;
const TOS_AT: usize = NetlinkHeader::LEN + 3;

impl Templates {
    /// Appends the route `e` as an NLM_F_MULTI RTM_NEWROUTE message.
    fn emit(&mut self, fib: &Fib, e: &RouteEntry<'_>, seq: u32, port: u32, out: &mut Vec<u8>) {
        if self.gen != fib.gen() {
            self.map.clear();
            self.gen = fib.gen();
        }
        let dst = e.dst();
        // A default route has no RTA_DST to patch; a source prefix is not in the key.
        if dst.len == 0 || e.has_src() {
            return Self::encode(e, seq, port, out);
        }
        let key = u64::from(e.table()) << 32 | u64::from(e.info());
        if let Some(t) = self.map.get(&key) {
            let start = out.len();
            out.extend_from_slice(&t.bytes);
            let m = &mut out[start..];
            m[DST_LEN_AT] = dst.len;
            m[TOS_AT] = e.tos();
            match dst.addr {
                IpAddr::V4(a) => m[t.dst..t.dst + 4].copy_from_slice(&a.octets()),
                IpAddr::V6(a) => m[t.dst..t.dst + 16].copy_from_slice(&a.octets()),
            }
            return;
        }
        let start = out.len();
        Self::encode(e, seq, port, out);
        if self.map.len() < MAX_TEMPLATES {
            let bytes = out[start..].to_vec();
            if let Some(dst) = dst_value_offset(&bytes) {
                self.map.insert(key, Template { bytes, dst });
            }
        }
    }

    fn encode(e: &RouteEntry<'_>, seq: u32, port: u32, out: &mut Vec<u8>) {
        let mut r = e.route();
        convert::as_reported(&mut r);
        convert::emit_route(&r, mt::RTM_NEWROUTE, nf::NLM_F_MULTI, seq, port, out);
    }
}

/// The offset of the RTA_DST value in an encoded route message.
fn dst_value_offset(m: &[u8]) -> Option<usize> {
    let mut off = NetlinkHeader::LEN + fibre_netlink::route::RouteHeader::LEN;
    while let Some(h) = m.get(off..off + 4) {
        let len = u16::from_ne_bytes([h[0], h[1]]) as usize;
        if u16::from_ne_bytes([h[2], h[3]]) == fibre_netlink::route::RTA::DST {
            return Some(off + 4);
        }
        if len < 4 {
            return None;
        }
        off += len.next_multiple_of(4);
    }
    None
}

enum Items {
    Links(Vec<Link>),
    Addrs(Vec<Address>),
    Routes(RouteDump),
    Rules(Vec<Rule>),
    Nexthops(Vec<NexthopObj>),
    Buckets(Vec<NexthopBucket>),
    Neighs(Vec<Neighbour>),
}

impl Items {
    fn len(&self) -> usize {
        match self {
            Items::Links(v) => v.len(),
            Items::Addrs(v) => v.len(),
            Items::Routes(_) => 0,
            Items::Rules(v) => v.len(),
            Items::Nexthops(v) => v.len(),
            Items::Buckets(v) => v.len(),
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
            Items::Routes(_) => return,
            Items::Rules(v) => (mt::RTM_NEWRULE, Payload::Rule(convert::rule_message(&v[i]))),
            Items::Nexthops(v) => (
                mt::RTM_NEWNEXTHOP,
                Payload::Nexthop(convert::nexthop_message(&v[i])),
            ),
            Items::Buckets(v) => (
                mt::RTM_NEWNEXTHOPBUCKET,
                Payload::Nexthop(convert::bucket_message(&v[i])),
            ),
            Items::Neighs(v) => (
                mt::RTM_NEWNEIGH,
                Payload::Neighbour(convert::neighbour_message(&v[i])),
            ),
        };
        convert::message(t, nf::NLM_F_MULTI, seq, port, p).emit(out);
    }
}

/// A dump in progress, encoded as NLM_F_MULTI messages and ended by NLMSG_DONE, a datagram's
/// worth at a time. Links, addresses, rules and next-hop objects are a snapshot taken at
/// request time; routes are read from the published state piece by piece, each piece under
/// one short read, resuming after the last route sent (as the kernel's dumps resume from a
/// cursor: a route changed during a long dump may or may not be in it).
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
        let (seq, port) = (self.seq, self.port);
        if let Items::Routes(d) = &mut self.items {
            let fib = d.reader.read();
            let templates = &mut d.templates;
            let more = fib.dump_route_entries(d.family, &mut d.pos, |e| {
                let before = out.len();
                templates.emit(&fib, e, seq, port, out);
                if out.len() - start > limit && before > start {
                    out.truncate(before);
                    return false;
                }
                pad4(out);
                true
            });
            if more {
                return true;
            }
        }
        while self.next < self.items.len() {
            let before = out.len();
            self.items.emit(self.next, seq, port, out);
            if out.len() - start > limit && before > start {
                out.truncate(before);
                return true;
            }
            pad4(out);
            self.next += 1;
        }
        if !self.done_sent {
            let before = out.len();
            convert::done(seq, port).emit(out);
            if out.len() - start > limit && before > start {
                out.truncate(before);
                return true;
            }
            self.done_sent = true;
        }
        false
    }
}

fn pad4(out: &mut Vec<u8>) {
    out.resize(out.len().next_multiple_of(4), 0);
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

/// The FIB and the request semantics around it. See the module documentation.
pub struct Engine {
    view: FibWriter,
    /// Reads the published state for the route dumps this engine starts.
    reader: FibReader,
    /// Inside [`Engine::begin`] .. [`Engine::publish`].
    batching: bool,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new(Settings::default())
    }
}

/// Message types a reader thread answers from the published state ([`read_only`]).
const READ_TYPES: [u16; 6] = [
    mt::RTM_GETLINK,
    mt::RTM_GETADDR,
    mt::RTM_GETROUTE,
    mt::RTM_GETRULE,
    mt::RTM_GETNEXTHOP,
    mt::RTM_GETNEIGH,
];

/// True when every message of `datagram` is a GET request (or dump) that [`handle_reads`]
/// answers from the published state, and the datagram is framed regularly.
pub fn read_only(datagram: &[u8]) -> bool {
    let mut off = 0;
    while off < datagram.len() {
        let Some(h) = datagram.get(off..off + NetlinkHeader::LEN) else {
            return false;
        };
        let len = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize;
        let t = u16::from_ne_bytes([h[4], h[5]]);
        let flags = u16::from_ne_bytes([h[6], h[7]]);
        if len < NetlinkHeader::LEN
            || off + len > datagram.len()
            || flags & nf::NLM_F_REQUEST == 0
            || !READ_TYPES.contains(&t)
        {
            return false;
        }
        off += len.next_multiple_of(4);
    }
    off > 0
}

/// Answers a datagram for which [`read_only`] holds from the published state, on the
/// calling thread: what [`Engine::handle`] would answer after the last publish.
pub fn handle_reads(reader: &FibReader, datagram: &[u8], client: &ClientCtx, out: &mut Outcome) {
    each_message(datagram, |msg| {
        process(msg, None, client.port, out, |req, origin, out| {
            read(&reader.read(), reader, req, origin, out)
        })
    });
}

/// A datagram of requests whose route changes were read ahead, off the writer thread: a
/// client thread reads the next batch while the writer applies the previous one.
/// [`Engine::handle_prepared`] answers it exactly as [`Engine::handle`] answers its bytes:
/// reading a route change is a function of the message's bytes alone
/// (`convert::route_request`), so reading it earlier, elsewhere, changes nothing.
pub struct Prepared {
    bytes: Box<[u8]>,
    /// What `convert::route_request` makes of each message, in order, for the messages
    /// [`Engine::handle`] hands to it (requests of types from NLMSG_MIN_TYPE on); `None` for
    /// the others.
    routes: Vec<Option<Result<Request, RequestError>>>,
}

impl Prepared {
    /// Reads the route changes of `bytes`.
    pub fn new(bytes: Box<[u8]>) -> Prepared {
        // Sized first: growing a list of requests a few hundred bytes each copies them again.
        let mut n = 0;
        each_message(&bytes, |_| n += 1);
        let mut routes = Vec::with_capacity(n);
        each_message(&bytes, |msg| {
            let flags = u16::from_ne_bytes([msg[6], msg[7]]);
            let t = u16::from_ne_bytes([msg[4], msg[5]]);
            let parsed = (t >= 0x10 && flags & nf::NLM_F_REQUEST != 0)
                .then(|| convert::route_request(msg))
                .flatten();
            routes.push(parsed);
        });
        // A datagram with no route change needs no list.
        if routes.iter().all(Option::is_none) {
            routes = Vec::new();
        }
        Prepared { bytes, routes }
    }

    /// The datagram's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Calls `f` with every message of a datagram, as the kernel's `netlink_rcv_skb` walks it.
fn each_message(datagram: &[u8], mut f: impl FnMut(&[u8])) {
    let mut off = 0;
    while datagram.len() - off >= NetlinkHeader::LEN {
        let rest = &datagram[off..];
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        // The kernel stops reading a datagram at an impossible length, silently.
        if len < NetlinkHeader::LEN || len > rest.len() {
            break;
        }
        f(&rest[..len]);
        off += (len + 3) & !3;
        if off >= datagram.len() {
            break;
        }
    }
}

/// Parses and converts one request message (unless `read` holds what
/// `convert::route_request` made of it already), hands it to `apply`, and answers: the error,
/// or the ACK when NLM_F_ACK asks for one.
fn process(
    msg: &[u8],
    read: Option<Result<Request, RequestError>>,
    port: u32,
    out: &mut Outcome,
    apply: impl FnOnce(Request, Origin, &mut Outcome) -> Result<(), RequestError>,
) {
    let flags = u16::from_ne_bytes([msg[6], msg[7]]);
    let want_ack = flags & nf::NLM_F_ACK != 0;
    let origin = Origin {
        seq: u32::from_ne_bytes([msg[8], msg[9], msg[10], msg[11]]),
        port,
    };
    // Route changes (table loads) are read straight from the bytes.
    let request = read
        .or_else(|| convert::route_request(msg))
        .unwrap_or_else(|| convert::request_bytes(msg));
    let result = request.and_then(|req| apply(req, origin, out));
    // A dump is acknowledged by its NLMSG_DONE alone, NLM_F_ACK or not, and one that fails
    // says so in its NLMSG_DONE, as the kernel's netlink_dump_done does.
    let t = u16::from_ne_bytes([msg[4], msg[5]]);
    if flags & nf::NLM_F_DUMP == nf::NLM_F_DUMP && READ_TYPES.contains(&t) {
        if let Err(e) = result {
            out.message(&convert::done_error(origin.seq, port, &e));
        }
        return;
    }
    answer(msg, result, want_ack, port, out);
}

fn answer(
    msg: &[u8],
    result: Result<(), RequestError>,
    want_ack: bool,
    port: u32,
    out: &mut Outcome,
) {
    match result {
        Err(e) => out.message(&convert::ack(msg, Err(&e), false, port)),
        Ok(()) if want_ack => emit_ack(msg, port, out.messages()),
        Ok(()) => {}
    }
}

/// Length of an ACK: a header, the error code and the echoed request header.
const ACK_LEN: usize = 2 * NetlinkHeader::LEN + 4;

/// Appends the ACK of `msg` (at least a header long), byte for byte what
/// `convert::ack(msg, Ok(()), ..)` encodes, without building the message: a table load
/// acknowledges every route.
fn emit_ack(msg: &[u8], port: u32, out: &mut Vec<u8>) {
    let mut a = [0u8; ACK_LEN];
    a[0..4].copy_from_slice(&(ACK_LEN as u32).to_ne_bytes());
    a[4..6].copy_from_slice(&mt::NLMSG_ERROR.to_ne_bytes());
    a[6..8].copy_from_slice(&nf::NLM_F_CAPPED.to_ne_bytes());
    // Sequence number of the request; port of the client's socket; error 0.
    a[8..12].copy_from_slice(&msg[8..12]);
    a[12..16].copy_from_slice(&port.to_ne_bytes());
    a[20..].copy_from_slice(&msg[..NetlinkHeader::LEN]);
    out.extend_from_slice(&a);
}

fn dump(items: Items, origin: Origin, out: &mut Outcome) {
    out.replies.push(Reply::Dump(DumpStream {
        items,
        next: 0,
        seq: origin.seq,
        port: origin.port,
        done_sent: false,
    }));
}

fn get_reply(t: u16, payload: Payload<'_>, origin: Origin, out: &mut Outcome) {
    out.message(&convert::message(t, 0, origin.seq, origin.port, payload));
}

/// True for the requests [`read`] answers.
fn is_read(req: &Request) -> bool {
    matches!(
        req,
        Request::DumpLinks
            | Request::DumpAddrs(_)
            | Request::DumpRoutes(_)
            | Request::DumpRules(_)
            | Request::EmptyDump { .. }
            | Request::DumpNexthops
            | Request::GetLink(_)
            | Request::GetRoute(_)
            | Request::GetNexthop(_)
            | Request::GetBucket(..)
            | Request::DumpBuckets(_)
            | Request::DumpNeighs(_)
            | Request::GetNeigh(_)
    )
}

/// The route a change names: a request of the general path, or one read ahead and kept
/// in the log (list number and index, see [`crate::view::FibWriter::keep`]). The flags are
/// those of an add; `None` deletes. Lives for one call on the stack; boxing the route would
/// allocate for every change of the general path.
#[allow(clippy::large_enum_variant)]
enum RouteChange {
    Owned(Route, Option<ReqFlags>),
    ReadAhead(u64, usize),
}

/// Answers a read request ([`is_read`]) from `fib`; route dumps read through `dumps` as they
/// go. Anything else is not supported here.
fn read(
    fib: &Fib,
    dumps: &FibReader,
    req: Request,
    origin: Origin,
    out: &mut Outcome,
) -> Result<(), RequestError> {
    match req {
        Request::DumpLinks => dump(Items::Links(fib.links()), origin, out),
        Request::DumpAddrs(f) => dump(Items::Addrs(fib.addrs(f)), origin, out),
        Request::DumpRoutes(family) => dump(
            Items::Routes(RouteDump {
                reader: dumps.clone(),
                family,
                pos: RouteDumpPos::default(),
                templates: Templates::default(),
            }),
            origin,
            out,
        ),
        Request::DumpRules(f) => dump(Items::Rules(fib.rules(f)), origin, out),
        Request::EmptyDump { .. } => dump(Items::Rules(Vec::new()), origin, out),
        Request::DumpNexthops => dump(Items::Nexthops(fib.nexthops()), origin, out),
        Request::DumpBuckets(f) => {
            let v = fib.nexthop_buckets(f.id, f.nhid, f.dev)?;
            dump(Items::Buckets(v), origin, out)
        }
        Request::GetBucket(id, index) => get_reply(
            mt::RTM_NEWNEXTHOPBUCKET,
            Payload::Nexthop(convert::bucket_message(&fib.nexthop_bucket(id, index)?)),
            origin,
            out,
        ),
        Request::GetLink(l) => {
            let found = fib.links().into_iter().find(|x| {
                if l.ifindex != 0 {
                    x.ifindex == l.ifindex
                } else {
                    l.ifname.is_some() && x.ifname == l.ifname
                }
            });
            let Some(link) = found else {
                return Err(RtError::new(Errno::ENODEV).into());
            };
            get_reply(
                mt::RTM_NEWLINK,
                Payload::Link(convert::link_message(&link)),
                origin,
                out,
            );
        }
        Request::GetRoute(q) => {
            let r = fib.route_get(&q)?;
            get_reply(
                mt::RTM_NEWROUTE,
                Payload::Route(convert::route_message(&r)),
                origin,
                out,
            );
        }
        Request::GetNexthop(id) => {
            let Some(nh) = fib.nexthops().into_iter().find(|n| n.id == id) else {
                return Err(RtError::msg(Errno::ENOENT, "Nexthop id does not exist").into());
            };
            get_reply(
                mt::RTM_NEWNEXTHOP,
                Payload::Nexthop(convert::nexthop_message(&nh)),
                origin,
                out,
            );
        }
        Request::DumpNeighs(d) => {
            let v: Vec<Neighbour> = fib
                .neighbours(d.family, d.proxy)
                .into_iter()
                .filter(|n| d.ifindex == 0 || n.ifindex == d.ifindex)
                .collect();
            dump(Items::Neighs(v), origin, out)
        }
        Request::GetNeigh(n) => {
            let found = fib.neigh_get(&n)?;
            get_reply(
                mt::RTM_NEWNEIGH,
                Payload::Neighbour(convert::neighbour_message(&found)),
                origin,
                out,
            );
        }
        _ => return Err(RtError::new(Errno::EOPNOTSUPP).into()),
    }
    Ok(())
}

impl Engine {
    /// A fresh state with `settings`, published.
    pub fn new(settings: Settings) -> Engine {
        let mut view = FibWriter::new(settings);
        // Both copies record neighbour changes, for notifications (replayed into the other
        // copy like any change).
        let _ = view.apply(Change::RecordNeighEvents(true));
        view.publish();
        let reader = view.reader();
        Engine {
            view,
            reader,
            batching: false,
        }
    }

    /// The newest state, published or not.
    pub fn fib(&self) -> &Fib {
        self.view.latest()
    }

    /// A reader of the published state, for a thread that answers reads ([`handle_reads`]).
    pub fn reader(&self) -> FibReader {
        self.view.reader()
    }

    /// Starts a batch of requests: the FIB's compiled lookup structures are brought up to
    /// date once, at [`Engine::publish`], instead of per change.
    pub fn begin(&mut self) {
        self.view.with_standby(Fib::begin_batch);
        self.batching = true;
    }

    /// Ends the batch (if any) and makes every change so far visible to readers.
    pub fn publish(&mut self) {
        if self.batching {
            self.view.with_standby(Fib::end_batch);
            self.batching = false;
        }
        self.view.publish();
    }

    /// Brings the unpublished copy up to date (see [`crate::view`]); for idle moments.
    pub fn catch_up(&mut self) {
        self.view.catch_up();
    }

    /// How long until the next route or next-hop exception expires (zero when one is due
    /// now); `None` when nothing expires. The writer's GC timer.
    pub fn next_expiry(&self) -> Option<std::time::Duration> {
        let fib = self.fib();
        let at = fib.next_expiry()?;
        Some(std::time::Duration::from_millis(
            at.saturating_sub(fib.clock().now_ms()),
        ))
    }

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

    /// Handles one datagram from a client; answers and notifications are appended to `out`.
    /// `listening` is the union of every client's groups.
    pub fn handle(
        &mut self,
        datagram: &[u8],
        client: &mut ClientCtx,
        listening: u64,
        out: &mut Outcome,
    ) {
        each_message(datagram, |msg| self.one(msg, None, client, listening, out));
    }

    /// [`Engine::handle`] of a datagram whose route changes were read ahead. The list of
    /// what was read goes to the log whole and each route change is applied where it lies
    /// (see [`crate::view`]); everything else takes the general path.
    pub fn handle_prepared(
        &mut self,
        datagram: Prepared,
        client: &mut ClientCtx,
        listening: u64,
        out: &mut Outcome,
    ) {
        let Prepared { bytes, routes } = datagram;
        if routes.is_empty() || client.read_only {
            return self.handle(&bytes, client, listening, out);
        }
        let list = self.view.keep(routes);
        let mut at = 0;
        each_message(&bytes, |msg| {
            // `Prepared::new` read the same messages in the same order.
            let i = at;
            at += 1;
            if self.view.read_ahead(list, i).is_none() {
                let read = self.view.take_read_ahead(list, i);
                return self.one(msg, read, client, listening, out);
            }
            // What `one` and `process` do with a route change, without moving it.
            let want_ack = u16::from_ne_bytes([msg[6], msg[7]]) & nf::NLM_F_ACK != 0;
            let origin = Origin {
                seq: u32::from_ne_bytes([msg[8], msg[9], msg[10], msg[11]]),
                port: client.port,
            };
            let r = self.route_change(RouteChange::ReadAhead(list, i), origin, listening, out);
            answer(
                msg,
                r.map_err(RequestError::from),
                want_ack,
                client.port,
                out,
            );
        });
    }

    fn one(
        &mut self,
        msg: &[u8],
        read: Option<Result<Request, RequestError>>,
        client: &mut ClientCtx,
        listening: u64,
        out: &mut Outcome,
    ) {
        let port = client.port;
        let flags = u16::from_ne_bytes([msg[6], msg[7]]);
        let t = u16::from_ne_bytes([msg[4], msg[5]]);
        let want_ack = flags & nf::NLM_F_ACK != 0;
        if t == FIBRE_MEMBERSHIP {
            let r = membership(msg, &mut client.groups);
            answer(msg, r.map_err(RequestError::from), want_ack, port, out);
            return;
        }
        // Control messages and messages that are not requests are only acknowledged.
        if t < 0x10 || flags & nf::NLM_F_REQUEST == 0 {
            answer(msg, Ok(()), want_ack, port, out);
            return;
        }
        if client.read_only && needs_admin(msg, t) {
            let e = RequestError::from(RtError::new(Errno::EPERM));
            answer(msg, Err(e), want_ack, port, out);
            return;
        }
        process(msg, read, port, out, |req, origin, out| {
            self.apply(req, origin, listening, out)
        });
    }

    fn apply(
        &mut self,
        req: Request,
        origin: Origin,
        listening: u64,
        out: &mut Outcome,
    ) -> Result<(), RequestError> {
        if matches!(req, Request::DumpRoutes(_)) {
            // The dump reads the published state: publish what came before it.
            let batching = self.batching;
            self.publish();
            if batching {
                self.begin();
            }
        }
        if is_read(&req) {
            return read(self.view.latest(), &self.reader, req, origin, out);
        }
        match req {
            Request::NewRoute(r, f) => {
                self.route_change(RouteChange::Owned(r, Some(f)), origin, listening, out)?
            }
            Request::DelRoute(r) => {
                self.route_change(RouteChange::Owned(r, None), origin, listening, out)?
            }
            Request::NewNeigh(n, f) => {
                self.neigh_change(Change::NewNeigh(n, f), origin, listening, out)?
            }
            Request::DelNeigh(n) => {
                self.neigh_change(Change::DelNeigh(n), origin, listening, out)?
            }
            other => self.object_change(other, origin, listening, out)?,
        }
        Ok(())
    }

    /// The neighbour changes a change recorded in the copy it was applied to. Events the
    /// replay of earlier changes recorded in that copy were announced already (from the other
    /// copy) and are dropped first.
    fn apply_recording(&mut self, change: Change) -> (Result<(), RtError>, Vec<NeighEvent>) {
        self.view.with_standby(Fib::take_neigh_events);
        let r = self.view.apply(change);
        (r, self.view.with_standby(Fib::take_neigh_events))
    }

    /// A neighbour add, change or delete, announced as the kernel announces it (a failed one
    /// too can be: the kernel keeps the entry it created and announces flag changes made
    /// before the failure).
    fn neigh_change(
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
    fn route_change(
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
    fn object_change(
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
        let (r, flushed) = self.apply_recording(change);
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

/// `IFF_UP`, for the links the checks bring up.
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
/// state, handling `datagram` never panics, every dump it starts encodes to NLMSG_DONE, if no
/// request in it succeeded the state is unchanged, and the datagram read ahead ([`Prepared`])
/// gets the same answers, notifications and state. Panics when the property fails.
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
    let before = everything(e.fib());
    // The same datagram read ahead (as the daemon's client threads do) on an equal engine.
    let mut ahead = Engine::default();
    ahead.handle(
        &stream,
        &mut ClientCtx::default(),
        0,
        &mut Outcome::default(),
    );
    let mut ctx = ClientCtx::default();
    let mut out = Outcome::default();
    e.handle(datagram, &mut ctx, u64::MAX, &mut out);
    let mut ahead_ctx = ClientCtx::default();
    let mut ahead_out = Outcome::default();
    ahead.handle_prepared(
        Prepared::new(datagram.into()),
        &mut ahead_ctx,
        u64::MAX,
        &mut ahead_out,
    );
    let answers = drain(&mut out);
    assert!(
        answers == drain(&mut ahead_out),
        "a datagram read ahead is answered as its bytes are"
    );
    assert!(everything(e.fib()) == everything(ahead.fib()));
    // The other copy, brought up to date by replaying the log (route changes read ahead are
    // applied where they lie in the kept list).
    ahead.publish();
    ahead.catch_up();
    assert!(
        everything(e.fib()) == everything(ahead.fib()),
        "the replayed copy is the applied one"
    );
    assert_eq!(ctx.groups, ahead_ctx.groups);
    if !out.changed {
        assert!(
            everything(e.fib()) == before,
            "a datagram with no success changed the state"
        );
    }
    // From a peer that may only read, read ahead or not, nothing changes the state.
    for read_ahead in [false, true] {
        let mut guarded = Engine::default();
        guarded.handle(&stream, &mut ClientCtx::default(), 0, &mut ignored);
        let mut ro = ClientCtx {
            read_only: true,
            ..ClientCtx::default()
        };
        let mut out = Outcome::default();
        if read_ahead {
            guarded.handle_prepared(Prepared::new(datagram.into()), &mut ro, u64::MAX, &mut out);
        } else {
            guarded.handle(datagram, &mut ro, u64::MAX, &mut out);
        }
        drain(&mut out);
        assert!(
            !out.changed && everything(guarded.fib()) == before,
            "a reader changed the state"
        );
    }
}

/// What an outcome says: every answer as bytes, and every notification with its group.
type Said = (Vec<Vec<u8>>, Vec<(u32, Vec<u8>)>);

/// Every answer of an outcome as bytes (dumps read to their end) and its notifications.
fn drain(out: &mut Outcome) -> Said {
    let mut answers = Vec::new();
    for r in &mut out.replies {
        match r {
            Reply::Messages(m) => answers.push(m.clone()),
            Reply::Dump(d) => {
                let mut buf = Vec::new();
                while d.fill(&mut buf, 16 << 10) {
                    answers.push(std::mem::take(&mut buf));
                }
                answers.push(buf);
            }
        }
    }
    let notes = out
        .notes
        .iter()
        .map(|n| (n.group, n.bytes.clone()))
        .collect();
    (answers, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One route info in many tables: keys that differ only in their high half. The bucket a
    /// key starts its probe at is picked by the hash's low bits, so those must tell the tables
    /// apart, or every such template would share one probe sequence.
    #[test]
    fn templates_of_one_info_in_many_tables_spread() {
        use std::hash::BuildHasher;
        const TABLES: u64 = 4096;
        let h = TemplateHasher::default();
        let starts: std::collections::HashSet<u64> = (1..=TABLES)
            .map(|t| h.hash_one(t << 32 | 7) & (TABLES - 1))
            .collect();
        // Random starts fill about 1 - 1/e of the buckets; a hash blind to the high half, one.
        assert!(
            starts.len() > TABLES as usize / 2,
            "{} starts",
            starts.len()
        );
    }

    /// The direct ACK is the general encoder's, for requests of any length and flags.
    #[test]
    fn direct_ack_is_the_encoded_ack() {
        let mut r = Route::new(
            Family::Inet,
            Prefix {
                addr: "10.2.0.0".parse().unwrap(),
                len: 16,
            },
        );
        r.nexthop.gateway = Some("10.1.2.3".parse().unwrap());
        for (seq, req) in [
            Request::NewRoute(r.clone(), ReqFlags::ADD),
            Request::DelRoute(r),
        ]
        .iter()
        .enumerate()
        {
            let mut m = convert::request_message(req, 0xdead_0000 + seq as u32, 0);
            m.header.flags |= nf::NLM_F_ACK;
            let b = m.to_bytes();
            let mut want = Vec::new();
            convert::ack(&b, Ok(()), false, 77).emit(&mut want);
            let mut got = Vec::new();
            emit_ack(&b, 77, &mut got);
            assert_eq!(got, want);
        }
    }

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

    /// Datagrams read ahead, in batches, answered as their bytes are, with both copies equal
    /// after each batch: route adds, deletes and failures among other requests, and a route
    /// dump in the middle of a datagram (it publishes, and the replay runs, while the rest of
    /// that datagram's read-ahead list is still to be applied).
    #[test]
    fn read_ahead_batches_match_the_general_path_on_both_copies() {
        let route = |third: u8, gw: Option<&str>| {
            let mut r = Route::new(
                Family::Inet,
                Prefix {
                    addr: std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 9, third, 0)),
                    len: 24,
                },
            );
            r.nexthop.gateway = gw.map(|g| g.parse().unwrap());
            r.rtype = if gw.is_some() {
                RouteType::Unicast
            } else {
                RouteType::Blackhole
            };
            r
        };
        let link = Link {
            ifname: Some("eth0".into()),
            kind: Some(LinkKind::Dummy),
            flags: IFF_UP,
            change: IFF_UP,
            ..Link::default()
        };
        let addr = Address {
            family: Family::Inet,
            prefixlen: 16,
            flags: 0,
            scope: 0,
            ifindex: 2,
            local: Some("10.1.0.1".parse().unwrap()),
            address: Some("10.1.0.1".parse().unwrap()),
            broadcast: None,
            label: None,
            metric: None,
            valid_lft: None,
            preferred_lft: None,
        };
        let datagram = |reqs: &[Request], seq: u32| {
            let mut b = Vec::new();
            for (i, r) in reqs.iter().enumerate() {
                let mut m = convert::request_message(r, seq + i as u32, 0);
                m.header.flags |= nf::NLM_F_ACK;
                m.emit(&mut b);
            }
            b
        };
        let batches = [
            vec![
                datagram(
                    &[
                        Request::NewLink(link, ReqFlags::ADD),
                        Request::NewAddr(addr, ReqFlags::ADD),
                    ],
                    1,
                ),
                datagram(
                    &[
                        Request::NewRoute(route(1, Some("10.1.0.2")), ReqFlags::ADD),
                        Request::NewRoute(route(2, None), ReqFlags::ADD),
                        // Exists already: EEXIST.
                        Request::NewRoute(route(1, Some("10.1.0.3")), ReqFlags::ADD),
                        // Unreachable gateway: an error from validation.
                        Request::NewRoute(route(3, Some("192.0.2.1")), ReqFlags::ADD),
                    ],
                    10,
                ),
            ],
            vec![
                datagram(
                    &[
                        Request::NewRoute(route(4, Some("10.1.0.2")), ReqFlags::ADD),
                        Request::DumpRoutes(Some(Family::Inet)),
                        Request::NewRoute(route(5, Some("10.1.0.3")), ReqFlags::ADD),
                        Request::DelRoute(route(2, None)),
                        Request::NewRoute(route(1, Some("10.1.0.3")), ReqFlags::REPLACE),
                        Request::DumpLinks,
                        Request::DelRoute(route(7, None)),
                    ],
                    20,
                ),
                datagram(
                    &[Request::NewRoute(route(6, Some("10.1.0.2")), ReqFlags::ADD)],
                    30,
                ),
            ],
        ];
        let (mut plain, mut ahead) = (Engine::default(), Engine::default());
        for batch in &batches {
            let (mut out, mut ahead_out) = (Outcome::default(), Outcome::default());
            let (mut ctx, mut ahead_ctx) = (ClientCtx::default(), ClientCtx::default());
            plain.begin();
            ahead.begin();
            for d in batch {
                plain.handle(d, &mut ctx, u64::MAX, &mut out);
                let p = Prepared::new(d.clone().into_boxed_slice());
                ahead.handle_prepared(p, &mut ahead_ctx, u64::MAX, &mut ahead_out);
            }
            plain.publish();
            ahead.publish();
            assert!(drain(&mut out) == drain(&mut ahead_out));
            // The published copy, then the other one once replayed.
            assert!(everything(plain.fib()) == everything(ahead.fib()));
            ahead.catch_up();
            assert!(everything(plain.fib()) == everything(ahead.fib()));
        }
        // 10.9.1.0/24 replaced, .2 deleted, .3 refused, .7 never there.
        let ours: Vec<(IpAddr, Option<IpAddr>)> = everything(ahead.fib())
            .2
            .iter()
            .filter(|r| r.dst.len == 24)
            .map(|r| (r.dst.addr, r.nexthop.gateway))
            .collect();
        let want: Vec<(IpAddr, Option<IpAddr>)> = [
            (1, "10.1.0.3"),
            (4, "10.1.0.2"),
            (5, "10.1.0.3"),
            (6, "10.1.0.2"),
        ]
        .iter()
        .map(|&(third, gw)| (route(third, None).dst.addr, gw.parse().ok()))
        .collect();
        assert_eq!(ours, want);
    }

    /// A route dump, read in pieces of every size, is the state's routes encoded one by one
    /// (what the templates copy is what encoding gives), then NLMSG_DONE.
    #[test]
    fn route_dumps_encode_every_route_as_the_model_does() {
        let mut e = Engine::default();
        let mut ctx = ClientCtx::default();
        let mut out = Outcome::default();
        let link = Link {
            ifname: Some("d0".into()),
            kind: Some(LinkKind::Dummy),
            flags: IFF_UP,
            change: IFF_UP,
            ..Link::default()
        };
        let mut reqs = vec![Request::NewLink(link, ReqFlags::ADD)];
        let v4 = |s: &str, len: u8| Prefix {
            addr: s.parse().unwrap(),
            len,
        };
        for i in 0..300u32 {
            let mut r = Route::new(
                Family::Inet,
                v4(&format!("10.{}.{}.0", i / 200, i % 200), 24),
            );
            r.nexthop.oif = 2;
            r.table = [254, 254, 1000, 7][(i % 4) as usize];
            r.tos = [0, 0, 0, 8][(i % 4) as usize];
            r.priority = (i % 5 == 0).then_some(i % 3);
            r.metrics.mtu = (i % 7 == 0).then_some(1400);
            r.rtype = if i % 11 == 0 {
                RouteType::Blackhole
            } else {
                RouteType::Unicast
            };
            if r.rtype == RouteType::Blackhole {
                r.nexthop.oif = 0;
            }
            reqs.push(Request::NewRoute(r, ReqFlags::ADD));
        }
        let mut def = Route::new(Family::Inet, v4("0.0.0.0", 0));
        def.nexthop.oif = 2;
        reqs.push(Request::NewRoute(def, ReqFlags::ADD));
        for i in 0..40u32 {
            let mut r = Route::new(Family::Inet6, v4(&format!("2001:db8:{i:x}::"), 48));
            r.nexthop.oif = 2;
            if i % 3 == 0 {
                r.src = Some(v4(&format!("2001:db8:ff{i:x}::"), 64));
            }
            reqs.push(Request::NewRoute(r, ReqFlags::ADD));
        }
        for (i, r) in reqs.iter().enumerate() {
            let m = convert::request_message(r, i as u32 + 1, 0).to_bytes();
            e.handle(&m, &mut ctx, 0, &mut out);
        }
        let failed = out
            .replies
            .iter()
            .filter_map(|r| match r {
                Reply::Messages(b) => Some(split_messages(b).filter(|m| m[16..20] != [0; 4])),
                Reply::Dump(_) => None,
            })
            .flatten()
            .count();
        assert_eq!(failed, 0);
        let mut want = Vec::new();
        for mut r in e.fib().routes(None) {
            convert::as_reported(&mut r);
            convert::emit_route(&r, mt::RTM_NEWROUTE, nf::NLM_F_MULTI, 9, 0, &mut want);
            pad4(&mut want);
        }
        convert::done(9, 0).emit(&mut want);
        for limit in [1, 100, 700, 4096, 1 << 20] {
            let mut m = convert::request_message(&Request::DumpRoutes(None), 9, 0);
            m.header.flags = nf::NLM_F_REQUEST | nf::NLM_F_DUMP;
            let mut out = Outcome::default();
            e.handle(&m.to_bytes(), &mut ctx, 0, &mut out);
            let Some(Reply::Dump(d)) = out.replies.last_mut() else {
                panic!("a dump")
            };
            let mut got = Vec::new();
            let mut piece = Vec::new();
            loop {
                piece.clear();
                let more = d.fill(&mut piece, limit);
                got.extend_from_slice(&piece);
                if !more {
                    break;
                }
            }
            assert!(got == want, "pieces of {limit} bytes");
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
            ..ClientCtx::default()
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
        let Some(Reply::Messages(b)) = out.replies.last() else {
            panic!("an answer")
        };
        let last = split_messages(b).last().expect("a message");
        assert_eq!(i32::from_ne_bytes(last[16..20].try_into().unwrap()), -22);
    }

    /// A read-only peer: every request other than a GET is refused with EPERM and no text,
    /// read ahead or not, and changes nothing; GETs, dumps and memberships are answered.
    #[test]
    fn read_only_peers_read_but_every_change_gets_eperm() {
        let mut e = Engine::default();
        let link = Link {
            ifname: Some("d0".into()),
            kind: Some(LinkKind::Dummy),
            ..Link::default()
        };
        let mut admin = ClientCtx::default();
        let mut out = Outcome::default();
        let add = convert::request_message(&Request::NewLink(link.clone(), ReqFlags::ADD), 1, 0)
            .to_bytes();
        e.handle(&add, &mut admin, 0, &mut out);
        let mut r = Route::new(
            Family::Inet,
            Prefix {
                addr: "10.2.0.0".parse().unwrap(),
                len: 16,
            },
        );
        r.rtype = RouteType::Blackhole;
        let before = everything(e.fib());
        let mut changes: Vec<Vec<u8>> = [
            Request::NewRoute(r.clone(), ReqFlags::ADD),
            Request::DelRoute(r),
            Request::NewLink(link.clone(), ReqFlags::ADD),
            Request::DelLink(link),
        ]
        .iter()
        .map(|q| convert::request_message(q, 2, 0).to_bytes())
        .collect();
        // Every other type that is not of the GET kind, up to RTM_MAX, with a family byte.
        for t in (0x10..=RTM_MAX).filter(|t| (t - 0x10) & 3 != 2) {
            let mut m = vec![0u8; 20];
            m[0..4].copy_from_slice(&20u32.to_ne_bytes());
            m[4..6].copy_from_slice(&t.to_ne_bytes());
            m[6..8].copy_from_slice(&(nf::NLM_F_REQUEST | nf::NLM_F_ACK).to_ne_bytes());
            m[16] = 2;
            changes.push(m);
        }
        let mut ctx = ClientCtx {
            read_only: true,
            ..ClientCtx::default()
        };
        for c in &changes {
            for prepared in [false, true] {
                let mut out = Outcome::default();
                e.begin();
                if prepared {
                    e.handle_prepared(Prepared::new(c.clone().into()), &mut ctx, 0, &mut out);
                } else {
                    e.handle(c, &mut ctx, 0, &mut out);
                }
                e.publish();
                e.catch_up();
                let Some(Reply::Messages(b)) = out.replies.first() else {
                    panic!("an answer to type {}", c[4]);
                };
                let (m, _) = NetlinkMessage::parse(b, 0).unwrap();
                let Payload::Error(err) = m.payload else {
                    panic!("an error")
                };
                assert_eq!((err.error, err.message()), (-1, None), "type {}", c[4]);
                assert!(
                    before == everything(e.fib()),
                    "type {} changed the state",
                    c[4]
                );
            }
        }
        let mut out = Outcome::default();
        let dump = convert::request_message(&Request::DumpLinks, 3, 0).to_bytes();
        e.handle(&dump, &mut ctx, 0, &mut out);
        e.handle(
            &membership_request(MEMBERSHIP_ADD, groups::LINK, 4),
            &mut ctx,
            0,
            &mut out,
        );
        let said = drain(&mut out);
        assert!(said.0.len() >= 2, "a dump and an ACK");
        assert!(groups::has(ctx.groups, groups::LINK));
    }

    /// As the kernel frames them: a GET's answer is a datagram of its own, apart from its
    /// ACK; a dump asked with NLM_F_ACK ends at its NLMSG_DONE; a dump whose filter fails says
    /// so in an NLMSG_DONE.
    #[test]
    fn answers_are_framed_as_the_kernel_frames_them() {
        let mut e = Engine::default();
        let mut ctx = ClientCtx::default();
        let with_ack = |r: &Request, seq| {
            let mut m = convert::request_message(r, seq, 0);
            m.header.flags |= nf::NLM_F_ACK;
            m.to_bytes()
        };
        let mut datagram = with_ack(
            &Request::GetLink(Link {
                ifindex: 1,
                ..Link::default()
            }),
            1,
        );
        datagram.extend(with_ack(&Request::DumpLinks, 2));
        // A next-hop dump filtered by NHA_ID, which the kernel's dump policy refuses.
        let mut nh = convert::request_message(&Request::DumpNexthops, 3, 0).to_bytes();
        nh.extend_from_slice(&[8, 0, 1, 0, 5, 0, 0, 0]);
        let len = nh.len() as u32;
        nh[..4].copy_from_slice(&len.to_ne_bytes());
        datagram.extend(nh);
        let mut out = Outcome::default();
        e.handle(&datagram, &mut ctx, 0, &mut out);
        let (answers, _) = drain(&mut out);
        let types: Vec<Vec<u16>> = answers
            .iter()
            .map(|b| {
                split_messages(b)
                    .map(|m| u16::from_ne_bytes([m[4], m[5]]))
                    .collect()
            })
            .collect();
        assert_eq!(
            types,
            [
                vec![mt::RTM_NEWLINK, mt::NLMSG_ERROR],
                vec![mt::RTM_NEWLINK, mt::NLMSG_DONE],
                vec![mt::NLMSG_DONE],
            ]
        );
        let (first, rest) = (&answers[0], &answers[2]);
        assert_eq!(
            fit(first, 1 << 16),
            first.len() - ACK_LEN,
            "the answer goes alone"
        );
        assert_eq!(fit(&first[first.len() - ACK_LEN..], 1 << 16), ACK_LEN);
        assert_eq!(i32::from_ne_bytes(rest[16..20].try_into().unwrap()), -22);
    }
}
