//! The dst contract (`dst`): a holder's copy of a forwarding result stays current through
//! changes it does not depend on and stops being current at the first one it does.

use super::*;

/// d0 (10.0.0.1/24) and d1 (10.9.0.1/24) up; 198.51.100.0/24 via 10.0.0.2 (d0) and
/// 203.0.113.0/24 via 10.9.0.2 (d1).
fn two_routes() -> (Fib, u32, u32) {
    let (mut f, d0, d1) = two_links();
    f.route_new(&rt("198.51.100.0/24", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    f.route_new(&rt("203.0.113.0/24", Some("10.9.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    (f, d0, d1)
}

fn out4(f: &Fib, a: &str) -> Result<Dst, LookupError> {
    let IpAddr::V4(a) = ip(a) else {
        unreachable!("an IPv4 literal")
    };
    let flow = Flow {
        dst: u32::from(a) as u128,
        ..Flow::empty()
    };
    f.lookup_output(Family::Inet, &flow).copied()
}

fn set_mtu(f: &mut Fib, idx: u32, mtu: u32) {
    let l = Link {
        ifindex: idx,
        mtu: Some(mtu),
        ..Default::default()
    };
    f.link_new(&l, ReqFlags::NONE).unwrap();
}

#[test]
fn a_copy_survives_changes_elsewhere() {
    let (mut f, _d0, d1) = two_routes();
    let held = out4(&f, "198.51.100.7").unwrap();
    assert!(f.dst_is_current(&held));
    let gen = f.gen();

    set_mtu(&mut f, d1, 1400);
    set_carrier(&mut f, d1, false);
    set_carrier(&mut f, d1, true);
    set_up(&mut f, d1, false);
    set_up(&mut f, d1, true);
    f.set_settings(Settings {
        rp_filter: 2,
        ..f.settings().clone()
    });
    f.route_new(&rt("192.0.2.0/24", Some("10.9.0.3"), 0), ReqFlags::ADD)
        .unwrap();

    assert_ne!(f.gen(), gen, "the FIB changed");
    assert!(f.dst_is_current(&held), "nothing held depends on d1");
    assert_eq!(out4(&f, "198.51.100.7"), Ok(held));
}

#[test]
fn an_address_change_keeps_results_it_does_not_move() {
    let (mut f, _d0, d1) = two_routes();
    let held = out4(&f, "198.51.100.7").unwrap();
    // Every IPv4 result is revisited (source selection may look at any link); this one's
    // preferred source is still d0's address.
    add_addr(&mut f, d1, "10.10.0.1/24").unwrap();
    assert!(f.dst_is_current(&held));
    assert_eq!(held.prefsrc, Some(ip("10.0.0.1")));
}

#[test]
fn a_change_it_depends_on_makes_a_copy_stale() {
    let (mut f, d0, _d1) = two_routes();

    let held = out4(&f, "198.51.100.7").unwrap();
    set_mtu(&mut f, d0, 1400);
    assert!(!f.dst_is_current(&held), "the MTU moved");
    let now = out4(&f, "198.51.100.7").unwrap();
    assert_eq!((now.mtu, f.dst_is_current(&now)), (1400, true));

    set_carrier(&mut f, d0, false);
    assert!(!f.dst_is_current(&now), "the next hop is LINKDOWN");
    let down = out4(&f, "198.51.100.7").unwrap();
    assert_ne!(down.nh_flags & nh_flags::LINKDOWN, 0);
    set_carrier(&mut f, d0, true);
    let back = out4(&f, "198.51.100.7").unwrap();
    assert!(
        !f.dst_is_current(&now) && f.dst_is_current(&back),
        "a result that comes back is a new generation: an old copy never turns current again"
    );

    set_up(&mut f, d0, false);
    assert!(!f.dst_is_current(&back), "the route is gone with its link");
    assert_eq!(out4(&f, "198.51.100.7"), Err(LookupError::NoRoute));
}

#[test]
fn freed_and_reused_slots_do_not_revive_copies() {
    let (mut f, _d0, _d1) = two_routes();
    let held = out4(&f, "198.51.100.7").unwrap();
    f.route_del(&rt("198.51.100.0/24", Some("10.0.0.2"), 0))
        .unwrap();
    assert!(!f.dst_is_current(&held));
    // The same route again: an equal result in what may be the same slot, yet a new
    // generation.
    f.route_new(&rt("198.51.100.0/24", Some("10.0.0.2"), 0), ReqFlags::ADD)
        .unwrap();
    let again = out4(&f, "198.51.100.7").unwrap();
    assert!(!f.dst_is_current(&held) && f.dst_is_current(&again));
    assert_ne!(held.gen, again.gen);
}

#[test]
fn compiled_answers_follow_next_hops_a_link_event_kills() {
    // A multipath route with one next hop on each link: d0 going down kills one of them,
    // which the compiled answer must see without every key being recompiled.
    let (mut f, d0, d1) = two_links();
    let mut r = rt("198.51.100.0/24", None, 0);
    r.scope = 0;
    r.multipath = vec![
        NextHop {
            gateway: Some(ip("10.0.0.2")),
            oif: d0,
            hops: 0,
            flags: 0,
            encap: None,
        },
        NextHop {
            gateway: Some(ip("10.9.0.2")),
            oif: d1,
            hops: 0,
            flags: 0,
            encap: None,
        },
    ];
    f.route_new(&r, ReqFlags::ADD).unwrap();
    f.route_new(&rt("198.51.0.0/16", Some("10.9.0.3"), 0), ReqFlags::ADD)
        .unwrap();
    set_up(&mut f, d0, false);
    for host in 1..=64 {
        let d = out4(&f, &format!("198.51.100.{host}")).unwrap();
        assert_eq!((d.oif, d.gateway), (d1, Some(ip("10.9.0.2"))));
    }
    set_up(&mut f, d0, true);
    let oifs: std::collections::BTreeSet<u32> = (1..=64)
        .map(|host| out4(&f, &format!("198.51.100.{host}")).unwrap().oif)
        .collect();
    assert_eq!(
        oifs,
        [d0, d1].into(),
        "fib_sync_up revives the next hop on d0"
    );
}
