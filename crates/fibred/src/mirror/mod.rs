//! Mirror mode (`fibred --mirror [NETNS]`): fibred follows a Linux network namespace's links,
//! addresses, next-hop objects, rules, routes and neighbours over a real rtnetlink socket,
//! so that any daemon that programs the kernel (BIRD, zebra, an operator's `ip`) feeds fibre.
//!
//! ```text
//!  kernel --notifications--> mirror thread --Job::Mirror(Sync | Changes)--> writer (Mirror)
//!         <--dumps---------
//! ```
//!
//! The thread (in the namespace followed: `setns` on itself before it opens its sockets)
//! follows VPP linux-cp's recipe: the notification socket is opened and joined first (with a
//! large receive buffer, [`Config::rcvbuf`]), then every table is dumped on a second socket in
//! dependency order (links, addresses, next hops, rules, routes, neighbours), so the
//! notifications queued meanwhile apply on top of the dump. A dump a change interrupted
//! (NLM_F_DUMP_INTR) is taken again. A notification socket that overran (ENOBUFS: the kernel
//! dropped notifications) leads to a resync: a new notification socket replaces it (what the
//! old one still holds is older than the coming dump, and what followed it may be lost), then
//! everything is dumped again and the writer makes fibre equal to the dump (a mark and
//! sweep), without ever emptying a table, so forwarding has no gap. Every dump is checked by
//! another once the notifications queued while it was taken have been applied ([`Settle`]).
//! Notifications are handed over in batches of what has arrived.
//!
//! What the kernel changes without a notification (IPv4 routes flushed when their link goes
//! down, routes of deleted next-hop objects) fibre derives itself, with the kernel's
//! semantics; a resync counts whatever it had to correct (`Counters::corrected`).

pub mod session;
#[cfg(test)]
mod tests;

use crate::sys::{self, EventFd};
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::NetlinkHeader;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

pub use session::{Counters, Mirror};

/// Receive buffer of the notification socket unless configured: VPP linux-cp's default, room
/// for about a million route notifications.
pub const RCVBUF: usize = 128 << 20;
/// Bytes of notifications handed to the writer at once.
const HANDOFF_BYTES: usize = 1 << 20;
/// Receive buffer of one read: larger than any rtnetlink datagram.
const READ_BYTES: usize = 64 << 10;
/// Tries at a consistent dump before the last one is taken as it is (and the next overrun or
/// resync corrects what it missed).
const DUMP_TRIES: usize = 5;

/// RTNLGRP_* groups followed: links, neighbours, IPv4 and IPv6 addresses, routes and rules,
/// next-hop objects.
const GROUPS: [u32; 9] = [1, 3, 5, 7, 8, 9, 11, 19, 32];

/// What to follow.
#[derive(Debug, Clone)]
pub struct Config {
    /// The namespace (a name under /var/run/netns or a path); `None`: fibred's own.
    pub netns: Option<PathBuf>,
    pub rcvbuf: usize,
}

/// What the mirror thread tells the writer.
pub enum Event {
    /// A complete dump: make fibre equal to it. `resync`: after an overrun (else the first).
    Sync { messages: Vec<u8>, resync: bool },
    /// Notifications, in order.
    Changes { messages: Vec<u8> },
}

/// The path of namespace `netns`: a name under /var/run/netns, or a path as given.
fn netns_path(netns: &std::path::Path) -> PathBuf {
    if netns.components().count() == 1 {
        PathBuf::from("/var/run/netns").join(netns)
    } else {
        netns.to_path_buf()
    }
}

/// Starts the mirror thread: it enters the namespace followed (a thread that enters a
/// namespace stays there; fibred's other threads must not), opens its sockets, and returns
/// here whether that worked, so that a namespace that cannot be followed refuses the start.
/// It then follows the kernel until `shutdown`; `send` hands events to the writer and fails
/// once the writer is gone.
pub fn spawn(
    config: Config,
    shutdown: std::sync::Arc<EventFd>,
    send: impl FnMut(Event) -> bool + Send + 'static,
) -> io::Result<()> {
    let (opened, result) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("fibred-mirror".into())
        .spawn(move || {
            let (notes, dumps) = match open(&config) {
                Ok(s) => {
                    let _ = opened.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = opened.send(Err(e));
                    return;
                }
            };
            if let Err(e) = follow(&config, notes, dumps, &shutdown, send) {
                tracing::error!(error = %e, "mirror failed");
            }
        })?;
    result
        .recv()
        .map_err(|_| io::Error::other("mirror: the thread ended before it opened its sockets"))?
}

/// Opens the sockets in the namespace followed.
fn open(config: &Config) -> io::Result<(OwnedFd, OwnedFd)> {
    if let Some(ns) = &config.netns {
        sys::enter_netns(&netns_path(ns))?;
    }
    let dumps = sys::rtnetlink_socket(&[], 1 << 20)?;
    Ok((notifications(config)?, dumps))
}

fn notifications(config: &Config) -> io::Result<OwnedFd> {
    let notes = sys::rtnetlink_socket(&GROUPS, config.rcvbuf)?;
    sys::set_nonblocking(notes.as_fd(), true)?;
    Ok(notes)
}

/// Dumps, then follows notifications until `shutdown`.
fn follow(
    config: &Config,
    mut notes: OwnedFd,
    dumps: OwnedFd,
    shutdown: &EventFd,
    mut send: impl FnMut(Event) -> bool,
) -> io::Result<()> {
    let mut buf = vec![0u8; READ_BYTES];
    if !send(Event::Sync {
        messages: dump_all(&dumps, &mut buf)?,
        resync: false,
    }) {
        return Ok(());
    }
    // The check a dump needs once the notifications queued while it was taken are applied:
    // due when they stop coming (see `Settle`).
    let mut settle = Some(Settle::new());
    loop {
        let mut fds = [
            sys::pollfd(shutdown.fd(), libc::POLLIN),
            sys::pollfd(notes.as_fd(), libc::POLLIN),
        ];
        let wait = settle.as_ref().map(Settle::wait);
        sys::poll(&mut fds, wait)?;
        if fds[0].revents != 0 {
            return Ok(());
        }
        let mut messages = Vec::new();
        let mut overrun = false;
        loop {
            match sys::recv(notes.as_fd(), &mut buf, libc::MSG_DONTWAIT) {
                Ok(r) => {
                    messages.extend_from_slice(&buf[..r.len.min(buf.len())]);
                    if messages.len() >= HANDOFF_BYTES {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    overrun = true;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if !messages.is_empty() {
            if let Some(s) = &mut settle {
                s.heard();
            }
            if !send(Event::Changes { messages }) {
                return Ok(());
            }
        }
        let due = settle.as_ref().is_some_and(Settle::due);
        if overrun || due {
            if overrun {
                tracing::warn!("mirror overrun: notifications were lost, resyncing");
                // What is still queued is older than the dump about to be taken, and what
                // came after it may be lost: a new socket, before the dump, holds exactly
                // the changes made since.
                notes = notifications(config)?;
            }
            let messages = dump_all(&dumps, &mut buf)?;
            if !send(Event::Sync {
                messages,
                resync: true,
            }) {
                return Ok(());
            }
            // A check follows an overrun's dump, and none follows a check's.
            settle = overrun.then(Settle::new);
        }
    }
}

/// Notifications queued while a dump was taken describe changes it may already show; applied
/// on top of it, they replay a past state, and a change the kernel makes silently (next-hop
/// objects flushed when a link loses its carrier) is then missing in fibre. So a dump is
/// checked by another once they have been applied: when none has come for [`SETTLE_QUIET`],
/// or after [`SETTLE_MAX`] whatever comes.
struct Settle {
    since: std::time::Instant,
    last: std::time::Instant,
}

/// See [`Settle`].
const SETTLE_QUIET: std::time::Duration = std::time::Duration::from_millis(100);
const SETTLE_MAX: std::time::Duration = std::time::Duration::from_secs(2);

impl Settle {
    fn new() -> Settle {
        let now = std::time::Instant::now();
        Settle {
            since: now,
            last: now,
        }
    }

    fn heard(&mut self) {
        self.last = std::time::Instant::now();
    }

    fn deadline(&self) -> std::time::Instant {
        (self.last + SETTLE_QUIET).min(self.since + SETTLE_MAX)
    }

    fn due(&self) -> bool {
        std::time::Instant::now() >= self.deadline()
    }

    fn wait(&self) -> std::time::Duration {
        self.deadline()
            .saturating_duration_since(std::time::Instant::now())
    }
}

/// Dumps every table, in dependency order; again (up to [`DUMP_TRIES`]) when a dump was
/// interrupted by a change.
fn dump_all(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Vec<u8>> {
    const AF_UNSPEC: u8 = 0;
    // (request type, header length of the request body).
    const TABLES: [(u16, usize); 6] = [
        (mt::RTM_GETLINK, 16),
        (mt::RTM_GETADDR, 8),
        (mt::RTM_GETNEXTHOP, 8),
        (mt::RTM_GETRULE, 12),
        (mt::RTM_GETROUTE, 12),
        (mt::RTM_GETNEIGH, 12),
    ];
    let mut out = Vec::new();
    for attempt in 1..=DUMP_TRIES {
        out.clear();
        let mut interrupted = false;
        for (seq, (t, body)) in TABLES.iter().enumerate() {
            let mut req = Vec::with_capacity(NetlinkHeader::LEN + body);
            NetlinkHeader {
                length: (NetlinkHeader::LEN + body) as u32,
                message_type: *t,
                flags: nf::NLM_F_REQUEST | nf::NLM_F_DUMP,
                sequence: seq as u32 + 1,
                port: 0,
            }
            .emit(&mut req);
            req.push(AF_UNSPEC);
            req.resize(NetlinkHeader::LEN + body, 0);
            sys::send(fd.as_fd(), &req, &[], 0)?;
            interrupted |= read_dump(fd, buf, &mut out)?;
        }
        if !interrupted {
            return Ok(out);
        }
        tracing::debug!(%attempt, "mirror dump interrupted, again");
    }
    Ok(out)
}

/// Reads one dump's answers up to NLMSG_DONE into `out`; whether any carried
/// NLM_F_DUMP_INTR.
fn read_dump(fd: &OwnedFd, buf: &mut [u8], out: &mut Vec<u8>) -> io::Result<bool> {
    let mut interrupted = false;
    loop {
        let n = sys::recv(fd.as_fd(), buf, 0)?.len.min(buf.len());
        let mut off = 0;
        while let Ok(h) = NetlinkHeader::parse_bytes(&buf[off..n], off) {
            let len = h.length as usize;
            if len < NetlinkHeader::LEN || off + len > n {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "netlink framing",
                ));
            }
            interrupted |= h.flags & nf::NLM_F_DUMP_INTR != 0;
            match h.message_type {
                mt::NLMSG_DONE => return Ok(interrupted),
                mt::NLMSG_ERROR => {
                    let code = buf
                        .get(off + NetlinkHeader::LEN..off + NetlinkHeader::LEN + 4)
                        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                    // A table the kernel lacks (no next-hop objects) dumps as an error.
                    if code != 0 {
                        return Ok(interrupted);
                    }
                }
                _ => {
                    out.extend_from_slice(&buf[off..off + len]);
                    out.resize(out.len().next_multiple_of(4), 0);
                }
            }
            off += len.next_multiple_of(4);
            if off >= n {
                break;
            }
        }
    }
}
