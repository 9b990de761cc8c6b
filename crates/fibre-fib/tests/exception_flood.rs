//! A flood of 1M ICMPv6 "packet too big" events for distinct destinations through one next
//! hop (the background of the kernel series
//! "Remove expired routes with a separated list of routes"): the exceptions kept and their heap bytes stay under the
//! documented bound, and GC after they expire does bounded work per pass. (Lookup throughput
//! during the flood is measured by `examples/gc_bench.rs`, in release mode.)

use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use fibre_fib::exception::BYTES_PER_EXCEPTION;
use fibre_fib::expiry::GC_EXCEPTIONS_PER_PASS;
use fibre_fib::*;

#[path = "common/counting.rs"]
mod counting;

fn setup() -> (Fib, Arc<ManualClock>) {
    let mut f = Fib::default();
    let clock = Arc::new(ManualClock::new(0));
    f.set_clock(clock.clone());
    f.link_new(
        &Link {
            ifname: Some("d0".into()),
            kind: Some(LinkKind::Dummy),
            ..Default::default()
        },
        ReqFlags::ADD,
    )
    .unwrap();
    let d0 = f.link_index("d0").unwrap();
    f.link_new(
        &Link {
            ifindex: d0,
            flags: iff::UP,
            change: iff::UP,
            ..Default::default()
        },
        ReqFlags::NONE,
    )
    .unwrap();
    let a: IpAddr = "2001:db8::1".parse().unwrap();
    f.addr_new(
        &Address {
            family: Family::Inet6,
            prefixlen: 64,
            flags: 0,
            scope: 0,
            ifindex: d0,
            local: Some(a),
            address: Some(a),
            broadcast: None,
            label: None,
            metric: None,
            valid_lft: None,
            preferred_lft: None,
        },
        ReqFlags::ADD,
    )
    .unwrap();
    let mut r = Route::new(
        Family::Inet6,
        Prefix {
            addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            len: 0,
        },
    );
    r.nexthop.gateway = Some("2001:db8::2".parse().unwrap());
    r.nexthop.oif = d0;
    f.route_new(&r, ReqFlags::ADD).unwrap();
    (f, clock)
}

#[test]
fn a_million_packet_too_big_events_stay_within_the_bound() {
    let (mut f, clock) = setup();
    let bound = f.exception_config().max_per_nh;
    let before = counting::live();
    for i in 0..1_000_000u128 {
        let d = Ipv6Addr::from((0x3fffu128 << 112) | i);
        assert_eq!(
            f.pmtu_update(Family::Inet6, IpAddr::V6(d), 1400),
            Ok(ExceptionOutcome::Stored)
        );
    }
    let kept = f.expiring().1;
    assert_eq!(kept, bound, "one next hop keeps at most max_per_nh");
    let bytes = (counting::live() - before) as usize;
    assert!(
        bytes <= bound * BYTES_PER_EXCEPTION,
        "{bytes} bytes for {kept} exceptions, {} per exception",
        bytes / kept
    );
    eprintln!(
        "{kept} exceptions: {bytes} heap bytes, {} per exception",
        bytes / kept
    );
    // The newest destinations are the ones kept (the first to expire were evicted).
    let newest = Ipv6Addr::from((0x3fffu128 << 112) | 999_999);
    assert_eq!(
        f.exception(Family::Inet6, IpAddr::V6(newest))
            .map(|e| e.mtu),
        Some(Some(1400))
    );
    let oldest = Ipv6Addr::from(0x3fffu128 << 112);
    assert_eq!(f.exception(Family::Inet6, IpAddr::V6(oldest)), None);
    // They all expire together; GC takes them in bounded passes.
    clock.advance(600_000);
    let mut passes = 0;
    loop {
        let st = f.expire();
        assert!(st.exceptions <= GC_EXCEPTIONS_PER_PASS);
        passes += 1;
        if !st.more_due {
            break;
        }
    }
    assert_eq!(passes, bound.div_ceil(GC_EXCEPTIONS_PER_PASS));
    assert_eq!(f.expiring(), (0, 0));
}
