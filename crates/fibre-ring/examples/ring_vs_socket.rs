//! Ring vs socket throughput, side by side in one run.
//!
//! `cargo run --release -p fibre-ring --example ring_vs_socket [-- --quick]`
//!
//! Two directions, each over the ring transport and over a plain connected AF_UNIX
//! SOCK_SEQPACKET socket (one datagram per message, as a netlink socket delivers them), with a
//! daemon thread and a client thread in one process:
//! - RX (dump): the daemon sends N messages of S bytes; the client checks each message's
//!   sequence number and length and reads its last byte.
//! - TX (load): the client sends N requests of S bytes (ring: `Client::transact`, the batch
//!   API; socket: one send per message); the daemon takes each (the ring side copies it out of
//!   the frame, as it always does) and checks sequence number and length; a final request is
//!   answered so the client knows all were handled.
//! - RTT: one request, wait for its reply, repeat (as `fibre route get` does): latency, where
//!   each side sleeps between messages on both transports.
//!
//! Both sides build each message by patching a sequence number into a prepared template, so the
//! transports differ only in how bytes cross. The sockets get send/receive buffers as large as
//! the ring, so neither side is starved of buffering. Each figure is the median of several runs.

use fibre_ring::server::{Limits, Listener, Responder};
use fibre_ring::{Client, ClientConfig, Dump, Request};
use std::ops::ControlFlow;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::thread;
use std::time::{Duration, Instant};

/// Bytes of ring (and of socket buffer) per direction: 128 frames of 16 KiB.
const RX_FRAME: u32 = 16 << 10;
const RX_FRAMES: u32 = 128;
const TX_FRAME: u32 = 4 << 10;
const TX_FRAMES: u32 = 256;

fn template(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

fn stamp(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
}

/// The consumer's work on every message, identical for both transports.
fn check(bytes: &[u8], seq: u64, len: usize) -> u8 {
    assert_eq!(bytes.len(), len, "message {seq} length");
    assert_eq!(
        u64::from_le_bytes(bytes[..8].try_into().unwrap()),
        seq,
        "message order"
    );
    bytes[len - 1]
}

struct Templated {
    buf: Vec<u8>,
    next: u64,
    count: u64,
}

impl Dump for Templated {
    fn next_message(&mut self, out: &mut Vec<u8>) -> bool {
        if self.next == self.count {
            return false;
        }
        stamp(&mut self.buf, self.next);
        self.next += 1;
        out.extend_from_slice(&self.buf);
        true
    }
}

fn temp_socket(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fibre-ring-bench-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("fibred.sock")
}

fn ring_config() -> ClientConfig {
    ClientConfig::new(RX_FRAME, RX_FRAMES, TX_FRAME, TX_FRAMES).unwrap()
}

/// Runs `client` against a ring daemon whose handler is `handler`; returns the client's time.
fn with_ring_daemon<H, C>(tag: &str, mut handler: H, client: C) -> Duration
where
    H: FnMut(Request, &mut Responder<'_>) + Send + 'static,
    C: FnOnce(&mut Client) -> Duration,
{
    let path = temp_socket(tag);
    let listener = Listener::bind(&path).unwrap();
    let daemon = thread::spawn(move || {
        let mut session = listener.accept(Limits::default()).unwrap();
        session.run(&mut handler).unwrap();
    });
    let mut c = Client::connect(&path, ring_config()).unwrap();
    let elapsed = client(&mut c);
    drop(c);
    daemon.join().unwrap();
    std::fs::remove_dir_all(path.parent().unwrap()).ok();
    elapsed
}

fn ring_rx(count: u64, len: usize) -> Duration {
    let daemon = move |_req: Request, out: &mut Responder<'_>| {
        let dump = Templated {
            buf: template(len),
            next: 0,
            count,
        };
        assert!(out.dump(Box::new(dump)).is_ok());
    };
    with_ring_daemon("rx", daemon, |c| {
        let start = Instant::now();
        c.send(b"dump").unwrap();
        let mut sink = 0u8;
        for seq in 0..count {
            sink ^= c.recv_with(|m| check(m.bytes, seq, len)).unwrap();
        }
        std::hint::black_box(sink);
        start.elapsed()
    })
}

/// Distinct TX messages the benchmark cycles through (pre-built, so `transact` can borrow them).
const TX_POOL: u64 = 4096;

fn ring_tx(count: u64, len: usize) -> Duration {
    let mut expect = 0u64;
    let daemon = move |req: Request, out: &mut Responder<'_>| {
        if req.bytes.len() == 1 {
            out.reply(b"done").unwrap();
            return;
        }
        std::hint::black_box(check(&req.bytes, expect % TX_POOL, len));
        expect += 1;
    };
    let pool: Vec<Vec<u8>> = (0..TX_POOL)
        .map(|seq| {
            let mut m = template(len);
            stamp(&mut m, seq);
            m
        })
        .collect();
    with_ring_daemon("tx", daemon, |c| {
        let requests = (0..count).map(|i| pool[(i % TX_POOL) as usize].as_slice());
        let start = Instant::now();
        c.transact(requests.chain([&b"!"[..]]), |reply| {
            assert_eq!(reply.bytes, b"done");
            ControlFlow::Break(())
        })
        .unwrap();
        start.elapsed()
    })
}

/// Round trips: one request, wait for its reply, repeat (the shape of `fibre route get`).
fn ring_rtt(count: u64, len: usize) -> Duration {
    let daemon = |req: Request, out: &mut Responder<'_>| {
        out.reply(&req.bytes).unwrap();
    };
    with_ring_daemon("rtt", daemon, |c| {
        let mut buf = template(len);
        let start = Instant::now();
        for seq in 0..count {
            stamp(&mut buf, seq);
            c.send(&buf).unwrap();
            std::hint::black_box(c.recv_with(|m| check(m.bytes, seq, len)).unwrap());
        }
        start.elapsed()
    })
}

fn socket_rtt(count: u64, len: usize) -> Duration {
    let (daemon_end, client_end) = socket_pair();
    let daemon = thread::spawn(move || {
        let mut buf = vec![0u8; TX_FRAME as usize];
        for _ in 0..count {
            let n = sock_recv(&daemon_end, &mut buf);
            sock_send(&daemon_end, &buf[..n]);
        }
    });
    let mut buf = template(len);
    let mut reply = vec![0u8; TX_FRAME as usize];
    let start = Instant::now();
    for seq in 0..count {
        stamp(&mut buf, seq);
        sock_send(&client_end, &buf);
        let n = sock_recv(&client_end, &mut reply);
        std::hint::black_box(check(&reply[..n], seq, len));
    }
    let elapsed = start.elapsed();
    daemon.join().unwrap();
    elapsed
}

fn socket_pair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints for socketpair to fill.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0, "socketpair: {}", std::io::Error::last_os_error());
    let bytes = (RX_FRAME * RX_FRAMES) as libc::c_int;
    for fd in fds {
        for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
            // SAFETY: setsockopt reads one c_int from a live local.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    (&bytes as *const libc::c_int).cast(),
                    4,
                );
            }
        }
    }
    // SAFETY: socketpair returned two new descriptors owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn sock_send(fd: &OwnedFd, bytes: &[u8]) {
    // SAFETY: sends from a live buffer of bytes.len() bytes.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    assert_eq!(
        n as usize,
        bytes.len(),
        "send: {}",
        std::io::Error::last_os_error()
    );
}

fn sock_recv(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    // SAFETY: receives into a live buffer of buf.len() bytes.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    assert!(n >= 0, "recv: {}", std::io::Error::last_os_error());
    n as usize
}

fn socket_rx(count: u64, len: usize) -> Duration {
    let (daemon_end, client_end) = socket_pair();
    let mut req = [0u8; 16];
    let daemon = thread::spawn(move || {
        let mut buf = template(len);
        let mut req = [0u8; 16];
        sock_recv(&daemon_end, &mut req);
        for seq in 0..count {
            stamp(&mut buf, seq);
            sock_send(&daemon_end, &buf);
        }
    });
    let mut buf = vec![0u8; RX_FRAME as usize];
    let start = Instant::now();
    sock_send(&client_end, b"dump");
    let mut sink = 0u8;
    for seq in 0..count {
        let n = sock_recv(&client_end, &mut buf);
        sink ^= check(&buf[..n], seq, len);
    }
    std::hint::black_box((sink, &mut req));
    let elapsed = start.elapsed();
    daemon.join().unwrap();
    elapsed
}

fn socket_tx(count: u64, len: usize) -> Duration {
    let (daemon_end, client_end) = socket_pair();
    let daemon = thread::spawn(move || {
        let mut buf = vec![0u8; TX_FRAME as usize];
        for seq in 0..count {
            let n = sock_recv(&daemon_end, &mut buf);
            std::hint::black_box(check(&buf[..n], seq % TX_POOL, len));
        }
        sock_send(&daemon_end, b"done");
    });
    let mut buf = template(len);
    let mut ack = [0u8; 16];
    let start = Instant::now();
    for seq in 0..count {
        stamp(&mut buf, seq % TX_POOL);
        sock_send(&client_end, &buf);
    }
    assert_eq!(sock_recv(&client_end, &mut ack), 4);
    let elapsed = start.elapsed();
    daemon.join().unwrap();
    elapsed
}

/// One side of one case: (message count, message length) -> elapsed time.
type Side = fn(u64, usize) -> Duration;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 1 } else { 5 };
    let volume: u64 = if quick { 16 << 20 } else { 256 << 20 };
    println!("fibre-ring throughput: ring vs AF_UNIX SOCK_SEQPACKET, median of {runs} runs");
    println!(
        "rings: RX {RX_FRAMES} x {} KiB frames, TX {TX_FRAMES} x {} KiB frames; socket buffers {} KiB",
        RX_FRAME >> 10,
        TX_FRAME >> 10,
        (RX_FRAME * RX_FRAMES) >> 10
    );
    println!(
        "{:<4} {:>7} {:>9} | {:>12} {:>9} | {:>12} {:>9} | {:>6}",
        "dir",
        "bytes",
        "messages",
        "ring msg/s",
        "ring MB/s",
        "sock msg/s",
        "sock MB/s",
        "ring/sock"
    );
    let rx_full = RX_FRAME as usize - 24;
    let cases: [(&str, usize, Side, Side); 6] = [
        ("RX", 100, ring_rx, socket_rx),
        ("RX", 1000, ring_rx, socket_rx),
        ("RX", rx_full, ring_rx, socket_rx),
        ("TX", 100, ring_tx, socket_tx),
        ("TX", 1000, ring_tx, socket_tx),
        ("RTT", 100, ring_rtt, socket_rtt),
    ];
    for (dir, len, ring, sock) in cases {
        let count = if dir == "RTT" {
            // Each round trip waits for two wake-ups: far fewer fit in the time.
            volume >> 12
        } else {
            (volume / len as u64).clamp(20_000, if quick { 100_000 } else { 1_000_000 })
        };
        let mut ring_times = Vec::new();
        let mut sock_times = Vec::new();
        // Alternate so a burst of load on the shared machine hits both sides alike.
        for _ in 0..runs {
            ring_times.push(ring(count, len));
            sock_times.push(sock(count, len));
        }
        let (r, s) = (median(ring_times), median(sock_times));
        let rate = |t: Duration| count as f64 / t.as_secs_f64();
        let mbs = |t: Duration| (count * len as u64) as f64 / t.as_secs_f64() / 1e6;
        println!(
            "{:<4} {:>7} {:>9} | {:>12.0} {:>9.0} | {:>12.0} {:>9.0} | {:>6.2}x",
            dir,
            len,
            count,
            rate(r),
            mbs(r),
            rate(s),
            mbs(s),
            s.as_secs_f64() / r.as_secs_f64()
        );
    }
}
