//! Relaying zebra's FPM stream to more fibreds (`--fpm-relay ADDR:PORT`, repeatable): one FRR
//! feeds many data planes over FPM itself, never a protocol of fibre's own.
//!
//! The FPM thread hands every whole frame zebra sent to [`Relay::frame`], which queues it,
//! header and all, for every downstream fibred it is connected to; the downstreams see the
//! relaying fibred as their zebra. Invariants:
//! - a downstream receives whole frames only, in zebra's order, from the moment it connected;
//! - a downstream that (re)connects after zebra sent frames on its present connection
//!   missed them: the relay then closes zebra's connection, which makes zebra connect again
//!   and replay its whole state (FPM's only way to ask for it); the relaying fibred treats
//!   that as any reconnect (nothing is removed, what is not replayed is swept), and so do the
//!   downstreams already connected;
//! - a downstream that does not keep up ([`QUEUE_BYTES`] queued) or fails is disconnected and
//!   tried again every [`RETRY`], so it costs the relay bounded memory and never stalls zebra.

use fibre_netlink::fpm::FpmHeader;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

/// Bytes queued for one downstream before it is given up on (and later reconnected).
pub const QUEUE_BYTES: usize = 64 << 20;
/// How often a missing downstream is tried.
pub const RETRY: Duration = Duration::from_secs(1);
/// How long one connection attempt may take the FPM thread.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

struct Target {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    /// Frames queued; the first `sent` bytes are written.
    out: Vec<u8>,
    sent: usize,
    retry_at: Instant,
}

/// The downstream fibreds.
pub struct Relay {
    targets: Vec<Target>,
    /// zebra's present connection has sent frames: a downstream connecting now missed them.
    relayed: bool,
}

impl Relay {
    pub fn new(addrs: &[SocketAddr]) -> Relay {
        let now = Instant::now();
        Relay {
            targets: addrs
                .iter()
                .map(|&addr| Target {
                    addr,
                    stream: None,
                    out: Vec::new(),
                    sent: 0,
                    retry_at: now,
                })
                .collect(),
            relayed: false,
        }
    }

    /// zebra connected: what it sends from now on reaches every downstream connected.
    pub fn upstream_connected(&mut self) {
        self.relayed = false;
    }

    /// Queues one of zebra's frames for every connected downstream.
    pub fn frame(&mut self, header: FpmHeader, payload: &[u8]) {
        self.relayed = true;
        for t in &mut self.targets {
            if t.stream.is_none() {
                continue;
            }
            let queued = t.out.len() - t.sent;
            if queued + payload.len() + fibre_netlink::fpm::HEADER_LEN > QUEUE_BYTES {
                t.drop_connection("it fell too far behind");
                continue;
            }
            header.emit(&mut t.out);
            t.out.extend_from_slice(payload);
        }
    }

    /// Writes what the downstreams take, and drops those that closed or failed.
    pub fn flush(&mut self) {
        for t in &mut self.targets {
            if let Err(e) = t.flush() {
                t.drop_connection(&e.to_string());
            }
        }
    }

    /// Connects the downstreams whose retry is due; whether one connected after zebra's
    /// present connection sent frames (and so needs zebra to replay them).
    pub fn connect_due(&mut self, now: Instant) -> bool {
        let mut connected = false;
        for t in &mut self.targets {
            if t.stream.is_some() || t.retry_at > now {
                continue;
            }
            t.retry_at = now + RETRY;
            match TcpStream::connect_timeout(&t.addr, CONNECT_TIMEOUT)
                .and_then(|s| s.set_nonblocking(true).and(s.set_nodelay(true)).map(|()| s))
            {
                Ok(s) => {
                    tracing::info!(downstream = %t.addr, "fpm relay connected");
                    t.stream = Some(s);
                    t.out.clear();
                    t.sent = 0;
                    connected = true;
                }
                Err(e) => {
                    tracing::debug!(downstream = %t.addr, error = %e, "fpm relay cannot connect")
                }
            }
        }
        connected && self.relayed
    }

    /// How long until the next connection attempt is due, if one is.
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        self.targets
            .iter()
            .filter(|t| t.stream.is_none())
            .map(|t| t.retry_at.saturating_duration_since(now))
            .min()
    }

    /// The connected downstreams' sockets, and whether each has bytes to write.
    pub fn sockets(&self) -> impl Iterator<Item = (BorrowedFd<'_>, bool)> {
        self.targets
            .iter()
            .filter_map(|t| t.stream.as_ref().map(|s| (s.as_fd(), t.sent < t.out.len())))
    }
}

impl Target {
    fn flush(&mut self) -> io::Result<()> {
        let Some(s) = &mut self.stream else {
            return Ok(());
        };
        // A downstream sends nothing back but offload feedback, which the relay does not
        // pass on; reading tells a closed peer from an idle one.
        let mut sink = [0u8; 4096];
        loop {
            match s.read(&mut sink) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        while self.sent < self.out.len() {
            match s.write(&self.out[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
        Ok(())
    }

    fn drop_connection(&mut self, why: &str) {
        if self.stream.take().is_some() {
            tracing::warn!(downstream = %self.addr, %why, "fpm relay dropped a downstream");
        }
        self.out.clear();
        self.sent = 0;
        self.retry_at = Instant::now() + RETRY;
    }
}
