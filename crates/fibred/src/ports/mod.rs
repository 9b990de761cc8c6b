//! Port links forwarding real frames: fibred's data plane.
//!
//! A port link (`LinkKind::Port`, `fibre link add NAME type port dev HOSTIF io KIND`) binds a
//! fibre link to a host interface of fibred's network namespace through one of fibre-io's
//! ports (AF_XDP, AF_PACKET, TAP). The engine asks the [`Binder`] to open the host interface
//! before it makes the link (a refusal makes none: `Operation not permitted`, `Cannot find
//! device`) and tells it when the link goes; the binder hands each forwarding worker its
//! share of the open port (the workers are threads of their own, all started with the first
//! port: [`worker`]), and a deleted link's port is closed by the workers, which drop their
//! shares between two rounds.
//!
//! Several workers (`[workers] count`, one per CPU by default; `cpu` pins them), each a data
//! plane of its own (buffers, neighbour queues, input route cache, counters), each polling
//! its queues: busy while frames come, asleep in poll(2) when none do. Every worker can
//! transmit on every port link, each through a transmit half of its own, so no frame takes a
//! lock; how a port link is shared depends on its kind ([`open_shares`]):
//! - AF_PACKET: each worker opens its own socket pair on the host interface, the receive
//!   sockets in one PACKET_FANOUT group (hash mode): the kernel hands each flow to one
//!   worker, whose packets then stay in order.
//! - AF_XDP and TAP: one queue to receive from, so the first worker receives; the others get
//!   a transmit half of their own: an AF_PACKET transmit socket on an AF_XDP port's
//!   interface, a duplicate of the TAP's descriptor (one write is one frame).
//! - A punt TAP: the first worker reads what the host sends; every worker writes to it
//!   through its own descriptor.
//!
//! The hand-off between the workers and the writer thread, who calls what:
//! - A worker reads the published FIB (a `FibReader`) and the forwarding objects (a
//!   `fibre_fwd::Reader`), one short read of each per vector: no lock, no allocation per
//!   packet.
//! - What a vector teaches (neighbours heard, neighbours to resolve) and what the ports see
//!   of their host interfaces (carrier, MTU, reported by the first worker, which has every
//!   port's receive side) go up to the writer through one bounded queue shared by the
//!   workers ([`UP_QUEUE`]); a full queue drops and counts (`events_lost`), never blocks. A
//!   worker then wakes the writer with one job, sent only when none is pending ([`Waker`]).
//! - The writer ([`Hub`]) applies them through the engine (neighbour changes announced as the
//!   kernel's, carrier and MTU as link changes) and publishes; the binder brings the
//!   forwarding objects up to date on every publish of the FIB (`PortBinder::published`).
//!   Only then do the neighbour actions go down to every worker, through a bounded queue
//!   each ([`ACTION_QUEUE`]), with its eventfd signalled: a released packet finds its
//!   neighbour's adjacency. Every worker releases (or answers "unreachable" for) the packets
//!   it holds for a neighbour; only the first sends the probes, so each goes out once.
//! - The writer runs the neighbour timers (`Fib::neigh_timers`) on the workers' clock
//!   (CLOCK_MONOTONIC in nanoseconds, `fibre_io::worker::monotonic_ns`).
//! - Counters: each worker copies its ports', links' and drop reasons' counters into its
//!   slot of [`Counters`] every [`STATS_EVERY`] and whenever its ports change (one
//!   uncontended lock per period); the metrics thread and the link dumps read their sum
//!   from there, and the metrics each worker's packets too.
//!
//! A port link may have a punt path for the host's own traffic: a TAP in fibred's namespace
//! ([`punt`] says how it is made and kept), handed to the workers with the port.

mod punt;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fibre_dataplane::drop::DropCounters;
use fibre_dataplane::pipeline::{self, Dataplane, Event};
use fibre_fib::types::{
    Errno, Link, LinkKind, LinkStats, PortIo, PortSpec, PuntStats, ReqFlags, RtError,
};
use fibre_fib::{Fib, NudAction};
use fibre_fwd::FwdWriter;
use fibre_io::worker::monotonic_ns;
use fibre_io::{Kind, OpenError, Port};
use fibre_proto::convert::Request;

use crate::engine::{Applied, Engine, Outcome, PortBinder};
use crate::sys::EventFd;
use crate::view::FibReader;

/// Messages from the worker to the writer waiting at once; beyond them the worker drops
/// (and counts) what it would send. Four vectors' worth of events (a vector leaves at most
/// two per frame it answers or holds, and most leave none).
pub const UP_QUEUE: usize = 4 * pipeline::VECTOR;
/// Neighbour actions from the writer to the worker waiting at once: as many as neighbours
/// may have packets held (fibre-dataplane's default `waiting_neighbours`), each resolved or
/// failed in one action, plus as many probes.
pub const ACTION_QUEUE: usize = 2 * 1024;
/// How often the worker copies its counters out for the readers.
pub const STATS_EVERY: Duration = Duration::from_millis(100);

/// The forwarding workers' settings (`[workers]` in the configuration file).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// How many (at least one); `None`: one per CPU fibred may run on.
    pub count: Option<usize>,
    /// Pin worker i to `cpus[i % cpus.len()]`; empty: unpinned.
    pub cpus: Vec<usize>,
}

impl Settings {
    /// How many workers run.
    pub fn workers(&self) -> usize {
        self.count
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }

    fn cpu(&self, worker: usize) -> Option<usize> {
        (!self.cpus.is_empty()).then(|| self.cpus[worker % self.cpus.len()])
    }
}

/// What goes up from the worker to the writer.
#[derive(Debug, Clone, Copy)]
enum Up {
    Neigh(Event),
    /// A port's host interface has this carrier or MTU now (`None`: unchanged).
    Follow {
        ifindex: u32,
        carrier: Option<bool>,
        mtu: Option<u32>,
    },
}

/// A worker's share of a port (or of a punt TAP).
enum Share {
    /// The whole port: the worker receives from it and transmits on it.
    Port(Port),
    /// A transmit half of its own; another worker receives.
    Output(Box<dyn fibre_io::TxQueue>),
}

/// A worker's share of a port link: of its port, and of its punt TAP if it has one.
struct LinkShare {
    port: Share,
    punt: Option<Share>,
}

/// What goes from the binder to a worker.
enum Control {
    Add {
        ifindex: u32,
        spec: PortSpec,
        share: Box<LinkShare>,
    },
    Remove(u32),
}

/// Wakes the writer with one job while none is pending.
pub struct Waker {
    pending: AtomicBool,
    /// Queues the writer's job without blocking; false when its queue is full.
    send: Box<dyn Fn() -> bool + Send + Sync>,
}

impl Waker {
    fn wake(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) && !(self.send)() {
            // The queue was full: the next message up tries again.
            self.pending.store(false, Ordering::Release);
        }
    }
}

/// The worker's wake-up: an eventfd in its poll set, and what it was woken for.
struct Kick {
    fd: EventFd,
    /// Ports were added or removed, or the worker must stop.
    control: AtomicBool,
    /// Neighbour actions wait in the queue.
    actions: AtomicBool,
}

/// One port link as the readers see it.
#[derive(Debug, Clone)]
pub struct PortStats {
    pub ifindex: u32,
    pub spec: PortSpec,
    /// How the port runs (its rings, or AF_XDP's copy and XDP modes).
    pub detail: &'static str,
    /// "up", "down" (the host interface is down or without carrier) or "gone"; "output" in
    /// the snapshot of a worker that only transmits on the port.
    pub state: &'static str,
    pub port: fibre_io::Counters,
    pub link: fibre_dataplane::drop::LinkStats,
    /// The punt path's, for a link with one.
    pub punt: Option<PuntStats>,
}

/// A worker's counters as last copied out, or their sum over the workers.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub ports: Vec<PortStats>,
    pub drops: DropCounters,
    pub dataplane: pipeline::Counters,
    /// Frames the data plane sent on links without a port.
    pub unrouted: u64,
    /// Messages to the writer lost to a full queue.
    pub events_lost: u64,
}

impl PortStats {
    /// Adds another worker's counters of the same port; its state and mode are those of the
    /// worker that receives from it.
    fn add(&mut self, o: &PortStats) {
        self.port.add(&o.port);
        self.link.add(&o.link);
        if let Some(c) = &o.punt {
            self.punt.get_or_insert_with(PuntStats::default).add(c);
        }
        if self.state == worker::OUTPUT && o.state != worker::OUTPUT {
            (self.state, self.detail) = (o.state, o.detail);
        }
    }
}

impl Snapshot {
    /// Adds another worker's counters.
    fn add(&mut self, o: &Snapshot) {
        for p in &o.ports {
            match self.ports.iter_mut().find(|m| m.ifindex == p.ifindex) {
                Some(m) => m.add(p),
                None => self.ports.push(p.clone()),
            }
        }
        self.drops.merge(&o.drops);
        self.dataplane.add(&o.dataplane);
        self.unrouted += o.unrouted;
        self.events_lost += o.events_lost;
    }
}

/// The counters readers see ([`STATS_EVERY`] old at most): each worker's.
#[derive(Default)]
pub struct Counters {
    workers: Mutex<Vec<Snapshot>>,
    /// Neighbour actions lost to a full queue (counted by the writer).
    actions_lost: AtomicU64,
}

impl Counters {
    /// The workers' counters added up.
    pub fn snapshot(&self) -> Snapshot {
        let mut sum = Snapshot::default();
        for w in self.workers() {
            sum.add(&w);
        }
        sum
    }

    /// Each worker's counters, by worker.
    pub fn workers(&self) -> Vec<Snapshot> {
        self.workers.lock().map(|w| w.clone()).unwrap_or_default()
    }

    pub fn actions_lost(&self) -> u64 {
        self.actions_lost.load(Ordering::Relaxed)
    }

    /// The counters of port link `ifindex`, if it is one with a port.
    pub fn link(&self, ifindex: u32) -> Option<PortStats> {
        let workers = self.workers.lock().ok()?;
        let mut sum: Option<PortStats> = None;
        for p in workers.iter().flat_map(|w| &w.ports) {
            match &mut sum {
                _ if p.ifindex != ifindex => {}
                Some(m) => m.add(p),
                None => sum = Some(p.clone()),
            }
        }
        sum
    }

    fn set(&self, worker: usize, s: Snapshot) {
        if let Ok(mut w) = self.workers.lock() {
            if w.len() <= worker {
                w.resize_with(worker + 1, Snapshot::default);
            }
            w[worker] = s;
        }
    }
}

impl crate::engine::LinkCounters for Counters {
    /// What the port counted, with the data plane's drops and errors counted on the link.
    fn stats(&self, ifindex: u32) -> Option<LinkStats> {
        let p = self.link(ifindex)?;
        let (port, link) = (p.port, p.link);
        Some(LinkStats {
            rx_packets: port.rx_packets,
            rx_bytes: port.rx_bytes,
            rx_errors: link.rx_errors,
            rx_dropped: port.rx_ring_drops + link.rx_dropped,
            multicast: link.multicast,
            rx_otherhost_dropped: link.rx_otherhost_dropped,
            tx_packets: port.tx_packets,
            tx_bytes: port.tx_bytes,
            tx_errors: port.errors + link.tx_errors,
            tx_dropped: port.tx_full + link.tx_dropped,
        })
    }

    fn punt(&self, ifindex: u32) -> Option<PuntStats> {
        self.link(ifindex)?.punt
    }
}

/// A worker thread and how to reach it.
struct WorkerThread {
    ctl: mpsc::Sender<Control>,
    kick: Arc<Kick>,
    thread: Option<JoinHandle<()>>,
}

/// A worker's ends of the queues, until it starts.
struct WorkerEnds {
    up: SyncSender<Up>,
    actions: Receiver<NudAction>,
    kick: Arc<Kick>,
}

/// The engine's [`PortBinder`]: opens host interfaces, hands the workers (which it starts
/// with the first port) their shares of each port, and keeps the forwarding objects up to
/// date with the FIB.
pub struct Binder {
    settings: Settings,
    reader: FibReader,
    fwd: FwdWriter,
    /// The ports (and punt TAPs) opened for a link about to be made: each worker's share.
    pending: Option<(PortSpec, Vec<LinkShare>)>,
    punts: punt::Punts,
    /// The workers' ends of the queues, until they start.
    ends: Vec<WorkerEnds>,
    waker: Arc<Waker>,
    counters: Arc<Counters>,
    workers: Vec<WorkerThread>,
    stop: Arc<AtomicBool>,
    /// Ports opened so far, which number their fanout groups.
    opened: u16,
}

/// The writer's side of the hand-off (see the module documentation).
pub struct Hub {
    up: Receiver<Up>,
    /// Each worker's neighbour actions and its wake-up.
    actions: Vec<(SyncSender<NudAction>, Arc<Kick>)>,
    waker: Arc<Waker>,
    /// Actions of the changes applied, sent once they are published.
    out: Vec<NudAction>,
    counters: Arc<Counters>,
}

/// A port link of the configuration file (`[[port]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortLink {
    pub name: String,
    pub spec: PortSpec,
}

/// Starts the data plane's side of the daemon: binds the port links `engine` already has
/// (restored from the state file: a host interface that cannot be opened leaves its link
/// without a port, with a warning, so that a missing interface does not stop a restart),
/// has the engine bind those made from now on, and makes the configuration's `links` that
/// the engine lacks (one that cannot be made refuses the start). Returns the writer's hub.
/// `wake` queues the writer's job that makes it call [`Hub::apply`]; it must not block.
pub fn start(
    settings: Settings,
    engine: &mut Engine,
    links: &[PortLink],
    wake: Box<dyn Fn() -> bool + Send + Sync>,
) -> std::io::Result<Hub> {
    let (up_tx, up_rx) = mpsc::sync_channel(UP_QUEUE);
    let mut ends = Vec::new();
    let mut actions = Vec::new();
    for _ in 0..settings.workers() {
        let (act_tx, act_rx) = mpsc::sync_channel(ACTION_QUEUE);
        let kick = Arc::new(Kick {
            fd: EventFd::new()?,
            control: AtomicBool::new(false),
            actions: AtomicBool::new(false),
        });
        actions.push((act_tx, kick.clone()));
        ends.push(WorkerEnds {
            up: up_tx.clone(),
            actions: act_rx,
            kick,
        });
    }
    let waker = Arc::new(Waker {
        pending: AtomicBool::new(false),
        send: wake,
    });
    let counters = Arc::new(Counters::default());
    let (fwd, _) = FwdWriter::new(engine.fib());
    let mut binder = Binder {
        settings,
        reader: engine.reader(),
        fwd,
        pending: None,
        punts: punt::Punts::default(),
        ends,
        waker: waker.clone(),
        counters: counters.clone(),
        workers: Vec::new(),
        stop: Arc::new(AtomicBool::new(false)),
        opened: 0,
    };
    for link in engine.fib().links() {
        let (Some(LinkKind::Port(spec)), Some(name)) = (&link.kind, &link.ifname) else {
            continue;
        };
        match binder.open(spec) {
            Ok(_) => binder.commit(Some(link.ifindex)),
            Err(e) => {
                tracing::warn!(link = %name, dev = %spec.dev, io = %spec.io.name(), error = %crate::engine::errno_text(&e), "port link without its host interface")
            }
        }
    }
    engine.bind_ports(Box::new(binder));
    engine.set_link_counters(counters.clone());
    for l in links {
        if engine.fib().link_index(&l.name).is_some() {
            continue;
        }
        let link = Link {
            ifname: Some(l.name.clone()),
            kind: Some(LinkKind::Port(l.spec.clone())),
            ..Link::default()
        };
        if let Err(e) = engine.own_request(Request::NewLink(link, ReqFlags::ADD)) {
            let why = match e.errno {
                Errno::ENODEV => format!("Cannot find device \"{}\"", l.spec.dev),
                _ => crate::engine::errno_text(&e),
            };
            return Err(std::io::Error::other(format!("port {}: {why}", l.name)));
        }
    }
    Ok(Hub {
        up: up_rx,
        actions,
        waker,
        out: Vec::new(),
        counters,
    })
}

impl Kick {
    fn control(&self) {
        self.control.store(true, Ordering::Release);
        self.fd.signal();
    }
}

impl Binder {
    /// How many workers run, or will once the first port comes.
    fn count(&self) -> usize {
        self.workers.len().max(self.ends.len())
    }

    /// The workers, started on first use.
    fn workers(&mut self) -> &[WorkerThread] {
        for (index, end) in std::mem::take(&mut self.ends).into_iter().enumerate() {
            // The pool's headroom covers the encapsulations the routes hold when the worker
            // starts; a larger one added later costs its packets one counted copy each.
            let cfg = pipeline::Config::default().with_encap_headroom(&self.reader.read());
            let dp = match Dataplane::new(&cfg) {
                Ok(dp) => dp,
                Err(e) => {
                    tracing::error!(worker = index, error = ?e, "data plane not started");
                    continue;
                }
            };
            let (ctl, ctl_rx) = mpsc::channel();
            let remote = worker::Remote {
                index,
                fib: self.reader.clone(),
                fwd: self.fwd.reader(),
                up: end.up,
                waker: self.waker.clone(),
                actions: end.actions,
                kick: end.kick.clone(),
                ctl: ctl_rx,
                counters: self.counters.clone(),
                bound: Vec::new(),
                held: Vec::with_capacity(ACTION_QUEUE),
                next_stats: 0,
                events_lost: 0,
                kicked: false,
            };
            let cpu = self.settings.cpu(index);
            let stop = self.stop.clone();
            let thread = std::thread::Builder::new()
                .name(format!("fibred-fwd{index}"))
                .spawn(move || worker::run(remote, dp, &stop, cpu));
            match thread {
                Ok(t) => self.workers.push(WorkerThread {
                    ctl,
                    kick: end.kick,
                    thread: Some(t),
                }),
                Err(e) => tracing::error!(worker = index, error = %e, "data plane not started"),
            }
        }
        &self.workers
    }
}

impl Drop for Binder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in &self.workers {
            w.kick.control();
        }
        for w in &mut self.workers {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// The engine's errno for a port that could not be opened, as the kernel would answer.
fn open_error(e: &OpenError) -> RtError {
    match e {
        OpenError::NotPermitted => RtError::new(Errno::EPERM),
        OpenError::NoDevice(_) => RtError::new(Errno::ENODEV),
        OpenError::Setup { step, error } => RtError::msg(
            Errno(error.raw_os_error().unwrap_or(Errno::EINVAL.0)),
            format!("{step}: {error}"),
        ),
    }
}

/// The link-layer address of host interface `dev`, from sysfs.
fn host_mac(dev: &str) -> Option<Vec<u8>> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{dev}/address")).ok()?;
    let mac = text
        .trim()
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    (mac.len() == 6).then_some(mac)
}

/// The PACKET_FANOUT group of the `n`th AF_PACKET port this daemon opens. Groups are the
/// network namespace's, whichever process opens them: the daemon's process id keeps its
/// groups apart from another fibred's.
fn fanout_group(n: u16) -> u16 {
    (std::process::id() as u16).rotate_left(8) ^ n
}

/// Opens port `spec` for `workers` workers: each worker's share of the port, the first's
/// always the whole port (see the module documentation), and of its punt TAP, if any; the
/// AF_PACKET sockets of several workers join fanout group `group`.
fn open_shares(
    spec: &PortSpec,
    workers: usize,
    group: u16,
    mac: Option<&[u8]>,
) -> Result<Vec<LinkShare>, RtError> {
    let first = match (spec.io, workers) {
        (PortIo::AfPacket, 2..) => fanout_port(&spec.dev, group)?,
        (io, _) => Port::open(kind(io), &spec.dev).map_err(|e| open_error(&e))?,
    };
    let punt = punt::open(spec, mac)?;
    let io_error =
        |step: &'static str, e: std::io::Error| open_error(&OpenError::Setup { step, error: e });
    let mut shares = Vec::with_capacity(workers);
    for _ in 1..workers {
        let port = match spec.io {
            PortIo::AfPacket => Share::Port(fanout_port(&spec.dev, group)?),
            PortIo::AfXdp => Share::Output(
                fibre_io::packet::open_tx(&spec.dev, &Default::default())
                    .map_err(|e| open_error(&e))?,
            ),
            PortIo::Tap => {
                Share::Output(fibre_io::tap::writer(first.tx.fd()).map_err(|e| io_error("dup", e))?)
            }
        };
        let to_host = match &punt {
            Some(tap) => Some(Share::Output(
                fibre_io::tap::writer(tap.tx.fd()).map_err(|e| io_error("dup", e))?,
            )),
            None => None,
        };
        shares.push(LinkShare {
            port,
            punt: to_host,
        });
    }
    shares.insert(
        0,
        LinkShare {
            port: Share::Port(first),
            punt: punt.map(Share::Port),
        },
    );
    Ok(shares)
}

/// An AF_PACKET port on `dev` in fanout group `group`.
fn fanout_port(dev: &str, group: u16) -> Result<Port, RtError> {
    let config = fibre_io::packet::Config {
        fanout: Some(group),
        ..Default::default()
    };
    fibre_io::packet::open(dev, &config).map_err(|e| open_error(&e))
}

fn kind(io: PortIo) -> Kind {
    match io {
        PortIo::AfXdp => Kind::AfXdp,
        PortIo::AfPacket => Kind::AfPacket,
        PortIo::Tap => Kind::Tap,
    }
}

impl PortBinder for Binder {
    fn open(&mut self, spec: &PortSpec) -> Result<Option<Vec<u8>>, RtError> {
        self.pending = None;
        // A TAP's own address is the host's end; the link is the other end and keeps its own.
        let mac = match spec.io {
            PortIo::Tap => None,
            _ => host_mac(&spec.dev),
        };
        self.opened = self.opened.wrapping_add(1);
        let group = fanout_group(self.opened);
        let shares = open_shares(spec, self.count(), group, mac.as_deref())?;
        self.pending = Some((spec.clone(), shares));
        Ok(mac)
    }

    fn commit(&mut self, ifindex: Option<u32>) {
        let (Some(ifindex), Some((spec, shares))) = (ifindex, self.pending.take()) else {
            return;
        };
        if let Some(LinkShare {
            port: Share::Port(port),
            punt,
        }) = shares.first()
        {
            tracing::info!(link = ifindex, dev = %spec.dev, io = %spec.io.name(), mode = %port.detail, workers = shares.len(), "port bound");
            if let Some(Share::Port(tap)) = punt {
                self.punts.add(ifindex, &spec, tap);
            }
        }
        let workers = self.workers();
        for (w, share) in workers.iter().zip(shares) {
            let add = Control::Add {
                ifindex,
                spec: spec.clone(),
                share: Box::new(share),
            };
            if w.ctl.send(add).is_ok() {
                w.kick.control();
            }
        }
    }

    fn removed(&mut self, ifindex: u32) {
        self.punts.remove(ifindex);
        for w in &self.workers {
            if w.ctl.send(Control::Remove(ifindex)).is_ok() {
                w.kick.control();
            }
        }
    }

    /// The forwarding objects follow the FIB once a worker reads them (until then a
    /// publish costs nothing more: a daemon without port links recompiles nothing).
    fn published(&mut self, fib: &Fib) {
        if !self.workers.is_empty() {
            self.fwd.update(fib);
        }
        self.punts.sync(fib);
    }
}

impl Hub {
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Applies what the worker sent up (the writer's job, in one batch of the engine's):
    /// neighbour events at the time of this call, carrier and MTU changes. The neighbour
    /// actions wait for [`Hub::send_actions`], after the publish.
    pub fn apply(&mut self, engine: &mut Engine, listening: u64) -> Applied {
        self.waker.pending.store(false, Ordering::Release);
        let mut out = Outcome::default();
        let mut events = Vec::new();
        while let Ok(u) = self.up.try_recv() {
            match u {
                Up::Neigh(e) => events.push(e),
                Up::Follow {
                    ifindex,
                    carrier,
                    mtu,
                } => engine.follow(ifindex, carrier, mtu, listening, &mut out),
            }
        }
        if !events.is_empty() {
            let actions = engine.neigh_events(events, monotonic_ns(), listening, &mut out);
            self.out.extend(actions);
        }
        // Neighbours and carriers are the host's and the network's, not configuration: the
        // state file does not change for them.
        Applied {
            notes: out.notes,
            changed: false,
        }
    }

    /// When the next neighbour timer is due, if one runs.
    pub fn due(&self, fib: &Fib) -> Option<Instant> {
        let at = fib.neigh_next_timer()?;
        Some(Instant::now() + Duration::from_nanos(at.saturating_sub(monotonic_ns())))
    }

    /// Runs the neighbour timers due now, as [`Hub::apply`].
    pub fn timers(&mut self, engine: &mut Engine, listening: u64) -> Applied {
        let mut out = Outcome::default();
        let now = monotonic_ns();
        if engine.fib().neigh_next_timer().is_some_and(|at| at <= now) {
            let actions = engine.neigh_timers(now, listening, &mut out);
            self.out.extend(actions);
        }
        Applied {
            notes: out.notes,
            changed: false,
        }
    }

    /// Sends the neighbour actions of what was applied and published down to every worker.
    pub fn send_actions(&mut self) {
        if self.out.is_empty() {
            return;
        }
        for (queue, kick) in &self.actions {
            for a in &self.out {
                if queue.try_send(*a).is_err() {
                    self.counters.actions_lost.fetch_add(1, Ordering::Relaxed);
                }
            }
            kick.actions.store(true, Ordering::Release);
            kick.fd.signal();
        }
        self.out.clear();
    }
}
