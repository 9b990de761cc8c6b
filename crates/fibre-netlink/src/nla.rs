//! Netlink attributes (`struct nlattr`): framing, typed values and emission.
//!
//! Framing is strict so that parse-then-emit reproduces the input: every attribute starts on a
//! 4-byte boundary (NLA_ALIGNTO), its padding is present and zero, and nothing is left over.
//! Framing errors are [`DecodeError`]s. Above the framing, decoding never fails: an attribute
//! whose value does not have the form its type requires (a u32 of 5 bytes, an address of 3,
//! a scalar carrying NLA_F_NESTED, a nest whose inside is malformed) is kept raw, exactly like
//! an attribute this crate does not know, and re-emitted unchanged.
//!
//! NLA_F_NESTED is accepted on nests with or without the flag (the kernel emits rtnetlink nests
//! without it, some libraries set it) and remembered in [`Nest::flagged`]. NLA_F_NET_BYTEORDER
//! never occurs in rtnetlink; an attribute carrying it is kept raw. Values that rtnetlink
//! defines in network byte order (ports) use [`Be16`].

use crate::wire::fixed_header;
use crate::DecodeError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const NLA_ALIGNTO: usize = 4;
pub const NLA_HDRLEN: usize = 4;
pub const NLA_F_NESTED: u16 = 0x8000;
pub const NLA_F_NET_BYTEORDER: u16 = 0x4000;
pub const NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | NLA_F_NET_BYTEORDER);
/// The longest value an attribute can carry: `nla_len` is a u16 that counts the header.
pub const NLA_MAX_VALUE: usize = u16::MAX as usize - NLA_HDRLEN;

/// Rounds `len` up to the 4-byte alignment of netlink messages and attributes.
pub const fn align(len: usize) -> usize {
    (len + NLA_ALIGNTO - 1) & !(NLA_ALIGNTO - 1)
}

fixed_header! {
    /// `struct nlattr`.
    pub struct NlaHeader;
    /// View of `struct nlattr`.
    pub struct NlaHeaderPacket;
    len = 4, what = "nlattr";
    {
        /// Header plus value, without padding.
        len, set_len: u16 = 0;
        /// Attribute type with the NLA_F_* flags.
        kind, set_kind: u16 = 2;
    }
}

/// An attribute as found on the wire: its type field (flags included) and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawNla<'a> {
    pub kind: u16,
    pub value: &'a [u8],
}

impl<'a> RawNla<'a> {
    /// The attribute type without NLA_F_* flags.
    pub fn number(&self) -> u16 {
        self.kind & NLA_TYPE_MASK
    }

    pub fn is_nested(&self) -> bool {
        self.kind & NLA_F_NESTED != 0
    }

    /// Appends the attribute, padded.
    pub fn emit(&self, out: &mut Vec<u8>) {
        put(out, self.kind, self.value);
    }
}

/// Iterates over the attributes of a region, checking the framing. Yields each attribute with
/// its offset (`base` + position in the region); after an error it yields nothing more.
#[derive(Debug, Clone)]
pub struct NlaIter<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> NlaIter<'a> {
    /// `base` is the offset of `buf` in the caller's input, used in errors.
    pub fn new(buf: &'a [u8], base: usize) -> Self {
        NlaIter { buf, pos: 0, base }
    }
}

impl<'a> Iterator for NlaIter<'a> {
    type Item = Result<(usize, RawNla<'a>), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let offset = self.base + self.pos;
        // Whatever happens next, a failed iterator stays finished.
        self.pos = self.buf.len();
        if rest.len() < NLA_HDRLEN {
            return Some(Err(DecodeError::TrailingBytes {
                offset,
                count: rest.len(),
            }));
        }
        let header = NlaHeader::parse(&NlaHeaderPacket::new_unchecked(rest));
        let len = header.len as usize;
        if len < NLA_HDRLEN || len > rest.len() {
            return Some(Err(DecodeError::AttributeLength {
                offset,
                len: header.len,
                available: rest.len(),
            }));
        }
        let padded = align(len);
        if padded > rest.len() {
            return Some(Err(DecodeError::MissingPadding { offset }));
        }
        if rest[len..padded].iter().any(|&b| b != 0) {
            return Some(Err(DecodeError::NonZeroPadding {
                offset: offset + len,
            }));
        }
        self.pos = offset - self.base + padded;
        Some(Ok((
            offset,
            RawNla {
                kind: header.kind,
                value: &rest[NLA_HDRLEN..len],
            },
        )))
    }
}

/// A typed attribute of one attribute space (IFLA_*, RTA_*, ...).
pub trait Attr<'a>: Sized {
    /// Decodes one framed attribute; never fails (see the module documentation).
    fn decode(nla: RawNla<'a>) -> Self;
    /// Appends the attribute, padded.
    fn emit(&self, out: &mut Vec<u8>);
}

/// Parses a whole attribute region. `base` is the region's offset in the caller's input.
pub fn parse_attrs<'a, A: Attr<'a>>(buf: &'a [u8], base: usize) -> Result<Vec<A>, DecodeError> {
    NlaIter::new(buf, base)
        .map(|r| r.map(|(_, nla)| A::decode(nla)))
        .collect()
}

/// Appends every attribute of `attrs`.
pub fn emit_attrs<'a, A: Attr<'a>>(attrs: &[A], out: &mut Vec<u8>) {
    for a in attrs {
        a.emit(out);
    }
}

/// The value of an attribute, decoded from and emitted to its wire form.
pub trait Value<'a>: Sized {
    /// `None` when the attribute does not have this value's form; the caller keeps it raw.
    fn decode(nla: RawNla<'a>) -> Option<Self>;
    /// NLA_F_* flags to emit with the attribute type.
    fn flags(&self) -> u16 {
        0
    }
    /// Appends the value bytes (without header or padding).
    fn emit_value(&self, out: &mut Vec<u8>);
}

/// Appends an attribute of type `kind` whose value `value` writes, then its padding.
///
/// Panics if the value is longer than [`NLA_MAX_VALUE`]: no parsed attribute can be, and
/// nothing fibre emits comes near it.
pub fn put_with(out: &mut Vec<u8>, kind: u16, value: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; NLA_HDRLEN]);
    value(out);
    let len = out.len() - start;
    assert!(
        len - NLA_HDRLEN <= NLA_MAX_VALUE,
        "netlink attribute value too long"
    );
    let mut header = NlaHeaderPacket::new_unchecked(&mut out[start..]);
    header.set_len(len as u16);
    header.set_kind(kind);
    out.resize(start + align(len), 0);
}

/// Appends an attribute with a byte-string value.
pub fn put(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    put_with(out, kind, |o| o.extend_from_slice(value));
}

/// Appends an attribute with a typed value.
pub fn put_value<'a, V: Value<'a>>(out: &mut Vec<u8>, kind: u16, value: &V) {
    put_with(out, kind | value.flags(), |o| value.emit_value(o));
}

fn scalar_flags_ok(nla: &RawNla<'_>) -> bool {
    nla.kind & !NLA_TYPE_MASK == 0
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl<'a> Value<'a> for $t {
            fn decode(nla: RawNla<'a>) -> Option<Self> {
                let b: [u8; std::mem::size_of::<$t>()] = nla.value.try_into().ok()?;
                scalar_flags_ok(&nla).then(|| <$t>::from_ne_bytes(b))
            }
            fn emit_value(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
int_value!(u8, u16, u32, i32, u64);

/// A 16-bit value in network byte order (RTA_SPORT, NDA_PORT, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Be16(pub u16);

impl<'a> Value<'a> for Be16 {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        let b: [u8; 2] = nla.value.try_into().ok()?;
        scalar_flags_ok(&nla).then(|| Be16(u16::from_be_bytes(b)))
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_be_bytes());
    }
}

impl<'a> Value<'a> for IpAddr {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        if !scalar_flags_ok(&nla) {
            return None;
        }
        ip_from_bytes(nla.value)
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        match self {
            IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
            IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
        }
    }
}

/// An address of one family only (the seg6local next hops, IOAM6's tunnel destination).
impl<'a> Value<'a> for Ipv4Addr {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        let b: [u8; 4] = nla.value.try_into().ok()?;
        scalar_flags_ok(&nla).then(|| Ipv4Addr::from(b))
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.octets());
    }
}

impl<'a> Value<'a> for Ipv6Addr {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        let b: [u8; 16] = nla.value.try_into().ok()?;
        scalar_flags_ok(&nla).then(|| Ipv6Addr::from(b))
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.octets());
    }
}

/// An IPv4 or IPv6 address from its 4 or 16 network-order bytes.
pub fn ip_from_bytes(b: &[u8]) -> Option<IpAddr> {
    if let Ok(a) = <[u8; 4]>::try_from(b) {
        Some(IpAddr::V4(Ipv4Addr::from(a)))
    } else if let Ok(a) = <[u8; 16]>::try_from(b) {
        Some(IpAddr::V6(Ipv6Addr::from(a)))
    } else {
        None
    }
}

/// Uninterpreted bytes (link-layer addresses, kind-specific data), borrowed from the input.
impl<'a> Value<'a> for &'a [u8] {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        scalar_flags_ok(&nla).then_some(nla.value)
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

/// An attribute whose presence is the information (NHA_BLACKHOLE, NHA_FDB, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flag;

impl<'a> Value<'a> for Flag {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        (scalar_flags_ok(&nla) && nla.value.is_empty()).then_some(Flag)
    }
    fn emit_value(&self, _out: &mut Vec<u8>) {}
}

/// A string attribute (NLA_STRING / NLA_NUL_STRING), borrowed from the input.
///
/// The kernel and iproute2 terminate strings with a NUL, some senders do not: `nul` records
/// whether the wire form ended with one so that it re-emits unchanged. `bytes` excludes that
/// final NUL only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NlStr<'a> {
    pub bytes: &'a [u8],
    pub nul: bool,
}

impl<'a> NlStr<'a> {
    /// A NUL-terminated string, as the kernel emits them.
    pub fn new(s: &'a str) -> Self {
        NlStr {
            bytes: s.as_bytes(),
            nul: true,
        }
    }

    /// The text up to the first NUL, if it is UTF-8.
    pub fn as_str(&self) -> Option<&'a str> {
        let end = self
            .bytes
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.bytes.len());
        std::str::from_utf8(&self.bytes[..end]).ok()
    }
}

impl<'a> Value<'a> for NlStr<'a> {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        if !scalar_flags_ok(&nla) {
            return None;
        }
        Some(match nla.value.split_last() {
            Some((0, bytes)) => NlStr { bytes, nul: true },
            _ => NlStr {
                bytes: nla.value,
                nul: false,
            },
        })
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.bytes);
        if self.nul {
            out.push(0);
        }
    }
}

/// A nested attribute: a list of attributes of another space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nest<A> {
    /// Whether the wire form set NLA_F_NESTED.
    pub flagged: bool,
    pub attrs: Vec<A>,
}

impl<A> Nest<A> {
    /// A nest without NLA_F_NESTED, as the kernel emits rtnetlink nests.
    pub fn new(attrs: Vec<A>) -> Self {
        Nest {
            flagged: false,
            attrs,
        }
    }
}

impl<'a, A: Attr<'a>> Value<'a> for Nest<A> {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        if nla.kind & NLA_F_NET_BYTEORDER != 0 {
            return None;
        }
        // Offsets inside a nest only matter for errors, which here make the nest raw.
        let attrs = parse_attrs(nla.value, 0).ok()?;
        Some(Nest {
            flagged: nla.is_nested(),
            attrs,
        })
    }
    fn flags(&self) -> u16 {
        if self.flagged {
            NLA_F_NESTED
        } else {
            0
        }
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        emit_attrs(&self.attrs, out);
    }
}

/// Nested attributes kept as bytes (RTA_ENCAP, IFLA_INFO_DATA: their space depends on a
/// sibling attribute), remembering whether the wire form set NLA_F_NESTED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NestedBytes<'a> {
    pub flagged: bool,
    pub bytes: &'a [u8],
}

impl<'a> Value<'a> for NestedBytes<'a> {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        (nla.kind & NLA_F_NET_BYTEORDER == 0).then_some(NestedBytes {
            flagged: nla.is_nested(),
            bytes: nla.value,
        })
    }
    fn flags(&self) -> u16 {
        if self.flagged {
            NLA_F_NESTED
        } else {
            0
        }
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.bytes);
    }
}

/// Implements [`Value`] for a [`fixed_header!`](crate::wire) structure carried as an
/// attribute's whole value (exactly its size, no flags).
macro_rules! struct_value {
    ($repr:ident, $packet:ident) => {
        impl<'a> $crate::nla::Value<'a> for $repr {
            fn decode(nla: $crate::nla::RawNla<'a>) -> Option<Self> {
                (nla.kind == nla.number() && nla.value.len() == Self::LEN)
                    .then(|| Self::parse(&$packet::new_unchecked(nla.value)))
            }
            fn emit_value(&self, out: &mut Vec<u8>) {
                self.emit(out)
            }
        }
    };
}
pub(crate) use struct_value;

/// An attribute of a space this crate does not decode (the inside of NLMSGERR_ATTR_POLICY).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawNlaAttr<'a>(pub RawNla<'a>);

impl<'a> Attr<'a> for RawNlaAttr<'a> {
    fn decode(nla: RawNla<'a>) -> Self {
        RawNlaAttr(nla)
    }
    fn emit(&self, out: &mut Vec<u8>) {
        self.0.emit(out)
    }
}

/// Declares an object message: a fixed header followed by attributes of one space.
macro_rules! object_message {
    ($(#[$m:meta])* pub struct $name:ident<'a> { $header:ident, $attr:ident }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name<'a> {
            pub header: $header,
            pub attributes: Vec<$attr<'a>>,
        }

        impl<'a> $name<'a> {
            /// Parses a message body; `base` is its offset in the caller's input.
            pub fn parse(body: &'a [u8], base: usize) -> Result<Self, $crate::DecodeError> {
                let header = $header::parse_bytes(body, base)?;
                let attributes = $crate::nla::parse_attrs(&body[$header::LEN..], base + $header::LEN)?;
                Ok($name { header, attributes })
            }

            /// Appends the message body.
            pub fn emit(&self, out: &mut Vec<u8>) {
                self.header.emit(out);
                $crate::nla::emit_attrs(&self.attributes, out);
            }
        }
    };
}
pub(crate) use object_message;

/// Declares an attribute space: an enum with one variant per known attribute type, each
/// holding a [`Value`], plus `Other` for everything else, and its [`Attr`] implementation.
macro_rules! attributes {
    (
        $(#[$m:meta])*
        pub enum $name:ident<'a> {
            $( $(#[$vm:meta])* $var:ident($ty:ty) = $kind:expr, )*
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum $name<'a> {
            $( $(#[$vm])* $var($ty), )*
            /// An attribute this crate does not decode, or one without its type's form; kept
            /// and re-emitted as it came.
            Other($crate::nla::RawNla<'a>),
        }

        impl<'a> $crate::nla::Attr<'a> for $name<'a> {
            fn decode(nla: $crate::nla::RawNla<'a>) -> Self {
                let number = nla.number();
                $(
                    if number == $kind {
                        return match <$ty as $crate::nla::Value<'a>>::decode(nla) {
                            Some(v) => $name::$var(v),
                            None => $name::Other(nla),
                        };
                    }
                )*
                $name::Other(nla)
            }

            fn emit(&self, out: &mut Vec<u8>) {
                match self {
                    $( $name::$var(v) => $crate::nla::put_value(out, $kind, v), )*
                    $name::Other(raw) => raw.emit(out),
                }
            }
        }
    };
}
pub(crate) use attributes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_errors_say_where() {
        // len 5 value then one pad byte missing.
        let buf = [5, 0, 1, 0, 7, 0, 0];
        let r: Result<Vec<RawNla>, _> = NlaIter::new(&buf, 10).map(|r| r.map(|x| x.1)).collect();
        assert_eq!(r, Err(DecodeError::MissingPadding { offset: 10 }));
        let buf = [5, 0, 1, 0, 7, 0, 1, 0];
        let r: Result<Vec<RawNla>, _> = NlaIter::new(&buf, 0).map(|r| r.map(|x| x.1)).collect();
        assert_eq!(r, Err(DecodeError::NonZeroPadding { offset: 5 }));
        let buf = [8, 0, 1, 0, 7, 0, 0, 0, 1, 2];
        let r: Result<Vec<RawNla>, _> = NlaIter::new(&buf, 0).map(|r| r.map(|x| x.1)).collect();
        assert_eq!(
            r,
            Err(DecodeError::TrailingBytes {
                offset: 8,
                count: 2
            })
        );
        let buf = [3, 0, 1, 0];
        let r: Result<Vec<RawNla>, _> = NlaIter::new(&buf, 0).map(|r| r.map(|x| x.1)).collect();
        assert_eq!(
            r,
            Err(DecodeError::AttributeLength {
                offset: 0,
                len: 3,
                available: 4
            })
        );
    }

    #[test]
    fn values_of_the_wrong_form_stay_raw() {
        let nla = RawNla {
            kind: 4,
            value: &[1, 2, 3],
        };
        assert_eq!(<u32 as Value>::decode(nla), None);
        let nla = RawNla {
            kind: 4 | NLA_F_NESTED,
            value: &[1, 2, 3, 4],
        };
        assert_eq!(<u32 as Value>::decode(nla), None);
        let nla = RawNla {
            kind: 3,
            value: b"eth0\0",
        };
        let s = <NlStr as Value>::decode(nla).unwrap();
        assert_eq!((s.as_str(), s.nul), (Some("eth0"), true));
        let mut out = Vec::new();
        put_value(&mut out, 3, &s);
        assert_eq!(out, b"\x09\x00\x03\x00eth0\0\0\0\0");
    }
}
