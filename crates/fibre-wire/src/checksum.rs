//! The Internet checksum (RFC 1071), the IPv4 and IPv6 pseudo-headers that UDP, TCP and ICMPv6
//! cover, and the incremental update of RFC 1624 that forwarding uses instead of recomputing.
//!
//! Sums are kept unfolded in a `u32` ([`sum`], [`combine`]) until [`finish`] folds and
//! complements them: a `u32` holds the sum of 65535 16-bit words without overflowing, more than
//! any IP packet has. Nothing here panics.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Result};

/// The one's-complement sum of `data` as big-endian 16-bit words, an odd last byte padded with
/// zero, before folding.
///
/// The bytes are added four at a time as big-endian 32-bit words into a 64-bit accumulator
/// and folded once at the end: the one's-complement sum does not depend on the word size
/// (RFC 1071 section 2, "parallel summation"), and 2^32 words cannot overflow 64 bits. On the
/// forwarding path this is the IPv4 header's check, once per packet.
pub fn sum(data: &[u8]) -> u32 {
    let (words, rest) = data.as_chunks::<4>();
    // An IPv4 header without options, the common case, in five loads the compiler unrolls.
    let acc = match <&[[u8; 4]; 5]>::try_from(words) {
        Ok(w) if rest.is_empty() => w.iter().map(|w| u64::from(u32::from_be_bytes(*w))).sum(),
        _ => {
            let mut tail = [0u8; 4];
            tail[..rest.len()].copy_from_slice(rest);
            words
                .iter()
                .fold(u64::from(u32::from_be_bytes(tail)), |acc, w| {
                    acc + u64::from(u32::from_be_bytes(*w))
                })
        }
    };
    let acc = (acc & 0xFFFF_FFFF) + (acc >> 32);
    let acc = (acc & 0xFFFF_FFFF) + (acc >> 32);
    u32::from(fold(acc as u32))
}

/// Adds partial sums (from [`sum`], [`pseudo_v4`], [`pseudo_v6`]).
pub fn combine(parts: &[u32]) -> u32 {
    parts
        .iter()
        .fold(0, |acc, &p| fold_once(fold_once(acc) + fold_once(p)))
}

/// Folds carries in and complements: the value to put in a checksum field.
pub fn finish(partial: u32) -> u16 {
    !fold(partial)
}

/// The checksum of `data` alone (the IPv4 header's, ICMP's).
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(data))
}

/// True when `data`, checksum field included, sums to all ones.
pub fn verifies(partial: u32) -> bool {
    fold(partial) == 0xFFFF
}

/// [`verifies`] as a `Result`: [`Error::Checksum`] when the sum does not verify.
pub fn check(partial: u32) -> Result<()> {
    if verifies(partial) {
        Ok(())
    } else {
        Err(Error::Checksum)
    }
}

/// The partial sum of the IPv4 pseudo-header (RFC 768, RFC 793): addresses, protocol and the
/// upper-layer length.
pub fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> u32 {
    combine(&[
        sum(&src.octets()),
        sum(&dst.octets()),
        u32::from(protocol),
        u32::from(len),
    ])
}

/// The partial sum of the IPv6 pseudo-header (RFC 8200 section 8.1): addresses, the 32-bit
/// upper-layer length and the next header.
pub fn pseudo_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, len: u32) -> u32 {
    combine(&[
        sum(&src.octets()),
        sum(&dst.octets()),
        (len >> 16) + (len & 0xFFFF),
        u32::from(next_header),
    ])
}

/// The addresses that UDP, TCP and ICMPv6 checksums cover besides their own bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PseudoHeader {
    V4 { src: Ipv4Addr, dst: Ipv4Addr },
    V6 { src: Ipv6Addr, dst: Ipv6Addr },
}

impl PseudoHeader {
    /// The partial sum for an upper-layer message of `protocol` and `len` bytes.
    pub fn sum(&self, protocol: u8, len: usize) -> u32 {
        match *self {
            // An IPv4 datagram's payload is below 65536 bytes; longer lengths only come from
            // callers' mistakes and are truncated like the 16-bit field would be.
            PseudoHeader::V4 { src, dst } => pseudo_v4(src, dst, protocol, len as u16),
            PseudoHeader::V6 { src, dst } => pseudo_v6(src, dst, protocol, len as u32),
        }
    }
}

/// RFC 1624 equation 3: the checksum after one 16-bit word of the covered data changes from
/// `old` to `new`, without reading the rest. `HC' = ~(~HC + ~m + m')`.
pub fn update16(check: u16, old: u16, new: u16) -> u16 {
    !fold(u32::from(!check) + u32::from(!old) + u32::from(new))
}

/// [`update16`] for a 32-bit word (an IPv4 address, a TCP sequence number).
pub fn update32(check: u16, old: u32, new: u32) -> u16 {
    let c = update16(check, (old >> 16) as u16, (new >> 16) as u16);
    update16(c, old as u16, new as u16)
}

/// [`update16`] over a run of bytes at an even offset in the covered data (an IPv6 address, a
/// MAC inside a checksummed message); `old` and `new` must be equally long, and an odd last
/// byte is the high half of its word. Unequal lengths are a caller's mistake: only the common
/// prefix is applied.
pub fn update_bytes(check: u16, old: &[u8], new: &[u8]) -> u16 {
    let mut acc = u32::from(!check);
    for (o, n) in old.chunks(2).zip(new.chunks(2)) {
        let word = |b: &[u8]| u16::from_be_bytes([b[0], b.get(1).copied().unwrap_or(0)]);
        acc = fold_once(acc + u32::from(!word(o)) + u32::from(word(n)));
    }
    !fold(acc)
}

/// The IPv4 header checksum after the TTL drops by one (RFC 1624 section 4; RFC 1141's
/// shortcut gets the 0x0000/0xFFFF case wrong). The TTL is the high byte of the word it shares
/// with the protocol, so that word drops by 0x0100.
pub fn decrement_ttl(check: u16, ttl: u8, protocol: u8) -> u16 {
    let old = u16::from_be_bytes([ttl, protocol]);
    let new = u16::from_be_bytes([ttl.wrapping_sub(1), protocol]);
    update16(check, old, new)
}

fn fold_once(x: u32) -> u32 {
    (x & 0xFFFF) + (x >> 16)
}

fn fold(x: u32) -> u16 {
    fold_once(fold_once(x)) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (after folding).
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // A header from the Wikipedia "IPv4 header checksum" worked example: 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert!(verifies(sum(&h)));
    }

    /// RFC 1071's sum as it defines it: 16-bit words, the carry folded in after each.
    fn sum_by_words(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for w in data.chunks(2) {
            let word = u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)]);
            acc = fold_once(acc + u32::from(word));
        }
        fold(acc)
    }

    proptest! {
        #[test]
        fn sum_is_the_sum_by_words(data in proptest::collection::vec(any::<u8>(), 0..200),
                                   header in proptest::collection::vec(any::<u8>(), 20)) {
            prop_assert_eq!(fold(sum(&data)), sum_by_words(&data));
            prop_assert_eq!(fold(sum(&header)), sum_by_words(&header));
        }

        #[test]
        fn ttl_decrement_matches_recompute(mut h in proptest::collection::vec(any::<u8>(), 20),
                                            ttl in 1u8..) {
            h[8] = ttl;
            h[10] = 0;
            h[11] = 0;
            let c = checksum(&h);
            let inc = decrement_ttl(c, ttl, h[9]);
            h[8] = ttl - 1;
            // Both are the same one's-complement value; a full recompute never yields -0
            // unless every word is zero, so compare after folding the negative zero away.
            let full = checksum(&h);
            prop_assert!(inc == full || (inc == 0xFFFF && full == 0) || (inc == 0 && full == 0xFFFF));
            h[10..12].copy_from_slice(&inc.to_be_bytes());
            prop_assert!(verifies(sum(&h)));
        }

        #[test]
        fn byte_rewrite_matches_recompute(mut data in proptest::collection::vec(any::<u8>(), 40),
                                          new in proptest::collection::vec(any::<u8>(), 16),
                                          at in 0usize..12) {
            let at = at * 2;
            let c = checksum(&data);
            let inc = update_bytes(c, &data[at..at + 16], &new);
            data[at..at + 16].copy_from_slice(&new);
            let full = checksum(&data);
            prop_assert_eq!(fold(u32::from(!inc)), fold(u32::from(!full)));
        }

        #[test]
        fn update32_is_two_update16(old: u32, new: u32) {
            let mut data = [0u8; 8];
            data[..4].copy_from_slice(&old.to_be_bytes());
            let c0 = checksum(&data);
            let inc = update32(c0, old, new);
            data[..4].copy_from_slice(&new.to_be_bytes());
            prop_assert_eq!(fold(u32::from(!inc)), fold(u32::from(!checksum(&data))));
        }

        #[test]
        fn odd_length_pads_with_zero(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut padded = data.clone();
            if padded.len() % 2 == 1 {
                padded.push(0);
            }
            prop_assert_eq!(fold(sum(&data)), fold(sum(&padded)));
        }
    }
}
