//! The input route cache benchmark: the worker's pipeline (`Dataplane::receive`, the full
//! table published as `forward.rs` publishes it) with the input route cache on, with the route
//! hints only and off, side by side in one run over the same frames, on four workloads:
//!
//! - `seed`: the workload of Linux's input dst cache series (netdev, "[PATCH net-next v2 0/4]
//!   net: route: improve route hinting", 2024): 5000 destinations inside the table, the source
//!   varying over [`SOURCES`] hosts and the tos over [`TOS`], as one receive queue of
//!   [`QUEUES`] sees them (the series measured 20 queues, one per CPU, each with its own
//!   cache: a queue gets the flows the NIC's hash gives it, here a hash of the addresses);
//! - `seed, one queue for all`: the same flows all through one worker, more keys than its
//!   cache holds;
//! - `rules+multipath`: `seed` with policy rules present (none matching the traffic, but
//!   custom rules turn the kernel's hints off and make the source check a lookup) and each
//!   destination behind a two-gateway multipath route;
//! - `flood`: every frame a new source and destination (no key twice).
//!
//! Each pass is the pipeline over all of a workload's frames, one worker on the calling
//! thread, timed by its CPU clock; the modes' passes alternate within a run, in an order that
//! rotates between runs. A pass counts only when every frame was forwarded and sent.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fibre_dataplane::input_cache::{CacheConfig, CacheCounters, Mode, DEFAULT_ENTRIES};
use fibre_dataplane::pipeline::{Config, Dataplane, VECTOR};
use fibre_fib::{table as rt_table, Family as FibFamily, NextHop, Prefix, ReqFlags, Rule};
use fibred::view::Change;

use crate::addrs::{RandomAddr, Rng};
use crate::forward::{self, apply, pipeline_pass, Router};
use crate::frames::{self, Family, Packet};
use crate::stats::median;
use crate::table::{Route, NEXT_HOPS};
use crate::{sys, BenchError};

/// The series' destinations.
const DESTINATIONS: usize = 5000;
/// Hosts on the input subnet the traffic comes from.
const SOURCES: u8 = 4;
/// The tos values of the traffic (none that a route or rule of the benchmark selects).
const TOS: [u8; 4] = [0x00, 0x04, 0x08, 0x10];
/// Receive queues the series' NIC spread the flows over; the worker is one of them.
const QUEUES: u64 = 20;
/// The modes, in the order of the report.
const MODES: [Mode; 3] = [Mode::Off, Mode::Hints, Mode::Cache];
/// The bars: the cache over no cache on `seed` (and, "the gain holds", on
/// `rules+multipath`), and on `flood`.
const BAR_SEED: f64 = 1.17;
const BAR_FLOOD: f64 = 0.97;

pub struct Options {
    pub frames: usize,
    pub runs: usize,
    pub seed: u64,
    /// Workloads (`seed`, `all`, `flood`, `rules`) and modes (`off`, `hints`, `cache`) to
    /// run, when not all: a profiler's run of one mode on one workload.
    pub only: Option<Vec<String>>,
}

impl Options {
    fn runs_name(&self, name: &str, of: &[&str]) -> bool {
        self.only.as_ref().is_none_or(|o| {
            o.iter().any(|n| n == name) || !o.iter().any(|n| of.contains(&n.as_str()))
        })
    }
}

/// The workloads' names for `--only`.
const WORKLOADS: [&str; 4] = ["seed", "all", "flood", "rules"];

/// One workload's frames and figures.
struct Workload {
    name: &'static str,
    frames: Vec<u8>,
    /// Distinct cache keys among the frames.
    keys: usize,
}

/// One mode's figures on one workload.
struct Figures {
    mode: Mode,
    ns: Vec<f64>,
    counters: CacheCounters,
    load: String,
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Off => "off",
        Mode::Hints => "hints",
        Mode::Cache => "cache",
    }
}

/// A hash of a packet's addresses: which queue it lands in.
fn queue(p: &Packet) -> u64 {
    let bits = |a: IpAddr| match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let x = bits(p.dst) ^ bits(p.src).rotate_left(64);
    let mut z = (x as u64) ^ ((x >> 64) as u64);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % QUEUES
}

/// Host `i` of the input subnet (the router is .1, the host of `frames` .2).
fn source<A: Family>(i: u8) -> IpAddr {
    match A::OUT_NET.0.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::new(10, 254, 0, 2 + i)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::new(0xfd00, 0xfe, 0, 0, 0, 0, 0, 2 + u16::from(i))),
    }
}

/// A source no other frame has: inside 100.64.0.0/10 (IPv4) or fd00:aa::/32 (IPv6), which the
/// table does not route back through the input link and which are no martians.
fn flood_source<A: Family>(rng: &mut Rng) -> IpAddr {
    let r = u128::random(rng);
    match A::OUT_NET.0.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(0x6440_0000 | (r as u32 & 0x003f_ffff))),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from((0xfd00_00aau128 << 96) | (r >> 32))),
    }
}

fn distinct_keys(packets: &[Packet]) -> usize {
    let mut keys: Vec<(IpAddr, IpAddr, u8)> =
        packets.iter().map(|p| (p.dst, p.src, p.tos)).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

/// `n` frames drawn uniformly from `flows`.
fn draw(name: &'static str, flows: &[Packet], n: usize, rng: &mut Rng) -> Workload {
    let packets: Vec<Packet> = (0..n).map(|_| flows[rng.below(flows.len())]).collect();
    Workload {
        name,
        keys: distinct_keys(&packets),
        frames: frames::build_packets(&packets),
    }
}

/// The rules of `rules+multipath`: a source prefix, a mark, a tos and the output link as the
/// input link, each to table 100; none matches the traffic.
fn rules(family: FibFamily) -> Vec<Rule> {
    let src = match family {
        FibFamily::Inet => ("192.0.2.0", 24),
        FibFamily::Inet6 => ("2001:db8:dead::", 48),
    };
    (0..4u32)
        .map(|i| {
            let mut r = Rule::new(family, 100);
            r.priority = Some(100 + i);
            match i {
                0 => {
                    r.src = Some(Prefix {
                        addr: src.0.parse().expect("literal"),
                        len: src.1,
                    })
                }
                1 => r.fwmark = Some(7),
                2 => r.tos = 0x1c,
                _ => r.iifname = Some(frames::OUT_DEV.into()),
            }
            r
        })
        .collect()
}

/// `dst/32` (or /128) through two gateways of the output link.
fn multipath(dst: IpAddr, n: u32, out_if: u32) -> fibre_fib::Route {
    let (family, len) = match dst {
        IpAddr::V4(_) => (FibFamily::Inet, 32),
        IpAddr::V6(_) => (FibFamily::Inet6, 128),
    };
    let mut r = fibre_fib::Route::new(family, Prefix { addr: dst, len });
    r.table = rt_table::MAIN;
    r.multipath = [n % NEXT_HOPS, (n + 1) % NEXT_HOPS]
        .into_iter()
        .map(|g| NextHop {
            gateway: Some(match dst {
                IpAddr::V4(_) => frames::gateway4(g).into(),
                IpAddr::V6(_) => frames::gateway6(g).into(),
            }),
            oif: out_if,
            ..Default::default()
        })
        .collect();
    r
}

/// The figures of each of `modes` on `w`: `runs` passes each, interleaved.
fn measure(
    r: &Router,
    in_if: u32,
    w: &Workload,
    modes: &[Mode],
    runs: usize,
) -> Result<Vec<Figures>, BenchError> {
    let vectors: Vec<(u32, &[u8])> = w
        .frames
        .chunks_exact(frames::FRAME_LEN)
        .map(|f| (in_if, f))
        .collect();
    let mut dps = Vec::new();
    for &mode in modes {
        let cfg = Config {
            input_cache: CacheConfig {
                mode,
                entries: DEFAULT_ENTRIES,
            },
            ..Config::default()
        };
        let mut dp =
            Dataplane::new(&cfg).map_err(|e| BenchError::Forward(format!("dataplane: {e:?}")))?;
        // Untimed: the pool's buffers, the first lookups' cold start, the cache's first fill.
        pipeline_pass(&mut dp, (&r.fib_reader, &r.fwd_reader), &vectors, VECTOR)?;
        dps.push(dp);
    }
    let mut figs: Vec<Figures> = modes
        .iter()
        .map(|&mode| Figures {
            mode,
            ns: Vec::new(),
            counters: CacheCounters::default(),
            load: String::new(),
        })
        .collect();
    let before: Vec<CacheCounters> = dps.iter().map(|d| d.counters().input_cache).collect();
    for run in 0..runs {
        for k in 0..modes.len() {
            let m = (run + k) % modes.len();
            let ns = pipeline_pass(
                &mut dps[m],
                (&r.fib_reader, &r.fwd_reader),
                &vectors,
                VECTOR,
            )?;
            figs[m].ns.push(ns);
        }
        let each: Vec<String> = figs
            .iter()
            .map(|f| format!("{} {:.1}", mode_name(f.mode), f.ns[run]))
            .collect();
        eprintln!(
            "  {} run {}/{runs}: {} ns/frame; {}",
            w.name,
            run + 1,
            each.join(", "),
            sys::loadavg()
        );
    }
    for ((f, dp), b) in figs.iter_mut().zip(&dps).zip(before) {
        let c = dp.counters().input_cache;
        f.counters = CacheCounters {
            hits: c.hits - b.hits,
            hinted: c.hinted - b.hinted,
            misses: c.misses - b.misses,
            evictions: c.evictions - b.evictions,
            bypassed: c.bypassed - b.bypassed,
        };
        f.load = sys::loadavg();
    }
    Ok(figs)
}

fn report(w: &Workload, figs: &[Figures], bar: f64) {
    let median_of = |m: Mode| figs.iter().find(|f| f.mode == m).map(|f| median(&f.ns));
    let off = median_of(Mode::Off);
    println!(
        "\n  {:<26} {} frames, {} distinct keys",
        w.name,
        w.frames.len() / frames::FRAME_LEN,
        w.keys
    );
    for f in figs {
        let ns = median(&f.ns);
        let c = f.counters;
        let n = (c.hits + c.hinted + c.misses + c.bypassed).max(1) as f64;
        println!(
            "  {:<26} {:<5} {:7.1} ns/pkt {:6.2} Mpps  {:5.3}x off  hits {:5.1}% hinted {:5.1}% evictions {:9}  (runs {:?})  {}",
            w.name,
            mode_name(f.mode),
            ns,
            1e3 / ns,
            off.map_or(f64::NAN, |o| o / ns),
            100.0 * c.hits as f64 / n,
            100.0 * c.hinted as f64 / n,
            c.evictions,
            f.ns.iter().map(|x| (x * 10.0).round() / 10.0).collect::<Vec<_>>(),
            f.load
        );
    }
    if let (Some(off), Some(cache)) = (off, median_of(Mode::Cache)) {
        let ratio = off / cache;
        let verdict = if ratio >= bar { "met" } else { "missed" };
        println!(
            "  {:<26} bar: cache/off >= {bar}x: {ratio:.3}x, {verdict}",
            w.name
        );
    }
}

pub fn run<A: Family>(routes: &[Route<A>], opts: &Options) -> Result<(), BenchError> {
    println!(
        "\n== {} input route cache: {} routes, {} frames per workload, {} runs, cache {} entries ==",
        A::NAME,
        routes.len(),
        opts.frames,
        opts.runs,
        DEFAULT_ENTRIES
    );
    println!("  {}", sys::uptime());
    let share = sys::GroupShare::raise(forward::GROUP_NICE);
    if !share.raised() {
        println!("  (scheduling share not raised)");
    }
    let mut r = forward::router(routes)?;
    let in_if = r
        .fib
        .latest()
        .link_index(frames::IN_DEV)
        .ok_or_else(|| BenchError::Forward("no input link".into()))?;
    let (dsts, _) = {
        let fib = r.fib_reader.read();
        frames::destinations(routes, DESTINATIONS, opts.seed, |a| {
            forward::forwarded(&fib, in_if, a.ip())
        })
    };
    let flows: Vec<Packet> = dsts
        .iter()
        .flat_map(|d| {
            (0..SOURCES).flat_map(move |s| {
                TOS.iter().map(move |&tos| Packet {
                    dst: d.ip(),
                    src: source::<A>(s),
                    tos,
                })
            })
        })
        .collect();
    let share_flows: Vec<Packet> = flows.iter().copied().filter(|p| queue(p) == 0).collect();
    let mut rng = Rng::new(opts.seed ^ 0xcac4e);
    let seed = draw("seed", &share_flows, opts.frames, &mut rng);
    let all = draw("seed, one queue for all", &flows, opts.frames, &mut rng);
    let (flood_dsts, _) = {
        let fib = r.fib_reader.read();
        frames::destinations(routes, opts.frames, opts.seed ^ 0xf100d, |a| {
            forward::forwarded(&fib, in_if, a.ip())
        })
    };
    let flood_packets: Vec<Packet> = flood_dsts
        .iter()
        .map(|d| Packet {
            dst: d.ip(),
            src: flood_source::<A>(&mut rng),
            tos: 0,
        })
        .collect();
    let flood = Workload {
        name: "flood",
        keys: distinct_keys(&flood_packets),
        frames: frames::build_packets(&flood_packets),
    };
    println!(
        "  {} destinations, {} flows ({} sources x {} tos), {} in the worker's queue (1 of {QUEUES})",
        dsts.len(),
        flows.len(),
        SOURCES,
        TOS.len(),
        share_flows.len()
    );
    // The issue sets no bar for all flows through one worker: it is held to the flood's (the
    // cache must not cost).
    let modes: Vec<Mode> = MODES
        .into_iter()
        .filter(|&m| opts.runs_name(mode_name(m), &["off", "hints", "cache"]))
        .collect();
    let picked = |name| opts.runs_name(name, &WORKLOADS);
    for (name, w, bar) in [
        ("seed", &seed, BAR_SEED),
        ("all", &all, BAR_FLOOD),
        ("flood", &flood, BAR_FLOOD),
    ] {
        if picked(name) {
            let figs = measure(&r, in_if, w, &modes, opts.runs)?;
            report(w, &figs, bar);
        }
    }
    if !picked("rules") {
        println!("  {}", sys::uptime());
        return Ok(());
    }
    // Rules and multipath routes for the same traffic.
    let family = FibFamily::of(&dsts[0].ip());
    for rule in rules(family) {
        apply(&mut r.fib, Change::NewRule(rule, ReqFlags::ADD))?;
    }
    for (n, d) in dsts.iter().enumerate() {
        let c = Change::NewRoute(multipath(d.ip(), n as u32, r.out_if), ReqFlags::REPLACE);
        apply(&mut r.fib, c)?;
    }
    r.fib.publish();
    r.fwd.update(r.fib.latest());
    let rules_mp = Workload {
        name: "rules+multipath",
        frames: seed.frames.clone(),
        keys: seed.keys,
    };
    let figs = measure(&r, in_if, &rules_mp, &modes, opts.runs)?;
    report(&rules_mp, &figs, BAR_SEED);
    println!("  {}", sys::uptime());
    Ok(())
}
