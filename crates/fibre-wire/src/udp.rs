//! UDP headers (RFC 768): the ports flow hashing reads, the length and the checksum.
//!
//! Panic contract: [`Packet::new_unchecked`] never panics; the accessors of a packet built with
//! it panic below [`HEADER_LEN`] bytes and [`Packet::payload`] when the length field points
//! past the buffer. [`Packet::new_checked`] rejects those with [`Error::Truncated`] and a
//! length field below 8 with [`Error::Malformed`]; after it no accessor or setter panics.
//! [`Repr::emit`] panics on a buffer shorter than [`HEADER_LEN`] and writes a zero checksum:
//! the payload comes after the header, so [`Packet::fill_checksum`] is called once it is in
//! place. Parsing never checks the checksum.

use crate::checksum::{self, PseudoHeader};
use crate::consts::ip_proto;
use crate::error::{Error, Result};
use crate::field::{be16, set_be16};

pub const HEADER_LEN: usize = 8;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// A view of a UDP datagram.
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
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let field_len = usize::from(self.length());
        if field_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if field_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Header and payload.
    pub fn length(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Up to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.length())]
    }

    /// Over IPv4 a zero checksum means "none" (RFC 768) and verifies; over IPv6 it is an
    /// error (RFC 8200 section 8.1).
    pub fn verify_checksum(&self, pseudo: &PseudoHeader) -> Result<()> {
        if self.checksum() == 0 && matches!(pseudo, PseudoHeader::V4 { .. }) {
            return Ok(());
        }
        let datagram = &self.buffer.as_ref()[..usize::from(self.length())];
        let sum = checksum::combine(&[
            pseudo.sum(ip_proto::UDP, datagram.len()),
            checksum::sum(datagram),
        ]);
        checksum::check(sum)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    pub fn set_dst_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    pub fn set_length(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.length());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Computes the checksum over the pseudo-header and the datagram (to the length field);
    /// a result of zero is sent as 0xFFFF, zero meaning "no checksum".
    pub fn fill_checksum(&mut self, pseudo: &PseudoHeader) {
        self.set_checksum(0);
        let datagram = &self.buffer.as_ref()[..usize::from(self.length())];
        let c = checksum::finish(checksum::combine(&[
            pseudo.sum(ip_proto::UDP, datagram.len()),
            checksum::sum(datagram),
        ]));
        self.set_checksum(if c == 0 { 0xFFFF } else { c });
    }
}

/// A UDP header by value (the checksum is computed, not kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: usize,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.length()) - HEADER_LEN,
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// The length field is `HEADER_LEN + payload_len`, which must fit 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_length((HEADER_LEN + self.payload_len) as u16);
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    // scapy: IP(src="192.0.2.1", dst="192.0.2.2")/UDP(sport=1234, dport=53)/b"abcd"; the
    // UDP checksum is scapy's.
    const DATAGRAM: [u8; 12] = [
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0xb2, 0x04, b'a', b'b', b'c', b'd',
    ];

    #[test]
    fn known_datagram() {
        let pseudo = PseudoHeader::V4 {
            src: Ipv4Addr::new(192, 0, 2, 1),
            dst: Ipv4Addr::new(192, 0, 2, 2),
        };
        let p = Packet::new_checked(&DATAGRAM[..]).unwrap();
        p.verify_checksum(&pseudo).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                src_port: 1234,
                dst_port: 53,
                payload_len: 4
            }
        );
        let mut out = DATAGRAM;
        out[..8].fill(0);
        let mut q = Packet::new_unchecked(&mut out[..]);
        r.emit(&mut q);
        q.fill_checksum(&pseudo);
        assert_eq!(out, DATAGRAM);
        let mut b = DATAGRAM;
        b[5] = 7;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[5] = 13;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
    }
}
