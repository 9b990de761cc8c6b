//! AF_XDP's single-producer, single-consumer rings as user space sees them: a power-of-two
//! array of descriptors and two free-running `u32` indices shared with the kernel, each side
//! writing one. The number of entries is `producer - consumer` (wrapping), a slot is
//! `index & mask`.
//!
//! Memory ordering, as the kernel's side (`net/xdp/xsk_queue.h`) expects it: a producer
//! writes its descriptors, then stores the producer index with Release; a consumer loads the
//! producer index with Acquire before reading descriptors, and stores the consumer index with
//! Release once it has read them, so the producer never overwrites a slot still being read.
//! The other side's index is cached and reloaded only when the cache says the ring is
//! empty (consumer) or full (producer), which keeps the shared cache line cold.
//!
//! One `Ring` is used either as a producer (fill, TX) or as a consumer (completion, RX), by
//! the one thread that owns the queue holding it.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) struct Ring<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    desc: NonNull<T>,
    mask: u32,
    /// Our own index: the next slot to write (producer) or to read (consumer).
    local: u32,
    /// The other side's index as last loaded.
    cached: u32,
}

// SAFETY: the ring's memory is shared with the kernel only, through the atomics; the value is
// used by one thread at a time (the owner of its queue), so moving it between threads is fine.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// A ring over `size` descriptors at `desc` with its indices and flags word.
    ///
    /// # Safety
    /// The pointers must be valid and aligned for the ring's whole life (the mapping that
    /// holds them outlives it), `desc` must hold `size` entries, `size` must be a power of
    /// two, and no other user-space code may write the ring.
    pub(crate) unsafe fn new(
        producer: *mut u32,
        consumer: *mut u32,
        flags: *mut u32,
        desc: *mut T,
        size: u32,
        is_producer: bool,
    ) -> Ring<T> {
        debug_assert!(size.is_power_of_two());
        let (Some(p), Some(c), Some(f), Some(d)) = (
            NonNull::new(producer.cast::<AtomicU32>()),
            NonNull::new(consumer.cast::<AtomicU32>()),
            NonNull::new(flags.cast::<AtomicU32>()),
            NonNull::new(desc),
        ) else {
            unreachable!("ring pointers come from a mapping and are never null")
        };
        // SAFETY: the caller guarantees the pointers are valid; AtomicU32 has u32's layout.
        let (prod, cons) = unsafe {
            (
                p.as_ref().load(Ordering::Acquire),
                c.as_ref().load(Ordering::Acquire),
            )
        };
        let (local, cached) = if is_producer {
            (prod, cons)
        } else {
            (cons, prod)
        };
        Ring {
            producer: p,
            consumer: c,
            flags: f,
            desc: d,
            mask: size - 1,
            local,
            cached,
        }
    }

    fn size(&self) -> u32 {
        self.mask + 1
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: valid for the ring's life (`new`'s contract).
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: valid for the ring's life (`new`'s contract).
        unsafe { self.consumer.as_ref() }
    }

    /// Producer: how many slots are free, at least `want` if the kernel has consumed enough.
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = free_slots(self.size(), self.local, self.cached);
        if free >= want {
            return free;
        }
        self.cached = self.consumer().load(Ordering::Acquire);
        free_slots(self.size(), self.local, self.cached)
    }

    /// Producer: writes the next slot; the caller has checked [`Ring::free`].
    pub(crate) fn push(&mut self, v: T) {
        debug_assert!(free_slots(self.size(), self.local, self.cached) > 0);
        let slot = (self.local & self.mask) as usize;
        // SAFETY: `slot` is within the `size` entries; the slot is free, so the kernel does
        // not read it until the producer index is published.
        unsafe { self.desc.as_ptr().add(slot).write_volatile(v) };
        self.local = self.local.wrapping_add(1);
    }

    /// Producer: publishes what [`Ring::push`] wrote.
    pub(crate) fn submit(&mut self) {
        self.producer().store(self.local, Ordering::Release);
    }

    /// Consumer: how many entries wait, at least `want` if the kernel has produced enough.
    pub(crate) fn available(&mut self, want: u32) -> u32 {
        let avail = self.cached.wrapping_sub(self.local);
        if avail >= want {
            return avail;
        }
        self.cached = self.producer().load(Ordering::Acquire);
        self.cached.wrapping_sub(self.local)
    }

    /// Consumer: reads the next entry; the caller has checked [`Ring::available`].
    pub(crate) fn pop(&mut self) -> T {
        debug_assert!(self.cached.wrapping_sub(self.local) > 0);
        let slot = (self.local & self.mask) as usize;
        // SAFETY: `slot` is within the ring; the kernel published it (Acquire in
        // `available`) and does not reuse it before the consumer index passes it.
        let v = unsafe { self.desc.as_ptr().add(slot).read_volatile() };
        self.local = self.local.wrapping_add(1);
        v
    }

    /// Consumer: gives the entries read back to the kernel.
    pub(crate) fn release(&mut self) {
        self.consumer().store(self.local, Ordering::Release);
    }

    /// True when the kernel asks to be woken (XDP_USE_NEED_WAKEUP) to process this ring.
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: valid for the ring's life (`new`'s contract).
        let flags = unsafe { self.flags.as_ref() }.load(Ordering::Relaxed);
        flags & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// Free slots of a ring of `size` whose producer is at `prod` and consumer at `cons`.
fn free_slots(size: u32, prod: u32, cons: u32) -> u32 {
    size - prod.wrapping_sub(cons)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring in ordinary memory, its indices starting at `start` (to cross the u32 wrap).
    struct Mem {
        prod: Box<AtomicU32>,
        cons: Box<AtomicU32>,
        flags: Box<AtomicU32>,
        desc: Vec<u64>,
    }

    impl Mem {
        fn new(size: usize, start: u32) -> Mem {
            Mem {
                prod: Box::new(AtomicU32::new(start)),
                cons: Box::new(AtomicU32::new(start)),
                flags: Box::new(AtomicU32::new(0)),
                desc: vec![0; size],
            }
        }

        fn ring(&mut self, is_producer: bool) -> Ring<u64> {
            // SAFETY: the boxes and the vector outlive the rings of each test.
            unsafe {
                Ring::new(
                    self.prod.as_ptr(),
                    self.cons.as_ptr(),
                    self.flags.as_ptr(),
                    self.desc.as_mut_ptr(),
                    self.desc.len() as u32,
                    is_producer,
                )
            }
        }
    }

    #[test]
    fn free_slots_wrap() {
        assert_eq!(free_slots(8, 0, 0), 8);
        assert_eq!(free_slots(8, 5, 1), 4);
        assert_eq!(free_slots(8, 2, u32::MAX - 5), 0);
        assert_eq!(free_slots(8, 1, u32::MAX - 2), 4);
    }

    #[test]
    fn producer_and_consumer_across_the_wrap() {
        let mut m = Mem::new(4, u32::MAX - 2);
        let mut p = m.ring(true);
        let mut c = m.ring(false);
        let mut next = 0u64;
        let mut expect = 0u64;
        for round in 0..10 {
            let n = p.free(4);
            assert_eq!(n, 4, "round {round}: the consumer released everything");
            for _ in 0..n {
                p.push(next);
                next += 1;
            }
            assert_eq!(c.available(1), 0, "nothing is visible before submit");
            p.submit();
            assert_eq!(p.free(1), 0, "full until the consumer releases");
            let a = c.available(4);
            assert_eq!(a, 4);
            for _ in 0..a {
                assert_eq!(c.pop(), expect);
                expect += 1;
            }
            assert_eq!(p.free(1), 0, "slots stay taken until release");
            c.release();
        }
        assert_eq!(next, 40);
        assert!(m.prod.load(Ordering::Relaxed) < 40, "the indices wrapped");
    }

    #[test]
    fn caches_the_other_index_until_needed() {
        let mut m = Mem::new(8, 0);
        let mut p = m.ring(true);
        p.push(1);
        p.push(2);
        p.submit();
        // The kernel consumes both; a producer asking for no more than its cache shows does
        // not reload.
        m.cons.store(2, Ordering::Relaxed);
        assert_eq!(p.free(6), 6);
        assert_eq!(p.free(7), 8);
    }

    #[test]
    fn wakeup_flag() {
        let mut m = Mem::new(2, 0);
        let r = m.ring(true);
        assert!(!r.needs_wakeup());
        m.flags.store(libc::XDP_RING_NEED_WAKEUP, Ordering::Relaxed);
        assert!(r.needs_wakeup());
    }
}
