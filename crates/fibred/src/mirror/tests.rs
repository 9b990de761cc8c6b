//! The writer's side of mirror mode against the engine, with messages shaped as the kernel
//! dumps and announces them (flags it sets, attributes it adds, what it leaves out).

use super::session::Mirror;
use super::Event;
use crate::engine::Engine;
use fibre_fib::types::*;
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::route::RouteAttr;
use fibre_netlink::rule::RuleAttr;
use fibre_netlink::{NetlinkMessage, Payload};
use fibre_proto::convert::{self, Request};
use std::net::IpAddr;

const IFF_UP: u32 = 1;
const RTNH_F_LINKDOWN: u32 = 16;

/// A message as the kernel sends it in a dump: the request's body, NLM_F_MULTI.
fn dumped(r: &Request) -> NetlinkMessage<'_> {
    let mut m = convert::request_message(r, 0, 0);
    m.header.flags = nf::NLM_F_MULTI;
    m
}

fn bytes(msgs: &[NetlinkMessage<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in msgs {
        m.emit(&mut out);
        out.resize(out.len().next_multiple_of(4), 0);
    }
    out
}

/// What every namespace holds before anything is configured (the loopback, the default
/// rules), as a fresh fibre holds it: a dump always starts with it.
fn namespace() -> Vec<Request> {
    let e = Engine::default();
    let fib = e.fib();
    let links = fib
        .links()
        .into_iter()
        .map(|l| Request::NewLink(l, ReqFlags::ADD));
    let rules = fib
        .rules(None)
        .into_iter()
        .map(|r| Request::NewRule(r, ReqFlags::ADD));
    links.chain(rules).collect()
}

/// The namespace with eth1 up and 10.0.1.1/24 on it.
fn with_eth1() -> Vec<Request> {
    let mut v = namespace();
    v.extend([
        Request::NewLink(eth1(), ReqFlags::ADD),
        Request::NewAddr(addr(), ReqFlags::ADD),
    ]);
    v
}

fn eth1() -> Link {
    Link {
        ifindex: 3,
        ifname: Some("eth1".into()),
        flags: IFF_UP,
        mtu: Some(1500),
        ..Link::default()
    }
}

fn addr() -> Address {
    Address::new(3, "10.0.1.1".parse().unwrap(), 24)
}

fn route(dst: &str, gw: &str) -> Route {
    let mut r = Route::new(
        Family::Inet,
        Prefix {
            addr: dst.parse().unwrap(),
            len: 24,
        },
    );
    // A dump names the table (a request may leave it to default to main).
    r.table = 254;
    r.protocol = 3;
    r.nexthop.gateway = Some(gw.parse().unwrap());
    r.nexthop.oif = 3;
    r
}

fn sync(m: &mut Mirror, e: &mut Engine, msgs: &[NetlinkMessage<'_>], resync: bool) {
    e.begin();
    m.event(
        e,
        Event::Sync {
            messages: bytes(msgs),
            resync,
        },
        0,
    );
    e.publish();
}

/// The main table's routes of protocol boot, as (prefix, gateway).
fn routes(e: &Engine) -> Vec<(IpAddr, Option<IpAddr>)> {
    let mut v: Vec<_> = e
        .fib()
        .routes(None)
        .into_iter()
        .filter(|r| r.protocol == 3)
        .map(|r| (r.dst.addr, r.nexthop.gateway))
        .collect();
    v.sort();
    v
}

#[test]
fn a_dump_builds_the_kernels_state_with_its_indexes() {
    let mut e = Engine::default();
    let mut m = Mirror::new();
    let mut reqs = with_eth1();
    reqs.push(Request::NewRoute(
        route("192.0.2.0", "10.0.1.2"),
        ReqFlags::ADD,
    ));
    let msgs: Vec<_> = reqs.iter().map(dumped).collect();
    sync(&mut m, &mut e, &msgs, false);
    assert_eq!(e.fib().link_index("eth1"), Some(3));
    assert_eq!(
        routes(&e),
        [(
            "192.0.2.0".parse().unwrap(),
            Some("10.0.1.2".parse().unwrap())
        )]
    );
    assert_eq!(m.counters().refused, 0);
}

#[test]
fn what_the_kernel_reports_but_a_request_cannot_say_is_left_out() {
    let mut e = Engine::default();
    let mut m = Mirror::new();
    let nh = NexthopObj {
        id: 5,
        family: Some(Family::Inet),
        gateway: Some("10.0.1.3".parse().unwrap()),
        oif: 3,
        ..Default::default()
    };
    let mut via_object = route("198.51.100.0", "10.0.1.3");
    via_object.nhid = Some(5);
    let mut reqs = namespace();
    let n = reqs.len();
    reqs.extend([
        Request::NewLink(eth1(), ReqFlags::ADD),
        Request::NewAddr(addr(), ReqFlags::ADD),
        Request::NewNexthop(nh, ReqFlags::ADD),
        Request::NewRoute(via_object, ReqFlags::ADD),
        Request::NewRoute(route("192.0.2.0", "10.0.1.2"), ReqFlags::ADD),
        Request::NewRule(
            Rule {
                priority: Some(0),
                ..Rule::new(Family::Inet, 100)
            },
            ReqFlags::ADD,
        ),
    ]);
    let mut msgs: Vec<_> = reqs.iter().map(dumped).collect();
    let msgs_tail = &mut msgs[n..];
    // A route through an object shows its next hops too (nexthop_compat_mode), one whose
    // link lost its carrier is flagged linkdown, and every rule carries suppress_prefixlen
    // -1 and no priority when it is 0.
    if let Payload::Route(r) = &mut msgs_tail[3].payload {
        r.attributes
            .push(RouteAttr::Gateway("10.0.1.3".parse().unwrap()));
        r.attributes.push(RouteAttr::Oif(3));
    }
    if let Payload::Route(r) = &mut msgs_tail[4].payload {
        r.header.flags |= RTNH_F_LINKDOWN;
    }
    if let Payload::Rule(r) = &mut msgs_tail[5].payload {
        r.attributes.retain(|a| !matches!(a, RuleAttr::Priority(_)));
        r.attributes.push(RuleAttr::SuppressPrefixLen(u32::MAX));
    }
    sync(&mut m, &mut e, &msgs, false);
    assert_eq!(m.counters().refused, 0);
    assert_eq!(routes(&e).len(), 2);
    let rules = e.fib().rules(Some(Family::Inet));
    let r = rules.iter().find(|r| r.table == 100).unwrap();
    assert_eq!((r.priority, r.suppress_prefixlen), (Some(0), None));
    // The local rule at priority 0 is still the kernel's, still there.
    assert!(rules.iter().any(|r| r.table == 255));
}

#[test]
fn a_resync_removes_what_was_missed_and_counts_it() {
    let mut e = Engine::default();
    let mut m = Mirror::new();
    let base = with_eth1();
    let a = Request::NewRoute(route("192.0.2.0", "10.0.1.2"), ReqFlags::ADD);
    let b = Request::NewRoute(route("192.0.2.0", "10.0.1.3"), ReqFlags::ADD);
    let c = Request::NewRoute(route("198.51.100.0", "10.0.1.2"), ReqFlags::ADD);
    // Two IPv4 routes of one key (`ip route append`), and a third.
    let first: Vec<_> = base.iter().chain([&a, &b, &c]).map(dumped).collect();
    sync(&mut m, &mut e, &first, false);
    assert_eq!(routes(&e).len(), 3);
    // The kernel lost the appended one and the third while notifications were lost.
    let second: Vec<_> = base.iter().chain([&a]).map(dumped).collect();
    sync(&mut m, &mut e, &second, true);
    assert_eq!(
        routes(&e),
        [(
            "192.0.2.0".parse().unwrap(),
            Some("10.0.1.2".parse().unwrap())
        )]
    );
    assert_eq!(m.counters().corrected, 2);
}

#[test]
fn notifications_apply_in_order_and_ipv4_appends_append() {
    let mut e = Engine::default();
    let mut m = Mirror::new();
    let base = with_eth1();
    let msgs: Vec<_> = base.iter().map(dumped).collect();
    sync(&mut m, &mut e, &msgs, false);
    let add = Request::NewRoute(route("192.0.2.0", "10.0.1.2"), ReqFlags::ADD);
    let append = Request::NewRoute(route("192.0.2.0", "10.0.1.3"), ReqFlags::ADD);
    let mut notes = vec![dumped(&add), dumped(&append)];
    for n in &mut notes {
        n.header.flags = nf::NLM_F_CREATE | nf::NLM_F_EXCL;
    }
    notes[1].header.flags = nf::NLM_F_CREATE | nf::NLM_F_APPEND;
    let mut del = dumped(&add);
    del.header.message_type = mt::RTM_DELROUTE;
    del.header.flags = 0;
    notes.push(del);
    e.begin();
    m.event(
        &mut e,
        Event::Changes {
            messages: bytes(&notes),
        },
        0,
    );
    e.publish();
    assert_eq!(
        routes(&e),
        [(
            "192.0.2.0".parse().unwrap(),
            Some("10.0.1.3".parse().unwrap())
        )]
    );
}
