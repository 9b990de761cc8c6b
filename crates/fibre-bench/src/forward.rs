//! The forwarding benchmark, fibre's side: the full table in fibre's FIB, published to the
//! worker exactly as fibred's writer publishes it (`fibred::view::FibWriter`: two copies,
//! lock-free readers), the forwarding objects through `fibre_fwd::FwdWriter` and its reader,
//! and the worker's pipeline `fibre_dataplane::pipeline::Dataplane::receive` over vectors of
//! the 64-byte frames of `frames.rs`, one core (the calling thread, timed by its CPU clock).
//!
//! Per run and batch size, interleaved: the pipeline idle, the LPM batch lookup alone
//! (`fibre_lpm`, the same table, on the same destinations), then the pipeline again while a
//! writer thread applies route updates at a fixed rate (each a `route replace` of a table
//! route towards another gateway, published once per `Options::publish_every` updates, the
//! forwarding objects brought up to date after each publish, as fibred's engine does). The
//! worker takes one read guard of each published state per vector. A pass counts only when
//! every frame was forwarded and sent (the pipeline's counters and the transmit side's),
//! so every figure is of frames that really crossed the router; a busy pass counts towards
//! the figure only when the writer kept its rate (see [`AT_RATE`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fibre_dataplane::pipeline::{Config, Dataplane, Tx, View, VECTOR};
use fibre_fib::types::{iff, nud};
use fibre_fib::{
    protocol, table as rt_table, Address, Family as FibFamily, Fib, InputKey, InputRoute, Link,
    LinkKind, Neighbour, Prefix, ReqFlags, Route as FibRoute, Settings,
};
use fibre_fwd::{FwdTable, FwdWriter, Reader};
use fibred::view::{Change, FibReader, FibWriter};

use crate::addrs::Rng;
use crate::frames::{self, Family, FRAME_LEN};
use crate::kforward::{self, KernelFigures};
use crate::stats::{median, mib, thread_cpu};
use crate::table::{Route, NEXT_HOPS};
use crate::{sys, BenchError};

/// Routes applied between two publishes while the table loads: bounds the writer's log (the
/// changes the standby copy replays) to a few MiB.
const LOAD_CHUNK: usize = 65_536;

/// The share of the asked update rate a busy pass must reach to count.
const AT_RATE: f64 = 0.95;

/// The autogroup nice value the benchmark runs at (see `sys::GroupShare`): on a machine shared
/// with other sessions' builds, the writer would otherwise wait for a CPU most of the time and
/// never reach its rate. A router gives its writer and workers cores of their own.
pub(crate) const GROUP_NICE: i32 = -10;

/// The bar for the pipeline, nanoseconds per packet.
const BAR_NS: f64 = 40.0;

/// The clock the pipeline is given (nanoseconds): fixed, since nothing here expires.
const NOW: u64 = 1_000_000_000;

pub struct Options {
    pub frames: usize,
    pub runs: usize,
    pub batches: Vec<usize>,
    /// Route updates per second the writer applies during the busy passes.
    pub update_rate: u64,
    /// Updates the writer publishes at once.
    pub publish_every: u64,
    pub seed: u64,
    /// Whether to measure the kernel too (needs root and `ip netns`).
    pub kernel: bool,
}

/// Counts what the pipeline sends; reads a byte of each frame so the sending is not empty.
#[derive(Default)]
pub(crate) struct CountTx {
    pub frames: u64,
    pub mix: u64,
}

impl Tx for CountTx {
    fn send(&mut self, _oif: u32, frame: &[u8]) {
        self.frames += 1;
        self.mix = self.mix.wrapping_add(u64::from(frame[5]));
    }
}

/// fibre's router: the published FIB and forwarding objects, the writer's and a worker's
/// handles.
pub(crate) struct Router {
    pub(crate) fib: FibWriter,
    pub(crate) fwd: FwdWriter,
    pub(crate) fib_reader: FibReader,
    pub(crate) fwd_reader: Reader<FwdTable>,
    pub(crate) out_if: u32,
    /// Table routes fibre refused (as the kernel refuses martian prefixes).
    refused: usize,
}

fn dummy(name: &str, mac: [u8; 6]) -> Link {
    Link {
        ifname: Some(name.into()),
        kind: Some(LinkKind::Dummy),
        address: Some(mac.to_vec()),
        flags: iff::UP,
        change: iff::UP,
        ..Default::default()
    }
}

fn addr(ifindex: u32, cidr: &str) -> Address {
    let (a, len) = cidr.split_once('/').expect("literal");
    Address::new(
        ifindex,
        a.parse().expect("literal"),
        len.parse().expect("literal"),
    )
}

/// `route add PREFIX via GATEWAY(next_hop) dev OUT` (the kernel benchmark's line).
fn fib_route<A: Family>(r: &Route<A>, next_hop: u32, out_if: u32) -> FibRoute {
    let dst = r.prefix.ip();
    let mut fr = FibRoute::new(
        FibFamily::of(&dst),
        Prefix {
            addr: dst,
            len: r.len,
        },
    );
    fr.table = rt_table::MAIN;
    fr.protocol = protocol::BOOT;
    fr.nexthop.oif = out_if;
    fr.nexthop.gateway = Some(match dst {
        std::net::IpAddr::V4(_) => frames::gateway4(next_hop).into(),
        std::net::IpAddr::V6(_) => frames::gateway6(next_hop).into(),
    });
    fr
}

pub(crate) fn apply(w: &mut FibWriter, c: Change) -> Result<(), BenchError> {
    let what = format!("{c:?}");
    w.apply(c)
        .map_err(|e| BenchError::Forward(format!("fibre refused {what}: {e:?}")))
}

/// Builds the router with `routes` (those equal to a subnet of its links left out).
pub(crate) fn router<A: Family>(routes: &[Route<A>]) -> Result<Router, BenchError> {
    let mut w = FibWriter::new(Settings::default());
    apply(
        &mut w,
        Change::NewLink(dummy(frames::IN_DEV, frames::ROUTER_IN_MAC), ReqFlags::ADD),
    )?;
    apply(
        &mut w,
        Change::NewLink(
            dummy(frames::OUT_DEV, frames::ROUTER_OUT_MAC),
            ReqFlags::ADD,
        ),
    )?;
    let index = |w: &FibWriter, name| {
        w.latest()
            .link_index(name)
            .ok_or_else(|| BenchError::Forward(format!("no link {name}")))
    };
    let (in_if, out_if) = (index(&w, frames::IN_DEV)?, index(&w, frames::OUT_DEV)?);
    for (ifindex, cidr) in [
        (in_if, frames::IN_ADDR4),
        (in_if, frames::IN_ADDR6),
        (out_if, frames::OUT_ADDR4),
        (out_if, frames::OUT_ADDR6),
    ] {
        apply(&mut w, Change::NewAddr(addr(ifindex, cidr), ReqFlags::ADD))?;
    }
    for (gw, mac) in frames::gateways() {
        let mut n = Neighbour::new(gw, out_if);
        n.lladdr = Some(mac.to_vec());
        n.state = nud::PERMANENT;
        apply(&mut w, Change::NewNeigh(n, ReqFlags::ADD))?;
    }
    w.publish();
    let mut refused = 0;
    for (i, chunk) in routes.chunks(LOAD_CHUNK).enumerate() {
        w.with_standby(Fib::begin_batch);
        for r in chunk.iter().filter(|r| !frames::own_subnet(r)) {
            let c = Change::NewRoute(fib_route(r, r.next_hop, out_if), ReqFlags::ADD);
            if w.apply(c).is_err() {
                refused += 1;
            }
        }
        w.with_standby(Fib::end_batch);
        w.publish();
        w.catch_up();
        eprint!(
            "\r  fibre: {} of {} routes loaded",
            (i * LOAD_CHUNK + chunk.len()).min(routes.len()),
            routes.len()
        );
    }
    eprintln!();
    let (fwd, fwd_reader) = FwdWriter::new(w.latest());
    Ok(Router {
        fib_reader: w.reader(),
        fib: w,
        fwd,
        fwd_reader,
        out_if,
        refused,
    })
}

/// Whether fibre forwards a packet from the host to `dst` (destinations it would not are
/// left out of the traffic: martians inside table prefixes).
pub(crate) fn forwarded(fib: &Fib, in_if: u32, dst: std::net::IpAddr) -> bool {
    let src = match dst {
        std::net::IpAddr::V4(_) => frames::HOST4.into(),
        std::net::IpAddr::V6(_) => frames::HOST6.into(),
    };
    let k = InputKey {
        dst,
        src,
        iif: in_if,
        tos: 0,
        mark: 0,
        proto: 17,
        sport: 1024,
        dport: 9,
        flowlabel: 0,
    };
    matches!(fib.route_input(&k), Ok(InputRoute::Forward(_)))
}

/// One pass of every vector through the pipeline; CPU nanoseconds per frame. Fails unless
/// every frame was forwarded and sent.
pub(crate) fn pipeline_pass(
    dp: &mut Dataplane,
    r: (&FibReader, &Reader<FwdTable>),
    vectors: &[(u32, &[u8])],
    batch: usize,
) -> Result<f64, BenchError> {
    let mut tx = CountTx::default();
    let before = dp.counters();
    let t = thread_cpu();
    for chunk in vectors.chunks(batch) {
        let fib = r.0.read();
        let fwd = r.1.read();
        dp.receive(
            View {
                fib: &fib,
                fwd: &fwd,
            },
            NOW,
            chunk,
            &mut tx,
        );
    }
    let ns = thread_cpu().saturating_sub(t).as_nanos() as f64 / vectors.len() as f64;
    dp.take_events().for_each(drop);
    let after = dp.counters();
    let n = vectors.len() as u64;
    let forwarded = after.forwarded - before.forwarded;
    if forwarded != n || tx.frames != n || after.dropped != before.dropped {
        return Err(BenchError::Forward(format!(
            "batch {batch}: {n} frames in, {forwarded} forwarded, {} sent, {} dropped",
            tx.frames,
            after.dropped - before.dropped
        )));
    }
    std::hint::black_box(tx.mix);
    Ok(ns)
}

/// What the writer did during a busy pass.
struct WriterRun {
    updates: u64,
    wall: Duration,
    cpu: Duration,
    /// Time it was runnable but waited for a CPU (the machine is shared).
    queued: Duration,
}

/// Applies route replaces at `rate` per second until `stop`: one publish per
/// `publish_every` updates, the forwarding objects updated after it. The standby copy
/// catches up lazily, at the next batch's first change (`with_standby`), which first waits
/// for the worker to leave the copy it was reading at the publish.
fn writer<A: Family>(
    router: (&mut FibWriter, &mut FwdWriter),
    routes: &[Route<A>],
    out_if: u32,
    (rate, publish_every): (u64, u64),
    rng: &mut Rng,
    stop: &AtomicBool,
) -> WriterRun {
    let (fib, fwd) = router;
    let start = Instant::now();
    let cpu = thread_cpu();
    let queued = sys::run_delay();
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        if done >= due {
            std::thread::sleep(Duration::from_micros(100));
            continue;
        }
        let n = (due - done).min(publish_every);
        fib.with_standby(Fib::begin_batch);
        for _ in 0..n {
            let r = &routes[rng.below(routes.len())];
            let hop = (r.next_hop + 1 + rng.below(NEXT_HOPS as usize - 1) as u32) % NEXT_HOPS;
            let c = Change::NewRoute(fib_route(r, hop, out_if), ReqFlags::REPLACE);
            // A refused replace (a prefix fibre refused at load) is an update too: the
            // kernel's daemon would have sent it.
            let _ = fib.apply(c);
        }
        fib.with_standby(Fib::end_batch);
        fib.publish();
        fwd.update(fib.latest());
        done += n;
    }
    WriterRun {
        updates: done,
        wall: start.elapsed(),
        cpu: thread_cpu().saturating_sub(cpu),
        queued: sys::run_delay().saturating_sub(queued),
    }
}

/// One busy pass: the worker's nanoseconds per frame and what the writer did.
struct Busy {
    ns: f64,
    rate: f64,
    cpu: f64,
    queued: f64,
}

/// One batch size's passes.
#[derive(Default)]
struct Samples {
    idle: Vec<f64>,
    lpm: Vec<f64>,
    /// Busy passes where the writer kept its rate, and those where it fell short.
    busy: Vec<Busy>,
    busy_slow: Vec<Busy>,
}

/// One family's figures for one batch size (medians over the runs).
struct Row {
    batch: usize,
    idle: f64,
    lpm: f64,
    busy: f64,
    /// Busy passes in which the writer kept the rate (the busy figures are theirs, when any).
    at_rate: usize,
    /// Updates per second the writer reached during the busy passes, and its CPU share.
    rate: f64,
    writer_cpu: f64,
    writer_queued: f64,
    load: String,
}

/// fibre's memory for the table: the published pair of FIBs and the forwarding objects.
struct Memory {
    fib_pair_rss: usize,
    fib_pair_heap: usize,
    fwd_rss: usize,
    fwd_heap: usize,
}

/// Runs the forwarding benchmark for one family: fibre, then (when asked) the kernel.
pub fn run<A: Family + LpmFamily>(routes: &[Route<A>], opts: &Options) -> Result<(), BenchError> {
    let name = A::NAME;
    println!(
        "\n== {name} forwarding: {} routes, {} frames of {FRAME_LEN} bytes, {} runs, batches {:?}, writer at {} updates/s, {} per publish ==",
        routes.len(),
        opts.frames,
        opts.runs,
        opts.batches,
        opts.update_rate,
        opts.publish_every
    );
    println!("  {}", sys::uptime());
    let share = sys::GroupShare::raise(GROUP_NICE);
    if share.raised() {
        println!("  (this process's autogroup runs at nice {GROUP_NICE} during the benchmark)");
    } else {
        println!(
            "  (scheduling share not raised: the writer's rate depends on the machine's load)"
        );
    }
    let m0 = sys::memory();
    let mut router = router(routes)?;
    let m1 = sys::memory();
    let fwd_again = FwdWriter::new(router.fib.latest());
    let m2 = sys::memory();
    drop(fwd_again);
    // `router` built one set of forwarding objects beside the FIBs: the second set, built
    // alone, says how much of the first delta is theirs.
    let (fwd_rss, fwd_heap) = (
        m2.rss.saturating_sub(m1.rss),
        m2.heap.saturating_sub(m1.heap),
    );
    let mem = Memory {
        fib_pair_rss: m1.rss.saturating_sub(m0.rss).saturating_sub(fwd_rss),
        fib_pair_heap: m1.heap.saturating_sub(m0.heap).saturating_sub(fwd_heap),
        fwd_rss,
        fwd_heap,
    };
    let in_if = router
        .fib
        .latest()
        .link_index(frames::IN_DEV)
        .ok_or_else(|| BenchError::Forward("no input link".into()))?;
    let (dsts, drawn) = {
        let fib = router.fib_reader.read();
        frames::destinations(routes, opts.frames, opts.seed, |a| {
            forwarded(&fib, in_if, a.ip())
        })
    };
    println!(
        "  fibre: {} routes refused (martians); {} destinations inside table prefixes ({} drawn, the rest not forwarded by fibre)",
        router.refused,
        dsts.len(),
        drawn
    );
    let frame_bytes = frames::build(&dsts);
    let vectors: Vec<(u32, &[u8])> = frame_bytes
        .chunks_exact(FRAME_LEN)
        .map(|f| (in_if, f))
        .collect();
    let lpm = A::lpm(routes)?;
    let keys = &dsts;
    let mut answers = vec![0u32; keys.len()];
    let mut dp = Dataplane::new(&Config::default())
        .map_err(|e| BenchError::Forward(format!("dataplane: {e:?}")))?;
    // Untimed warm-up: the pool's buffers and the first lookups' cold start.
    pipeline_pass(
        &mut dp,
        (&router.fib_reader, &router.fwd_reader),
        &vectors,
        VECTOR,
    )?;

    let mut rows = Vec::new();
    let mut rng = Rng::new(opts.seed ^ 0x5eed);
    let accepted: Vec<Route<A>> = routes
        .iter()
        .filter(|r| !frames::own_subnet(r))
        .copied()
        .collect();
    let mut samples: Vec<Samples> = opts.batches.iter().map(|_| Samples::default()).collect();
    for run in 0..opts.runs {
        for (bi, &batch) in opts.batches.iter().enumerate() {
            let idle = pipeline_pass(
                &mut dp,
                (&router.fib_reader, &router.fwd_reader),
                &vectors,
                batch,
            )?;
            let t = thread_cpu();
            for (k, o) in keys.chunks(batch).zip(answers.chunks_mut(batch)) {
                A::lookup_batch(&lpm, k, o);
            }
            let lpm_ns = thread_cpu().saturating_sub(t).as_nanos() as f64 / keys.len() as f64;
            if let Some(i) = answers.iter().position(|&a| a == crate::NO_ROUTE) {
                return Err(BenchError::Forward(format!(
                    "lpm: no route for {:?}",
                    keys[i].ip()
                )));
            }
            let stop = AtomicBool::new(false);
            let (fib_r, fwd_r) = (&router.fib_reader, &router.fwd_reader);
            let (fib_w, fwd_w) = (&mut router.fib, &mut router.fwd);
            let out_if = router.out_if;
            let rate = (opts.update_rate, opts.publish_every);
            let (busy, w) = std::thread::scope(|s| {
                let h =
                    s.spawn(|| writer((fib_w, fwd_w), &accepted, out_if, rate, &mut rng, &stop));
                let busy = pipeline_pass(&mut dp, (fib_r, fwd_r), &vectors, batch);
                stop.store(true, Ordering::Relaxed);
                (busy, h.join())
            });
            let w = w.map_err(|_| BenchError::Forward("the writer thread panicked".into()))?;
            let busy = busy?;
            let secs = w.wall.as_secs_f64();
            let s = &mut samples[bi];
            s.idle.push(idle);
            s.lpm.push(lpm_ns);
            let reached = w.updates as f64 / secs;
            let at_rate = reached >= AT_RATE * opts.update_rate as f64;
            let busy_samples = if at_rate {
                &mut s.busy
            } else {
                &mut s.busy_slow
            };
            busy_samples.push(Busy {
                ns: busy,
                rate: reached,
                cpu: w.cpu.as_secs_f64() / secs,
                queued: w.queued.as_secs_f64() / secs,
            });
            eprintln!(
                "  run {}/{} batch {batch}: pipeline {idle:.1} ns/frame, lpm {lpm_ns:.1} ns/addr, with updates {busy:.1} ns/frame ({:.0} updates/s, writer on a CPU {:.0}%, waiting for one {:.0}%); {}",
                run + 1,
                opts.runs,
                w.updates as f64 / secs,
                100.0 * w.cpu.as_secs_f64() / secs,
                100.0 * w.queued.as_secs_f64() / secs,
                sys::loadavg()
            );
        }
    }
    for (bi, &batch) in opts.batches.iter().enumerate() {
        let s = &samples[bi];
        // Passes where the writer fell short of the rate (the machine's other tenants took
        // its CPU) say nothing about the bar; they count only when no pass reached it.
        let busy = if s.busy.is_empty() {
            &s.busy_slow
        } else {
            &s.busy
        };
        let of = |f: fn(&Busy) -> f64| median(&busy.iter().map(f).collect::<Vec<_>>());
        rows.push(Row {
            batch,
            idle: median(&s.idle),
            lpm: median(&s.lpm),
            busy: of(|b| b.ns),
            at_rate: s.busy.len(),
            rate: of(|b| b.rate),
            writer_cpu: of(|b| b.cpu),
            writer_queued: of(|b| b.queued),
            load: sys::loadavg(),
        });
    }
    drop(dp);

    let kernel = if opts.kernel {
        match kforward::run::<A>(routes, &frame_bytes, opts) {
            Ok(k) => Some(k),
            Err(e) => {
                println!("  kernel: not measured: {e}");
                None
            }
        }
    } else {
        None
    };
    report::<A>(&rows, &mem, kernel.as_ref(), opts);
    Ok(())
}

fn report<A: Family>(rows: &[Row], mem: &Memory, kernel: Option<&KernelFigures>, opts: &Options) {
    let name = A::NAME;
    println!(
        "\n  {name}  batch  pipeline ns/pkt  lpm ns/addr  +updates ns/pkt  busy/idle  at rate  updates/s  writer cpu  queued  load (1, 5, 15 min)"
    );
    for r in rows {
        println!(
            "  {name}  {:5}  {:15.1}  {:11.1}  {:15.1}  {:8.2}x  {:3} of {:<2} {:9.0}  {:9.0}%  {:5.0}%  {}",
            r.batch,
            r.idle,
            r.lpm,
            r.busy,
            r.idle / r.busy,
            r.at_rate,
            opts.runs,
            r.rate,
            r.writer_cpu * 100.0,
            r.writer_queued * 100.0,
            r.load
        );
    }
    println!(
        "  (busy/idle: the idle rate over the rate with the writer at {} updates/s, from the passes where it reached {:.0}% of that (\"at rate\"), else from all; the bar is >= 0.9x)",
        opts.update_rate,
        AT_RATE * 100.0
    );
    for r in rows {
        let verdict = if r.idle <= BAR_NS {
            "met".to_owned()
        } else {
            format!("missed by {:.1}x", r.idle / BAR_NS)
        };
        println!(
            "  {name}  bar <= {BAR_NS} ns/pkt, batch {:3}: {:.1} ns: {verdict} (the LPM alone: {:.1} ns)",
            r.batch, r.idle, r.lpm
        );
    }
    if let Some(k) = kernel {
        println!(
            "\n  {name}  kernel: {} frames per run, {} runs, sender pinned to CPU {}",
            k.frames, k.runs, k.cpu
        );
        println!(
            "  {name}  kernel  forwarded  {:8.1} ns/pkt  baseline (dropped at ip_rcv)  {:8.1} ns/pkt  forwarding alone  {:8.1} ns/pkt  {}",
            k.forward_ns, k.baseline_ns, k.cost_ns, k.load
        );
        for r in rows {
            println!(
                "  {name}  kernel/fibre, batch {:3}: {:.1}x (kernel's forwarding alone over fibre's pipeline)",
                r.batch,
                k.cost_ns / r.idle
            );
        }
        println!(
            "  {name}  kernel memory for the table: {:.1} MiB after the load, {:.1} MiB after the traffic ({})",
            mib(k.memory_bytes),
            mib(k.memory_after_traffic),
            k.memory_detail
        );
    }
    println!(
        "  {name}  fibre memory: published FIB pair {:.1} MiB resident ({:.1} MiB heap), one copy {:.1} MiB; forwarding objects (both copies) {:.2} MiB resident ({:.2} MiB heap)",
        mib(mem.fib_pair_rss),
        mib(mem.fib_pair_heap),
        mib(mem.fib_pair_rss) / 2.0,
        mib(mem.fwd_rss),
        mib(mem.fwd_heap)
    );
}

/// The LPM structure of a family, for the lookup-alone figure.
pub trait LpmFamily: Family {
    type Lpm;
    fn lpm(routes: &[Route<Self>]) -> Result<Self::Lpm, BenchError>;
    fn lookup_batch(lpm: &Self::Lpm, keys: &[Self], out: &mut [u32]);
}

fn lpm_err(e: fibre_lpm::LpmError) -> BenchError {
    BenchError::Forward(format!("lpm: {e:?}"))
}

impl LpmFamily for u32 {
    type Lpm = fibre_lpm::v4::Lpm4;
    fn lpm(routes: &[Route<u32>]) -> Result<Self::Lpm, BenchError> {
        let kept = routes.iter().filter(|r| !frames::own_subnet(r));
        fibre_lpm::v4::Lpm4::from_routes(kept.map(|r| (r.prefix, r.len, r.next_hop)))
            .map_err(lpm_err)
    }
    fn lookup_batch(lpm: &Self::Lpm, keys: &[u32], out: &mut [u32]) {
        lpm.lookup_batch(keys, out);
    }
}

impl LpmFamily for u128 {
    type Lpm = fibre_lpm::v6::Lpm6;
    fn lpm(routes: &[Route<u128>]) -> Result<Self::Lpm, BenchError> {
        let kept = routes.iter().filter(|r| !frames::own_subnet(r));
        fibre_lpm::v6::Lpm6::from_routes(kept.map(|r| (r.prefix, r.len, r.next_hop)))
            .map_err(lpm_err)
    }
    fn lookup_batch(lpm: &Self::Lpm, keys: &[u128], out: &mut [u32]) {
        lpm.lookup_batch(keys, out);
    }
}
