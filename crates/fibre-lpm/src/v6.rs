//! IPv6 longest-prefix match: [`Lpm6`], a trie with a 16-bit direct-pointing array and 6-bit
//! nodes. Addresses are `u128` in network order (the first address byte is the most significant).

use crate::trie::Trie;
use crate::{LpmError, Shape};

/// Bits resolved by the direct-pointing array. Announced IPv6 space sits in 2000::/3, so the
/// first 16 bits spread a table over 8192 used entries (256 KiB for the whole array).
const DIRECT_BITS: u32 = 20;

/// IPv6 prefix -> `u32` value index. Single-threaded; share it through [`crate::sync`].
#[derive(Clone, Debug, Default)]
pub struct Lpm6 {
    trie: Trie<u128, DIRECT_BITS>,
}

impl Lpm6 {
    /// An empty table.
    pub fn new() -> Self {
        Lpm6 { trie: Trie::new() }
    }

    /// Maps `prefix/len` to `value` (host bits of `prefix` are ignored) and returns the value it
    /// replaced, if any.
    pub fn insert(&mut self, prefix: u128, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        self.trie.insert(prefix, len, value)
    }

    /// Removes `prefix/len` and returns its value, if it was present.
    pub fn remove(&mut self, prefix: u128, len: u8) -> Option<u32> {
        self.trie.remove(prefix, len)
    }

    /// The value stored for exactly `prefix/len`.
    pub fn get(&self, prefix: u128, len: u8) -> Option<u32> {
        self.trie.get(prefix, len)
    }

    /// The value of the longest prefix covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let v = crate::external(self.trie.lookup(addr));
        (v != crate::NO_ROUTE).then_some(v)
    }

    /// Looks up every address of `addrs` into the same position of `out` ([`crate::NO_ROUTE`]
    /// where no prefix covers it), overlapping the memory accesses of independent lookups.
    /// Panics if the slices differ in length.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [u32]) {
        self.trie.lookup_batch(addrs, out)
    }

    /// Bytes held, control state included.
    pub fn memory_bytes(&self) -> usize {
        self.trie.memory_bytes()
    }

    /// Bytes of the arrays lookups read (direct array, nodes, leaves).
    pub fn lookup_bytes(&self) -> usize {
        self.trie.lookup_bytes()
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
        op: &crate::sync::Update<u128>,
    ) -> crate::sync::UpdateResult {
        match *op {
            crate::sync::Update::Insert(p, l, v) => self.trie.insert_lazy(p, l, v),
            crate::sync::Update::Remove(p, l) => Ok(self.trie.remove_lazy(p, l)),
        }
    }

    /// Compiles what deferred updates touched.
    pub(crate) fn flush(&mut self) {
        self.trie.flush()
    }

    /// Builds a table from `(prefix, len, value)` triples (a later duplicate replaces an earlier
    /// one), compiling each node once: much faster than inserting one by one.
    pub fn from_routes(
        routes: impl IntoIterator<Item = (u128, u8, u32)>,
    ) -> Result<Self, LpmError> {
        Ok(Lpm6 {
            trie: Trie::from_routes(routes)?,
        })
    }
}

/// Updates to a [`Lpm6`] compiled together when dropped (see [`Lpm6::batch`]).
pub struct Batch<'a> {
    trie: &'a mut Trie<u128, DIRECT_BITS>,
}

impl Batch<'_> {
    /// As [`Lpm6::insert`]; visible to lookups once the batch is dropped.
    pub fn insert(&mut self, prefix: u128, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        self.trie.insert_lazy(prefix, len, value)
    }

    /// As [`Lpm6::remove`]; visible to lookups once the batch is dropped.
    pub fn remove(&mut self, prefix: u128, len: u8) -> Option<u32> {
        self.trie.remove_lazy(prefix, len)
    }

    /// The value stored for exactly `prefix/len`, updates of this batch included.
    pub fn get(&self, prefix: u128, len: u8) -> Option<u32> {
        self.trie.get(prefix, len)
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.trie.flush();
    }
}
