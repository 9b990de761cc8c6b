//! Big-endian field access shared by every header view, and the fixed-size store for option
//! bytes that lets IPv4 and TCP `Repr`s stay `Copy` while keeping every option byte.
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
