//! The IOAM pre-allocated trace option in an IPv6 hop-by-hop header (RFC 9486 section 2 for
//! the option, RFC 9197 section 4.4 for the trace): option type 0x31, a reserved octet and
//! the IOAM option type (0, pre-allocated trace), then the trace header (Namespace-ID, NodeLen,
//! Flags, RemainingLen, IOAM-Trace-Type) and the node data list. Each transit node writes
//! NodeLen 4-octet words at the end of the free space and lowers RemainingLen by NodeLen; the
//! first node's data is therefore last.
//!
//! [`node_len`] is the node data size a trace type asks for: one 4-octet word for each of
//! bits 0-7 and 11-21, two for each of bits 8-10 (the wide fields), nothing for bit 22 (the
//! opaque state snapshot, variable) and bit 23 (reserved).
//!
//! Panic contract: [`Packet::new_unchecked`] never panics; on a view built with it the
//! accessors panic when the buffer is shorter than the option's announced length or than the
//! fixed part ([`OPTION_LEN_MIN`] octets of data). [`Packet::new_checked`] rejects a buffer
//! shorter than the announced length with [`Error::Truncated`] and an option too short for its
//! fixed part with [`Error::Malformed`]; after it no accessor or setter panics
//! ([`Packet::next_node`] answers `None` when the free space the header announces is not
//! there). [`Repr::emit`] panics on a buffer shorter than [`Repr::buffer_len`] and when the
//! data list would make the option longer than 255 octets.

use crate::error::{Error, Result};
use crate::field::{be16, be32, set_be16, set_be32};

/// The hop-by-hop option type of IOAM (RFC 9486 section 2: act 00, chg 1).
pub const OPTION_TYPE: u8 = 0x31;
/// The IOAM option type of a pre-allocated trace.
pub const PREALLOC_TRACE: u8 = 0;
/// Option data before the node data list: reserved, IOAM option type, 8 octets of trace
/// header.
pub const OPTION_LEN_MIN: usize = 10;
/// The most node data a trace can pre-allocate (Linux: IOAM6_TRACE_DATA_SIZE_MAX): an option's
/// 255 octets of data less the fixed part, rounded down to whole 4-octet words.
pub const TRACE_DATA_MAX: usize = 244;

/// The trace type bits counted as one 4-octet word (bits 0-7 and 11-21, bit 0 the most
/// significant of the 24).
const SHORT_FIELDS: u32 = 0xff_1ffc;
/// The wide fields (bits 8-10), two words each.
const WIDE_FIELDS: u32 = 0x00_e000;

mod field {
    pub const TYPE: usize = 0;
    pub const LEN: usize = 1;
    pub const IOAM_TYPE: usize = 3;
    pub const NAMESPACE: usize = 4;
    pub const NODE_LEN_FLAGS_REM: usize = 6;
    pub const TRACE_TYPE: usize = 8;
    pub const DATA: usize = 12;
}

/// Node data words (4 octets each) a node writes for `trace_type` (24 bits, bit 0 the most
/// significant).
pub fn node_len(trace_type: u32) -> u8 {
    let t = trace_type & 0x00ff_ffff;
    ((t & SHORT_FIELDS).count_ones() + 2 * (t & WIDE_FIELDS).count_ones()) as u8
}

/// A view of an IOAM pre-allocated trace option, from its option type octet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet { buffer };
        let len = p.buffer.as_ref().len();
        if len < 2 || len < p.option_len() {
            return Err(Error::Truncated);
        }
        if p.option_len() < 2 + OPTION_LEN_MIN {
            return Err(Error::Malformed);
        }
        Ok(p)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn option_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// The whole option in bytes, type and length octets included.
    pub fn option_len(&self) -> usize {
        2 + usize::from(self.buffer.as_ref()[field::LEN])
    }

    pub fn ioam_type(&self) -> u8 {
        self.buffer.as_ref()[field::IOAM_TYPE]
    }

    pub fn namespace_id(&self) -> u16 {
        be16(self.buffer.as_ref(), field::NAMESPACE)
    }

    fn node_len_flags_rem(&self) -> u16 {
        be16(self.buffer.as_ref(), field::NODE_LEN_FLAGS_REM)
    }

    /// Node data words each node writes.
    pub fn node_len(&self) -> u8 {
        (self.node_len_flags_rem() >> 11) as u8
    }

    /// The four flag bits; the first (0x8) is Overflow.
    pub fn flags(&self) -> u8 {
        ((self.node_len_flags_rem() >> 7) & 0x0f) as u8
    }

    pub fn overflow(&self) -> bool {
        self.flags() & 0x8 != 0
    }

    /// Free node data words left.
    pub fn remaining_len(&self) -> u8 {
        (self.node_len_flags_rem() & 0x7f) as u8
    }

    /// The 24-bit IOAM-Trace-Type (bit 0 the most significant).
    pub fn trace_type(&self) -> u32 {
        be32(self.buffer.as_ref(), field::TRACE_TYPE) >> 8
    }

    /// The node data list, free space first.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..self.option_len()]
    }

    /// Where in [`Packet::data`] the next node writes its `node_len` words: the last words of
    /// the free space. `None` when the free space is smaller than a node's data, or larger
    /// than the list (a malformed trace a transit node must not write into).
    pub fn next_node(&self) -> Option<core::ops::Range<usize>> {
        let rem = usize::from(self.remaining_len()) * 4;
        let node = usize::from(self.node_len()) * 4;
        (rem <= self.data().len() && node <= rem).then(|| rem - node..rem)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_node_len_flags_rem(&mut self, node_len: u8, flags: u8, rem: u8) {
        let v = (u16::from(node_len & 0x1f) << 11)
            | (u16::from(flags & 0x0f) << 7)
            | u16::from(rem & 0x7f);
        set_be16(self.buffer.as_mut(), field::NODE_LEN_FLAGS_REM, v);
    }

    pub fn set_namespace_id(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::NAMESPACE, v);
    }

    pub fn set_flags(&mut self, v: u8) {
        let (n, r) = (self.node_len(), self.remaining_len());
        self.set_node_len_flags_rem(n, v, r);
    }

    /// A node that finds no room sets Overflow and writes nothing (RFC 9197 section 4.4.1).
    pub fn set_overflow(&mut self) {
        let f = self.flags() | 0x8;
        self.set_flags(f);
    }

    pub fn set_remaining_len(&mut self, v: u8) {
        let (n, f) = (self.node_len(), self.flags());
        self.set_node_len_flags_rem(n, f, v);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.option_len();
        &mut self.buffer.as_mut()[field::DATA..end]
    }
}

/// An IOAM pre-allocated trace option by value, its node data list kept as bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    pub namespace_id: u16,
    pub node_len: u8,
    pub flags: u8,
    pub remaining_len: u8,
    pub trace_type: u32,
    pub data: &'a [u8],
}

impl<'a> Repr<'a> {
    /// A fresh trace as an encapsulating node pre-allocates it: `size` octets of zeroed
    /// space (a multiple of 4, at most [`TRACE_DATA_MAX`]), all of it free.
    pub fn prealloc(namespace_id: u16, trace_type: u32, zeros: &'a [u8]) -> Result<Repr<'a>> {
        if !zeros.len().is_multiple_of(4) || zeros.len() > TRACE_DATA_MAX {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            namespace_id,
            node_len: node_len(trace_type),
            flags: 0,
            remaining_len: (zeros.len() / 4) as u8,
            trace_type: trace_type & 0x00ff_ffff,
            data: zeros,
        })
    }

    /// [`Error::Unsupported`] for another option type or IOAM option type.
    pub fn parse(p: &Packet<&'a [u8]>) -> Result<Repr<'a>> {
        let b: &'a [u8] = p.buffer;
        let p = Packet::new_checked(b)?;
        if p.option_type() != OPTION_TYPE || p.ioam_type() != PREALLOC_TRACE {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            namespace_id: p.namespace_id(),
            node_len: p.node_len(),
            flags: p.flags(),
            remaining_len: p.remaining_len(),
            trace_type: p.trace_type(),
            data: &b[field::DATA..p.option_len()],
        })
    }

    pub fn buffer_len(&self) -> usize {
        field::DATA + self.data.len()
    }

    /// Writes the option; the reserved octets are zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let len = self.buffer_len();
        assert!(len - 2 <= usize::from(u8::MAX));
        {
            let b = p.buffer.as_mut();
            b[field::TYPE] = OPTION_TYPE;
            b[field::LEN] = (len - 2) as u8;
            b[2] = 0;
            b[field::IOAM_TYPE] = PREALLOC_TRACE;
            set_be32(b, field::TRACE_TYPE, self.trace_type << 8);
            b[field::DATA..len].copy_from_slice(self.data);
        }
        p.set_namespace_id(self.namespace_id);
        p.set_node_len_flags_rem(self.node_len, self.flags, self.remaining_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// scapy 2.8's `IPv6ExtHdrHopByHop(options=[IOAM option])` is not available, so these
    /// bytes follow RFC 9197 figure 4 by hand: namespace 123, trace type 0x800000 (bit 0:
    /// hop limit and node id), 12 octets pre-allocated, one node written.
    const TRACE: [u8; 24] = [
        0x31, 22, 0, 0, //
        0, 123, 0x08, 0x02, // NodeLen 1, flags 0, RemainingLen 2
        0x80, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, 63, 0, 0, 1,
    ];

    #[test]
    fn parse_and_reemit() {
        let p = Packet::new_checked(&TRACE[..]).unwrap();
        assert_eq!(
            (p.namespace_id(), p.node_len(), p.flags(), p.remaining_len()),
            (123, 1, 0, 2)
        );
        assert_eq!(p.trace_type(), 0x80_0000);
        assert_eq!(p.next_node(), Some(4..8));
        let r = Repr::parse(&p).unwrap();
        let mut out = [0u8; 24];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, TRACE);
    }

    #[test]
    fn node_lengths() {
        assert_eq!(node_len(0x80_0000), 1);
        assert_eq!(node_len(0xff_0000), 8);
        assert_eq!(node_len(0x00_8000), 2);
        assert_eq!(node_len(0x00_e000), 6);
        // Bit 22 (opaque state snapshot) and 23 (reserved) add nothing.
        assert_eq!(node_len(0x00_0003), 0);
        assert_eq!(node_len(0x00_0004), 1);
    }

    #[test]
    fn prealloc_then_a_transit_node() {
        let zeros = [0u8; 12];
        let r = Repr::prealloc(1, 0xc0_0000, &zeros).unwrap();
        assert_eq!((r.node_len, r.remaining_len), (2, 3));
        let mut out = [0u8; 24];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        let mut p = Packet::new_checked(&mut out[..]).unwrap();
        let slot = p.next_node().unwrap();
        assert_eq!(slot, 4..12);
        p.data_mut()[slot].fill(0xaa);
        p.set_remaining_len(1);
        assert_eq!(p.next_node(), None);
        p.set_overflow();
        assert!(p.overflow());
        assert_eq!(p.remaining_len(), 1);
        assert_eq!(Repr::prealloc(1, 1, &[0; 6]), Err(Error::Malformed));
    }

    #[test]
    fn lengths() {
        assert_eq!(Packet::new_checked(&TRACE[..23]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&TRACE[..1]), Err(Error::Truncated));
        let mut b = TRACE;
        b[1] = 9;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::Malformed));
        b[1] = 22;
        b[7] = 0x7f;
        assert_eq!(Packet::new_checked(&b[..]).unwrap().next_node(), None);
    }
}
