//! Decoding errors: what was wrong and where.
//!
//! Every variant carries `offset`, the byte offset in the buffer handed to the parser (a whole
//! message stream, or one message) at which the offending structure starts. Errors are small and
//! `Copy` so the server can turn them into an errno and extended-ACK text without allocating.

use std::fmt;

/// Why a buffer is not a well-formed rtnetlink message stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// A fixed-size structure (`what`) needs `need` bytes but only `have` remain.
    Truncated {
        what: &'static str,
        offset: usize,
        need: usize,
        have: usize,
    },
    /// `nlmsg_len` is below the header size or beyond the end of the buffer.
    MessageLength {
        offset: usize,
        len: u32,
        available: usize,
    },
    /// `nla_len` is below the attribute header size or beyond the end of its region.
    AttributeLength {
        offset: usize,
        len: u16,
        available: usize,
    },
    /// An attribute is not followed by the padding that aligns the next one to 4 bytes.
    MissingPadding { offset: usize },
    /// Alignment padding is not zero. Every producer zeroes it; accepting other values would
    /// make a parsed message impossible to re-emit as it came.
    NonZeroPadding { offset: usize },
    /// Fewer than 4 bytes are left after the last attribute: neither an attribute nor padding.
    TrailingBytes { offset: usize, count: usize },
    /// An NLMSG_ERROR message echoes a request whose `nlmsg_len` does not fit in it.
    EchoedLength { offset: usize, len: u32 },
}

impl DecodeError {
    /// Byte offset of the offending structure.
    pub fn offset(&self) -> usize {
        match *self {
            DecodeError::Truncated { offset, .. }
            | DecodeError::MessageLength { offset, .. }
            | DecodeError::AttributeLength { offset, .. }
            | DecodeError::MissingPadding { offset }
            | DecodeError::NonZeroPadding { offset }
            | DecodeError::TrailingBytes { offset, .. }
            | DecodeError::EchoedLength { offset, .. } => offset,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::Truncated {
                what,
                offset,
                need,
                have,
            } => {
                write!(
                    f,
                    "{what} at offset {offset} needs {need} bytes, {have} left"
                )
            }
            DecodeError::MessageLength {
                offset,
                len,
                available,
            } => write!(
                f,
                "message at offset {offset} has length {len}, {available} bytes available"
            ),
            DecodeError::AttributeLength {
                offset,
                len,
                available,
            } => write!(
                f,
                "attribute at offset {offset} has length {len}, {available} bytes available"
            ),
            DecodeError::MissingPadding { offset } => {
                write!(
                    f,
                    "attribute at offset {offset} lacks its alignment padding"
                )
            }
            DecodeError::NonZeroPadding { offset } => {
                write!(f, "non-zero padding at offset {offset}")
            }
            DecodeError::TrailingBytes { offset, count } => {
                write!(f, "{count} stray bytes at offset {offset}")
            }
            DecodeError::EchoedLength { offset, len } => write!(
                f,
                "error message at offset {offset} echoes a request of length {len} it cannot hold"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}
