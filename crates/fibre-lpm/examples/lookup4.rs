//! A steady IPv4 lookup loop on the real 2026 table, for profilers (`perf stat`, `perf record`):
//!   cargo run --release -p fibre-lpm --example lookup4 -- [single|batch] [inside|random] [SECONDS]
//! Builds the table, draws 2^22 addresses (inside table prefixes, or uniform), then loops over
//! them for SECONDS (default 10) of wall time and prints the rate per CPU second of the loop and
//! how much of the process is backed by huge pages. The side-by-side comparison with DPDK lives
//! in crates/fibre-bench.

#[path = "../tests/common/rib.rs"]
mod rib;

use std::hint::black_box;
use std::time::{Duration, Instant};

use fibre_lpm::v4::Lpm4;
use rib::Rng;

/// Addresses per pass: far more than the caches hold.
const ADDRS: usize = 1 << 22;
/// Burst size of batched lookups (DPDK's bulk figures use 64 too).
const BURST: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let batch = args.first().map(String::as_str) == Some("batch");
    let inside = args.get(1).map(String::as_str) != Some("random");
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let Some(rib) = rib::load() else { return };
    let lpm = Lpm4::from_routes(rib.v4.iter().copied()).expect("bulk build");
    let mut rng = Rng(0xF1B2E);
    let addrs: Vec<u32> = if inside {
        rib::v4_hits(&rib.v4, ADDRS, &mut rng)
    } else {
        (0..ADDRS).map(|_| rng.next() as u32).collect()
    };
    let mut out = vec![0u32; ADDRS];
    let start = Instant::now();
    let cpu0 = cpu_seconds();
    let mut passes = 0u64;
    while start.elapsed() < Duration::from_secs(secs) {
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
        passes += 1;
    }
    if let Ok(r) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        if let Some(l) = r.lines().find(|l| l.starts_with("AnonHugePages")) {
            println!("{l}");
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let n = passes as f64 * ADDRS as f64;
    println!(
        "{} {} {passes} passes {:.1} Mlps per CPU second ({:.1} per wall second)",
        if batch { "batch" } else { "single" },
        if inside { "inside" } else { "random" },
        n / cpu / 1e6,
        n / wall / 1e6
    );
}

/// This process's CPU time in seconds (the machine may be shared: wall time counts neighbours).
fn cpu_seconds() -> f64 {
    let t = std::fs::read_to_string("/proc/thread-self/stat").expect("read /proc/thread-self/stat");
    // utime and stime are fields 14 and 15, counted after the parenthesised command name.
    let rest = &t[t.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    // Linux reports them in USER_HZ, 100 per second.
    ticks / 100.0
}
