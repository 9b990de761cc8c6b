//! The send loop: the cycle of frames ([`crate::workload`]) or a capture's frames, over and
//! over, on a port's transmit queue, as fast as the port takes them or at a fixed rate, for a
//! duration or a count.
//!
//! Pacing is a token bucket: tokens accrue at the rate, at most [`CATCH_UP`]'s worth (and
//! at least [`BURST`]), and each frame spends one; the loop waits until a batch's worth of
//! tokens is there ([`BATCH_SPAN`] of the rate, 1 to [`BURST`] frames: one flush, one system
//! call, per batch rather than per frame), sends them with one flush, and sleeps while it
//! waits: a generator spinning for its next batch would take the CPU from a sink that
//! shares it (whose receive ring then overflows). The sleep lasts at least the timer slack
//! (50 us), so the bucket's depth lets the generator catch up on what it slept over, and
//! after the scheduler ran another task, instead of losing the rate. Flat out, every batch
//! is [`BURST`] frames.
//!
//! Each frame of the cycle is stamped with the next sequence number and the clock read when
//! its batch starts. A full transmit ring is not a loss the generator inflicts on purpose:
//! the loop flushes and tries the frame again, and only a ring still full after
//! [`FULL_TRIES`] flushes drops it (counted in `dropped`, its sequence number left out).
//!
//! Who calls what: one thread owns the queue; `stop` may be set from any thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fibre_io::worker::monotonic_ns;
use fibre_io::{PortError, TxQueue};

use crate::frame::{Template, FCS_LEN};

/// Frames per flush at most, and the token bucket's least depth: enough to amortise the
/// kernel's transmit call (AF_XDP's copy mode sends 32 per call), few enough that paced
/// traffic stays smooth at the microsecond scale.
pub const BURST: usize = 32;
/// The time a paced batch spans: the gaps between batches stay below it, and at rates
/// above BURST / BATCH_SPAN (640 kpps) batches are full.
const BATCH_SPAN: Duration = Duration::from_micros(50);
/// How much sending time a paced generator may catch up on: a scheduler time slice or two.
const CATCH_UP: Duration = Duration::from_millis(4);
/// Flushes to free a full transmit ring before a frame is dropped.
const FULL_TRIES: u32 = 1000;

/// What to send.
pub enum Frames {
    /// Built frames, stamped per send.
    Stamped(Vec<Template>),
    /// A capture's frames, sent as they are.
    Replay(Vec<Vec<u8>>),
}

impl Frames {
    fn len(&self) -> usize {
        match self {
            Frames::Stamped(t) => t.len(),
            Frames::Replay(f) => f.len(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Frames per second; `None` as fast as the port takes them.
    pub rate: Option<f64>,
    pub duration: Option<Duration>,
    /// Frames to send in all.
    pub count: Option<u64>,
}

/// What a run sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// Frames handed to the transmit ring, and their bytes on the wire (FCS included).
    pub sent: u64,
    pub bytes: u64,
    /// Frames dropped because the ring stayed full.
    pub dropped: u64,
    /// Failed flushes (the interface down, say).
    pub errors: u64,
    /// From the first frame to the last flush.
    pub elapsed_ns: u64,
}

/// Sends until `cfg`'s duration or count, or `stop`; a port whose interface is gone ends the
/// run with what was sent.
pub fn run(
    tx: &mut dyn TxQueue,
    frames: &mut Frames,
    cfg: &Config,
    stop: &AtomicBool,
) -> Result<Report, PortError> {
    let mut r = Report::default();
    let n = frames.len();
    if n == 0 {
        return Ok(r);
    }
    let start = monotonic_ns();
    let end = cfg
        .duration
        .map(|d| start.saturating_add(d.as_nanos() as u64));
    let limit = cfg.count.unwrap_or(u64::MAX);
    let depth = cfg
        .rate
        .map_or(0.0, |r| (r * CATCH_UP.as_secs_f64()).max(BURST as f64));
    let batch = cfg.rate.map_or(BURST as f64, |r| {
        (r * BATCH_SPAN.as_secs_f64())
            .clamp(1.0, BURST as f64)
            .floor()
    });
    let mut tokens = BURST as f64;
    let mut last = start;
    let mut i = 0usize;
    while r.sent + r.dropped < limit && !stop.load(Ordering::Relaxed) {
        let now = monotonic_ns();
        if end.is_some_and(|e| now >= e) {
            break;
        }
        let mut burst = BURST;
        if let Some(rate) = cfg.rate {
            tokens = (tokens + (now - last) as f64 * rate / 1e9).min(depth);
            last = now;
            if tokens < batch {
                std::thread::sleep(Duration::from_secs_f64((batch - tokens) / rate));
                continue;
            }
            burst = (tokens as usize).min(BURST);
            tokens -= burst as f64;
        }
        let burst = burst.min((limit - r.sent - r.dropped) as usize);
        for _ in 0..burst {
            let seq = (r.sent + r.dropped) as u32;
            let bytes: &[u8] = match frames {
                Frames::Stamped(t) => {
                    t[i].stamp(seq, now);
                    &t[i].bytes
                }
                Frames::Replay(f) => &f[i],
            };
            i = (i + 1) % n;
            match send(tx, bytes) {
                Ok(()) => {
                    r.sent += 1;
                    r.bytes += (bytes.len() + FCS_LEN) as u64;
                }
                Err(PortError::Gone) => return Ok(finish(r, start)),
                Err(_) => r.dropped += 1,
            }
        }
        match tx.flush() {
            Ok(()) => {}
            Err(PortError::Gone) => return Ok(finish(r, start)),
            Err(_) => r.errors += 1,
        }
    }
    Ok(finish(r, start))
}

fn finish(mut r: Report, start: u64) -> Report {
    r.elapsed_ns = monotonic_ns() - start;
    r
}

/// Queues `frame`, flushing to make room while the ring is full.
fn send(tx: &mut dyn TxQueue, frame: &[u8]) -> Result<(), PortError> {
    let mut tries = 0;
    loop {
        match tx.send(frame) {
            Err(PortError::Full) if tries < FULL_TRIES => {
                tries += 1;
                match tx.flush() {
                    Ok(()) | Err(PortError::Full) => {}
                    Err(e) => return Err(e),
                }
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{parse, Flow, Macs, Parsed};
    use fibre_io::Counters;
    use std::os::fd::{AsFd, BorrowedFd};

    /// A transmit queue that keeps what it is sent, with room for `room` frames between
    /// flushes.
    struct Keep {
        frames: Vec<Vec<u8>>,
        queued: usize,
        room: usize,
        flushes: usize,
        fd: std::fs::File,
    }

    impl TxQueue for Keep {
        fn send(&mut self, frame: &[u8]) -> Result<(), PortError> {
            if self.queued == self.room {
                return Err(PortError::Full);
            }
            self.queued += 1;
            self.frames.push(frame.to_vec());
            Ok(())
        }
        fn flush(&mut self) -> Result<(), PortError> {
            self.queued = 0;
            self.flushes += 1;
            Ok(())
        }
        fn fd(&self) -> BorrowedFd<'_> {
            self.fd.as_fd()
        }
        fn counters(&mut self) -> Counters {
            Counters::default()
        }
    }

    fn keep(room: usize) -> Keep {
        Keep {
            frames: Vec::new(),
            queued: 0,
            room,
            flushes: 0,
            fd: std::fs::File::open("/dev/null").unwrap(),
        }
    }

    fn templates(n: usize) -> Vec<Template> {
        let macs = Macs {
            src: [2, 0, 0, 0, 0, 1],
            dst: [2, 0, 0, 0, 0, 2],
        };
        (0..n)
            .map(|i| {
                let flow = Flow {
                    src: "10.254.0.2".parse().unwrap(),
                    dst: format!("198.18.0.{i}").parse().unwrap(),
                    tos: 0,
                };
                Template::build(&flow, &macs, 64, 1000, 0).unwrap()
            })
            .collect()
    }

    #[test]
    fn a_count_is_sent_in_order_with_consecutive_sequence_numbers() {
        let mut q = keep(BURST);
        let mut frames = Frames::Stamped(templates(5));
        let cfg = Config {
            rate: None,
            duration: None,
            count: Some(100),
        };
        let r = run(&mut q, &mut frames, &cfg, &AtomicBool::new(false)).unwrap();
        assert_eq!((r.sent, r.dropped, r.bytes), (100, 0, 6400));
        for (i, f) in q.frames.iter().enumerate() {
            let Parsed::Probe(p) = parse(f) else {
                panic!("frame {i} has no probe")
            };
            assert_eq!(p.seq, i as u32);
            assert_eq!(f[33], (i % 5) as u8, "the cycle's order");
        }
    }

    #[test]
    fn a_full_ring_is_flushed_not_dropped() {
        // Room for 3 frames between flushes, bursts of 32.
        let mut q = keep(3);
        let mut frames = Frames::Replay(vec![vec![0u8; 60]]);
        let cfg = Config {
            rate: None,
            duration: None,
            count: Some(64),
        };
        let r = run(&mut q, &mut frames, &cfg, &AtomicBool::new(false)).unwrap();
        assert_eq!((r.sent, r.dropped), (64, 0));
        assert!(q.flushes > 64 / 3, "{}", q.flushes);
    }

    #[test]
    fn the_rate_is_kept() {
        let mut q = keep(BURST);
        let mut frames = Frames::Stamped(templates(1));
        let cfg = Config {
            rate: Some(20_000.0),
            duration: Some(Duration::from_millis(300)),
            count: None,
        };
        let r = run(&mut q, &mut frames, &cfg, &AtomicBool::new(false)).unwrap();
        // 6000 frames, give or take the first burst and a busy machine's scheduler.
        assert!((4500..=6100).contains(&r.sent), "{}", r.sent);
        let rate = r.sent as f64 / (r.elapsed_ns as f64 / 1e9);
        assert!((15_000.0..=21_000.0).contains(&rate), "{rate}");
    }
}
