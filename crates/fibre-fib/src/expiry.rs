//! Expiring routes: the clock, the queue of deadlines, and the design of the GC pass (which
//! `gc`, in the layer of `Fib`'s methods, runs).
//!
//! A route added with `expires SECONDS` stores its deadline (milliseconds on the [`Clock`]) in
//! its shared info together with its prefix (so interning never shares an expiring info between
//! prefixes). Expiry has two independent halves:
//!
//! 1. **Lookups decide for themselves.** Every lookup that reaches an entry whose info has a
//!    deadline compares it with the clock and skips the entry once the deadline has passed
//!    (the compiled fast path falls back to the walk for that flow). Dumps hide such entries.
//!    So a route stops matching at the moment it expires, whether or not GC has run, and
//!    permanent routes pay one never-taken branch on a field the lookup already loaded: the
//!    clock is read only when an expiring entry is met.
//! 2. **GC reclaims.** [`crate::Fib::expire`] pops due deadlines from [`ExpiryQueue`], an
//!    ordered set of `(deadline, info id, info serial)` holding only the infos that expire.
//!    A pass costs
//!    O(log n + k log n) for k due items among n expiring ones: it never looks at a permanent
//!    route or at an exception that is not due, which is the point of the kernel series
//!    "Remove expired routes with a separated list of routes" (net-next, July 2023; before it
//!    Linux walked every fib6 node: 120 us at 1k routes, 855 us at 9k).
//!
//! # Why an ordered set (and not a heap or a timer wheel)
//! - A binary heap cannot remove an arbitrary item; routes are replaced and deleted before they
//!   expire (RA refreshes do it every few seconds), so it would need tombstones whose number
//!   grows with churn and which every pass must pop -- a cost that depends on churn, not on
//!   what expires -- or an index into the heap kept up to date by every swap.
//! - A timer wheel has O(1) insert, but a pass visits every slot between two ticks (or
//!   cascades levels), so its cost depends on elapsed time and granularity; and O(1) removal
//!   needs intrusive links inside the route objects, which is exactly the shared mutable state
//!   whose teardown raced with GC in the reverted kernel version.
//! - `BTreeSet<(deadline, id)>`: exact removal in O(log n), the earliest deadline in O(log n),
//!   due items in deadline order, no tombstones, no pointers into route storage. n is the
//!   number of expiring items only, so log n stays small even beside 1M permanent routes.
//!
//! # Why GC, replace, delete and lookups cannot race
//! - **One writer owns the queue.** It is a private field of the route-info arena
//!   (`route::Infos`), which queues an info when it stores it and takes it out when it frees
//!   it, and it changes only through `&mut Fib`: GC, add, replace and delete run one after the other by construction (the
//!   borrow checker rules out a concurrent mutation, no lock is involved). The kernel's version
//!   linked routes into a GC list that the free paths and the GC walked under different locks.
//! - **The queue holds names, not references.** An item is `(deadline, id, serial)`; the info's
//!   serial changes whenever its slot is reused. A route freed by a delete or replace is taken
//!   out of the queue as it is freed, and an item that
//!   somehow outlived its info would name a serial that no longer exists and be dropped.
//!   Nothing can be reached through the queue after it is freed.
//! - **GC is unobservable to lookups.** GC removes only routes whose deadline is <= now, and
//!   the clock never goes back; any lookup after the GC would have skipped those routes
//!   anyway. Running GC earlier, later or never changes no answer, so the relative order of GC
//!   and lookups does not matter.
//! - **Lock-free readers see whole versions.** Readers on other threads read published copies
//!   (fibre-lpm's left-right `sync`): a reader never sees a half-applied GC or replace, and the
//!   writer never reuses memory a reader may still be in. `tests/expiry_loom.rs` checks this
//!   protocol together with the expiry rule under loom; `tests/expiry_stress.rs` runs churn,
//!   expiry and lookups on threads against a reference model.
//!
//! Who may call what: [`crate::Fib::expire`] and [`crate::Fib::next_expiry`] are for the
//! owner's timer (the daemon's writer thread, or a test); every mutating entry point also
//! reclaims what is due before it acts, so a request never sees an expired route.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::prefix::Key;

/// Milliseconds since an arbitrary origin; never decreases.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now_ms(&self) -> u64;
}

/// The monotonic system clock (what a daemon uses).
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> SystemClock {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

/// A clock that moves only when told to: tests and the offline CLI (`clock advance`). Shared
/// by `Arc`, so a test can advance the clock a `Fib` reads.
#[derive(Debug, Default)]
pub struct ManualClock {
    ms: AtomicU64,
}

impl ManualClock {
    pub fn new(start_ms: u64) -> ManualClock {
        ManualClock {
            ms: AtomicU64::new(start_ms),
        }
    }

    /// Moves the clock forward by `ms` milliseconds.
    pub fn advance(&self, ms: u64) {
        self.ms.fetch_add(ms, Ordering::Release);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.ms.load(Ordering::Acquire)
    }
}

/// The deadline of an expiring route and the prefix it is stored under (part of the info's
/// identity: the GC finds the route's entries from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Expiry {
    pub at: u64,
    pub dst: Key,
}

/// Items ordered by deadline, with exact removal. `T` names the item (never a reference).
#[derive(Debug, Clone)]
pub struct ExpiryQueue<T: Ord + Copy> {
    set: BTreeSet<(u64, T)>,
}

impl<T: Ord + Copy> Default for ExpiryQueue<T> {
    fn default() -> Self {
        ExpiryQueue {
            set: BTreeSet::new(),
        }
    }
}

impl<T: Ord + Copy> ExpiryQueue<T> {
    pub fn insert(&mut self, at: u64, item: T) {
        self.set.insert((at, item));
    }

    /// Removes `item` queued at `at`; false if it was not queued.
    pub fn remove(&mut self, at: u64, item: T) -> bool {
        self.set.remove(&(at, item))
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<u64> {
        self.set.first().map(|(at, _)| *at)
    }

    /// Takes the earliest item if it is due at `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, T)> {
        match self.set.first() {
            Some(&(at, _)) if at <= now => self.set.pop_first(),
            _ => None,
        }
    }

    /// The items due at `now`, earliest first, left in the queue.
    pub fn due(&self, now: u64) -> impl Iterator<Item = T> + '_ {
        self.set
            .iter()
            .take_while(move |(at, _)| *at <= now)
            .map(|(_, item)| *item)
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    pub fn clear(&mut self) {
        self.set.clear();
    }
}

/// An info slot and its serial: names one stored route info for as long as it lives.
pub(crate) type InfoRef = (crate::ids::InfoId, u64);

/// At most this many due exceptions are reclaimed per GC pass, so that a pass after a flood
/// of "packet too big" messages stays short (the rest wait for the next pass; lookups already
/// ignore them). Routes are always reclaimed in full: requests must never see an expired one.
pub const GC_EXCEPTIONS_PER_PASS: usize = 4096;

/// What one GC pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Expired route entries removed.
    pub routes: usize,
    /// Expired next-hop exceptions removed.
    pub exceptions: usize,
    /// Due exceptions are left for the next pass (more than [`GC_EXCEPTIONS_PER_PASS`]).
    pub more_due: bool,
}

/// Whole seconds left before `at`, rounded down as the kernel reports them (`expires 2` reads
/// back as `expires 2sec` at once, `1sec` a moment later).
pub(crate) fn remaining_secs(at: u64, now: u64) -> u32 {
    (at.saturating_sub(now) / 1000).min(u32::MAX as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_pops_due_items_in_deadline_order_and_removes_exactly() {
        let mut q: ExpiryQueue<u32> = ExpiryQueue::default();
        q.insert(30, 3);
        q.insert(10, 1);
        q.insert(20, 2);
        q.insert(20, 4);
        assert!(q.remove(20, 4));
        assert!(!q.remove(20, 4));
        assert_eq!(q.next(), Some(10));
        assert_eq!(q.pop_due(5), None);
        assert_eq!(q.pop_due(25), Some((10, 1)));
        assert_eq!(q.pop_due(25), Some((20, 2)));
        assert_eq!(q.pop_due(25), None);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn remaining_time_reads_as_the_kernel_prints_it() {
        assert_eq!(remaining_secs(300_000, 0), 300);
        assert_eq!(remaining_secs(300_000, 1), 299);
        assert_eq!(remaining_secs(300_000, 1_000), 299);
        assert_eq!(remaining_secs(300_000, 299_500), 0);
        assert_eq!(remaining_secs(300_000, 400_000), 0);
    }

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let c = ManualClock::new(5);
        assert_eq!(c.now_ms(), 5);
        c.advance(1000);
        assert_eq!(c.now_ms(), 1005);
    }
}
