//! The client library: connect to a daemon's Unix socket, negotiate the rings, send requests
//! through the TX ring and read replies from the RX ring.
//!
//! Replies can be read in place ([`Client::recv_with`], [`Client::transact`]): the closure gets
//! a slice of the RX frame, which stays the client's until the closure returns, then the frame
//! goes back to the daemon. The client trusts the daemon it connected to; it still checks the
//! mapping's size and seals, the geometry, and every length against its frame, so a confused
//! daemon cannot make it read outside the mapping.
//!
//! Waiting: when there is nothing to read (or no TX room) the client spins for its optional
//! spin budget, then sleeps on its eventfd until the daemon rings it; the socket is polled for
//! hang-up so a vanished daemon ends the wait with [`ClientError::Disconnected`].
//!
//! A `Client` is single-threaded (one reader, one writer per ring), like a netlink socket.

use crate::frame::{FrameStatus, Sender};
use crate::geometry::{GeometryError, RingGeometry};
use crate::proto::{self, DecodeError, SetupReply, SetupRequest};
use crate::ring::{release_kept, Consumer, Producer, Ring, Slot};
use crate::shm::{Doorbells, Layout, Mapping, Side};
use crate::sys;
use std::fmt;
use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long the client waits for the daemon's answer to its setup request.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the client asks the daemon for.
#[derive(Clone, Copy, Debug)]
pub struct ClientConfig {
    pub rx: RingGeometry,
    pub tx: RingGeometry,
    /// Times to re-check a ring before sleeping. 0 (the default) never spins; a small budget
    /// trades CPU for latency when both sides have a core each.
    pub spin: u32,
}

impl ClientConfig {
    /// `rx_frame`/`tx_frame` bytes per frame (header included), `rx_frames`/`tx_frames` frames.
    pub fn new(
        rx_frame: u32,
        rx_frames: u32,
        tx_frame: u32,
        tx_frames: u32,
    ) -> Result<ClientConfig, GeometryError> {
        Ok(ClientConfig {
            rx: RingGeometry::for_frames(rx_frame, rx_frames)?,
            tx: RingGeometry::for_frames(tx_frame, tx_frames)?,
            spin: 0,
        })
    }
}

impl Default for ClientConfig {
    /// 16 KiB RX frames (a full-size netlink dump datagram) x 128 = 2 MiB; 4 KiB TX frames
    /// (requests are small) x 256 = 1 MiB.
    #[allow(
        clippy::expect_used,
        reason = "constant geometry, checked by the tests"
    )]
    fn default() -> Self {
        ClientConfig::new(16 << 10, 128, 4 << 10, 256).expect("default geometry is valid")
    }
}

#[derive(Debug)]
pub enum ClientError {
    Io(io::Error),
    /// The daemon refused the ring; the errno it gave.
    Refused(i32),
    /// The daemon's answer was not a well-formed handshake.
    Handshake(DecodeError),
    /// The daemon announced an invalid geometry.
    Geometry(GeometryError),
    /// The daemon closed the connection.
    Disconnected,
    /// The daemon broke the ring protocol (a frame longer than its capacity, a COPY frame with
    /// no socket message).
    Protocol(&'static str),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "ring client: {e}"),
            ClientError::Refused(errno) => {
                write!(
                    f,
                    "daemon refused the ring: {}",
                    io::Error::from_raw_os_error(*errno)
                )
            }
            ClientError::Handshake(e) => write!(f, "malformed ring setup reply ({e:?})"),
            ClientError::Geometry(e) => write!(f, "daemon announced a bad ring: {e}"),
            ClientError::Disconnected => f.write_str("daemon closed the connection"),
            ClientError::Protocol(what) => write!(f, "ring protocol error: {what}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::EPIPE) | Some(libc::ECONNRESET) | Some(libc::ENOTCONN) => {
                ClientError::Disconnected
            }
            _ => ClientError::Io(e),
        }
    }
}

/// One received message, valid while the closure it was given to runs.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    pub bytes: &'a [u8],
    pub sender: Sender,
    /// True when the message came over the socket (too large for a frame).
    pub copied: bool,
}

/// A reply frame the client keeps past the next reads (SKIP); the daemon passes over it until
/// it is dropped.
pub struct KeptFrame {
    ring: Ring,
    bells: Arc<Doorbells>,
    index: u32,
    len: u32,
    sender: Sender,
}

impl KeptFrame {
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the frame is SKIP, owned by this client until drop; the daemon passes over
        // SKIP frames and never writes them; len was bounds-checked by peek.
        unsafe { self.ring.payload(self.index, self.len) }
    }

    pub fn sender(&self) -> Sender {
        self.sender
    }
}

impl Drop for KeptFrame {
    fn drop(&mut self) {
        release_kept(&self.ring, self.index);
        self.bells.ring_peer();
    }
}

/// What a wait is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Reply,
    Room,
    Either,
}

/// A connection to a daemon over the ring transport.
pub struct Client {
    sock: OwnedFd,
    rx: Consumer,
    tx: Producer,
    bells: Arc<Doorbells>,
    spin: u32,
    copy_buf: Vec<u8>,
    /// A COPY request found the socket's buffer full; wait for POLLOUT.
    blocked_on_socket: bool,
}

impl Client {
    /// Connects to the daemon listening at `path` and sets up the rings.
    pub fn connect(path: &Path, config: ClientConfig) -> Result<Client, ClientError> {
        config.rx.validate().map_err(ClientError::Geometry)?;
        config.tx.validate().map_err(ClientError::Geometry)?;
        let sock = sys::seqpacket_connect(path)?;
        let request = SetupRequest {
            rx: config.rx,
            tx: config.tx,
        };
        sys::send(sock.as_fd(), &request.encode(), &[], 0)?;
        let mut buf = [0u8; proto::REPLY_LEN + 1];
        // A daemon that does not speak the ring protocol may never answer.
        sys::set_recv_timeout(sock.as_fd(), Some(HANDSHAKE_TIMEOUT))?;
        let got = sys::recv(sock.as_fd(), &mut buf, 0)?;
        sys::set_recv_timeout(sock.as_fd(), None)?;
        if got.len == 0 {
            return Err(ClientError::Disconnected);
        }
        let reply =
            SetupReply::decode(&buf[..got.len.min(buf.len())]).map_err(ClientError::Handshake)?;
        if reply.error != 0 {
            return Err(ClientError::Refused(-reply.error));
        }
        reply.rx.validate().map_err(ClientError::Geometry)?;
        reply.tx.validate().map_err(ClientError::Geometry)?;
        let layout = Layout {
            rx: reply.rx,
            tx: reply.tx,
        };
        if reply.map_len != layout.total_len() as u64 {
            return Err(ClientError::Protocol(
                "mapping length does not match the geometry",
            ));
        }
        let mut fds = got.fds.into_iter();
        let (Some(memfd), Some(daemon_efd), Some(client_efd), None) =
            (fds.next(), fds.next(), fds.next(), fds.next())
        else {
            return Err(ClientError::Protocol(
                "setup reply must carry exactly three descriptors",
            ));
        };
        let map = Mapping::open(memfd.as_fd(), &layout)?;
        drop(memfd);
        let rx = Ring::new(map.clone(), layout.rx_offset(), layout.rx);
        let tx = Ring::new(map.clone(), layout.tx_offset(), layout.tx);
        Ok(Client {
            sock,
            rx: Consumer::new(rx),
            tx: Producer::new(tx),
            bells: Arc::new(Doorbells::new(map, Side::Client, daemon_efd, client_efd)),
            spin: config.spin,
            copy_buf: Vec::new(),
            blocked_on_socket: false,
        })
    }

    /// The TX ring and the doorbells, for the hostile-client test that writes frames by hand.
    #[cfg(test)]
    pub(crate) fn tx_parts(&self) -> (&Ring, &Doorbells) {
        (self.tx.ring(), &self.bells)
    }

    /// The RX ring, for the hostile-client test that rewrites the daemon's frames.
    #[cfg(test)]
    pub(crate) fn rx_ring(&self) -> &Ring {
        self.rx.ring()
    }

    /// The control socket, for the hostile-client test.
    #[cfg(test)]
    pub(crate) fn socket(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// Sets the spin budget (see [`ClientConfig::spin`]).
    pub fn set_spin(&mut self, spin: u32) {
        self.spin = spin;
    }

    /// Payload bytes of one TX frame; larger requests travel over the socket.
    pub fn tx_frame_capacity(&self) -> usize {
        self.tx.capacity()
    }

    /// Payload bytes of one RX frame.
    pub fn rx_frame_capacity(&self) -> usize {
        self.rx.ring().capacity()
    }

    /// Queues one request if the TX ring has room (`Ok(false)` if not) and wakes the daemon.
    pub fn try_send(&mut self, msg: &[u8]) -> Result<bool, ClientError> {
        let sent = self.publish(msg)?;
        if sent {
            self.bells.flush();
        }
        Ok(sent)
    }

    /// Puts one request into the TX ring (or on the socket behind a COPY frame) if there is
    /// room, noting it for a batched wake-up of the daemon.
    fn publish(&mut self, msg: &[u8]) -> Result<bool, ClientError> {
        let Some(frame) = self.tx.reserve() else {
            return Ok(false);
        };
        if msg.len() <= self.tx.capacity() {
            self.tx.write(&frame, msg);
            self.tx.publish(
                frame,
                msg.len() as u32,
                Sender::default(),
                FrameStatus::Valid,
            );
        } else {
            // The socket message must be queued before the COPY frame that announces it.
            match sys::send(self.sock.as_fd(), msg, &[], libc::MSG_DONTWAIT) {
                Ok(_) => {
                    let len = u32::try_from(msg.len()).unwrap_or(u32::MAX);
                    self.tx
                        .publish(frame, len, Sender::default(), FrameStatus::Copy);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.tx.unreserve(frame);
                    self.blocked_on_socket = true;
                    return Ok(false);
                }
                Err(e) => {
                    self.tx.unreserve(frame);
                    return Err(e.into());
                }
            }
        }
        self.bells.note();
        Ok(true)
    }

    /// Sends one request, waiting for TX room. Does not read replies while it waits: a caller
    /// that sends many requests whose replies could fill the RX ring should use
    /// [`Client::transact`].
    pub fn send(&mut self, msg: &[u8]) -> Result<(), ClientError> {
        while !self.try_send(msg)? {
            self.wait(Want::Room)?;
        }
        Ok(())
    }

    /// Reads one reply if there is one, giving it to `f` in place.
    pub fn try_recv_with<R>(
        &mut self,
        f: impl FnOnce(Message<'_>) -> R,
    ) -> Result<Option<R>, ClientError> {
        let r = self.take_reply(f);
        // Control returns to the caller, who may not come back soon: tell the daemon now
        // about the frame just freed, or a dump paused for room could wait indefinitely.
        self.bells.flush();
        r
    }

    /// One reply, if there is one, with its frame freed and noted for a batched wake-up.
    fn take_reply<R>(
        &mut self,
        f: impl FnOnce(Message<'_>) -> R,
    ) -> Result<Option<R>, ClientError> {
        match self.rx.peek() {
            Slot::Empty => Ok(None),
            Slot::Message { index, len, sender } => {
                // SAFETY: the frame is VALID and ours until released below; the daemon only
                // writes frames it owns (UNUSED/RESERVED); len was bounds-checked by peek.
                let bytes = unsafe { self.rx.ring().payload(index, len) };
                let r = f(Message {
                    bytes,
                    sender,
                    copied: false,
                });
                self.rx.release(index);
                self.bells.note();
                Ok(Some(r))
            }
            Slot::Copy { index, .. } => {
                let got = self.recv_copy();
                self.rx.release(index);
                self.bells.note();
                got?;
                let sender = Sender::DAEMON;
                Ok(Some(f(Message {
                    bytes: &self.copy_buf,
                    sender,
                    copied: true,
                })))
            }
            Slot::Malformed { index } => {
                self.rx.release(index);
                Err(ClientError::Protocol(
                    "reply frame longer than its capacity",
                ))
            }
        }
    }

    fn recv_copy(&mut self) -> Result<(), ClientError> {
        let sock = self.sock.as_fd();
        // The daemon queued the datagram before publishing the COPY frame, so it is there.
        let size = match sys::recv(sock, &mut [], libc::MSG_PEEK | libc::MSG_DONTWAIT) {
            Ok(r) if r.len > 0 => r.len,
            Ok(_) => return Err(ClientError::Disconnected),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(ClientError::Protocol("COPY frame without a socket message"))
            }
            Err(e) => return Err(e.into()),
        };
        self.copy_buf.clear();
        self.copy_buf.resize(size, 0);
        let got = sys::recv(sock, &mut self.copy_buf, libc::MSG_DONTWAIT)?;
        self.copy_buf.truncate(got.len.min(size));
        Ok(())
    }

    /// Reads one reply, waiting for it, and gives it to `f` in place.
    #[allow(
        clippy::expect_used,
        reason = "try_recv_with calls `f` only when it returns Some, which ends the loop"
    )]
    pub fn recv_with<R>(&mut self, f: impl FnOnce(Message<'_>) -> R) -> Result<R, ClientError> {
        let mut f = Some(f);
        loop {
            if let Some(r) = self.try_recv_with(|m| (f.take().expect("called once"))(m))? {
                return Ok(r);
            }
            self.wait(Want::Reply)?;
        }
    }

    /// Reads one reply into a new vector.
    pub fn recv(&mut self) -> Result<Vec<u8>, ClientError> {
        self.recv_with(|m| m.bytes.to_vec())
    }

    /// Reads one reply and keeps its frame (SKIP) instead of copying it; the daemon keeps
    /// writing other frames around it. A client that keeps every frame of the ring pauses the
    /// daemon until it drops one. Messages that came over the socket are not in a frame
    /// and are returned as `Err(bytes)`.
    pub fn recv_kept(&mut self) -> Result<Result<KeptFrame, Vec<u8>>, ClientError> {
        loop {
            match self.rx.peek() {
                Slot::Message { index, len, sender } => {
                    self.rx.keep(index);
                    return Ok(Ok(KeptFrame {
                        ring: self.rx.ring().clone(),
                        bells: self.bells.clone(),
                        index,
                        len,
                        sender,
                    }));
                }
                Slot::Empty => self.wait(Want::Reply)?,
                Slot::Copy { .. } | Slot::Malformed { .. } => {
                    return self
                        .try_recv_with(|m| Err(m.bytes.to_vec()))?
                        .ok_or(ClientError::Disconnected);
                }
            }
        }
    }

    /// Replies as owned vectors, forever; stop iterating at the reply that ends the exchange
    /// (for netlink, NLMSG_DONE or the ACK).
    pub fn replies(&mut self) -> impl Iterator<Item = Result<Vec<u8>, ClientError>> + '_ {
        std::iter::from_fn(move || Some(self.recv()))
    }

    /// Sends every request and reads replies as they come, so neither ring can fill up and stop
    /// both sides. `on_reply` sees each reply in place and returns `Break` at the last one it
    /// wants; `transact` returns once all requests are sent and `on_reply` has broken.
    pub fn transact<'m>(
        &mut self,
        requests: impl IntoIterator<Item = &'m [u8]>,
        mut on_reply: impl FnMut(Message<'_>) -> ControlFlow<()>,
    ) -> Result<(), ClientError> {
        let mut requests = requests.into_iter().peekable();
        let mut done = false;
        loop {
            let mut progressed = false;
            while let Some(&msg) = requests.peek() {
                if !self.publish(msg)? {
                    break;
                }
                requests.next();
                progressed = true;
            }
            while !done {
                match self.take_reply(&mut on_reply)? {
                    Some(flow) => {
                        progressed = true;
                        done = flow.is_break();
                    }
                    None => break,
                }
            }
            let sending = requests.peek().is_some();
            if done && !sending {
                self.bells.flush();
                return Ok(());
            }
            if !progressed {
                self.wait(match (sending, done) {
                    (true, false) => Want::Either,
                    (true, true) => Want::Room,
                    _ => Want::Reply,
                })?;
            }
        }
    }

    fn ready(&mut self, want: Want) -> bool {
        let room = !self.blocked_on_socket && self.tx.has_room();
        match want {
            Want::Reply => self.rx.peek() != Slot::Empty,
            Want::Room => room,
            Want::Either => room || self.rx.peek() != Slot::Empty,
        }
    }

    /// Waits until `want` may be satisfied: spin budget first, then sleep on the doorbell.
    /// The daemon is told of every frame published or freed before this side may sleep.
    fn wait(&mut self, want: Want) -> Result<(), ClientError> {
        self.bells.flush();
        for _ in 0..self.spin {
            if self.ready(want) {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        self.bells.arm();
        if self.ready(want) {
            self.bells.disarm();
            return Ok(());
        }
        let mut sock_events = libc::POLLRDHUP;
        if self.blocked_on_socket && want != Want::Reply {
            sock_events |= libc::POLLOUT;
        }
        let mut fds = [
            sys::pollfd(self.bells.wait_fd(), libc::POLLIN),
            sys::pollfd(self.sock.as_fd(), sock_events),
        ];
        sys::poll(&mut fds, None)?;
        self.bells.disarm();
        if fds[1].revents & libc::POLLOUT != 0 {
            self.blocked_on_socket = false;
        }
        if fds[1].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLRDHUP) != 0
            && !self.ready(want)
        {
            return Err(ClientError::Disconnected);
        }
        Ok(())
    }
}
