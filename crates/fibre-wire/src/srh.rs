//! The IPv6 Segment Routing Header (RFC 8754): a routing header of type 4 carrying a segment
//! list, segments left, last entry, flags, a tag, and TLVs (Pad1, PadN, HMAC) after the list.
//!
//! The segment list is stored in reverse: `segment(0)` is the last segment of the path and
//! `segment(last_entry)` the first. [`Packet::validate`] applies the rules Linux applies to an
//! SRH it is given (seg6_validate_srh in net/ipv6/seg6.c: the type, the length in bytes, last
//! entry within the header, segments left within the list, TLVs that tile the rest exactly),
//! so a control plane and a data path can refuse the same headers.
//!
//! Panic contract: [`Packet::new_unchecked`] never panics; on a view built with it the
//! accessors panic when the buffer is shorter than 8 bytes, than the length the header
//! announces, or than the segment list its last entry announces. [`Packet::new_checked`]
//! rejects the first two with [`Error::Truncated`] and the third with [`Error::Malformed`];
//! after it no accessor or setter panics ([`Packet::segment`] and [`Packet::set_segment`] take
//! any index and answer `None`/[`Error::Malformed`] past the list). [`Tlvs`] never panics.
//! [`Repr::emit`] panics on a buffer shorter than [`Repr::buffer_len`], and when the header
//! would not be a multiple of 8 bytes or longer than 2048 (a caller's mistake).

use core::net::Ipv6Addr;

use crate::error::{Error, Result};
use crate::field::{array, be16, be32, set_be16};

/// The routing type of an SRH.
pub const ROUTING_TYPE: u8 = 4;
/// The fixed part, before the segment list.
pub const HEADER_LEN: usize = 8;
/// One segment: an IPv6 address.
pub const SEGMENT_LEN: usize = 16;

/// The flags bit Linux sets when an HMAC TLV follows (SR6_FLAG1_HMAC).
pub const FLAG_HMAC: u8 = 1 << 3;

/// TLV types (RFC 8754 section 2.1; the IANA registry "Segment Routing Header TLVs").
pub mod tlv {
    /// One byte of padding, with no length byte.
    pub const PAD1: u8 = 0;
    pub const PADN: u8 = 4;
    pub const HMAC: u8 = 5;
}

/// The HMAC TLV's fixed part after its type and length: the D flag and reserved bits (2
/// bytes), then the key id (4 bytes).
const HMAC_FIXED: usize = 6;
/// The HMAC field's bytes (SEG6_HMAC_FIELD_LEN): a digest, truncated or zero-padded to it.
pub const HMAC_FIELD_LEN: usize = 32;
/// The whole HMAC TLV as Linux writes and reads it: type, length 38, the fixed part, the
/// HMAC field.
pub const HMAC_TLV_LEN: usize = 2 + HMAC_FIXED + HMAC_FIELD_LEN;
/// Where the key id and the HMAC field start in the HMAC TLV.
pub const HMAC_KEY_ID_AT: usize = 4;
pub const HMAC_FIELD_AT: usize = 2 + HMAC_FIXED;

mod field {
    pub const NEXT_HEADER: usize = 0;
    pub const HDR_EXT_LEN: usize = 1;
    pub const ROUTING_TYPE: usize = 2;
    pub const SEGMENTS_LEFT: usize = 3;
    pub const LAST_ENTRY: usize = 4;
    pub const FLAGS: usize = 5;
    pub const TAG: usize = 6;
}

/// A view of a segment routing header.
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
        // The first comparison guards the reads of the length bytes in the others.
        if len < HEADER_LEN || len < p.header_len() {
            return Err(Error::Truncated);
        }
        if p.tlv_offset() > p.header_len() {
            return Err(Error::Malformed);
        }
        Ok(p)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    /// The header's whole length in bytes: (Hdr Ext Len + 1) * 8.
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[field::HDR_EXT_LEN]) + 1) * 8
    }

    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[field::ROUTING_TYPE]
    }

    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[field::SEGMENTS_LEFT]
    }

    /// The index of the last element of the segment list (Linux: `first_segment`).
    pub fn last_entry(&self) -> u8 {
        self.buffer.as_ref()[field::LAST_ENTRY]
    }

    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    pub fn tag(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TAG)
    }

    /// How many segments the list holds.
    pub fn segment_count(&self) -> usize {
        usize::from(self.last_entry()) + 1
    }

    fn tlv_offset(&self) -> usize {
        HEADER_LEN + self.segment_count() * SEGMENT_LEN
    }

    /// Segment `i` of the list (0 is the path's last), `None` past the last entry.
    pub fn segment(&self, i: usize) -> Option<Ipv6Addr> {
        (i < self.segment_count())
            .then(|| Ipv6Addr::from(array::<16>(self.buffer.as_ref(), HEADER_LEN + i * 16)))
    }

    /// The segment list's bytes, `segment(0)` first.
    pub fn segment_list(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.tlv_offset()]
    }

    /// The bytes after the segment list, up to the header's end.
    pub fn tlv_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tlv_offset()..self.header_len()]
    }

    pub fn tlvs(&self) -> Tlvs<'_> {
        Tlvs::new(self.tlv_bytes())
    }

    /// The key id of the first HMAC TLV, if one is there.
    pub fn hmac_key_id(&self) -> Option<u32> {
        self.tlvs()
            .map_while(|t| t.ok())
            .find_map(|t| t.hmac_key_id())
    }

    /// Where the HMAC TLV Linux reads (seg6_get_tlv_hmac) starts in the header: with the HMAC
    /// flag set, a header long enough for the list and 40 more bytes, whose last
    /// [`HMAC_TLV_LEN`] bytes are a TLV of type HMAC and length 38. `None` otherwise: Linux
    /// then treats the header as carrying no HMAC, whatever its TLVs hold.
    pub fn hmac_tlv_at(&self) -> Option<usize> {
        let ext = usize::from(self.buffer.as_ref()[field::HDR_EXT_LEN]);
        if ext < self.segment_count() * 2 + HMAC_TLV_LEN / 8 || self.flags() & FLAG_HMAC == 0 {
            return None;
        }
        let at = self.header_len() - HMAC_TLV_LEN;
        let b = self.buffer.as_ref().get(at..at + 2)?;
        (b[0] == tlv::HMAC && usize::from(b[1]) == HMAC_TLV_LEN - 2).then_some(at)
    }

    /// The checks Linux makes before it accepts an SRH: routing type 4, a header of exactly
    /// `len` bytes (the attribute or extension header it came in), a last entry that fits in
    /// the header, segments left at most the list's length (beyond it for an SRH whose first
    /// segment is carried in the IPv6 destination only, `reduced`), and TLVs that tile the
    /// bytes after the list. [`Error::Malformed`] otherwise.
    pub fn validate(&self, len: usize, reduced: bool) -> Result<()> {
        let ext = usize::from(self.buffer.as_ref()[field::HDR_EXT_LEN]);
        let last = usize::from(self.last_entry());
        let left = usize::from(self.segments_left());
        let ok = self.routing_type() == ROUTING_TYPE
            && self.header_len() == len
            && (reduced || left <= last)
            && (ext / 2).checked_sub(1).is_some_and(|max| last <= max)
            && left <= last + 1
            && Tlvs::new(self.tlv_bytes()).all(|t| t.is_ok());
        if ok {
            Ok(())
        } else {
            Err(Error::Malformed)
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v;
    }

    /// Forwarding along the list decrements it.
    pub fn set_segments_left(&mut self, v: u8) {
        self.buffer.as_mut()[field::SEGMENTS_LEFT] = v;
    }

    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }

    pub fn set_tag(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::TAG, v);
    }

    /// Writes segment `i`; [`Error::Malformed`] past the last entry.
    pub fn set_segment(&mut self, i: usize, addr: Ipv6Addr) -> Result<()> {
        if i >= self.segment_count() {
            return Err(Error::Malformed);
        }
        let at = HEADER_LEN + i * SEGMENT_LEN;
        self.buffer.as_mut()[at..at + SEGMENT_LEN].copy_from_slice(&addr.octets());
        Ok(())
    }
}

/// One TLV after the segment list. Pad1 has no length byte and empty `data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    pub kind: u8,
    pub data: &'a [u8],
}

impl Tlv<'_> {
    /// Bytes the TLV takes: 1 for Pad1, 2 + data otherwise.
    pub fn wire_len(&self) -> usize {
        if self.kind == tlv::PAD1 {
            1
        } else {
            2 + self.data.len()
        }
    }

    /// An HMAC TLV's key id (`None` for other types or one too short to hold it).
    pub fn hmac_key_id(&self) -> Option<u32> {
        (self.kind == tlv::HMAC && self.data.len() >= HMAC_FIXED).then(|| be32(self.data, 2))
    }
}

/// The TLVs of a byte region, in order. A TLV overrunning the region ends the iteration with
/// [`Error::Malformed`]; nothing follows an error.
#[derive(Debug, Clone)]
pub struct Tlvs<'a> {
    rest: &'a [u8],
}

impl<'a> Tlvs<'a> {
    pub fn new(bytes: &'a [u8]) -> Tlvs<'a> {
        Tlvs { rest: bytes }
    }
}

impl<'a> Iterator for Tlvs<'a> {
    type Item = Result<Tlv<'a>>;

    fn next(&mut self) -> Option<Result<Tlv<'a>>> {
        let (&kind, after) = self.rest.split_first()?;
        if kind == tlv::PAD1 {
            self.rest = after;
            return Some(Ok(Tlv { kind, data: &[] }));
        }
        let Some((&len, after)) = after.split_first() else {
            self.rest = &[];
            return Some(Err(Error::Malformed));
        };
        let len = usize::from(len);
        if len > after.len() {
            self.rest = &[];
            return Some(Err(Error::Malformed));
        }
        self.rest = &after[len..];
        Some(Ok(Tlv {
            kind,
            data: &after[..len],
        }))
    }
}

/// A segment routing header by value: the segment list and TLVs kept as bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    pub next_header: u8,
    pub segments_left: u8,
    pub last_entry: u8,
    pub flags: u8,
    pub tag: u16,
    /// `last_entry + 1` segments of 16 bytes, `segment(0)` first.
    pub segments: &'a [u8],
    pub tlvs: &'a [u8],
}

impl<'a> Repr<'a> {
    /// [`Error::Unsupported`] for a routing header of another type.
    pub fn parse(p: &Packet<&'a [u8]>) -> Result<Repr<'a>> {
        let b: &'a [u8] = p.buffer;
        let p = Packet::new_checked(b)?;
        if p.routing_type() != ROUTING_TYPE {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            next_header: p.next_header(),
            segments_left: p.segments_left(),
            last_entry: p.last_entry(),
            flags: p.flags(),
            tag: p.tag(),
            segments: &b[HEADER_LEN..p.tlv_offset()],
            tlvs: &b[p.tlv_offset()..p.header_len()],
        })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.segments.len() + self.tlvs.len()
    }

    /// Segment `i` (0 is the path's last), `None` past the list.
    pub fn segment(&self, i: usize) -> Option<Ipv6Addr> {
        let s = self.segments.get(i * SEGMENT_LEN..(i + 1) * SEGMENT_LEN)?;
        Some(Ipv6Addr::from(array::<16>(s, 0)))
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let len = self.buffer_len();
        assert!(len.is_multiple_of(8) && len <= 256 * 8);
        let b = p.buffer.as_mut();
        b[field::NEXT_HEADER] = self.next_header;
        b[field::HDR_EXT_LEN] = (len / 8 - 1) as u8;
        b[field::ROUTING_TYPE] = ROUTING_TYPE;
        b[field::SEGMENTS_LEFT] = self.segments_left;
        b[field::LAST_ENTRY] = self.last_entry;
        b[field::FLAGS] = self.flags;
        set_be16(b, field::TAG, self.tag);
        let tlv_at = HEADER_LEN + self.segments.len();
        b[HEADER_LEN..tlv_at].copy_from_slice(self.segments);
        b[tlv_at..len].copy_from_slice(self.tlvs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// scapy: `IPv6ExtHdrSegmentRouting(nh=6, addresses=["2001:db8:3::1", "2001:db8:3::2"],
    /// segleft=1)`, as in tests/frames/ipv6_srh_tcp.bin.
    const SCAPY: [u8; 40] = [
        6, 4, 4, 1, 1, 0, 0, 0, //
        0x20, 0x01, 0x0d, 0xb8, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
        0x20, 0x01, 0x0d, 0xb8, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
    ];

    #[test]
    fn scapy_header_reads_and_reemits() {
        let p = Packet::new_checked(&SCAPY[..]).unwrap();
        assert_eq!(
            (p.next_header(), p.header_len(), p.segment_count()),
            (6, 40, 2)
        );
        assert_eq!(p.segment(0), Some("2001:db8:3::1".parse().unwrap()));
        assert_eq!(p.segment(1), Some("2001:db8:3::2".parse().unwrap()));
        assert_eq!(p.segment(2), None);
        p.validate(40, false).unwrap();
        let r = Repr::parse(&p).unwrap();
        let mut out = [0u8; 40];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, SCAPY);
    }

    #[test]
    fn hmac_tlv_as_iproute2_builds_it() {
        // One segment, then an HMAC TLV of 40 bytes: type 5, length 38, key id 7.
        let mut b = [0u8; 64];
        b[1] = 7;
        b[2] = ROUTING_TYPE;
        b[5] = FLAG_HMAC;
        b[24] = tlv::HMAC;
        b[25] = 38;
        b[28..32].copy_from_slice(&7u32.to_be_bytes());
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.hmac_key_id(), Some(7));
        assert_eq!(p.hmac_tlv_at(), Some(24));
        p.validate(64, false).unwrap();
        assert_eq!(p.validate(72, false), Err(Error::Malformed));
        b[5] = 0;
        assert_eq!(Packet::new_checked(&b[..]).unwrap().hmac_tlv_at(), None);
        b[5] = FLAG_HMAC;
        b[25] = 37;
        assert_eq!(Packet::new_checked(&b[..]).unwrap().hmac_tlv_at(), None);
    }

    #[test]
    fn linux_rules() {
        let mut b = SCAPY;
        b[3] = 2;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.validate(40, false), Err(Error::Malformed));
        assert_eq!(p.validate(40, true), Ok(()));
        b[3] = 3;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.validate(40, true), Err(Error::Malformed));
        let mut b = SCAPY;
        b[2] = 3;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.validate(40, false), Err(Error::Malformed));
        assert_eq!(Repr::parse(&p), Err(Error::Unsupported));
        // A PadN TLV that overruns the header.
        let mut b = [0u8; 32];
        b[1] = 3;
        b[2] = ROUTING_TYPE;
        b[24] = tlv::PADN;
        b[25] = 7;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.validate(32, false), Err(Error::Malformed));
        b[25] = 6;
        assert_eq!(
            Packet::new_checked(&b[..]).unwrap().validate(32, false),
            Ok(())
        );
    }

    #[test]
    fn lengths() {
        assert_eq!(Packet::new_checked(&SCAPY[..7]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&SCAPY[..39]), Err(Error::Truncated));
        let mut b = SCAPY;
        b[4] = 2;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::Malformed));
    }

    #[test]
    fn setters() {
        let mut b = SCAPY;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_segments_left(0);
        p.set_segment(1, "2001:db8::9".parse().unwrap()).unwrap();
        assert_eq!(
            p.set_segment(2, Ipv6Addr::UNSPECIFIED),
            Err(Error::Malformed)
        );
        assert_eq!(p.segments_left(), 0);
        assert_eq!(p.segment(1), Some("2001:db8::9".parse().unwrap()));
    }
}
