//! fibre-bench: fibre's longest-prefix-match structures side by side with DPDK's (rte_lpm,
//! rte_fib, rte_lpm6, rte_fib6; cargo feature `dpdk`) and with the Linux kernel, and fibre's
//! forwarding pipeline beside the kernel's forwarding, on the real 2026 Internet table
//! (`../shared/data/rib-2026-06.tsv.gz`, see crates/fibre-bench/README.md).
//!
//! ```text
//! fibre-bench [lookup|build|kernel|all|forward]... [-4|-6] [--addrs N] [--runs N] [--batch N]
//!             [--build-runs N] [--updates N] [--seed N] [--only NAME,...]
//!             [--frames N] [--batches N,...] [--update-rate N] [--publish-every N] [--no-kernel]
//! ```
//! Every figure is printed beside the peer's with the ratio fibre/peer; every lookup answer is
//! checked against a naive reference model before any figure is trusted.

mod addrs;
mod cache;
#[cfg(feature = "dpdk")]
mod dpdk;
mod encap;
mod fibre;
mod forward;
mod frames;
mod kernel;
mod kforward;
mod load;
mod lookup;
mod peer;
mod reference;
mod stats;
mod sys;
mod table;
mod update;

use std::fmt;
use std::process::ExitCode;
use std::time::Instant;

use fibre_dataplane::pipeline::VECTOR;
use peer::{Maker, UpdateError};

/// A lookup's answer when no route matches (fibre_lpm's `NO_ROUTE`).
pub const NO_ROUTE: u32 = u32::MAX;

/// The name fibre's structures report; ratios are taken against the row with this name.
pub const FIBRE: &str = "fibre";

#[derive(Debug)]
pub enum BenchError {
    Usage(String),
    Create(String),
    Update {
        peer: &'static str,
        route: String,
        err: UpdateError,
    },
    Mismatch {
        peer: &'static str,
        what: String,
        count: usize,
        first: String,
    },
    Kernel(String),
    Forward(String),
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Usage(m) => write!(f, "{m}\n{USAGE}"),
            BenchError::Create(m) => write!(f, "cannot create a structure: {m}"),
            BenchError::Update { peer, route, err } => write!(f, "{peer}: update {route} failed: {err}"),
            BenchError::Mismatch { peer, what, count, first } => write!(
                f,
                "{peer} disagrees with the reference model on {count} addresses ({what}); first: {first}"
            ),
            BenchError::Kernel(m) => write!(f, "kernel benchmark: {m}"),
            BenchError::Forward(m) => write!(f, "forwarding benchmark: {m}"),
        }
    }
}

const USAGE: &str =
    "usage: fibre-bench [lookup|build|kernel|all|forward|cache|encap]... [-4|-6] [--addrs N] [--runs N] \
[--batch N] [--build-runs N] [--updates N] [--seed N] [--only fibre,rte_fib,...] \
[--frames N] [--batches N,...] [--update-rate N] [--publish-every N] [--no-kernel] [--segments N,...]";

/// Addresses per lookup set: 2^21 keeps a set (8 MiB of IPv4 keys, 48 MiB of IPv6 keys and
/// results) far beyond the caches, so lookups cannot be served from cached answers, while a pass
/// stays around 10-50 ms.
const DEFAULT_ADDRS: usize = 1 << 21;
/// Timed runs per figure; the median is reported.
const DEFAULT_RUNS: usize = 9;
/// DPDK's customary burst size.
const DEFAULT_BATCH: usize = 64;
const DEFAULT_BUILD_RUNS: usize = 3;
const DEFAULT_UPDATES: usize = 10_000;
const DEFAULT_SEED: u64 = 0x00f1_b4e0;
/// Frames per forwarding pass: 64 MiB of frames to as many destinations, far beyond the
/// caches, and a pass of about a second at the kernel's speed.
const DEFAULT_FRAMES: usize = 1 << 20;
/// Timed forwarding runs (each runs every batch size idle, the LPM alone, and with the
/// writer; the kernel's forwarded and baseline passes).
const DEFAULT_FORWARD_RUNS: usize = 5;
/// Frames of each of the cache benchmark's workloads: enough for every key of the seed
/// workload's queue to recur a hundred times.
const DEFAULT_CACHE_FRAMES: usize = 1 << 19;
/// Frames per pass of the encapsulation benchmark: 64k frames of 78 bytes (5 MiB), beyond
/// the L2 cache, a pass of tens of milliseconds.
const DEFAULT_ENCAP_FRAMES: usize = 1 << 16;
/// The most segments `--segments` takes: an SRH of 64 segments (1 KiB) and its packet still
/// fit the pipeline's 2 KiB frames.
const MAX_SEGMENTS: usize = 64;
/// The issue's segment counts for the encapsulation benchmark.
const DEFAULT_SEGMENTS: std::ops::RangeInclusive<usize> = 1..=24;
/// The issue's batch sizes (VPP's and DPDK's customary vectors).
const DEFAULT_BATCHES: [usize; 3] = [32, 64, 256];
/// The issue's update rate for the writer.
const DEFAULT_UPDATE_RATE: u64 = 100_000;
/// Updates per publish: one publish per millisecond at 100k updates/s, as a routing daemon's
/// netlink batches would arrive.
const DEFAULT_PUBLISH_EVERY: usize = 100;

struct Args {
    lookup: bool,
    build: bool,
    kernel: bool,
    forward: bool,
    cache: bool,
    encap: bool,
    v4: bool,
    v6: bool,
    /// Structures to run (by name), when not all.
    only: Option<Vec<String>>,
    lookup_opts: lookup::Options,
    update_opts: update::Options,
    forward_opts: forward::Options,
    cache_opts: cache::Options,
    encap_opts: encap::Options,
}

fn parse_args() -> Result<Args, BenchError> {
    let mut args = Args {
        lookup: false,
        build: false,
        kernel: false,
        forward: false,
        cache: false,
        encap: false,
        v4: true,
        v6: true,
        only: None,
        lookup_opts: lookup::Options {
            addrs: DEFAULT_ADDRS,
            runs: DEFAULT_RUNS,
            batch: DEFAULT_BATCH,
            seed: DEFAULT_SEED,
        },
        update_opts: update::Options {
            builds: DEFAULT_BUILD_RUNS,
            updates: DEFAULT_UPDATES,
            seed: DEFAULT_SEED,
        },
        forward_opts: forward::Options {
            frames: DEFAULT_FRAMES,
            runs: DEFAULT_FORWARD_RUNS,
            batches: DEFAULT_BATCHES.to_vec(),
            update_rate: DEFAULT_UPDATE_RATE,
            publish_every: DEFAULT_PUBLISH_EVERY as u64,
            seed: DEFAULT_SEED,
            kernel: true,
        },
        cache_opts: cache::Options {
            frames: DEFAULT_CACHE_FRAMES,
            runs: DEFAULT_FORWARD_RUNS,
            seed: DEFAULT_SEED,
            only: None,
        },
        encap_opts: encap::Options {
            frames: DEFAULT_ENCAP_FRAMES,
            runs: DEFAULT_FORWARD_RUNS,
            segments: DEFAULT_SEGMENTS.collect(),
        },
    };
    let mut it = std::env::args().skip(1);
    let mut any = false;
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> Result<usize, BenchError> {
            it.next()
                .and_then(|v| v.parse().ok())
                .filter(|&v: &usize| v > 0)
                .ok_or_else(|| BenchError::Usage(format!("{name} needs a positive number")))
        };
        match a.as_str() {
            "lookup" => (args.lookup, any) = (true, true),
            "build" => (args.build, any) = (true, true),
            "kernel" => (args.kernel, any) = (true, true),
            "forward" => (args.forward, any) = (true, true),
            "cache" => (args.cache, any) = (true, true),
            "encap" => (args.encap, any) = (true, true),
            "--segments" => {
                let list = it
                    .next()
                    .ok_or_else(|| BenchError::Usage("--segments needs counts".into()))?;
                args.encap_opts.segments = list
                    .split(',')
                    .map(|n| n.parse().ok().filter(|n| (1..=MAX_SEGMENTS).contains(n)))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or_else(|| {
                        BenchError::Usage(format!("--segments takes counts 1 to {MAX_SEGMENTS}"))
                    })?;
            }
            "all" => {
                (args.lookup, args.build, args.kernel, any) = (true, true, true, true);
            }
            "-4" => (args.v4, args.v6) = (true, false),
            "-6" => (args.v4, args.v6) = (false, true),
            "--addrs" => args.lookup_opts.addrs = num("--addrs")?,
            "--runs" => {
                let n = num("--runs")?;
                args.lookup_opts.runs = n;
                args.forward_opts.runs = n;
                args.cache_opts.runs = n;
                args.encap_opts.runs = n;
            }
            "--frames" => {
                let n = num("--frames")?;
                args.forward_opts.frames = n;
                args.cache_opts.frames = n;
                args.encap_opts.frames = n;
            }
            "--update-rate" => args.forward_opts.update_rate = num("--update-rate")? as u64,
            "--publish-every" => args.forward_opts.publish_every = num("--publish-every")? as u64,
            "--no-kernel" => args.forward_opts.kernel = false,
            "--batches" => {
                let list = it
                    .next()
                    .ok_or_else(|| BenchError::Usage("--batches needs sizes".into()))?;
                let sizes: Option<Vec<usize>> = list
                    .split(',')
                    .map(|b| b.parse().ok().filter(|&b| b > 0 && b <= VECTOR))
                    .collect();
                args.forward_opts.batches = sizes.ok_or_else(|| {
                    BenchError::Usage(format!("--batches needs sizes from 1 to {VECTOR}"))
                })?;
            }
            "--batch" => args.lookup_opts.batch = num("--batch")?,
            "--build-runs" => args.update_opts.builds = num("--build-runs")?,
            "--updates" => args.update_opts.updates = num("--updates")?,
            "--seed" => {
                let s = num("--seed")? as u64;
                args.lookup_opts.seed = s;
                args.update_opts.seed = s;
                args.forward_opts.seed = s;
                args.cache_opts.seed = s;
            }
            "--only" => {
                let list = it
                    .next()
                    .ok_or_else(|| BenchError::Usage("--only needs names".into()))?;
                args.only = Some(list.split(',').map(str::to_owned).collect());
                args.cache_opts.only.clone_from(&args.only);
            }
            "-h" | "--help" => return Err(BenchError::Usage(String::new())),
            other => return Err(BenchError::Usage(format!("unknown argument {other:?}"))),
        }
    }
    if !any {
        (args.lookup, args.build, args.kernel) = (true, true, true);
    }
    Ok(args)
}

/// The IPv4 structures under test, fibre's first.
fn makers_v4() -> Result<Vec<Maker<u32>>, BenchError> {
    #[allow(unused_mut)]
    let mut makers: Vec<Maker<u32>> = vec![fibre::maker_v4()];
    #[cfg(feature = "dpdk")]
    {
        dpdk::init().map_err(BenchError::Create)?;
        makers.extend(dpdk::makers_v4());
    }
    Ok(makers)
}

/// The IPv6 structures under test, fibre's first.
fn makers_v6() -> Result<Vec<Maker<u128>>, BenchError> {
    #[allow(unused_mut)]
    let mut makers: Vec<Maker<u128>> = vec![fibre::maker_v6()];
    #[cfg(feature = "dpdk")]
    {
        dpdk::init().map_err(BenchError::Create)?;
        makers.extend(dpdk::makers_v6());
    }
    Ok(makers)
}

fn run(args: &Args, table: &table::Table) -> Result<(), BenchError> {
    if !cfg!(feature = "dpdk") {
        println!("DPDK peers not built: run with --features dpdk (crates/fibre-bench/run.sh does)");
    }
    if args.lookup || args.build {
        let builds = if args.build {
            args.update_opts.builds
        } else {
            1
        };
        if args.v4 {
            let mut loaded = load::load_all(
                "IPv4",
                &table.v4,
                &makers_v4()?,
                builds,
                args.only.as_deref(),
            )?;
            if args.lookup {
                lookup::run("IPv4", &table.v4, &loaded, &args.lookup_opts)?;
            }
            if args.build {
                let bulk = fibre::bulk_build_secs(&table.v4, builds, fibre::from_routes_v4)?;
                update::run(
                    "IPv4",
                    &table.v4,
                    &mut loaded,
                    Some(bulk),
                    &args.update_opts,
                )?;
            }
        }
        if args.v6 {
            let mut loaded = load::load_all(
                "IPv6",
                &table.v6,
                &makers_v6()?,
                builds,
                args.only.as_deref(),
            )?;
            if args.lookup {
                lookup::run("IPv6", &table.v6, &loaded, &args.lookup_opts)?;
            }
            if args.build {
                let bulk = fibre::bulk_build_secs(&table.v6, builds, fibre::from_routes_v6)?;
                update::run(
                    "IPv6",
                    &table.v6,
                    &mut loaded,
                    Some(bulk),
                    &args.update_opts,
                )?;
            }
        }
    }
    if args.kernel {
        kernel::run(table, args.v4, args.v6, kernel::fibre_binary().as_deref())?;
    }
    if args.forward {
        if args.v4 {
            forward::run(&table.v4, &args.forward_opts)?;
        }
        if args.v6 {
            forward::run(&table.v6, &args.forward_opts)?;
        }
    }
    if args.cache {
        if args.v4 {
            cache::run(&table.v4, &args.cache_opts)?;
        }
        if args.v6 {
            cache::run(&table.v6, &args.cache_opts)?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    // The encapsulation benchmark builds its own small router: no table to read.
    if args.encap {
        if let Err(e) = encap::run(&args.encap_opts) {
            eprintln!("fibre-bench: {e}");
            return ExitCode::FAILURE;
        }
        if !(args.lookup || args.build || args.kernel || args.forward || args.cache) {
            return ExitCode::SUCCESS;
        }
    }
    let Some(path) = table::locate() else {
        println!(
            "fibre-bench: skipped: {} not found (set FIBRE_DATA to the file or its directory)",
            table::RIB_FILE
        );
        return ExitCode::SUCCESS;
    };
    let t = Instant::now();
    let table = match table::load(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("fibre-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "table {}: {} IPv4 + {} IPv6 routes, next hop = asn % {}, read in {:.1} s",
        path.display(),
        table.v4.len(),
        table.v6.len(),
        table::NEXT_HOPS,
        t.elapsed().as_secs_f64()
    );
    match run(&args, &table) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fibre-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
