//! The RPL source routing header (RFC 6554): a routing header of type 3 whose addresses are
//! compressed against the IPv6 destination address. The first `CmprI` octets of each address
//! but the last, and the first `CmprE` octets of the last, are those of the destination and
//! are elided; `Pad` octets of zeros end the header on an 8-octet boundary.
//!
//! The number of addresses follows from the lengths: n = (header bytes - 8 - Pad - (16 -
//! CmprE)) / (16 - CmprI) + 1. A header where that division leaves a remainder, or where the
//! lengths leave no room for the last address, is [`Error::Malformed`] (Linux drops it too:
//! ipv6_rpl_srh_rcv in net/ipv6/exthdrs.c).
//!
//! Panic contract: [`Packet::new_unchecked`] never panics; on a view built with it the
//! accessors panic when the buffer is shorter than 8 bytes or than the header's announced
//! length, or when the lengths do not give a whole number of addresses. [`Packet::new_checked`]
//! rejects the first two with [`Error::Truncated`] and the last with [`Error::Malformed`];
//! after it no accessor or setter panics (indices past the list answer `None` or
//! [`Error::Malformed`]). [`compress`] never panics: it answers `None` when `out` is short.
//! [`Repr::emit`] panics on a buffer shorter than [`Repr::buffer_len`] and when the header
//! would not be a multiple of 8 bytes or longer than 2048.

use core::net::Ipv6Addr;

use crate::error::{Error, Result};

/// The routing type of an RPL source routing header.
pub const ROUTING_TYPE: u8 = 3;
/// The fixed part, before the addresses.
pub const HEADER_LEN: usize = 8;
/// The most octets an address can share with the destination and still be carried (4 bits).
pub const MAX_ELIDED: u8 = 15;

mod field {
    pub const NEXT_HEADER: usize = 0;
    pub const HDR_EXT_LEN: usize = 1;
    pub const ROUTING_TYPE: usize = 2;
    pub const SEGMENTS_LEFT: usize = 3;
    pub const CMPR: usize = 4;
    pub const PAD: usize = 5;
}

/// A view of an RPL source routing header.
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
        // The first comparison guards the read of the length byte in the second.
        if len < HEADER_LEN || len < p.header_len() {
            return Err(Error::Truncated);
        }
        if p.count().is_none() {
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

    /// The header's whole length in bytes.
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[field::HDR_EXT_LEN]) + 1) * 8
    }

    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[field::ROUTING_TYPE]
    }

    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[field::SEGMENTS_LEFT]
    }

    /// Octets every address but the last shares with the destination.
    pub fn cmpri(&self) -> u8 {
        self.buffer.as_ref()[field::CMPR] >> 4
    }

    /// Octets the last address shares with the destination.
    pub fn cmpre(&self) -> u8 {
        self.buffer.as_ref()[field::CMPR] & 0x0f
    }

    /// Octets of padding after the last address.
    pub fn pad(&self) -> u8 {
        self.buffer.as_ref()[field::PAD] >> 4
    }

    /// The number of addresses, `None` when the lengths do not give a whole number.
    fn count(&self) -> Option<usize> {
        let body = self.header_len() - HEADER_LEN;
        let last = 16 - usize::from(self.cmpre());
        let rest = body.checked_sub(usize::from(self.pad()) + last)?;
        let each = 16 - usize::from(self.cmpri());
        rest.is_multiple_of(each).then_some(rest / each + 1)
    }

    /// The number of addresses the header carries.
    pub fn address_count(&self) -> usize {
        self.count().unwrap_or(0)
    }

    /// Where address `i` (0-based) is carried and how many octets are elided from it.
    fn slot(&self, i: usize) -> Option<(usize, usize)> {
        let n = self.count()?;
        let each = 16 - usize::from(self.cmpri());
        if i + 1 < n {
            Some((HEADER_LEN + i * each, usize::from(self.cmpri())))
        } else if i + 1 == n {
            Some((HEADER_LEN + i * each, usize::from(self.cmpre())))
        } else {
            None
        }
    }

    /// Address `i` (0-based), its elided octets taken from `dst`; `None` past the list.
    pub fn address(&self, i: usize, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let (at, elided) = self.slot(i)?;
        let mut a = dst.octets();
        a[elided..].copy_from_slice(&self.buffer.as_ref()[at..at + 16 - elided]);
        Some(Ipv6Addr::from(a))
    }

    /// The carried (compressed) addresses, without the padding.
    pub fn address_bytes(&self) -> &[u8] {
        let end = self.header_len() - usize::from(self.pad());
        &self.buffer.as_ref()[HEADER_LEN..end.max(HEADER_LEN)]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v;
    }

    pub fn set_segments_left(&mut self, v: u8) {
        self.buffer.as_mut()[field::SEGMENTS_LEFT] = v;
    }

    /// Sets the header's whole length in bytes, a multiple of 8 from 8 to 2048.
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[field::HDR_EXT_LEN] = (len / 8 - 1) as u8;
    }

    /// Sets CmprI and CmprE (each at most [`MAX_ELIDED`]).
    pub fn set_cmpr(&mut self, cmpri: u8, cmpre: u8) {
        self.buffer.as_mut()[field::CMPR] = (cmpri << 4) | (cmpre & 0x0f);
    }

    /// Sets Pad; the reserved bits after it are zeroed.
    pub fn set_pad(&mut self, pad: u8) {
        self.buffer.as_mut()[field::PAD] = pad << 4;
    }

    /// Writes the carried octets of address `i`; the elided ones are the destination's, so the
    /// caller keeps them equal. [`Error::Malformed`] past the list.
    pub fn set_address(&mut self, i: usize, addr: Ipv6Addr) -> Result<()> {
        let (at, elided) = self.slot(i).ok_or(Error::Malformed)?;
        self.buffer.as_mut()[at..at + 16 - elided].copy_from_slice(&addr.octets()[elided..]);
        Ok(())
    }
}

/// An RPL source routing header by value: the addresses kept as carried (compressed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    pub next_header: u8,
    pub segments_left: u8,
    pub cmpri: u8,
    pub cmpre: u8,
    pub pad: u8,
    pub addresses: &'a [u8],
}

impl<'a> Repr<'a> {
    /// [`Error::Unsupported`] for a routing header of another type.
    pub fn parse(p: &Packet<&'a [u8]>) -> Result<Repr<'a>> {
        let b: &'a [u8] = p.buffer;
        let p = Packet::new_checked(b)?;
        if p.routing_type() != ROUTING_TYPE {
            return Err(Error::Unsupported);
        }
        let end = p.header_len() - usize::from(p.pad());
        Ok(Repr {
            next_header: p.next_header(),
            segments_left: p.segments_left(),
            cmpri: p.cmpri(),
            cmpre: p.cmpre(),
            pad: p.pad(),
            addresses: &b[HEADER_LEN..end],
        })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.addresses.len() + usize::from(self.pad)
    }

    /// Writes the header; the reserved bits and the padding are zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let len = self.buffer_len();
        assert!(len.is_multiple_of(8) && len <= 256 * 8);
        let b = p.buffer.as_mut();
        b[field::NEXT_HEADER] = self.next_header;
        b[field::HDR_EXT_LEN] = (len / 8 - 1) as u8;
        b[field::ROUTING_TYPE] = ROUTING_TYPE;
        b[field::SEGMENTS_LEFT] = self.segments_left;
        b[field::CMPR] = (self.cmpri << 4) | (self.cmpre & 0x0f);
        b[field::PAD] = self.pad << 4;
        b[6..HEADER_LEN].fill(0);
        let end = HEADER_LEN + self.addresses.len();
        b[HEADER_LEN..end].copy_from_slice(self.addresses);
        b[end..len].fill(0);
    }
}

/// The compression of an address list against a destination: what [`compress`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compressed {
    pub cmpri: u8,
    pub cmpre: u8,
    pub pad: u8,
    /// Bytes of carried addresses written (padding excluded).
    pub len: usize,
}

/// The octets `a` shares with `b` that a header may elide: the common prefix, at most
/// [`MAX_ELIDED`] (an address equal to the destination still carries its last octet).
pub fn elided(a: &Ipv6Addr, b: &Ipv6Addr) -> u8 {
    let n = a
        .octets()
        .iter()
        .zip(b.octets())
        .take_while(|(x, y)| **x == *y)
        .count();
    (n as u8).min(MAX_ELIDED)
}

/// Compresses `addrs` against `dst` as RFC 6554 section 3 allows: CmprI the octets every
/// address but the last shares with `dst`, CmprE those the last shares, each at most 15 (a
/// list of one address gets CmprI 15, as Linux's ipv6_rpl_srh_compress gives it). Writes
/// the carried octets to `out` and answers their length and the padding that completes the
/// header; `None` for an empty list or an `out` too short.
pub fn compress(dst: Ipv6Addr, addrs: &[Ipv6Addr], out: &mut [u8]) -> Option<Compressed> {
    let (last, init) = addrs.split_last()?;
    let cmpri = init
        .iter()
        .map(|a| elided(a, &dst))
        .min()
        .unwrap_or(MAX_ELIDED);
    let cmpre = elided(last, &dst);
    let len = init.len() * usize::from(16 - cmpri) + usize::from(16 - cmpre);
    let out = out.get_mut(..len)?;
    let mut at = 0;
    for a in init {
        let carried = &a.octets()[usize::from(cmpri)..];
        out[at..at + carried.len()].copy_from_slice(carried);
        at += carried.len();
    }
    out[at..].copy_from_slice(&last.octets()[usize::from(cmpre)..]);
    let pad = ((8 - (HEADER_LEN + len) % 8) % 8) as u8;
    Some(Compressed {
        cmpri,
        cmpre,
        pad,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// scapy has no RPL header, so this one follows RFC 6554's layout by hand: three
    /// addresses under 2001:db8::/64 compressed against destination 2001:db8::1 (CmprI 15,
    /// CmprE 15): 3 octets carried, 5 of padding.
    #[test]
    fn compress_parse_emit() {
        let dst = a("2001:db8::1");
        let addrs = [a("2001:db8::2"), a("2001:db8::3"), a("2001:db8::4")];
        let mut carried = [0u8; 48];
        let c = compress(dst, &addrs, &mut carried).unwrap();
        assert_eq!(
            c,
            Compressed {
                cmpri: 15,
                cmpre: 15,
                pad: 5,
                len: 3
            }
        );
        let r = Repr {
            next_header: 17,
            segments_left: 3,
            cmpri: c.cmpri,
            cmpre: c.cmpre,
            pad: c.pad,
            addresses: &carried[..c.len],
        };
        let mut out = [0xffu8; 16];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, [17, 1, 3, 3, 0xff, 0x50, 0, 0, 2, 3, 4, 0, 0, 0, 0, 0]);
        let p = Packet::new_checked(&out[..]).unwrap();
        assert_eq!(p.address_count(), 3);
        for (i, want) in addrs.iter().enumerate() {
            assert_eq!(p.address(i, dst), Some(*want));
        }
        assert_eq!(p.address(3, dst), None);
        assert_eq!(Repr::parse(&p), Ok(r));
    }

    #[test]
    fn iproute2_uncompressed_form() {
        // iproute2 sends RPL segments uncompressed: CmprI = CmprE = 0, 16 octets each.
        let mut b = [0u8; 40];
        b[1] = 4;
        b[2] = ROUTING_TYPE;
        b[3] = 2;
        b[8..24].copy_from_slice(&a("2001:db8::1").octets());
        b[24..40].copy_from_slice(&a("2001:db8::2").octets());
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.address_count(), 2);
        assert_eq!(p.address(1, Ipv6Addr::UNSPECIFIED), Some(a("2001:db8::2")));
    }

    #[test]
    fn lengths() {
        let mut b = [0u8; 16];
        b[1] = 1;
        b[2] = ROUTING_TYPE;
        assert_eq!(Packet::new_checked(&b[..15]), Err(Error::Truncated));
        // 8 octets of body with CmprI = CmprE = 0: no room for one 16-octet address.
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::Malformed));
        // CmprE 8, Pad 0: one address; CmprI 13 makes 8 - 8 = 0 a whole number of 3-byte ones.
        b[4] = 0xd8;
        assert_eq!(Packet::new_checked(&b[..]).unwrap().address_count(), 1);
        // CmprE 9 leaves 1 octet that is no whole 3-octet address.
        b[4] = 0xd9;
        assert_eq!(Packet::new_checked(&b[..]), Err(Error::Malformed));
    }

    #[test]
    fn set_address_keeps_the_elided_octets() {
        let dst = a("2001:db8::1");
        let mut carried = [0u8; 48];
        let c = compress(dst, &[a("2001:db8::2"), a("2001:db8::3")], &mut carried).unwrap();
        let r = Repr {
            next_header: 59,
            segments_left: 2,
            cmpri: c.cmpri,
            cmpre: c.cmpre,
            pad: c.pad,
            addresses: &carried[..c.len],
        };
        let mut out = [0u8; 16];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        let mut p = Packet::new_checked(&mut out[..]).unwrap();
        p.set_address(1, a("2001:db8::9")).unwrap();
        assert_eq!(p.set_address(2, dst), Err(Error::Malformed));
        assert_eq!(p.address(1, dst), Some(a("2001:db8::9")));
    }
}
