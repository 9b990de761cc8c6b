//! IPv6 longest-prefix match: [`Lpm6`]. A 16-bit root table, then per /16 a B+-tree of *range
//! nodes* searched with SIMD compares, in the spirit of PlanB (Zhang et al., NSDI 2026: LPM as a
//! search over the boundaries of elementary intervals) but updated in place. Addresses are
//! `u128` in network order (the first address byte is the most significant).
//!
//! # Structure
//! - **Root**: 2^16 entries, one per /16. Announced space is a few dozen /16s of 2000::/3, so
//!   the entries lookups touch stay in L1; an entry without routes below it is final.
//! - **Buckets**: the prefixes inside a region (longer than its depth `d`) cut the region into
//!   intervals, each with the value of the longest prefix covering it (leaf-pushed). A bucket
//!   stores the interval boundaries as 32-bit *keys*: address bits `d..d+32`, exact for every
//!   prefix up to /d+32 (all of the 2026 table is /48 or shorter). A bucket is a B+-tree of
//!   128-byte nodes: one line of 15 sorted keys, one line of the 16 children (inner nodes) or
//!   interval values (leaves). Updates edit these nodes; lookups read the bucket's *image*.
//! - **Images**: per bucket, copies of its leaves, contiguous in key order, under a static,
//!   pointer-free index of full 16-way *inner lines* (15 keys and the position of the line's
//!   first child; children are consecutive), as PlanB lays out its tree. An inner step reads
//!   one line and computes its child; a leaf step reads the leaf's two lines (keys, values).
//!   Images store each key minus one, so a step compares the broadcast search key with the
//!   line in memory: two AVX2 compares, a pack, a movemask and a popcount, which counts each
//!   key twice, so positions are kept doubled (SSE2 without AVX2, scalar off x86_64: same
//!   answers). Leaves hold their values as lookups answer them. On
//!   the 2026 table a lookup reads the root entry, 1-3 inner lines and a leaf, 2.5 MiB in
//!   all. A leaf edit is copied into the image at once (`node_pos`); a leaf split rebuilds
//!   the bucket's inner lines and moves the leaves after the split (O(leaves / 16) lines plus
//!   the moved leaves), in place while the image's ranges are large enough.
//! - **Batches** advance 64 lookups level by level, prefetching every lane's next line before
//!   reading any, so dozens of cache misses are in flight at once. Lanes are filed by their
//!   image's height into dense per-height arrays and aligned on their leaves (a lane in an
//!   image of `h` inner levels joins the passes `h` from the end), so each pass is a few
//!   counted loops, the last reads every lane's leaf, and no pass tests a lane's state.
//! - **Tables**: a region holding a prefix too long for its key window (longer than /d+32) is a
//!   256-entry table on the next 8 bits instead; its entries are regions again (values, buckets
//!   or tables). So any prefix up to /128 is exact; the cost is paid only where such prefixes
//!   are.
//!
//! A region's form is canonical: a value when no prefix is inside it, a table when one inside is
//! too long for the window, a bucket otherwise. [`Lpm6::shape`] counts tables and buckets, which
//! depend only on the set of prefixes, never on update order (tested). The node layout inside a
//! bucket depends on its update history (B+-tree splits); its image depends only on its leaves,
//! and lookups on neither.
//!
//! # Invariants
//! - Every table entry and bucket interval holds the value of the longest prefix covering it, so
//!   a lookup is one walk down, never backtracking. Its cost depends on the table (the depth of
//!   the walk at the address), never on traffic: nothing adapts to what is looked up.
//! - Neighbouring leaf intervals differ in value or owner (below): an update merges the ones
//!   it leaves equal, dropping the key between them (a stale inner separator may stay). So a
//!   key is an endpoint of some prefix inside the bucket, but an endpoint need not be a key: a
//!   run of adjacent prefixes with one next hop is one interval. On the 2026 table (next hop =
//!   origin AS mod 64) 40% of the endpoints remain keys; with a real router's few next hops,
//!   fewer. Fewer keys mean fewer leaves, the part of the tree that lookups miss on.
//! - Each table entry records its cover (value and length of the longest prefix containing it,
//!   at most as long as the entry). Each leaf interval records its owner: whether its value is
//!   the region's cover (`COVERED`, rewritten when the cover changes) or a route's inside the
//!   region (`ROUTE`).
//! - The control map `routes` holds exactly the stored prefixes (host bits cleared).
//! - Lookups read only `look_root`, `look_tables`, `inner` and `leaves`. A lookup entry equals
//!   its control entry (`root`, `tables`) except for a bucket, whose lookup entry names its
//!   image; between updates every image's leaves equal its bucket's leaves, in key order
//!   (`check_images`, tested).
//!
//! # Update cost
//! An update walks the prefix's path. In a bucket it *repaints* the prefix's range from the
//! route map: the prefix's value (or, on removal, that of the longest shorter prefix covering
//! it, or the region's cover) under the routes nested in the prefix. It makes the boundaries
//! of that picture keys (B+-tree splits: O(height) nodes each), rewrites the intervals between
//! them and merges the neighbours left equal: O(log n) for a prefix with nothing nested (most
//! of the table: /48s), O(k log n) for one with k prefixes nested in it. A prefix ending at a
//! table level rewrites the entries it covers and pushes its value into the buckets and tables
//! below them that it now covers (leaf pushing: `::/0` touches every entry with no longer
//! cover). The first prefix too long for a bucket's window turns the bucket
//! into a table, and removing the last one turns the table back: those two rebuild that region
//! from its prefixes once. Nothing is ever rebuilt whole. Nodes are split, never merged: a
//! bucket keeps the nodes it grew until all its prefixes are gone (then it is freed whole), and
//! a node split by in-order insertion is left full rather than half full (see `split`).
//!
//! # Who calls what
//! Single-threaded: `&mut self` updates, `&self` lookups. Share it across threads through
//! [`crate::sync`], whose writer applies every update to both of its copies.

use std::collections::{BTreeMap, HashMap};

use crate::{LpmError, Shape, MAX_VALUE};

/// Bits resolved by the root table: 2^16 entries (256 KiB), one per /16.
const ROOT_BITS: u32 = 16;
/// Bits resolved by a table below the root: 256 entries (1 KiB). Tables only exist over
/// prefixes longer than a bucket window, so their size hardly matters; 8 keeps them byte-aligned.
const STRIDE: u32 = 8;
const FANOUT: usize = 1 << STRIDE;
/// Width of a bucket's keys: the address bits after the bucket's depth. 32-bit keys fit 16 to
/// a cache line (two AVX2 compares) and cover /d..d+32: a /16 bucket holds prefixes to /48.
const WINDOW_BITS: u32 = 32;
/// Key slots per node: one 64-byte line of `u32`.
const NODE_KEYS: usize = 16;
/// Children (or intervals) per node: one 64-byte line of `u32` entries.
const NODE_WAYS: usize = NODE_KEYS;
/// Keys a node holds: one child more than keys must fit the second line.
const MAX_KEYS: usize = NODE_WAYS - 1;
/// Keys per leaf when a bucket is built from scratch: below the maximum, so that inserting
/// into a freshly built bucket rarely splits at once.
const BUILD_LEAF_KEYS: usize = 12;
/// A key inserted among the last this many of a full node splits it at the key (see `split`):
/// two, because a route adds its end key after its start key.
const APPEND_TAIL: usize = 2;
/// Lookups advanced together by `lookup_batch`: enough independent memory accesses in flight
/// to cover L3 latency, few enough that lane state stays in L1.
const BATCH: usize = 64;

/// Owner of a bucket interval showing its region's cover (updated when the cover changes).
const COVERED: u8 = 0;
/// Owner of a bucket interval showing a route inside its region.
const ROUTE: u8 = 1;

/// Internal "no route" value (values are `0..=MAX_VALUE`).
const NONE: u32 = 0x7FFF_FFFF;
/// Entry tag of a table: the low 30 bits are its index. Entries below it are values.
const TABLE_TAG: u32 = 0x8000_0000;
/// Entry tag of a node (a bucket's root, or an inner node's child).
const NODE_TAG: u32 = 0xC000_0000;
const INDEX_MASK: u32 = 0x3FFF_FFFF;
/// Keys are stored with the top bit flipped so that a signed compare orders them as unsigned
/// (SIMD has only signed 32-bit compares).
const KEY_BIAS: u32 = 0x8000_0000;
/// Padding for unused key slots, stored biased: `i32::MIN`, the biased form of key 0. Key 0 is
/// the region's start, never a boundary, and no search key is below it, so padding is never
/// counted.
const KEY_PAD: u32 = KEY_BIAS;
/// Lookup entry of a bucket's image: `IMG_TAG | levels << IMG_LEVELS_SHIFT | 2 * position`,
/// the position of its top inner line, or of its one leaf when it has no inner level (doubled
/// like the child positions in [`Line`]).
const IMG_TAG: u32 = 0xC000_0000;
const IMG_LEVELS_SHIFT: u32 = 27;
/// The levels field of a lookup entry (3 bits).
const IMG_LEVELS_FIELD: u32 = 7;
/// Doubled positions in the image arrays: 2^26 lines (4 GiB) or leaves.
const IMG_POS_MASK: u32 = (1 << IMG_LEVELS_SHIFT) - 1;
/// Inner levels an image entry can say: 16^7 leaves, far beyond any table's intervals.
const IMG_MAX_LEVELS: usize = IMG_LEVELS_FIELD as usize;
/// Slot of an inner line holding the position of its first child; the other 15 are keys.
const LINE_FIRST: usize = NODE_KEYS - 1;
/// Padding of an image line's key slots: `i32::MAX`, never below a search key.
const IMG_PAD: u32 = i32::MAX as u32;
/// `Lpm6::node_pos` of a node that is not a leaf in an image.
const NO_POS: u32 = u32::MAX;
/// `Image` class of an absent range (a bucket of one leaf has no inner lines).
const NO_CLASS: u8 = u8::MAX;

const _: () = assert!(MAX_VALUE < NONE);

/// The longest route covering a region or entry: its value and `len + 1` (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cover {
    val: u32,
    rank: u8,
}

const NO_COVER: Cover = Cover { val: NONE, rank: 0 };

/// A bucket node. `keys[..n]` are biased keys, ascending; `keys[n..]` are [`KEY_PAD`]. A search
/// key with `c` keys above it goes to `ways[c]`: the ways are stored last-first, so the count
/// indexes them without knowing `n`. In a leaf the ways are values, in an inner node they are
/// `NODE_TAG` entries. Two lines, 128-byte aligned so that they form one adjacent-line pair.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(128))]
struct Node {
    keys: [u32; NODE_KEYS],
    ways: [u32; NODE_WAYS],
}

/// An inner line of a bucket's image: up to 15 *image keys*, ascending, padded with
/// [`IMG_PAD`], and in slot [`LINE_FIRST`] twice the position of the line's first child. An
/// image key is a biased key minus one, so that a search key `qb` has passed key `k` when
/// `k - 1 < qb`: one compare of the broadcast search key with the line in memory. Children are
/// consecutive (lines of the next level, or leaves), so a search key that has passed `c` keys
/// goes to `first + c`: an inner step reads one line and no pointer. Positions are kept
/// doubled because the SIMD count below counts every key twice.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Line {
    w: [u32; NODE_KEYS],
}

/// A leaf of a bucket's image: its node's keys as image keys (see [`Line`]), ascending and
/// padded with [`IMG_PAD`], and the values of its intervals first to last, as lookups answer
/// them ([`crate::NO_ROUTE`] for none). Two lines, 128-byte aligned like [`Node`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(128))]
struct Leaf {
    keys: [u32; NODE_KEYS],
    vals: [u32; NODE_WAYS],
}

/// Where a bucket's image lives: a range of `Lpm6::inner` and one of `Lpm6::leaves`, by start
/// and size class.
#[derive(Clone, Copy, Debug)]
struct Image {
    inner: u32,
    inner_class: u8,
    leaves: u32,
    leaf_class: u8,
}

/// A node unpacked for editing: keys unbiased and ways first-to-last, one slot of room to
/// overflow before a split.
#[derive(Clone, Copy)]
struct Open {
    n: usize,
    keys: [u32; MAX_KEYS + 1],
    ways: [u32; NODE_WAYS + 1],
    /// Leaves only: per interval, its owner (`COVERED` or `ROUTE`).
    owner: [u8; NODE_WAYS + 1],
}

/// A route as the builder sees it: prefix (host bits clear), length, value.
type Route = (u128, u8, u32);

/// Where an entry lives: the root or a table (flat index `table * FANOUT + slot`).
#[derive(Clone, Copy, Debug)]
enum Slot {
    Root(usize),
    Table(usize),
}

/// IPv6 prefix -> `u32` value index. Single-threaded; share it through [`crate::sync`].
#[derive(Clone, Debug)]
pub struct Lpm6 {
    // Read by lookups.
    /// The root's lookup entries: as `root`, but a bucket's entry is its image's.
    look_root: Vec<u32>,
    /// The tables' lookup entries, as `look_root`.
    look_tables: Vec<u32>,
    /// Inner lines of the buckets' images.
    inner: Vec<Line>,
    /// Leaves of the buckets' images: the buckets' leaf nodes in key order (`Leaf::of`).
    leaves: Vec<Leaf>,
    // Control state, read and written by updates only.
    root: Vec<u32>,
    /// Tables of `FANOUT` entries, back to back.
    tables: Vec<u32>,
    /// The buckets' B+-tree nodes, which updates edit; lookups read their images.
    nodes: Vec<Node>,
    /// Per node: its copy's position in `leaves`, or `NO_POS`.
    node_pos: Vec<u32>,
    /// Per bucket (by `slot_key` of its slot): its image's ranges. Slots follow from prefixes
    /// netlink peers choose: std's SipHash, seeded per map; only updates read it.
    images: HashMap<u64, Image>,
    inner_pool: Pool,
    leaf_pool: Pool,
    root_cover: Vec<Cover>,
    table_cover: Vec<Cover>,
    /// Per table: inside routes too long for a bucket at its depth (0 turns it into a bucket).
    table_long: Vec<u32>,
    /// Per node, in way order like `Node::ways`: for leaves, see `Open::owner`.
    node_owner: Vec<[u8; NODE_WAYS]>,
    free_tables: Vec<u32>,
    free_nodes: Vec<u32>,
    /// Regions compiled as buckets.
    buckets: usize,
    routes: BTreeMap<(u128, u8), u32>,
    /// Routes per prefix length: lengths with none are skipped when looking for a cover.
    per_len: [u32; 129],
    /// The CPU has AVX2 (checked once, at construction).
    avx2: bool,
}

impl Default for Lpm6 {
    fn default() -> Self {
        Self::new()
    }
}

/// `a` with all but its first `len` bits cleared.
#[inline(always)]
fn mask(a: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        a & (u128::MAX << (128 - u32::from(len)))
    }
}

/// The last address of the prefix at `p` of length `len`.
#[inline(always)]
fn last(p: u128, len: u8) -> u128 {
    p | u128::MAX.checked_shr(u32::from(len)).unwrap_or(0)
}

/// The key of address `a` in a bucket at depth `d`: address bits `d..d+32`, zero-padded past
/// bit 127. A prefix of length `l` (d < l <= d+32, or any l past depth 96) spans
/// `2^(d+32-l)` keys from the key of its first address, at every depth.
#[inline(always)]
fn window(a: u128, d: u32) -> u32 {
    ((a << d) >> (128 - WINDOW_BITS)) as u32
}

/// Keys spanned by a prefix of length `l` inside a bucket at depth `d`.
#[inline(always)]
fn span(l: u8, d: u32) -> u64 {
    1u64 << (d + WINDOW_BITS - u32::from(l))
}

/// A prefix of length `l` has exact keys in a bucket at depth `d`.
#[inline(always)]
fn fits(l: u8, d: u32) -> bool {
    u32::from(l) <= d + WINDOW_BITS
}

/// The index of `a`'s entry in a table at depth `d` (d >= 16).
#[inline(always)]
fn slot_at(a: u128, d: u32) -> usize {
    ((a >> (128 - STRIDE - d)) as usize) & (FANOUT - 1)
}

#[inline(always)]
fn is_value(e: u32) -> bool {
    e < TABLE_TAG
}

#[inline(always)]
fn is_node(e: u32) -> bool {
    e >= NODE_TAG
}

#[inline(always)]
fn is_table(e: u32) -> bool {
    !is_value(e) && !is_node(e)
}

/// A lookup entry is a bucket's image.
#[inline(always)]
fn is_image(e: u32) -> bool {
    e >= IMG_TAG
}

/// Inner levels of the image of lookup entry `e` (garbage, but at most `IMG_LEVELS_FIELD`, for
/// other entries).
#[inline(always)]
fn image_levels(e: u32) -> usize {
    ((e >> IMG_LEVELS_SHIFT) & IMG_LEVELS_FIELD) as usize
}

#[inline(always)]
fn index(e: u32) -> usize {
    (e & INDEX_MASK) as usize
}

/// The key slots above the biased search key `qb` (bit `i` for slot `i`), portable.
#[inline(always)]
fn above_portable(keys: &[u32; NODE_KEYS], qb: i32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline.
        let q = unsafe { _mm_set1_epi32(qb) };
        let p = keys.as_ptr().cast::<__m128i>();
        let mut bits = 0u32;
        for i in 0..NODE_KEYS / 4 {
            // SAFETY: SSE2 is part of the x86_64 baseline; keys are 64-byte aligned (`Node`,
            // `Line`), so each 16-byte load is aligned and inside `keys`.
            let m = unsafe {
                _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(
                    _mm_load_si128(p.add(i)),
                    q,
                )))
            };
            bits |= (m as u32) << (4 * i);
        }
        bits
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut bits = 0;
        for (i, &k) in keys.iter().enumerate() {
            bits |= u32::from(k as i32 > qb) << i;
        }
        bits
    }
}

/// Twice the number of image keys (slots `0..LINE_FIRST` of `w`) below biased search key `qb`,
/// portable.
#[inline(always)]
fn passed2_portable(w: &[u32; NODE_KEYS], qb: i32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        let p = w.as_ptr().cast::<__m128i>();
        // SAFETY: SSE2 is part of the x86_64 baseline; `w` is 64-byte aligned (`Line`, `Leaf`),
        // so each 16-byte load is aligned and inside `w`.
        let m = unsafe {
            let q = _mm_set1_epi32(qb);
            let c = |i: usize| _mm_cmpgt_epi32(q, _mm_load_si128(p.add(i)));
            let lo = _mm_packs_epi32(c(0), c(1));
            let hi = _mm_packs_epi32(c(2), c(3));
            _mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u32
        };
        2 * (m & ((1 << LINE_FIRST) - 1)).count_ones()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let passed = w[..LINE_FIRST].iter().filter(|&&k| (k as i32) < qb).count();
        2 * passed as u32
    }
}

/// As [`passed2_portable`], with two AVX2 compares against the line in memory, packed to one
/// mask of two bits per key.
///
/// # Safety
/// The CPU must support AVX2 and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
unsafe fn passed2_avx2(w: &[u32; NODE_KEYS], qb: i32) -> u32 {
    use core::arch::x86_64::*;
    let p = w.as_ptr().cast::<__m256i>();
    // SAFETY: the caller guarantees AVX2; `w` is 64-byte aligned (`Line`, `Leaf`), so each
    // 32-byte load is aligned and inside `w`.
    let m = unsafe {
        let q = _mm256_set1_epi32(qb);
        let lo = _mm256_cmpgt_epi32(q, _mm256_load_si256(p));
        let hi = _mm256_cmpgt_epi32(q, _mm256_load_si256(p.add(1)));
        // Packing interleaves the halves (slots 0-3, 8-11, 4-7, 12-15): slot 15 is the mask's
        // top two bits.
        _mm256_movemask_epi8(_mm256_packs_epi32(lo, hi)) as u32
    };
    (m & ((1 << (2 * LINE_FIRST)) - 1)).count_ones()
}

/// Twice the image keys of `w` below biased search key `qb`, with AVX2 when `AVX2`.
#[inline(always)]
fn passed2<const AVX2: bool>(w: &[u32; NODE_KEYS], qb: i32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: `AVX2` is only true in code reached after run-time detection.
        return unsafe { passed2_avx2(w, qb) };
    }
    passed2_portable(w, qb)
}

/// The image line at doubled position `p2` of `inner` (computed, not dereferenced).
#[inline(always)]
fn line_at(inner: *const Line, p2: u32) -> *const Line {
    const _: () = assert!(std::mem::size_of::<Line>() == 64);
    inner.cast::<u8>().wrapping_add(p2 as usize * 32).cast()
}

/// The image leaf at doubled position `p2` of `leaves` (computed, not dereferenced).
#[inline(always)]
fn leaf_at(leaves: *const Leaf, p2: u32) -> *const Leaf {
    const _: () = assert!(std::mem::size_of::<Leaf>() == 128);
    leaves.cast::<u8>().wrapping_add(p2 as usize * 64).cast()
}

/// A biased key as an image key (see [`Line`]). Key 0 is never stored, so this never wraps.
#[inline(always)]
fn image_key(k: u32) -> u32 {
    (k ^ KEY_BIAS).wrapping_sub(1)
}

#[cfg(test)]
impl Node {
    /// The way a search for biased key `qb` takes (updates search nodes by their unpacked
    /// keys; tests check the images against this).
    fn way(&self, qb: i32) -> u32 {
        // At most MAX_KEYS slots count: padding is never above a search key.
        let c = above_portable(&self.keys, qb).count_ones() as usize;
        self.ways[c & (NODE_WAYS - 1)]
    }
}

impl Line {
    /// Twice the position of the child a search for biased key `qb` takes.
    #[inline(always)]
    fn child2<const AVX2: bool>(&self, qb: i32) -> u32 {
        self.w[LINE_FIRST].wrapping_add(passed2::<AVX2>(&self.w, qb))
    }
}

impl Leaf {
    /// The image leaf of leaf node `node`.
    fn of(node: &Node) -> Leaf {
        let n = key_count(node);
        let mut leaf = EMPTY_LEAF;
        for j in 0..n {
            leaf.keys[j] = image_key(node.keys[j] ^ KEY_BIAS);
        }
        for j in 0..=n {
            leaf.vals[j] = crate::external(node.ways[n - j]);
        }
        leaf
    }

    /// The value a search for biased key `qb` finds.
    #[inline(always)]
    fn value<const AVX2: bool>(&self, qb: i32) -> u32 {
        // At most MAX_KEYS keys pass (the last slot is padding): `c2 / 2 < NODE_WAYS`.
        let c2 = passed2::<AVX2>(&self.keys, qb) as usize;
        debug_assert!(c2.is_multiple_of(2) && c2 / 2 < NODE_WAYS);
        // SAFETY: `c2` is even and below `2 * NODE_WAYS`, so the byte offset `2 * c2` is that
        // of `vals[c2 / 2]` (indexed by bytes to spare halving an even count).
        unsafe { *self.vals.as_ptr().cast::<u8>().add(2 * c2).cast::<u32>() }
    }
}

/// Ranges of an image array reused by size class: class `k` holds `class_cap(k)` items, and
/// capacities grow by at most 1.25x per class, so a range wastes under a fifth of itself.
#[derive(Clone, Debug, Default)]
struct Pool {
    /// Items in the array (used and free ranges).
    len: usize,
    /// Per class: starts of free ranges.
    free: Vec<Vec<u32>>,
}

/// Items a range of class `k` holds: 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ...
fn class_cap(k: u8) -> usize {
    (4 + usize::from(k & 3)) << (k / 4)
}

/// The smallest class holding `n` items.
fn class_of(n: usize) -> u8 {
    let mut k = 0;
    while class_cap(k) < n {
        k += 1;
    }
    k
}

impl Pool {
    /// A range of class `k`: its start. The caller grows its array to `self.len`.
    fn alloc(&mut self, k: u8) -> Result<u32, LpmError> {
        if let Some(start) = self.free.get_mut(usize::from(k)).and_then(Vec::pop) {
            return Ok(start);
        }
        let start = self.len;
        if 2 * (start + class_cap(k)) > IMG_POS_MASK as usize + 1 {
            return Err(LpmError::Full);
        }
        self.len += class_cap(k);
        Ok(start as u32)
    }

    fn release(&mut self, start: u32, k: u8) {
        let k = usize::from(k);
        if self.free.len() <= k {
            self.free.resize(k + 1, Vec::new());
        }
        self.free[k].push(start);
    }

    fn bytes(&self) -> usize {
        self.free.iter().map(|f| f.capacity() * 4).sum()
    }
}

impl Lpm6 {
    /// An empty table.
    pub fn new() -> Self {
        Lpm6 {
            look_root: vec![NONE; 1 << ROOT_BITS],
            look_tables: Vec::new(),
            inner: Vec::new(),
            leaves: Vec::new(),
            root: vec![NONE; 1 << ROOT_BITS],
            tables: Vec::new(),
            nodes: Vec::new(),
            node_pos: Vec::new(),
            images: HashMap::new(),
            inner_pool: Pool::default(),
            leaf_pool: Pool::default(),
            root_cover: vec![NO_COVER; 1 << ROOT_BITS],
            table_cover: Vec::new(),
            table_long: Vec::new(),
            node_owner: Vec::new(),
            free_tables: Vec::new(),
            free_nodes: Vec::new(),
            buckets: 0,
            routes: BTreeMap::new(),
            per_len: [0; 129],
            avx2: detect_avx2(),
        }
    }

    /// Maps `prefix/len` to `value` (host bits of `prefix` are ignored) and returns the value it
    /// replaced, if any.
    pub fn insert(&mut self, prefix: u128, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        if len > 128 {
            return Err(LpmError::InvalidLength(len));
        }
        if value > MAX_VALUE {
            return Err(LpmError::ValueTooLarge(value));
        }
        let p = mask(prefix, len);
        let old = self.routes.insert((p, len), value);
        if old == Some(value) {
            return Ok(old);
        }
        if old.is_none() {
            self.per_len[usize::from(len)] += 1;
        }
        if let Err(e) = self.apply_insert(p, len, value, old.is_none()) {
            // Out of index space: undo, so that the map and the compiled form agree.
            match old {
                Some(v) => self.routes.insert((p, len), v),
                None => {
                    self.per_len[usize::from(len)] -= 1;
                    self.routes.remove(&(p, len))
                }
            };
            return Err(e);
        }
        Ok(old)
    }

    /// Removes `prefix/len` and returns its value, if it was present.
    pub fn remove(&mut self, prefix: u128, len: u8) -> Option<u32> {
        if len > 128 {
            return None;
        }
        let p = mask(prefix, len);
        let v = self.routes.remove(&(p, len))?;
        self.per_len[usize::from(len)] -= 1;
        self.apply_remove(p, len);
        Some(v)
    }

    /// The value stored for exactly `prefix/len`.
    pub fn get(&self, prefix: u128, len: u8) -> Option<u32> {
        if len > 128 {
            return None;
        }
        self.routes.get(&(mask(prefix, len), len)).copied()
    }

    /// The value of the longest prefix covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let mut e = self.look_root[(addr >> (128 - ROOT_BITS)) as usize];
        let mut k = (addr >> (128 - ROOT_BITS - WINDOW_BITS)) as u32;
        if is_table(e) {
            (e, k) = self.walk_tables(addr, e);
        }
        if is_image(e) {
            let v = self.search(e, (k ^ KEY_BIAS) as i32);
            return (v != crate::NO_ROUTE).then_some(v);
        }
        (e != NONE).then_some(e)
    }

    /// Walks the tables from `addr`'s root entry `e` (a table) to its lookup entry in the first
    /// region that is not a table, and returns that entry and `addr`'s key at its depth. Out of
    /// line: tables exist only over prefixes longer than a bucket window, so lookups rarely
    /// come here, and the batch's lane set-up keeps its registers.
    #[cold]
    #[inline(never)]
    fn walk_tables(&self, addr: u128, mut e: u32) -> (u32, u32) {
        let mut d = ROOT_BITS;
        while is_table(e) {
            e = self.look_tables[index(e) * FANOUT + slot_at(addr, d)];
            d += STRIDE;
        }
        (e, window(addr, d))
    }

    /// Searches the image whose lookup entry is `e` with biased key `qb`: the value found, as
    /// lookups answer it.
    #[inline(always)]
    fn search(&self, e: u32, qb: i32) -> u32 {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` was set by run-time detection of AVX2 and POPCNT.
            return unsafe { self.search_avx2(e, qb) };
        }
        self.search_with::<false>(e, qb)
    }

    /// # Safety
    /// The CPU must support AVX2 and POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn search_avx2(&self, e: u32, qb: i32) -> u32 {
        self.search_with::<true>(e, qb)
    }

    #[inline(always)]
    fn search_with<const AVX2: bool>(&self, e: u32, qb: i32) -> u32 {
        let mut pos2 = e & IMG_POS_MASK;
        for _ in 0..image_levels(e) {
            pos2 = self.inner[(pos2 / 2) as usize].child2::<AVX2>(qb);
        }
        self.leaves[(pos2 / 2) as usize].value::<AVX2>(qb)
    }

    /// Looks up every address of `addrs` into the same position of `out` ([`crate::NO_ROUTE`]
    /// where no prefix covers it), overlapping the memory accesses of independent lookups.
    /// Panics if the slices differ in length.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [u32]) {
        assert_eq!(
            addrs.len(),
            out.len(),
            "lookup_batch: addrs and out differ in length"
        );
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` was set by run-time detection of AVX2 and POPCNT.
            unsafe { self.lookup_batch_avx2(addrs, out) };
            return;
        }
        for (a, o) in addrs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            self.lookup_group::<false>(a, o);
        }
    }

    /// # Safety
    /// The CPU must support AVX2 and POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn lookup_batch_avx2(&self, addrs: &[u128], out: &mut [u32]) {
        for (a, o) in addrs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            self.lookup_group::<true>(a, o);
        }
    }

    /// One group of `lookup_batch`. Each lane first reads its root entry (and walks tables,
    /// rare: only over prefixes longer than a bucket window) and answers it when it is a value.
    /// Lanes that reach a bucket are filed by the height of its image, and then descend one
    /// level per pass, every lane's next line prefetched before any is read. Lanes are aligned
    /// on their leaves: the pass `top - h` from the end steps the lanes of height at least `h`,
    /// and the last pass reads every lane's leaf. So each pass is a few counted loops over
    /// dense lane arrays, with no per-lane test.
    #[inline(always)]
    fn lookup_group<const AVX2: bool>(&self, addrs: &[u128], out: &mut [u32]) {
        use std::mem::MaybeUninit;
        /// Heights a lane is filed at: its image's inner levels, or the garbage levels field
        /// of a value (filed but not counted).
        const HEIGHTS: usize = IMG_LEVELS_FIELD as usize + 1;
        let n = addrs.len();
        assert!(n <= BATCH && out.len() == n);
        // Per height, per lane filed there: biased search key, doubled position in the image,
        // index in the group. `filed` counts the lanes of height `h` in its byte `h`. Slots are
        // written before they are read: a height's slots `0..count` are its filed lanes.
        let mut key = MaybeUninit::<[[i32; BATCH]; HEIGHTS]>::uninit();
        let mut pos = MaybeUninit::<[[u32; BATCH]; HEIGHTS]>::uninit();
        let mut lane = MaybeUninit::<[[u8; BATCH]; HEIGHTS]>::uninit();
        let key = key.as_mut_ptr().cast::<i32>();
        let pos = pos.as_mut_ptr().cast::<u32>();
        let lane = lane.as_mut_ptr().cast::<u8>();
        let mut filed = 0u64;
        debug_assert_eq!(self.look_root.len(), 1 << ROOT_BITS);
        let root = self.look_root.as_ptr();
        let inner = self.inner.as_ptr();
        let leaves = self.leaves.as_ptr();
        let out = out.as_mut_ptr();
        for (i, &a) in addrs.iter().enumerate() {
            // SAFETY: the root has 2^ROOT_BITS entries.
            let mut e = unsafe { *root.add((a >> (128 - ROOT_BITS)) as usize) };
            let mut k = (a >> (128 - ROOT_BITS - WINDOW_BITS)) as u32;
            if is_table(e) {
                (e, k) = self.walk_tables(a, e);
            }
            // A value is the answer; an image's lane overwrites it from its leaf.
            // SAFETY: `i < n == out.len()`.
            unsafe { *out.add(i) = crate::external(e) };
            if !is_image(e) {
                continue;
            }
            // An image's lane is filed at the next slot of its height; fewer than BATCH lanes
            // are filed before lane `i`, so the slot is in bounds. `8 * h`, the shift of
            // height `h`'s count in `filed`, comes straight from the entry.
            let h8 = (e >> (IMG_LEVELS_SHIFT - 3)) & (IMG_LEVELS_FIELD << 3);
            let h = (h8 / 8) as usize;
            let slot = h * BATCH + ((filed >> h8) & 0xFF) as usize;
            filed += 1 << h8;
            let p2 = e & IMG_POS_MASK;
            // SAFETY: `h < HEIGHTS` and the slot's count is below BATCH (above), `i < BATCH`.
            unsafe {
                key.add(slot).write((k ^ KEY_BIAS) as i32);
                pos.add(slot).write(p2);
                lane.add(slot).write(i as u8);
            }
            if h > 0 {
                crate::prefetch(line_at(inner, p2));
            } else {
                let at = leaf_at(leaves, p2).cast::<u8>();
                crate::prefetch(at);
                crate::prefetch(at.wrapping_add(64));
            }
        }
        let count = |h: usize| ((filed >> (8 * h)) & 0xFF) as usize;
        let top = if filed == 0 {
            0
        } else {
            (63 - filed.leading_zeros() as usize) / 8
        };
        for pass in 0..top {
            let remain = top - pass;
            for h in remain..=top {
                let slots = h * BATCH..h * BATCH + count(h);
                if remain > 1 {
                    for s in slots {
                        // SAFETY: slot `s` is a filed lane of height `h >= remain`, with
                        // `h - remain` inner levels stepped: its position is an inner line of
                        // its image, and images lie inside `inner` (see `build_image`).
                        unsafe {
                            let p2 = (*line_at(inner, *pos.add(s))).child2::<AVX2>(*key.add(s));
                            pos.add(s).write(p2);
                            crate::prefetch(line_at(inner, p2));
                        }
                    }
                } else {
                    for s in slots {
                        // SAFETY: as above; the child is a leaf of the image.
                        unsafe {
                            let p2 = (*line_at(inner, *pos.add(s))).child2::<AVX2>(*key.add(s));
                            pos.add(s).write(p2);
                            let at = leaf_at(leaves, p2).cast::<u8>();
                            crate::prefetch(at);
                            crate::prefetch(at.wrapping_add(64));
                        }
                    }
                }
            }
        }
        for h in 0..=top {
            for s in h * BATCH..h * BATCH + count(h) {
                // SAFETY: slot `s` is a filed lane with all its inner levels stepped: its
                // position is a leaf of its image; its lane index is below `n`.
                unsafe {
                    let v = (*leaf_at(leaves, *pos.add(s))).value::<AVX2>(*key.add(s));
                    *out.add(usize::from(*lane.add(s))) = v;
                }
            }
        }
    }

    /// Bytes held, control state included (the route map estimated at its B-tree node size).
    pub fn memory_bytes(&self) -> usize {
        /// A B-tree map entry: key, value and the node's share (nodes are ~2/3 full).
        const ROUTE_BYTES: usize = (std::mem::size_of::<(u128, u8)>() + 4) * 3 / 2;
        /// A hash map entry: key, value and control byte, at the map's 7/8 load.
        const IMAGE_BYTES: usize = (8 + std::mem::size_of::<Image>() + 1) * 8 / 7;
        self.lookup_bytes()
            + (self.root.capacity() + self.tables.capacity() + self.node_pos.capacity()) * 4
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.images.capacity() * IMAGE_BYTES
            + self.inner_pool.bytes()
            + self.leaf_pool.bytes()
            + (self.root_cover.capacity() + self.table_cover.capacity())
                * std::mem::size_of::<Cover>()
            + self.table_long.capacity() * 4
            + self.node_owner.capacity() * NODE_WAYS
            + (self.free_tables.capacity() + self.free_nodes.capacity()) * 4
            + self.routes.len() * ROUTE_BYTES
            + std::mem::size_of::<Self>()
    }

    /// Bytes of the arrays lookups read (root, tables, the buckets' images).
    pub fn lookup_bytes(&self) -> usize {
        (self.look_root.capacity() + self.look_tables.capacity()) * 4
            + self.inner.capacity() * std::mem::size_of::<Line>()
            + self.leaves.capacity() * std::mem::size_of::<Leaf>()
    }

    /// Number of prefixes stored.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// True when no prefix is stored.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Counts of tables (`nodes`) and buckets (`leaves`), which depend only on the set of
    /// prefixes, not on update order.
    pub fn shape(&self) -> Shape {
        Shape {
            routes: self.routes.len(),
            nodes: self.table_long.len() - self.free_tables.len(),
            leaves: self.buckets,
        }
    }

    /// Starts a batch of updates, visible to lookups once the batch is dropped. The batch
    /// borrows the table, so no lookup can run during it.
    pub fn batch(&mut self) -> Batch<'_> {
        Batch { lpm: self }
    }

    /// Applies an update for the writer of [`crate::sync`]. Updates compile at once here (each
    /// is bounded, see the module comment), so [`Self::flush`] has nothing left to do.
    pub(crate) fn apply_deferred(
        &mut self,
        op: &crate::sync::Update<u128>,
    ) -> crate::sync::UpdateResult {
        match *op {
            crate::sync::Update::Insert(p, l, v) => self.insert(p, l, v),
            crate::sync::Update::Remove(p, l) => Ok(self.remove(p, l)),
        }
    }

    /// Finishes deferred updates: none are deferred (see [`Self::apply_deferred`]).
    pub(crate) fn flush(&mut self) {}

    /// Builds a table from `(prefix, len, value)` triples (a later duplicate replaces an earlier
    /// one), compiling each region once: much faster than inserting one by one.
    pub fn from_routes(
        routes: impl IntoIterator<Item = (u128, u8, u32)>,
    ) -> Result<Self, LpmError> {
        let mut t = Lpm6::new();
        for (p, l, v) in routes {
            if l > 128 {
                return Err(LpmError::InvalidLength(l));
            }
            if v > MAX_VALUE {
                return Err(LpmError::ValueTooLarge(v));
            }
            t.routes.insert((mask(p, l), l), v);
        }
        for &(_, l) in t.routes.keys() {
            t.per_len[usize::from(l)] += 1;
        }
        let cover = match t.routes.get(&(0, 0)) {
            Some(&v) => Cover { val: v, rank: 1 },
            None => NO_COVER,
        };
        let all: Vec<Route> = t
            .routes
            .iter()
            .filter(|(&(_, l), _)| l > 0)
            .map(|(&(p, l), &v)| (p, l, v))
            .collect();
        let (covers, entries) = t.compile_level(0, ROOT_BITS, 0, cover, &all)?;
        t.root = entries;
        t.root_cover = covers;
        for i in 0..1 << ROOT_BITS {
            t.refresh(Slot::Root(i))?;
        }
        Ok(t)
    }

    // ---- building ----

    /// Compiles the `2^bits` entries of a table at depth `d` over the region at `lo` whose
    /// cover is `cover` and whose inside routes are `inside` (sorted by prefix, then length).
    /// Returns each entry's cover and compiled form.
    fn compile_level(
        &mut self,
        d: u32,
        bits: u32,
        lo: u128,
        cover: Cover,
        inside: &[Route],
    ) -> Result<(Vec<Cover>, Vec<u32>), LpmError> {
        let size = 1usize << bits;
        let slot = |a: u128| ((a << d) >> (128 - bits)) as usize;
        let mut covers = vec![cover; size];
        // Routes ending at this level, painted shortest first so longer ones win.
        let mut ending: Vec<&Route> = inside
            .iter()
            .filter(|r| u32::from(r.1) <= d + bits)
            .collect();
        ending.sort_by_key(|r| r.1);
        for &&(p, l, v) in &ending {
            let first = slot(p);
            let count = 1usize << (d + bits - u32::from(l));
            covers[first..first + count].fill(Cover {
                val: v,
                rank: l + 1,
            });
        }
        let mut entries: Vec<u32> = covers.iter().map(|c| c.val).collect();
        let deeper: Vec<Route> = inside
            .iter()
            .filter(|r| u32::from(r.1) > d + bits)
            .copied()
            .collect();
        let mut rest = &deeper[..];
        while let Some(&(p, _, _)) = rest.first() {
            let s = slot(p);
            let n = rest.iter().take_while(|r| slot(r.0) == s).count();
            let child_lo = lo | ((s as u128) << (128 - d - bits));
            entries[s] = self.build_region(d + bits, child_lo, covers[s], &rest[..n])?;
            rest = &rest[n..];
        }
        Ok((covers, entries))
    }

    /// Compiles a region at depth `d` (its form: see the module comment) and returns its entry.
    fn build_region(
        &mut self,
        d: u32,
        lo: u128,
        cover: Cover,
        inside: &[Route],
    ) -> Result<u32, LpmError> {
        if inside.is_empty() {
            return Ok(cover.val);
        }
        if inside.iter().all(|r| fits(r.1, d)) {
            return self.build_bucket(d, cover, inside);
        }
        let t = self.alloc_table()?;
        let (covers, entries) = self.compile_level(d, STRIDE, lo, cover, inside)?;
        let at = t as usize * FANOUT;
        self.tables[at..at + FANOUT].copy_from_slice(&entries);
        self.table_cover[at..at + FANOUT].copy_from_slice(&covers);
        self.table_long[t as usize] = inside.iter().filter(|r| !fits(r.1, d)).count() as u32;
        Ok(TABLE_TAG | t)
    }

    /// Builds the bucket of a region at depth `d` whose inside routes (sorted, all fitting the
    /// window) are `inside`, and returns its root entry.
    fn build_bucket(&mut self, d: u32, cover: Cover, inside: &[Route]) -> Result<u32, LpmError> {
        let (starts, vals, owners) = sweep(d, 0, 1 << WINDOW_BITS, (cover.val, COVERED), inside);

        // Pack leaves, then inner levels, bottom up: (lowest key, entry) per node.
        let per_leaf = if starts.len() <= NODE_WAYS {
            NODE_WAYS
        } else {
            BUILD_LEAF_KEYS + 1
        };
        let mut level: Vec<(u32, u32)> = Vec::with_capacity(starts.len() / per_leaf + 1);
        for at in (0..starts.len()).step_by(per_leaf) {
            let end = (at + per_leaf).min(starts.len());
            let mut o = Open {
                n: end - at - 1,
                keys: [0; MAX_KEYS + 1],
                ways: [NONE; NODE_WAYS + 1],
                owner: [0; NODE_WAYS + 1],
            };
            o.keys[..o.n].copy_from_slice(&starts[at + 1..end]);
            o.ways[..=o.n].copy_from_slice(&vals[at..end]);
            o.owner[..=o.n].copy_from_slice(&owners[at..end]);
            let id = self.alloc_node()?;
            self.store(id, &o);
            level.push((starts[at], NODE_TAG | id));
        }
        while level.len() > 1 {
            let mut up = Vec::with_capacity(level.len() / NODE_WAYS + 1);
            for group in level.chunks(NODE_WAYS) {
                let mut o = Open {
                    n: group.len() - 1,
                    keys: [0; MAX_KEYS + 1],
                    ways: [NONE; NODE_WAYS + 1],
                    owner: [0; NODE_WAYS + 1],
                };
                for (j, &(k, e)) in group.iter().enumerate() {
                    if j > 0 {
                        o.keys[j - 1] = k;
                    }
                    o.ways[j] = e;
                }
                let id = self.alloc_node()?;
                self.store(id, &o);
                up.push((group[0].0, NODE_TAG | id));
            }
            level = up;
        }
        self.buckets += 1;
        Ok(level[0].1)
    }

    fn alloc_table(&mut self) -> Result<u32, LpmError> {
        if let Some(t) = self.free_tables.pop() {
            return Ok(t);
        }
        let t = self.table_long.len() as u32;
        if t > INDEX_MASK >> STRIDE {
            return Err(LpmError::Full);
        }
        self.tables.resize(self.tables.len() + FANOUT, NONE);
        self.look_tables.resize(self.tables.len(), NONE);
        self.table_cover
            .resize(self.table_cover.len() + FANOUT, NO_COVER);
        self.table_long.push(0);
        Ok(t)
    }

    fn alloc_node(&mut self) -> Result<u32, LpmError> {
        if let Some(id) = self.free_nodes.pop() {
            self.node_pos[id as usize] = NO_POS;
            return Ok(id);
        }
        let id = self.nodes.len() as u32;
        if id > INDEX_MASK {
            return Err(LpmError::Full);
        }
        self.nodes.push(EMPTY_NODE);
        self.node_owner.push([0; NODE_WAYS]);
        self.node_pos.push(NO_POS);
        Ok(id)
    }

    /// Returns the table or bucket behind `slot` (and everything below it) to the free lists;
    /// the caller gives the slot a new entry.
    fn free_region(&mut self, slot: Slot) {
        let e = self.entry(slot);
        if is_node(e) {
            self.free_nodes_below(index(e));
            self.free_image(slot);
            self.buckets -= 1;
        } else if is_table(e) {
            let t = index(e);
            for s in t * FANOUT..(t + 1) * FANOUT {
                self.free_region(Slot::Table(s));
            }
            self.free_tables.push(t as u32);
        }
    }

    fn free_nodes_below(&mut self, id: usize) {
        let node = self.nodes[id];
        if is_node(node.ways[0]) {
            let n = node.keys.iter().filter(|&&k| k != KEY_PAD).count();
            for &w in &node.ways[..=n] {
                self.free_nodes_below(index(w));
            }
        }
        self.free_nodes.push(id as u32);
    }

    // ---- nodes ----

    fn open(&self, id: usize) -> Open {
        let node = &self.nodes[id];
        let owner = &self.node_owner[id];
        let n = node.keys.iter().filter(|&&k| k != KEY_PAD).count();
        let mut o = Open {
            n,
            keys: [0; MAX_KEYS + 1],
            ways: [NONE; NODE_WAYS + 1],
            owner: [0; NODE_WAYS + 1],
        };
        for j in 0..n {
            o.keys[j] = node.keys[j] ^ KEY_BIAS;
        }
        for j in 0..=n {
            o.ways[j] = node.ways[n - j];
            o.owner[j] = owner[n - j];
        }
        o
    }

    /// Writes `o` (at most `MAX_KEYS` keys) into node `id`.
    fn store(&mut self, id: u32, o: &Open) {
        debug_assert!(o.n <= MAX_KEYS);
        let mut node = Node {
            keys: [KEY_PAD; NODE_KEYS],
            ways: [NONE; NODE_WAYS],
        };
        let mut owner = [0u8; NODE_WAYS];
        for j in 0..o.n {
            node.keys[j] = o.keys[j] ^ KEY_BIAS;
        }
        for j in 0..=o.n {
            node.ways[o.n - j] = o.ways[j];
            owner[o.n - j] = o.owner[j];
        }
        self.nodes[id as usize] = node;
        self.node_owner[id as usize] = owner;
        // A leaf in an image is copied there at once (a split leaf's new half is not in one
        // until the split's caller rebuilds the image).
        let at = self.node_pos[id as usize];
        if at != NO_POS {
            self.leaves[at as usize] = Leaf::of(&node);
        }
    }

    /// Makes key `k` (0 < k < 2^32) a boundary of the bucket behind `slot`: the interval
    /// containing it is split in two with the same value. Splits full nodes up the path, and
    /// says whether it did: the bucket's image must then be rebuilt.
    fn bucket_add_key(&mut self, slot: Slot, k: u32) -> Result<bool, LpmError> {
        let mut path: Vec<(u32, usize)> = Vec::new();
        let mut id = index(self.entry(slot)) as u32;
        // Inner nodes are searched in place; only the leaf is opened for editing.
        let kb = (k ^ KEY_BIAS) as i32;
        let mut o = loop {
            let node = &self.nodes[id as usize];
            let n = key_count(node);
            let pos = n - above_portable(&node.keys, kb).count_ones() as usize;
            if pos > 0 && node.keys[pos - 1] == k ^ KEY_BIAS {
                return Ok(false);
            }
            if !is_node(node.ways[0]) {
                break self.open(id as usize);
            }
            path.push((id, pos));
            // Ways are stored last-first.
            id = index(node.ways[n - pos]) as u32;
        };
        let mut pos = o.keys[..o.n].partition_point(|&x| x <= k);
        let (w, owner) = (o.ways[pos], o.owner[pos]);
        insert_at(&mut o, pos, k, w, owner);
        let mut grew = false;
        // Split upwards while the node overflows.
        loop {
            if o.n <= MAX_KEYS {
                self.store(id, &o);
                return Ok(grew);
            }
            grew = true;
            let (left, sep, right) = split(&o, pos);
            let new = self.alloc_node()?;
            self.store(id, &left);
            self.store(new, &right);
            match path.pop() {
                Some((parent, at)) => {
                    o = self.open(parent as usize);
                    insert_at(&mut o, at, sep, NODE_TAG | new, 0);
                    id = parent;
                    pos = at;
                }
                None => {
                    let root = self.alloc_node()?;
                    let mut r = Open {
                        n: 1,
                        keys: [0; MAX_KEYS + 1],
                        ways: [NONE; NODE_WAYS + 1],
                        owner: [0; NODE_WAYS + 1],
                    };
                    r.keys[0] = sep;
                    r.ways[0] = NODE_TAG | id;
                    r.ways[1] = NODE_TAG | new;
                    self.store(root, &r);
                    self.set_entry(slot, NODE_TAG | root);
                    return Ok(true);
                }
            }
        }
    }

    /// Applies `f` (given the interval's first key) to the value and owner of every leaf
    /// interval of node `id` (covering keys `lo..hi`) that lies inside `a..b`, then merges the
    /// neighbours left equal at leaf keys in `a..=b`. Intervals straddling `a` or `b` are left
    /// alone: the callers made both ends boundaries.
    fn bucket_update(
        &mut self,
        id: usize,
        lo: u64,
        hi: u64,
        a: u64,
        b: u64,
        f: &mut impl FnMut(u64, &mut u32, &mut u8),
    ) {
        let node = self.nodes[id];
        if is_node(node.ways[0]) {
            // An inner node: recurse into the children overlapping `a..b`, read in place.
            let n = key_count(&node);
            for j in 0..=n {
                let cs = if j == 0 {
                    lo
                } else {
                    u64::from(node.keys[j - 1] ^ KEY_BIAS)
                };
                let ce = if j == n {
                    hi
                } else {
                    u64::from(node.keys[j] ^ KEY_BIAS)
                };
                if ce > a && cs < b {
                    self.bucket_update(index(node.ways[n - j]), cs, ce, a, b, f);
                }
            }
            return;
        }
        let mut o = self.open(id);
        let mut changed = false;
        for j in 0..=o.n {
            let cs = if j == 0 { lo } else { u64::from(o.keys[j - 1]) };
            let ce = if j == o.n { hi } else { u64::from(o.keys[j]) };
            if cs >= a && ce <= b {
                f(cs, &mut o.ways[j], &mut o.owner[j]);
                changed = true;
            }
        }
        // Key `j - 1` separates intervals `j - 1` and `j`.
        let mut j = 1;
        while j <= o.n {
            let k = u64::from(o.keys[j - 1]);
            let equal = o.ways[j - 1] == o.ways[j] && o.owner[j - 1] == o.owner[j];
            if (a..=b).contains(&k) && equal {
                o.keys.copy_within(j..o.n, j - 1);
                o.ways.copy_within(j + 1..=o.n, j);
                o.owner.copy_within(j + 1..=o.n, j);
                o.n -= 1;
                changed = true;
            } else {
                j += 1;
            }
        }
        if changed {
            self.store(id as u32, &o);
        }
    }

    // ---- slots ----

    fn entry(&self, s: Slot) -> u32 {
        match s {
            Slot::Root(i) => self.root[i],
            Slot::Table(i) => self.tables[i],
        }
    }

    /// Sets the control entry of `s`, and its lookup entry unless `e` is a bucket's root (whose
    /// lookup entry is its image's: see `build_image`).
    fn set_entry(&mut self, s: Slot, e: u32) {
        match s {
            Slot::Root(i) => self.root[i] = e,
            Slot::Table(i) => self.tables[i] = e,
        }
        if !is_node(e) {
            self.set_look(s, e);
        }
    }

    fn set_look(&mut self, s: Slot, e: u32) {
        match s {
            Slot::Root(i) => self.look_root[i] = e,
            Slot::Table(i) => self.look_tables[i] = e,
        }
    }

    /// Brings the lookup entries of the region behind `s` in line with its control entries,
    /// building the images of the buckets in it.
    fn refresh(&mut self, s: Slot) -> Result<(), LpmError> {
        let e = self.entry(s);
        if is_node(e) {
            return self.build_image(s);
        }
        self.set_look(s, e);
        if is_table(e) {
            let t = index(e);
            for i in t * FANOUT..(t + 1) * FANOUT {
                self.refresh(Slot::Table(i))?;
            }
        }
        Ok(())
    }

    // ---- images ----

    /// The depth of the tree under node `root`: that of its last way's path down, as every
    /// leaf of the balanced tree sits at the same depth.
    fn depth(&self, root: usize) -> u32 {
        let mut depth = 0;
        let mut id = root;
        while is_node(self.nodes[id].ways[0]) {
            let n = self.nodes[id]
                .keys
                .iter()
                .filter(|&&k| k != KEY_PAD)
                .count();
            id = index(self.nodes[id].ways[n]);
            depth += 1;
        }
        depth
    }

    /// (Re)builds the image of the bucket behind `s` from its leaves and points the lookup
    /// entry at it. The image keeps its ranges while they are large enough (readers never see
    /// this copy while it is written: see [`crate::sync`]).
    fn build_image(&mut self, s: Slot) -> Result<(), LpmError> {
        let mut ids = Vec::new();
        let mut firsts = Vec::new();
        let root = index(self.entry(s));
        let depth = self.depth(root);
        self.collect_leaves(root, depth, 0, &mut ids, &mut firsts);
        // Nodes per level, leaves first.
        let mut sizes = vec![ids.len()];
        while let Some(&n @ 2..) = sizes.last() {
            sizes.push(n.div_ceil(NODE_WAYS));
        }
        let levels = sizes.len() - 1;
        if levels > IMG_MAX_LEVELS {
            return Err(LpmError::Full);
        }
        let lines: usize = sizes[1..].iter().sum();
        let want = |n: usize| if n == 0 { NO_CLASS } else { class_of(n) };
        let (inner_class, leaf_class) = (want(lines), want(ids.len()));
        let key = slot_key(s);
        let img = match self.images.get(&key).copied() {
            // Reused unless too small, or more than about twice too large.
            Some(im)
                if fits_class(im.inner_class, inner_class)
                    && fits_class(im.leaf_class, leaf_class) =>
            {
                im
            }
            old => {
                if let Some(im) = old {
                    self.release_image(im);
                }
                let inner = if lines == 0 {
                    0
                } else {
                    self.inner_pool.alloc(inner_class)?
                };
                let leaves = self.leaf_pool.alloc(leaf_class)?;
                grow(
                    &mut self.inner,
                    self.inner_pool.len,
                    Line {
                        w: [IMG_PAD; NODE_KEYS],
                    },
                );
                grow(&mut self.leaves, self.leaf_pool.len, EMPTY_LEAF);
                Image {
                    inner,
                    inner_class,
                    leaves,
                    leaf_class,
                }
            }
        };
        self.images.insert(key, img);
        for (r, &id) in ids.iter().enumerate() {
            // A leaf already at its place is up to date there (`store` patches it).
            let at = img.leaves as usize + r;
            if self.node_pos[id as usize] != at as u32 {
                self.leaves[at] = Leaf::of(&self.nodes[id as usize]);
                self.node_pos[id as usize] = at as u32;
            }
        }
        // Inner levels top first: level `l` (1..=levels) starts at `base[l]`, leaves at
        // `base[0]`; node `i` of level `l` has children `16i..16i+15` of level `l - 1`.
        let mut base = vec![img.leaves as usize; levels + 1];
        let mut at = img.inner as usize;
        for l in (1..=levels).rev() {
            base[l] = at;
            at += sizes[l];
        }
        let mut span = 1; // leaves under one node of level `l - 1`
        for l in 1..=levels {
            for i in 0..sizes[l] {
                let first = NODE_WAYS * i;
                let last = (first + NODE_WAYS - 1).min(sizes[l - 1] - 1);
                let mut w = [IMG_PAD; NODE_KEYS];
                for (j, c) in (first + 1..=last).enumerate() {
                    w[j] = image_key(firsts[c * span]);
                }
                w[LINE_FIRST] = 2 * (base[l - 1] + first) as u32;
                self.inner[base[l] + i] = Line { w };
            }
            span *= NODE_WAYS;
        }
        let top = if levels == 0 { img.leaves } else { img.inner };
        self.set_look(s, IMG_TAG | (levels as u32) << IMG_LEVELS_SHIFT | (2 * top));
        Ok(())
    }

    /// Appends the leaves under node `id`, `depth` levels above them, whose range starts at
    /// key `lo`, to `ids`, in key order, and the first key of each to `firsts`. Reads no leaf.
    fn collect_leaves(
        &self,
        id: usize,
        depth: u32,
        lo: u32,
        ids: &mut Vec<u32>,
        firsts: &mut Vec<u32>,
    ) {
        if depth == 0 {
            ids.push(id as u32);
            firsts.push(lo);
            return;
        }
        let node = &self.nodes[id];
        let n = node.keys.iter().filter(|&&k| k != KEY_PAD).count();
        for j in 0..=n {
            let start = if j == 0 {
                lo
            } else {
                node.keys[j - 1] ^ KEY_BIAS
            };
            // Ways are stored last-first.
            self.collect_leaves(index(node.ways[n - j]), depth - 1, start, ids, firsts);
        }
    }

    fn release_image(&mut self, im: Image) {
        if im.inner_class != NO_CLASS {
            self.inner_pool.release(im.inner, im.inner_class);
        }
        self.leaf_pool.release(im.leaves, im.leaf_class);
    }

    /// Frees the image of the bucket behind `s`, if it has one.
    fn free_image(&mut self, s: Slot) {
        if let Some(im) = self.images.remove(&slot_key(s)) {
            self.release_image(im);
        }
    }

    fn cover(&self, s: Slot) -> Cover {
        match s {
            Slot::Root(i) => self.root_cover[i],
            Slot::Table(i) => self.table_cover[i],
        }
    }

    fn set_cover(&mut self, s: Slot, c: Cover) {
        match s {
            Slot::Root(i) => self.root_cover[i] = c,
            Slot::Table(i) => self.table_cover[i] = c,
        }
    }

    /// The routes inside the region at depth `d` containing `p`, sorted.
    fn inside(&self, d: u32, p: u128) -> Vec<Route> {
        let lo = mask(p, d as u8);
        self.routes
            .range((lo, 0)..=(last(lo, d as u8), 128))
            .filter(|(&(_, l), _)| u32::from(l) > d)
            .map(|(&(p, l), &v)| (p, l, v))
            .collect()
    }

    /// Whether any route lies inside the region at depth `d` containing `p`.
    fn any_inside(&self, d: u32, p: u128) -> bool {
        let lo = mask(p, d as u8);
        self.routes
            .range((lo, 0)..=(last(lo, d as u8), 128))
            .any(|(&(_, l), _)| u32::from(l) > d)
    }

    /// Recompiles the region behind `slot` (depth `d`, containing `p`) from its routes.
    fn rebuild_region(&mut self, slot: Slot, d: u32, p: u128) -> Result<(), LpmError> {
        let inside = self.inside(d, p);
        self.free_region(slot);
        // On failure the region answers its cover until the next successful update of it.
        let cover = self.cover(slot).val;
        let e = match self.build_region(d, mask(p, d as u8), self.cover(slot), &inside) {
            Ok(e) => e,
            Err(err) => {
                self.set_entry(slot, cover);
                return Err(err);
            }
        };
        self.set_entry(slot, e);
        if let Err(err) = self.refresh(slot) {
            self.free_region(slot);
            self.set_entry(slot, cover);
            return Err(err);
        }
        Ok(())
    }

    // ---- updates ----

    fn apply_insert(&mut self, p: u128, len: u8, v: u32, new: bool) -> Result<(), LpmError> {
        let c = Cover {
            val: v,
            rank: len + 1,
        };
        let l = u32::from(len);
        if l <= ROOT_BITS {
            let first = (p >> (128 - ROOT_BITS)) as usize;
            for i in first..first + (1 << (ROOT_BITS - l)) {
                self.push_insert(Slot::Root(i), c);
            }
            return Ok(());
        }
        let mut slot = Slot::Root((p >> (128 - ROOT_BITS)) as usize);
        let mut d = ROOT_BITS;
        loop {
            let e = self.entry(slot);
            if is_value(e) {
                return self.rebuild_region(slot, d, p);
            }
            if is_node(e) {
                if !fits(len, d) {
                    return self.rebuild_region(slot, d, p);
                }
                return self.bucket_insert(slot, d, p, len, c);
            }
            let t = index(e);
            if new && !fits(len, d) {
                self.table_long[t] += 1;
            }
            if l <= d + STRIDE {
                let first = t * FANOUT + slot_at(p, d);
                for i in first..first + (1 << (d + STRIDE - l)) {
                    self.push_insert(Slot::Table(i), c);
                }
                return Ok(());
            }
            slot = Slot::Table(t * FANOUT + slot_at(p, d));
            d += STRIDE;
        }
    }

    /// Inserts (or revalues) route `p/len` -> `c` in the bucket behind `slot` (depth `d`).
    fn bucket_insert(
        &mut self,
        slot: Slot,
        d: u32,
        p: u128,
        len: u8,
        c: Cover,
    ) -> Result<(), LpmError> {
        self.paint(slot, d, p, len, (c.val, ROUTE))
    }

    /// Rewrites the range of prefix `p/len` in the bucket behind `slot` (depth `d`) from the
    /// route map: the background `base` (value and owner) under the routes nested in the
    /// prefix. Makes the range's ends and inner boundaries keys, rewrites the intervals
    /// between them, and merges the neighbours left equal.
    fn paint(
        &mut self,
        slot: Slot,
        d: u32,
        p: u128,
        len: u8,
        base: (u32, u8),
    ) -> Result<(), LpmError> {
        let a = u64::from(window(p, d));
        let b = a + span(len, d);
        let nested: Vec<Route> = if len < 128 {
            self.routes
                .range((p, len + 1)..=(last(p, len), 128))
                .map(|(&(q, l), &v)| (q, l, v))
                .collect()
        } else {
            Vec::new()
        };
        let (starts, vals, owners) = sweep(d, a, b, base, &nested);
        let mut split = false;
        for k in starts.iter().map(|&s| u64::from(s)).chain([b]) {
            if k > 0 && k < 1 << WINDOW_BITS {
                split |= self.bucket_add_key(slot, k as u32)?;
            }
        }
        if split {
            self.build_image(slot)?;
        }
        let root = index(self.entry(slot));
        self.bucket_update(root, 0, 1 << WINDOW_BITS, a, b, &mut |start, val, owner| {
            let i = starts.partition_point(|&s| u64::from(s) <= start) - 1;
            *val = vals[i];
            *owner = owners[i];
        });
        Ok(())
    }

    /// Makes `c` the cover of `slot` if it is longer than (or replaces) the current one, and
    /// pushes it into the compiled structure below.
    fn push_insert(&mut self, slot: Slot, c: Cover) {
        if self.cover(slot).rank > c.rank {
            return;
        }
        self.set_cover(slot, c);
        let e = self.entry(slot);
        if is_value(e) {
            self.set_entry(slot, c.val);
        } else {
            self.push_below(e, c, &|r| r <= c.rank);
        }
    }

    /// Gives cover `c` to every entry below `e` whose cover rank `replaces` selects, and to every
    /// bucket interval that shows its region's cover.
    fn push_below(&mut self, e: u32, c: Cover, replaces: &impl Fn(u8) -> bool) {
        if is_node(e) {
            self.bucket_update(
                index(e),
                0,
                1 << WINDOW_BITS,
                0,
                1 << WINDOW_BITS,
                &mut |_, val, owner| {
                    if *owner == 0 {
                        *val = c.val;
                    }
                },
            );
            return;
        }
        let t = index(e);
        for s in t * FANOUT..(t + 1) * FANOUT {
            if !replaces(self.table_cover[s].rank) {
                continue;
            }
            self.table_cover[s] = c;
            let child = self.tables[s];
            if is_value(child) {
                self.set_entry(Slot::Table(s), c.val);
            } else {
                self.push_below(child, c, replaces);
            }
        }
    }

    /// The longest route covering `p` with a length in `min..len`, else `fallback`.
    fn best_shorter(&self, p: u128, len: u8, min: u8, fallback: Cover) -> Cover {
        for l in (min..len).rev() {
            if self.per_len[usize::from(l)] == 0 {
                continue;
            }
            if let Some(&v) = self.routes.get(&(mask(p, l), l)) {
                return Cover {
                    val: v,
                    rank: l + 1,
                };
            }
        }
        fallback
    }

    fn apply_remove(&mut self, p: u128, len: u8) {
        let rank = len + 1;
        let l = u32::from(len);
        if l <= ROOT_BITS {
            let repl = self.best_shorter(p, len, 0, NO_COVER);
            let first = (p >> (128 - ROOT_BITS)) as usize;
            for i in first..first + (1 << (ROOT_BITS - l)) {
                self.push_remove(Slot::Root(i), rank, repl);
            }
            return;
        }
        let mut slot = Slot::Root((p >> (128 - ROOT_BITS)) as usize);
        let mut d = ROOT_BITS;
        // The tables the walk passed through: the slot pointing at each, and its depth.
        let mut path: Vec<(Slot, u32)> = Vec::new();
        loop {
            let e = self.entry(slot);
            if is_node(e) {
                self.bucket_remove(slot, d, p, len);
                break;
            }
            debug_assert!(is_table(e), "a removed route was inside a value region");
            let t = index(e);
            if !fits(len, d) {
                self.table_long[t] -= 1;
            }
            path.push((slot, d));
            if l <= d + STRIDE {
                let repl = self.best_shorter(p, len, d as u8 + 1, self.cover(slot));
                let first = t * FANOUT + slot_at(p, d);
                for i in first..first + (1 << (d + STRIDE - l)) {
                    self.push_remove(Slot::Table(i), rank, repl);
                }
                break;
            }
            slot = Slot::Table(t * FANOUT + slot_at(p, d));
            d += STRIDE;
        }
        // The shallowest table left with no route too long for a bucket becomes a bucket.
        for (slot, d) in path {
            if self.table_long[index(self.entry(slot))] == 0 {
                // A bucket needs no more nodes than the table's subtree freed, as a rule; if
                // the index space is exhausted the region answers its cover (see rebuild).
                let _ = self.rebuild_region(slot, d, p);
                break;
            }
        }
    }

    /// Removes route `p/len` (already gone from the map) from the bucket behind `slot`.
    fn bucket_remove(&mut self, slot: Slot, d: u32, p: u128, len: u8) {
        if !self.any_inside(d, p) {
            self.free_region(slot);
            self.set_entry(slot, self.cover(slot).val);
            return;
        }
        let repl = self.best_shorter(p, len, d as u8 + 1, self.cover(slot));
        let owner = if u32::from(repl.rank) > d + 1 {
            ROUTE
        } else {
            COVERED
        };
        if self.paint(slot, d, p, len, (repl.val, owner)).is_err() {
            // Out of index space: the region answers its cover until rebuilt (see there).
            let _ = self.rebuild_region(slot, d, p);
        }
    }

    /// Replaces `slot`'s cover of rank `rank` (a removed route) by `repl` and pushes it below.
    fn push_remove(&mut self, slot: Slot, rank: u8, repl: Cover) {
        if self.cover(slot).rank != rank {
            return;
        }
        self.set_cover(slot, repl);
        let e = self.entry(slot);
        if is_value(e) {
            self.set_entry(slot, repl.val);
        } else {
            self.push_below(e, repl, &|r| r == rank);
        }
    }
}

/// The intervals of keys `from..to` of a bucket at depth `d` where the routes `inside` (sorted,
/// all within `from..to`) lie over a background `base` (value and owner): each interval's
/// first key, value and owner ([`ROUTE`] under a route). Neighbours are never equal in both.
fn sweep(
    d: u32,
    from: u64,
    to: u64,
    base: (u32, u8),
    inside: &[Route],
) -> (Vec<u32>, Vec<u32>, Vec<u8>) {
    let mut starts: Vec<u32> = Vec::with_capacity(2 * inside.len() + 1);
    let mut vals: Vec<u32> = Vec::with_capacity(2 * inside.len() + 1);
    let mut owners: Vec<u8> = Vec::with_capacity(2 * inside.len() + 1);
    let mut emit = |from: u64, to: u64, val: u32, owner: u8| {
        if from < to && (vals.last() != Some(&val) || owners.last() != Some(&owner)) {
            starts.push(from as u32);
            vals.push(val);
            owners.push(owner);
        }
    };
    let mut cursor = from;
    // Open routes: (end key, value), innermost last.
    let mut open: Vec<(u64, u32)> = Vec::new();
    for &(p, l, v) in inside {
        let s = u64::from(window(p, d));
        while let Some(&(end, val)) = open.last() {
            if end > s {
                break;
            }
            emit(cursor, end, val, ROUTE);
            cursor = end;
            open.pop();
        }
        let (val, owner) = open.last().map_or(base, |o| (o.1, ROUTE));
        emit(cursor, s, val, owner);
        cursor = s;
        open.push((s + span(l, d), v));
    }
    while let Some((end, val)) = open.pop() {
        emit(cursor, end, val, ROUTE);
        cursor = end;
    }
    emit(cursor, to, base.0, base.1);
    (starts, vals, owners)
}

/// An image range of class `have` can hold what needs class `want` and is not more than about
/// twice too large.
fn fits_class(have: u8, want: u8) -> bool {
    if have == NO_CLASS || want == NO_CLASS {
        return have == want;
    }
    have >= want && have <= want + 4
}

/// Lengthens `v` to `len` items, reserving an eighth more rather than doubling: image arrays
/// are lookup memory.
fn grow<T: Copy>(v: &mut Vec<T>, len: usize, fill: T) {
    if len > v.capacity() {
        v.reserve_exact((len - v.len()).max(v.len() / 8));
    }
    v.resize(len, fill);
}

/// Number of keys in `node` (the slots that are not padding).
#[inline]
fn key_count(node: &Node) -> usize {
    // Every real key is above the padding (key 0 is never stored).
    above_portable(&node.keys, KEY_PAD as i32).count_ones() as usize
}

/// The key of slot `s` in `Lpm6::images`.
fn slot_key(s: Slot) -> u64 {
    match s {
        Slot::Root(i) => i as u64,
        Slot::Table(i) => 1 << 40 | i as u64,
    }
}

/// A node with no keys (a fresh node).
const EMPTY_NODE: Node = Node {
    keys: [KEY_PAD; NODE_KEYS],
    ways: [NONE; NODE_WAYS],
};

/// An image leaf with no keys (an unused leaf of an image range).
const EMPTY_LEAF: Leaf = Leaf {
    keys: [IMG_PAD; NODE_KEYS],
    vals: [crate::NO_ROUTE; NODE_WAYS],
};

/// Inserts key `k` at `pos` of `o`, with the way (and owner) `w` after it.
fn insert_at(o: &mut Open, pos: usize, k: u32, w: u32, owner: u8) {
    o.keys.copy_within(pos..o.n, pos + 1);
    o.keys[pos] = k;
    o.ways.copy_within(pos + 1..=o.n, pos + 2);
    o.ways[pos + 1] = w;
    o.owner.copy_within(pos + 1..=o.n, pos + 2);
    o.owner[pos + 1] = owner;
    o.n += 1;
}

/// Splits an overflowing node, whose key at `pos` was just inserted, into two nodes and the
/// key between them, which becomes the separator in the parent. In the middle, as a rule; but
/// when the new key is one of the node's last two, the updates are likely appending in order
/// (a table loaded in address order), so the left node keeps every key before the new one and
/// ends full rather than half full.
fn split(o: &Open, pos: usize) -> (Open, u32, Open) {
    let m = if pos + APPEND_TAIL >= o.n {
        pos
    } else {
        o.n / 2
    };
    let empty = Open {
        n: 0,
        keys: [0; MAX_KEYS + 1],
        ways: [NONE; NODE_WAYS + 1],
        owner: [0; NODE_WAYS + 1],
    };
    let mut left = empty;
    left.n = m;
    left.keys[..m].copy_from_slice(&o.keys[..m]);
    left.ways[..=m].copy_from_slice(&o.ways[..=m]);
    left.owner[..=m].copy_from_slice(&o.owner[..=m]);
    let mut right = empty;
    right.n = o.n - m - 1;
    right.keys[..right.n].copy_from_slice(&o.keys[m + 1..o.n]);
    right.ways[..=right.n].copy_from_slice(&o.ways[m + 1..=o.n]);
    right.owner[..=right.n].copy_from_slice(&o.owner[m + 1..=o.n]);
    (left, o.keys[m], right)
}

/// Whether the batch path may use AVX2 (with POPCNT, which every AVX2 CPU has).
fn detect_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Updates to a [`Lpm6`] grouped under one borrow (see [`Lpm6::batch`]). Each update compiles
/// at once (bounded, see the module comment); the borrow keeps lookups out until it ends.
pub struct Batch<'a> {
    lpm: &'a mut Lpm6,
}

impl Batch<'_> {
    /// As [`Lpm6::insert`].
    pub fn insert(&mut self, prefix: u128, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        self.lpm.insert(prefix, len, value)
    }

    /// As [`Lpm6::remove`].
    pub fn remove(&mut self, prefix: u128, len: u8) -> Option<u32> {
        self.lpm.remove(prefix, len)
    }

    /// The value stored for exactly `prefix/len`, updates of this batch included.
    pub fn get(&self, prefix: u128, len: u8) -> Option<u32> {
        self.lpm.get(prefix, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Both node searches count the same keys for every probe around every boundary.
    #[test]
    fn node_searches_agree() {
        let bounds = [1u32, 2, 0x7FFF_FFFF, 0x8000_0000, 0x8000_0001, u32::MAX];
        let mut keys = [KEY_PAD; NODE_KEYS];
        for (k, &b) in keys.iter_mut().zip(&bounds) {
            *k = b ^ KEY_BIAS;
        }
        let mut line = [IMG_PAD; NODE_KEYS];
        for (k, &b) in line.iter_mut().zip(&bounds) {
            *k = image_key(b);
        }
        let line = Line { w: line };
        for &b in &bounds {
            for q in [b.wrapping_sub(1), b, b.wrapping_add(1), 0, u32::MAX] {
                let want: u32 = bounds
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| u32::from(k > q) << i)
                    .sum();
                let qb = (q ^ KEY_BIAS) as i32;
                assert_eq!(above_portable(&keys, qb), want, "{q:#x}");
                // The image counts the keys at or below the search key, twice, whatever the
                // line's last slot holds.
                let passed = 2 * bounds.iter().filter(|&&k| k <= q).count() as u32;
                for first in [0, 2, 0x7FFF_FFFE, u32::MAX - 1] {
                    let mut l = line;
                    l.w[LINE_FIRST] = first;
                    assert_eq!(passed2_portable(&l.w, qb), passed, "{q:#x}");
                    assert_eq!(l.child2::<false>(qb), first.wrapping_add(passed));
                    #[cfg(target_arch = "x86_64")]
                    if detect_avx2() {
                        // SAFETY: AVX2 and POPCNT were detected.
                        assert_eq!(unsafe { passed2_avx2(&l.w, qb) }, passed, "{q:#x}");
                    }
                }
            }
        }
    }

    /// A run of adjacent prefixes with one value is one interval, however it was built;
    /// revaluing or removing one in the middle splits it again, and the run's ends stay keys.
    #[test]
    fn equal_neighbours_merge() {
        let base: u128 = 0x2a00_0000 << 96;
        let at = |i: u128| base | i << 80;
        let mut t = Lpm6::new();
        t.insert(base, 32, 1).unwrap();
        for i in 0..1000 {
            t.insert(at(i), 48, 7).unwrap();
        }
        let bulk =
            Lpm6::from_routes((0..1000).map(|i| (at(i), 48, 7)).chain([(base, 32, 1)])).unwrap();
        // Keys at the run's two ends only: one leaf, in both builds.
        assert_eq!((t.nodes.len(), bulk.nodes.len()), (1, 1));
        t.insert(at(500), 48, 9).unwrap();
        let want = |t: &Lpm6, mid: u32| {
            for (i, v) in [(0, 7), (499, 7), (500, mid), (501, 7), (999, 7), (1000, 1)] {
                assert_eq!(t.lookup(at(i) | 0xffff), Some(v), "{i}");
            }
        };
        want(&t, 9);
        t.remove(at(500), 48);
        want(&t, 1);
        t.insert(at(500), 48, 7).unwrap();
        want(&t, 7);
        assert_eq!(t.nodes.len(), 1);
        t.remove(base, 32);
        assert_eq!(t.lookup(at(1000)), None);
        assert_eq!(t.lookup(at(999)), Some(7));
    }

    /// A region at the bottom of the address space (depth > 96) keys its bucket on the last
    /// bits, padded.
    #[test]
    fn deep_regions() {
        let mut t = Lpm6::new();
        let base: u128 = 0x2001_0db8 << 96;
        for i in 0..40u128 {
            t.insert(base | i << 3, 125, i as u32).unwrap();
        }
        t.insert(base | 7, 128, 99).unwrap();
        for i in 0..40u128 {
            for h in 0..8 {
                let a = base | i << 3 | h;
                let want = if a == base | 7 { 99 } else { i as u32 };
                assert_eq!(t.lookup(a), Some(want), "{a:#x}");
            }
        }
        assert_eq!(t.lookup(base | 40 << 3), None);
    }

    /// Many prefixes in one /16 grow a bucket several levels deep by splits; lookups, single
    /// and batched, agree with a bulk build of the same routes, and removing them all empties
    /// the table.
    #[test]
    fn deep_bucket_by_splits() {
        let base: u128 = 0x2a00_0000 << 96;
        let routes: Vec<Route> = (0..5000u32)
            .map(|i| {
                (
                    base | u128::from(i.wrapping_mul(2_654_435_761) >> 8) << 80,
                    48,
                    i % 7,
                )
            })
            .chain((0..300u32).map(|i| (base | u128::from(i * 97) << 88, 40, 100 + i)))
            .collect();
        let mut inc = Lpm6::new();
        for &(p, l, v) in &routes {
            inc.insert(p, l, v).unwrap();
        }
        let bulk = Lpm6::from_routes(routes.iter().copied()).unwrap();
        assert_eq!(inc.shape(), bulk.shape());
        inc.check_images();
        bulk.check_images();
        let probes: Vec<u128> = routes
            .iter()
            .flat_map(|&(p, l, _)| [p, last(p, l), last(p, l).wrapping_add(1), p.wrapping_sub(1)])
            .collect();
        let mut a = vec![0; probes.len()];
        let mut b = vec![0; probes.len()];
        inc.lookup_batch(&probes, &mut a);
        bulk.lookup_batch(&probes, &mut b);
        assert_eq!(a, b);
        for (&x, &want) in probes.iter().zip(&b) {
            assert_eq!(inc.lookup(x).unwrap_or(crate::NO_ROUTE), want, "{x:#x}");
        }
        for (i, &(p, l, _)) in routes.iter().enumerate() {
            inc.remove(p, l);
            if i % 97 == 0 {
                inc.check_images();
            }
        }
        assert_eq!(inc.shape(), Lpm6::new().shape());
        assert!(inc.lookup(base).is_none());
        assert!(inc.images.is_empty());
    }

    /// An update of the proptest below: a prefix in one of three /16s (its bits below the
    /// /16 drawn from few patterns, so routes nest, touch and repeat), or a removal.
    #[derive(Clone, Debug)]
    enum Op {
        Insert(u128, u8, u32),
        Remove(u128, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        let prefix = (
            0..3u128,
            any::<u64>(),
            prop::sample::select(vec![17u8, 24, 32, 33, 40, 47, 48, 52, 64]),
        )
            .prop_map(|(r, bits, l)| {
                // Few distinct high bits, so that prefixes cluster into shared leaves.
                let bits = u128::from(bits & 0x0000_0F0F_FFFF_FFFF);
                (mask((0x2a00 + r) << 112 | bits << 48, l), l)
            });
        prop_oneof![
            3 => (prefix.clone(), 0..4u32).prop_map(|((p, l), v)| Op::Insert(p, l, v)),
            1 => prefix.prop_map(|(p, l)| Op::Remove(p, l)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// After every update, every image equals its bucket (`check_images`), and lookups
        /// at every route's ends, single and batched, equal a bulk build's.
        #[test]
        fn images_equal_their_buckets(ops in prop::collection::vec(op(), 1..1200)) {
            let mut t = Lpm6::new();
            for op in &ops {
                match *op {
                    Op::Insert(p, l, v) => drop(t.insert(p, l, v).unwrap()),
                    Op::Remove(p, l) => drop(t.remove(p, l)),
                }
                t.check_images();
            }
            let bulk = Lpm6::from_routes(t.routes.iter().map(|(&(p, l), &v)| (p, l, v))).unwrap();
            bulk.check_images();
            let probes: Vec<u128> = t
                .routes
                .keys()
                .flat_map(|&(p, l)| [p, last(p, l), p.wrapping_sub(1), last(p, l).wrapping_add(1)])
                .collect();
            let mut a = vec![0; probes.len()];
            let mut b = vec![0; probes.len()];
            t.lookup_batch(&probes, &mut a);
            bulk.lookup_batch(&probes, &mut b);
            prop_assert_eq!(&a, &b);
            for (&x, &want) in probes.iter().zip(&b) {
                prop_assert_eq!(t.lookup(x).unwrap_or(crate::NO_ROUTE), want);
            }
        }
    }

    /// Churn in two /16s (random inserts, revaluations and removals, shallow and deep
    /// prefixes) keeps every image equal to its bucket after every update: images grow,
    /// move to larger ranges, reuse freed ones and are freed with their buckets.
    #[test]
    fn images_follow_churn() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut t = Lpm6::new();
        let mut live: Vec<(u128, u8)> = Vec::new();
        for step in 0..6000 {
            let r = rnd();
            if r % 3 == 0 && !live.is_empty() {
                let (p, l) = live.swap_remove((r >> 8) as usize % live.len());
                t.remove(p, l);
            } else {
                let base: u128 = if r & 16 == 0 { 0x2a00 } else { 0x2001 };
                let l = [20u8, 32, 40, 44, 48, 56][(r >> 5) as usize % 6];
                let p = mask(base << 112 | u128::from(rnd() >> 34) << 82, l);
                if t.insert(p, l, (r >> 40) as u32 % 5).unwrap().is_none() {
                    live.push((p, l));
                }
            }
            if step % 7 == 0 {
                t.check_images();
            }
        }
        let bulk = Lpm6::from_routes(t.routes.iter().map(|(&(p, l), &v)| (p, l, v))).unwrap();
        let probes: Vec<u128> = live.iter().flat_map(|&(p, l)| [p, last(p, l)]).collect();
        let mut a = vec![0; probes.len()];
        let mut b = vec![0; probes.len()];
        t.lookup_batch(&probes, &mut a);
        bulk.lookup_batch(&probes, &mut b);
        assert_eq!(a, b);
    }

    impl Lpm6 {
        /// Checks every bucket's image against the bucket: its leaves are copies of the bucket's,
        /// consecutive and in key order, and a search of the image at every leaf boundary (and one
        /// below it) answers what a search of the bucket's own nodes does.
        fn check_images(&self) {
            let slots = (0..1 << ROOT_BITS)
                .map(Slot::Root)
                .chain((0..self.tables.len()).map(Slot::Table));
            let mut buckets = 0;
            for s in slots {
                let e = self.entry(s);
                let look = match s {
                    Slot::Root(i) => self.look_root[i],
                    Slot::Table(i) => self.look_tables[i],
                };
                if !is_node(e) {
                    if !(is_table(e) && self.free_tables.contains(&(index(e) as u32))) {
                        assert_eq!(look, e, "{s:?}");
                    }
                    continue;
                }
                if let Slot::Table(i) = s {
                    if self.free_tables.contains(&((i / FANOUT) as u32)) {
                        continue;
                    }
                }
                buckets += 1;
                assert!(is_image(look), "{s:?}");
                let im = self.images[&slot_key(s)];
                let root = index(e);
                let depth = self.depth(root);
                let (mut ids, mut firsts) = (Vec::new(), Vec::new());
                self.collect_leaves(root, depth, 0, &mut ids, &mut firsts);
                assert!(ids.len() <= class_cap(im.leaf_class));
                for (r, &id) in ids.iter().enumerate() {
                    let at = im.leaves as usize + r;
                    assert_eq!(self.node_pos[id as usize], at as u32);
                    assert_eq!(self.leaves[at], Leaf::of(&self.nodes[id as usize]));
                }
                // Every leaf boundary, and the key below it.
                for &f in &firsts {
                    for k in [f, f.wrapping_sub(1)] {
                        let qb = (k ^ KEY_BIAS) as i32;
                        let mut w = e;
                        while is_node(w) {
                            w = self.nodes[index(w)].way(qb);
                        }
                        assert_eq!(
                            self.search_with::<false>(look, qb),
                            crate::external(w),
                            "{s:?} key {k:#x}"
                        );
                    }
                }
            }
            assert_eq!(buckets, self.images.len());
            assert_eq!(buckets, self.buckets);
        }
    }
}
