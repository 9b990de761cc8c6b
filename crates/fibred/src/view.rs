//! The routing state as published to lock-free readers: a left-right pair of [`Fib`]s, through
//! `fibre-publish` (its module comment states the protocol: who may call what, the memory
//! orderings, what a reader may observe).
//!
//! # Publication
//! The [`FibWriter`] is owned by the daemon's writer thread, through the engine; readers
//! ([`FibReader`], one per client thread and one per route dump) read the published copy.
//! - A change ([`Change`]) is applied to the standby copy and logged, failed ones too: a failed
//!   request can leave what the kernel's would (a table it created), and the copies must be
//!   identical in everything, down to internal ids and [`Fib::gen`], not only in their answers.
//! - The engine publishes once per batch of requests, before it answers them, so a client that
//!   got its ACK reads its change, and a batch is seen whole or not at all.
//! - Reads must be short: one `route get`, one piece of a dump; never hold a guard while
//!   waiting for anything (the writer waits for them before it replays the log).
//!
//! The FIB is deterministic, so replaying the same changes on an equal copy yields an equal
//! copy, with the same results. Each copy's maps keyed by outsiders have their own random
//! hash seed (`fibre_fib::hash`), so the copies iterate those maps in different orders: the
//! FIB walks in key order wherever the order can reach an answer, a dump or an internal id,
//! and `both_copies_stay_equal_under_a_random_mix_of_changes` (below) compares the copies
//! after every catch-up. The one input from outside is the
//! clock (a route's `expires` becomes a deadline; a change first drops the routes already due):
//! each copy reads a [`CopyClock`] over one shared system clock. While the writer applies a
//! change, the standby copy's clock reads the system clock once, at the change's first read,
//! and keeps that time for the rest of the change; the writer logs it with the change and pins
//! the clock to it while it replays the change, so a replay later on sees the time the first
//! application saw. A change that never reads the clock (a route without `expires` while
//! nothing expires: a table load) costs no clock read at all.
//!
//! # Route changes read ahead
//! A table load is route changes that a client thread read ahead of the writer
//! ([`crate::engine::Prepared`]): a list of requests per datagram. The writer hands the whole
//! list to the log ([`FibWriter::keep`]) and applies each route change where it lies
//! ([`FibWriter::apply_read_ahead`]); the log names it by its place and the replay applies it
//! from there. A route (a few hundred bytes) is thus never moved on the writer. An add that
//! the FIB decided from its cache of validated next hops is logged with that decision
//! ([`RouteHint`]: the route info, the table and key, the generation it held at, where the
//! entry went among the key's and which entry then won), and the replay makes the same change
//! from it without checking the request or deciding the entry's place and winner again. A
//! kept list lives until the replay that follows the next publish has applied it, and the
//! newest one beyond that, since the engine may still be applying the rest of it; then the
//! writer hands it to a client thread to drop ([`FibWriter::take_spent`]).
//!
//! # Tables copied, not changed again
//! When the log ends with such adds (a table load is nearly nothing else), the replay makes
//! every other change first, then only what those adds change outside their tables (route
//! infos' references, generations), and copies each table they went to from the published
//! copy where that costs less than the adds: the places the table's arrays wrote since the
//! copies were last equal ([`Fib::copy_tables_at_end`], [`Fib::end_batch_from`]).

use fibre_dataplane::pipeline::{apply_events, Event};
use fibre_fib::types::{
    Address, Errno, Link, Neighbour, NexthopObj, ReqFlags, Route, RtError, Rule,
};
use fibre_fib::{Clock, ConfKey, ConfTarget, Fib, NudAction, RouteHint, Settings, SystemClock};
use fibre_proto::convert::{Request, RequestError};
use fibre_publish::{ReadGuard, Reader, Replica, Writer};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One change of the routing state, as logged for the standby copy.
#[derive(Debug, Clone)]
pub enum Change {
    NewRoute(Route, ReqFlags),
    DelRoute(Route),
    NewLink(Link, ReqFlags),
    DelLink(Link),
    NewAddr(Address, ReqFlags),
    DelAddr(Address),
    NewRule(Rule, ReqFlags),
    DelRule(Rule),
    NewNexthop(NexthopObj, ReqFlags),
    DelNexthop(u32),
    NewNeigh(Neighbour, ReqFlags),
    DelNeigh(Neighbour),
    /// Turns the recording of neighbour events on or off ([`Fib::set_neigh_events`]).
    RecordNeighEvents(bool),
    /// A GC pass as of this time on the FIB's clock ([`Fib::expire_at`]): the same routes go
    /// in both copies, however much later the replay runs.
    Expire(u64),
    /// What the data plane's workers learnt of neighbours (ARP and NDP heard, packets
    /// leaving through a neighbour), applied at `now` (nanoseconds on the workers' monotonic
    /// clock), as the kernel's NUD machine takes them.
    NeighEvents(Vec<Event>, u64),
    /// The neighbour timers due at this time (same clock) ([`Fib::neigh_timers`]).
    NeighTimers(u64),
    /// A setting written (`sysctl -w`, [`Fib::set_conf`]).
    SetConf(ConfTarget, ConfKey, i64),
    /// An SRH HMAC key set or deleted (`sr hmac set`, [`Fib::set_seg6_hmac`]).
    SetSeg6Hmac(u32, u8, Vec<u8>),
}

impl Change {
    /// Applies the change to `fib` through the FIB's entry point for it; what the neighbour
    /// states then ask of the data plane is appended to `actions`.
    pub fn apply(&self, fib: &mut Fib, actions: &mut Vec<NudAction>) -> Result<(), RtError> {
        match self {
            Change::NewRoute(r, f) => fib.route_new(r, *f),
            Change::DelRoute(r) => fib.route_del(r),
            Change::NewLink(l, f) => fib.link_new(l, *f),
            Change::DelLink(l) => fib.link_del(l),
            Change::NewAddr(a, f) => fib.addr_new(a, *f),
            Change::DelAddr(a) => fib.addr_del(a),
            Change::NewRule(r, f) => fib.rule_new(r, *f),
            Change::DelRule(r) => fib.rule_del(r),
            Change::NewNexthop(n, f) => fib.nexthop_new(n, *f),
            Change::DelNexthop(id) => fib.nexthop_del(*id),
            Change::NewNeigh(n, f) => fib.neigh_new(n, *f),
            Change::DelNeigh(n) => fib.neigh_del(n),
            Change::RecordNeighEvents(on) => {
                fib.set_neigh_events(*on);
                Ok(())
            }
            Change::Expire(now) => {
                fib.expire_at(*now);
                Ok(())
            }
            Change::NeighEvents(events, now) => {
                apply_events(fib, events.iter().copied(), *now, actions);
                Ok(())
            }
            Change::NeighTimers(now) => {
                fib.neigh_timers(*now, actions);
                Ok(())
            }
            Change::SetConf(target, key, value) => fib.set_conf(*target, *key, *value),
            Change::SetSeg6Hmac(id, algo, secret) => fib.set_seg6_hmac(*id, *algo, secret),
        }
    }
}

/// What a client thread read of a datagram's messages, in order (see
/// [`crate::engine::Prepared`]): the route changes, parsed.
pub type ReadAhead = Vec<Option<Result<Request, RequestError>>>;

/// The route change a read-ahead request makes: the route and, for an add, its flags.
fn route_change(req: &Option<Result<Request, RequestError>>) -> Option<(&Route, Option<ReqFlags>)> {
    match req {
        Some(Ok(Request::NewRoute(r, f))) => Some((r, Some(*f))),
        Some(Ok(Request::DelRoute(r))) => Some((r, None)),
        _ => None,
    }
}

/// Applies a route change; an add records in an empty `hint` what it looked up and uses a
/// recorded one (the replay into the other copy, which is equal).
fn apply_route_change(
    r: &Route,
    new: Option<ReqFlags>,
    hint: &mut RouteHint,
    fib: &mut Fib,
) -> Result<(), RtError> {
    match new {
        Some(f) => fib.route_new_hinted(r, f, hint),
        None => fib.route_del(r),
    }
}

/// One entry of the log (a few words: a read-ahead route change is a place, any other
/// change is in `FibWriter::changes`).
#[derive(Clone, Copy)]
enum Logged {
    /// The change at this index of `FibWriter::changes`.
    Change(u32),
    /// The route change at index `.1` of the kept read-ahead list numbered `.0`.
    ReadAhead(u64, u32, RouteHint),
}

/// The clock one copy reads: the daemon's system clock, except while the writer applies or
/// replays a change in that copy, when it holds one time for the whole change. Only the
/// standby copy is ever pinned, and only while no reader can be in it, so readers always see
/// the system time.
#[derive(Debug)]
struct CopyClock {
    system: Arc<SystemClock>,
    /// The pinned time in milliseconds, [`CopyClock::FREE`], or [`CopyClock::AT_FIRST_READ`].
    pinned: AtomicU64,
}

impl CopyClock {
    /// Not pinned: every read is the system time.
    const FREE: u64 = u64::MAX;
    /// Pinned to whatever the first read finds (which then pins it to that time).
    const AT_FIRST_READ: u64 = u64::MAX - 1;

    fn new(system: Arc<SystemClock>) -> CopyClock {
        CopyClock {
            system,
            pinned: AtomicU64::new(CopyClock::FREE),
        }
    }

    /// Runs `f` with the clock reading `now`, or (`None`) the system time of its first read.
    /// Returns what `f` returned and the time it read, if it read any.
    fn pinned_at<R>(&self, now: Option<u64>, f: impl FnOnce() -> R) -> (R, Option<u64>) {
        self.pinned
            .store(now.unwrap_or(CopyClock::AT_FIRST_READ), Ordering::Relaxed);
        let r = f();
        // Only the writer touches a pinned clock: a load and a store, not a swap.
        let read = match self.pinned.load(Ordering::Relaxed) {
            CopyClock::AT_FIRST_READ => None,
            t => Some(t),
        };
        self.pinned.store(CopyClock::FREE, Ordering::Relaxed);
        (r, read)
    }
}

impl Clock for CopyClock {
    fn now_ms(&self) -> u64 {
        match self.pinned.load(Ordering::Relaxed) {
            CopyClock::FREE => self.system.now_ms(),
            CopyClock::AT_FIRST_READ => {
                let t = self.system.now_ms();
                self.pinned.store(t, Ordering::Relaxed);
                t
            }
            t => t,
        }
    }
}

/// One copy of the published state: the FIB and the clock it reads. Derefs to the FIB.
pub struct FibCopy {
    fib: Fib,
    clock: Arc<CopyClock>,
}

impl std::ops::Deref for FibCopy {
    type Target = Fib;
    fn deref(&self) -> &Fib {
        &self.fib
    }
}

/// A change as the writer hands it to the standby copy: where it lies.
#[derive(Clone, Copy)]
pub enum Op {
    /// The change at this index of the log's changes.
    Change(u32),
    /// The route change at index `.1` of the kept read-ahead list numbered `.0`.
    ReadAhead(u64, u32),
}

/// The writer's log: what the standby copy has and the other lacks, and where it lies.
#[derive(Default)]
pub struct Log {
    /// The changes applied since the last publish, each with the time its application read
    /// (`None`: it read none); after a publish, the changes the new standby copy still lacks.
    entries: Vec<(Option<u64>, Logged)>,
    /// The changes `Logged::Change` entries name, in order ([`FibWriter::apply`] stores one
    /// here, then applies it from here).
    changes: Vec<Change>,
    /// Read-ahead lists whose route changes the log names, oldest first; the first is
    /// numbered `kept_base`.
    kept: VecDeque<ReadAhead>,
    kept_base: u64,
    /// What the neighbour states asked of the data plane in the changes' first application
    /// (the replay's are the same and dropped); the writer takes them.
    actions: Vec<NudAction>,
    /// Tables the replays copied from the published copy rather than changed again
    /// (`Fib::copy_tables_at_end`), for the tests.
    tables_copied: u64,
    /// Kept lists both copies have applied, for the caller to drop on a thread of its own
    /// ([`FibWriter::take_spent`]); a replay drops those nobody took since the last one.
    spent: Vec<ReadAhead>,
}

impl Log {
    /// Where the kept read-ahead list numbered `list` is in `kept`.
    fn kept_at(&self, list: u64) -> Option<usize> {
        usize::try_from(list.checked_sub(self.kept_base)?).ok()
    }
}

impl Replica for FibCopy {
    type Op = Op;
    type Output = Result<(), RtError>;
    type Log = Log;

    /// Applies the change and logs it with the time it read.
    fn apply(&mut self, op: Op, log: &mut Log) -> Result<(), RtError> {
        let mut logged = match op {
            Op::Change(i) => Logged::Change(i),
            Op::ReadAhead(list, at) => Logged::ReadAhead(list, at, RouteHint::default()),
        };
        let from = Sources {
            changes: &log.changes,
            kept: &log.kept,
            kept_base: log.kept_base,
        };
        let fib = &mut self.fib;
        let actions = &mut log.actions;
        let (r, now) = self
            .clock
            .pinned_at(None, || from.apply(&mut logged, fib, actions));
        log.entries.push((now, logged));
        r
    }

    /// Replays the log as one batch, each change at the time its first application read.
    fn replay(&mut self, log: &mut Log) {
        self.replay_ending(log, None);
    }

    /// `replay`, with what can be copied from the published copy copied: the tables a run
    /// of placed adds at the log's end changed (`Fib::copy_tables_at_end`) and the
    /// compiled structures (`Fib::end_batch_from`).
    fn replay_from(&mut self, log: &mut Log, published: &FibCopy) {
        self.replay_ending(log, Some(&published.fib));
    }
}

/// The IPv4 add's table when a logged change is one that a replay can make without
/// reading the table (see `Fib::copy_tables_at_end`): a read-ahead add placed by its hint
/// that read no clock.
fn placed_add(now: Option<u64>, logged: &Logged) -> Option<u32> {
    match (now, logged) {
        (None, Logged::ReadAhead(_, _, hint)) => hint.placed_table(),
        _ => None,
    }
}

impl FibCopy {
    /// Replays the log as one batch, ended by `Fib::end_batch_from(published)`, or by
    /// `Fib::end_batch` without one.
    fn replay_ending(&mut self, log: &mut Log, published: Option<&Fib>) {
        let fib = &mut self.fib;
        fib.begin_batch();
        let from = Sources {
            changes: &log.changes,
            kept: &log.kept,
            kept_base: log.kept_base,
        };
        // The placed adds that end the log (a table load is nearly all of them).
        let adds = log
            .entries
            .iter()
            .rev()
            .take_while(|(now, c)| placed_add(*now, c).is_some())
            .count();
        let first_add = log.entries.len() - adds;
        let (others, adds) = log.entries.split_at_mut(first_add);
        let mut actions = Vec::new();
        let mut replay = |entries: &mut [(Option<u64>, Logged)], fib: &mut Fib| {
            for (now, c) in entries {
                // The same result as on the other copy, which was equal, at the same time (a
                // change that read no time then reads none now: it takes the same path).
                let _ = self
                    .clock
                    .pinned_at(*now, || from.apply(c, fib, &mut actions));
                actions.clear();
            }
        };
        replay(others, fib);
        if let Some(p) = published {
            let tables = adds.iter().filter_map(|(now, c)| placed_add(*now, c));
            log.tables_copied += fib.copy_tables_at_end(p, tables) as u64;
        }
        for entry in adds {
            // The adds to copied tables from their hints alone (no request, no clock).
            if let (_, Logged::ReadAhead(_, _, hint)) = entry {
                if fib.route_replay_copied(hint) {
                    continue;
                }
            }
            replay(std::slice::from_mut(entry), fib);
        }
        log.entries.clear();
        log.changes.clear();
        // Every kept list is applied to both copies now; the newest may still be in use.
        log.spent.clear();
        while log.kept.len() > 1 {
            log.spent.extend(log.kept.pop_front());
            log.kept_base += 1;
        }
        match published {
            Some(p) => fib.end_batch_from(p),
            None => fib.end_batch(),
        }
    }
}

/// `FibCopy` is published to other threads only because `Fib` is `Send + Sync`; this fails to
/// compile otherwise.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<FibCopy>()
};

/// The single writer of the published state. Not `Clone`, not `Sync`.
pub struct FibWriter(Writer<FibCopy>);

/// A handle that reads the published state. `Send`, not `Sync`: one per thread.
pub type FibReader = Reader<FibCopy>;

/// The published state as of one publish, valid until dropped.
pub type FibGuard<'a> = ReadGuard<'a, FibCopy>;

impl FibWriter {
    /// Publishes a fresh state with `settings` (both copies start as fresh FIBs, which are
    /// equal; any other starting state is reached by applying changes).
    pub fn new(settings: Settings) -> FibWriter {
        let system = Arc::new(SystemClock::new());
        let copy = || {
            let clock = Arc::new(CopyClock::new(system.clone()));
            let mut fib = Fib::new(settings.clone());
            fib.set_clock(clock.clone());
            FibCopy { fib, clock }
        };
        FibWriter(Writer::from_copies(copy(), copy()))
    }

    /// A new reader of the published state.
    pub fn reader(&self) -> FibReader {
        self.0.reader()
    }

    /// The newest state, published or not (for the writer's own reads).
    pub fn latest(&self) -> &Fib {
        &self.0.latest().fib
    }

    /// Applies `change` to the standby copy (made current first) and logs it.
    pub fn apply(&mut self, change: Change) -> Result<(), RtError> {
        self.0.catch_up();
        let changes = &mut self.0.log_mut().changes;
        // Stored first and applied from there: a change can be a few hundred bytes.
        let Ok(i) = u32::try_from(changes.len()) else {
            return Err(RtError::new(Errno::ENOBUFS));
        };
        changes.push(change);
        self.0.apply(Op::Change(i))
    }

    /// Keeps a read-ahead list for [`FibWriter::apply_read_ahead`] (the standby copy is made
    /// current first); returns its number.
    pub fn keep(&mut self, list: ReadAhead) -> u64 {
        self.0.catch_up();
        let log = self.0.log_mut();
        log.kept.push_back(list);
        log.kept_base + log.kept.len() as u64 - 1
    }

    /// The route change at `at` of the kept list `list`: the route and, for an add, its
    /// flags; `None` when that request is no route change (or was taken).
    pub fn read_ahead(&self, list: u64, at: usize) -> Option<(&Route, Option<ReqFlags>)> {
        let log = self.0.log();
        route_change(log.kept.get(log.kept_at(list)?)?.get(at)?)
    }

    /// Takes the request at `at` of the kept list `list` out of it, for a request that is no
    /// route change ([`FibWriter::read_ahead`] is `None`) and is handled like any other.
    pub fn take_read_ahead(
        &mut self,
        list: u64,
        at: usize,
    ) -> Option<Result<Request, RequestError>> {
        let log = self.0.log_mut();
        let slot = log.kept.get_mut(log.kept_at(list)?)?.get_mut(at)?;
        // A route change stays: the log may name it.
        if route_change(slot).is_some() {
            return None;
        }
        slot.take()
    }

    /// Applies the route change at `at` of the kept list `list` to the standby copy where it
    /// lies, and logs its place. EINVAL (nothing applied, nothing logged) when that request
    /// is no route change: callers check with [`FibWriter::read_ahead`] first.
    pub fn apply_read_ahead(&mut self, list: u64, at: usize) -> Result<(), RtError> {
        self.0.catch_up();
        let (Some(_), Ok(at32)) = (self.read_ahead(list, at), u32::try_from(at)) else {
            return Err(RtError::new(Errno::EINVAL));
        };
        self.0.apply(Op::ReadAhead(list, at32))
    }

    /// Runs `f` on the standby copy; for changes that are not [`Change`]s, such as starting
    /// and ending a batch, which change no answer.
    pub fn with_standby<R>(&mut self, f: impl FnOnce(&mut Fib) -> R) -> R {
        self.0.with_standby(|c| f(&mut c.fib))
    }

    /// Takes what the neighbour states asked of the data plane in the changes applied since
    /// the last call.
    pub fn take_actions(&mut self) -> Vec<NudAction> {
        std::mem::take(&mut self.0.log_mut().actions)
    }

    /// Takes the read-ahead lists the last replay finished with: a table load's requests,
    /// which the writer would otherwise spend time dropping.
    pub fn take_spent(&mut self) -> Vec<ReadAhead> {
        std::mem::take(&mut self.0.log_mut().spent)
    }

    /// How many tables the replays so far copied from the published copy rather than
    /// changed again ([`Fib::copy_tables_at_end`]).
    pub fn tables_copied(&self) -> u64 {
        self.0.log().tables_copied
    }

    /// Makes every change so far visible to readers (no-op when there is none).
    pub fn publish(&mut self) {
        self.0.publish()
    }

    /// Brings the standby copy up to date: waits for the reads still on it, then replays the
    /// changes it lacks. Called by every change (lazily); the daemon calls it once its answers
    /// are out, so the wait and the replay overlap with its clients' work.
    pub fn catch_up(&mut self) {
        self.0.catch_up()
    }
}

/// Where the log's entries are: the writer's changes and kept read-ahead lists.
struct Sources<'a> {
    changes: &'a [Change],
    kept: &'a VecDeque<ReadAhead>,
    /// The number of the first kept list.
    kept_base: u64,
}

impl Sources<'_> {
    /// Applies the change a log entry names to `fib`.
    fn apply(
        &self,
        logged: &mut Logged,
        fib: &mut Fib,
        actions: &mut Vec<NudAction>,
    ) -> Result<(), RtError> {
        match logged {
            Logged::Change(i) => match self.changes.get(*i as usize) {
                Some(c) => c.apply(fib, actions),
                None => Err(RtError::new(Errno::EINVAL)),
            },
            Logged::ReadAhead(list, at, hint) => {
                let change = list
                    .checked_sub(self.kept_base)
                    .and_then(|l| usize::try_from(l).ok())
                    .and_then(|l| self.kept.get(l)?.get(*at as usize))
                    .and_then(route_change);
                match change {
                    Some((r, new)) => apply_route_change(r, new, hint, fib),
                    // `apply_read_ahead` logs route changes only, and they stay in their
                    // list until both copies have them.
                    None => Err(RtError::new(Errno::EINVAL)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fibre_fib::types::{Family, LinkKind, Prefix, RouteQuery, RouteType};
    use fibre_fib::{Learn, Override};
    use std::net::{IpAddr, Ipv4Addr};

    /// Batches of churn the writer publishes, one at a time.
    const BATCHES: u32 = 150;
    /// The routes of table 100 count the published batches.
    const MARKS: u32 = 100;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    fn route(dst: IpAddr, len: u8, gw: Option<IpAddr>) -> Route {
        let mut r = Route::new(Family::Inet, Prefix { addr: dst, len });
        r.nexthop.gateway = gw;
        r
    }

    fn setup() -> Vec<Change> {
        vec![
            Change::NewLink(
                Link {
                    ifname: Some("d0".into()),
                    kind: Some(LinkKind::Dummy),
                    flags: 1,
                    change: 1,
                    ..Link::default()
                },
                ReqFlags::ADD,
            ),
            Change::NewAddr(
                Address {
                    family: Family::Inet,
                    prefixlen: 16,
                    flags: 0,
                    scope: 0,
                    ifindex: 2,
                    local: Some(v4(10, 128, 0, 1)),
                    address: Some(v4(10, 128, 0, 1)),
                    broadcast: None,
                    label: None,
                    metric: None,
                    valid_lft: None,
                    preferred_lft: None,
                },
                ReqFlags::ADD,
            ),
        ]
    }

    /// Batch `n` (from 1): adds 10.0.n.0/24, deletes the one added five batches earlier,
    /// moves 10.99.0.0/16 to the other gateway, and adds one marker route to table 100.
    fn batch(n: u32) -> Vec<Change> {
        let gw = |i: u32| Some(v4(10, 128, 0, 2 + (i % 2) as u8));
        let mut v = vec![Change::NewRoute(
            route(v4(10, 0, n as u8, 0), 24, gw(n)),
            ReqFlags::ADD,
        )];
        if n > 5 {
            v.push(Change::DelRoute(route(
                v4(10, 0, (n - 5) as u8, 0),
                24,
                None,
            )));
        }
        v.push(Change::NewRoute(
            route(v4(10, 99, 0, 0), 16, gw(n)),
            ReqFlags::REPLACE,
        ));
        let mut mark = route(v4(172, 16, (n >> 8) as u8, n as u8), 32, None);
        mark.rtype = RouteType::Blackhole;
        mark.table = MARKS;
        v.push(Change::NewRoute(mark, ReqFlags::ADD));
        v
    }

    fn probes() -> Vec<RouteQuery> {
        (0..BATCHES as u8)
            .map(|k| RouteQuery::to(v4(10, 0, k, 1)))
            .chain([RouteQuery::to(v4(10, 99, 1, 1))])
            .collect()
    }

    /// (batches published, answers to the probes) as one state shows them.
    fn observe(fib: &Fib, probes: &[RouteQuery]) -> (usize, Vec<String>) {
        let marks = fib
            .routes(Some(Family::Inet))
            .iter()
            .filter(|r| r.table == MARKS)
            .count();
        let answers = probes
            .iter()
            .map(|q| format!("{:?}", fib.route_get(q)))
            .collect();
        (marks, answers)
    }

    /// A change replayed into the other copy later on sees the time it was first applied at:
    /// an expiring route gets the same deadline in both copies.
    #[test]
    fn a_replay_sees_the_time_of_the_first_application() {
        let mut w = FibWriter::new(Settings::default());
        for c in setup() {
            w.apply(c).unwrap();
        }
        let mut r = route(v4(10, 7, 0, 0), 16, Some(v4(10, 128, 0, 2)));
        r.expires = Some(100);
        w.apply(Change::NewRoute(r, ReqFlags::ADD)).unwrap();
        w.publish();
        let deadline = w.reader().read().next_expiry();
        assert!(deadline.is_some());
        // Long enough for the system clock to move several milliseconds.
        std::thread::sleep(std::time::Duration::from_millis(30));
        w.catch_up();
        assert_eq!(w.latest().next_expiry(), deadline);
    }

    /// A small deterministic generator (xorshift64*), so a failure replays.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        }
    }

    fn nexthop(id: u32, gw: IpAddr, oif: u32) -> NexthopObj {
        NexthopObj {
            id,
            family: Some(Family::Inet),
            gateway: Some(gw),
            oif,
            ..NexthopObj::default()
        }
    }

    /// A random change of links, addresses, next-hop objects, rules, expiry or neighbours
    /// as the data plane reports them (failures included: deleting what is absent, adding
    /// what exists, next hops on missing links, neighbours on missing links).
    fn object_change(rng: &mut Rng, now: u64) -> Change {
        let link = rng.below(2) as u8;
        let ifindex = 2 + u32::from(link);
        let net = 128 + link;
        let up = if rng.below(4) == 0 { 0 } else { 1 };
        match rng.below(11) {
            0 => Change::NewLink(
                Link {
                    ifname: Some(format!("d{link}")),
                    kind: Some(LinkKind::Dummy),
                    flags: up,
                    change: 1,
                    ..Link::default()
                },
                if rng.below(2) == 0 {
                    ReqFlags::ADD
                } else {
                    ReqFlags::NONE
                },
            ),
            1 => Change::DelLink(Link {
                ifindex,
                ..Link::default()
            }),
            2 | 3 => {
                let host = 1 + rng.below(2) as u8;
                let a = Address {
                    family: Family::Inet,
                    prefixlen: 16,
                    flags: 0,
                    scope: 0,
                    ifindex,
                    local: Some(v4(10, net, 0, host)),
                    address: Some(v4(10, net, 0, host)),
                    broadcast: None,
                    label: None,
                    metric: None,
                    valid_lft: None,
                    preferred_lft: None,
                };
                if rng.below(3) == 0 {
                    Change::DelAddr(a)
                } else {
                    Change::NewAddr(a, ReqFlags::ADD)
                }
            }
            4 => Change::NewNexthop(
                nexthop(
                    1 + rng.below(3) as u32,
                    v4(10, net, 0, 2 + rng.below(3) as u8),
                    ifindex,
                ),
                ReqFlags::ADD,
            ),
            5 => Change::DelNexthop(1 + rng.below(3) as u32),
            6 | 7 => {
                let mut r = Rule::new(Family::Inet, 100 + rng.below(2) as u32);
                r.dst = Some(Prefix {
                    addr: v4(10, rng.below(4) as u8, 0, 0),
                    len: 16,
                });
                r.priority = Some(1000 + rng.below(3) as u32);
                if rng.below(2) == 0 {
                    Change::NewRule(r, ReqFlags::ADD)
                } else {
                    Change::DelRule(r)
                }
            }
            8 => Change::Expire(now + rng.below(4000)),
            9 => {
                let addr = v4(10, net, 0, 2 + rng.below(3) as u8);
                let event = if rng.below(2) == 0 {
                    Event::Used { oif: ifindex, addr }
                } else {
                    Event::Learned(fibre_dataplane::neigh::Learned {
                        ifindex,
                        addr,
                        lladdr: [2, 0, 0, 0, net, rng.below(2) as u8],
                        how: [Learn::Confirmed, Learn::Unconfirmed][rng.below(2) as usize],
                        create: rng.below(2) == 0,
                        override_ll: Override::Always,
                    })
                };
                // The workers' clock: nanoseconds, a second per millisecond of `now`'s.
                Change::NeighEvents(vec![event], now * 1_000_000)
            }
            _ => Change::NeighTimers((now + rng.below(4000)) * 1_000_000),
        }
    }

    /// A random route change: adds (plain, through next-hop objects, expiring unless
    /// `!expiring`, local), replaces, appends and deletes over a few prefixes, tables and
    /// gateways, many of them refused (EEXIST, ESRCH, an unreachable gateway, a missing
    /// next-hop object).
    fn route_request(rng: &mut Rng, expiring: bool) -> Request {
        let dst = v4(10, rng.below(4) as u8, rng.below(8) as u8, 0);
        let gw = v4(10, 128 + rng.below(3) as u8, 0, 2 + rng.below(3) as u8);
        let mut r = route(dst, 24, Some(gw));
        r.table = [0, 100, 101][rng.below(3) as usize];
        match rng.below(8) {
            0 => {
                r.nexthop.gateway = None;
                r.nhid = Some(1 + rng.below(3) as u32);
            }
            1 if expiring => r.expires = Some(1 + rng.below(3) as u32),
            2 => r.priority = Some(rng.below(3) as u32),
            3 => {
                r.nexthop.gateway = None;
                r.rtype = RouteType::Blackhole;
            }
            _ => {}
        }
        let flags = match rng.below(6) {
            0 => ReqFlags::REPLACE,
            1 => ReqFlags {
                append: true,
                ..ReqFlags::ADD
            },
            _ => ReqFlags::ADD,
        };
        if rng.below(4) == 0 {
            Request::DelRoute(r)
        } else {
            Request::NewRoute(r, flags)
        }
    }

    /// A table that grows large, shrinks back to intervals and grows large again, beside
    /// one that stays small: the second copy's compiled structures, copied from the
    /// published one while large (`Fib::end_batch_from`) and computed at and below the
    /// switches, answer every lookup as the published copy does after every catch-up.
    #[test]
    fn copied_large_tables_answer_as_the_published_copy() {
        let mut w = FibWriter::new(Settings::default());
        for c in setup() {
            w.apply(c).unwrap();
        }
        // /24s numbered i in main, each tenth with a /28 and a /32 inside it (nodes
        // below the direct level), the first of each /16 with that /16; a few in table 100.
        let routes_of = |i: u32| -> Vec<Route> {
            let (b, c) = ((i >> 8) as u8 & 63, i as u8);
            let gw = Some(v4(10, 128, 0, 2 + (i % 3) as u8));
            let mut rs = vec![route(v4(11, b, c, 0), 24, gw)];
            if i.is_multiple_of(10) {
                rs.push(route(v4(11, b, c, 16), 28, gw));
                rs.push(route(v4(11, b, c, 33), 32, gw));
            }
            if c == 0 {
                rs.push(route(v4(11, b, 0, 0), 16, gw));
            }
            for r in &mut rs {
                r.table = if i.is_multiple_of(97) { 100 } else { 0 };
            }
            rs
        };
        // Numbers added (true) or deleted (false) in each published batch: up past
        // COMPILE_LARGE_AT keys, down below its quarter, up again.
        let mut rounds: Vec<(std::ops::Range<u32>, bool)> = Vec::new();
        rounds.extend((0..6).map(|k| (300 * k..300 * (k + 1), true)));
        rounds.extend((0..6).map(|k| (300 * k..300 * (k + 1), false)));
        rounds.extend((0..5).map(|k| (2000 + 400 * k..2000 + 400 * (k + 1), true)));
        let probes: Vec<IpAddr> = (0..3000u32)
            .map(|i| {
                v4(
                    11,
                    (i % 64) as u8,
                    (i * 7 % 256) as u8,
                    (i * 13 % 256) as u8,
                )
            })
            .collect();
        for (range, add) in rounds {
            let list: ReadAhead = range
                .flat_map(routes_of)
                .map(|r| {
                    Some(Ok(if add {
                        Request::NewRoute(r, ReqFlags::ADD)
                    } else {
                        Request::DelRoute(r)
                    }))
                })
                .collect();
            let n = list.len();
            let kept = w.keep(list);
            w.with_standby(Fib::begin_batch);
            for at in 0..n {
                w.apply_read_ahead(kept, at).unwrap();
            }
            w.with_standby(Fib::end_batch);
            w.publish();
            w.catch_up();
            let answers = |fib: &Fib| -> Vec<String> {
                let get = |d: &IpAddr, table| {
                    let q = RouteQuery {
                        table,
                        ..RouteQuery::to(*d)
                    };
                    format!("{:?}", fib.route_get(&q))
                };
                let tables = [None, Some(100)];
                let all = probes.iter().flat_map(|d| tables.map(|t| get(d, t)));
                all.collect()
            };
            let reader = w.reader();
            let published = reader.read();
            let (standby, active) = (answers(w.latest()), answers(&published));
            let differ = standby.iter().zip(&active).position(|(a, b)| a != b);
            assert_eq!(differ, None, "probe {:?}", differ.map(|i| probes[i / 2]));
            assert_eq!(fingerprint(w.latest()), fingerprint(&published));
        }
        // The batches' adds are placed: their tables are copied, not changed again.
        assert!(w.tables_copied() >= 10, "{} copied", w.tables_copied());
    }

    /// What can tell two copies apart from outside, a line each: every listing, the
    /// generation, the deadlines, and the answers to a few lookups.
    fn fingerprint(fib: &Fib) -> Vec<String> {
        fn lines<T: std::fmt::Debug>(v: Vec<T>) -> impl Iterator<Item = String> {
            v.into_iter().map(|x| format!("{x:?}"))
        }
        let probes = (0..4u8).flat_map(|a| (0..8u8).map(move |b| v4(10, a, b, 9)));
        let answers = probes.map(|d| fib.route_get(&RouteQuery::to(d))).collect();
        // A dump shows the seconds left, which depend on when it is read: the deadlines
        // themselves are compared below (`next_expiry`).
        let mut routes = fib.routes(None);
        for r in &mut routes {
            r.expires = r.expires.map(|_| 0);
        }
        lines(routes)
            .chain(lines(fib.links()))
            .chain(lines(fib.addrs(None)))
            .chain(lines(fib.rules(None)))
            .chain(lines(fib.nexthops()))
            .chain(lines(fib.neighbours(None, false)))
            .chain(lines(answers))
            .chain([format!(
                "gen {} next expiry {:?} expiring {:?}",
                fib.gen(),
                fib.next_expiry(),
                fib.expiring()
            )])
            .collect()
    }

    /// After a random mix of changes, route changes applied from read-ahead lists (the
    /// replay then takes what the first application decided) and every other kind applied
    /// as a change, failures included, the two copies are equal after every catch-up.
    /// Without expiring routes (odd seeds), adds read no clock and batches that end with
    /// placed adds have their tables copied (`Fib::copy_tables_at_end`).
    #[test]
    fn both_copies_stay_equal_under_a_random_mix_of_changes() {
        let mut copied = 0;
        for seed in 1..=8u64 {
            let expiring = seed % 2 == 0;
            let mut fed = 0u32;
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let mut w = FibWriter::new(Settings::default());
            for c in setup() {
                w.apply(c).unwrap();
            }
            let (mut failed, mut ok) = (0, 0);
            for batch in 0..60 {
                w.with_standby(Fib::begin_batch);
                for _ in 0..rng.below(4) {
                    let now = w.latest().clock().now_ms();
                    let c = object_change(&mut rng, now);
                    match w.apply(c) {
                        Ok(()) => ok += 1,
                        Err(_) => failed += 1,
                    }
                }
                for _ in 0..1 + rng.below(3) {
                    let list: ReadAhead = (0..1 + rng.below(40))
                        .map(|_| Some(Ok(route_request(&mut rng, expiring))))
                        .collect();
                    let n = list.len();
                    let kept = w.keep(list);
                    for at in 0..n {
                        match w.apply_read_ahead(kept, at) {
                            Ok(()) => ok += 1,
                            Err(_) => failed += 1,
                        }
                    }
                }
                if !expiring {
                    // A piece of a table load: new /32s of one kind after the churn, into
                    // tables that grow past the compiled switch over the batches.
                    let list: ReadAhead = (0..rng.below(80))
                        .map(|_| {
                            fed += 1;
                            let mut r = route(
                                v4(10, 64 + (fed >> 16) as u8, (fed >> 8) as u8, fed as u8),
                                32,
                                None,
                            );
                            r.rtype = RouteType::Blackhole;
                            r.table = [0, 100][rng.below(2) as usize];
                            Some(Ok(Request::NewRoute(r, ReqFlags::ADD)))
                        })
                        .collect();
                    let n = list.len();
                    let kept = w.keep(list);
                    for at in 0..n {
                        w.apply_read_ahead(kept, at).unwrap();
                    }
                }
                w.with_standby(Fib::end_batch);
                w.publish();
                // Now and then a second batch before the standby copy catches up.
                if batch % 3 != 0 {
                    w.catch_up();
                    let published = fingerprint(&w.reader().read());
                    let standby = fingerprint(w.latest());
                    for (a, b) in standby.iter().zip(&published) {
                        assert_eq!(a, b, "seed {seed}, batch {batch}");
                    }
                    assert_eq!(standby.len(), published.len());
                }
            }
            assert!(
                ok > 100 && failed > 100,
                "seed {seed}: {ok} ok, {failed} failed"
            );
            w.catch_up();
            assert_eq!(fingerprint(w.latest()), fingerprint(&w.reader().read()));
            copied += w.tables_copied();
        }
        assert!(copied > 20, "{copied} tables copied");
    }

    /// Readers racing a writer that publishes batch after batch only ever see the state as of
    /// one publish (the answers of a plain FIB after exactly that many batches), and never
    /// go back in time.
    #[test]
    fn gets_racing_a_writer_agree_with_a_reference() {
        let probes = probes();
        let mut reference = Fib::default();
        for c in setup() {
            c.apply(&mut reference, &mut Vec::new()).unwrap();
        }
        let mut expected = vec![observe(&reference, &probes).1];
        for n in 1..=BATCHES {
            for c in batch(n) {
                c.apply(&mut reference, &mut Vec::new()).unwrap();
            }
            expected.push(observe(&reference, &probes).1);
        }
        let mut w = FibWriter::new(Settings::default());
        for c in setup() {
            w.apply(c).unwrap();
        }
        w.publish();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let readers: Vec<_> = (0..3)
                .map(|_| {
                    let r = w.reader();
                    let (probes, expected, done) = (&probes, &expected, &done);
                    s.spawn(move || {
                        let (mut last, mut reads) = (0, 0);
                        loop {
                            let finished = done.load(Ordering::Acquire);
                            let (seen, answers) = observe(&r.read(), probes);
                            assert!(seen >= last, "went back from {last} to {seen}");
                            assert_eq!(answers, expected[seen], "after {seen} batches");
                            last = seen;
                            reads += 1;
                            if finished {
                                return (last, reads);
                            }
                        }
                    })
                })
                .collect();
            for n in 1..=BATCHES {
                w.with_standby(Fib::begin_batch);
                for c in batch(n) {
                    w.apply(c).unwrap();
                }
                w.with_standby(Fib::end_batch);
                w.publish();
                if n % 3 == 0 {
                    w.catch_up();
                }
                std::thread::yield_now();
            }
            done.store(true, Ordering::Release);
            for r in readers {
                let (last, reads) = r.join().unwrap();
                assert_eq!(last, BATCHES as usize, "the last publish is seen");
                assert!(reads > 1);
            }
        });
        // The writer's newest state is the reference's, on both copies.
        w.catch_up();
        assert_eq!(observe(w.latest(), &probes).1, expected[BATCHES as usize]);
        let r = w.reader();
        assert_eq!(observe(&r.read(), &probes).1, expected[BATCHES as usize]);
    }
}
