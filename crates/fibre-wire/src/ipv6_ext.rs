//! IPv6 extension headers (RFC 8200 section 4) and the walk along their chain to the
//! upper-layer protocol.
//!
//! [`walk`] follows hop-by-hop, routing, fragment and destination-options headers, at most
//! [`MAX_EXT_HEADERS`] of them, and stops at the first other protocol: an upper layer, "no
//! next header", or AH and ESP, which it reports as the chain's end (ESP's payload is
//! encrypted; what follows AH is not walked here). It also stops after a fragment header whose
//! offset is not zero, as what follows is the middle of the original packet.
//! [`Header`] views the three headers that share the "length in 8-octet units, not counting the
//! first 8" encoding, [`Fragment`] the fixed 8-byte fragment header, and [`Options`] iterates
//! the TLV options of hop-by-hop and destination-options headers.
//!
//! Panic contract: `new_unchecked` never panics; the accessors of a view built with it panic
//! when the buffer is shorter than the header (8 bytes, or the length its second byte
//! announces), which `new_checked` rejects with [`Error::Truncated`]; after it nothing panics.
//! [`walk`] and the [`Options`] iterator never panic. The `emit`s panic on a buffer shorter
//! than their `buffer_len`, and [`OptionsRepr::emit`]/[`RoutingRepr::emit`] also when the
//! header would not be a multiple of 8 bytes or longer than 2048 (a caller's mistake).

use crate::consts::ip_proto;
use crate::error::{Error, Result};
use crate::field::{be16, be32, set_be16, set_be32, OptionWalk};

/// The most extension headers [`walk`] follows before it gives up with [`Error::Unsupported`].
/// RFC 8200 section 4.1 recommends each header at most once, destination options twice: six
/// headers, AH and ESP included. Eight leaves room for a little more and bounds the work an
/// attacker's chain of tiny headers can cause per packet.
pub const MAX_EXT_HEADERS: usize = 8;

/// The minimum and unit of the headers viewed by [`Header`], and the fragment header's size.
pub const UNIT: usize = 8;

/// The routing type of the segment routing header (RFC 8754).
pub const ROUTING_SRH: u8 = 4;

/// The headers [`walk`] follows.
pub fn is_walked(next_header: u8) -> bool {
    matches!(
        next_header,
        ip_proto::HOP_BY_HOP
            | ip_proto::IPV6_ROUTING
            | ip_proto::IPV6_FRAGMENT
            | ip_proto::IPV6_DEST_OPTS
    )
}

/// A view of a hop-by-hop, destination-options or routing header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    pub fn new_unchecked(buffer: T) -> Header<T> {
        Header { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Header<T>> {
        let h = Header { buffer };
        let len = h.buffer.as_ref().len();
        // The first comparison guards the read of the length byte in the second.
        if len < UNIT || len < h.header_len() {
            return Err(Error::Truncated);
        }
        Ok(h)
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// The header's whole length in bytes.
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[1]) + 1) * UNIT
    }

    /// The bytes after the next-header and length bytes: options, or a routing header's type,
    /// segments left and data.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[2..self.header_len()]
    }

    /// Routing headers only.
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[2]
    }

    /// Routing headers only.
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[3]
    }

    /// Hop-by-hop and destination-options headers only.
    pub fn options(&self) -> Options<'_> {
        Options::new(self.data())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Writes the next header and the length byte for a header of `header_len` bytes (a
    /// multiple of 8, at most 2048).
    pub fn set_head(&mut self, next_header: u8, header_len: usize) {
        assert!(header_len.is_multiple_of(UNIT) && (UNIT..=256 * UNIT).contains(&header_len));
        let b = self.buffer.as_mut();
        b[0] = next_header;
        b[1] = (header_len / UNIT - 1) as u8;
    }

    /// Routing headers only: forwarding through a segment list decrements it.
    pub fn set_segments_left(&mut self, v: u8) {
        self.buffer.as_mut()[3] = v;
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[2..end]
    }
}

/// A hop-by-hop or destination-options header by value: its options kept as bytes (padding
/// included), read with [`Options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionsRepr<'a> {
    pub next_header: u8,
    pub options: &'a [u8],
}

impl<'a> OptionsRepr<'a> {
    pub fn parse(header: &Header<&'a [u8]>) -> Result<OptionsRepr<'a>> {
        let b: &'a [u8] = header.buffer;
        let h = Header::new_checked(b)?;
        Ok(OptionsRepr {
            next_header: h.next_header(),
            options: &b[2..h.header_len()],
        })
    }

    pub fn buffer_len(&self) -> usize {
        2 + self.options.len()
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Header<T>) {
        header.set_head(self.next_header, self.buffer_len());
        header.data_mut().copy_from_slice(self.options);
    }
}

/// A routing header by value (type 4 is the segment routing header of RFC 8754, whose
/// segments and TLVs are in `data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingRepr<'a> {
    pub next_header: u8,
    pub routing_type: u8,
    pub segments_left: u8,
    /// The type-specific data after segments-left.
    pub data: &'a [u8],
}

impl<'a> RoutingRepr<'a> {
    pub fn parse(header: &Header<&'a [u8]>) -> Result<RoutingRepr<'a>> {
        let b: &'a [u8] = header.buffer;
        let h = Header::new_checked(b)?;
        Ok(RoutingRepr {
            next_header: h.next_header(),
            routing_type: h.routing_type(),
            segments_left: h.segments_left(),
            data: &b[4..h.header_len()],
        })
    }

    pub fn buffer_len(&self) -> usize {
        4 + self.data.len()
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Header<T>) {
        header.set_head(self.next_header, self.buffer_len());
        let d = header.data_mut();
        d[0] = self.routing_type;
        d[1] = self.segments_left;
        d[2..].copy_from_slice(self.data);
    }
}

/// A view of a fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Fragment<T> {
    pub fn new_unchecked(buffer: T) -> Fragment<T> {
        Fragment { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Fragment<T>> {
        if buffer.as_ref().len() < UNIT {
            return Err(Error::Truncated);
        }
        Ok(Fragment { buffer })
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// In 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        be16(self.buffer.as_ref(), 2) >> 3
    }

    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), 2) & 1 != 0
    }

    pub fn ident(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Fragment<T> {
    /// Writes every field, the reserved ones as zero.
    pub fn set_fields(&mut self, next_header: u8, frag_offset: u16, more_frags: bool, ident: u32) {
        let b = self.buffer.as_mut();
        b[0] = next_header;
        b[1] = 0;
        set_be16(b, 2, (frag_offset << 3) | u16::from(more_frags));
        set_be32(b, 4, ident);
    }
}

/// A fragment header by value. The reserved bits are ignored on receipt (RFC 8200 section
/// 4.5) and emitted as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentRepr {
    pub next_header: u8,
    /// In 8-byte units, 13 bits.
    pub frag_offset: u16,
    pub more_frags: bool,
    pub ident: u32,
}

impl FragmentRepr {
    pub fn parse<T: AsRef<[u8]>>(f: &Fragment<T>) -> Result<FragmentRepr> {
        if f.buffer.as_ref().len() < UNIT {
            return Err(Error::Truncated);
        }
        Ok(FragmentRepr {
            next_header: f.next_header(),
            frag_offset: f.frag_offset(),
            more_frags: f.more_frags(),
            ident: f.ident(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        UNIT
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, f: &mut Fragment<T>) {
        f.set_fields(
            self.next_header,
            self.frag_offset,
            self.more_frags,
            self.ident,
        );
    }
}

/// One extension header met by [`walk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtHeader<'a> {
    /// The header's own protocol number (hop-by-hop, routing, fragment, destination options).
    pub kind: u8,
    /// Its offset from the start of the IPv6 payload.
    pub offset: usize,
    /// The whole header, to view with [`Header`] or [`Fragment`].
    pub bytes: &'a [u8],
}

/// Where the extension-header chain ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChainEnd {
    /// The upper-layer protocol (or AH, ESP, "no next header").
    pub protocol: u8,
    /// Its offset from the start of the IPv6 payload.
    pub offset: usize,
    /// How many extension headers came before it.
    pub headers: usize,
    /// A fragment header with a non-zero offset was met: the bytes at `offset` are the middle
    /// of the original packet, not the upper-layer header.
    pub later_fragment: bool,
    /// The offset of the fragment header, if there is one.
    pub fragment_at: Option<usize>,
}

/// The extension headers of one packet, in order; after the iterator returns `None`,
/// [`Chain::end`] says where the upper layer starts.
#[derive(Debug, Clone)]
pub struct Chain<'a> {
    payload: &'a [u8],
    end: ChainEnd,
    done: bool,
}

impl<'a> Chain<'a> {
    /// `next_header` is the IPv6 header's, `payload` the IPv6 payload.
    pub fn new(next_header: u8, payload: &'a [u8]) -> Chain<'a> {
        Chain {
            payload,
            end: ChainEnd {
                protocol: next_header,
                ..ChainEnd::default()
            },
            done: false,
        }
    }

    /// Where the walk stands: the chain's end once the iterator is exhausted without error.
    pub fn end(&self) -> ChainEnd {
        self.end
    }

    fn step(&mut self) -> Result<Option<ExtHeader<'a>>> {
        let kind = self.end.protocol;
        if self.end.later_fragment || !is_walked(kind) {
            return Ok(None);
        }
        if kind == ip_proto::HOP_BY_HOP && self.end.headers != 0 {
            // RFC 8200 section 4.3: only immediately after the IPv6 header.
            return Err(Error::Malformed);
        }
        if self.end.headers == MAX_EXT_HEADERS {
            return Err(Error::Unsupported);
        }
        let offset = self.end.offset;
        let rest = self.payload.get(offset..).ok_or(Error::Truncated)?;
        let (next, len) = if kind == ip_proto::IPV6_FRAGMENT {
            let f = Fragment::new_checked(rest)?;
            self.end.later_fragment = f.frag_offset() != 0;
            self.end.fragment_at = Some(offset);
            (f.next_header(), UNIT)
        } else {
            let h = Header::new_checked(rest)?;
            (h.next_header(), h.header_len())
        };
        self.end = ChainEnd {
            protocol: next,
            offset: offset + len,
            headers: self.end.headers + 1,
            ..self.end
        };
        Ok(Some(ExtHeader {
            kind,
            offset,
            bytes: &rest[..len],
        }))
    }
}

impl<'a> Iterator for Chain<'a> {
    type Item = Result<ExtHeader<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.step().transpose();
        self.done = !matches!(r, Some(Ok(_)));
        r
    }
}

/// Walks the whole chain: where the upper layer starts, or why the chain could not be read.
pub fn walk(next_header: u8, payload: &[u8]) -> Result<ChainEnd> {
    let mut chain = Chain::new(next_header, payload);
    for h in &mut chain {
        h?;
    }
    Ok(chain.end())
}

/// TLV option types of hop-by-hop and destination-options headers (RFC 8200 section 4.2).
pub mod option_kind {
    pub const PAD1: u8 = 0;
    pub const PADN: u8 = 1;
    /// RFC 2711.
    pub const ROUTER_ALERT: u8 = 5;
    /// RFC 2675.
    pub const JUMBO: u8 = 0xC2;
}

/// One hop-by-hop or destination option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6Option<'a> {
    Pad1,
    /// Padding of `2 + len` bytes.
    PadN(u8),
    RouterAlert(u16),
    Jumbo(u32),
    /// Any other type; what a node must do with it is in [`Ipv6Option::action`].
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

impl<'a> Ipv6Option<'a> {
    pub fn kind(&self) -> u8 {
        match self {
            Ipv6Option::Pad1 => option_kind::PAD1,
            Ipv6Option::PadN(_) => option_kind::PADN,
            Ipv6Option::RouterAlert(_) => option_kind::ROUTER_ALERT,
            Ipv6Option::Jumbo(_) => option_kind::JUMBO,
            Ipv6Option::Unknown { kind, .. } => *kind,
        }
    }

    /// The two high bits of the type: what to do when the option is not recognised (0 skip,
    /// 1 discard, 2 discard and send a parameter problem, 3 the same unless the destination
    /// is multicast).
    pub fn action(&self) -> u8 {
        self.kind() >> 6
    }

    /// Reads the option at the start of `b`, and its length.
    pub fn parse(b: &'a [u8]) -> Result<(Ipv6Option<'a>, usize)> {
        let (&kind, rest) = b.split_first().ok_or(Error::Truncated)?;
        if kind == option_kind::PAD1 {
            return Ok((Ipv6Option::Pad1, 1));
        }
        let (&len, rest) = rest.split_first().ok_or(Error::Malformed)?;
        let data = rest.get(..usize::from(len)).ok_or(Error::Malformed)?;
        let opt = match (kind, data) {
            (option_kind::PADN, _) => Ipv6Option::PadN(len),
            (option_kind::ROUTER_ALERT, &[a, b]) => {
                Ipv6Option::RouterAlert(u16::from_be_bytes([a, b]))
            }
            (option_kind::JUMBO, &[a, b, c, d]) => {
                Ipv6Option::Jumbo(u32::from_be_bytes([a, b, c, d]))
            }
            (option_kind::ROUTER_ALERT | option_kind::JUMBO, _) => return Err(Error::Malformed),
            _ => Ipv6Option::Unknown { kind, data },
        };
        Ok((opt, 2 + usize::from(len)))
    }
}

/// The options in a hop-by-hop or destination-options header's data; stops after the first
/// malformed option (an [`Error::Malformed`]: a length past the end, or a Router Alert or
/// Jumbo of the wrong length), whose offset in the data [`OptionWalk::offset`] then gives.
pub type Options<'a> = OptionWalk<'a, Ipv6Option<'a>>;

impl<'a> Options<'a> {
    pub fn new(data: &'a [u8]) -> Options<'a> {
        OptionWalk::walk(data, Ipv6Option::parse, |_| false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hop-by-hop (Router Alert 0, PadN 0), routing type 4 with segments left 1 and one
    // 16-byte segment, fragment (offset 0, M, id 0x01020304), destination options (PadN 4),
    // then UDP.
    fn chain() -> Vec<u8> {
        let mut b = vec![43, 0, 5, 2, 0, 0, 1, 0];
        b.extend_from_slice(&[44, 2, 4, 1, 0, 0, 0, 0]);
        b.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
        b.extend_from_slice(&[60, 0, 0, 1, 1, 2, 3, 4]);
        b.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        b.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0, 8, 0, 0]);
        b
    }

    #[test]
    fn walks_to_the_upper_layer() {
        let b = chain();
        let kinds: Vec<_> = Chain::new(0, &b)
            .map(|h| h.map(|h| (h.kind, h.offset)))
            .collect();
        assert_eq!(kinds, [Ok((0, 0)), Ok((43, 8)), Ok((44, 32)), Ok((60, 40))]);
        let end = walk(0, &b).unwrap();
        assert_eq!(
            end,
            ChainEnd {
                protocol: 17,
                offset: 48,
                headers: 4,
                later_fragment: false,
                fragment_at: Some(32)
            }
        );

        let hbh = Header::new_checked(&b[..8]).unwrap();
        let opts: Vec<_> = hbh.options().collect();
        assert_eq!(
            opts,
            [Ok(Ipv6Option::RouterAlert(0)), Ok(Ipv6Option::PadN(0))]
        );
        let rh = Header::new_checked(&b[8..32]).unwrap();
        let r = RoutingRepr::parse(&rh).unwrap();
        assert_eq!((r.routing_type, r.segments_left, r.data.len()), (4, 1, 20));
        let mut out = [0u8; 24];
        r.emit(&mut Header::new_unchecked(&mut out[..]));
        assert_eq!(out, b[8..32]);
        let f = FragmentRepr::parse(&Fragment::new_checked(&b[32..40]).unwrap()).unwrap();
        assert_eq!(
            f,
            FragmentRepr {
                next_header: 60,
                frag_offset: 0,
                more_frags: true,
                ident: 0x01020304
            }
        );
        let mut out = [0u8; 8];
        f.emit(&mut Fragment::new_unchecked(&mut out[..]));
        assert_eq!(out, b[32..40]);
        let d = OptionsRepr::parse(&Header::new_checked(&b[40..48]).unwrap()).unwrap();
        d.emit(&mut Header::new_unchecked(&mut out[..]));
        assert_eq!(out, b[40..48]);
    }

    #[test]
    fn chain_errors_and_bounds() {
        let mut b = chain();
        assert_eq!(walk(0, &b[..30]), Err(Error::Truncated));
        // A later fragment: the walk stops after the fragment header.
        b[34] = 0x01;
        let end = walk(0, &b).unwrap();
        assert!(end.later_fragment);
        assert_eq!((end.protocol, end.offset), (60, 40));
        // Hop-by-hop after another header.
        b[40] = 0;
        b[34] = 0;
        assert_eq!(walk(0, &b), Err(Error::Malformed));
        // ESP ends the chain where it starts; so does "no next header".
        assert_eq!(walk(ip_proto::ESP, &b).unwrap().offset, 0);
        // A chain of nine destination-options headers is over the bound.
        let mut nine: Vec<u8> = (0..9).flat_map(|_| [60, 0, 1, 4, 0, 0, 0, 0]).collect();
        nine[64] = ip_proto::UDP;
        assert_eq!(walk(60, &nine), Err(Error::Unsupported));
        assert_eq!(walk(60, &nine[8..]).unwrap().headers, 8);
    }

    #[test]
    fn malformed_options() {
        for bad in [
            &[1u8, 9, 0][..],
            &[5, 3, 0, 0, 0],
            &[0xC2, 2, 0, 0],
            &[0x3e],
        ] {
            let mut it = Options::new(bad);
            assert_eq!(it.next(), Some(Err(Error::Malformed)), "{bad:?}");
            assert_eq!(it.next(), None);
        }
        let unknown: Vec<_> = Options::new(&[0x9e, 1, 7, 0]).collect();
        assert_eq!(
            unknown,
            [
                Ok(Ipv6Option::Unknown {
                    kind: 0x9e,
                    data: &[7]
                }),
                Ok(Ipv6Option::Pad1)
            ]
        );
        assert_eq!(
            Ipv6Option::Unknown {
                kind: 0x9e,
                data: &[]
            }
            .action(),
            2
        );
    }
}
