//! IPv4's updatable structure behind [`crate::v4::Lpm4`]: a Poptrie-style compressed
//! multiway trie (Asai and Ohara, SIGCOMM 2015) that is updated in place, one route at a time.
//! IPv4 lookups read the trie only below /24 routes' nodes (routes longer than /24); the rest
//! go through the index the trie mirrors its direct level into ([`crate::dir16`]).
//!
//! # Shape
//! - A direct-pointing array indexed by the top `D` bits of the address. An entry is a final
//!   value (bit 31 clear) or the node hanging there (`NODE_FLAG | index`).
//! - Internal nodes each consume 6 more bits (64 slots). A node holds two bitmaps: `vector` marks
//!   the slots that lead to a child node, `leafvec` marks the slots that start a run of equal
//!   values among the remaining (leaf) slots. A node's children are contiguous in `nodes` from
//!   `base1`, its distinct leaf runs contiguous in `leaves` from `base0`; a popcount of the bitmap
//!   below the slot selects the child or the run. A lookup is one direct read, one node read per
//!   6 bits below `D`, and one leaf read.
//! - A childless node right below the direct array (every node of a 2026 IPv4 table) has no
//!   leaves here: its compiled form is its quarter of the mirror's lines, which is also where
//!   the trie reads its slot values back from ([`Mirror::slots`]). [`Trie::lookup`] is only
//!   asked about addresses under direct entries that are values or nodes with children (what
//!   the mirror answers `TRIE | n` for).
//! - Values are leaf-pushed: every leaf holds the answer of the longest prefix covering it, so a
//!   lookup never backtracks and its cost depends only on the depth of the trie where it ends.
//!
//! # Control state and invariants
//! Beside each node (`ctl`, same index) the trie keeps the routes whose length falls inside the
//! node's 6 bits (at most 126, sorted by their in-node code, i.e. by length then bits) and the
//! node's default: the value of the longest route shorter than the node covering all of it.
//! Routes no longer than `D` live in `short`, and `dlen` records for each direct entry the
//! length (+1, 0 = none) of the short route that supplies its value.
//! 1. A node exists iff some route longer than its depth lies below it; so the set of nodes and
//!    every node's leaves are a function of the route set alone (canonical form: [`Shape`] does
//!    not depend on the order of insertions and removals). Arena capacity and free lists do.
//! 2. Every slot's compiled value equals the painting of the node's routes over its default, and
//!    every child's default equals its parent's painted value at the child's slot.
//! 3. An update repaints only the node the route lives in (or the direct entries it covers) and
//!    pushes the new default down to exactly the children whose inherited value changed. In
//!    lazy mode (batches, the `sync` writer) updates only record routes and mark nodes; `flush`
//!    then recompiles each marked node once, top-down, and lookups are valid again.
//!
//! 4. Every change of what a direct entry resolves to is reported to the trie's mirror `M` (the
//!    lookup index of [`crate::dir16`]); a bulk build lays each chunk of four entries out once.
//!    In lazy mode a direct entry that holds a value (no node) is only marked when it changes
//!    (`pending_bits`, its chunk of four entries listed in `mirror_pending` at its first mark):
//!    `flush` reports each marked entry once, after the nodes, and lays out at once a chunk of
//!    four entries none of which holds a node. A short route covers whole chunks and a sorted
//!    load brings their longer routes right after, so the mirror lays a chunk out once a batch
//!    instead of once for each route that changed one of its entries. The mirror holds what
//!    was reported last, so the order of reports inside a flush changes where its blocks go,
//!    never what lookups answer; equal tries given equal updates report in the same order.
//!
//! 5. Lazy updates record the direct entries they touch (`written`), the arenas the blocks
//!    they release, the mirror the chunks it is told of and the blocks it releases
//!    ([`crate::written`]): everything written since the trie was last made equal to its
//!    twin is under a recorded entry, in a recorded block or in a recorded chunk, so the
//!    twin can copy those places ([`Trie::copy_from_twin`]). Updates outside a batch are not
//!    recorded; they make the next copy a whole one.
//!
//! The trie itself is single-threaded; concurrent readers go through [`crate::sync`].

use std::collections::HashMap;
use std::hash::Hash;

use crate::dir16::{Mirror, Quarter};
use crate::written::{copy_vec, grow_like, Marks, Released};
use crate::LpmError;

/// Internal encoding of "no route" in direct entries and leaves: the largest 31-bit value, so
/// that bit 31 of a direct entry can flag a node. Mapped to [`crate::NO_ROUTE`] on the way out.
pub(crate) const NONE: u32 = 0x7FFF_FFFF;
/// Bit 31 of a direct entry: not a value but `NODE_FLAG | n`, the node hanging there.
pub(crate) const NODE_FLAG: u32 = 0x8000_0000;
/// `NodeCtl::slot` of a node below the direct level.
const NO_SLOT: u32 = u32::MAX;
/// Bits consumed by one internal node: 6 gives 64 slots, one `u64` bitmap, one `popcnt`.
pub(crate) const STRIDE: u32 = 6;
pub(crate) const SLOTS: usize = 1 << STRIDE;
/// Routes in a childless node from which an update patches its compiled leaves rather than
/// repainting all its routes (below it, repainting is as cheap as the patch's searches).
const PATCH_MIN_ROUTES: usize = 8;
/// Node indices must leave bit 31 of a direct entry free.
const MAX_NODES: usize = NODE_FLAG as usize;
/// Leaf indices are `u32`.
const MAX_LEAVES: usize = u32::MAX as usize;
/// Free index space an insert demands before it starts: more than any single update can use
/// short of repainting the whole table (which only pushes existing nodes' leaves).
const HEADROOM: usize = 1 << 26;

/// An address family's key: the address as an unsigned integer, most significant bit first.
pub(crate) trait Key: Copy + Eq + Hash + Ord + std::fmt::Debug {
    /// Address width in bits.
    const BITS: u32;
    /// The address with every bit after the first `len` cleared.
    fn masked(self, len: u32) -> Self;
    /// The first `d` bits as an index (`1 <= d <= 32`).
    fn top(self, d: u32) -> usize;
    /// The 6 bits starting `off` bits from the top, zero-padded past the end of the address.
    fn chunk(self, off: u32) -> usize;
}

impl Key for u32 {
    const BITS: u32 = 32;
    #[inline(always)]
    fn masked(self, len: u32) -> Self {
        if len == 0 {
            0
        } else {
            self & (u32::MAX << (32 - len))
        }
    }
    #[inline(always)]
    fn top(self, d: u32) -> usize {
        (self >> (32 - d)) as usize
    }
    #[inline(always)]
    fn chunk(self, off: u32) -> usize {
        // Widened so that the last stride (bits 30..36) reads zeros past bit 31.
        (((self as u64) << (32 + off)) >> (64 - STRIDE)) as usize
    }
}

/// A compiled internal node (the only thing a lookup reads besides the direct array and leaves).
#[derive(Clone, Copy, Default, Debug)]
#[repr(C)]
pub(crate) struct Node {
    /// Bit s set: slot s leads to a child node.
    pub(crate) vector: u64,
    /// Bit s set: leaf slot s starts a new run of values.
    pub(crate) leafvec: u64,
    /// First leaf of this node in `leaves`.
    pub(crate) base0: u32,
    /// First child of this node in `nodes`.
    pub(crate) base1: u32,
}

impl Node {
    /// The child index for `slot`, if the slot leads to a child.
    #[inline(always)]
    pub(crate) fn child(&self, slot: usize) -> Option<u32> {
        if self.vector >> slot & 1 != 0 {
            Some(self.base1 + (self.vector & ((1u64 << slot) - 1)).count_ones())
        } else {
            None
        }
    }
    /// The leaf index for a slot that does not lead to a child.
    #[inline(always)]
    pub(crate) fn leaf(&self, slot: usize) -> u32 {
        self.base0 + (self.leafvec & (u64::MAX >> (63 - slot))).count_ones() - 1
    }
}

/// Control-plane state of a node: its own routes and the value it inherits.
#[derive(Clone, Debug)]
struct NodeCtl {
    /// Value of the longest route shorter than this node that covers it (NONE if there is none).
    default: u32,
    /// The direct entry this node hangs from, or NO_SLOT below the direct level.
    slot: u32,
    /// It hangs from the direct array and has no children: its compiled leaves are only in
    /// the mirror, none in `leaves`.
    mirrored: bool,
    /// Lazy mode: its compiled leaves are stale.
    dirty: bool,
    /// Lazy mode: some node below it is dirty.
    below: bool,
    /// Routes ending inside this node.
    routes: Routes,
}

impl NodeCtl {
    /// Makes this equal to `src`, route list capacity included (see [`copy_vec`]).
    fn copy_from(&mut self, src: &NodeCtl) {
        self.default = src.default;
        self.slot = src.slot;
        self.mirrored = src.mirrored;
        self.dirty = src.dirty;
        self.below = src.below;
        self.routes.codes = src.routes.codes;
        copy_vec(&mut self.routes.values, &src.routes.values);
    }
}

impl Default for NodeCtl {
    fn default() -> Self {
        NodeCtl {
            default: NONE,
            slot: NO_SLOT,
            mirrored: false,
            dirty: false,
            below: false,
            routes: Routes::default(),
        }
    }
}

/// The routes ending inside a node, by in-node code: code = 1 << l | bits for a route of
/// l = 1..=6 bits below the node, which orders them by length first. A bitmap of the codes
/// present and their values in code order (the value of code c at the rank of bit c): 4 bytes
/// per route, where (code, value) pairs would take 8.
#[derive(Clone, Debug, Default)]
struct Routes {
    codes: [u64; 2],
    values: Vec<u32>,
}

/// A node's route values grow by at least this many, or a quarter of themselves: nodes hold
/// 15 routes on average in a 2026 table, so doubling would leave a third of the space idle,
/// and steps of 8 reach 16 in two reallocations where steps of 4 took four (a table load paid
/// one reallocation every four routes).
const ROUTES_MIN_GROWTH: usize = 8;

impl Routes {
    fn has(&self, code: u8) -> bool {
        self.codes[usize::from(code >> 6)] >> (code & 63) & 1 != 0
    }

    /// Routes with codes below `code` (`code <= 128`).
    fn rank(&self, code: u32) -> usize {
        let below = |w: u64, b: u32| (w & ((1u64 << b) - 1)).count_ones();
        (match code >> 6 {
            0 => below(self.codes[0], code),
            1 => self.codes[0].count_ones() + below(self.codes[1], code & 63),
            _ => self.codes[0].count_ones() + self.codes[1].count_ones(),
        }) as usize
    }

    fn get(&self, code: u8) -> Option<u32> {
        self.has(code)
            .then(|| self.values[self.rank(u32::from(code))])
    }

    /// Maps `code` to `value`; returns the value it replaced.
    fn set(&mut self, code: u8, value: u32) -> Option<u32> {
        let i = self.rank(u32::from(code));
        if self.has(code) {
            return Some(std::mem::replace(&mut self.values[i], value));
        }
        if self.values.len() == self.values.capacity() {
            self.values
                .reserve_exact(ROUTES_MIN_GROWTH.max(self.values.len() / 4));
        }
        self.values.insert(i, value);
        self.codes[usize::from(code >> 6)] |= 1 << (code & 63);
        None
    }

    fn remove(&mut self, code: u8) -> Option<u32> {
        if !self.has(code) {
            return None;
        }
        self.codes[usize::from(code >> 6)] &= !(1 << (code & 63));
        Some(self.values.remove(self.rank(u32::from(code))))
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// (code, value) of the routes with codes in `lo..hi`, in code order.
    fn range(&self, lo: u32, hi: u32) -> impl Iterator<Item = (u8, u32)> + '_ {
        let mut at = self.rank(lo);
        (lo..hi).filter(|&c| self.has(c as u8)).map(move |c| {
            at += 1;
            (c as u8, self.values[at - 1])
        })
    }

    /// (code, value) of every route, in code order.
    fn iter(&self) -> impl Iterator<Item = (u8, u32)> + '_ {
        let mut codes = self.codes;
        self.values.iter().map(move |&v| {
            let w = usize::from(codes[0] == 0);
            let b = codes[w].trailing_zeros();
            codes[w] &= codes[w] - 1;
            ((64 * w as u32 + b) as u8, v)
        })
    }
}

/// Counts that depend only on the set of routes (see invariant 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Routes stored.
    pub routes: usize,
    /// Internal nodes in use.
    pub nodes: usize,
    /// Leaf runs (compiled values) over all nodes.
    pub leaves: usize,
}

/// The trie over key type `K` with a direct-pointing array of `2^D` entries, reporting every
/// change of a direct entry to its mirror `M` (IPv4's lookup index, see [`crate::dir16`]).
#[derive(Clone, Debug)]
pub(crate) struct Trie<K: Key, const D: u32, M: Mirror> {
    pub(crate) direct: Vec<u32>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) leaves: Vec<u32>,
    node_arena: ArenaMeta,
    leaf_arena: ArenaMeta,
    ctl: Vec<NodeCtl>,
    /// Leaf runs over all nodes, however stored.
    leaf_total: usize,
    /// Lazy mode: direct entries whose node (if it still exists) is dirty or has dirty nodes below.
    dirty_slots: Vec<u32>,
    /// Lazy mode: the chunks of four direct entries with a mark in `pending_bits`, each once,
    /// in the order of their first mark (see invariant 4).
    mirror_pending: Vec<u32>,
    /// Lazy mode: bit s set when direct entry s holds a value that changed and is not reported
    /// to the mirror yet.
    pending_bits: Vec<u64>,
    dlen: Vec<u8>,
    /// Prefixes no longer than the direct table's stride, for exact gets. Keyed by prefixes
    /// netlink peers choose: std's SipHash, seeded per map; longest-prefix lookups never hash.
    short: HashMap<(K, u8), u32>,
    routes: usize,
    pub(crate) mirror: M,
    /// During a bulk build: direct-entry changes are not reported (see `compile_all`).
    mirror_quiet: bool,
    /// The direct entries lazy updates touched since `from_twin` was last set: every node,
    /// leaf and control state written since is under one of them or in a released block.
    written: Marks,
    /// Lazy updates since `from_twin` was last set changed `short`.
    short_written: bool,
    /// This trie was made equal to its twin by [`Self::copy_from_twin`], and every write
    /// since is in `written` and the arenas' and mirror's records.
    from_twin: bool,
}

/// The node a direct entry `d` names, if it names one.
#[inline(always)]
fn node_of(d: u32) -> Option<u32> {
    (d & NODE_FLAG != 0).then_some(d & !NODE_FLAG)
}

/// Free lists of a block arena: blocks of 1..=64 contiguous elements in one growable vector
/// (kept apart from the elements so that `nodes` and `leaves` stay plain slices for lookups).
#[derive(Clone, Debug)]
struct ArenaMeta {
    /// free[n]: starts of free blocks of exactly n elements.
    free: Vec<Vec<u32>>,
    /// Elements in blocks in use.
    live: usize,
    /// Blocks released since the trie was last made equal to its twin.
    released: Released,
}

impl ArenaMeta {
    fn new() -> Self {
        ArenaMeta {
            free: vec![Vec::new(); SLOTS + 1],
            live: 0,
            released: Released::default(),
        }
    }

    /// Makes the free lists and counts equal to `src`'s; restarts the record.
    fn copy_from(&mut self, src: &ArenaMeta) {
        for (d, s) in self.free.iter_mut().zip(&src.free) {
            copy_vec(d, s);
        }
        self.live = src.live;
        self.released.clear();
    }
}

/// Allocates a block of `n` elements in `items`, reusing a free block of the same size.
/// Panics only past `cap` elements (tens of GiB); `Trie::insert` refuses updates long before.
fn alloc<T: Default + Clone>(
    items: &mut Vec<T>,
    meta: &mut ArenaMeta,
    n: usize,
    cap: usize,
) -> u32 {
    debug_assert!((1..=SLOTS).contains(&n));
    meta.live += n;
    if let Some(at) = meta.free[n].pop() {
        return at;
    }
    let at = items.len();
    assert!(at + n <= cap, "fibre-lpm arena index space exhausted");
    if at + n > items.capacity() {
        items.reserve_exact(n.max(items.capacity() / crate::huge::GROWTH));
    }
    items.resize(at + n, T::default());
    at as u32
}

fn release(meta: &mut ArenaMeta, at: u32, n: usize) {
    if n > 0 {
        meta.live -= n;
        meta.free[n].push(at);
        meta.released.push(at, n);
    }
}

/// What an update does to compiled state: `Compile` keeps every invariant after each call;
/// `Lazy` records the change and marks the nodes to recompile at the next `flush` (each at
/// most once, however many updates touched it); `Defer` only records routes and nodes, for a
/// bulk build from empty finished by `compile_all`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Compile,
    Lazy,
    Defer,
}

impl<K: Key, const D: u32, M: Mirror> Default for Trie<K, D, M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key, const D: u32, M: Mirror> Trie<K, D, M> {
    pub(crate) fn new() -> Self {
        Trie {
            direct: vec![NONE; 1 << D],
            nodes: Vec::new(),
            leaves: Vec::new(),
            node_arena: ArenaMeta::new(),
            leaf_arena: ArenaMeta::new(),
            ctl: Vec::new(),
            leaf_total: 0,
            dirty_slots: Vec::new(),
            mirror_pending: Vec::new(),
            pending_bits: vec![0; (1usize << D).div_ceil(64)],
            dlen: vec![0; 1 << D],
            short: HashMap::new(),
            routes: 0,
            mirror: M::default(),
            mirror_quiet: false,
            written: Marks::default(),
            short_written: false,
            from_twin: false,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.routes
    }

    pub(crate) fn shape(&self) -> Shape {
        Shape {
            routes: self.routes,
            nodes: self.node_arena.live,
            leaves: self.leaf_total,
        }
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        let free = |m: &ArenaMeta| m.free.iter().map(|f| f.capacity() * 4).sum::<usize>();
        self.direct.capacity() * 4
            + self.dlen.capacity()
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.leaves.capacity() * 4
            + self.ctl.capacity() * std::mem::size_of::<NodeCtl>()
            + self
                .ctl
                .iter()
                .map(|c| c.routes.values.capacity() * 4)
                .sum::<usize>()
            + self.short.capacity() * (std::mem::size_of::<((K, u8), u32)>() + 1)
            + free(&self.node_arena)
            + free(&self.leaf_arena)
            + (self.dirty_slots.capacity() + self.mirror_pending.capacity()) * 4
            + self.pending_bits.capacity() * 8
            + self.written.heap_bytes()
            + self.node_arena.released.heap_bytes()
            + self.leaf_arena.released.heap_bytes()
            + self.mirror.memory_bytes()
    }

    /// True when some route is longer than `D + STRIDE` (some node has children, so its
    /// subtree holds leaves in `leaves`).
    pub(crate) fn has_deep_routes(&self) -> bool {
        self.leaf_arena.live > 0
    }

    /// Bytes the lookup path reads from: direct array, nodes and leaves.
    pub(crate) fn lookup_bytes(&self) -> usize {
        self.direct.len() * 4
            + self.nodes.len() * std::mem::size_of::<Node>()
            + self.leaves.len() * 4
    }

    /// Longest-prefix match; returns the internal value (NONE when no route covers `key`).
    /// Only for keys whose direct entry is a value or a node with children: a childless node
    /// under the direct array is compiled in the mirror alone.
    #[inline(always)]
    pub(crate) fn lookup(&self, key: K) -> u32 {
        let d = self.direct[key.top(D)];
        let Some(n) = node_of(d) else {
            return d;
        };
        debug_assert!(!self.ctl[n as usize].mirrored);
        let mut node = &self.nodes[n as usize];
        let mut off = D;
        loop {
            let slot = key.chunk(off);
            match node.child(slot) {
                Some(c) => {
                    node = &self.nodes[c as usize];
                    off += STRIDE;
                }
                None => return self.leaves[node.leaf(slot) as usize],
            }
        }
    }

    pub(crate) fn get(&self, key: K, len: u8) -> Option<u32> {
        let len32 = u32::from(len);
        let key = key.masked(len32);
        if len32 <= D {
            return self.short.get(&(key, len)).copied();
        }
        let mut n = node_of(self.direct[key.top(D)])?;
        let mut off = D;
        while len32 > off + STRIDE {
            n = self.nodes[n as usize].child(key.chunk(off))?;
            off += STRIDE;
        }
        let code = route_code(key, off, len32);
        self.ctl[n as usize].routes.get(code)
    }

    fn check(&self, len: u8, value: u32) -> Result<(), LpmError> {
        // One update allocates at most a path of nodes plus leaf blocks; refusing it well before
        // the index space ends keeps the allocator's limit unreachable.
        if self.nodes.len() > MAX_NODES - HEADROOM || self.leaves.len() > MAX_LEAVES - HEADROOM {
            return Err(LpmError::Full);
        }
        if u32::from(len) > K::BITS {
            return Err(LpmError::InvalidLength(len));
        }
        if value > crate::MAX_VALUE {
            return Err(LpmError::ValueTooLarge(value));
        }
        Ok(())
    }

    pub(crate) fn insert(&mut self, key: K, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        self.check(len, value)?;
        self.from_twin = false;
        self.insert_mode(key, len, value, Mode::Compile)
    }

    /// Inserts in `Lazy` mode: lookups are wrong until `flush`.
    pub(crate) fn insert_lazy(
        &mut self,
        key: K,
        len: u8,
        value: u32,
    ) -> Result<Option<u32>, LpmError> {
        self.check(len, value)?;
        self.mark_written(key, len);
        self.insert_mode(key, len, value, Mode::Lazy)
    }

    pub(crate) fn remove(&mut self, key: K, len: u8) -> Option<u32> {
        self.from_twin = false;
        self.remove_mode(key, len, Mode::Compile)
    }

    /// Removes in `Lazy` mode: lookups are wrong until `flush`.
    pub(crate) fn remove_lazy(&mut self, key: K, len: u8) -> Option<u32> {
        self.mark_written(key, len);
        self.remove_mode(key, len, Mode::Lazy)
    }

    /// Records the direct entries a lazy update of `key/len` may write under: the entries a
    /// short route covers (and `short`), or the one a longer route's nodes hang from.
    fn mark_written(&mut self, key: K, len: u8) {
        let len32 = u32::from(len);
        if len32 <= D {
            let (start, count) = direct_range::<K, D>(key.masked(len32), len32);
            for s in start..start + count {
                self.written.mark(s, 1 << D);
            }
            self.short_written = true;
        } else {
            self.written.mark(key.top(D), 1 << D);
        }
    }

    /// Makes this trie byte-equal to `src` (nodes, leaves, direct entries, control state,
    /// free lists and the mirror), given that it is `src`'s twin: it equals what `src` was
    /// when `src` was last made equal to it, and it has no lazy updates pending. Copies only
    /// what `src`'s records list when they are complete (capacities too), else all of `src`
    /// (a clone: capacities fitted to the lengths, which only memory accounting sees).
    /// Either way this trie's own record restarts: it is now `src`'s equal.
    pub(crate) fn copy_from_twin(&mut self, src: &Self) {
        debug_assert!(self.dirty_slots.is_empty() && self.mirror_pending.is_empty());
        debug_assert!(src.dirty_slots.is_empty() && src.mirror_pending.is_empty());
        let (Some(node_blocks), Some(leaf_blocks), true, true) = (
            src.node_arena.released.ranges(),
            src.leaf_arena.released.ranges(),
            src.from_twin,
            src.mirror.record_complete(),
        ) else {
            *self = src.twin();
            return;
        };
        self.mirror.copy_from_twin(&src.mirror);
        grow_like(&mut self.nodes, &src.nodes, Node::default());
        grow_like(&mut self.leaves, &src.leaves, 0);
        grow_like(&mut self.ctl, &src.ctl, NodeCtl::default());
        for &s in src.written.listed() {
            let s = s as usize;
            self.direct[s] = src.direct[s];
            self.dlen[s] = src.dlen[s];
            if let Some(n) = node_of(src.direct[s]) {
                self.copy_subtree(src, n);
            }
        }
        for r in node_blocks {
            self.nodes[r.clone()].copy_from_slice(&src.nodes[r.clone()]);
            for n in r {
                self.ctl[n].copy_from(&src.ctl[n]);
            }
        }
        for r in leaf_blocks {
            self.leaves[r.clone()].copy_from_slice(&src.leaves[r]);
        }
        self.node_arena.copy_from(&src.node_arena);
        self.leaf_arena.copy_from(&src.leaf_arena);
        if src.short_written {
            self.short.clone_from(&src.short);
        }
        self.leaf_total = src.leaf_total;
        self.routes = src.routes;
        self.restart_record();
    }

    /// Copies node `n`, its control state, its leaf block and its children, recursively.
    fn copy_subtree(&mut self, src: &Self, n: u32) {
        let n = n as usize;
        let node = src.nodes[n];
        self.nodes[n] = node;
        self.ctl[n].copy_from(&src.ctl[n]);
        if !src.ctl[n].mirrored {
            let leaves = node.base0 as usize..(node.base0 + node.leafvec.count_ones()) as usize;
            self.leaves[leaves.clone()].copy_from_slice(&src.leaves[leaves]);
        }
        for c in node.base1..node.base1 + node.vector.count_ones() {
            self.copy_subtree(src, c);
        }
    }

    /// A copy of this trie that is its twin (see `copy_from_twin`).
    pub(crate) fn twin(&self) -> Self {
        let mut t = self.clone();
        t.restart_record();
        t
    }

    /// Panics unless this trie holds the same bytes as `other` in everything later updates
    /// and lookups read: arrays, control state, free lists, counts and the mirror.
    #[cfg(test)]
    pub(crate) fn assert_same_bytes(&self, other: &Self) {
        let nodes = |t: &Self| -> Vec<(u64, u64, u32, u32)> {
            let n = t.nodes.iter();
            n.map(|n| (n.vector, n.leafvec, n.base0, n.base1)).collect()
        };
        type Ctl = (u32, u32, bool, [u64; 2], Vec<u32>);
        let ctl = |t: &Self| -> Vec<Ctl> {
            let c = t.ctl.iter();
            c.map(|c| {
                (
                    c.default,
                    c.slot,
                    c.mirrored,
                    c.routes.codes,
                    c.routes.values.clone(),
                )
            })
            .collect()
        };
        let short = |t: &Self| {
            let mut s: Vec<_> = t.short.iter().map(|(&k, &v)| (k, v)).collect();
            s.sort_unstable();
            s
        };
        assert_eq!(self.direct, other.direct);
        assert_eq!(self.dlen, other.dlen);
        assert_eq!(nodes(self), nodes(other));
        assert_eq!(self.leaves, other.leaves);
        assert_eq!(ctl(self), ctl(other));
        assert_eq!(short(self), short(other));
        assert_eq!(self.node_arena.free, other.node_arena.free);
        assert_eq!(self.leaf_arena.free, other.leaf_arena.free);
        assert_eq!(
            (
                self.node_arena.live,
                self.leaf_arena.live,
                self.leaf_total,
                self.routes
            ),
            (
                other.node_arena.live,
                other.leaf_arena.live,
                other.leaf_total,
                other.routes
            )
        );
        self.mirror.assert_same_bytes(&other.mirror);
    }

    /// More blocks were released since the last copy than the node arena's record lists.
    #[cfg(test)]
    pub(crate) fn node_arena_released_overflowed(&self) -> bool {
        self.node_arena.released.ranges().is_none()
    }

    /// This trie is its twin's equal from here on.
    fn restart_record(&mut self) {
        self.written.clear();
        self.short_written = false;
        self.node_arena.released.clear();
        self.leaf_arena.released.clear();
        self.mirror.restart_record();
        self.from_twin = true;
    }

    /// Recompiles every node marked by lazy updates, top-down, each once.
    pub(crate) fn flush(&mut self) {
        let mut slots = std::mem::take(&mut self.dirty_slots);
        for &s in &slots {
            if let Some(n) = node_of(self.direct[s as usize]) {
                self.flush_node(n, false);
            }
        }
        slots.clear();
        self.dirty_slots = slots;
        self.report_pending();
    }

    /// Reports the direct values lazy updates changed (invariant 4): a chunk of four entries
    /// without a node is laid out from them at once; otherwise each marked entry that holds a
    /// value is reported on its own (a node's entry was reported by its own flush).
    fn report_pending(&mut self) {
        let mut chunks = std::mem::take(&mut self.mirror_pending);
        for &ch in &chunks {
            let first = ch as usize * 4;
            let (word, shift) = (first / 64, first % 64);
            let marked = self.pending_bits[word] >> shift & 0xF;
            self.pending_bits[word] &= !(0xF << shift);
            if self.direct[first..first + 4]
                .iter()
                .all(|&d| node_of(d).is_none())
            {
                let qs = std::array::from_fn(|q| Quarter::Value(self.direct[first + q]));
                self.mirror.refill(first, qs);
                continue;
            }
            for q in (0..4).filter(|q| marked >> q & 1 != 0) {
                let d = self.direct[first + q];
                if node_of(d).is_none() {
                    self.mirror.direct_changed(first + q, Quarter::Value(d));
                }
            }
        }
        chunks.clear();
        self.mirror_pending = chunks;
    }

    fn flush_node(&mut self, n: u32, force: bool) {
        let ctl = &mut self.ctl[n as usize];
        let recompile = force || ctl.dirty;
        let below = ctl.below;
        ctl.dirty = false;
        ctl.below = false;
        if !recompile && !below {
            return;
        }
        let slots = if recompile {
            let slots = self.paint(n);
            self.write_leaves(n, &slots);
            Some(slots)
        } else {
            None
        };
        let node = self.nodes[n as usize];
        let mut vector = node.vector;
        let mut c = node.base1;
        while vector != 0 {
            let s = vector.trailing_zeros() as usize;
            match slots {
                Some(slots) if self.ctl[c as usize].default != slots[s] => {
                    self.ctl[c as usize].default = slots[s];
                    self.flush_node(c, true);
                }
                _ => self.flush_node(c, false),
            }
            c += 1;
            vector &= vector - 1;
        }
    }

    /// Lazy mode: records that direct entry `s`'s node has something to recompile.
    fn mark_slot(&mut self, s: usize) {
        let Some(n) = node_of(self.direct[s]) else {
            return;
        };
        let ctl = &self.ctl[n as usize];
        if !ctl.dirty && !ctl.below {
            self.dirty_slots.push(s as u32);
        }
    }

    /// Builds from a route list: records every route, then compiles each node once.
    pub(crate) fn from_routes(
        routes: impl IntoIterator<Item = (K, u8, u32)>,
    ) -> Result<Self, LpmError> {
        let mut t = Self::new();
        for (key, len, value) in routes {
            t.check(len, value)?;
            t.insert_mode(key, len, value, Mode::Defer)?;
        }
        t.compile_all();
        Ok(t)
    }

    fn insert_mode(
        &mut self,
        key: K,
        len: u8,
        value: u32,
        mode: Mode,
    ) -> Result<Option<u32>, LpmError> {
        let len32 = u32::from(len);
        let key = key.masked(len32);
        if len32 <= D {
            let old = self.short.insert((key, len), value);
            if old.is_none() {
                self.routes += 1;
            }
            if mode != Mode::Defer {
                let (start, count) = direct_range::<K, D>(key, len32);
                for s in start..start + count {
                    if self.dlen[s] <= len + 1 {
                        self.dlen[s] = len + 1;
                        self.set_direct_value(s, value, mode);
                    }
                }
            }
            return Ok(old);
        }
        // Create the path down to the node that holds the route.
        let s = key.top(D);
        let mut n = match node_of(self.direct[s]) {
            Some(n) => n,
            None => self.new_direct_node(s, mode),
        };
        if mode == Mode::Lazy {
            self.mark_slot(s);
        }
        let mut off = D;
        while len32 > off + STRIDE {
            let slot = key.chunk(off);
            if mode == Mode::Lazy {
                self.ctl[n as usize].below = true;
            }
            n = match self.nodes[n as usize].child(slot) {
                Some(c) => c,
                None => self.add_child(n, slot, mode),
            };
            off += STRIDE;
        }
        let code = route_code(key, off, len32);
        let old = self.ctl[n as usize].routes.set(code, value);
        if old.is_none() {
            self.routes += 1;
        }
        if old != Some(value) {
            match mode {
                Mode::Compile => self.recompute_route(n, code),
                Mode::Lazy => self.ctl[n as usize].dirty = true,
                Mode::Defer => {}
            }
        }
        Ok(old)
    }

    fn remove_mode(&mut self, key: K, len: u8, mode: Mode) -> Option<u32> {
        let len32 = u32::from(len);
        if len32 > K::BITS {
            return None;
        }
        let key = key.masked(len32);
        if len32 <= D {
            let old = self.short.remove(&(key, len))?;
            self.routes -= 1;
            // Every direct entry this route supplied falls back to the next shorter route.
            let (fallback_len, fallback) = (0..len)
                .rev()
                .find_map(|l| {
                    let k = key.masked(u32::from(l));
                    self.short.get(&(k, l)).map(|&v| (l + 1, v))
                })
                .unwrap_or((0, NONE));
            let (start, count) = direct_range::<K, D>(key, len32);
            for s in start..start + count {
                if self.dlen[s] == len + 1 {
                    self.dlen[s] = fallback_len;
                    self.set_direct_value(s, fallback, mode);
                }
            }
            return Some(old);
        }
        let s = key.top(D);
        let mut n = node_of(self.direct[s])?;
        // path[i] = (node, slot in that node leading to path[i + 1]).
        let mut path: Vec<(u32, usize)> = Vec::with_capacity(24);
        let mut off = D;
        while len32 > off + STRIDE {
            let slot = key.chunk(off);
            let c = self.nodes[n as usize].child(slot)?;
            path.push((n, slot));
            n = c;
            off += STRIDE;
        }
        let code = route_code(key, off, len32);
        let old = self.ctl[n as usize].routes.remove(code)?;
        self.routes -= 1;
        if mode == Mode::Lazy {
            self.mark_slot(s);
            for &(p, _) in &path {
                self.ctl[p as usize].below = true;
            }
            self.ctl[n as usize].dirty = true;
        } else {
            self.recompute_route(n, code);
        }
        // Prune nodes that no longer hold routes or children (invariant 1).
        loop {
            let empty = {
                let c = &self.ctl[n as usize];
                c.routes.is_empty() && self.nodes[n as usize].vector == 0
            };
            if !empty {
                break;
            }
            match path.pop() {
                Some((parent, slot)) => {
                    self.remove_child(parent, slot, mode);
                    n = parent;
                }
                None => {
                    let default = self.ctl[n as usize].default;
                    self.free_node_storage(n);
                    release(&mut self.node_arena, n, 1);
                    self.direct[s] = default;
                    self.value_changed(s, mode);
                    break;
                }
            }
        }
        Some(old)
    }

    /// Sets the value a direct entry resolves to, pushing it into the node there if any.
    fn set_direct_value(&mut self, s: usize, value: u32, mode: Mode) {
        let Some(n) = node_of(self.direct[s]) else {
            self.direct[s] = value;
            self.value_changed(s, mode);
            return;
        };
        if self.ctl[n as usize].default != value {
            if mode == Mode::Lazy {
                self.mark_slot(s);
                self.ctl[n as usize].dirty = true;
            }
            self.ctl[n as usize].default = value;
            if mode == Mode::Compile {
                self.recompute(n);
            }
        }
    }

    /// A fresh node (its own block) under direct entry `s`, resolving to the entry's value.
    fn new_direct_node(&mut self, s: usize, mode: Mode) -> u32 {
        let n = alloc(&mut self.nodes, &mut self.node_arena, 1, MAX_NODES);
        self.grow_ctl();
        self.nodes[n as usize] = Node::default();
        let default = self.direct[s];
        self.ctl[n as usize] = NodeCtl {
            default,
            slot: s as u32,
            ..NodeCtl::default()
        };
        self.direct[s] = NODE_FLAG | n;
        if mode == Mode::Compile {
            self.write_leaves(n, &[default; SLOTS]);
        }
        n
    }

    /// Adds a child at `slot` of `n` (moving `n`'s child block) and returns its index.
    fn add_child(&mut self, n: u32, slot: usize, mode: Mode) -> u32 {
        let node = self.nodes[n as usize];
        let count = node.vector.count_ones() as usize;
        let rank = (node.vector & ((1u64 << slot) - 1)).count_ones() as usize;
        let default = if mode == Mode::Compile {
            self.paint(n)[slot]
        } else {
            NONE
        };
        let at = alloc(&mut self.nodes, &mut self.node_arena, count + 1, MAX_NODES);
        self.grow_ctl();
        let (old, new) = (node.base1 as usize, at as usize);
        for i in 0..count {
            let dst = new + i + usize::from(i >= rank);
            self.nodes[dst] = self.nodes[old + i];
            self.ctl[dst] = std::mem::take(&mut self.ctl[old + i]);
        }
        if count > 0 {
            release(&mut self.node_arena, node.base1, count);
        }
        let c = (new + rank) as u32;
        self.nodes[c as usize] = Node::default();
        self.ctl[c as usize] = NodeCtl {
            default,
            ..NodeCtl::default()
        };
        let parent = &mut self.nodes[n as usize];
        parent.base1 = at;
        parent.vector |= 1u64 << slot;
        match mode {
            Mode::Compile => {
                self.write_leaves(c, &[default; SLOTS]);
                let slots = self.paint(n);
                self.write_leaves(n, &slots);
            }
            // The parent's slot is no longer a leaf; the child gets its default when the
            // parent is recompiled.
            Mode::Lazy => {
                self.ctl[n as usize].dirty = true;
                self.ctl[c as usize].dirty = true;
            }
            Mode::Defer => {}
        }
        c
    }

    /// Removes the (empty) child at `slot` of `n`; the slot becomes a leaf again.
    fn remove_child(&mut self, n: u32, slot: usize, mode: Mode) {
        let node = self.nodes[n as usize];
        let count = node.vector.count_ones() as usize;
        let rank = (node.vector & ((1u64 << slot) - 1)).count_ones() as usize;
        let old = node.base1 as usize;
        self.free_node_storage((old + rank) as u32);
        let at = if count > 1 {
            let at = alloc(&mut self.nodes, &mut self.node_arena, count - 1, MAX_NODES);
            self.grow_ctl();
            for i in (0..count).filter(|&i| i != rank) {
                let dst = at as usize + i - usize::from(i > rank);
                self.nodes[dst] = self.nodes[old + i];
                self.ctl[dst] = std::mem::take(&mut self.ctl[old + i]);
            }
            at
        } else {
            0
        };
        release(&mut self.node_arena, node.base1, count);
        let parent = &mut self.nodes[n as usize];
        parent.base1 = at;
        parent.vector &= !(1u64 << slot);
        if mode == Mode::Lazy {
            self.ctl[n as usize].dirty = true;
        } else {
            let slots = self.paint(n);
            self.write_leaves(n, &slots);
        }
    }

    /// Gives every node its control state (`ctl` follows `nodes`, with the same growth).
    fn grow_ctl(&mut self) {
        if self.nodes.len() > self.ctl.capacity() {
            self.ctl
                .reserve_exact(self.nodes.capacity() - self.ctl.len());
        }
        self.ctl.resize(self.nodes.len(), NodeCtl::default());
    }

    /// Frees a node's leaves and control state (not its slot in the node arena).
    fn free_node_storage(&mut self, n: u32) {
        let node = self.nodes[n as usize];
        let count = node.leafvec.count_ones() as usize;
        self.leaf_total -= count;
        if !self.ctl[n as usize].mirrored {
            release(&mut self.leaf_arena, node.base0, count);
        }
        self.nodes[n as usize] = Node::default();
        self.ctl[n as usize] = NodeCtl::default();
    }

    /// The value of each of `n`'s slots: its routes painted shortest first over its default.
    fn paint(&self, n: u32) -> [u32; SLOTS] {
        let ctl = &self.ctl[n as usize];
        let mut slots = [ctl.default; SLOTS];
        for (code, value) in ctl.routes.iter() {
            let l = 7 - code.leading_zeros(); // code < 128, so l = 1..=6
            let shift = STRIDE - l;
            let first = usize::from(code ^ (1 << l)) << shift;
            if shift == 0 {
                slots[first] = value;
            } else {
                slots[first..first + (1 << shift)].fill(value);
            }
        }
        slots
    }

    /// Compiles `n`'s leaves from its slot values into a leaf block, or for a childless node
    /// under the direct array into its direct entry (a value or a record), reallocating storage
    /// whose size changes.
    fn write_leaves(&mut self, n: u32, slots: &[u32; SLOTS]) {
        let node = self.nodes[n as usize];
        let leafvec = if node.vector == 0 {
            run_starts(slots, 0..SLOTS)
        } else {
            let mut leafvec = 0u64;
            let mut prev = None;
            for (s, &v) in slots.iter().enumerate() {
                if node.vector >> s & 1 == 0 && prev != Some(v) {
                    leafvec |= 1u64 << s;
                    prev = Some(v);
                }
            }
            leafvec
        };
        self.write_runs(n, slots, leafvec);
    }

    /// `write_leaves` for a known run bitmap `leafvec` of `slots`.
    fn write_runs(&mut self, n: u32, slots: &[u32; SLOTS], leafvec: u64) {
        let node = self.nodes[n as usize];
        debug_assert!(node.vector != 0 || leafvec == run_starts(slots, 0..SLOTS));
        let count = leafvec.count_ones() as usize;
        let old = node.leafvec.count_ones() as usize;
        self.leaf_total = self.leaf_total + count - old;
        let ctl = &self.ctl[n as usize];
        let (slot, was_mirrored) = (ctl.slot, ctl.mirrored);
        let mirrored = slot != NO_SLOT && node.vector == 0;
        let mut base0 = node.base0;
        if !was_mirrored && (mirrored || count != old) {
            release(&mut self.leaf_arena, node.base0, old);
        }
        if !mirrored {
            if (was_mirrored || count != old) && count > 0 {
                base0 = alloc(&mut self.leaves, &mut self.leaf_arena, count, MAX_LEAVES);
            }
            let mut starts = leafvec;
            for leaf in &mut self.leaves[base0 as usize..base0 as usize + count] {
                *leaf = slots[starts.trailing_zeros() as usize];
                starts &= starts - 1;
            }
        }
        self.ctl[n as usize].mirrored = mirrored;
        let node = &mut self.nodes[n as usize];
        node.leafvec = leafvec;
        node.base0 = base0;
        if slot != NO_SLOT {
            let quarter = Self::quarter(n, node, slots);
            self.mirror_changed(slot as usize, quarter);
        }
    }

    /// How the mirror lays out node `n` (under the direct array), compiled from `slots`.
    fn quarter<'a>(n: u32, node: &Node, slots: &'a [u32; SLOTS]) -> Quarter<'a> {
        if node.vector != 0 {
            Quarter::Node(n)
        } else if node.leafvec == 1 {
            Quarter::Value(slots[0])
        } else {
            Quarter::Runs(slots, node.leafvec)
        }
    }

    /// Direct entry `s`, which holds a value, changed: reported to the mirror now, or in lazy
    /// mode marked for `flush` (invariant 4).
    fn value_changed(&mut self, s: usize, mode: Mode) {
        if mode == Mode::Lazy {
            let (word, bit) = (s / 64, s % 64);
            if self.pending_bits[word] & 0xF << (bit & !3) == 0 {
                self.mirror_pending.push((s / 4) as u32);
            }
            self.pending_bits[word] |= 1 << bit;
        } else {
            self.mirror_changed(s, Quarter::Value(self.direct[s]));
        }
    }

    /// Tells the mirror that direct entry `s` now resolves as `q`.
    #[inline(always)]
    fn mirror_changed(&mut self, s: usize, q: Quarter<'_>) {
        if !self.mirror_quiet {
            self.mirror.direct_changed(s, q);
        }
    }

    /// Restores invariant 2 for `n` after the route with in-node `code` was added, changed or
    /// removed. A childless node with many routes is patched from its compiled leaves over the
    /// route's slots only, instead of repainting every route (which made loading a dense node
    /// quadratic in its routes).
    fn recompute_route(&mut self, n: u32, code: u8) {
        let node = self.nodes[n as usize];
        if node.vector != 0 || self.ctl[n as usize].routes.len() < PATCH_MIN_ROUTES {
            return self.recompute(n);
        }
        let mut slots = self.expand(n);
        let ctl = &self.ctl[n as usize];
        let routes = &ctl.routes;
        let l = 7 - code.leading_zeros();
        let bits = u32::from(code) ^ (1 << l);
        let first = (bits << (STRIDE - l)) as usize;
        // The longest route covering all of the range (the route itself, if present).
        let base = (1..=l)
            .rev()
            .find_map(|l2| routes.get(((1 << l2) | bits >> (l - l2)) as u8))
            .unwrap_or(ctl.default);
        slots[first..first + (1 << (STRIDE - l))].fill(base);
        // Longer routes inside the range, shortest first (codes of one length are contiguous).
        for l2 in l + 1..=STRIDE {
            let lo = (1u32 << l2) | bits << (l2 - l);
            let hi = lo + (1 << (l2 - l));
            for (c2, v) in routes.range(lo, hi) {
                let at = usize::from(c2 ^ (1 << l2)) << (STRIDE - l2);
                slots[at..at + (1 << (STRIDE - l2))].fill(v);
            }
        }
        // Only run starts inside the range and right after it can change.
        let last = (first + (1 << (STRIDE - l))).min(SLOTS - 1);
        let changed = (u64::MAX >> (63 - last)) & !((1u64 << first) - 1);
        let leafvec =
            (self.nodes[n as usize].leafvec & !changed) | run_starts(&slots, first..last + 1);
        self.write_runs(n, &slots, leafvec);
    }

    /// The slot values of a childless node, read back from its compiled leaves (in the mirror
    /// for a node under the direct array).
    fn expand(&self, n: u32) -> [u32; SLOTS] {
        let node = self.nodes[n as usize];
        let ctl = &self.ctl[n as usize];
        if ctl.mirrored {
            return self.mirror.slots(ctl.slot as usize);
        }
        let mut slots = [0u32; SLOTS];
        let mut starts = node.leafvec;
        let mut leaf = node.base0 as usize;
        while starts != 0 {
            let from = starts.trailing_zeros() as usize;
            starts &= starts - 1;
            let to = if starts == 0 {
                SLOTS
            } else {
                starts.trailing_zeros() as usize
            };
            slots[from..to].fill(self.leaves[leaf]);
            leaf += 1;
        }
        slots
    }

    /// Restores invariant 2 for `n` and, recursively, for the children whose default changed.
    fn recompute(&mut self, n: u32) {
        let slots = self.paint(n);
        self.write_leaves(n, &slots);
        let node = self.nodes[n as usize];
        let mut vector = node.vector;
        let mut c = node.base1;
        while vector != 0 {
            let s = vector.trailing_zeros() as usize;
            if self.ctl[c as usize].default != slots[s] {
                self.ctl[c as usize].default = slots[s];
                self.recompute(c);
            }
            c += 1;
            vector &= vector - 1;
        }
    }

    /// Finishes a deferred build: direct values from the short routes, then every node once,
    /// then each chunk of four direct entries into the mirror at once (rather than the mirror
    /// told of every entry as it compiles).
    fn compile_all(&mut self) {
        self.mirror_quiet = true;
        let mut shorts: Vec<(K, u8, u32)> =
            self.short.iter().map(|(&(k, l), &v)| (k, l, v)).collect();
        shorts.sort_unstable_by_key(|&(k, l, _)| (l, k));
        let mut values = vec![NONE; 1 << D];
        for (key, len, value) in shorts {
            let (start, count) = direct_range::<K, D>(key, u32::from(len));
            values[start..start + count].fill(value);
            self.dlen[start..start + count].fill(len + 1);
        }
        let mut slots = [[0u32; SLOTS]; 4];
        for first in (0..1usize << D).step_by(4) {
            let mut any = false;
            for (q, slots) in slots.iter_mut().enumerate() {
                let s = first + q;
                match node_of(self.direct[s]) {
                    None => self.direct[s] = values[s],
                    Some(n) => {
                        self.ctl[n as usize].default = values[s];
                        *slots = self.compile_subtree(n);
                    }
                }
                any |= self.direct[s] != NONE;
            }
            if any {
                let quarters: [Quarter<'_>; 4] =
                    std::array::from_fn(|q| match node_of(self.direct[first + q]) {
                        None => Quarter::Value(self.direct[first + q]),
                        Some(n) => Self::quarter(n, &self.nodes[n as usize], &slots[q]),
                    });
                self.mirror.refill(first, quarters);
            }
        }
        self.mirror_quiet = false;
        // The arrays grew while routes were recorded; a bulk-built table starts with exact ones.
        self.nodes.shrink_to_fit();
        self.ctl.shrink_to_fit();
        self.leaves.shrink_to_fit();
    }

    /// Compiles `n` and its subtree; returns `n`'s slot values.
    fn compile_subtree(&mut self, n: u32) -> [u32; SLOTS] {
        // Route lists grew while recorded; a bulk-built table keeps them exact.
        self.ctl[n as usize].routes.values.shrink_to_fit();
        let slots = self.paint(n);
        self.write_leaves(n, &slots);
        let node = self.nodes[n as usize];
        let mut vector = node.vector;
        let mut c = node.base1;
        while vector != 0 {
            let s = vector.trailing_zeros() as usize;
            self.ctl[c as usize].default = slots[s];
            self.compile_subtree(c);
            c += 1;
            vector &= vector - 1;
        }
        slots
    }
}

/// The run-start bits of a childless node's `slots` within `range`: slot 0 starts a run, and
/// so does every slot whose value differs from the slot before it.
fn run_starts(slots: &[u32; SLOTS], range: std::ops::Range<usize>) -> u64 {
    range.fold(0, |m, s| {
        m | u64::from(s == 0 || slots[s] != slots[s.saturating_sub(1)]) << s
    })
}

/// In-node code of a route of `len` bits whose node starts at bit `off`: 1 << l | top l bits.
fn route_code<K: Key>(key: K, off: u32, len: u32) -> u8 {
    let l = len - off;
    ((1usize << l) | key.chunk(off) >> (STRIDE - l)) as u8
}

/// The direct entries covered by a route of `len <= D` bits: (first, count).
fn direct_range<K: Key, const D: u32>(key: K, len: u32) -> (usize, usize) {
    let start = if D == 0 { 0 } else { key.top(D) };
    (start, 1usize << (D - len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// `Routes` against a sorted map of codes to values.
        #[test]
        fn routes_match_a_sorted_map(ops in prop::collection::vec((2u8..128, any::<bool>(), 0u32..9), 1..300)) {
            let mut r = Routes::default();
            let mut model = BTreeMap::new();
            for (code, insert, value) in ops {
                if insert {
                    prop_assert_eq!(r.set(code, value), model.insert(code, value));
                } else {
                    prop_assert_eq!(r.remove(code), model.remove(&code));
                }
                prop_assert_eq!(r.get(code), model.get(&code).copied());
                prop_assert_eq!(r.len(), model.len());
                let all: Vec<(u8, u32)> = model.iter().map(|(&c, &v)| (c, v)).collect();
                prop_assert_eq!(r.iter().collect::<Vec<_>>(), all.clone());
                let (lo, hi) = (u32::from(code) & !7, (u32::from(code) | 7) + 1);
                let want: Vec<(u8, u32)> =
                    all.into_iter().filter(|&(c, _)| (lo..hi).contains(&u32::from(c))).collect();
                prop_assert_eq!(r.range(lo, hi).collect::<Vec<_>>(), want);
            }
        }
    }
}
