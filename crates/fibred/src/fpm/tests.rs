//! The session against the engine, with messages shaped as FRR 8.4's zebra sends them
//! (`zebra/rt_netlink.c`: metric 20, RTPROT_ZSTATIC, next-hop groups sent first, an update as
//! RTM_DELROUTE + RTM_NEWROUTE, IPv6 adds without NLM_F_REPLACE).

use super::session::{Names, Session, Settings, FIRST_ID};
use crate::engine::{ClientCtx, Engine, Outcome};
use fibre_fib::types::*;
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::nexthop::{GroupEntry, NexthopAttr, NexthopHeader, NexthopMessage};
use fibre_netlink::route::{RouteAttr, RouteHeader, RouteMessage};
use fibre_netlink::{NetlinkHeader, NetlinkMessage, Payload};
use fibre_proto::convert::{self, Request};
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

const RTPROT_ZSTATIC: u8 = 196;
const RTPROT_ZEBRA: u8 = 11;
const ZEBRA_METRIC: u32 = 20;
/// zebra's index of its `eth1`, unrelated to fibre's.
const ZEBRA_ETH1: u32 = 41;

struct FakeNames(HashMap<u32, String>);

impl Names for FakeNames {
    fn name(&mut self, ifindex: u32) -> Option<String> {
        self.0.get(&ifindex).cloned()
    }
}

fn names() -> FakeNames {
    FakeNames(HashMap::from([(ZEBRA_ETH1, "eth1".to_string())]))
}

/// An engine with link `eth1` up, 10.0.1.1/24 and 2001:db8:1::1/64 on it.
fn engine() -> Engine {
    let mut e = Engine::default();
    let link = Link {
        ifname: Some("eth1".into()),
        kind: Some(LinkKind::Dummy),
        flags: 1,
        change: 1,
        ..Link::default()
    };
    request(&mut e, &Request::NewLink(link, ReqFlags::ADD));
    let ifindex = e.fib().link_index("eth1").unwrap();
    for (a, len) in [("10.0.1.1", 24), ("2001:db8:1::1", 64)] {
        let addr = Address::new(ifindex, a.parse().unwrap(), len);
        request(&mut e, &Request::NewAddr(addr, ReqFlags::ADD));
    }
    e
}

/// The engine of [`engine`] and a session whose first connection has just started.
fn connected() -> (Engine, Session) {
    let mut s = Session::new(Settings::default());
    s.connected(Instant::now());
    (engine(), s)
}

fn request(e: &mut Engine, r: &Request) -> i32 {
    let mut m = convert::request_message(r, 1, 0);
    m.header.flags |= nf::NLM_F_ACK;
    let mut out = Outcome::default();
    e.handle(&m.to_bytes(), &mut ClientCtx::default(), 0, &mut out);
    match &out.replies[..] {
        [crate::engine::Reply::Messages(b)] => match NetlinkMessage::parse(b, 0).unwrap().0.payload
        {
            Payload::Error(err) => err.error,
            other => panic!("not an ACK: {other:?}"),
        },
        _ => panic!("one answer expected"),
    }
}

fn header(t: u16, flags: u16) -> NetlinkHeader {
    NetlinkHeader {
        length: 0,
        message_type: t,
        flags: nf::NLM_F_REQUEST | flags,
        sequence: 0,
        port: 0,
    }
}

/// A zebra next hop (`id`, through `gw` on zebra's eth1).
fn znh(id: u32, gw: &str) -> NetlinkMessage<'static> {
    let gw: IpAddr = gw.parse().unwrap();
    NetlinkMessage {
        header: header(mt::RTM_NEWNEXTHOP, nf::NLM_F_CREATE | nf::NLM_F_REPLACE),
        payload: Payload::Nexthop(NexthopMessage {
            header: NexthopHeader {
                family: if gw.is_ipv4() { 2 } else { 10 },
                protocol: RTPROT_ZEBRA,
                ..Default::default()
            },
            attributes: vec![
                NexthopAttr::Id(id),
                NexthopAttr::Gateway(gw),
                NexthopAttr::Oif(ZEBRA_ETH1),
            ],
        }),
    }
}

fn zgroup(id: u32, members: &[u32]) -> NetlinkMessage<'static> {
    let group = members
        .iter()
        .map(|&m| GroupEntry {
            id: m,
            ..Default::default()
        })
        .collect();
    NetlinkMessage {
        header: header(mt::RTM_NEWNEXTHOP, nf::NLM_F_CREATE | nf::NLM_F_REPLACE),
        payload: Payload::Nexthop(NexthopMessage {
            header: NexthopHeader {
                protocol: RTPROT_ZEBRA,
                ..Default::default()
            },
            attributes: vec![NexthopAttr::Id(id), NexthopAttr::Group(group)],
        }),
    }
}

fn zdelgroup(id: u32) -> NetlinkMessage<'static> {
    NetlinkMessage {
        header: header(mt::RTM_DELNEXTHOP, 0),
        payload: Payload::Nexthop(NexthopMessage {
            header: NexthopHeader::default(),
            attributes: vec![NexthopAttr::Id(id)],
        }),
    }
}

fn zroute_header(dst: IpAddr, len: u8, protocol: u8) -> RouteHeader {
    RouteHeader {
        family: if dst.is_ipv4() { 2 } else { 10 },
        dst_len: len,
        table: 254,
        protocol,
        kind: 1,
        ..Default::default()
    }
}

/// A zebra route add: through group `nh` (next-hop groups on), or through `gw` on eth1.
fn zroute(dst: &str, len: u8, via: Via) -> NetlinkMessage<'static> {
    let d: IpAddr = dst.parse().unwrap();
    let mut attributes = vec![RouteAttr::Dst(d), RouteAttr::Priority(ZEBRA_METRIC)];
    match via {
        Via::Group(id) => attributes.push(RouteAttr::NhId(id)),
        Via::Gateway(gw) => {
            attributes.push(RouteAttr::Gateway(gw.parse().unwrap()));
            attributes.push(RouteAttr::Oif(ZEBRA_ETH1));
        }
    }
    // zebra 8.4 asks IPv4 adds to replace and leaves IPv6 adds without.
    let replace = if d.is_ipv4() { nf::NLM_F_REPLACE } else { 0 };
    NetlinkMessage {
        header: header(mt::RTM_NEWROUTE, nf::NLM_F_CREATE | replace),
        payload: Payload::Route(RouteMessage {
            header: zroute_header(d, len, RTPROT_ZSTATIC),
            attributes,
        }),
    }
}

/// A zebra route delete: the prefix, table and protocol alone.
fn zdelroute(dst: &str, len: u8) -> NetlinkMessage<'static> {
    let d: IpAddr = dst.parse().unwrap();
    NetlinkMessage {
        header: header(mt::RTM_DELROUTE, 0),
        payload: Payload::Route(RouteMessage {
            header: zroute_header(d, len, RTPROT_ZSTATIC),
            attributes: vec![RouteAttr::Dst(d)],
        }),
    }
}

enum Via {
    Group(u32),
    Gateway(&'static str),
}

/// A frame's payload: the messages back to back.
fn frame(msgs: &[NetlinkMessage<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in msgs {
        m.emit(&mut out);
        out.resize(out.len().next_multiple_of(4), 0);
    }
    out
}

fn feed(s: &mut Session, e: &mut Engine, frames: &[Vec<u8>]) {
    e.begin();
    s.frames(
        e,
        &mut names(),
        frames.iter().map(Vec::as_slice),
        Instant::now(),
        0,
    );
    e.publish();
}

/// A route as the tests compare it: prefix, gateways, next-hop id, metric.
type Seen = (String, Vec<IpAddr>, Option<u32>, Option<u32>);

/// The main table's routes of zebra's protocol.
fn routes(e: &Engine) -> Vec<Seen> {
    e.fib()
        .routes(None)
        .into_iter()
        .filter(|r| r.table == 254 && r.protocol == RTPROT_ZSTATIC)
        .map(|r| {
            let gws = std::iter::once(&r.nexthop)
                .chain(&r.multipath)
                .filter_map(|n| n.gateway)
                .collect();
            (
                format!("{}/{}", r.dst.addr, r.dst.len),
                gws,
                r.nhid,
                r.priority,
            )
        })
        .collect()
}

#[test]
fn groups_get_ids_of_their_own_and_routes_use_them() {
    let mut e = engine();
    // A user's object already holds the first id of the feed's space.
    let user = NexthopObj {
        id: FIRST_ID,
        family: Some(Family::Inet),
        gateway: Some("10.0.1.9".parse().unwrap()),
        oif: e.fib().link_index("eth1").unwrap(),
        ..Default::default()
    };
    assert_eq!(
        request(&mut e, &Request::NewNexthop(user, ReqFlags::ADD)),
        0
    );
    let mut s = Session::new(Settings::default());
    s.connected(Instant::now());
    feed(
        &mut s,
        &mut e,
        &[
            frame(&[znh(1, "10.0.1.2")]),
            frame(&[znh(2, "10.0.1.3")]),
            frame(&[zgroup(3, &[1, 2])]),
            frame(&[zroute("192.0.2.0", 24, Via::Group(3))]),
        ],
    );
    let objs: HashMap<u32, NexthopObj> =
        e.fib().nexthops().into_iter().map(|n| (n.id, n)).collect();
    // The user's object is untouched; zebra's three took the next ids.
    assert_eq!(objs[&FIRST_ID].gateway, Some("10.0.1.9".parse().unwrap()));
    let group = &objs[&(FIRST_ID + 3)];
    let members: Vec<u32> = group.group.iter().map(|m| m.id).collect();
    assert_eq!(members, [FIRST_ID + 1, FIRST_ID + 2]);
    // The route's next hops, as the group's members resolve them.
    let gws = vec!["10.0.1.2".parse().unwrap(), "10.0.1.3".parse().unwrap()];
    assert_eq!(
        routes(&e),
        [("192.0.2.0/24".into(), gws, Some(FIRST_ID + 3), Some(20))]
    );
    let c = s.counters();
    assert_eq!((c.groups_added, c.routes_added, c.refused), (3, 1, 1));
}

#[test]
fn a_route_waits_for_its_group() {
    let (mut e, mut s) = connected();
    feed(
        &mut s,
        &mut e,
        &[frame(&[zroute("192.0.2.0", 24, Via::Group(7))])],
    );
    assert_eq!(routes(&e), []);
    assert_eq!(s.counters().held, 1);
    feed(&mut s, &mut e, &[frame(&[znh(7, "10.0.1.2")])]);
    let gw = vec!["10.0.1.2".parse().unwrap()];
    assert_eq!(
        routes(&e),
        [("192.0.2.0/24".into(), gw, Some(FIRST_ID), Some(20))]
    );
    assert_eq!((s.counters().held, s.counters().held_total), (0, 1));
    // A held route that zebra deletes before its group comes is forgotten.
    feed(
        &mut s,
        &mut e,
        &[
            frame(&[zroute("198.51.100.0", 24, Via::Group(8))]),
            frame(&[zdelroute("198.51.100.0", 24)]),
            frame(&[znh(8, "10.0.1.3")]),
        ],
    );
    assert_eq!(routes(&e).len(), 1);
    assert_eq!(s.counters().held, 0);
}

#[test]
fn every_add_replaces_and_an_update_pair_leaves_one_route() {
    let (mut e, mut s) = connected();
    // IPv6 adds without NLM_F_REPLACE would append next hops on rtnetlink.
    feed(
        &mut s,
        &mut e,
        &[
            frame(&[zroute("2001:db8:9::", 48, Via::Gateway("2001:db8:1::2"))]),
            frame(&[zroute("2001:db8:9::", 48, Via::Gateway("2001:db8:1::3"))]),
            frame(&[
                zdelroute("10.9.0.0", 16),
                zroute("10.9.0.0", 16, Via::Gateway("10.0.1.2")),
            ]),
            frame(&[
                zdelroute("10.9.0.0", 16),
                zroute("10.9.0.0", 16, Via::Gateway("10.0.1.3")),
            ]),
        ],
    );
    let mut got = routes(&e);
    got.sort();
    assert_eq!(
        got,
        [
            (
                "10.9.0.0/16".into(),
                vec!["10.0.1.3".parse().unwrap()],
                None,
                Some(20)
            ),
            (
                "2001:db8:9::/48".into(),
                vec!["2001:db8:1::3".parse().unwrap()],
                None,
                Some(20)
            ),
        ]
    );
}

#[test]
fn interfaces_map_by_name_and_unknown_ones_are_refused() {
    let (mut e, mut s) = connected();
    let mut unknown = zroute("10.8.0.0", 16, Via::Gateway("10.0.1.2"));
    if let Payload::Route(r) = &mut unknown.payload {
        for a in &mut r.attributes {
            if let RouteAttr::Oif(i) = a {
                *i = 99;
            }
        }
    }
    feed(&mut s, &mut e, &[frame(&[unknown])]);
    assert_eq!(routes(&e), []);
    assert_eq!(s.counters().unknown_link, 1);
    // zebra's index 41 is fibre's eth1, whatever index fibre gave it.
    feed(
        &mut s,
        &mut e,
        &[frame(&[zroute("10.8.0.0", 16, Via::Gateway("10.0.1.2"))])],
    );
    let r = &e
        .fib()
        .routes(None)
        .into_iter()
        .find(|r| r.dst.len == 16)
        .unwrap();
    assert_eq!(Some(r.nexthop.oif), e.fib().link_index("eth1"));
}

#[test]
fn connected_routes_are_fibres_own() {
    let (mut e, mut s) = connected();
    let mut m = zroute("10.0.1.0", 24, Via::Gateway("10.0.1.2"));
    if let Payload::Route(r) = &mut m.payload {
        r.header.protocol = 2;
    }
    let before = e.fib().routes(None);
    feed(&mut s, &mut e, &[frame(&[m])]);
    assert_eq!(e.fib().routes(None), before);
    assert_eq!(s.counters().skipped, 1);
}

#[test]
fn a_reconnect_sweeps_only_what_was_not_replayed() {
    let mut e = engine();
    let settings = Settings {
        sweep_quiet: Duration::from_secs(5),
        sweep_max: Duration::from_secs(60),
        ..Settings::default()
    };
    let mut s = Session::new(settings);
    let t0 = Instant::now();
    s.connected(t0);
    feed(
        &mut s,
        &mut e,
        &[
            frame(&[znh(1, "10.0.1.2")]),
            frame(&[znh(2, "10.0.1.3")]),
            frame(&[zroute("192.0.2.0", 24, Via::Group(1))]),
            frame(&[zroute("198.51.100.0", 24, Via::Group(2))]),
        ],
    );
    // A route of the user's, of the same protocol and metric, is none of the feed's.
    let mut mine = fibre_fib::types::Route::new(
        Family::Inet,
        Prefix {
            addr: "203.0.113.0".parse().unwrap(),
            len: 24,
        },
    );
    mine.protocol = RTPROT_ZSTATIC;
    mine.priority = Some(ZEBRA_METRIC);
    mine.rtype = RouteType::Blackhole;
    assert_eq!(request(&mut e, &Request::NewRoute(mine, ReqFlags::ADD)), 0);
    // The connection drops: nothing is removed.
    s.disconnected();
    assert_eq!(s.sweep_due(), None);
    assert_eq!(routes(&e).len(), 3);
    // The next one replays one group and one route, then goes quiet.
    let t1 = t0 + Duration::from_secs(1);
    s.connected(t1);
    feed(
        &mut s,
        &mut e,
        &[
            frame(&[znh(1, "10.0.1.2")]),
            frame(&[zroute("192.0.2.0", 24, Via::Group(1))]),
        ],
    );
    let due = s.sweep_due().unwrap();
    assert!(due <= Instant::now() + Duration::from_secs(5) && due >= t1);
    e.begin();
    s.sweep(&mut e, 0);
    e.publish();
    let mut got: Vec<String> = routes(&e).into_iter().map(|r| r.0).collect();
    got.sort();
    assert_eq!(got, ["192.0.2.0/24", "203.0.113.0/24"]);
    let ids: Vec<u32> = e.fib().nexthops().into_iter().map(|n| n.id).collect();
    assert_eq!(ids, [FIRST_ID]);
    let c = s.counters();
    assert_eq!((c.swept_routes, c.swept_groups), (1, 1));
    assert_eq!(s.sweep_due(), None);
}

#[test]
fn deleting_a_group_deletes_zebras_object() {
    let (mut e, mut s) = connected();
    feed(
        &mut s,
        &mut e,
        &[frame(&[znh(1, "10.0.1.2")]), frame(&[zdelgroup(1)])],
    );
    assert!(e.fib().nexthops().is_empty());
    assert_eq!(s.counters().groups_deleted, 1);
}

#[test]
fn offload_feedback_echoes_each_route_with_its_outcome() {
    let mut e = engine();
    let mut s = Session::new(Settings {
        offload: true,
        ..Settings::default()
    });
    s.connected(Instant::now());
    let good = zroute("10.7.0.0", 16, Via::Gateway("10.0.1.2"));
    // No route to this gateway: refused.
    let bad = zroute("10.6.0.0", 16, Via::Gateway("10.200.0.1"));
    feed(&mut s, &mut e, &[frame(&[good]), frame(&[bad])]);
    let fb = s.take_feedback();
    let flags: Vec<(u16, u32)> = fibre_netlink::message::Messages::new(&fb)
        .flatten()
        .map(|(_, m)| match m.payload {
            Payload::Route(r) => (m.header.flags, r.header.flags),
            other => panic!("not a route: {other:?}"),
        })
        .collect();
    assert_eq!(
        flags,
        [
            (nf::NLM_F_REQUEST, 0x4000),
            (nf::NLM_F_REQUEST, 0x2000_0000)
        ]
    );
    assert_eq!(s.counters().feedback, 2);
}

#[test]
fn a_restarted_fibred_sweeps_what_its_last_run_installed_and_zebra_did_not_replay() {
    let (mut e, mut s) = connected();
    feed(
        &mut s,
        &mut e,
        &[
            frame(&[znh(1, "10.0.1.2")]),
            frame(&[znh(2, "10.0.1.3")]),
            frame(&[zroute("192.0.2.0", 24, Via::Group(1))]),
            frame(&[zroute("198.51.100.0", 24, Via::Group(2))]),
        ],
    );
    // fibred restarts on the same state; zebra replays one group and one route.
    let mut s = Session::new(Settings::default());
    s.adopt(e.fib());
    s.connected(Instant::now());
    feed(
        &mut s,
        &mut e,
        &[
            frame(&[znh(1, "10.0.1.2")]),
            frame(&[zroute("192.0.2.0", 24, Via::Group(1))]),
        ],
    );
    e.begin();
    s.sweep(&mut e, 0);
    e.publish();
    // The replayed group took a new id; both old objects are gone.
    let gw = vec!["10.0.1.2".parse().unwrap()];
    assert_eq!(
        routes(&e),
        [("192.0.2.0/24".into(), gw, Some(FIRST_ID + 2), Some(20))]
    );
    let ids: Vec<u32> = e.fib().nexthops().into_iter().map(|n| n.id).collect();
    assert_eq!(ids, [FIRST_ID + 2]);
    let c = s.counters();
    assert_eq!((c.swept_routes, c.swept_groups), (1, 2));
}

#[test]
fn a_group_waits_for_its_members() {
    let (mut e, mut s) = connected();
    // As FRR 8.4 walks its groups: the group after one member, before the others.
    feed(
        &mut s,
        &mut e,
        &[
            frame(&[znh(16, "10.0.1.2")]),
            frame(&[zgroup(17, &[16, 18, 19])]),
            frame(&[znh(18, "10.0.1.3")]),
            frame(&[zroute("198.51.100.0", 24, Via::Group(17))]),
        ],
    );
    assert_eq!(routes(&e), []);
    assert_eq!(s.counters().held, 2);
    feed(&mut s, &mut e, &[frame(&[znh(19, "10.0.1.4")])]);
    let gws = ["10.0.1.2", "10.0.1.3", "10.0.1.4"].map(|g| g.parse::<IpAddr>().unwrap());
    let got = routes(&e);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, gws);
    // The group waited twice (for 18, then for 19), the route once.
    assert_eq!((s.counters().held, s.counters().held_total), (0, 3));
}
