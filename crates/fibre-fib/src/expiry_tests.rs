//! Expiring routes and next-hop exceptions through the `Fib` API, with a manual clock (no test
//! sleeps), plus a proptest of lookups under churn, expiry and GC against a naive model.

use std::net::IpAddr;
use std::sync::Arc;

use proptest::prelude::*;

use crate::prefix::{ip_u128, Key};
use crate::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn pfx(s: &str) -> Prefix {
    let (a, l) = s.split_once('/').unwrap();
    Prefix {
        addr: ip(a),
        len: l.parse().unwrap(),
    }
}

/// lo and d0 up, d0 with 10.0.0.1/24 and 2001:db8::1/64; a manual clock at 0.
fn base() -> (Fib, Arc<ManualClock>, u32) {
    let mut f = Fib::default();
    let clock = Arc::new(ManualClock::new(0));
    f.set_clock(clock.clone());
    let up = |f: &mut Fib, i: u32| {
        let l = Link {
            ifindex: i,
            flags: iff::UP,
            change: iff::UP,
            ..Default::default()
        };
        f.link_new(&l, ReqFlags::NONE).unwrap();
    };
    up(&mut f, 1);
    let l = Link {
        ifname: Some("d0".into()),
        kind: Some(LinkKind::Dummy),
        ..Default::default()
    };
    f.link_new(&l, ReqFlags::ADD).unwrap();
    let d0 = f.link_index("d0").unwrap();
    up(&mut f, d0);
    for a in ["10.0.0.1/24", "2001:db8::1/64"] {
        let p = pfx(a);
        let ad = Address {
            family: Family::of(&p.addr),
            prefixlen: p.len,
            flags: 0,
            scope: 0,
            ifindex: d0,
            local: Some(p.addr),
            address: Some(p.addr),
            broadcast: None,
            label: None,
            metric: None,
            valid_lft: None,
            preferred_lft: None,
        };
        f.addr_new(&ad, ReqFlags::ADD).unwrap();
    }
    (f, clock, d0)
}

fn route(dst: &str, via: Option<&str>, dev: u32, expires: Option<u32>) -> Route {
    let p = pfx(dst);
    let mut r = Route::new(Family::of(&p.addr), p);
    r.table = table::MAIN;
    r.protocol = protocol::BOOT;
    r.nexthop.gateway = via.map(ip);
    r.nexthop.oif = dev;
    if via.is_none() && r.family == Family::Inet {
        r.scope = scope::LINK;
    }
    r.expires = expires;
    r
}

/// The prefix length of the route `dst` matches, or None.
fn matched(f: &Fib, dst: &str) -> Option<u8> {
    let q = RouteQuery {
        fibmatch: true,
        ..RouteQuery::to(ip(dst))
    };
    f.route_get(&q).ok().map(|r| r.dst.len)
}

fn shown(f: &Fib, fam: Family, dst: &str) -> Option<Route> {
    let p = pfx(dst);
    f.routes(Some(fam)).into_iter().find(|r| r.dst == p)
}

const SEC: u64 = 1000;

#[test]
fn expiring_route_stops_matching_at_its_deadline_before_any_gc() {
    for (fam, short, long, probe) in [
        (
            Family::Inet6,
            "2001:db8:1::/48",
            "2001:db8:1:2::/64",
            "2001:db8:1:2::5",
        ),
        (Family::Inet, "10.1.0.0/16", "10.1.2.0/24", "10.1.2.5"),
    ] {
        let (mut f, clock, d0) = base();
        f.route_new(&route(short, None, d0, None), ReqFlags::ADD)
            .unwrap();
        f.route_new(&route(long, None, d0, Some(300)), ReqFlags::ADD)
            .unwrap();
        assert_eq!(matched(&f, probe), Some(pfx(long).len));
        // Shown with the time left, rounded down as the kernel prints it.
        assert_eq!(shown(&f, fam, long).unwrap().expires, Some(300));
        clock.advance(100 * SEC + 1);
        assert_eq!(shown(&f, fam, long).unwrap().expires, Some(199));
        clock.advance(200 * SEC - 2);
        assert_eq!(matched(&f, probe), Some(pfx(long).len), "1 ms left");
        clock.advance(1);
        // Expired and not reclaimed: lookups (compiled and walked) and dumps skip it.
        assert_eq!(f.expiring().0, 1);
        assert_eq!(matched(&f, probe), Some(pfx(short).len));
        let flow = Flow {
            dst: ip_u128(ip(probe)),
            ..Flow::empty()
        };
        assert!(f.lookup_output(fam, &flow).is_ok());
        assert!(shown(&f, fam, long).is_none());
        let st = f.expire();
        assert_eq!(st.routes, 1);
        assert_eq!(f.expiring().0, 0);
        assert_eq!(f.expire(), GcStats::default());
        assert_eq!(matched(&f, probe), Some(pfx(short).len));
    }
}

#[test]
fn replace_moves_a_route_between_permanent_and_expiring_both_ways() {
    let (mut f, clock, d0) = base();
    let dst = "2001:db8:3::/64";
    f.route_new(&route(dst, None, d0, None), ReqFlags::ADD)
        .unwrap();
    assert_eq!(f.expiring().0, 0);
    // permanent -> expiring
    f.route_new(&route(dst, None, d0, Some(10)), ReqFlags::REPLACE)
        .unwrap();
    assert_eq!(f.expiring().0, 1);
    assert_eq!(shown(&f, Family::Inet6, dst).unwrap().expires, Some(10));
    // expiring -> permanent, before the deadline: it never expires.
    f.route_new(&route(dst, None, d0, None), ReqFlags::REPLACE)
        .unwrap();
    assert_eq!(f.expiring().0, 0, "the old deadline left the queue");
    clock.advance(20 * SEC);
    assert_eq!(f.expire().routes, 0);
    assert_eq!(shown(&f, Family::Inet6, dst).unwrap().expires, None);
    // permanent -> expiring again, then `change` to a later deadline.
    f.route_new(&route(dst, None, d0, Some(5)), ReqFlags::CHANGE)
        .unwrap();
    f.route_new(&route(dst, None, d0, Some(50)), ReqFlags::CHANGE)
        .unwrap();
    assert_eq!(f.expiring().0, 1);
    clock.advance(10 * SEC);
    assert!(matched(&f, "2001:db8:3::1").is_some_and(|l| l == 64));
    clock.advance(40 * SEC);
    assert_eq!(matched(&f, "2001:db8:3::1"), None, "expired at 70 s");
}

#[test]
fn delete_takes_the_deadline_out_and_a_mutation_reclaims_what_is_due() {
    let (mut f, clock, d0) = base();
    f.route_new(&route("2001:db8:4::/64", None, d0, Some(5)), ReqFlags::ADD)
        .unwrap();
    f.route_del(&route("2001:db8:4::/64", None, d0, None))
        .unwrap();
    assert_eq!(f.expiring().0, 0);
    f.route_new(&route("2001:db8:4::/64", None, d0, Some(5)), ReqFlags::ADD)
        .unwrap();
    clock.advance(5 * SEC);
    // The add of the same route succeeds: the expired one was reclaimed first.
    f.route_new(&route("2001:db8:4::/64", None, d0, Some(5)), ReqFlags::ADD)
        .unwrap();
    assert_eq!(f.expiring().0, 1);
    // Deleting an expired route is ESRCH, as for a route the kernel's GC took.
    clock.advance(5 * SEC);
    assert_eq!(
        f.route_del(&route("2001:db8:4::/64", None, d0, None))
            .unwrap_err()
            .errno,
        Errno::ESRCH
    );
}

#[test]
fn gc_pass_never_looks_at_permanent_routes() {
    let (mut f, clock, d0) = base();
    for i in 0..2000u32 {
        let dst = format!("2001:db8:{:x}:{:x}::/64", 0x100 + i / 256, i % 256);
        f.route_new(&route(&dst, None, d0, None), ReqFlags::ADD)
            .unwrap();
    }
    let before = f.routes(Some(Family::Inet6)).len();
    f.route_new(
        &route("2001:db8:ffff::/64", None, d0, Some(1)),
        ReqFlags::ADD,
    )
    .unwrap();
    assert_eq!(f.expiring(), (1, 0));
    assert_eq!(f.next_expiry(), Some(SEC));
    clock.advance(SEC);
    assert_eq!(f.expire().routes, 1);
    assert_eq!(f.next_expiry(), None);
    assert_eq!(f.routes(Some(Family::Inet6)).len(), before);
}

fn get(f: &Fib, dst: &str) -> Route {
    f.route_get(&RouteQuery::to(ip(dst))).unwrap()
}

#[test]
fn pmtu_exceptions_follow_the_kernels_rules() {
    let (mut f, clock, d0) = base();
    f.route_new(
        &route("2001:db8:9::/64", Some("2001:db8::2"), d0, None),
        ReqFlags::ADD,
    )
    .unwrap();
    f.route_new(
        &route("10.9.0.0/16", Some("10.0.0.2"), d0, None),
        ReqFlags::ADD,
    )
    .unwrap();
    let v6 = ip("2001:db8:9::1");
    assert_eq!(
        f.pmtu_update(Family::Inet6, v6, 1400),
        Ok(ExceptionOutcome::Stored)
    );
    let a = get(&f, "2001:db8:9::1");
    assert_eq!(a.metrics.mtu, Some(1400));
    assert_eq!(a.cache.as_ref().unwrap().expires, Some(600));
    assert_ne!(a.flags & rtm_flags::CLONED, 0);
    // Not smaller than the learnt one, or below IPv6's minimum: nothing to learn.
    assert_eq!(
        f.pmtu_update(Family::Inet6, v6, 1400),
        Ok(ExceptionOutcome::Ignored)
    );
    assert_eq!(
        f.pmtu_update(Family::Inet6, v6, 1000),
        Ok(ExceptionOutcome::Ignored)
    );
    // A lower MTU keeps the IPv6 exception's deadline.
    clock.advance(10 * SEC);
    f.pmtu_update(Family::Inet6, v6, 1280).unwrap();
    let a = get(&f, "2001:db8:9::1");
    assert_eq!(a.metrics.mtu, Some(1280));
    assert_eq!(a.cache.as_ref().unwrap().expires, Some(590));
    // Another destination of the same route has none.
    assert_eq!(get(&f, "2001:db8:9::2").metrics.mtu, None);
    // IPv4: below min_pmtu (552) it is raised and locked.
    f.pmtu_update(Family::Inet, ip("10.9.0.1"), 300).unwrap();
    let a = get(&f, "10.9.0.1");
    assert_eq!(a.metrics.mtu, Some(552));
    assert_ne!(a.metrics.lock & 4, 0);
    assert_eq!(
        f.pmtu_update(Family::Inet, ip("10.9.0.1"), 1600),
        Ok(ExceptionOutcome::Ignored),
        "bigger than the device MTU"
    );
    assert_eq!(f.exceptions(None).len(), 2);
    // ip_rt_mtu_expires: 600 s (the IPv4 one was learnt 10 s after the IPv6 one).
    clock.advance(600 * SEC);
    assert_eq!(
        get(&f, "2001:db8:9::1").metrics.mtu,
        None,
        "expired at read"
    );
    assert!(f.exceptions(None).is_empty());
    assert_eq!(f.expire().exceptions, 2);
    assert_eq!(f.expiring().1, 0);
}

#[test]
fn exceptions_go_with_replace_device_down_and_flush() {
    let (mut f, _clock, d0) = base();
    let r = route("2001:db8:9::/64", Some("2001:db8::2"), d0, None);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    let v6 = ip("2001:db8:9::1");
    f.pmtu_update(Family::Inet6, v6, 1400).unwrap();
    let mut r2 = r.clone();
    r2.metrics.hoplimit = Some(9);
    f.route_new(&r2, ReqFlags::REPLACE).unwrap();
    assert_eq!(f.expiring().1, 0, "replace clears the exceptions");
    f.pmtu_update(Family::Inet6, v6, 1400).unwrap();
    assert_eq!(f.flush_exceptions(Some(Family::Inet)), 0);
    assert_eq!(f.flush_exceptions(Some(Family::Inet6)), 1);
    f.pmtu_update(Family::Inet6, v6, 1400).unwrap();
    let l = Link {
        ifindex: d0,
        flags: 0,
        change: iff::UP,
        ..Default::default()
    };
    f.link_new(&l, ReqFlags::NONE).unwrap();
    assert_eq!(f.expiring().1, 0, "device down clears them");
}

#[test]
fn redirects_change_the_gateway_of_one_destination() {
    let (mut f, clock, d0) = base();
    f.route_new(
        &route("10.9.0.0/16", Some("10.0.0.2"), d0, None),
        ReqFlags::ADD,
    )
    .unwrap();
    f.redirect(Family::Inet, ip("10.9.0.1"), ip("10.0.0.3"))
        .unwrap();
    let a = get(&f, "10.9.0.1");
    assert_eq!(a.nexthop.gateway, Some(ip("10.0.0.3")));
    assert_ne!(a.flags & rtcf::REDIRECTED, 0);
    assert_eq!(get(&f, "10.9.0.2").nexthop.gateway, Some(ip("10.0.0.2")));
    assert_eq!(
        f.redirect(Family::Inet, ip("10.9.0.1"), ip("10.5.0.3")),
        Err(ExceptionError::BadGateway),
        "not on-link"
    );
    assert_eq!(
        f.redirect(Family::Inet, ip("10.9.0.1"), ip("10.0.0.1")),
        Err(ExceptionError::BadGateway),
        "a local address"
    );
    clock.advance(300 * SEC);
    assert_eq!(get(&f, "10.9.0.1").nexthop.gateway, Some(ip("10.0.0.2")));
}

/// One operation of the model test.
#[derive(Debug, Clone)]
enum Op {
    /// Add or replace prefix `p` (index into PREFIXES) with an optional lifetime in seconds.
    Set(usize, Option<u8>),
    Del(usize),
    Advance(u16),
    Gc,
}

const PREFIXES: [&str; 6] = [
    "2001:db8:a::/48",
    "2001:db8:a:1::/64",
    "2001:db8:a:1:1::/80",
    "2001:db8:a:2::/64",
    "2001:db8::/32",
    "2001:db8:a:1:1:1::/96",
];
const PROBES: [&str; 5] = [
    "2001:db8:a:1:1:1::9",
    "2001:db8:a:1:2::9",
    "2001:db8:a:2::9",
    "2001:db8:b::9",
    "2001:db8:a:3::9",
];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..PREFIXES.len(), proptest::option::of(1u8..20)).prop_map(|(p, e)| Op::Set(p, e)),
        1 => (0..PREFIXES.len()).prop_map(Op::Del),
        3 => (0u16..8000).prop_map(Op::Advance),
        1 => Just(Op::Gc),
    ]
}

proptest! {
    /// Lookups after any sequence of adds, replaces, deletes, clock moves and GC passes agree
    /// with a naive model: the longest prefix whose deadline (if any) is still ahead.
    #[test]
    fn lookups_agree_with_a_naive_model(ops in proptest::collection::vec(op(), 1..60)) {
        let (mut f, clock, d0) = base();
        let mut model: Vec<Option<Option<u64>>> = vec![None; PREFIXES.len()];
        for o in ops {
            match o {
                Op::Set(p, e) => {
                    f.route_new(&route(PREFIXES[p], None, d0, e.map(u32::from)), ReqFlags::REPLACE).unwrap();
                    model[p] = Some(e.map(|s| clock.now_ms() + s as u64 * SEC));
                }
                Op::Del(p) => {
                    let now = clock.now_ms();
                    let live = matches!(model[p], Some(d) if d.is_none_or(|at| at > now));
                    let r = f.route_del(&route(PREFIXES[p], None, d0, None));
                    prop_assert_eq!(r.is_ok(), live);
                    model[p] = None;
                }
                Op::Advance(ms) => clock.advance(ms as u64),
                Op::Gc => { f.expire(); }
            }
            let now = clock.now_ms();
            for probe in PROBES {
                let want = PREFIXES.iter().enumerate()
                    .filter(|(i, p)| {
                        let live = matches!(model[*i], Some(d) if d.is_none_or(|at| at > now));
                        let pf = pfx(p);
                        live && Key::new(ip_u128(pf.addr), pf.len, 128)
                            .contains(ip_u128(ip(probe)), 128)
                    })
                    .map(|(_, p)| pfx(p).len)
                    .max();
                // 2001:db8::/64 of d0's address catches nothing here (different /64s).
                prop_assert_eq!(matched(&f, probe), want, "probe {}", probe);
            }
            let live = model.iter().filter(|m| matches!(m, Some(Some(at)) if *at > now)).count();
            let queued = f.expiring().0;
            prop_assert!(queued >= live, "queued {} live {}", queued, live);
            prop_assert!(queued <= model.iter().filter(|m| matches!(m, Some(Some(_)))).count());
        }
    }
}
