//! A forwarding worker: the ports of some fibre links, polled in turn, each vector of frames
//! run through the data plane (`fibre_dataplane::Dataplane::receive`) and what it sends
//! transmitted on the port of its output link; asleep in poll(2) while no port has frames and
//! no timer is due, so an idle worker uses no CPU.
//!
//! Between vectors comes the writer's side's [`Turn`]. [`Router`] is that side in one thread
//! (the routing state and the forwarding objects compiled from it): the worker takes the
//! writer's turn itself, as `fibre forward` does over captures: the events a vector left are
//! applied, the objects updated, and the neighbour actions they ask for carried out. fibred's
//! workers have a turn of their own, which reads the published state and hands the events to
//! its writer thread.
//!
//! A port's host interface state becomes its link's carrier in the routing state (down or
//! removed: no carrier), and its MTU the link's MTU, as the kernel's links follow their
//! cables and drivers. Ports whose interface is removed ([`PortError::Gone`]) are no longer
//! polled; their counters stay readable. Frames that a port's ring refuses are counted by the
//! port (`tx_full`, `errors`); frames for a link without a port in [`Worker::unrouted`].
//!
//! A bound link may have a punt path ([`Worker::punt`]): a TAP port in the host, which takes
//! the router's own traffic the data plane does not answer (`Tx::punt`) and whose frames (the
//! host's) leave by the link's port unchanged, polled beside the ports. The host's share of
//! the worker is bounded: at most [`PUNT_BUDGET`] frames to one link's host per round, the
//! rest dropped and counted; a write to a TAP never blocks (the host's backlog is the
//! queue, and a full one drops, counted on the device). The TAP's carrier follows the port's.
//!
//! Who calls what: one thread owns a worker and its turn. Nothing here allocates per frame:
//! the vectors live on the stack, the port list changes only by [`Worker::add`],
//! [`Worker::add_output`], [`Worker::punt`], [`Worker::punt_to`] and [`Worker::remove`].

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fibre_dataplane::pipeline::{apply_events, Dataplane, Tx, View, VECTOR};
use fibre_fib::types::{Link, PuntStats, ReqFlags};
use fibre_fib::{Fib, NudAction};
use fibre_fwd::FwdWriter;

use crate::{Counters, Port, PortError, RxQueue, TxQueue};

/// The longest an idle worker sleeps before it looks at its ports' state and its stop flag:
/// an AF_XDP socket signals nothing when its interface goes away, and a stop request waits
/// at most this long.
pub const IDLE_CHECK: Duration = Duration::from_millis(100);

/// Frames one link's host is handed per round of [`Worker::poll_once`] at most: one vector's
/// worth, against the four vectors a round takes from each port, so that a flood aimed at
/// the router's addresses costs forwarding at most a share of its system calls; beyond it the
/// frames are dropped and counted (`PuntStats::dropped`).
pub const PUNT_BUDGET: u32 = VECTOR as u32;

/// What runs between a worker's vectors and around them: the writer's side of the data plane
/// (the routing state, the forwarding objects, the neighbour states).
pub trait Turn {
    /// One vector received at `now`, then the writer's side's turn.
    fn vector(&mut self, dp: &mut Dataplane, now: u64, frames: &[(u32, &[u8])], tx: &mut dyn Tx);

    /// The earliest timer due, the data plane's (`dp`) and the writer's side's own.
    fn next_timer(&self, dp: &Dataplane) -> Option<u64>;

    /// The earliest timer due at or before `until`.
    fn next_due(&self, dp: &Dataplane, until: u64) -> Option<u64> {
        self.next_timer(dp).filter(|at| *at <= until)
    }

    /// Runs the timers due at `at`.
    fn fire(&mut self, dp: &mut Dataplane, at: u64, tx: &mut dyn Tx);

    /// Link `ifindex`'s host interface got this carrier or MTU (`None`: unchanged).
    fn follow(&mut self, ifindex: u32, carrier: Option<bool>, mtu: Option<u32>);

    /// Called once per round of [`Worker::run`], before the ports are polled: the place to
    /// change the worker's ports or read its counters.
    fn between(&mut self, _worker: &mut Worker) {}
}

/// The routing state and the forwarding objects compiled from it, in the worker's own thread.
pub struct Router {
    pub fib: Fib,
    pub fwd: FwdWriter,
    actions: Vec<NudAction>,
}

impl Router {
    pub fn new(fib: Fib) -> Router {
        let (fwd, _) = FwdWriter::new(&fib);
        Router {
            fib,
            fwd,
            actions: Vec::new(),
        }
    }

    pub fn view(&self) -> View<'_> {
        View {
            fib: &self.fib,
            fwd: self.fwd.latest(),
        }
    }
}

impl Turn for Router {
    /// The FIB's neighbour timers and the data plane's own.
    fn next_timer(&self, dp: &Dataplane) -> Option<u64> {
        [self.fib.neigh_next_timer(), dp.next_timer()]
            .into_iter()
            .flatten()
            .min()
    }

    fn fire(&mut self, dp: &mut Dataplane, at: u64, tx: &mut dyn Tx) {
        self.fib.neigh_timers(at, &mut self.actions);
        self.fwd.update(&self.fib);
        let v = View {
            fib: &self.fib,
            fwd: self.fwd.latest(),
        };
        dp.neigh_actions(v, at, &self.actions, tx);
        dp.run_timers(v, at, tx);
        self.actions.clear();
    }

    /// Gives the link the carrier and MTU of its port's host interface, as the kernel's links
    /// follow their cables and their drivers: on a carrier loss next hops on the link turn
    /// linkdown and its neighbours are flushed; the forwarding objects follow.
    fn follow(&mut self, ifindex: u32, carrier: Option<bool>, mtu: Option<u32>) {
        let link = Link {
            ifindex,
            carrier,
            mtu,
            ..Link::default()
        };
        // Only links of the configuration are bound, so the change applies but for an MTU
        // fibre does not take (below 68 or above its maximum), which leaves the link's own.
        let _ = self.fib.link_new(&link, ReqFlags::NONE);
        self.fwd.update(&self.fib);
    }

    /// The events applied, the objects updated, and what the neighbour states ask done.
    fn vector(&mut self, dp: &mut Dataplane, now: u64, frames: &[(u32, &[u8])], tx: &mut dyn Tx) {
        dp.receive(self.view(), now, frames, tx);
        apply_events(&mut self.fib, dp.take_events(), now, &mut self.actions);
        self.fwd.update(&self.fib);
        let v = View {
            fib: &self.fib,
            fwd: self.fwd.latest(),
        };
        dp.neigh_actions(v, now, &self.actions, tx);
        self.actions.clear();
    }
}

/// The receive side of one bound link.
struct Input {
    ifindex: u32,
    rx: Box<dyn RxQueue>,
    state: Result<(), PortError>,
    /// The host interface's MTU as last given to the link.
    mtu: Option<u32>,
    /// The link was given its host interface's carrier once (the first check gives it,
    /// whatever the link had before: a link restored without carrier gets it back).
    followed: bool,
}

/// A link's punt path: the transmit half of its TAP (towards the host) and its counters.
struct ToHost {
    ifindex: u32,
    tap: Box<dyn TxQueue>,
    stats: PuntStats,
    /// What is left of [`PUNT_BUDGET`] in this round.
    budget: u32,
}

/// The transmit sides, by fibre link index: the data plane's [`Tx`].
struct Outputs {
    ports: Vec<(u32, Box<dyn TxQueue>)>,
    hosts: Vec<ToHost>,
    unrouted: u64,
}

impl Tx for Outputs {
    fn send(&mut self, oif: u32, frame: &[u8]) {
        match self.ports.iter_mut().find(|(i, _)| *i == oif) {
            // The port counts what it refuses.
            Some((_, tx)) => {
                let _ = tx.send(frame);
            }
            None => self.unrouted += 1,
        }
    }

    fn host_behind(&self, iif: u32) -> bool {
        self.hosts.iter().any(|h| h.ifindex == iif)
    }

    fn punt(&mut self, iif: u32, frame: &[u8]) {
        let Some(h) = self.hosts.iter_mut().find(|h| h.ifindex == iif) else {
            return;
        };
        if h.budget == 0 {
            h.stats.dropped += 1;
            return;
        }
        h.budget -= 1;
        match h.tap.send(frame) {
            Ok(()) => h.stats.to_host += 1,
            Err(_) => h.stats.dropped += 1,
        }
    }
}

impl Outputs {
    fn flush(&mut self) {
        for (_, tx) in &mut self.ports {
            // The port counts failed kicks; a removed interface shows in its input's state.
            let _ = tx.flush();
        }
    }
}

/// A link's punt path from the host: the receive half of its TAP.
struct FromHost {
    ifindex: u32,
    tap: Box<dyn RxQueue>,
}

/// A worker over a set of ports.
pub struct Worker {
    dp: Dataplane,
    inputs: Vec<Input>,
    out: Outputs,
    hosts: Vec<FromHost>,
    /// poll(2)'s array: the wake descriptor if any, then one entry per live input and one
    /// per punt TAP read from; rebuilt only when the ports change or an input dies.
    pollfds: Vec<libc::pollfd>,
    /// Polled beside the ports ([`Worker::wake_on`]).
    wake: Option<RawFd>,
    /// A port failed to receive or reported an error: check the ports before the next round.
    recheck: bool,
}

impl Worker {
    pub fn new(dp: Dataplane) -> Worker {
        Worker {
            dp,
            inputs: Vec::new(),
            out: Outputs {
                ports: Vec::new(),
                hosts: Vec::new(),
                unrouted: 0,
            },
            hosts: Vec::new(),
            pollfds: Vec::new(),
            wake: None,
            recheck: false,
        }
    }

    /// Has [`Worker::wait`] return when `fd` is readable too (an eventfd that another thread
    /// signals when it has work for this one; reading it is the caller's business). The
    /// descriptor must outlive the worker's use of it.
    pub fn wake_on(&mut self, fd: RawFd) {
        self.wake = Some(fd);
        self.rebuild_pollfds();
    }

    /// Unbinds link `ifindex`: its port and its punt path are closed (and everything they
    /// hold released). Returns whether it was bound.
    pub fn remove(&mut self, ifindex: u32) -> bool {
        let before = self.inputs.len();
        self.inputs.retain(|i| i.ifindex != ifindex);
        self.out.ports.retain(|(i, _)| *i != ifindex);
        self.out.hosts.retain(|h| h.ifindex != ifindex);
        self.hosts.retain(|h| h.ifindex != ifindex);
        self.rebuild_pollfds();
        self.inputs.len() != before
    }

    /// Binds fibre link `ifindex` to `port`: what the port receives enters on the link, what
    /// the data plane sends on the link leaves by the port.
    pub fn add(&mut self, ifindex: u32, port: Port) {
        self.inputs.push(Input {
            ifindex,
            rx: port.rx,
            state: Ok(()),
            mtu: None,
            followed: false,
        });
        self.add_output(ifindex, port.tx);
    }

    /// Binds fibre link `ifindex` for output only: what the data plane sends on the link
    /// leaves by `tx`; another worker receives what comes in on it.
    pub fn add_output(&mut self, ifindex: u32, tx: Box<dyn TxQueue>) {
        self.out.ports.push((ifindex, tx));
        self.rebuild_pollfds();
    }

    /// Gives bound link `ifindex` a punt path through `tap`, a TAP port in the host: the
    /// router's own traffic that came in on the link goes to the host through it, and what
    /// the host sends on it leaves by the link's port. Replaces the link's punt path if it
    /// had one.
    pub fn punt(&mut self, ifindex: u32, tap: Port) {
        self.punt_to(ifindex, tap.tx);
        self.hosts.push(FromHost {
            ifindex,
            tap: tap.rx,
        });
        self.rebuild_pollfds();
    }

    /// Gives bound link `ifindex` a punt path towards the host only, through `tap` (a
    /// [`crate::tap::writer`]); another worker reads what the host sends.
    pub fn punt_to(&mut self, ifindex: u32, tap: Box<dyn TxQueue>) {
        let followed = self
            .inputs
            .iter()
            .find(|i| i.ifindex == ifindex && i.followed);
        if let Some(i) = followed {
            // Later changes reach the TAP from `check_ports`; this is the state until then.
            let _ = crate::tap::set_carrier(tap.fd(), i.state.is_ok());
        }
        self.out.hosts.retain(|h| h.ifindex != ifindex);
        self.hosts.retain(|h| h.ifindex != ifindex);
        self.out.hosts.push(ToHost {
            ifindex,
            tap,
            stats: PuntStats::default(),
            budget: PUNT_BUDGET,
        });
    }

    /// Each punt path's counters, by link.
    pub fn punts(&self) -> Vec<(u32, PuntStats)> {
        self.out
            .hosts
            .iter()
            .map(|h| (h.ifindex, h.stats))
            .collect()
    }

    fn rebuild_pollfds(&mut self) {
        let inputs = self
            .inputs
            .iter()
            .filter(|i| i.state != Err(PortError::Gone))
            .map(|i| i.rx.fd().as_raw_fd());
        let hosts = self.hosts.iter().map(|h| h.tap.fd().as_raw_fd());
        self.pollfds = self
            .wake
            .into_iter()
            .chain(inputs)
            .chain(hosts)
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
    }

    pub fn dataplane(&self) -> &Dataplane {
        &self.dp
    }

    /// Frames the data plane sent on links without a port.
    pub fn unrouted(&self) -> u64 {
        self.out.unrouted
    }

    /// Each bound link's port counters and state (links bound for output only are
    /// [`Worker::outputs`]).
    pub fn ports(&mut self) -> Vec<(u32, Counters, Result<(), PortError>)> {
        let outputs = &mut self.out.ports;
        self.inputs
            .iter_mut()
            .map(|i| {
                let mut c = i.rx.counters();
                if let Some((_, tx)) = outputs.iter_mut().find(|(o, _)| *o == i.ifindex) {
                    c.add(&tx.counters());
                }
                (i.ifindex, c, i.state)
            })
            .collect()
    }

    /// The transmit counters of the links bound for output only.
    pub fn outputs(&mut self) -> Vec<(u32, Counters)> {
        let inputs = &self.inputs;
        self.out
            .ports
            .iter_mut()
            .filter(|(o, _)| !inputs.iter().any(|i| i.ifindex == *o))
            .map(|(o, tx)| (*o, tx.counters()))
            .collect()
    }

    /// One round at time `now`: the timers due, then every live port's waiting frames, a
    /// vector at a time (at most `rounds_per_port` vectors each, so one busy port cannot
    /// starve the others), each followed by the writer's turn. Returns the frames received.
    pub fn poll_once(&mut self, router: &mut impl Turn, now: u64, rounds_per_port: usize) -> usize {
        let mut fired = false;
        while let Some(at) = router.next_due(&self.dp, now) {
            router.fire(&mut self.dp, at, &mut self.out);
            fired = true;
        }
        if fired {
            // What the timers sent (probes, released packets, ICMP errors) leaves now, not
            // with the next vector this worker receives, which may be long in coming.
            self.out.flush();
        }
        for h in &mut self.out.hosts {
            h.budget = PUNT_BUDGET;
        }
        let mut total = self.hosts_out(rounds_per_port);
        for input in &mut self.inputs {
            if input.state == Err(PortError::Gone) {
                continue;
            }
            for _ in 0..rounds_per_port {
                let mut frames: [&[u8]; VECTOR] = [&[]; VECTOR];
                let Ok(n) = input.rx.recv(&mut frames) else {
                    // The port's state, and its link's carrier, are settled by `check_ports`.
                    self.recheck = true;
                    break;
                };
                if n == 0 {
                    break;
                }
                let mut vector: [(u32, &[u8]); VECTOR] = [(0, &[]); VECTOR];
                for (v, f) in vector.iter_mut().zip(&frames[..n]) {
                    *v = (input.ifindex, f);
                }
                router.vector(&mut self.dp, now, &vector[..n], &mut self.out);
                self.out.flush();
                total += n;
                if n < VECTOR {
                    break;
                }
            }
        }
        total
    }

    /// The frames the hosts sent on their punt TAPs (at most `rounds` vectors from each),
    /// out by their links' ports as they are. Returns how many.
    fn hosts_out(&mut self, rounds: usize) -> usize {
        let mut total = 0;
        for h in &mut self.hosts {
            let Some((_, tx)) = self.out.ports.iter_mut().find(|(i, _)| *i == h.ifindex) else {
                continue;
            };
            let stats = self.out.hosts.iter_mut().find(|o| o.ifindex == h.ifindex);
            let mut sent = 0;
            for _ in 0..rounds {
                let mut frames: [&[u8]; VECTOR] = [&[]; VECTOR];
                // A TAP fails to read only once it is gone, which its port's removal follows.
                let n = h.tap.recv(&mut frames).unwrap_or(0);
                for f in &frames[..n] {
                    // The port counts what it refuses.
                    let _ = tx.send(f);
                }
                sent += n;
                if n < VECTOR {
                    break;
                }
            }
            if sent > 0 {
                let _ = tx.flush();
            }
            if let Some(o) = stats {
                o.stats.from_host += sent as u64;
            }
            total += sent;
        }
        total
    }

    /// Sleeps until a port has frames, the router's next timer (`now` on the same clock), or
    /// [`IDLE_CHECK`], whichever is first. True when poll(2) reported an error on a port.
    pub fn wait(&mut self, router: &impl Turn, now: u64) -> bool {
        for i in &mut self.inputs {
            i.rx.release();
        }
        for h in &mut self.hosts {
            h.tap.release();
        }
        let idle = IDLE_CHECK.as_nanos() as u64;
        let sleep = router
            .next_timer(&self.dp)
            .map_or(idle, |at| at.saturating_sub(now).min(idle));
        let ms = sleep.div_ceil(1_000_000) as i32;
        for p in &mut self.pollfds {
            p.revents = 0;
        }
        // SAFETY: `pollfds` is a valid array of its length for the whole call.
        unsafe { libc::poll(self.pollfds.as_mut_ptr(), self.pollfds.len() as _, ms) };
        self.pollfds
            .iter()
            .any(|p| p.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0)
    }

    /// Asks every live port for its host interface's state and MTU; a link whose port went
    /// down or came back up gets that carrier in the routing state, and one whose interface's
    /// MTU changed that MTU. Ports whose interface is gone are no longer polled.
    pub fn check_ports(&mut self, router: &mut impl Turn) {
        self.recheck = false;
        let mut gone = false;
        for i in &mut self.inputs {
            if i.state == Err(PortError::Gone) {
                continue;
            }
            let state = i.rx.check();
            let carrier =
                (!i.followed || state.is_ok() != i.state.is_ok()).then_some(state.is_ok());
            i.followed = true;
            let mtu = i.rx.mtu().filter(|m| i.mtu != Some(*m));
            if carrier.is_some() || mtu.is_some() {
                router.follow(i.ifindex, carrier, mtu);
            }
            if let Some(up) = carrier {
                for h in self.out.hosts.iter().filter(|h| h.ifindex == i.ifindex) {
                    // The host sees the port's carrier on the TAP; a TAP that refuses keeps
                    // its own (its frames then find the port down and are counted there).
                    let _ = crate::tap::set_carrier(h.tap.fd(), up);
                }
            }
            i.state = state;
            i.mtu = mtu.or(i.mtu);
            gone |= state == Err(PortError::Gone);
        }
        if gone {
            self.rebuild_pollfds();
        }
    }

    /// Forwards until `stop` is set: busy while frames come, asleep when none do, the ports'
    /// state checked at the start, every [`IDLE_CHECK`], and when poll(2) reports an error or
    /// a port fails to receive.
    /// `clock` gives the time in nanoseconds on the router's clock.
    pub fn run(&mut self, router: &mut impl Turn, stop: &AtomicBool, clock: &dyn Fn() -> u64) {
        /// Vectors taken from one port before the next port's turn.
        const ROUNDS_PER_PORT: usize = 4;
        let every = IDLE_CHECK.as_nanos() as u64;
        let mut next_check = 0;
        while !stop.load(Ordering::Relaxed) {
            router.between(self);
            let now = clock();
            if now >= next_check || self.recheck {
                self.check_ports(router);
                next_check = now + every;
            }
            if self.poll_once(router, now, ROUNDS_PER_PORT) == 0 {
                self.recheck |= self.wait(router, now);
            }
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock a live worker and its router share.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid for writes; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
