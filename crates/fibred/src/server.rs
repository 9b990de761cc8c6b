//! The daemon's threads: one writer owning the [`Engine`], one thread per connected client,
//! one for the datagram socket, and the acceptor; when configured, the FPM server's, the
//! mirror's (both hand their changes to the writer as jobs, applied in batches of their own:
//! `feed_batch`) and the metrics' (a reader of the published state and of counters).
//!
//! ```text
//!  client threads --Job--> writer (Engine) --replies--> the requesting client's thread
//!                                          --notes----> every member's bounded note queue
//! ```
//!
//! - The writer is the only thread that changes the routing state; requests are applied in the
//!   order the writer receives them, and each client's requests in the order it sent them.
//!   It applies a batch, publishes it once (`Engine::publish`: every change of the batch
//!   becomes visible to readers at once), answers, then brings its second copy up to date
//!   while the clients read their answers (`Engine::catch_up`).
//! - A batch of datagrams that only read (GET requests and dumps, `engine::read_only`) is
//!   answered by the client's own thread from the published state, without the writer; since
//!   the writer publishes before it answers, a client always reads its own changes.
//! - A client thread submits a batch of the datagrams it has read and waits for their answers
//!   before reading more, so the daemon holds at most one batch of answers per client. A ring
//!   client's thread reads (and parses) one batch ahead while the writer applies the previous
//!   one ([`RING_PIPELINE`]); its answers are still written in order, each batch's into an
//!   idle output, and a batch that only reads waits for the changes before it. Dumps are
//!   snapshots encoded a datagram (or ring frame) at a time while the client reads.
//! - Notifications go into a per-client queue bounded by [`NOTE_QUEUE_BYTES`]; when it is full
//!   further notifications are dropped and the client gets one NLMSG_ERROR with -ENOBUFS and
//!   sequence 0 once there is room, as the kernel reports ENOBUFS from recvmsg for an
//!   overflowing socket. A slow or vanished reader thus costs bounded memory.
//! - Connections on the SOCK_SEQPACKET path that start with the ring's setup request become
//!   ring sessions (fibre-ring); every other connection speaks netlink datagrams directly.
//! - Shutdown: one eventfd, never drained, that every poll watches.
//! - Who may change what ([`Access`]): reads (GET, dumps, multicast memberships) are open to
//!   anyone who can connect; every other request needs the peer to be an administrator, as
//!   the kernel's rtnetlink asks for CAP_NET_ADMIN, and is otherwise refused with EPERM
//!   (`ClientCtx::read_only`). A peer is known by the credentials the kernel gives: SO_PEERCRED
//!   at connect for SEQPACKET and ring clients, SCM_CREDENTIALS on each datagram of the
//!   datagram socket (SO_PASSCRED). Neither names a pid that could be recycled.
//! - Bounds on clients: at most [`Access::max_clients`] connections (beyond it a new
//!   connection is accepted and closed at once, except [`ADMIN_RESERVE`] more for
//!   administrators), at most half of them of one user who is no administrator; ring
//!   sessions within [`MAX_RING_SESSIONS`] and [`MAX_RING_BYTES`]; the acceptor backs off
//!   when accept fails for lack of descriptors or memory.
//! - The datagram socket never waits for one sender: answers that do not fit in a sender's
//!   receive queue wait in that sender's [`Pending`] queue (bounded, dumps encoded as it
//!   drains) while the others are served.

use crate::engine::{self, fit, ClientCtx, DumpStream, Engine, Outcome, Prepared, Reply};
use crate::metrics::{Feeds, Recorder};
use crate::state;
use crate::sys::{self, EventFd, UnixAddr};
use crate::view::FibReader;
use fibre_ring::server::{Limits, RingBudget, Session};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes of notifications held for one client that is not reading; the kernel's default
/// receive buffer (net.core.rmem_default) is 208 KiB, and this is of that order.
pub const NOTE_QUEUE_BYTES: usize = 256 << 10;
/// Largest datagram of answers on the sockets. The kernel fills dump datagrams up to about a
/// page or 32 KiB; iproute2 and pyroute2 read 32 KiB at a time.
const DATAGRAM_BYTES: usize = 32 << 10;
/// Datagrams (or ring frames) a client thread hands the writer at once: enough to amortise
/// the hand-off across a stream of requests, few enough that answers stay small.
const BATCH_DATAGRAMS: usize = 64;
/// Depth of the writer's queue of jobs; a full queue makes client threads wait.
const JOB_QUEUE: usize = 256;
/// Connections the SOCK_SEQPACKET socket queues before the acceptor takes them; the kernel
/// caps it at net.core.somaxconn.
const LISTEN_BACKLOG: i32 = 128;
/// Connections served at once unless `--max-clients` says otherwise. Each costs a thread
/// (its stack is address space; a few pages resident), two descriptors (a ring four) and at
/// most one batch of answers and [`NOTE_QUEUE_BYTES`] of notifications.
pub const MAX_CLIENTS: usize = 1024;
/// Connections beyond the cap still served for administrators, so that a flood of
/// connections by others does not lock out the one who would stop it.
pub const ADMIN_RESERVE: usize = 16;
/// Ring sessions at once: each holds a thread and up to 128 MiB of shared memory.
pub const MAX_RING_SESSIONS: usize = 64;
/// Shared memory all ring sessions together may pin: eight rings of the largest geometry,
/// or 64 of 16 MiB.
pub const MAX_RING_BYTES: usize = 1 << 30;
/// First pause of the acceptor after accept failed for lack of descriptors or memory; it
/// doubles with every further failure, up to [`ACCEPT_BACKOFF_MAX`]. While it waits the
/// connections stay in the backlog.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long a connection may stay silent before its first message: a connection that
/// never speaks must not hold one of the [`MAX_CLIENTS`] places for ever.
const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// Datagram senders with answers waiting at once; a new one beyond it evicts the one that
/// waits longest (its answers are dropped, logged with its address).
const DGRAM_PENDING_SENDERS: usize = 64;
/// Bytes of complete answers (ACKs, errors, GET answers) held for one datagram sender; what
/// would go beyond is dropped and the sender gets one ENOBUFS once it has read the rest, as
/// the kernel reports a receive buffer overrun.
const DGRAM_PENDING_BYTES: usize = 256 << 10;
/// Dumps held for one datagram sender (each holds a snapshot of the objects it lists, or a
/// cursor into the routes); a further one is dropped as above.
const DGRAM_PENDING_DUMPS: usize = 2;
/// A sender that has taken nothing for this long loses its waiting answers.
const DGRAM_STALL: Duration = Duration::from_secs(5);
/// Retry delays for a sender whose queue is full: a datagram socket cannot poll for room at
/// one unconnected peer, so it is tried again after this, doubling up to the maximum.
const DGRAM_RETRY_MIN: Duration = Duration::from_millis(1);
const DGRAM_RETRY_MAX: Duration = Duration::from_millis(64);
/// Datagrams sent to one sender before the others get their turn.
const DGRAM_TURN: usize = 16;
/// Send buffer of the datagram socket. An AF_UNIX datagram is charged to its sender until
/// it is read, so what every client leaves unread fills this one buffer that all the
/// answers share, and the kernel does not bound what a client connected to us may leave
/// unread. The default (net.core.wmem_default, 208 KiB) is six 32 KiB datagrams: one client
/// that does not read would silence everyone. With [`DGRAM_UNREAD`] per client, 32 MiB
/// (the kernel doubles it) takes over a hundred clients that do not read to fill it. Memory
/// is taken only as answers wait.
const DGRAM_SNDBUF: usize = 32 << 20;
/// Bytes sent to one datagram client that it may not have read yet (16 full datagrams).
/// Beyond it nothing more is sent until the kernel's socket diagnostics (sock_diag) show its
/// receive queue empty.
const DGRAM_UNREAD: usize = 512 << 10;
/// Clients whose unread bytes are counted, beyond which those that have read everything
/// are looked up and forgotten (at most once per [`DGRAM_FORGET_EVERY`]).
const DGRAM_TRACKED: usize = 4096;
const DGRAM_FORGET_EVERY: Duration = Duration::from_secs(1);

/// What to serve and where.
#[derive(Debug, Clone)]
pub struct Config {
    /// The SOCK_SEQPACKET socket (netlink datagrams and the ring).
    pub socket: PathBuf,
    /// The SOCK_DGRAM socket; `None` serves none.
    pub dgram: Option<PathBuf>,
    /// Where the configuration is saved and restored.
    pub state: Option<PathBuf>,
    /// Who may change the state, and how many may connect.
    pub access: Access,
    /// The FPM server, if one is wanted.
    pub fpm: Option<crate::fpm::Config>,
    /// The kernel namespace to mirror, if any.
    pub mirror: Option<crate::mirror::Config>,
    /// Where metrics are served, if anywhere.
    pub metrics: Option<std::net::SocketAddr>,
    /// The forwarding worker's settings.
    pub workers: crate::ports::Settings,
    /// Port links made at the start (`[[port]]`) unless the state file has them.
    pub ports: Vec<crate::ports::PortLink>,
}

/// Who may change the state, and how many clients are served.
///
/// The kernel asks for CAP_NET_ADMIN in the network namespace. A Unix socket tells who the
/// peer is (user and group ids, checked by the kernel) but not its capabilities; reading them
/// from /proc/PID/status would trust a pid that can be recycled between the connect and the
/// read. So an administrator is: user 0, the user fibred runs as (who owns this instance, as
/// a user owns the network namespaces of its user namespace), or a member of the configured
/// admin group (the peer's group id, or a user the group lists in the group database when
/// fibred starts). Everyone else who can connect may read.
#[derive(Debug, Clone)]
pub struct Access {
    /// Connections served at once ([`MAX_CLIENTS`]).
    pub max_clients: usize,
    /// The user fibred runs as.
    pub owner: u32,
    /// The admin group: its id and the users it lists.
    pub admin_group: Option<(u32, Vec<u32>)>,
}

impl Default for Access {
    fn default() -> Access {
        Access {
            max_clients: MAX_CLIENTS,
            owner: sys::effective_uid(),
            admin_group: None,
        }
    }
}

impl Access {
    /// Whether a peer with these credentials may change the state.
    pub fn may_change(&self, peer: &sys::Credentials) -> bool {
        peer.uid == 0
            || peer.uid == self.owner
            || self
                .admin_group
                .as_ref()
                .is_some_and(|(gid, users)| peer.gid == *gid || users.contains(&peer.uid))
    }
}

impl Config {
    /// The datagram socket's path beside the sequenced-packet one: `X.sock` -> `X.dgram`.
    pub fn dgram_beside(socket: &Path) -> PathBuf {
        socket.with_extension("dgram")
    }
}

struct NoteQueue {
    msgs: VecDeque<Arc<[u8]>>,
    bytes: usize,
    overrun: bool,
}

/// One connected client as the writer sees it.
struct Client {
    port: u32,
    groups: AtomicU64,
    notes: Mutex<NoteQueue>,
    wake: EventFd,
}

impl Client {
    fn new(port: u32, wake: EventFd) -> Client {
        Client {
            port,
            groups: AtomicU64::new(0),
            notes: Mutex::new(NoteQueue {
                msgs: VecDeque::new(),
                bytes: 0,
                overrun: false,
            }),
            wake,
        }
    }

    fn push_note(&self, msg: &Arc<[u8]>) {
        let mut q = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        if q.bytes + msg.len() > NOTE_QUEUE_BYTES {
            q.overrun = true;
            return;
        }
        let was_empty = q.msgs.is_empty();
        q.bytes += msg.len();
        q.msgs.push_back(msg.clone());
        drop(q);
        if was_empty {
            self.wake.signal();
        }
    }

    /// Takes the queued notifications, and the ENOBUFS report if some were dropped.
    fn take_notes(&self) -> Vec<Arc<[u8]>> {
        let mut q = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Arc<[u8]>> = q.msgs.drain(..).collect();
        q.bytes = 0;
        if q.overrun {
            q.overrun = false;
            out.push(enobufs(self.port).into());
        }
        out
    }
}

/// NLMSG_ERROR -ENOBUFS with sequence 0: notifications were lost.
fn enobufs(port: u32) -> Vec<u8> {
    let header = [0u8; 16];
    let e = fibre_proto::convert::RequestError::from(fibre_fib::RtError::new(
        fibre_fib::Errno::ENOBUFS,
    ));
    let mut m = fibre_proto::convert::ack(&header, Err(&e), true, port);
    m.header.sequence = 0;
    m.to_bytes()
}

/// The writer's answers to one job of requests, and garbage for the client thread: the
/// read-ahead lists of an earlier batch, which both copies have applied (a table load's
/// requests, a few hundred bytes each: dropped there, not on the writer).
struct Answer {
    replies: Vec<Reply>,
    spent: Vec<crate::view::ReadAhead>,
}

enum Job {
    Register(Arc<Client>),
    Requests {
        client: Arc<Client>,
        datagrams: Vec<Prepared>,
        /// The sender is no administrator ([`Access`]).
        read_only: bool,
        answer: mpsc::Sender<Answer>,
        /// Signal the client's `wake` once the answers are sent (for a thread that polls
        /// instead of waiting on `answer`).
        wake: bool,
    },
    /// From the FPM server.
    Fpm(crate::fpm::Event),
    /// From the mirror thread.
    Mirror(crate::mirror::Event),
    /// The forwarding worker sent something up (`ports::Hub::apply`).
    Ports,
    /// Save the state (if kept) and stop; the save's outcome is sent back.
    Shutdown(mpsc::Sender<io::Result<()>>),
}

/// What client threads share.
struct Shared {
    jobs: mpsc::SyncSender<Job>,
    shutdown: Arc<EventFd>,
    next_port: AtomicU32,
    /// Cloned into a reader of the published state for each client thread.
    reader: Mutex<FibReader>,
    access: Access,
    /// Connections being served, in all and of each user who is no administrator.
    connections: Arc<AtomicUsize>,
    /// By the peer's uid, as the kernel reports it (SO_PEERCRED): std's SipHash, seeded per map.
    per_user: Mutex<HashMap<u32, usize>>,
    rings: Arc<RingBudget>,
    metrics: Recorder,
    /// The port links' counters, for link dumps.
    link_counters: Arc<crate::ports::Counters>,
}

impl Shared {
    /// Registers a client with the writer; `wake` is its eventfd (made by the acceptor for a
    /// connection, so that a lack of descriptors is the acceptor's to handle).
    fn new_client(&self, pid: Option<u32>, wake: Option<EventFd>) -> io::Result<Arc<Client>> {
        // The kernel's first netlink socket of a process gets the pid as port id; later ones
        // get other numbers. Ports only stamp answers here, so a counter disambiguates.
        let port = pid.unwrap_or_else(|| self.next_port.fetch_add(1, Ordering::Relaxed));
        let wake = match wake {
            Some(w) => w,
            None => EventFd::new()?,
        };
        let c = Arc::new(Client::new(port, wake));
        self.jobs
            .send(Job::Register(c.clone()))
            .map_err(|_| io::Error::other("writer stopped"))?;
        Ok(c)
    }

    /// A reader of the published state for a new client thread.
    fn reader(&self) -> FibReader {
        self.reader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Answers datagrams: on the calling thread from the published state when they only
    /// read, else by handing them to the writer and waiting for its answers (which it gives
    /// after publishing, so later reads see those changes). Route changes are read here
    /// ([`Prepared`]), so that the writer spends its time applying them: while it applies
    /// one client's batch, that client's thread reads the next.
    fn submit(
        &self,
        client: &Arc<Client>,
        reader: &FibReader,
        datagrams: Vec<Box<[u8]>>,
        read_only: bool,
    ) -> io::Result<Vec<Reply>> {
        if all_read_only(&datagrams) {
            return Ok(answer_reads(client, reader, &datagrams, self));
        }
        let answer = self
            .send_requests(client, datagrams, false, read_only)?
            .recv()
            .map_err(|_| io::Error::other("writer stopped"))?;
        Ok(answer.replies)
    }

    /// Hands datagrams to the writer (their route changes read here first); the answers come
    /// on the returned channel, after the writer published their changes.
    fn send_requests(
        &self,
        client: &Arc<Client>,
        datagrams: Vec<Box<[u8]>>,
        wake: bool,
        read_only: bool,
    ) -> io::Result<mpsc::Receiver<Answer>> {
        let (tx, rx) = mpsc::channel();
        self.jobs
            .send(Job::Requests {
                client: client.clone(),
                datagrams: datagrams.into_iter().map(Prepared::new).collect(),
                read_only,
                answer: tx,
                wake,
            })
            .map_err(|_| io::Error::other("writer stopped"))?;
        Ok(rx)
    }
}

fn all_read_only(datagrams: &[Box<[u8]>]) -> bool {
    datagrams.iter().all(|d| engine::read_only(d))
}

/// Answers datagrams that only read, from the published state, on the calling thread.
fn answer_reads(
    client: &Client,
    reader: &FibReader,
    datagrams: &[Box<[u8]>],
    sh: &Shared,
) -> Vec<Reply> {
    let ctx = ClientCtx {
        port: client.port,
        groups: 0,
        read_only: true,
    };
    let mut out = Outcome::default();
    for d in datagrams {
        engine::handle_reads(reader, d, &ctx, Some(&*sh.link_counters), &mut out);
    }
    sh.metrics.add(&out.tally);
    out.replies
}

/// Sends each notification to the live clients that joined its group.
fn fan_out(clients: &[Weak<Client>], notes: Vec<engine::Note>) {
    if notes.is_empty() {
        return;
    }
    let live: Vec<Arc<Client>> = clients.iter().filter_map(Weak::upgrade).collect();
    for n in notes {
        let bytes: Arc<[u8]> = n.bytes.into();
        for c in live
            .iter()
            .filter(|c| fibre_proto::groups::has(c.groups.load(Ordering::Relaxed), n.group))
        {
            c.push_note(&bytes);
        }
    }
}

/// A feed's batch (FPM frames or their sweep, mirrored messages): applied by `apply` (given
/// the groups somebody listens to), visible to every reader before anybody hears of it,
/// announced, and marked for the state file.
fn feed_batch(
    engine: &mut Engine,
    clients: &[Weak<Client>],
    metrics: &Recorder,
    unsaved: &mut state::SaveTimer,
    apply: impl FnOnce(&mut Engine, u64) -> crate::engine::Applied,
) {
    let listening = listening_groups(clients);
    engine.begin();
    let applied = apply(engine, listening);
    publish(engine, metrics);
    fan_out(clients, applied.notes);
    if applied.changed {
        unsaved.changed(Instant::now());
    }
    engine.catch_up();
}

/// Makes the batch visible to readers, timed for the metrics.
fn publish(engine: &mut Engine, metrics: &Recorder) {
    let start = Instant::now();
    engine.publish();
    metrics.published(start.elapsed());
}

/// The feeds' counters, for the metrics.
fn feeds(fpm: &Option<crate::fpm::Writer>, mirror: &Option<crate::mirror::Mirror>) -> Feeds {
    Feeds {
        fpm: fpm
            .as_ref()
            .map(|f| (f.session().counters(), f.connected())),
        mirror: mirror.as_ref().map(crate::mirror::Mirror::counters),
    }
}

/// The groups somebody listens to.
fn listening_groups(clients: &[Weak<Client>]) -> u64 {
    clients
        .iter()
        .filter_map(Weak::upgrade)
        .fold(0, |m, c| m | c.groups.load(Ordering::Relaxed))
}

/// The writer's GC: reclaims what has expired, publishes, and announces the routes removed
/// to every client listening. Returns whether the state changed. Runs when the earliest
/// deadline passes and before every batch of requests, so a request never reclaims an
/// expired route silently (mutations reclaim what is due before they act).
fn collect_garbage(engine: &mut Engine, clients: &[Weak<Client>], metrics: &Recorder) -> bool {
    if engine.next_expiry().is_none_or(|d| !d.is_zero()) {
        return false;
    }
    let listening = listening_groups(clients);
    let mut out = Outcome::default();
    engine.begin();
    engine.expire(listening, &mut out);
    publish(engine, metrics);
    fan_out(clients, out.notes);
    engine.catch_up();
    out.changed
}

/// The writer thread: applies jobs in order, fans out notifications, runs GC when routes
/// expire, keeps the state file.
fn writer(
    mut engine: Engine,
    jobs: mpsc::Receiver<Job>,
    state: Option<PathBuf>,
    mut fpm: Option<crate::fpm::Writer>,
    mut mirror: Option<crate::mirror::Mirror>,
    metrics: Recorder,
    mut ports: crate::ports::Hub,
) {
    let mut clients: Vec<Weak<Client>> = Vec::new();
    let mut unsaved = state::SaveTimer::default();
    // What the last catch-up finished with, sent with the next answers.
    let mut spent = Vec::new();
    loop {
        if collect_garbage(&mut engine, &clients, &metrics) {
            unsaved.changed(Instant::now());
        }
        if ports.due(engine.fib()).is_some_and(|d| d <= Instant::now()) {
            feed_batch(&mut engine, &clients, &metrics, &mut unsaved, |e, l| {
                ports.timers(e, l)
            });
            ports.send_actions();
        }
        if let Some(f) = &mut fpm {
            if f.due().is_some_and(|d| d <= Instant::now()) {
                feed_batch(&mut engine, &clients, &metrics, &mut unsaved, |e, l| {
                    f.sweep(e, l)
                });
                metrics.set_feeds(feeds(&fpm, &mirror));
            }
        }
        let save_due = state.as_ref().and(unsaved.due());
        let gc_due = engine.next_expiry().map(|d| Instant::now() + d);
        let fpm_due = fpm.as_ref().and_then(crate::fpm::Writer::due);
        let neigh_due = ports.due(engine.fib());
        let due = save_due
            .into_iter()
            .chain(gc_due)
            .chain(fpm_due)
            .chain(neigh_due);
        let job = match due.min() {
            Some(due) => match jobs.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Ok(j) => j,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let (Some(path), Some(s)) = (&state, save_due) {
                        if s <= Instant::now() {
                            let ok = state::save(&engine, path).is_ok();
                            unsaved.saved(ok, Instant::now());
                        }
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            },
            None => match jobs.recv() {
                Ok(j) => j,
                Err(_) => return,
            },
        };
        match job {
            Job::Register(c) => {
                clients.retain(|w| w.strong_count() > 0);
                clients.push(Arc::downgrade(&c));
            }
            Job::Requests {
                client,
                datagrams,
                read_only,
                answer,
                wake,
            } => {
                let others: u64 = clients
                    .iter()
                    .filter_map(Weak::upgrade)
                    .filter(|c| !Arc::ptr_eq(c, &client))
                    .fold(0, |m, c| m | c.groups.load(Ordering::Relaxed));
                let mut ctx = ClientCtx {
                    port: client.port,
                    groups: client.groups.load(Ordering::Relaxed),
                    read_only,
                };
                let mut out =
                    Outcome::for_requests(datagrams.iter().map(|d| d.bytes().len()).sum());
                engine.begin();
                for d in datagrams {
                    let listening = others | ctx.groups;
                    engine.handle_prepared(d, &mut ctx, listening, &mut out);
                }
                // Visible to every reader before anybody hears of it.
                publish(&mut engine, &metrics);
                client.groups.store(ctx.groups, Ordering::Relaxed);
                metrics.add(&out.tally);
                // The client may have gone; its answers then go nowhere.
                let _ = answer.send(Answer {
                    replies: std::mem::take(&mut out.replies),
                    spent: std::mem::take(&mut spent),
                });
                if wake {
                    client.wake.signal();
                }
                fan_out(&clients, std::mem::take(&mut out.notes));
                if out.changed {
                    unsaved.changed(Instant::now());
                }
                // While the clients read their answers.
                engine.catch_up();
                spent = engine.take_spent();
            }
            Job::Fpm(event) => {
                let Some(f) = &mut fpm else { continue };
                feed_batch(&mut engine, &clients, &metrics, &mut unsaved, |e, l| {
                    f.event(e, event, l)
                });
                metrics.set_feeds(feeds(&fpm, &mirror));
            }
            Job::Mirror(event) => {
                let Some(m) = &mut mirror else { continue };
                feed_batch(&mut engine, &clients, &metrics, &mut unsaved, |e, l| {
                    m.event(e, event, l)
                });
                metrics.set_feeds(feeds(&fpm, &mirror));
            }
            Job::Ports => {
                feed_batch(&mut engine, &clients, &metrics, &mut unsaved, |e, l| {
                    ports.apply(e, l)
                });
                ports.send_actions();
            }
            Job::Shutdown(done) => {
                let saved = state.as_ref().map_or(Ok(()), |p| state::save(&engine, p));
                let _ = done.send(saved);
                return;
            }
        }
    }
}

/// A running daemon.
pub struct Daemon {
    shutdown: Arc<EventFd>,
    acceptor: Option<JoinHandle<io::Result<()>>>,
    socket: PathBuf,
}

impl Daemon {
    /// Sets the C allocator up for the daemon ([`crate::alloc::tune`]), binds the sockets,
    /// restores the state and starts every thread. A state file that cannot be restored or
    /// saved to refuses the start with a [`state::StateError`] inside the error.
    pub fn start(config: Config) -> io::Result<Daemon> {
        crate::alloc::tune();
        let mut engine = Engine::default();
        let state_lock = config.state.as_deref().map(state::lock).transpose()?;
        if let Some(path) = &config.state {
            let applied = state::load(&mut engine, path)?;
            state::check_writable(path)?;
            tracing::info!(path = %path.display(), requests = applied, "state restored");
        }
        let (jobs, rx) = mpsc::sync_channel(JOB_QUEUE);
        let ports = {
            let jobs = jobs.clone();
            let wake = Box::new(move || jobs.try_send(Job::Ports).is_ok());
            crate::ports::start(config.workers.clone(), &mut engine, &config.ports, wake)?
        };
        socket_dir(&config.socket, &config.access)?;
        prepare_path(&config.socket)?;
        let listener = sys::seqpacket_listen(&config.socket, LISTEN_BACKLOG)?;
        open_to_all(&config.socket)?;
        let dgram = match &config.dgram {
            Some(p) => {
                socket_dir(p, &config.access)?;
                prepare_path(p)?;
                let fd = sys::dgram_bind(p)?;
                open_to_all(p)?;
                sys::set_pass_credentials(fd.as_fd())?;
                sys::set_send_buffer(fd.as_fd(), DGRAM_SNDBUF)?;
                Some((fd, p.clone()))
            }
            None => None,
        };
        let shutdown = Arc::new(EventFd::new()?);
        let state = config.state.clone();
        let reader = Mutex::new(engine.reader());
        let fpm = match &config.fpm {
            Some(c) => Some((crate::fpm::bind(c)?, c.settings, c.relay.clone())),
            None => None,
        };
        let fpm_writer = fpm.as_ref().map(|(_, settings, _)| {
            crate::fpm::Writer::new(*settings, Box::new(crate::fpm::HostNames), &engine)
        });
        let mirror_writer = config.mirror.as_ref().map(|_| crate::mirror::Mirror::new());
        let metrics_listener = config.metrics.map(crate::metrics::bind).transpose()?;
        let connections = Arc::new(AtomicUsize::new(0));
        let metrics = Recorder(
            metrics_listener
                .as_ref()
                .map(|_| crate::metrics::Metrics::new(connections.clone())),
        );
        let port_counters = ports.counters();
        metrics.set_ports(port_counters.clone());
        let writer_metrics = metrics.clone();
        let writer = std::thread::Builder::new()
            .name("fibred-writer".into())
            .spawn(move || {
                // Held until the final save is written.
                let _state_lock = state_lock;
                writer(
                    engine,
                    rx,
                    state,
                    fpm_writer,
                    mirror_writer,
                    writer_metrics,
                    ports,
                )
            })?;
        if let Some((listener, _, relay)) = fpm {
            let jobs = jobs.clone();
            let shutdown = shutdown.clone();
            let addr = listener.local_addr()?;
            std::thread::Builder::new()
                .name("fibred-fpm".into())
                .spawn(move || {
                    let sent = |e| jobs.send(Job::Fpm(e)).is_ok();
                    let mut relay = crate::fpm::Relay::new(&relay);
                    if let Err(e) = crate::fpm::serve(listener, &mut relay, &shutdown, sent) {
                        tracing::error!(error = %e, "fpm server failed");
                    }
                })?;
            tracing::info!(address = %addr, "fpm listening");
        }
        if let Some(c) = &config.mirror {
            // Before the start is reported: a namespace that cannot be followed refuses it.
            let jobs = jobs.clone();
            let sent = move |e| jobs.send(Job::Mirror(e)).is_ok();
            crate::mirror::spawn(c.clone(), shutdown.clone(), sent)?;
        }
        let shared = Arc::new(Shared {
            jobs,
            shutdown: shutdown.clone(),
            next_port: AtomicU32::new(1 << 31),
            reader,
            access: config.access.clone(),
            connections,
            per_user: Mutex::new(HashMap::new()),
            rings: RingBudget::new(MAX_RING_SESSIONS, MAX_RING_BYTES),
            metrics: metrics.clone(),
            link_counters: port_counters,
        });
        if let (Some(listener), Some(m)) = (metrics_listener, metrics.0) {
            let reader = shared.reader();
            let shutdown = shutdown.clone();
            let addr = listener.local_addr()?;
            std::thread::Builder::new()
                .name("fibred-metrics".into())
                .spawn(move || crate::metrics::serve(listener, &m, &reader, &shutdown))?;
            tracing::info!(address = %addr, "metrics listening");
        }
        if let Some((fd, path)) = dgram {
            let sh = shared.clone();
            std::thread::Builder::new()
                .name("fibred-dgram".into())
                .spawn(move || {
                    if let Err(e) = serve_dgram(fd, &sh) {
                        tracing::error!(path = %path.display(), error = %e, "datagram socket failed");
                    }
                })?;
        }
        tracing::info!(socket = %config.socket.display(), dgram = %config
                .dgram
                .as_deref()
                .map_or("-".into(), |p| p.display().to_string()), "listening");
        let socket = config.socket.clone();
        let cfg = config.clone();
        let acceptor = std::thread::Builder::new()
            .name("fibred-accept".into())
            .spawn(move || {
                accept_loop(&listener, &shared);
                let _ = std::fs::remove_file(&cfg.socket);
                if let Some(p) = &cfg.dgram {
                    let _ = std::fs::remove_file(p);
                }
                let (tx, rx) = mpsc::channel();
                let saved = match shared.jobs.send(Job::Shutdown(tx)) {
                    Ok(()) => rx.recv().unwrap_or_else(|_| Err(writer_gone())),
                    Err(_) => Err(writer_gone()),
                };
                drop(shared);
                let _ = writer.join();
                saved
            })?;
        Ok(Daemon {
            shutdown,
            acceptor: Some(acceptor),
            socket,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stops accepting, saves the state, removes the sockets and returns when that is done.
    pub fn stop(mut self) {
        let _ = self.stop_inner();
    }

    /// [`Daemon::stop`], returning whether the final save of the state succeeded.
    pub fn stop_checked(mut self) -> io::Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> io::Result<()> {
        self.shutdown.signal();
        match self.acceptor.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(saved)) => saved,
            Some(Err(_)) => Err(writer_gone()),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// Creates the directory of a socket when it is missing: mode 0750 whatever the umask, its
/// group the admin group when one is configured (so that its members can reach the socket),
/// else fibred's. An existing directory is left as it is: its mode is the administrator's
/// choice of who may connect at all.
fn socket_dir(socket: &Path, access: &Access) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.exists() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    // Nobody else may enter before the group and mode are set.
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(e),
    }
    if let Some((gid, _)) = &access.admin_group {
        std::os::unix::fs::chown(dir, None, Some(*gid))?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
}

/// Gives a socket file mode 0666 whatever the umask: who may connect is decided by the
/// directories above it, and what a peer may do by its credentials ([`Access`]).
fn open_to_all(socket: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))
}

/// The final save's outcome when the thread that makes it has died.
fn writer_gone() -> io::Error {
    io::Error::other("the writer thread ended before saving the state")
}

/// Creates the socket's directory, and removes a stale socket (one nobody listens on); any
/// other file there refuses the start, as it may be a state file named by mistake.
fn prepare_path(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; refusing to replace it",
                    path.display()
                ),
            ));
        }
        // A socket of another type that someone is bound to refuses the wrong type
        // (EPROTOTYPE) rather than the connection (ECONNREFUSED, a stale socket).
        let alive = match sys::seqpacket_connect(path) {
            Ok(_) => true,
            Err(e) => e.raw_os_error() == Some(libc::EPROTOTYPE),
        };
        if alive {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is in use by a running daemon", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// A connection counted in [`Shared::connections`] (and, for a user who is no
/// administrator, in [`Shared::per_user`]) until it is dropped.
struct Counted(Arc<Shared>, Option<u32>);

impl Counted {
    /// Counts a connection of `user` (`None`: an administrator's), unless the caps are
    /// reached: `limit` in all, half of [`Access::max_clients`] for one user.
    fn take(shared: &Arc<Shared>, user: Option<u32>, limit: usize) -> Option<Counted> {
        if shared.connections.load(Ordering::Relaxed) >= limit {
            return None;
        }
        if let Some(uid) = user {
            let mut per_user = shared.per_user.lock().unwrap_or_else(|e| e.into_inner());
            let n = per_user.entry(uid).or_default();
            if *n >= (shared.access.max_clients / 2).max(1) {
                return None;
            }
            *n += 1;
        }
        shared.connections.fetch_add(1, Ordering::Relaxed);
        Some(Counted(shared.clone(), user))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
        if let Some(uid) = self.1 {
            let mut per_user = self.0.per_user.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = per_user.get_mut(&uid) {
                *n -= 1;
                if *n == 0 {
                    per_user.remove(&uid);
                }
            }
        }
    }
}

/// An episode of failures (of accept, or of starting a client thread), logged when it starts
/// and when it ends with the number of failures, never once per failure.
#[derive(Default)]
struct Episode {
    failures: u64,
}

impl Episode {
    fn failed(&mut self, what: &str, why: &dyn std::fmt::Display) {
        if self.failures == 0 {
            tracing::warn!(error = %why, "{}", what);
        }
        self.failures += 1;
    }

    fn ended(&mut self, what: &str) {
        if self.failures > 0 {
            tracing::info!(failures = self.failures, "{}", what);
            self.failures = 0;
        }
    }
}

fn accept_loop(listener: &OwnedFd, shared: &Arc<Shared>) {
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut failing = Episode::default();
    let mut refusing = Episode::default();
    loop {
        let mut fds = [
            sys::pollfd(listener.as_fd(), libc::POLLIN),
            sys::pollfd(shared.shutdown.fd(), libc::POLLIN),
        ];
        if let Err(e) = sys::poll(&mut fds, None) {
            tracing::error!(error = %e, "poll failed");
            return;
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents == 0 {
            continue;
        }
        // The connection's descriptors, its eventfd included: a thread that would fail for
        // lack of one is never started.
        let accepted = sys::accept(listener.as_fd()).and_then(|sock| {
            let peer = sys::peer_credentials(sock.as_fd())?;
            Ok((sock, peer, EventFd::new()?))
        });
        let (sock, peer, wake) = match accepted {
            Ok(s) => s,
            // The peer gave up before it was accepted.
            Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
            Err(e) => {
                // Out of descriptors or memory (EMFILE, ENFILE, ENOMEM, ENOBUFS) or worse:
                // trying again at once would fail again at once. The connection stays in the
                // backlog (or, accepted without its eventfd, is closed).
                failing.failed("accept failing; backing off", &e);
                let mut fds = [sys::pollfd(shared.shutdown.fd(), libc::POLLIN)];
                let _ = sys::poll(&mut fds, Some(backoff));
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let admin = shared.access.may_change(&peer);
        let limit = shared.access.max_clients + if admin { ADMIN_RESERVE } else { 0 };
        let Some(counted) = Counted::take(shared, (!admin).then_some(peer.uid), limit) else {
            // Accepted and closed at once: the client learns now (its next read ends), where
            // left in the backlog it would wait on a daemon that may never take it.
            let why = format!("{limit} connections, or half of them for uid {}", peer.uid);
            refusing.failed("connection limit reached; closing new connections", &why);
            continue;
        };
        refusing.ended("connections accepted again");
        let spawned = std::thread::Builder::new()
            .name("fibred-client".into())
            .spawn(move || {
                let pid = peer.pid;
                match serve_connection(sock, wake, &counted.0, pid, !admin) {
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        tracing::debug!(pid, "client left")
                    }
                    Ok(()) => tracing::debug!(pid, "client left"),
                    Err(e) => tracing::info!(pid, error = %e, "client dropped"),
                }
            });
        match spawned {
            Ok(_) => {
                failing.ended("accepting again");
                backoff = ACCEPT_BACKOFF_MIN;
            }
            Err(e) => failing.failed("cannot start client threads", &e),
        }
    }
}

/// Reads one whole datagram without blocking: `Ok(None)` when none is waiting or the one
/// waiting is empty (the kernel ignores a zero-length netlink message); a hang-up is an error.
fn try_recv(sock: &OwnedFd) -> io::Result<Option<Box<[u8]>>> {
    let len = match sys::next_len(sock.as_fd(), libc::MSG_DONTWAIT) {
        Ok(0) => {
            // Zero bytes are a hang-up or an empty message; only a hang-up sets POLLRDHUP.
            let mut fds = [sys::pollfd(sock.as_fd(), libc::POLLRDHUP)];
            sys::poll(&mut fds, Some(Duration::ZERO))?;
            if fds[0].revents & (libc::POLLRDHUP | libc::POLLHUP) != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "client closed",
                ));
            }
            sys::recv(sock.as_fd(), &mut [], libc::MSG_DONTWAIT)?;
            return Ok(None);
        }
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut buf = vec![0u8; len].into_boxed_slice();
    let n = sys::recv(sock.as_fd(), &mut buf, libc::MSG_DONTWAIT)?.len;
    if n < len {
        return Ok(Some(buf[..n].into()));
    }
    Ok(Some(buf))
}

/// Waits for the first datagram (at most [`FIRST_MESSAGE_TIMEOUT`]), then serves the
/// connection as a ring or as netlink. `read_only`: the peer is no administrator.
fn serve_connection(
    sock: OwnedFd,
    wake: EventFd,
    sh: &Shared,
    pid: u32,
    read_only: bool,
) -> io::Result<()> {
    sys::set_nonblocking(sock.as_fd(), true)?;
    let deadline = Instant::now() + FIRST_MESSAGE_TIMEOUT;
    let first = loop {
        if let Some(d) = try_recv(&sock)? {
            break d;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request after connecting",
            ));
        }
        let mut fds = [
            sys::pollfd(sock.as_fd(), libc::POLLIN | libc::POLLRDHUP),
            sys::pollfd(sh.shutdown.fd(), libc::POLLIN),
        ];
        sys::poll(&mut fds, Some(left))?;
        if fds[1].revents != 0 {
            return Ok(());
        }
    };
    let client = sh.new_client(Some(pid), Some(wake))?;
    if fibre_ring::proto::is_setup_request(&first) {
        let session = Session::accept_within(sock, &first, Limits::default(), &sh.rings)
            .map_err(|e| io::Error::other(e.to_string()))?;
        tracing::debug!(pid, mapped = session.mapped_bytes(), "ring client");
        return serve_ring(session, sh, &client, read_only);
    }
    tracing::debug!(pid, "socket client");
    serve_socket(sock, first, sh, &client, read_only)
}

/// Answers waiting to be written to one client, coalesced into datagrams of at most `limit`.
struct Answers {
    queue: VecDeque<Reply>,
    /// Bytes of the front [`Reply::Messages`] already sent.
    sent: usize,
    limit: usize,
}

impl Answers {
    fn new(limit: usize) -> Answers {
        Answers {
            queue: VecDeque::new(),
            sent: 0,
            limit,
        }
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Bytes of complete messages and number of dumps waiting.
    fn held(&self) -> (usize, usize) {
        let (bytes, dumps) = held(self.queue.iter());
        (bytes - self.sent, dumps)
    }

    /// The next datagram: consecutive messages that fit together, or a dump's next piece.
    fn next_datagram(&mut self, out: &mut Vec<u8>) -> bool {
        out.clear();
        while let Some(front) = self.queue.front_mut() {
            match front {
                Reply::Messages(m) => {
                    let rest = &m[self.sent..];
                    let n = fit(rest, self.limit - out.len());
                    let single = engine::alone(rest);
                    if !out.is_empty() && (out.len() + n > self.limit || single) {
                        break;
                    }
                    out.extend_from_slice(&rest[..n]);
                    self.sent += n;
                    if self.sent < m.len() {
                        break;
                    }
                    self.sent = 0;
                    self.queue.pop_front();
                    if single {
                        break;
                    }
                }
                Reply::Dump(d) => {
                    if !out.is_empty() {
                        break;
                    }
                    if !d.fill(out, self.limit) {
                        self.queue.pop_front();
                    }
                    break;
                }
            }
        }
        !out.is_empty()
    }
}

fn serve_socket(
    sock: OwnedFd,
    first: Box<[u8]>,
    sh: &Shared,
    client: &Arc<Client>,
    read_only: bool,
) -> io::Result<()> {
    let reader = sh.reader();
    let mut answers = Answers::new(DATAGRAM_BYTES);
    let mut notes: VecDeque<Arc<[u8]>> = VecDeque::new();
    let mut datagram = Vec::new();
    // A datagram taken from `answers` that the socket had no room for yet.
    let mut unsent = false;
    let mut first = Some(first);
    loop {
        // Write what is waiting, notifications first once the answers are out.
        let mut blocked = false;
        loop {
            if !unsent {
                if answers.next_datagram(&mut datagram) {
                    unsent = true;
                } else if let Some(n) = notes.pop_front() {
                    datagram.clear();
                    datagram.extend_from_slice(&n);
                    unsent = true;
                } else {
                    break;
                }
            }
            match sys::send(sock.as_fd(), &datagram, &[], libc::MSG_DONTWAIT) {
                Ok(_) => unsent = false,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        let idle = !unsent && answers.is_empty();
        if idle && notes.is_empty() {
            let taken = client.take_notes();
            if !taken.is_empty() {
                notes.extend(taken);
                continue;
            }
        }
        if idle {
            let mut batch: Vec<Box<[u8]>> = first.take().into_iter().collect();
            while batch.len() < BATCH_DATAGRAMS {
                match try_recv(&sock)? {
                    Some(d) => batch.push(d),
                    None => break,
                }
            }
            if !batch.is_empty() {
                answers
                    .queue
                    .extend(sh.submit(client, &reader, batch, read_only)?);
                continue;
            }
        }
        let mut ev = libc::POLLRDHUP;
        if idle {
            ev |= libc::POLLIN;
        }
        if blocked {
            ev |= libc::POLLOUT;
        }
        let mut fds = [
            sys::pollfd(sock.as_fd(), ev),
            sys::pollfd(client.wake.fd(), libc::POLLIN),
            sys::pollfd(sh.shutdown.fd(), libc::POLLIN),
        ];
        sys::poll(&mut fds, None)?;
        if fds[2].revents != 0 {
            return Ok(());
        }
        if fds[1].revents != 0 {
            client.wake.drain();
        }
        let r = fds[0].revents;
        if r & (libc::POLLHUP | libc::POLLERR) != 0 && r & libc::POLLIN == 0 {
            return Ok(());
        }
    }
}

/// A ring dump: the dumps of one batch, one after the other, a frame at a time.
struct RingDump {
    dumps: VecDeque<DumpStream>,
    frame: usize,
}

impl fibre_ring::Dump for RingDump {
    fn next_message(&mut self, out: &mut Vec<u8>) -> bool {
        while let Some(d) = self.dumps.front_mut() {
            let more = d.fill(out, self.frame);
            if !more {
                self.dumps.pop_front();
            }
            if !out.is_empty() {
                return true;
            }
        }
        false
    }
}

/// Batches a ring client can have at the writer at once: the writer applies one while the
/// client's thread reads (and parses) the next, so the writer does not wait for it between
/// batches. Answers still go out in order, each batch's into an idle output, so the daemon
/// holds at most one batch of answers per client, as with one batch at a time.
const RING_PIPELINE: usize = 2;

/// Writes a batch's answers into the ring: messages into frames, dumps to be pulled as the
/// client frees frames.
fn write_answers(s: &mut Session, replies: Vec<Reply>) {
    let mut out = s.responder();
    let frame = out.frame_capacity();
    let mut dumps = VecDeque::new();
    for r in replies {
        match r {
            Reply::Messages(m) => {
                let mut rest = &m[..];
                while !rest.is_empty() {
                    let n = fit(rest, frame);
                    // An overrun is the client's: it asked for more than it reads.
                    let _ = out.reply(&rest[..n]);
                    rest = &rest[n..];
                }
            }
            Reply::Dump(d) => dumps.push_back(d),
        }
    }
    if !dumps.is_empty() {
        // No dump is active: answers are written into an idle output only.
        let _ = out.dump(Box::new(RingDump { dumps, frame }));
    }
}

fn serve_ring(
    mut s: Session,
    sh: &Shared,
    client: &Arc<Client>,
    read_only: bool,
) -> io::Result<()> {
    let disconnected = |e: fibre_ring::SessionError| match e {
        fibre_ring::SessionError::Disconnected => Ok(()),
        fibre_ring::SessionError::Io(e) => Err(e),
    };
    let stopped = || io::Error::other("writer stopped");
    let reader = sh.reader();
    // Batches at the writer, oldest first; their answers are written in this order.
    let mut at_writer: VecDeque<mpsc::Receiver<Answer>> = VecDeque::new();
    // A batch that only reads, taken while changes before it were at the writer: it is
    // answered from the published state once they are (then they are published).
    let mut held: Option<Vec<Box<[u8]>>> = None;
    loop {
        let mut progressed = match s.pump() {
            Ok(p) => p,
            Err(e) => return disconnected(e),
        };
        while s.output_idle() {
            let Some(answers) = at_writer.front() else {
                break;
            };
            match answers.try_recv() {
                Ok(answer) => {
                    at_writer.pop_front();
                    write_answers(&mut s, answer.replies);
                    progressed = true;
                    // The answers are out: the garbage goes now.
                    drop(answer.spent);
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return Err(stopped()),
            }
        }
        if s.output_idle() {
            // Notifications of the changes answered so far (and possibly of the batch at
            // the writer, which the kernel too announces before it acknowledges).
            for n in client.take_notes() {
                // A full ring drops the notification, as a full socket buffer does.
                let _ = s.responder().reply(&n);
                progressed = true;
            }
        }
        if s.output_idle() && at_writer.is_empty() {
            if let Some(batch) = held.take() {
                write_answers(&mut s, answer_reads(client, &reader, &batch, sh));
                progressed = true;
            }
        }
        let can_take = s.output_idle() && held.is_none() && at_writer.len() < RING_PIPELINE;
        if can_take {
            let mut batch: Vec<Box<[u8]>> = Vec::new();
            while batch.len() < BATCH_DATAGRAMS {
                match s.next_request() {
                    Ok(Some(r)) => batch.push(r.bytes),
                    Ok(None) => break,
                    Err(e) => return disconnected(e),
                }
            }
            if !batch.is_empty() {
                progressed = true;
                if !all_read_only(&batch) {
                    at_writer.push_back(sh.send_requests(client, batch, true, read_only)?);
                } else if at_writer.is_empty() {
                    write_answers(&mut s, answer_reads(client, &reader, &batch, sh));
                } else {
                    held = Some(batch);
                }
            }
        }
        if progressed {
            continue;
        }
        // Asleep until the writer answers (it signals `wake`), a notification, shutdown, or
        // (when the ring has something to do for this thread) the client's doorbell; for a
        // while without the doorbell when the client rang it for nothing too often.
        let wants_ring = can_take || !s.output_idle();
        let throttle = s.throttle().filter(|_| wants_ring);
        let ring = if wants_ring && throttle.is_none() {
            if !s.prepare_to_sleep() {
                continue;
            }
            s.poll_fds()
        } else {
            // Waiting only for the writer, or throttled: the ring's doorbell is not armed,
            // but a hang-up of the socket still ends the session.
            let mut fds = s.poll_fds();
            fds[0].events = 0;
            fds
        };
        let mut fds = [
            ring[0],
            ring[1],
            sys::pollfd(client.wake.fd(), libc::POLLIN),
            sys::pollfd(sh.shutdown.fd(), libc::POLLIN),
        ];
        sys::poll(&mut fds, throttle)?;
        if fds[3].revents != 0 {
            return Ok(());
        }
        if fds[2].revents != 0 {
            client.wake.drain();
        }
        if let Err(e) = s.after_wake(&[fds[0], fds[1]]) {
            return disconnected(e);
        }
    }
}

/// Senders on the datagram socket that joined multicast groups, at most this many; a
/// membership request beyond it is refused (ENOSPC), so memberships cost bounded memory.
const DGRAM_MEMBERS: usize = 256;

/// A datagram sender that joined groups: its own client (groups, bounded note queue) and
/// its address, where notifications are sent.
struct DgramMember {
    key: String,
    to: UnixAddr,
    client: Arc<Client>,
}

/// Whether `datagram` holds a membership request (fibre's FIBRE_MEMBERSHIP message).
fn has_membership(datagram: &[u8]) -> bool {
    fibre_netlink::Messages::new(datagram)
        .map_while(Result::ok)
        .any(|(_, m)| m.header.message_type == fibre_proto::membership::FIBRE_MEMBERSHIP)
}

/// Bytes of complete messages and number of dumps among `replies`.
fn held<'a>(replies: impl Iterator<Item = &'a Reply>) -> (usize, usize) {
    replies.fold((0, 0), |(b, d), r| match r {
        Reply::Messages(m) => (b + m.len(), d),
        Reply::Dump(_) => (b, d + 1),
    })
}

/// What is waiting for one datagram sender: answers, then (for a member) its notifications,
/// sent as its receive queue takes them.
struct Pending {
    key: String,
    to: UnixAddr,
    /// The client the sender's requests were answered as: its port stamps an ENOBUFS report,
    /// and a member's notifications are taken from it.
    client: Arc<Client>,
    member: bool,
    answers: Answers,
    notes: VecDeque<Arc<[u8]>>,
    datagram: Vec<u8>,
    /// `datagram` holds one the sender had no room for yet.
    unsent: bool,
    /// Answers were dropped for the bounds: one ENOBUFS follows the rest.
    overrun: bool,
    /// It was not sent to for [`DGRAM_UNREAD`]: its receive queue is to be looked at.
    unread_full: bool,
    /// When the sender last took a datagram, or began to wait.
    progress: Instant,
    retry_at: Instant,
    backoff: Duration,
}

/// What [`Pending::send`] achieved.
enum Sent {
    /// Everything is sent.
    Done,
    /// More is waiting: the sender's queue is full, or its turn is over.
    More,
    /// The sender is gone (its socket closed or unbound).
    Gone,
}

impl Pending {
    fn new(key: String, to: UnixAddr, client: Arc<Client>) -> Pending {
        let now = Instant::now();
        Pending {
            key,
            to,
            client,
            member: false,
            answers: Answers::new(DATAGRAM_BYTES),
            notes: VecDeque::new(),
            datagram: Vec::new(),
            unsent: false,
            overrun: false,
            unread_full: false,
            progress: now,
            retry_at: now,
            backoff: DGRAM_RETRY_MIN,
        }
    }

    /// Queues answers within [`DGRAM_PENDING_BYTES`] and [`DGRAM_PENDING_DUMPS`]; beyond
    /// them they are dropped, and the sender learns of it by ENOBUFS.
    fn queue(&mut self, replies: Vec<Reply>) {
        let (bytes, dumps) = self.answers.held();
        let (more_bytes, more_dumps) = held(replies.iter());
        if bytes + more_bytes > DGRAM_PENDING_BYTES || dumps + more_dumps > DGRAM_PENDING_DUMPS {
            if !self.overrun {
                tracing::info!(to = %self.key, "datagram client not reading; answers dropped");
            }
            self.overrun = true;
            return;
        }
        self.answers.queue.extend(replies);
    }

    /// Sends what the sender's queue takes, at most [`DGRAM_TURN`] datagrams and while it
    /// has less than [`DGRAM_UNREAD`] bytes `unread`; when it is full, schedules the next try.
    fn send(&mut self, fd: &OwnedFd, unread: &mut usize) -> Sent {
        for _ in 0..DGRAM_TURN {
            if !self.unsent && !self.next() {
                return Sent::Done;
            }
            self.unsent = true;
            self.unread_full = *unread + self.datagram.len() > DGRAM_UNREAD;
            let sent = if self.unread_full {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                sys::send_to(fd.as_fd(), &self.datagram, &self.to, libc::MSG_DONTWAIT)
            };
            match sent {
                Ok(_) => {
                    *unread += self.datagram.len();
                    self.unsent = false;
                    self.progress = Instant::now();
                    self.backoff = DGRAM_RETRY_MIN;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.retry_at = Instant::now() + self.backoff;
                    self.backoff = (self.backoff * 2).min(DGRAM_RETRY_MAX);
                    return Sent::More;
                }
                Err(_) => return Sent::Gone,
            }
        }
        self.retry_at = Instant::now();
        Sent::More
    }

    /// Takes the next datagram into `datagram`: answers, the ENOBUFS report, notifications.
    fn next(&mut self) -> bool {
        if self.answers.next_datagram(&mut self.datagram) {
            return true;
        }
        if std::mem::take(&mut self.overrun) {
            self.datagram = enobufs(self.client.port);
            return true;
        }
        if self.notes.is_empty() && self.member {
            self.notes.extend(self.client.take_notes());
        }
        let Some(n) = self.notes.pop_front() else {
            return false;
        };
        self.datagram.clear();
        self.datagram.extend_from_slice(&n);
        true
    }
}

/// The pending entry of sender `key`, made if there is none; a new one beyond
/// [`DGRAM_PENDING_SENDERS`] evicts the one that waits longest.
fn pending_for<'a>(
    pending: &'a mut Vec<Pending>,
    key: &str,
    to: UnixAddr,
    client: &Arc<Client>,
) -> &'a mut Pending {
    let i = match pending.iter().position(|p| p.key == key) {
        Some(i) => i,
        None => {
            if pending.len() >= DGRAM_PENDING_SENDERS {
                let old = pending.remove(0);
                tracing::info!(to = %old.key, "datagram client not reading; answers dropped for a newer one");
            }
            pending.push(Pending::new(key.to_owned(), to, client.clone()));
            pending.len() - 1
        }
    };
    &mut pending[i]
}

/// Sends what is due to one pending sender; false when it is done with (all sent, gone, or
/// stalled longer than [`DGRAM_STALL`]), with its key in `gone` when the sender is gone.
fn service(
    p: &mut Pending,
    fd: &OwnedFd,
    now: Instant,
    unread: &mut HashMap<String, usize>,
    gone: &mut Vec<String>,
) -> bool {
    if p.retry_at <= now {
        let n = unread.entry(p.key.clone()).or_default();
        match p.send(fd, n) {
            Sent::Done => return false,
            Sent::More => {}
            Sent::Gone => {
                gone.push(p.key.clone());
                return false;
            }
        }
    }
    if now.saturating_duration_since(p.progress) > DGRAM_STALL {
        tracing::info!(to = %p.key, idle_ms = now.saturating_duration_since(p.progress).as_millis(), "datagram client not reading; answers dropped");
        return false;
    }
    true
}

/// The datagram socket: each datagram is answered to its sender's address. Unbound senders
/// cannot be answered and are skipped. Senders share one anonymous client until one sends a
/// membership request: it then gets a client of its own, kept by its address, and its
/// notifications are sent to that address. Nothing here waits for a sender: what its
/// receive queue cannot take yet waits in its [`Pending`] entry (bounded; see the DGRAM_
/// constants), retried with back-off while the other senders are served; a send that fails
/// for another reason than a full queue drops the entry and ends the membership (the sender
/// is gone). Each datagram's credentials decide whether it may change the state.
fn serve_dgram(fd: OwnedFd, sh: &Shared) -> io::Result<()> {
    let shared = sh.new_client(None, None)?;
    let reader = sh.reader();
    let mut members: Vec<DgramMember> = Vec::new();
    // Oldest first.
    let mut pending: Vec<Pending> = Vec::new();
    let mut gone: Vec<String> = Vec::new();
    // Bytes sent to each client that it may not have read (see DGRAM_UNREAD), by the socket
    // path the client chose: std's SipHash, seeded per map.
    let mut unread: HashMap<String, usize> = HashMap::new();
    let mut forgotten = Instant::now();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let now = Instant::now();
        let timeout = pending
            .iter()
            .map(|p| p.retry_at.saturating_duration_since(now))
            .min();
        let mut fds = vec![
            sys::pollfd(fd.as_fd(), libc::POLLIN),
            sys::pollfd(sh.shutdown.fd(), libc::POLLIN),
        ];
        fds.extend(
            members
                .iter()
                .map(|m| sys::pollfd(m.client.wake.fd(), libc::POLLIN)),
        );
        sys::poll(&mut fds, timeout)?;
        if fds[1].revents != 0 {
            return Ok(());
        }
        for (m, p) in members.iter().zip(&fds[2..]) {
            if p.revents != 0 {
                m.client.wake.drain();
                pending_for(&mut pending, &m.key, m.to, &m.client).member = true;
            }
        }
        let mut received = 0;
        while fds[0].revents != 0 && received < BATCH_DATAGRAMS {
            let got = match sys::recv_from_credentials(fd.as_fd(), &mut buf) {
                Ok(g) => g,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            };
            received += 1;
            if !got.from.is_named() {
                tracing::debug!("datagram from an unbound socket ignored");
                continue;
            }
            let req: Box<[u8]> = buf[..got.len.min(buf.len())].into();
            let read_only = !got.credentials.is_some_and(|c| sh.access.may_change(&c));
            let key = got.from.describe();
            let mut member = members.iter().position(|m| m.key == key);
            if member.is_none() && has_membership(&req) {
                if members.len() >= DGRAM_MEMBERS {
                    tracing::info!(to = %key, "datagram memberships full");
                    let e = fibre_proto::convert::RequestError::from(fibre_fib::RtError::new(
                        fibre_fib::Errno::ENOSPC,
                    ));
                    let answer = fibre_proto::convert::ack(&req, Err(&e), false, 0).to_bytes();
                    pending_for(&mut pending, &key, got.from, &shared)
                        .queue(vec![Reply::Messages(answer)]);
                    continue;
                }
                members.push(DgramMember {
                    key: key.clone(),
                    to: got.from,
                    client: sh.new_client(None, None)?,
                });
                member = Some(members.len() - 1);
            }
            let client = member.map_or(&shared, |i| &members[i].client).clone();
            let replies = sh.submit(&client, &reader, vec![req], read_only)?;
            let still_member = match member {
                Some(i) if client.groups.load(Ordering::Relaxed) == 0 => {
                    members.swap_remove(i);
                    false
                }
                m => m.is_some(),
            };
            let p = pending_for(&mut pending, &key, got.from, &client);
            p.client = client;
            p.member = still_member;
            p.queue(replies);
        }
        let now = Instant::now();
        let look = pending.iter().any(|p| p.unread_full && p.retry_at <= now)
            || (unread.len() > DGRAM_TRACKED && now >= forgotten + DGRAM_FORGET_EVERY);
        if look {
            forget_read(&mut unread);
            forgotten = now;
        }
        pending.retain_mut(|p| service(p, &fd, now, &mut unread, &mut gone));
        if !gone.is_empty() {
            members.retain(|m| !gone.contains(&m.key));
            gone.clear();
        }
    }
}

/// Forgets the unread bytes of the clients whose receive queue is empty, or that are gone.
/// Without socket diagnostics every count is forgotten: clients are then bounded by the
/// send buffer alone, as they would be without the counts.
fn forget_read(unread: &mut HashMap<String, usize>) {
    let mut waiting = std::collections::HashSet::new();
    match sys::unix_dgram_queues(|name, queued| {
        if queued && unread.contains_key(&name) {
            waiting.insert(name);
        }
    }) {
        Ok(()) => unread.retain(|k, _| waiting.contains(k)),
        Err(e) => {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| {
                tracing::warn!(error = %e, "no socket diagnostics; datagram clients bounded by the send buffer only")
            });
            unread.clear();
        }
    }
}

/// Blocks SIGTERM and SIGINT in this thread and the threads started after it.
pub fn block_termination_signals() -> io::Result<()> {
    sys::block_termination_signals()
}

/// Waits for SIGTERM or SIGINT; returns the signal number.
pub fn wait_termination() -> i32 {
    sys::wait_termination()
}
