//! IPv4 options (RFC 791 section 3.1, RFC 2113 for Router Alert), read one at a time from an
//! IPv4 header's option bytes.
//!
//! The iterator stops after End of Option List (the bytes after it are padding) or at the
//! first malformed option, which it yields as an [`Error::Malformed`]; [`Options::offset`] then
//! tells where it starts, for an ICMP parameter problem's pointer (add the 20-byte fixed header).
//! Options of kinds not listed here come out as [`Ipv4Option::Unknown`] with their bytes.
//!
//! Panic contract: nothing here panics. [`Ipv4Option::emit`] panics on a buffer shorter than
//! [`Ipv4Option::buffer_len`], or when data longer than an option can hold (253 bytes) is given.

use crate::error::{Error, Result};
use crate::field::OptionWalk;

/// Option kinds: the copied flag, class and number of RFC 791 in one byte.
pub mod kind {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const RECORD_ROUTE: u8 = 7;
    pub const TIMESTAMP: u8 = 68;
    pub const LSRR: u8 = 131;
    pub const SSRR: u8 = 137;
    pub const ROUTER_ALERT: u8 = 148;
}

/// One option; the data fields borrow the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv4Option<'a> {
    EndOfList,
    NoOperation,
    /// `pointer` is 1-based from the option's start, as on the wire; `data` the route slots.
    RecordRoute {
        pointer: u8,
        data: &'a [u8],
    },
    /// The overflow count and flags share a byte: 4 bits each.
    Timestamp {
        pointer: u8,
        overflow: u8,
        flags: u8,
        data: &'a [u8],
    },
    LooseSourceRoute {
        pointer: u8,
        data: &'a [u8],
    },
    StrictSourceRoute {
        pointer: u8,
        data: &'a [u8],
    },
    /// RFC 2113: the value 0 asks every router to examine the packet.
    RouterAlert {
        value: u16,
    },
    /// Any other kind, with the bytes after its length byte.
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

impl<'a> Ipv4Option<'a> {
    /// The option's type byte.
    pub fn kind(&self) -> u8 {
        match self {
            Ipv4Option::EndOfList => kind::END,
            Ipv4Option::NoOperation => kind::NOP,
            Ipv4Option::RecordRoute { .. } => kind::RECORD_ROUTE,
            Ipv4Option::Timestamp { .. } => kind::TIMESTAMP,
            Ipv4Option::LooseSourceRoute { .. } => kind::LSRR,
            Ipv4Option::StrictSourceRoute { .. } => kind::SSRR,
            Ipv4Option::RouterAlert { .. } => kind::ROUTER_ALERT,
            Ipv4Option::Unknown { kind, .. } => *kind,
        }
    }

    /// The copied flag: whether fragmentation repeats the option in every fragment.
    pub fn copied(&self) -> bool {
        self.kind() & 0x80 != 0
    }

    /// Reads the option at the start of `b`, and its length.
    pub fn parse(b: &'a [u8]) -> Result<(Ipv4Option<'a>, usize)> {
        let k = *b.first().ok_or(Error::Truncated)?;
        match k {
            kind::END => return Ok((Ipv4Option::EndOfList, 1)),
            kind::NOP => return Ok((Ipv4Option::NoOperation, 1)),
            _ => {}
        }
        let len = usize::from(*b.get(1).ok_or(Error::Malformed)?);
        if len < 2 || len > b.len() {
            return Err(Error::Malformed);
        }
        let body = &b[2..len];
        let opt = match k {
            kind::RECORD_ROUTE | kind::LSRR | kind::SSRR => {
                let (&pointer, data) = body.split_first().ok_or(Error::Malformed)?;
                match k {
                    kind::RECORD_ROUTE => Ipv4Option::RecordRoute { pointer, data },
                    kind::LSRR => Ipv4Option::LooseSourceRoute { pointer, data },
                    _ => Ipv4Option::StrictSourceRoute { pointer, data },
                }
            }
            kind::TIMESTAMP => match body {
                [pointer, oflw_flags, data @ ..] => Ipv4Option::Timestamp {
                    pointer: *pointer,
                    overflow: oflw_flags >> 4,
                    flags: oflw_flags & 0x0F,
                    data,
                },
                _ => return Err(Error::Malformed),
            },
            kind::ROUTER_ALERT => match body {
                [hi, lo] => Ipv4Option::RouterAlert {
                    value: u16::from_be_bytes([*hi, *lo]),
                },
                _ => return Err(Error::Malformed),
            },
            _ => Ipv4Option::Unknown {
                kind: k,
                data: body,
            },
        };
        Ok((opt, len))
    }

    fn data_and_head(&self) -> (&'a [u8], usize) {
        match *self {
            Ipv4Option::EndOfList | Ipv4Option::NoOperation => (&[], 1),
            Ipv4Option::RecordRoute { data, .. }
            | Ipv4Option::LooseSourceRoute { data, .. }
            | Ipv4Option::StrictSourceRoute { data, .. } => (data, 3),
            Ipv4Option::Timestamp { data, .. } => (data, 4),
            Ipv4Option::RouterAlert { .. } => (&[], 4),
            Ipv4Option::Unknown { data, .. } => (data, 2),
        }
    }

    pub fn buffer_len(&self) -> usize {
        let (data, head) = self.data_and_head();
        head + data.len()
    }

    /// Writes the option at the start of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        let len = self.buffer_len();
        b[0] = self.kind();
        if len == 1 {
            return;
        }
        b[1] = u8::try_from(len).unwrap_or_else(|_| panic!("IPv4 option of {len} bytes"));
        match *self {
            Ipv4Option::RecordRoute { pointer, .. }
            | Ipv4Option::LooseSourceRoute { pointer, .. }
            | Ipv4Option::StrictSourceRoute { pointer, .. } => b[2] = pointer,
            Ipv4Option::Timestamp {
                pointer,
                overflow,
                flags,
                ..
            } => {
                b[2] = pointer;
                b[3] = (overflow << 4) | (flags & 0x0F);
            }
            Ipv4Option::RouterAlert { value } => b[2..4].copy_from_slice(&value.to_be_bytes()),
            _ => {}
        }
        let (data, head) = self.data_and_head();
        b[head..len].copy_from_slice(data);
    }
}

/// The options of one header, in order; the walk ends after End of Option List.
pub type Options<'a> = OptionWalk<'a, Ipv4Option<'a>>;

impl<'a> Options<'a> {
    pub fn new(bytes: &'a [u8]) -> Options<'a> {
        OptionWalk::walk(bytes, Ipv4Option::parse, |o| *o == Ipv4Option::EndOfList)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind() {
        // NOP; RR with room for 2 addresses, one filled; TS (timestamps only) with one entry;
        // LSRR and SSRR with one hop; Router Alert; an unknown kind 0x99 with 2 data bytes;
        // EOL and padding that must not be read.
        let b: &[u8] = &[
            1, 7, 11, 8, 192, 0, 2, 1, 0, 0, 0, 0, 68, 8, 9, 0x10, 0, 0, 0, 42, 131, 7, 4, 10, 0,
            0, 1, 137, 7, 4, 10, 0, 0, 2, 148, 4, 0, 0, 0x99, 4, 0xab, 0xcd, 0, 0xee,
        ];
        let opts: Vec<_> = Options::new(b).map(|o| o.unwrap()).collect();
        assert_eq!(
            opts,
            [
                Ipv4Option::NoOperation,
                Ipv4Option::RecordRoute {
                    pointer: 8,
                    data: &[192, 0, 2, 1, 0, 0, 0, 0]
                },
                Ipv4Option::Timestamp {
                    pointer: 9,
                    overflow: 1,
                    flags: 0,
                    data: &[0, 0, 0, 42]
                },
                Ipv4Option::LooseSourceRoute {
                    pointer: 4,
                    data: &[10, 0, 0, 1]
                },
                Ipv4Option::StrictSourceRoute {
                    pointer: 4,
                    data: &[10, 0, 0, 2]
                },
                Ipv4Option::RouterAlert { value: 0 },
                Ipv4Option::Unknown {
                    kind: 0x99,
                    data: &[0xab, 0xcd]
                },
                Ipv4Option::EndOfList,
            ]
        );
        let mut out = vec![0u8; b.len()];
        let mut at = 0;
        for o in &opts {
            o.emit(&mut out[at..]);
            at += o.buffer_len();
        }
        out[at..].copy_from_slice(&b[at..]);
        assert_eq!(out, b);
        assert!(opts[3].copied() && !opts[1].copied());
    }

    #[test]
    fn malformed_options_stop_the_walk_where_they_start() {
        for bad in [
            &[1u8, 7, 1][..],
            &[1, 7, 40, 4],
            &[1, 148, 3, 0],
            &[1, 68, 3, 1],
            &[1, 0x99],
        ] {
            let mut it = Options::new(bad);
            assert_eq!(it.next(), Some(Ok(Ipv4Option::NoOperation)));
            assert_eq!(it.next(), Some(Err(Error::Malformed)), "{bad:?}");
            assert_eq!(it.offset(), 1);
            assert_eq!(it.next(), None);
        }
    }
}
