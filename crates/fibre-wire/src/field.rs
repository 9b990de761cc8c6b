//! Big-endian field access shared by every header view, the fixed-size store for option bytes
//! that lets IPv4 and TCP `Repr`s stay `Copy` while keeping every option byte, and the walk
//! that the option iterators share.
//!
//! The readers index their slice directly and so panic when it is too short: the views call
//! them only at offsets their `new_checked` constructor has validated.

use crate::error::{Error, Result};

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn set_be16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn set_be32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Two 16-bit fields as one 32-bit word: the echo identifier and sequence number of ICMP and
/// ICMPv6.
pub(crate) fn be16_pair(hi: u16, lo: u16) -> [u8; 4] {
    (u32::from(hi) << 16 | u32::from(lo)).to_be_bytes()
}

pub(crate) fn array<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&b[at..at + N]);
    out
}

/// The most option bytes an IPv4 or TCP header can carry: a 4-bit length in 32-bit words
/// (60 bytes) less the 20-byte fixed part.
pub const MAX_OPTION_LEN: usize = 40;

/// Up to [`MAX_OPTION_LEN`] option bytes, held by value so a `Repr` needs no borrow.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptionBytes {
    buf: [u8; MAX_OPTION_LEN],
    len: u8,
}

impl OptionBytes {
    /// No options.
    pub const EMPTY: OptionBytes = OptionBytes {
        buf: [0; MAX_OPTION_LEN],
        len: 0,
    };

    /// Copies `bytes`; [`Error::Malformed`] if there are more than [`MAX_OPTION_LEN`] or their
    /// length is not a multiple of 4 (both headers count their length in 32-bit words).
    pub fn new(bytes: &[u8]) -> Result<OptionBytes> {
        if bytes.len() > MAX_OPTION_LEN || !bytes.len().is_multiple_of(4) {
            return Err(Error::Malformed);
        }
        let mut buf = [0; MAX_OPTION_LEN];
        buf[..bytes.len()].copy_from_slice(bytes);
        Ok(OptionBytes {
            buf,
            len: bytes.len() as u8,
        })
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for OptionBytes {
    fn default() -> Self {
        OptionBytes::EMPTY
    }
}

impl core::fmt::Debug for OptionBytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "OptionBytes({:02x?})", self.as_slice())
    }
}

/// The walk the option iterators share (IPv4 options, IPv6 hop-by-hop and destination options,
/// NDP options): `read` takes the option at the start of its slice and returns it with its
/// length. The walk stops at the end of the bytes, after an option that `last` says ends the
/// list, or after the first error, where [`OptionWalk::offset`] is left at the malformed
/// option's start (for an ICMP parameter problem's pointer). It never panics.
#[derive(Debug, Clone)]
pub struct OptionWalk<'a, T> {
    bytes: &'a [u8],
    offset: usize,
    done: bool,
    read: fn(&'a [u8]) -> Result<(T, usize)>,
    last: fn(&T) -> bool,
}

impl<'a, T> OptionWalk<'a, T> {
    pub(crate) fn walk(
        bytes: &'a [u8],
        read: fn(&'a [u8]) -> Result<(T, usize)>,
        last: fn(&T) -> bool,
    ) -> OptionWalk<'a, T> {
        OptionWalk {
            bytes,
            offset: 0,
            done: false,
            read,
            last,
        }
    }

    /// Where the next option starts (after an error: where the malformed one starts).
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<T> Iterator for OptionWalk<'_, T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self
            .bytes
            .get(self.offset..)
            .filter(|r| !self.done && !r.is_empty())?;
        match (self.read)(rest) {
            // Every reader returns a length of at least 1 within `rest`; the clamp keeps a
            // mistaken one from looping or moving the offset past the end.
            Ok((opt, len)) => {
                self.done = (self.last)(&opt);
                self.offset += len.clamp(1, rest.len());
                Some(Ok(opt))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
