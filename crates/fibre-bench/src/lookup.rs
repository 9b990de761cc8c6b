//! The lookup benchmark: every structure loaded with one family's full table, then timed on the
//! same addresses -- drawn inside the table's prefixes, and uniformly at random, reported apart --
//! with single-address lookups and with batches. Runs interleave the structures (run 1 of each,
//! then run 2 of each, ...) so a load change on the shared machine hits them alike; each figure is
//! the median over runs. Every answer of every run is compared with the reference model first:
//! a structure that answers wrong is reported as a failure, never as a figure.

use std::hint::black_box;
use std::time::Instant;

use crate::load::Loaded;

use crate::addrs::{self, RandomAddr, Rng};
use crate::peer::{Keys, Peer, WireForm};
use crate::reference::Reference;
use crate::stats::{median, mib, mops, ratio, thread_cpu};
use crate::table::Route;
use crate::{BenchError, FIBRE, NO_ROUTE};

pub struct Options {
    /// Addresses per set (one timed run is one pass over a set).
    pub addrs: usize,
    pub runs: usize,
    pub batch: usize,
    pub seed: u64,
}

struct Set<A> {
    name: &'static str,
    keys: Keys<A>,
    expected: Vec<u32>,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Single,
    Batch,
}

fn run_once<A>(
    peer: &dyn Peer<A>,
    set: &Set<A>,
    mode: Mode,
    batch: usize,
    out: &mut [u32],
) -> Option<f64> {
    let t = thread_cpu();
    match mode {
        Mode::Single => {
            if !peer.lookup_each(&set.keys, out) {
                return None;
            }
        }
        Mode::Batch => peer.lookup_batch(&set.keys, out, batch),
    }
    let e = thread_cpu().saturating_sub(t);
    black_box(&out);
    Some(mops(set.keys.addrs.len(), e))
}

fn check<A: std::fmt::Debug + Copy>(
    peer: &dyn Peer<A>,
    set: &Set<A>,
    mode: &str,
    out: &[u32],
) -> Result<(), BenchError> {
    let wrong: Vec<usize> = (0..out.len())
        .filter(|&i| out[i] != set.expected[i])
        .collect();
    match wrong.first() {
        None => Ok(()),
        Some(&i) => Err(BenchError::Mismatch {
            peer: peer.name(),
            what: format!("{} {mode}", set.name),
            count: wrong.len(),
            first: format!(
                "{:?}: got {} expected {}",
                set.keys.addrs[i],
                show(out[i]),
                show(set.expected[i])
            ),
        }),
    }
}

fn show(nh: u32) -> String {
    if nh == NO_ROUTE {
        "no route".to_owned()
    } else {
        nh.to_string()
    }
}

/// Runs the benchmark for one family and prints its figures.
pub fn run<A: RandomAddr + WireForm>(
    family: &str,
    routes: &[Route<A>],
    loaded: &[Loaded<A>],
    opts: &Options,
) -> Result<(), BenchError> {
    println!(
        "\n== {family} lookups: {} routes, {} addresses per set, {} runs, batches of {} ==",
        routes.len(),
        opts.addrs,
        opts.runs,
        opts.batch
    );
    let t = Instant::now();
    let reference = Reference::new(routes);
    let mut rng = Rng::new(opts.seed);
    let mut sets = Vec::new();
    for (name, addrs) in [
        ("inside", addrs::inside(routes, opts.addrs, &mut rng)),
        ("uniform", addrs::uniform(opts.addrs, &mut rng)),
    ] {
        let expected: Vec<u32> = addrs.iter().map(|&a| reference.lookup(a)).collect();
        let hits = expected.iter().filter(|&&nh| nh != NO_ROUTE).count();
        println!(
            "  set {name:8} {:5.1}% of addresses have a route",
            100.0 * hits as f64 / addrs.len() as f64
        );
        sets.push(Set {
            name,
            keys: Keys::new(addrs),
            expected,
        });
    }
    drop(reference);
    println!(
        "  reference answers ready in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let peers: Vec<&dyn Peer<A>> = loaded.iter().map(|l| l.peer.as_ref()).collect();

    // Cross-check every structure on every address, in both modes, before timing anything.
    let mut out = vec![0u32; opts.addrs];
    for peer in &peers {
        for set in &sets {
            if peer.lookup_each(&set.keys, &mut out) {
                check(*peer, set, "single", &out)?;
            }
            peer.lookup_batch(&set.keys, &mut out, opts.batch);
            check(*peer, set, "batch", &out)?;
        }
    }
    println!(
        "  cross-check: every structure gives the reference's next hop for all {} addresses",
        2 * opts.addrs
    );

    println!(
        "\n  {family:5} {:8} {:8} {:10} {:>9} {:>11}",
        "set", "mode", "structure", "Mlookup/s", "fibre/peer"
    );
    for set in &sets {
        for mode in [Mode::Single, Mode::Batch] {
            let mut figures: Vec<Vec<f64>> = vec![Vec::new(); peers.len()];
            for _ in 0..opts.runs {
                for (p, peer) in peers.iter().enumerate() {
                    if let Some(f) = run_once(*peer, set, mode, opts.batch, &mut out) {
                        check(*peer, set, "timed run", &out)?;
                        figures[p].push(f);
                    }
                }
            }
            let medians: Vec<Option<f64>> = figures
                .iter()
                .map(|f| (!f.is_empty()).then(|| median(f)))
                .collect();
            let fibre = peers
                .iter()
                .zip(&medians)
                .find(|(p, _)| p.name() == FIBRE)
                .and_then(|(_, m)| *m);
            let mode_name = match mode {
                Mode::Single => "single".to_owned(),
                Mode::Batch => format!("batch{}", opts.batch),
            };
            for (peer, m) in peers.iter().zip(&medians) {
                match m {
                    Some(m) => println!(
                        "  {family:5} {:8} {mode_name:8} {:10} {m:9.1} {:>11}",
                        set.name,
                        peer.name(),
                        if peer.name() == FIBRE {
                            String::new()
                        } else {
                            ratio(fibre, *m)
                        }
                    ),
                    None => println!(
                        "  {family:5} {:8} {mode_name:8} {:10} {:>9} {:>11}",
                        set.name,
                        peer.name(),
                        "(no API)",
                        ""
                    ),
                }
            }
        }
    }

    print_memory(family, &peers);
    Ok(())
}

/// Memory of each structure holding the full table (see `Memory`); ratios fibre/peer.
fn print_memory<A>(family: &str, peers: &[&dyn Peer<A>]) {
    println!(
        "\n  {family:5} {:10} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "memory", "lookup MiB", "empty MiB", "loaded MiB", "fibre/lookup", "fibre/loaded"
    );
    let fibre = peers.iter().find(|p| p.name() == FIBRE).map(|p| p.memory());
    for peer in peers {
        let m = peer.memory();
        let (r1, r2) = match fibre {
            Some(f) if peer.name() != FIBRE => (
                ratio(Some(f.lookup_bytes as f64), m.lookup_bytes as f64),
                ratio(Some(f.total_bytes as f64), m.total_bytes as f64),
            ),
            _ => (String::new(), String::new()),
        };
        println!(
            "  {family:5} {:10} {:10.1} {:10.1} {:10.1} {r1:>12} {r2:>12}",
            peer.name(),
            mib(m.lookup_bytes),
            mib(m.empty_bytes),
            mib(m.total_bytes),
        );
    }
}
