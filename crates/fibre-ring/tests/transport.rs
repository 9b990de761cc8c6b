//! End-to-end tests of the ring transport: a server thread and a client over a real Unix socket
//! in a temporary directory.

use fibre_ring::server::{AcceptError, Limits, Listener, Responder, SessionStats};
use fibre_ring::{Client, ClientConfig, ClientError, Request, Via};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A fresh directory for one test's socket, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "fibre-ring-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn socket(&self) -> PathBuf {
        self.0.join("fibred.sock")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Serves exactly one client with `handler` on a thread; the thread returns the session's
/// counters once the client disconnects.
fn serve_one<H>(dir: &TempDir, limits: Limits, mut handler: H) -> thread::JoinHandle<SessionStats>
where
    H: FnMut(Request, &mut Responder<'_>) + Send + 'static,
{
    let listener = Listener::bind(&dir.socket()).unwrap();
    thread::spawn(move || {
        let mut session = listener.accept(limits).unwrap();
        session.run(&mut handler).unwrap();
        session.stats()
    })
}

fn small_rings() -> ClientConfig {
    // 1 KiB frames, 8 per ring: small enough that tests wrap the rings many times and hit the
    // COPY path with modest messages.
    ClientConfig::new(1024, 8, 1024, 8).unwrap()
}

/// A message whose bytes are a function of (seq, len), so the receiver can check every byte.
fn pattern(seq: u32, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8)
        .collect();
    if len >= 4 {
        v[..4].copy_from_slice(&seq.to_le_bytes());
    }
    v
}

fn seq_of(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[..4].try_into().unwrap())
}

#[test]
fn echo_in_order_across_ring_and_copy_paths() {
    let dir = TempDir::new("echo");
    let server = serve_one(&dir, Limits::default(), |req, out| {
        out.reply(&req.bytes).unwrap();
    });
    let mut client = Client::connect(&dir.socket(), small_rings()).unwrap();
    let cap = client.tx_frame_capacity();
    // Sizes cycle through small, exactly one frame, and larger than a frame (COPY).
    let sizes = [4usize, 100, cap, cap + 1, 3 * cap, 17];
    let requests: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| pattern(i, sizes[i as usize % sizes.len()]))
        .collect();
    let mut next = 0usize;
    let mut copied = 0;
    client
        .transact(requests.iter().map(|r| r.as_slice()), |m| {
            assert_eq!(m.bytes, requests[next].as_slice(), "reply {next}");
            copied += m.copied as usize;
            next += 1;
            if next == requests.len() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!(next, requests.len());
    drop(client);
    let stats = server.join().unwrap();
    let large = requests.iter().filter(|r| r.len() > cap).count() as u64;
    assert_eq!(
        copied as u64, large,
        "every reply larger than a frame came over the socket"
    );
    assert_eq!(stats.requests_socket, large);
    assert_eq!(stats.requests_ring, requests.len() as u64 - large);
    assert_eq!(stats.replies_socket, large);
    assert_eq!(stats.malformed, 0);
}

#[test]
fn copy_fallback_carries_large_messages_both_ways() {
    let dir = TempDir::new("copy");
    let server = serve_one(&dir, Limits::default(), |req, out| {
        assert_eq!(req.via, Via::Socket);
        let mut reply = req.bytes.to_vec();
        reply.reverse();
        out.reply(&reply).unwrap();
    });
    let mut client = Client::connect(&dir.socket(), small_rings()).unwrap();
    let big = pattern(7, 100_000);
    client.send(&big).unwrap();
    let (bytes, copied) = client.recv_with(|m| (m.bytes.to_vec(), m.copied)).unwrap();
    assert!(copied);
    let mut want = big.clone();
    want.reverse();
    assert_eq!(bytes, want);
    drop(client);
    let stats = server.join().unwrap();
    assert_eq!((stats.requests_socket, stats.replies_socket), (1, 1));
}

#[test]
fn dump_streams_as_client_frees_frames() {
    let dir = TempDir::new("dump");
    const N: u32 = 20_000;
    let server = serve_one(&dir, Limits::default(), |_req, out| {
        let dump = (0..N).map(|i| pattern(i, 200 + (i as usize % 700)));
        assert!(out.dump(Box::new(dump)).is_ok());
    });
    let mut client = Client::connect(&dir.socket(), small_rings()).unwrap();
    client.send(b"dump").unwrap();
    for (i, reply) in client.replies().take(N as usize).enumerate() {
        let reply = reply.unwrap();
        assert_eq!(reply, pattern(i as u32, 200 + (i % 700)));
    }
    drop(client);
    let stats = server.join().unwrap();
    assert_eq!(stats.dump_messages, N as u64);
    assert!(
        stats.pending_high_water <= 1,
        "a dump never queues more than one message"
    );
}

/// A dump with no end that counts what it produced and notices when it is dropped.
struct Endless {
    produced: Arc<AtomicU64>,
    dropped: Arc<AtomicBool>,
}

impl fibre_ring::Dump for Endless {
    fn next_message(&mut self, out: &mut Vec<u8>) -> bool {
        let n = self.produced.fetch_add(1, Ordering::Relaxed);
        out.extend_from_slice(&pattern(n as u32, 512));
        true
    }
}

impl Drop for Endless {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::Relaxed);
    }
}

fn wait_until(what: &str, timeout: Duration, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn stalled_client_pauses_dump_and_vanished_client_is_freed() {
    let dir = TempDir::new("stall");
    let produced = Arc::new(AtomicU64::new(0));
    let dropped = Arc::new(AtomicBool::new(false));
    let (p, d) = (produced.clone(), dropped.clone());
    let server = serve_one(&dir, Limits::default(), move |_req, out| {
        let dump = Endless {
            produced: p.clone(),
            dropped: d.clone(),
        };
        assert!(out.dump(Box::new(dump)).is_ok());
    });
    let config = small_rings();
    let frames = u64::from(config.rx.frame_count);
    let mut client = Client::connect(&dir.socket(), config).unwrap();
    client.send(b"dump everything").unwrap();

    // The client reads nothing: the daemon fills the ring and stops producing.
    wait_until("the ring to fill", Duration::from_secs(10), || {
        produced.load(Ordering::Relaxed) >= frames
    });
    thread::sleep(Duration::from_millis(300));
    let stalled = produced.load(Ordering::Relaxed);
    assert!(
        stalled <= frames + 1,
        "produced {stalled} messages for {frames} frames"
    );
    thread::sleep(Duration::from_millis(300));
    assert_eq!(
        produced.load(Ordering::Relaxed),
        stalled,
        "dump kept producing while paused"
    );

    // Reading resumes the dump, in order.
    for i in 0..3 * frames {
        let reply = client.recv().unwrap();
        assert_eq!(seq_of(&reply), i as u32);
    }
    wait_until("the dump to resume", Duration::from_secs(10), || {
        produced.load(Ordering::Relaxed) >= 4 * frames
    });
    assert!(produced.load(Ordering::Relaxed) <= 4 * frames + 1);

    // The client vanishes mid-dump: the session ends and frees the dump.
    drop(client);
    let stats = server.join().unwrap();
    assert!(dropped.load(Ordering::Relaxed), "the dump state was freed");
    assert!(stats.pending_high_water <= 1);
}

#[test]
fn replies_beyond_the_pending_bound_are_refused_not_buffered() {
    let dir = TempDir::new("overrun");
    let limits = Limits {
        pending_messages: 16,
        ..Limits::default()
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let server = serve_one(&dir, limits, move |_req, out| {
        // Far more replies than the ring (8 frames) and the queue (16) can hold.
        let mut refused = 0;
        for i in 0..100u32 {
            if out
                .send(&i.to_le_bytes(), fibre_ring::Sender::DAEMON)
                .is_err()
            {
                refused += 1;
            }
        }
        done_tx.send(refused).unwrap();
    });
    let mut client = Client::connect(&dir.socket(), small_rings()).unwrap();
    client.send(b"flood").unwrap();
    // Read only once the handler is done, so no frame frees up while it sends.
    assert_eq!(done_rx.recv().unwrap(), 100 - 8 - 16);
    for i in 0..24u32 {
        assert_eq!(client.recv().unwrap(), i.to_le_bytes());
    }
    drop(client);
    let stats = server.join().unwrap();
    assert_eq!(stats.overruns, 76);
    assert_eq!(stats.pending_high_water, 16);
}

#[test]
fn kept_frames_are_skipped_by_the_daemon() {
    let dir = TempDir::new("keep");
    let server = serve_one(&dir, Limits::default(), |_req, out| {
        let dump = (0..100u32).map(|i| pattern(i, 64));
        assert!(out.dump(Box::new(dump)).is_ok());
    });
    let mut client = Client::connect(&dir.socket(), small_rings()).unwrap();
    client.send(b"dump").unwrap();
    let kept = client.recv_kept().unwrap().unwrap();
    assert_eq!(seq_of(kept.bytes()), 0);
    // The daemon writes around the kept frame through many laps of the ring.
    for i in 1..100u32 {
        assert_eq!(seq_of(&client.recv().unwrap()), i);
    }
    assert_eq!(
        kept.bytes(),
        pattern(0, 64).as_slice(),
        "kept frame untouched"
    );
    drop(kept);
    drop(client);
    server.join().unwrap();
}

#[test]
fn daemon_refuses_bad_geometry_and_malformed_handshakes() {
    use fibre_ring::proto::{SetupReply, SetupRequest, REPLY_LEN};
    use fibre_ring::Session;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    let mut bad = small_rings();
    // Claims more frames than its blocks hold. The client library refuses it itself...
    bad.rx.frame_count += 1;
    let dir = TempDir::new("geometry");
    let err = Client::connect(&dir.socket(), bad).err().unwrap();
    assert!(matches!(err, ClientError::Geometry(_)), "{err:?}");

    // ...and the daemon refuses it from a client that does not check, answering EINVAL.
    let request = SetupRequest {
        rx: bad.rx,
        tx: bad.tx,
    }
    .encode();
    let (daemon_end, mut client_end) = UnixStream::pair().unwrap();
    let err = Session::accept(daemon_end.into(), &request, Limits::default())
        .err()
        .unwrap();
    assert!(matches!(err, AcceptError::Geometry(_)), "{err}");
    let mut buf = [0u8; REPLY_LEN];
    client_end.read_exact(&mut buf).unwrap();
    assert_eq!(SetupReply::decode(&buf).unwrap().error, -22);

    let (daemon_end, mut client_end) = UnixStream::pair().unwrap();
    let err = Session::accept(daemon_end.into(), &request[..20], Limits::default())
        .err()
        .unwrap();
    assert!(matches!(err, AcceptError::Handshake(_)), "{err}");
    client_end.read_exact(&mut buf).unwrap();
    assert_eq!(SetupReply::decode(&buf).unwrap().error, -22);
}

#[test]
fn many_clients_at_once_each_get_their_own_replies() {
    const CLIENTS: usize = 8;
    const REQUESTS: u32 = 2000;
    let dir = TempDir::new("many");
    let listener = Listener::bind(&dir.socket()).unwrap();
    let acceptor = thread::spawn(move || {
        let sessions: Vec<_> = (0..CLIENTS)
            .map(|_| {
                let mut session = listener.accept(Limits::default()).unwrap();
                thread::spawn(move || {
                    // Echo with the session's own tag in front, so a reply crossing to another
                    // client's ring would be caught.
                    let mut handler = |req: Request, out: &mut Responder<'_>| {
                        let tag = req.bytes[0];
                        let mut reply = vec![tag];
                        reply.extend_from_slice(&req.bytes);
                        out.reply(&reply).unwrap();
                    };
                    session.run(&mut handler).unwrap();
                    session.stats()
                })
            })
            .collect();
        sessions
            .into_iter()
            .map(|s| s.join().unwrap())
            .collect::<Vec<_>>()
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let path = dir.socket();
            thread::spawn(move || {
                let mut client = Client::connect(&path, small_rings()).unwrap();
                let requests: Vec<Vec<u8>> = (0..REQUESTS)
                    .map(|i| {
                        let mut m = pattern(i, 8 + (i as usize * 13) % 1500);
                        m[0] = c as u8;
                        m
                    })
                    .collect();
                let mut next = 0usize;
                client
                    .transact(requests.iter().map(|r| r.as_slice()), |m| {
                        assert_eq!(m.bytes[0], c as u8, "reply for another client");
                        assert_eq!(&m.bytes[1..], requests[next].as_slice());
                        next += 1;
                        if next == requests.len() {
                            ControlFlow::Break(())
                        } else {
                            ControlFlow::Continue(())
                        }
                    })
                    .unwrap();
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let stats = acceptor.join().unwrap();
    assert_eq!(stats.len(), CLIENTS);
    for s in stats {
        assert_eq!(s.requests_ring + s.requests_socket, u64::from(REQUESTS));
        assert_eq!(s.malformed, 0);
    }
}

/// The way a single-threaded daemon drives many sessions: poll-driven, no thread per client.
#[test]
fn one_thread_multiplexes_sessions_with_poll() {
    use fibre_ring::SessionError;
    const CLIENTS: usize = 4;
    const REQUESTS: u32 = 3000;
    let dir = TempDir::new("poll");
    let listener = Listener::bind(&dir.socket()).unwrap();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let path = dir.socket();
            thread::spawn(move || {
                let mut client = Client::connect(&path, small_rings()).unwrap();
                // Every other client also asks for a dump, to mix paused output with requests.
                for i in 0..REQUESTS {
                    let mut m = pattern(i, 16 + (i as usize * 7) % 900);
                    m[0] = c as u8;
                    if c % 2 == 1 && i == REQUESTS / 2 {
                        m[1] = b'D';
                    }
                    client.send(&m).unwrap();
                    let reply = client.recv().unwrap();
                    assert_eq!(reply, m, "client {c} request {i}");
                    if m[1] == b'D' {
                        for d in 0..500u32 {
                            assert_eq!(client.recv().unwrap(), pattern(d, 300));
                        }
                    }
                }
            })
        })
        .collect();
    let mut sessions: Vec<_> = (0..CLIENTS)
        .map(|_| listener.accept(Limits::default()).unwrap())
        .collect();
    let mut finished = 0;
    while !sessions.is_empty() {
        let mut progressed = false;
        let mut gone = Vec::new();
        for (i, s) in sessions.iter_mut().enumerate() {
            let step = (|| -> Result<bool, SessionError> {
                let mut moved = s.pump()?;
                while s.output_idle() {
                    let Some(req) = s.next_request()? else { break };
                    moved = true;
                    let mut out = s.responder();
                    out.reply(&req.bytes).unwrap();
                    if req.bytes[1] == b'D' {
                        let dump = (0..500u32).map(|d| pattern(d, 300));
                        assert!(out.dump(Box::new(dump)).is_ok());
                    }
                    s.pump()?;
                }
                Ok(moved)
            })();
            match step {
                Ok(moved) => progressed |= moved,
                Err(SessionError::Disconnected) => gone.push(i),
                Err(e) => panic!("{e}"),
            }
        }
        for i in gone.into_iter().rev() {
            sessions.swap_remove(i);
            finished += 1;
        }
        if progressed || sessions.is_empty() {
            continue;
        }
        // Sleep only if every session agrees there is nothing to do.
        if sessions.iter_mut().all(|s| s.prepare_to_sleep()) {
            let mut fds: Vec<libc::pollfd> = Vec::new();
            for s in &sessions {
                fds.extend(s.poll_fds());
            }
            // SAFETY: fds is a live, writable array of fds.len() pollfd structures.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
            assert!(ready > 0, "poll: {}", std::io::Error::last_os_error());
            let mut gone = Vec::new();
            for (i, s) in sessions.iter_mut().enumerate() {
                let pair = [fds[2 * i], fds[2 * i + 1]];
                if let Err(SessionError::Disconnected) = s.after_wake(&pair) {
                    gone.push(i);
                }
            }
            for i in gone.into_iter().rev() {
                sessions.swap_remove(i);
                finished += 1;
            }
        }
    }
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(finished, CLIENTS);
}

#[test]
fn messages_too_large_for_the_socket_are_refused_not_fatal() {
    let dir = TempDir::new("huge");
    let server = serve_one(&dir, Limits::default(), |req, out| {
        if req.bytes.as_ref() == b"huge reply" {
            // Far beyond a frame and any socket buffer.
            assert_eq!(
                out.reply(&vec![0u8; 8 << 20]),
                Err(fibre_ring::server::Overrun)
            );
        }
        out.reply(b"ok").unwrap();
    });
    let mut client = Client::connect(&dir.socket(), small_rings()).unwrap();
    match client.send(&vec![0u8; 8 << 20]) {
        Err(ClientError::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::EMSGSIZE)),
        other => panic!("{other:?}"),
    }
    client.send(b"huge reply").unwrap();
    assert_eq!(client.recv().unwrap(), b"ok");
    drop(client);
    let stats = server.join().unwrap();
    assert_eq!(stats.overruns, 1);
}
