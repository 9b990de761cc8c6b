//! Port links forwarding real frames: fibred's data plane.
//!
//! A port link (`LinkKind::Port`, `fibre link add NAME type port dev HOSTIF io KIND`) binds a
//! fibre link to a host interface of fibred's network namespace through one of fibre-io's
//! ports (AF_XDP, AF_PACKET, TAP). The engine asks the [`Binder`] to open the host interface
//! before it makes the link (a refusal makes none: `Operation not permitted`, `Cannot find
//! device`) and tells it when the link goes; the binder hands the open port to the
//! forwarding worker, a thread of its own started with the first port ([`worker`]), and a
//! deleted link's port is closed by the worker, which drops it between two rounds.
//!
//! The hand-off between the worker and the writer thread, who calls what:
//! - The worker reads the published FIB (a `FibReader`) and the forwarding objects (a
//!   `fibre_fwd::Reader`), one short read of each per vector: no lock, no allocation per
//!   packet.
//! - What a vector teaches (neighbours heard, neighbours to resolve) and what the ports see
//!   of their host interfaces (carrier, MTU) go up to the writer through one bounded queue
//!   ([`UP_QUEUE`]); a full queue drops and counts (`events_lost`), never blocks. The worker
//!   then wakes the writer with one job, sent only when none is pending ([`Waker`]).
//! - The writer ([`Hub`]) applies them through the engine (neighbour changes announced as the
//!   kernel's, carrier and MTU as link changes) and publishes; the binder brings the
//!   forwarding objects up to date on every publish of the FIB (`PortBinder::published`).
//!   Only then do the neighbour actions (probes to send, held packets to release or answer
//!   "unreachable") go down to the worker, through a second bounded queue
//!   ([`ACTION_QUEUE`]), with its eventfd signalled: a released packet finds its
//!   neighbour's adjacency.
//! - The writer runs the neighbour timers (`Fib::neigh_timers`) on the worker's clock
//!   (CLOCK_MONOTONIC in nanoseconds, `fibre_io::worker::monotonic_ns`).
//! - Counters: the worker copies its ports', links' and drop reasons' counters into
//!   [`Counters`] every [`STATS_EVERY`] and whenever its ports change (one uncontended lock
//!   per period); the metrics thread and the link dumps read them from there.
//!
//! A port link may have a punt path for the host's own traffic: a TAP in fibred's namespace
//! ([`punt`] says how it is made and kept), handed to the worker with the port.
//!
//! One worker forwards for every port (a worker must transmit on every port, and only
//! AF_PACKET could open a port once per worker); `[workers] cpu` pins it.

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

/// The forwarding worker's settings (`[workers]` in the configuration file).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Pin the worker to this CPU.
    pub cpu: Option<usize>,
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

/// What goes from the binder to the worker.
enum Control {
    Add {
        ifindex: u32,
        spec: PortSpec,
        port: Port,
        /// The link's punt TAP.
        punt: Option<Port>,
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
    /// "up", "down" (the host interface is down or without carrier) or "gone".
    pub state: &'static str,
    pub port: fibre_io::Counters,
    pub link: fibre_dataplane::drop::LinkStats,
    /// The punt path's, for a link with one.
    pub punt: Option<PuntStats>,
}

/// The worker's counters as last copied out.
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

/// The counters readers see ([`STATS_EVERY`] old at most).
#[derive(Default)]
pub struct Counters {
    snapshot: Mutex<Snapshot>,
    /// Neighbour actions lost to a full queue (counted by the writer).
    actions_lost: AtomicU64,
}

impl Counters {
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub fn actions_lost(&self) -> u64 {
        self.actions_lost.load(Ordering::Relaxed)
    }

    /// The counters of port link `ifindex`, if it is one with a port.
    pub fn link(&self, ifindex: u32) -> Option<PortStats> {
        let s = self.snapshot.lock().ok()?;
        s.ports.iter().find(|p| p.ifindex == ifindex).cloned()
    }

    fn set(&self, s: Snapshot) {
        if let Ok(mut cur) = self.snapshot.lock() {
            *cur = s;
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

/// The worker thread and how to reach it.
struct WorkerThread {
    ctl: mpsc::Sender<Control>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The engine's [`PortBinder`]: opens host interfaces, hands their ports to the worker (which
/// it starts with the first), and keeps the forwarding objects up to date with the FIB.
pub struct Binder {
    settings: Settings,
    reader: FibReader,
    fwd: FwdWriter,
    /// The port (and punt TAP) opened for a link about to be made.
    pending: Option<(PortSpec, Port, Option<Port>)>,
    punts: punt::Punts,
    kick: Arc<Kick>,
    /// The worker's ends of the queues, until it starts.
    worker_ends: Option<(SyncSender<Up>, Receiver<NudAction>)>,
    waker: Arc<Waker>,
    counters: Arc<Counters>,
    worker: Option<WorkerThread>,
}

/// The writer's side of the hand-off (see the module documentation).
pub struct Hub {
    up: Receiver<Up>,
    actions: SyncSender<NudAction>,
    kick: Arc<Kick>,
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
    let (act_tx, act_rx) = mpsc::sync_channel(ACTION_QUEUE);
    let kick = Arc::new(Kick {
        fd: EventFd::new()?,
        control: AtomicBool::new(false),
        actions: AtomicBool::new(false),
    });
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
        kick: kick.clone(),
        worker_ends: Some((up_tx, act_rx)),
        waker: waker.clone(),
        counters: counters.clone(),
        worker: None,
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
        actions: act_tx,
        kick,
        waker,
        out: Vec::new(),
        counters,
    })
}

impl Binder {
    fn signal(&self) {
        self.kick.control.store(true, Ordering::Release);
        self.kick.fd.signal();
    }

    /// The worker, started on first use.
    fn worker(&mut self) -> Option<&WorkerThread> {
        if self.worker.is_none() {
            let (up, actions) = self.worker_ends.take()?;
            // The pool's headroom covers the encapsulations the routes hold when the worker
            // starts; a larger one added later costs its packets one counted copy each.
            let cfg = pipeline::Config::default().with_encap_headroom(&self.reader.read());
            let dp = match Dataplane::new(&cfg) {
                Ok(dp) => dp,
                Err(e) => {
                    tracing::error!(error = ?e, "data plane not started");
                    return None;
                }
            };
            let (ctl, ctl_rx) = mpsc::channel();
            let stop = Arc::new(AtomicBool::new(false));
            let remote = worker::Remote {
                fib: self.reader.clone(),
                fwd: self.fwd.reader(),
                up,
                waker: self.waker.clone(),
                actions,
                kick: self.kick.clone(),
                ctl: ctl_rx,
                counters: self.counters.clone(),
                bound: Vec::new(),
                held: Vec::with_capacity(ACTION_QUEUE),
                next_stats: 0,
                events_lost: 0,
                kicked: false,
            };
            let cpu = self.settings.cpu;
            let stop2 = stop.clone();
            let thread = std::thread::Builder::new()
                .name("fibred-fwd".into())
                .spawn(move || worker::run(remote, dp, &stop2, cpu));
            match thread {
                Ok(t) => {
                    self.worker = Some(WorkerThread {
                        ctl,
                        stop,
                        thread: Some(t),
                    })
                }
                Err(e) => tracing::error!(error = %e, "data plane not started"),
            }
        }
        self.worker.as_ref()
    }
}

impl Drop for Binder {
    fn drop(&mut self) {
        if let Some(mut w) = self.worker.take() {
            w.stop.store(true, Ordering::Relaxed);
            self.signal();
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
        let port = Port::open(kind(spec.io), &spec.dev).map_err(|e| open_error(&e))?;
        // A TAP's own address is the host's end; the link is the other end and keeps its own.
        let mac = match spec.io {
            PortIo::Tap => None,
            _ => host_mac(&spec.dev),
        };
        let punt = punt::open(spec, mac.as_deref())?;
        self.pending = Some((spec.clone(), port, punt));
        Ok(mac)
    }

    fn commit(&mut self, ifindex: Option<u32>) {
        let (Some(ifindex), Some((spec, port, punt))) = (ifindex, self.pending.take()) else {
            return;
        };
        tracing::info!(link = ifindex, dev = %spec.dev, io = %spec.io.name(), mode = %port.detail, "port bound");
        if let Some(tap) = &punt {
            self.punts.add(ifindex, &spec, tap);
        }
        let sent = self.worker().is_some_and(|w| {
            w.ctl
                .send(Control::Add {
                    ifindex,
                    spec,
                    port,
                    punt,
                })
                .is_ok()
        });
        if sent {
            self.signal();
        }
    }

    fn removed(&mut self, ifindex: u32) {
        self.punts.remove(ifindex);
        let sent = self
            .worker
            .as_ref()
            .is_some_and(|w| w.ctl.send(Control::Remove(ifindex)).is_ok());
        if sent {
            self.signal();
        }
    }

    /// The forwarding objects follow the FIB once a worker reads them (until then a
    /// publish costs nothing more: a daemon without port links recompiles nothing).
    fn published(&mut self, fib: &Fib) {
        if self.worker.is_some() {
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

    /// Sends the neighbour actions of what was applied and published down to the worker.
    pub fn send_actions(&mut self) {
        if self.out.is_empty() {
            return;
        }
        for a in self.out.drain(..) {
            if self.actions.try_send(a).is_err() {
                self.counters.actions_lost.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.kick.actions.store(true, Ordering::Release);
        self.kick.fd.signal();
    }
}
