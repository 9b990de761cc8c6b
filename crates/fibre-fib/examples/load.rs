//! Loads the real IPv4 (and IPv6) table of ../shared/data through `Fib::route_new`, as
//! `route add PREFIX via GW` requests with 64 gateways chosen by origin AS, and prints the
//! load rate and a lookup rate over addresses inside the table's prefixes.
//!
//! Run: `cargo run --release -p fibre-fib --example load [PATH]`; skips with a message when
//! the data file is absent.

use std::net::IpAddr;
use std::time::Instant;

use fibre_fib::*;

#[path = "common/rib.rs"]
mod rib;

/// How many gateways the table's routes are spread over (a realistic peer count).
const PEERS: u32 = 64;

/// Seconds this thread spent on a CPU (Linux schedstat), so that figures taken on a busy
/// shared machine still say what the work costs; 0 where unavailable.
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok())
        })
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

fn main() {
    let Some(path) = rib::path_or_skip() else {
        return;
    };
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for (addr, len, asn) in rib::read(&path) {
        if addr.is_ipv4() {
            v4.push((addr, len, asn % PEERS));
        } else {
            v6.push((addr, len, asn % PEERS));
        }
    }

    let mut f = Fib::default();
    let d0 = {
        f.link_new(
            &Link {
                ifname: Some("d0".into()),
                kind: Some(LinkKind::Dummy),
                ..Default::default()
            },
            ReqFlags::ADD,
        )
        .expect("link");
        f.link_index("d0").expect("d0")
    };
    f.link_new(
        &Link {
            ifindex: d0,
            flags: iff::UP,
            change: iff::UP,
            ..Default::default()
        },
        ReqFlags::NONE,
    )
    .expect("up");
    let addr = |a: &str, len| Address {
        family: if a.contains(':') {
            Family::Inet6
        } else {
            Family::Inet
        },
        prefixlen: len,
        flags: 0,
        scope: 0,
        ifindex: d0,
        local: Some(a.parse().expect("literal")),
        address: Some(a.parse().expect("literal")),
        broadcast: None,
        label: None,
        metric: None,
        valid_lft: None,
        preferred_lft: None,
    };
    f.addr_new(&addr("100.64.0.1", 16), ReqFlags::ADD)
        .expect("addr");
    f.addr_new(&addr("fd00::1", 64), ReqFlags::ADD)
        .expect("addr");

    let t = Instant::now();
    let c = cpu_s();
    let mut failed = 0;
    for (a, len, peer) in &v4 {
        let mut r = Route::new(
            Family::Inet,
            Prefix {
                addr: *a,
                len: *len,
            },
        );
        r.table = table::MAIN;
        r.protocol = protocol::BOOT;
        r.nexthop.gateway = Some(IpAddr::V4(std::net::Ipv4Addr::new(
            100,
            64,
            1,
            *peer as u8 + 1,
        )));
        if f.route_new(&r, ReqFlags::ADD).is_err() {
            failed += 1;
        }
    }
    let s4 = t.elapsed().as_secs_f64();
    let c4 = cpu_s() - c;
    println!(
        "ipv4 load: {} routes ({} failed) in {:.3} s wall, {:.3} s on CPU = {:.2} M routes/s per CPU second",
        v4.len(),
        failed,
        s4,
        c4,
        v4.len() as f64 / c4 / 1e6
    );

    let t = Instant::now();
    let c = cpu_s();
    let mut failed = 0;
    for (a, len, peer) in &v6 {
        let mut r = Route::new(
            Family::Inet6,
            Prefix {
                addr: *a,
                len: *len,
            },
        );
        r.table = table::MAIN;
        r.protocol = protocol::BOOT;
        r.nexthop.gateway = Some(format!("fd00::{:x}", peer + 2).parse().expect("gw"));
        if f.route_new(&r, ReqFlags::ADD).is_err() {
            failed += 1;
        }
    }
    let s6 = t.elapsed().as_secs_f64();
    let c6 = cpu_s() - c;
    println!(
        "ipv6 load: {} routes ({} failed) in {:.3} s wall, {:.3} s on CPU = {:.2} M routes/s per CPU second",
        v6.len(),
        failed,
        s6,
        c6,
        v6.len() as f64 / c6 / 1e6
    );

    // Lookups: one address inside each IPv4 prefix (hits), through rules and tables.
    let addrs: Vec<u32> = v4
        .iter()
        .map(|(a, len, _)| {
            let IpAddr::V4(a) = a else {
                unreachable!("v4 list")
            };
            u32::from(*a)
                | ((0x9e37_79b9u32) >> *len.max(&1)) & !(u32::MAX << (32 - *len as u32).min(31))
        })
        .collect();
    let t = Instant::now();
    let c = cpu_s();
    let mut hits = 0usize;
    for &a in &addrs {
        let flow = Flow {
            dst: a as u128,
            ..Flow::empty()
        };
        if f.lookup_output(Family::Inet, &flow).is_ok() {
            hits += 1;
        }
    }
    let sl = t.elapsed().as_secs_f64();
    let cl = cpu_s() - c;
    println!(
        "ipv4 lookup_output: {} lookups ({} hits) in {:.3} s wall, {:.3} s on CPU = {:.2} M lookups/s per CPU second",
        addrs.len(),
        hits,
        sl,
        cl,
        addrs.len() as f64 / cl / 1e6
    );
}
