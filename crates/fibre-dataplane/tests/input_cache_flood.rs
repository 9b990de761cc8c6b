//! A flood of unique keys through the input route cache: every packet misses, full sets
//! evict until the hit rate turns the cache to sampling, and nothing is allocated after the
//! cache was made (a global allocator counts the test thread's allocations while told to:
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

#[test]
fn a_flood_of_unique_keys_evicts_without_allocating() {
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
    let mut c = InputCache::new(CacheConfig {
        mode: Mode::Cache,
        entries: ENTRIES,
    });
    // Unique (source, destination) pairs: every source once per destination block.
    let chunk = |n: u32| -> [InputKey; CHUNK] {
        std::array::from_fn(|i| {
            let x = n * CHUNK as u32 + i as u32;
            InputKey {
                dst: IpAddr::V4(Ipv4Addr::from(0xc612_0000 + (x >> 8) + ((x & 1) << 24))),
                src: IpAddr::V4(Ipv4Addr::from(0x0a00_0002 + (x & 0xff) * 0x100)),
                iif: d0,
                tos: 0,
                mark: 0,
                proto: 17,
                sport: x as u16,
                dport: 53,
                flowlabel: 0,
            }
        })
    };
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
