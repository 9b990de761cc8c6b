//! Configuring a `Fib` from a program: the requests `fibre` makes for `link add`, `link
//! set`, `address add`, `route add` and `neigh add|del`, with iproute2's defaults, for tests,
//! fuzz targets and benchmarks that build a routing state without a command file. Each
//! function panics when the request fails: callers pass literals they know to be valid.

use std::net::IpAddr;

use crate::types::{
    iff, nud, protocol, table, Address, Family, Link, LinkKind, Neighbour, NextHop, Prefix,
    ReqFlags, Route,
};
use crate::Fib;

pub fn ip(s: &str) -> IpAddr {
    s.parse().expect("an address literal")
}

/// `link add NAME address MAC type dummy` + `link set NAME up`.
pub fn link(f: &mut Fib, name: &str, mac: [u8; 6]) -> u32 {
    f.link_new(
        &Link {
            ifname: Some(name.into()),
            kind: Some(LinkKind::Dummy),
            address: Some(mac.to_vec()),
            flags: iff::UP,
            change: iff::UP,
            ..Default::default()
        },
        ReqFlags::ADD,
    )
    .expect("link");
    f.link_index(name).expect("index")
}

/// `link set` of one attribute: MTU, MAC, up/down, carrier.
pub fn set_link(f: &mut Fib, ifindex: u32, l: Link) {
    f.link_new(&Link { ifindex, ..l }, ReqFlags::NONE)
        .expect("link set");
}

pub fn up(up: bool) -> Link {
    Link {
        flags: if up { iff::UP } else { 0 },
        change: iff::UP,
        ..Default::default()
    }
}

/// `address add A/LEN dev IFINDEX`.
pub fn addr(f: &mut Fib, ifindex: u32, a: &str, len: u8) {
    f.addr_new(&Address::new(ifindex, ip(a), len), ReqFlags::ADD)
        .expect("address");
}

/// `route add DST/LEN via GW` (one next hop per gateway: multipath with more than one).
pub fn route(dst: &str, len: u8, gws: &[&str]) -> Route {
    let a = ip(dst);
    let mut r = Route::new(Family::of(&a), Prefix { addr: a, len });
    r.table = table::MAIN;
    r.protocol = protocol::BOOT;
    if let [gw] = gws {
        r.nexthop.gateway = Some(ip(gw));
    } else {
        r.multipath = gws
            .iter()
            .map(|g| NextHop {
                gateway: Some(ip(g)),
                ..Default::default()
            })
            .collect();
    }
    r
}

/// The neighbour request `ip neigh ... A [lladdr MAC] dev IFINDEX nud STATE` makes.
pub fn neighbour(ifindex: u32, a: &str, mac: Option<[u8; 6]>, state: u16) -> Neighbour {
    let dst = ip(a);
    Neighbour {
        family: Family::of(&dst),
        ifindex,
        dst,
        lladdr: mac.map(|m| m.to_vec()),
        state,
        flags: 0,
        kind: 0,
        protocol: 0,
        confirmed: 0,
        refcnt: 0,
    }
}

/// `neigh replace A lladdr MAC dev IFINDEX nud STATE` (no lladdr for invalid states).
pub fn neigh(f: &mut Fib, ifindex: u32, a: &str, mac: Option<[u8; 6]>, state: u16) {
    f.neigh_new(&neighbour(ifindex, a, mac, state), ReqFlags::REPLACE)
        .expect("neigh");
}

/// `neigh del A dev IFINDEX`, whether or not there is one.
pub fn neigh_del(f: &mut Fib, ifindex: u32, a: &str) {
    let _ = f.neigh_del(&neighbour(ifindex, a, None, nud::NONE));
}
