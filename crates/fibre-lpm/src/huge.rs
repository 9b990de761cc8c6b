//! [`HugeVec`]: a growable array for the big arrays lookups read, placed so that Linux can back
//! it with 2 MiB transparent huge pages. With 4 KiB pages, a lookup's random line read in a few
//! MiB of lines also misses the TLB most of the time (each page walk is one more memory access
//! in flight); with huge pages the whole array takes a handful of TLB entries.
//!
//! Arrays of at least [`HUGE_MIN`] bytes are allocated 2 MiB-aligned, in whole 2 MiB units, and
//! advised with `madvise(MADV_HUGEPAGE)` (the kernel's `transparent_hugepage` setting is often
//! `madvise`). The advice is only a hint: when it fails, or on other systems, the array works
//! the same on ordinary pages. Smaller arrays are ordinary allocations.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Size and alignment of a huge page (x86_64 and aarch64 with 4 KiB base pages).
pub(crate) const HUGE_PAGE: usize = 2 << 20;
/// Arrays from this size on are huge-page backed: below it, the rounding to a whole huge page
/// would cost more memory than the TLB misses it saves.
pub(crate) const HUGE_MIN: usize = 1 << 20;

/// A growing array's capacity grows by at least 1/GROWTH of itself: the lines of a full IPv4
/// table are a few MiB, and doubling would leave up to as much again allocated and unused.
pub(crate) const GROWTH: usize = 4;

/// A `Vec`-like array of `Copy` elements (only what the lookup structures need: `resize`,
/// slices, clone), huge-page backed from [`HUGE_MIN`] bytes on.
pub(crate) struct HugeVec<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    cap: usize,
}

// SAFETY: a HugeVec owns its elements exactly like a Vec<T> does (unique pointer, no sharing).
unsafe impl<T: Copy + Send> Send for HugeVec<T> {}
// SAFETY: shared access only hands out `&[T]`, as Vec<T> does.
unsafe impl<T: Copy + Sync> Sync for HugeVec<T> {}

/// The layout of an array of `cap` elements, and whether it is huge-page backed. A huge-page
/// backed array is aligned to a huge page but not rounded up to whole ones: the kernel backs its
/// whole 2 MiB regions with huge pages and the tail with ordinary pages, so it holds no more
/// memory than its capacity.
fn layout<T>(cap: usize) -> (Layout, bool) {
    let bytes = cap
        .checked_mul(std::mem::size_of::<T>())
        .expect("HugeVec capacity overflow");
    if bytes >= HUGE_MIN {
        let align = HUGE_PAGE.max(std::mem::align_of::<T>());
        (
            Layout::from_size_align(bytes, align).expect("HugeVec layout"),
            true,
        )
    } else {
        (Layout::array::<T>(cap).expect("HugeVec layout"), false)
    }
}

#[cfg(target_os = "linux")]
fn advise_huge(p: *mut u8, len: usize) {
    extern "C" {
        fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
    }
    /// Linux's MADV_HUGEPAGE.
    const MADV_HUGEPAGE: i32 = 14;
    // SAFETY: `p..p + len` is one live allocation of ours, aligned to a huge page; madvise only
    // changes how the kernel backs it (a failure, e.g. THP disabled, leaves it as it was).
    let _ = unsafe { madvise(p, len, MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_: *mut u8, _: usize) {}

impl<T: Copy> HugeVec<T> {
    pub(crate) fn new() -> Self {
        HugeVec {
            ptr: NonNull::dangling(),
            len: 0,
            cap: 0,
        }
    }

    /// `n` copies of `value`.
    #[cfg(test)]
    pub(crate) fn from_elem(value: T, n: usize) -> Self {
        let mut v = Self::new();
        v.resize(n, value);
        v
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Elements the current allocation holds.
    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    /// True when the allocation is 2 MiB-aligned and advised for huge pages.
    #[cfg(test)]
    pub(crate) fn is_huge(&self) -> bool {
        self.cap > 0 && std::mem::size_of::<T>() > 0 && layout::<T>(self.cap).1
    }

    /// Grows (filling with `value`) or shrinks to `n` elements. Capacity grows by at least
    /// [`GROWTH`]: amortised constant copying per element, with less memory idle at the end
    /// of a load than a Vec's doubling.
    pub(crate) fn resize(&mut self, n: usize, value: T) {
        if n > self.cap {
            self.reallocate(n.max(self.cap + self.cap / GROWTH).max(4));
        }
        for i in self.len..n {
            // SAFETY: i < n <= cap: inside the allocation; T: Copy, so nothing is dropped.
            unsafe { self.ptr.as_ptr().add(i).write(value) };
        }
        self.len = n;
    }

    /// Moves the elements to a fresh allocation of `cap >= len` elements.
    fn reallocate(&mut self, cap: usize) {
        debug_assert!(cap >= self.len);
        assert!(
            std::mem::size_of::<T>() > 0,
            "HugeVec of zero-sized elements"
        );
        let (new_layout, huge) = layout::<T>(cap);
        // SAFETY: the layout has a non-zero size (cap >= 4, T not zero-sized).
        let p = unsafe { alloc::alloc(new_layout) };
        let Some(p) = NonNull::new(p.cast::<T>()) else {
            alloc::handle_alloc_error(new_layout)
        };
        if huge {
            advise_huge(p.as_ptr().cast(), new_layout.size());
        }
        if self.cap > 0 {
            // SAFETY: both allocations hold at least `len` elements and are distinct; the old
            // one was allocated with `layout::<T>(self.cap)`.
            unsafe {
                std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), p.as_ptr(), self.len);
                alloc::dealloc(self.ptr.as_ptr().cast(), layout::<T>(self.cap).0);
            }
        }
        self.ptr = p;
        self.cap = cap;
    }
}

impl<T: Copy> std::ops::Deref for HugeVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the first `len` elements are initialised; `ptr` is dangling (and aligned) only
        // when len is 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for HugeVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as for Deref, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for HugeVec<T> {
    fn drop(&mut self) {
        if self.cap > 0 {
            // SAFETY: allocated in `reallocate` with exactly this layout; elements need no drop.
            unsafe { alloc::dealloc(self.ptr.as_ptr().cast(), layout::<T>(self.cap).0) };
        }
    }
}

impl<T: Copy> Clone for HugeVec<T> {
    fn clone(&self) -> Self {
        let mut v = Self::new();
        if self.len > 0 {
            v.reallocate(self.len);
            // SAFETY: v's allocation holds `len` elements; the source's first `len` are
            // initialised; the two allocations are distinct.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), v.ptr.as_ptr(), self.len) };
            v.len = self.len;
        }
        v
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for HugeVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeVec")
            .field("len", &self.len)
            .field("cap", &self.cap)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_arrays_are_ordinary_and_big_ones_huge_page_aligned() {
        let small = HugeVec::from_elem(7u32, 1000);
        assert!(!small.is_huge());
        assert!(small.iter().all(|&x| x == 7));
        let big = HugeVec::from_elem(1u64, HUGE_MIN / 8);
        assert!(big.is_huge());
        assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(big.len(), HUGE_MIN / 8);
    }

    #[test]
    fn growth_across_the_threshold_keeps_contents() {
        let mut v = HugeVec::new();
        let mut model = Vec::new();
        // From ordinary to huge-page backed, through several reallocations.
        for step in 0..40u32 {
            let n = v.len() + 1 + (step as usize * 10_000);
            v.resize(n, step);
            model.resize(n, step);
            v[n / 2] ^= 0xFFFF;
            model[n / 2] ^= 0xFFFF;
            assert_eq!(&v[..], &model[..]);
        }
        assert!(v.is_huge());
        v.resize(3, 0);
        assert_eq!(&v[..], &model[..3]);
    }

    #[test]
    fn clones_are_independent() {
        let mut a = HugeVec::from_elem(5u8, HUGE_MIN + 1);
        let b = a.clone();
        a[0] = 9;
        assert_eq!(b[0], 5);
        assert_eq!(b.len(), a.len());
        assert!(b.is_huge());
        let empty: HugeVec<u8> = HugeVec::new();
        assert_eq!(empty.clone().len(), 0);
    }
}
