//! What the forwarding objects cost on the real table of ../shared/data: compiling them once,
//! one update after each kind of FIB change the writer makes (a route through a new gateway,
//! a neighbour's address, a link's MTU, a route through a known gateway), and a worker's
//! adjacency lookup per packet beside the route decision it follows.
//!
//! Run: `cargo run --release -p fibre-fwd --example update [PATH]`; skips with a message when
//! the data file is absent. Prints on-CPU times for the per-packet loops and wall times for
//! the updates (too short for the scheduler's CPU accounting), and `uptime`: the machine is
//! shared.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use fibre_fib::types::{iff, nud};
use fibre_fib::*;
use fibre_fwd::FwdWriter;

#[path = "../../fibre-fib/examples/common/rib.rs"]
mod rib;

/// Gateways the IPv4 table's routes are spread over, each a permanent neighbour.
const PEERS: u32 = 64;
/// Repetitions of each timed update; the median is printed.
const ROUNDS: usize = 21;

/// Nanoseconds this thread spent on a CPU (Linux schedstat); wall time where unavailable.
fn cpu_ns(wall: Instant) -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| wall.elapsed().as_nanos() as u64)
}

fn uptime() -> String {
    std::process::Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn gw(peer: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(100, 64, 1, peer as u8 + 1))
}

fn neighbour(ifindex: u32, dst: IpAddr, last: u8) -> Neighbour {
    Neighbour {
        family: Family::Inet,
        ifindex,
        dst,
        lladdr: Some(vec![0x0a, 0, 0, 0, 0, last]),
        state: nud::PERMANENT,
        flags: 0,
        kind: 0,
        protocol: 0,
        confirmed: 0,
        refcnt: 0,
    }
}

/// The median wall microseconds of one update after `change`, over `ROUNDS` rounds.
fn per_update(
    f: &mut Fib,
    w: &mut FwdWriter,
    mut change: impl FnMut(&mut Fib, usize),
) -> (f64, usize) {
    let mut us = Vec::with_capacity(ROUNDS);
    let mut edits = 0;
    for round in 0..ROUNDS {
        change(f, round);
        let t = Instant::now();
        edits = w.update(f);
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    us.sort_by(f64::total_cmp);
    (us[ROUNDS / 2], edits)
}

fn main() {
    let Some(path) = rib::path_or_skip() else {
        return;
    };
    let mut f = Fib::default();
    let mut ifindex = [0; 2];
    for (i, (name, a)) in [("d0", [192, 0, 2, 1]), ("d1", [100, 64, 0, 1])]
        .into_iter()
        .enumerate()
    {
        let l = Link {
            ifname: Some(name.into()),
            kind: Some(LinkKind::Dummy),
            flags: iff::UP,
            change: iff::UP,
            ..Default::default()
        };
        f.link_new(&l, ReqFlags::ADD).expect("link");
        ifindex[i] = f.link_index(name).expect("index");
        let a = IpAddr::V4(Ipv4Addr::from(a));
        let len = if i == 0 { 24 } else { 16 };
        f.addr_new(&Address::new(ifindex[i], a, len), ReqFlags::ADD)
            .expect("address");
    }
    let [d0, d1] = ifindex;
    for p in 0..PEERS {
        f.neigh_new(&neighbour(d1, gw(p), p as u8), ReqFlags::REPLACE)
            .expect("neighbour");
    }
    f.begin_batch();
    let mut dsts = Vec::new();
    for (addr, len, asn) in rib::read(&path) {
        let IpAddr::V4(a) = addr else { continue };
        let mut r = Route::new(Family::Inet, Prefix { addr, len });
        r.table = table::MAIN;
        r.nexthop.gateway = Some(gw(asn % PEERS));
        if f.route_new(&r, ReqFlags::ADD).is_ok() {
            let host = if len >= 32 { 0 } else { u32::MAX >> len };
            dsts.push(IpAddr::V4(Ipv4Addr::from(
                u32::from(a) | (0x9e37_79b9 & host),
            )));
        }
    }
    f.end_batch();
    println!(
        "{} IPv4 routes via {PEERS} gateways; {}",
        dsts.len(),
        uptime()
    );

    let t = Instant::now();
    let (mut w, reader) = FwdWriter::new(&f);
    println!("compile: {:.2} ms", t.elapsed().as_secs_f64() * 1e3);

    let (us, n) = per_update(&mut f, &mut w, |f, round| {
        let r = Route {
            nexthop: NextHop {
                gateway: Some(IpAddr::V4(Ipv4Addr::new(100, 64, 2, round as u8 + 1))),
                ..Default::default()
            },
            table: table::MAIN,
            ..Route::new(
                Family::Inet,
                Prefix {
                    addr: IpAddr::V4(Ipv4Addr::new(198, 18, round as u8, 0)),
                    len: 24,
                },
            )
        };
        f.route_new(&r, ReqFlags::ADD).expect("route");
    });
    println!("update after a route through a new gateway: {us:.1} us ({n} edits)");
    let (us, n) = per_update(&mut f, &mut w, |f, round| {
        let r = Route {
            nexthop: NextHop {
                gateway: Some(gw(round as u32 % PEERS)),
                ..Default::default()
            },
            table: table::MAIN,
            ..Route::new(
                Family::Inet,
                Prefix {
                    addr: IpAddr::V4(Ipv4Addr::new(198, 19, round as u8, 0)),
                    len: 24,
                },
            )
        };
        f.route_new(&r, ReqFlags::ADD).expect("route");
    });
    println!("update after a route through a known gateway: {us:.1} us ({n} edits)");
    let (us, n) = per_update(&mut f, &mut w, |f, round| {
        f.neigh_new(&neighbour(d1, gw(0), 100 + round as u8), ReqFlags::REPLACE)
            .expect("neighbour");
    });
    println!("update after a neighbour's new address: {us:.1} us ({n} edits)");
    let (us, n) = per_update(&mut f, &mut w, |f, round| {
        let l = Link {
            ifindex: d1,
            mtu: Some(1400 + round as u32),
            ..Default::default()
        };
        f.link_new(&l, ReqFlags::NONE).expect("mtu");
    });
    println!("update after the egress link's MTU: {us:.1} us ({n} edits)");

    // Per packet: the route decision, then the adjacency, in a shuffled order.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in (1..dsts.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        dsts.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let keys: Vec<InputKey> = dsts
        .iter()
        .map(|&dst| InputKey {
            dst,
            src: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)),
            iif: d0,
            tos: 0,
            mark: 0,
            proto: 17,
            sport: 4000,
            dport: 53,
            flowlabel: 0,
        })
        .collect();
    let start = Instant::now();
    let t = reader.read();
    let mut found = 0usize;
    let c = cpu_ns(start);
    for k in &keys {
        if let Ok(InputRoute::Forward(r)) = f.route_input(std::hint::black_box(k)) {
            found += usize::from(t.adjacency(&r, k.dst).is_some());
        }
    }
    let both = (cpu_ns(start) - c) as f64 / keys.len() as f64;
    let mut forwarded = 0usize;
    let c = cpu_ns(start);
    for k in &keys {
        forwarded += usize::from(matches!(
            f.route_input(std::hint::black_box(k)),
            Ok(InputRoute::Forward(_))
        ));
    }
    let alone = (cpu_ns(start) - c) as f64 / keys.len() as f64;
    println!(
        "per packet: route_input {alone:.1} ns, route_input + adjacency {both:.1} ns \
         ({found} of {forwarded} forwarded reached an adjacency)"
    );
    println!("{}", uptime());
}
