//! A flood of unique keys through the input route cache: every packet misses, full sets
//! evict until the hit rate turns the cache to sampling, every decision meanwhile is the
//! uncached one, recurring keys turn it back, and nothing is allocated after the cache was
//! made (a global allocator counts the test thread's allocations while told to:
//! the test harness's own thread allocates at times of its choosing).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};

use fibre_dataplane::input_cache::{CacheConfig, InputCache, Mode, CHUNK};
use fibre_fib::build::*;
use fibre_fib::*;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread's allocations count.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

/// Counts an allocation of the thread being watched.
fn count() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract for `layout` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Entries of the cache under test: the flood fills it many times over.
const ENTRIES: usize = 1024;
/// Chunks of unique keys.
const CHUNKS: u32 = 1024;

/// A router with a single-path and a multipath route for the flood; its input link.
fn router() -> (Fib, u32) {
    let mut f = Fib::default();
    let d0 = link(&mut f, "d0", [2, 0, 0, 0, 0, 1]);
    let d1 = link(&mut f, "d1", [2, 0, 0, 0, 0, 2]);
    addr(&mut f, d0, "10.0.0.1", 16);
    addr(&mut f, d1, "10.1.0.1", 24);
    f.route_new(&route("198.18.0.0", 15, &["10.1.0.2"]), ReqFlags::ADD)
        .expect("route");
    f.route_new(
        &route("0.0.0.0", 0, &["10.1.0.2", "10.1.0.3"]),
        ReqFlags::ADD,
    )
    .expect("multipath route");
    (f, d0)
}

/// The cache under test.
fn cache() -> InputCache {
    InputCache::new(CacheConfig {
        mode: Mode::Cache,
        entries: ENTRIES,
    })
}

/// Chunk `n` of unique (source, destination) pairs in on `iif`: every source once per
/// destination block.
fn chunk(n: u32, iif: u32) -> [InputKey; CHUNK] {
    std::array::from_fn(|i| {
        let x = n * CHUNK as u32 + i as u32;
        InputKey {
            dst: IpAddr::V4(Ipv4Addr::from(0xc612_0000 + (x >> 8) + ((x & 1) << 24))),
            src: IpAddr::V4(Ipv4Addr::from(0x0a00_0002 + (x & 0xff) * 0x100)),
            iif,
            tos: 0,
            mark: 0,
            proto: 17,
            sport: x as u16,
            dport: 53,
            flowlabel: 0,
        }
    })
}

/// While the hit rate keeps the cache from probing, every chunk is decided as without the
/// cache; once keys recur, the sampled chunks see the hits and the cache probes again.
#[test]
fn a_cache_that_stopped_probing_decides_as_no_cache_and_probes_again_when_keys_recur() {
    let (f, d0) = router();
    let mut c = cache();
    let mut out = [Err(InputDrop::NoRoute); CHUNK];
    let decides_as_no_cache = |keys: &[InputKey], out: &[Result<InputRoute, InputDrop>]| {
        for (k, r) in keys.iter().zip(out) {
            assert_eq!(*r, f.route_input(k), "{k:?}");
        }
    };
    for n in 0..CHUNKS {
        let keys = chunk(n, d0);
        c.decide(&f, &keys, &mut out);
        decides_as_no_cache(&keys, &out);
    }
    let flood = c.counters();
    // No hit, and only the sampled chunks stored: the cache had stopped probing.
    assert_eq!(flood.hits, 0, "{flood:?}");
    assert!(flood.evictions < flood.misses / 8, "{flood:?}");
    // One chunk of keys over and over: the sampled chunks find the hits within a window's
    // worth of them, and from then on every packet hits.
    let again = chunk(0, d0);
    let mut warm = c.counters();
    for round in 0..CHUNKS * 8 {
        if round == CHUNKS * 7 {
            warm = c.counters();
        }
        c.decide(&f, &again, &mut out);
        decides_as_no_cache(&again, &out);
    }
    let n = c.counters();
    assert_eq!(
        n.hits - warm.hits,
        u64::from(CHUNKS) * CHUNK as u64,
        "{n:?}"
    );
}

#[test]
fn a_flood_of_unique_keys_evicts_without_allocating() {
    let (f, d0) = router();
    let mut c = cache();
    let chunk = |n: u32| chunk(n, d0);
    let mut out = [Err(InputDrop::NoRoute); CHUNK];
    // The first chunk draws what is drawn once per process (hash seeds).
    c.decide(&f, &chunk(0), &mut out);
    COUNTING.with(|c| c.set(true));
    for n in 1..CHUNKS {
        let keys = chunk(n);
        c.decide(&f, &keys, &mut out);
        for (k, r) in keys.iter().zip(&out) {
            assert!(matches!(r, Ok(InputRoute::Forward(_))), "{k:?}: {r:?}");
        }
    }
    COUNTING.with(|c| c.set(false));
    let allocated = ALLOCATIONS.load(Ordering::Relaxed);
    let n = c.counters();
    assert_eq!(allocated, 0, "allocations during the flood");
    assert_eq!(n.hits + n.hinted, 0, "{n:?}");
    assert_eq!(n.misses, u64::from(CHUNKS) * CHUNK as u64, "{n:?}");
    // Full sets evicted; once the hit rate told the cache it does not pay, only the sampled
    // chunks still probed and stored.
    assert!(n.evictions > 0, "{n:?}");
    assert!(n.evictions < n.misses / 8, "{n:?}");
}
