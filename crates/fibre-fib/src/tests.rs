//! Kernel-scenario tests: each replays commands run in a network namespace (kernel 6.18,
//! iproute2 6.1, veth stand-ins for dummy links, forwarding on, accept_dad 0) and expects
//! what the kernel showed. The expected lines are the kernel's `ip route show` output,
//! reduced to the fields `show` below prints.

use std::net::{IpAddr, Ipv6Addr};

use crate::*;

mod attrs;
mod conf;
mod dst;
mod modify;
mod resilient;
mod v6;

/// One route in `ip route show table all` style (the subset of fields we print).
fn show(f: &Fib, r: &Route) -> String {
    let name = |i: u32| {
        f.links
            .get(i)
            .map(|l| l.name.clone())
            .unwrap_or_else(|| format!("if{i}"))
    };
    let mut s = String::new();
    let t = match r.rtype {
        RouteType::Unicast => "",
        RouteType::Local => "local ",
        RouteType::Broadcast => "broadcast ",
        RouteType::Anycast => "anycast ",
        RouteType::Multicast => "multicast ",
        RouteType::Blackhole => "blackhole ",
        RouteType::Unreachable => "unreachable ",
        RouteType::Prohibit => "prohibit ",
        RouteType::Throw => "throw ",
        _ => "?? ",
    };
    s.push_str(t);
    if r.dst.len == 0 {
        s.push_str("default");
    } else if r.dst.len == r.family.max_len() {
        s.push_str(&r.dst.addr.to_string());
    } else {
        s.push_str(&format!("{}/{}", r.dst.addr, r.dst.len));
    }
    if let Some(src) = r.src {
        s.push_str(&format!(" from {}/{}", src.addr, src.len));
    }
    if r.multipath.is_empty() {
        if let Some(g) = r.nexthop.gateway {
            s.push_str(&format!(" via {g}"));
        }
        if r.nexthop.oif != 0 {
            s.push_str(&format!(" dev {}", name(r.nexthop.oif)));
        }
    }
    if r.table != table::MAIN && r.table != 0 {
        s.push_str(&match r.table {
            table::LOCAL => " table local".to_string(),
            t => format!(" table {t}"),
        });
    }
    if r.protocol == protocol::KERNEL {
        s.push_str(" proto kernel");
    }
    if r.family == Family::Inet {
        match r.scope {
            scope::HOST => s.push_str(" scope host"),
            scope::LINK => s.push_str(" scope link"),
            _ => {}
        }
    }
    if let Some(p) = r.prefsrc {
        s.push_str(&format!(" src {p}"));
    }
    if let Some(m) = r.priority {
        s.push_str(&format!(" metric {m}"));
    }
    if r.flags & nh_flags::DEAD != 0 {
        s.push_str(" dead");
    }
    if r.flags & nh_flags::LINKDOWN != 0 {
        s.push_str(" linkdown");
    }
    for n in &r.multipath {
        s.push_str(" nexthop");
        if let Some(g) = n.gateway {
            s.push_str(&format!(" via {g}"));
        }
        s.push_str(&format!(
            " dev {} weight {}",
            name(n.oif),
            n.hops as u32 + 1
        ));
        if n.flags & nh_flags::DEAD != 0 {
            s.push_str(" dead");
        }
        if n.flags & nh_flags::LINKDOWN != 0 {
            s.push_str(" linkdown");
        }
    }
    s
}

fn dump(f: &Fib, fam: Family) -> Vec<String> {
    f.routes(Some(fam)).iter().map(|r| show(f, r)).collect()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `ip nexthop add id ID [via GW] dev OIF`: one next hop, of its gateway's family (IPv4 without
/// one).
fn nh_obj(id: u32, gw: Option<&str>, oif: u32) -> NexthopObj {
    let gateway = gw.map(ip);
    NexthopObj {
        id,
        family: Some(gateway.as_ref().map_or(Family::Inet, Family::of)),
        gateway,
        oif,
        blackhole: false,
        onlink: false,
        fdb: false,
        group: vec![],
        group_type: 0,
        res: None,
        protocol: 0,
        flags: 0,
        scope: 0,
    }
}

/// `ip nexthop add id ID group M1/M2/... [fdb]`: members of weight 1.
fn group_obj(id: u32, members: &[u32], fdb: bool) -> NexthopObj {
    NexthopObj {
        family: None,
        fdb,
        group: members
            .iter()
            .map(|&id| GroupMember {
                id,
                weight_minus_one: 0,
            })
            .collect(),
        ..nh_obj(id, None, 0)
    }
}

fn pfx(s: &str) -> Prefix {
    let (a, l) = s.split_once('/').unwrap_or((s, ""));
    let addr = ip(a);
    let len = if l.is_empty() {
        Family::of(&addr).max_len()
    } else {
        l.parse().unwrap()
    };
    Prefix { addr, len }
}

fn add_link(f: &mut Fib, name: &str) -> u32 {
    let l = Link {
        ifname: Some(name.into()),
        kind: Some(LinkKind::Dummy),
        ..Default::default()
    };
    f.link_new(&l, ReqFlags::ADD).unwrap();
    f.link_index(name).unwrap()
}

fn set_up(f: &mut Fib, idx: u32, up: bool) {
    let l = Link {
        ifindex: idx,
        flags: if up { iff::UP } else { 0 },
        change: iff::UP,
        ..Default::default()
    };
    f.link_new(&l, ReqFlags::NONE).unwrap();
}

fn set_carrier(f: &mut Fib, idx: u32, c: bool) {
    let l = Link {
        ifindex: idx,
        carrier: Some(c),
        ..Default::default()
    };
    f.link_new(&l, ReqFlags::NONE).unwrap();
}

fn add_addr(f: &mut Fib, idx: u32, a: &str) -> Result<(), RtError> {
    let p = pfx(a);
    let fam = Family::of(&p.addr);
    let ad = Address {
        family: fam,
        prefixlen: p.len,
        flags: 0,
        scope: 0,
        ifindex: idx,
        local: Some(p.addr),
        address: Some(p.addr),
        broadcast: None,
        label: None,
        metric: None,
        valid_lft: None,
        preferred_lft: None,
    };
    f.addr_new(&ad, ReqFlags::ADD)
}

/// A route as iproute2 builds `ip route add DST [via GW] [dev DEV]` (proto boot, scope link
/// when there is no gateway).
fn rt(dst: &str, via: Option<&str>, dev: u32) -> Route {
    let p = pfx(dst);
    let mut r = Route::new(Family::of(&p.addr), p);
    r.table = table::MAIN;
    r.protocol = protocol::BOOT;
    r.nexthop.gateway = via.map(ip);
    r.nexthop.oif = dev;
    if via.is_none() && r.family == Family::Inet {
        r.scope = scope::LINK;
    }
    r
}

fn get(f: &Fib, dst: &str) -> Result<Route, RtError> {
    let d = ip(dst);
    let q = RouteQuery::to(d);
    f.route_get(&q)
}

/// lo up, d0 up with 10.0.0.1/24 and 2001:db8::1/64, as in the namespace experiment.
fn base() -> (Fib, u32) {
    let mut f = Fib::default();
    set_up(&mut f, 1, true);
    let d0 = add_link(&mut f, "d0");
    set_up(&mut f, d0, true);
    add_addr(&mut f, d0, "10.0.0.1/24").unwrap();
    add_addr(&mut f, d0, "2001:db8::1/64").unwrap();
    (f, d0)
}

#[test]
fn fresh_lo_up_routes() {
    let mut f = Fib::default();
    set_up(&mut f, 1, true);
    // Kernel, `ip route show table all` after `ip link set lo up`:
    assert_eq!(
        dump(&f, Family::Inet),
        [
            "local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1",
            "local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1",
            "broadcast 127.255.255.255 dev lo table local proto kernel scope link src 127.0.0.1",
        ]
    );
    assert_eq!(
        dump(&f, Family::Inet6),
        ["local ::1 dev lo table local proto kernel metric 0"]
    );
}

#[test]
fn address_routes_v4_v6() {
    let (f, _) = base();
    let mac = f.links.get(2).unwrap().mac.clone();
    let ll = {
        let e = crate::addr::eui64(&mac).unwrap();
        let mut o = [0u8; 16];
        o[0] = 0xfe;
        o[1] = 0x80;
        o[8..].copy_from_slice(&e);
        std::net::Ipv6Addr::from(o)
    };
    assert_eq!(
        dump(&f, Family::Inet),
        [
            "10.0.0.0/24 dev d0 proto kernel scope link src 10.0.0.1",
            "local 10.0.0.1 dev d0 table local proto kernel scope host src 10.0.0.1",
            "broadcast 10.0.0.255 dev d0 table local proto kernel scope link src 10.0.0.1",
            "local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1",
            "local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1",
            "broadcast 127.255.255.255 dev lo table local proto kernel scope link src 127.0.0.1",
        ]
    );
    assert_eq!(
        dump(&f, Family::Inet6),
        [
            "2001:db8::/64 dev d0 proto kernel metric 256".to_string(),
            "fe80::/64 dev d0 proto kernel metric 256".to_string(),
            "local ::1 dev lo table local proto kernel metric 0".to_string(),
            "anycast 2001:db8:: dev d0 table local proto kernel metric 0".to_string(),
            "local 2001:db8::1 dev d0 table local proto kernel metric 0".to_string(),
            "anycast fe80:: dev d0 table local proto kernel metric 0".to_string(),
            format!("local {ll} dev d0 table local proto kernel metric 0"),
            "multicast ff00::/8 dev d0 table local proto kernel metric 256".to_string(),
        ]
    );
}

#[test]
fn link_down_flushes_v4_marks_multipath_drops_v6() {
    let (mut f, d0) = base();
    let d1 = add_link(&mut f, "d1");
    set_up(&mut f, d1, true);
    add_addr(&mut f, d1, "10.9.0.1/24").unwrap();
    f.route_new(&rt("10.1.0.0/16", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    f.route_new(
        &rt("2001:db8:1::/48", Some("2001:db8::2"), 0),
        ReqFlags::ADD,
    )
    .unwrap();
    let mut mp = rt("10.3.0.0/16", None, 0);
    mp.scope = scope::UNIVERSE;
    mp.multipath = vec![
        NextHop {
            gateway: Some(ip("10.0.0.2")),
            ..Default::default()
        },
        NextHop {
            gateway: Some(ip("10.9.0.2")),
            ..Default::default()
        },
    ];
    f.route_new(&mp, ReqFlags::ADD).unwrap();
    set_up(&mut f, d0, false);
    // Kernel after `ip link set d0 down`:
    assert_eq!(
        dump(&f, Family::Inet),
        [
            "10.3.0.0/16 nexthop via 10.0.0.2 dev d0 weight 1 dead linkdown nexthop via 10.9.0.2 dev d1 weight 1",
            "10.9.0.0/24 dev d1 proto kernel scope link src 10.9.0.1",
            "local 10.0.0.1 dev d0 table local proto kernel scope host src 10.0.0.1",
            "local 10.9.0.1 dev d1 table local proto kernel scope host src 10.9.0.1",
            "broadcast 10.9.0.255 dev d1 table local proto kernel scope link src 10.9.0.1",
            "local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1",
            "local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1",
            "broadcast 127.255.255.255 dev lo table local proto kernel scope link src 127.0.0.1",
        ]
    );
    assert!(f.addrs(Some(Family::Inet6)).iter().all(|a| a.ifindex != d0));
    assert!(dump(&f, Family::Inet6)
        .iter()
        .all(|l| !l.contains("dev d0")));
    set_up(&mut f, d0, true);
    // Kernel after `ip link set d0 up`: address routes back, the multipath hop revived; the
    // single-path route via d0 stays gone.
    assert_eq!(
        dump(&f, Family::Inet)[..3],
        [
            "10.0.0.0/24 dev d0 proto kernel scope link src 10.0.0.1",
            "10.3.0.0/16 nexthop via 10.0.0.2 dev d0 weight 1 nexthop via 10.9.0.2 dev d1 weight 1",
            "10.9.0.0/24 dev d1 proto kernel scope link src 10.9.0.1",
        ]
    );
}

#[test]
fn route_errors_as_the_kernel() {
    let (mut f, _) = base();
    // Kernel: `ip -6 route add 2001:db8:5::/48 via 2001:db8:9::2` -> "RTNETLINK answers: No
    // route to host"; `ip route add 10.5.0.0/16 via 10.77.0.2` -> "Error: Nexthop has invalid
    // gateway." (ENETUNREACH); `ip route add 10.7.0.1/16 dev d0` -> "Error: Invalid prefix for
    // given prefix length."
    assert_eq!(
        f.route_new(
            &rt("2001:db8:5::/48", Some("2001:db8:9::2"), 0),
            ReqFlags::ADD
        ),
        Err(RtError::new(Errno::EHOSTUNREACH))
    );
    assert_eq!(
        f.route_new(&rt("10.5.0.0/16", Some("10.77.0.2"), 0), ReqFlags::ADD),
        Err(RtError::msg(
            Errno::ENETUNREACH,
            "Nexthop has invalid gateway"
        ))
    );
    assert_eq!(
        f.route_new(&rt("10.7.0.1/16", None, 2), ReqFlags::ADD),
        Err(RtError::msg(
            Errno::EINVAL,
            "Invalid prefix for given prefix length"
        ))
    );
    // IPv6 masks host bits: `ip -6 route add 2001:db8:7::1/48 dev d0` shows 2001:db8:7::/48.
    f.route_new(&rt("2001:db8:7::1/48", None, 2), ReqFlags::ADD)
        .unwrap();
    assert_eq!(
        dump(&f, Family::Inet6)[1],
        "2001:db8:7::/48 dev d0 metric 1024"
    );
    // Adding the same IPv4 route twice: EEXIST.
    f.route_new(&rt("10.1.0.0/16", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    assert_eq!(
        f.route_new(&rt("10.1.0.0/16", Some("10.0.0.3"), 0), ReqFlags::ADD),
        Err(RtError::new(Errno::EEXIST))
    );
}

#[test]
fn route_get_output_v4_v6() {
    let (mut f, d0) = base();
    let mut r = rt("10.1.0.0/16", Some("10.0.0.2"), 0);
    r.metrics.mtu = Some(1400);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    f.route_new(
        &rt("2001:db8:1::/48", Some("2001:db8::2"), 0),
        ReqFlags::ADD,
    )
    .unwrap();
    // Kernel: "10.1.2.3 via 10.0.0.2 dev d0 src 10.0.0.1 uid 0 / cache mtu 1400"
    let a = get(&f, "10.1.2.3").unwrap();
    assert_eq!(a.nexthop.gateway, Some(ip("10.0.0.2")));
    assert_eq!(a.nexthop.oif, d0);
    assert_eq!(a.prefsrc, Some(ip("10.0.0.1")));
    assert_eq!(a.uid, Some(0));
    assert_eq!(a.metrics.mtu, Some(1400));
    assert!(a.cache.is_some());
    // Kernel: "local 10.0.0.1 dev lo src 10.0.0.1 uid 0 / cache <local>"
    let a = get(&f, "10.0.0.1").unwrap();
    assert_eq!(
        (a.rtype, a.nexthop.oif, a.prefsrc),
        (RouteType::Local, 1, Some(ip("10.0.0.1")))
    );
    assert_ne!(a.flags & rtcf::LOCAL, 0);
    // Kernel: "broadcast 10.0.0.255 dev d0 src 10.0.0.1 uid 0 / cache <local,brd>"
    let a = get(&f, "10.0.0.255").unwrap();
    assert_eq!((a.rtype, a.nexthop.oif), (RouteType::Broadcast, d0));
    assert_eq!(
        a.flags & (rtcf::LOCAL | rtcf::BROADCAST),
        rtcf::LOCAL | rtcf::BROADCAST
    );
    // Kernel: "local 127.0.0.5 dev lo src 127.0.0.1"
    assert_eq!(get(&f, "127.0.0.5").unwrap().prefsrc, Some(ip("127.0.0.1")));
    assert_eq!(get(&f, "1.1.1.1").unwrap_err().errno, Errno::ENETUNREACH);
    // Kernel: "2001:db8:1::5 from :: via 2001:db8::2 dev d0 src 2001:db8::1 metric 1024 pref medium"
    let a = get(&f, "2001:db8:1::5").unwrap();
    assert_eq!(a.nexthop.gateway, Some(ip("2001:db8::2")));
    assert_eq!(a.prefsrc, Some(ip("2001:db8::1")));
    assert_eq!(a.priority, Some(1024));
    assert_eq!(a.src, Some(pfx("::/128")));
    // Kernel: "local 2001:db8::1 from :: dev lo table local proto kernel src 2001:db8::1 metric 0"
    let a = get(&f, "2001:db8::1").unwrap();
    assert_eq!(
        (a.rtype, a.nexthop.oif, a.table, a.protocol),
        (RouteType::Local, 1, table::LOCAL, protocol::KERNEL)
    );
    assert_eq!(a.prefsrc, Some(ip("2001:db8::1")));
}

#[test]
fn carrier_off_marks_linkdown() {
    let (mut f, d0) = base();
    f.route_new(&rt("10.1.0.0/16", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    set_carrier(&mut f, d0, false);
    let d = dump(&f, Family::Inet);
    assert!(
        d.contains(&"10.1.0.0/16 via 10.0.0.2 dev d0 linkdown".to_string()),
        "{d:?}"
    );
    set_carrier(&mut f, d0, true);
    assert!(dump(&f, Family::Inet).contains(&"10.1.0.0/16 via 10.0.0.2 dev d0".to_string()));
}

#[test]
fn dst_is_cached_on_the_next_hop() {
    let (mut f, d0) = base();
    f.route_new(&rt("10.1.0.0/16", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    let flow = Flow {
        dst: u32::from(std::net::Ipv4Addr::new(10, 1, 2, 3)) as u128,
        ..Flow::empty()
    };
    let d = *f.lookup_output(Family::Inet, &flow).unwrap();
    assert_eq!((d.oif, d.gateway, d.mtu), (d0, Some(ip("10.0.0.2")), 1500));
    let g = f.gen();
    f.link_new(
        &Link {
            ifindex: d0,
            mtu: Some(1400),
            ..Default::default()
        },
        ReqFlags::NONE,
    )
    .unwrap();
    assert_ne!(f.gen(), g);
    assert_eq!(f.lookup_output(Family::Inet, &flow).unwrap().mtu, 1400);
    let none = Flow {
        dst: 0x0808_0808,
        ..Flow::empty()
    };
    assert_eq!(
        f.lookup_output(Family::Inet, &none),
        Err(LookupError::NoRoute)
    );
}

mod lpm_model {
    //! Property tests of the tables' longest-prefix match (compiled and walked) against a
    //! naive model, including independence from insertion order and deletes.
    use super::*;
    use proptest::prelude::*;

    fn fib_with(routes: &[(u32, u8)], tos_route: bool) -> Fib {
        let mut f = Fib::default();
        let d0 = add_link(&mut f, "d0");
        set_up(&mut f, d0, true);
        for &(a, l) in routes {
            let mut r = rt(&format!("{}/{}", std::net::Ipv4Addr::from(a), l), None, d0);
            r.scope = scope::LINK;
            // Kernel semantics: an equal route is EEXIST; the model ignores duplicates too.
            let _ = f.route_new(&r, ReqFlags::ADD);
        }
        if tos_route {
            // A tos-specific route makes flows with a tos take the walked path.
            let mut r = rt("203.0.113.0/24", None, d0);
            r.tos = 0x04;
            f.route_new(&r, ReqFlags::ADD).unwrap();
        }
        f
    }

    fn naive(routes: &[(u32, u8)], a: u32) -> Option<(u32, u8)> {
        routes
            .iter()
            .filter(|&&(p, l)| crate::addr::mask4(l) & a == p)
            .max_by_key(|r| r.1)
            .copied()
    }

    fn fibmatch(f: &Fib, a: u32, tos: u8) -> Option<(u32, u8)> {
        let q = RouteQuery {
            tos,
            fibmatch: true,
            table: Some(table::MAIN),
            ..RouteQuery::to(IpAddr::V4(a.into()))
        };
        f.route_get(&q).ok().map(|r| match r.dst.addr {
            IpAddr::V4(x) => (u32::from(x), r.dst.len),
            IpAddr::V6(_) => unreachable!("IPv4 query"),
        })
    }

    fn prefixes() -> impl Strategy<Value = Vec<(u32, u8)>> {
        // Few top bits so that prefixes nest often.
        proptest::collection::vec((0u32..16, 0u8..=32, any::<u32>()), 1..40).prop_map(|v| {
            let mut out: Vec<(u32, u8)> = v
                .into_iter()
                .map(|(top, l, low)| {
                    let a = (top << 28) | (low >> 4);
                    (a & crate::addr::mask4(l), l)
                })
                .collect();
            out.sort();
            out.dedup();
            out
        })
    }

    proptest! {
        #[test]
        fn compiled_and_walked_match_naive(routes in prefixes(), probes in proptest::collection::vec(any::<u32>(), 1..60), seed in any::<u64>()) {
            let mut shuffled = routes.clone();
            // A deterministic shuffle from the seed: insertion order must not matter.
            let mut s = seed | 1;
            for i in (1..shuffled.len()).rev() {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                shuffled.swap(i, (s % (i as u64 + 1)) as usize);
            }
            let a = fib_with(&routes, false);
            let b = fib_with(&shuffled, true);
            // 0.0.0.0 is answered without a FIB lookup (the output path makes a local route),
            // so fibmatch has no entry to show for it.
            for &p in probes.iter().chain(routes.iter().map(|r| &r.0)).filter(|&&p| p != 0) {
                let want = naive(&routes, p);
                prop_assert_eq!(fibmatch(&a, p, 0), want);
                prop_assert_eq!(fibmatch(&b, p, 0), want);
                if p >> 8 != 0x00cb_0071 {
                    prop_assert_eq!(fibmatch(&b, p, 0x10), want);
                }
            }
        }

        #[test]
        fn deletes_keep_the_match(routes in prefixes(), probes in proptest::collection::vec(any::<u32>(), 1..40)) {
            let mut f = fib_with(&routes, false);
            let (gone, kept): (Vec<_>, Vec<_>) = routes.iter().enumerate().partition(|(i, _)| i % 2 == 0);
            for (_, &(a, l)) in &gone {
                let mut r = rt(&format!("{}/{}", std::net::Ipv4Addr::from(a), l), None, 0);
                r.scope = scope::NOWHERE;
                r.rtype = RouteType::Unspec;
                f.route_del(&r).unwrap();
            }
            let kept: Vec<(u32, u8)> = kept.into_iter().map(|(_, r)| *r).collect();
            for &p in probes.iter().chain(routes.iter().map(|r| &r.0)).filter(|&&p| p != 0) {
                prop_assert_eq!(fibmatch(&f, p, 0), naive(&kept, p));
            }
        }
    }
}

/// Tables change representation with their size (sorted intervals while small, the large
/// compiled structures above `fibtable::COMPILE_LARGE_AT` keys, back when they shrink): lookups
/// through the compiled path agree with a naive model before, across and after each change.
#[test]
fn compiled_lookups_agree_as_tables_grow_and_shrink() {
    const TABLE: u32 = 100;
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for v6 in [false, true] {
        let (mut f, d0) = base();
        let (bits, base_len): (u8, u8) = if v6 { (128, 32) } else { (32, 8) };
        let top: u128 = if v6 { 0x2001_0db8 << 96 } else { 10 << 24 };
        let space = crate::prefix::mask(bits, bits);
        let family = if v6 { Family::Inet6 } else { Family::Inet };
        let mut routes: Vec<(u128, u8)> = Vec::new();
        while routes.len() < 1500 {
            // Lengths from the base to the full width under the base prefix.
            let len = base_len + (next() % u64::from(bits - base_len + 1)) as u8;
            let low = ((u128::from(next()) << 64 | u128::from(next())) & space) >> base_len;
            let k = crate::prefix::Key::new(top | low, len, bits);
            if !routes.contains(&(k.addr, len)) {
                routes.push((k.addr, len));
            }
        }
        let text = |a: u128, l: u8| {
            if v6 {
                format!("{}/{l}", std::net::Ipv6Addr::from(a))
            } else {
                format!("{}/{l}", std::net::Ipv4Addr::from(a as u32))
            }
        };
        let route = |a: u128, l: u8| {
            let mut r = rt(&text(a, l), None, d0);
            r.table = TABLE;
            r
        };
        let probes: Vec<u128> = (0..400)
            .map(|i| {
                let (a, l) = routes[i % routes.len()];
                let random = (u128::from(next()) << 64 | u128::from(next())) & space;
                // Inside a prefix, or anywhere under the base.
                if i % 2 == 0 {
                    a | (random & !crate::prefix::mask(l, bits))
                } else {
                    top | (random >> base_len)
                }
            })
            .collect();
        let check = |f: &Fib, present: &[(u128, u8)], large: bool| {
            assert_eq!(f.table(family, TABLE).unwrap().is_compiled_large(), large);
            for &p in &probes {
                let want = present
                    .iter()
                    .filter(|&&(a, l)| p & crate::prefix::mask(l, bits) == a)
                    .max_by_key(|r| r.1)
                    .copied();
                let q = RouteQuery {
                    fibmatch: true,
                    table: Some(TABLE),
                    ..RouteQuery::to(if v6 {
                        IpAddr::V6(p.into())
                    } else {
                        IpAddr::V4((p as u32).into())
                    })
                };
                let got = f.route_get(&q).ok().map(|r| (r.dst.addr, r.dst.len));
                let want = want.map(|(a, l)| (pfx(&text(a, l)).addr, l));
                assert_eq!(
                    got,
                    want,
                    "{} (v6 {v6}, {} routes)",
                    text(p, bits),
                    present.len()
                );
            }
        };
        for (i, &(a, l)) in routes.iter().enumerate() {
            f.route_new(&route(a, l), ReqFlags::ADD).unwrap();
            if [0, 500, 1024, 1025, 1499].contains(&i) {
                check(&f, &routes[..=i], i >= 1024);
            }
        }
        for n in (0..routes.len()).rev() {
            let (a, l) = routes[n];
            let mut r = route(a, l);
            r.scope = scope::NOWHERE;
            r.rtype = RouteType::Unspec;
            f.route_del(&r).unwrap();
            if [1000, 256, 255, 10].contains(&n) {
                check(&f, &routes[..n], n >= 256);
            }
        }
    }
}

/// Two up links with IPv4 and IPv6 subnets: d0 10.0.0.1/24 2001:db8::1/64, d1 10.9.0.1/24
/// 2001:db8:9::1/64, and a default route via 10.0.0.254.
fn two_links() -> (Fib, u32, u32) {
    let (mut f, d0) = base();
    let d1 = add_link(&mut f, "d1");
    set_up(&mut f, d1, true);
    add_addr(&mut f, d1, "10.9.0.1/24").unwrap();
    add_addr(&mut f, d1, "2001:db8:9::1/64").unwrap();
    (f, d0, d1)
}

fn main_v6(f: &Fib) -> Vec<String> {
    f.routes(Some(Family::Inet6))
        .iter()
        .filter(|r| r.table == table::MAIN && r.protocol != protocol::KERNEL)
        .map(|r| show(f, r))
        .collect()
}

#[test]
fn ipv6_siblings_replace_and_metric_slots() {
    let (mut f, _, _) = two_links();
    let v6 = |via: &str, metric: u32| {
        let mut r = rt("2001:db8:1::/48", Some(via), 0);
        r.priority = Some(metric);
        r
    };
    // Kernel (t6): add ::2 metric 100; add ::3 metric 100 -> "File exists"; replace ::4;
    // append 9::5; replace ::6; add ::7 metric 200.
    f.route_new(&v6("2001:db8::2", 100), ReqFlags::ADD).unwrap();
    assert_eq!(
        f.route_new(&v6("2001:db8::3", 100), ReqFlags::ADD),
        Err(RtError::new(Errno::EEXIST))
    );
    f.route_new(&v6("2001:db8::4", 100), ReqFlags::REPLACE)
        .unwrap();
    assert_eq!(
        main_v6(&f),
        ["2001:db8:1::/48 via 2001:db8::4 dev d0 metric 100"]
    );
    f.route_new(&v6("2001:db8:9::5", 100), ReqFlags::APPEND)
        .unwrap();
    assert_eq!(
        main_v6(&f),
        ["2001:db8:1::/48 metric 100 nexthop via 2001:db8::4 dev d0 weight 1 nexthop via 2001:db8:9::5 dev d1 weight 1"]
    );
    f.route_new(&v6("2001:db8::6", 100), ReqFlags::REPLACE)
        .unwrap();
    f.route_new(&v6("2001:db8::7", 200), ReqFlags::ADD).unwrap();
    assert_eq!(
        main_v6(&f),
        [
            "2001:db8:1::/48 via 2001:db8::6 dev d0 metric 100",
            "2001:db8:1::/48 via 2001:db8::7 dev d0 metric 200"
        ]
    );
    // Delete with a gateway removes that sibling only; without, the first route.
    let mut d = rt("2001:db8:1::/48", Some("2001:db8::7"), 0);
    d.protocol = 0;
    f.route_del(&d).unwrap();
    assert_eq!(
        main_v6(&f),
        ["2001:db8:1::/48 via 2001:db8::6 dev d0 metric 100"]
    );
    // Kernel: `ip -6 route add 2001:db8:6::/48 via 2001:db8::1` (a local address) ->
    // "Error: Gateway can not be a local address."; `... dev d2` (down) -> "Error: Nexthop
    // device is not up."
    assert_eq!(
        f.route_new(
            &rt("2001:db8:6::/48", Some("2001:db8::1"), 0),
            ReqFlags::ADD
        ),
        Err(RtError::msg(
            Errno::EINVAL,
            "Gateway can not be a local address"
        ))
    );
    let d2 = add_link(&mut f, "d2");
    assert_eq!(
        f.route_new(&rt("2001:db8:7::/48", None, d2), ReqFlags::ADD),
        Err(RtError::msg(Errno::ENETDOWN, "Nexthop device is not up"))
    );
}

#[test]
fn ipv4_append_prepend_replace_order() {
    let (mut f, _, _) = two_links();
    let r = |via: &str| {
        let mut r = rt("10.2.0.0/16", Some(via), 0);
        r.priority = Some(10);
        r
    };
    // Kernel (t1): add .5, append .6, prepend .7 -> .7, .5, .6; replace swaps the first.
    f.route_new(&r("10.0.0.5"), ReqFlags::ADD).unwrap();
    f.route_new(&r("10.0.0.6"), ReqFlags::APPEND).unwrap();
    f.route_new(&r("10.0.0.7"), ReqFlags::PREPEND).unwrap();
    let got: Vec<String> = dump(&f, Family::Inet)
        .into_iter()
        .filter(|l| l.starts_with("10.2."))
        .collect();
    assert_eq!(
        got,
        [
            "10.2.0.0/16 via 10.0.0.7 dev d0 metric 10",
            "10.2.0.0/16 via 10.0.0.5 dev d0 metric 10",
            "10.2.0.0/16 via 10.0.0.6 dev d0 metric 10",
        ]
    );
    f.route_new(&r("10.0.0.6"), ReqFlags::APPEND).unwrap_err();
    f.route_new(&r("10.0.0.8"), ReqFlags::REPLACE).unwrap();
    assert!(
        dump(&f, Family::Inet).contains(&"10.2.0.0/16 via 10.0.0.8 dev d0 metric 10".to_string())
    );
    // `route change` of an absent route: "No such file or directory".
    assert_eq!(
        f.route_new(&rt("10.11.0.0/16", Some("10.0.0.3"), 0), ReqFlags::CHANGE),
        Err(RtError::new(Errno::ENOENT))
    );
}

/// Kernel 6.18, `ip route add P nhid N scope S`: host scope is refused for a gateway object
/// ("can not have a gateway") and a group ("multiple nexthops") but accepted for a device-only
/// object; an onlink object refuses scopes from link up ("Scope mismatch with nexthop").
#[test]
fn route_scope_against_nexthop_objects() {
    let (mut f, d0, _) = two_links();
    let obj = |id: u32, gw: Option<&str>, onlink: bool| NexthopObj {
        onlink,
        ..nh_obj(id, gw, d0)
    };
    f.nexthop_new(&obj(1, None, false), ReqFlags::ADD).unwrap();
    f.nexthop_new(&obj(2, Some("10.0.0.2"), false), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&obj(3, Some("10.0.0.3"), true), ReqFlags::ADD)
        .unwrap();
    let mut g = obj(4, None, false);
    g.family = None;
    g.oif = 0;
    g.group = vec![GroupMember {
        id: 2,
        weight_minus_one: 0,
    }];
    f.nexthop_new(&g, ReqFlags::ADD).unwrap();
    let route = |p: &str, id: u32, sc: u8| {
        let mut r = rt(p, None, 0);
        r.nhid = Some(id);
        r.scope = sc;
        r
    };
    f.route_new(&route("10.40.0.1/32", 1, scope::HOST), ReqFlags::ADD)
        .unwrap();
    let err = |f: &mut Fib, r: &Route| f.route_new(r, ReqFlags::ADD).unwrap_err().extack;
    assert_eq!(
        err(&mut f, &route("10.40.0.2/32", 2, scope::HOST)).as_deref(),
        Some("Route with host scope can not have a gateway")
    );
    assert_eq!(
        err(&mut f, &route("10.40.0.3/32", 4, scope::HOST)).as_deref(),
        Some("Route with host scope can not have multiple nexthops")
    );
    assert_eq!(
        err(&mut f, &route("10.40.0.4/32", 3, scope::LINK)).as_deref(),
        Some("Scope mismatch with nexthop")
    );
    f.route_new(&route("10.40.0.5/32", 3, scope::UNIVERSE), ReqFlags::ADD)
        .unwrap();
    // Replacing an object meets the same checks for every route using it, directly or
    // through a group (kernel: `nexthop replace id N via GW dev D` under a host-scope route
    // is refused), and a refused replace leaves the object as it was.
    let before = f.nexthops();
    let refused = f
        .nexthop_new(&obj(1, Some("10.0.0.9"), false), ReqFlags::REPLACE)
        .unwrap_err();
    assert_eq!(
        refused.extack.as_deref(),
        Some("Route with host scope can not have a gateway")
    );
    assert_eq!(f.nexthops(), before);
    // The onlink object's only user has universe scope: replacing it is fine.
    f.nexthop_new(&obj(3, Some("10.0.0.4"), true), ReqFlags::REPLACE)
        .unwrap();
}

/// Kernel 6.18, `ip nexthop show`: an IPv4 device-only object has host scope, an IPv6 one
/// (`ip -6 nexthop add id N dev D`) link scope, like an IPv6 gateway object.
#[test]
fn nexthop_object_scope_by_family() {
    let (mut f, d0, _) = two_links();
    f.nexthop_new(&nh_obj(1, None, d0), ReqFlags::ADD).unwrap();
    let v6 = NexthopObj {
        family: Some(Family::Inet6),
        ..nh_obj(2, None, d0)
    };
    f.nexthop_new(&v6, ReqFlags::ADD).unwrap();
    let scopes: Vec<(u32, u8)> = f.nexthops().iter().map(|o| (o.id, o.scope)).collect();
    assert_eq!(scopes, vec![(1, scope::HOST), (2, scope::LINK)]);
}

/// Kernel 6.18: an IPv6 route through a group of one member shows that member as a
/// `nexthop` line (an IPv4 route shows it as its gateway), and `route get ... fibmatch` lists a
/// group's members in the group's order, whichever member the flow chose.
#[test]
fn ipv6_routes_through_groups_show_multipath() {
    let (mut f, d0, _) = two_links();
    f.nexthop_new(&nh_obj(1, Some("2001:db8::2"), d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&nh_obj(2, Some("2001:db8::3"), d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&nh_obj(3, Some("10.0.0.2"), d0), ReqFlags::ADD)
        .unwrap();
    let group = |id: u32, members: &[(u32, u8)]| NexthopObj {
        family: None,
        group: members
            .iter()
            .map(|&(id, w)| GroupMember {
                id,
                weight_minus_one: w,
            })
            .collect(),
        ..nh_obj(id, None, 0)
    };
    f.nexthop_new(&group(10, &[(1, 1)]), ReqFlags::ADD).unwrap();
    f.nexthop_new(&group(11, &[(1, 0), (2, 2)]), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&group(12, &[(3, 0)]), ReqFlags::ADD).unwrap();
    let via = |p: &str, id: u32| {
        let mut r = rt(p, None, 0);
        r.nhid = Some(id);
        r.scope = scope::UNIVERSE;
        r
    };
    for (p, id) in [
        ("2001:db8:10::/64", 10),
        ("2001:db8:11::/64", 11),
        ("10.12.0.0/16", 12),
    ] {
        f.route_new(&via(p, id), ReqFlags::ADD).unwrap();
    }
    let shown = |f: &Fib, fam: Family| -> Vec<String> {
        dump(f, fam)
            .into_iter()
            .filter(|l| l.starts_with("2001:db8:1") || l.starts_with("10.12."))
            .collect()
    };
    assert_eq!(
        shown(&f, Family::Inet),
        vec!["10.12.0.0/16 via 10.0.0.2 dev d0".to_string()]
    );
    assert_eq!(
        shown(&f, Family::Inet6),
        vec![
            "2001:db8:10::/64 metric 1024 nexthop via 2001:db8::2 dev d0 weight 2".to_string(),
            "2001:db8:11::/64 metric 1024 nexthop via 2001:db8::2 dev d0 weight 1 \
             nexthop via 2001:db8::3 dev d0 weight 3"
                .to_string(),
        ]
    );
    for n in 0..64u16 {
        let mut q = RouteQuery::to(IpAddr::V6(std::net::Ipv6Addr::new(
            0x2001, 0xdb8, 0x11, 0, 0, 0, 0, n,
        )));
        q.fibmatch = true;
        let r = f.route_get(&q).unwrap();
        let legs: Vec<_> = r.multipath.iter().map(|m| m.gateway).collect();
        assert_eq!(legs, vec![Some(ip("2001:db8::2")), Some(ip("2001:db8::3"))]);
    }
}

/// Kernel 6.18: deleting a link removes its next-hop objects from their groups; routes
/// through a group keep the members left (IPv4 and IPv6 alike).
#[test]
fn link_delete_keeps_routes_through_groups() {
    let (mut f, d0, d1) = two_links();
    for (id, gw, dev) in [
        (1, "10.0.0.2", d0),
        (2, "10.9.0.2", d1),
        (3, "2001:db8::2", d0),
        (4, "2001:db8:9::2", d1),
    ] {
        f.nexthop_new(&nh_obj(id, Some(gw), dev), ReqFlags::ADD)
            .unwrap();
    }
    for (id, a, b) in [(10, 1, 2), (11, 3, 4)] {
        f.nexthop_new(&group_obj(id, &[a, b], false), ReqFlags::ADD)
            .unwrap();
    }
    for (p, id) in [("10.40.0.0/16", 10), ("2001:db8:40::/64", 11)] {
        let mut r = rt(p, None, 0);
        r.nhid = Some(id);
        r.scope = scope::UNIVERSE;
        f.route_new(&r, ReqFlags::ADD).unwrap();
    }
    f.link_del(&Link {
        ifindex: d1,
        ..Default::default()
    })
    .unwrap();
    let all = [dump(&f, Family::Inet), dump(&f, Family::Inet6)].concat();
    assert!(all.contains(&"10.40.0.0/16 via 10.0.0.2 dev d0".to_string()));
    assert!(all.contains(
        &"2001:db8:40::/64 metric 1024 nexthop via 2001:db8::2 dev d0 weight 1".to_string()
    ));
}

/// Kernel 6.18 (fib_tests.sh ipv4_rt_dsfield): a lookup's tos selects routes by its
/// IPTOS_RT_MASK bits only (0x11 and 0x12 find the `tos 0x10` route, 0xe0 does not find the
/// `tos 0xe0` one), and the answer carries the matched route's tos, not the query's.
#[test]
fn ipv4_lookup_tos_uses_the_routing_bits() {
    let (mut f, _) = base();
    for (tos, gw) in [(0x10, "10.0.0.2"), (0, "10.0.0.3"), (0xe0, "10.0.0.4")] {
        let mut r = rt("10.50.0.0/24", Some(gw), 0);
        r.tos = tos;
        f.route_new(&r, ReqFlags::ADD).unwrap();
    }
    let get_tos = |tos: u8| {
        let r = f
            .route_get(&RouteQuery {
                tos,
                ..RouteQuery::to(ip("10.50.0.1"))
            })
            .unwrap();
        (r.nexthop.gateway.unwrap().to_string(), r.tos)
    };
    let via = |g: &str, t: u8| (g.to_string(), t);
    assert_eq!(get_tos(0x10), via("10.0.0.2", 0x10));
    assert_eq!(get_tos(0x11), via("10.0.0.2", 0x10));
    assert_eq!(get_tos(0x12), via("10.0.0.2", 0x10));
    assert_eq!(get_tos(0x14), via("10.0.0.3", 0));
    assert_eq!(get_tos(0xe0), via("10.0.0.3", 0));
    assert_eq!(get_tos(0xe3), via("10.0.0.3", 0));
}

/// Kernel 6.18 (fib_tests.sh ipv4_addr_metric / ipv6_addr_metric): `address change ...
/// metric M` moves the address's prefix route to metric M; without a metric an IPv4 address
/// goes back to metric 0 while an IPv6 one keeps its metric.
#[test]
fn address_change_moves_the_prefix_route_metric() {
    let (mut f, d0) = base();
    let addr = |a: &str, metric: Option<u32>| {
        let p = pfx(a);
        Address {
            family: Family::of(&p.addr),
            prefixlen: p.len,
            flags: 0,
            scope: 0,
            ifindex: d0,
            local: Some(p.addr),
            address: Some(p.addr),
            broadcast: None,
            label: None,
            metric,
            valid_lft: None,
            preferred_lft: None,
        }
    };
    let prefix_routes = |f: &Fib| -> Vec<String> {
        [dump(f, Family::Inet), dump(f, Family::Inet6)]
            .concat()
            .into_iter()
            .filter(|l| l.starts_with("10.60.0.0/24") || l.starts_with("2001:db8:60::/64"))
            .collect()
    };
    for a in ["10.60.0.1/24", "2001:db8:60::1/64"] {
        f.addr_new(&addr(a, Some(50)), ReqFlags::ADD).unwrap();
        f.addr_new(&addr(a, Some(259)), ReqFlags::CHANGE).unwrap();
    }
    assert_eq!(
        prefix_routes(&f),
        vec![
            "10.60.0.0/24 dev d0 proto kernel scope link src 10.60.0.1 metric 259",
            "2001:db8:60::/64 dev d0 proto kernel metric 259",
        ]
    );
    for a in ["10.60.0.1/24", "2001:db8:60::1/64"] {
        f.addr_new(&addr(a, None), ReqFlags::CHANGE).unwrap();
    }
    assert_eq!(
        prefix_routes(&f),
        vec![
            "10.60.0.0/24 dev d0 proto kernel scope link src 10.60.0.1",
            "2001:db8:60::/64 dev d0 proto kernel metric 259",
        ]
    );
}

/// Kernel 6.18 (fib_nexthops.sh basic): `nexthop add id 0 ...` gets the first free id after
/// the last one given out that way, so a later `nexthop add id 1` finds 1 taken.
#[test]
fn nexthop_id_zero_gets_a_free_id() {
    let (mut f, d0, _) = two_links();
    f.nexthop_new(&nh_obj(2, None, d0), ReqFlags::ADD).unwrap();
    for _ in 0..2 {
        f.nexthop_new(&nh_obj(0, None, d0), ReqFlags::ADD).unwrap();
    }
    let ids: Vec<u32> = f.nexthops().iter().map(|o| o.id).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    assert_eq!(
        f.nexthop_new(&nh_obj(1, None, d0), ReqFlags::ADD),
        Err(RtError::new(Errno::EEXIST))
    );
    f.nexthop_del(1).unwrap();
    f.nexthop_new(&nh_obj(0, None, d0), ReqFlags::ADD).unwrap();
    let ids: Vec<u32> = f.nexthops().iter().map(|o| o.id).collect();
    assert_eq!(ids, vec![2, 3, 4]);
}

/// Kernel 6.18 (fib_nexthops.sh ipv4_fdb_grp_fcnal / ipv6_fdb_grp_fcnal): fdb objects have a
/// gateway and no device (link scope), fdb groups hold fdb objects of one family, other groups
/// none, routes refuse them, and a group member can not change its fdb status.
#[test]
fn fdb_nexthops_and_groups() {
    let (mut f, d0, _) = two_links();
    let fdb = |id: u32, gw: &str| NexthopObj {
        fdb: true,
        ..nh_obj(id, Some(gw), 0)
    };
    let group = group_obj;
    let msg = |r: Result<(), RtError>| r.unwrap_err().extack;
    for (id, gw) in [(1, "172.16.1.2"), (2, "172.16.1.3"), (3, "2001:db8::2")] {
        f.nexthop_new(&fdb(id, gw), ReqFlags::ADD).unwrap();
    }
    f.nexthop_new(&nh_obj(4, Some("10.0.0.2"), d0), ReqFlags::ADD)
        .unwrap();
    assert_eq!(f.nexthops()[0].scope, scope::LINK);
    let with_dev = NexthopObj {
        oif: d0,
        ..fdb(5, "10.0.0.3")
    };
    assert_eq!(
        msg(f.nexthop_new(&with_dev, ReqFlags::ADD)).as_deref(),
        Some("Fdb attribute can not be used with encap, oif or blackhole")
    );
    f.nexthop_new(&group(10, &[1, 2], true), ReqFlags::ADD)
        .unwrap();
    for (members, is_fdb, want) in [
        (
            &[1, 3][..],
            true,
            "FDB nexthop group cannot have mixed family nexthops",
        ),
        (
            &[1, 4][..],
            true,
            "FDB nexthop group can only have fdb nexthops",
        ),
        (
            &[1, 2][..],
            false,
            "Non FDB nexthop group cannot have fdb nexthops",
        ),
    ] {
        let r = f.nexthop_new(&group(11, members, is_fdb), ReqFlags::ADD);
        assert_eq!(msg(r).as_deref(), Some(want));
    }
    for id in [1, 10] {
        let mut r = rt("172.16.101.0/24", None, 0);
        r.nhid = Some(id);
        r.scope = scope::UNIVERSE;
        assert_eq!(
            msg(f.route_new(&r, ReqFlags::ADD)).as_deref(),
            Some("Route cannot point to a fdb nexthop")
        );
    }
    let r = f.nexthop_new(&nh_obj(2, Some("10.0.0.9"), d0), ReqFlags::REPLACE);
    assert_eq!(
        msg(r).as_deref(),
        Some("Cannot change nexthop FDB status while in a group")
    );
    f.nexthop_new(&fdb(4, "10.0.0.9"), ReqFlags::REPLACE)
        .unwrap();
}

#[test]
fn nexthop_objects_and_groups() {
    let (mut f, d0, d1) = two_links();
    let obj = |id: u32, gw: &str, oif: u32| nh_obj(id, Some(gw), oif);
    f.nexthop_new(&obj(1, "10.0.0.2", d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&obj(2, "10.9.0.2", d1), ReqFlags::ADD)
        .unwrap();
    let mut g = obj(3, "10.0.0.2", 0);
    g.gateway = None;
    g.family = None;
    g.group = vec![
        GroupMember {
            id: 1,
            weight_minus_one: 0,
        },
        GroupMember {
            id: 2,
            weight_minus_one: 2,
        },
    ];
    f.nexthop_new(&g, ReqFlags::ADD).unwrap();
    // Kernel (t4): an existing id -> "File exists"; an unreachable gateway -> "Nexthop has
    // invalid gateway"; a group naming a missing id -> "Invalid nexthop id".
    assert_eq!(
        f.nexthop_new(&obj(1, "10.0.0.3", d0), ReqFlags::ADD),
        Err(RtError::new(Errno::EEXIST))
    );
    assert_eq!(
        f.nexthop_new(&obj(6, "10.77.0.3", d0), ReqFlags::ADD)
            .unwrap_err()
            .extack
            .as_deref(),
        Some("Nexthop has invalid gateway")
    );
    let mut bad = g.clone();
    bad.id = 7;
    bad.group = vec![GroupMember {
        id: 99,
        weight_minus_one: 0,
    }];
    assert_eq!(
        f.nexthop_new(&bad, ReqFlags::ADD),
        Err(RtError::msg(Errno::EINVAL, "Invalid nexthop id"))
    );
    let mut r = rt("10.30.0.0/16", None, 0);
    r.scope = scope::UNIVERSE;
    r.nhid = Some(1);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    r.dst = pfx("10.31.0.0/16");
    r.nhid = Some(3);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    r.nhid = Some(99);
    r.dst = pfx("10.34.0.0/16");
    assert_eq!(
        f.route_new(&r, ReqFlags::ADD),
        Err(RtError::msg(Errno::EINVAL, "Nexthop id does not exist"))
    );
    let lines = |f: &Fib| -> Vec<String> {
        dump(f, Family::Inet)
            .into_iter()
            .filter(|l| l.starts_with("10.3"))
            .collect()
    };
    assert_eq!(
        lines(&f),
        [
            "10.30.0.0/16 via 10.0.0.2 dev d0",
            "10.31.0.0/16 nexthop via 10.0.0.2 dev d0 weight 1 nexthop via 10.9.0.2 dev d1 weight 3",
        ]
    );
    // Replacing object 1 moves its routes; deleting 2 shrinks the group; deleting 1 removes
    // every route using it (the group became empty).
    f.nexthop_new(&obj(1, "10.0.0.4", d0), ReqFlags::REPLACE)
        .unwrap();
    f.nexthop_del(2).unwrap();
    assert_eq!(
        lines(&f),
        [
            "10.30.0.0/16 via 10.0.0.4 dev d0",
            "10.31.0.0/16 via 10.0.0.4 dev d0"
        ]
    );
    f.nexthop_del(1).unwrap();
    assert!(lines(&f).is_empty());
}

#[test]
fn rules_select_tables_and_errors() {
    let (mut f, d0, d1) = two_links();
    f.route_new(&rt("0.0.0.0/0", Some("10.0.0.254"), 0), ReqFlags::ADD)
        .unwrap();
    let mut r = rt("10.50.0.0/16", Some("10.9.0.2"), 0);
    r.table = 100;
    f.route_new(&r, ReqFlags::ADD).unwrap();
    let rule = |prio: u32| Rule {
        priority: Some(prio),
        ..Rule::new(Family::Inet, 100)
    };
    f.rule_new(
        &Rule {
            iifname: Some("d1".into()),
            ..rule(103)
        },
        ReqFlags::ADD,
    )
    .unwrap();
    f.rule_new(
        &Rule {
            src: Some(pfx("10.3.0.0/16")),
            action: RuleAction::Prohibit,
            table: 0,
            ..rule(104)
        },
        ReqFlags::ADD,
    )
    .unwrap();
    f.rule_new(
        &Rule {
            src: Some(pfx("10.4.0.0/16")),
            action: RuleAction::Unreachable,
            table: 0,
            ..rule(105)
        },
        ReqFlags::ADD,
    )
    .unwrap();
    f.rule_new(
        &Rule {
            src: Some(pfx("10.5.0.0/16")),
            action: RuleAction::Blackhole,
            table: 0,
            ..rule(106)
        },
        ReqFlags::ADD,
    )
    .unwrap();
    let q = |dst: &str, src: Option<&str>, iif: Option<u32>| RouteQuery {
        src: src.map(ip),
        iif,
        ..RouteQuery::to(ip(dst))
    };
    // Kernel (t5): output goes by main; input on d1 by table 100, with a redirect since the
    // source is on d1 and so is the next hop; sources matched by the reject rules fail with
    // EACCES, ENETUNREACH, EINVAL.
    assert_eq!(
        f.route_get(&q("10.50.0.1", None, None))
            .unwrap()
            .nexthop
            .gateway,
        Some(ip("10.0.0.254"))
    );
    let a = f
        .route_get(&q("10.50.0.1", Some("10.9.0.7"), Some(d1)))
        .unwrap();
    assert_eq!(
        (a.table, a.nexthop.oif, a.nexthop.gateway),
        (100, d1, Some(ip("10.9.0.2")))
    );
    assert_ne!(a.flags & rtcf::DOREDIRECT, 0);
    for (src, e) in [
        ("10.3.0.1", Errno::EACCES),
        ("10.4.0.1", Errno::ENETUNREACH),
        ("10.5.0.1", Errno::EINVAL),
    ] {
        assert_eq!(
            f.route_get(&q("10.50.0.1", Some(src), Some(d0)))
                .unwrap_err()
                .errno,
            e
        );
    }
    // Kernel: a martian source (one of our addresses) arriving on another link is EINVAL.
    assert_eq!(
        f.route_get(&q("10.0.0.1", Some("10.0.0.1"), Some(d1)))
            .unwrap_err()
            .errno,
        Errno::EINVAL
    );
}

#[test]
fn ipv6_source_routes_shadow_sourceless_ones() {
    let (mut f, _, _) = two_links();
    f.route_new(
        &rt("2001:db8:1::/48", Some("2001:db8::2"), 0),
        ReqFlags::ADD,
    )
    .unwrap();
    let q = |src: Option<&str>| RouteQuery {
        src: src.map(ip),
        ..RouteQuery::to(ip("2001:db8:1::5"))
    };
    assert_eq!(
        f.route_get(&q(None)).unwrap().nexthop.gateway,
        Some(ip("2001:db8::2"))
    );
    let mut r = rt("2001:db8:1::/48", Some("2001:db8::3"), 0);
    r.src = Some(pfx("2001:db8:77::/48"));
    f.route_new(&r, ReqFlags::ADD).unwrap();
    // Kernel (t7): with `2001:db8:1::/48 from 2001:db8:77::/48` present, `route get
    // 2001:db8:1::5` answers "Network is unreachable"; from 2001:db8:77::1 it takes ::3.
    assert_eq!(f.route_get(&q(None)).unwrap_err().errno, Errno::ENETUNREACH);
    assert_eq!(
        f.route_get(&q(Some("2001:db8:77::1")))
            .unwrap()
            .nexthop
            .gateway,
        Some(ip("2001:db8::3"))
    );
}

#[test]
fn multipath_split_follows_weights() {
    let (mut f, d0, d1) = two_links();
    let mut r = rt("10.3.0.0/16", None, 0);
    r.scope = scope::UNIVERSE;
    r.multipath = vec![
        NextHop {
            gateway: Some(ip("10.0.0.2")),
            hops: 2,
            ..Default::default()
        },
        NextHop {
            gateway: Some(ip("10.9.0.2")),
            hops: 0,
            ..Default::default()
        },
    ];
    f.route_new(&r, ReqFlags::ADD).unwrap();
    let (mut a, mut b) = (0u32, 0u32);
    let flows = 20_000u32;
    for i in 0..flows {
        let flow = Flow {
            dst: (u32::from(std::net::Ipv4Addr::new(10, 3, 0, 0)) + (i % 65536)) as u128,
            src: (0x0a00_0000u32 + i * 7919) as u128,
            ..Flow::empty()
        };
        match f.lookup_output(Family::Inet, &flow).unwrap().oif {
            o if o == d0 => a += 1,
            o if o == d1 => b += 1,
            o => panic!("next hop {o} is not one of the route's"),
        }
    }
    // Weights 3:1 -> 75% within a few percent.
    let share = a as f64 / (a + b) as f64;
    assert!((share - 0.75).abs() < 0.03, "share {share}");
    // A dead next hop takes no flows: d1 down marks it dead (kernel: `dead linkdown`).
    set_up(&mut f, d1, false);
    for i in 0..1000u32 {
        let flow = Flow {
            dst: 0x0a03_0000 + i as u128,
            src: i as u128 * 31,
            ..Flow::empty()
        };
        assert_eq!(f.lookup_output(Family::Inet, &flow).unwrap().oif, d0);
    }
}

#[test]
fn ipv6_dump_skips_routes_between_siblings() {
    let (mut f, _, d1) = two_links();
    // Kernel (t6): add via ::2; append dev d1 (no gateway: a route of its own, after the
    // first); append via 9::2 (a sibling of the first, at the end of the run). The dump jumps
    // from the first sibling to the last and never shows the device route between them.
    f.route_new(
        &rt("2001:db8:1::/48", Some("2001:db8::2"), 0),
        ReqFlags::ADD,
    )
    .unwrap();
    f.route_new(&rt("2001:db8:1::/48", None, d1), ReqFlags::APPEND)
        .unwrap();
    f.route_new(
        &rt("2001:db8:1::/48", Some("2001:db8:9::2"), 0),
        ReqFlags::APPEND,
    )
    .unwrap();
    assert_eq!(
        main_v6(&f),
        ["2001:db8:1::/48 metric 1024 nexthop via 2001:db8::2 dev d0 weight 1 nexthop via 2001:db8:9::2 dev d1 weight 1"]
    );
    // `ip -6 route del 2001:db8:1::/48 via 2001:db8::2`: the device route is first again.
    let mut d = rt("2001:db8:1::/48", Some("2001:db8::2"), 0);
    d.protocol = 0;
    f.route_del(&d).unwrap();
    assert_eq!(
        main_v6(&f),
        [
            "2001:db8:1::/48 dev d1 metric 1024",
            "2001:db8:1::/48 via 2001:db8:9::2 dev d1 metric 1024"
        ]
    );
}

#[test]
fn ipv6_route_through_a_group_object_has_every_member() {
    let (mut f, d0, d1) = two_links();
    let obj = |id: u32, gw: &str, oif: u32| nh_obj(id, Some(gw), oif);
    f.nexthop_new(&obj(1, "2001:db8::2", d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&obj(2, "2001:db8:9::2", d1), ReqFlags::ADD)
        .unwrap();
    let mut g = obj(3, "2001:db8::2", 0);
    g.gateway = None;
    g.group = [(1, 0), (2, 2)]
        .iter()
        .map(|&(id, weight_minus_one)| GroupMember {
            id,
            weight_minus_one,
        })
        .collect();
    // Kernel: `ip -6 nexthop add id 3 group 1/2,3` -> "Error: Invalid family for group."
    assert_eq!(
        f.nexthop_new(&g, ReqFlags::ADD),
        Err(RtError::msg(Errno::EINVAL, "Invalid family for group"))
    );
    g.family = None;
    f.nexthop_new(&g, ReqFlags::ADD).unwrap();
    let mut r = rt("2001:db8:5::/48", None, 0);
    r.nhid = Some(3);
    f.route_new(&r, ReqFlags::APPEND).unwrap();
    assert_eq!(
        main_v6(&f),
        ["2001:db8:5::/48 metric 1024 nexthop via 2001:db8::2 dev d0 weight 1 nexthop via 2001:db8:9::2 dev d1 weight 3"]
    );
    // Whichever member a flow takes, the answer's source is selected on the first member's
    // device, as ip6_route_get_saddr does (fib6_info_nh_dev; checked against kernel 6.18).
    let answers: Vec<Route> = (0..32u16)
        .map(|i| {
            let dst = Ipv6Addr::new(0x2001, 0xdb8, 5, 0, 0, 0, i, 1);
            f.route_get(&RouteQuery::to(IpAddr::V6(dst))).unwrap()
        })
        .collect();
    assert!(answers.iter().any(|a| a.nexthop.oif == d1));
    assert!(answers.iter().all(|a| a.prefsrc == Some(ip("2001:db8::1"))));
}

fn del_addr(f: &mut Fib, idx: u32, a: &str) {
    let p = pfx(a);
    let ad = Address {
        family: Family::of(&p.addr),
        prefixlen: p.len,
        flags: 0,
        scope: 0,
        ifindex: idx,
        local: Some(p.addr),
        address: Some(p.addr),
        broadcast: None,
        label: None,
        metric: None,
        valid_lft: None,
        preferred_lft: None,
    };
    f.addr_del(&ad).unwrap();
}

#[test]
fn last_v4_address_deletion_kills_next_hops_through_the_link() {
    // Kernel: while d0 keeps an IPv4 address its routes stay; once the last one goes, every
    // route through d0 (any table, any scope) is flushed and multipath legs through d0 die.
    let (mut f, d0) = base();
    let d1 = add_link(&mut f, "d1");
    set_up(&mut f, d1, true);
    add_addr(&mut f, d0, "10.1.0.1/24").unwrap();
    add_addr(&mut f, d1, "10.2.0.1/24").unwrap();
    f.route_new(&rt("192.168.0.0/24", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    f.route_new(&rt("192.168.1.0/24", None, d0), ReqFlags::ADD)
        .unwrap();
    let mut t100 = rt("192.168.2.0/24", Some("10.0.0.3"), 0);
    t100.table = 100;
    f.route_new(&t100, ReqFlags::ADD).unwrap();
    let mut mp = rt("192.168.3.0/24", None, 0);
    mp.scope = scope::UNIVERSE;
    mp.multipath = vec![
        NextHop {
            gateway: Some(ip("10.0.0.4")),
            oif: d0,
            ..Default::default()
        },
        NextHop {
            gateway: Some(ip("10.2.0.2")),
            oif: d1,
            ..Default::default()
        },
    ];
    f.route_new(&mp, ReqFlags::ADD).unwrap();
    del_addr(&mut f, d0, "10.0.0.1/24");
    let d = dump(&f, Family::Inet);
    assert!(
        d.contains(&"192.168.1.0/24 dev d0 scope link".to_string()),
        "{d:?}"
    );
    assert!(d.contains(&"192.168.2.0/24 via 10.0.0.3 dev d0 table 100".to_string()));
    del_addr(&mut f, d0, "10.1.0.1/24");
    assert_eq!(
        dump(&f, Family::Inet),
        [
            "10.2.0.0/24 dev d1 proto kernel scope link src 10.2.0.1",
            "192.168.3.0/24 nexthop via 10.0.0.4 dev d0 weight 1 dead linkdown nexthop via 10.2.0.2 dev d1 weight 1",
            "local 10.2.0.1 dev d1 table local proto kernel scope host src 10.2.0.1",
            "broadcast 10.2.0.255 dev d1 table local proto kernel scope link src 10.2.0.1",
            "local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1",
            "local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1",
            "broadcast 127.255.255.255 dev lo table local proto kernel scope link src 127.0.0.1",
        ]
    );
}

#[test]
fn local_and_main_compete_by_prefix_until_the_first_rule() {
    // Kernel (the batch run in a namespace): with no rules added, table local and main are
    // one trie, so main's 172.16.1.0/24 beats local's anycast 172.16.0.0/12; after
    // `rule add`, rule 0 (lookup local) answers first.
    let (mut f, d0) = base();
    let d1 = add_link(&mut f, "d1");
    set_up(&mut f, d1, true);
    let mut any = rt("172.16.0.0/12", None, d1);
    any.rtype = RouteType::Anycast;
    any.table = table::LOCAL;
    f.route_new(&any, ReqFlags::ADD).unwrap();
    f.route_new(&rt("172.16.1.0/24", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    let a = get(&f, "172.16.1.1").unwrap();
    assert_eq!((a.rtype, a.nexthop.oif), (RouteType::Unicast, d0));
    assert_eq!(a.nexthop.gateway, Some(ip("10.0.0.2")));
    let a = get(&f, "172.16.2.1").unwrap();
    assert_eq!(
        (a.rtype, a.nexthop.oif, a.table),
        (RouteType::Anycast, d1, table::MAIN)
    );
    f.rule_new(
        &Rule {
            priority: Some(100),
            src: Some(pfx("192.0.2.0/24")),
            ..Rule::new(Family::Inet, 100)
        },
        ReqFlags::ADD,
    )
    .unwrap();
    let a = get(&f, "172.16.1.1").unwrap();
    assert_eq!(
        (a.rtype, a.nexthop.oif, a.table),
        (RouteType::Anycast, d1, table::LOCAL)
    );
}

#[test]
fn multicast_route_and_user_anycast6_answers() {
    // Kernel: `route get` through a multicast-type route is flagged RTCF_MULTICAST (iproute2
    // prints "rt_offload_failed" and "cache <mc>"); a user's IPv6 anycast route answers on
    // its own device, not lo (no RTF_ANYCAST).
    let (mut f, d0) = base();
    let d1 = add_link(&mut f, "d1");
    set_up(&mut f, d1, true);
    let mut mc = rt("10.9.0.0/16", None, d0);
    mc.rtype = RouteType::Multicast;
    f.route_new(&mc, ReqFlags::ADD).unwrap();
    let a = get(&f, "10.9.1.1").unwrap();
    assert_eq!(a.rtype, RouteType::Multicast);
    assert_eq!(a.flags & (rtcf::MULTICAST | rtcf::LOCAL), rtcf::MULTICAST);
    let mut any = rt("2001:db8:5::/64", None, d1);
    any.rtype = RouteType::Anycast;
    any.table = table::LOCAL;
    f.route_new(&any, ReqFlags::ADD).unwrap();
    let a = get(&f, "2001:db8:5::1").unwrap();
    assert_eq!((a.rtype, a.nexthop.oif), (RouteType::Anycast, d1));
}

#[test]
fn input_answers_check_broadcast_sources_name_tables_and_default_to_udp() {
    // Kernel: once rules exist, an input lookup to a broadcast route checks its source (a
    // source inside an anycast route is martian: EINVAL); local answers name table local; and
    // a `route get` without ipproto is a UDP packet, so `ipproto udp` rules catch it.
    let (mut f, d0) = base();
    let mut bc = rt("10.16.0.0/12", None, d0);
    bc.rtype = RouteType::Broadcast;
    bc.table = table::LOCAL;
    f.route_new(&bc, ReqFlags::ADD).unwrap();
    let mut any = rt("172.16.0.0/12", None, d0);
    any.rtype = RouteType::Anycast;
    any.table = table::LOCAL;
    f.route_new(&any, ReqFlags::ADD).unwrap();
    f.route_new(&rt("10.9.0.0/16", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    let input = |f: &Fib, dst: &str, src: &str| {
        let mut q = RouteQuery::to(ip(dst));
        q.src = Some(ip(src));
        q.iif = Some(d0);
        f.route_get(&q)
    };
    f.rule_new(
        &Rule {
            priority: Some(100),
            dst: Some(pfx("10.9.0.0/16")),
            ipproto: Some(17),
            action: RuleAction::Unreachable,
            ..Rule::new(Family::Inet, 0)
        },
        ReqFlags::ADD,
    )
    .unwrap();
    let e = input(&f, "10.16.1.1", "172.20.0.1").unwrap_err();
    assert_eq!(e.errno, Errno::EINVAL);
    // An input fibmatch fails as the input lookup does.
    let mut q = RouteQuery::to(ip("10.16.1.1"));
    q.src = Some(ip("172.20.0.1"));
    q.iif = Some(d0);
    q.fibmatch = true;
    assert_eq!(f.route_get(&q).unwrap_err().errno, Errno::EINVAL);
    let a = input(&f, "10.16.1.1", "10.9.0.5").unwrap();
    assert_eq!(a.rtype, RouteType::Broadcast);
    let a = input(&f, "10.0.0.1", "10.9.0.5").unwrap();
    assert_eq!((a.rtype, a.table), (RouteType::Local, table::LOCAL));
    assert_eq!(get(&f, "10.9.0.1").unwrap_err().errno, Errno::ENETUNREACH);
    assert_eq!(
        input(&f, "10.9.0.1", "10.0.0.5").unwrap_err().errno,
        Errno::ENETUNREACH
    );
    let mut icmp = RouteQuery::to(ip("10.9.0.1"));
    icmp.ipproto = Some(1);
    assert_eq!(
        f.route_get(&icmp).unwrap().nexthop.gateway,
        Some(ip("10.0.0.2"))
    );
}

#[test]
fn nexthop_object_scopes_groups_and_link_down() {
    let (mut f, d0, _) = two_links();
    let obj = nh_obj;
    let group = |id: u32, members: &[u32]| group_obj(id, members, false);
    let scope_of = |f: &Fib, id: u32| f.nexthops().iter().find(|n| n.id == id).map(|n| n.scope);
    // Kernel (fib_nexthops.sh ipv4_fcnal): a gateway on a connected subnet is scope link, a
    // gateway that is a local address scope host, a device alone scope host.
    f.nexthop_new(&obj(1, Some("10.0.0.2"), d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&obj(2, Some("10.0.0.1"), d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&obj(3, None, d0), ReqFlags::ADD).unwrap();
    assert_eq!(scope_of(&f, 1), Some(scope::LINK));
    assert_eq!(scope_of(&f, 2), Some(scope::HOST));
    assert_eq!(scope_of(&f, 3), Some(scope::HOST));
    let bh = NexthopObj {
        blackhole: true,
        family: None,
        ..obj(4, None, 0)
    };
    f.nexthop_new(&bh, ReqFlags::ADD).unwrap();
    // Group checks in the kernel's words; a group stays a group on replace.
    let err = |f: &mut Fib, o: &NexthopObj, flags| f.nexthop_new(o, flags).unwrap_err().extack;
    assert_eq!(
        err(&mut f, &group(10, &[1, 1]), ReqFlags::ADD).as_deref(),
        Some("Nexthop id can not be used twice in a group")
    );
    f.nexthop_new(&group(10, &[1, 2]), ReqFlags::ADD).unwrap();
    assert_eq!(
        err(&mut f, &group(11, &[10]), ReqFlags::ADD).as_deref(),
        Some("Hash-threshold group can not be a nexthop within a group")
    );
    assert_eq!(
        err(&mut f, &obj(10, Some("10.0.0.3"), d0), ReqFlags::REPLACE).as_deref(),
        Some("Can not replace a nexthop group with a nexthop")
    );
    assert_eq!(
        err(&mut f, &group(1, &[2]), ReqFlags::REPLACE).as_deref(),
        Some("Can not replace a nexthop with a nexthop group")
    );
    // A route through a group of one blackhole is a blackhole route.
    f.nexthop_new(&group(12, &[4]), ReqFlags::ADD).unwrap();
    let mut r = rt("10.5.0.0/16", None, 0);
    r.scope = scope::UNIVERSE;
    r.nhid = Some(12);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    r.dst = pfx("10.6.0.0/16");
    r.nhid = Some(10);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    assert_eq!(
        dump(&f, Family::Inet)[..3],
        [
            "10.0.0.0/24 dev d0 proto kernel scope link src 10.0.0.1",
            "blackhole 10.5.0.0/16 dev lo",
            "10.6.0.0/16 nexthop via 10.0.0.2 dev d0 weight 1 nexthop via 10.0.0.1 dev d0 weight 1",
        ]
    );
    // Link down removes the objects through the link (the blackhole stays), the groups left
    // empty, and the routes using them; deleting a missing id is a bare ENOENT.
    set_up(&mut f, d0, false);
    let ids: Vec<u32> = f.nexthops().iter().map(|n| n.id).collect();
    assert_eq!(ids, [4, 12]);
    assert!(!dump(&f, Family::Inet)
        .iter()
        .any(|l| l.starts_with("10.6.")));
    assert_eq!(f.nexthop_del(1), Err(RtError::new(Errno::ENOENT)));
}
