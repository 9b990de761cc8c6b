//! fibre's own structures (`fibre_lpm::v4::Lpm4`, `fibre_lpm::v6::Lpm6`) as benchmark entries,
//! driven exactly like the DPDK peers: single lookups call `lookup` once per address, batches call
//! `lookup_batch` on consecutive slices of `batch` addresses.

use fibre_lpm::v4::Lpm4;
use fibre_lpm::v6::Lpm6;

use crate::peer::{Keys, Maker, Memory, Peer, UpdateError};
use crate::stats::{median, thread_cpu};
use crate::table::Route;
use crate::{BenchError, FIBRE, NO_ROUTE};

macro_rules! fibre_peer {
    ($name:ident, $lpm:ty, $addr:ty) => {
        /// fibre's structure for this family, with its size when empty.
        pub struct $name {
            lpm: $lpm,
            empty_bytes: usize,
        }

        impl $name {
            fn new() -> $name {
                let lpm = <$lpm>::new();
                $name {
                    empty_bytes: lpm.memory_bytes(),
                    lpm,
                }
            }
        }

        impl Peer<$addr> for $name {
            fn name(&self) -> &'static str {
                FIBRE
            }
            fn insert(&mut self, prefix: $addr, len: u8, next_hop: u32) -> Result<(), UpdateError> {
                self.lpm
                    .insert(prefix, len, next_hop)
                    .map(drop)
                    .map_err(UpdateError::Fibre)
            }
            fn remove(&mut self, prefix: $addr, len: u8) -> Result<(), UpdateError> {
                self.lpm
                    .remove(prefix, len)
                    .map(drop)
                    .ok_or(UpdateError::NotFound)
            }
            fn lookup_each(&self, keys: &Keys<$addr>, out: &mut [u32]) -> bool {
                for (o, &a) in out.iter_mut().zip(&keys.addrs) {
                    *o = self.lpm.lookup(a).unwrap_or(NO_ROUTE);
                }
                true
            }
            fn lookup_batch(&self, keys: &Keys<$addr>, out: &mut [u32], batch: usize) {
                for (a, o) in keys.addrs.chunks(batch).zip(out.chunks_mut(batch)) {
                    self.lpm.lookup_batch(a, o);
                }
            }
            fn loaded(&mut self) {}
            fn memory(&self) -> Memory {
                Memory {
                    lookup_bytes: self.lpm.lookup_bytes(),
                    total_bytes: self.lpm.memory_bytes(),
                    empty_bytes: self.empty_bytes,
                }
            }
        }
    };
}

fibre_peer!(Fibre4, Lpm4, u32);
fibre_peer!(Fibre6, Lpm6, u128);

pub fn maker_v4() -> Maker<u32> {
    |_, _| Ok(Box::new(Fibre4::new()))
}

pub fn maker_v6() -> Maker<u128> {
    |_, _| Ok(Box::new(Fibre6::new()))
}

/// Median CPU seconds of `runs` whole-table builds through `from_routes` (the bulk path a
/// control plane takes when it loads a table at start-up), for the build table.
pub fn bulk_build_secs<A: Copy, T>(
    routes: &[Route<A>],
    runs: usize,
    build: impl Fn(&[Route<A>]) -> Result<T, fibre_lpm::LpmError>,
) -> Result<f64, BenchError> {
    let mut secs = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = thread_cpu();
        let built = build(routes).map_err(|e| BenchError::Update {
            peer: FIBRE,
            route: "from_routes(full table)".to_owned(),
            err: UpdateError::Fibre(e),
        })?;
        secs.push(thread_cpu().saturating_sub(t).as_secs_f64());
        drop(built);
    }
    Ok(median(&secs))
}

pub fn from_routes_v4(routes: &[Route<u32>]) -> Result<Lpm4, fibre_lpm::LpmError> {
    Lpm4::from_routes(routes.iter().map(|r| (r.prefix, r.len, r.next_hop)))
}

pub fn from_routes_v6(routes: &[Route<u128>]) -> Result<Lpm6, fibre_lpm::LpmError> {
    Lpm6::from_routes(routes.iter().map(|r| (r.prefix, r.len, r.next_hop)))
}
