//! The FPM server (`fibred --fpm ADDR:PORT`): FRR's zebra (`dplane_fpm_nl`) connects and
//! streams routes and next-hop groups, which fibred applies as its own.
//!
//! ```text
//!  zebra --TCP--> fpm thread --Job::Fpm(frames)--> writer (Session + Engine)
//!        <--TCP-- fpm thread <--offload feedback--
//! ```
//!
//! - One thread serves the listening socket and one connection at a time: zebra is the
//!   client and connects again after any error, so a new connection replaces the old one
//!   (whose routes stay: see [`session`]).
//! - The thread reads whatever has arrived, cuts it into whole frames (fibre-netlink's
//!   `fpm::FrameDecoder`) and hands them to the writer together; the writer applies them in
//!   one batch and publishes once, so no frame is ever split across a publication (an
//!   update's RTM_DELROUTE and RTM_NEWROUTE are seen together). The writer's queue is
//!   bounded: while the writer is busy the thread waits and TCP holds zebra back. zebra
//!   gives up on a peer that accepts nothing for 15 s, so a table load is cut into hand-offs
//!   of at most [`HANDOFF_BYTES`].
//! - A header that breaks the framing (wrong version or type, impossible length) loses the
//!   stream: the connection is closed and zebra reconnects and replays. A well-framed frame
//!   with bad content is dropped alone (counted and logged).
//! - Offload feedback, when asked for, comes back from the writer through a bounded buffer
//!   ([`FEEDBACK_BYTES`]) and leaves as FPM frames whenever the socket takes them; what does
//!   not fit is dropped and counted, never waited for.

pub mod relay;
pub mod session;
#[cfg(test)]
mod tests;

use crate::sys::{self, EventFd};
use fibre_netlink::fpm::{self, FrameDecoder};
use fibre_netlink::NetlinkMessage;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use relay::Relay;
pub use session::{Counters, HostNames, Names, Session, Settings};

/// Bytes of frames handed to the writer at once: large enough that a table load pays for
/// a publication every few thousand routes, small enough that the writer answers other
/// clients between hand-offs.
pub const HANDOFF_BYTES: usize = 1 << 20;
/// Bytes read from the socket at once.
const READ_BYTES: usize = 256 << 10;
/// Offload feedback waiting for the socket; more is dropped (and counted).
pub const FEEDBACK_BYTES: usize = 8 << 20;

/// Where the server listens, how it applies the feed, and the fibreds it relays it to.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub settings: Settings,
    pub relay: Vec<SocketAddr>,
}

/// What the FPM thread tells the writer. `conn` numbers connections, so that the writer
/// can ignore what a replaced connection still had in flight.
pub enum Event {
    Connected {
        conn: u64,
        feedback: Feedback,
    },
    /// Whole frames: their netlink payloads back to back, each ending at its offset in
    /// `ends`.
    Frames {
        conn: u64,
        bytes: Vec<u8>,
        ends: Vec<usize>,
    },
    Closed {
        conn: u64,
    },
}

/// The way back to zebra: offload feedback the FPM thread sends when the socket has room.
#[derive(Clone)]
pub struct Feedback {
    shared: Arc<FeedbackQueue>,
}

struct FeedbackQueue {
    bytes: Mutex<Vec<u8>>,
    wake: EventFd,
}

impl Feedback {
    fn new() -> io::Result<Feedback> {
        Ok(Feedback {
            shared: Arc::new(FeedbackQueue {
                bytes: Mutex::new(Vec::new()),
                wake: EventFd::new()?,
            }),
        })
    }

    /// Queues netlink messages (back to back, as [`Session::take_feedback`] gives them);
    /// how many were dropped for lack of room.
    pub fn send(&self, messages: &[u8]) -> u64 {
        if messages.is_empty() {
            return 0;
        }
        let mut q = self.shared.bytes.lock().unwrap_or_else(|e| e.into_inner());
        let parsed: Vec<NetlinkMessage<'_>> = fibre_netlink::message::Messages::new(messages)
            .flatten()
            .map(|(_, m)| m)
            .collect();
        let mut framed = Vec::with_capacity(messages.len() + fpm::HEADER_LEN);
        if fpm::emit_frames(&parsed, &mut framed).is_err()
            || q.len() + framed.len() > FEEDBACK_BYTES
        {
            return parsed.len() as u64;
        }
        q.extend_from_slice(&framed);
        drop(q);
        self.shared.wake.signal();
        0
    }
}

/// Binds the listening socket (before the daemon reports that it started, so that an
/// address in use refuses the start).
pub fn bind(config: &Config) -> io::Result<TcpListener> {
    let l = TcpListener::bind(config.listen)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// The FPM thread: serves `listener` until `shutdown` is signalled; `send` hands events to
/// the writer and fails once the writer is gone.
pub fn serve(
    listener: TcpListener,
    relay: &mut Relay,
    shutdown: &EventFd,
    mut send: impl FnMut(Event) -> bool,
) -> io::Result<()> {
    let mut conn: Option<Connection> = None;
    let mut next = 0u64;
    let mut buf = vec![0u8; READ_BYTES];
    loop {
        relay.flush();
        // A downstream that (re)connected needs zebra's whole state: zebra replays it after
        // it connects again.
        if relay.connect_due(std::time::Instant::now()) {
            if let Some(c) = conn.take() {
                tracing::info!(
                    conn = c.id,
                    "fpm: a relay downstream connected, asking zebra for a replay"
                );
                if !send(Event::Closed { conn: c.id }) {
                    return Ok(());
                }
            }
        }
        let mut fds = vec![
            sys::pollfd(shutdown.fd(), libc::POLLIN),
            sys::pollfd(listener.as_fd(), libc::POLLIN),
        ];
        if let Some(c) = &conn {
            let out = if c.pending_out() { libc::POLLOUT } else { 0 };
            fds.push(sys::pollfd(c.stream.as_fd(), libc::POLLIN | out));
            fds.push(sys::pollfd(c.feedback.shared.wake.fd(), libc::POLLIN));
        }
        for (fd, pending) in relay.sockets() {
            let out = if pending { libc::POLLOUT } else { 0 };
            fds.push(sys::pollfd(fd, libc::POLLIN | out));
        }
        sys::poll(&mut fds, relay.wait(std::time::Instant::now()))?;
        if fds[0].revents != 0 {
            if let Some(c) = conn.take() {
                send(Event::Closed { conn: c.id });
            }
            return Ok(());
        }
        if fds[1].revents != 0 {
            match listener.accept() {
                Ok((stream, peer)) => {
                    if let Some(old) = conn.take() {
                        tracing::info!(conn = old.id, "fpm connection replaced");
                        if !send(Event::Closed { conn: old.id }) {
                            return Ok(());
                        }
                    }
                    next += 1;
                    let c = match Connection::new(next, stream) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(%peer, error = %e, "fpm connection refused");
                            continue;
                        }
                    };
                    relay.upstream_connected();
                    tracing::info!(conn = next, %peer, "fpm connected");
                    if !send(Event::Connected {
                        conn: next,
                        feedback: c.feedback.clone(),
                    }) {
                        return Ok(());
                    }
                    conn = Some(c);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => tracing::warn!(error = %e, "fpm accept failed"),
            }
            continue;
        }
        let Some(c) = &mut conn else { continue };
        let mut close = None;
        if fds[3].revents != 0 {
            c.feedback.shared.wake.drain();
        }
        if fds[2].revents & libc::POLLOUT != 0 || fds[3].revents != 0 {
            if let Err(e) = c.write_feedback() {
                close = Some(e.to_string());
            }
        }
        if close.is_none() && fds[2].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            match c.read(&mut buf, relay, &mut send) {
                Ok(Progress::More) => {}
                Ok(Progress::WriterGone) => return Ok(()),
                Ok(Progress::End) => close = Some("closed by peer".into()),
                Err(e) => close = Some(e),
            }
        }
        if let Some(why) = close {
            let id = c.id;
            tracing::info!(conn = id, %why, "fpm disconnected");
            conn = None;
            if !send(Event::Closed { conn: id }) {
                return Ok(());
            }
        }
    }
}

enum Progress {
    More,
    End,
    WriterGone,
}

struct Connection {
    id: u64,
    stream: TcpStream,
    decoder: FrameDecoder,
    feedback: Feedback,
    /// Feedback taken from the queue and not yet written.
    out: Vec<u8>,
    /// Frames not yet handed to the writer.
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Connection {
    fn new(id: u64, stream: TcpStream) -> io::Result<Connection> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            id,
            stream,
            decoder: FrameDecoder::new(),
            feedback: Feedback::new()?,
            out: Vec::new(),
            bytes: Vec::new(),
            ends: Vec::new(),
        })
    }

    fn pending_out(&self) -> bool {
        !self.out.is_empty()
    }

    /// Writes what feedback the socket takes.
    fn write_feedback(&mut self) -> io::Result<()> {
        {
            let mut q = self
                .feedback
                .shared
                .bytes
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.out.append(&mut q);
        }
        while !self.out.is_empty() {
            match self.stream.write(&self.out) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads until the socket has nothing more, handing whole frames to the writer every
    /// [`HANDOFF_BYTES`] and at the end.
    fn read(
        &mut self,
        buf: &mut [u8],
        relay: &mut Relay,
        send: &mut impl FnMut(Event) -> bool,
    ) -> Result<Progress, String> {
        loop {
            let n = match self.stream.read(buf) {
                Ok(0) => {
                    if !self.hand_off(send) {
                        return Ok(Progress::WriterGone);
                    }
                    if let Err(e) = self.decoder.finish() {
                        return Err(e.to_string());
                    }
                    return Ok(Progress::End);
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.hand_off(send);
                    return Err(e.to_string());
                }
            };
            let mut input = &buf[..n];
            while !input.is_empty() {
                match self.decoder.decode(&mut input) {
                    Ok(Some(frame)) => {
                        relay.frame(frame.header, frame.payload);
                        self.bytes.extend_from_slice(frame.payload);
                        self.ends.push(self.bytes.len());
                    }
                    Ok(None) => {}
                    Err(e) if e.is_fatal() => {
                        self.hand_off(send);
                        return Err(e.to_string());
                    }
                    Err(e) => tracing::warn!(why = %e, "fpm frame dropped"),
                }
            }
            if self.bytes.len() >= HANDOFF_BYTES && !self.hand_off(send) {
                return Ok(Progress::WriterGone);
            }
        }
        if !self.hand_off(send) {
            return Ok(Progress::WriterGone);
        }
        Ok(Progress::More)
    }

    /// Hands the frames read so far to the writer; false when it is gone.
    fn hand_off(&mut self, send: &mut impl FnMut(Event) -> bool) -> bool {
        if self.ends.is_empty() {
            return true;
        }
        send(Event::Frames {
            conn: self.id,
            bytes: std::mem::take(&mut self.bytes),
            ends: std::mem::take(&mut self.ends),
        })
    }
}

/// The writer's side: the session and the connection feeding it.
pub struct Writer {
    session: Session,
    names: Box<dyn Names + Send>,
    conn: Option<(u64, Feedback)>,
}

impl Writer {
    /// The writer's side for `engine`'s state, adopting what an earlier run's feed left in
    /// it ([`Session::adopt`]).
    pub fn new(settings: Settings, names: Box<dyn Names + Send>, engine: &crate::Engine) -> Writer {
        let mut session = Session::new(settings);
        session.adopt(engine.fib());
        Writer {
            session,
            names,
            conn: None,
        }
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Whether zebra is connected now.
    pub fn connected(&self) -> bool {
        self.conn.is_some()
    }

    /// When [`Writer::sweep`] is due.
    pub fn due(&self) -> Option<Instant> {
        self.session.sweep_due()
    }

    /// Applies one event inside the caller's engine batch.
    pub fn event(
        &mut self,
        engine: &mut crate::Engine,
        event: Event,
        listening: u64,
    ) -> crate::engine::Applied {
        match event {
            Event::Connected { conn, feedback } => {
                self.session.connected(Instant::now());
                self.conn = Some((conn, feedback));
                crate::engine::Applied::default()
            }
            Event::Closed { conn } => {
                if self.conn.as_ref().is_some_and(|(c, _)| *c == conn) {
                    self.conn = None;
                    self.session.disconnected();
                    tracing::info!(counters = %self.session.counters(), "fpm feed");
                }
                crate::engine::Applied::default()
            }
            Event::Frames { conn, bytes, ends } => {
                if self.conn.as_ref().is_none_or(|(c, _)| *c != conn) {
                    return crate::engine::Applied::default();
                }
                let mut start = 0;
                let frames = ends.iter().map(|&end| {
                    let f = &bytes[start..end];
                    start = end;
                    f
                });
                let applied = self.session.frames(
                    engine,
                    self.names.as_mut(),
                    frames,
                    Instant::now(),
                    listening,
                );
                let fb = self.session.take_feedback();
                if let Some((_, feedback)) = &self.conn {
                    let dropped = feedback.send(&fb);
                    self.session.feedback_dropped(dropped);
                }
                applied
            }
        }
    }

    /// Runs the sweep if it is due (inside the caller's engine batch).
    pub fn sweep(&mut self, engine: &mut crate::Engine, listening: u64) -> crate::engine::Applied {
        if self.due().is_none_or(|d| d > Instant::now()) {
            return crate::engine::Applied::default();
        }
        let applied = self.session.sweep(engine, listening);
        let c = self.session.counters();
        tracing::info!(
            swept_routes = c.swept_routes,
            swept_groups = c.swept_groups,
            "fpm sweep"
        );
        applied
    }
}
