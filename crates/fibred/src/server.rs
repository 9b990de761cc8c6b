//! The daemon's threads: one writer owning the [`Engine`], one thread per connected client,
//! one for the datagram socket, and the acceptor.
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

use crate::engine::{self, fit, ClientCtx, DumpStream, Engine, Outcome, Prepared, Reply};
use crate::log::Level;
use crate::state;
use crate::sys::{self, EventFd, UnixAddr};
use crate::view::FibReader;
use fibre_ring::server::{Limits, Session};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
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
/// How long the datagram socket keeps trying to hand a dump datagram to a client whose queue
/// is full before it gives up on that dump.
const DGRAM_SEND_PATIENCE: Duration = Duration::from_secs(1);
/// Connections the SOCK_SEQPACKET socket queues before the acceptor takes them; the kernel
/// caps it at net.core.somaxconn.
const LISTEN_BACKLOG: i32 = 128;

/// What to serve and where.
#[derive(Debug, Clone)]
pub struct Config {
    /// The SOCK_SEQPACKET socket (netlink datagrams and the ring).
    pub socket: PathBuf,
    /// The SOCK_DGRAM socket; `None` serves none.
    pub dgram: Option<PathBuf>,
    /// Where the configuration is saved and restored.
    pub state: Option<PathBuf>,
}

impl Config {
    /// The datagram socket's path beside the sequenced-packet one: `X.sock` -> `X.dgram`.
    pub fn dgram_beside(socket: &Path) -> PathBuf {
        socket.with_extension("dgram")
    }
}

/// Where fibred listens when nothing says otherwise: $FIBRE_SOCKET, else
/// $XDG_RUNTIME_DIR/fibre/fibred.sock, else /run/fibre/fibred.sock.
pub fn default_socket() -> PathBuf {
    if let Some(p) = std::env::var_os("FIBRE_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|p| !p.is_empty())
        .map(|d| PathBuf::from(d).join("fibre"))
        .unwrap_or_else(|| PathBuf::from("/run/fibre"));
    dir.join("fibred.sock")
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
    fn new(port: u32) -> io::Result<Client> {
        Ok(Client {
            port,
            groups: AtomicU64::new(0),
            notes: Mutex::new(NoteQueue {
                msgs: VecDeque::new(),
                bytes: 0,
                overrun: false,
            }),
            wake: EventFd::new()?,
        })
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
    let e = fibre_netlink::convert::RequestError::from(fibre_fib::RtError::new(
        fibre_fib::Errno::ENOBUFS,
    ));
    let mut m = fibre_netlink::convert::ack(&header, Err(&e), true, port);
    m.header.sequence = 0;
    m.to_bytes()
}

enum Job {
    Register(Arc<Client>),
    Requests {
        client: Arc<Client>,
        datagrams: Vec<Prepared>,
        answer: mpsc::Sender<Vec<Reply>>,
        /// Signal the client's `wake` once the answers are sent (for a thread that polls
        /// instead of waiting on `answer`).
        wake: bool,
    },
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
}

impl Shared {
    fn new_client(&self, pid: Option<u32>) -> io::Result<Arc<Client>> {
        // The kernel's first netlink socket of a process gets the pid as port id; later ones
        // get other numbers. Ports only stamp answers here, so a counter disambiguates.
        let port = pid.unwrap_or_else(|| self.next_port.fetch_add(1, Ordering::Relaxed));
        let c = Arc::new(Client::new(port)?);
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
    ) -> io::Result<Vec<Reply>> {
        if all_read_only(&datagrams) {
            return Ok(answer_reads(client, reader, &datagrams));
        }
        self.send_requests(client, datagrams, false)?
            .recv()
            .map_err(|_| io::Error::other("writer stopped"))
    }

    /// Hands datagrams to the writer (their route changes read here first); the answers come
    /// on the returned channel, after the writer published their changes.
    fn send_requests(
        &self,
        client: &Arc<Client>,
        datagrams: Vec<Box<[u8]>>,
        wake: bool,
    ) -> io::Result<mpsc::Receiver<Vec<Reply>>> {
        let (tx, rx) = mpsc::channel();
        self.jobs
            .send(Job::Requests {
                client: client.clone(),
                datagrams: datagrams.into_iter().map(Prepared::new).collect(),
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
fn answer_reads(client: &Client, reader: &FibReader, datagrams: &[Box<[u8]>]) -> Vec<Reply> {
    let ctx = ClientCtx {
        port: client.port,
        groups: 0,
    };
    let mut out = Outcome::default();
    for d in datagrams {
        engine::handle_reads(reader, d, &ctx, &mut out);
    }
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
            .filter(|c| crate::groups::has(c.groups.load(Ordering::Relaxed), n.group))
        {
            c.push_note(&bytes);
        }
    }
}

/// The writer's GC: reclaims what has expired, publishes, and announces the routes removed
/// to every client listening. Returns whether the state changed. Runs when the earliest
/// deadline passes and before every batch of requests, so a request never reclaims an
/// expired route silently (mutations reclaim what is due before they act).
fn collect_garbage(engine: &mut Engine, clients: &[Weak<Client>]) -> bool {
    if engine.next_expiry().is_none_or(|d| !d.is_zero()) {
        return false;
    }
    let listening = clients
        .iter()
        .filter_map(Weak::upgrade)
        .fold(0, |m, c| m | c.groups.load(Ordering::Relaxed));
    let mut out = Outcome::default();
    engine.begin();
    engine.expire(listening, &mut out);
    engine.publish();
    fan_out(clients, out.notes);
    engine.catch_up();
    out.changed
}

/// The writer thread: applies jobs in order, fans out notifications, runs GC when routes
/// expire, keeps the state file.
fn writer(mut engine: Engine, jobs: mpsc::Receiver<Job>, state: Option<PathBuf>) {
    let mut clients: Vec<Weak<Client>> = Vec::new();
    let mut unsaved = state::SaveTimer::default();
    loop {
        if collect_garbage(&mut engine, &clients) {
            unsaved.changed(Instant::now());
        }
        let save_due = state.as_ref().and(unsaved.due());
        let gc_due = engine.next_expiry().map(|d| Instant::now() + d);
        let job = match save_due.into_iter().chain(gc_due).min() {
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
                };
                let mut out =
                    Outcome::for_requests(datagrams.iter().map(|d| d.bytes().len()).sum());
                engine.begin();
                for d in datagrams {
                    let listening = others | ctx.groups;
                    engine.handle_prepared(d, &mut ctx, listening, &mut out);
                }
                // Visible to every reader before anybody hears of it.
                engine.publish();
                client.groups.store(ctx.groups, Ordering::Relaxed);
                // The client may have gone; its answers then go nowhere.
                let _ = answer.send(std::mem::take(&mut out.replies));
                if wake {
                    client.wake.signal();
                }
                fan_out(&clients, std::mem::take(&mut out.notes));
                if out.changed {
                    unsaved.changed(Instant::now());
                }
                // While the clients read their answers.
                engine.catch_up();
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
        if let Some(path) = &config.state {
            let applied = state::load(&mut engine, path)?;
            state::check_writable(path)?;
            crate::log!(
                Level::Info,
                "state restored",
                path = path.display(),
                requests = applied
            );
        }
        prepare_path(&config.socket)?;
        let listener = sys::seqpacket_listen(&config.socket, LISTEN_BACKLOG)?;
        let dgram = match &config.dgram {
            Some(p) => {
                prepare_path(p)?;
                Some((sys::dgram_bind(p)?, p.clone()))
            }
            None => None,
        };
        let shutdown = Arc::new(EventFd::new()?);
        let (jobs, rx) = mpsc::sync_channel(JOB_QUEUE);
        let state = config.state.clone();
        let reader = Mutex::new(engine.reader());
        let writer = std::thread::Builder::new()
            .name("fibred-writer".into())
            .spawn(move || writer(engine, rx, state))?;
        let shared = Arc::new(Shared {
            jobs,
            shutdown: shutdown.clone(),
            next_port: AtomicU32::new(1 << 31),
            reader,
        });
        if let Some((fd, path)) = dgram {
            let sh = shared.clone();
            std::thread::Builder::new()
                .name("fibred-dgram".into())
                .spawn(move || {
                    if let Err(e) = serve_dgram(fd, &sh) {
                        crate::log!(
                            Level::Error,
                            "datagram socket failed",
                            path = path.display(),
                            error = e
                        );
                    }
                })?;
        }
        crate::log!(
            Level::Info,
            "listening",
            socket = config.socket.display(),
            dgram = config
                .dgram
                .as_deref()
                .map_or("-".into(), |p| p.display().to_string())
        );
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
        if sys::seqpacket_connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is in use by a running daemon", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    Ok(())
}

fn accept_loop(listener: &OwnedFd, shared: &Arc<Shared>) {
    loop {
        let mut fds = [
            sys::pollfd(listener.as_fd(), libc::POLLIN),
            sys::pollfd(shared.shutdown.fd(), libc::POLLIN),
        ];
        if let Err(e) = sys::poll(&mut fds, None) {
            crate::log!(Level::Error, "poll failed", error = e);
            return;
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents == 0 {
            continue;
        }
        let sock = match sys::accept(listener.as_fd()) {
            Ok(s) => s,
            Err(e) => {
                crate::log!(Level::Warn, "accept failed", error = e);
                continue;
            }
        };
        let sh = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("fibred-client".into())
            .spawn(move || {
                let pid = sys::peer_credentials(sock.as_fd()).ok().map(|c| c.pid);
                match serve_connection(sock, &sh, pid) {
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        crate::log!(Level::Debug, "client left", pid = pid.unwrap_or(0))
                    }
                    Ok(()) => crate::log!(Level::Debug, "client left", pid = pid.unwrap_or(0)),
                    Err(e) => crate::log!(
                        Level::Info,
                        "client dropped",
                        pid = pid.unwrap_or(0),
                        error = e
                    ),
                }
            });
        if let Err(e) = spawned {
            crate::log!(Level::Warn, "cannot start a client thread", error = e);
        }
    }
}

/// Reads one whole datagram without blocking: `Ok(None)` when none is waiting; a hang-up is
/// an error.
fn try_recv(sock: &OwnedFd) -> io::Result<Option<Box<[u8]>>> {
    let len = match sys::next_len(sock.as_fd(), libc::MSG_DONTWAIT) {
        Ok(0) => {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "client closed",
            ))
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

/// Waits for the first datagram, then serves the connection as a ring or as netlink.
fn serve_connection(sock: OwnedFd, sh: &Shared, pid: Option<u32>) -> io::Result<()> {
    sys::set_nonblocking(sock.as_fd(), true)?;
    let first = loop {
        if let Some(d) = try_recv(&sock)? {
            break d;
        }
        let mut fds = [
            sys::pollfd(sock.as_fd(), libc::POLLIN | libc::POLLRDHUP),
            sys::pollfd(sh.shutdown.fd(), libc::POLLIN),
        ];
        sys::poll(&mut fds, None)?;
        if fds[1].revents != 0 {
            return Ok(());
        }
    };
    let client = sh.new_client(pid)?;
    if fibre_ring::proto::is_setup_request(&first) {
        let session = Session::accept(sock, &first, Limits::default())
            .map_err(|e| io::Error::other(e.to_string()))?;
        crate::log!(
            Level::Debug,
            "ring client",
            pid = pid.unwrap_or(0),
            mapped = session.mapped_bytes()
        );
        return serve_ring(session, sh, &client);
    }
    crate::log!(Level::Debug, "socket client", pid = pid.unwrap_or(0));
    serve_socket(sock, first, sh, &client)
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

    /// The next datagram: consecutive messages that fit together, or a dump's next piece.
    fn next_datagram(&mut self, out: &mut Vec<u8>) -> bool {
        out.clear();
        while let Some(front) = self.queue.front_mut() {
            match front {
                Reply::Messages(m) => {
                    let rest = &m[self.sent..];
                    let n = fit(rest, self.limit - out.len());
                    if !out.is_empty() && out.len() + n > self.limit {
                        break;
                    }
                    out.extend_from_slice(&rest[..n]);
                    self.sent += n;
                    if self.sent < m.len() {
                        break;
                    }
                    self.sent = 0;
                    self.queue.pop_front();
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
                answers.queue.extend(sh.submit(client, &reader, batch)?);
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

fn serve_ring(mut s: Session, sh: &Shared, client: &Arc<Client>) -> io::Result<()> {
    let disconnected = |e: fibre_ring::SessionError| match e {
        fibre_ring::SessionError::Disconnected => Ok(()),
        fibre_ring::SessionError::Io(e) => Err(e),
    };
    let stopped = || io::Error::other("writer stopped");
    let reader = sh.reader();
    // Batches at the writer, oldest first; their answers are written in this order.
    let mut at_writer: VecDeque<mpsc::Receiver<Vec<Reply>>> = VecDeque::new();
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
                Ok(replies) => {
                    at_writer.pop_front();
                    write_answers(&mut s, replies);
                    progressed = true;
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
                write_answers(&mut s, answer_reads(client, &reader, &batch));
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
                    at_writer.push_back(sh.send_requests(client, batch, true)?);
                } else if at_writer.is_empty() {
                    write_answers(&mut s, answer_reads(client, &reader, &batch));
                } else {
                    held = Some(batch);
                }
            }
        }
        if progressed {
            continue;
        }
        // Asleep until the writer answers (it signals `wake`), a notification, shutdown, or
        // (when the ring has something to do for this thread) the client's doorbell.
        let ring = if can_take || !s.output_idle() {
            if !s.prepare_to_sleep() {
                continue;
            }
            s.poll_fds()
        } else {
            // Waiting only for the writer: the ring's doorbell is not armed, but a hang-up
            // of the socket still ends the session.
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
        sys::poll(&mut fds, None)?;
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
        .any(|(_, m)| m.header.message_type == crate::engine::FIBRE_MEMBERSHIP)
}

/// The datagram socket: each datagram is answered to its sender's address. Unbound senders
/// cannot be answered and are skipped. Senders share one anonymous client until one sends a
/// membership request: it then gets a client of its own, kept by its address, and its
/// notifications are sent to that address as the writer queues them (a send that fails for
/// a reason other than a full queue ends the membership: the sender is gone).
fn serve_dgram(fd: OwnedFd, sh: &Shared) -> io::Result<()> {
    let shared = sh.new_client(None)?;
    let reader = sh.reader();
    let mut members: Vec<DgramMember> = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut datagram = Vec::new();
    loop {
        let mut fds = vec![
            sys::pollfd(fd.as_fd(), libc::POLLIN),
            sys::pollfd(sh.shutdown.fd(), libc::POLLIN),
        ];
        fds.extend(
            members
                .iter()
                .map(|m| sys::pollfd(m.client.wake.fd(), libc::POLLIN)),
        );
        sys::poll(&mut fds, None)?;
        if fds[1].revents != 0 {
            return Ok(());
        }
        let woken: Vec<bool> = fds[2..].iter().map(|p| p.revents != 0).collect();
        members = std::mem::take(&mut members)
            .into_iter()
            .zip(woken.into_iter().chain(std::iter::repeat(false)))
            .filter_map(|(m, woke)| {
                if !woke {
                    return Some(m);
                }
                m.client.wake.drain();
                for note in m.client.take_notes() {
                    match sys::send_to(fd.as_fd(), &note, &m.to, libc::MSG_DONTWAIT) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(_) => return None,
                    }
                }
                Some(m)
            })
            .collect();
        if fds[0].revents == 0 {
            continue;
        }
        let (n, from) = match sys::recv_from(fd.as_fd(), &mut buf) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        if !from.is_named() {
            crate::log!(Level::Debug, "datagram from an unbound socket ignored");
            continue;
        }
        let req: Box<[u8]> = buf[..n.min(buf.len())].into();
        let key = from.describe();
        let mut member = members.iter().position(|m| m.key == key);
        if member.is_none() && has_membership(&req) {
            if members.len() >= DGRAM_MEMBERS {
                crate::log!(Level::Info, "datagram memberships full", to = key);
                let e = fibre_netlink::convert::RequestError::from(fibre_fib::RtError::new(
                    fibre_fib::Errno::ENOSPC,
                ));
                let answer = fibre_netlink::convert::ack(&req, Err(&e), false, 0).to_bytes();
                send_patiently(&fd, &answer, &from);
                continue;
            }
            members.push(DgramMember {
                key,
                to: from,
                client: sh.new_client(None)?,
            });
            member = Some(members.len() - 1);
        }
        let client = member.map_or(&shared, |i| &members[i].client);
        let mut answers = Answers::new(DATAGRAM_BYTES);
        answers.queue = sh.submit(client, &reader, vec![req])?.into();
        if let Some(i) = member {
            if members[i].client.groups.load(Ordering::Relaxed) == 0 {
                members.swap_remove(i);
            }
        }
        while answers.next_datagram(&mut datagram) {
            if !send_patiently(&fd, &datagram, &from) {
                crate::log!(
                    Level::Info,
                    "datagram client not reading; answer dropped",
                    to = from.describe()
                );
                break;
            }
        }
    }
}

fn send_patiently(fd: &OwnedFd, datagram: &[u8], to: &UnixAddr) -> bool {
    let deadline = Instant::now() + DGRAM_SEND_PATIENCE;
    loop {
        match sys::send_to(fd.as_fd(), datagram, to, libc::MSG_DONTWAIT) {
            Ok(_) => return true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => return false,
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
