//! What the harness asks of every structure it measures, fibre's and DPDK's alike.
//!
//! Lookups write one `u32` per address (`NO_ROUTE` for a miss) so every answer can be compared
//! with the reference model; the measured loop lives inside the implementation (for DPDK, in C),
//! so the harness adds no per-address call.

use std::fmt;

use crate::table::Addr;

/// Benchmark addresses for one family, in the forms the structures take: host-order integers
/// (fibre) and, for IPv6, 16-byte network-order arrays (DPDK's API); converted once, outside any
/// timed region.
pub struct Keys<A> {
    pub addrs: Vec<A>,
    #[cfg(feature = "dpdk")]
    pub wire: Vec<[u8; 16]>,
}

impl<A: WireForm> Keys<A> {
    pub fn new(addrs: Vec<A>) -> Keys<A> {
        Keys {
            #[cfg(feature = "dpdk")]
            wire: A::wire(&addrs),
            addrs,
        }
    }
}

/// The network-order form a family's DPDK API takes, when it differs from the integer.
pub trait WireForm: Addr {
    #[cfg(feature = "dpdk")]
    fn wire(addrs: &[Self]) -> Vec<[u8; 16]>;
}

impl WireForm for u32 {
    /// rte_lpm and rte_fib take host-order `u32`s, like fibre: no second form.
    #[cfg(feature = "dpdk")]
    fn wire(_addrs: &[u32]) -> Vec<[u8; 16]> {
        Vec::new()
    }
}

impl WireForm for u128 {
    #[cfg(feature = "dpdk")]
    fn wire(addrs: &[u128]) -> Vec<[u8; 16]> {
        addrs.iter().map(|a| a.to_be_bytes()).collect()
    }
}

/// Footprint of a structure holding the full table.
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    /// What lookups read: the lookup tables alone.
    pub lookup_bytes: usize,
    /// Everything the structure allocated, including the rules or RIB that updates need.
    pub total_bytes: usize,
    /// What it allocated when created empty (DPDK preallocates its tables and pools).
    pub empty_bytes: usize,
}

/// A failed insert or remove, from whichever structure.
#[derive(Debug, Clone)]
pub enum UpdateError {
    /// A DPDK call returned a negative errno.
    Dpdk { call: &'static str, errno: i32 },
    /// fibre_lpm refused the update.
    Fibre(fibre_lpm::LpmError),
    /// A removal found no such route (the benchmark only removes routes it loaded).
    NotFound,
}

impl UpdateError {
    /// True when the structure ran out of preallocated room (DPDK's tbl8 groups).
    pub fn is_no_space(&self) -> bool {
        matches!(self, UpdateError::Dpdk { errno, .. } if *errno == ENOSPC)
    }
}

/// Linux's ENOSPC, which DPDK returns when its pool of tbl8 groups is exhausted.
const ENOSPC: i32 = 28;

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateError::Dpdk { call, errno } => {
                write!(f, "{call}: {}", std::io::Error::from_raw_os_error(*errno))
            }
            UpdateError::Fibre(e) => write!(f, "fibre_lpm: {e}"),
            UpdateError::NotFound => f.write_str("no such route"),
        }
    }
}

impl std::error::Error for UpdateError {}

/// A longest-prefix-match structure under test, for addresses of type `A`.
pub trait Peer<A> {
    fn name(&self) -> &'static str;
    fn insert(&mut self, prefix: A, len: u8, next_hop: u32) -> Result<(), UpdateError>;
    fn remove(&mut self, prefix: A, len: u8) -> Result<(), UpdateError>;
    /// One single-address lookup per key. Returns false, writing nothing, when the structure
    /// has no single-address API (rte_fib and rte_fib6 only look up in bulk).
    fn lookup_each(&self, keys: &Keys<A>, out: &mut [u32]) -> bool;
    /// Bulk lookups, `batch` keys per call.
    fn lookup_batch(&self, keys: &Keys<A>, out: &mut [u32], batch: usize);
    /// Called once the table is loaded: the footprint `memory` reports is taken here.
    fn loaded(&mut self);
    fn memory(&self) -> Memory;
}

/// Creates one empty structure sized for the routes it is given (DPDK preallocates). `attempt`
/// counts earlier tries that ran out of preallocated room; each retry grows the allocation.
pub type Maker<A> =
    fn(&[crate::table::Route<A>], attempt: u32) -> Result<Box<dyn Peer<A>>, UpdateError>;
