//! A forwarding worker's thread: fibre-io's `Worker` polling its shares of the port links'
//! ports, with a [`Turn`] that reads the published state and hands what the vectors teach to
//! the writer (the hand-off, and what the first worker does that the others do not, are the
//! parent module's).

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

use fibre_dataplane::pipeline::{Dataplane, Tx, View};
use fibre_fib::types::PortSpec;
use fibre_fib::NudAction;
use fibre_fwd::{FwdTable, Reader};
use fibre_io::worker::{monotonic_ns, Turn, Worker};
use fibre_io::PortError;

use super::{Control, Counters, Kick, PortStats, Share, Snapshot, Up, Waker, STATS_EVERY};

/// The state of a port in the snapshot of a worker that only transmits on it.
pub(super) const OUTPUT: &str = "output";
/// The mode of such a port.
const OUTPUT_DETAIL: &str = "transmit only";
use crate::view::FibReader;

/// A port link the worker serves.
pub(super) struct Bound {
    ifindex: u32,
    spec: PortSpec,
    detail: &'static str,
}

/// The worker's turn between vectors (see the parent module).
pub(super) struct Remote {
    /// The worker's number; the first (0) reports the ports' state and sends the probes.
    pub index: usize,
    pub fib: FibReader,
    pub fwd: Reader<FwdTable>,
    pub up: SyncSender<Up>,
    pub waker: Arc<Waker>,
    pub actions: Receiver<NudAction>,
    pub kick: Arc<Kick>,
    pub ctl: Receiver<Control>,
    pub counters: Arc<Counters>,
    pub bound: Vec<Bound>,
    /// Actions taken off the queue, with room for all it holds.
    pub held: Vec<NudAction>,
    /// When the counters are next copied out (monotonic nanoseconds).
    pub next_stats: u64,
    pub events_lost: u64,
    /// Actions were taken since the eventfd was last drained.
    pub kicked: bool,
}

impl Remote {
    fn send_up(&mut self, u: Up) -> bool {
        let sent = self.up.try_send(u).is_ok();
        if !sent {
            self.events_lost += 1;
        }
        sent
    }

    fn first(&self) -> bool {
        self.index == 0
    }

    fn copy_counters(&mut self, worker: &mut Worker) {
        let ports = worker.ports();
        let outputs = worker.outputs();
        let dp = worker.dataplane();
        let mut s = Snapshot {
            ports: Vec::with_capacity(self.bound.len()),
            drops: *dp.drops(),
            dataplane: dp.counters(),
            unrouted: worker.unrouted(),
            events_lost: self.events_lost,
        };
        let punts = worker.punts();
        for (ifindex, port, state) in ports {
            let Some(b) = self.bound.iter().find(|b| b.ifindex == ifindex) else {
                continue;
            };
            let punt = punts.iter().find(|(i, _)| *i == ifindex).map(|(_, s)| *s);
            s.ports.push(PortStats {
                ifindex,
                spec: b.spec.clone(),
                detail: b.detail,
                state: match state {
                    Ok(()) => "up",
                    Err(PortError::Gone) => "gone",
                    Err(_) => "down",
                },
                port,
                link: dp.link_stats(ifindex),
                punt,
            });
        }
        for (ifindex, port) in outputs {
            let Some(b) = self.bound.iter().find(|b| b.ifindex == ifindex) else {
                continue;
            };
            s.ports.push(PortStats {
                ifindex,
                spec: b.spec.clone(),
                detail: b.detail,
                state: OUTPUT,
                port,
                link: dp.link_stats(ifindex),
                punt: punts.iter().find(|(i, _)| *i == ifindex).map(|(_, s)| *s),
            });
        }
        self.counters.set(self.index, s);
    }
}

impl Turn for Remote {
    fn vector(&mut self, dp: &mut Dataplane, now: u64, frames: &[(u32, &[u8])], tx: &mut dyn Tx) {
        {
            let fib = self.fib.read();
            let fwd = self.fwd.read();
            dp.receive(
                View {
                    fib: &fib,
                    fwd: &fwd,
                },
                now,
                frames,
                tx,
            );
        }
        let mut sent = false;
        for e in dp.take_events() {
            match self.up.try_send(Up::Neigh(e)) {
                Ok(()) => sent = true,
                Err(_) => self.events_lost += 1,
            }
        }
        if sent {
            self.waker.wake();
        }
    }

    /// The data plane's timers; now when neighbour actions wait.
    fn next_timer(&self, dp: &Dataplane) -> Option<u64> {
        if self.kick.actions.load(Ordering::Acquire) {
            return Some(0);
        }
        dp.next_timer()
    }

    fn fire(&mut self, dp: &mut Dataplane, at: u64, tx: &mut dyn Tx) {
        let fib = self.fib.read();
        let fwd = self.fwd.read();
        let v = View {
            fib: &fib,
            fwd: &fwd,
        };
        if self.kick.actions.swap(false, Ordering::AcqRel) {
            self.held
                .extend(self.actions.try_iter().take(self.held.capacity()));
            if !self.first() {
                self.held.retain(|a| !matches!(a, NudAction::Probe { .. }));
            }
            dp.neigh_actions(v, monotonic_ns(), &self.held, tx);
            self.held.clear();
            self.kicked = true;
        }
        if dp.next_timer().is_some_and(|t| t <= at) {
            dp.run_timers(v, at, tx);
        }
    }

    fn follow(&mut self, ifindex: u32, carrier: Option<bool>, mtu: Option<u32>) {
        if self.first()
            && self.send_up(Up::Follow {
                ifindex,
                carrier,
                mtu,
            })
        {
            self.waker.wake();
        }
    }

    fn between(&mut self, worker: &mut Worker) {
        let mut changed = false;
        let control = self.kick.control.swap(false, Ordering::AcqRel);
        if control {
            while let Ok(c) = self.ctl.try_recv() {
                match c {
                    Control::Add {
                        ifindex,
                        spec,
                        share,
                    } => {
                        let super::LinkShare { port, punt } = *share;
                        let detail = match port {
                            Share::Port(port) => {
                                let detail = port.detail;
                                worker.add(ifindex, port);
                                detail
                            }
                            Share::Output(tx) => {
                                worker.add_output(ifindex, tx);
                                OUTPUT_DETAIL
                            }
                        };
                        self.bound.push(Bound {
                            ifindex,
                            spec,
                            detail,
                        });
                        match punt {
                            Some(Share::Port(tap)) => worker.punt(ifindex, tap),
                            Some(Share::Output(tx)) => worker.punt_to(ifindex, tx),
                            None => {}
                        }
                    }
                    Control::Remove(ifindex) => {
                        if worker.remove(ifindex) && self.first() {
                            tracing::info!(link = ifindex, "port closed");
                        }
                        self.bound.retain(|b| b.ifindex != ifindex);
                    }
                }
                changed = true;
            }
        }
        // Both kinds of kick share the eventfd, drained (a system call) only after a kick
        // and once none is pending, so that poll(2) waits again.
        if (control || self.kicked) && !self.kick.actions.load(Ordering::Acquire) {
            self.kick.fd.drain();
            self.kicked = false;
        }
        let now = monotonic_ns();
        if changed || now >= self.next_stats {
            self.copy_counters(worker);
            self.next_stats = now + STATS_EVERY.as_nanos() as u64;
        }
    }
}

/// The worker thread's body: forwards until `stop`, pinned to `cpu` if given.
pub(super) fn run(mut remote: Remote, dp: Dataplane, stop: &AtomicBool, cpu: Option<usize>) {
    let worker = remote.index;
    if let Some(cpu) = cpu {
        match crate::sys::pin_to_cpu(cpu) {
            Ok(()) => tracing::info!(worker, cpu, "forwarding worker pinned"),
            Err(e) => tracing::warn!(worker, cpu, error = %e, "forwarding worker not pinned"),
        }
    }
    let mut worker = Worker::new(dp);
    worker.wake_on(remote.kick.fd.fd().as_raw_fd());
    worker.run(&mut remote, stop, &monotonic_ns);
}
