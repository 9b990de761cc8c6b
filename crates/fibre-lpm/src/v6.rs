//! IPv6 longest-prefix match: [`Lpm6`], a multibit trie of direct-indexed tables (16 bits at the
//! root, then 8 bits per level) whose sparse regions end in *range leaves*: two cache lines
//! holding up to 15 sorted 32-bit boundaries and the 16 values between them, searched with one
//! SIMD compare per line. Addresses are `u128` in network order (the first address byte is the
//! most significant).
//!
//! # Why this shape
//! Announced IPv6 space is a few thousand /32s (and shorter) holding most of the table as /48s.
//! A lookup reads the root entry of its /16, one 8-bit table per byte while the region under it
//! is dense (more than 15 boundaries), then at most one leaf that resolves the next 32 address
//! bits by range search: on the 2026 table a lookup reads 4-5 lines, each found by an index, not
//! a pointer chase through headers. Range leaves keep sparse regions (a /32 with a few /48s) to
//! 128 bytes where a table per byte would need several KiB, so the whole table stays in L2/L3.
//!
//! # Regions and canonical form
//! A *region* is the address block under one table entry: a /16 under the root, a /(d+8) under a
//! table at depth d. The routes *inside* a region are those longer than its depth. Its entry is:
//! - a value, when no route is inside: the value of the longest route covering the region
//!   (its *cover*, leaf-pushed), or "no route";
//! - a leaf, when the inside routes cut the region into at most [`LEAF_INTERVALS`] intervals
//!   (at most [`MAX_BOUNDARIES`] boundaries) and each boundary is exact in the leaf's 32-bit
//!   key window (bits `d..d+32` of the address; always the case for prefixes up to /d+32);
//! - a table otherwise.
//!
//! The form depends only on the set of prefixes inside the region, never on update order, so
//! [`Lpm6::shape`] is canonical (tested against insertion, deletion and bulk building in any
//! order).
//!
//! # Invariants
//! - Every compiled entry and leaf interval holds the value of the longest route covering it:
//!   lookups never backtrack, and a lookup reads at most one entry per level plus one leaf. Its
//!   cost depends on the table at the address (depth of the walk), never on traffic: no caches.
//! - Each table entry records its cover (value and length); each leaf interval records whether
//!   its value comes from an inside route or from the region's cover. Updates use these to touch
//!   only what a route changes.
//! - The control map `routes` holds exactly the stored prefixes (host bits cleared).
//!
//! # Update cost
//! An update walks the route's path (at most 15 tables) and then either rebuilds one leaf region
//! (at most [`LEAF_MAX_ROUTES`] routes: a few microseconds at most), or, for a prefix that ends
//! at a table level, rewrites the entries it covers and pushes its value into the compiled
//! structure below them whose cover it changes (the leaf-pushing cost every direct-indexed
//! structure pays: a /32 over a dense region touches that region's tables and leaves, `::/0`
//! touches every entry without a longer cover). A removal that leaves a table's region sparse
//! turns the table back into a leaf or value (at most [`LEAF_MAX_ROUTES`] routes re-read).
//! Nothing is ever rebuilt whole.
//!
//! # Who calls what
//! Single-threaded: `&mut self` updates, `&self` lookups. Share it across threads through
//! [`crate::sync`], whose writer applies every update to both of its copies.

use std::collections::BTreeMap;

use crate::{LpmError, Shape, MAX_VALUE};

/// Bits resolved by the root table. 2^16 entries (256 KiB): every announced /16 gets its own
/// entry, and the few hundred hot ones stay in L1/L2.
const ROOT_BITS: u32 = 16;
/// Bits resolved by each table below the root: 256 entries (1 KiB). Eight keeps sparse regions
/// cheap (a table exists only where a leaf overflows) while a /48 needs at most four levels.
const STRIDE: u32 = 8;
const FANOUT: usize = 1 << STRIDE;
/// Keys per leaf: one 64-byte line of `u32`, compared with two AVX2 (four SSE2) instructions.
const LEAF_KEYS: usize = 16;
/// Intervals per leaf: its values fill the leaf's second line.
const LEAF_INTERVALS: usize = LEAF_KEYS;
/// Boundaries a leaf can hold between its intervals.
const MAX_BOUNDARIES: usize = LEAF_INTERVALS - 1;
/// Width of a leaf's key window: the address bits following the leaf's depth.
const WINDOW_BITS: u32 = 32;
/// The most routes a leaf region can contain: prefixes nest or are disjoint, so routes whose
/// ends fall on `m` points (the boundaries plus the region's two ends) number at most `2m - 3`.
/// Regions with more routes inside are tables without counting their boundaries.
const LEAF_MAX_ROUTES: usize = 2 * (MAX_BOUNDARIES + 2) - 3;
/// Lookups advanced together by `lookup_batch`: enough independent memory accesses in flight
/// to cover L3 latency, few enough that lane state stays in L1.
const BATCH: usize = 64;

/// Internal "no route" value (values are `0..=MAX_VALUE`).
const NONE: u32 = 0x7FFF_FFFF;
/// Entry tag of a table: the low 30 bits are its index.
const TABLE_TAG: u32 = 0x8000_0000;
/// Entry tag of a leaf: the low 30 bits are its index. Entries below `TABLE_TAG` are values.
const LEAF_TAG: u32 = 0xC000_0000;
const INDEX_MASK: u32 = 0x3FFF_FFFF;
/// Leaf keys are stored with the top bit flipped so that a signed compare orders them as
/// unsigned (SIMD has only signed 32-bit compares).
const KEY_BIAS: u32 = 0x8000_0000;
/// Padding for unused key slots, stored biased: `i32::MIN`, the biased form of window 0, which
/// no search key is below, so padding is never counted as above one.
const KEY_PAD: u32 = KEY_BIAS;

const _: () = assert!(MAX_VALUE < NONE);

/// The longest route covering a region or entry: its value and `len + 1` (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cover {
    val: u32,
    rank: u8,
}

const NO_COVER: Cover = Cover { val: NONE, rank: 0 };

/// A range leaf. `keys[..n]` are the region's boundaries (key windows, biased, ascending),
/// `keys[n..]` are [`KEY_PAD`]. An address whose window has `c` boundaries above it lies in the
/// `c`-th interval from the top, whose value is `vals[c]`. Two lines, 128-byte aligned so that a
/// lookup's two reads fall in one adjacent-line pair.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(128))]
struct Leaf {
    keys: [u32; LEAF_KEYS],
    vals: [u32; LEAF_INTERVALS],
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
    root: Vec<u32>,
    /// Tables of `FANOUT` entries, back to back.
    tables: Vec<u32>,
    leaves: Vec<Leaf>,
    // Control state, read and written by updates only.
    root_cover: Vec<Cover>,
    table_cover: Vec<Cover>,
    /// Routes inside each table's region (decides when it turns back into a leaf).
    table_inside: Vec<u32>,
    /// Per leaf interval: 0 if its value is the region's cover, else the owning route's rank.
    leaf_owner: Vec<[u8; LEAF_INTERVALS]>,
    free_tables: Vec<u32>,
    free_leaves: Vec<u32>,
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

/// The leaf key of address `a` in a region at depth `d`: address bits `d..d+32`, zero-padded
/// past bit 127. The same function builds keys and searches them, so padding is consistent.
#[inline(always)]
fn window(a: u128, d: u32) -> u32 {
    ((a << d) >> (128 - WINDOW_BITS)) as u32
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
fn is_leaf(e: u32) -> bool {
    e >= LEAF_TAG
}

/// Number of keys of `keys` above the biased search key `qb`, portable.
#[inline(always)]
fn count_above_portable(keys: &[u32; LEAF_KEYS], qb: i32) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; `Leaf` is 128-byte aligned, so each
        // 16-byte load is aligned and inside `keys`.
        unsafe {
            let q = _mm_set1_epi32(qb);
            let p = keys.as_ptr().cast::<__m128i>();
            let m = |i| _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(_mm_load_si128(p.add(i)), q)));
            let bits = m(0) | m(1) << 4 | m(2) << 8 | m(3) << 12;
            (bits as u32).count_ones() as usize
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        keys.iter().filter(|&&k| k as i32 > qb).count()
    }
}

/// As [`count_above_portable`], with two AVX2 compares.
///
/// # Safety
/// The CPU must support AVX2 and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
unsafe fn count_above_avx2(keys: &[u32; LEAF_KEYS], qb: i32) -> usize {
    use core::arch::x86_64::*;
    // SAFETY: the caller guarantees AVX2; `Leaf` is 128-byte aligned, so both 32-byte loads are
    // aligned and inside `keys`.
    unsafe {
        let q = _mm256_set1_epi32(qb);
        let p = keys.as_ptr().cast::<__m256i>();
        let lo = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(
            _mm256_load_si256(p),
            q,
        )));
        let hi = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(
            _mm256_load_si256(p.add(1)),
            q,
        )));
        ((lo | hi << 8) as u32).count_ones() as usize
    }
}

impl Leaf {
    /// The value for address `a` in this leaf's region at depth `d`.
    #[inline(always)]
    fn find<const AVX2: bool>(&self, a: u128, d: u32) -> u32 {
        let qb = (window(a, d) ^ KEY_BIAS) as i32;
        #[cfg(target_arch = "x86_64")]
        let c = if AVX2 {
            // SAFETY: `AVX2` is only true in code reached after run-time detection.
            unsafe { count_above_avx2(&self.keys, qb) }
        } else {
            count_above_portable(&self.keys, qb)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let c = count_above_portable(&self.keys, qb);
        // `c` <= MAX_BOUNDARIES: padding is never above a key.
        self.vals[c & (LEAF_INTERVALS - 1)]
    }
}

/// The leaf boundaries of a region at depth `d` starting at `lo` with `inside` routes, sorted,
/// or `None` if the region needs a table (too many boundaries, or one not exact in the window).
fn leaf_boundaries(d: u32, lo: u128, inside: &[Route]) -> Option<([u32; MAX_BOUNDARIES], usize)> {
    if inside.len() > LEAF_MAX_ROUTES {
        return None;
    }
    let end = lo | (u128::MAX >> d);
    let mut b = [0u32; 2 * LEAF_MAX_ROUTES];
    let mut n = 0;
    for &(p, l, _) in inside {
        if d + WINDOW_BITS < 128 && u32::from(l) > d + WINDOW_BITS {
            return None;
        }
        if p != lo {
            b[n] = window(p, d);
            n += 1;
        }
        let last = last(p, l);
        if last != end {
            b[n] = window(last + 1, d);
            n += 1;
        }
    }
    let b = &mut b[..n];
    b.sort_unstable();
    let mut out = [0u32; MAX_BOUNDARIES];
    let mut m = 0;
    for (i, &k) in b.iter().enumerate() {
        if i > 0 && b[i - 1] == k {
            continue;
        }
        if m == MAX_BOUNDARIES {
            return None;
        }
        out[m] = k;
        m += 1;
    }
    Some((out, m))
}

impl Lpm6 {
    /// An empty table.
    pub fn new() -> Self {
        Lpm6 {
            root: vec![NONE; 1 << ROOT_BITS],
            tables: Vec::new(),
            leaves: Vec::new(),
            root_cover: vec![NO_COVER; 1 << ROOT_BITS],
            table_cover: Vec::new(),
            table_inside: Vec::new(),
            leaf_owner: Vec::new(),
            free_tables: Vec::new(),
            free_leaves: Vec::new(),
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
        self.apply_insert(p, len, value, old.is_none())?;
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
        let mut e = self.root[(addr >> (128 - ROOT_BITS)) as usize];
        let mut d = ROOT_BITS;
        while !is_value(e) && !is_leaf(e) {
            let t = (e & INDEX_MASK) as usize;
            e = self.tables[t * FANOUT + slot_at(addr, d)];
            d += STRIDE;
        }
        if is_leaf(e) {
            e = self.leaves[(e & INDEX_MASK) as usize].find::<false>(addr, d);
        }
        (e != NONE).then_some(e)
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

    /// One group of `lookup_batch`: lanes advance one level per pass, every lane's next line
    /// prefetched before any is read. Lanes that stop at different depths cost no branch
    /// misprediction: each step computes both the next table index and the leaf index and
    /// selects with masks.
    #[inline(always)]
    fn lookup_group<const AVX2: bool>(&self, addrs: &[u128], out: &mut [u32]) {
        let n = addrs.len();
        debug_assert!(n <= BATCH && out.len() == n);
        let mut cur = [0u32; BATCH];
        // Depth of the leaf each leaf lane reached.
        let mut depth = [0u8; BATCH];
        for i in 0..n {
            cur[i] = (addrs[i] >> (128 - ROOT_BITS)) as u32;
            crate::prefetch(self.root.as_ptr().wrapping_add(cur[i] as usize));
        }
        let tables = self.tables.as_ptr();
        let leaves = self.leaves.as_ptr();
        let mut at_table: u64 = 0;
        let mut at_leaf: u64 = 0;
        // Classifies entry `e` reached at depth `d` by lane `i`: a value is final, a table or
        // leaf index becomes the lane's next read, which is prefetched.
        macro_rules! step {
            ($i:expr, $e:expr, $d:expr) => {{
                let (i, e, d) = ($i, $e, $d);
                out[i] = e;
                let tag = e >> 30;
                let table = u64::from(tag == TABLE_TAG >> 30);
                let leaf = u64::from(tag == LEAF_TAG >> 30);
                let idx = e & INDEX_MASK;
                let next = (idx << STRIDE) | slot_at(addrs[i], d) as u32;
                let wide = 0u32.wrapping_sub(table as u32);
                cur[i] = (next & wide) | (idx & !wide);
                depth[i] = d as u8;
                at_table = (at_table & !(1 << i)) | table << i;
                at_leaf |= leaf << i;
                let table_at = tables.wrapping_add(next as usize) as usize;
                let leaf_at = leaves.wrapping_add(idx as usize) as usize;
                let w = 0usize.wrapping_sub(table as usize);
                crate::prefetch(((table_at & w) | (leaf_at & !w)) as *const u8);
            }};
        }
        for i in 0..n {
            let e = self.root[cur[i] as usize];
            step!(i, e, ROOT_BITS);
        }
        let mut d = ROOT_BITS + STRIDE;
        while at_table != 0 {
            let mut lanes = at_table;
            while lanes != 0 {
                let i = lanes.trailing_zeros() as usize;
                lanes &= lanes - 1;
                let e = self.tables[cur[i] as usize];
                step!(i, e, d);
            }
            d += STRIDE;
        }
        while at_leaf != 0 {
            let i = at_leaf.trailing_zeros() as usize;
            at_leaf &= at_leaf - 1;
            let leaf = &self.leaves[cur[i] as usize];
            out[i] = leaf.find::<AVX2>(addrs[i], u32::from(depth[i]));
        }
        for o in out.iter_mut() {
            *o = crate::external(*o);
        }
    }

    /// Bytes held, control state included (the route map estimated at its B-tree node size).
    pub fn memory_bytes(&self) -> usize {
        /// A B-tree map entry: key, value and the node's share (nodes are ~2/3 full).
        const ROUTE_BYTES: usize = (std::mem::size_of::<(u128, u8)>() + 4) * 3 / 2;
        self.lookup_bytes()
            + self.root_cover.capacity() * std::mem::size_of::<Cover>()
            + self.table_cover.capacity() * std::mem::size_of::<Cover>()
            + self.table_inside.capacity() * 4
            + self.leaf_owner.capacity() * LEAF_INTERVALS
            + (self.free_tables.capacity() + self.free_leaves.capacity()) * 4
            + self.routes.len() * ROUTE_BYTES
            + std::mem::size_of::<Self>()
    }

    /// Bytes of the arrays lookups read (root, tables, leaves).
    pub fn lookup_bytes(&self) -> usize {
        (self.root.capacity() + self.tables.capacity()) * 4
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

    /// Table and leaf counts (`nodes` counts tables), which depend only on the set of prefixes,
    /// not on update order.
    pub fn shape(&self) -> Shape {
        Shape {
            routes: self.routes.len(),
            nodes: self.table_inside.len() - self.free_tables.len(),
            leaves: self.leaves.len() - self.free_leaves.len(),
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
            covers[first..first + count].fill(Cover { val: v, rank: l + 1 });
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
        if let Some((b, n)) = leaf_boundaries(d, lo, inside) {
            return self.build_leaf(d, cover, inside, &b[..n]);
        }
        let t = self.alloc_table()?;
        let (covers, entries) = self.compile_level(d, STRIDE, lo, cover, inside)?;
        let at = t as usize * FANOUT;
        self.tables[at..at + FANOUT].copy_from_slice(&entries);
        self.table_cover[at..at + FANOUT].copy_from_slice(&covers);
        self.table_inside[t as usize] = inside.len() as u32;
        Ok(TABLE_TAG | t)
    }

    fn build_leaf(
        &mut self,
        d: u32,
        cover: Cover,
        inside: &[Route],
        bounds: &[u32],
    ) -> Result<u32, LpmError> {
        let n = bounds.len();
        let mut leaf = Leaf {
            keys: [KEY_PAD; LEAF_KEYS],
            vals: [NONE; LEAF_INTERVALS],
        };
        let mut owner = [0u8; LEAF_INTERVALS];
        for (k, &b) in leaf.keys.iter_mut().zip(bounds) {
            *k = b ^ KEY_BIAS;
        }
        // Interval j starts at bounds[j - 1] (the region start for j = 0) and has n - j
        // boundaries above it.
        for j in 0..=n {
            let start = if j == 0 { 0 } else { bounds[j - 1] };
            let mut best = cover;
            for &(p, l, v) in inside {
                let first = window(p, d);
                let last = window(last(p, l), d);
                if (first..=last).contains(&start) && l + 1 > best.rank {
                    best = Cover { val: v, rank: l + 1 };
                }
            }
            leaf.vals[n - j] = best.val;
            owner[n - j] = if best == cover { 0 } else { best.rank };
        }
        let f = match self.free_leaves.pop() {
            Some(f) => {
                self.leaves[f as usize] = leaf;
                self.leaf_owner[f as usize] = owner;
                f
            }
            None => {
                let f = self.leaves.len() as u32;
                if f > INDEX_MASK {
                    return Err(LpmError::Full);
                }
                self.leaves.push(leaf);
                self.leaf_owner.push(owner);
                f
            }
        };
        Ok(LEAF_TAG | f)
    }

    fn alloc_table(&mut self) -> Result<u32, LpmError> {
        if let Some(t) = self.free_tables.pop() {
            return Ok(t);
        }
        let t = self.table_inside.len() as u32;
        if t > INDEX_MASK {
            return Err(LpmError::Full);
        }
        self.tables.resize(self.tables.len() + FANOUT, NONE);
        self.table_cover.resize(self.table_cover.len() + FANOUT, NO_COVER);
        self.table_inside.push(0);
        Ok(t)
    }

    /// Returns the table or leaf behind `e` (and everything below it) to the free lists.
    fn free_entry(&mut self, e: u32) {
        if is_value(e) {
            return;
        }
        let i = e & INDEX_MASK;
        if is_leaf(e) {
            self.free_leaves.push(i);
            return;
        }
        for s in 0..FANOUT {
            let child = self.tables[i as usize * FANOUT + s];
            self.free_entry(child);
        }
        self.free_tables.push(i);
    }

    // ---- slots ----

    fn entry(&self, s: Slot) -> u32 {
        match s {
            Slot::Root(i) => self.root[i],
            Slot::Table(i) => self.tables[i],
        }
    }

    fn set_entry(&mut self, s: Slot, e: u32) {
        match s {
            Slot::Root(i) => self.root[i] = e,
            Slot::Table(i) => self.tables[i] = e,
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
        let hi = lo | (u128::MAX >> d);
        self.routes
            .range((lo, 0)..=(hi, 128))
            .filter(|(&(_, l), _)| u32::from(l) > d)
            .map(|(&(p, l), &v)| (p, l, v))
            .collect()
    }

    /// Recompiles the value or leaf region behind `slot` (depth `d`, containing `p`) from the
    /// routes now inside it.
    fn rebuild_region(&mut self, slot: Slot, d: u32, p: u128) -> Result<(), LpmError> {
        let inside = self.inside(d, p);
        let old = self.entry(slot);
        debug_assert!(is_value(old) || is_leaf(old));
        self.free_entry(old);
        let e = self.build_region(d, mask(p, d as u8), self.cover(slot), &inside)?;
        self.set_entry(slot, e);
        Ok(())
    }

    // ---- updates ----

    /// The entries of the table level `e_first..e_first + count` under the route's path, or
    /// where the walk ends.
    fn apply_insert(&mut self, p: u128, len: u8, v: u32, new: bool) -> Result<(), LpmError> {
        let c = Cover { val: v, rank: len + 1 };
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
            if is_value(e) || is_leaf(e) {
                return self.rebuild_region(slot, d, p);
            }
            let t = (e & INDEX_MASK) as usize;
            if new {
                self.table_inside[t] += 1;
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

    /// Makes `c` the cover of `slot` if it is longer than (or replaces) the current one, and
    /// pushes it into the compiled structure below.
    fn push_insert(&mut self, slot: Slot, c: Cover) {
        let old = self.cover(slot);
        if old.rank > c.rank {
            return;
        }
        self.set_cover(slot, c);
        let e = self.entry(slot);
        if is_value(e) {
            self.set_entry(slot, c.val);
        } else {
            self.push_below(e, c, |r| r <= c.rank);
        }
    }

    /// Replaces the cover of every entry below `e` whose cover `replaces` selects by rank,
    /// and the value of every leaf interval that shows its region's cover.
    fn push_below(&mut self, e: u32, c: Cover, replaces: impl Fn(u8) -> bool + Copy) {
        let i = (e & INDEX_MASK) as usize;
        if is_leaf(e) {
            let owner = self.leaf_owner[i];
            let leaf = &mut self.leaves[i];
            for (val, &o) in leaf.vals.iter_mut().zip(&owner) {
                if o == 0 {
                    *val = c.val;
                }
            }
            return;
        }
        for s in i * FANOUT..(i + 1) * FANOUT {
            if !replaces(self.table_cover[s].rank) {
                continue;
            }
            self.table_cover[s] = c;
            let child = self.tables[s];
            if is_value(child) {
                self.tables[s] = c.val;
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
                return Cover { val: v, rank: l + 1 };
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
        // The tables the walk passed through, with the slot pointing at each and its depth.
        let mut path: Vec<(Slot, u32)> = Vec::new();
        loop {
            let e = self.entry(slot);
            if is_leaf(e) {
                // The routes left fit the leaf they were in: a leaf or value again.
                self.rebuild_region(slot, d, p)
                    .expect("a region that fitted a leaf fits one with a route fewer");
                break;
            }
            debug_assert!(!is_value(e), "a removed route was inside a value region");
            let t = (e & INDEX_MASK) as usize;
            self.table_inside[t] -= 1;
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
        // The shallowest table on the path whose region now fits a leaf (or is empty) becomes
        // one, with everything below it.
        for (slot, d) in path {
            let t = (self.entry(slot) & INDEX_MASK) as usize;
            if self.table_inside[t] as usize > LEAF_MAX_ROUTES {
                continue;
            }
            let inside = self.inside(d, p);
            let lo = mask(p, d as u8);
            if inside.is_empty() || leaf_boundaries(d, lo, &inside).is_some() {
                let old = self.entry(slot);
                self.free_entry(old);
                let e = self
                    .build_region(d, lo, self.cover(slot), &inside)
                    .expect("a leaf reuses the slot of a freed table");
                self.set_entry(slot, e);
                break;
            }
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
            self.push_below(e, repl, move |r| r == rank);
        }
    }
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

    /// Both leaf searches count the same keys for every probe around every boundary.
    #[test]
    fn leaf_searches_agree() {
        let bounds = [1u32, 2, 0x7FFF_FFFF, 0x8000_0000, 0x8000_0001, u32::MAX];
        let mut leaf = Leaf {
            keys: [KEY_PAD; LEAF_KEYS],
            vals: [0; LEAF_INTERVALS],
        };
        for (k, &b) in leaf.keys.iter_mut().zip(&bounds) {
            *k = b ^ KEY_BIAS;
        }
        for &b in &bounds {
            for q in [b.wrapping_sub(1), b, b.wrapping_add(1), 0, u32::MAX] {
                let want = bounds.iter().filter(|&&k| k > q).count();
                let qb = (q ^ KEY_BIAS) as i32;
                assert_eq!(count_above_portable(&leaf.keys, qb), want, "{q:#x}");
                #[cfg(target_arch = "x86_64")]
                if detect_avx2() {
                    // SAFETY: AVX2 and POPCNT were detected.
                    assert_eq!(unsafe { count_above_avx2(&leaf.keys, qb) }, want, "{q:#x}");
                }
            }
        }
    }

    /// A region at the bottom of the address space (depth > 96) keys its leaf on the last bits.
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
}
