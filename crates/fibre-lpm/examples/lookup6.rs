//! IPv6 lookup rates of `Lpm6` on the real 2026 table, for quick A/B comparisons of builds:
//!   cargo run --release -p fibre-lpm --example lookup6 -- [RUNS]
//! Loads the table route by route in file order (as crates/fibre-bench does), draws 2^21
//! addresses inside table prefixes and 2^21 uniform over 2000::/3, and prints the median over
//! RUNS (default 9) of each mode in lookups per CPU second of this thread. Run two builds
//! alternately and compare medians: the machine may be shared. "hot batch64" repeats the first
//! 64 inside addresses, so every line they touch stays in L1: when it runs no faster than
//! "inside batch64", the batch is bound by instructions, not by cache misses.

#[path = "../tests/common/rib.rs"]
mod rib;

mod common;
use common::cpu_seconds;

use std::hint::black_box;

use fibre_lpm::v6::Lpm6;
use rib::Rng;

/// Addresses per set: far more than the caches hold (32 MiB of keys).
const ADDRS: usize = 1 << 21;
/// Burst size of batched lookups (DPDK's bulk figures use 64 too).
const BURST: usize = 64;

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(9);
    let Some(rib) = rib::load() else { return };
    let mut lpm = Lpm6::new();
    let t = cpu_seconds();
    for &(p, l, v) in &rib.v6 {
        lpm.insert(p, l, v).expect("insert");
    }
    let build = rib.v6.len() as f64 / (cpu_seconds() - t) / 1e6;
    let mut rng = Rng(0xF1B2E);
    let inside = rib::v6_hits(&rib.v6, ADDRS, &mut rng);
    let uniform: Vec<u128> = (0..ADDRS)
        .map(|_| ((u128::from(rng.next()) << 64 | u128::from(rng.next())) >> 3) | (1u128 << 125))
        .collect();
    let mut out = vec![0u32; ADDRS];
    let hot: Vec<u128> = inside[..BURST]
        .iter()
        .copied()
        .cycle()
        .take(ADDRS)
        .collect();
    let mut rates: [Vec<f64>; 4] = Default::default();
    for _ in 0..runs {
        let t = cpu_seconds();
        for (o, &a) in out.iter_mut().zip(&inside) {
            *o = lpm.lookup(a).unwrap_or(u32::MAX);
        }
        black_box(&mut out);
        rates[0].push(ADDRS as f64 / (cpu_seconds() - t) / 1e6);
        for (i, set) in [&inside, &uniform, &hot].into_iter().enumerate() {
            let t = cpu_seconds();
            for (a, o) in set.chunks(BURST).zip(out.chunks_mut(BURST)) {
                lpm.lookup_batch(a, o);
            }
            black_box(&mut out);
            rates[1 + i].push(ADDRS as f64 / (cpu_seconds() - t) / 1e6);
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "inside single {:6.1}  inside batch{BURST} {:6.1}  uniform batch{BURST} {:6.1}  \
         hot batch{BURST} {:6.1} Mlps; build {build:.2} M routes/s; lookup {:.1} MiB",
        med(&mut rates[0]),
        med(&mut rates[1]),
        med(&mut rates[2]),
        med(&mut rates[3]),
        lpm.lookup_bytes() as f64 / 1048576.0
    );
}
