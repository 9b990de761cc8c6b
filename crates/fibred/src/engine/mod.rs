//! The request engine: rtnetlink datagrams in, answers and notifications out.
//!
//! [`Engine`] owns the [`Fib`] (as a [`FibWriter`]: the copy it changes and the copy readers
//! see) and is driven by exactly one thread (the daemon's writer); it has no I/O, so the fuzzer
//! and the tests drive it directly. Reads are also answered without it, from the published
//! copy, by [`handle_reads`] on any thread. One call to [`Engine::handle`] takes
//! one datagram as a client sent it and does what the kernel's `netlink_rcv_skb` does with it:
//! every message in order, an NLMSG_ERROR for each failure (with extended-ACK text and the
//! offending attribute's offset), an ACK when NLM_F_ACK asks for one, answers to GET requests,
//! and dumps as [`DumpStream`]s that the connection encodes lazily, as the client reads.
//!
//! Invariants:
//! - A request that fails leaves the state unchanged (the FIB's entry points are atomic), and a
//!   datagram never stops halfway except where the kernel stops: at a header whose length is
//!   impossible.
//! - Notifications are computed only for groups somebody listens to (`listening`), so a bulk
//!   load with no monitor pays nothing for them; route changes read only the prefix they name.
//! - Dumps of links, addresses, rules and next-hop objects are snapshots taken at request
//!   time. Route dumps (which can be millions of routes) read the published state a piece at
//!   a time from a cursor, as the kernel's do: each piece is consistent, and a route dump
//!   started after a change shows it.
//! - Changes become visible to readers at [`Engine::publish`] (the daemon publishes after
//!   each batch, before answering it); a route dump requested after changes in the same batch
//!   publishes them first.
//! - A port link (`LinkKind::Port`) is made only once its host interface is open: the
//!   engine asks its [`PortBinder`] (the daemon's `ports`, which does the I/O) before it
//!   creates the link, and a refusal answers the request with nothing made.
//!
//! This module is the dispatch: framing, permissions, membership, the read-ahead path and
//! the answers (errors and ACKs). The jobs it hands work to are [`dump`] (GET replies and
//! dumps), [`notify`] (changes and their notifications) and [`check`] (the robustness
//! property the fuzzer runs); the state file is [`crate::state`].

mod check;
mod dump;
mod notify;
#[cfg(test)]
mod tests;

pub use check::check_datagram;
pub use dump::DumpStream;

use dump::{is_read, read};
use notify::RouteChange;

use crate::view::{Change, FibReader, FibWriter};
use fibre_fib::types::*;
use fibre_fib::{Fib, Settings};
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::{NetlinkHeader, NetlinkMessage};
use fibre_proto::convert::{self, Request, RequestError};
use fibre_proto::membership::{self, FIBRE_MEMBERSHIP};
use fibre_proto::seg6_hmac::{Seg6Hmac, FIBRE_SEG6_HMAC, HMAC_DUMP, HMAC_KEY, HMAC_SET};
use fibre_proto::sysctl::{Sysctl, FIBRE_SYSCTL, SYSCTL_GET, SYSCTL_SET, SYSCTL_VALUE};
use std::sync::Arc;

/// What one client's connection tells the engine about itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientCtx {
    /// The port id stamped on answers (`nlmsg_pid`).
    pub port: u32,
    /// Groups joined, bit `g - 1` for RTNLGRP `g`.
    pub groups: u64,
    /// The peer may only read (it lacks CAP_NET_ADMIN; the server decides, see
    /// `server::Access`): any other rtnetlink request gets EPERM before it is parsed, as the
    /// kernel's `rtnetlink_rcv_msg` refuses it. The daemon's own contexts leave it false.
    pub read_only: bool,
}

/// Highest rtnetlink message type (the kernel's RTM_MAX); types above it are no request the
/// permission check knows.
const RTM_MAX: u16 = 123;

/// Whether a read-only peer is refused `msg` (of type `t`, from NLMSG_MIN_TYPE on): the
/// kernel lets anyone send the GET kind (type & 3 == 2 counting from RTM_BASE) and checks
/// CAP_NET_ADMIN for the others, after skipping messages with an empty body.
fn needs_admin(msg: &[u8], t: u16) -> bool {
    t <= RTM_MAX && (t - 0x10) & 3 != 2 && msg.len() > NetlinkHeader::LEN
}

/// One answer to a client, in order.
pub enum Reply {
    /// Complete messages (ACKs, errors, GET answers), each padded to 4 bytes, back to back:
    /// consecutive answers share one buffer, so an ACK costs no allocation.
    Messages(Vec<u8>),
    /// A dump, encoded as the client reads it.
    Dump(DumpStream),
}

/// The length of the longest run of whole messages at the start of `bytes` (a
/// [`Reply::Messages`] buffer) that fits in `limit` bytes and may share a datagram, or of the
/// first message if even that does not fit. ACKs and errors share datagrams (a table load is
/// acknowledged a datagram at a time, not a route at a time); any other message goes alone
/// (see [`alone`]).
pub fn fit(bytes: &[u8], limit: usize) -> usize {
    let mut n = 0;
    // Every message of the buffer is at least a header long, as the engine encoded it.
    while let Some(Ok(h)) = bytes.get(n..).map(|b| NetlinkHeader::parse_bytes(b, n)) {
        let len = (h.length as usize)
            .next_multiple_of(4)
            .max(NetlinkHeader::LEN);
        let end = (n + len).min(bytes.len());
        if n > 0 && (end > limit || alone(&bytes[n..])) {
            break;
        }
        n = end;
        if alone(bytes) {
            break;
        }
    }
    n
}

/// True when the first message of `bytes` travels in a datagram of its own: an answer to a
/// GET, or the NLMSG_DONE of a dump that failed. The kernel unicasts each in an skb of its
/// own, and clients (pyroute2) take every message of the datagram that holds the answer as
/// the answer.
pub fn alone(bytes: &[u8]) -> bool {
    NetlinkHeader::parse_bytes(bytes, 0).is_ok_and(|h| h.message_type != mt::NLMSG_ERROR)
}

/// The messages of a [`Reply::Messages`] buffer, padding included.
pub fn split_messages(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (m, r) = rest.split_at(fit(rest, 0));
        rest = r;
        Some(m)
    })
}

/// What a change of the daemon's own (an FPM frame, a mirrored message, a sweep) did, for the
/// writer to announce and save.
#[derive(Default)]
pub struct Applied {
    pub notes: Vec<Note>,
    pub changed: bool,
}

/// A notification for the members of `group`.
#[derive(Debug, Clone)]
pub struct Note {
    pub group: u32,
    pub bytes: Vec<u8>,
}

/// Requests answered, by message type and result, for the metrics: the rtnetlink types
/// (from NLMSG_MIN_TYPE to [`RTM_MAX`]; control messages and fibre's membership request are
/// not counted).
#[derive(Clone, Copy)]
pub struct Tally([[u64; 2]; TALLY_TYPES]);

/// Types a [`Tally`] counts: 0x10 ..= RTM_MAX.
const TALLY_TYPES: usize = RTM_MAX as usize - 0x10 + 1;

impl Default for Tally {
    fn default() -> Self {
        Tally([[0; 2]; TALLY_TYPES])
    }
}

impl Tally {
    fn count(&mut self, t: u16, ok: bool) {
        if let Some(c) = usize::from(t)
            .checked_sub(0x10)
            .and_then(|i| self.0.get_mut(i))
        {
            c[usize::from(!ok)] += 1;
        }
    }

    /// (message type, succeeded, failed) for every type with a count.
    pub fn counts(&self) -> impl Iterator<Item = (u16, u64, u64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, c)| c[0] + c[1] > 0)
            .map(|(i, c)| (i as u16 + 0x10, c[0], c[1]))
    }
}

/// Answers and notifications of one datagram.
#[derive(Default)]
pub struct Outcome {
    pub replies: Vec<Reply>,
    pub notes: Vec<Note>,
    /// The requests answered.
    pub tally: Tally,
    /// The state changed (for the state file).
    pub changed: bool,
    /// Bytes the first buffer of messages is made for (see [`Outcome::for_requests`]).
    first_capacity: usize,
}

impl Outcome {
    /// An outcome for answering `bytes` of requests. A table load is answered with an ACK
    /// per request, each smaller than its request: one buffer of that size takes every ACK of
    /// the batch without growing (a growing buffer copies and faults in every ACK again).
    pub fn for_requests(bytes: usize) -> Outcome {
        Outcome {
            first_capacity: bytes,
            ..Outcome::default()
        }
    }

    /// The buffer the next complete message goes into.
    fn messages(&mut self) -> &mut Vec<u8> {
        if !matches!(self.replies.last(), Some(Reply::Messages(_))) {
            let capacity = std::mem::take(&mut self.first_capacity);
            self.replies
                .push(Reply::Messages(Vec::with_capacity(capacity)));
        }
        match self.replies.last_mut() {
            Some(Reply::Messages(b)) => b,
            _ => unreachable!("pushed above"),
        }
    }

    /// Appends one message, padded.
    fn message(&mut self, m: &NetlinkMessage<'_>) {
        let b = self.messages();
        m.emit(b);
        pad4(b);
    }
}

fn pad4(out: &mut Vec<u8>) {
    out.resize(out.len().next_multiple_of(4), 0);
}

/// Where notifications are stamped from: the request's sequence number and sender port, as
/// the kernel's `nl_info` carries them.
#[derive(Clone, Copy)]
struct Origin {
    seq: u32,
    port: u32,
}

/// An error as a log line names it: its extended-ACK text, else its errno's.
pub fn errno_text(e: &RtError) -> String {
    match &e.extack {
        Some(m) if !m.is_empty() => m.clone(),
        _ => e.errno.strerror().to_owned(),
    }
}

/// Counters of the links something counts on (fibred's port links), which link dumps show
/// (IFLA_STATS64). Read by any thread.
pub trait LinkCounters: Send + Sync {
    fn stats(&self, ifindex: u32) -> Option<LinkStats>;
    /// The counters of link `ifindex`'s punt path, if it has one.
    fn punt(&self, ifindex: u32) -> Option<PuntStats>;
}

/// Gives `links` their counters.
fn with_counters(mut links: Vec<Link>, counters: Option<&dyn LinkCounters>) -> Vec<Link> {
    if let Some(c) = counters {
        for l in &mut links {
            l.stats = c.stats(l.ifindex);
            l.punt = c.punt(l.ifindex);
        }
    }
    links
}

/// Whoever binds port links to host interfaces (the daemon's `ports`): the engine asks it
/// before it creates a port link and tells it when one goes.
pub trait PortBinder: Send {
    /// Opens the host interface of a port link about to be created. A refusal (an errno as
    /// the kernel would give it: EPERM, ENODEV, ...) answers the request and no link is made.
    /// The port opened waits for [`PortBinder::commit`]. Returns the link-layer address the
    /// link takes when its request names none (the host interface's, as a router's port
    /// takes its NIC's).
    fn open(&mut self, spec: &PortSpec) -> Result<Option<Vec<u8>>, RtError>;
    /// The port last opened belongs to link `ifindex` now, or (`None`: the link could not be
    /// made) is closed.
    fn commit(&mut self, ifindex: Option<u32>);
    /// Link `ifindex` is gone; its port, if it had one, is closed.
    fn removed(&mut self, ifindex: u32);
    /// `fib` was published.
    fn published(&mut self, fib: &Fib);
}

/// The FIB and the request semantics around it. See the module documentation.
pub struct Engine {
    view: FibWriter,
    /// Reads the published state for the route dumps this engine starts.
    reader: FibReader,
    /// Inside [`Engine::begin`] .. [`Engine::publish`].
    batching: bool,
    /// Opens the ports of port links; without one a port link is a link like any other.
    ports: Option<Box<dyn PortBinder>>,
    /// What link dumps show as the links' counters.
    link_counters: Option<Arc<dyn LinkCounters>>,
    /// The settings written, each (target and key) once, in the order of its last write:
    /// what the state file replays (see [`Engine::sysctl`]).
    settings: Vec<Sysctl>,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new(Settings::default())
    }
}

/// Message types a reader thread answers from the published state ([`read_only`]).
const READ_TYPES: [u16; 6] = [
    mt::RTM_GETLINK,
    mt::RTM_GETADDR,
    mt::RTM_GETROUTE,
    mt::RTM_GETRULE,
    mt::RTM_GETNEXTHOP,
    mt::RTM_GETNEIGH,
];

/// True when every message of `datagram` is a GET request (or dump) that [`handle_reads`]
/// answers from the published state, and the datagram is framed regularly.
pub fn read_only(datagram: &[u8]) -> bool {
    let mut off = 0;
    while off < datagram.len() {
        let Ok(h) = NetlinkHeader::parse_bytes(&datagram[off..], off) else {
            return false;
        };
        let len = h.length as usize;
        if len < NetlinkHeader::LEN
            || off + len > datagram.len()
            || h.flags & nf::NLM_F_REQUEST == 0
            || !READ_TYPES.contains(&h.message_type)
        {
            return false;
        }
        off += len.next_multiple_of(4);
    }
    off > 0
}

/// Answers a datagram for which [`read_only`] holds from the published state, on the
/// calling thread: what [`Engine::handle`] would answer after the last publish.
/// Links get their `counters`.
pub fn handle_reads(
    reader: &FibReader,
    datagram: &[u8],
    client: &ClientCtx,
    counters: Option<&dyn LinkCounters>,
    out: &mut Outcome,
) {
    each_message(datagram, |msg| {
        process(msg, None, client.port, out, |req, origin, out| {
            read(&reader.read(), reader, counters, req, origin, out)
        })
    });
}

/// A datagram of requests whose route changes were read ahead, off the writer thread: a
/// client thread reads the next batch while the writer applies the previous one.
/// [`Engine::handle_prepared`] answers it exactly as [`Engine::handle`] answers its bytes:
/// reading a route change is a function of the message's bytes alone
/// (`convert::route_request`), so reading it earlier, elsewhere, changes nothing.
pub struct Prepared {
    bytes: Box<[u8]>,
    /// What `convert::route_request` makes of each message, in order, for the messages
    /// [`Engine::handle`] hands to it (requests of types from NLMSG_MIN_TYPE on); `None` for
    /// the others.
    routes: Vec<Option<Result<Request, RequestError>>>,
}

impl Prepared {
    /// Reads the route changes of `bytes`.
    pub fn new(bytes: Box<[u8]>) -> Prepared {
        let mut routes: Vec<Option<Result<Request, RequestError>>> = Vec::new();
        let mut n = 0;
        let mut any = false;
        each_message(&bytes, |msg| {
            if n == routes.len() {
                // Sized from the first message, in the same walk: a table load's messages
                // are alike, and a list that grows copies every request in it again. Made
                // of `None`s up front, as pushing each one would copy a whole request's
                // bytes.
                let more = match n {
                    0 => bytes.len().div_ceil(msg.bytes.len().next_multiple_of(4)),
                    _ => n,
                };
                routes.resize_with(n + more, || None);
            }
            let h = msg.header;
            let request = h.message_type >= 0x10 && h.flags & nf::NLM_F_REQUEST != 0;
            if let Some(slot) = routes.get_mut(n).filter(|_| request) {
                // Read in place: see `convert::read_route_request`.
                convert::read_route_request(msg.bytes, slot);
                any |= slot.is_some();
            }
            n += 1;
        });
        // A datagram with no route change needs no list.
        if any {
            routes.truncate(n);
        } else {
            routes = Vec::new();
        }
        Prepared { bytes, routes }
    }

    /// The datagram's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// One message of a datagram: its bytes (exactly `header.length` of them, a header at
/// least) and its header, read once through the codec's checked view. Everything past
/// [`each_message`] reads the header from here, never from the bytes.
#[derive(Clone, Copy)]
struct Message<'a> {
    bytes: &'a [u8],
    header: NetlinkHeader,
}

/// Calls `f` with every message of a datagram, as the kernel's `netlink_rcv_skb` walks it.
fn each_message(datagram: &[u8], mut f: impl FnMut(Message<'_>)) {
    let mut off = 0;
    while let Some(rest) = datagram.get(off..) {
        // A rest shorter than a header ends the datagram, as the kernel ignores it.
        let Ok(header) = NetlinkHeader::parse_bytes(rest, off) else {
            break;
        };
        let len = header.length as usize;
        // The kernel stops reading a datagram at an impossible length, silently.
        let Some(bytes) = rest.get(..len).filter(|_| len >= NetlinkHeader::LEN) else {
            break;
        };
        f(Message { bytes, header });
        off += (len + 3) & !3;
        if off >= datagram.len() {
            break;
        }
    }
}

/// Parses and converts one request message (unless `read` holds what
/// `convert::route_request` made of it already), hands it to `apply`, and answers: the error,
/// or the ACK when NLM_F_ACK asks for one.
fn process(
    msg: Message<'_>,
    read: Option<Result<Request, RequestError>>,
    port: u32,
    out: &mut Outcome,
    apply: impl FnOnce(Request, Origin, &mut Outcome) -> Result<(), RequestError>,
) {
    let flags = msg.header.flags;
    let want_ack = flags & nf::NLM_F_ACK != 0;
    let origin = Origin {
        seq: msg.header.sequence,
        port,
    };
    // Route changes (table loads) are read straight from the bytes.
    let request = read
        .or_else(|| convert::route_request(msg.bytes))
        .unwrap_or_else(|| convert::request_bytes(msg.bytes));
    let result = request.and_then(|req| apply(req, origin, out));
    // A dump is acknowledged by its NLMSG_DONE alone, NLM_F_ACK or not, and one that fails
    // says so in its NLMSG_DONE, as the kernel's netlink_dump_done does.
    if flags & nf::NLM_F_DUMP == nf::NLM_F_DUMP && READ_TYPES.contains(&msg.header.message_type) {
        out.tally.count(msg.header.message_type, result.is_ok());
        if let Err(e) = result {
            out.message(&convert::done_error(origin.seq, port, &e));
        }
        return;
    }
    answer(msg, result, want_ack, port, out);
}

fn answer(
    msg: Message<'_>,
    result: Result<(), RequestError>,
    want_ack: bool,
    port: u32,
    out: &mut Outcome,
) {
    out.tally.count(msg.header.message_type, result.is_ok());
    match result {
        Err(e) => out.message(&convert::ack(msg.bytes, Err(&e), false, port)),
        Ok(()) if want_ack => emit_ack(&msg.header, port, out.messages()),
        Ok(()) => {}
    }
}

/// Length of an ACK: a header, the error code and the echoed request header.
const ACK_LEN: usize = 2 * NetlinkHeader::LEN + 4;

/// Appends the ACK of the request whose header is `request`, byte for byte what
/// `convert::ack(msg, Ok(()), ..)` encodes, without building the message: a table load
/// acknowledges every route.
fn emit_ack(request: &NetlinkHeader, port: u32, out: &mut Vec<u8>) {
    const H: usize = NetlinkHeader::LEN;
    let mut ack = [0u8; ACK_LEN];
    ack[..H].copy_from_slice(
        &NetlinkHeader {
            length: ACK_LEN as u32,
            message_type: mt::NLMSG_ERROR,
            flags: nf::NLM_F_CAPPED,
            // The request's sequence number; the port of the client's socket.
            sequence: request.sequence,
            port,
        }
        .to_bytes(),
    );
    // Error 0 (the zeros at H..H + 4), then the request's header echoed (NLM_F_CAPPED:
    // without its payload). One append: a table load acknowledges every route.
    ack[H + 4..].copy_from_slice(&request.to_bytes());
    out.extend_from_slice(&ack);
}

impl Engine {
    /// A fresh state with `settings`, published.
    pub fn new(settings: Settings) -> Engine {
        let mut view = FibWriter::new(settings);
        // Both copies record neighbour changes, for notifications (replayed into the other
        // copy like any change).
        let _ = view.apply(Change::RecordNeighEvents(true));
        view.publish();
        let reader = view.reader();
        Engine {
            view,
            reader,
            batching: false,
            ports: None,
            link_counters: None,
            settings: Vec::new(),
        }
    }

    /// Has link dumps show `counters`.
    pub fn set_link_counters(&mut self, counters: Arc<dyn LinkCounters>) {
        self.link_counters = Some(counters);
    }

    /// Applies a request of the daemon's own, already converted (the configuration's port
    /// links), as a client's with nobody listening.
    pub fn own_request(&mut self, req: Request) -> Result<(), RtError> {
        let origin = Origin { seq: 0, port: 0 };
        self.begin();
        let r = self.apply(req, origin, 0, &mut Outcome::default());
        self.publish();
        r.map_err(|e| e.error)
    }

    /// Has `binder` open the host interfaces of the port links made from now on.
    pub fn bind_ports(&mut self, binder: Box<dyn PortBinder>) {
        self.ports = Some(binder);
    }

    /// Applies what the data plane's workers learnt of neighbours at `now` (the workers'
    /// clock): neighbour changes are announced as the kernel's are; returns what the
    /// neighbour states ask of the data plane.
    pub fn neigh_events(
        &mut self,
        events: Vec<fibre_dataplane::pipeline::Event>,
        now: u64,
        listening: u64,
        out: &mut Outcome,
    ) -> Vec<fibre_fib::NudAction> {
        let origin = Origin { seq: 0, port: 0 };
        let _ = self.neigh_change(Change::NeighEvents(events, now), origin, listening, out);
        self.view.take_actions()
    }

    /// Runs the neighbour timers due at `now` (the workers' clock), as
    /// [`Engine::neigh_events`].
    pub fn neigh_timers(
        &mut self,
        now: u64,
        listening: u64,
        out: &mut Outcome,
    ) -> Vec<fibre_fib::NudAction> {
        let origin = Origin { seq: 0, port: 0 };
        let _ = self.neigh_change(Change::NeighTimers(now), origin, listening, out);
        self.view.take_actions()
    }

    /// Gives link `ifindex` the carrier and MTU of its port's host interface (`None`: left
    /// as it is), announced as a link change; the kernel's links follow their cables so.
    pub fn follow(
        &mut self,
        ifindex: u32,
        carrier: Option<bool>,
        mtu: Option<u32>,
        listening: u64,
        out: &mut Outcome,
    ) {
        let link = Link {
            ifindex,
            carrier,
            mtu,
            ..Link::default()
        };
        let origin = Origin { seq: 0, port: 0 };
        // An MTU fibre does not take (below 68 or above its maximum) leaves the link's own.
        let _ = self.object_change(
            Request::NewLink(link, ReqFlags::NONE),
            origin,
            listening,
            out,
        );
    }

    /// The newest state, published or not.
    pub fn fib(&self) -> &Fib {
        self.view.latest()
    }

    /// A reader of the published state, for a thread that answers reads ([`handle_reads`]).
    pub fn reader(&self) -> FibReader {
        self.view.reader()
    }

    /// Starts a batch of requests: the FIB's compiled lookup structures are brought up to
    /// date once, at [`Engine::publish`], instead of per change.
    pub fn begin(&mut self) {
        self.view.with_standby(Fib::begin_batch);
        self.batching = true;
    }

    /// Ends the batch (if any) and makes every change so far visible to readers.
    pub fn publish(&mut self) {
        if self.batching {
            self.view.with_standby(Fib::end_batch);
            self.batching = false;
        }
        self.view.publish();
        if let Some(p) = &mut self.ports {
            p.published(self.view.latest());
        }
    }

    /// Brings the unpublished copy up to date (see [`crate::view`]); for idle moments.
    pub fn catch_up(&mut self) {
        self.view.catch_up();
    }

    /// The read-ahead lists the last catch-up finished with, for a client thread to drop
    /// ([`crate::view::FibWriter::take_spent`]).
    pub fn take_spent(&mut self) -> Vec<crate::view::ReadAhead> {
        self.view.take_spent()
    }

    /// How long until the next route or next-hop exception expires (zero when one is due
    /// now); `None` when nothing expires. The writer's GC timer.
    pub fn next_expiry(&self) -> Option<std::time::Duration> {
        let fib = self.fib();
        let at = fib.next_expiry()?;
        Some(std::time::Duration::from_millis(
            at.saturating_sub(fib.clock().now_ms()),
        ))
    }

    /// Handles one datagram from a client; answers and notifications are appended to `out`.
    /// `listening` is the union of every client's groups.
    pub fn handle(
        &mut self,
        datagram: &[u8],
        client: &mut ClientCtx,
        listening: u64,
        out: &mut Outcome,
    ) {
        each_message(datagram, |msg| self.one(msg, None, client, listening, out));
    }

    /// Applies a request of the daemon's own (a translated FPM or mirrored message, one
    /// message with NLM_F_ACK): its notifications go to `notes`, and the answer is the
    /// request's errno (0: done) with its extended-ACK text.
    pub fn apply_own(
        &mut self,
        request: &[u8],
        listening: u64,
        notes: &mut Vec<Note>,
    ) -> (i32, Option<String>) {
        let mut out = Outcome::default();
        self.handle(request, &mut ClientCtx::default(), listening, &mut out);
        notes.append(&mut out.notes);
        for r in &out.replies {
            let Reply::Messages(bytes) = r else { continue };
            for (_, m) in fibre_netlink::message::Messages::new(bytes).flatten() {
                if let fibre_netlink::Payload::Error(e) = &m.payload {
                    if e.error != 0 {
                        return (e.error, e.message().map(str::to_owned));
                    }
                }
            }
        }
        (0, None)
    }

    /// [`Engine::handle`] of a datagram whose route changes were read ahead. The list of
    /// what was read goes to the log whole and each route change is applied where it lies
    /// (see [`crate::view`]); everything else takes the general path.
    pub fn handle_prepared(
        &mut self,
        datagram: Prepared,
        client: &mut ClientCtx,
        listening: u64,
        out: &mut Outcome,
    ) {
        let Prepared { bytes, routes } = datagram;
        if routes.is_empty() || client.read_only {
            return self.handle(&bytes, client, listening, out);
        }
        let list = self.view.keep(routes);
        let mut at = 0;
        each_message(&bytes, |msg| {
            // `Prepared::new` read the same messages in the same order.
            let i = at;
            at += 1;
            if self.view.read_ahead(list, i).is_none() {
                let read = self.view.take_read_ahead(list, i);
                return self.one(msg, read, client, listening, out);
            }
            // What `one` and `process` do with a route change, without moving it.
            let want_ack = msg.header.flags & nf::NLM_F_ACK != 0;
            let origin = Origin {
                seq: msg.header.sequence,
                port: client.port,
            };
            let r = self.route_change(RouteChange::ReadAhead(list, i), origin, listening, out);
            answer(
                msg,
                r.map_err(RequestError::from),
                want_ack,
                client.port,
                out,
            );
        });
    }

    fn one(
        &mut self,
        msg: Message<'_>,
        read: Option<Result<Request, RequestError>>,
        client: &mut ClientCtx,
        listening: u64,
        out: &mut Outcome,
    ) {
        let port = client.port;
        let NetlinkHeader {
            message_type: t,
            flags,
            ..
        } = msg.header;
        let want_ack = flags & nf::NLM_F_ACK != 0;
        if t == FIBRE_MEMBERSHIP {
            let r = membership::apply(msg.bytes, &mut client.groups);
            answer(msg, r.map_err(RequestError::from), want_ack, port, out);
            return;
        }
        if t == FIBRE_SYSCTL {
            let r = self.sysctl(msg, client.read_only, port, out);
            answer(msg, r.map_err(RequestError::from), want_ack, port, out);
            return;
        }
        if t == FIBRE_SEG6_HMAC {
            let r = self.seg6_hmac(msg, client.read_only, port, out);
            answer(msg, r.map_err(RequestError::from), want_ack, port, out);
            return;
        }
        // Control messages and messages that are not requests are only acknowledged.
        if t < 0x10 || flags & nf::NLM_F_REQUEST == 0 {
            answer(msg, Ok(()), want_ack, port, out);
            return;
        }
        if client.read_only && needs_admin(msg.bytes, t) {
            let e = RequestError::from(RtError::new(Errno::EPERM));
            answer(msg, Err(e), want_ack, port, out);
            return;
        }
        process(msg, read, port, out, |req, origin, out| {
            self.apply(req, origin, listening, out)
        });
    }

    /// A settings message (`fibre_proto::sysctl`): a write applied as any change and kept
    /// for the state file, a read answered from the writer's copy. Replaying the kept writes
    /// in their order gives the settings they made: a write depends only on the writes
    /// before it, and one superseded by a later write of the same target and key changes
    /// nothing the later one does not.
    fn sysctl(
        &mut self,
        msg: Message<'_>,
        read_only: bool,
        port: u32,
        out: &mut Outcome,
    ) -> Result<(), RtError> {
        let s = Sysctl::parse(msg.bytes)?;
        match s.op {
            SYSCTL_SET if read_only => return Err(RtError::new(Errno::EPERM)),
            SYSCTL_SET => {
                self.view.apply(Change::SetConf(s.target, s.key, s.value))?;
                self.settings
                    .retain(|w| (w.target, w.key) != (s.target, s.key));
                self.settings.push(s);
                out.changed = true;
            }
            SYSCTL_GET => {
                let value = self.fib().conf(s.target, s.key)?;
                let answer = Sysctl {
                    op: SYSCTL_VALUE,
                    value,
                    ..s
                };
                let b = out.messages();
                b.extend_from_slice(&answer.message(msg.header.sequence, port, 0));
                pad4(b);
            }
            _ => return Err(RtError::msg(Errno::EINVAL, "Not a settings request")),
        }
        Ok(())
    }

    /// An HMAC key message (`fibre_proto::seg6_hmac`): a set applied as any change (the
    /// state file keeps the keys the FIB holds), a dump answered with every key. Both are for
    /// administrators only, as the kernel's SEG6 generic netlink commands are
    /// (GENL_ADMIN_PERM): a dump carries the secrets.
    fn seg6_hmac(
        &mut self,
        msg: Message<'_>,
        read_only: bool,
        port: u32,
        out: &mut Outcome,
    ) -> Result<(), RtError> {
        let s = Seg6Hmac::parse(msg.bytes)?;
        if read_only {
            return Err(RtError::new(Errno::EPERM));
        }
        match s.op {
            HMAC_SET => {
                let k = s.key;
                self.view
                    .apply(Change::SetSeg6Hmac(k.id, k.algo, k.secret))?;
                out.changed = true;
            }
            HMAC_DUMP => {
                let b = out.messages();
                for key in self.fib().seg6_hmac().iter() {
                    let answer = Seg6Hmac {
                        op: HMAC_KEY,
                        key: key.clone(),
                    };
                    b.extend_from_slice(&answer.message(msg.header.sequence, port, 0));
                    pad4(b);
                }
            }
            _ => return Err(RtError::msg(Errno::EINVAL, "Not an HMAC key request")),
        }
        Ok(())
    }

    /// The settings written that still apply (their link, for a link's, still exists), in
    /// the order to replay them.
    pub fn settings(&self) -> impl Iterator<Item = &Sysctl> + '_ {
        let fib = self.fib();
        self.settings
            .iter()
            .filter(move |s| fib.conf(s.target, s.key).is_ok())
    }

    fn apply(
        &mut self,
        req: Request,
        origin: Origin,
        listening: u64,
        out: &mut Outcome,
    ) -> Result<(), RequestError> {
        if matches!(req, Request::DumpRoutes(_)) {
            // The dump reads the published state: publish what came before it.
            let batching = self.batching;
            self.publish();
            if batching {
                self.begin();
            }
        }
        if is_read(&req) {
            let counters = self.link_counters.as_deref();
            return read(self.view.latest(), &self.reader, counters, req, origin, out);
        }
        match req {
            Request::NewRoute(r, f) => {
                self.route_change(RouteChange::Owned(r, Some(f)), origin, listening, out)?
            }
            Request::DelRoute(r) => {
                self.route_change(RouteChange::Owned(r, None), origin, listening, out)?
            }
            Request::NewNeigh(n, f) => {
                self.neigh_change(Change::NewNeigh(n, f), origin, listening, out)?
            }
            Request::DelNeigh(n) => {
                self.neigh_change(Change::DelNeigh(n), origin, listening, out)?
            }
            other => self.object_change(other, origin, listening, out)?,
        }
        Ok(())
    }
}
