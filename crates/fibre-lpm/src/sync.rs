//! Lock-free readers beside one writer: a left-right pair of tables.
//!
//! # Publication rule
//! The [`Writer`] owns two copies of the table. Readers only ever read the *active* copy; the
//! writer only ever writes the *standby* copy, and only once no reader can still be in it:
//! 1. An update is applied to the standby copy at once and logged. Its compilation is deferred
//!    to the publish, so that a node touched by many updates is recompiled once per publish.
//! 2. [`Writer::publish`] swaps the roles with one atomic store: readers that start after it
//!    read the copy with every update so far; readers already running finish on the old copy.
//! 3. Before the next update touches the new standby (the old active copy), the writer waits
//!    until every reader that could have started on it has finished, then replays the log into
//!    it. Both copies are then equal again and the cycle repeats.
//!
//! # Invariants
//! - A reader sees exactly the table as of some publish: never a partial update, never a mix
//!   of two copies within one [`ReadGuard`].
//! - Readers never wait: entering and leaving a read section is one atomic increment each on
//!   the reader's own cache line, plus one load of the active index. The writer may wait for
//!   readers (like RCU's synchronize), never the other way round.
//! - The writer is unique: [`Writer`] is neither `Clone` nor `Sync`. Readers are `Send + Clone`
//!   but not `Sync`: each thread clones its own handle (one counter each).
//! - Each update is incremental in both copies (applied once, replayed once), so the cost of an
//!   update is twice that of the underlying structure's update; memory is two copies.
//!
//! # Reader protocol (why it is enough)
//! A reader makes its counter odd, issues a SeqCst fence, loads the active index and reads; it
//! makes the counter even (Release) when the guard drops. The writer stores the new active
//! index, issues a SeqCst fence, then reads every counter. The two fences are ordered one way or
//! the other: if the reader's comes second it loads the new index; if the writer's comes second
//! it sees the odd counter and waits until the counter changes (Acquire), which orders all the
//! reader's reads before the writer's writes. (Fences rather than SeqCst accesses: the argument
//! is the same, and loom checks fences exactly.)

use std::marker::PhantomData;

use primitives::{fence, spin, Arc, AtomicU64, AtomicUsize, Mutex, Ordering, TableCell};

use crate::v4::Lpm4;
use crate::v6::Lpm6;
use crate::LpmError;

/// A table that the writer can mirror into its second copy by replaying operations (sealed:
/// implemented by [`Lpm4`] and [`Lpm6`]).
pub trait Replica: Clone + private::Sealed {
    /// One update, as logged for replay.
    type Op: Clone;
    /// What applying an update returns.
    type Output;
    /// Applies `op`, possibly deferring the compilation it implies until [`Self::flush`].
    /// Applying the same sequence of ops to equal tables yields equal tables.
    fn apply(&mut self, op: &Self::Op) -> Self::Output;
    /// Finishes the deferred work of `apply`: until then, lookups may be wrong.
    fn flush(&mut self);
}

mod private {
    pub trait Sealed {}
    impl Sealed for crate::v4::Lpm4 {}
    impl Sealed for crate::v6::Lpm6 {}
}

/// One update of a prefix table with addresses of type `A`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update<A> {
    /// Map the prefix to the value.
    Insert(A, u8, u32),
    /// Remove the prefix.
    Remove(A, u8),
}

/// What [`Update`] returns: the previous value of the prefix.
pub type UpdateResult = Result<Option<u32>, LpmError>;

impl Replica for Lpm4 {
    type Op = Update<u32>;
    type Output = UpdateResult;
    fn apply(&mut self, op: &Update<u32>) -> UpdateResult {
        self.apply_deferred(op)
    }
    fn flush(&mut self) {
        Lpm4::flush(self)
    }
}

impl Replica for Lpm6 {
    type Op = Update<u128>;
    type Output = UpdateResult;
    fn apply(&mut self, op: &Update<u128>) -> UpdateResult {
        self.apply_deferred(op)
    }
    fn flush(&mut self) {
        Lpm6::flush(self)
    }
}

/// A reader's counter: odd while it is inside a read section. Padded to its own cache line so
/// that readers on different cores never write the same line.
#[repr(align(128))]
struct Counter(AtomicU64);

struct Shared<T> {
    copies: [TableCell<T>; 2],
    /// Index of the copy readers use.
    active: AtomicUsize,
    /// Every live reader's counter; locked only to register, unregister and scan, never to read.
    readers: Mutex<Vec<Arc<Counter>>>,
}

// SAFETY: the copies are only accessed under the publication rule above: shared reads of the
// active copy from any thread, exclusive writes of the standby copy by the single writer after
// every reader of it has left. That is sound for any `T: Send + Sync`.
unsafe impl<T: Send + Sync> Sync for Shared<T> {}
// SAFETY: as above; moving the pair between threads moves `T`s, which are `Send`.
unsafe impl<T: Send + Sync> Send for Shared<T> {}

/// The single writer of a left-right table. Not `Clone`, not `Sync`: one control plane owns it.
pub struct Writer<T: Replica> {
    shared: Arc<Shared<T>>,
    /// Updates applied to the standby copy since the last publish, or (after a publish) not yet
    /// replayed into the new standby copy.
    log: Vec<T::Op>,
    /// The standby copy may still have readers from before the last publish.
    stale: bool,
    /// Updates since the last publish.
    unpublished: bool,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

/// A handle that reads the published table. `Send + Clone`, not `Sync`: clone one per thread.
pub struct Reader<T> {
    shared: Arc<Shared<T>>,
    counter: Arc<Counter>,
    /// Nesting depth of this handle's live guards (only the outermost touches the counter).
    depth: std::cell::Cell<u32>,
}

/// A consistent view of the published table, valid until dropped.
pub struct ReadGuard<'a, T> {
    reader: &'a Reader<T>,
    table: primitives::TableRef<'a, T>,
}

impl<T: Replica + Send + Sync> Writer<T> {
    /// Starts publishing `table`; returns the writer and a first reader handle.
    pub fn new(table: T) -> (Writer<T>, Reader<T>) {
        let shared = Arc::new(Shared {
            copies: [TableCell::new(table.clone()), TableCell::new(table)],
            active: AtomicUsize::new(0),
            readers: Mutex::new(Vec::new()),
        });
        let writer = Writer {
            shared: shared.clone(),
            log: Vec::new(),
            stale: false,
            unpublished: false,
            _not_sync: PhantomData,
        };
        let reader = Reader::register(shared);
        (writer, reader)
    }

    /// A new reader handle.
    pub fn reader(&self) -> Reader<T> {
        Reader::register(self.shared.clone())
    }

    fn standby(&self) -> usize {
        1 - self.shared.active.load(Ordering::Relaxed)
    }

    /// Applies `op` to the standby copy (visible to readers at the next [`Self::publish`]).
    pub fn apply(&mut self, op: T::Op) -> T::Output {
        self.catch_up();
        // SAFETY: `catch_up` returned, so no reader is in the standby copy, and only this
        // writer (unique: not Clone, not Sync, `&mut self`) writes it.
        let out = unsafe { self.shared.copies[self.standby()].write(|t| t.apply(&op)) };
        self.log.push(op);
        self.unpublished = true;
        out
    }

    /// Makes every update so far visible to readers that start from now on.
    pub fn publish(&mut self) {
        if !self.unpublished {
            return;
        }
        self.catch_up();
        let standby = self.standby();
        // SAFETY: as in `apply`.
        unsafe { self.shared.copies[standby].write(|t| t.flush()) };
        self.shared.active.store(standby, Ordering::Release);
        self.stale = true;
        self.unpublished = false;
    }

    /// Reads the writer's own view: the standby copy, with every update applied.
    pub fn with_latest<R>(&mut self, f: impl FnOnce(&T) -> R) -> R {
        self.catch_up();
        // SAFETY: as in `apply`; the writer alone uses the standby copy.
        unsafe {
            self.shared.copies[self.standby()].write(|t| {
                t.flush();
                f(t)
            })
        }
    }

    /// Brings the standby copy up to date: waits for its last readers, then replays the log.
    fn catch_up(&mut self) {
        if !self.stale {
            return;
        }
        self.wait_for_readers();
        let standby = self.standby();
        let log = std::mem::take(&mut self.log);
        // SAFETY: every reader that could have loaded the standby index before the last publish
        // has left (wait_for_readers), and new readers load the active index.
        unsafe {
            self.shared.copies[standby].write(|t| {
                for op in &log {
                    t.apply(op);
                }
            })
        };
        self.log = log;
        self.log.clear();
        self.stale = false;
    }

    /// Waits until every reader inside a read section at the time of the call has left it.
    fn wait_for_readers(&self) {
        fence(Ordering::SeqCst);
        let readers = self
            .shared
            .readers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for r in readers.iter() {
            let seen = r.0.load(Ordering::Acquire);
            if seen & 1 == 0 {
                continue;
            }
            while r.0.load(Ordering::Acquire) == seen {
                spin();
            }
        }
    }
}

impl Writer<Lpm4> {
    /// Maps `prefix/len` to `value` in the next published version; returns the replaced value.
    pub fn insert(&mut self, prefix: u32, len: u8, value: u32) -> UpdateResult {
        self.apply(Update::Insert(prefix, len, value))
    }
    /// Removes `prefix/len` from the next published version; returns its value.
    pub fn remove(&mut self, prefix: u32, len: u8) -> Option<u32> {
        self.apply(Update::Remove(prefix, len)).ok().flatten()
    }
}

impl Writer<Lpm6> {
    /// Maps `prefix/len` to `value` in the next published version; returns the replaced value.
    pub fn insert(&mut self, prefix: u128, len: u8, value: u32) -> UpdateResult {
        self.apply(Update::Insert(prefix, len, value))
    }
    /// Removes `prefix/len` from the next published version; returns its value.
    pub fn remove(&mut self, prefix: u128, len: u8) -> Option<u32> {
        self.apply(Update::Remove(prefix, len)).ok().flatten()
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
        }
    }

    /// Enters a read section: the guard derefs to the table as of the last publish.
    #[inline]
    pub fn read(&self) -> ReadGuard<'_, T> {
        let depth = self.depth.get();
        if depth == 0 {
            self.counter.0.fetch_add(1, Ordering::Relaxed);
            fence(Ordering::SeqCst);
        }
        self.depth.set(depth + 1);
        let active = self.shared.active.load(Ordering::Acquire);
        // SAFETY: our counter is odd, so the writer will not write this copy until we leave
        // (publication rule step 3); it was the active copy when we loaded the index after
        // making the counter odd.
        let table = unsafe { self.shared.copies[active].read() };
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

    /// Backs off inside the writer's wait (a reader is mid-lookup: microseconds at most).
    pub(super) fn spin() {
        std::thread::yield_now();
    }

    /// A table copy whose access discipline is the publication rule.
    pub(super) struct TableCell<T>(std::cell::UnsafeCell<T>);
    pub(super) type TableRef<'a, T> = &'a T;

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

    pub(super) fn spin() {
        loom::thread::yield_now();
    }

    /// loom's cell tracks every access, so the model checker reports any read of a copy that
    /// overlaps a write of it.
    pub(super) struct TableCell<T>(loom::cell::UnsafeCell<T>);

    pub(super) struct TableRef<'a, T>(loom::cell::ConstPtr<T>, std::marker::PhantomData<&'a T>);

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
