//! Loading the table into each structure under test: route by route, in file order (family,
//! address, prefix length), the way a control plane replays a RIB. The load is timed (thread CPU
//! time, see `stats::thread_cpu`), so it
//! doubles as the build-rate measurement; a structure whose load is quick is built again
//! (`builds` times in all) for a median, a slow one (rte_lpm: its rule table is searched linearly
//! on every add, so its load is quadratic) is measured on its one load.

use std::time::Instant;

use crate::peer::{Maker, Peer};
use crate::stats::{median, thread_cpu};
use crate::table::Route;
use crate::BenchError;

/// A load slower than this is not repeated for the build-rate median.
const REPEAT_BELOW_SECS: f64 = 5.0;

/// How often a long load reports progress.
const PROGRESS_EVERY_SECS: f64 = 10.0;

/// Retries with more preallocated room after a DPDK structure runs out of it.
const MAX_ATTEMPTS: u32 = 4;

/// A loaded structure and how long its builds took.
pub struct Loaded<A> {
    pub peer: Box<dyn Peer<A>>,
    pub build_secs: Vec<f64>,
}

impl<A> Loaded<A> {
    pub fn routes_per_s(&self, routes: usize) -> f64 {
        routes as f64 / median(&self.build_secs)
    }
}

/// One build: the structure, its insertion time (s) and the try that succeeded (see `Maker`).
struct Build<A> {
    peer: Box<dyn Peer<A>>,
    secs: f64,
    attempt: u32,
}

/// Builds one structure from `make` with every route, starting at try `attempt`.
fn build_once<A: Copy + std::fmt::Debug>(
    make: Maker<A>,
    routes: &[Route<A>],
    mut attempt: u32,
) -> Result<Build<A>, BenchError> {
    'retry: loop {
        let mut peer = make(routes, attempt).map_err(|e| BenchError::Create(e.to_string()))?;
        let t = thread_cpu();
        let wall = Instant::now();
        let mut last_report = 0.0;
        for (i, r) in routes.iter().enumerate() {
            if let Err(err) = peer.insert(r.prefix, r.len, r.next_hop) {
                if err.is_no_space() && attempt + 1 < MAX_ATTEMPTS {
                    attempt += 1;
                    eprintln!(
                        "  {} ran out of tbl8 groups at route {i}: rebuilding larger (try {})",
                        peer.name(),
                        attempt + 1
                    );
                    continue 'retry;
                }
                return Err(BenchError::Update {
                    peer: peer.name(),
                    route: format!("{r:?}"),
                    err,
                });
            }
            if i % 4096 == 0 {
                let secs = wall.elapsed().as_secs_f64();
                if secs - last_report >= PROGRESS_EVERY_SECS {
                    last_report = secs;
                    eprintln!(
                        "  {} loading: {i}/{} routes after {secs:.0} s",
                        peer.name(),
                        routes.len()
                    );
                }
            }
        }
        let secs = thread_cpu().saturating_sub(t).as_secs_f64();
        peer.loaded();
        return Ok(Build {
            peer,
            secs,
            attempt,
        });
    }
}

/// Loads every structure, one at a time (DPDK's heap accounting needs that), and prints how long
/// each took and what it occupies.
pub fn load_all<A: Copy + std::fmt::Debug>(
    family: &str,
    routes: &[Route<A>],
    makers: &[Maker<A>],
    builds: usize,
    only: Option<&[String]>,
) -> Result<Vec<Loaded<A>>, BenchError> {
    let mut all = Vec::new();
    for &make in makers {
        if let Some(only) = only {
            // Creating an empty structure to learn its name is cheap next to loading it.
            let name = make(&[], 0)
                .map_err(|e| BenchError::Create(e.to_string()))?
                .name();
            if !only.iter().any(|o| o == name) {
                continue;
            }
        }
        let Build {
            mut peer,
            secs,
            attempt,
        } = build_once(make, routes, 0)?;
        let mut build_secs = vec![secs];
        if secs < REPEAT_BELOW_SECS {
            for _ in 1..builds {
                // Free the previous build first: full-table DPDK structures are large.
                drop(peer);
                let again = build_once(make, routes, attempt)?;
                build_secs.push(again.secs);
                peer = again.peer;
            }
        }
        eprintln!(
            "  {family} {:10} loaded: {} build(s), median {:.2} s",
            peer.name(),
            build_secs.len(),
            median(&build_secs)
        );
        all.push(Loaded { peer, build_secs });
    }
    Ok(all)
}
