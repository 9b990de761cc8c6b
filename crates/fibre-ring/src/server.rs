//! The daemon's side of the ring transport: one [`Session`] per client.
//!
//! Safety by construction: this module contains no `unsafe` code (`forbid` below), and the ring
//! API it can use only *copies* TX frames into private memory. A handler therefore only ever
//! sees a [`Request`] owning a `Box<[u8]>`; there is no way to give it a reference into the
//! mapping, so a client rewriting a frame after publishing it changes nothing the daemon
//! validates or acts on. Header words of TX frames are hostile: the length is read once and
//! bounds-checked, the sender words are ignored (the sender is the socket's peer credential).
//!
//! Flow control and memory bounds: replies go into RX frames; when the RX ring is full they wait
//! in a pending queue bounded by [`Limits`], and a handler that overflows it gets
//! [`Overrun`] (the netlink ENOBUFS case). A dump ([`Dump`]) is pulled one message at a time and
//! only while an RX frame is free, so a client that stops reading pauses it with no daemon
//! memory growth; new TX requests are not taken while a dump or pending replies are
//! outstanding. A client that disconnects is noticed by the socket hanging up the next time
//! the session waits, and dropping the session frees its mapping, queue and dump.
//!
//! Shared memory and wake-ups: a daemon bounds its sessions together with a [`RingBudget`]
//! (how many, and how many bytes of shared memory they pin; [`Session::accept_within`]
//! refuses a ring beyond it with ENOSPC or ENOMEM before creating anything). The doorbell is
//! the client's to ring, so a client can ring it with nothing to do: after
//! [`IDLE_WAKE_BUDGET`] wake-ups in a row that found no work, [`Session::throttle`] tells the
//! caller to leave the doorbell unwatched for [`IDLE_WAKE_PAUSE`] after each further one,
//! until the session does some work again.
//!
//! Driving a session: [`Session::run`] is a blocking loop for a thread per client. A daemon
//! that multiplexes clients uses [`Session::next_request`], [`Session::responder`],
//! [`Session::pump`] and, when none of them made progress, [`Session::prepare_to_sleep`] then
//! poll(2) on [`Session::poll_fds`] and [`Session::after_wake`].
#![forbid(unsafe_code)]

use crate::frame::{FrameStatus, Sender};
use crate::geometry::GeometryError;
use crate::proto::{self, DecodeError, SetupReply, SetupRequest};
use crate::ring::{Consumer, Producer, Ring, Slot};
use crate::shm::{Doorbells, Layout, Mapping, Side};
use crate::sys::{self, Credentials};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long an accepted connection may take to send its setup request.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Doorbell wake-ups in a row that found no work before a session is throttled. A client
/// rings only after publishing or freeing frames, so a wake-up without work is rare (a ring
/// for frames freed while the daemon had nothing to send, once per sleep); dozens in a row
/// are a client ringing for nothing.
pub const IDLE_WAKE_BUDGET: u32 = 64;
/// How long a throttled session leaves its doorbell unwatched after each wake-up without work:
/// a client ringing in a loop then costs at most 1,000 wake-ups a second, and a client that
/// sends a request after ringing for nothing waits at most this long for it to be taken.
pub const IDLE_WAKE_PAUSE: Duration = Duration::from_millis(1);

/// Bounds on all the ring sessions of a daemon together: how many exist, and how many bytes of
/// shared memory they pin (each ring can be up to 2 x [`crate::geometry::MAX_RING_BYTES`]).
/// A session holds its share until it is dropped.
#[derive(Debug)]
pub struct RingBudget {
    max_sessions: usize,
    max_bytes: usize,
    /// Sessions and bytes in use.
    used: Mutex<(usize, usize)>,
}

impl RingBudget {
    pub fn new(max_sessions: usize, max_bytes: usize) -> Arc<RingBudget> {
        Arc::new(RingBudget {
            max_sessions,
            max_bytes,
            used: Mutex::new((0, 0)),
        })
    }

    /// Sessions and bytes of shared memory in use.
    pub fn in_use(&self) -> (usize, usize) {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one session of `bytes`, or says why not: ENOSPC when every session is taken,
    /// ENOMEM when the bytes would exceed the budget.
    fn reserve(self: &Arc<Self>, bytes: usize) -> Result<Reservation, i32> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if used.0 >= self.max_sessions {
            return Err(libc::ENOSPC);
        }
        if used.1 + bytes > self.max_bytes {
            return Err(libc::ENOMEM);
        }
        used.0 += 1;
        used.1 += bytes;
        Ok(Reservation {
            budget: self.clone(),
            bytes,
        })
    }
}

/// One session's share of a [`RingBudget`], given back on drop.
#[derive(Debug)]
struct Reservation {
    budget: Arc<RingBudget>,
    bytes: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        used.0 -= 1;
        used.1 -= self.bytes;
    }
}

/// Per-session bounds on the daemon's private memory.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Bytes of replies held when the RX ring is full. 256 KiB holds the ACKs of a whole TX
    /// ring of requests many times over; anything larger belongs in a [`Dump`].
    pub pending_bytes: usize,
    /// Number of replies held when the RX ring is full.
    pub pending_messages: usize,
    /// Largest request accepted over the socket (COPY); 1 MiB is far above any single rtnetlink
    /// request, and bounds what one COPY frame can make the daemon allocate.
    pub max_copy_request: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            pending_bytes: 256 << 10,
            pending_messages: 4096,
            max_copy_request: 1 << 20,
        }
    }
}

/// How a request reached the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Copied out of a TX frame.
    Ring,
    /// Too large for a frame: read from the socket in the place of a COPY frame.
    Socket,
}

/// One client request, in the daemon's private memory.
#[derive(Debug)]
pub struct Request {
    /// The message, copied out of shared memory before anyone looked at it.
    pub bytes: Box<[u8]>,
    /// The client's credentials as the kernel reported them at connect time.
    pub sender: Credentials,
    pub via: Via,
}

/// A dump: produces reply messages on demand, so only as many exist as the client has room for.
pub trait Dump: Send {
    /// Appends the next message to `out` (which is empty) and returns true, or returns false
    /// when the dump is complete.
    fn next_message(&mut self, out: &mut Vec<u8>) -> bool;
}

impl<I, T> Dump for I
where
    I: Iterator<Item = T> + Send,
    T: AsRef<[u8]>,
{
    fn next_message(&mut self, out: &mut Vec<u8>) -> bool {
        match self.next() {
            Some(m) => {
                out.extend_from_slice(m.as_ref());
                true
            }
            None => false,
        }
    }
}

/// A reply was dropped (netlink's ENOBUFS): the RX ring and the pending queue were full, or
/// the reply was larger than a frame and than one socket datagram can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overrun;

impl fmt::Display for Overrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("client's reply queue is full")
    }
}

impl std::error::Error for Overrun {}

/// Why a session stopped.
#[derive(Debug)]
pub enum SessionError {
    /// The client closed its socket or went away.
    Disconnected,
    /// A system call failed unexpectedly.
    Io(io::Error),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Disconnected => f.write_str("client disconnected"),
            SessionError::Io(e) => write!(f, "ring session: {e}"),
        }
    }
}

impl std::error::Error for SessionError {}

fn io_error(e: io::Error) -> SessionError {
    match e.raw_os_error() {
        Some(libc::EPIPE) | Some(libc::ECONNRESET) | Some(libc::ENOTCONN) => {
            SessionError::Disconnected
        }
        _ => SessionError::Io(e),
    }
}

/// Why a ring could not be set up for a connection.
#[derive(Debug)]
pub enum AcceptError {
    Io(io::Error),
    /// The setup request was not a well-formed handshake.
    Handshake(DecodeError),
    /// The requested geometry was refused.
    Geometry(GeometryError),
}

impl fmt::Display for AcceptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcceptError::Io(e) => write!(f, "ring setup: {e}"),
            AcceptError::Handshake(e) => write!(f, "ring setup: malformed request ({e:?})"),
            AcceptError::Geometry(e) => write!(f, "ring setup: {e}"),
        }
    }
}

impl std::error::Error for AcceptError {}

/// Counters of one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    pub requests_ring: u64,
    pub requests_socket: u64,
    /// TX frames dropped: length beyond the frame, COPY without a socket message, or an
    /// oversized socket message.
    pub malformed: u64,
    pub replies_ring: u64,
    pub replies_socket: u64,
    /// Replies dropped: pending queue full, or too large for a frame and the socket.
    pub overruns: u64,
    /// Most replies ever waiting in the pending queue.
    pub pending_high_water: usize,
    /// Messages pulled from dumps.
    pub dump_messages: u64,
}

/// The reply side of a session, borrowed by a handler.
struct Output {
    rx: Producer,
    pending: VecDeque<(Box<[u8]>, Sender)>,
    pending_bytes: usize,
    dump: Option<Box<dyn Dump>>,
    dump_buf: Vec<u8>,
    /// A COPY message found the socket's buffer full; wait for POLLOUT.
    blocked_on_socket: bool,
    /// A send from a handler failed; reported by the next pump.
    failed: Option<SessionError>,
    limits: Limits,
    stats: SessionStats,
}

enum Emit {
    Done,
    Full,
    /// Larger than a frame and than the socket can carry in one datagram: dropped.
    Dropped,
}

impl Output {
    fn idle(&self) -> bool {
        self.pending.is_empty() && self.dump.is_none()
    }

    /// Puts one message into the next RX frame, or over the socket behind a COPY frame.
    fn emit(
        &mut self,
        sock: BorrowedFd<'_>,
        msg: &[u8],
        sender: Sender,
    ) -> Result<Emit, SessionError> {
        let Some(frame) = self.rx.reserve() else {
            return Ok(Emit::Full);
        };
        if msg.len() <= self.rx.capacity() {
            self.rx.write(&frame, msg);
            self.rx
                .publish(frame, msg.len() as u32, sender, FrameStatus::Valid);
            self.stats.replies_ring += 1;
            return Ok(Emit::Done);
        }
        // Too large for a frame: the message goes on the socket first, then the COPY frame
        // tells the client, in ring order, to read it from there.
        match sys::send(sock, msg, &[], libc::MSG_DONTWAIT) {
            Ok(_) => {
                let len = u32::try_from(msg.len()).unwrap_or(u32::MAX);
                self.rx.publish(frame, len, sender, FrameStatus::Copy);
                self.stats.replies_socket += 1;
                Ok(Emit::Done)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.rx.unreserve(frame);
                self.blocked_on_socket = true;
                Ok(Emit::Full)
            }
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                self.rx.unreserve(frame);
                self.stats.overruns += 1;
                Ok(Emit::Dropped)
            }
            Err(e) => Err(io_error(e)),
        }
    }

    fn enqueue(&mut self, msg: &[u8], sender: Sender) -> Result<(), Overrun> {
        if self.pending.len() >= self.limits.pending_messages
            || self.pending_bytes + msg.len() > self.limits.pending_bytes
        {
            self.stats.overruns += 1;
            return Err(Overrun);
        }
        self.pending_bytes += msg.len();
        self.pending.push_back((msg.into(), sender));
        self.stats.pending_high_water = self.stats.pending_high_water.max(self.pending.len());
        Ok(())
    }

    /// Moves queued replies, then dump messages, into the RX ring while it has room. Returns
    /// whether anything moved.
    fn pump(&mut self, sock: BorrowedFd<'_>, bells: &Doorbells) -> Result<bool, SessionError> {
        let mut moved = false;
        while let Some((msg, sender)) = self.pending.pop_front() {
            match self.emit(sock, &msg, sender)? {
                Emit::Done => {
                    self.pending_bytes -= msg.len();
                    moved = true;
                    bells.note();
                }
                Emit::Dropped => {
                    self.pending_bytes -= msg.len();
                    moved = true;
                }
                Emit::Full => {
                    self.pending.push_front((msg, sender));
                    return Ok(moved);
                }
            }
        }
        while self.dump.is_some() && !self.blocked_on_socket && self.rx.has_room() {
            let mut buf = std::mem::take(&mut self.dump_buf);
            buf.clear();
            let more = self.dump.as_mut().is_some_and(|d| d.next_message(&mut buf));
            if !more {
                self.dump = None;
                self.dump_buf = buf;
                break;
            }
            self.stats.dump_messages += 1;
            moved = true;
            let emitted = self.emit(sock, &buf, Sender::DAEMON)?;
            let full = matches!(emitted, Emit::Full);
            if full {
                // The frame vanished between has_room and reserve (only a misbehaving client
                // can cause that) or the socket is full: keep this one message.
                self.pending_bytes += buf.len();
                self.pending
                    .push_back((buf.as_slice().into(), Sender::DAEMON));
                self.stats.pending_high_water =
                    self.stats.pending_high_water.max(self.pending.len());
            } else if let Emit::Done = emitted {
                bells.note();
            }
            self.dump_buf = buf;
            if full {
                break;
            }
        }
        Ok(moved)
    }

    /// True when output is waiting and could move now.
    fn can_move(&self) -> bool {
        !self.idle() && !self.blocked_on_socket && self.rx.has_room()
    }
}

/// Lets a handler answer the request it is handling.
pub struct Responder<'a> {
    out: &'a mut Output,
    sock: BorrowedFd<'a>,
    bells: &'a Doorbells,
}

impl Responder<'_> {
    /// Payload bytes of one RX frame; larger replies travel over the socket (COPY).
    pub fn frame_capacity(&self) -> usize {
        self.out.rx.capacity()
    }

    /// Sends a reply from the daemon. `Err(Overrun)` when it was dropped (see [`Overrun`]).
    pub fn reply(&mut self, msg: &[u8]) -> Result<(), Overrun> {
        self.send(msg, Sender::DAEMON)
    }

    /// Sends a message with an explicit sender (for example a notification caused by another
    /// client). A transport failure (the client vanished mid-send) is kept for the session to
    /// report from its next [`Session::pump`]; the message is then dropped with the session.
    pub fn send(&mut self, msg: &[u8], sender: Sender) -> Result<(), Overrun> {
        if self.out.failed.is_some() {
            return Ok(());
        }
        if self.out.pending.is_empty() && !self.out.blocked_on_socket {
            match self.out.emit(self.sock, msg, sender) {
                Ok(Emit::Done) => {
                    self.bells.note();
                    return Ok(());
                }
                Ok(Emit::Dropped) => return Err(Overrun),
                Ok(Emit::Full) => {}
                Err(e) => {
                    self.out.failed = Some(e);
                    return Ok(());
                }
            }
        }
        self.out.enqueue(msg, sender)
    }

    /// Starts a dump, answered as the client frees frames. A session runs one dump at a time;
    /// a second one while the first is active is refused and returned.
    pub fn dump(&mut self, dump: Box<dyn Dump>) -> Result<(), Box<dyn Dump>> {
        if self.out.dump.is_some() {
            return Err(dump);
        }
        self.out.dump = Some(dump);
        Ok(())
    }
}

/// Serves one request: reply through the responder (or start a dump).
pub trait Handler {
    fn handle(&mut self, request: Request, out: &mut Responder<'_>);
}

impl<F: FnMut(Request, &mut Responder<'_>)> Handler for F {
    fn handle(&mut self, request: Request, out: &mut Responder<'_>) {
        self(request, out)
    }
}

/// One client's ring session in the daemon.
pub struct Session {
    sock: OwnedFd,
    peer: Credentials,
    layout: Layout,
    tx: Consumer,
    out: Output,
    bells: Doorbells,
    scratch: Vec<u8>,
    /// Doorbell wake-ups in a row that found no work (see [`IDLE_WAKE_BUDGET`]).
    idle_wakes: u32,
    _share: Option<Reservation>,
}

fn refuse(sock: BorrowedFd<'_>, errno: i32, request: Option<&SetupRequest>) {
    let zero = crate::geometry::RingGeometry {
        block_size: 0,
        block_count: 0,
        frame_size: 0,
        frame_count: 0,
    };
    let reply = SetupReply {
        error: -errno,
        map_len: 0,
        rx: request.map_or(zero, |r| r.rx),
        tx: request.map_or(zero, |r| r.tx),
    };
    // Best effort: the client may already be gone, and the refusal is the outcome either way.
    let _ = sys::send(sock, &reply.encode(), &[], libc::MSG_DONTWAIT);
}

impl Session {
    /// Sets up a ring for a connected client that sent `request` (a message for which
    /// [`proto::is_setup_request`] holds): validates the geometry, creates and seals the memfd,
    /// and answers with the descriptors. On failure the client gets an errno and the socket is
    /// dropped.
    pub fn accept(sock: OwnedFd, request: &[u8], limits: Limits) -> Result<Session, AcceptError> {
        Self::accept_inner(sock, request, limits, None)
    }

    /// [`Session::accept`] within `budget`: a ring beyond it is refused (ENOSPC or ENOMEM to
    /// the client) before its memory is created; the session gives its share back when it is
    /// dropped.
    pub fn accept_within(
        sock: OwnedFd,
        request: &[u8],
        limits: Limits,
        budget: &Arc<RingBudget>,
    ) -> Result<Session, AcceptError> {
        Self::accept_inner(sock, request, limits, Some(budget))
    }

    fn accept_inner(
        sock: OwnedFd,
        request: &[u8],
        limits: Limits,
        budget: Option<&Arc<RingBudget>>,
    ) -> Result<Session, AcceptError> {
        let req = match SetupRequest::decode(request) {
            Ok(r) => r,
            Err(e) => {
                refuse(sock.as_fd(), libc::EINVAL, None);
                return Err(AcceptError::Handshake(e));
            }
        };
        if let Err(e) = req.rx.validate().and_then(|_| req.tx.validate()) {
            refuse(sock.as_fd(), libc::EINVAL, Some(&req));
            return Err(AcceptError::Geometry(e));
        }
        let layout = Layout {
            rx: req.rx,
            tx: req.tx,
        };
        let share = match budget.map(|b| b.reserve(layout.total_len())).transpose() {
            Ok(s) => s,
            Err(errno) => {
                refuse(sock.as_fd(), errno, Some(&req));
                return Err(AcceptError::Io(io::Error::from_raw_os_error(errno)));
            }
        };
        let setup = (|| {
            let (memfd, map) = Mapping::create(&layout)?;
            let daemon_efd = sys::eventfd()?;
            let client_efd = sys::eventfd()?;
            let peer = sys::peer_credentials(sock.as_fd())?;
            Ok::<_, io::Error>((memfd, map, daemon_efd, client_efd, peer))
        })();
        let (memfd, map, daemon_efd, client_efd, peer) = match setup {
            Ok(s) => s,
            Err(e) => {
                refuse(
                    sock.as_fd(),
                    e.raw_os_error().unwrap_or(libc::ENOMEM),
                    Some(&req),
                );
                return Err(AcceptError::Io(e));
            }
        };
        let reply = SetupReply {
            error: 0,
            map_len: layout.total_len() as u64,
            rx: layout.rx,
            tx: layout.tx,
        };
        sys::send(
            sock.as_fd(),
            &reply.encode(),
            &[memfd.as_fd(), daemon_efd.as_fd(), client_efd.as_fd()],
            0,
        )
        .map_err(AcceptError::Io)?;
        // The client has its own descriptor now; the mapping keeps the memory alive for us.
        drop(memfd);
        sys::set_nonblocking(sock.as_fd(), true).map_err(AcceptError::Io)?;
        let rx = Ring::new(map.clone(), layout.rx_offset(), layout.rx);
        let tx = Ring::new(map.clone(), layout.tx_offset(), layout.tx);
        Ok(Session {
            sock,
            peer,
            layout,
            tx: Consumer::new(tx),
            out: Output {
                rx: Producer::new(rx),
                pending: VecDeque::new(),
                pending_bytes: 0,
                dump: None,
                dump_buf: Vec::new(),
                blocked_on_socket: false,
                failed: None,
                limits,
                stats: SessionStats::default(),
            },
            bells: Doorbells::new(map, Side::Daemon, daemon_efd, client_efd),
            scratch: Vec::new(),
            idle_wakes: 0,
            _share: share,
        })
    }

    /// The client's credentials (SO_PEERCRED).
    pub fn peer(&self) -> Credentials {
        self.peer
    }

    pub fn stats(&self) -> SessionStats {
        self.out.stats
    }

    /// Replies and dump messages held in private memory right now.
    pub fn pending_replies(&self) -> usize {
        self.out.pending.len()
    }

    /// Bytes of shared memory mapped for this client.
    pub fn mapped_bytes(&self) -> usize {
        self.layout.total_len()
    }

    /// True when no reply is queued and no dump is running: the session takes requests.
    pub fn output_idle(&self) -> bool {
        self.out.idle()
    }

    /// Takes the next request from the TX ring, copied into private memory, and frees its frame
    /// (the client learns of freed frames at the next [`Session::pump`] or sleep).
    /// `None` when the ring holds nothing. Frames that break the protocol are dropped and
    /// counted in [`SessionStats::malformed`].
    pub fn next_request(&mut self) -> Result<Option<Request>, SessionError> {
        loop {
            let slot = self.tx.peek();
            if slot != Slot::Empty {
                self.idle_wakes = 0;
            }
            match slot {
                Slot::Empty => return Ok(None),
                Slot::Message { index, len, .. } => {
                    let mut bytes = Vec::new();
                    self.tx.copy_out(index, len, &mut bytes);
                    self.tx.release(index);
                    self.bells.note();
                    self.out.stats.requests_ring += 1;
                    return Ok(Some(Request {
                        bytes: bytes.into_boxed_slice(),
                        sender: self.peer,
                        via: Via::Ring,
                    }));
                }
                Slot::Copy { index, .. } => {
                    let got = self.recv_copy()?;
                    self.tx.release(index);
                    self.bells.note();
                    match got {
                        Some(bytes) => {
                            self.out.stats.requests_socket += 1;
                            return Ok(Some(Request {
                                bytes,
                                sender: self.peer,
                                via: Via::Socket,
                            }));
                        }
                        None => self.out.stats.malformed += 1,
                    }
                }
                Slot::Malformed { index } => {
                    self.tx.release(index);
                    self.bells.note();
                    self.out.stats.malformed += 1;
                }
            }
        }
    }

    /// Reads the socket message a COPY frame stands for. The frame's length word is ignored:
    /// the datagram's real size comes from the kernel. `None` if there is no message, it is
    /// empty, or it exceeds [`Limits::max_copy_request`] (it is then consumed and discarded).
    fn recv_copy(&mut self) -> Result<Option<Box<[u8]>>, SessionError> {
        let sock = self.sock.as_fd();
        let size = match sys::recv(sock, &mut [], libc::MSG_PEEK | libc::MSG_DONTWAIT) {
            Ok(r) => r.len,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(io_error(e)),
        };
        if size == 0 || size > self.out.limits.max_copy_request {
            if size > 0 {
                sys::recv(sock, &mut [], libc::MSG_DONTWAIT).map_err(io_error)?;
            }
            return Ok(None);
        }
        self.scratch.clear();
        self.scratch.resize(size, 0);
        let got = sys::recv(sock, &mut self.scratch, libc::MSG_DONTWAIT).map_err(io_error)?;
        if got.truncated || got.len != size {
            return Ok(None);
        }
        Ok(Some(self.scratch.as_slice().into()))
    }

    /// A responder for answering the request just taken.
    pub fn responder(&mut self) -> Responder<'_> {
        Responder {
            out: &mut self.out,
            sock: self.sock.as_fd(),
            bells: &self.bells,
        }
    }

    /// Moves queued replies and dump messages into free RX frames, then wakes the client if it
    /// sleeps and anything changed since it was last woken (frames published, or TX frames
    /// freed by [`Session::next_request`]). Returns whether any reply moved.
    pub fn pump(&mut self) -> Result<bool, SessionError> {
        if let Some(e) = self.out.failed.take() {
            return Err(e);
        }
        let moved = self.out.pump(self.sock.as_fd(), &self.bells)?;
        if moved {
            self.idle_wakes = 0;
        }
        self.bells.flush();
        Ok(moved)
    }

    /// Announces that the daemon will sleep on this session, then looks once more. Returns
    /// false (and stays awake) if there is work after all; if it returns true, poll
    /// [`Session::poll_fds`] and then call [`Session::after_wake`].
    pub fn prepare_to_sleep(&mut self) -> bool {
        self.bells.flush();
        self.bells.arm();
        let work = if self.out.idle() {
            self.tx.peek() != Slot::Empty
        } else {
            self.out.can_move()
        };
        if work {
            self.bells.disarm();
        }
        !work
    }

    /// What to poll while asleep: the session's doorbell, and the socket for hang-up (and for
    /// room, when a COPY reply is waiting for it).
    pub fn poll_fds(&self) -> [libc::pollfd; 2] {
        let mut sock_events = libc::POLLRDHUP;
        if self.out.blocked_on_socket {
            sock_events |= libc::POLLOUT;
        }
        [
            sys::pollfd(self.bells.wait_fd(), libc::POLLIN),
            sys::pollfd(self.sock.as_fd(), sock_events),
        ]
    }

    /// Processes what poll reported for [`Session::poll_fds`].
    pub fn after_wake(&mut self, fds: &[libc::pollfd; 2]) -> Result<(), SessionError> {
        self.bells.disarm();
        if fds[0].revents != 0 {
            // Counted as idle until the session finds work (`next_request`, `pump`).
            self.idle_wakes = self.idle_wakes.saturating_add(1);
        }
        let sock = fds[1].revents;
        if sock & (libc::POLLHUP | libc::POLLERR | libc::POLLRDHUP) != 0 {
            return Err(SessionError::Disconnected);
        }
        if sock & libc::POLLOUT != 0 {
            self.out.blocked_on_socket = false;
        }
        Ok(())
    }

    /// How long to leave the doorbell unwatched before the next sleep on it: `Some` once the
    /// client rang [`IDLE_WAKE_BUDGET`] times in a row without giving work. The caller then
    /// polls [`Session::poll_fds`] with the doorbell's events cleared for that long (a hang-up
    /// still ends the session) before it calls [`Session::prepare_to_sleep`].
    pub fn throttle(&self) -> Option<Duration> {
        (self.idle_wakes > IDLE_WAKE_BUDGET).then_some(IDLE_WAKE_PAUSE)
    }

    /// Serves the client until it disconnects (`Ok`) or a system call fails.
    pub fn run<H: Handler + ?Sized>(&mut self, handler: &mut H) -> io::Result<()> {
        match self.serve(handler) {
            Err(SessionError::Disconnected) => Ok(()),
            Err(SessionError::Io(e)) => Err(e),
            Ok(never) => match never {},
        }
    }

    fn serve<H: Handler + ?Sized>(
        &mut self,
        handler: &mut H,
    ) -> Result<std::convert::Infallible, SessionError> {
        loop {
            let mut progressed = self.pump()?;
            while self.out.idle() {
                let Some(request) = self.next_request()? else {
                    break;
                };
                progressed = true;
                handler.handle(request, &mut self.responder());
                self.pump()?;
            }
            if progressed {
                continue;
            }
            if let Some(pause) = self.throttle() {
                let mut fds = self.poll_fds();
                fds[0].events = 0;
                sys::poll(&mut fds, Some(pause)).map_err(SessionError::Io)?;
                self.after_wake(&fds)?;
            }
            if self.prepare_to_sleep() {
                let mut fds = self.poll_fds();
                sys::poll(&mut fds, None).map_err(SessionError::Io)?;
                self.after_wake(&fds)?;
            }
        }
    }
}

/// A listening SOCK_SEQPACKET socket that sets up a ring for every connection. The socket file
/// is removed when the listener is dropped.
pub struct Listener {
    fd: OwnedFd,
    path: PathBuf,
}

impl Listener {
    pub fn bind(path: &Path) -> io::Result<Listener> {
        let fd = sys::seqpacket_listen(path, 128)?;
        Ok(Listener {
            fd,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts one client and performs the ring handshake (waiting at most a few seconds for
    /// its setup request).
    pub fn accept(&self, limits: Limits) -> Result<Session, AcceptError> {
        let sock = sys::accept(self.fd.as_fd()).map_err(AcceptError::Io)?;
        sys::set_recv_timeout(sock.as_fd(), Some(HANDSHAKE_TIMEOUT)).map_err(AcceptError::Io)?;
        let mut buf = [0u8; proto::REQUEST_LEN + 1];
        let got = sys::recv(sock.as_fd(), &mut buf, 0).map_err(AcceptError::Io)?;
        let len = got.len.min(buf.len());
        sys::set_recv_timeout(sock.as_fd(), None).map_err(AcceptError::Io)?;
        Session::accept(sock, &buf[..len], limits)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // The path may already be gone or reused; nothing useful to do about a failure.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::RingGeometry;
    use std::os::unix::net::UnixStream;

    /// Performs the daemon side of a handshake over a socket pair and returns what the client
    /// end received: the decoded reply and the descriptors.
    fn handshake() -> (Session, SetupReply, Vec<OwnedFd>) {
        let g = RingGeometry::for_frames(2048, 8).unwrap();
        let request = SetupRequest { rx: g, tx: g }.encode();
        let (daemon_end, client_end) = UnixStream::pair().unwrap();
        let session = Session::accept(daemon_end.into(), &request, Limits::default()).unwrap();
        let mut buf = [0u8; proto::REPLY_LEN];
        let got = sys::recv(client_end.as_fd(), &mut buf, 0).unwrap();
        (
            session,
            SetupReply::decode(&buf[..got.len]).unwrap(),
            got.fds,
        )
    }

    #[test]
    fn client_cannot_resize_the_ring_file_under_the_daemon() {
        let (session, reply, mut fds) = handshake();
        assert_eq!(reply.error, 0);
        assert_eq!(fds.len(), 3, "memfd and two eventfds");
        let memfd = std::fs::File::from(fds.remove(0));
        assert_eq!(memfd.metadata().unwrap().len(), reply.map_len);
        assert_eq!(reply.map_len as usize, session.mapped_bytes());
        // Shrinking would make the daemon's next access to the lost pages fault (SIGBUS).
        let err = memfd.set_len(0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
        let err = memfd.set_len(reply.map_len * 2).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
        assert_eq!(memfd.metadata().unwrap().len(), reply.map_len);
    }

    /// Random and mutated handshakes: never a panic, never a ring outside the rules, always an
    /// answer.
    #[test]
    fn mangled_handshakes_are_refused_with_an_errno() {
        let g = RingGeometry::for_frames(2048, 8).unwrap();
        let good = SetupRequest { rx: g, tx: g }.encode();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for i in 0..2000 {
            let mut msg = good.clone();
            match i % 3 {
                // Flip a few bytes anywhere (header, magic, geometry words).
                0 => {
                    for _ in 0..1 + next() % 4 {
                        let at = next() as usize % msg.len();
                        msg[at] ^= 1 << (next() % 8);
                    }
                }
                // Replace one geometry word with an extreme value.
                1 => {
                    let at = 24 + 4 * (next() as usize % 8);
                    let v = [0u32, 1, 7, 4095, 4096, u32::MAX, 1 << 31][next() as usize % 7];
                    msg[at..at + 4].copy_from_slice(&v.to_ne_bytes());
                }
                // Pure noise of any length.
                _ => msg = (0..next() % 100).map(|_| next() as u8).collect(),
            }
            let (daemon_end, client_end) = UnixStream::pair().unwrap();
            let accepted = Session::accept(daemon_end.into(), &msg, Limits::default());
            let mut buf = [0u8; proto::REPLY_LEN];
            let got = sys::recv(client_end.as_fd(), &mut buf, 0).unwrap();
            let reply = SetupReply::decode(&buf[..got.len]).unwrap();
            match accepted {
                Ok(session) => {
                    // Only a request that still satisfies every rule gets a ring.
                    let req = SetupRequest::decode(&msg).unwrap();
                    req.rx.validate().unwrap();
                    req.tx.validate().unwrap();
                    assert_eq!(reply.error, 0);
                    assert_eq!(reply.map_len as usize, session.mapped_bytes());
                    assert_eq!(got.fds.len(), 3);
                }
                Err(_) => {
                    assert_eq!(reply.error, -libc::EINVAL, "{msg:?}");
                    assert!(got.fds.is_empty());
                }
            }
        }
    }

    #[test]
    fn peer_credentials_come_from_the_kernel() {
        let (session, _, _) = handshake();
        let me = session.peer();
        assert_eq!(me.pid, std::process::id());
        // A file we create carries our uid.
        let probe = std::env::temp_dir().join(format!("fibre-ring-cred-{}", std::process::id()));
        std::fs::write(&probe, b"").unwrap();
        let meta = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&probe).unwrap());
        std::fs::remove_file(&probe).unwrap();
        assert_eq!(me.uid, meta);
    }

    fn setup_request() -> Vec<u8> {
        let g = RingGeometry::for_frames(2048, 8).unwrap();
        SetupRequest { rx: g, tx: g }.encode()
    }

    /// Accepts within `budget` over a fresh pair; returns the session (if any) and the errno
    /// the client was told.
    fn accept_in(budget: &Arc<RingBudget>) -> (Option<Session>, i32, UnixStream) {
        let (daemon_end, client_end) = UnixStream::pair().unwrap();
        let s = Session::accept_within(
            daemon_end.into(),
            &setup_request(),
            Limits::default(),
            budget,
        );
        let mut buf = [0u8; proto::REPLY_LEN];
        let got = sys::recv(client_end.as_fd(), &mut buf, 0).unwrap();
        let reply = SetupReply::decode(&buf[..got.len]).unwrap();
        (s.ok(), reply.error, client_end)
    }

    /// The budget bounds sessions and their bytes together; a refused client is told why and
    /// nothing is mapped for it; a dropped session gives its share back.
    #[test]
    fn ring_sessions_are_capped_in_number_and_bytes() {
        let one = {
            let (s, _, _) = handshake();
            s.mapped_bytes()
        };
        let budget = RingBudget::new(2, 3 * one);
        let (a, e, _ca) = accept_in(&budget);
        assert_eq!(e, 0);
        let (b, e, _cb) = accept_in(&budget);
        assert_eq!(e, 0);
        let (c, e, _cc) = accept_in(&budget);
        assert!(c.is_none());
        assert_eq!(e, -libc::ENOSPC);
        assert_eq!(budget.in_use(), (2, 2 * one));
        drop(a);
        assert_eq!(budget.in_use(), (1, one));
        let (a, e, _ca) = accept_in(&budget);
        assert_eq!(e, 0);
        drop((a, b));
        assert_eq!(budget.in_use(), (0, 0));
        let small = RingBudget::new(10, one + one / 2);
        let (_a, e, _ca) = accept_in(&small);
        assert_eq!(e, 0);
        let (b, e, _cb) = accept_in(&small);
        assert!(b.is_none());
        assert_eq!(e, -libc::ENOMEM);
    }

    /// CPU time (utime + stime, clock ticks) of this process's thread named `name`.
    fn thread_ticks(name: &str) -> u64 {
        for t in std::fs::read_dir("/proc/self/task").unwrap() {
            let dir = t.unwrap().path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if comm.trim_end() != name {
                continue;
            }
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
            // The fields after the command name, which ends at the last ')'.
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            let f: Vec<u64> = rest
                .split(' ')
                .skip(11)
                .take(2)
                .map(|x| x.parse().unwrap())
                .collect();
            return f[0] + f[1];
        }
        panic!("no thread {name}")
    }

    /// A client ringing the daemon's doorbell in a loop without giving work costs the
    /// session's thread a small fraction of a core; the session still ends when the client
    /// hangs up.
    #[test]
    fn a_doorbell_rung_for_nothing_costs_little_cpu() {
        let (daemon_end, client_end) = UnixStream::pair().unwrap();
        let mut session =
            Session::accept(daemon_end.into(), &setup_request(), Limits::default()).unwrap();
        let mut buf = [0u8; proto::REPLY_LEN];
        let got = sys::recv(client_end.as_fd(), &mut buf, 0).unwrap();
        let daemon_bell = &got.fds[1];
        let served = std::thread::Builder::new()
            .name("ring-victim".into())
            .spawn(move || session.run(&mut |_: Request, _: &mut Responder<'_>| {}))
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let before = thread_ticks("ring-victim");
        let started = std::time::Instant::now();
        let mut rings = 0u64;
        while started.elapsed() < Duration::from_secs(1) {
            sys::eventfd_signal(daemon_bell.as_fd());
            rings += 1;
        }
        let ticks = thread_ticks("ring-victim") - before;
        // Clock ticks are 1/100 s: unthrottled, the thread wakes for every ring and uses
        // about a core (100 ticks in the second).
        assert!(ticks < 10, "{ticks} ticks in 1 s for {rings} rings");
        drop(client_end);
        served.join().unwrap().unwrap();
    }
}
