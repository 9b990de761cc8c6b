//! Answers to reads: GET replies and dumps.
//!
//! [`read`] answers every request [`is_read`] accepts from one state; the dispatcher
//! ([`super::Engine`] on the writer thread, [`super::handle_reads`] on a client thread) calls it
//! and nothing else here. A GET reply is one complete message; a dump becomes a [`DumpStream`]
//! that the connection fills a datagram at a time as the client reads.
//!
//! Invariants:
//! - Links, addresses, rules, next-hop objects and neighbours are copied at request time; route
//!   dumps hold a reader of the published state and a cursor, and read a piece per fill, so a
//!   dump of millions of routes holds no copy of them and each piece is consistent.
//! - A route template is used only at the state generation it was made at, and a dump keeps at
//!   most [`MAX_TEMPLATES`] of them, whatever the tables hold.
//! - Every message a stream writes is whole and padded; a fill writes at least one message and
//!   the stream ends with exactly one NLMSG_DONE.

use super::{pad4, Origin, Outcome, Reply};
use crate::view::FibReader;
use fibre_fib::types::*;
use fibre_fib::{Fib, RouteDumpPos, RouteEntry};
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::nla::{NlaIter, NLA_HDRLEN};
use fibre_netlink::{NetlinkHeader, Payload};
use fibre_proto::convert::{self, Request, RequestError};
use std::net::IpAddr;

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
    let attrs = NetlinkHeader::LEN + fibre_netlink::route::RouteHeader::LEN;
    NlaIter::new(m.get(attrs..)?, attrs)
        .map_while(Result::ok)
        .find(|(_, a)| a.kind == fibre_netlink::route::RTA::DST)
        .map(|(at, _)| at + NLA_HDRLEN)
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
pub(super) fn is_read(req: &Request) -> bool {
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

/// Answers a read request ([`is_read`]) from `fib`, links with their `counters`; route
/// dumps read through `dumps` as they go. Anything else is not supported here.
pub(super) fn read(
    fib: &Fib,
    dumps: &FibReader,
    counters: Option<&dyn super::LinkCounters>,
    req: Request,
    origin: Origin,
    out: &mut Outcome,
) -> Result<(), RequestError> {
    match req {
        Request::DumpLinks => {
            let links = super::with_counters(fib.links(), counters);
            dump(Items::Links(links), origin, out)
        }
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
            let links = super::with_counters(fib.links(), counters);
            let found = links.into_iter().find(|x| {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A template patches the destination where the encoder put it.
    #[test]
    fn dst_value_offset_finds_the_encoded_destination() {
        let mut r = Route::new(
            Family::Inet,
            Prefix {
                addr: "10.2.0.0".parse().unwrap(),
                len: 16,
            },
        );
        r.nexthop.oif = 3;
        let mut m = Vec::new();
        convert::emit_route(&r, mt::RTM_NEWROUTE, nf::NLM_F_MULTI, 1, 2, &mut m);
        let at = dst_value_offset(&m).expect("an RTA_DST");
        assert_eq!(m[at..at + 4], [10, 2, 0, 0]);
        assert_eq!(
            dst_value_offset(&m[..at - 2]),
            None,
            "a cut attribute is not found"
        );
    }

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
}
