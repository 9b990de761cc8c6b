//! IPv4 longest-prefix match: [`Lpm4`], a trie with an 18-bit direct-pointing array and 6-bit
//! nodes (the updatable structure, which keeps the routes), mirrored into a 16-bit lookup index
//! ([`crate::dir16`]) that answers every address not covered by a route longer than /24 with one
//! read of a 256 KiB array and one line read. Addresses under /24s holding longer routes
//! continue in the trie's nodes.
//!
//! On x86_64 the lookups count bits with `popcnt`: the repository's `.cargo/config.toml` makes it
//! a compile-time feature, so a single lookup inlines into its caller with no feature check (see
//! `POPCNT_BUILT_IN`).

use crate::dir16::{Dir16, TRIE};
use crate::trie::{Trie, STRIDE};
use crate::{LpmError, Shape};

/// Bits resolved by the direct-pointing array: 18 puts /24 (two thirds of a 2026 table) exactly
/// at the end of the first node level (18 + 6), at 1 MiB of direct entries.
const DIRECT_BITS: u32 = 18;
const _: () = assert!(DIRECT_BITS + STRIDE == 24);

/// IPv4 prefix -> `u32` value index. Single-threaded; share it through [`crate::sync`].
#[derive(Clone, Debug, Default)]
pub struct Lpm4 {
    trie: Trie<u32, DIRECT_BITS, Dir16>,
}

/// True where the compiler may use popcnt anywhere (x86_64 builds with the repository's
/// `.cargo/config.toml`) or where there is nothing to choose (other architectures): lookups then
/// inline into their caller with no feature check. Otherwise they check once per call and run a
/// popcnt-compiled copy, which cannot inline into code compiled without the feature.
const POPCNT_BUILT_IN: bool = cfg!(any(not(target_arch = "x86_64"), target_feature = "popcnt"));

/// Lookups a batch advances together: every lane's line is prefetched before any is read.
const GROUP: usize = 64;

impl Lpm4 {
    /// An empty table.
    pub fn new() -> Self {
        Lpm4 { trie: Trie::new() }
    }

    /// Maps `prefix/len` to `value` (host bits of `prefix` are ignored) and returns the value it
    /// replaced, if any.
    pub fn insert(&mut self, prefix: u32, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        self.trie.insert(prefix, len, value)
    }

    /// Removes `prefix/len` and returns its value, if it was present.
    pub fn remove(&mut self, prefix: u32, len: u8) -> Option<u32> {
        self.trie.remove(prefix, len)
    }

    /// The value stored for exactly `prefix/len`.
    pub fn get(&self, prefix: u32, len: u8) -> Option<u32> {
        self.trie.get(prefix, len)
    }

    /// The value of the longest prefix covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let v = if POPCNT_BUILT_IN || !crate::has_popcnt() {
            self.lookup_internal(addr)
        } else {
            // SAFETY: the CPU has popcnt (checked just above).
            unsafe { self.lookup_popcnt(addr) }
        };
        (v != crate::trie::NONE).then_some(v)
    }

    /// `lookup` in the internal encoding (NONE for no route).
    #[inline(always)]
    fn lookup_internal(&self, addr: u32) -> u32 {
        let v = self.trie.mirror.lookup(addr);
        if v & TRIE != 0 {
            return self.trie_lookup(addr);
        }
        v
    }

    /// The lookup of an address the index hands to the trie (under a route longer than /24).
    #[cold]
    #[inline(never)]
    fn trie_lookup(&self, addr: u32) -> u32 {
        self.trie.lookup(addr)
    }

    /// `lookup_internal` compiled with the popcnt instruction.
    /// # Safety
    /// The CPU must support popcnt.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn lookup_popcnt(&self, addr: u32) -> u32 {
        self.lookup_internal(addr)
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn lookup_popcnt(&self, addr: u32) -> u32 {
        self.lookup_internal(addr)
    }

    /// Looks up every address of `addrs` into the same position of `out` ([`crate::NO_ROUTE`]
    /// where no prefix covers it), overlapping the memory accesses of independent lookups.
    /// Panics if the slices differ in length.
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [u32]) {
        assert_eq!(
            addrs.len(),
            out.len(),
            "lookup_batch: addrs and out differ in length"
        );
        #[cfg(target_arch = "x86_64")]
        if crate::has_x86_v3() {
            // SAFETY: the CPU has every feature `batch_v3` is compiled with (checked just above).
            return unsafe { self.batch_v3(addrs, out) };
        }
        if POPCNT_BUILT_IN || !crate::has_popcnt() {
            self.batch_internal::<false>(addrs, out)
        } else {
            // SAFETY: the CPU has popcnt (checked just above).
            unsafe { self.batch_popcnt(addrs, out) }
        }
    }

    /// `batch_internal` compiled with the popcnt instruction.
    /// # Safety
    /// The CPU must support popcnt.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn batch_popcnt(&self, addrs: &[u32], out: &mut [u32]) {
        self.batch_internal::<false>(addrs, out)
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn batch_popcnt(&self, addrs: &[u32], out: &mut [u32]) {
        self.batch_internal::<false>(addrs, out)
    }

    /// `batch_internal` compiled for x86-64-v3's bit and vector instructions (every x86_64 CPU
    /// since 2013-2015: Intel Haswell, AMD Excavator and Zen): a lane counts its bits with one
    /// `bzhi`, and the answers are translated eight at a time.
    /// # Safety
    /// The CPU must support popcnt, bmi1, bmi2 and avx2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi1,bmi2,avx2")]
    unsafe fn batch_v3(&self, addrs: &[u32], out: &mut [u32]) {
        self.batch_internal::<true>(addrs, out)
    }

    /// The batch; `BMI2` only from `batch_v3` (see `Dir16::lookup_group`).
    #[inline(always)]
    fn batch_internal<const BMI2: bool>(&self, addrs: &[u32], out: &mut [u32]) {
        for (a, o) in addrs.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            // SAFETY: `BMI2` is true only in `batch_v3`, whose caller checked the CPU has
            // avx2 and bmi2.
            let mut deep = unsafe { self.trie.mirror.lookup_group::<BMI2>(a, o) };
            while deep != 0 {
                let i = deep.trailing_zeros() as usize;
                deep &= deep - 1;
                o[i] = crate::external(self.trie_lookup(a[i]));
            }
        }
    }

    /// Bytes held, control state included.
    pub fn memory_bytes(&self) -> usize {
        self.trie.memory_bytes()
    }

    /// Bytes of the arrays lookups read (direct array, nodes, leaves).
    pub fn lookup_bytes(&self) -> usize {
        // The trie is read only under routes longer than /24.
        self.trie.mirror.lookup_bytes()
            + if self.trie.has_deep_routes() {
                self.trie.lookup_bytes()
            } else {
                0
            }
    }

    /// Number of prefixes stored.
    pub fn len(&self) -> usize {
        self.trie.len()
    }

    /// True when no prefix is stored.
    pub fn is_empty(&self) -> bool {
        self.trie.len() == 0
    }

    /// Node and leaf counts, which depend only on the set of prefixes, not on update order.
    pub fn shape(&self) -> Shape {
        self.trie.shape()
    }

    /// Starts a batch of updates: each node they touch is recompiled once, when the batch is
    /// dropped, instead of once per update (a bulk load into a live table runs at bulk-build
    /// speed). The batch borrows the table, so no lookup can see it half compiled.
    pub fn batch(&mut self) -> Batch<'_> {
        Batch {
            trie: &mut self.trie,
        }
    }

    /// Applies an update deferred: lookups are wrong until [`Self::flush`]. For the writer of
    /// [`crate::sync`], which flushes before it publishes.
    pub(crate) fn apply_deferred(
        &mut self,
        op: &crate::sync::Update<u32>,
    ) -> crate::sync::UpdateResult {
        match *op {
            crate::sync::Update::Insert(p, l, v) => self.trie.insert_lazy(p, l, v),
            crate::sync::Update::Remove(p, l) => Ok(self.trie.remove_lazy(p, l)),
        }
    }

    /// Makes this table byte-equal to `src`, given that it is `src`'s twin: it equals what
    /// `src` was when `src` was last made a twin (by this call or [`Self::twin`]), and has
    /// no batch open. Copies only what `src` wrote since, when `src` recorded all of it
    /// (updates in batches), else all of `src`. For a writer that keeps two copies of a
    /// table and applies each batch to one, then the other: the second copy costs copies of
    /// the touched nodes and lines instead of a second computation.
    pub fn copy_from_twin(&mut self, src: &Lpm4) {
        self.trie.copy_from_twin(&src.trie)
    }

    /// A copy of this table that is its twin (see [`Self::copy_from_twin`]).
    pub fn twin(&self) -> Lpm4 {
        Lpm4 {
            trie: self.trie.twin(),
        }
    }

    /// Compiles what deferred updates touched.
    pub(crate) fn flush(&mut self) {
        self.trie.flush()
    }

    /// Builds a table from `(prefix, len, value)` triples (a later duplicate replaces an earlier
    /// one), compiling each node once: much faster than inserting one by one.
    pub fn from_routes(routes: impl IntoIterator<Item = (u32, u8, u32)>) -> Result<Self, LpmError> {
        Ok(Lpm4 {
            trie: Trie::from_routes(routes)?,
        })
    }
}

/// Updates to a [`Lpm4`] compiled together when dropped (see [`Lpm4::batch`]).
pub struct Batch<'a> {
    trie: &'a mut Trie<u32, DIRECT_BITS, Dir16>,
}

impl Batch<'_> {
    /// As [`Lpm4::insert`]; visible to lookups once the batch is dropped.
    pub fn insert(&mut self, prefix: u32, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        self.trie.insert_lazy(prefix, len, value)
    }

    /// As [`Lpm4::remove`]; visible to lookups once the batch is dropped.
    pub fn remove(&mut self, prefix: u32, len: u8) -> Option<u32> {
        self.trie.remove_lazy(prefix, len)
    }

    /// The value stored for exactly `prefix/len`, updates of this batch included.
    pub fn get(&self, prefix: u32, len: u8) -> Option<u32> {
        self.trie.get(prefix, len)
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.trie.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dir16::{CHUNK, CODES_SHIFT};

    /// The /16 the tests fill: 10.1.0.0/16, under 10.0.0.0/8.
    const CHUNK16: u32 = 0x0A01_0000;

    /// Longest-prefix match over a route list, the naive way.
    fn model(routes: &[(u32, u8, u32)], addr: u32) -> Option<u32> {
        routes
            .iter()
            .filter(|&&(p, l, _)| l == 0 || (addr ^ p) >> (32 - u32::from(l)) == 0)
            .max_by_key(|r| r.1)
            .map(|r| r.2)
    }

    /// Every /24 of the test /16 (first, middle and last address) and the addresses around the
    /// /16, single and batched, against the model.
    fn check(t: &Lpm4, routes: &[(u32, u8, u32)]) {
        let mut addrs: Vec<u32> = (0..256u32)
            .flat_map(|s| [0, 0x80, 0xFF].map(|h| CHUNK16 | s << 8 | h))
            .collect();
        addrs.extend([CHUNK16 - 1, CHUNK16 + 0x1_0000]);
        let mut out = vec![0; addrs.len()];
        t.lookup_batch(&addrs, &mut out);
        for (&a, &o) in addrs.iter().zip(&out) {
            let want = model(routes, a);
            assert_eq!(t.lookup(a), want, "single {a:#x}");
            assert_eq!(o, want.unwrap_or(crate::NO_ROUTE), "batch {a:#x}");
        }
    }

    fn chunk_entry(t: &Lpm4) -> u32 {
        t.trie.mirror.top[(CHUNK16 >> 16) as usize]
    }

    /// Fills quarter 1 of the /16 with /24s one by one (through every run count, so every
    /// quarter code and each change of code: code 1 in the orders that fill the first half
    /// first, since the second half's line holds fewer runs), then empties it again; the chunk
    /// must end as a plain value once its 256 slots agree.
    #[test]
    fn quarter_codes_at_their_boundaries() {
        let orders: [fn(u32) -> u32; 3] = [|k| k, |k| 63 - k, |k| k * 37 % 64];
        let mut codes_seen = [false; 3];
        for (o, order) in orders.iter().enumerate() {
            let mut t = Lpm4::new();
            let mut routes = vec![(0x0A00_0000, 8, 1000)];
            t.insert(0x0A00_0000, 8, 1000).unwrap();
            assert_eq!(chunk_entry(&t), 1000);
            for k in 0..64 {
                let prefix = CHUNK16 | (64 + order(k)) << 8;
                // Neighbours sometimes share a value, so runs also merge.
                let value = (k * 5 + o as u32) % 7;
                t.insert(prefix, 24, value).unwrap();
                routes.push((prefix, 24, value));
                check(&t, &routes);
                let e = chunk_entry(&t);
                assert_ne!(e & CHUNK, 0);
                codes_seen[((e >> (CODES_SHIFT + 2)) & 3) as usize] = true;
            }
            assert!(codes_seen[0] && codes_seen[2], "order {o}");
            for k in 0..64 {
                let prefix = CHUNK16 | (64 + order(k * 13 % 64)) << 8;
                assert!(t.remove(prefix, 24).is_some());
                routes.retain(|r| r.0 != prefix || r.1 != 24);
                check(&t, &routes);
            }
            assert_eq!(chunk_entry(&t), 1000);
        }
        assert_eq!(codes_seen, [true; 3]);
    }

    /// Batches whose direct-entry changes the mirror hears of only at the flush (trie invariant
    /// 4): short routes over the test /16 (value entries, one chunk), a /24 hanging a node in
    /// the same chunk, changes undone inside one batch. After each batch the answers match the
    /// model and the chunk is a plain value exactly when its 256 slots agree.
    #[test]
    fn deferred_direct_values_reach_the_mirror() {
        let mut t = Lpm4::new();
        let mut routes: Vec<(u32, u8, u32)> = Vec::new();
        /// One batch of `(prefix, len, Some(value))` inserts and `None` removals, also made
        /// to the route list.
        fn batch(t: &mut Lpm4, routes: &mut Vec<(u32, u8, u32)>, ops: &[(u32, u8, Option<u32>)]) {
            let mut b = t.batch();
            for &(p, l, v) in ops {
                routes.retain(|r| (r.0, r.1) != (p, l));
                match v {
                    Some(v) => {
                        b.insert(p, l, v).unwrap();
                        routes.push((p, l, v));
                    }
                    None => drop(b.remove(p, l)),
                }
            }
        }
        batch(&mut t, &mut routes, &[(CHUNK16, 16, Some(7))]);
        check(&t, &routes);
        assert_eq!(chunk_entry(&t), 7);
        // A quarter changed and changed back: the chunk stays one value.
        batch(
            &mut t,
            &mut routes,
            &[
                (CHUNK16 | 0x4000, 18, Some(8)),
                (CHUNK16 | 0x4000, 18, Some(7)),
            ],
        );
        check(&t, &routes);
        assert_eq!(chunk_entry(&t), 7);
        // Two quarters of new values and a node in a third.
        let ops = [
            (CHUNK16, 17, 9),
            (CHUNK16 | 0x8000, 18, 5),
            (CHUNK16 | 0xC100, 24, 3),
        ];
        batch(&mut t, &mut routes, &ops.map(|(p, l, v)| (p, l, Some(v))));
        check(&t, &routes);
        assert_ne!(chunk_entry(&t) & CHUNK, 0);
        // The node goes and a quarter changes in the same batch, then the rest goes.
        batch(
            &mut t,
            &mut routes,
            &[
                (CHUNK16 | 0xC100, 24, None),
                (CHUNK16 | 0x8000, 18, Some(9)),
            ],
        );
        check(&t, &routes);
        batch(
            &mut t,
            &mut routes,
            &[(CHUNK16, 17, None), (CHUNK16 | 0x8000, 18, None)],
        );
        check(&t, &routes);
        assert_eq!(chunk_entry(&t), 7);
    }

    /// Two tables given the same batches hold the same bytes in every array lookups read
    /// (direct entries, nodes, leaves, the mirror's top entries and lines): the layout is a
    /// function of the updates alone (the arenas' free lists are stacks, growth follows fixed
    /// rules, the mirror hears its reports in the order of the updates), so the two copies of a
    /// left-right pair stay alike down to where their blocks lie. Routes of every length over
    /// four /16s, so that short routes, nodes and deep routes share chunks; a third of the
    /// updates remove a route inserted before.
    #[test]
    fn equal_updates_give_equal_bytes() {
        for seed in 1..=8u64 {
            let mut g = Updates::new(seed);
            let (mut a, mut b) = (Lpm4::new(), Lpm4::new());
            for _ in 0..60 {
                let ops = g.batch();
                for t in [&mut a, &mut b] {
                    apply(t, &ops);
                }
                let nodes = |t: &Lpm4| -> Vec<(u64, u64, u32, u32)> {
                    let n = t.trie.nodes.iter();
                    n.map(|n| (n.vector, n.leafvec, n.base0, n.base1)).collect()
                };
                let lines = |t: &Lpm4| -> Vec<[u32; 16]> {
                    t.trie.mirror.lines.iter().map(|l| l.0).collect()
                };
                assert_eq!(a.trie.direct, b.trie.direct, "seed {seed}");
                assert_eq!(nodes(&a), nodes(&b), "seed {seed}");
                assert_eq!(a.trie.leaves, b.trie.leaves, "seed {seed}");
                assert_eq!(*a.trie.mirror.top, *b.trie.mirror.top, "seed {seed}");
                assert_eq!(lines(&a), lines(&b), "seed {seed}");
            }
            assert!(
                a.trie.has_deep_routes() && a.len() > 100,
                "seed {seed}: {}",
                a.len()
            );
        }
    }

    /// Random batches of updates (xorshift, so a failure replays): routes of every length
    /// over four /16s, so that short routes, nodes and deep routes share chunks; a third of
    /// the updates remove a route inserted before.
    struct Updates {
        x: u64,
        present: Vec<(u32, u8)>,
    }

    /// (prefix, length, value to insert or None to remove).
    type Op = (u32, u8, Option<u32>);

    impl Updates {
        const LENS: [u8; 11] = [8, 12, 16, 17, 18, 20, 22, 24, 25, 28, 32];

        fn new(seed: u64) -> Updates {
            Updates {
                x: seed * 0x9E37_79B9_7F4A_7C15,
                present: Vec::new(),
            }
        }

        fn step(&mut self) -> u64 {
            self.x ^= self.x << 13;
            self.x ^= self.x >> 7;
            self.x ^= self.x << 17;
            self.x
        }

        /// Up to 79 updates.
        fn batch(&mut self) -> Vec<Op> {
            let mut ops = Vec::new();
            for _ in 0..self.step() % 80 {
                let r = self.step();
                if r.is_multiple_of(3) && !self.present.is_empty() {
                    let i = (r >> 8) as usize % self.present.len();
                    let (p, l) = self.present.swap_remove(i);
                    ops.push((p, l, None));
                } else {
                    let len = Self::LENS[(r >> 8) as usize % Self::LENS.len()];
                    let addr = 0x0A00_0000 | (r >> 16) as u32 & 0x0003_FFFF;
                    ops.push((addr, len, Some((r >> 48) as u32 % 16)));
                    self.present.push((addr, len));
                }
            }
            ops
        }

        /// An address in the updates' four /16s, or anywhere one time in eight.
        fn addr(&mut self) -> u32 {
            let r = self.step();
            if r.is_multiple_of(8) {
                (r >> 32) as u32
            } else {
                0x0A00_0000 | (r >> 16) as u32 & 0x0003_FFFF
            }
        }
    }

    /// Applies `ops` to `t` as one batch.
    fn apply(t: &mut Lpm4, ops: &[Op]) {
        let mut batch = t.batch();
        for &(p, l, v) in ops {
            match v {
                Some(v) => drop(batch.insert(p, l, v)),
                None => drop(batch.remove(p, l)),
            }
        }
    }

    /// Panics unless `a` and `b` answer alike: every stored route's exact get, and lookups
    /// (single and batched) of 2,000 addresses `g` draws.
    fn assert_same_answers(a: &Lpm4, b: &Lpm4, g: &mut Updates) {
        for &(p, l) in &g.present {
            assert_eq!(a.get(p, l), b.get(p, l), "{p:#x}/{l}");
        }
        let addrs: Vec<u32> = (0..2000).map(|_| g.addr()).collect();
        let (mut x, mut y) = (vec![0; addrs.len()], vec![0; addrs.len()]);
        a.lookup_batch(&addrs, &mut x);
        b.lookup_batch(&addrs, &mut y);
        assert_eq!(x, y);
        for (i, &addr) in addrs.iter().enumerate() {
            assert_eq!(a.lookup(addr), b.lookup(addr), "{addr:#x}");
            assert_eq!(a.lookup(addr).unwrap_or(crate::NO_ROUTE), x[i], "{addr:#x}");
        }
    }

    /// Twins taking turns, one applying each batch and the other copying what it wrote
    /// (`copy_from_twin`), hold after every batch the same bytes as each other and as a
    /// table that applied every batch itself, and answer every lookup as it does.
    #[test]
    fn twin_copies_hold_the_computed_bytes() {
        for seed in 1..=8u64 {
            let mut g = Updates::new(seed);
            let mut reference = Lpm4::new();
            let first = Lpm4::new();
            let mut twins = [first.twin(), first];
            for round in 0..60 {
                let ops = g.batch();
                apply(&mut reference, &ops);
                let (a, b) = twins.split_at_mut(1);
                let (applies, copies) = if round % 2 == 0 {
                    (&mut b[0], &mut a[0])
                } else {
                    (&mut a[0], &mut b[0])
                };
                apply(applies, &ops);
                copies.copy_from_twin(applies);
                twins[0].trie.assert_same_bytes(&twins[1].trie);
                twins[0].trie.assert_same_bytes(&reference.trie);
                assert_same_answers(&twins[0], &reference, &mut g);
            }
            assert!(reference.trie.has_deep_routes() && reference.len() > 100);
        }
    }

    /// A source whose record is not complete is copied whole, and the copy is its twin
    /// again: after updates outside a batch, on a table that was never made a twin, and
    /// after more blocks released than a record lists.
    #[test]
    fn twin_copy_falls_back_to_a_whole_copy() {
        let mut g = Updates::new(9);
        let mut src = Lpm4::new();
        apply(&mut src, &g.batch());
        // Never a twin: `dst` is not what `src` was at any record's start.
        let mut dst = Lpm4::new();
        dst.copy_from_twin(&src);
        dst.trie.assert_same_bytes(&src.trie);
        // Updates outside a batch are not recorded.
        src.insert(0x0A01_0200, 24, 7).unwrap();
        src.remove(0x0A01_0200, 24);
        apply(&mut src, &g.batch());
        dst.copy_from_twin(&src);
        dst.trie.assert_same_bytes(&src.trie);
        assert_same_answers(&dst, &src, &mut g);
        // Batches that release more blocks than a record lists: /32s in distinct /24s,
        // each a node with a leaf block, inserted then removed.
        let deep: Vec<u32> = (0..40_000u32).map(|i| 0x2000_0000 | i << 8 | 1).collect();
        for v in [Some(1), None] {
            let ops: Vec<Op> = deep.iter().map(|&p| (p, 32, v)).collect();
            apply(&mut src, &ops);
        }
        assert!(src.trie.node_arena_released_overflowed());
        dst.copy_from_twin(&src);
        dst.trie.assert_same_bytes(&src.trie);
        // The copy is a twin again: the next batch copies what it wrote.
        apply(&mut dst, &g.batch());
        src.copy_from_twin(&dst);
        src.trie.assert_same_bytes(&dst.trie);
        assert_same_answers(&dst, &src, &mut g);
    }

    /// True when the index hands `addr` to the trie.
    fn in_trie(t: &Lpm4, addr: u32) -> bool {
        t.trie.mirror.lookup(addr) & TRIE != 0
    }

    /// A route longer than /24 makes its /18 quarter a trie marker (and only that quarter);
    /// removing it lays the quarter out again, in every update mode.
    #[test]
    fn deep_routes_come_and_go() {
        let mut routes = vec![
            (CHUNK16 | 0x4000, 18, 1),
            (CHUNK16 | 0x4100, 24, 2),
            (CHUNK16 | 0xC000, 24, 3),
        ];
        let mut t = Lpm4::from_routes(routes.iter().copied()).unwrap();
        check(&t, &routes);
        assert!(!t.trie.has_deep_routes());
        let host = (CHUNK16 | 0x4101, 32, 4);
        t.insert(host.0, host.1, host.2).unwrap();
        routes.push(host);
        assert!(t.trie.has_deep_routes());
        assert!(in_trie(&t, host.0) && in_trie(&t, CHUNK16 | 0x7FFF));
        assert!(!in_trie(&t, CHUNK16 | 0x3FFF) && !in_trie(&t, CHUNK16 | 0xC000));
        check(&t, &routes);
        let bulk = Lpm4::from_routes(routes.iter().copied()).unwrap();
        assert!(in_trie(&bulk, host.0) && !in_trie(&bulk, CHUNK16 | 0xC000));
        check(&bulk, &routes);
        {
            let mut b = t.batch();
            b.remove(host.0, host.1);
            b.insert(CHUNK16 | 0x80, 25, 5).unwrap();
        }
        routes.pop();
        routes.push((CHUNK16 | 0x80, 25, 5));
        assert!(!in_trie(&t, host.0) && in_trie(&t, CHUNK16 | 0x80));
        check(&t, &routes);
        t.remove(CHUNK16 | 0x80, 25);
        routes.pop();
        assert!(!t.trie.has_deep_routes());
        assert!(!in_trie(&t, CHUNK16 | 0x80));
        assert_ne!(chunk_entry(&t) & CHUNK, 0);
        check(&t, &routes);
        for r in routes.drain(..) {
            t.remove(r.0, r.1);
        }
        assert_eq!(chunk_entry(&t), crate::trie::NONE);
        check(&t, &routes);
    }
}
