//! Route metrics, carrier, IPv6 attributes and `route get` options, as in the parent module:
//! commands replayed from a namespace experiment (kernel 6.18), expecting what the kernel showed.

use super::*;

#[test]
fn output_fibmatch_routes_the_packet_first() {
    // Kernel: an output fibmatch runs the whole output path before answering with the matched
    // entry, so a source that is no local address fails as `route get` without fibmatch does
    // (ENETUNREACH), and so does an oif that is down.
    let (mut f, d0, d1) = two_links();
    f.route_new(&rt("10.50.0.0/16", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    let q = |src: Option<&str>, oif: Option<u32>| RouteQuery {
        src: src.map(ip),
        oif,
        fibmatch: true,
        ..RouteQuery::to(ip("10.50.1.1"))
    };
    assert_eq!(
        f.route_get(&q(Some("10.104.0.1"), None)).unwrap_err().errno,
        Errno::ENETUNREACH
    );
    assert_eq!(
        f.route_get(&q(Some("10.104.0.1"), Some(d1)))
            .unwrap_err()
            .errno,
        Errno::ENETUNREACH
    );
    let a = f.route_get(&q(Some("10.9.0.1"), None)).unwrap();
    assert_eq!((a.dst, a.nexthop.oif), (pfx("10.50.0.0/16"), d0));
    // With an oif and no matching route the kernel makes an on-link route with no FIB entry.
    let mut q2 = q(None, Some(d1));
    q2.dst = ip("192.168.1.1");
    assert_eq!(f.route_get(&q2).unwrap_err().errno, Errno::EHOSTUNREACH);
    set_up(&mut f, d1, false);
    assert_eq!(f.route_get(&q2).unwrap_err().errno, Errno::ENETUNREACH);
}

#[test]
fn local_answers_report_the_matched_routes_tos() {
    // Kernel: `ip route add local 192.168.0.0/16 tos 0x18 dev d0 table local`, then
    // `ip route get 192.168.1.1 tos 0x18` answers `local 192.168.1.1 tos 0x18 dev lo table
    // local ...`: rt_fill_info reports the entry's tos, for local routes as for unicast ones.
    let (mut f, d0) = base();
    let mut l = rt("192.168.0.0/16", None, d0);
    l.rtype = RouteType::Local;
    l.table = table::LOCAL;
    l.scope = scope::HOST;
    l.tos = 0x18;
    f.route_new(&l, ReqFlags::ADD).unwrap();
    let q = RouteQuery {
        tos: 0x18,
        ..RouteQuery::to(ip("192.168.1.1"))
    };
    let a = f.route_get(&q).unwrap();
    assert_eq!((a.rtype, a.tos), (RouteType::Local, 0x18));
    // The local address's own route has tos 0, whatever the query's.
    let q = RouteQuery {
        tos: 0x18,
        ..RouteQuery::to(ip("10.0.0.1"))
    };
    let a = f.route_get(&q).unwrap();
    assert_eq!((a.rtype, a.tos), (RouteType::Local, 0));
}

#[test]
fn ipv6_mtu_metrics_follow_the_device_mtu() {
    // Kernel (rt6_mtu_change): with d0 at mtu 1500, routes with `mtu 1400`, `mtu 1500`,
    // `mtu 9000`, `mtu lock 1300` and none; `link set d0 mtu 1300` lowers 1400, 1500 and 9000
    // to 1300; then `mtu 9000` raises the routes that followed (their metric is the old device
    // MTU) to 9000, and the locked route keeps 1300 throughout. IPv4 metrics never change.
    let (mut f, d0) = base();
    let add = |f: &mut Fib, dst: &str, via: &str, mtu: Option<u32>, lock: bool| {
        let mut r = rt(dst, Some(via), d0);
        r.metrics.mtu = mtu;
        if lock {
            r.metrics.lock = 1 << crate::exception::RTAX_MTU;
        }
        f.route_new(&r, ReqFlags::ADD).unwrap();
    };
    add(&mut f, "2001:db8:1::/48", "2001:db8::2", Some(1400), false);
    add(&mut f, "2001:db8:2::/48", "2001:db8::2", Some(1500), false);
    add(&mut f, "2001:db8:3::/48", "2001:db8::2", Some(9000), false);
    add(&mut f, "2001:db8:4::/48", "2001:db8::2", Some(1300), true);
    add(&mut f, "2001:db8:5::/48", "2001:db8::2", None, false);
    add(&mut f, "10.9.0.0/16", "10.0.0.2", Some(1400), false);
    let mtus = |f: &Fib| -> Vec<Option<u32>> {
        [
            "2001:db8:1::1",
            "2001:db8:2::1",
            "2001:db8:3::1",
            "2001:db8:4::1",
            "2001:db8:5::1",
            "10.9.0.1",
        ]
        .iter()
        .map(|d| get(f, d).unwrap().metrics.mtu)
        .collect()
    };
    let set_mtu = |f: &mut Fib, m: u32| {
        f.link_new(
            &Link {
                ifindex: d0,
                mtu: Some(m),
                ..Link::default()
            },
            ReqFlags::NONE,
        )
        .unwrap();
    };
    // Setting the MTU it already has is no change.
    set_mtu(&mut f, 1500);
    assert_eq!(
        mtus(&f),
        [
            Some(1400),
            Some(1500),
            Some(9000),
            Some(1300),
            None,
            Some(1400)
        ]
    );
    set_mtu(&mut f, 1300);
    assert_eq!(
        mtus(&f),
        [
            Some(1300),
            Some(1300),
            Some(1300),
            Some(1300),
            None,
            Some(1400)
        ]
    );
    set_mtu(&mut f, 9000);
    assert_eq!(
        mtus(&f),
        [
            Some(9000),
            Some(9000),
            Some(9000),
            Some(1300),
            None,
            Some(1400)
        ]
    );
    // A metric below the old device MTU stays when the device MTU grows.
    add(&mut f, "2001:db8:6::/48", "2001:db8::2", Some(1400), false);
    set_mtu(&mut f, 9001);
    assert_eq!(get(&f, "2001:db8:6::1").unwrap().metrics.mtu, Some(1400));
}

#[test]
fn ipv6_prefsrc_survives_its_links_going_down_but_not_its_deletion() {
    // Kernel: with 2001:db8:9::1 on d1, `ip -6 route add fd02::/64 dev d0 src 2001:db8:9::1`
    // keeps its src when d1 goes down or is deleted (addrconf_ifdown drops the addresses
    // without ipv6_del_addr), and `route get fd02::1` still answers with it; deleting the
    // address itself clears it, on routes through any device.
    let prefsrc_of = |f: &Fib, d: &str| get(f, d).unwrap().prefsrc;
    let with_src = |dst: &str, dev: u32| {
        let mut r = rt(dst, None, dev);
        r.prefsrc = Some(ip("2001:db8:9::1"));
        r
    };
    let (mut f, d0, d1) = two_links();
    f.route_new(&with_src("fd02::/64", d0), ReqFlags::ADD)
        .unwrap();
    set_up(&mut f, d1, false);
    assert_eq!(prefsrc_of(&f, "fd02::1"), Some(ip("2001:db8:9::1")));
    f.link_del(&Link {
        ifindex: d1,
        ..Link::default()
    })
    .unwrap();
    assert_eq!(prefsrc_of(&f, "fd02::1"), Some(ip("2001:db8:9::1")));

    let (mut f, d0, d1) = two_links();
    f.route_new(&with_src("fd02::/64", d0), ReqFlags::ADD)
        .unwrap();
    del_addr(&mut f, d1, "2001:db8:9::1/64");
    assert_eq!(prefsrc_of(&f, "fd02::1"), Some(ip("2001:db8::1")));
    let shown = f.routes(Some(Family::Inet6));
    let r = shown.iter().find(|r| r.dst == pfx("fd02::/64")).unwrap();
    assert_eq!(r.prefsrc, None);
}

#[test]
fn ipv6_user_anycast_routes_go_linkdown_local_ones_never() {
    // Kernel: RTF_LOCAL and RTF_ANYCAST routes are exempt from linkdown, at creation and on
    // carrier loss; `ip -6 route add local ...` sets RTF_LOCAL but `ip -6 route add anycast
    // ...` no RTF_ANYCAST (only addrconf's anycast routes have it). With carrier off:
    //   anycast 2001:db8:2200::/40 dev d1 table local metric 1024 linkdown pref medium
    //   local 2001:db8:2300::/40 dev d1 table local metric 1024 pref medium
    let (mut f, _d0, d1) = two_links();
    let typed = |dst: &str, t: RouteType| {
        let mut r = rt(dst, None, d1);
        r.rtype = t;
        r.table = table::LOCAL;
        r
    };
    let linkdown = |f: &Fib, dst: &str| {
        let q = RouteQuery {
            fibmatch: true,
            ..RouteQuery::to(ip(dst))
        };
        f.route_get(&q).unwrap().flags & nh_flags::LINKDOWN != 0
    };
    f.route_new(
        &typed("2001:db8:2200::/40", RouteType::Anycast),
        ReqFlags::ADD,
    )
    .unwrap();
    f.route_new(
        &typed("2001:db8:2300::/40", RouteType::Local),
        ReqFlags::ADD,
    )
    .unwrap();
    set_carrier(&mut f, d1, false);
    assert!(linkdown(&f, "2001:db8:2200::1"));
    assert!(!linkdown(&f, "2001:db8:2300::1"));
    // addrconf's anycast route of d1's subnet is exempt.
    assert!(!linkdown(&f, "2001:db8:9::"));
    f.route_new(
        &typed("2001:db8:2500::/40", RouteType::Anycast),
        ReqFlags::ADD,
    )
    .unwrap();
    f.route_new(
        &typed("2001:db8:2600::/40", RouteType::Local),
        ReqFlags::ADD,
    )
    .unwrap();
    assert!(linkdown(&f, "2001:db8:2500::1"));
    assert!(!linkdown(&f, "2001:db8:2600::1"));
    set_carrier(&mut f, d1, true);
    assert!(!linkdown(&f, "2001:db8:2200::1"));
    assert!(!linkdown(&f, "2001:db8:2500::1"));
}

#[test]
fn ipv6_blackhole_object_routes_match_whatever_the_oif() {
    // Kernel: `ip -6 nexthop add id 8 blackhole`, `ip -6 route add 2001:db8:2800::/40 nhid 8
    // metric 10` over `2001:db8:2000::/36 via 2001:db8::2 dev d0`: `route get 2001:db8:28f4::1
    // oif d0` (strict device matching) is EINVAL, as without the oif: __find_rr_leaf takes a
    // blackhole object before it looks at devices.
    let (mut f, d0) = base();
    let bh = NexthopObj {
        blackhole: true,
        family: Some(Family::Inet6),
        ..nh_obj(8, None, 0)
    };
    f.nexthop_new(&bh, ReqFlags::ADD).unwrap();
    let mut r = rt("2001:db8:2800::/40", None, 0);
    r.nhid = Some(8);
    r.priority = Some(10);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    f.route_new(
        &rt("2001:db8:2000::/36", Some("2001:db8::2"), d0),
        ReqFlags::ADD,
    )
    .unwrap();
    let q = |dst: &str, fibmatch: bool| RouteQuery {
        oif: Some(d0),
        fibmatch,
        ..RouteQuery::to(ip(dst))
    };
    for fm in [false, true] {
        assert_eq!(
            f.route_get(&q("2001:db8:28f4::1", fm)).unwrap_err().errno,
            Errno::EINVAL
        );
    }
    assert_eq!(
        get(&f, "2001:db8:28f4::1").unwrap_err().errno,
        Errno::EINVAL
    );
    let a = f.route_get(&q("2001:db8:2900::1", false)).unwrap();
    assert_eq!(a.nexthop.gateway, Some(ip("2001:db8::2")));
}

#[test]
fn ipv6_subnet_router_anycast_is_shared_between_addresses() {
    // Kernel (forwarding on): 2001:db8:5::1/64 and 2001:db8:5:c4::1/48 both join the anycast
    // address 2001:db8:5::; deleting the /64 keeps `anycast 2001:db8:5:: dev d0 table local`,
    // deleting the /48 too removes it.
    let (mut f, d0) = base();
    add_addr(&mut f, d0, "2001:db8:5::1/64").unwrap();
    add_addr(&mut f, d0, "2001:db8:5:c4::1/48").unwrap();
    let anycast = |f: &Fib| {
        f.routes(Some(Family::Inet6))
            .iter()
            .any(|r| r.rtype == RouteType::Anycast && r.dst == pfx("2001:db8:5::/128"))
    };
    assert!(anycast(&f));
    del_addr(&mut f, d0, "2001:db8:5::1/64");
    assert!(anycast(&f));
    del_addr(&mut f, d0, "2001:db8:5:c4::1/48");
    assert!(!anycast(&f));
}

#[test]
fn ipv6_multipath_mtu_metric_follows_the_first_siblings_device() {
    // Kernel: `ip -6 route add 2001:db8:7::/48 mtu 1400 nexthop via 2001:db8::2 dev d0 nexthop
    // via 2001:db8:9::2 dev d1`; `link set d1 mtu 1280` changes only the second sibling, and
    // the dump (first sibling) still shows mtu 1400; `link set d0 mtu 1280` then shows 1280.
    let (mut f, d0, d1) = two_links();
    let mut r = rt("2001:db8:7::/48", None, 0);
    r.metrics.mtu = Some(1400);
    r.multipath = vec![
        NextHop {
            gateway: Some(ip("2001:db8::2")),
            oif: d0,
            ..Default::default()
        },
        NextHop {
            gateway: Some(ip("2001:db8:9::2")),
            oif: d1,
            ..Default::default()
        },
    ];
    f.route_new(&r, ReqFlags::ADD).unwrap();
    let shown = |f: &Fib| {
        f.routes(Some(Family::Inet6))
            .into_iter()
            .find(|r| r.dst == pfx("2001:db8:7::/48"))
            .unwrap()
            .metrics
            .mtu
    };
    let set_mtu = |f: &mut Fib, dev: u32, m: u32| {
        f.link_new(
            &Link {
                ifindex: dev,
                mtu: Some(m),
                ..Link::default()
            },
            ReqFlags::NONE,
        )
        .unwrap();
    };
    set_mtu(&mut f, d1, 1280);
    assert_eq!(shown(&f), Some(1400));
    set_mtu(&mut f, d0, 1280);
    assert_eq!(shown(&f), Some(1280));
}

/// A limited broadcast, and a multicast destination answered by a route shorter than /4 (the
/// default route, or a multicast route /3), are answered without the route's gateway and
/// metrics; a multicast route of /4 or longer, a route to a multicast group and a broadcast
/// route keep theirs (kernel 6.18).
#[test]
fn broadcast_and_short_multicast_answers_leave_the_route_out() {
    let (mut f, d0, _) = two_links();
    let with_mtu = |dst: &str, via: Option<&str>, rtype: RouteType| {
        let mut r = rt(dst, via, d0);
        r.rtype = rtype;
        r.metrics.mtu = Some(1250);
        r
    };
    for r in [
        with_mtu("0.0.0.0/0", Some("10.0.0.2"), RouteType::Unicast),
        with_mtu("255.0.0.0/8", Some("10.0.0.2"), RouteType::Unicast),
        with_mtu("96.0.0.0/3", None, RouteType::Multicast),
        with_mtu("80.0.0.0/4", None, RouteType::Multicast),
        with_mtu("225.0.0.0/8", Some("10.0.0.3"), RouteType::Unicast),
        with_mtu("101.0.0.0/8", None, RouteType::Broadcast),
    ] {
        f.route_new(&r, ReqFlags::ADD).unwrap();
    }
    let get = |dst: &str| {
        let a = f.route_get(&RouteQuery::to(ip(dst))).expect(dst);
        (a.rtype, a.nexthop.gateway, a.metrics.mtu)
    };
    assert_eq!(get("255.255.255.255"), (RouteType::Broadcast, None, None));
    assert_eq!(get("224.1.1.1"), (RouteType::Multicast, None, None));
    assert_eq!(get("97.1.1.1"), (RouteType::Multicast, None, None));
    assert_eq!(get("81.1.1.1"), (RouteType::Multicast, None, Some(1250)));
    assert_eq!(
        get("225.1.1.1"),
        (RouteType::Multicast, Some(ip("10.0.0.3")), Some(1250))
    );
    assert_eq!(get("101.1.1.1"), (RouteType::Broadcast, None, Some(1250)));
}

/// Each sibling of an IPv6 multipath route keeps its own metrics: a device MTU change moves
/// the `mtu` of the siblings through that device only. An answer through a sibling carries
/// its `mtu`, the dump the first sibling's, and a fibmatch the chosen sibling's (kernel 6.18).
#[test]
fn ipv6_siblings_keep_their_own_mtu() {
    let (mut f, d0, d1) = two_links();
    let mut r = rt("2001:db8:70::/48", Some("2001:db8::2"), d0);
    r.metrics.mtu = Some(1400);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    let mut s = rt("2001:db8:70::/48", Some("2001:db8:9::2"), d1);
    s.metrics.mtu = Some(1400);
    f.route_new(&s, ReqFlags::APPEND).unwrap();
    let set_mtu = |f: &mut Fib, dev: u32, m: u32| {
        let l = Link {
            ifindex: dev,
            mtu: Some(m),
            ..Link::default()
        };
        f.link_new(&l, ReqFlags::NONE).unwrap();
    };
    let via = |f: &Fib, oif: u32, fibmatch: bool| {
        let q = RouteQuery {
            oif: Some(oif),
            fibmatch,
            ..RouteQuery::to(ip("2001:db8:70::1"))
        };
        f.route_get(&q).unwrap().metrics.mtu
    };
    set_mtu(&mut f, d1, 1280);
    assert_eq!(
        (via(&f, d1, false), via(&f, d0, false)),
        (Some(1280), Some(1400))
    );
    assert_eq!(via(&f, d1, true), Some(1280));
    let dumped = |f: &Fib| -> Vec<(Option<u32>, usize)> {
        f.routes(Some(Family::Inet6))
            .iter()
            .filter(|r| r.dst == pfx("2001:db8:70::/48"))
            .map(|r| (r.metrics.mtu, r.multipath.len()))
            .collect()
    };
    assert_eq!(dumped(&f), [(Some(1400), 2)]);
    set_mtu(&mut f, d0, 1300);
    assert_eq!(
        (via(&f, d1, false), via(&f, d0, false)),
        (Some(1280), Some(1300))
    );
    let mut d = rt("2001:db8:70::/48", Some("2001:db8::2"), d0);
    d.protocol = 0;
    f.route_del(&d).unwrap();
    set_mtu(&mut f, d1, 1500);
    assert_eq!(dumped(&f), [(Some(1500), 0)]);
}
