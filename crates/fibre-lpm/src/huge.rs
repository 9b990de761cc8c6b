//! [`HugeVec`]: a growable array for the big arrays lookups read, placed so that Linux can back
//! it with 2 MiB transparent huge pages. With 4 KiB pages, a lookup's random line read in a few
//! MiB of lines also misses the TLB most of the time (each page walk is one more memory access
//! in flight); with huge pages the whole array takes a handful of TLB entries.
//!
//! Arrays of at least [`HUGE_MIN`] bytes are allocated 2 MiB-aligned, in whole 2 MiB units, and
//! advised with `madvise(MADV_HUGEPAGE)` (the kernel's `transparent_hugepage` setting is often
//! `madvise`). The advice is only a hint: when it fails, or on other systems, the array works
//! the same on ordinary pages. Smaller arrays are ordinary allocations.
//!
//! On Linux a huge array is a mapping of its own, and it grows with `mremap`: in place when
//! the address space after it is free, else by moving its pages to a larger aligned place.
//! Either way nothing is copied and no page is faulted in again. Growing by copying (what an
//! allocator's realloc does with aligned memory) would copy and zero the array's whole
//! history: a table load grows the lines of `dir16` a few dozen times, to tens of MiB.

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
/// backed array is aligned to a huge page; on Linux its mapping is whole huge pages
/// (`mapped_len`), so once its last elements are touched it holds up to one huge page less a
/// byte more than its capacity.
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

/// The memory of huge arrays: on Linux, a private anonymous mapping per array.
#[cfg(target_os = "linux")]
mod region {
    use super::HUGE_PAGE;

    extern "C" {
        fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
        fn munmap(addr: *mut u8, len: usize) -> i32;
        fn mremap(old: *mut u8, old_len: usize, new_len: usize, flags: i32, ...) -> *mut u8;
    }
    const PROT_NONE: i32 = 0;
    const PROT_READ: i32 = 1;
    const PROT_WRITE: i32 = 2;
    const MAP_PRIVATE: i32 = 0x02;
    const MAP_ANONYMOUS: i32 = 0x20;
    const MAP_NORESERVE: i32 = 0x4000;
    const MREMAP_MAYMOVE: i32 = 1;
    const MREMAP_FIXED: i32 = 2;
    const MAP_FAILED: *mut u8 = !0usize as *mut u8;

    /// Address space for a `len`-byte mapping and its alignment: `(start, aligned)`, where
    /// `aligned` is the first huge-page boundary from `start`; the span is `len + HUGE_PAGE`.
    fn reserve(len: usize, prot: i32, flags: i32) -> Option<(*mut u8, *mut u8)> {
        // SAFETY: a fresh anonymous mapping at an address of the kernel's choice: no memory
        // of ours is touched.
        let p = unsafe { mmap(std::ptr::null_mut(), len + HUGE_PAGE, prot, flags, -1, 0) };
        if p == MAP_FAILED {
            return None;
        }
        let skip = (HUGE_PAGE - p as usize % HUGE_PAGE) % HUGE_PAGE;
        Some((p, p.wrapping_add(skip)))
    }

    /// Unmaps what lies around `[aligned, aligned + len)` in a span made by [`reserve`].
    fn trim(start: *mut u8, aligned: *mut u8, len: usize) {
        let head = aligned as usize - start as usize;
        let tail = HUGE_PAGE - head;
        // SAFETY: both pieces lie in the span `reserve` mapped, outside `[aligned, aligned +
        // len)`; nothing of ours is in them.
        unsafe {
            if head > 0 {
                munmap(start, head);
            }
            if tail > 0 {
                munmap(aligned.wrapping_add(len), tail);
            }
        }
    }

    /// A fresh zeroed mapping of `len` bytes (a multiple of the page size) at a huge-page
    /// boundary.
    pub(super) fn map(len: usize) -> Option<*mut u8> {
        let (start, aligned) = reserve(len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS)?;
        trim(start, aligned, len);
        Some(aligned)
    }

    /// Grows the mapping `p` of `old` bytes to `new` (multiples of the page size) keeping its
    /// contents: in place if it can, else moved to a huge-page boundary. `p` is invalid
    /// afterwards unless it is what comes back; on failure the mapping is unchanged.
    ///
    /// # Safety
    /// `p` must be a mapping made by [`map`] or [`grow`] of exactly `old` bytes, with no
    /// reference into it alive.
    pub(super) unsafe fn grow(p: *mut u8, old: usize, new: usize) -> Option<*mut u8> {
        // SAFETY: the caller's mapping; without MREMAP_MAYMOVE it stays where it is.
        let q = unsafe { mremap(p, old, new, 0) };
        if q != MAP_FAILED {
            return Some(q);
        }
        // Address space to move to, aligned; the move replaces the part of it it covers.
        let (start, aligned) =
            reserve(new, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)?;
        // SAFETY: the caller's mapping moved (pages and all) over address space reserved
        // above, which holds nothing of ours.
        let q = unsafe { mremap(p, old, new, MREMAP_MAYMOVE | MREMAP_FIXED, aligned) };
        if q == MAP_FAILED {
            // SAFETY: the reservation made above, still whole.
            unsafe { munmap(start, new + HUGE_PAGE) };
            return None;
        }
        trim(start, aligned, new);
        Some(q)
    }

    /// Unmaps a mapping made by [`map`] or [`grow`].
    ///
    /// # Safety
    /// As for [`grow`].
    pub(super) unsafe fn unmap(p: *mut u8, len: usize) {
        // SAFETY: the caller's mapping, no longer referenced.
        unsafe { munmap(p, len) };
    }
}

/// The bytes of address space a huge array of `cap` elements maps: whole huge pages. Every
/// 2 MiB region of the mapping is then whole from the start, so the kernel backs each with a
/// huge page at its first touch, and an array grown update by update is backed like one built
/// at once. A tail that only part of a region covers would be faulted in as ordinary pages
/// and, to become a huge page once the array grew over it, copied (MADV_COLLAPSE): in a table
/// load that copying took about 6% of fibred's writer (crates/fibred/RESULTS.md).
#[cfg(target_os = "linux")]
fn mapped_len<T>(cap: usize) -> usize {
    (cap * std::mem::size_of::<T>()).next_multiple_of(HUGE_PAGE)
}

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

    /// Gives this vector the length of `src` (filling new elements with `value`) and, when
    /// larger, its capacity: a twin that grew by the same rule from the same state.
    pub(crate) fn grow_like(&mut self, src: &Self, value: T) {
        if src.cap > self.cap {
            self.reallocate(src.cap);
        }
        self.resize(src.len, value);
    }

    /// Moves the elements to an allocation of `cap >= len` elements.
    fn reallocate(&mut self, cap: usize) {
        debug_assert!(cap >= self.len);
        assert!(
            std::mem::size_of::<T>() > 0,
            "HugeVec of zero-sized elements"
        );
        let (new_layout, huge) = layout::<T>(cap);
        #[cfg(target_os = "linux")]
        if huge {
            let len = mapped_len::<T>(cap);
            let old_huge = self.cap > 0 && layout::<T>(self.cap).1;
            let old_len = if old_huge {
                mapped_len::<T>(self.cap)
            } else {
                0
            };
            let p = if old_huge {
                // SAFETY: a huge array's memory is its mapping of `mapped_len(cap)` bytes
                // (made below), and `&mut self` means nothing refers into it.
                unsafe { region::grow(self.ptr.as_ptr().cast(), old_len, len) }
            } else {
                region::map(len)
            };
            let Some(p) = p.and_then(|p| NonNull::new(p.cast::<T>())) else {
                alloc::handle_alloc_error(new_layout)
            };
            advise_huge(p.as_ptr().cast(), len);
            if self.cap > 0 && !old_huge {
                // SAFETY: the old allocation holds `len` elements and is an ordinary one of
                // `layout::<T>(self.cap)`; the new mapping is distinct and large enough.
                unsafe {
                    std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), p.as_ptr(), self.len);
                    alloc::dealloc(self.ptr.as_ptr().cast(), layout::<T>(self.cap).0);
                }
            }
            self.ptr = p;
            self.cap = cap;
            return;
        }
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
        if self.cap == 0 {
            return;
        }
        let (layout, huge) = layout::<T>(self.cap);
        #[cfg(target_os = "linux")]
        if huge {
            // SAFETY: a huge array's memory is its own mapping (see `reallocate`), of this
            // length; elements need no drop.
            unsafe { region::unmap(self.ptr.as_ptr().cast(), mapped_len::<T>(self.cap)) };
            return;
        }
        let _ = huge;
        // SAFETY: allocated in `reallocate` with exactly this layout; elements need no drop.
        unsafe { alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
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

    /// Growth from huge to huge (in place or moved by mremap) keeps the contents and the
    /// alignment, with another mapping in the way half of the time.
    #[test]
    fn huge_growth_keeps_contents_and_alignment() {
        let mut v: HugeVec<u64> = HugeVec::from_elem(3, HUGE_MIN / 8);
        let mut blockers = Vec::new();
        for step in 0..30u64 {
            let n = v.len() + 40_000 + step as usize * 1000;
            v.resize(n, step);
            let last = v.len() - 1;
            v[last] = !step;
            assert_eq!(v.as_ptr() as usize % HUGE_PAGE, 0);
            assert!(v[..HUGE_MIN / 8].iter().all(|&x| x == 3));
            assert_eq!(v[last], !step);
            if step % 2 == 0 {
                // Something mapped right after, so the next growth may have to move.
                blockers.push(HugeVec::from_elem(step as u8, HUGE_MIN));
            }
        }
        let c = v.clone();
        drop(v);
        assert!(c[..HUGE_MIN / 8].iter().all(|&x| x == 3));
    }

    /// A huge array's mapping ends on a huge-page boundary, so no region of it is partial.
    #[cfg(target_os = "linux")]
    #[test]
    fn huge_arrays_map_whole_huge_pages() {
        assert_eq!(mapped_len::<u8>(HUGE_MIN + 1), HUGE_PAGE);
        assert_eq!(mapped_len::<u64>(HUGE_PAGE / 8 + 1), 2 * HUGE_PAGE);
        let mut v = HugeVec::from_elem(1u32, HUGE_MIN / 4);
        v.resize(v.capacity() + 1, 2);
        assert_eq!(mapped_len::<u32>(v.capacity()) % HUGE_PAGE, 0);
        assert_eq!(v[v.len() - 1], 2);
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
