//! The input route decision (`input`): each outcome of the kernel's input path, and
//! `route get ... iif` agreeing with [`Fib::route_input`] over random configurations.

use super::*;
use proptest::prelude::*;

pub(super) fn key(dst: &str, src: &str, iif: u32) -> InputKey {
    InputKey {
        dst: ip(dst),
        src: ip(src),
        iif,
        tos: 0,
        mark: 0,
        proto: 17,
        sport: 0,
        dport: 0,
        flowlabel: 0,
    }
}

fn input(f: &Fib, dst: &str, src: &str, iif: u32) -> Result<InputRoute, InputDrop> {
    f.route_input(&key(dst, src, iif))
}

fn forward(f: &Fib, dst: &str, src: &str, iif: u32) -> ForwardRoute {
    match input(f, dst, src, iif) {
        Ok(InputRoute::Forward(r)) => r,
        other => panic!("{dst} from {src}: {other:?}, not forwarded"),
    }
}

/// `two_links` with 198.51.100.0/24 via 10.9.0.2 and 2001:db8:77::/48 via 2001:db8:9::2
/// (both on d1), and one route of each reject type.
pub(super) fn routed() -> (Fib, u32, u32) {
    let (mut f, d0, d1) = two_links();
    f.route_new(&rt("198.51.100.0/24", Some("10.9.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    f.route_new(
        &rt("2001:db8:77::/48", Some("2001:db8:9::2"), 0),
        ReqFlags::ADD,
    )
    .unwrap();
    for (p, t) in [
        ("192.0.2.0/26", RouteType::Unreachable),
        ("192.0.2.64/26", RouteType::Prohibit),
        ("192.0.2.128/26", RouteType::Blackhole),
        ("2001:db8:e1::/48", RouteType::Unreachable),
        ("2001:db8:e2::/48", RouteType::Prohibit),
        ("2001:db8:e3::/48", RouteType::Blackhole),
    ] {
        let mut r = rt(p, None, 0);
        r.rtype = t;
        r.scope = scope::UNIVERSE;
        f.route_new(&r, ReqFlags::ADD).unwrap();
    }
    (f, d0, d1)
}

#[test]
fn forwards_through_the_gateway_with_its_dst() {
    let (f, d0, d1) = routed();
    let r = forward(&f, "198.51.100.7", "10.0.0.5", d0);
    assert_eq!(
        (r.oif, r.gateway, r.mtu, r.redirect, r.table),
        (d1, Some(ip("10.9.0.2")), 1500, false, table::MAIN)
    );
    let d = f.dst_of(r.dst).expect("live");
    assert_eq!(
        (d.oif, d.gateway, d.gen),
        (d1, Some(ip("10.9.0.2")), r.dst.gen())
    );
    assert!(f.dst_ref_is_current(r.dst));
    let r6 = forward(&f, "2001:db8:77::1", "2001:db8::5", d0);
    assert_eq!((r6.oif, r6.gateway), (d1, Some(ip("2001:db8:9::2"))));
}

#[test]
fn on_link_destinations_have_no_gateway() {
    let (f, d0, d1) = routed();
    let r = forward(&f, "10.9.0.7", "10.0.0.5", d0);
    assert_eq!((r.oif, r.gateway), (d1, None));
    let r6 = forward(&f, "2001:db8:9::7", "2001:db8::5", d0);
    assert_eq!((r6.oif, r6.gateway), (d1, None));
}

#[test]
fn a_packet_leaving_by_its_input_link_asks_for_a_redirect() {
    let (mut f, d0, _) = routed();
    f.route_new(&rt("203.0.113.0/24", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    assert!(forward(&f, "203.0.113.1", "10.0.0.5", d0).redirect);
    // A source not on the input link gets no redirect (it is not directly connected).
    f.set_settings(Settings {
        rp_filter: 2,
        ..f.settings().clone()
    });
    assert!(!forward(&f, "203.0.113.1", "198.51.100.9", d0).redirect);
    assert!(forward(&f, "2001:db8::9", "2001:db8::5", d0).redirect);
}

#[test]
fn local_and_broadcast_destinations_are_delivered_here() {
    let (f, d0, d1) = routed();
    assert_eq!(
        input(&f, "10.9.0.1", "10.0.0.5", d0),
        Ok(InputRoute::Local {
            table: table::LOCAL
        })
    );
    assert_eq!(
        input(&f, "10.0.0.255", "10.0.0.5", d0),
        Ok(InputRoute::Broadcast {
            table: Some(table::LOCAL)
        })
    );
    assert_eq!(
        input(&f, "255.255.255.255", "10.0.0.5", d0),
        Ok(InputRoute::Broadcast { table: None })
    );
    assert_eq!(
        input(&f, "0.0.0.0", "0.0.0.0", d1),
        Ok(InputRoute::Broadcast { table: None })
    );
    assert_eq!(
        input(&f, "2001:db8:9::1", "2001:db8::5", d0),
        Ok(InputRoute::Local {
            table: table::LOCAL
        })
    );
}

#[test]
fn ipv6_multicast_is_delivered_for_the_groups_the_link_joined() {
    let (mut f, d0, _) = routed();
    let local = Ok(InputRoute::Local {
        table: table::LOCAL,
    });
    assert_eq!(input(&f, "ff02::1", "fe80::5", d0), local);
    assert_eq!(input(&f, "ff02::2", "fe80::5", d0), local);
    // The solicited-node group of 2001:db8::1, d0's address, and of no address of d0.
    assert_eq!(input(&f, "ff02::1:ff00:1", "fe80::5", d0), local);
    assert_eq!(
        input(&f, "ff02::1:ff00:77", "fe80::5", d0),
        Err(InputDrop::Multicast)
    );
    assert_eq!(
        input(&f, "ff0e::1234", "2001:db8::5", d0),
        Err(InputDrop::Multicast)
    );
    f.set_settings(Settings {
        ipv6_forwarding: false,
        ..f.settings().clone()
    });
    assert_eq!(
        input(&f, "ff02::2", "fe80::5", d0),
        Err(InputDrop::Multicast),
        "only routers join all-routers"
    );
}

#[test]
fn martians_are_dropped_before_any_lookup() {
    let (f, d0, _) = routed();
    for (dst, src, why) in [
        ("198.51.100.7", "224.0.0.5", InputDrop::MartianSource),
        ("198.51.100.7", "255.255.255.255", InputDrop::MartianSource),
        ("198.51.100.7", "0.0.0.0", InputDrop::MartianSource),
        ("198.51.100.7", "127.0.0.1", InputDrop::MartianSource),
        ("0.0.0.0", "10.0.0.5", InputDrop::MartianDestination),
        ("127.0.0.1", "10.0.0.5", InputDrop::MartianDestination),
        ("224.0.0.1", "10.0.0.5", InputDrop::Multicast),
        ("198.51.100.7", "10.9.0.1", InputDrop::LocalSource),
    ] {
        assert_eq!(input(&f, dst, src, d0), Err(why), "{dst} from {src}");
        let get = f.route_get(&RouteQuery {
            src: Some(ip(src)),
            iif: Some(d0),
            ..RouteQuery::to(ip(dst))
        });
        assert_eq!(get.map_err(|e| e.errno), Err(Errno::EINVAL));
    }
}

#[test]
fn reject_routes_and_missing_routes_say_which_error() {
    let (mut f, d0, _) = routed();
    for (dst, src, why) in [
        ("192.0.2.1", "10.0.0.5", InputDrop::Unreachable),
        ("192.0.2.65", "10.0.0.5", InputDrop::Prohibit),
        ("192.0.2.129", "10.0.0.5", InputDrop::Blackhole),
        ("203.0.113.1", "10.0.0.5", InputDrop::NoRoute),
        ("2001:db8:e1::1", "2001:db8::5", InputDrop::Unreachable),
        ("2001:db8:e2::1", "2001:db8::5", InputDrop::Prohibit),
        ("2001:db8:e3::1", "2001:db8::5", InputDrop::Blackhole),
        ("2001:db8:5::1", "2001:db8::5", InputDrop::NoRoute),
    ] {
        assert_eq!(input(&f, dst, src, d0), Err(why), "{dst}");
    }
    // Forwarding off: a failed IPv4 lookup of any kind is EHOSTUNREACH, and ip_error sends
    // nothing; IPv6 reject routes keep their own error.
    f.set_settings(Settings {
        ipv4_forwarding: false,
        ipv6_forwarding: false,
        ..f.settings().clone()
    });
    for dst in ["192.0.2.65", "203.0.113.1", "198.51.100.7"] {
        assert_eq!(
            input(&f, dst, "10.0.0.5", d0),
            Err(InputDrop::ForwardingOff),
            "{dst}"
        );
    }
    assert_eq!(
        input(&f, "2001:db8:77::1", "2001:db8::5", d0),
        Err(InputDrop::ForwardingOff)
    );
    assert_eq!(
        input(&f, "2001:db8:e2::1", "2001:db8::5", d0),
        Err(InputDrop::Prohibit)
    );
    assert_eq!(
        input(&f, "10.9.0.1", "10.0.0.5", d0),
        Ok(InputRoute::Local {
            table: table::LOCAL
        })
    );
}

#[test]
fn strict_reverse_path_filtering_wants_the_route_back_through_the_input_link() {
    let (mut f, d0, d1) = routed();
    f.set_settings(Settings {
        rp_filter: 1,
        ..f.settings().clone()
    });
    // 198.51.100.0/24 is reached through d1: a packet from there on d0 fails.
    assert_eq!(
        input(&f, "10.9.0.7", "198.51.100.9", d0),
        Err(InputDrop::ReversePath)
    );
    assert_eq!(forward(&f, "10.0.0.7", "198.51.100.9", d1).oif, d0);
    // Loose mode takes any route back.
    f.set_settings(Settings {
        rp_filter: 2,
        ..f.settings().clone()
    });
    assert_eq!(forward(&f, "10.9.0.7", "198.51.100.9", d0).oif, d1);
    // ... but not none.
    assert_eq!(
        input(&f, "10.9.0.7", "203.0.113.9", d0),
        Err(InputDrop::ReversePath)
    );
}

#[test]
fn ipv6_forwarding_checks_the_link_mtu_unless_the_route_locks_its_own() {
    let (mut f, d0, d1) = routed();
    let mut r = rt("2001:db8:88::/48", Some("2001:db8:9::2"), d1);
    r.metrics.mtu = Some(1400);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    let mut r4 = rt("198.18.0.0/16", Some("10.9.0.2"), d1);
    r4.metrics.mtu = Some(1400);
    f.route_new(&r4, ReqFlags::ADD).unwrap();
    assert_eq!(forward(&f, "2001:db8:88::1", "2001:db8::5", d0).mtu, 1500);
    assert_eq!(forward(&f, "198.18.0.1", "10.0.0.5", d0).mtu, 1400);
    r.metrics.lock = 1 << 2;
    f.route_new(&r, ReqFlags::REPLACE).unwrap();
    assert_eq!(forward(&f, "2001:db8:88::1", "2001:db8::5", d0).mtu, 1400);
}

#[test]
fn a_handle_stays_current_until_its_next_hop_changes() {
    let (mut f, d0, d1) = routed();
    let held = forward(&f, "198.51.100.7", "10.0.0.5", d0).dst;
    f.route_new(&rt("203.0.113.0/24", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    assert!(f.dst_ref_is_current(held));
    assert!(f.forward_hops().any(|h| h.dst == held));
    f.link_new(
        &Link {
            ifindex: d1,
            mtu: Some(1400),
            ..Default::default()
        },
        ReqFlags::NONE,
    )
    .unwrap();
    assert!(!f.dst_ref_is_current(held));
    let now = forward(&f, "198.51.100.7", "10.0.0.5", d0);
    assert_eq!(
        (now.mtu, now.dst.slot(), now.dst.hop()),
        (1400, held.slot(), held.hop())
    );
    assert!(f
        .forward_hops()
        .any(|h| h.dst == now.dst && h.gateway == now.gateway));
}

/// What `route get ... iif` says about a packet, in [`InputRoute`]'s terms.
fn as_input(r: &Route) -> (RouteType, u32, Option<IpAddr>, bool) {
    (
        r.rtype,
        r.nexthop.oif,
        r.nexthop.gateway,
        r.flags & rtcf::DOREDIRECT != 0,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Over random routes, rules, reverse-path and forwarding settings, `route get ... iif`
    /// answers for a packet what `route_input` decides for it.
    #[test]
    fn route_get_agrees_with_route_input(
        routes in prop::collection::vec((0u8..8, 0u8..4, 0u8..6), 0..12),
        rpf in 0u8..3,
        fwd in any::<bool>(),
        rule in any::<bool>(),
        packets in prop::collection::vec((0u8..10, 0u8..10, 0u8..2, any::<bool>()), 40),
    ) {
        let (mut f, d0, d1) = two_links();
        let nets4 = ["198.51.100.0/24", "198.51.0.0/16", "0.0.0.0/0", "10.9.0.0/25",
            "203.0.113.0/24", "203.0.113.128/25", "192.0.2.0/24", "10.0.0.128/25"];
        let nets6 = ["2001:db8:77::/48", "2001:db8:77::/64", "::/0", "2001:db8:9::/65",
            "2001:db8:88::/48", "2001:db8:88:1::/64", "2001:db8:e::/48", "2001:db8::/66"];
        for &(n, t, via) in &routes {
            for (nets, gws) in [(&nets4, ["10.0.0.2", "10.9.0.2"]),
                (&nets6, ["2001:db8::2", "2001:db8:9::2"])] {
                let mut r = match via {
                    0 | 1 => rt(nets[n as usize], Some(gws[via as usize]), 0),
                    2 => rt(nets[n as usize], None, d0),
                    _ => rt(nets[n as usize], None, d1),
                };
                r.rtype = [RouteType::Unicast, RouteType::Unreachable, RouteType::Prohibit,
                    RouteType::Blackhole][t as usize];
                if r.rtype != RouteType::Unicast {
                    r.nexthop = NextHop::default();
                    r.scope = scope::UNIVERSE;
                }
                let _ = f.route_new(&r, ReqFlags::APPEND);
            }
        }
        if rule {
            let mut r = Rule::new(Family::Inet, table::MAIN);
            r.priority = Some(100);
            r.iifname = Some("d1".into());
            f.rule_new(&r, ReqFlags::ADD).unwrap();
        }
        f.set_settings(Settings {
            rp_filter: rpf,
            ipv4_forwarding: fwd,
            ipv6_forwarding: fwd,
            ..f.settings().clone()
        });
        let hosts4 = ["198.51.100.7", "198.51.7.7", "10.9.0.7", "10.9.0.200", "203.0.113.7",
            "203.0.113.200", "192.0.2.9", "10.0.0.7", "10.0.0.200", "10.9.0.1"];
        let hosts6 = ["2001:db8:77::7", "2001:db8:77:1::7", "2001:db8:9::7", "2001:db8:9::8000:0:0:7",
            "2001:db8:88::7", "2001:db8:88:1::7", "2001:db8:e::7", "2001:db8::7",
            "2001:db8::3000:0:0:7", "2001:db8:9::1"];
        for &(d, s, iif, v6) in &packets {
            let hosts = if v6 { &hosts6 } else { &hosts4 };
            let iif = [d0, d1][iif as usize];
            let k = key(hosts[d as usize], hosts[s as usize], iif);
            let got = f.route_input(&k);
            // The packet's protocol too: IPv6's multipath hash covers it even under
            // policy 0, and `route get` without `ipproto` hashes protocol 0.
            let get = f.route_get(&RouteQuery {
                src: Some(k.src),
                iif: Some(iif),
                ipproto: Some(k.proto),
                ..RouteQuery::to(k.dst)
            });
            match (got, get) {
                (Err(drop), Err(e)) => prop_assert_eq!(drop.errno(), e.errno),
                (Ok(InputRoute::Forward(r)), Ok(a)) => {
                    prop_assert_eq!(
                        (RouteType::Unicast, r.oif, r.gateway, r.redirect && !v6),
                        as_input(&a)
                    );
                    prop_assert!(f.dst_ref_is_current(r.dst));
                }
                (Ok(InputRoute::Local { table }), Ok(a)) => {
                    prop_assert_eq!(a.rtype, RouteType::Local);
                    prop_assert_eq!(a.table, if v6 || rule { table } else { table::MAIN });
                }
                (Ok(InputRoute::Broadcast { .. }), Ok(a)) => {
                    prop_assert_eq!(a.rtype, RouteType::Broadcast)
                }
                (Err(InputDrop::ForwardingOff), Ok(a)) if v6 => {
                    prop_assert_eq!(a.rtype, RouteType::Unicast)
                }
                (got, get) => prop_assert!(false, "{:?}: {:?} against {:?}", k, got, get),
            }
        }
    }
}
