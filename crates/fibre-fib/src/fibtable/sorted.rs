//! The ordered prefix map of a table: keys in [`Key`] order, stored as a list of sorted
//! chunks (a two-level B+-tree).
//!
//! Why not `BTreeMap`: a full table is a million keys loaded mostly in order (a sorted dump, a
//! BGP feed), and a `BTreeMap` descends from its root and compares 32-byte keys at every level
//! for each of them. Here a change first tries the chunk the previous change used (`hint`):
//! a sorted load finds its place with one comparison against the next chunk's first key and
//! one short search in a chunk whose keys sit in two or three cache lines, and appends. Any
//! other access is two binary searches (over the chunks' first keys, then in one chunk).
//! Ordered walks (dumps) are plain slice walks.
//!
//! Values live apart from the keys, in `slots`, and a chunk holds each key's slot number: a
//! key inserted in the middle of a chunk (a feed in no particular order, as zebra's over FPM)
//! moves 36 bytes per later key of its chunk instead of the key and its 48-byte value. A freed
//! slot is reused by the next insert.
//!
//! Invariants:
//! - Every chunk is non-empty and at most [`CHUNK_MAX`] keys long; its keys are strictly
//!   increasing, and every key of a chunk is below every key of the next.
//! - `chunks[c].slots[i]` is the slot of `chunks[c].keys[i]`: `slots` holds a value there,
//!   and no two keys share a slot; every other slot is `None` and listed once in `free`.
//! - `firsts[i]` is the first key of `chunks[i]`; `len` is the number of keys.
//! - `hint` is any chunk index (or 0 when there is none): a guess, checked before use.
//! - `chunks_changed_from` is at most the index of every chunk changed, made or removed
//!   since [`SortedMap::settle`] (chunks below it are as they were then), as the values'
//!   [`Segments`] record theirs: [`SortedMap::copy_changes_from`] copies only what is above.

use super::segments::Segments;
use super::Key;

/// Most keys per chunk. A change inside a chunk moves up to this many keys and slot numbers; the
/// chunk index holds one key per chunk, so a million keys make a few thousand chunks whose
/// first keys a binary search covers in a dozen steps.
const CHUNK_MAX: usize = 256;
/// A chunk at most this long after a removal is merged into its successor when the two fit
/// in one chunk, so deletions do not leave a long index of near-empty chunks.
const CHUNK_MERGE: usize = CHUNK_MAX / 4;

#[derive(Debug, Clone)]
struct Chunk {
    keys: Vec<Key>,
    slots: Vec<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct SortedMap<V> {
    chunks: Vec<Chunk>,
    firsts: Vec<Key>,
    values: Segments<Option<V>>,
    free: Vec<u32>,
    len: usize,
    hint: usize,
    chunks_changed_from: usize,
}

impl<V> Default for SortedMap<V> {
    fn default() -> Self {
        SortedMap {
            chunks: Vec::new(),
            firsts: Vec::new(),
            values: Segments::default(),
            free: Vec::new(),
            len: 0,
            hint: 0,
            chunks_changed_from: 0,
        }
    }
}

impl<V> SortedMap<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    /// The chunk that holds `key` if it is present, or where it goes: the last chunk whose
    /// first key is at most `key` (chunk 0 for a key below every key). None when empty.
    #[inline]
    fn chunk_for(&self, key: &Key) -> Option<usize> {
        if self.chunks.is_empty() {
            return None;
        }
        Some(self.firsts.partition_point(|f| f <= key).saturating_sub(1))
    }

    /// `chunk_for`, trying `hint` first.
    #[inline]
    fn chunk_for_hinted(&self, key: &Key) -> Option<usize> {
        let h = self.hint;
        if h < self.firsts.len()
            && (h == 0 || self.firsts[h] <= *key)
            && self.firsts.get(h + 1).is_none_or(|next| key < next)
        {
            return Some(h);
        }
        self.chunk_for(key)
    }

    #[inline]
    pub fn get(&self, key: &Key) -> Option<&V> {
        let c = &self.chunks[self.chunk_for(key)?];
        let i = c.keys.binary_search(key).ok()?;
        self.values[c.slots[i]].as_ref()
    }

    pub fn get_mut(&mut self, key: &Key) -> Option<&mut V> {
        let ci = self.chunk_for_hinted(key)?;
        let c = &self.chunks[ci];
        let i = c.keys.binary_search(key).ok()?;
        self.hint = ci;
        self.values[c.slots[i]].as_mut()
    }

    pub fn contains_key(&self, key: &Key) -> bool {
        self.get(key).is_some()
    }

    /// The value of `key`, inserted with `make` if absent.
    pub fn get_or_insert_with(&mut self, key: Key, make: impl FnOnce() -> V) -> &mut V {
        let Some(ci) = self.chunk_for_hinted(&key) else {
            self.chunks_changed_from = 0;
            let slot = self.new_slot();
            self.chunks.push(Chunk {
                keys: vec![key],
                slots: vec![slot],
            });
            self.firsts.push(key);
            self.len = 1;
            self.hint = 0;
            return self.values[slot].get_or_insert_with(make);
        };
        let (ci, slot) = match search(&self.chunks[ci].keys, &key) {
            Ok(i) => (ci, self.chunks[ci].slots[i]),
            Err(i) => {
                let slot = self.new_slot();
                (self.insert_at(ci, i, key, slot), slot)
            }
        };
        self.hint = ci;
        // Present already, or the empty slot just taken: filled here.
        self.values[slot].get_or_insert_with(make)
    }

    /// An empty slot for a new key: a freed one, else a new one.
    fn new_slot(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| self.values.push(None))
    }

    /// Inserts `key` (its value in slot `val`) at position `i` of chunk `ci`, splitting a
    /// full chunk; returns the chunk the key ended up in.
    fn insert_at(&mut self, ci: usize, i: usize, key: Key, val: u32) -> usize {
        self.len += 1;
        self.chunks_changed_from = self.chunks_changed_from.min(ci);
        let c = &mut self.chunks[ci];
        if c.keys.len() < CHUNK_MAX {
            c.keys.insert(i, key);
            c.slots.insert(i, val);
            if i == 0 {
                self.firsts[ci] = key;
            }
            return ci;
        }
        if i == c.keys.len() {
            // Appending to a full chunk (a sorted load): a new chunk, the full one stays full.
            self.chunks.insert(
                ci + 1,
                Chunk {
                    keys: with_first(key),
                    slots: with_first(val),
                },
            );
            self.firsts.insert(ci + 1, key);
            return ci + 1;
        }
        let half = c.keys.len() / 2;
        let mut tail = Chunk {
            keys: Vec::with_capacity(CHUNK_MAX),
            slots: Vec::with_capacity(CHUNK_MAX),
        };
        tail.keys.extend(c.keys.drain(half..));
        tail.slots.extend(c.slots.drain(half..));
        let at = if i < half {
            c.keys.insert(i, key);
            c.slots.insert(i, val);
            if i == 0 {
                self.firsts[ci] = key;
            }
            ci
        } else {
            tail.keys.insert(i - half, key);
            tail.slots.insert(i - half, val);
            ci + 1
        };
        self.firsts.insert(ci + 1, tail.keys[0]);
        self.chunks.insert(ci + 1, tail);
        at
    }

    pub fn remove(&mut self, key: &Key) -> Option<V> {
        let ci = self.chunk_for_hinted(key)?;
        let i = self.chunks[ci].keys.binary_search(key).ok()?;
        self.chunks_changed_from = self.chunks_changed_from.min(ci);
        let c = &mut self.chunks[ci];
        c.keys.remove(i);
        let slot = c.slots.remove(i);
        let v = self.values[slot].take();
        self.free.push(slot);
        self.len -= 1;
        if c.keys.is_empty() {
            self.chunks.remove(ci);
            self.firsts.remove(ci);
        } else {
            self.firsts[ci] = c.keys[0];
            let n = c.keys.len();
            if n <= CHUNK_MERGE
                && self
                    .chunks
                    .get(ci + 1)
                    .is_some_and(|next| n + next.keys.len() <= CHUNK_MAX)
            {
                let next = self.chunks.remove(ci + 1);
                self.firsts.remove(ci + 1);
                let c = &mut self.chunks[ci];
                c.keys.extend(next.keys);
                c.slots.extend(next.slots);
            }
        }
        if self.len == 0 {
            // Nothing is left to point into the slots: their memory goes too.
            self.values = Segments::default();
            self.free = Vec::new();
        }
        self.hint = ci.min(self.chunks.len().saturating_sub(1));
        v
    }

    /// Every key and value in order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &V)> {
        self.chunks
            .iter()
            .flat_map(|c| self.pairs(&c.keys, &c.slots))
    }

    /// `keys` with the values of their `slots`.
    fn pairs<'a>(
        &'a self,
        keys: &'a [Key],
        slots: &'a [u32],
    ) -> impl Iterator<Item = (&'a Key, &'a V)> + 'a {
        keys.iter()
            .zip(slots)
            .filter_map(|(k, s)| Some((k, self.values[*s].as_ref()?)))
    }

    /// Keys from `start` on (the first key at least `start`), in order.
    pub fn range_from(&self, start: Key) -> impl Iterator<Item = (&Key, &V)> {
        let (ci, i) = match self.chunk_for(&start) {
            None => (0, 0),
            Some(ci) => (ci, self.chunks[ci].keys.partition_point(|k| *k < start)),
        };
        let first = self
            .chunks
            .get(ci)
            .map(|c| self.pairs(&c.keys[i..], &c.slots[i..]));
        first.into_iter().flatten().chain(
            self.chunks
                .get(ci + 1..)
                .unwrap_or_default()
                .iter()
                .flat_map(|c| self.pairs(&c.keys, &c.slots)),
        )
    }

    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.chunks.iter().flat_map(|c| c.keys.iter())
    }

    /// Records that nothing changed since now (both copies of a pair are equal).
    pub fn settle(&mut self) {
        self.chunks_changed_from = self.chunks.len();
        self.values.settle();
    }

    /// What [`SortedMap::copy_changes_from`] would copy from this map, in keys and slots.
    pub fn changed(&self) -> usize {
        let chunks = self
            .chunks
            .get(self.chunks_changed_from..)
            .unwrap_or_default();
        let keys: usize = chunks.iter().map(|c| c.keys.len()).sum();
        keys + self.values.changed() + self.free.len()
    }
}

impl<V: Clone> SortedMap<V> {
    /// Makes this map equal to `src`, given that it was equal to `src` when `src` last
    /// settled: copies the chunks and values `src` changed since, and nothing else.
    pub fn copy_changes_from(&mut self, src: &SortedMap<V>) {
        let from = src.chunks_changed_from.min(self.chunks.len());
        self.chunks.truncate(from);
        self.chunks.extend_from_slice(&src.chunks[from..]);
        self.firsts.truncate(from);
        self.firsts.extend_from_slice(&src.firsts[from..]);
        self.chunks_changed_from = self.chunks_changed_from.min(from);
        self.values.copy_changes_from(&src.values);
        self.free.clone_from(&src.free);
        self.len = src.len;
        self.hint = src.hint;
    }
}

/// Where `key` is in a chunk's keys (as `binary_search`), trying the end first: a sorted
/// load appends.
#[inline]
fn search(keys: &[Key], key: &Key) -> Result<usize, usize> {
    match keys.last() {
        Some(last) if last < key => Err(keys.len()),
        _ => keys.binary_search(key),
    }
}

/// A chunk's vector holding `x`, with room for a full chunk.
fn with_first<T>(x: T) -> Vec<T> {
    let mut v = Vec::with_capacity(CHUNK_MAX);
    v.push(x);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32, u8),
        Remove(u32, u8),
        Range(u32, u8),
    }

    fn key(a: u32, l: u8) -> Key {
        Key::new(a as u128, l, 32)
    }

    fn check(m: &SortedMap<u32>, model: &BTreeMap<Key, u32>) {
        assert_eq!(m.len(), model.len());
        let got: Vec<(Key, u32)> = m.iter().map(|(k, v)| (*k, *v)).collect();
        let want: Vec<(Key, u32)> = model.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(got, want);
        for (i, c) in m.chunks.iter().enumerate() {
            assert!(!c.keys.is_empty() && c.keys.len() <= CHUNK_MAX);
            assert_eq!(c.keys.len(), c.slots.len());
            assert_eq!(m.firsts[i], c.keys[0]);
        }
        // Every slot is a key's or free, never both, never twice.
        let mut owner = vec![0u32; m.values.len()];
        for c in &m.chunks {
            for s in &c.slots {
                owner[*s as usize] += 1;
                assert!(m.values[*s].is_some());
            }
        }
        for s in &m.free {
            owner[*s as usize] += 1;
            assert!(m.values[*s].is_none());
        }
        assert!(owner.iter().all(|n| *n == 1), "{owner:?}");
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        // Few distinct addresses (so removals and nested prefixes hit), many of them in order
        // (so chunks split both ways).
        let op = prop_oneof![
            4 => (0u32..4096, 0u8..=32).prop_map(|(a, l)| Op::Insert(a << 20, l)),
            2 => (0u32..4096, 0u8..=32).prop_map(|(a, l)| Op::Remove(a << 20, l)),
            1 => (0u32..4096, 0u8..=32).prop_map(|(a, l)| Op::Range(a << 20, l)),
        ];
        proptest::collection::vec(op, 1..3000)
    }

    proptest! {
        /// Inserts, removals, gets and ranges agree with a `BTreeMap` in `Key` order.
        #[test]
        fn agrees_with_btreemap(ops in ops()) {
            let mut m = SortedMap::default();
            let mut model = BTreeMap::new();
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Insert(a, l) => {
                        let k = key(a, l);
                        let v = *model.entry(k).or_insert(n as u32);
                        prop_assert_eq!(*m.get_or_insert_with(k, || n as u32), v);
                    }
                    Op::Remove(a, l) => {
                        let k = key(a, l);
                        prop_assert_eq!(m.remove(&k), model.remove(&k));
                    }
                    Op::Range(a, l) => {
                        let k = key(a, l);
                        let got: Vec<_> = m.range_from(k).map(|(k, v)| (*k, *v)).collect();
                        let want: Vec<_> = model.range(k..).map(|(k, v)| (*k, *v)).collect();
                        prop_assert_eq!(got, want);
                        prop_assert_eq!(m.get(&k), model.get(&k));
                    }
                }
            }
            check(&m, &model);
        }
    }

    /// A sorted load appends: every chunk but the last is full.
    #[test]
    fn sorted_load_fills_chunks() {
        let mut m = SortedMap::default();
        let mut model = BTreeMap::new();
        for a in 0..10_000u32 {
            m.get_or_insert_with(key(a << 8, 24), || a);
            model.insert(key(a << 8, 24), a);
        }
        check(&m, &model);
        let n = m.chunks.len();
        assert!(m.chunks[..n - 1].iter().all(|c| c.keys.len() == CHUNK_MAX));
        // Removing everything leaves nothing behind.
        for a in 0..10_000u32 {
            assert_eq!(m.remove(&key(a << 8, 24)), Some(a));
        }
        assert!(m.chunks.is_empty() && m.firsts.is_empty() && m.len() == 0);
        assert!(m.values.is_empty() && m.free.is_empty());
        assert_eq!(m.range_from(key(0, 0)).count(), 0);
    }
}
