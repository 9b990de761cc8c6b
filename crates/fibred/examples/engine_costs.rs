//! Per-route CPU cost of fibred's engine, without threads or transports: what the writer
//! thread spends to apply a table load, and what a dump costs to encode.
//!
//! Run: `cargo run --release -p fibred --example engine_costs [PATH]`
//!
//! The requests are those of `load_dump` (the IPv4 table of ../shared/data/rib-2026-06.tsv.gz
//! as `route add P via GW`, NLM_F_ACK on each, packed into 4 KiB datagrams). Figures are the
//! calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so they hold on a busy machine where
//! wall time does not; median of 3 runs.
//!
//! Skips with a message when the data file is absent.

use fibre_fib::types::*;
use fibre_netlink::message::flags as nf;
use fibre_proto::convert::{self, Request};
use fibred::engine::{ClientCtx, Outcome, Prepared, Reply};
use fibred::Engine;
use std::net::{IpAddr, Ipv4Addr};

// Each example uses a part of what they share.
#[path = "common/mod.rs"]
#[allow(dead_code)]
mod common;
use common::*;

const DATAGRAM: usize = 4096;
/// Datagrams the daemon's writer applies between two publishes (its BATCH_DATAGRAMS).
const BATCH: usize = 64;
/// Bytes per dump piece: a ring RX frame.
const PIECE: usize = 16 << 10;

fn cpu_now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn request(r: &Request, seq: u32) -> Vec<u8> {
    convert::request_message(r, seq, 0).to_bytes()
}

fn setup(e: &mut Engine) {
    let link = Link {
        ifname: Some("d0".into()),
        kind: Some(LinkKind::Dummy),
        flags: 1,
        change: 1,
        ..Link::default()
    };
    let addr = Address {
        family: Family::Inet,
        prefixlen: 16,
        flags: 0,
        scope: 0,
        ifindex: 2,
        local: Some("10.128.0.1".parse().unwrap()),
        address: Some("10.128.0.1".parse().unwrap()),
        broadcast: None,
        label: None,
        metric: None,
        valid_lft: None,
        preferred_lft: None,
    };
    let mut ctx = ClientCtx::default();
    let mut out = Outcome::default();
    e.handle(
        &request(&Request::NewLink(link, ReqFlags::ADD), 1),
        &mut ctx,
        0,
        &mut out,
    );
    e.handle(
        &request(&Request::NewAddr(addr, ReqFlags::ADD), 2),
        &mut ctx,
        0,
        &mut out,
    );
}

/// Messages in a datagram of requests.
fn count(g: &[u8]) -> usize {
    fibred::engine::split_messages(g).count()
}

fn datagrams(table: &[(Ipv4Addr, u8, u32)]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for (i, (a, l, p)) in table.iter().enumerate() {
        let mut r = Route::new(
            Family::Inet,
            Prefix {
                addr: IpAddr::V4(*a),
                len: *l,
            },
        );
        r.nexthop.gateway = Some(IpAddr::V4(Ipv4Addr::new(10, 128, 0, 2 + *p as u8)));
        let m = request(&Request::NewRoute(r, ReqFlags::ADD), i as u32 + 1);
        if cur.len() + m.len() > DATAGRAM {
            out.push(std::mem::take(&mut cur));
        }
        cur.extend_from_slice(&m);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// One run's CPU seconds and dump size.
struct Run {
    /// The writer's share of the load: apply, ACK, publish, replay into the second copy.
    load: f64,
    /// Reading the route changes, which the daemon does on the client's thread
    /// (`Prepared`), beside the writer.
    read: f64,
    /// The part of `load` spent replaying into the second copy.
    replay: f64,
    dump: f64,
    dump_bytes: usize,
}

fn run(grams: &[Vec<u8>]) -> Run {
    let mut e = Engine::default();
    setup(&mut e);
    let mut ctx = ClientCtx::default();
    let t = cpu_now();
    let mut acks = 0usize;
    let mut replay = 0.0;
    let mut read = 0.0;
    // As the daemon takes them: a client thread reads the route changes of a batch of
    // datagrams, the writer applies them and publishes once.
    for batch in grams.chunks(BATCH) {
        let r = cpu_now();
        let prepared: Vec<Prepared> = batch
            .iter()
            .map(|g| Prepared::new(g.clone().into_boxed_slice()))
            .collect();
        read += cpu_now() - r;
        let mut out = Outcome::for_requests(batch.iter().map(Vec::len).sum());
        e.begin();
        for p in prepared {
            e.handle_prepared(p, &mut ctx, 0, &mut out);
        }
        e.publish();
        let r = cpu_now();
        e.catch_up();
        replay += cpu_now() - r;
        // The daemon sends the requests the replay finished with to a client thread.
        let r = cpu_now();
        drop(e.take_spent());
        read += cpu_now() - r;
        acks += out
            .replies
            .iter()
            .map(|r| match r {
                Reply::Messages(b) => fibred::engine::split_messages(b).count(),
                Reply::Dump(_) => 0,
            })
            .sum::<usize>();
    }
    let load = cpu_now() - t - read;
    assert_eq!(acks, grams.iter().map(|g| count(g)).sum::<usize>());
    let mut m = convert::request_message(&Request::DumpRoutes(Some(Family::Inet)), 9, 0);
    m.header.flags = nf::NLM_F_REQUEST | nf::NLM_F_DUMP;
    let req = m.to_bytes();
    let t = cpu_now();
    let mut out = Outcome::default();
    e.handle(&req, &mut ctx, 0, &mut out);
    let mut bytes = 0;
    let mut buf = Vec::with_capacity(PIECE * 2);
    for r in &mut out.replies {
        if let Reply::Dump(d) = r {
            loop {
                buf.clear();
                let more = d.fill(&mut buf, PIECE);
                bytes += buf.len();
                if !more {
                    break;
                }
            }
        }
    }
    Run {
        load,
        read,
        replay,
        dump: cpu_now() - t,
        dump_bytes: bytes,
    }
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/work/shared/data/rib-2026-06.tsv.gz".into());
    if !std::path::Path::new(&path).exists() {
        println!("skip: {path} not found (see ../shared/data/README.md)");
        return;
    }
    let table = read_table(&path);
    let n = table.len() as f64;
    let grams = datagrams(&table);
    let mut runs: Vec<Run> = (0..3).map(|_| run(&grams)).collect();
    let med = |f: fn(&Run) -> f64, runs: &mut Vec<Run>| {
        runs.sort_by(|a, b| f(a).total_cmp(&f(b)));
        f(&runs[1])
    };
    let replay = med(|r| r.replay, &mut runs);
    let read = med(|r| r.read, &mut runs);
    let dump = med(|r| r.dump, &mut runs);
    let load = med(|r| r.load, &mut runs);
    let ahead = read_ahead(&grams);
    println!(
        "engine CPU per route, {} IPv4 routes, median of 3 (thread CPU time)",
        table.len()
    );
    println!(
        "  load, writer (apply, ACK)  {:7.0} ns   {:.2} M routes/s per CPU second",
        load / n * 1e9,
        n / load / 1e6
    );
    println!(
        "    of which the replay into the readers' copy {:5.0} ns",
        replay / n * 1e9
    );
    println!(
        "  load, reading and dropping the requests {:7.0} ns   (client thread)",
        read / n * 1e9
    );
    println!(
        "  read-ahead (Prepared::new) {:7.0} ns   (client thread, median of {READ_AHEAD_RUNS})",
        ahead / n * 1e9
    );
    println!(
        "  dump (request and encode)  {:7.0} ns   ({} bytes)",
        dump / n * 1e9,
        runs[1].dump_bytes
    );
}

/// Runs of [`read_ahead`]: it is cheap beside the engine's runs, and its median steadier.
const READ_AHEAD_RUNS: usize = 5;

/// CPU seconds the client thread spends reading the route changes of `grams` ahead of the
/// writer (`Prepared::new`), median of [`READ_AHEAD_RUNS`]. As in the daemon, a batch is
/// read while the previous one's lists are freed (by the writer, here outside the timing):
/// the lists reuse the same memory. The datagrams' copies are made beforehand.
fn read_ahead(grams: &[Vec<u8>]) -> f64 {
    let mut runs: Vec<f64> = (0..READ_AHEAD_RUNS)
        .map(|_| {
            let mut spent = 0.0;
            for batch in grams.chunks(BATCH) {
                let boxed: Vec<Box<[u8]>> =
                    batch.iter().map(|g| g.clone().into_boxed_slice()).collect();
                let t = cpu_now();
                let prepared: Vec<Prepared> = boxed.into_iter().map(Prepared::new).collect();
                spent += cpu_now() - t;
                drop(prepared);
            }
            spent
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[READ_AHEAD_RUNS / 2]
}
