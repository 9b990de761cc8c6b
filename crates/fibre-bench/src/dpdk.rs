//! DPDK's longest-prefix-match structures as benchmark peers, through `csrc/dpdk_shim.c`:
//! rte_lpm and rte_fib (DIR24_8) for IPv4, rte_lpm6 and rte_fib6 (TRIE) for IPv6, all with 4-byte
//! next hops, the width of fibre's values.
//!
//! EAL runs without hugepages (`--no-huge -m MB --no-pci --no-telemetry --no-shconf`) with one
//! lcore (`--lcores 0@(0-N)`: the calling thread, allowed on every CPU). Without
//! hugetlbfs EAL backs its heap with a memfd of 4 KiB pages, so DPDK's large tables pay TLB misses
//! a hugepage deployment would not (fibre's allocations get 4 KiB pages too unless it asks).
//!
//! Memory, two figures per structure:
//! - lookup tables, computed from the configuration: tbl24 (2^24 entries of 4 bytes) plus every
//!   configured tbl8 group (256 entries of 4 bytes), allocated up front whether used or not;
//! - total, measured: bytes allocated on DPDK's malloc heap (`rte_malloc_get_socket_stats`) just
//!   before the structure is created and again when its table is loaded ([`Peer::loaded`]); this
//!   adds the rule table (rte_lpm, rte_lpm6) or the RIB (rte_fib, rte_fib6) that updates need.
//!   The harness builds one structure at a time, so nothing else allocates in between.

use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_uint, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::peer::{Keys, Maker, Memory, Peer, UpdateError};
use crate::table::{Addr, Route};

/// EAL memory (MiB, no hugepages) unless `FIBRE_BENCH_DPDK_MB` says otherwise: room for the two
/// IPv6 structures of the full table side by side (each ~64 MiB of tbl24 plus ~0.5 GiB of tbl8
/// groups) with margin. Untouched pages cost nothing.
const DEFAULT_EAL_MB: u32 = 3072;

/// tbl8 groups configured beyond what the table needs, as a fraction (1/8) and a floor (256, the
/// count DPDK's l3fwd example configures): the headroom a router keeps for updates.
const TBL8_HEADROOM_DIV: usize = 8;
const TBL8_HEADROOM_MIN: usize = 256;

/// Rule or RIB slots beyond the table's route count, for the same reason.
const RULE_HEADROOM_DIV: usize = 8;

const TBL24_BYTES: usize = (1 << 24) * 4;
const TBL8_GROUP_BYTES: usize = 256 * 4;

#[repr(C)]
struct RteLpm {
    _opaque: [u8; 0],
}
#[repr(C)]
struct RteFib {
    _opaque: [u8; 0],
}
#[repr(C)]
struct RteLpm6 {
    _opaque: [u8; 0],
}
#[repr(C)]
struct RteFib6 {
    _opaque: [u8; 0],
}

extern "C" {
    fn fb_eal_init(mem_mb: c_uint, cpus: c_uint) -> c_int;
    fn fb_heap_allocated() -> usize;
    fn fb_errno() -> c_int;

    fn fb_lpm_create(name: *const c_char, max_rules: u32, number_tbl8s: u32) -> *mut RteLpm;
    fn fb_lpm_free(lpm: *mut RteLpm);
    fn fb_lpm_add(lpm: *mut RteLpm, ip: u32, depth: u8, nh: u32) -> c_int;
    fn fb_lpm_delete(lpm: *mut RteLpm, ip: u32, depth: u8) -> c_int;
    fn fb_lpm_lookup_each(lpm: *const RteLpm, ips: *const u32, out: *mut u32, n: usize);
    fn fb_lpm_lookup_bulk(lpm: *const RteLpm, ips: *const u32, out: *mut u32, n: usize, b: c_uint);

    fn fb_fib_create(name: *const c_char, max_routes: c_int, num_tbl8: u32) -> *mut RteFib;
    fn fb_fib_free(fib: *mut RteFib);
    fn fb_fib_add(fib: *mut RteFib, ip: u32, depth: u8, nh: u32) -> c_int;
    fn fb_fib_delete(fib: *mut RteFib, ip: u32, depth: u8) -> c_int;
    fn fb_fib_lookup_bulk(fib: *mut RteFib, ips: *const u32, out: *mut u32, n: usize, b: c_uint);

    fn fb_lpm6_create(name: *const c_char, max_rules: u32, number_tbl8s: u32) -> *mut RteLpm6;
    fn fb_lpm6_free(lpm: *mut RteLpm6);
    fn fb_lpm6_add(lpm: *mut RteLpm6, ip: *const u8, depth: u8, nh: u32) -> c_int;
    fn fb_lpm6_delete(lpm: *mut RteLpm6, ip: *const u8, depth: u8) -> c_int;
    fn fb_lpm6_lookup_each(lpm: *const RteLpm6, ips: *const [u8; 16], out: *mut u32, n: usize);
    fn fb_lpm6_lookup_bulk(
        lpm: *const RteLpm6,
        ips: *const [u8; 16],
        out: *mut u32,
        n: usize,
        b: c_uint,
    );

    fn fb_fib6_create(name: *const c_char, max_routes: c_int, num_tbl8: u32) -> *mut RteFib6;
    fn fb_fib6_free(fib: *mut RteFib6);
    fn fb_fib6_add(fib: *mut RteFib6, ip: *const u8, depth: u8, nh: u32) -> c_int;
    fn fb_fib6_delete(fib: *mut RteFib6, ip: *const u8, depth: u8) -> c_int;
    fn fb_fib6_lookup_bulk(
        fib: *mut RteFib6,
        ips: *const [u8; 16],
        out: *mut u32,
        n: usize,
        b: c_uint,
    );
}

/// Starts DPDK's EAL once per process; later calls return the first outcome.
pub fn init() -> Result<(), String> {
    static EAL: OnceLock<Result<(), String>> = OnceLock::new();
    EAL.get_or_init(|| {
        let mb = std::env::var("FIBRE_BENCH_DPDK_MB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_EAL_MB);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        // SAFETY: called once (OnceLock), before any other DPDK function.
        let rc = unsafe { fb_eal_init(mb, c_uint::try_from(cpus).unwrap_or(1)) };
        if rc < 0 {
            Err(format!(
                "rte_eal_init: {}",
                std::io::Error::from_raw_os_error(-rc)
            ))
        } else {
            Ok(())
        }
    })
    .clone()
}

fn heap_allocated() -> usize {
    // SAFETY: only reads heap statistics; EAL is initialised before any structure exists.
    unsafe { fb_heap_allocated() }
}

/// DPDK names every structure in a process-wide namespace: each gets a fresh one.
fn unique_name(kind: &str) -> CString {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    CString::new(format!("fb_{kind}_{n}")).expect("generated names have no NUL")
}

fn check(call: &'static str, rc: c_int) -> Result<(), UpdateError> {
    if rc < 0 {
        Err(UpdateError::Dpdk { call, errno: -rc })
    } else {
        Ok(())
    }
}

/// tbl8 groups a 24-bit first level with 8-bit levels below needs for `routes`: one per distinct
/// (24 + 8k)-bit prefix under which a longer route sits.
pub fn tbl8_groups_needed<A: Addr>(routes: &[Route<A>]) -> usize {
    let mut groups = HashSet::new();
    for r in routes {
        let mut level = 24u8;
        while level < r.len {
            groups.insert((level, r.prefix.masked(level)));
            level += 8;
        }
    }
    groups.len()
}

/// Sizes a DPDK structure for `routes`: (rule or RIB slots, tbl8 groups), headroom included.
pub fn sizing<A: Addr>(routes: &[Route<A>]) -> (usize, usize) {
    let tbl8 = tbl8_groups_needed(routes);
    // DPDK refuses a structure with no rule slots at all.
    let rules = routes.len() + routes.len() / RULE_HEADROOM_DIV + 1;
    (
        rules,
        tbl8 + (tbl8 / TBL8_HEADROOM_DIV).max(TBL8_HEADROOM_MIN),
    )
}

fn as_int(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

fn as_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn batch_arg(batch: usize) -> c_uint {
    c_uint::try_from(batch).unwrap_or(c_uint::MAX)
}

/// The footprint bookkeeping every DPDK peer shares (see the module comment).
struct Footprint {
    lookup_bytes: usize,
    heap_before: usize,
    empty_bytes: usize,
    total_bytes: usize,
}

impl Footprint {
    fn start(tbl8_groups: usize) -> Footprint {
        Footprint {
            lookup_bytes: TBL24_BYTES + tbl8_groups * TBL8_GROUP_BYTES,
            heap_before: heap_allocated(),
            empty_bytes: 0,
            total_bytes: 0,
        }
    }

    fn created(mut self) -> Footprint {
        self.empty_bytes = heap_allocated().saturating_sub(self.heap_before);
        self
    }

    fn loaded(&mut self) {
        self.total_bytes = heap_allocated().saturating_sub(self.heap_before);
    }

    fn memory(&self) -> Memory {
        Memory {
            lookup_bytes: self.lookup_bytes,
            total_bytes: self.total_bytes,
            empty_bytes: self.empty_bytes,
        }
    }
}

macro_rules! dpdk_handle {
    ($name:ident, $raw:ty, $free:ident) => {
        /// Owns one DPDK structure; freed on drop.
        pub struct $name {
            raw: *mut $raw,
            footprint: Footprint,
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: `raw` came from the matching create call, is non-null, and is freed once.
                unsafe { $free(self.raw) }
            }
        }
    };
}

dpdk_handle!(Lpm, RteLpm, fb_lpm_free);
dpdk_handle!(Fib, RteFib, fb_fib_free);
dpdk_handle!(Lpm6, RteLpm6, fb_lpm6_free);
dpdk_handle!(Fib6, RteFib6, fb_fib6_free);

fn created<T>(call: &'static str, raw: *mut T) -> Result<*mut T, UpdateError> {
    if raw.is_null() {
        // SAFETY: reads the calling thread's rte_errno, set by the create call that just failed.
        let errno = unsafe { fb_errno() };
        Err(UpdateError::Dpdk { call, errno })
    } else {
        Ok(raw)
    }
}

impl Lpm {
    pub fn new(rules: usize, tbl8_groups: usize) -> Result<Lpm, UpdateError> {
        let footprint = Footprint::start(tbl8_groups);
        let name = unique_name("lpm");
        // SAFETY: `name` is a valid C string for the call; EAL is initialised (see `init`).
        let raw = unsafe { fb_lpm_create(name.as_ptr(), as_u32(rules), as_u32(tbl8_groups)) };
        Ok(Lpm {
            raw: created("rte_lpm_create", raw)?,
            footprint: footprint.created(),
        })
    }
}

impl Peer<u32> for Lpm {
    fn name(&self) -> &'static str {
        "rte_lpm"
    }
    fn insert(&mut self, prefix: u32, len: u8, next_hop: u32) -> Result<(), UpdateError> {
        // SAFETY: `raw` is a live rte_lpm, and `&mut self` excludes concurrent lookups.
        check("rte_lpm_add", unsafe {
            fb_lpm_add(self.raw, prefix, len, next_hop)
        })
    }
    fn remove(&mut self, prefix: u32, len: u8) -> Result<(), UpdateError> {
        // SAFETY: as in `insert`.
        check("rte_lpm_delete", unsafe {
            fb_lpm_delete(self.raw, prefix, len)
        })
    }
    fn lookup_each(&self, keys: &Keys<u32>, out: &mut [u32]) -> bool {
        let n = keys.addrs.len().min(out.len());
        // SAFETY: both arrays hold at least `n` elements; the structure is not being modified.
        unsafe { fb_lpm_lookup_each(self.raw, keys.addrs.as_ptr(), out.as_mut_ptr(), n) };
        true
    }
    fn lookup_batch(&self, keys: &Keys<u32>, out: &mut [u32], batch: usize) {
        let n = keys.addrs.len().min(out.len());
        // SAFETY: as in `lookup_each`.
        unsafe {
            fb_lpm_lookup_bulk(
                self.raw,
                keys.addrs.as_ptr(),
                out.as_mut_ptr(),
                n,
                batch_arg(batch),
            )
        };
    }
    fn loaded(&mut self) {
        self.footprint.loaded();
    }
    fn memory(&self) -> Memory {
        self.footprint.memory()
    }
}

impl Fib {
    pub fn new(routes: usize, tbl8_groups: usize) -> Result<Fib, UpdateError> {
        let footprint = Footprint::start(tbl8_groups);
        let name = unique_name("fib");
        // SAFETY: as in `Lpm::new`.
        let raw = unsafe { fb_fib_create(name.as_ptr(), as_int(routes), as_u32(tbl8_groups)) };
        Ok(Fib {
            raw: created("rte_fib_create", raw)?,
            footprint: footprint.created(),
        })
    }
}

impl Peer<u32> for Fib {
    fn name(&self) -> &'static str {
        "rte_fib"
    }
    fn insert(&mut self, prefix: u32, len: u8, next_hop: u32) -> Result<(), UpdateError> {
        // SAFETY: `raw` is a live rte_fib, and `&mut self` excludes concurrent lookups.
        check("rte_fib_add", unsafe {
            fb_fib_add(self.raw, prefix, len, next_hop)
        })
    }
    fn remove(&mut self, prefix: u32, len: u8) -> Result<(), UpdateError> {
        // SAFETY: as in `insert`.
        check("rte_fib_delete", unsafe {
            fb_fib_delete(self.raw, prefix, len)
        })
    }
    fn lookup_each(&self, _keys: &Keys<u32>, _out: &mut [u32]) -> bool {
        false
    }
    fn lookup_batch(&self, keys: &Keys<u32>, out: &mut [u32], batch: usize) {
        let n = keys.addrs.len().min(out.len());
        // SAFETY: both arrays hold at least `n` elements; rte_fib_lookup_bulk only reads the
        // structure (its pointer is non-const in the prototype alone).
        unsafe {
            fb_fib_lookup_bulk(
                self.raw,
                keys.addrs.as_ptr(),
                out.as_mut_ptr(),
                n,
                batch_arg(batch),
            )
        };
    }
    fn loaded(&mut self) {
        self.footprint.loaded();
    }
    fn memory(&self) -> Memory {
        self.footprint.memory()
    }
}

impl Lpm6 {
    pub fn new(rules: usize, tbl8_groups: usize) -> Result<Lpm6, UpdateError> {
        let footprint = Footprint::start(tbl8_groups);
        let name = unique_name("lpm6");
        // SAFETY: as in `Lpm::new`.
        let raw = unsafe { fb_lpm6_create(name.as_ptr(), as_u32(rules), as_u32(tbl8_groups)) };
        Ok(Lpm6 {
            raw: created("rte_lpm6_create", raw)?,
            footprint: footprint.created(),
        })
    }
}

impl Peer<u128> for Lpm6 {
    fn name(&self) -> &'static str {
        "rte_lpm6"
    }
    fn insert(&mut self, prefix: u128, len: u8, next_hop: u32) -> Result<(), UpdateError> {
        let ip = prefix.to_be_bytes();
        // SAFETY: `raw` is a live rte_lpm6, `ip` is 16 bytes, `&mut self` excludes lookups.
        check("rte_lpm6_add", unsafe {
            fb_lpm6_add(self.raw, ip.as_ptr(), len, next_hop)
        })
    }
    fn remove(&mut self, prefix: u128, len: u8) -> Result<(), UpdateError> {
        let ip = prefix.to_be_bytes();
        // SAFETY: as in `insert`.
        check("rte_lpm6_delete", unsafe {
            fb_lpm6_delete(self.raw, ip.as_ptr(), len)
        })
    }
    fn lookup_each(&self, keys: &Keys<u128>, out: &mut [u32]) -> bool {
        let n = keys.wire.len().min(out.len());
        // SAFETY: both arrays hold at least `n` elements; the structure is not being modified.
        unsafe { fb_lpm6_lookup_each(self.raw, keys.wire.as_ptr(), out.as_mut_ptr(), n) };
        true
    }
    fn lookup_batch(&self, keys: &Keys<u128>, out: &mut [u32], batch: usize) {
        let n = keys.wire.len().min(out.len());
        // SAFETY: as in `lookup_each`.
        unsafe {
            fb_lpm6_lookup_bulk(
                self.raw,
                keys.wire.as_ptr(),
                out.as_mut_ptr(),
                n,
                batch_arg(batch),
            )
        };
    }
    fn loaded(&mut self) {
        self.footprint.loaded();
    }
    fn memory(&self) -> Memory {
        self.footprint.memory()
    }
}

impl Fib6 {
    pub fn new(routes: usize, tbl8_groups: usize) -> Result<Fib6, UpdateError> {
        let footprint = Footprint::start(tbl8_groups);
        let name = unique_name("fib6");
        // SAFETY: as in `Lpm::new`.
        let raw = unsafe { fb_fib6_create(name.as_ptr(), as_int(routes), as_u32(tbl8_groups)) };
        Ok(Fib6 {
            raw: created("rte_fib6_create", raw)?,
            footprint: footprint.created(),
        })
    }
}

impl Peer<u128> for Fib6 {
    fn name(&self) -> &'static str {
        "rte_fib6"
    }
    fn insert(&mut self, prefix: u128, len: u8, next_hop: u32) -> Result<(), UpdateError> {
        let ip = prefix.to_be_bytes();
        // SAFETY: `raw` is a live rte_fib6, `ip` is 16 bytes, `&mut self` excludes lookups.
        check("rte_fib6_add", unsafe {
            fb_fib6_add(self.raw, ip.as_ptr(), len, next_hop)
        })
    }
    fn remove(&mut self, prefix: u128, len: u8) -> Result<(), UpdateError> {
        let ip = prefix.to_be_bytes();
        // SAFETY: as in `insert`.
        check("rte_fib6_delete", unsafe {
            fb_fib6_delete(self.raw, ip.as_ptr(), len)
        })
    }
    fn lookup_each(&self, _keys: &Keys<u128>, _out: &mut [u32]) -> bool {
        false
    }
    fn lookup_batch(&self, keys: &Keys<u128>, out: &mut [u32], batch: usize) {
        let n = keys.wire.len().min(out.len());
        // SAFETY: both arrays hold at least `n` elements; rte_fib6_lookup_bulk only reads the
        // structure (its pointer is non-const in the prototype alone).
        unsafe {
            fb_fib6_lookup_bulk(
                self.raw,
                keys.wire.as_ptr(),
                out.as_mut_ptr(),
                n,
                batch_arg(batch),
            )
        };
    }
    fn loaded(&mut self) {
        self.footprint.loaded();
    }
    fn memory(&self) -> Memory {
        self.footprint.memory()
    }
}

/// Sizes a structure for `routes` on try number `attempt` (0 first): each retry after running
/// out of tbl8 groups configures one more multiple of the estimate (rte_fib6's trie needs more
/// groups than one per (24 + 8k)-bit prefix, since it also splits ranges at route edges).
fn sized<A: Addr>(routes: &[Route<A>], attempt: u32) -> (usize, usize) {
    let (rules, tbl8) = sizing(routes);
    (rules, tbl8 * (attempt as usize + 1))
}

/// The IPv4 peers' makers, in the order they are reported.
pub fn makers_v4() -> Vec<Maker<u32>> {
    vec![
        |routes, attempt| {
            let (rules, tbl8) = sized(routes, attempt);
            Ok(Box::new(Lpm::new(rules, tbl8)?))
        },
        |routes, attempt| {
            let (rules, tbl8) = sized(routes, attempt);
            Ok(Box::new(Fib::new(rules, tbl8)?))
        },
    ]
}

/// The IPv6 peers' makers, in the order they are reported.
pub fn makers_v6() -> Vec<Maker<u128>> {
    vec![
        |routes, attempt| {
            let (rules, tbl8) = sized(routes, attempt);
            Ok(Box::new(Lpm6::new(rules, tbl8)?))
        },
        |routes, attempt| {
            let (rules, tbl8) = sized(routes, attempt);
            Ok(Box::new(Fib6::new(rules, tbl8)?))
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbl8_groups_count_each_8_bit_level_under_a_longer_route_once() {
        let r = |prefix: u128, len| Route {
            prefix,
            len,
            next_hop: 0,
        };
        let base = 0x2001_0db8u128 << 96;
        // /32 needs the group below its /24; a /48 beside it adds the /32 and /40 groups; a
        // second /48 in the same /40 adds nothing; a /24 or shorter needs none.
        let routes = [
            r(base, 32),
            r(base, 48),
            r(base | (1 << 80), 48),
            r(base, 24),
        ];
        assert_eq!(tbl8_groups_needed(&routes), 3);
        let (rules, tbl8) = sizing(&routes);
        assert_eq!((rules, tbl8), (4 + 1, 3 + TBL8_HEADROOM_MIN));
    }
}
