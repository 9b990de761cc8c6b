//! Lookup throughput of `Lpm4` and `Lpm6` on the real 2026 table, one thread:
//!   cargo run --release -p fibre-lpm --example throughput
//! Prints build rates, memory, and Mlps for single lookups and for batches of 64, with
//! addresses drawn inside table prefixes and uniformly at random (IPv6: over 2000::/3).
//! Each figure is the median of several runs. The side-by-side comparison with DPDK lives in
//! crates/fibre-bench.

#[path = "../tests/common/rib.rs"]
mod rib;

use std::hint::black_box;
use std::time::Instant;

use fibre_lpm::v4::Lpm4;
use fibre_lpm::v6::Lpm6;
use rib::Rng;

/// Addresses per measured pass: far more than the caches hold, so each run sees cold lines.
const ADDRS: usize = 1 << 22;
/// Passes per figure; the median is reported.
const RUNS: usize = 5;
/// Burst size of batched lookups (DPDK's bulk figures use 64 too).
const BURST: usize = 64;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mlps(n: usize, f: impl Fn() -> u32) -> f64 {
    median(
        (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                black_box(f());
                n as f64 / t.elapsed().as_secs_f64() / 1e6
            })
            .collect(),
    )
}

fn report<A: Copy>(
    name: &str,
    kind: &str,
    addrs: &[A],
    single: impl Fn(A) -> Option<u32>,
    batch: impl Fn(&[A], &mut [u32]),
) {
    let s = mlps(addrs.len(), || {
        addrs
            .iter()
            .fold(0u32, |acc, &a| acc ^ single(a).unwrap_or(0))
    });
    let b = mlps(addrs.len(), || {
        let mut out = [0u32; BURST];
        let mut acc = 0u32;
        for chunk in addrs.chunks_exact(BURST) {
            batch(chunk, &mut out);
            acc ^= out[0] ^ out[BURST - 1];
        }
        acc
    });
    println!("{name} {kind:<8} single {s:7.1} Mlps   batch{BURST} {b:7.1} Mlps");
}

fn main() {
    let Some(rib) = rib::load() else { return };
    let mut rng = Rng(0xF1B2E);

    let t = Instant::now();
    let v4 = Lpm4::from_routes(rib.v4.iter().copied()).expect("IPv4 table");
    let secs = t.elapsed().as_secs_f64();
    println!(
        "IPv4: {} routes, built in {:.0} ms ({:.2} M routes/s), {:.1} MiB ({:.1} MiB read by lookups)",
        v4.len(), secs * 1e3, v4.len() as f64 / secs / 1e6,
        v4.memory_bytes() as f64 / 1048576.0, v4.lookup_bytes() as f64 / 1048576.0
    );
    let hits = rib::v4_hits(&rib.v4, ADDRS, &mut rng);
    let random: Vec<u32> = (0..ADDRS).map(|_| rng.next() as u32).collect();
    for (kind, addrs) in [("inside", &hits), ("random", &random)] {
        report(
            "IPv4",
            kind,
            addrs,
            |a| v4.lookup(a),
            |a, o| v4.lookup_batch(a, o),
        );
    }

    let t = Instant::now();
    let v6 = Lpm6::from_routes(rib.v6.iter().copied()).expect("IPv6 table");
    let secs = t.elapsed().as_secs_f64();
    println!(
        "IPv6: {} routes, built in {:.0} ms ({:.2} M routes/s), {:.1} MiB ({:.1} MiB read by lookups)",
        v6.len(), secs * 1e3, v6.len() as f64 / secs / 1e6,
        v6.memory_bytes() as f64 / 1048576.0, v6.lookup_bytes() as f64 / 1048576.0
    );
    let hits = rib::v6_hits(&rib.v6, ADDRS, &mut rng);
    let random: Vec<u128> = (0..ADDRS)
        .map(|_| ((u128::from(rng.next()) << 64 | u128::from(rng.next())) >> 3) | (1u128 << 125))
        .collect();
    for (kind, addrs) in [("inside", &hits), ("random", &random)] {
        report(
            "IPv6",
            kind,
            addrs,
            |a| v6.lookup(a),
            |a, o| v6.lookup_batch(a, o),
        );
    }
}
