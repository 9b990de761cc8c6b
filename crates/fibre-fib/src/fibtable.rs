//! One routing table of one family: prefixes to their route entries, with longest-prefix match.
//!
//! Invariants:
//! - Keys are masked: no host bits are set beyond `len` (IPv4 keys live in the low 32 bits).
//! - A key is present only while its entry list is non-empty; `len_count[l]` is the number of
//!   keys of length `l`, and `lens` lists the lengths with a non-zero count, longest first.
//! - The order of a key's entries is the kernel's order for that key (the callers in
//!   `route4`/`route6` keep it); this module never reorders them.
//!
//! Interface: [`Table::lpm`] walks the matching keys longest first, so callers can apply the
//! kernel's "skip this alias and fall back to a shorter prefix" rules; `dump_keys` gives the
//! kernel's dump order. Insert, remove and each probe are O(1) hash operations, a longest-prefix
//! walk is at most one probe per populated length. The compiled structures of `fibre-lpm` are a
//! faster mirror of the same key set for the data plane; this map stays the source of truth.

use crate::fxhash::FxHashMap;
use crate::route::Entry;

/// A masked prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub addr: u128,
    pub len: u8,
}

/// The network mask of `len` bits in an address of `bits` bits, right-aligned in a u128.
#[inline]
pub(crate) fn mask(len: u8, bits: u8) -> u128 {
    if len == 0 {
        return 0;
    }
    let all: u128 = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    let host = bits - len;
    let hostmask: u128 = if host == 0 { 0 } else { (1u128 << host) - 1 };
    all & !hostmask
}

impl Key {
    #[inline]
    pub fn new(addr: u128, len: u8, bits: u8) -> Key {
        Key {
            addr: addr & mask(len, bits),
            len,
        }
    }
    /// The last address covered by the prefix.
    #[inline]
    pub fn last(&self, bits: u8) -> u128 {
        let all: u128 = if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        };
        self.addr | (all & !mask(self.len, bits))
    }
    #[inline]
    pub fn contains(&self, addr: u128, bits: u8) -> bool {
        addr & mask(self.len, bits) == self.addr
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub id: u32,
    /// Creation sequence number: the kernel lists tables of one hash bucket newest first.
    pub seq: u64,
    /// Address width: 32 or 128.
    pub bits: u8,
    map: FxHashMap<Key, Vec<Entry>>,
    len_count: [u32; 129],
    lens: Vec<u8>,
}

impl Table {
    pub fn new(id: u32, bits: u8, seq: u64) -> Table {
        Table {
            id,
            seq,
            bits,
            map: FxHashMap::default(),
            len_count: [0; 129],
            lens: Vec::new(),
        }
    }

    pub fn get(&self, key: &Key) -> Option<&Vec<Entry>> {
        self.map.get(key)
    }

    pub fn get_mut(&mut self, key: &Key) -> Option<&mut Vec<Entry>> {
        self.map.get_mut(key)
    }

    /// The entry list of `key`, created empty if absent. The caller must leave it non-empty
    /// or call [`Table::prune`].
    pub fn entries_mut(&mut self, key: Key) -> &mut Vec<Entry> {
        let lc = &mut self.len_count;
        let lens = &mut self.lens;
        self.map.entry(key).or_insert_with(|| {
            let l = key.len as usize;
            lc[l] += 1;
            if lc[l] == 1 {
                let pos = lens.iter().position(|&x| x < key.len).unwrap_or(lens.len());
                lens.insert(pos, key.len);
            }
            Vec::new()
        })
    }

    /// Removes `key` if its entry list became empty.
    pub fn prune(&mut self, key: &Key) {
        if self.map.get(key).is_some_and(|v| v.is_empty()) {
            self.map.remove(key);
            let l = key.len as usize;
            self.len_count[l] -= 1;
            if self.len_count[l] == 0 {
                self.lens.retain(|&x| x != key.len);
            }
        }
    }

    /// Keys matching `addr`, longest first, with their entries.
    #[inline]
    pub fn lpm(&self, addr: u128) -> impl Iterator<Item = (Key, &Vec<Entry>)> + '_ {
        let bits = self.bits;
        self.lens.iter().filter_map(move |&len| {
            let k = Key::new(addr, len, bits);
            self.map.get(&k).map(|v| (k, v))
        })
    }

    /// Every key and its entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Vec<Entry>)> {
        self.map.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Key, &mut Vec<Entry>)> {
        self.map.iter_mut()
    }

    /// Keys in the kernel's dump order. IPv4 (the LC-trie): by address, and for one address
    /// the longer prefix first. IPv6 (the fib6 tree walked children before parent): by the
    /// last address covered, and for one last address the longer prefix first.
    pub fn dump_keys(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = self.map.keys().copied().collect();
        if self.bits == 32 {
            keys.sort_unstable_by(|a, b| a.addr.cmp(&b.addr).then(b.len.cmp(&a.len)));
        } else {
            let bits = self.bits;
            keys.sort_unstable_by(|a, b| a.last(bits).cmp(&b.last(bits)).then(b.len.cmp(&a.len)));
        }
        keys
    }

    /// Removes every empty key (after a bulk `retain` over entries).
    pub fn prune_all(&mut self) {
        let empty: Vec<Key> = self
            .map
            .iter()
            .filter(|(_, v)| v.is_empty())
            .map(|(k, _)| *k)
            .collect();
        for k in empty {
            self.prune(&k);
        }
    }
}
