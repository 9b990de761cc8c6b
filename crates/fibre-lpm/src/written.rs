//! Records of what a structure wrote since it was last made equal to its twin, so that the
//! twin can copy those places instead of computing the same updates again.
//!
//! The IPv4 trie and its mirror ([`crate::trie`], [`crate::dir16`]) are deterministic: equal
//! structures given equal updates end up holding equal bytes, free lists and capacities
//! included. A writer that keeps two copies of a table (`fibre-publish`) applies each batch
//! to one copy, then to the other; with these records the second copy copies the places the
//! first one wrote instead. Two kinds of places are written:
//! - [`Marks`]: indices of a fixed universe (the trie's direct entries, the mirror's chunks),
//!   each listed once, in the order of its first mark;
//! - [`Released`]: blocks given back to a free list. A block freed during a batch may have been
//!   written after its twin's copy was taken, so its stale bytes differ unless copied too.
//!
//! Only the owning structure calls these; the copying code reads them from the source and
//! restarts the destination's (see `Trie::copy_from_twin`).

/// Blocks released beyond which a record stops listing them and only says it is incomplete
/// (the twin then copies everything): bounds the memory a structure that is never copied
/// from spends on its record. A batch of the 2026 IPv4 table's load releases about 200 node
/// and leaf blocks per thousand routes.
const RELEASED_MAX: usize = 1 << 16;

/// Indices below a fixed bound, each listed once.
#[derive(Clone, Debug, Default)]
pub(crate) struct Marks {
    /// Bit i: index i is listed. Allocated at the first mark.
    bits: Vec<u64>,
    listed: Vec<u32>,
}

impl Marks {
    /// Lists index `i` of a universe of `universe` indices, unless it is listed.
    #[inline]
    pub(crate) fn mark(&mut self, i: usize, universe: usize) {
        if self.bits.is_empty() {
            self.bits = vec![0; universe.div_ceil(64)];
        }
        let (w, b) = (i / 64, i % 64);
        if self.bits[w] >> b & 1 == 0 {
            self.bits[w] |= 1 << b;
            self.listed.push(i as u32);
        }
    }

    /// The listed indices, in the order of their first mark.
    pub(crate) fn listed(&self) -> &[u32] {
        &self.listed
    }

    /// Lists nothing (keeps the allocations).
    pub(crate) fn clear(&mut self) {
        for &i in &self.listed {
            self.bits[i as usize / 64] = 0;
        }
        self.listed.clear();
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.bits.capacity() * 8 + self.listed.capacity() * 4
    }
}

/// Blocks (first element, elements) released to a free list.
#[derive(Clone, Debug, Default)]
pub(crate) struct Released {
    blocks: Vec<(u32, u32)>,
    /// More than [`RELEASED_MAX`] blocks were released: `blocks` is not all of them.
    overflowed: bool,
}

impl Released {
    #[inline]
    pub(crate) fn push(&mut self, at: u32, n: usize) {
        if self.blocks.len() < RELEASED_MAX {
            self.blocks.push((at, n as u32));
        } else {
            self.overflowed = true;
        }
    }

    /// Element ranges of the released blocks; `None` when some were not listed.
    pub(crate) fn ranges(&self) -> Option<impl Iterator<Item = std::ops::Range<usize>> + '_> {
        (!self.overflowed).then(|| {
            self.blocks
                .iter()
                .map(|&(at, n)| at as usize..(at + n) as usize)
        })
    }

    pub(crate) fn clear(&mut self) {
        self.blocks.clear();
        self.overflowed = false;
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * 8
    }
}

/// Makes `dst` hold what `src` holds, with the same capacity (capacities decide when a
/// structure grows next, which the twins must agree on), reusing `dst`'s allocation when it
/// has that capacity.
pub(crate) fn copy_vec<T: Copy>(dst: &mut Vec<T>, src: &Vec<T>) {
    if dst.capacity() != src.capacity() {
        *dst = Vec::with_capacity(src.capacity());
    }
    dst.clear();
    dst.extend_from_slice(src);
}

/// Gives `dst` the length and capacity of `src` (a structure's element array: `src` grew by
/// the same rule from the same state, so its capacity is at least `dst`'s), filling new
/// elements with `fill`; the caller copies the elements that differ.
pub(crate) fn grow_like<T: Clone>(dst: &mut Vec<T>, src: &Vec<T>, fill: T) {
    if src.capacity() > dst.capacity() {
        dst.reserve_exact(src.capacity() - dst.len());
    }
    dst.resize(src.len(), fill);
}
