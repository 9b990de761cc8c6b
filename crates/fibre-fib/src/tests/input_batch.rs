//! The batch input route decision (`input_batch`): the same answers as
//! [`Fib::route_input`] for every packet of a vector, over random configurations that reach
//! both its fast path and every reason to leave it.

use super::*;
use proptest::prelude::*;
use std::sync::Arc;

const NETS4: [&str; 8] = [
    "198.51.100.0/24",
    "198.51.0.0/16",
    "0.0.0.0/0",
    "10.9.0.0/25",
    "203.0.113.0/24",
    "203.0.113.128/25",
    "192.0.2.0/24",
    "10.0.0.128/25",
];
const NETS6: [&str; 8] = [
    "2001:db8:77::/48",
    "2001:db8:77::/64",
    "::/0",
    "2001:db8:9::/65",
    "2001:db8:88::/48",
    "2001:db8:88:1::/64",
    "2001:db8:e::/48",
    "2001:db8::/66",
];
const HOSTS4: [&str; 16] = [
    "198.51.100.7",
    "198.51.7.7",
    "10.9.0.7",
    "10.9.0.200",
    "203.0.113.7",
    "203.0.113.200",
    "192.0.2.9",
    "10.0.0.7",
    "10.0.0.200",
    "10.9.0.1",
    "100.64.3.7",
    "127.0.0.1",
    "255.255.255.255",
    "0.0.0.0",
    "224.0.0.5",
    "10.0.0.255",
];
const HOSTS6: [&str; 16] = [
    "2001:db8:77::7",
    "2001:db8:77:1::7",
    "2001:db8:9::7",
    "2001:db8:9::8000:0:0:7",
    "2001:db8:88::7",
    "2001:db8:88:1::7",
    "2001:db8:e::7",
    "2001:db8::7",
    "2001:db8::3000:0:0:7",
    "2001:db8:9::1",
    "2001:db8:ff::3:7",
    "::1",
    "fe80::5",
    "ff02::1",
    "ff0e::7",
    "2001:db8::1",
];
/// Routes that make the main tables compile into the large structures (above the interval
/// arrays' 1024 keys), covering HOSTS4[10] and HOSTS6[10].
const PAD: u32 = 1100;

/// One random route: (net, type, next hops, tos, expires, metric).
type RouteArgs = (usize, usize, usize, bool, bool, u32);

fn route(family: usize, (n, t, via, tos, expires, metric): RouteArgs, d0: u32, d1: u32) -> Route {
    let (nets, gws) = match family {
        0 => (&NETS4, ["10.0.0.2", "10.9.0.2"]),
        _ => (&NETS6, ["2001:db8::2", "2001:db8:9::2"]),
    };
    let mut r = match via {
        0 | 1 => rt(nets[n], Some(gws[via]), 0),
        2 => rt(nets[n], None, d0),
        3 => rt(nets[n], None, d1),
        _ => {
            let mut r = rt(nets[n], None, 0);
            r.scope = scope::UNIVERSE;
            r.multipath = gws
                .iter()
                .map(|g| NextHop {
                    gateway: Some(ip(g)),
                    ..Default::default()
                })
                .collect();
            r
        }
    };
    r.rtype = [
        RouteType::Unicast,
        RouteType::Unreachable,
        RouteType::Prohibit,
        RouteType::Blackhole,
        RouteType::Throw,
    ][t];
    if r.rtype != RouteType::Unicast {
        r.nexthop = NextHop::default();
        r.multipath.clear();
        r.scope = scope::UNIVERSE;
    }
    if tos && family == 0 {
        r.tos = 0x10;
    }
    r.expires = expires.then_some(5);
    r.priority = Some(metric);
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Over random routes (reject and throw types, multipath, tos, expiring, several metrics),
    /// rules, custom local routes, reverse-path filtering, forwarding, link states and table
    /// sizes, every answer of `route_input_batch` is `route_input`'s for the same packet.
    #[test]
    fn route_input_batch_is_route_input(
        routes in prop::collection::vec(
            (0usize..8, prop_oneof![4 => Just(0usize), 1 => 1usize..5], 0usize..5,
             prop::bool::weighted(0.1), prop::bool::weighted(0.1), 0u32..2),
            0..14),
        rule in 0u8..4,
        custom_local in prop::bool::weighted(0.2),
        rpf in prop_oneof![3 => Just(0u8), 1 => 1u8..3],
        fwd in prop::bool::weighted(0.9),
        d1_state in prop_oneof![3 => Just(0u8), 1 => 1u8..3],
        pad in any::<bool>(),
        expire in any::<bool>(),
        packets in prop::collection::vec(
            (0usize..16, 0usize..16, 0u8..2, any::<bool>(), prop::bool::weighted(0.2),
             any::<u16>()),
            1..150),
    ) {
        let (mut f, d0, d1) = two_links();
        let clock = Arc::new(ManualClock::new(0));
        f.set_clock(clock.clone());
        if pad {
            for i in 0..PAD {
                let r4 = rt(&format!("100.64.{}.{}/32", i / 256, i % 256), Some("10.9.0.2"), 0);
                f.route_new(&r4, ReqFlags::ADD).unwrap();
                let r6 = rt(&format!("2001:db8:ff::{}:0/112", i), Some("2001:db8:9::2"), 0);
                f.route_new(&r6, ReqFlags::ADD).unwrap();
            }
        }
        for &r in &routes {
            for family in 0..2 {
                let _ = f.route_new(&route(family, r, d0, d1), ReqFlags::APPEND);
            }
        }
        match rule {
            1 => {
                let mut r = Rule::new(Family::Inet, table::MAIN);
                r.priority = Some(100);
                r.iifname = Some("d1".into());
                f.rule_new(&r, ReqFlags::ADD).unwrap();
                let mut r6 = r.clone();
                r6.family = Family::Inet6;
                f.rule_new(&r6, ReqFlags::ADD).unwrap();
            }
            2 => {
                // Rules back to a fresh instance's, IPv4's custom-rules state left set.
                for family in [Family::Inet, Family::Inet6] {
                    let mut r = Rule::new(family, table::MAIN);
                    r.priority = Some(100);
                    f.rule_new(&r, ReqFlags::ADD).unwrap();
                    f.rule_del(&r).unwrap();
                }
            }
            _ => {}
        }
        if custom_local {
            let mut r = rt("192.0.2.77/32", None, d0);
            r.table = table::LOCAL;
            r.rtype = RouteType::Local;
            r.scope = scope::HOST;
            f.route_new(&r, ReqFlags::ADD).unwrap();
        }
        match d1_state {
            1 => set_carrier(&mut f, d1, false),
            2 => set_up(&mut f, d1, false),
            _ => {}
        }
        if expire {
            clock.advance(10_000);
        }
        f.set_settings(Settings {
            rp_filter: rpf,
            ipv4_forwarding: fwd,
            ipv6_forwarding: fwd,
            ..f.settings().clone()
        });
        let keys: Vec<InputKey> = packets
            .iter()
            .map(|&(d, s, iif, v6, tos, port)| {
                let hosts = if v6 { &HOSTS6 } else { &HOSTS4 };
                InputKey {
                    dst: ip(hosts[d]),
                    src: ip(hosts[s]),
                    iif: [d0, d1][iif as usize],
                    tos: if tos { 0x10 } else { 0 },
                    mark: 0,
                    proto: 17,
                    sport: port,
                    dport: port.rotate_left(3),
                    flowlabel: 0,
                }
            })
            .collect();
        let mut out = vec![Err(InputDrop::NoRoute); keys.len()];
        f.route_input_batch(&keys, &mut out);
        for (k, got) in keys.iter().zip(&out) {
            prop_assert_eq!(*got, f.route_input(k), "{:?}", k);
        }
        // The memos: the same answers, and each memo, replayed for packets of its cache key
        // with other ports (so other multipath legs), answers as `route_input` or sends the
        // packet to the general path.
        let mut memos = vec![None; keys.len()];
        let mut again = vec![Err(InputDrop::NoRoute); keys.len()];
        f.route_input_batch_memo(&keys, &mut again, &mut memos);
        prop_assert_eq!(&again, &out);
        for w in keys.windows(2) {
            prop_assert_eq!(w[0].same_cache_key(&w[1]), w[0].cache_key() == w[1].cache_key());
        }
        for (k, m) in keys.iter().zip(&memos) {
            let Some(m) = m else { continue };
            for p in 0..16u16 {
                let other = InputKey {
                    sport: k.sport ^ p.wrapping_mul(0x9e37),
                    dport: k.dport.wrapping_add(p),
                    ..*k
                };
                if let Some(r) = f.route_input_replay(m, &other) {
                    prop_assert_eq!(r, f.route_input(&other), "{:?} from {:?}", other, k);
                }
            }
        }
    }
}

#[test]
fn the_common_case_answers_as_the_single_call() {
    let (f, d0, d1) = super::input::routed();
    let keys = [
        ("198.51.100.7", "10.0.0.5", d0),
        ("198.51.100.7", "10.9.0.1", d0),
        ("2001:db8:77::1", "2001:db8::5", d0),
        ("2001:db8:77::1", "2001:db8:9::5", d1),
    ]
    .map(|(d, s, iif)| super::input::key(d, s, iif));
    let mut out = [Err(InputDrop::NoRoute); 4];
    f.route_input_batch(&keys, &mut out);
    let fwd = |r: &Result<InputRoute, InputDrop>| match r {
        Ok(InputRoute::Forward(r)) => Some((r.oif, r.redirect)),
        _ => None,
    };
    assert_eq!(fwd(&out[0]), Some((d1, false)));
    assert_eq!(out[1], Err(InputDrop::LocalSource));
    assert_eq!(fwd(&out[2]), Some((d1, false)));
    assert_eq!(fwd(&out[3]), Some((d1, true)));
    for (k, r) in keys.iter().zip(out) {
        assert_eq!(r, f.route_input(k));
    }
}
