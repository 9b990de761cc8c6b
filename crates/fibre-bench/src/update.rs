//! The build benchmark's figures: the build rate measured while loading (see `load`), fibre's
//! bulk build (`from_routes`) beside it, and, on the
//! loaded structure, single-route update latency: a route drawn from the table is removed and
//! added back, each call timed on its own.

use std::time::Instant;

use crate::addrs::Rng;
use crate::load::Loaded;
use crate::stats::{median, percentile, ratio};
use crate::table::Route;
use crate::{BenchError, FIBRE};

pub struct Options {
    /// Builds per structure for the build-rate median (slow builds are measured once).
    pub builds: usize,
    pub updates: usize,
    pub seed: u64,
}

struct Figures {
    name: &'static str,
    builds: usize,
    routes_per_s: f64,
    remove_ns: Vec<f64>,
    insert_ns: Vec<f64>,
}

pub fn run<A: Copy + std::fmt::Debug>(
    family: &str,
    routes: &[Route<A>],
    loaded: &mut [Loaded<A>],
    fibre_bulk_secs: Option<f64>,
    opts: &Options,
) -> Result<(), BenchError> {
    println!(
        "\n== {family} build: {} routes inserted one by one in file order; {} single-route updates ==",
        routes.len(),
        opts.updates
    );
    let mut all = Vec::new();
    for l in loaded.iter_mut() {
        let name = l.peer.name();
        let mut rng = Rng::new(opts.seed);
        let mut remove_ns = Vec::with_capacity(opts.updates);
        let mut insert_ns = Vec::with_capacity(opts.updates);
        let started = Instant::now();
        for i in 0..opts.updates {
            let r = routes[rng.below(routes.len())];
            let upd = |e| BenchError::Update {
                peer: name,
                route: format!("{r:?}"),
                err: e,
            };
            let t0 = Instant::now();
            l.peer.remove(r.prefix, r.len).map_err(upd)?;
            let t1 = Instant::now();
            l.peer.insert(r.prefix, r.len, r.next_hop).map_err(upd)?;
            let t2 = Instant::now();
            remove_ns.push((t1 - t0).as_nanos() as f64);
            insert_ns.push((t2 - t1).as_nanos() as f64);
            if i % 1024 == 0 && started.elapsed().as_secs() >= 10 && i > 0 {
                eprintln!(
                    "  {name} updates: {i}/{} after {} s",
                    opts.updates,
                    started.elapsed().as_secs()
                );
            }
        }
        all.push(Figures {
            name,
            builds: l.build_secs.len(),
            routes_per_s: l.routes_per_s(routes.len()),
            remove_ns,
            insert_ns,
        });
    }

    let fibre = all.iter().find(|f| f.name == FIBRE).map(|f| f.routes_per_s);
    println!(
        "\n  {family:5} {:10} {:>6} {:>10} {:>11} {:>10} {:>10} {:>10} {:>10}",
        "structure",
        "builds",
        "Mroutes/s",
        "fibre/peer",
        "del med ns",
        "del p99 ns",
        "add med ns",
        "add p99 ns"
    );
    for f in &all {
        println!(
            "  {family:5} {:10} {:6} {:10.3} {:>11} {:10.0} {:10.0} {:10.0} {:10.0}",
            f.name,
            f.builds,
            f.routes_per_s / 1e6,
            if f.name == FIBRE {
                String::new()
            } else {
                ratio(fibre, f.routes_per_s)
            },
            median(&f.remove_ns),
            percentile(&f.remove_ns, 99.0),
            median(&f.insert_ns),
            percentile(&f.insert_ns, 99.0),
        );
    }
    let Some(bulk_secs) = fibre_bulk_secs else {
        return Ok(());
    };
    let bulk = routes.len() as f64 / bulk_secs;
    println!(
        "  {family:5} {:10} {:>6} {:10.3}   (fibre_lpm from_routes: the whole table in one call)",
        "fibre bulk",
        opts.builds,
        bulk / 1e6
    );
    for f in all.iter().filter(|f| f.name != FIBRE) {
        println!(
            "  {family:5} {:10} vs {:10} {:>9}",
            "fibre bulk",
            f.name,
            ratio(Some(bulk), f.routes_per_s)
        );
    }
    Ok(())
}
