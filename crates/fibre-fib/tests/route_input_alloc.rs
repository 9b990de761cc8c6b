//! `Fib::route_input` is the data plane's per-packet call: it must not allocate, whatever
//! path a packet takes (forwarded through a multipath route with strict reverse-path
//! filtering, delivered locally, rejected, IPv6), nor must `Fib::route_input_batch`. A
//! counting global allocator checks it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use fibre_fib::*;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `layout` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address literal")
}

fn link(f: &mut Fib, name: &str, addrs: &[(&str, u8)]) -> u32 {
    f.link_new(
        &Link {
            ifname: Some(name.into()),
            kind: Some(LinkKind::Dummy),
            flags: iff::UP,
            change: iff::UP,
            ..Default::default()
        },
        ReqFlags::ADD,
    )
    .expect("link");
    let idx = f.link_index(name).expect("index");
    for &(a, len) in addrs {
        f.addr_new(&Address::new(idx, ip(a), len), ReqFlags::ADD)
            .expect("address");
    }
    idx
}

fn route(dst: &str, len: u8, hops: &[(&str, u32)]) -> Route {
    let addr = ip(dst);
    let mut r = Route::new(Family::of(&addr), Prefix { addr, len });
    r.table = table::MAIN;
    r.multipath = hops
        .iter()
        .map(|&(gw, oif)| NextHop {
            gateway: Some(ip(gw)),
            oif,
            ..Default::default()
        })
        .collect();
    r
}

#[test]
fn route_input_does_not_allocate() {
    let mut f = Fib::default();
    f.link_new(
        &Link {
            ifindex: LOOPBACK_IFINDEX,
            flags: iff::UP,
            change: iff::UP,
            ..Default::default()
        },
        ReqFlags::NONE,
    )
    .expect("lo up");
    let d0 = link(&mut f, "d0", &[("10.0.0.1", 24), ("2001:db8::1", 64)]);
    let d1 = link(&mut f, "d1", &[("10.9.0.1", 24), ("2001:db8:9::1", 64)]);
    for r in [
        route("198.51.100.0", 24, &[("10.9.0.2", d1), ("10.9.0.3", d1)]),
        route("192.0.2.0", 24, &[("10.0.0.2", d0)]),
        route(
            "2001:db8:77::",
            48,
            &[("2001:db8:9::2", d1), ("2001:db8:9::3", d1)],
        ),
    ] {
        f.route_new(&r, ReqFlags::ADD).expect("route");
    }
    let mut s = f.settings().clone();
    s.rp_filter = 1;
    f.set_settings(s);
    let packets: Vec<InputKey> = [
        ("198.51.100.7", "192.0.2.9", d0),
        ("198.51.100.8", "192.0.2.9", d0),
        ("10.9.0.1", "10.0.0.5", d0),
        ("10.0.0.255", "10.0.0.5", d0),
        ("203.0.113.1", "10.0.0.5", d0),
        ("198.51.100.7", "203.0.113.5", d0),
        ("2001:db8:77::7", "2001:db8::5", d0),
        ("ff02::1", "fe80::5", d0),
        ("2001:db8:5::1", "2001:db8::5", d0),
    ]
    .iter()
    .map(|&(d, s, iif)| InputKey {
        dst: ip(d),
        src: ip(s),
        iif,
        tos: 0,
        mark: 0,
        proto: 17,
        sport: 1000,
        dport: 53,
        flowlabel: 0,
    })
    .collect();
    let mut outcomes = Vec::with_capacity(packets.len());
    // The multipath hash's seed for this boot is drawn once per process, on first use (a read
    // of the boot id): before the count.
    for k in &packets {
        let _ = f.route_input(k);
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for k in &packets {
        outcomes.push(f.route_input(k));
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(allocated, 0, "route_input allocated: {outcomes:?}");
    assert!(matches!(outcomes[0], Ok(InputRoute::Forward(_))));
    assert!(matches!(outcomes[5], Err(InputDrop::ReversePath)));
    assert!(matches!(outcomes[6], Ok(InputRoute::Forward(_))));

    // The batch call, its fast path included (rp_filter 0), over a vector longer than one of
    // its chunks.
    let mut s = f.settings().clone();
    s.rp_filter = 0;
    f.set_settings(s);
    let vector: Vec<InputKey> = packets.iter().copied().cycle().take(100).collect();
    let mut out = vec![Err(InputDrop::NoRoute); vector.len()];
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    f.route_input_batch(&vector, &mut out);
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(allocated, 0, "route_input_batch allocated: {out:?}");
    assert!(matches!(out[0], Ok(InputRoute::Forward(_))));
    assert!(matches!(out[6], Ok(InputRoute::Forward(_))));
}
