//! The receive loop: every frame a port receives is counted, its probe ([`crate::frame`])
//! checked and its latency sampled, until a duration, a count of probes, a quiet spell after
//! the first probe, or `stop`.
//!
//! The quiet spell runs from the last probe of this run, never from another frame: a router
//! sends frames of its own (IPv6 neighbour discovery, MLD reports) and may still hold probes
//! of an earlier run (`stale`), at any time before the generator's first probe arrives, and
//! a generator may take a second or more to start (seed 000's workload reads the table). A
//! spell counted from such a frame ended the run before the generator's probes came.
//!
//! Checks: the IPv4 header and UDP checksums (a generator's frame that fails one is
//! `corrupt`), the send time (a probe sent before the sink started is `stale`: left over in a
//! router's queues from an earlier run, it is not counted as a probe), the sequence numbers (one generator's, counted from the first one seen: a jump
//! forward leaves a gap, a number below the highest seen is `reordered` and fills a gap), and
//! everything that is not a generator's frame (`other`: the hosts' own neighbour discovery,
//! say). Latency is the receive time less the probe's send time, both CLOCK_MONOTONIC, read
//! once per received vector; the sink on the same host as the generator makes them one clock.
//!
//! The loop polls (poll(2), [`IDLE_POLL`]) when nothing waits, so an idle sink uses no CPU,
//! and reads a vector of up to [`VECTOR`] frames at a time otherwise. It never allocates per
//! frame: the per-set counters are sized for every set up front.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fibre_io::worker::monotonic_ns;
use fibre_io::{PortError, RxQueue};

use crate::frame::{parse, Parsed, FCS_LEN};
use crate::hist::Histogram;

/// Frames per receive call.
pub const VECTOR: usize = 256;
/// How long one poll(2) waits before the stop conditions are checked again.
const IDLE_POLL: Duration = Duration::from_millis(10);
/// Destination sets counted apart; probes of higher sets are counted in the last.
pub const SETS: usize = 64;

#[derive(Debug, Clone, Copy, Default)]
pub struct Config {
    pub duration: Option<Duration>,
    /// Probes to receive.
    pub count: Option<u64>,
    /// Once a probe has arrived, stop after this long without one.
    pub idle: Option<Duration>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetCounters {
    pub packets: u64,
    pub bytes: u64,
}

/// What the sink saw.
pub struct Report {
    /// Every frame received, and its bytes on the wire (FCS included).
    pub frames: u64,
    pub bytes: u64,
    pub probes: u64,
    pub corrupt: u64,
    pub stale: u64,
    pub other: u64,
    /// Sequence numbers missing between the first and the highest seen, late arrivals
    /// deducted; probes that arrived below the highest number seen.
    pub gaps: u64,
    pub reordered: u64,
    /// The first and the highest sequence number seen (extended past the 32-bit wrap).
    pub first_seq: Option<u64>,
    pub last_seq: u64,
    pub sets: [SetCounters; SETS],
    /// Send-to-receive times of the probes, nanoseconds.
    pub latency: Histogram,
    /// Probes whose send time is later than their receive time (another host's clock).
    pub clock_skewed: u64,
    /// Between the first and the last probe received.
    pub first_ns: u64,
    pub last_ns: u64,
}

impl Default for Report {
    fn default() -> Report {
        Report {
            frames: 0,
            bytes: 0,
            probes: 0,
            corrupt: 0,
            stale: 0,
            other: 0,
            gaps: 0,
            reordered: 0,
            first_seq: None,
            last_seq: 0,
            sets: [SetCounters::default(); SETS],
            latency: Histogram::default(),
            clock_skewed: 0,
            first_ns: 0,
            last_ns: 0,
        }
    }
}

impl Report {
    /// Accounts for one frame received at `now` by a sink started at `start`.
    pub fn take(&mut self, frame: &[u8], start: u64, now: u64) {
        self.frames += 1;
        let wire = (frame.len() + FCS_LEN) as u64;
        self.bytes += wire;
        let p = match parse(frame) {
            Parsed::Probe(p) => p,
            Parsed::Corrupt => {
                self.corrupt += 1;
                return;
            }
            Parsed::Other => {
                self.other += 1;
                return;
            }
        };
        if p.time_ns < start {
            self.stale += 1;
            return;
        }
        self.probes += 1;
        let set = &mut self.sets[usize::from(p.set).min(SETS - 1)];
        set.packets += 1;
        set.bytes += wire;
        match self.first_seq {
            None => {
                self.first_seq = Some(u64::from(p.seq));
                self.last_seq = u64::from(p.seq);
                self.first_ns = now;
            }
            Some(_) => {
                // The 32-bit number placed nearest the highest seen.
                let delta = p.seq.wrapping_sub(self.last_seq as u32) as i32;
                let seq = self.last_seq.wrapping_add_signed(i64::from(delta));
                if seq > self.last_seq {
                    self.gaps += seq - self.last_seq - 1;
                    self.last_seq = seq;
                } else {
                    self.reordered += 1;
                    self.gaps = self.gaps.saturating_sub(1);
                }
            }
        }
        self.last_ns = now;
        match now.checked_sub(p.time_ns) {
            Some(d) => self.latency.record(d),
            None => self.clock_skewed += 1,
        }
    }
}

/// Receives until `cfg`'s duration, count or quiet spell, `stop`, or the interface is gone.
pub fn run(rx: &mut dyn RxQueue, cfg: &Config, stop: &AtomicBool) -> Result<Report, PortError> {
    let mut r = Report::default();
    let start = monotonic_ns();
    let end = cfg
        .duration
        .map(|d| start.saturating_add(d.as_nanos() as u64));
    let idle = cfg.idle.map(|d| d.as_nanos() as u64);
    let mut last_probe = None;
    loop {
        let now = monotonic_ns();
        if stop.load(Ordering::Relaxed)
            || end.is_some_and(|e| now >= e)
            || cfg.count.is_some_and(|c| r.probes >= c)
            || idle.zip(last_probe).is_some_and(|(i, l)| now - l >= i)
        {
            break;
        }
        let mut frames: [&[u8]; VECTOR] = [&[]; VECTOR];
        let n = match rx.recv(&mut frames) {
            Ok(n) => n,
            Err(PortError::Gone) => break,
            Err(PortError::Down) => 0,
            Err(e) => return Err(e),
        };
        if n == 0 {
            rx.release();
            let mut fds = [fibre_sys::pollfd(rx.fd(), libc::POLLIN)];
            let _ = fibre_sys::poll(&mut fds, Some(IDLE_POLL));
            if fds[0].revents & libc::POLLERR != 0 && rx.check() == Err(PortError::Gone) {
                break;
            }
            continue;
        }
        let now = monotonic_ns();
        let probes = r.probes;
        for f in &frames[..n] {
            r.take(f, start, now);
        }
        if r.probes > probes {
            last_probe = Some(now);
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Flow, Macs, Template};

    fn frame(set: u16, seq: u32, time: u64) -> Vec<u8> {
        let flow = Flow {
            src: "10.254.0.2".parse().unwrap(),
            dst: "198.18.0.1".parse().unwrap(),
            tos: 0,
        };
        let macs = Macs {
            src: [2, 0, 0, 0, 0, 1],
            dst: [2, 0, 0, 0, 0, 2],
        };
        let mut t = Template::build(&flow, &macs, 64, 1000, set).unwrap();
        t.stamp(seq, time);
        t.bytes
    }

    #[test]
    fn gaps_reordering_and_the_wrap_are_counted() {
        let mut r = Report::default();
        // 4294967294, 4294967295, 0 (wrapped), 3, 1 (late), 4: gaps at 2 only.
        for (seq, now) in [
            (u32::MAX - 1, 10),
            (u32::MAX, 11),
            (0, 12),
            (3, 13),
            (1, 14),
            (4, 15),
        ] {
            r.take(&frame(0, seq, 5), 0, now);
        }
        assert_eq!(r.probes, 6);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.gaps, 1);
        assert_eq!(r.last_seq - r.first_seq.unwrap(), 6);
        assert_eq!(
            r.sets[0],
            SetCounters {
                packets: 6,
                bytes: 384
            }
        );
        assert_eq!(r.latency.count(), 6);
        assert_eq!(r.latency.max(), 10);
    }

    /// A queue that hands out one foreign frame at once, then nothing until `probes_at`
    /// nanoseconds after it was made, then `probes` probes, then nothing.
    struct Script {
        made: u64,
        probes_at: u64,
        other: Vec<u8>,
        probes: Vec<Vec<u8>>,
        step: usize,
        fd: std::fs::File,
    }

    impl RxQueue for Script {
        fn recv<'a>(&'a mut self, frames: &mut [&'a [u8]]) -> Result<usize, PortError> {
            let due = monotonic_ns() - self.made >= self.probes_at;
            let n = match self.step {
                0 => {
                    frames[0] = &self.other;
                    1
                }
                1 if due => {
                    for (f, p) in frames.iter_mut().zip(&self.probes) {
                        *f = p;
                    }
                    self.probes.len()
                }
                1 => return Ok(0),
                _ => 0,
            };
            self.step += 1;
            Ok(n)
        }
        fn release(&mut self) {}
        fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
            use std::os::fd::AsFd;
            self.fd.as_fd()
        }
        fn check(&mut self) -> Result<(), PortError> {
            Ok(())
        }
        fn mtu(&self) -> Option<u32> {
            None
        }
        fn counters(&mut self) -> fibre_io::Counters {
            fibre_io::Counters::default()
        }
    }

    #[test]
    fn the_quiet_spell_counts_from_a_probe_not_from_a_foreign_frame() {
        // A router's own frame first, the generator's probes three quiet spells later.
        let idle = Duration::from_millis(20);
        let made = monotonic_ns();
        let probes_at = 3 * idle.as_nanos() as u64;
        let mut q = Script {
            made,
            probes_at,
            other: vec![0u8; 60],
            // Sent when they arrive: after the sink started.
            probes: (0..4).map(|i| frame(0, i, made + probes_at)).collect(),
            step: 0,
            fd: std::fs::File::open("/dev/null").unwrap(),
        };
        let cfg = Config {
            duration: Some(Duration::from_secs(5)),
            count: None,
            idle: Some(idle),
        };
        let r = run(&mut q, &cfg, &AtomicBool::new(false)).unwrap();
        assert_eq!((r.other, r.probes, r.gaps), (1, 4, 0));
        // Ended by the spell after the probes, not by the duration.
        assert!(monotonic_ns() - made < Duration::from_secs(1).as_nanos() as u64);
    }

    #[test]
    fn corrupt_other_stale_and_skewed_frames_are_counted_apart() {
        let mut r = Report::default();
        let mut bad = frame(1, 0, 0);
        bad[50] ^= 0xff;
        r.take(&bad, 0, 1);
        r.take(&[0u8; 60], 0, 1);
        r.take(&frame(200, 0, 1000), 0, 10);
        r.take(&frame(0, 1, 4), 5, 10);
        assert_eq!(
            (r.frames, r.corrupt, r.other, r.probes, r.stale),
            (4, 1, 1, 1, 1)
        );
        assert_eq!(r.sets[SETS - 1].packets, 1);
        assert_eq!(r.clock_skewed, 1);
        assert_eq!(r.latency.count(), 0);
    }
}
