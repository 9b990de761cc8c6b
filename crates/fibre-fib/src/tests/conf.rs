//! Per-link settings (`conf`): the commands of a namespace experiment (kernel 6.18, iproute2
//! 6.1, settings written with `sysctl -w`) and what the kernel answered. They stay here, not
//! in `tests/scenarios/`, because a scenario is an `ip -batch` file and can not write a sysctl
//! between its commands.

use super::*;

fn via(f: &Fib, dst: &str) -> Option<IpAddr> {
    get(f, dst).unwrap().nexthop.gateway
}

fn input(f: &Fib, dst: &str, src: &str, iif: u32) -> Result<Route, RtError> {
    f.route_get(&RouteQuery {
        src: Some(ip(src)),
        iif: Some(iif),
        ..RouteQuery::to(ip(dst))
    })
}

/// `10.77.0.0/16 via 10.0.0.2 dev d0` and `via 10.9.0.2 dev d1 metric 10` (and the IPv6
/// pair), then `carrier off` on d0.
fn linkdown_d0() -> (Fib, u32, u32) {
    let (mut f, d0, d1) = two_links();
    f.route_new(&rt("10.77.0.0/16", Some("10.0.0.2"), d0), ReqFlags::ADD)
        .unwrap();
    let mut r = rt("10.77.0.0/16", Some("10.9.0.2"), d1);
    r.priority = Some(10);
    f.route_new(&r, ReqFlags::ADD).unwrap();
    let mut m = rt("10.78.0.0/16", None, 0);
    m.scope = scope::UNIVERSE;
    m.multipath = vec![
        NextHop {
            gateway: Some(ip("10.0.0.2")),
            oif: d0,
            ..Default::default()
        },
        NextHop {
            gateway: Some(ip("10.9.0.2")),
            oif: d1,
            ..Default::default()
        },
    ];
    f.route_new(&m, ReqFlags::ADD).unwrap();
    f.route_new(
        &rt("2001:db8:77::/48", Some("2001:db8::2"), d0),
        ReqFlags::ADD,
    )
    .unwrap();
    let mut r6 = rt("2001:db8:77::/48", Some("2001:db8:9::2"), d1);
    r6.priority = Some(2000);
    f.route_new(&r6, ReqFlags::ADD).unwrap();
    set_carrier(&mut f, d0, false);
    (f, d0, d1)
}

#[test]
fn ignore_routes_with_linkdown_skips_and_shows_dead() {
    let (mut f, d0, _) = linkdown_d0();
    assert_eq!(via(&f, "10.77.1.1"), Some(ip("10.0.0.2")));
    assert_eq!(via(&f, "2001:db8:77::1"), Some(ip("2001:db8::2")));
    f.set_conf(ConfTarget::Dev(d0), ConfKey::IgnoreLinkdown4, 1)
        .unwrap();
    f.set_conf(ConfTarget::Dev(d0), ConfKey::IgnoreLinkdown6, 1)
        .unwrap();
    assert_eq!(via(&f, "10.77.1.1"), Some(ip("10.9.0.2")));
    assert_eq!(via(&f, "2001:db8:77::1"), Some(ip("2001:db8:9::2")));
    // `route show`: "10.77.0.0/16 via 10.0.0.2 dev d0 dead linkdown", and the multipath
    // route's d0 leg "dead linkdown".
    let routes = f.routes(Some(Family::Inet));
    assert!(
        routes.iter().any(|r| r.dst == pfx("10.77.0.0/16")
            && r.nexthop.gateway == Some(ip("10.0.0.2"))
            && r.flags & nh_flags::DEAD != 0),
        "{routes:?}"
    );
    let mp = f
        .routes(Some(Family::Inet))
        .into_iter()
        .find(|r| r.dst.addr == ip("10.78.0.0"))
        .unwrap();
    assert_ne!(mp.multipath[0].flags & nh_flags::DEAD, 0);
    assert_eq!(mp.multipath[1].flags & nh_flags::DEAD, 0);
    // An input lookup whose reverse path is the ignored route: no route back.
    assert_eq!(
        input(&f, "10.0.0.7", "10.9.0.5", 3).unwrap_err().errno,
        Errno::ENETUNREACH
    );
    // IPv6 `all` is written through to every link: 0 there brings d0's route back.
    f.set_conf(ConfTarget::All, ConfKey::IgnoreLinkdown6, 0)
        .unwrap();
    assert_eq!(via(&f, "2001:db8:77::1"), Some(ip("2001:db8::2")));
    assert_eq!(f.conf(ConfTarget::Dev(d0), ConfKey::IgnoreLinkdown6), Ok(0));
    // IPv4 reads all || link.
    f.set_conf(ConfTarget::Dev(d0), ConfKey::IgnoreLinkdown4, 0)
        .unwrap();
    f.set_conf(ConfTarget::All, ConfKey::IgnoreLinkdown4, 1)
        .unwrap();
    assert_eq!(via(&f, "10.77.1.1"), Some(ip("10.9.0.2")));
}

#[test]
fn rp_filter_is_the_larger_of_all_and_the_input_link() {
    let (mut f, d0, d1) = linkdown_d0();
    f.set_conf(ConfTarget::Dev(d0), ConfKey::IgnoreLinkdown4, 1)
        .unwrap();
    // From 10.0.0.5 (d0's subnet) arriving on d1.
    assert!(input(&f, "10.9.0.7", "10.0.0.5", d1).is_ok());
    f.set_conf(ConfTarget::Dev(d1), ConfKey::RpFilter, 1)
        .unwrap();
    let e = input(&f, "10.9.0.7", "10.0.0.5", d1).unwrap_err();
    assert_eq!(e.errno, Errno::EINVAL);
    // Loose: the way back to 10.0.0.5 is d0's ignored linkdown route, so none.
    f.set_conf(ConfTarget::Dev(d1), ConfKey::RpFilter, 2)
        .unwrap();
    assert_eq!(
        input(&f, "10.9.0.7", "10.0.0.5", d1).unwrap_err().errno,
        Errno::EINVAL
    );
    f.set_conf(ConfTarget::Dev(d1), ConfKey::RpFilter, 0)
        .unwrap();
    f.set_conf(ConfTarget::All, ConfKey::RpFilter, 1).unwrap();
    assert_eq!(
        input(&f, "10.9.0.7", "10.0.0.5", d1).unwrap_err().errno,
        Errno::EINVAL
    );
    assert_eq!(
        f.set_conf(ConfTarget::Dev(99), ConfKey::RpFilter, 1)
            .unwrap_err()
            .errno,
        Errno::ENODEV
    );
}

/// A link created after a write to `default` starts from it; a later write to `default`
/// reaches the links that never had their own value written (IPv4).
#[test]
fn links_follow_default_until_written() {
    let mut f = Fib::default();
    f.set_conf(ConfTarget::Default, ConfKey::RpFilter, 2)
        .unwrap();
    let a = add_link(&mut f, "a");
    let b = add_link(&mut f, "b");
    assert_eq!(f.conf(ConfTarget::Dev(a), ConfKey::RpFilter), Ok(2));
    f.set_conf(ConfTarget::Dev(b), ConfKey::RpFilter, 0)
        .unwrap();
    f.set_conf(ConfTarget::Default, ConfKey::RpFilter, 1)
        .unwrap();
    assert_eq!(f.conf(ConfTarget::Dev(a), ConfKey::RpFilter), Ok(1));
    assert_eq!(f.conf(ConfTarget::Dev(b), ConfKey::RpFilter), Ok(0));
}

#[test]
fn seg6_enabled_takes_both_all_and_the_link_and_seg6_flowlabel_any_int() {
    let (mut f, d0, d1) = two_links();
    let k = ConfKey::parse(Family::Inet6, "seg6_enabled").unwrap();
    assert!(!f.seg6_enabled(d0), "off by default, as in the kernel");
    f.set_conf(ConfTarget::Dev(d0), k, 1).unwrap();
    assert!(!f.seg6_enabled(d0), "all still 0");
    f.set_conf(ConfTarget::All, k, 1).unwrap();
    assert!(f.seg6_enabled(d0));
    // addrconf keeps `all` to itself: d1 was never written.
    assert!(!f.seg6_enabled(d1));
    assert_eq!(f.conf(ConfTarget::Dev(d1), k), Ok(0));
    assert_eq!(f.conf(ConfTarget::All, k), Ok(1));
    let l = ConfKey::parse_global(Family::Inet6, "seg6_flowlabel").unwrap();
    assert_eq!(f.conf(ConfTarget::All, l), Ok(0));
    f.set_conf(ConfTarget::All, l, -1).unwrap();
    assert_eq!(f.settings().seg6_flowlabel, -1);
    assert!(f.set_conf(ConfTarget::Dev(d0), l, 1).is_err());
}
