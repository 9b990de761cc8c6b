//! The per-packet cost of the kernel's multipath flow hash (`mphash::flow_hash`), which a
//! lookup through a route with more than one next hop adds: per policy and family, over a
//! million flows with pseudo-random addresses and ports (no table involved).
//!
//! Run: `cargo run --release -p fibre-fib --example mphash`. Prints on-CPU nanoseconds per
//! hash (the median of `ROUNDS` passes) and `uptime`: the machine is shared.

use std::time::Instant;

use fibre_fib::mphash::{fields, flow_hash, MultipathHash};
use fibre_fib::{Family, Flow};

/// Flows hashed per pass.
const FLOWS: usize = 1 << 20;
/// Timed passes per figure; the median is printed.
const ROUNDS: usize = 5;

/// Nanoseconds this thread spent on a CPU (Linux schedstat); wall time where unavailable.
fn cpu_ns(wall: Instant) -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| wall.elapsed().as_nanos() as u64)
}

/// splitmix64: a reproducible stream of flow fields.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn flows(v6: bool) -> Vec<Flow> {
    let mut s = 1;
    (0..FLOWS)
        .map(|_| {
            let (a, b, p) = (next(&mut s), next(&mut s), next(&mut s));
            let addr = |x: u64| match v6 {
                true => (0x2001_0db8_u128 << 96) | x as u128,
                false => x as u32 as u128,
            };
            Flow {
                src: addr(a),
                dst: addr(b),
                proto: 17,
                sport: p as u16,
                dport: (p >> 16) as u16,
                flowlabel: if v6 { (p >> 32) as u32 & 0xf_ffff } else { 0 },
                ..Flow::empty()
            }
        })
        .collect()
}

fn per_hash(cfg: &MultipathHash, family: Family, flows: &[Flow]) -> f64 {
    let start = Instant::now();
    let mut ns = Vec::with_capacity(ROUNDS);
    let mut sink = 0u32;
    for _ in 0..ROUNDS {
        let c = cpu_ns(start);
        for f in flows {
            sink ^= flow_hash(cfg, family, std::hint::black_box(f));
        }
        ns.push((cpu_ns(start) - c) as f64 / flows.len() as f64);
    }
    std::hint::black_box(sink);
    ns.sort_by(f64::total_cmp);
    ns[ROUNDS / 2]
}

fn uptime() -> String {
    std::process::Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn main() {
    println!("uptime: {}", uptime());
    let (v4, v6) = (flows(false), flows(true));
    for policy in 0..=3 {
        let cfg = MultipathHash {
            policy4: policy,
            policy6: policy,
            fields4: fields::OUTER_MASK,
            fields6: fields::OUTER_MASK,
            seed: 1,
        };
        println!(
            "policy {policy}: IPv4 {:.1} ns, IPv6 {:.1} ns per hash",
            per_hash(&cfg, Family::Inet, &v4),
            per_hash(&cfg, Family::Inet6, &v6)
        );
    }
    println!("uptime: {}", uptime());
}
