//! The cost of a link flap with the real IPv4 table loaded: one link carries 1% of the routes,
//! the others the rest. Times, on CPU, what a flap of that link costs (admin down then up, and
//! carrier off then on), and the same for a link that carries no route, so that a change's
//! cost can be set beside the share of the table that depends on it.
//!
//! An admin down flushes the IPv4 routes through the link (the kernel's fib_sync_down_dev), so
//! each admin flap is followed, untimed, by adding those routes back. A carrier flap keeps the
//! routes and marks their next hops LINKDOWN, then clears it.
//!
//! Run: `cargo run --release -p fibre-fib --example link_flap [PATH]`; skips with a message
//! when the data file is absent. Uses only `Fib`'s public API, so that the same file runs on
//! an older commit for a before/after comparison.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};

use fibre_fib::*;

/// Links besides the flapped one; the other 99% of the routes are spread over them.
const OTHER_LINKS: u32 = 8;
/// One route in this many goes through the flapped link (1%).
const FLAPPED_SHARE: usize = 100;
/// Flaps timed per kind; the median is printed.
const ROUNDS: usize = 5;

/// Seconds this thread spent on a CPU (Linux schedstat), so that figures taken on a shared
/// machine say what the work costs; 0 where unavailable.
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok())
        })
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

fn read_v4(path: &str) -> Vec<(Ipv4Addr, u8)> {
    let mut child = Command::new("zcat")
        .arg(path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("zcat runs");
    let out = child.stdout.take().expect("piped");
    let mut v4 = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.expect("readable");
        if line.starts_with('#') {
            continue;
        }
        let Some(p) = line.split('\t').next() else {
            continue;
        };
        let Some((a, l)) = p.split_once('/') else {
            continue;
        };
        if let (Ok(IpAddr::V4(a)), Ok(len)) = (a.parse::<IpAddr>(), l.parse::<u8>()) {
            v4.push((a, len));
        }
    }
    let _ = child.wait();
    v4
}

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

/// On-CPU seconds of `f`.
fn timed(f: impl FnOnce()) -> f64 {
    let c = cpu_s();
    f();
    cpu_s() - c
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/work/shared/data/rib-2026-06.tsv.gz".into());
    if !std::path::Path::new(&path).exists() {
        println!("skip: {path} not found (see ../shared/data/README.md)");
        return;
    }
    let v4 = read_v4(&path);
    let mut f = Fib::default();
    // Link 1 is flapped; links 2..=OTHER_LINKS+1 carry the rest; the last one carries nothing.
    let flapped = add_link(&mut f, 1);
    for n in 0..OTHER_LINKS {
        add_link(&mut f, 2 + n);
    }
    let idle = add_link(&mut f, 2 + OTHER_LINKS);
    let link_of = |i: usize| {
        if i.is_multiple_of(FLAPPED_SHARE) {
            1
        } else {
            2 + (i as u32 % OTHER_LINKS)
        }
    };
    f.begin_batch();
    let mut on_flapped = Vec::new();
    let mut loaded = 0usize;
    for (i, &(a, len)) in v4.iter().enumerate() {
        let r = route(a, len, link_of(i));
        if f.route_new(&r, ReqFlags::ADD).is_ok() {
            loaded += 1;
            if link_of(i) == 1 {
                on_flapped.push(r);
            }
        }
    }
    f.end_batch();
    println!(
        "loaded {loaded} IPv4 routes; {} ({:.2}%) through the flapped link",
        on_flapped.len(),
        100.0 * on_flapped.len() as f64 / loaded as f64
    );

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
    let (mut down, mut up, mut coff, mut con, mut idle_flap) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        down.push(timed(|| set_link(&mut f, flapped, Some(false), None)));
        up.push(timed(|| set_link(&mut f, flapped, Some(true), None)));
        f.begin_batch();
        for r in &on_flapped {
            f.route_new(r, ReqFlags::ADD).expect("re-add");
        }
        f.end_batch();
        assert_eq!(probe(&f, &on_flapped[1]), Ok(flapped));

        coff.push(timed(|| set_link(&mut f, flapped, None, Some(false))));
        con.push(timed(|| set_link(&mut f, flapped, None, Some(true))));
        assert_eq!(probe(&f, &on_flapped[1]), Ok(flapped));

        idle_flap.push(timed(|| {
            set_link(&mut f, idle, Some(false), None);
            set_link(&mut f, idle, Some(true), None);
        }));
    }
    let ms = |v: Vec<f64>| median(v) * 1e3;
    println!("median of {ROUNDS}, on-CPU milliseconds:");
    println!("  admin down, 1% link:    {:9.3}", ms(down));
    println!("  admin up, 1% link:      {:9.3}", ms(up));
    println!("  carrier off, 1% link:   {:9.3}", ms(coff));
    println!("  carrier on, 1% link:    {:9.3}", ms(con));
    println!("  down+up, idle link:     {:9.3}", ms(idle_flap));
}
