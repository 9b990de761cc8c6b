//! The input route cache (`fibre_dataplane::input_cache`) decides every packet as the routing
//! core does without it: over random interleavings of packets with route, rule, link, address,
//! neighbour, next-hop, setting and clock changes (the egress link removed and made again
//! among them), the cache's answers and the hints' are `Fib::route_input`'s; rp_filter and the
//! martian checks hold for packets answered from the cache; a flood of unique keys only
//! evicts.

use std::sync::Arc;

use fibre_dataplane::input_cache::{CacheConfig, InputCache, Mode, CHUNK, WAYS};
use fibre_fib::build::*;
use fibre_fib::*;
use proptest::prelude::*;

const LINKS: [&str; 3] = ["d0", "d1", "d2"];

const NETS4: [&str; 6] = [
    "198.51.100.0/24",
    "198.51.0.0/16",
    "0.0.0.0/0",
    "203.0.113.0/24",
    "203.0.113.128/25",
    "192.0.2.0/24",
];
const NETS6: [&str; 6] = [
    "2001:db8:77::/48",
    "2001:db8:77::/64",
    "::/0",
    "2001:db8:88::/48",
    "2001:db8:88:1::/64",
    "2001:db8:e::/48",
];
const DSTS4: [&str; 10] = [
    "198.51.100.7",
    "198.51.7.7",
    "203.0.113.7",
    "203.0.113.200",
    "192.0.2.9",
    "10.1.0.7",
    "10.0.0.1",
    "127.0.0.1",
    "10.2.0.255",
    "224.0.0.5",
];
const SRCS4: [&str; 8] = [
    "10.0.0.5",
    "10.1.0.5",
    "10.2.0.5",
    "198.51.100.9",
    "10.0.0.1",
    "0.0.0.0",
    "127.0.0.3",
    "100.64.0.1",
];
const DSTS6: [&str; 8] = [
    "2001:db8:77::7",
    "2001:db8:77:1::7",
    "2001:db8:88::7",
    "2001:db8:88:1::7",
    "2001:db8:e::7",
    "2001:db8:1::7",
    "fe80::5",
    "ff02::1",
];
const SRCS6: [&str; 5] = [
    "2001:db8::5",
    "2001:db8:1::5",
    "2001:db8:2::5",
    "2001:db8:77::9",
    "fe80::9",
];

/// A change to the routing state, or the clock.
#[derive(Debug, Clone)]
enum Change {
    /// (family, net, kind: 0 via d1, 1 via d2, 2 multipath d1+d2, 3 unreachable, 4 blackhole,
    /// 5 through next-hop object 7, 6 multipath through two gateways on d1; table 100 instead
    /// of main; expires)
    Route(usize, usize, u8, bool, bool),
    Unroute(usize, usize, bool),
    /// (family, kind: 0 from a prefix to table 100, 1 iif d1 to 100, 2 tos to 100, 3 fwmark,
    /// 4 ipproto udp, 5 dport range, 6 prohibit from a prefix)
    Rule(usize, u8),
    Unrule(usize, u8),
    /// (link, up)
    LinkUp(usize, bool),
    Carrier(usize, bool),
    /// The egress link d2 deleted, then made again (with its addresses).
    RemakeD2,
    /// An address of d1 added or removed.
    Address(bool),
    /// The gateways' neighbours made or removed.
    Neighbour(bool),
    /// Next-hop object 7 (a group of two gateways), made or removed.
    Nexthop(bool),
    RpFilter(u8),
    /// net.ipv4 and net.ipv6 fib_multipath_hash_policy.
    HashPolicy(u8),
    /// Milliseconds, then a garbage-collection pass or not.
    Clock(u64, bool),
}

/// One packet: (family v6, dst, src, input link, tos, ports).
type Packet = (bool, usize, usize, usize, bool, u16);

#[derive(Debug, Clone)]
enum Step {
    Packets(Vec<Packet>),
    Change(Change),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (0usize..2, 0usize..6, 0u8..7, prop::bool::weighted(0.2), prop::bool::weighted(0.2))
            .prop_map(|(f, n, k, t, e)| Change::Route(f, n, k, t, e)),
        2 => (0usize..2, 0usize..6, prop::bool::weighted(0.2))
            .prop_map(|(f, n, t)| Change::Unroute(f, n, t)),
        1 => (0usize..2, 0u8..7).prop_map(|(f, k)| Change::Rule(f, k)),
        1 => (0usize..2, 0u8..7).prop_map(|(f, k)| Change::Unrule(f, k)),
        1 => (0usize..3, any::<bool>()).prop_map(|(l, u)| Change::LinkUp(l, u)),
        1 => (0usize..3, any::<bool>()).prop_map(|(l, u)| Change::Carrier(l, u)),
        1 => Just(Change::RemakeD2),
        1 => any::<bool>().prop_map(Change::Address),
        1 => any::<bool>().prop_map(Change::Neighbour),
        1 => any::<bool>().prop_map(Change::Nexthop),
        1 => (0u8..3).prop_map(Change::RpFilter),
        1 => (0u8..2).prop_map(Change::HashPolicy),
        1 => (prop_oneof![Just(1u64), Just(3000), Just(10_000)], any::<bool>())
            .prop_map(|(ms, gc)| Change::Clock(ms, gc)),
    ]
}

fn packet() -> impl Strategy<Value = Packet> {
    (
        prop::bool::weighted(0.4),
        0usize..10,
        0usize..8,
        0usize..3,
        prop::bool::weighted(0.2),
        0u16..6,
    )
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => prop::collection::vec(packet(), 1..=CHUNK).prop_map(Step::Packets),
        2 => change().prop_map(Step::Change),
    ]
}

fn index(f: &Fib, name: &str) -> u32 {
    f.link_index(name).unwrap_or(999)
}

fn addresses(f: &mut Fib, l: usize) {
    let i = index(f, LINKS[l]);
    addr(f, i, &format!("10.{l}.0.1"), 24);
    addr(f, i, &format!("2001:db8:{l}::1"), 64);
}

/// Links d0 (in), d1 and d2 (out), an IPv4 and an IPv6 subnet on each, a manual clock.
fn state() -> (Fib, Arc<ManualClock>) {
    let mut f = Fib::default();
    let clock = Arc::new(ManualClock::new(0));
    f.set_clock(clock.clone());
    for (l, name) in LINKS.iter().enumerate() {
        link(&mut f, name, [2, 0, 0, 0, 0, l as u8]);
        addresses(&mut f, l);
    }
    (f, clock)
}

fn gateways(family: usize) -> [&'static str; 2] {
    match family {
        0 => ["10.1.0.2", "10.2.0.2"],
        _ => ["2001:db8:1::2", "2001:db8:2::2"],
    }
}

fn net(family: usize, n: usize) -> (&'static str, u8) {
    let s = if family == 0 { NETS4[n] } else { NETS6[n] };
    let (a, len) = s.split_once('/').expect("literal");
    (a, len.parse().expect("literal"))
}

fn the_route(family: usize, n: usize, kind: u8, t100: bool, expires: bool) -> Route {
    let (a, len) = net(family, n);
    let gws = gateways(family);
    let mut r = match kind {
        0 => route(a, len, &gws[..1]),
        1 => route(a, len, &gws[1..]),
        2 => route(a, len, &gws),
        6 if family == 0 => route(a, len, &["10.1.0.2", "10.1.0.3"]),
        6 => route(a, len, &["2001:db8:1::2", "2001:db8:1::3"]),
        _ => route(a, len, &gws[..1]),
    };
    match kind {
        3 | 4 => {
            r.nexthop = NextHop::default();
            r.rtype = if kind == 3 {
                RouteType::Unreachable
            } else {
                RouteType::Blackhole
            };
        }
        5 => {
            r.nexthop = NextHop::default();
            r.nhid = Some(7 + family as u32);
        }
        _ => {}
    }
    if t100 {
        r.table = 100;
    }
    r.expires = expires.then_some(2);
    r
}

fn the_rule(family: usize, kind: u8) -> Rule {
    let fam = if family == 0 {
        Family::Inet
    } else {
        Family::Inet6
    };
    let mut r = Rule::new(fam, 100);
    r.priority = Some(100 + u32::from(kind));
    let src = if family == 0 {
        Prefix {
            addr: ip("10.0.0.0"),
            len: 24,
        }
    } else {
        Prefix {
            addr: ip("2001:db8::"),
            len: 64,
        }
    };
    match kind {
        0 => r.src = Some(src),
        1 => r.iifname = Some("d1".into()),
        2 => r.tos = 0x10,
        3 => r.fwmark = Some(1),
        4 => r.ipproto = Some(17),
        5 => r.dport = Some((2, 3)),
        _ => {
            r.src = Some(src);
            r.action = RuleAction::Prohibit;
            r.table = 0;
        }
    }
    r
}

fn group(family: usize, f: &mut Fib, add: bool) {
    let (id, base) = (7 + family as u32, 20 + 2 * family as u32);
    if !add {
        for i in [id, base, base + 1] {
            let _ = f.nexthop_del(i);
        }
        return;
    }
    for (i, (gw, dev)) in gateways(family).iter().zip(["d1", "d2"]).enumerate() {
        let nh = NexthopObj {
            id: base + i as u32,
            family: Some(if family == 0 {
                Family::Inet
            } else {
                Family::Inet6
            }),
            gateway: Some(ip(gw)),
            oif: index(f, dev),
            ..Default::default()
        };
        let _ = f.nexthop_new(&nh, ReqFlags::ADD);
    }
    let g = NexthopObj {
        id,
        group: vec![
            GroupMember {
                id: base,
                weight_minus_one: 0,
            },
            GroupMember {
                id: base + 1,
                weight_minus_one: 1,
            },
        ],
        ..Default::default()
    };
    let _ = f.nexthop_new(&g, ReqFlags::ADD);
}

fn apply(f: &mut Fib, clock: &ManualClock, c: &Change) {
    match *c {
        Change::Route(family, n, kind, t100, expires) => {
            let r = the_route(family, n, kind, t100, expires);
            let _ = f.route_new(&r, ReqFlags::REPLACE);
        }
        Change::Unroute(family, n, t100) => {
            let (a, len) = net(family, n);
            let mut r = Route::new(Family::of(&ip(a)), Prefix { addr: ip(a), len });
            r.table = if t100 { 100 } else { table::MAIN };
            let _ = f.route_del(&r);
        }
        Change::Rule(family, kind) => {
            let _ = f.rule_new(&the_rule(family, kind), ReqFlags::ADD);
        }
        Change::Unrule(family, kind) => {
            let _ = f.rule_del(&the_rule(family, kind));
        }
        Change::LinkUp(l, u) => {
            let i = index(f, LINKS[l]);
            let _ = f.link_new(
                &Link {
                    ifindex: i,
                    ..up(u)
                },
                ReqFlags::NONE,
            );
        }
        Change::Carrier(l, c) => {
            let i = index(f, LINKS[l]);
            let _ = f.link_new(
                &Link {
                    ifindex: i,
                    carrier: Some(c),
                    ..Link::default()
                },
                ReqFlags::NONE,
            );
        }
        Change::RemakeD2 => {
            let i = index(f, "d2");
            let _ = f.link_del(&Link {
                ifindex: i,
                ..Link::default()
            });
            link(f, "d2", [2, 0, 0, 0, 0, 2]);
            addresses(f, 2);
        }
        Change::Address(add) => {
            let a = Address::new(index(f, "d1"), ip("10.1.0.9"), 24);
            let _ = if add {
                f.addr_new(&a, ReqFlags::ADD)
            } else {
                f.addr_del(&a)
            };
        }
        Change::Neighbour(add) => {
            for family in 0..2 {
                for (gw, dev) in gateways(family).iter().zip(["d1", "d2"]) {
                    let i = index(f, dev);
                    if add {
                        let _ = f.neigh_new(
                            &neighbour(i, gw, Some([2, 0, 0, 0, 9, 9]), nud::PERMANENT),
                            ReqFlags::REPLACE,
                        );
                    } else {
                        neigh_del(f, i, gw);
                    }
                }
            }
        }
        Change::Nexthop(add) => {
            group(0, f, add);
            group(1, f, add);
        }
        Change::RpFilter(v) => {
            let _ = f.set_conf(ConfTarget::All, ConfKey::RpFilter, i64::from(v));
        }
        Change::HashPolicy(p) => {
            for k in [ConfKey::MultipathHashPolicy4, ConfKey::MultipathHashPolicy6] {
                let _ = f.set_conf(ConfTarget::All, k, i64::from(p));
            }
        }
        Change::Clock(ms, gc) => {
            clock.advance(ms);
            if gc {
                f.expire();
            }
        }
    }
}

fn key(f: &Fib, &(v6, d, s, iif, tos, port): &Packet) -> InputKey {
    let (dst, src) = if v6 {
        (ip(DSTS6[d % DSTS6.len()]), ip(SRCS6[s % SRCS6.len()]))
    } else {
        (ip(DSTS4[d]), ip(SRCS4[s]))
    };
    InputKey {
        dst,
        src,
        iif: index(f, LINKS[iif]),
        tos: if tos { 0x10 } else { 0 },
        mark: 0,
        proto: 17,
        sport: 1000 + port * 7919,
        dport: port % 4,
        flowlabel: u32::from(port),
    }
}

fn caches(entries: usize) -> [InputCache; 3] {
    [Mode::Off, Mode::Hints, Mode::Cache].map(|mode| InputCache::new(CacheConfig { mode, entries }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Over random interleavings of packets (IPv4 and IPv6, several ports per key so that
    /// multipath legs differ) and changes of every kind, the answers with the cache, with the
    /// hints only and without either are `Fib::route_input`'s for each packet.
    #[test]
    fn cache_on_decides_as_cache_off(
        start in prop::collection::vec(change(), 0..8),
        steps in prop::collection::vec(step(), 1..40),
        small in any::<bool>(),
    ) {
        let (mut f, clock) = state();
        for c in &start {
            apply(&mut f, &clock, c);
        }
        // A small cache also evicts.
        let mut cs = caches(if small { WAYS } else { 1024 });
        for s in &steps {
            match s {
                Step::Change(c) => apply(&mut f, &clock, c),
                Step::Packets(ps) => {
                    let keys: Vec<InputKey> = ps.iter().map(|p| key(&f, p)).collect();
                    let want: Vec<_> = keys.iter().map(|k| f.route_input(k)).collect();
                    for c in &mut cs {
                        let mut out = vec![Err(InputDrop::NoRoute); keys.len()];
                        c.decide(&f, &keys, &mut out);
                        for (i, k) in keys.iter().enumerate() {
                            prop_assert_eq!(out[i], want[i], "{:?} {:?}", c.mode(), k);
                        }
                    }
                }
            }
        }
    }
}

/// The kind of a decision.
fn outcome(r: &Result<InputRoute, InputDrop>) -> String {
    match r {
        Ok(InputRoute::Forward(_)) => "Forward".into(),
        Ok(InputRoute::Local { .. }) => "Local".into(),
        Ok(InputRoute::Broadcast { .. }) => "Broadcast".into(),
        Err(d) => format!("{d:?}"),
    }
}

/// rp_filter strict (1) and loose (2) and the martian checks give the same answers for
/// packets answered from the cache as for the first packet of each key, which was looked up.
#[test]
fn strict_and_loose_rp_filter_and_martians_hold_for_cached_packets() {
    let (mut f, clock) = state();
    for c in [
        Change::Route(0, 0, 1, false, false),
        Change::Route(0, 3, 2, false, false),
        Change::Route(1, 0, 1, false, false),
        Change::Route(1, 3, 2, false, false),
        Change::Neighbour(true),
    ] {
        apply(&mut f, &clock, &c);
    }
    for rpf in [1u8, 2, 0] {
        apply(&mut f, &clock, &Change::RpFilter(rpf));
        let mut c = InputCache::new(CacheConfig::default());
        let mut seen = std::collections::BTreeSet::new();
        for v6 in [false, true] {
            for d in 0..10 {
                for s in 0..8 {
                    let keys: Vec<InputKey> = (0..3)
                        .flat_map(|iif| (0..4u16).map(move |p| (v6, d, s, iif, false, p)))
                        .map(|p| key(&f, &p))
                        .collect();
                    for round in 0..2 {
                        let mut out = vec![Err(InputDrop::NoRoute); keys.len()];
                        c.decide(&f, &keys, &mut out);
                        for (k, r) in keys.iter().zip(&out) {
                            assert_eq!(*r, f.route_input(k), "rp_filter {rpf} round {round} {k:?}");
                            if round == 1 {
                                seen.insert(outcome(r));
                            }
                        }
                    }
                }
            }
        }
        let n = c.counters();
        assert!(n.hits > n.misses, "rp_filter {rpf}: {n:?}");
        // The cached answers include drops by the source checks and the martian checks.
        let all = format!("{seen:?}");
        for want in ["MartianSource", "MartianDestination", "Forward", "Local"] {
            assert!(
                all.contains(want),
                "rp_filter {rpf}: {want} not among {all}"
            );
        }
        if rpf == 1 {
            assert!(all.contains("ReversePath"), "{all}");
        }
    }
}

/// A route's deadline changes decisions without a change to the state: answers the cache
/// took before it are not given after it, before and after the garbage collection.
#[test]
fn an_expired_route_is_not_answered_from_the_cache() {
    let (mut f, clock) = state();
    apply(&mut f, &clock, &Change::Route(0, 1, 0, false, false));
    apply(&mut f, &clock, &Change::Route(0, 0, 1, false, true));
    let k = key(&f, &(false, 0, 0, 0, false, 0));
    let mut c = InputCache::new(CacheConfig::default());
    let mut decide = |f: &Fib| {
        let mut out = [Err(InputDrop::NoRoute)];
        c.decide(f, &[k], &mut out);
        assert_eq!(out[0], f.route_input(&k));
        match out[0] {
            Ok(InputRoute::Forward(r)) => r.oif,
            other => panic!("{other:?}"),
        }
    };
    let (d1, d2) = (index(&f, "d1"), index(&f, "d2"));
    assert_eq!(decide(&f), d2);
    assert_eq!(decide(&f), d2);
    clock.advance(3000);
    assert_eq!(decide(&f), d1);
    f.expire();
    assert_eq!(decide(&f), d1);
    assert_eq!(decide(&f), d1);
    assert_eq!(c.counters().hits, 2);
    assert_eq!(c.counters().bypassed, 1);
}

/// With a rule on the input link, the source check of a multipath route's packet depends on
/// its leg (the reverse lookup comes in on the leg's output link): strict rp_filter passes
/// for one leg and fails for the other, and cached packets keep that per leg.
#[test]
fn rules_on_the_input_link_keep_multipath_legs_apart() {
    let (mut f, clock) = state();
    for c in [
        // Multipath 198.51.100.0/24 through d1 and d2; table 100's default through d2.
        Change::Route(0, 0, 2, false, false),
        Change::Route(0, 2, 1, true, false),
        Change::Rule(0, 1),
        Change::RpFilter(1),
    ] {
        apply(&mut f, &clock, &c);
    }
    // The layer-4 hash: packets of one key (one source) take both legs by their ports.
    f.set_conf(ConfTarget::All, ConfKey::MultipathHashPolicy4, 1)
        .expect("hash policy");
    let keys: Vec<InputKey> = (0..CHUNK as u16)
        .map(|p| InputKey {
            sport: 1000 + p,
            ..key(&f, &(false, 0, 0, 0, false, 0))
        })
        .collect();
    let want: Vec<_> = keys.iter().map(|k| f.route_input(k)).collect();
    let kinds: std::collections::BTreeSet<String> = want.iter().map(outcome).collect();
    assert!(kinds.len() > 1, "the legs should differ: {kinds:?}");
    for mut c in caches(1024) {
        for _ in 0..3 {
            for k in keys.chunks(8) {
                let mut out = vec![Err(InputDrop::NoRoute); k.len()];
                c.decide(&f, k, &mut out);
                for (k, r) in k.iter().zip(out) {
                    assert_eq!(r, f.route_input(k), "{:?} {k:?}", c.mode());
                }
            }
        }
    }
}
