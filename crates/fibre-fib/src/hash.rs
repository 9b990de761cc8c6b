//! The two hashers of fibre's maps, chosen by who picks the keys.
//!
//! - [`KeyedState`] for keys an outsider can choose: destinations named in ICMP messages (the
//!   exception table), and ids, names, addresses and route attributes sent by netlink peers.
//!   Whoever can predict a map's hash function can send keys that all land in one probe
//!   sequence and make each insert cost as much as the map is long; a seed the sender cannot
//!   know takes that away.
//! - [`InternalState`] for keys fibre makes itself (arena indices, info ids and serials): no
//!   sender picks them, so a fixed seed is as good and costs no set-up per map.
//!
//! Both are foldhash (a maintained crate without dependencies, hashbrown's default hasher):
//! a few cycles for an integer key, so the route lookup's table-id probes and the per-packet
//! exception probe cost what an unkeyed multiply-rotate hash cost (`examples/load`). SipHash
//! (std's `RandomState`) resists stronger attackers but costs several times as much per small
//! key on those paths. [`KeyedState`] is foldhash's `quality` variant: one more folded
//! multiply than `fast`, so keys that differ only in their high bits (one route info in many
//! tables, destinations that differ in their first bits) still start their probes apart
//! whatever the seed. foldhash's own random seed comes from address-space layout and the
//! clock; [`KeyedState`] takes its seed from the operating system's random source instead
//! (through std's `RandomState`, which reads it once per thread), so it cannot be guessed from
//! the binary or the start time. foldhash does not claim to resist an attacker who times
//! inserts interactively to learn the seed; the exception table's per-next-hop bound
//! (`ExceptionConfig::max_per_nh`) caps what even that attacker could make an insert cost.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use foldhash::fast::FixedState;
use foldhash::quality::{FoldHasher, SeedableRandomState};
use foldhash::SharedSeed;

/// 64 bits from the operating system's random source: std's `RandomState` keys SipHash with
/// them, so the hash of nothing under a fresh one is as unpredictable as its keys.
pub(crate) fn os_random() -> u64 {
    std::hash::RandomState::new().build_hasher().finish()
}

/// The process's shared foldhash seed, drawn at first use.
fn shared_seed() -> &'static SharedSeed {
    static SEED: OnceLock<SharedSeed> = OnceLock::new();
    SEED.get_or_init(|| SharedSeed::from_u64(os_random()))
}

/// Builds hashers for a map whose keys an outsider may choose: foldhash (`quality`) under a
/// process-wide seed and a per-map seed, both from the operating system's random source.
#[derive(Clone, Debug)]
pub struct KeyedState(SeedableRandomState);

impl Default for KeyedState {
    fn default() -> Self {
        KeyedState(SeedableRandomState::with_seed(os_random(), shared_seed()))
    }
}

impl BuildHasher for KeyedState {
    type Hasher = FoldHasher<'static>;

    #[inline]
    fn build_hasher(&self) -> FoldHasher<'static> {
        self.0.build_hasher()
    }
}

/// Builds hashers for a map whose keys fibre makes itself (see the module comment).
pub type InternalState = FixedState;

/// A map keyed by values an outsider may choose.
pub type KeyedMap<K, V> = HashMap<K, V, KeyedState>;

/// A map keyed by values only fibre makes.
pub type InternalMap<K, V> = HashMap<K, V, InternalState>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_maps_hash_the_same_key_differently() {
        let (a, b) = (KeyedState::default(), KeyedState::default());
        let key = 0x2001_0db8_u128 << 96;
        // Two independent 64-bit seeds agree on a key with probability 2^-64.
        assert_ne!(a.hash_one(key), b.hash_one(key));
        assert_eq!(a.hash_one(key), a.clone().hash_one(key));
    }
}
