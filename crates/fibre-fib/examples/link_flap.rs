//! The cost of a link flap with the real IPv4 table loaded: one link carries 1% of the routes,
//! another 0.1%, the others the rest. Times what a flap of each costs (admin down then up,
//! carrier off then on), beside what deleting the same routes with `route_del` costs, and a
//! flap of a link that carries no route, so that a change's cost can be set beside the share
//! of the table that depends on it.
//!
//! An admin down flushes the IPv4 routes through the link (the kernel's fib_sync_down_dev), so
//! each admin flap is followed, untimed, by adding those routes back. A carrier flap keeps the
//! routes and marks their next hops LINKDOWN, then clears it.
//!
//! Run: `cargo run --release -p fibre-fib --example link_flap [PATH]`; skips with a message
//! when the data file is absent. Uses only `Fib`'s public API, so that the same file runs on
//! an older commit for a before/after comparison.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use fibre_fib::*;

#[path = "common/rib.rs"]
mod rib;

/// Links besides the flapped ones; the other 98.9% of the routes are spread over them.
const OTHER_LINKS: u32 = 8;
/// One route in this many goes through the first flapped link (1%), one in ten times as many
/// through the second (0.1%).
const FLAPPED_SHARE: usize = 100;
/// Flaps timed per kind; the median is printed.
const ROUNDS: usize = 9;

fn set_link(f: &mut Fib, ifindex: u32, up: Option<bool>, carrier: Option<bool>) {
    let l = Link {
        ifindex,
        flags: if up == Some(true) { iff::UP } else { 0 },
        change: if up.is_some() { iff::UP } else { 0 },
        carrier,
        ..Default::default()
    };
    f.link_new(&l, ReqFlags::NONE).expect("link change");
}

/// Link `n`: named `l{n}`, up, with 10.n.0.1/16; its routes go via 10.n.1.1.
fn add_link(f: &mut Fib, n: u32) -> u32 {
    let name = format!("l{n}");
    f.link_new(
        &Link {
            ifname: Some(name.clone()),
            kind: Some(LinkKind::Dummy),
            ..Default::default()
        },
        ReqFlags::ADD,
    )
    .expect("link");
    let idx = f.link_index(&name).expect("created");
    set_link(f, idx, Some(true), None);
    let a = IpAddr::V4(Ipv4Addr::new(10, n as u8, 0, 1));
    f.addr_new(
        &Address {
            family: Family::Inet,
            prefixlen: 16,
            flags: 0,
            scope: 0,
            ifindex: idx,
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
    .expect("address");
    idx
}

fn route(a: Ipv4Addr, len: u8, link: u32) -> Route {
    let mut r = Route::new(
        Family::Inet,
        Prefix {
            addr: IpAddr::V4(a),
            len,
        },
    );
    r.table = table::MAIN;
    r.protocol = protocol::BOOT;
    r.nexthop.gateway = Some(IpAddr::V4(Ipv4Addr::new(10, link as u8, 1, 1)));
    r
}

/// Wall-clock seconds of `f`. (A thread's CPU time from schedstat advances only at scheduler
/// ticks, too coarse for changes that take microseconds; run this on a quiet machine and note
/// its load.)
fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let Some(path) = rib::path_or_skip() else {
        return;
    };
    let v4: Vec<(Ipv4Addr, u8)> = rib::read(&path)
        .into_iter()
        .filter_map(|(a, len, _)| match a {
            IpAddr::V4(a) => Some((a, len)),
            IpAddr::V6(_) => None,
        })
        .collect();
    let mut f = Fib::default();
    // Links 1 and 2 are flapped (1% and 0.1% of the routes); links 3..=OTHER_LINKS+2 carry
    // the rest; the last one carries nothing.
    for n in 1..=OTHER_LINKS + 2 {
        add_link(&mut f, n);
    }
    let idle = add_link(&mut f, OTHER_LINKS + 3);
    let link_of = |i: usize| {
        if i.is_multiple_of(FLAPPED_SHARE) {
            1
        } else if i % (10 * FLAPPED_SHARE) == 1 {
            2
        } else {
            3 + (i as u32 % OTHER_LINKS)
        }
    };
    f.begin_batch();
    let mut through: [Vec<Route>; 3] = Default::default();
    let mut loaded = 0usize;
    for (i, &(a, len)) in v4.iter().enumerate() {
        let l = link_of(i);
        let r = route(a, len, l);
        if f.route_new(&r, ReqFlags::ADD).is_ok() {
            loaded += 1;
            if l <= 2 {
                through[l as usize].push(r);
            }
        }
    }
    f.end_batch();
    println!("loaded {loaded} IPv4 routes");

    let probe = |f: &Fib, r: &Route| {
        let IpAddr::V4(a) = r.dst.addr else {
            unreachable!("IPv4 routes")
        };
        let flow = Flow {
            dst: u32::from(a) as u128,
            ..Flow::empty()
        };
        f.lookup_output(Family::Inet, &flow).map(|d| d.oif)
    };
    let readd = |f: &mut Fib, routes: &[Route]| {
        f.begin_batch();
        for r in routes {
            f.route_new(r, ReqFlags::ADD).expect("re-add");
        }
        f.end_batch();
    };
    println!("median of {ROUNDS}, wall-clock milliseconds:");
    for l in [1u32, 2] {
        let routes = &through[l as usize];
        let link = f.link_index(&format!("l{l}")).expect("made");
        let mut t: [Vec<f64>; 5] = Default::default();
        for _ in 0..ROUNDS {
            t[0].push(timed(|| set_link(&mut f, link, Some(false), None)));
            t[1].push(timed(|| set_link(&mut f, link, Some(true), None)));
            readd(&mut f, routes);
            assert_eq!(probe(&f, &routes[1]), Ok(link));
            t[2].push(timed(|| set_link(&mut f, link, None, Some(false))));
            t[3].push(timed(|| set_link(&mut f, link, None, Some(true))));
            assert_eq!(probe(&f, &routes[1]), Ok(link));
            // What deleting the routes an admin down flushes costs by itself.
            t[4].push(timed(|| {
                for r in routes {
                    f.route_del(r).expect("delete");
                }
            }));
            readd(&mut f, routes);
        }
        if l == 1 {
            println!(
                "  first admin down after the load (one flap, builds the users index): {:.3}",
                t[0][0] * 1e3
            );
        }
        let share = 100.0 * routes.len() as f64 / loaded as f64;
        let [down, up, coff, con, del] = t.map(|v| median(v) * 1e3);
        println!("  link with {} routes ({share:.2}%):", routes.len());
        println!("    admin down:                  {down:9.3}");
        println!("    admin up:                    {up:9.3}");
        println!("    carrier off:                 {coff:9.3}");
        println!("    carrier on:                  {con:9.3}");
        println!("    route del of those routes:   {del:9.3}");
    }
    let idle_flap: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            timed(|| {
                set_link(&mut f, idle, Some(false), None);
                set_link(&mut f, idle, Some(true), None);
            })
        })
        .collect();
    println!(
        "  link with no routes, down+up:  {:9.3}",
        median(idle_flap) * 1e3
    );
}
