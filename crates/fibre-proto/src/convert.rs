//! Conversions between rtnetlink messages and fibre's model types ([`fibre_fib::types`]).
//!
//! Inward, [`request`] turns a request message into a [`Request`] with the kernel's reading of
//! it (which attribute wins, what absent means); it makes no semantic decision the FIB makes.
//! Outward, `*_message` functions encode model objects as the kernel encodes dump entries and
//! notifications (same attributes, same order), [`ack`] encodes a result as NLMSG_ERROR with
//! extended ACK, and [`request_message`] encodes a [`Request`] as a client (iproute2) would.
//!
//! Presence is preserved both ways: an attribute maps to `Some` and `None` to its absence, so
//! `request(request_message(r)) == r` for every request `r` that [`request`] can produce.
//! Attributes the model has no field for are ignored on input, as the kernel ignores unknown
//! attributes of routes, links, addresses and rules; next-hop objects are parsed strictly by
//! the kernel, so an unknown NHA_* attribute is an error here too, with its offset.

use fibre_fib::types::*;
use fibre_netlink::address::{AddressAttr, AddressCacheInfo, AddressHeader, AddressMessage};
use fibre_netlink::link::{
    port_data, AfSpecAttr, Inet6Attr, LinkAttr, LinkHeader, LinkInfoAttr, LinkMessage, LinkStats64,
    PortAttr, IO_AF_PACKET, IO_AF_XDP, IO_TAP, PORT_KIND,
};
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::neighbour::{
    NeighbourAttr, NeighbourCacheInfo, NeighbourHeader, NeighbourMessage,
};
use fibre_netlink::nexthop::{
    GroupEntry, NexthopAttr, NexthopHeader, NexthopMessage, ResBucketAttr, ResGroupAttr,
};
use fibre_netlink::nla::{Attr, Be16, Flag, Nest, NlStr};
use fibre_netlink::policy::{self, Refusal, Violation};
use fibre_netlink::route::{
    MetricAttr, NextHopHeader, RouteAttr, RouteCacheInfo, RouteHeader, RouteMessage, RouteNextHop,
    Via,
};
use fibre_netlink::rule::{PortRange, RuleAttr, RuleHeader, RuleMessage, UidRange};
use fibre_netlink::{
    DecodeError, DoneMessage, ErrorMessage, ExtAckAttr, Messages, NetlinkHeader, NetlinkMessage,
    Payload,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Clock ticks per second of `rta_cacheinfo.rta_expires` (the kernel's USER_HZ).
pub const USER_HZ: u32 = 100;
/// `rtm_table` / `fib_rule_hdr.table` for ids that do not fit in 8 bits (RT_TABLE_COMPAT).
const RT_TABLE_COMPAT: u8 = 252;
/// Link-layer types (ARPHRD_*) of the links fibre models.
const ARPHRD_ETHER: u16 = 1;
const ARPHRD_LOOPBACK: u16 = 772;
const AF_UNSPEC: u8 = 0;
/// `ifa_cacheinfo` lifetime meaning "forever".
const INFINITY_LIFE_TIME: u32 = u32::MAX;

/// A request converted to the model. `flags` are the NLM_F_* modifiers of "new" requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    NewLink(Link, ReqFlags),
    DelLink(Link),
    /// RTM_GETLINK for one link, by index or name.
    GetLink(Link),
    DumpLinks,
    NewAddr(Address, ReqFlags),
    DelAddr(Address),
    DumpAddrs(Option<Family>),
    NewRoute(Route, ReqFlags),
    DelRoute(Route),
    GetRoute(RouteQuery),
    DumpRoutes(Option<Family>),
    NewRule(Rule, ReqFlags),
    DelRule(Rule),
    DumpRules(Option<Family>),
    NewNexthop(NexthopObj, ReqFlags),
    DelNexthop(u32),
    GetNexthop(u32),
    DumpNexthops,
    /// RTM_GETNEXTHOPBUCKET for one bucket: the group's id and the bucket's index.
    GetBucket(u32, u16),
    DumpBuckets(BucketDump),
    NewNeigh(Neighbour, ReqFlags),
    DelNeigh(Neighbour),
    /// RTM_GETNEIGH for one entry (NTF_PROXY in `flags` for a proxy entry).
    GetNeigh(Neighbour),
    DumpNeighs(NeighDump),
    /// A dump the kernel answers with NLMSG_DONE alone: rules or neighbours (`message_type`
    /// RTM_GETRULE or RTM_GETNEIGH) of a `family` that has none.
    EmptyDump {
        message_type: u16,
        family: u8,
    },
}

/// What an RTM_GETNEXTHOPBUCKET dump asks for: buckets of group `id` only (NHA_ID), holding
/// member `nhid` only (NHA_RES_BUCKET_NH_ID), of members on device `dev` only (NHA_OIF; 0 =
/// every device).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketDump {
    pub id: Option<u32>,
    pub nhid: Option<u32>,
    pub dev: u32,
}

/// What an RTM_GETNEIGH dump asks for: a family (`None` = both), proxy entries instead of
/// neighbours (NTF_PROXY in the header), and the NDA_IFINDEX filter (0 = every link).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NeighDump {
    pub family: Option<Family>,
    pub proxy: bool,
    pub ifindex: u32,
}

/// Why a request cannot be converted: the kernel's errno and text, and the offset of the
/// offending attribute from the start of the request (NLMSGERR_ATTR_OFFS) when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    pub error: RtError,
    pub offset: Option<u32>,
    /// The attributes of NLMSGERR_ATTR_POLICY describing the rule the attribute at `offset`
    /// broke ([`policy::describe`]); empty when the kernel describes none.
    pub policy: Vec<u8>,
}

/// An attribute that broke its table's rule ([`policy`]), answered as the kernel
/// answers it.
impl From<Violation> for RequestError {
    fn from(v: Violation) -> Self {
        let mut policy = Vec::new();
        if let Some(rule) = &v.rule {
            policy::describe(rule, &mut policy);
        }
        RequestError {
            error: RtError::msg(Errno(v.errno), v.text),
            offset: v.offset.and_then(|o| u32::try_from(o).ok()),
            policy,
        }
    }
}

impl From<Refusal> for RequestError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Framing(e) => e.into(),
            Refusal::Policy(v) => v.into(),
        }
    }
}

impl From<RtError> for RequestError {
    fn from(error: RtError) -> Self {
        RequestError {
            error,
            offset: None,
            policy: Vec::new(),
        }
    }
}

/// A message that does not parse, answered as the kernel answers a malformed attribute:
/// EINVAL with the reason. The offset is the error's, which is relative to the request when
/// the request was parsed on its own with base 0 (as [`NetlinkMessage::parse`] is by a server
/// that has already split the datagram).
impl From<DecodeError> for RequestError {
    fn from(e: DecodeError) -> Self {
        RequestError {
            error: RtError::msg(Errno::EINVAL, e.to_string()),
            offset: u32::try_from(e.offset()).ok(),
            policy: Vec::new(),
        }
    }
}

fn invalid(text: &str) -> RequestError {
    RtError::msg(Errno::EINVAL, text).into()
}

fn req_flags(flags: u16) -> ReqFlags {
    ReqFlags {
        create: flags & nf::NLM_F_CREATE != 0,
        excl: flags & nf::NLM_F_EXCL != 0,
        replace: flags & nf::NLM_F_REPLACE != 0,
        append: flags & nf::NLM_F_APPEND != 0,
    }
}

fn flags_of(f: ReqFlags) -> u16 {
    let mut out = 0;
    if f.create {
        out |= nf::NLM_F_CREATE;
    }
    if f.excl {
        out |= nf::NLM_F_EXCL;
    }
    if f.replace {
        out |= nf::NLM_F_REPLACE;
    }
    if f.append {
        out |= nf::NLM_F_APPEND;
    }
    out
}

fn family(f: u8) -> Result<Family, RequestError> {
    match f {
        2 => Ok(Family::Inet),
        10 => Ok(Family::Inet6),
        _ => Err(RtError::msg(Errno::EAFNOSUPPORT, "Unsupported address family").into()),
    }
}

/// The family of a route or address request: the kernel has handlers for these of AF_INET
/// and AF_INET6 only, and answers any other family with EOPNOTSUPP, without text.
fn object_family(f: u8) -> Result<Family, RequestError> {
    family(f).map_err(|_| RtError::new(Errno::EOPNOTSUPP).into())
}

/// The family of a dump of routes, addresses or links: one the kernel has no handler for is
/// served by the AF_UNSPEC handler, which dumps every family.
fn dump_family(f: u8) -> Option<Family> {
    family(f).ok()
}

/// A dump of rules or neighbours of a family other than AF_INET and AF_INET6 (AF_UNSPEC
/// dumps both), which the kernel answers with nothing but NLMSG_DONE.
fn filtered_dump(t: u16, f: u8) -> Option<Request> {
    let filtered = t == mt::RTM_GETRULE || t == mt::RTM_GETNEIGH;
    (filtered && f != AF_UNSPEC && family(f).is_err()).then_some(Request::EmptyDump {
        message_type: t,
        family: f,
    })
}

fn unspecified(f: Family) -> IpAddr {
    match f {
        Family::Inet => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        Family::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// An address attribute must be of the message's family.
fn addr_of(f: Family, a: IpAddr) -> Result<IpAddr, RequestError> {
    if Family::of(&a) == f {
        Ok(a)
    } else {
        Err(invalid(
            "Address family of attribute does not match the message",
        ))
    }
}

fn text(s: &NlStr<'_>) -> Result<String, RequestError> {
    s.as_str()
        .map(str::to_owned)
        .ok_or_else(|| invalid("Attribute is not a valid string"))
}

/// Converts a request message. Messages that are not requests fibre serves get EOPNOTSUPP,
/// as the kernel answers message types it has no handler for.
pub fn request(msg: &NetlinkMessage<'_>) -> Result<Request, RequestError> {
    let h = &msg.header;
    let dump = h.flags & nf::NLM_F_DUMP != 0;
    let flags = req_flags(h.flags);
    let t = h.message_type;
    let unsupported = || RequestError::from(RtError::new(Errno::EOPNOTSUPP));
    match &msg.payload {
        Payload::Link(m) => {
            // Counters are a dump's; a request's (a dump replayed) are ignored, as the kernel
            // ignores IFLA_STATS64 in requests.
            let link = Link {
                stats: None,
                ..link_from(m)?
            };
            match t {
                mt::RTM_NEWLINK | mt::RTM_SETLINK => {
                    if link.kind.is_none() && flags.create {
                        if let Some(kind) = unknown_kind(m) {
                            return Err(RtError::msg(
                                Errno::EOPNOTSUPP,
                                format!("Unknown device type {kind}"),
                            )
                            .into());
                        }
                    }
                    Ok(Request::NewLink(link, flags))
                }
                mt::RTM_DELLINK => Ok(Request::DelLink(link)),
                _ if dump => Ok(Request::DumpLinks),
                _ => Ok(Request::GetLink(link)),
            }
        }
        Payload::Address(m) => match t {
            mt::RTM_NEWADDR => Ok(Request::NewAddr(address_from(m)?, flags)),
            mt::RTM_DELADDR => Ok(Request::DelAddr(address_from(m)?)),
            _ if dump => Ok(Request::DumpAddrs(dump_family(m.header.family))),
            _ => Err(unsupported()),
        },
        Payload::Route(m) => match t {
            mt::RTM_NEWROUTE => Ok(Request::NewRoute(route_from(m)?, flags)),
            mt::RTM_DELROUTE => Ok(Request::DelRoute(route_from(m)?)),
            _ if dump => Ok(Request::DumpRoutes(dump_family(m.header.family))),
            _ => Ok(Request::GetRoute(query_from(m)?)),
        },
        Payload::Rule(m) => match t {
            mt::RTM_NEWRULE => Ok(Request::NewRule(rule_from(m)?, flags)),
            mt::RTM_DELRULE => Ok(Request::DelRule(rule_from(m)?)),
            _ if dump => Ok(filtered_dump(t, m.header.family)
                .unwrap_or(Request::DumpRules(dump_family(m.header.family)))),
            _ => Err(unsupported()),
        },
        Payload::Nexthop(m) => match t {
            // The scope of an object is the model's to derive; a request's is not kept.
            mt::RTM_NEWNEXTHOP => Ok(Request::NewNexthop(
                NexthopObj {
                    scope: 0,
                    ..nexthop_from(m)?
                },
                flags,
            )),
            _ if t == mt::RTM_GETNEXTHOP && dump => Ok(Request::DumpNexthops),
            mt::RTM_GETNEXTHOPBUCKET => bucket_request(m, dump),
            mt::RTM_NEWNEXTHOPBUCKET | mt::RTM_DELNEXTHOPBUCKET => Err(unsupported()),
            _ => {
                let nh = nexthop_from(m)?;
                if nh.id == 0 {
                    return Err(invalid("Nexthop id can not be 0"));
                }
                Ok(if t == mt::RTM_DELNEXTHOP {
                    Request::DelNexthop(nh.id)
                } else {
                    Request::GetNexthop(nh.id)
                })
            }
        },
        Payload::Neighbour(m) => match t {
            mt::RTM_NEWNEIGH => Ok(Request::NewNeigh(neighbour_from(m)?, flags)),
            mt::RTM_DELNEIGH => Ok(Request::DelNeigh(neighbour_from(m)?)),
            _ if dump => match filtered_dump(t, m.header.family) {
                Some(empty) => Ok(empty),
                None => Ok(Request::DumpNeighs(neigh_dump_from(m)?)),
            },
            _ => Ok(Request::GetNeigh(neigh_get_from(m)?)),
        },
        // The legacy dump request: a bare `struct rtgenmsg` (one family byte).
        Payload::Other(body) if dump => {
            let fam = body.first().copied().unwrap_or(AF_UNSPEC);
            if let Some(empty) = filtered_dump(t, fam) {
                return Ok(empty);
            }
            match t {
                mt::RTM_GETLINK => Ok(Request::DumpLinks),
                mt::RTM_GETADDR => Ok(Request::DumpAddrs(dump_family(fam))),
                mt::RTM_GETROUTE => Ok(Request::DumpRoutes(dump_family(fam))),
                mt::RTM_GETRULE => Ok(Request::DumpRules(dump_family(fam))),
                mt::RTM_GETNEXTHOP => Ok(Request::DumpNexthops),
                mt::RTM_GETNEIGH => Ok(Request::DumpNeighs(NeighDump {
                    family: dump_family(fam),
                    ..NeighDump::default()
                })),
                _ => Err(unsupported()),
            }
        }
        _ => Err(unsupported()),
    }
}

/// Converts one whole request message given as bytes (as [`NetlinkMessage::parse`] takes
/// it): its attributes are checked against their table first ([`policy`]), as the
/// kernel validates a request before its handler reads it, then it is parsed and converted by
/// [`request`].
pub fn request_bytes(msg: &[u8]) -> Result<Request, RequestError> {
    if let Some((policy, base)) = policy_of(msg) {
        let end = NetlinkHeader::parse_bytes(msg, 0)
            .map_or(msg.len(), |h| (h.length as usize).min(msg.len()));
        if base <= end {
            policy::check(policy, &msg[base..end], base)?;
        }
    }
    let (parsed, _) = NetlinkMessage::parse(msg, 0)?;
    request(&parsed)
}

/// The table the attributes of request `msg` are checked against, and the offset of its
/// attribute region (after the object's fixed header).
fn policy_of(msg: &[u8]) -> Option<(&'static policy::Policy, usize)> {
    let h = NetlinkHeader::parse_bytes(msg, 0).ok()?;
    let header = match h.message_type {
        mt::RTM_NEWLINK | mt::RTM_DELLINK | mt::RTM_GETLINK | mt::RTM_SETLINK => LinkHeader::LEN,
        mt::RTM_NEWADDR | mt::RTM_DELADDR => AddressHeader::LEN,
        mt::RTM_NEWROUTE | mt::RTM_DELROUTE | mt::RTM_GETROUTE => RouteHeader::LEN,
        mt::RTM_NEWRULE | mt::RTM_DELRULE => RuleHeader::LEN,
        mt::RTM_NEWNEIGH | mt::RTM_DELNEIGH => NeighbourHeader::LEN,
        mt::RTM_NEWNEXTHOP | mt::RTM_DELNEXTHOP | mt::RTM_GETNEXTHOP => NexthopHeader::LEN,
        _ => return None,
    };
    let family = *msg.get(NetlinkHeader::LEN)?;
    let base = NetlinkHeader::LEN + header;
    (msg.len() >= base)
        .then(|| policy::for_request(h.message_type, h.flags, family))
        .flatten()
        .map(|p| (p, base))
}

// ---------------------------------------------------------------------------------------------
// Links
// ---------------------------------------------------------------------------------------------

fn kind_name<'a>(m: &LinkMessage<'a>) -> Option<NlStr<'a>> {
    m.attributes.iter().find_map(|a| match a {
        LinkAttr::LinkInfo(info) => info.attrs.iter().find_map(|i| match i {
            LinkInfoAttr::Kind(k) => Some(*k),
            _ => None,
        }),
        _ => None,
    })
}

/// A `fibre_port` link's binding, from its IFLA_INFO_DATA: the host interface is required,
/// the I/O kind defaults to AF_XDP.
fn port_spec(m: &LinkMessage<'_>) -> Result<PortSpec, RequestError> {
    let data = m.attributes.iter().find_map(|a| match a {
        LinkAttr::LinkInfo(info) => info.attrs.iter().find_map(|i| match i {
            LinkInfoAttr::Data(d) => Some(*d),
            _ => None,
        }),
        _ => None,
    });
    let attrs = data
        .map(|d| port_data(&d).ok_or_else(|| invalid("fibre_port: malformed IFLA_INFO_DATA")))
        .transpose()?
        .unwrap_or_default();
    let mut dev = None;
    let mut io = PortIo::AfXdp;
    let mut punt = None;
    for a in &attrs {
        match a {
            PortAttr::Dev(d) => dev = Some(text(d)?),
            PortAttr::Io(IO_AF_XDP) => io = PortIo::AfXdp,
            PortAttr::Io(IO_AF_PACKET) => io = PortIo::AfPacket,
            PortAttr::Io(IO_TAP) => io = PortIo::Tap,
            PortAttr::Io(_) => return Err(invalid("fibre_port: unknown io kind")),
            PortAttr::Punt(t) => punt = Some(text(t)?),
            PortAttr::PuntToHost(_)
            | PortAttr::PuntFromHost(_)
            | PortAttr::PuntDropped(_)
            | PortAttr::Other(_) => {}
        }
    }
    Ok(PortSpec {
        dev: dev.ok_or_else(|| invalid("fibre_port: no host interface"))?,
        io,
        punt,
    })
}

/// A dumped `fibre_port` link's punt counters, from its IFLA_INFO_DATA.
fn punt_stats(m: &LinkMessage<'_>) -> Option<PuntStats> {
    let data = m.attributes.iter().find_map(|a| match a {
        LinkAttr::LinkInfo(info) => info.attrs.iter().find_map(|i| match i {
            LinkInfoAttr::Data(d) => Some(*d),
            _ => None,
        }),
        _ => None,
    })?;
    let mut stats: Option<PuntStats> = None;
    for a in port_data(&data)? {
        let (field, n): (fn(&mut PuntStats) -> &mut u64, u64) = match a {
            PortAttr::PuntToHost(n) => (|s| &mut s.to_host, n),
            PortAttr::PuntFromHost(n) => (|s| &mut s.from_host, n),
            PortAttr::PuntDropped(n) => (|s| &mut s.dropped, n),
            _ => continue,
        };
        *field(stats.get_or_insert_with(PuntStats::default)) = n;
    }
    stats
}

fn unknown_kind(m: &LinkMessage<'_>) -> Option<String> {
    kind_name(m).map(|k| String::from_utf8_lossy(k.bytes).into_owned())
}

/// A link message as the model reads it (a request, a dump entry or a notification).
pub fn link_from(m: &LinkMessage<'_>) -> Result<Link, RequestError> {
    let h = &m.header;
    let mut link = Link {
        ifindex: h.index as u32,
        flags: h.flags,
        change: h.change,
        ..Link::default()
    };
    link.kind = match kind_name(m).and_then(|k| k.as_str()) {
        Some("dummy") => Some(LinkKind::Dummy),
        Some(PORT_KIND) => Some(LinkKind::Port(port_spec(m)?)),
        Some(_) => None,
        None if h.link_type == ARPHRD_LOOPBACK => Some(LinkKind::Loopback),
        None => None,
    };
    link.punt = punt_stats(m);
    for a in &m.attributes {
        match a {
            LinkAttr::IfName(s) => link.ifname = Some(text(s)?),
            LinkAttr::Mtu(v) => link.mtu = Some(*v),
            LinkAttr::Address(b) => link.address = Some(b.to_vec()),
            LinkAttr::Carrier(c) => link.carrier = Some(*c != 0),
            LinkAttr::TxQueueLen(v) => link.txqlen = Some(*v),
            LinkAttr::Stats64(s) => {
                link.stats = Some(LinkStats {
                    rx_packets: s.rx_packets,
                    rx_bytes: s.rx_bytes,
                    rx_errors: s.rx_errors,
                    rx_dropped: s.rx_dropped,
                    multicast: s.multicast,
                    rx_otherhost_dropped: s.rx_otherhost_dropped,
                    tx_packets: s.tx_packets,
                    tx_bytes: s.tx_bytes,
                    tx_errors: s.tx_errors,
                    tx_dropped: s.tx_dropped,
                })
            }
            LinkAttr::AfSpec(spec) => {
                for s in &spec.attrs {
                    if let AfSpecAttr::Inet6(inet6) = s {
                        for i in &inet6.attrs {
                            if let Inet6Attr::AddrGenMode(mode) = i {
                                link.addr_gen_mode = Some(*mode);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(link)
}

fn link_attrs<'a>(link: &'a Link, out: &mut Vec<LinkAttr<'a>>) {
    if let Some(name) = &link.ifname {
        out.push(LinkAttr::IfName(NlStr::new(name)));
    }
    if let Some(q) = link.txqlen {
        out.push(LinkAttr::TxQueueLen(q));
    }
}

fn link_tail<'a>(link: &'a Link, out: &mut Vec<LinkAttr<'a>>) {
    if let Some(mtu) = link.mtu {
        out.push(LinkAttr::Mtu(mtu));
    }
    if let Some(c) = link.carrier {
        out.push(LinkAttr::Carrier(c as u8));
    }
    if let Some(a) = &link.address {
        out.push(LinkAttr::Address(a));
    }
    match &link.kind {
        Some(LinkKind::Dummy) => {
            let kind = vec![LinkInfoAttr::Kind(NlStr::new("dummy"))];
            out.push(LinkAttr::LinkInfo(Nest::new(kind)));
        }
        Some(LinkKind::Port(p)) => {
            let io = match p.io {
                PortIo::AfXdp => IO_AF_XDP,
                PortIo::AfPacket => IO_AF_PACKET,
                PortIo::Tap => IO_TAP,
            };
            let mut data = vec![PortAttr::Dev(NlStr::new(&p.dev)), PortAttr::Io(io)];
            data.extend(p.punt.as_deref().map(|t| PortAttr::Punt(NlStr::new(t))));
            if let Some(c) = link.punt {
                data.extend([
                    PortAttr::PuntToHost(c.to_host),
                    PortAttr::PuntFromHost(c.from_host),
                    PortAttr::PuntDropped(c.dropped),
                ]);
            }
            let info = vec![
                LinkInfoAttr::Kind(NlStr::new(PORT_KIND)),
                LinkInfoAttr::PortData(Nest::new(data)),
            ];
            out.push(LinkAttr::LinkInfo(Nest::new(info)));
        }
        _ => {}
    }
    if let Some(mode) = link.addr_gen_mode {
        let inet6 = Nest::new(vec![Inet6Attr::AddrGenMode(mode)]);
        out.push(LinkAttr::AfSpec(Nest::new(vec![AfSpecAttr::Inet6(inet6)])));
    }
}

fn link_header(link: &Link) -> LinkHeader {
    LinkHeader {
        family: AF_UNSPEC,
        link_type: if link.kind == Some(LinkKind::Loopback) {
            ARPHRD_LOOPBACK
        } else {
            ARPHRD_ETHER
        },
        index: link.ifindex as i32,
        flags: link.flags,
        change: link.change,
        ..LinkHeader::default()
    }
}

/// A link as the kernel dumps and notifies it: IFLA_IFNAME, IFLA_TXQLEN, IFLA_OPERSTATE
/// ([`Link::operstate`]), IFLA_MTU, IFLA_CARRIER, IFLA_ADDRESS,
/// IFLA_LINKINFO (dummy and port links), IFLA_AF_SPEC (IPv6 address generation mode) and
/// IFLA_STATS64 (when the link has counters).
pub fn link_message(link: &Link) -> LinkMessage<'_> {
    let mut attributes = Vec::new();
    link_attrs(link, &mut attributes);
    attributes.push(LinkAttr::OperState(link.operstate()));
    link_tail(link, &mut attributes);
    if let Some(s) = &link.stats {
        attributes.push(LinkAttr::Stats64(LinkStats64 {
            rx_packets: s.rx_packets,
            tx_packets: s.tx_packets,
            rx_bytes: s.rx_bytes,
            tx_bytes: s.tx_bytes,
            rx_errors: s.rx_errors,
            tx_errors: s.tx_errors,
            rx_dropped: s.rx_dropped,
            tx_dropped: s.tx_dropped,
            multicast: s.multicast,
            rx_otherhost_dropped: s.rx_otherhost_dropped,
            ..LinkStats64::default()
        }));
    }
    LinkMessage {
        header: link_header(link),
        attributes,
    }
}

fn link_request(link: &Link) -> LinkMessage<'_> {
    let mut attributes = Vec::new();
    link_attrs(link, &mut attributes);
    link_tail(link, &mut attributes);
    LinkMessage {
        header: link_header(link),
        attributes,
    }
}

// ---------------------------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------------------------

/// An address message as the model reads it.
pub fn address_from(m: &AddressMessage<'_>) -> Result<Address, RequestError> {
    let h = &m.header;
    let fam = object_family(h.family)?;
    let mut a = Address {
        family: fam,
        prefixlen: h.prefix_len,
        flags: h.flags as u32,
        scope: h.scope,
        ifindex: h.index,
        local: None,
        address: None,
        broadcast: None,
        label: None,
        metric: None,
        valid_lft: None,
        preferred_lft: None,
    };
    for attr in &m.attributes {
        match attr {
            AddressAttr::Address(ip) => a.address = Some(addr_of(fam, *ip)?),
            AddressAttr::Local(ip) => a.local = Some(addr_of(fam, *ip)?),
            AddressAttr::Broadcast(ip) => a.broadcast = Some(addr_of(fam, *ip)?),
            AddressAttr::Label(s) => a.label = Some(text(s)?),
            AddressAttr::Flags(f) => a.flags = *f,
            AddressAttr::RtPriority(p) => a.metric = Some(*p),
            AddressAttr::CacheInfo(ci) => {
                a.valid_lft = (ci.valid != INFINITY_LIFE_TIME).then_some(ci.valid);
                a.preferred_lft = (ci.preferred != INFINITY_LIFE_TIME).then_some(ci.preferred);
            }
            _ => {}
        }
    }
    Ok(a)
}

/// An address as the kernel dumps and notifies it. IPv4: IFA_ADDRESS, IFA_LOCAL,
/// IFA_BROADCAST, IFA_LABEL, IFA_FLAGS, IFA_RT_PRIORITY, IFA_CACHEINFO; IPv6: IFA_LOCAL and
/// IFA_ADDRESS (or IFA_ADDRESS alone), IFA_RT_PRIORITY, IFA_CACHEINFO, IFA_FLAGS.
pub fn address_message(a: &Address) -> AddressMessage<'_> {
    let header = AddressHeader {
        family: a.family as u8,
        prefix_len: a.prefixlen,
        flags: a.flags as u8,
        scope: a.scope,
        index: a.ifindex,
    };
    let life = |v: Option<u32>| v.unwrap_or(INFINITY_LIFE_TIME);
    let cache = AddressCacheInfo {
        preferred: life(a.preferred_lft),
        valid: life(a.valid_lft),
        ..AddressCacheInfo::default()
    };
    let mut attrs = Vec::new();
    match a.family {
        Family::Inet => {
            attrs.extend(a.address.map(AddressAttr::Address));
            attrs.extend(a.local.map(AddressAttr::Local));
            attrs.extend(a.broadcast.map(AddressAttr::Broadcast));
            attrs.extend(
                a.label
                    .as_deref()
                    .map(|l| AddressAttr::Label(NlStr::new(l))),
            );
            attrs.push(AddressAttr::Flags(a.flags));
            attrs.extend(a.metric.map(AddressAttr::RtPriority));
            attrs.push(AddressAttr::CacheInfo(cache));
        }
        Family::Inet6 => {
            if a.local.is_some() && a.local != a.address {
                attrs.extend(a.local.map(AddressAttr::Local));
            }
            attrs.extend(a.address.or(a.local).map(AddressAttr::Address));
            attrs.extend(a.metric.map(AddressAttr::RtPriority));
            attrs.push(AddressAttr::CacheInfo(cache));
            attrs.push(AddressAttr::Flags(a.flags));
        }
    }
    AddressMessage {
        header,
        attributes: attrs,
    }
}

/// An address request as iproute2 builds it: exactly the attributes the model holds.
fn address_request(a: &Address) -> AddressMessage<'_> {
    let mut m = address_message(a);
    let mut attrs = Vec::new();
    attrs.extend(a.local.map(AddressAttr::Local));
    attrs.extend(a.address.map(AddressAttr::Address));
    attrs.extend(a.broadcast.map(AddressAttr::Broadcast));
    attrs.extend(
        a.label
            .as_deref()
            .map(|l| AddressAttr::Label(NlStr::new(l))),
    );
    attrs.push(AddressAttr::Flags(a.flags));
    attrs.extend(a.metric.map(AddressAttr::RtPriority));
    if a.valid_lft.is_some() || a.preferred_lft.is_some() {
        attrs.extend(
            m.attributes
                .drain(..)
                .filter(|x| matches!(x, AddressAttr::CacheInfo(_))),
        );
    }
    m.attributes = attrs;
    m
}

// ---------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------

fn route_type(t: u8) -> Result<RouteType, RequestError> {
    use RouteType::*;
    Ok(match t {
        0 => Unspec,
        1 => Unicast,
        2 => Local,
        3 => Broadcast,
        4 => Anycast,
        5 => Multicast,
        6 => Blackhole,
        7 => Unreachable,
        8 => Prohibit,
        9 => Throw,
        10 => Nat,
        11 => Xresolve,
        _ => return Err(invalid("Invalid route type")),
    })
}

fn via_addr(v: &Via<'_>) -> Result<IpAddr, RequestError> {
    match v {
        Via::Ip(ip) => Ok(*ip),
        Via::Other { .. } => Err(invalid("Invalid address family in RTA_VIA")),
    }
}

fn metrics_from(attrs: &[MetricAttr<'_>]) -> Result<Metrics, RequestError> {
    let mut m = Metrics::default();
    for a in attrs {
        match a {
            MetricAttr::Lock(v) => m.lock = *v,
            MetricAttr::Mtu(v) => m.mtu = Some(*v),
            MetricAttr::Window(v) => m.window = Some(*v),
            MetricAttr::Rtt(v) => m.rtt = Some(*v),
            MetricAttr::RttVar(v) => m.rttvar = Some(*v),
            MetricAttr::SsThresh(v) => m.ssthresh = Some(*v),
            MetricAttr::Cwnd(v) => m.cwnd = Some(*v),
            MetricAttr::AdvMss(v) => m.advmss = Some(*v),
            MetricAttr::Reordering(v) => m.reordering = Some(*v),
            MetricAttr::HopLimit(v) => m.hoplimit = Some(*v),
            MetricAttr::InitCwnd(v) => m.initcwnd = Some(*v),
            MetricAttr::Features(v) => m.features = Some(*v),
            MetricAttr::RtoMin(v) => m.rto_min = Some(*v),
            MetricAttr::InitRwnd(v) => m.initrwnd = Some(*v),
            MetricAttr::QuickAck(v) => m.quickack = Some(*v),
            MetricAttr::CcAlgo(s) => m.congctl = Some(text(s)?),
            MetricAttr::FastopenNoCookie(v) => m.fastopen_no_cookie = Some(*v),
            // ip_metrics_convert skips type 0; the policy check refused the others.
            MetricAttr::Other(raw) if raw.number() == 0 => {}
            MetricAttr::Other(_) => return Err(invalid("Invalid metric")),
        }
    }
    Ok(m)
}

fn metrics_attrs(m: &Metrics) -> Vec<MetricAttr<'_>> {
    let mut out = Vec::new();
    if m.lock != 0 {
        out.push(MetricAttr::Lock(m.lock));
    }
    type Make = fn(u32) -> MetricAttr<'static>;
    let u32s: [(Option<u32>, Make); 15] = [
        (m.mtu, MetricAttr::Mtu),
        (m.window, MetricAttr::Window),
        (m.rtt, MetricAttr::Rtt),
        (m.rttvar, MetricAttr::RttVar),
        (m.ssthresh, MetricAttr::SsThresh),
        (m.cwnd, MetricAttr::Cwnd),
        (m.advmss, MetricAttr::AdvMss),
        (m.reordering, MetricAttr::Reordering),
        (m.hoplimit, MetricAttr::HopLimit),
        (m.initcwnd, MetricAttr::InitCwnd),
        (m.features, MetricAttr::Features),
        (m.rto_min, MetricAttr::RtoMin),
        (m.initrwnd, MetricAttr::InitRwnd),
        (m.quickack, MetricAttr::QuickAck),
        (m.fastopen_no_cookie, MetricAttr::FastopenNoCookie),
    ];
    for (v, make) in u32s {
        out.extend(v.map(make));
    }
    if let Some(cc) = &m.congctl {
        // RTAX_CC_ALGO sorts between RTAX_QUICKACK and RTAX_FASTOPEN_NO_COOKIE.
        let at = out.len() - m.fastopen_no_cookie.is_some() as usize;
        out.insert(at, MetricAttr::CcAlgo(NlStr::new(cc)));
    }
    out
}

/// One next hop's gateway, from RTA_GATEWAY or RTA_VIA.
fn gateway_of(family: Family, attr: &RouteAttr<'_>) -> Result<Option<IpAddr>, RequestError> {
    match attr {
        RouteAttr::Gateway(ip) => addr_of(family, *ip).map(Some),
        RouteAttr::Via(v) => via_addr(v).map(Some),
        _ => Ok(None),
    }
}

/// A route message as the model reads it (a request, a dump entry or a notification).
pub fn route_from(m: &RouteMessage<'_>) -> Result<Route, RequestError> {
    let (fam, rtype) = route_kind(&m.header)?;
    let mut r = header_route(&m.header, fam, rtype);
    let mut b = RouteBuilder::new(&mut r, &m.header);
    for a in &m.attributes {
        b.attr(a)?;
    }
    b.finish()?;
    Ok(r)
}

/// An RTM_NEWROUTE or RTM_DELROUTE request read straight from its bytes (one whole message,
/// as [`NetlinkMessage::parse`] takes it), without building the intermediate message: the
/// daemon's path for table loads. The answer is exactly [`request_bytes`]'s; `None` when the
/// message is something else, or is badly framed (the caller then takes the general path,
/// which says what is wrong). [`read_route_request`] gives the same answer in place.
pub fn route_request(msg: &[u8]) -> Option<Result<Request, RequestError>> {
    let mut slot = None;
    read_route_request(msg, &mut slot);
    slot
}

/// [`route_request`]'s answer for `msg`, built in `slot` (which it replaces): the daemon's
/// read-ahead fills its list so. A request is some 480 bytes, mostly the route; building
/// it where it is kept, rather than returning it through `Option` and `Result` into a list,
/// saves copying it several times over (Rust does not promise to elide those moves).
///
/// One walk of the attributes both checks and converts them. The kernel checks every
/// attribute against its table, and the nests its handler reads, before converting any, so
/// a conversion error is held until the walk ends: a policy refusal of a later attribute,
/// or a framing error (`None`), takes its place.
pub fn read_route_request(msg: &[u8], slot: &mut Option<Result<Request, RequestError>>) {
    *slot = None;
    let Ok(h) = NetlinkHeader::parse_bytes(msg, 0) else {
        return;
    };
    let t = h.message_type;
    if (t != mt::RTM_NEWROUTE && t != mt::RTM_DELROUTE) || h.length as usize != msg.len() {
        return;
    }
    let body = &msg[NetlinkHeader::LEN..];
    let Ok(rh) = RouteHeader::parse_bytes(body, NetlinkHeader::LEN) else {
        return;
    };
    let attrs = &body[RouteHeader::LEN..];
    let base = NetlinkHeader::LEN + RouteHeader::LEN;
    let Some(policy) = policy::for_request(t, h.flags, rh.family) else {
        return;
    };
    let mut checker = policy::Checker::new(policy);
    // The header's own checks come after the attributes' policy, before their conversion.
    let mut building = route_kind(&rh).map(|(fam, rtype)| {
        let r = header_route(&rh, fam, rtype);
        let req = slot.insert(Ok(if t == mt::RTM_NEWROUTE {
            Request::NewRoute(r, req_flags(h.flags))
        } else {
            Request::DelRoute(r)
        }));
        let Ok(Request::NewRoute(r, _) | Request::DelRoute(r)) = req else {
            unreachable!("inserted above");
        };
        RouteBuilder::new(r, &rh)
    });
    for item in fibre_netlink::nla::NlaIter::new(attrs, base) {
        let Ok((offset, nla)) = item else {
            *slot = None;
            return;
        };
        if let Err(v) = checker.attr(nla.kind, nla.value, offset) {
            *slot = Some(Err(v.into()));
            return;
        }
        if let Ok(b) = &mut building {
            if let Err(e) = b.attr(&RouteAttr::decode(nla)) {
                building = Err(e);
            }
        }
    }
    if let Err(v) = checker.finish(attrs, base) {
        *slot = Some(Err(v.into()));
        return;
    }
    if let Err(e) = building.and_then(RouteBuilder::finish) {
        *slot = Some(Err(e));
    }
}

/// The family and type of the route a route message's header starts, checked as the
/// kernel's handlers check them before reading any attribute.
fn route_kind(h: &RouteHeader) -> Result<(Family, RouteType), RequestError> {
    let fam = object_family(h.family)?;
    if h.dst_len > fam.max_len() || h.src_len > fam.max_len() {
        return Err(invalid("Invalid prefix length"));
    }
    Ok((fam, route_type(h.kind)?))
}

/// The route of a header that [`route_kind`] read as `fam` and `rtype`, every attribute
/// absent.
fn header_route(h: &RouteHeader, fam: Family, rtype: RouteType) -> Route {
    let mut r = Route::new(
        fam,
        Prefix {
            addr: unspecified(fam),
            len: h.dst_len,
        },
    );
    r.tos = h.tos;
    r.table = h.table as u32;
    r.protocol = h.protocol;
    r.scope = h.scope;
    r.rtype = rtype;
    r.flags = h.flags;
    r
}

/// A route being read from its attributes, in message order, into the route its header
/// started ([`header_route`]).
struct RouteBuilder<'r, 'a> {
    r: &'r mut Route,
    src: Option<IpAddr>,
    src_len: u8,
    encap: crate::encap::Pending<'a>,
}

impl<'r, 'a> RouteBuilder<'r, 'a> {
    fn new(r: &'r mut Route, h: &RouteHeader) -> RouteBuilder<'r, 'a> {
        RouteBuilder {
            r,
            src: None,
            src_len: h.src_len,
            encap: Default::default(),
        }
    }

    fn attr(&mut self, a: &RouteAttr<'a>) -> Result<(), RequestError> {
        if self.encap.take(a)? {
            return Ok(());
        }
        let r = &mut *self.r;
        let fam = r.family;
        match a {
            RouteAttr::Dst(ip) => r.dst.addr = addr_of(fam, *ip)?,
            RouteAttr::Src(ip) => self.src = Some(addr_of(fam, *ip)?),
            RouteAttr::Iif(v) => r.iif = Some(*v),
            RouteAttr::Oif(v) => r.nexthop.oif = *v,
            RouteAttr::Gateway(_) | RouteAttr::Via(_) => r.nexthop.gateway = gateway_of(fam, a)?,
            RouteAttr::Priority(v) => r.priority = Some(*v),
            RouteAttr::PrefSrc(ip) => r.prefsrc = Some(addr_of(fam, *ip)?),
            RouteAttr::Metrics(n) => r.metrics = metrics_from(&n.attrs)?,
            RouteAttr::Multipath(hops) => {
                if hops.is_empty() {
                    return Err(invalid("Invalid nexthop configuration - no valid nexthops"));
                }
                r.multipath = hops
                    .iter()
                    .map(|hop| nexthop_of(fam, hop))
                    .collect::<Result<_, _>>()?;
            }
            RouteAttr::CacheInfo(ci) => {
                let expires = (ci.expires >= USER_HZ as i32).then_some(ci.expires as u32 / USER_HZ);
                r.cache = Some(CacheInfo {
                    expires,
                    error: ci.error as i32,
                    used: ci.used,
                });
            }
            RouteAttr::Table(t) => r.table = *t,
            RouteAttr::Mark(v) => r.mark = Some(*v),
            RouteAttr::Pref(v) => r.pref = Some(*v),
            RouteAttr::Expires(v) => r.expires = Some(*v),
            RouteAttr::Uid(v) => r.uid = Some(*v),
            RouteAttr::NhId(v) => r.nhid = Some(*v),
            _ => {}
        }
        Ok(())
    }

    fn finish(self) -> Result<(), RequestError> {
        if self.src_len > 0 || self.src.is_some() {
            self.r.src = Some(Prefix {
                addr: self.src.unwrap_or(unspecified(self.r.family)),
                len: self.src_len,
            });
        }
        self.r.nexthop.encap = self.encap.finish()?;
        Ok(())
    }
}

fn nexthop_of(fam: Family, hop: &RouteNextHop<'_>) -> Result<NextHop, RequestError> {
    let mut nh = NextHop {
        gateway: None,
        oif: hop.header.ifindex as u32,
        hops: hop.header.hops,
        flags: hop.header.flags as u32,
        encap: None,
    };
    let mut encap = crate::encap::Pending::default();
    for a in &hop.attributes {
        if encap.take(a)? {
            continue;
        }
        if let RouteAttr::Gateway(_) | RouteAttr::Via(_) = a {
            nh.gateway = gateway_of(fam, a)?;
        }
    }
    nh.encap = encap.finish()?;
    Ok(nh)
}

fn gateway_attr<'a>(family: Family, gw: IpAddr) -> RouteAttr<'a> {
    if Family::of(&gw) == family {
        RouteAttr::Gateway(gw)
    } else {
        RouteAttr::Via(Via::Ip(gw))
    }
}

fn multipath_attr<'a>(r: &'a Route) -> Option<RouteAttr<'a>> {
    if r.multipath.is_empty() {
        return None;
    }
    let hops = r
        .multipath
        .iter()
        .map(|nh| RouteNextHop {
            header: NextHopHeader {
                len: 0,
                flags: nh.flags as u8,
                hops: nh.hops,
                ifindex: nh.oif as i32,
            },
            attributes: nh
                .gateway
                .map(|g| gateway_attr(r.family, g))
                .into_iter()
                .chain(nh.encap.iter().flat_map(crate::encap::attrs))
                .collect(),
        })
        .collect();
    Some(RouteAttr::Multipath(hops))
}

fn cache_attr<'a>(r: &Route) -> Option<RouteAttr<'a>> {
    r.cache.as_ref().map(|c| {
        let expires = c
            .expires
            .map_or(0, |s| s.saturating_mul(USER_HZ).min(i32::MAX as u32) as i32);
        RouteAttr::CacheInfo(RouteCacheInfo {
            expires,
            error: c.error as u32,
            used: c.used,
            ..RouteCacheInfo::default()
        })
    })
}

/// Puts a stored route in the shape the kernel reports it in dumps and notifications
/// (`rt6_fill_node`): an IPv6 route always carries RTA_CACHEINFO, its remaining lifetime in
/// `rta_expires` (zero when it does not expire), and never RTA_EXPIRES, which only requests
/// carry. IPv4 routes, and answers to a `route get` (which have `cache` already), are left
/// as they are.
pub fn as_reported(r: &mut Route) {
    if r.family == Family::Inet6 && r.cache.is_none() {
        r.cache = Some(CacheInfo {
            expires: r.expires.take(),
            ..CacheInfo::default()
        });
    }
}

/// A route as the kernel dumps and notifies it (`fib_dump_info` / `rt6_fill_node` order). A
/// route with `cache` set is the answer to a `route get`, in `rt_fill_info`'s order for IPv4.
/// RTA_EXPIRES is emitted only for routes without `cache` (requests and fibre's own IPv4
/// expiring routes); the kernel reports IPv6 expiry in RTA_CACHEINFO.
pub fn route_message(r: &Route) -> RouteMessage<'_> {
    let mut attributes = Vec::new();
    route_attrs(r, |a| attributes.push(a));
    RouteMessage {
        header: route_header(r),
        attributes,
    }
}

/// Appends `r` as a complete netlink message (what `message(t, flags, sequence, port,
/// Payload::Route(route_message(r))).emit(out)` writes, byte for byte), without building the
/// intermediate message: no allocation for a route with one next hop and no metrics. Dumps
/// encode every route this way.
pub fn emit_route(r: &Route, t: u16, flags: u16, sequence: u32, port: u32, out: &mut Vec<u8>) {
    let start = out.len();
    NetlinkHeader {
        length: 0,
        message_type: t,
        flags,
        sequence,
        port,
    }
    .emit(out);
    route_header(r).emit(out);
    route_attrs(r, |a| a.emit(out));
    let len = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

fn route_header(r: &Route) -> RouteHeader {
    RouteHeader {
        family: r.family as u8,
        dst_len: r.dst.len,
        src_len: r.src.map_or(0, |s| s.len),
        tos: r.tos,
        table: if r.table < 256 {
            r.table as u8
        } else {
            RT_TABLE_COMPAT
        },
        protocol: r.protocol,
        scope: r.scope,
        kind: r.rtype as u8,
        flags: r.flags
            | if r.multipath.is_empty() {
                r.nexthop.flags
            } else {
                0
            },
    }
}

/// The attributes of [`route_message`], in order, handed to `push` one at a time.
fn route_attrs<'a>(r: &'a Route, mut push: impl FnMut(RouteAttr<'a>)) {
    let mut opt = |a: Option<RouteAttr<'a>>| {
        if let Some(a) = a {
            push(a)
        }
    };
    if r.table != 0 {
        opt(Some(RouteAttr::Table(r.table)));
    }
    if r.dst.len > 0 || r.dst.addr != unspecified(r.family) {
        opt(Some(RouteAttr::Dst(r.dst.addr)));
    }
    opt(r.src.map(|s| RouteAttr::Src(s.addr)));
    let metrics = || {
        let m = metrics_attrs(&r.metrics);
        (!m.is_empty()).then(|| RouteAttr::Metrics(Nest::new(m)))
    };
    let oif = (r.nexthop.oif != 0).then_some(RouteAttr::Oif(r.nexthop.oif));
    // RTA_ENCAP and RTA_ENCAP_TYPE follow RTA_OIF (lwtunnel_fill_encap after the device).
    let encap = |opt: &mut dyn FnMut(Option<RouteAttr<'a>>)| {
        for a in r.nexthop.encap.iter().flat_map(crate::encap::attrs) {
            opt(Some(a));
        }
    };
    let gateway = r.nexthop.gateway.map(|g| gateway_attr(r.family, g));
    if r.family == Family::Inet && r.cache.is_some() {
        // rt_fill_info: the answer to an IPv4 `route get`.
        opt(oif);
        encap(&mut opt);
        opt(r.prefsrc.map(RouteAttr::PrefSrc));
        opt(gateway);
        // Not in the kernel's answers; kept so that nothing the model holds is lost.
        opt(r.priority.map(RouteAttr::Priority));
        opt(metrics());
        opt(r.nhid.map(RouteAttr::NhId));
        opt(multipath_attr(r));
        opt(r.mark.map(RouteAttr::Mark));
        opt(r.uid.map(RouteAttr::Uid));
        opt(r.iif.map(RouteAttr::Iif));
        opt(r.expires.map(RouteAttr::Expires));
        opt(r.pref.map(RouteAttr::Pref));
        opt(cache_attr(r));
        return;
    }
    // The single next hop (RTA_GATEWAY or RTA_VIA, RTA_OIF), then RTA_MULTIPATH. The kernel's
    // dumps have one or the other; a request may carry both (the kernel then checks that they
    // agree), so both are kept.
    match r.family {
        Family::Inet => {
            opt(r.priority.map(RouteAttr::Priority));
            opt(r.prefsrc.map(RouteAttr::PrefSrc));
            opt(metrics());
            opt(r.nhid.map(RouteAttr::NhId));
        }
        Family::Inet6 => {
            opt(r.iif.map(RouteAttr::Iif));
            opt(r.prefsrc.map(RouteAttr::PrefSrc));
            opt(metrics());
            opt(r.priority.map(RouteAttr::Priority));
            opt(r.nhid.map(RouteAttr::NhId));
        }
    }
    opt(gateway);
    opt(oif);
    encap(&mut opt);
    opt(multipath_attr(r));
    opt(r.mark.map(RouteAttr::Mark));
    opt(r.uid.map(RouteAttr::Uid));
    if r.family == Family::Inet {
        opt(r.iif.map(RouteAttr::Iif));
    }
    opt(r.expires.map(RouteAttr::Expires));
    opt(cache_attr(r));
    opt(r.pref.map(RouteAttr::Pref));
}

/// An RTM_GETROUTE request (not a dump) as the model reads it.
pub fn query_from(m: &RouteMessage<'_>) -> Result<RouteQuery, RequestError> {
    let h = &m.header;
    let fam = object_family(h.family)?;
    let mut q = RouteQuery {
        family: fam,
        dst: unspecified(fam),
        src: None,
        iif: None,
        oif: None,
        tos: h.tos,
        mark: 0,
        uid: None,
        ipproto: None,
        sport: None,
        dport: None,
        fibmatch: h.flags & rtm_flags::FIB_MATCH != 0,
        table: None,
    };
    for a in &m.attributes {
        match a {
            RouteAttr::Dst(ip) => q.dst = addr_of(fam, *ip)?,
            RouteAttr::Src(ip) => q.src = Some(addr_of(fam, *ip)?),
            RouteAttr::Iif(v) => q.iif = Some(*v),
            RouteAttr::Oif(v) => q.oif = Some(*v),
            RouteAttr::Mark(v) => q.mark = *v,
            RouteAttr::Uid(v) => q.uid = Some(*v),
            RouteAttr::IpProto(v) => q.ipproto = Some(*v),
            RouteAttr::SourcePort(Be16(p)) => q.sport = Some(*p),
            RouteAttr::DestinationPort(Be16(p)) => q.dport = Some(*p),
            RouteAttr::Table(t) => q.table = Some(*t),
            _ => {}
        }
    }
    Ok(q)
}

/// An RTM_GETROUTE request as iproute2's `ip route get` builds it.
pub fn query_message(q: &RouteQuery) -> RouteMessage<'static> {
    let full = q.family.max_len();
    let mut flags = 0;
    if q.fibmatch {
        flags |= rtm_flags::FIB_MATCH;
    }
    if q.table.is_some() {
        flags |= rtm_flags::LOOKUP_TABLE;
    }
    let header = RouteHeader {
        family: q.family as u8,
        dst_len: full,
        src_len: if q.src.is_some() { full } else { 0 },
        tos: q.tos,
        flags,
        ..RouteHeader::default()
    };
    let mut a = vec![RouteAttr::Dst(q.dst)];
    a.extend(q.src.map(RouteAttr::Src));
    a.extend(q.iif.map(RouteAttr::Iif));
    a.extend(q.oif.map(RouteAttr::Oif));
    if q.mark != 0 {
        a.push(RouteAttr::Mark(q.mark));
    }
    a.extend(q.uid.map(RouteAttr::Uid));
    a.extend(q.ipproto.map(RouteAttr::IpProto));
    a.extend(q.sport.map(|p| RouteAttr::SourcePort(Be16(p))));
    a.extend(q.dport.map(|p| RouteAttr::DestinationPort(Be16(p))));
    a.extend(q.table.map(RouteAttr::Table));
    RouteMessage {
        header,
        attributes: a,
    }
}

// ---------------------------------------------------------------------------------------------
// Rules
// ---------------------------------------------------------------------------------------------

fn rule_action(a: u8) -> Result<RuleAction, RequestError> {
    use RuleAction::*;
    Ok(match a {
        0 => Unspec,
        1 => ToTbl,
        2 => Goto,
        3 => Nop,
        6 => Blackhole,
        7 => Unreachable,
        8 => Prohibit,
        _ => return Err(invalid("Invalid rule action")),
    })
}

/// A rule message as the model reads it.
pub fn rule_from(m: &RuleMessage<'_>) -> Result<Rule, RequestError> {
    let h = &m.header;
    let fam = family(h.family).map_err(|_| {
        RequestError::from(RtError::msg(
            Errno::EAFNOSUPPORT,
            "Rule family not supported",
        ))
    })?;
    if h.dst_len > fam.max_len() || h.src_len > fam.max_len() {
        return Err(invalid("Invalid prefix length"));
    }
    let mut r = Rule {
        tos: h.tos,
        action: rule_action(h.action)?,
        flags: h.flags,
        ..Rule::new(fam, h.table as u32)
    };
    let (mut src, mut dst) = (None, None);
    for a in &m.attributes {
        match a {
            RuleAttr::Src(ip) => src = Some(addr_of(fam, *ip)?),
            RuleAttr::Dst(ip) => dst = Some(addr_of(fam, *ip)?),
            RuleAttr::IifName(s) => r.iifname = Some(text(s)?),
            RuleAttr::OifName(s) => r.oifname = Some(text(s)?),
            RuleAttr::Goto(v) => r.goto = Some(*v),
            RuleAttr::Priority(v) => r.priority = Some(*v),
            RuleAttr::FwMark(v) => r.fwmark = Some(*v),
            RuleAttr::FwMask(v) => r.fwmask = Some(*v),
            // The kernel stores both as ints whose -1 means "not set", and dumps every rule
            // with them: a request that gives -1 (as a dump replayed does) sets nothing.
            RuleAttr::SuppressIfGroup(v) => r.suppress_ifgroup = (*v != u32::MAX).then_some(*v),
            RuleAttr::SuppressPrefixLen(v) => r.suppress_prefixlen = (*v != u32::MAX).then_some(*v),
            RuleAttr::Table(v) => r.table = *v,
            RuleAttr::L3mdev(v) => r.l3mdev = *v != 0,
            RuleAttr::UidRange(u) => r.uid_range = Some((u.start, u.end)),
            RuleAttr::Protocol(v) => r.protocol = *v,
            RuleAttr::IpProto(v) => r.ipproto = Some(*v),
            RuleAttr::SourcePortRange(p) => r.sport = Some((p.start, p.end)),
            RuleAttr::DestinationPortRange(p) => r.dport = Some((p.start, p.end)),
            RuleAttr::Dscp(v) => r.dscp = Some(*v),
            _ => {}
        }
    }
    if h.src_len > 0 || src.is_some() {
        r.src = Some(Prefix {
            addr: src.unwrap_or(unspecified(fam)),
            len: h.src_len,
        });
    }
    if h.dst_len > 0 || dst.is_some() {
        r.dst = Some(Prefix {
            addr: dst.unwrap_or(unspecified(fam)),
            len: h.dst_len,
        });
    }
    Ok(r)
}

/// A rule as the kernel dumps and notifies it (`fib_nl_fill_rule` order).
pub fn rule_message(r: &Rule) -> RuleMessage<'_> {
    let header = RuleHeader {
        family: r.family as u8,
        dst_len: r.dst.map_or(0, |p| p.len),
        src_len: r.src.map_or(0, |p| p.len),
        tos: r.tos,
        table: if r.table < 256 {
            r.table as u8
        } else {
            RT_TABLE_COMPAT
        },
        action: r.action as u8,
        flags: r.flags,
        ..RuleHeader::default()
    };
    let mut a = vec![RuleAttr::Table(r.table)];
    a.extend(r.suppress_prefixlen.map(RuleAttr::SuppressPrefixLen));
    a.push(RuleAttr::Protocol(r.protocol));
    a.extend(
        r.iifname
            .as_deref()
            .map(|s| RuleAttr::IifName(NlStr::new(s))),
    );
    a.extend(
        r.oifname
            .as_deref()
            .map(|s| RuleAttr::OifName(NlStr::new(s))),
    );
    a.extend(r.priority.map(RuleAttr::Priority));
    a.extend(r.fwmark.map(RuleAttr::FwMark));
    a.extend(r.fwmask.map(RuleAttr::FwMask));
    a.extend(r.suppress_ifgroup.map(RuleAttr::SuppressIfGroup));
    a.extend(r.goto.map(RuleAttr::Goto));
    if r.l3mdev {
        a.push(RuleAttr::L3mdev(1));
    }
    a.extend(
        r.uid_range
            .map(|(start, end)| RuleAttr::UidRange(UidRange { start, end })),
    );
    a.extend(
        r.sport
            .map(|(start, end)| RuleAttr::SourcePortRange(PortRange { start, end })),
    );
    a.extend(
        r.dport
            .map(|(start, end)| RuleAttr::DestinationPortRange(PortRange { start, end })),
    );
    a.extend(r.ipproto.map(RuleAttr::IpProto));
    a.extend(r.dst.map(|p| RuleAttr::Dst(p.addr)));
    a.extend(r.src.map(|p| RuleAttr::Src(p.addr)));
    a.extend(r.dscp.map(RuleAttr::Dscp));
    RuleMessage {
        header,
        attributes: a,
    }
}

// ---------------------------------------------------------------------------------------------
// Next-hop objects
// ---------------------------------------------------------------------------------------------

/// Offset, from the start of the request, of attribute `index` of a next-hop message.
fn nexthop_attr_offset(m: &NexthopMessage<'_>, index: usize) -> u32 {
    let mut scratch = Vec::new();
    for a in &m.attributes[..index] {
        a.emit(&mut scratch);
    }
    (NetlinkHeader::LEN + NexthopHeader::LEN + scratch.len()) as u32
}

/// A next-hop object message as the model reads it. The kernel validates these strictly: an
/// unknown or malformed attribute is EINVAL with its offset.
pub fn nexthop_from(m: &NexthopMessage<'_>) -> Result<NexthopObj, RequestError> {
    let h = &m.header;
    let fam = match h.family {
        AF_UNSPEC => None,
        f => Some(family(f)?),
    };
    let mut nh = NexthopObj {
        id: 0,
        family: fam,
        gateway: None,
        oif: 0,
        blackhole: false,
        onlink: h.flags & nh_flags::ONLINK != 0,
        fdb: false,
        group: Vec::new(),
        group_type: 0,
        res: None,
        protocol: h.protocol,
        flags: h.flags,
        scope: h.scope,
        encap: None,
    };
    let mut res = None;
    let mut encap = crate::encap::Pending::default();
    for (i, a) in m.attributes.iter().enumerate() {
        let at = |text: &str| RequestError {
            error: RtError::msg(Errno::EINVAL, text),
            offset: Some(nexthop_attr_offset(m, i)),
            policy: Vec::new(),
        };
        match a {
            NexthopAttr::Id(v) => nh.id = *v,
            NexthopAttr::Group(entries) => {
                for e in entries {
                    if e.weight_high != 0 || e.resvd2 != 0 {
                        return Err(at("Reserved fields in nexthop_grp must be 0"));
                    }
                    nh.group.push(GroupMember {
                        id: e.id,
                        weight_minus_one: e.weight,
                    });
                }
            }
            NexthopAttr::GroupType(v) => nh.group_type = *v,
            NexthopAttr::Blackhole(Flag) => nh.blackhole = true,
            NexthopAttr::Oif(v) => nh.oif = *v,
            NexthopAttr::Gateway(ip) => {
                if fam.is_some_and(|f| f != Family::of(ip)) {
                    return Err(at("Invalid gateway address"));
                }
                nh.gateway = Some(*ip);
            }
            NexthopAttr::Fdb(Flag) => nh.fdb = true,
            NexthopAttr::Groups(Flag) | NexthopAttr::Master(_) | NexthopAttr::OpFlags(_) => {}
            NexthopAttr::EncapType(t) => encap.kind(*t)?,
            NexthopAttr::Encap(n) => encap.nest(*n),
            NexthopAttr::EncapOut(_) => {}
            NexthopAttr::ResGroup(n) => res = Some((i, n)),
            NexthopAttr::ResBucket(_) | NexthopAttr::Other(_) => {
                return Err(at("Unknown attribute type"))
            }
        }
    }
    // The parameters count only for a resilient group (rtm_to_nh_config_grp_res); another
    // group refuses them (nh_check_attr_group), a single next hop ignores them.
    if let (Some((i, n)), false) = (res, nh.group.is_empty()) {
        if nh.group_type != GROUP_TYPE_RES {
            return Err(RequestError {
                error: RtError::msg(
                    Errno::EINVAL,
                    "No other attributes expected in nexthop group",
                ),
                offset: None,
                policy: Vec::new(),
            });
        }
        let mut r = ResGroup::default();
        for a in &n.attrs {
            match a {
                ResGroupAttr::Buckets(v) => r.buckets = Some(*v),
                ResGroupAttr::IdleTimer(v) => r.idle_timer = Some(*v),
                ResGroupAttr::UnbalancedTimer(v) => r.unbalanced_timer = Some(*v),
                // An answer's; the model refuses it in a request.
                ResGroupAttr::UnbalancedTime(v) => r.unbalanced_time = Some(*v),
                ResGroupAttr::Other(_) => {
                    return Err(RequestError {
                        error: RtError::msg(Errno::EINVAL, "Unknown attribute type"),
                        offset: Some(nexthop_attr_offset(m, i)),
                        policy: Vec::new(),
                    })
                }
            }
        }
        nh.res = Some(r);
    }
    nh.encap = encap.finish_object()?;
    Ok(nh)
}

/// NEXTHOP_GRP_TYPE_RES.
const GROUP_TYPE_RES: u16 = 1;

/// An RTM_GETNEXTHOPBUCKET request (nh_valid_get_bucket_req, nh_valid_dump_bucket_req).
fn bucket_request(m: &NexthopMessage<'_>, dump: bool) -> Result<Request, RequestError> {
    let mut id = None;
    let mut index = None;
    let mut f = BucketDump::default();
    for a in &m.attributes {
        match a {
            NexthopAttr::Id(v) => id = Some(*v),
            NexthopAttr::Oif(v) => f.dev = *v,
            NexthopAttr::ResBucket(n) => {
                for x in &n.attrs {
                    match x {
                        ResBucketAttr::Index(v) => index = Some(*v),
                        ResBucketAttr::NhId(v) => f.nhid = Some(*v),
                        ResBucketAttr::IdleTime(_) | ResBucketAttr::Other(_) => {
                            return Err(invalid("Unknown attribute type"))
                        }
                    }
                }
            }
            _ => return Err(invalid("Unknown attribute type")),
        }
    }
    if dump {
        f.id = id;
        return Ok(Request::DumpBuckets(f));
    }
    match (id, index) {
        (None | Some(0), _) => Err(invalid("Nexthop id can not be 0")),
        (_, None) => Err(invalid("Bucket index is missing")),
        (Some(id), Some(index)) => Ok(Request::GetBucket(id, index)),
    }
}

/// One bucket of a resilient group as the kernel dumps and notifies it (nh_fill_res_bucket).
pub fn bucket_message(b: &NexthopBucket) -> NexthopMessage<'static> {
    NexthopMessage {
        header: NexthopHeader {
            family: AF_UNSPEC,
            protocol: b.protocol,
            ..NexthopHeader::default()
        },
        attributes: vec![
            NexthopAttr::Id(b.id),
            NexthopAttr::ResBucket(Nest {
                flagged: true,
                attrs: vec![
                    ResBucketAttr::Index(b.index),
                    ResBucketAttr::NhId(b.nhid),
                    ResBucketAttr::IdleTime(b.idle_time),
                ],
            }),
        ],
    }
}

/// A bucket message (RTM_NEWNEXTHOPBUCKET) as the model reads it; None without a group id or
/// a bucket index.
pub fn bucket_from(m: &NexthopMessage<'_>) -> Option<NexthopBucket> {
    let mut b = NexthopBucket {
        id: 0,
        index: 0,
        nhid: 0,
        idle_time: 0,
        protocol: m.header.protocol,
    };
    let mut index = None;
    for a in &m.attributes {
        match a {
            NexthopAttr::Id(v) => b.id = *v,
            NexthopAttr::ResBucket(n) => {
                for x in &n.attrs {
                    match x {
                        ResBucketAttr::Index(v) => index = Some(*v),
                        ResBucketAttr::IdleTime(v) => b.idle_time = *v,
                        ResBucketAttr::NhId(v) => b.nhid = *v,
                        ResBucketAttr::Other(_) => {}
                    }
                }
            }
            _ => {}
        }
    }
    b.index = index?;
    (b.id != 0).then_some(b)
}

/// NHA_OP_FLAGS in answers: the group's `struct nexthop_grp` reserved fields are zero.
const NHA_OP_FLAG_RESP_GRP_RESVD_0: u32 = 1 << 31;

/// A next-hop object as the kernel dumps and notifies it (`nh_fill_node` order).
pub fn nexthop_message(nh: &NexthopObj) -> NexthopMessage<'_> {
    let header = NexthopHeader {
        family: nh.family.map_or(AF_UNSPEC, |f| f as u8),
        scope: nh.scope,
        protocol: nh.protocol,
        flags: nh.flags | if nh.onlink { nh_flags::ONLINK } else { 0 },
        ..NexthopHeader::default()
    };
    // A valid object has one of: a group, blackhole, or device and gateway. Whatever the
    // model holds is emitted, so that a request keeps what it said.
    let mut a = vec![NexthopAttr::Id(nh.id)];
    if !nh.group.is_empty() || nh.group_type != 0 {
        a.push(NexthopAttr::GroupType(nh.group_type));
    }
    if !nh.group.is_empty() {
        let entries = nh
            .group
            .iter()
            .map(|g| GroupEntry {
                id: g.id,
                weight: g.weight_minus_one,
                ..GroupEntry::default()
            })
            .collect();
        a.push(NexthopAttr::Group(entries));
    }
    if let Some(r) = nh.res.filter(|_| nh.group_type == GROUP_TYPE_RES) {
        // nla_put_nh_group_res: an answer carries all four; a request what it was given.
        let mut n = Vec::with_capacity(4);
        n.extend(r.buckets.map(ResGroupAttr::Buckets));
        n.extend(r.idle_timer.map(ResGroupAttr::IdleTimer));
        n.extend(r.unbalanced_timer.map(ResGroupAttr::UnbalancedTimer));
        n.extend(r.unbalanced_time.map(ResGroupAttr::UnbalancedTime));
        // The kernel emits and requires this nest with NLA_F_NESTED (nla_nest_start).
        a.push(NexthopAttr::ResGroup(Nest {
            flagged: true,
            attrs: n,
        }));
    }
    if !nh.group.is_empty() {
        // The kernel (6.13 on) marks every group it reports: reserved fields are zero.
        a.push(NexthopAttr::OpFlags(NHA_OP_FLAG_RESP_GRP_RESVD_0));
    }
    if nh.blackhole {
        a.push(NexthopAttr::Blackhole(Flag));
    }
    if nh.oif != 0 {
        a.push(NexthopAttr::Oif(nh.oif));
    }
    a.extend(nh.gateway.map(NexthopAttr::Gateway));
    // nh_fill_node: the encapsulation after the gateway (lwtunnel_fill_encap).
    a.extend(nh.encap.iter().flat_map(crate::encap::nexthop_attrs));
    if nh.fdb {
        a.push(NexthopAttr::Fdb(Flag));
    }
    NexthopMessage {
        header,
        attributes: a,
    }
}

// ---------------------------------------------------------------------------------------------
// Neighbours
// ---------------------------------------------------------------------------------------------

/// A neighbour message as the model reads it (`neigh_add` / `neigh_delete`): NDA_DST is
/// required and must be of the message's family; NDA_LLADDR, NDA_PROTOCOL are taken, other
/// attributes ignored.
pub fn neighbour_from(m: &NeighbourMessage<'_>) -> Result<Neighbour, RequestError> {
    let h = &m.header;
    let Some(dst) = m.attributes.iter().find_map(|a| match a {
        NeighbourAttr::Dst(ip) => Some(*ip),
        _ => None,
    }) else {
        return Err(invalid("Network address not specified"));
    };
    let fam = family(h.family)?;
    if Family::of(&dst) != fam {
        return Err(invalid("Invalid network address"));
    }
    let mut n = Neighbour {
        family: fam,
        ifindex: u32::try_from(h.ifindex).unwrap_or(0),
        dst,
        lladdr: None,
        state: h.state,
        flags: h.flags,
        kind: h.kind,
        protocol: 0,
        confirmed: 0,
        refcnt: 0,
    };
    if h.ifindex < 0 {
        return Err(RtError::new(Errno::ENODEV).into());
    }
    for a in &m.attributes {
        match a {
            NeighbourAttr::LinkLayerAddress(l) => n.lladdr = Some(l.to_vec()),
            NeighbourAttr::Protocol(p) => n.protocol = *p,
            NeighbourAttr::CacheInfo(ci) => {
                n.confirmed = ci.confirmed;
                n.refcnt = ci.refcnt;
            }
            _ => {}
        }
    }
    Ok(n)
}

/// An RTM_GETNEIGH request for one entry, checked as the kernel's strict
/// `neigh_valid_get_req` checks it.
fn neigh_get_from(m: &NeighbourMessage<'_>) -> Result<Neighbour, RequestError> {
    let h = &m.header;
    if h.pad1 != 0 || h.pad2 != 0 || h.state != 0 || h.kind != 0 {
        return Err(invalid("Invalid values in header for neighbor get request"));
    }
    if h.flags & !ntf::PROXY != 0 {
        return Err(invalid("Invalid flags in header for neighbor get request"));
    }
    if m.attributes
        .iter()
        .any(|a| !matches!(a, NeighbourAttr::Dst(_)))
    {
        return Err(invalid("Unsupported attribute in neighbor get request"));
    }
    let fam = family(h.family)?;
    if m.attributes
        .iter()
        .any(|a| matches!(a, NeighbourAttr::Dst(ip) if Family::of(ip) != fam))
    {
        return Err(invalid("Invalid network address in neighbor get request"));
    }
    neighbour_from(m)
}

/// An RTM_GETNEIGH dump request: family, NTF_PROXY and the NDA_IFINDEX filter.
fn neigh_dump_from(m: &NeighbourMessage<'_>) -> Result<NeighDump, RequestError> {
    let ifindex = m
        .attributes
        .iter()
        .find_map(|a| match a {
            NeighbourAttr::IfIndex(i) => Some(*i),
            _ => None,
        })
        .unwrap_or(0);
    Ok(NeighDump {
        family: dump_family(m.header.family),
        proxy: m.header.flags & ntf::PROXY != 0,
        ifindex,
    })
}

/// A neighbour as the kernel dumps and notifies it (`neigh_fill_info`): NDA_DST, NDA_LLADDR
/// when the state is valid, NDA_PROBES, NDA_CACHEINFO, NDA_PROTOCOL when set; a proxy entry
/// (`pneigh_fill_info`) has NDA_DST and NDA_PROTOCOL only. Of the cache information fibre
/// has the confirmation age and the reference count; use and update ages are 0.
pub fn neighbour_message(n: &Neighbour) -> NeighbourMessage<'_> {
    let header = NeighbourHeader {
        family: n.family as u8,
        ifindex: n.ifindex as i32,
        state: n.state,
        flags: n.flags,
        kind: n.kind,
        ..NeighbourHeader::default()
    };
    let mut attrs = vec![NeighbourAttr::Dst(n.dst)];
    if !n.is_proxy() {
        attrs.extend(n.lladdr.as_deref().map(NeighbourAttr::LinkLayerAddress));
        attrs.push(NeighbourAttr::Probes(0));
        attrs.push(NeighbourAttr::CacheInfo(NeighbourCacheInfo {
            confirmed: n.confirmed,
            refcnt: n.refcnt,
            ..NeighbourCacheInfo::default()
        }));
    }
    if n.protocol != 0 {
        attrs.push(NeighbourAttr::Protocol(n.protocol));
    }
    NeighbourMessage {
        header,
        attributes: attrs,
    }
}

/// A neighbour request as iproute2's `ipneigh_modify` builds it: the header with state and
/// flags, NDA_DST, NDA_LLADDR when given, NDA_PROTOCOL when given.
fn neighbour_request(n: &Neighbour) -> NeighbourMessage<'_> {
    let mut m = neighbour_message(n);
    m.attributes = vec![NeighbourAttr::Dst(n.dst)];
    m.attributes
        .extend(n.lladdr.as_deref().map(NeighbourAttr::LinkLayerAddress));
    if n.protocol != 0 {
        m.attributes.push(NeighbourAttr::Protocol(n.protocol));
    }
    // Cache information is not something a client sets; it is carried only to keep
    // `request(request_message(r)) == r` for requests that had it.
    if n.confirmed != 0 || n.refcnt != 0 {
        m.attributes
            .push(NeighbourAttr::CacheInfo(NeighbourCacheInfo {
                confirmed: n.confirmed,
                refcnt: n.refcnt,
                ..NeighbourCacheInfo::default()
            }));
    }
    m
}

// ---------------------------------------------------------------------------------------------
// Messages: headers, ACKs, errors, end of dump
// ---------------------------------------------------------------------------------------------

/// A message with the given header fields; `nlmsg_len` is computed on emission.
pub fn message<'a>(
    message_type: u16,
    flags: u16,
    sequence: u32,
    port: u32,
    payload: Payload<'a>,
) -> NetlinkMessage<'a> {
    NetlinkMessage {
        header: NetlinkHeader {
            length: 0,
            message_type,
            flags,
            sequence,
            port,
        },
        payload,
    }
}

/// The NLMSG_ERROR answering `request` (the request's bytes as received, at least its
/// 16-byte header: the kernel answers nothing shorter) on the socket whose
/// port id is `port`: an ACK when
/// `result` is `Ok`, else `-errno` with NLMSGERR_ATTR_MSG and NLMSGERR_ATTR_OFFS when known.
/// As the kernel does, an ACK echoes only the request header (NLM_F_CAPPED), an error echoes
/// the whole request unless `capped` (the client set NETLINK_CAP_ACK), and NLM_F_ACK_TLVS
/// marks extended-ACK attributes.
pub fn ack<'a>(
    request: &'a [u8],
    result: Result<(), &'a RequestError>,
    capped: bool,
    port: u32,
) -> NetlinkMessage<'a> {
    let req = NetlinkHeader::parse_bytes(request, 0).unwrap_or_default();
    let full = (req.length as usize).clamp(request.len().min(NetlinkHeader::LEN), request.len());
    let (error, capped, extack) = match result {
        Ok(()) => (0, true, Vec::new()),
        Err(e) => (-e.error.errno.0, capped, extack_of(e)),
    };
    let echoed = if capped {
        &request[..request.len().min(NetlinkHeader::LEN)]
    } else {
        &request[..full]
    };
    let mut flags = 0;
    if capped {
        flags |= nf::NLM_F_CAPPED;
    }
    if !extack.is_empty() {
        flags |= nf::NLM_F_ACK_TLVS;
    }
    let payload = Payload::Error(ErrorMessage {
        error,
        request: echoed,
        extack,
    });
    message(mt::NLMSG_ERROR, flags, req.sequence, port, payload)
}

/// The extended ACK of an error: its text, the offending attribute's offset and the policy
/// it broke, in the kernel's order.
fn extack_of(e: &RequestError) -> Vec<ExtAckAttr<'_>> {
    let mut extack = Vec::new();
    if let Some(text) = &e.error.extack {
        extack.push(ExtAckAttr::Msg(NlStr::new(text)));
    }
    extack.extend(e.offset.map(ExtAckAttr::Offset));
    if let Ok(attrs) = fibre_netlink::nla::parse_attrs(&e.policy, 0) {
        if !attrs.is_empty() {
            extack.push(ExtAckAttr::Policy(Nest {
                flagged: true,
                attrs,
            }));
        }
    }
    extack
}

/// NLMSG_DONE ending a dump that failed, with the error and its extended ACK: the kernel
/// reports so what goes wrong inside a dump (validating its filters included), where a failed
/// request of any other kind gets NLMSG_ERROR.
pub fn done_error(sequence: u32, port: u32, e: &RequestError) -> NetlinkMessage<'_> {
    let extack = extack_of(e);
    let mut flags = nf::NLM_F_MULTI;
    if !extack.is_empty() {
        flags |= nf::NLM_F_ACK_TLVS;
    }
    let payload = Payload::Done(DoneMessage {
        code: Some(-e.error.errno.0),
        extack,
    });
    message(mt::NLMSG_DONE, flags, sequence, port, payload)
}

/// NLMSG_DONE ending a successful dump.
pub fn done(sequence: u32, port: u32) -> NetlinkMessage<'static> {
    let payload = Payload::Done(DoneMessage {
        code: Some(0),
        extack: Vec::new(),
    });
    message(mt::NLMSG_DONE, nf::NLM_F_MULTI, sequence, port, payload)
}

/// A request as a client (iproute2) sends it, with NLM_F_REQUEST, NLM_F_ACK on changes and
/// NLM_F_DUMP on dumps.
pub fn request_message(r: &Request, sequence: u32, port: u32) -> NetlinkMessage<'_> {
    let change = |modifiers: ReqFlags| nf::NLM_F_REQUEST | nf::NLM_F_ACK | flags_of(modifiers);
    let dump = nf::NLM_F_REQUEST | nf::NLM_F_DUMP;
    let get = nf::NLM_F_REQUEST;
    let fam = |f: &Option<Family>| f.map_or(AF_UNSPEC, |f| f as u8);
    let id_only = |id: u32| NexthopMessage {
        header: NexthopHeader::default(),
        attributes: vec![NexthopAttr::Id(id)],
    };
    let (t, flags, payload) = match r {
        Request::NewLink(l, f) => (mt::RTM_NEWLINK, change(*f), Payload::Link(link_request(l))),
        Request::DelLink(l) => (
            mt::RTM_DELLINK,
            change(ReqFlags::NONE),
            Payload::Link(link_request(l)),
        ),
        Request::GetLink(l) => (mt::RTM_GETLINK, get, Payload::Link(link_request(l))),
        Request::DumpLinks => {
            let m = LinkMessage {
                header: LinkHeader::default(),
                attributes: Vec::new(),
            };
            (mt::RTM_GETLINK, dump, Payload::Link(m))
        }
        Request::NewAddr(a, f) => (
            mt::RTM_NEWADDR,
            change(*f),
            Payload::Address(address_request(a)),
        ),
        Request::DelAddr(a) => (
            mt::RTM_DELADDR,
            change(ReqFlags::NONE),
            Payload::Address(address_request(a)),
        ),
        Request::DumpAddrs(f) => {
            let header = AddressHeader {
                family: fam(f),
                ..AddressHeader::default()
            };
            (
                mt::RTM_GETADDR,
                dump,
                Payload::Address(AddressMessage {
                    header,
                    attributes: Vec::new(),
                }),
            )
        }
        Request::NewRoute(rt, f) => (
            mt::RTM_NEWROUTE,
            change(*f),
            Payload::Route(route_message(rt)),
        ),
        Request::DelRoute(rt) => (
            mt::RTM_DELROUTE,
            change(ReqFlags::NONE),
            Payload::Route(route_message(rt)),
        ),
        Request::GetRoute(q) => (mt::RTM_GETROUTE, get, Payload::Route(query_message(q))),
        Request::DumpRoutes(f) => {
            let header = RouteHeader {
                family: fam(f),
                ..RouteHeader::default()
            };
            (
                mt::RTM_GETROUTE,
                dump,
                Payload::Route(RouteMessage {
                    header,
                    attributes: Vec::new(),
                }),
            )
        }
        Request::NewRule(rule, f) => (
            mt::RTM_NEWRULE,
            change(*f),
            Payload::Rule(rule_message(rule)),
        ),
        Request::DelRule(rule) => (
            mt::RTM_DELRULE,
            change(ReqFlags::NONE),
            Payload::Rule(rule_message(rule)),
        ),
        Request::DumpRules(f) => {
            let header = RuleHeader {
                family: fam(f),
                ..RuleHeader::default()
            };
            (
                mt::RTM_GETRULE,
                dump,
                Payload::Rule(RuleMessage {
                    header,
                    attributes: Vec::new(),
                }),
            )
        }
        Request::NewNexthop(nh, f) => {
            // The kernel rejects a scope in requests ("Invalid values in ancillary header").
            let mut m = nexthop_message(nh);
            m.header.scope = scope::UNIVERSE;
            // Answers only: the request policy has no NHA_OP_FLAGS.
            m.attributes
                .retain(|a| !matches!(a, NexthopAttr::OpFlags(_)));
            (mt::RTM_NEWNEXTHOP, change(*f), Payload::Nexthop(m))
        }
        Request::DelNexthop(id) => (
            mt::RTM_DELNEXTHOP,
            change(ReqFlags::NONE),
            Payload::Nexthop(id_only(*id)),
        ),
        Request::GetNexthop(id) => (mt::RTM_GETNEXTHOP, get, Payload::Nexthop(id_only(*id))),
        Request::DumpNexthops => {
            let m = NexthopMessage {
                header: NexthopHeader::default(),
                attributes: Vec::new(),
            };
            (mt::RTM_GETNEXTHOP, dump, Payload::Nexthop(m))
        }
        Request::GetBucket(id, index) => {
            let m = NexthopMessage {
                header: NexthopHeader::default(),
                attributes: vec![
                    NexthopAttr::Id(*id),
                    NexthopAttr::ResBucket(Nest {
                        flagged: true,
                        attrs: vec![ResBucketAttr::Index(*index)],
                    }),
                ],
            };
            (mt::RTM_GETNEXTHOPBUCKET, get, Payload::Nexthop(m))
        }
        Request::DumpBuckets(f) => {
            let mut attributes = Vec::new();
            attributes.extend(f.id.map(NexthopAttr::Id));
            if f.dev != 0 {
                attributes.push(NexthopAttr::Oif(f.dev));
            }
            if let Some(n) = f.nhid {
                attributes.push(NexthopAttr::ResBucket(Nest {
                    flagged: true,
                    attrs: vec![ResBucketAttr::NhId(n)],
                }));
            }
            let m = NexthopMessage {
                header: NexthopHeader::default(),
                attributes,
            };
            (mt::RTM_GETNEXTHOPBUCKET, dump, Payload::Nexthop(m))
        }
        Request::NewNeigh(n, f) => (
            mt::RTM_NEWNEIGH,
            change(*f),
            Payload::Neighbour(neighbour_request(n)),
        ),
        Request::DelNeigh(n) => (
            mt::RTM_DELNEIGH,
            change(ReqFlags::NONE),
            Payload::Neighbour(neighbour_request(n)),
        ),
        Request::GetNeigh(n) => {
            let mut m = neighbour_request(n);
            m.header.state = 0;
            m.attributes.retain(|a| matches!(a, NeighbourAttr::Dst(_)));
            (mt::RTM_GETNEIGH, get, Payload::Neighbour(m))
        }
        Request::DumpNeighs(d) => {
            let header = NeighbourHeader {
                family: fam(&d.family),
                flags: if d.proxy { ntf::PROXY } else { 0 },
                ..NeighbourHeader::default()
            };
            let mut attributes = Vec::new();
            if d.ifindex != 0 {
                attributes.push(NeighbourAttr::IfIndex(d.ifindex));
            }
            (
                mt::RTM_GETNEIGH,
                dump,
                Payload::Neighbour(NeighbourMessage { header, attributes }),
            )
        }
        Request::EmptyDump {
            message_type,
            family,
        } => {
            let payload = if *message_type == mt::RTM_GETNEIGH {
                Payload::Neighbour(NeighbourMessage {
                    header: NeighbourHeader {
                        family: *family,
                        ..NeighbourHeader::default()
                    },
                    attributes: Vec::new(),
                })
            } else {
                Payload::Rule(RuleMessage {
                    header: RuleHeader {
                        family: *family,
                        ..RuleHeader::default()
                    },
                    attributes: Vec::new(),
                })
            };
            (*message_type, dump, payload)
        }
    };
    message(t, flags, sequence, port, payload)
}

/// The conversion's round-trip property, for the fuzzer and the tests that replay its
/// corpus: every request [`request`] accepts from `buf` encodes with [`request_message`] into
/// bytes that parse and convert back to the same request. Answers are built for rejected
/// requests too. Returns how many requests were accepted.
///
/// Panics when the property fails, which is a bug in this crate.
#[allow(
    clippy::expect_used,
    reason = "a property check: it panics when the property fails"
)]
pub fn check_requests(buf: &[u8]) -> usize {
    let mut accepted = 0;
    for item in Messages::new(buf) {
        let Ok((offset, msg)) = item else { break };
        let len = msg.header.length as usize;
        // The daemon's reading: the policy check, then the same conversion; its refusals
        // (an extended ACK with a policy description) encode into answers that parse.
        match request_bytes(&buf[offset..offset + len]) {
            Ok(r) => assert_eq!(Ok(r), request(&msg), "request at offset {offset}"),
            Err(e) => {
                let answer = ack(&buf[offset..offset + len], Err(&e), false, 1).to_bytes();
                assert!(
                    NetlinkMessage::parse(&answer, 0).is_ok(),
                    "policy answer at offset {offset} parses"
                );
            }
        }
        match request(&msg) {
            Ok(r) => {
                let bytes = request_message(&r, 1, 0).to_bytes();
                let (again, _) = NetlinkMessage::parse(&bytes, 0).expect("encoded request parses");
                assert_eq!(
                    request(&again).as_ref(),
                    Ok(&r),
                    "request at offset {offset}"
                );
                let _ = ack(&buf[offset..offset + len], Ok(()), false, 1).to_bytes();
                accepted += 1;
            }
            Err(e) => {
                let answer = ack(&buf[offset..offset + len], Err(&e), false, 1).to_bytes();
                assert!(
                    NetlinkMessage::parse(&answer, 0).is_ok(),
                    "error answer at offset {offset} parses"
                );
            }
        }
    }
    accepted
}
