//! Property: over random sequences of FIB changes (routes, multipath, neighbour entries in
//! every state, link MTU, MAC, up/down and carrier), each followed by one `FwdWriter::update`,
//! the adjacency a forwarded packet reaches equals what a naive recomputation makes of
//! `Fib::route_get ... iif` and the neighbour table.

mod common;

use common::*;
use fibre_fib::types::{iff, nud};
use fibre_fib::*;
use fibre_fwd::*;
use proptest::prelude::*;

const MACS: [[u8; 6]; 4] = [
    [0x0a, 0, 0, 0, 0, 1],
    [0x0a, 0, 0, 0, 0, 2],
    [0x0a, 0, 0, 0, 0, 3],
    [0x0a, 0, 0, 0, 0, 4],
];
const PREFIXES: [(&str, u8); 5] = [
    ("198.51.100.0", 24),
    ("203.0.113.0", 24),
    ("192.0.2.0", 24),
    ("2001:db8:a::", 48),
    ("2001:db8:b::", 48),
];
const STATES: [u16; 5] = [
    nud::PERMANENT,
    nud::REACHABLE,
    nud::STALE,
    nud::FAILED,
    nud::INCOMPLETE,
];
const MTUS: [u32; 4] = [1280, 1400, 1500, 9000];

#[derive(Debug, Clone)]
enum Op {
    Route(usize, Vec<(usize, usize)>),
    DelRoute(usize),
    Neigh(usize, usize, bool, usize, usize),
    DelNeigh(usize, usize, bool),
    Mtu(usize, usize),
    Mac(usize, usize),
    Up(usize, bool),
    Carrier(usize, bool),
}

/// Host `h` of egress link `l` (1 or 2), IPv4 or IPv6: .2 and .3 serve as gateways.
fn host(l: usize, h: usize, v6: bool) -> String {
    let last = [2, 3, 7][h];
    if v6 {
        format!("2001:db8:{l}::{last}")
    } else {
        format!("10.{l}.0.{last}")
    }
}

fn op() -> impl Strategy<Value = Op> {
    let gw = (1usize..3, 0usize..2);
    prop_oneof![
        4 => (0usize..5, prop::collection::vec(gw, 1..3)).prop_map(|(p, g)| Op::Route(p, g)),
        1 => (0usize..5).prop_map(Op::DelRoute),
        4 => (1usize..3, 0usize..3, any::<bool>(), 0usize..5, 0usize..4)
            .prop_map(|(l, h, v6, s, m)| Op::Neigh(l, h, v6, s, m)),
        1 => (1usize..3, 0usize..3, any::<bool>()).prop_map(|(l, h, v6)| Op::DelNeigh(l, h, v6)),
        1 => (1usize..3, 0usize..4).prop_map(|(l, m)| Op::Mtu(l, m)),
        1 => (1usize..3, 0usize..4).prop_map(|(l, m)| Op::Mac(l, m)),
        1 => (1usize..3, any::<bool>()).prop_map(|(l, u)| Op::Up(l, u)),
        1 => (1usize..3, any::<bool>()).prop_map(|(l, c)| Op::Carrier(l, c)),
    ]
}

/// d0 where packets come in, d1 and d2 where they leave (10.L.0.1/24, 2001:db8:L::1/64).
fn base() -> (Fib, [u32; 3]) {
    let mut f = Fib::default();
    let mut links = [0; 3];
    for (l, idx) in links.iter_mut().enumerate() {
        *idx = link(&mut f, &format!("d{l}"), [0x02, 0, 0, 0, 0, l as u8]);
        addr(&mut f, *idx, &format!("10.{l}.0.1"), 24);
        addr(&mut f, *idx, &format!("2001:db8:{l}::1"), 64);
    }
    (f, links)
}

fn apply(f: &mut Fib, links: &[u32; 3], op: &Op) {
    match op {
        Op::Route(p, gws) => {
            let (a, len) = PREFIXES[*p];
            let v6 = a.contains(':');
            let gws: Vec<String> = gws.iter().map(|&(l, h)| host(l, h, v6)).collect();
            let gws: Vec<&str> = gws.iter().map(String::as_str).collect();
            let _ = f.route_new(&route(a, len, &gws), ReqFlags::REPLACE);
        }
        Op::DelRoute(p) => {
            let (a, len) = PREFIXES[*p];
            let _ = f.route_del(&route(a, len, &[]));
        }
        Op::Neigh(l, h, v6, s, m) => {
            let state = STATES[*s];
            let mac = (state & nud::VALID != 0).then_some(MACS[*m]);
            neigh(f, links[*l], &host(*l, *h, *v6), mac, state);
        }
        Op::DelNeigh(l, h, v6) => neigh_del(f, links[*l], &host(*l, *h, *v6)),
        Op::Mtu(l, m) => set_link(
            f,
            links[*l],
            Link {
                mtu: Some(MTUS[*m]),
                ..Default::default()
            },
        ),
        Op::Mac(l, m) => set_link(
            f,
            links[*l],
            Link {
                address: Some(MACS[*m].to_vec()),
                ..Default::default()
            },
        ),
        Op::Up(l, u) => set_link(f, links[*l], up(*u)),
        Op::Carrier(l, c) => set_link(
            f,
            links[*l],
            Link {
                carrier: Some(*c),
                ..Default::default()
            },
        ),
    }
}

/// What the adjacency of a packet to `dst` leaving by `oif` towards `gateway` must be, from
/// the FIB's answers alone: (ifindex, neighbour when it is determined, rewrite, MTU, state).
fn naive(
    f: &Fib,
    oif: u32,
    gateway: Option<std::net::IpAddr>,
    dst: std::net::IpAddr,
) -> (
    u32,
    Option<Option<std::net::IpAddr>>,
    [u8; REWRITE_LEN],
    u32,
    NeighState,
) {
    let l = f
        .links()
        .into_iter()
        .find(|l| l.ifindex == oif)
        .expect("output link exists");
    let mac: [u8; 6] = l.address.as_deref().expect("MAC")[..6]
        .try_into()
        .expect("6 bytes");
    let to = gateway.unwrap_or(dst);
    let entry = f
        .neighbours(None, false)
        .into_iter()
        .find(|n| n.ifindex == oif && n.dst == to && n.state != nud::NONE);
    let (ha, state) = match &entry {
        Some(n) if n.state & nud::VALID != 0 => (
            n.lladdr.as_deref().expect("valid has lladdr")[..6]
                .try_into()
                .expect("6"),
            NeighState::Resolved,
        ),
        Some(n) if n.state & nud::FAILED != 0 => ([0; 6], NeighState::Failed),
        None if l.flags & iff::NOARP != 0 => (mac, NeighState::Resolved),
        _ => ([0; 6], NeighState::Incomplete),
    };
    // An on-link destination without an entry may use a link's glean adjacency, or the
    // adjacency of a gateway with the same address: the same rewrite either way.
    let neighbour = if gateway.is_some() || entry.is_some() {
        Some(Some(to))
    } else {
        None
    };
    let ethertype = if dst.is_ipv4() {
        ETHERTYPE_IPV4
    } else {
        ETHERTYPE_IPV6
    };
    let mut rw = [0u8; REWRITE_LEN];
    rw[..6].copy_from_slice(&ha);
    rw[6..12].copy_from_slice(&mac);
    rw[12..].copy_from_slice(&ethertype.to_be_bytes());
    (oif, neighbour, rw, l.mtu.expect("mtu"), state)
}

const PACKETS: [&str; 14] = [
    "198.51.100.7",
    "203.0.113.7",
    "192.0.2.7",
    "10.1.0.2",
    "10.1.0.7",
    "10.2.0.3",
    "10.2.0.9",
    "2001:db8:a::7",
    "2001:db8:b::7",
    "2001:db8:1::2",
    "2001:db8:1::7",
    "2001:db8:2::3",
    "2001:db8:2::9",
    "2001:db8:7::1",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn reached_adjacency_is_the_naive_one(ops in prop::collection::vec(op(), 1..40)) {
        let (mut f, links) = base();
        let (mut w, reader) = FwdWriter::new(&f);
        for op in &ops {
            apply(&mut f, &links, op);
            w.update(&f);
            prop_assert_eq!(w.update(&f), 0, "a second update has nothing to do");
            let t = reader.read();
            for dst in PACKETS {
                let src = if dst.contains(':') { "2001:db8::5" } else { "10.0.0.5" };
                let k = packet(dst, src, links[0]);
                let Ok(InputRoute::Forward(r)) = f.route_input(&k) else {
                    continue;
                };
                let q = RouteQuery { src: Some(k.src), iif: Some(k.iif), ..RouteQuery::to(k.dst) };
                let ans = f.route_get(&q).expect("route get agrees with route_input");
                let want = naive(&f, ans.nexthop.oif, ans.nexthop.gateway, k.dst);
                let i = t.adjacency(&r, k.dst);
                prop_assert!(i.is_some(), "{}: no adjacency after {:?}", dst, op);
                let a = t.adj(i.expect("checked"));
                let neighbour = want.1.map(|_| a.neighbour);
                let got = (t.link(a.link).ifindex, neighbour, a.rewrite, a.mtu, a.state);
                prop_assert_eq!(got, want, "{} after {:?}", dst, op);
            }
        }
    }
}
