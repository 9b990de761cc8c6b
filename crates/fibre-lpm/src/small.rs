//! Longest-prefix match for small tables: [`SmallLpm`], the address space cut into intervals
//! that each have one answer, searched by bisection.
//!
//! [`crate::v4::Lpm4`] and [`crate::v6::Lpm6`] pay a fixed price for their speed on large tables
//! (top-level arrays of 1.5 MiB and 0.8 MiB before the first prefix); a router with thousands of
//! small tables (one per VRF or per policy) cannot pay it per table. This structure costs 24
//! bytes per interval, at most `2n + 1` intervals for `n` prefixes, and answers in
//! `log2(2n + 1)` comparisons over one contiguous array (a few kilobytes for the tables it is
//! meant for), where the large structures read one or two cache lines.
//!
//! It is rebuilt whole from the complete prefix set ([`SmallLpm::build`]); there is no
//! incremental update, which is what keeps it this small and simple. Callers switch to a large
//! structure before a rebuild's `O(n log n)` matters.
//!
//! Addresses and prefixes are right-aligned in a `u128` of `bits` (32 or 128) bits.

use crate::LpmError;

/// One answer per interval of the address space, the intervals given by their first address.
#[derive(Clone, Debug, Default)]
pub struct SmallLpm {
    /// First address of each interval, ascending; the first is 0 when there is any.
    starts: Vec<u128>,
    /// The answer of each interval: a value, or `None` where no prefix covers it.
    values: Vec<Option<u32>>,
}

impl SmallLpm {
    /// The structure answering exactly as longest-prefix match over `prefixes` (address,
    /// length, value) in an address space of `bits` bits. Host bits of an address are ignored;
    /// a prefix given twice keeps its last value.
    pub fn build(
        bits: u8,
        prefixes: impl IntoIterator<Item = (u128, u8, u32)>,
    ) -> Result<SmallLpm, LpmError> {
        let mut ps: Vec<(u128, u8, u32)> = Vec::new();
        for (addr, len, v) in prefixes {
            if len > bits {
                return Err(LpmError::InvalidLength(len));
            }
            ps.push((addr & mask(len, bits), len, v));
        }
        // Outer prefixes before the ones they contain; for a repeated prefix the last wins.
        ps.sort_by_key(|&(a, l, _)| (a, l));
        ps.reverse();
        ps.dedup_by_key(|&mut (a, l, _)| (a, l));
        ps.reverse();

        let mut out = SmallLpm::default();
        // Prefixes containing the sweep's position, innermost last: (last address, value).
        let mut open: Vec<(u128, u32)> = Vec::new();
        for (addr, len, v) in ps {
            out.close_before(&mut open, addr);
            out.set(addr, Some(v));
            open.push((addr | !mask(len, bits) & space(bits), v));
        }
        // Everything still open but the prefixes that run to the end of the space.
        out.close_before(&mut open, space(bits));
        if out.starts.first().is_some_and(|&s| s != 0) {
            out.starts.insert(0, 0);
            out.values.insert(0, None);
        }
        out.starts.shrink_to_fit();
        out.values.shrink_to_fit();
        Ok(out)
    }

    /// Ends the open prefixes that stop before `addr`, each handing its remaining range back to
    /// the prefix around it (or to no route).
    fn close_before(&mut self, open: &mut Vec<(u128, u32)>, addr: u128) {
        while let Some(&(last, _)) = open.last() {
            if last >= addr {
                break;
            }
            open.pop();
            // `last < addr`, so `last + 1` is still an address.
            self.set(last + 1, open.last().map(|&(_, v)| v));
        }
    }

    /// Starts an interval at `start` answering `v`, replacing one that starts there already and
    /// merging with the previous interval when the answers are equal.
    fn set(&mut self, start: u128, v: Option<u32>) {
        if self.starts.last() == Some(&start) {
            self.starts.pop();
            self.values.pop();
        }
        if self.values.last() == Some(&v) {
            return;
        }
        self.starts.push(start);
        self.values.push(v);
    }

    /// The value of the longest prefix covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let i = self.starts.partition_point(|&s| s <= addr);
        *self.values.get(i.checked_sub(1)?)?
    }

    /// Intervals held (for memory accounting and tests).
    pub fn intervals(&self) -> usize {
        self.starts.len()
    }

    /// Bytes of heap the structure holds.
    pub fn heap_bytes(&self) -> usize {
        self.starts.capacity() * std::mem::size_of::<u128>()
            + self.values.capacity() * std::mem::size_of::<Option<u32>>()
    }
}

/// Every address of a `bits`-bit space.
fn space(bits: u8) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// The network mask of `len` bits in a `bits`-bit address.
fn mask(len: u8, bits: u8) -> u128 {
    space(bits) & !space(bits).checked_shr(u32::from(len)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The longest of `prefixes` (the last given, for a repeated one) covering `addr`.
    fn naive(bits: u8, prefixes: &[(u128, u8, u32)], addr: u128) -> Option<u32> {
        let mut best: Option<(u8, u32)> = None;
        for &(a, l, v) in prefixes {
            let m = mask(l, bits);
            if addr & m == a & m && best.is_none_or(|(bl, _)| l >= bl) {
                best = Some((l, v));
            }
        }
        best.map(|(_, v)| v)
    }

    /// Addresses where answers change: every prefix's first and last address and their
    /// neighbours, and the ends of the space.
    fn edges(bits: u8, prefixes: &[(u128, u8, u32)]) -> Vec<u128> {
        let mut out = vec![0, 1, space(bits), space(bits) - 1];
        for &(a, l, _) in prefixes {
            let first = a & mask(l, bits);
            let last = first | (space(bits) & !mask(l, bits));
            out.extend([first, last, first.wrapping_sub(1), last.wrapping_add(1)]);
        }
        out.into_iter().map(|a| a & space(bits)).collect()
    }

    fn check(bits: u8, prefixes: &[(u128, u8, u32)], probes: &[u128]) {
        let s = SmallLpm::build(bits, prefixes.iter().copied()).unwrap();
        assert!(s.intervals() <= 2 * prefixes.len() + 1);
        for &a in edges(bits, prefixes).iter().chain(probes) {
            let a = a & space(bits);
            assert_eq!(
                s.lookup(a),
                naive(bits, prefixes, a),
                "{a:#x} in {prefixes:x?}"
            );
        }
    }

    #[test]
    fn nested_adjacent_and_whole_space() {
        check(32, &[], &[7]);
        check(32, &[(0, 0, 1)], &[]);
        check(
            32,
            &[
                (0x0a00_0000, 8, 1),
                (0x0a00_0000, 16, 2),
                (0x0a01_0000, 16, 3),
            ],
            &[],
        );
        check(
            32,
            &[(0xffff_ffff, 32, 1), (0, 32, 2), (0x8000_0000, 1, 3)],
            &[],
        );
        check(
            128,
            &[(u128::MAX, 128, 1), (0, 0, 2), (1 << 127, 1, 3)],
            &[],
        );
        check(32, &[(0x0a00_0000, 8, 1), (0x0a00_0000, 8, 4)], &[]);
    }

    #[test]
    fn refuses_lengths_beyond_the_space() {
        assert_eq!(
            SmallLpm::build(32, [(0, 33, 1)]).unwrap_err(),
            LpmError::InvalidLength(33)
        );
    }

    /// Prefixes drawn from a narrow corner of the space so that they nest and touch.
    fn prefixes(bits: u8) -> impl Strategy<Value = Vec<(u128, u8, u32)>> {
        let top = bits - 8;
        prop::collection::vec(
            (0u128..256, 0u8..=8, 0u32..4).prop_map(move |(a, l, v)| {
                // Lengths near the top and the bottom of the space.
                let len = if l < 4 { l } else { bits - 8 + l };
                (a << top, len, v)
            }),
            0..40,
        )
    }

    proptest! {
        #[test]
        fn answers_as_the_naive_model_v4(ps in prefixes(32), probes in prop::collection::vec(any::<u32>(), 16)) {
            check(32, &ps, &probes.iter().map(|&p| u128::from(p)).collect::<Vec<_>>());
        }

        #[test]
        fn answers_as_the_naive_model_v6(ps in prefixes(128), probes in prop::collection::vec(any::<u128>(), 16)) {
            check(128, &ps, &probes);
        }
    }
}
