//! Lookups in a small table: the interval array (`SmallLpm`, what fibre-fib compiles tables of
//! up to 1,024 prefixes into) beside the large structures (`Lpm4`, `Lpm6`) on the same
//! prefixes, one thread:
//!   cargo run --release -p fibre-lpm --example small_vs_large
//! For 16, 256 and 1,024 random nested prefixes, prints single lookups per CPU second of each
//! (median of 5 passes over 2^20 addresses, half inside prefixes, half anywhere in the space
//! the prefixes share) and the interval array's heap bytes against the large structure's.

#[path = "../tests/common/rib.rs"]
mod rib;

mod common;
use common::cpu_seconds;

use std::hint::black_box;

use fibre_lpm::small::SmallLpm;
use fibre_lpm::v4::Lpm4;
use fibre_lpm::v6::Lpm6;
use rib::Rng;

/// Addresses per measured pass.
const ADDRS: usize = 1 << 20;
/// Passes per figure; the median is reported.
const RUNS: usize = 5;

fn median_mlps(addrs: &[u128], f: impl Fn(u128) -> Option<u32>) -> f64 {
    let mut v: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t = cpu_seconds();
            let mut hits = 0u32;
            for &a in addrs {
                hits = hits.wrapping_add(black_box(f(a)).unwrap_or(0));
            }
            black_box(hits);
            addrs.len() as f64 / (cpu_seconds() - t) / 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `n` prefixes of `bits`-bit addresses under one /8 (IPv4) or /16 (IPv6), lengths from that
/// base to /32 or /64, so that they nest and touch, and lookup addresses: half inside a
/// prefix, half anywhere under the base.
fn workload(rng: &mut Rng, bits: u8, n: usize) -> (Vec<(u128, u8, u32)>, Vec<u128>) {
    let (base_len, top_len): (u8, u8) = if bits == 32 { (8, 32) } else { (16, 64) };
    let space = if bits == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    let base = (10u128 << (bits - 8)) & space;
    let random = |rng: &mut Rng| (u128::from(rng.next()) << 64 | u128::from(rng.next())) & space;
    let prefixes: Vec<(u128, u8, u32)> = (0..n)
        .map(|i| {
            let len = base_len + (rng.next() % u64::from(top_len - base_len + 1)) as u8;
            (base | (random(rng) >> base_len), len, i as u32)
        })
        .collect();
    let addrs = (0..ADDRS)
        .map(|i| {
            let r = random(rng) >> base_len;
            if i % 2 == 0 {
                let (a, len, _) = prefixes[i / 2 % n];
                let host = if len >= bits { 0 } else { space >> len };
                (a & !host & space) | (r & host)
            } else {
                base | r
            }
        })
        .collect();
    (prefixes, addrs)
}

fn main() {
    let mut rng = Rng(0x5eed_cafe);
    println!("prefixes  family  SmallLpm Mlps  large Mlps  ratio  SmallLpm bytes");
    for bits in [32u8, 128] {
        for n in [16usize, 256, 1024] {
            let (prefixes, addrs) = workload(&mut rng, bits, n);
            let small = SmallLpm::build(bits, prefixes.iter().copied()).expect("valid prefixes");
            let small_mlps = median_mlps(&addrs, |a| small.lookup(a));
            let large_mlps = if bits == 32 {
                let mut l = Lpm4::new();
                for &(a, len, v) in &prefixes {
                    l.insert(a as u32, len, v).expect("valid prefix");
                }
                median_mlps(&addrs, |a| l.lookup(a as u32))
            } else {
                let mut l = Lpm6::new();
                for &(a, len, v) in &prefixes {
                    l.insert(a, len, v).expect("valid prefix");
                }
                median_mlps(&addrs, |a| l.lookup(a))
            };
            println!(
                "{n:>8}  {:>6}  {small_mlps:>13.1}  {large_mlps:>10.1}  {:>5.2}  {:>14}",
                if bits == 32 { "IPv4" } else { "IPv6" },
                small_mlps / large_mlps,
                small.heap_bytes()
            );
        }
    }
}
