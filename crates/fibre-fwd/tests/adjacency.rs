//! Adjacencies as the FIB's links, neighbour entries and next hops make them, and updates
//! that reach only the objects whose dependencies changed.

mod common;

use common::*;
use fibre_fib::types::nud;
use fibre_fib::*;
use fibre_fwd::*;

const MAC0: [u8; 6] = [0x02, 0, 0, 0, 0, 0x10];
const MAC1: [u8; 6] = [0x02, 0, 0, 0, 0, 0x11];
const GW_A: [u8; 6] = [0x0a, 0, 0, 0, 0, 0x02];
const GW_B: [u8; 6] = [0x0a, 0, 0, 0, 0, 0x03];

/// d0 (10.0.0.1/24, 2001:db8::1/64) where packets come in, d1 (10.9.0.1/24, 2001:db8:9::1/64)
/// where they leave; 198.51.100.0/24 via 10.9.0.2, 203.0.113.0/24 via 10.9.0.3,
/// 2001:db8:77::/48 via 2001:db8:9::2; 10.9.0.2 and 2001:db8:9::2 are permanent neighbours.
fn fib() -> (Fib, u32, u32) {
    let mut f = Fib::default();
    let d0 = link(&mut f, "d0", MAC0);
    let d1 = link(&mut f, "d1", MAC1);
    addr(&mut f, d0, "10.0.0.1", 24);
    addr(&mut f, d0, "2001:db8::1", 64);
    addr(&mut f, d1, "10.9.0.1", 24);
    addr(&mut f, d1, "2001:db8:9::1", 64);
    for r in [
        route("198.51.100.0", 24, &["10.9.0.2"]),
        route("203.0.113.0", 24, &["10.9.0.3"]),
        route("2001:db8:77::", 48, &["2001:db8:9::2"]),
    ] {
        f.route_new(&r, ReqFlags::ADD).expect("route");
    }
    neigh(&mut f, d1, "10.9.0.2", Some(GW_A), nud::PERMANENT);
    neigh(&mut f, d1, "2001:db8:9::2", Some(GW_A), nud::PERMANENT);
    (f, d0, d1)
}

fn rewrite(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> [u8; REWRITE_LEN] {
    let mut r = [0; REWRITE_LEN];
    r[..6].copy_from_slice(&dst);
    r[6..12].copy_from_slice(&src);
    r[12..].copy_from_slice(&ethertype.to_be_bytes());
    r
}

/// The adjacency a packet reaches, as a worker finds it.
fn reached(f: &Fib, w: &FwdWriter, k: &InputKey) -> (AdjIdx, Adjacency) {
    let t = w.latest();
    let r = forward(f, k);
    let i = t.adjacency(&r, k.dst).expect("compiled");
    (i, *t.adj(i))
}

#[test]
fn a_gateway_reaches_its_permanent_neighbours_rewrite() {
    let (f, d0, d1) = fib();
    let (w, _) = FwdWriter::new(&f);
    let t = w.latest();
    let (i, a) = reached(&f, &w, &packet("198.51.100.7", "10.0.0.5", d0));
    assert_eq!(a.rewrite, rewrite(GW_A, MAC1, ETHERTYPE_IPV4));
    assert_eq!(
        (a.state, a.mtu, a.neighbour),
        (NeighState::Resolved, 1500, Some(ip("10.9.0.2")))
    );
    assert_eq!(t.link(a.link).ifindex, d1);
    assert_eq!(t.neighbour(d1, ip("10.9.0.2"), Family::Inet), Some(i));
    let (_, a6) = reached(&f, &w, &packet("2001:db8:77::7", "2001:db8::5", d0));
    assert_eq!(a6.rewrite, rewrite(GW_A, MAC1, ETHERTYPE_IPV6));
}

#[test]
fn a_gateway_without_an_entry_takes_the_noarp_links_own_address() {
    // dummy links are IFF_NOARP: the kernel's constructor gives a neighbour the link's address.
    let (f, d0, _) = fib();
    let (w, _) = FwdWriter::new(&f);
    let (_, a) = reached(&f, &w, &packet("203.0.113.7", "10.0.0.5", d0));
    assert_eq!(a.rewrite, rewrite(MAC1, MAC1, ETHERTYPE_IPV4));
    assert_eq!(a.state, NeighState::Resolved);
    assert!(w.latest().link(a.link).noarp);
}

#[test]
fn on_link_destinations_use_their_entry_or_the_links_glean_adjacency() {
    let (mut f, d0, d1) = fib();
    let (mut w, _) = FwdWriter::new(&f);
    let k = packet("10.9.0.7", "10.0.0.5", d0);
    let (i, a) = reached(&f, &w, &k);
    assert_eq!(a.neighbour, None);
    let l = w.latest().link_index(d1).expect("d1");
    assert_eq!(w.latest().link(l).glean[0], i);
    neigh(&mut f, d1, "10.9.0.7", Some(GW_B), nud::REACHABLE);
    w.update(&f);
    let (_, a) = reached(&f, &w, &k);
    assert_eq!(
        (a.neighbour, a.rewrite),
        (Some(ip("10.9.0.7")), rewrite(GW_B, MAC1, ETHERTYPE_IPV4))
    );
    neigh(&mut f, d1, "10.9.0.7", None, nud::FAILED);
    w.update(&f);
    assert_eq!(reached(&f, &w, &k).1.state, NeighState::Failed);
    // Being resolved, even on a NOARP link: the kernel queues the packet.
    neigh(&mut f, d1, "10.9.0.7", None, nud::INCOMPLETE);
    w.update(&f);
    assert_eq!(reached(&f, &w, &k).1.state, NeighState::Incomplete);
    neigh_del(&mut f, d1, "10.9.0.7");
    w.update(&f);
    assert_eq!(reached(&f, &w, &k).0, i, "back to glean");
}

#[test]
fn an_update_reaches_only_what_changed() {
    let (mut f, d0, d1) = fib();
    let (mut w, _) = FwdWriter::new(&f);
    assert_eq!(w.update(&f), 0, "nothing changed");
    let other = reached(&f, &w, &packet("2001:db8:77::7", "2001:db8::5", d0));
    let k = packet("198.51.100.7", "10.0.0.5", d0);
    let (i, _) = reached(&f, &w, &k);

    neigh(&mut f, d1, "10.9.0.2", Some(GW_B), nud::PERMANENT);
    assert_eq!(w.update(&f), 1, "one adjacency's rewrite");
    let (j, a) = reached(&f, &w, &k);
    assert_eq!((j, a.rewrite), (i, rewrite(GW_B, MAC1, ETHERTYPE_IPV4)));
    assert_eq!(
        reached(&f, &w, &packet("2001:db8:77::7", "2001:db8::5", d0)),
        other
    );

    // A route with the attributes of 198.51.100.0/24 shares its route info, so its next hop:
    // nothing to compile.
    f.route_new(&route("192.0.2.0", 24, &["10.9.0.2"]), ReqFlags::ADD)
        .expect("route");
    assert_eq!(w.update(&f), 0);
    assert_eq!(reached(&f, &w, &packet("192.0.2.1", "10.0.0.5", d0)).0, i);

    // The MTU of d1 reaches d1's adjacencies and the results of next hops on d1.
    set_link(
        &mut f,
        d1,
        Link {
            mtu: Some(1400),
            ..Default::default()
        },
    );
    w.update(&f);
    assert_eq!(reached(&f, &w, &k).1.mtu, 1400);
    assert_eq!(w.latest().link(reached(&f, &w, &k).1.link).mtu, 1400);
}

#[test]
fn an_adjacency_goes_with_its_last_holder_and_its_place_is_reused() {
    let (mut f, d0, d1) = fib();
    let (mut w, _) = FwdWriter::new(&f);
    let k = packet("203.0.113.7", "10.0.0.5", d0);
    let (i, _) = reached(&f, &w, &k);
    f.route_del(&route("203.0.113.0", 24, &["10.9.0.3"]))
        .expect("route del");
    w.update(&f);
    assert_eq!(w.latest().neighbour(d1, ip("10.9.0.3"), Family::Inet), None);
    f.route_new(&route("203.0.113.0", 24, &["10.9.0.4"]), ReqFlags::ADD)
        .expect("route");
    w.update(&f);
    let (j, a) = reached(&f, &w, &k);
    assert_eq!((j, a.neighbour), (i, Some(ip("10.9.0.4"))));
}

#[test]
fn an_ipv4_route_through_an_ipv6_gateway_sends_ipv4_frames() {
    let (mut f, d0, d1) = fib();
    let mut r = route("192.0.2.0", 24, &["fe80::2"]);
    r.nexthop.oif = d1;
    f.route_new(&r, ReqFlags::ADD).expect("route via inet6");
    neigh(&mut f, d1, "fe80::2", Some(GW_B), nud::PERMANENT);
    let (w, _) = FwdWriter::new(&f);
    let (_, a) = reached(&f, &w, &packet("192.0.2.9", "10.0.0.5", d0));
    assert_eq!((a.family, a.neighbour), (Family::Inet, Some(ip("fe80::2"))));
    assert_eq!(a.rewrite, rewrite(GW_B, MAC1, ETHERTYPE_IPV4));
}

#[test]
fn a_link_down_and_deleted_is_no_way_out() {
    let (mut f, d0, d1) = fib();
    let (mut w, _) = FwdWriter::new(&f);
    let (_, a) = reached(&f, &w, &packet("198.51.100.7", "10.0.0.5", d0));
    set_link(&mut f, d1, up(false));
    w.update(&f);
    assert!(!w.latest().link(a.link).up);
    f.link_del(&Link {
        ifindex: d1,
        ..Default::default()
    })
    .expect("link del");
    w.update(&f);
    let t = w.latest();
    assert_eq!(t.link_index(d1), None);
    assert_eq!(t.neighbour(d1, ip("10.9.0.2"), Family::Inet), None);
}
