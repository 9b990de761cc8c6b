//! Left-right publication: one writer changes a table while any number of readers read it,
//! lock-free and wait-free, each read seeing the table exactly as of one publish.
//!
//! # Roles: who may call what
//! - One [`Writer`] owns two copies of a [`Replica`]. It is neither `Clone` nor `Sync` and
//!   every change takes `&mut self`, so exactly one thread at a time changes anything.
//! - Any number of [`Reader`]s: each is `Send + Clone` but not `Sync`, so every thread makes its
//!   own ([`Writer::reader`], [`Reader::clone`]); a handle's [`Reader::read`] returns a
//!   [`ReadGuard`] that derefs to the published copy until it is dropped.
//! - The [`Replica`] implementation says how a change is applied to one copy and recorded in
//!   the writer's log, and how the log is replayed into the other copy; this crate never looks
//!   inside a change or the log.
//!
//! # The protocol
//! Readers only ever read the *active* copy; the writer only ever changes the *standby* copy,
//! and only once no reader can still be in it:
//! 1. [`Writer::apply`] applies a change to the standby copy at once and the replica records it
//!    in the log ([`Replica::apply`]).
//! 2. [`Writer::publish`] finishes the standby copy's deferred work ([`Replica::flush`]) and makes
//!    it the active copy with one atomic store: reads that start after it see every change so
//!    far; reads already running finish on the old copy.
//! 3. Before the next change touches the new standby copy (the old active one),
//!    [`Writer::catch_up`] waits until every read that could have started on it has finished,
//!    then replays the log into it ([`Replica::replay`]). Both copies are then equal again.
//!    Every change of the writer catches up first; an idle writer may call it earlier, so that
//!    the wait and the replay overlap with the readers' work.
//!
//! # Memory orderings, and why they suffice
//! Each reader has a counter, odd while the handle is inside a read. A read makes its counter
//! odd (a Relaxed increment), issues a SeqCst fence, then loads the active index (Acquire: it
//! pairs with the writer's Release store of the index, so the copy's contents as published are
//! visible). Dropping the guard makes the counter even again (a Release increment: the read's
//! accesses of the copy happen before it). The writer stores the new active index (Release),
//! and before it next writes the old copy it issues a SeqCst fence, then loads every counter
//! (Acquire) and, for each odd one, waits until it changes.
//!
//! The two SeqCst fences are ordered one way or the other. If the writer's comes first, the
//! reader's later load of the index sees the new one (or a newer one): the reader is not in the
//! copy being written. If the reader's comes first, the writer's later load of the counter sees
//! the odd value (or a later one), and the writer waits until it changes; the change it then
//! sees is the reader's Release increment (or a later increment, which as a read-modify-write
//! continues its release sequence), so everything the reader read happens before everything
//! the writer writes next. The increment on entry can be Relaxed: the fence orders it before
//! the index load. loom checks this argument on this code (`tests/loom.rs`, the code
//! production runs: the primitives swap under `--cfg loom`).
//!
//! # What a reader may observe
//! - Exactly the table as of some publish (or as given to [`Writer::new`]): never a change in
//!   part, never a mix of the two copies within one guard. A guard taken while the same handle
//!   holds another reads the outer guard's copy: one guard, one state.
//! - Versions in order: a later read on the same thread never sees an older publish than an
//!   earlier one, and a read that starts after [`Writer::publish`] returned (ordered after it,
//!   as by a message from the writer's thread) sees that publish or a newer one.
//!
//! # Progress and cost
//! - Readers never wait and take no lock: entering and leaving a read is one atomic increment
//!   each on the reader's own cache line, a fence and one load of the active index.
//! - The writer may wait for readers (as RCU's synchronize does), never the other way round, so
//!   reads must be short, and a thread must never wait for the writer while it holds a guard.
//! - Making, cloning and dropping a reader handle takes a mutex; the writer holds it only to
//!   copy the list of counters, never while it waits, so a thread may clone its handle inside
//!   a read.
//! - Every change costs twice (applied once, replayed once) and the table is held twice.

use std::marker::PhantomData;

use primitives::{fence, spin, Arc, AtomicU64, AtomicUsize, Mutex, Ordering, TableCell};

pub use primitives::TableRef;

/// A table that the writer keeps in two copies, mirroring changes from one into the other.
///
/// The contract, on which the readers' view depends:
/// - [`Self::apply`] records in the log everything [`Self::replay`] needs to make the same
///   change to the other copy.
/// - Replaying into a copy that equals the one `apply` ran on, as it was before the logged
///   changes, makes the two equal again: in every answer readers get, and in everything that
///   later changes depend on (internal ids, allocation order, time read).
/// - `replay` leaves the log recording no change: the next `apply` starts a new log.
pub trait Replica {
    /// One change, as handed to the writer.
    type Op;
    /// What applying a change returns.
    type Output;
    /// What the writer keeps of the changes applied to the standby copy that the other lacks.
    type Log: Default;
    /// Applies `op` to this copy (the standby one: no reader is in it) and records it in `log`.
    fn apply(&mut self, op: Self::Op, log: &mut Self::Log) -> Self::Output;
    /// Makes the changes `log` records to this copy, and empties the log.
    fn replay(&mut self, log: &mut Self::Log);
    /// [`Self::replay`], given the published copy: the one the logged changes were applied
    /// to first, flushed since, and equal to this one before them. A table may copy from it
    /// what the changes wrote there instead of computing it again.
    fn replay_from(&mut self, log: &mut Self::Log, published: &Self) {
        let _ = published;
        self.replay(log);
    }
    /// Finishes work that `apply` and `replay` deferred; called before the copy is published.
    /// Until then the copy may answer wrongly (only the writer can see it).
    fn flush(&mut self) {}
}

/// A reader's counter: odd while it is inside a read. Aligned to its own cache line (two, for
/// the adjacent-line prefetcher) so readers on different cores never write the same line.
#[repr(align(128))]
struct Counter(AtomicU64);

struct Shared<T> {
    copies: [TableCell<T>; 2],
    /// Index of the copy readers use.
    active: AtomicUsize,
    /// Every live reader's counter; locked only to register, unregister and copy the list,
    /// never to read.
    readers: Mutex<Vec<Arc<Counter>>>,
}

// SAFETY: the copies are only accessed under the protocol of the module documentation: shared
// reads of the active copy from any thread (and of either copy by the writer), exclusive writes
// of the standby copy by the single writer after every reader of it has left. That is sound
// for any `T: Send + Sync`.
unsafe impl<T: Send + Sync> Sync for Shared<T> {}
// SAFETY: as above; moving the pair between threads moves `T`s, which are `Send`.
unsafe impl<T: Send + Sync> Send for Shared<T> {}

/// The single writer of a published table. Not `Clone`, not `Sync`.
pub struct Writer<T: Replica> {
    shared: Arc<Shared<T>>,
    /// The changes the standby copy has and the active one lacks; after a publish (while
    /// `stale`), the changes the new standby copy still lacks.
    log: T::Log,
    /// The standby copy lacks `log` and may still have readers from before the last publish.
    stale: bool,
    /// Changes were applied since the last publish.
    unpublished: bool,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

/// A handle that reads the published table. `Send + Clone`, not `Sync`: one per thread.
pub struct Reader<T> {
    shared: Arc<Shared<T>>,
    counter: Arc<Counter>,
    /// Nesting depth of this handle's live guards (only the outermost touches the counter).
    depth: std::cell::Cell<u32>,
    /// The copy the outermost live guard reads.
    copy: std::cell::Cell<usize>,
}

/// The published table as of one publish, valid until dropped.
pub struct ReadGuard<'a, T> {
    reader: &'a Reader<T>,
    table: TableRef<'a, T>,
}

impl<T: Replica + Clone> Writer<T> {
    /// Publishes `table`; returns the writer and a first reader.
    pub fn new(table: T) -> (Writer<T>, Reader<T>) {
        let writer = Writer::from_copies(table.clone(), table);
        let reader = writer.reader();
        (writer, reader)
    }
}

impl<T: Replica> Writer<T> {
    /// Publishes `a`, with `b` as the standby copy. The two must be equal in the sense of the
    /// [`Replica`] contract: every change is applied to one and replayed into the other.
    pub fn from_copies(a: T, b: T) -> Writer<T> {
        Writer {
            shared: Arc::new(Shared {
                copies: [TableCell::new(a), TableCell::new(b)],
                active: AtomicUsize::new(0),
                readers: Mutex::new(Vec::new()),
            }),
            log: T::Log::default(),
            stale: false,
            unpublished: false,
            _not_sync: PhantomData,
        }
    }

    /// A new reader of the published table.
    pub fn reader(&self) -> Reader<T> {
        Reader::register(self.shared.clone())
    }

    fn standby(&self) -> usize {
        1 - self.shared.active.load(Ordering::Relaxed)
    }

    /// Applies `op` to the standby copy (made current first); readers see it from the next
    /// [`Self::publish`].
    pub fn apply(&mut self, op: T::Op) -> T::Output {
        self.catch_up();
        let standby = self.standby();
        let log = &mut self.log;
        // SAFETY: `catch_up` returned, so no reader is in the standby copy and readers that
        // start now read the active one; `&mut self` makes this the only writer access.
        let out = unsafe { self.shared.copies[standby].write(|t| t.apply(op, log)) };
        self.unpublished = true;
        out
    }

    /// Runs `f` on the standby copy (made current first), for work that is no logged change:
    /// it must leave the copy equal to the other in the sense of the [`Replica`] contract
    /// (starting or ending a batch, taking out what the writer alone reads).
    pub fn with_standby<R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        self.catch_up();
        let standby = self.standby();
        // SAFETY: as in `apply`.
        unsafe { self.shared.copies[standby].write(f) }
    }

    /// The newest table, published or not, for the writer's own reads.
    pub fn latest(&self) -> TableRef<'_, T> {
        let i = if self.stale {
            self.shared.active.load(Ordering::Relaxed)
        } else {
            self.standby()
        };
        // SAFETY: only the writer writes a copy, and only through `&mut self`, which this
        // borrow excludes; beside readers this is one more shared read.
        unsafe { self.shared.copies[i].read() }
    }

    /// The log of changes not yet in both copies.
    pub fn log(&self) -> &T::Log {
        &self.log
    }

    /// The log, for bookkeeping of the replica's own that records no change (what it records
    /// must stay what the copies differ by).
    pub fn log_mut(&mut self) -> &mut T::Log {
        &mut self.log
    }

    /// Makes every change so far visible to reads that start from now on (no-op when there
    /// is none).
    pub fn publish(&mut self) {
        if !self.unpublished {
            return;
        }
        let standby = self.standby();
        // SAFETY: as in `apply` (`unpublished` means a change caught up since the last
        // publish).
        unsafe { self.shared.copies[standby].write(T::flush) };
        self.shared.active.store(standby, Ordering::Release);
        self.stale = true;
        self.unpublished = false;
    }

    /// Brings the standby copy up to date: waits for the reads still on it, then replays the
    /// changes it lacks. Every change calls it first.
    pub fn catch_up(&mut self) {
        if !self.stale {
            return;
        }
        self.wait_for_readers();
        let standby = self.standby();
        let log = &mut self.log;
        // SAFETY: every reader that could have loaded the standby index before the last
        // publish has left (`wait_for_readers`), new readers load the active index, and
        // `&mut self` makes this the only writer access. The active copy is only read, as
        // readers read it: only the writer writes a copy, and never the active one.
        unsafe {
            let published = self.shared.copies[1 - standby].read();
            self.shared.copies[standby].write(|t| t.replay_from(log, &*published));
        }
        self.stale = false;
    }

    /// Waits until every reader that was inside a read when the active index last changed
    /// has left it.
    fn wait_for_readers(&self) {
        fence(Ordering::SeqCst);
        // A copy of the list: a reader may register or unregister while the writer waits.
        let readers: Vec<Arc<Counter>> = self
            .shared
            .readers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        for r in readers {
            let seen = r.0.load(Ordering::Acquire);
            if seen & 1 == 0 {
                continue;
            }
            let mut spins = 0u32;
            while r.0.load(Ordering::Acquire) == seen {
                spins = spins.saturating_add(1);
                spin(spins);
            }
        }
    }
}

impl<T> Reader<T> {
    fn register(shared: Arc<Shared<T>>) -> Reader<T> {
        let counter = Arc::new(Counter(AtomicU64::new(0)));
        shared
            .readers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(counter.clone());
        Reader {
            shared,
            counter,
            depth: std::cell::Cell::new(0),
            copy: std::cell::Cell::new(0),
        }
    }

    /// Enters a read: the guard derefs to the table as of the last publish. Keep it short (see
    /// the module documentation).
    #[inline]
    pub fn read(&self) -> ReadGuard<'_, T> {
        let depth = self.depth.get();
        if depth == 0 {
            self.counter.0.fetch_add(1, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            self.copy.set(self.shared.active.load(Ordering::Acquire));
        }
        self.depth.set(depth + 1);
        // SAFETY: this reader's counter is odd, so the writer does not write this copy until
        // the outermost guard is dropped; it was the active copy when the outermost guard
        // loaded the index after making the counter odd (module documentation).
        let table = unsafe { self.shared.copies[self.copy.get()].read() };
        ReadGuard {
            reader: self,
            table,
        }
    }
}

impl<T> Clone for Reader<T> {
    fn clone(&self) -> Self {
        Reader::register(self.shared.clone())
    }
}

impl<T> Drop for Reader<T> {
    fn drop(&mut self) {
        let mut readers = self
            .shared
            .readers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        readers.retain(|r| !Arc::ptr_eq(r, &self.counter));
    }
}

impl<T> std::ops::Deref for ReadGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        std::ops::Deref::deref(&self.table)
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        let depth = self.reader.depth.get() - 1;
        self.reader.depth.set(depth);
        if depth == 0 {
            self.reader.counter.0.fetch_add(1, Ordering::Release);
        }
    }
}

/// The synchronisation primitives, from `std` or, under `--cfg loom`, from loom's model checker.
#[cfg(not(loom))]
mod primitives {
    pub(super) use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
    pub(super) use std::sync::{Arc, Mutex};

    /// Busy polls of a reader's counter before the writer yields its core instead: a reader is
    /// mid-lookup (well under a microsecond) unless it was preempted, and then only yielding
    /// lets it run on a machine with fewer cores than threads.
    const SPINS_BEFORE_YIELD: u32 = 64;

    /// Backs off inside the writer's wait; `spins` counts the polls so far.
    pub(super) fn spin(spins: u32) {
        if spins < SPINS_BEFORE_YIELD {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    /// A table copy whose accesses follow the protocol of the module documentation.
    pub(super) struct TableCell<T>(std::cell::UnsafeCell<T>);

    /// A shared reference to a copy (under loom, one whose access the model checker tracks).
    pub type TableRef<'a, T> = &'a T;

    impl<T> TableCell<T> {
        pub(super) fn new(t: T) -> Self {
            TableCell(std::cell::UnsafeCell::new(t))
        }
        /// # Safety
        /// No write of this copy may happen while the returned reference lives.
        pub(super) unsafe fn read(&self) -> &T {
            // SAFETY: the caller excludes writers for the reference's lifetime.
            unsafe { &*self.0.get() }
        }
        /// # Safety
        /// No other access of this copy may happen during `f`.
        pub(super) unsafe fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            // SAFETY: the caller guarantees exclusive access during `f`.
            f(unsafe { &mut *self.0.get() })
        }
    }
}

#[cfg(loom)]
mod primitives {
    pub(super) use loom::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
    pub(super) use loom::sync::{Arc, Mutex};

    /// Every poll yields: loom explores the other threads' steps at each yield.
    pub(super) fn spin(_spins: u32) {
        loom::thread::yield_now();
    }

    /// loom's cell tracks every access, so the model checker reports any read of a copy that
    /// overlaps a write of it.
    pub(super) struct TableCell<T>(loom::cell::UnsafeCell<T>);

    /// A shared reference to a copy whose access the model checker tracks while it lives.
    pub struct TableRef<'a, T>(loom::cell::ConstPtr<T>, std::marker::PhantomData<&'a T>);

    impl<T> std::ops::Deref for TableRef<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: TableCell::read's caller excludes writers while this lives.
            unsafe { self.0.deref() }
        }
    }

    impl<T> TableCell<T> {
        pub(super) fn new(t: T) -> Self {
            TableCell(loom::cell::UnsafeCell::new(t))
        }
        /// # Safety
        /// No write of this copy may happen while the returned reference lives.
        pub(super) unsafe fn read(&self) -> TableRef<'_, T> {
            TableRef(self.0.get(), std::marker::PhantomData)
        }
        /// # Safety
        /// No other access of this copy may happen during `f`.
        pub(super) unsafe fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            // SAFETY: the caller guarantees exclusive access during `f`.
            self.0.with_mut(|p| f(unsafe { &mut *p }))
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A log of values, each change setting the table to its value; `flushes` counts the
    /// flushes, to show when the writer asks for them.
    #[derive(Clone, Default)]
    struct Value {
        v: u32,
        flushes: u32,
    }

    impl Replica for Value {
        type Op = u32;
        type Output = u32;
        type Log = Vec<u32>;
        fn apply(&mut self, v: u32, log: &mut Vec<u32>) -> u32 {
            log.push(v);
            std::mem::replace(&mut self.v, v)
        }
        fn replay(&mut self, log: &mut Vec<u32>) {
            for v in log.drain(..) {
                self.v = v;
            }
        }
        fn flush(&mut self) {
            self.flushes += 1;
        }
    }

    /// A table that catches up by copying the published copy, which it can only do when
    /// given that copy with the logged changes applied and flushed.
    #[derive(Clone, Default)]
    struct Copied {
        v: u32,
        flushed: bool,
    }

    impl Replica for Copied {
        type Op = u32;
        type Output = ();
        type Log = Vec<u32>;
        fn apply(&mut self, v: u32, log: &mut Vec<u32>) {
            log.push(v);
            self.v = v;
            self.flushed = false;
        }
        fn replay(&mut self, _: &mut Vec<u32>) {
            panic!("the writer replays with the published copy");
        }
        fn replay_from(&mut self, log: &mut Vec<u32>, published: &Copied) {
            assert!(published.flushed);
            assert_eq!(log.last(), Some(&published.v));
            log.clear();
            self.clone_from(published);
        }
        fn flush(&mut self) {
            self.flushed = true;
        }
    }

    /// The replay is given the copy the changes were applied to first, flushed.
    #[test]
    fn the_replay_is_given_the_published_copy() {
        let (mut w, r) = Writer::new(Copied::default());
        for v in 1..=3 {
            w.apply(v);
            w.apply(10 * v);
            w.publish();
            w.catch_up();
            assert_eq!((w.with_standby(|t| t.v), r.read().v), (10 * v, 10 * v));
        }
    }

    /// The writer reads its changes at once; readers from the publish on; a publish without a
    /// change neither flushes nor swaps.
    #[test]
    fn the_writer_sees_its_changes_and_readers_the_published_ones() {
        let (mut w, r) = Writer::new(Value::default());
        assert_eq!(w.apply(1), 0);
        assert_eq!((w.latest().v, r.read().v), (1, 0));
        w.publish();
        assert_eq!((w.latest().v, r.read().v, r.read().flushes), (1, 1, 1));
        w.publish();
        assert_eq!(r.read().flushes, 1, "a publish without a change");
        // The replay waits for no reader here and brings the other copy up to date.
        w.catch_up();
        assert!(w.log().is_empty());
        assert_eq!(w.with_standby(|t| t.v), 1);
        assert_eq!(w.apply(2), 1);
        assert_eq!(r.clone().read().v, 1);
    }

    /// Readers on other threads racing a writer that publishes 1, 2, 3, ... see the values in
    /// order, and the last one once the writer is done.
    #[test]
    fn readers_racing_the_writer_see_versions_in_order() {
        const VERSIONS: u32 = 2_000;
        let (mut w, r) = Writer::new(Value::default());
        std::thread::scope(|s| {
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let r = r.clone();
                    s.spawn(move || {
                        let mut last = 0;
                        while last < VERSIONS {
                            let outer = r.read();
                            let inner = r.read();
                            assert_eq!(inner.v, outer.v, "one guard, one version");
                            assert!(outer.v >= last, "went back from {last} to {}", outer.v);
                            last = outer.v;
                        }
                    })
                })
                .collect();
            for v in 1..=VERSIONS {
                w.apply(v);
                w.publish();
            }
            for t in readers {
                t.join().unwrap();
            }
        });
    }
}
