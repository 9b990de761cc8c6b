//! Longest-prefix-match structures for fibre's forwarding plane: an index from IPv4 and IPv6
//! prefixes to `u32` values (the routing core's own route or next-hop ids).
//!
//! - [`v4::Lpm4`]: a 16-bit top array over packed index lines, backed by a Poptrie-style trie
//!   (the `dir16` and `trie` modules). [`v6::Lpm6`]: per-/16 B+-trees over interval boundaries,
//!   read through pointer-free images of them (the `v6` module). Both have single and batched
//!   lookups whose cost depends only on the table (the depth of the structure at the address),
//!   never on the traffic: there is no cache.
//! - [`small::SmallLpm`]: sorted intervals searched by bisection, rebuilt whole on change: for
//!   small tables, which cannot pay the large structures' fixed cost (over a megabyte each).
//! - [`sync`]: the concurrency layer, through `fibre-publish`. One [`sync::Writer`] (the
//!   control plane) updates and publishes; any number of [`sync::Reader`] handles look up
//!   lock-free and wait-free, never blocked by the writer and never seeing a half-applied
//!   update.
//!
//! Values are `u32` in `0..=MAX_VALUE`; lookups answer [`NO_ROUTE`] (batched) or `None` where no
//! prefix covers the address. Prefixes with host bits set are stored with those bits cleared.

mod dir16;
mod huge;
pub mod small;
pub mod sync;
mod trie;
pub mod v4;
pub mod v6;
mod written;

pub use trie::Shape;

/// What a batched lookup writes for an address that no prefix covers.
pub const NO_ROUTE: u32 = u32::MAX;

/// The largest value a prefix can map to: `2^31 - 2` (bit 31 of a compiled entry tells nodes
/// from values, and `2^31 - 1` encodes "no route" inside the structure).
pub const MAX_VALUE: u32 = trie::NONE - 1;

/// Why an update was refused. Small and `Copy`: it is returned on the control plane's hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpmError {
    /// Prefix length above the address width (32 or 128).
    InvalidLength(u8),
    /// Value above [`MAX_VALUE`].
    ValueTooLarge(u32),
    /// The structure's index space is exhausted (billions of nodes or leaves).
    Full,
}

impl std::fmt::Display for LpmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LpmError::InvalidLength(l) => write!(f, "invalid prefix length {l}"),
            LpmError::ValueTooLarge(v) => write!(f, "value {v} above maximum {MAX_VALUE}"),
            LpmError::Full => f.write_str("lookup structure full"),
        }
    }
}

impl std::error::Error for LpmError {}

/// Maps the internal "no route" encoding to [`NO_ROUTE`].
#[inline(always)]
pub(crate) fn external(v: u32) -> u32 {
    if v == trie::NONE {
        NO_ROUTE
    } else {
        v
    }
}

/// True when the CPU has a `popcnt` instruction (x86_64 only: elsewhere `count_ones` compiles to
/// the native instruction or its best substitute anyway). Lookups that count bits run a copy of
/// themselves compiled for it; std caches the detection, so asking costs one load.
#[inline(always)]
pub(crate) fn has_popcnt() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("popcnt");
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// True when the CPU has what x86-64-v3 code of the lookups uses: popcnt, bmi1, bmi2 and avx2.
/// Cached by std: a few loads.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn has_x86_v3() -> bool {
    std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("avx2")
}

/// Hints the CPU to bring `p`'s cache line closer; a no-op where there is no such hint. Public
/// for the lookups' users, which fetch what a batch of answers points at the same way (their
/// crates forbid `unsafe`).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and never reads memory architecturally,
    // whatever the address (SSE is part of the x86_64 baseline).
    unsafe {
        core::arch::x86_64::_mm_prefetch(p.cast::<i8>(), core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
