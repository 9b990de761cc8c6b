//! The hostile-client test: the attack that got memory-mapped netlink removed from Linux.
//!
//! A client publishes TX frames holding checksummed messages and then keeps rewriting them --
//! bytes, length word, status word -- while the daemon copies and handles them, from another
//! thread through another mapping of the same memfd, exactly as another process would. The
//! daemon's handler validates every request (structure and checksum) and then "acts" on it
//! slowly, re-checking at every step that the bytes it acts on are the ones it validated. It
//! must never observe a change after validation, never read outside a frame whatever the length
//! word says, and keep serving.
//!
//! A second test turns the attack on the RX ring: the client rewrites the status, length and
//! payload of the frames the daemon writes dump replies into. The daemon must keep its memory
//! bounded and stop cleanly when the client goes.
//!
//! Both run for `FIBRE_RING_HOSTILE_SECS` seconds (default 2, for CI; set it higher for a soak).

use crate::client::{Client, ClientConfig};
use crate::frame::FrameStatus;
use crate::server::{Limits, Listener, Request, Responder};
use crate::sys;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// seq u32 | body length u32 | body | FNV-1a of everything before it, u64.
const OVERHEAD: usize = 16;

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn message(seq: u32, body_len: usize, rng: &mut Rng) -> Vec<u8> {
    let mut m = Vec::with_capacity(body_len + OVERHEAD);
    m.extend_from_slice(&seq.to_le_bytes());
    m.extend_from_slice(&(body_len as u32).to_le_bytes());
    m.extend((0..body_len).map(|_| rng.next() as u8));
    let sum = fnv(&m);
    m.extend_from_slice(&sum.to_le_bytes());
    m
}

/// The daemon-side validation: the structure holds and the checksum matches.
fn validate(m: &[u8]) -> Option<u32> {
    if m.len() < OVERHEAD {
        return None;
    }
    let body = u32::from_le_bytes(m[4..8].try_into().ok()?) as usize;
    if body + OVERHEAD != m.len() {
        return None;
    }
    let (data, sum) = m.split_at(m.len() - 8);
    (fnv(data) == u64::from_le_bytes(sum.try_into().ok()?))
        .then(|| u32::from_le_bytes(m[..4].try_into().unwrap()))
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: fast, and enough to vary the attack.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Verdicts {
    accepted: AtomicU64,
    rejected: AtomicU64,
    /// Rejected copies whose structure was right but checksum wrong: the daemon's copy caught
    /// the client mid-rewrite (a torn message) and refused it.
    torn: AtomicU64,
}

fn attack_secs() -> u64 {
    std::env::var("FIBRE_RING_HOSTILE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
}

#[test]
fn hostile_client_cannot_change_a_request_after_validation() {
    let secs = attack_secs();
    let dir = std::env::temp_dir().join(format!("fibre-ring-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fibred.sock");
    let listener = Listener::bind(&path).unwrap();
    let verdicts = Arc::new(Verdicts::default());

    let v = verdicts.clone();
    let server = thread::spawn(move || {
        // A COPY limit below the client's largest socket messages, to exercise the discard.
        let limits = Limits {
            max_copy_request: 64 << 10,
            ..Limits::default()
        };
        let mut session = listener.accept(limits).unwrap();
        let mut handler = |req: Request, _out: &mut Responder<'_>| match validate(&req.bytes) {
            Some(seq) => {
                let digest = fnv(&req.bytes);
                // Act on the request in steps, giving the hostile client time to strike between
                // them: what we act on must stay exactly what we validated.
                for _ in 0..3 {
                    thread::yield_now();
                    assert_eq!(fnv(&req.bytes), digest, "request changed after validation");
                    assert_eq!(
                        validate(&req.bytes),
                        Some(seq),
                        "request invalid after validation"
                    );
                }
                v.accepted.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                v.rejected.fetch_add(1, Ordering::Relaxed);
                if req.bytes.len() >= OVERHEAD
                    && u32::from_le_bytes(req.bytes[4..8].try_into().unwrap()) as usize + OVERHEAD
                        == req.bytes.len()
                {
                    v.torn.fetch_add(1, Ordering::Relaxed);
                }
            }
        };
        session.run(&mut handler).unwrap();
        session.stats()
    });

    let config = ClientConfig::new(4096, 8, 4096, 8).unwrap();
    let client = Client::connect(&path, config).unwrap();
    let (ring, bells) = client.tx_parts();
    let cap = ring.capacity();
    let frames = ring.frame_count();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id()));
    let mut seq = 0u32;
    let (mut published, mut rewrites) = (0u64, 0u64);
    let write = |index: u32, bytes: &[u8]| {
        let n = bytes.len().min(cap);
        // SAFETY: test-only hostile writer; n <= capacity keeps the write inside frame `index`
        // of our own mapping. Racing the daemon's copy is the point of the test, as another
        // process would: the daemon only ever copies these bytes into private memory.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ring.payload_ptr(index), n) };
    };
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        for index in 0..frames {
            let h = ring.header(index);
            let status = h.status.load(Ordering::Acquire);
            if status == FrameStatus::Unused as u32 || rng.below(64) == 0 {
                // Publish a fresh valid message (and now and then re-publish a frame the daemon
                // owns, or revive a frame we parked in SKIP or a garbage state).
                let m = message(
                    seq,
                    rng.below(cap as u64 - OVERHEAD as u64) as usize,
                    &mut rng,
                );
                seq = seq.wrapping_add(1);
                write(index, &m);
                h.len.store(m.len() as u32, Ordering::Relaxed);
                let status = match rng.below(64) {
                    0 => FrameStatus::Skip as u32,
                    1 => 99,
                    2 => {
                        // COPY with (sometimes) a real socket message behind it, sometimes one
                        // far above the daemon's limit, sometimes nothing.
                        let big = match rng.below(3) {
                            0 => Some(message(seq, 10_000, &mut rng)),
                            1 => Some(vec![0xa5; 100 << 10]),
                            _ => None,
                        };
                        if let Some(big) = big {
                            let _ = sys::send(client.socket(), &big, &[], libc::MSG_DONTWAIT);
                        }
                        FrameStatus::Copy as u32
                    }
                    _ => FrameStatus::Valid as u32,
                };
                h.status.store(status, Ordering::Release);
                bells.ring_peer();
                published += 1;
            } else {
                // The frame belongs to the daemon now. Rewrite it anyway.
                match rng.below(4) {
                    0 => {
                        let junk: Vec<u8> = (0..rng.below(cap as u64))
                            .map(|_| rng.next() as u8)
                            .collect();
                        write(index, &junk);
                    }
                    1 => {
                        let m = message(
                            seq,
                            rng.below(cap as u64 - OVERHEAD as u64) as usize,
                            &mut rng,
                        );
                        seq = seq.wrapping_add(1);
                        write(index, &m);
                        h.len.store(m.len() as u32, Ordering::Relaxed);
                    }
                    2 => {
                        let lies = [cap as u32 + 1, u32::MAX, 0, rng.next() as u32, cap as u32];
                        h.len.store(
                            lies[rng.below(lies.len() as u64) as usize],
                            Ordering::Relaxed,
                        );
                    }
                    _ => {
                        let at = rng.below(cap as u64) as usize;
                        // SAFETY: at < capacity, inside frame `index` of our mapping; volatile
                        // so the flip really reaches shared memory when the daemon may look.
                        unsafe {
                            let p = ring.payload_ptr(index).add(at);
                            p.write_volatile(p.read_volatile() ^ 0x40);
                        }
                    }
                }
                rewrites += 1;
            }
        }
    }
    drop(client);
    let stats = server
        .join()
        .expect("daemon handler saw a request change after validation");
    std::fs::remove_dir_all(&dir).ok();

    let accepted = verdicts.accepted.load(Ordering::Relaxed);
    let rejected = verdicts.rejected.load(Ordering::Relaxed);
    let torn = verdicts.torn.load(Ordering::Relaxed);
    eprintln!(
        "hostile client ({secs} s): published {published}, rewrote daemon-owned frames {rewrites} times; \
         daemon accepted {accepted}, rejected {rejected} ({torn} torn copies), dropped {} malformed frames, \
         {} requests over the socket",
        stats.malformed, stats.requests_socket
    );
    assert!(accepted > 0, "the daemon served valid requests");
    assert!(
        rewrites > 0,
        "the client rewrote frames after handing them over"
    );
    assert!(
        rejected + stats.malformed > 0,
        "the attack reached the daemon"
    );
}

#[test]
fn hostile_client_rewriting_rx_frames_cannot_grow_or_stall_the_daemon() {
    let secs = attack_secs();
    let dir = std::env::temp_dir().join(format!("fibre-ring-hostile-rx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fibred.sock");
    let listener = Listener::bind(&path).unwrap();
    let server = thread::spawn(move || {
        let mut session = listener.accept(Limits::default()).unwrap();
        let mut handler = |_req: Request, out: &mut Responder<'_>| {
            // An endless dump of messages of every size, some larger than a frame (COPY).
            let mut n = 0u64;
            let dump = std::iter::from_fn(move || {
                n += 1;
                Some(vec![n as u8; (n as usize * 97) % 2100])
            });
            assert!(out.dump(Box::new(dump)).is_ok());
        };
        session.run(&mut handler).unwrap();
        session.stats()
    });

    let mut client =
        Client::connect(&path, ClientConfig::new(2048, 16, 2048, 16).unwrap()).unwrap();
    client.send(b"dump").unwrap();
    let mut rng = Rng(0x5eed ^ u64::from(std::process::id()));
    let ring = client.rx_ring();
    let cap = ring.capacity();
    let statuses = [
        FrameStatus::Unused as u32,
        FrameStatus::Reserved as u32,
        FrameStatus::Valid as u32,
        FrameStatus::Copy as u32,
        FrameStatus::Skip as u32,
        7,
        u32::MAX,
    ];
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut rewrites = 0u64;
    while Instant::now() < deadline {
        let index = rng.below(u64::from(ring.frame_count())) as u32;
        let h = ring.header(index);
        h.status.store(
            statuses[rng.below(statuses.len() as u64) as usize],
            Ordering::Release,
        );
        h.len.store(rng.next() as u32, Ordering::Relaxed);
        let at = rng.below(cap as u64) as usize;
        // SAFETY: at < capacity, inside frame `index` of our own mapping.
        unsafe {
            ring.payload_ptr(index)
                .add(at)
                .write_volatile(rng.next() as u8)
        };
        rewrites += 1;
        if rewrites % 1024 == 0 {
            // Let the daemon run: it is told of "freed" frames only through the doorbell, and
            // COPY replies need room on the socket.
            client.tx_parts().1.ring_peer();
            let _ = sys::recv(client.socket(), &mut [0u8; 8192], libc::MSG_DONTWAIT);
        }
    }
    drop(client);
    let stats = server.join().expect("daemon survived the RX attack");
    std::fs::remove_dir_all(&dir).ok();
    eprintln!(
        "hostile RX client ({secs} s): {rewrites} rewrites; daemon produced {} dump messages, \
         {} in frames, {} over the socket, pending high water {}",
        stats.dump_messages, stats.replies_ring, stats.replies_socket, stats.pending_high_water
    );
    assert!(stats.dump_messages > 0);
    assert!(
        stats.pending_high_water <= 1,
        "the daemon never queued more than one dump message"
    );
}
