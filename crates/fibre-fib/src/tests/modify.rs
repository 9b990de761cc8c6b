//! Route changes, deletions, rejected requests and input lookups, as in the parent module:
//! commands replayed from a namespace experiment (kernel 6.18, the `two_links` set-up),
//! expecting what the kernel answered.

use super::*;

fn rt6_metric(dst: &str, dev: u32, metric: u32) -> Route {
    let mut r = rt(dst, None, dev);
    r.priority = Some(metric);
    r
}

/// `ip -6 route change` of a route that does not exist: "Can not replace route - no match
/// found" when the table's radix tree has no node for the prefix, a bare ENOENT when it has
/// one (a prefix with routes of other metrics, a branch point of longer prefixes, the root).
#[test]
fn ipv6_change_of_a_missing_route_names_the_missing_node() {
    let (mut f, d0, _) = two_links();
    let text = Err(RtError::msg(
        Errno::ENOENT,
        "Can not replace route - no match found",
    ));
    let bare = Err(RtError::new(Errno::ENOENT));
    let change = |f: &mut Fib, dst: &str| f.route_new(&rt(dst, None, d0), ReqFlags::CHANGE);
    let add = |f: &mut Fib, dst: &str| f.route_new(&rt6_metric(dst, d0, 5), ReqFlags::ADD).unwrap();
    assert_eq!(change(&mut f, "2001:db8:1e00::/40"), text);
    add(&mut f, "2001:db8:1e00::/40");
    assert_eq!(change(&mut f, "2001:db8:1e00::/40"), bare);
    assert_eq!(change(&mut f, "2001:db8:1e00::/48"), text);
    add(&mut f, "2001:db8:1e01::/48");
    assert_eq!(change(&mut f, "2001:db8:1e00::/47"), text);
    assert_eq!(change(&mut f, "2001:db8:1e00::/44"), text);
    // 1e01 and 1e03 diverge at bit 46: a branch node at 2001:db8:1e00::/46.
    add(&mut f, "2001:db8:1e03::/48");
    assert_eq!(change(&mut f, "2001:db8:1e00::/46"), bare);
    assert_eq!(change(&mut f, "2001:db8:1e00::/45"), text);
    // The /40 and the link prefixes 2001:db8::/64 and 2001:db8:9::/64 branch at /35 and /44.
    assert_eq!(change(&mut f, "2001:db8::/35"), bare);
    assert_eq!(change(&mut f, "2001:db8::/44"), bare);
    // Without its route the /40 node has one child and leaves the tree.
    f.route_del(&rt6_metric("2001:db8:1e00::/40", d0, 5))
        .unwrap();
    assert_eq!(change(&mut f, "2001:db8:1e00::/40"), text);
    let in100 = |dst: &str| Route {
        table: 100,
        ..rt(dst, None, d0)
    };
    assert_eq!(f.route_new(&in100("::/0"), ReqFlags::CHANGE), bare);
    assert_eq!(f.route_new(&in100("2001:db8::/64"), ReqFlags::CHANGE), text);
}

/// A source route is looked for in its destination's source subtree too: the text when that
/// subtree has no node for the source (or the destination has none), a bare ENOENT when it
/// has one (a source prefix of other routes, a branch point of two).
#[test]
fn ipv6_change_of_a_missing_source_route_names_the_missing_node() {
    let (mut f, d0, _) = two_links();
    let text = Err(RtError::msg(
        Errno::ENOENT,
        "Can not replace route - no match found",
    ));
    let bare = Err(RtError::new(Errno::ENOENT));
    let from = |dst: &str, src: &str| Route {
        src: Some(pfx(src)),
        ..rt(dst, None, d0)
    };
    for s in ["2001:db8::/64", "2001:db8:1::/64"] {
        f.route_new(&from("::/0", s), ReqFlags::ADD).unwrap();
    }
    let change = |f: &mut Fib, dst: &str, src: &str| f.route_new(&from(dst, src), ReqFlags::CHANGE);
    assert_eq!(change(&mut f, "::/0", "2001:db8:2::/64"), text);
    assert_eq!(change(&mut f, "::/0", "2001:db8::/47"), bare);
    assert_eq!(change(&mut f, "::/0", "2001:db8::/48"), text);
    assert_eq!(change(&mut f, "2001:db8:5::/64", "2001:db8::/64"), text);
    f.route_new(&rt("2001:db8:5::/64", None, d0), ReqFlags::ADD)
        .unwrap();
    assert_eq!(change(&mut f, "2001:db8:5::/64", "2001:db8::/64"), text);
}

/// rt6_select scores router preference above "on the flow's oif", keeps the best of the
/// node's first metric, and only when none of those qualifies (here: under an oif, which
/// makes the lookup strict) scores every later route together, so a high-preference route of
/// metric 1024 beats one of metric 10. A gateway is checked with that lookup: one resolving
/// to a route with a gateway is unreachable.
#[test]
fn ipv6_selection_scores_preference_across_metrics() {
    let (mut f, d0, d1) = two_links();
    let with = |dst: &str, via: Option<&str>, dev: u32, metric: u32, pref: u8| Route {
        priority: Some(metric),
        pref: Some(pref),
        ..rt(dst, via, dev)
    };
    const HIGH: u8 = 1;
    const LOW: u8 = 3;
    for r in [
        with("2001:db8:77::/48", None, d1, 1, 0),
        with("2001:db8:77::/48", None, d0, 10, 0),
        with("2001:db8:77::/48", Some("2001:db8::7"), d0, 1024, HIGH),
    ] {
        f.route_new(&r, ReqFlags::ADD).unwrap();
    }
    let q = |dst: &str, oif: Option<u32>| RouteQuery {
        oif,
        ..RouteQuery::to(ip(dst))
    };
    let a = f.route_get(&q("2001:db8:77::1", Some(d0))).unwrap();
    assert_eq!((a.priority, a.nexthop.oif), (Some(1024), d0));
    let a = f.route_get(&q("2001:db8:77::1", None)).unwrap();
    assert_eq!((a.priority, a.nexthop.oif), (Some(1), d1));
    assert_eq!(
        f.route_new(
            &rt("2001:db8:79::/48", Some("2001:db8:77::5"), d0),
            ReqFlags::ADD
        ),
        Err(RtError::new(Errno::EHOSTUNREACH))
    );
    f.route_new(
        &rt("2001:db8:79::/48", Some("2001:db8:77::5"), d1),
        ReqFlags::ADD,
    )
    .unwrap();
    // Within one metric the higher preference wins even when added last.
    // (A second route on d0 of that metric is a duplicate whatever its preference.)
    for (dev, pref, ok) in [(d0, 0, true), (d1, HIGH, true), (d0, LOW, false)] {
        let r = with("2001:db8:78::/48", None, dev, 5, pref);
        let res = f.route_new(&r, ReqFlags::APPEND);
        assert_eq!(
            res,
            if ok {
                Ok(())
            } else {
                Err(RtError::new(Errno::EEXIST))
            }
        );
    }
    assert_eq!(
        f.route_get(&q("2001:db8:78::1", None)).unwrap().nexthop.oif,
        d1
    );
    assert_eq!(
        f.route_get(&q("2001:db8:78::1", Some(d0)))
            .unwrap()
            .nexthop
            .oif,
        d0
    );
}

/// An IPv6 input lookup searches the tables with the input device as oif, but the rules see
/// no oif: a rule selecting `oif d1` ignores a packet coming in on d1 and catches only output
/// lookups through d1.
#[test]
fn ipv6_input_lookup_rules_see_no_oif() {
    let (mut f, _, d1) = two_links();
    f.rule_new(
        &Rule {
            priority: Some(1009),
            src: Some(pfx("2001:db8:1e02:5100::/56")),
            oifname: Some("d1".into()),
            action: RuleAction::Prohibit,
            ..Rule::new(Family::Inet6, 0)
        },
        ReqFlags::ADD,
    )
    .unwrap();
    f.route_new(&rt("2001:db8:22f6::/48", None, d1), ReqFlags::ADD)
        .unwrap();
    let q = |iif: Option<u32>, oif: Option<u32>| RouteQuery {
        src: Some(ip("2001:db8:1e02:5100::1")),
        iif,
        oif,
        ..RouteQuery::to(ip("2001:db8:22f6::1"))
    };
    assert_eq!(f.route_get(&q(Some(d1), None)).unwrap().nexthop.oif, d1);
    assert_eq!(
        f.route_get(&q(None, Some(d1))).unwrap_err().errno,
        Errno::EACCES
    );
    assert_eq!(f.route_get(&q(None, None)).unwrap().nexthop.oif, d1);
}

/// `two_links` with 2001:db8:70::/48 via 2001:db8:9::2 dev d1, then appended a route
/// through d0 without a gateway, then a sibling via 2001:db8::2 dev d0: in the kernel's leaf
/// list the device route sits between the two siblings.
fn route_between_siblings() -> (Fib, u32, u32) {
    let (mut f, d0, d1) = two_links();
    let dst = "2001:db8:70::/48";
    f.route_new(&rt(dst, Some("2001:db8:9::2"), d1), ReqFlags::ADD)
        .unwrap();
    f.route_new(&rt(dst, None, d0), ReqFlags::APPEND).unwrap();
    f.route_new(&rt(dst, Some("2001:db8::2"), d0), ReqFlags::APPEND)
        .unwrap();
    (f, d0, d1)
}

/// A route appended to a run between two of its gateway siblings sits between them in the
/// kernel's leaf list, and rt6_select meets it there: under `oif d0` the device route on d0
/// comes before the sibling through d0, so it answers, and a gateway resolved through it is
/// reachable.
#[test]
fn ipv6_selection_meets_routes_between_siblings_in_leaf_order() {
    let (mut f, d0, d1) = route_between_siblings();
    let q = |oif: u32| RouteQuery {
        oif: Some(oif),
        ..RouteQuery::to(ip("2001:db8:70::1"))
    };
    let a = f.route_get(&q(d0)).unwrap();
    assert_eq!((a.nexthop.gateway, a.nexthop.oif), (None, d0));
    let a = f.route_get(&q(d1)).unwrap();
    assert_eq!(
        (a.nexthop.gateway, a.nexthop.oif),
        (Some(ip("2001:db8:9::2")), d1)
    );
    f.route_new(
        &rt("2001:db8:71::/48", Some("2001:db8:70::5"), d0),
        ReqFlags::ADD,
    )
    .unwrap();
}

/// The kernel's walks meet a route added between two siblings where it sits in the leaf
/// list: link down (NETDEV_DOWN) jumps from a live group's first sibling to its last and so
/// never visits it, and `route del DST dev D`, which stops at the first match, finds it
/// before the sibling through D (checked against kernel 6.18).
#[test]
fn ipv6_walks_meet_routes_between_siblings_in_leaf_order() {
    let (mut f, d0, _) = route_between_siblings();
    let on_d0 = |f: &Fib| {
        let a = f
            .route_get(&RouteQuery {
                oif: Some(d0),
                ..RouteQuery::to(ip("2001:db8:70::1"))
            })
            .unwrap();
        (a.nexthop.gateway, a.nexthop.oif)
    };
    set_up(&mut f, d0, false);
    set_up(&mut f, d0, true);
    assert_eq!(
        on_d0(&f),
        (None, d0),
        "link down passed over the device route"
    );
    let mut d = rt("2001:db8:70::/48", None, d0);
    d.protocol = 0;
    f.route_del(&d).unwrap();
    assert_eq!(
        main_v6(&f),
        ["2001:db8:70::/48 metric 1024 nexthop via 2001:db8:9::2 dev d1 weight 1 nexthop via 2001:db8::2 dev d0 weight 1"]
    );
    assert_eq!(on_d0(&f), (Some(ip("2001:db8::2")), d0));
}

/// `route del ... nhid N` checks the id before the table: a missing object is "Nexthop id
/// does not exist" even in a missing table, and an id with a device is refused as a next-hop
/// specification.
#[test]
fn route_del_checks_the_nexthop_id_first() {
    let (mut f, d0, _) = two_links();
    f.nexthop_new(&nh_obj(5, Some("10.0.0.2"), d0), ReqFlags::ADD)
        .unwrap();
    let del = |f: &mut Fib, dst: &str, id: u32, table: u32, dev: u32| {
        f.route_del(&Route {
            nhid: Some(id),
            table,
            ..rt(dst, None, dev)
        })
    };
    let missing = Err(RtError::msg(Errno::EINVAL, "Nexthop id does not exist"));
    assert_eq!(del(&mut f, "172.16.0.0/12", 55, 4242, 0), missing);
    assert_eq!(del(&mut f, "2001:db8:5::/48", 55, 4242, 0), missing);
    assert_eq!(
        del(&mut f, "172.16.0.0/12", 5, 101, d0),
        Err(RtError::msg(
            Errno::EINVAL,
            "Nexthop specification and nexthop id are mutually exclusive"
        ))
    );
    assert_eq!(
        del(&mut f, "172.16.0.0/12", 5, 4242, 0),
        Err(RtError::msg(Errno::ESRCH, "FIB table does not exist"))
    );
}

/// brd_input checks the source without the destination: the reverse lookup has no source
/// address, so a rule `from <broadcast address>` does not apply to it, while the local path
/// keeps the destination and a rule `from <local address>` does.
#[test]
fn broadcast_input_checks_the_source_without_the_destination() {
    let (mut f, _, d1) = two_links();
    let mut via = rt("172.31.0.0/16", Some("10.0.0.2"), 0);
    via.table = 100;
    f.route_new(&via, ReqFlags::ADD).unwrap();
    let mut mc = rt("172.31.0.0/16", None, 2);
    mc.rtype = RouteType::Multicast;
    f.route_new(&mc, ReqFlags::ADD).unwrap();
    for (prio, from) in [(100, "10.0.0.255"), (101, "10.0.0.1")] {
        let r = Rule {
            priority: Some(prio),
            src: Some(pfx(from)),
            ..Rule::new(Family::Inet, 100)
        };
        f.rule_new(&r, ReqFlags::ADD).unwrap();
    }
    let q = |dst: &str| RouteQuery {
        src: Some(ip("172.31.0.5")),
        iif: Some(d1),
        ..RouteQuery::to(ip(dst))
    };
    assert_eq!(
        f.route_get(&q("10.0.0.255")).unwrap_err().errno,
        Errno::EINVAL
    );
    assert_eq!(f.route_get(&q("10.0.0.1")).unwrap().rtype, RouteType::Local);
}

/// A next-hop object in a group of several paths cannot be replaced by a blackhole.
#[test]
fn nexthop_replace_refuses_a_blackhole_in_a_multipath_group() {
    let (mut f, d0, _) = two_links();
    for id in [1, 2] {
        f.nexthop_new(&nh_obj(id, Some("10.0.0.2"), d0), ReqFlags::ADD)
            .unwrap();
    }
    let mut g = nh_obj(3, None, 0);
    g.family = None;
    g.group = [1, 2]
        .map(|id| GroupMember {
            id,
            weight_minus_one: 0,
        })
        .to_vec();
    f.nexthop_new(&g, ReqFlags::ADD).unwrap();
    let hole = NexthopObj {
        blackhole: true,
        oif: 0,
        gateway: None,
        ..nh_obj(1, None, 0)
    };
    assert_eq!(
        f.nexthop_new(&hole, ReqFlags::REPLACE),
        Err(RtError::msg(
            Errno::EINVAL,
            "Blackhole nexthop can not be a member of a group with more than one path"
        ))
    );
}

/// Deleting `::/0 nhid N` passes over the tree root's null entry (it has no next-hop object)
/// and finds nothing: ESRCH, where a filterless delete of ::/0 is ENOENT.
#[test]
fn ipv6_default_delete_by_nexthop_id_is_esrch() {
    let (mut f, d0, _) = two_links();
    f.nexthop_new(&nh_obj(86, Some("2001:db8::2"), d0), ReqFlags::ADD)
        .unwrap();
    let del = |f: &mut Fib, nhid: Option<u32>| {
        f.route_del(&Route {
            nhid,
            protocol: 0,
            ..rt("::/0", None, 0)
        })
    };
    assert_eq!(del(&mut f, Some(86)), Err(RtError::new(Errno::ESRCH)));
    assert_eq!(del(&mut f, None), Err(RtError::new(Errno::ENOENT)));
}

/// `ip -6 route del DST from SRC`: the source prefix selects a route only where the
/// destination has source-specific routes; elsewhere the kernel ignores it and deletes the
/// destination's plain route (also once the last source-specific route there is gone).
#[test]
fn ipv6_delete_ignores_from_without_source_routes() {
    let (mut f, d0, _) = two_links();
    let from = |dst: &str, src: Option<&str>| Route {
        src: src.map(pfx),
        ..rt(dst, None, d0)
    };
    let plain = |f: &Fib| {
        main_v6(f)
            .iter()
            .filter(|r| r.contains("2001:db8:5::/48"))
            .count()
    };
    f.route_new(&from("::/0", None), ReqFlags::ADD).unwrap();
    assert!(main_v6(&f).iter().any(|r| r.starts_with("default")));
    f.route_del(&from("::/0", Some("2001:db8:1aeb::/48")))
        .unwrap();
    assert!(!main_v6(&f).iter().any(|r| r.starts_with("default")));
    f.route_new(&from("2001:db8:5::/48", None), ReqFlags::ADD)
        .unwrap();
    f.route_new(
        &from("2001:db8:5::/48", Some("2001:db8:9::/48")),
        ReqFlags::ADD,
    )
    .unwrap();
    assert_eq!(
        f.route_del(&from("2001:db8:5::/48", Some("2001:db8:7::/48")))
            .unwrap_err()
            .errno,
        Errno::ESRCH
    );
    f.route_del(&from("2001:db8:5::/48", Some("2001:db8:9::/48")))
        .unwrap();
    assert_eq!(plain(&f), 1);
    f.route_del(&from("2001:db8:5::/48", Some("2001:db8:7::/48")))
        .unwrap();
    assert_eq!(plain(&f), 0);
}

/// Kernel 6.18: an IPv4 input answer leaving by its input device carries `redirect` when the
/// source's own route leaves there directly; through a device-only next-hop object it does
/// (the path's scope is host), and no longer once the object is replaced by a gateway.
#[test]
fn input_redirect_through_a_device_only_object() {
    let (mut f, d0) = base();
    f.nexthop_new(&nh_obj(1, None, d0), ReqFlags::ADD).unwrap();
    let default = Route {
        nhid: Some(1),
        ..rt("0.0.0.0/0", None, 0)
    };
    f.route_new(&default, ReqFlags::ADD).unwrap();
    f.route_new(&rt("10.50.0.0/16", None, d0), ReqFlags::ADD)
        .unwrap();
    let q = RouteQuery {
        src: Some(ip("10.99.0.5")),
        iif: Some(d0),
        ..RouteQuery::to(ip("10.50.0.1"))
    };
    let redirect = |f: &Fib| f.route_get(&q).unwrap().flags & rtcf::DOREDIRECT != 0;
    assert!(redirect(&f));
    f.nexthop_new(&nh_obj(1, Some("10.0.0.9"), d0), ReqFlags::REPLACE)
        .unwrap();
    assert!(!redirect(&f));
}

/// Group members are checked one by one, each fully (exists, not a group, no blackhole in a
/// multipath group, fits the group's fdb kind) before the next; a blackhole object needs `lo`
/// up (kernel 6.18).
#[test]
fn group_members_are_checked_in_turn_and_blackholes_need_lo() {
    let mut f = Fib::default();
    let black = NexthopObj {
        blackhole: true,
        ..nh_obj(3, None, 0)
    };
    let e = f.nexthop_new(&black, ReqFlags::ADD).unwrap_err();
    assert_eq!(
        (e.errno, e.extack.as_deref()),
        (Errno::ENETDOWN, Some("Device for nexthop is not up"))
    );
    let (mut f, d0, _) = two_links();
    f.nexthop_new(&nh_obj(1, Some("10.0.0.2"), d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&black, ReqFlags::ADD).unwrap();
    let group = group_obj;
    let err = |f: &mut Fib, g: NexthopObj| f.nexthop_new(&g, ReqFlags::ADD).unwrap_err().extack;
    let not_fdb = Some("FDB nexthop group can only have fdb nexthops".to_string());
    assert_eq!(err(&mut f, group(10, &[1, 99], true)), not_fdb);
    assert_eq!(err(&mut f, group(11, &[1, 3], true)), not_fdb);
    assert_eq!(
        err(&mut f, group(12, &[99, 1], true)).as_deref(),
        Some("Invalid nexthop id")
    );
}
