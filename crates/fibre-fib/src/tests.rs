//! The FIB's own tests: what no `ip` output shows (the forwarding result cached on a next
//! hop, the compiled lookups against a naive model, how flows spread over weighted paths,
//! per-link settings, resilient groups' buckets over time). What the kernel answers to `ip`
//! commands is recorded as scenarios in `tests/scenarios/` (see its README) and replayed
//! through the CLI, the one printer of routes.

use std::net::IpAddr;

use crate::*;

mod conf;
mod dst;
mod input;
mod input_batch;
mod resilient;

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
        ..NexthopObj::default()
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
            assert_eq!(
                f.table(family, crate::ids::TableId(TABLE))
                    .unwrap()
                    .is_compiled_large(),
                large
            );
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
/// 2001:db8:9::1/64.
fn two_links() -> (Fib, u32, u32) {
    let (mut f, d0) = base();
    let d1 = add_link(&mut f, "d1");
    set_up(&mut f, d1, true);
    add_addr(&mut f, d1, "10.9.0.1/24").unwrap();
    add_addr(&mut f, d1, "2001:db8:9::1/64").unwrap();
    (f, d0, d1)
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
