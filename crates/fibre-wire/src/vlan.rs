//! IEEE 802.1Q VLAN tags and their 802.1ad (QinQ) stacking.
//!
//! A tag follows an EtherType of [`ethertype::VLAN`] or [`ethertype::QINQ`] (the TPID): the
//! 4 bytes viewed here are the tag control information (priority, drop-eligible bit, VLAN id)
//! and the EtherType of what follows, which may be another tag. [`Tags::parse`] walks the stack
//! up to [`MAX_TAGS`] deep.
//!
//! Panic contract: [`Tag::new_unchecked`] never panics; accessors of a tag built with it panic
//! when the buffer is shorter than [`HEADER_LEN`], which [`Tag::new_checked`] rejects with
//! [`Error::Truncated`]. [`Repr::emit`] panics on a buffer shorter than [`HEADER_LEN`].
//! [`Tags::parse`] never panics.

use crate::consts::ethertype;
use crate::error::{Error, Result};
use crate::field::{be16, set_be16};

/// Tag control information and the inner EtherType.
pub const HEADER_LEN: usize = 4;

/// The deepest stack [`Tags::parse`] walks: an 802.1ad service tag over an 802.1Q customer tag.
/// A deeper stack is [`Error::Unsupported`] rather than silently read as payload.
pub const MAX_TAGS: usize = 2;

mod field {
    pub const TCI: usize = 0;
    pub const ETHERTYPE: usize = 2;
}

/// True for the EtherTypes that announce a tag.
pub fn is_tag(ethertype: u16) -> bool {
    ethertype == ethertype::VLAN || ethertype == ethertype::QINQ
}

/// A view of one VLAN tag (without its TPID, which is the EtherType before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Tag<T> {
    pub fn new_unchecked(buffer: T) -> Tag<T> {
        Tag { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Tag<T>> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Tag { buffer })
    }

    fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TCI)
    }

    /// Priority code point (IEEE 802.1p), 0-7.
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop-eligible indicator (formerly CFI).
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier, 0-4095 (0: priority tag only; 4095 reserved).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0FFF
    }

    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tag<T> {
    /// Sets the three fields of the tag control information at once; `pcp` keeps its low 3
    /// bits and `vid` its low 12.
    pub fn set_tci(&mut self, pcp: u8, dei: bool, vid: u16) {
        let tci = (u16::from(pcp & 7) << 13) | (u16::from(dei) << 12) | (vid & 0x0FFF);
        set_be16(self.buffer.as_mut(), field::TCI, tci);
    }

    pub fn set_ethertype(&mut self, ethertype: u16) {
        set_be16(self.buffer.as_mut(), field::ETHERTYPE, ethertype);
    }
}

/// One tag's fields by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
    /// What follows the tag.
    pub ethertype: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(tag: &Tag<T>) -> Result<Repr> {
        if tag.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Repr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            ethertype: tag.ethertype(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut Tag<T>) {
        tag.set_tci(self.pcp, self.dei, self.vid);
        tag.set_ethertype(self.ethertype);
    }
}

/// The tags between an Ethernet header and its network layer, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tags {
    /// Each tag with the TPID that announced it.
    tags: [(u16, Repr); MAX_TAGS],
    len: u8,
}

impl Tags {
    /// Walks the tags that `ethertype` (the Ethernet header's) announces at the start of
    /// `payload`: returns them, the EtherType of the network layer and its offset in `payload`.
    pub fn parse(ethertype: u16, payload: &[u8]) -> Result<(Tags, u16, usize)> {
        let mut tags = Tags::default();
        let (mut ty, mut offset) = (ethertype, 0);
        while is_tag(ty) {
            if usize::from(tags.len) == MAX_TAGS {
                return Err(Error::Unsupported);
            }
            let rest = payload.get(offset..).ok_or(Error::Truncated)?;
            let repr = Repr::parse(&Tag::new_checked(rest)?)?;
            tags.tags[usize::from(tags.len)] = (ty, repr);
            tags.len += 1;
            ty = repr.ethertype;
            offset += HEADER_LEN;
        }
        Ok((tags, ty, offset))
    }

    /// `(TPID, tag)` pairs, outermost first.
    pub fn as_slice(&self) -> &[(u16, Repr)] {
        &self.tags[..usize::from(self.len)]
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The innermost VLAN id: the one that selects the link in a single-tagged network.
    pub fn inner_vid(&self) -> Option<u16> {
        self.as_slice().last().map(|(_, t)| t.vid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // scapy: Dot1AD(vlan=100, prio=5)/Dot1Q(vlan=200, id=1)/IPv6() after the Ethernet header,
    // whose type is 0x88a8.
    const QINQ: [u8; 8] = [0xa0, 0x64, 0x81, 0x00, 0x10, 0xc8, 0x86, 0xdd];

    #[test]
    fn qinq_stack() {
        let (tags, ty, off) = Tags::parse(ethertype::QINQ, &QINQ).unwrap();
        assert_eq!(ty, ethertype::IPV6);
        assert_eq!(off, 8);
        let s = tags.as_slice();
        assert_eq!(
            s[0],
            (
                ethertype::QINQ,
                Repr {
                    pcp: 5,
                    dei: false,
                    vid: 100,
                    ethertype: ethertype::VLAN
                }
            )
        );
        assert_eq!(
            s[1],
            (
                ethertype::VLAN,
                Repr {
                    pcp: 0,
                    dei: true,
                    vid: 200,
                    ethertype: ethertype::IPV6
                }
            )
        );
        assert_eq!(tags.inner_vid(), Some(200));
        let mut out = [0u8; 8];
        s[0].1.emit(&mut Tag::new_unchecked(&mut out[..4]));
        s[1].1.emit(&mut Tag::new_unchecked(&mut out[4..]));
        assert_eq!(out, QINQ);
    }

    #[test]
    fn three_tags_are_unsupported_and_short_tags_truncated() {
        let three = [0, 1, 0x81, 0, 0, 2, 0x81, 0, 0, 3, 0x08, 0];
        assert_eq!(
            Tags::parse(ethertype::VLAN, &three).unwrap_err(),
            Error::Unsupported
        );
        assert_eq!(
            Tags::parse(ethertype::VLAN, &three[..3]).unwrap_err(),
            Error::Truncated
        );
        let (tags, ty, off) = Tags::parse(ethertype::IPV4, &three).unwrap();
        assert!(tags.is_empty() && ty == ethertype::IPV4 && off == 0);
    }
}
