//! The per-packet cost of `Fib::route_input` on the real table of ../shared/data, beside
//! `lookup_output` over the same destinations: packets come in on d0 from a host of d0's
//! subnet, to an address inside each prefix of the table (in a shuffled order, so that
//! consecutive lookups do not share a path down the trie), and leave through one of 64
//! gateways on d1. IPv4 is measured with reverse-path filtering off (the kernel's default
//! fast path: one address check) and strict (a second lookup, back to the source). Beside
//! them, per packet: `route_input_batch` over vectors of [`VECTORS`] packets, and fibre-lpm's
//! batched lookup alone over the same destinations (a structure built from the table's
//! prefixes), the floor of any input route decision.
//!
//! Run: `cargo run --release -p fibre-fib --example route_input [PATH]`; skips with a message
//! when the data file is absent. Prints on-CPU nanoseconds per call (the median of
//! `ROUNDS`), and `uptime`: the machine is shared.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use fibre_fib::*;

#[path = "common/rib.rs"]
mod rib;

/// How many gateways the table's routes are spread over (a realistic peer count).
const PEERS: u32 = 64;
/// Timed passes over all destinations per figure; the median is printed.
const ROUNDS: usize = 5;
/// Vector sizes of the batch call (issue 14's benchmark sizes).
const VECTORS: [usize; 3] = [32, 64, 256];

/// Nanoseconds this thread spent on a CPU (Linux schedstat); wall time where unavailable.
fn cpu_ns(wall: Instant) -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| wall.elapsed().as_nanos() as u64)
}

/// The median over `ROUNDS` passes of on-CPU nanoseconds per call of `one` over `keys`,
/// and the sum of what `one` counted in the last pass.
fn per_call<K>(keys: &[K], mut one: impl FnMut(&K) -> usize) -> (f64, usize) {
    let start = Instant::now();
    let mut ns = Vec::with_capacity(ROUNDS);
    let mut hits = 0;
    for _ in 0..ROUNDS {
        hits = 0;
        let c = cpu_ns(start);
        for k in keys {
            hits += one(std::hint::black_box(k));
        }
        ns.push((cpu_ns(start) - c) as f64 / keys.len() as f64);
    }
    ns.sort_by(f64::total_cmp);
    (ns[ROUNDS / 2], hits)
}

/// An address inside prefix `a/len`: its network address with some of the host bits set.
fn inside(a: IpAddr, len: u8) -> IpAddr {
    match a {
        IpAddr::V4(a) => {
            let host = if len >= 32 { 0 } else { u32::MAX >> len };
            IpAddr::V4(Ipv4Addr::from(u32::from(a) | (0x9e37_79b9 & host)))
        }
        IpAddr::V6(a) => {
            let host = if len >= 128 { 0 } else { u128::MAX >> len };
            IpAddr::V6(Ipv6Addr::from(
                u128::from(a) | (0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835 & host),
            ))
        }
    }
}

/// A fixed pseudo-random permutation (xorshift Fisher-Yates), the same every run.
fn shuffle<T>(v: &mut [T]) {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

fn up_link(f: &mut Fib, name: &str, addrs: [(IpAddr, u8); 2]) -> u32 {
    let new = Link {
        ifname: Some(name.into()),
        kind: Some(LinkKind::Dummy),
        flags: iff::UP,
        change: iff::UP,
        ..Default::default()
    };
    f.link_new(&new, ReqFlags::ADD).expect("link");
    let ifindex = f.link_index(name).expect("index");
    for (a, prefixlen) in addrs {
        f.addr_new(&Address::new(ifindex, a, prefixlen), ReqFlags::ADD)
            .expect("address");
    }
    ifindex
}

/// A UDP packet from `src` to `dst` received on `iif`.
fn packet(dst: IpAddr, src: IpAddr, iif: u32) -> InputKey {
    InputKey {
        dst,
        src,
        iif,
        tos: 0,
        mark: 0,
        proto: 17,
        sport: 4000,
        dport: 53,
        flowlabel: 0,
    }
}

fn forwarded(r: &Result<InputRoute, InputDrop>) -> usize {
    usize::from(matches!(r, Ok(InputRoute::Forward(_))))
}

/// fibre-lpm's batched lookup alone over `dsts`, in vectors of each of [`VECTORS`], in a
/// structure built from the table's prefixes of `dsts`' family.
fn lpm_alone(name: &str, table: &[(IpAddr, u8, u32)], dsts: &[IpAddr]) {
    let v4 = dsts.first().is_some_and(IpAddr::is_ipv4);
    let bits = |a: &IpAddr| match a {
        IpAddr::V4(a) => u128::from(u32::from(*a)),
        IpAddr::V6(a) => u128::from(*a),
    };
    let prefixes = (0u32..).zip(table.iter().filter(|(a, _, _)| a.is_ipv4() == v4));
    let addrs: Vec<u128> = dsts.iter().map(bits).collect();
    let a4: Vec<u32> = addrs.iter().map(|&a| a as u32).collect();
    let (l4, l6) = if v4 {
        let routes = prefixes.map(|(i, (a, l, _))| (bits(a) as u32, *l, i));
        (
            Some(fibre_lpm::v4::Lpm4::from_routes(routes).expect("lpm")),
            None,
        )
    } else {
        let routes = prefixes.map(|(i, (a, l, _))| (bits(a), *l, i));
        (
            None,
            Some(fibre_lpm::v6::Lpm6::from_routes(routes).expect("lpm")),
        )
    };
    let mut out = [0u32; VECTORS[VECTORS.len() - 1]];
    let found = |o: &[u32]| o.iter().filter(|&&x| x != fibre_lpm::NO_ROUTE).count();
    for n in VECTORS {
        let (ns, hits) = match (&l4, &l6) {
            (Some(l), _) => per_call(&a4.chunks_exact(n).collect::<Vec<_>>(), |v| {
                l.lookup_batch(v, &mut out[..n]);
                found(&out[..n])
            }),
            (_, Some(l)) => per_call(&addrs.chunks_exact(n).collect::<Vec<_>>(), |v| {
                l.lookup_batch(v, &mut out[..n]);
                found(&out[..n])
            }),
            _ => unreachable!("one structure is built"),
        };
        let per = ns / n as f64;
        println!(
            "{name} fibre-lpm lookup_batch alone, {n} addresses: {per:.1} ns/address ({hits} found)"
        );
    }
}

fn uptime() -> String {
    std::process::Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn main() {
    let Some(path) = rib::path_or_skip() else {
        return;
    };
    let table = rib::read(&path);
    let ip = |s: &str| -> IpAddr { s.parse().expect("literal") };

    let mut f = Fib::default();
    let d0 = up_link(
        &mut f,
        "d0",
        [(ip("192.0.2.1"), 24), (ip("2001:db8::1"), 64)],
    );
    let d1 = up_link(&mut f, "d1", [(ip("100.64.0.1"), 16), (ip("fd00::1"), 64)]);
    f.begin_batch();
    for &(addr, len, asn) in &table {
        let peer = asn % PEERS;
        let mut r = Route::new(Family::of(&addr), Prefix { addr, len });
        r.table = table::MAIN;
        r.protocol = protocol::BOOT;
        r.nexthop.oif = d1;
        r.nexthop.gateway = Some(match addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::new(100, 64, 1, peer as u8 + 1)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, peer as u16 + 2)),
        });
        // A few prefixes of the table are refused as the kernel refuses them (martians).
        let _ = f.route_new(&r, ReqFlags::ADD);
    }
    f.end_batch();

    let mut dsts: Vec<IpAddr> = table.iter().map(|&(a, len, _)| inside(a, len)).collect();
    let n4 = dsts.iter().filter(|d| d.is_ipv4()).count();
    println!(
        "table: {n4} IPv4, {} IPv6 routes; {}",
        dsts.len() - n4,
        uptime()
    );
    // For reference: IPv4 in the file's (sorted) order, where neighbouring lookups share
    // their path down the trie and stay in cache.
    let sorted: Vec<InputKey> = dsts
        .iter()
        .filter(|d| d.is_ipv4())
        .map(|&dst| packet(dst, ip("192.0.2.10"), d0))
        .collect();
    let fwd = |k: &InputKey| forwarded(&f.route_input(k));
    let (inp, _) = per_call(&sorted, fwd);
    println!("ipv4 route_input in table order, rp_filter 0: {inp:.1} ns/call");
    shuffle(&mut dsts);
    let (v4, v6): (Vec<IpAddr>, Vec<IpAddr>) = dsts.into_iter().partition(IpAddr::is_ipv4);

    for (name, dsts, src) in [
        ("ipv4", &v4, ip("192.0.2.10")),
        ("ipv6", &v6, ip("2001:db8::10")),
    ] {
        let keys: Vec<InputKey> = dsts.iter().map(|&dst| packet(dst, src, d0)).collect();
        let family = if name == "ipv4" {
            Family::Inet
        } else {
            Family::Inet6
        };
        let flows: Vec<Flow> = dsts
            .iter()
            .map(|&dst| Flow {
                dst: match dst {
                    IpAddr::V4(a) => u32::from(a).into(),
                    IpAddr::V6(a) => a.into(),
                },
                ..Flow::empty()
            })
            .collect();
        let (out, hits) = per_call(&flows, |fl| {
            usize::from(f.lookup_output(family, fl).is_ok())
        });
        println!(
            "{name} lookup_output: {out:.1} ns/call ({hits} of {} found)",
            flows.len()
        );
        let fwd = |k: &InputKey| forwarded(&f.route_input(k));
        let (inp, hits) = per_call(&keys, fwd);
        println!("{name} route_input, rp_filter 0: {inp:.1} ns/call ({hits} forwarded)");
        let mut out = vec![Err(InputDrop::NoRoute); VECTORS[VECTORS.len() - 1]];
        for n in VECTORS {
            let vectors: Vec<&[InputKey]> = keys.chunks_exact(n).collect();
            let (ns, hits) = per_call(&vectors, |v| {
                f.route_input_batch(v, &mut out[..n]);
                out[..n].iter().map(forwarded).sum()
            });
            let per = ns / n as f64;
            println!("{name} route_input_batch, {n} packets, rp_filter 0: {per:.1} ns/packet ({hits} forwarded)");
        }
        lpm_alone(name, &table, dsts);
        if family == Family::Inet {
            let mut s = f.settings().clone();
            s.rp_filter = 1;
            f.set_settings(s);
            let fwd = |k: &InputKey| forwarded(&f.route_input(k));
            let (strict, hits) = per_call(&keys, fwd);
            println!("{name} route_input, rp_filter 1: {strict:.1} ns/call ({hits} forwarded)");
            let mut s = f.settings().clone();
            s.rp_filter = 0;
            f.set_settings(s);
        }
    }
    println!("{}", uptime());
}
