//! A steady IPv4 lookup loop on the real 2026 table, for profilers (`perf stat`, `perf record`):
//!   cargo run --release -p fibre-lpm --example lookup4 -- [single|batch] [inside|random|hot] [SECONDS] [bulk|insert]
//! Builds the table, draws 2^22 addresses (inside table prefixes, uniform, or inside the table's
//! first `HOT` prefixes: lines that stay in L1/L2, so that the rate is the instructions' and not
//! the memory's), then loops over
//! them for SECONDS (default 10) of wall time and prints the median rate per CPU second of the
//! passes (thread CPU time, so that a shared machine's other processes are not counted) and how
//! much of the process is backed by huge pages. The side-by-side comparison with DPDK lives
//! in crates/fibre-bench.

#[path = "../tests/common/rib.rs"]
mod rib;

mod common;
use common::cpu_seconds;

use std::hint::black_box;
use std::time::{Duration, Instant};

use fibre_lpm::v4::Lpm4;
use rib::Rng;

/// Addresses per pass: far more than the caches hold.
const ADDRS: usize = 1 << 22;
/// Prefixes the `hot` addresses are drawn inside.
const HOT: usize = 500;
/// Burst size of batched lookups (DPDK's bulk figures use 64 too).
const BURST: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let batch = args.first().map(String::as_str) == Some("batch");
    let set = args.get(1).map(String::as_str).unwrap_or("inside");
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let Some(rib) = rib::load() else { return };
    // Built at once, or route by route (as fibre-bench loads it).
    let lpm = if args.get(3).map(String::as_str) == Some("insert") {
        let mut lpm = Lpm4::new();
        for &(p, l, v) in &rib.v4 {
            lpm.insert(p, l, v).expect("insert");
        }
        lpm
    } else {
        Lpm4::from_routes(rib.v4.iter().copied()).expect("bulk build")
    };
    let mut rng = Rng(0xF1B2E);
    let addrs: Vec<u32> = match set {
        "random" => (0..ADDRS).map(|_| rng.next() as u32).collect(),
        "hot" => rib::v4_hits(&rib.v4[..HOT], ADDRS, &mut rng),
        _ => rib::v4_hits(&rib.v4, ADDRS, &mut rng),
    };
    let mut out = vec![0u32; ADDRS];
    let start = Instant::now();
    let mut pass_secs = Vec::new();
    while start.elapsed() < Duration::from_secs(secs) {
        let cpu0 = cpu_seconds();
        if batch {
            for (a, o) in addrs.chunks(BURST).zip(out.chunks_mut(BURST)) {
                lpm.lookup_batch(a, o);
            }
        } else {
            for (o, &a) in out.iter_mut().zip(&addrs) {
                *o = lpm.lookup(a).unwrap_or(u32::MAX);
            }
        }
        black_box(&mut out);
        pass_secs.push(cpu_seconds() - cpu0);
    }
    if let Ok(r) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        if let Some(l) = r.lines().find(|l| l.starts_with("AnonHugePages")) {
            println!("{l}");
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu: f64 = pass_secs.iter().sum();
    pass_secs.sort_by(f64::total_cmp);
    let median = pass_secs[pass_secs.len() / 2];
    println!(
        "{} {} {} passes, median {:.1} Mlps per CPU second (process got {:.0}% of a CPU)",
        if batch { "batch" } else { "single" },
        set,
        pass_secs.len(),
        ADDRS as f64 / median / 1e6,
        100.0 * cpu / wall
    );
}
