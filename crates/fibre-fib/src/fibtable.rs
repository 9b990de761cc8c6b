//! One routing table of one family: prefixes to their route entries, with longest-prefix
//! match, plus a compiled longest-prefix-match structure (`fibre-lpm`) for the common flow.
//!
//! Invariants:
//! - Keys are masked: no host bits are set beyond `len` (IPv4 keys live in the low 32 bits).
//! - A key is present only while its entry list is non-empty; `len_count[l]` is the number of
//!   keys of length `l`, and `lens` lists the lengths with a non-zero count, longest first.
//! - The order of a key's entries is the kernel's order for that key (the callers in
//!   `route4`/`route6` keep it); this module never reorders them.
//! - The map is ordered as the IPv4 dump is (address ascending, longer prefix first), so a
//!   sorted bulk load appends near the previous key and the IPv4 dump is a plain walk.
//! - Every mutation goes through `entries_mut`, `modify_at` or `retain_entries_at`, which
//!   record the keys they change as dirty (and log them for the users index, `keys_using`);
//!   `Fib` recomputes the dirty keys' compiled winners (`commit`) before it returns; `update`
//!   changes one key and recomputes its winner in one probe.
//! - The map's chunks and slots and the winners record the lowest place written since
//!   [`Table::settle`] (`SortedMap`, `Segments`), which the owner calls when this table equals
//!   its twin in the other copy of a pair; [`Table::copy_changes_from`] then makes the twin
//!   equal again by copying from there on. Every write to them goes through `IndexMut`,
//!   `push` or the map's insert and remove, which record it.
//! - Changes to the compiled structure itself are queued (`Compiled::pending`) and applied
//!   together by `flush_compiled`, which recompiles each trie node they touch once: a batch of
//!   a thousand sorted routes costs a few node compilations, not a thousand. While anything is
//!   queued or dirty, `is_clean` is false and lookups walk the map instead, so answers never
//!   depend on when the flush happens.
//!
//! Interface: [`Table::lpm`] walks the matching keys longest first (one ordered-map probe per
//! populated length), so callers can apply the kernel's "skip this entry and fall back to a
//! shorter prefix" rules for any flow. [`Table::fast_lookup`] answers in one compiled lookup for
//! the flow the data plane sends (no tos-specific entries in play, no oif, universe scope): it
//! returns the key and entry the kernel's walk would stop at, as precomputed by `Fib`.

pub(crate) mod leaf6;
mod segments;
mod sorted;

use smallvec::SmallVec;

use segments::Segments;
use sorted::SortedMap;

use crate::hash::InternalMap;
use crate::ids::{InfoId, TableId};
use crate::prefix::Key;
use crate::route::Entry;
use leaf6::KeyEvent;

/// The entries of one key: almost always one, kept inline (no allocation per prefix).
pub(crate) type Entries = SmallVec<[Entry; 1]>;

/// The compiled structure: sorted intervals while the table is small, the large structures
/// of its family above [`COMPILE_LARGE_AT`] keys (boxed: tables sit in a map by id, and a
/// small table should not carry their kilobyte of inline fields).
#[derive(Debug)]
enum Fast {
    Small(fibre_lpm::small::SmallLpm),
    V4(Box<fibre_lpm::v4::Lpm4>),
    V6(Box<fibre_lpm::v6::Lpm6>),
}

/// Keys above which a table compiles into its family's large structure. The large structures
/// cost 1.5 MiB (IPv4) and 0.8 MiB (IPv6) before their first prefix, the kernel a few hundred
/// bytes per table; below this size the interval array ([`fibre_lpm::small`], 24 bytes per
/// interval, rebuilt on each flush) answers with at most 12 comparisons over 48 KiB, so tables
/// cost memory in proportion to what they hold, at a quarter to three quarters of the large
/// structures' lookup rate (fibre-lpm's `RESULTS-small.md`).
const COMPILE_LARGE_AT: usize = 1024;
/// Keys below which a large table goes back to intervals and frees its structure: a quarter of
/// the way up, so that a table hovering around the threshold does not rebuild on every change.
const COMPILE_SMALL_BELOW: usize = COMPILE_LARGE_AT / 4;

/// One key's entries and its slot in the compiled structure.
#[derive(Debug)]
pub(crate) struct Slot {
    pub entries: Entries,
    /// Index into `winners`, or `NO_SLOT` when the key is not compiled.
    fast: u32,
    /// Entries here the compiled answer cannot stand for (see `special_entries`).
    special: u32,
}

/// By hand: entries are `Copy`, and a slice copy is a few instructions where the derived
/// clone extends the list an entry at a time (a table copy clones a slot per route).
impl Clone for Slot {
    fn clone(&self) -> Slot {
        Slot {
            entries: Entries::from_slice(&self.entries),
            fast: self.fast,
            special: self.special,
        }
    }
}

const NO_SLOT: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct Table {
    pub id: TableId,
    /// Creation sequence number: the kernel lists tables of one hash bucket newest first.
    pub seq: u64,
    /// Address width: 32 or 128.
    pub bits: u8,
    map: SortedMap<Slot>,
    len_count: [u32; 129],
    lens: Vec<u8>,
    compiled: Compiled,
    dirty: Vec<Key>,
    /// IPv6: the kernel's radix-tree leaves where lookups can see them (`leaf6`).
    pub leaves: leaf6::Leaves,
    /// Which keys use each route info, for link events (`keys_using`); None until the first
    /// one asks, so that a table no event touches pays nothing for it.
    users: Option<Box<Users>>,
}

/// The index from route infos to the keys whose entries use them. Kept loosely: a key
/// changed after the index was built is logged and its entries indexed at the next query; a
/// key that stopped using an info stays listed under it (its users check the entries) until
/// the stale keys outnumber the table and the index is rebuilt. So the index costs nothing per
/// change but a logged key, and a query costs in proportion to the keys it answers and the
/// changes since the last one.
#[derive(Debug, Default)]
struct Users {
    by_info: InternalMap<InfoId, Vec<Key>>,
    /// Keys changed since the last query.
    log: Vec<Key>,
    /// Keys listed in `by_info`, stale ones included.
    listed: usize,
}

/// Listed keys, relative to the table's size, past which the users index is rebuilt rather
/// than carried with its stale keys: twice the table plus a small table's worth.
fn users_rebuild_at(keys: usize) -> usize {
    2 * keys + 1024
}

/// The compiled side of a table.
#[derive(Debug)]
struct Compiled {
    fast: Fast,
    /// What each compiled value stands for: the key and the entry a plain flow stops at.
    winners: Winners,
    free_winners: Vec<u32>,
    /// Entries the compiled answers skip: IPv4 entries with a tos (a flow with a tos must
    /// take the slow walk while there are any), IPv6 entries with a source prefix (every flow
    /// must, while there are any).
    special_entries: u32,
    /// Updates of `fast` not applied yet, in order: a key and its new value, or `None` to
    /// remove it.
    pending: Vec<(Key, Option<u32>)>,
}

/// What a compiled value stands for: the key and the entry a plain flow stops at, and whether
/// that entry is the key's only one (then no flow preference among the key's entries, such as
/// IPv6's preference for routes through the flow's oif, can choose another).
///
/// One cache line each, aligned to one: a lookup's answer costs one line to read (and one to
/// prefetch), never two.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub(crate) struct Winner {
    pub key: Key,
    pub entry: Entry,
    pub alone: bool,
}

/// The most addresses [`Table::fast_values`] takes at once.
pub(crate) const FAST_BATCH: usize = 64;

/// The compiled values' meanings, indexed by value, in [`Segments`] (64 KiB of winners each):
/// growing to a full table's million winners never copies the ones already there.
#[derive(Debug, Default)]
struct Winners {
    segments: Segments<Winner>,
    /// Each winner in brief (see [`Brief`]), by the same index: what the data plane's batch
    /// reads per packet, sixteen winners to a cache line.
    brief: Vec<u32>,
}

/// A winner in four bytes: its entry's route info and whether the entry is its key's only
/// one (bit 31). [`Brief::NONE`] for no winner, and for an info slot too large to encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Brief(u32);

impl Brief {
    const ALONE: u32 = 1 << 31;
    pub const NONE: Brief = Brief(u32::MAX);

    fn of(w: &Winner) -> Brief {
        match w.entry.info.raw() {
            i if i < Self::ALONE - 1 => Brief(i | if w.alone { Self::ALONE } else { 0 }),
            _ => Brief::NONE,
        }
    }

    /// The winner's route info; `None` for [`Brief::NONE`].
    #[inline]
    pub fn info(self) -> Option<InfoId> {
        (self != Brief::NONE).then(|| InfoId::new((self.0 & !Self::ALONE) as usize))
    }

    /// Whether the winner is its key's only entry.
    #[inline]
    pub fn alone(self) -> bool {
        self.0 & Self::ALONE != 0
    }
}

impl Winners {
    #[inline]
    fn get(&self, i: u32) -> Option<Winner> {
        self.segments.get(i).copied()
    }

    /// Replaces the winner `i`, which must have been pushed.
    fn set(&mut self, i: u32, w: Winner) {
        self.brief[i as usize] = Brief::of(&w).0;
        self.segments[i] = w;
    }

    /// Appends `w`; returns its index.
    fn push(&mut self, w: Winner) -> u32 {
        self.brief.push(Brief::of(&w).0);
        self.segments.push(w)
    }

    /// Makes these winners equal to `src`'s (see [`Segments::copy_changes_from`]): `brief`
    /// is written wherever `segments` is, so the same range of it is copied.
    fn copy_changes_from(&mut self, src: &Winners) {
        let from = src.segments.changed_from().min(self.brief.len());
        self.brief.truncate(from);
        self.brief.extend_from_slice(&src.brief[from..]);
        self.segments.copy_changes_from(&src.segments);
    }
}

impl Compiled {
    /// Records what `key` (whose slot is `slot`) compiles to.
    fn apply(&mut self, key: Key, slot: &mut Slot, w: Option<Entry>, special: u32) {
        self.special_entries = self.special_entries - slot.special + special;
        slot.special = special;
        let alone = slot.entries.len() == 1;
        match (w.map(|entry| Winner { key, entry, alone }), slot.fast) {
            (None, NO_SLOT) => {}
            (None, i) => {
                slot.fast = NO_SLOT;
                self.drop(&key, i);
            }
            (Some(w), NO_SLOT) => {
                let i = match self.free_winners.pop() {
                    Some(i) => {
                        self.winners.set(i, w);
                        i
                    }
                    None => self.winners.push(w),
                };
                slot.fast = i;
                self.pending.push((key, Some(i)));
            }
            (Some(w), i) => self.winners.set(i, w),
        }
    }

    fn drop(&mut self, key: &Key, i: u32) {
        if i == NO_SLOT {
            return;
        }
        self.pending.push((*key, None));
        self.free_winners.push(i);
    }

    /// Applies the queued updates to the compiled structure as one batch, changing between
    /// the interval array and the large structure where the table's size (`map`, of `bits`-bit
    /// keys) crossed [`COMPILE_LARGE_AT`] or [`COMPILE_SMALL_BELOW`]. A winner slot freed and
    /// reused within the queue is harmless: the queue is applied in order, and no lookup reads
    /// `fast` while it is non-empty.
    fn flush(&mut self, bits: u8, map: &SortedMap<Slot>) {
        if self.pending.is_empty() {
            return;
        }
        let small = matches!(self.fast, Fast::Small(_));
        if small && map.len() > COMPILE_LARGE_AT {
            self.fast = match bits {
                32 => Fast::V4(Default::default()),
                _ => Fast::V6(Default::default()),
            };
            self.pending.clear();
            self.pending
                .extend(compiled_keys(map).map(|(k, i)| (k, Some(i))));
        } else if small || map.len() < COMPILE_SMALL_BELOW {
            self.pending.clear();
            self.fast = Fast::Small(intervals(bits, map));
            return;
        }
        match &mut self.fast {
            Fast::Small(_) => unreachable!("interval arrays are rebuilt above"),
            Fast::V4(l) => {
                let mut b = l.batch();
                for (k, v) in self.pending.drain(..) {
                    match v {
                        // One value per prefix: far below fibre-lpm's MAX_VALUE.
                        Some(i) => drop(b.insert(k.addr as u32, k.len, i)),
                        None => drop(b.remove(k.addr as u32, k.len)),
                    }
                }
            }
            Fast::V6(l) => {
                let mut b = l.batch();
                for (k, v) in self.pending.drain(..) {
                    match v {
                        Some(i) => drop(b.insert(k.addr, k.len, i)),
                        None => drop(b.remove(k.addr, k.len)),
                    }
                }
            }
        }
    }

    /// `flush`, for the copy of a pair that applies a batch second (`src` is the same table
    /// in the copy that applied it first and has flushed since): an IPv4 large structure
    /// that stays large copies what `src`'s wrote instead of applying the queue again, and
    /// one that becomes large copies all of `src`'s. The result is the same bytes as
    /// applying the queue: the structure is deterministic (fibre-lpm's `written`). Every
    /// other case applies the queue.
    fn flush_from(&mut self, bits: u8, map: &SortedMap<Slot>, src: &Compiled) {
        let Fast::V4(from) = &src.fast else {
            return self.flush(bits, map);
        };
        if self.pending.is_empty() {
            return;
        }
        match &mut self.fast {
            Fast::Small(_) if map.len() > COMPILE_LARGE_AT => {
                self.fast = Fast::V4(Box::new(from.twin()));
            }
            Fast::V4(l) if map.len() >= COMPILE_SMALL_BELOW => l.copy_from_twin(from),
            _ => return self.flush(bits, map),
        }
        self.pending.clear();
    }

    /// Makes this compiled side equal to `src`'s, given that both were equal when `src`
    /// last settled and that `src` has flushed since (IPv4 tables only: a large structure is
    /// copied as [`Compiled::flush_from`] copies it, an interval array cloned). `map` is this
    /// table's map, already equal to `src`'s.
    fn copy_changes_from(&mut self, bits: u8, map: &SortedMap<Slot>, src: &Compiled) {
        self.winners.copy_changes_from(&src.winners);
        self.free_winners.clone_from(&src.free_winners);
        self.special_entries = src.special_entries;
        self.pending.clear();
        match (&src.fast, &mut self.fast) {
            (Fast::V4(from), Fast::V4(l)) => l.copy_from_twin(from),
            (Fast::V4(from), _) => self.fast = Fast::V4(Box::new(from.twin())),
            (Fast::Small(from), _) => self.fast = Fast::Small(from.clone()),
            // Not reached: only IPv4 tables copy their changes (`Table::copies_changes`).
            (Fast::V6(_), _) => self.fast = Fast::Small(intervals(bits, map)),
        }
    }

    /// What [`Compiled::copy_changes_from`] would copy from this side, in elements.
    fn changed(&self) -> usize {
        self.winners.segments.changed() + self.free_winners.len()
    }
}

/// Every compiled key of `map` and its compiled value, in key order.
fn compiled_keys(map: &SortedMap<Slot>) -> impl Iterator<Item = (Key, u32)> + '_ {
    map.iter()
        .filter(|(_, s)| s.fast != NO_SLOT)
        .map(|(k, s)| (*k, s.fast))
}

/// The interval array of `map`'s compiled keys (`bits`-bit keys).
fn intervals(bits: u8, map: &SortedMap<Slot>) -> fibre_lpm::small::SmallLpm {
    let build = fibre_lpm::small::SmallLpm::build(
        bits,
        compiled_keys(map).map(|(k, i)| (k.addr, k.len, i)),
    );
    // Keys are masked and no longer than the table's width, so the build cannot fail.
    build.unwrap_or_default()
}

impl Table {
    pub fn new(id: TableId, bits: u8, seq: u64) -> Box<Table> {
        let fast = Fast::Small(Default::default());
        Box::new(Table {
            id,
            seq,
            bits,
            map: SortedMap::default(),
            len_count: [0; 129],
            lens: Vec::new(),
            compiled: Compiled {
                fast,
                winners: Winners::default(),
                free_winners: Vec::new(),
                special_entries: 0,
                pending: Vec::new(),
            },
            dirty: Vec::new(),
            leaves: Default::default(),
            users: None,
        })
    }

    pub fn contains(&self, key: &Key) -> bool {
        self.map.contains_key(key)
    }

    pub fn get(&self, key: &Key) -> Option<&Entries> {
        self.map.get(key).map(|s| &s.entries)
    }

    /// The entry list of `key`, created empty if absent. The caller must leave it non-empty
    /// or call [`Table::prune`].
    pub fn entries_mut(&mut self, key: Key) -> &mut Entries {
        let lc = &mut self.len_count;
        let lens = &mut self.lens;
        self.dirty.push(key);
        if let Some(u) = &mut self.users {
            u.log.push(key);
        }
        let leaves = &mut self.leaves;
        leaves.note(key, KeyEvent::Changed);
        let slot = self.map.get_or_insert_with(key, || {
            leaves.note(key, KeyEvent::Inserted);
            let l = key.len as usize;
            lc[l] += 1;
            if lc[l] == 1 {
                let pos = lens.iter().position(|&x| x < key.len).unwrap_or(lens.len());
                lens.insert(pos, key.len);
            }
            Slot {
                entries: Entries::new(),
                fast: NO_SLOT,
                special: 0,
            }
        });
        &mut slot.entries
    }

    /// Removes `key` if its entry list became empty.
    pub fn prune(&mut self, key: &Key) {
        if self.map.get(key).is_some_and(|s| s.entries.is_empty()) {
            if let Some(s) = self.map.remove(key) {
                self.compiled.special_entries -= s.special;
                self.compiled.drop(key, s.fast);
            }
            self.leaves.note(*key, KeyEvent::Removed);
            let l = key.len as usize;
            self.len_count[l] -= 1;
            if self.len_count[l] == 0 {
                self.lens.retain(|&x| x != key.len);
            }
        }
    }

    /// Whether the kernel's IPv6 radix tree (fib6_node) of this table has a node at `key`: the
    /// root, a key with routes, or a branch point, i.e. a prefix that keys with routes extend
    /// on both sides of its next bit (the tree is path-compressed: insertion splits a node
    /// only where two keys diverge, and deletion removes routeless nodes with fewer than two
    /// children). Replacing a missing route fails with an extack text only when no node exists.
    pub fn has_radix_node(&self, key: &Key) -> bool {
        if key.len == 0 || self.map.contains_key(key) {
            return true;
        }
        if key.len >= self.bits {
            return false;
        }
        let bit = 1u128 << (self.bits - 1 - key.len);
        let lower_end = key.addr | (bit - 1);
        // Keys at `key.addr` itself come longest first; those no longer than `key` do not
        // extend it.
        let lower = self
            .map
            .range_from(Key {
                addr: key.addr,
                len: u8::MAX,
            })
            .find(|(k, _)| k.addr != key.addr || k.len > key.len)
            .is_some_and(|(k, _)| k.addr <= lower_end);
        // Every key in the upper half has the bit set and so is longer than `key`.
        let upper = key.addr | bit;
        lower
            && self
                .map
                .range_from(Key {
                    addr: upper,
                    len: u8::MAX,
                })
                .next()
                .is_some_and(|(k, _)| k.addr <= key.last(self.bits))
    }

    /// Keys matching `addr`, longest first, with their entries.
    #[inline]
    pub fn lpm(&self, addr: u128) -> impl Iterator<Item = (Key, &Entries)> + '_ {
        let bits = self.bits;
        self.lens.iter().filter_map(move |&len| {
            let k = Key::new(addr, len, bits);
            self.map.get(&k).map(|s| (k, &s.entries))
        })
    }

    /// The prefix lengths that have keys, longest first.
    pub fn lengths(&self) -> &[u8] {
        &self.lens
    }

    /// How many keys of length `len` the table has.
    pub fn key_count(&self, len: u8) -> u32 {
        self.len_count[len as usize]
    }

    /// Every key and its entries, in map order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Entries)> {
        self.map.iter().map(|(k, s)| (k, &s.entries))
    }

    /// Keys from `start` on (in map order) and their entries.
    pub fn range_from(&self, start: Key) -> impl Iterator<Item = (&Key, &Entries)> {
        self.map.range_from(start).map(|(k, s)| (k, &s.entries))
    }

    /// Entries the compiled answers skip (see `Compiled::special_entries`).
    #[inline]
    pub fn special_entries(&self) -> u32 {
        self.compiled.special_entries
    }

    /// Whether the compiled structure reflects every entry (no change since the last commit).
    #[inline]
    pub fn is_clean(&self) -> bool {
        self.dirty.is_empty() && self.compiled.pending.is_empty()
    }

    /// Whether keys wait for [`Table::commit`] (or leaves for `leaf6::sync`): false when every
    /// change went through [`Table::update`], which recompiles its key at once and leaves
    /// only compiled-structure updates queued.
    #[inline]
    pub fn has_uncommitted(&self) -> bool {
        !self.dirty.is_empty() || self.leaves.has_changes()
    }

    /// Applies the compiled structure's queued updates (see the module documentation).
    pub fn flush_compiled(&mut self) {
        self.compiled.flush(self.bits, &self.map);
    }

    /// [`Self::flush_compiled`] for the second copy of a pair: `src` is this table in the
    /// copy that applied the same changes first and has flushed them (see `Compiled::flush_from`).
    pub fn flush_compiled_from(&mut self, src: &Table) {
        self.compiled
            .flush_from(self.bits, &self.map, &src.compiled);
    }

    /// Records that nothing changed since now, for [`Table::copy_changes_from`]: called on
    /// both copies of a pair when they are equal.
    pub fn settle(&mut self) {
        self.map.settle();
        self.compiled.winners.segments.settle();
    }

    /// Whether [`Table::copy_changes_from`] can make this table equal to its twin: an IPv4
    /// table with no users index or source-route leaves to keep (those record every change
    /// made to the table, which a copy of its arrays does not carry).
    pub fn copies_changes(&self) -> bool {
        self.bits == 32 && self.users.is_none() && !self.leaves.has_changes()
    }

    /// What [`Table::copy_changes_from`] copies from this table, in elements (keys, slots,
    /// winners, free-list entries).
    pub fn changed(&self) -> usize {
        self.map.changed() + self.compiled.changed()
    }

    /// Makes this table equal to `src`, its twin in the other copy of a pair, given that the
    /// two were equal when `src` last settled, that `src` has flushed its compiled structure
    /// since and that this table [`copies_changes`](Table::copies_changes): copies what
    /// `src` changed since, whatever changes this table made or did not make meanwhile.
    pub fn copy_changes_from(&mut self, src: &Table) {
        self.map.copy_changes_from(&src.map);
        self.len_count = src.len_count;
        self.lens.clone_from(&src.lens);
        self.compiled
            .copy_changes_from(self.bits, &self.map, &src.compiled);
    }

    /// The keys that may have an entry using one of `ids` (sorted), in key order, from the users
    /// index (built on the first call): every key that does, and maybe keys that did since the
    /// index was last rebuilt, which the callers' own look at the entries passes over.
    pub fn keys_using(&mut self, ids: &[InfoId]) -> Vec<Key> {
        let listed_max = users_rebuild_at(self.map.len());
        let u = match &mut self.users {
            Some(u) if u.listed <= listed_max => u,
            _ => {
                let u = Users {
                    log: self.map.keys().copied().collect(),
                    ..Users::default()
                };
                self.users.insert(Box::new(u))
            }
        };
        // In key order, once each: neighbouring keys share the map's chunks.
        let mut log = std::mem::take(&mut u.log);
        log.sort_unstable();
        log.dedup();
        for k in log {
            let Some(s) = self.map.get(&k) else { continue };
            for e in &s.entries {
                u.by_info.entry(e.info).or_default().push(k);
                u.listed += 1;
            }
        }
        let mut out = Vec::new();
        for id in ids {
            let Some(keys) = u.by_info.get_mut(id) else {
                continue;
            };
            let before = keys.len();
            keys.sort_unstable();
            keys.dedup();
            u.listed -= before - keys.len();
            out.extend_from_slice(keys);
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Marks for recompilation the keys with an entry using one of `ids` (sorted): those whose
    /// infos' state changed.
    pub fn mark_dirty_using(&mut self, ids: &[InfoId]) {
        let keys = self.keys_using(ids);
        self.dirty.extend(keys);
    }

    /// Changes the entries of each of `keys` in place with `change` (which must leave them
    /// non-empty) and marks the keys for recompilation.
    pub fn modify_at(&mut self, keys: &[Key], mut change: impl FnMut(&mut Entries)) {
        for k in keys {
            if let Some(s) = self.map.get_mut(k) {
                change(&mut s.entries);
            }
        }
        if let Some(u) = &mut self.users {
            u.log.extend_from_slice(keys);
        }
        self.dirty.extend_from_slice(keys);
    }

    /// Keeps the entries `keep` accepts among those of `keys`: only the keys that lost one are
    /// recompiled, and those left empty are removed.
    pub fn retain_entries_at(&mut self, keys: &[Key], mut keep: impl FnMut(&Entry) -> bool) {
        let mut changed = Vec::new();
        for k in keys {
            let Some(s) = self.map.get_mut(k) else {
                continue;
            };
            let before = s.entries.len();
            s.entries.retain(|e| keep(e));
            if s.entries.len() != before {
                changed.push(*k);
            }
        }
        for k in &changed {
            self.prune(k);
        }
        self.dirty.extend(changed);
    }

    /// Recompiles the changed keys: `winner` says, from a key's entries, which entry the
    /// compiled structure answers and how many entries it cannot stand for.
    pub fn commit(&mut self, mut winner: impl FnMut(&[Entry]) -> (Option<Entry>, u32)) {
        let mut d = std::mem::take(&mut self.dirty);
        if d.len() > 1 {
            d.sort_unstable();
            d.dedup();
        }
        for k in d.drain(..) {
            self.commit_key(k, &mut winner);
        }
        // Keep the buffer's capacity for the next change.
        self.dirty = d;
    }

    fn commit_key(&mut self, key: Key, winner: &mut impl FnMut(&[Entry]) -> (Option<Entry>, u32)) {
        let Some(slot) = self.map.get_mut(&key) else {
            return;
        };
        let (w, s) = winner(&slot.entries);
        self.compiled.apply(key, slot, w, s);
    }

    /// Changes `key`'s entries with `change` (the list is created empty for a new key and
    /// removed if left empty) and recomputes the key's winner at once: one map probe in all.
    pub fn update<R>(
        &mut self,
        key: Key,
        change: impl FnOnce(&mut Entries) -> R,
        winner: impl FnOnce(&[Entry]) -> (Option<Entry>, u32),
    ) -> R {
        let lc = &mut self.len_count;
        let lens = &mut self.lens;
        let slot = self.map.get_or_insert_with(key, || {
            let l = key.len as usize;
            lc[l] += 1;
            if lc[l] == 1 {
                let pos = lens.iter().position(|&x| x < key.len).unwrap_or(lens.len());
                lens.insert(pos, key.len);
            }
            Slot {
                entries: Entries::new(),
                fast: NO_SLOT,
                special: 0,
            }
        });
        let r = change(&mut slot.entries);
        if let Some(u) = &mut self.users {
            u.log.push(key);
        }
        if slot.entries.is_empty() {
            self.prune(&key);
        } else {
            let (w, s) = winner(&slot.entries);
            self.compiled.apply(key, slot, w, s);
        }
        r
    }

    /// Whether the table is compiled into its family's large structure (not intervals).
    #[cfg(test)]
    pub fn is_compiled_large(&self) -> bool {
        !matches!(self.compiled.fast, Fast::Small(_))
    }

    /// The compiled answer for `addr`: the key and entry a plain flow's walk stops at.
    #[inline]
    pub fn fast_lookup(&self, addr: u128) -> Option<(Key, Entry)> {
        let v = match &self.compiled.fast {
            Fast::Small(l) => l.lookup(addr),
            Fast::V4(l) => l.lookup(addr as u32),
            Fast::V6(l) => l.lookup(addr),
        }?;
        self.compiled.winners.get(v).map(|w| (w.key, w.entry))
    }

    /// [`Table::fast_lookup`] for a batch: the compiled value of each address of `addrs` into
    /// the same place of `out` ([`fibre_lpm::NO_ROUTE`] for none), the large structures'
    /// lookups overlapped (`addrs` and `out` of equal length, at most [`FAST_BATCH`]).
    pub fn fast_values(&self, addrs: &[u128], out: &mut [u32]) {
        match &self.compiled.fast {
            Fast::Small(l) => {
                for (a, o) in addrs.iter().zip(out.iter_mut()) {
                    *o = l.lookup(*a).unwrap_or(fibre_lpm::NO_ROUTE);
                }
            }
            Fast::V4(l) => {
                let mut a4 = [0u32; FAST_BATCH];
                let a4 = &mut a4[..addrs.len()];
                for (x, a) in a4.iter_mut().zip(addrs) {
                    *x = *a as u32;
                }
                l.lookup_batch(a4, out);
            }
            Fast::V6(l) => l.lookup_batch(addrs, out),
        }
    }

    /// Hints the CPU to fetch the brief winner of compiled value `v` (one of
    /// [`Table::fast_values`]' answers, [`fibre_lpm::NO_ROUTE`] included).
    #[inline]
    pub fn prefetch_brief(&self, v: u32) {
        if let Some(b) = self.compiled.winners.brief.get(v as usize) {
            fibre_lpm::prefetch(b);
        }
    }

    /// The brief winner of compiled value `v`; [`Brief::NONE`] for [`fibre_lpm::NO_ROUTE`].
    #[inline]
    pub fn brief(&self, v: u32) -> Brief {
        self.compiled
            .winners
            .brief
            .get(v as usize)
            .map_or(Brief::NONE, |&b| Brief(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(i: u32) -> Key {
        Key::new((0x0a00_0000 | i << 8) as u128, 24, 32)
    }

    /// The keys `keys_using` names that do use one of `ids`.
    fn using(t: &mut Table, ids: &[InfoId]) -> Vec<Key> {
        let keys = t.keys_using(ids);
        keys.into_iter()
            .filter(|k| {
                t.get(k)
                    .is_some_and(|es| es.iter().any(|e| ids.contains(&e.info)))
            })
            .collect()
    }

    #[test]
    fn users_index_follows_changes_made_after_it_was_built() {
        let (a, b) = (InfoId::new(1), InfoId::new(2));
        let mut t = Table::new(TableId::MAIN, 32, 1);
        for i in 0..10 {
            let id = if i % 2 == 0 { a } else { b };
            t.entries_mut(key(i)).push(Entry::new(0, id, None));
        }
        assert_eq!(
            using(&mut t, &[a]),
            (0..10).step_by(2).map(key).collect::<Vec<_>>()
        );
        // Key 0 moves to b, key 2 goes, key 10 comes with a.
        t.entries_mut(key(0))[0] = Entry::new(0, b, None);
        t.entries_mut(key(2)).clear();
        t.prune(&key(2));
        t.entries_mut(key(10)).push(Entry::new(0, a, None));
        assert_eq!(using(&mut t, &[a]), [4, 6, 8, 10].map(key));
        assert_eq!(using(&mut t, &[b]), [0, 1, 3, 5, 7, 9].map(key));
        assert_eq!(using(&mut t, &[a, b]).len(), 10);
        // Changes in place are logged as well.
        t.modify_at(&[key(4)], |es| es[0] = Entry::new(0, b, None));
        assert_eq!(using(&mut t, &[b]), [0, 1, 3, 4, 5, 7, 9].map(key));
        assert_eq!(using(&mut t, &[a]), [6, 8, 10].map(key));
    }

    /// An entry added to or removed from a key through [`Table::update`], the way route
    /// adds and deletes change a table (a key left empty is removed).
    #[derive(Debug, Clone)]
    enum Op {
        Add(u32, u8, usize),
        Remove(u32, u8),
    }

    fn apply(t: &mut Table, op: &Op) {
        let first = |es: &[Entry]| (es.first().copied(), 0);
        match *op {
            Op::Add(a, len, info) => {
                let e = Entry::new(0, InfoId::new(info), None);
                t.update(Key::new(a as u128, len, 32), |es| es.push(e), first);
            }
            Op::Remove(a, len) => {
                t.update(
                    Key::new(a as u128, len, 32),
                    |es| {
                        es.pop();
                    },
                    first,
                );
            }
        }
    }

    /// Everything of a table that a copy must reproduce, compiled answers included (the
    /// compiled structures' own records of their writes differ between copies, not their
    /// answers: fibre-lpm's twin tests compare their bytes).
    fn state(t: &Table, probes: &[u32]) -> String {
        let answers: Vec<_> = probes.iter().map(|a| t.fast_lookup(*a as u128)).collect();
        let c = &t.compiled;
        format!(
            "{:?} {:?} {:?} {:?} {:?} {} {} {:?}",
            t.map,
            t.len_count,
            t.lens,
            c.winners,
            c.free_winners,
            c.special_entries,
            t.is_compiled_large(),
            answers
        )
    }

    fn ops(n: usize) -> impl Strategy<Value = Vec<Op>> {
        // Addresses over a few thousand /24s (tables past the compiled switch and chunks that
        // split and merge), nested prefixes and a few route infos; runs in address order too,
        // as a table load comes.
        let op = prop_oneof![
            4 => (0u32..3000, prop::sample::select(vec![16u8, 24, 28]), 0usize..4)
                .prop_map(|(a, l, i)| Op::Add(0x0a00_0000 | a << 8, l, i)),
            2 => (0u32..3000, prop::sample::select(vec![16u8, 24, 28]))
                .prop_map(|(a, l)| Op::Remove(0x0a00_0000 | a << 8, l)),
        ];
        let run = |add: bool| {
            (0u32..3000, 1u32..400).prop_map(move |(a, n)| {
                let key = |a: u32| 0x0a00_0000 | a << 8;
                let op = |a| {
                    if add {
                        Op::Add(key(a), 24, 1)
                    } else {
                        Op::Remove(key(a), 24)
                    }
                };
                (a..a + n).map(op).collect()
            })
        };
        prop_oneof![proptest::collection::vec(op, 0..n), run(true), run(false)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// A table that copies its twin's changes (`copy_changes_from`) after making any
        /// first part of the same changes itself equals the twin: its map, slots, free
        /// lists, winners and compiled answers.
        #[test]
        fn copying_a_twins_changes_makes_an_equal_table(
            before in ops(3000),
            batch in ops(600),
            made in 0usize..600,
        ) {
            let (mut a, mut b) = (Table::new(TableId::MAIN, 32, 1), Table::new(TableId::MAIN, 32, 1));
            for op in &before {
                apply(&mut a, op);
                apply(&mut b, op);
            }
            a.flush_compiled();
            b.flush_compiled_from(&a);
            a.settle();
            b.settle();
            for op in &batch {
                apply(&mut a, op);
            }
            for op in &batch[..made % (batch.len() + 1)] {
                apply(&mut b, op);
            }
            a.flush_compiled();
            b.copy_changes_from(&a);
            a.settle();
            b.settle();
            let probe = |i: u32| 0x0a00_0000 | (i.wrapping_mul(2_654_435_761) % 3001) << 8 | (i % 256);
            let probes: Vec<u32> = (0..4000u32).map(probe).collect();
            prop_assert_eq!(state(&a, &probes), state(&b, &probes));
        }
    }

    /// A batch appended to a large sorted table records only what it appended: the copy
    /// costs in proportion to the batch, not to the table.
    #[test]
    fn an_appended_batch_records_what_it_appended() {
        let mut t = Table::new(TableId::MAIN, 32, 1);
        let add = |t: &mut Table, a: u32| apply(t, &Op::Add(0x0a00_0000 | a << 8, 24, 1));
        for a in 0..50_000 {
            add(&mut t, a);
        }
        t.flush_compiled();
        t.settle();
        assert_eq!(t.changed(), 0);
        for a in 50_000..50_100 {
            add(&mut t, a);
        }
        // The keys of the chunk the batch appended to (at most a chunk), and a slot and a
        // winner per route.
        assert!(t.changed() <= 100 * 3 + 256, "{}", t.changed());
    }
}
