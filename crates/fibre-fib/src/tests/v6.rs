//! IPv6 kernel-scenario tests, as in the parent module: commands replayed from a namespace
//! experiment (kernel 6.18), expecting what the kernel showed.

use super::*;

/// `ip -6 route add DST nexthop via G1 nexthop via G2 weight W2`.
fn multipath6(dst: &str, hops: &[(&str, u8)]) -> Route {
    let mut r = rt(dst, None, 0);
    r.multipath = hops
        .iter()
        .map(|&(g, w)| NextHop {
            gateway: Some(ip(g)),
            hops: w - 1,
            ..Default::default()
        })
        .collect();
    r
}

#[test]
fn ipv6_sourceless_default_is_never_shadowed() {
    let (mut f, d0, _) = two_links();
    let mut p = rt("::/0", None, 0);
    p.rtype = RouteType::Prohibit;
    f.route_new(&p, ReqFlags::ADD).unwrap();
    let mut s = rt("::/0", None, d0);
    s.src = Some(pfx("2001:db8:1600::/40"));
    f.route_new(&s, ReqFlags::ADD).unwrap();
    let q = |src: Option<&str>| RouteQuery {
        src: src.map(ip),
        ..RouteQuery::to(ip("2001:db8:77::1"))
    };
    // Kernel: with `prohibit default` and `default from 2001:db8:1600::/40 dev d0`, `route
    // get 2001:db8:77::1` is "Permission denied" (the table root's source-less routes are
    // the last resort even below a source subtree); from 2001:db8:1600::1 it goes out d0.
    assert_eq!(f.route_get(&q(None)).unwrap_err().errno, Errno::EACCES);
    assert_eq!(
        f.route_get(&q(Some("2001:db8:1600::1")))
            .unwrap()
            .nexthop
            .oif,
        d0
    );
}

#[test]
fn ipv6_link_down_marks_siblings_dead() {
    let (mut f, d0, d1) = two_links();
    f.route_new(
        &multipath6(
            "2001:db8:5::/48",
            &[("2001:db8::2", 1), ("2001:db8:9::2", 2)],
        ),
        ReqFlags::ADD,
    )
    .unwrap();
    f.route_new(
        &rt("2001:db8:6::/48", Some("2001:db8:9::3"), 0),
        ReqFlags::ADD,
    )
    .unwrap();
    set_up(&mut f, d1, false);
    // Kernel after `ip link set d1 down`: the single-path route through d1 is gone, the
    // sibling through it stays, `dead linkdown`, and takes no flows.
    assert_eq!(
        main_v6(&f),
        ["2001:db8:5::/48 metric 1024 nexthop via 2001:db8::2 dev d0 weight 1 nexthop via 2001:db8:9::2 dev d1 weight 2 dead linkdown"]
    );
    for i in 0..200u128 {
        let flow = Flow {
            dst: u128::from(ip6("2001:db8:5::")) + i,
            src: i * 7919,
            ..Flow::empty()
        };
        assert_eq!(f.lookup_output(Family::Inet6, &flow).unwrap().oif, d0);
    }
    set_up(&mut f, d1, true);
    assert_eq!(
        main_v6(&f),
        ["2001:db8:5::/48 metric 1024 nexthop via 2001:db8::2 dev d0 weight 1 nexthop via 2001:db8:9::2 dev d1 weight 2"]
    );
    // With every sibling's link down the route goes.
    set_up(&mut f, d0, false);
    set_up(&mut f, d1, false);
    assert!(main_v6(&f).is_empty());
}

fn ip6(s: &str) -> std::net::Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn nexthop_replace_rechecks_ipv6_users() {
    let (mut f, d0, _) = two_links();
    let obj = |id: u32, gw: &str| NexthopObj {
        id,
        family: Some(Family::of(&ip(gw))),
        gateway: Some(ip(gw)),
        oif: d0,
        blackhole: false,
        onlink: false,
        fdb: false,
        group: vec![],
        group_type: 0,
        res: None,
        protocol: 0,
        scope: 0,
        flags: 0,
    };
    f.nexthop_new(&obj(2, "2001:db8::2"), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&obj(3, "2001:db8::3"), ReqFlags::ADD)
        .unwrap();
    let mut r = rt("2001:db8:6::/48", None, 0);
    r.nhid = Some(2);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    // Kernel: `nexthop replace id 2 via 10.0.0.3 dev d0` while an IPv6 route uses id 2 ->
    // "Error: IPv6 routes can not use an IPv4 nexthop." and id 2 is unchanged; an unused
    // IPv6 object may become IPv4.
    let e = f
        .nexthop_new(&obj(2, "10.0.0.3"), ReqFlags::REPLACE)
        .unwrap_err();
    assert_eq!(
        (e.errno, e.extack),
        (
            Errno::EINVAL,
            Some("IPv6 routes can not use an IPv4 nexthop".into())
        )
    );
    assert_eq!(f.nexthops()[0].gateway, Some(ip("2001:db8::2")));
    f.nexthop_new(&obj(3, "10.0.0.3"), ReqFlags::REPLACE)
        .unwrap();
}

#[test]
fn route_metrics_are_capped_on_add() {
    let (mut f, _, _) = two_links();
    let mut r = rt("2001:db8:5::/48", Some("2001:db8::2"), 0);
    r.metrics.mtu = Some(70000);
    r.metrics.advmss = Some(70000);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    let mut r4 = rt("10.5.0.0/16", Some("10.0.0.2"), 0);
    r4.scope = scope::UNIVERSE;
    r4.metrics.mtu = Some(70000);
    f.route_new(&r4, ReqFlags::ADD).unwrap();
    // Kernel: `route add 2001:db8:5::/48 via 2001:db8::2 mtu 70000 advmss 70000` shows
    // `mtu 65520 advmss 65495`; `route del 10.5.0.0/16 mtu 70000` then finds no such route.
    let a = get(&f, "2001:db8:5::1").unwrap();
    assert_eq!(
        (a.metrics.mtu, a.metrics.advmss),
        (Some(65520), Some(65495))
    );
    assert_eq!(get(&f, "10.5.0.1").unwrap().metrics.mtu, Some(65520));
    let mut d = Route::new(Family::Inet, pfx("10.5.0.0/16"));
    d.metrics.mtu = Some(70000);
    assert_eq!(f.route_del(&d).unwrap_err().errno, Errno::ESRCH);
}

#[test]
fn route_get_never_reports_linkdown() {
    let (mut f, d0) = base();
    f.route_new(&rt("10.5.0.0/16", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    f.route_new(
        &rt("2001:db8:5::/48", Some("2001:db8::2"), 0),
        ReqFlags::ADD,
    )
    .unwrap();
    set_carrier(&mut f, d0, false);
    // Kernel after `link set d0 carrier off`: the routes show `linkdown` (and so does
    // `route get ... fibmatch`), but `route get 10.5.0.1` and `route get 2001:db8:5::1`
    // answer through d0 without it.
    for dst in ["10.5.0.1", "2001:db8:5::1"] {
        let a = get(&f, dst).unwrap();
        assert_eq!(a.nexthop.oif, d0);
        assert_eq!(a.flags & nh_flags::LINKDOWN, 0, "{dst}");
    }
    assert!(dump(&f, Family::Inet6)
        .iter()
        .any(|l| l == "2001:db8:5::/48 via 2001:db8::2 dev d0 metric 1024 linkdown"));
}

#[test]
fn ipv6_source_routes_refuse_nexthop_objects() {
    let (mut f, _, _) = two_links();
    let mut r = rt("2001:db8:5::/48", None, 0);
    r.src = Some(pfx("2001:db8:7::/48"));
    r.nhid = Some(99);
    r.table = 300;
    // Kernel: `route add 2001:db8:5::/48 from 2001:db8:7::/48 nhid 99 table 300` -> "Error:
    // Nexthops can not be used with source routing." even though id 99 does not exist, and
    // table 300 is not created.
    let e = f.route_new(&r, ReqFlags::ADD).unwrap_err();
    assert_eq!(
        (e.errno, e.extack.as_deref()),
        (
            Errno::EINVAL,
            Some("Nexthops can not be used with source routing")
        )
    );
    let mut d = Route::new(Family::Inet6, pfx("2001:db8:5::/48"));
    d.table = 300;
    assert_eq!(
        f.route_del(&d).unwrap_err().extack.as_deref(),
        Some("FIB table does not exist")
    );
}

#[test]
fn nexthop_objects_go_with_carrier_and_link() {
    let (mut f, d0, d1) = two_links();
    let obj = |id: u32, gw: &str, oif: u32| nh_obj(id, Some(gw), oif);
    f.nexthop_new(&obj(1, "10.0.0.2", d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&obj(2, "10.9.0.2", d1), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&obj(4, "2001:db8:9::2", d1), ReqFlags::ADD)
        .unwrap();
    let mut g = obj(6, "10.0.0.2", 0);
    g.gateway = None;
    g.family = None;
    g.group = vec![
        GroupMember {
            id: 1,
            weight_minus_one: 0,
        },
        GroupMember {
            id: 2,
            weight_minus_one: 0,
        },
    ];
    f.nexthop_new(&g, ReqFlags::ADD).unwrap();
    let with_nh = |dst: &str, id: u32| {
        let mut r = rt(dst, None, 0);
        r.nhid = Some(id);
        r.scope = scope::UNIVERSE;
        r
    };
    f.route_new(&with_nh("10.6.0.0/16", 2), ReqFlags::ADD)
        .unwrap();
    f.route_new(&with_nh("2001:db8:8::/48", 4), ReqFlags::ADD)
        .unwrap();
    f.route_new(&with_nh("10.9.0.0/16", 6), ReqFlags::ADD)
        .unwrap();
    // Kernel: `link set d1 carrier off` removes the objects through d1 (2 and 4) with their
    // routes; group 6 keeps member 1 and its route goes through d0 alone.
    set_carrier(&mut f, d1, false);
    let ids: Vec<u32> = f.nexthops().iter().map(|o| o.id).collect();
    assert_eq!(ids, [1, 6]);
    assert_eq!(f.nexthops()[1].group.len(), 1);
    let users: Vec<String> = f
        .routes(None)
        .iter()
        .filter(|r| r.nhid.is_some())
        .map(|r| show(&f, r))
        .collect();
    assert_eq!(users, ["10.9.0.0/16 via 10.0.0.2 dev d0"]);
    // `link set d0 down` then removes object 1; the emptied group and its route go too.
    set_up(&mut f, d0, false);
    assert!(f.nexthops().is_empty());
    assert!(f.routes(None).iter().all(|r| r.nhid.is_none()));
}

#[test]
fn multipath_route_linkdown_flag_follows_device_events() {
    let (mut f, d0, d1) = two_links();
    let mut a = multipath6("10.5.0.0/16", &[("10.0.0.2", 1), ("10.9.0.2", 1)]);
    a.scope = scope::UNIVERSE;
    let mut b = multipath6("10.6.0.0/16", &[("10.0.0.2", 1), ("10.0.0.3", 1)]);
    b.scope = scope::UNIVERSE;
    f.route_new(&a, ReqFlags::ADD).unwrap();
    f.route_new(&b, ReqFlags::ADD).unwrap();
    f.route_new(
        &multipath6(
            "2001:db8:5::/48",
            &[("2001:db8::2", 1), ("2001:db8:9::2", 1)],
        ),
        ReqFlags::ADD,
    )
    .unwrap();
    set_carrier(&mut f, d0, false);
    set_carrier(&mut f, d1, false);
    // Kernel after `carrier off` on d0 then d1: every next hop is linkdown, but only the route
    // whose next hops all went down in one event (10.6.0.0/16, both via d0) is flagged
    // `linkdown` itself; IPv6 sibling groups never are.
    let flagged: Vec<String> = f
        .routes(None)
        .iter()
        .filter(|r| !r.multipath.is_empty() && r.flags & nh_flags::LINKDOWN != 0)
        .map(|r| r.dst.addr.to_string())
        .collect();
    assert_eq!(flagged, ["10.6.0.0"]);
    set_carrier(&mut f, d0, true);
    assert!(f
        .routes(None)
        .iter()
        .all(|r| r.flags & nh_flags::LINKDOWN == 0 || r.multipath.is_empty()));
}

#[test]
fn ipv4_next_hop_object_miss_ends_its_trie_leaf() {
    let (mut f, d0, d1) = two_links();
    let nh = NexthopObj {
        id: 4,
        family: Some(Family::Inet),
        gateway: Some(ip("10.0.0.2")),
        oif: d0,
        blackhole: false,
        onlink: false,
        fdb: false,
        group: vec![],
        group_type: 0,
        res: None,
        protocol: 0,
        scope: 0,
        flags: 0,
    };
    f.nexthop_new(&nh, ReqFlags::ADD).unwrap();
    let mut r = rt("192.168.0.0/24", None, 0);
    r.nhid = Some(4);
    r.scope = scope::UNIVERSE;
    f.route_new(&r, ReqFlags::ADD).unwrap();
    for (dst, gw) in [
        ("192.168.0.0/20", "10.9.0.2"),
        ("192.168.0.0/16", "10.9.0.3"),
        ("192.0.0.0/8", "10.9.0.4"),
    ] {
        f.route_new(&rt(dst, Some(gw), 0), ReqFlags::ADD).unwrap();
    }
    // Kernel: `route get 192.168.0.1 oif d1` skips the /24 through object 4 (on d0), and with
    // it the /20 and /16 that share its network address, answering via 10.9.0.4 (the /8).
    let q = RouteQuery {
        oif: Some(d1),
        ..RouteQuery::to(ip("192.168.0.1"))
    };
    assert_eq!(
        f.route_get(&q).unwrap().nexthop.gateway,
        Some(ip("10.9.0.4"))
    );
    assert_eq!(
        get(&f, "192.168.0.1").unwrap().nexthop.gateway,
        Some(ip("10.0.0.2"))
    );
}
