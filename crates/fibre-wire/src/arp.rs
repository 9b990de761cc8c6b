//! ARP packets (RFC 826).
//!
//! The view reads any hardware and protocol address lengths (`hlen`, `plen`); [`Repr`] is the
//! one combination a router on Ethernet uses, Ethernet hardware addresses over IPv4, and
//! [`Repr::parse`] returns [`Error::Unsupported`] for the others, whose bytes stay readable
//! through the view.
//!
//! Panic contract: [`Packet::new_unchecked`] never panics. On a packet built with it the fixed
//! field accessors panic below 8 bytes and the address accessors when the buffer cannot hold
//! the four addresses their lengths announce; [`Packet::new_checked`] rejects both with
//! [`Error::Truncated`], after which no accessor or setter panics. [`Repr::emit`] panics on a
//! buffer shorter than [`Repr::buffer_len`] (28 bytes).

use core::net::Ipv4Addr;

use crate::consts::{arp, ethertype};
use crate::error::{Error, Result};
use crate::ethernet::Address as EthernetAddress;
use crate::field::{be16, set_be16};

/// The fixed part before the addresses.
pub const FIXED_LEN: usize = 8;

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
}

/// A view of an ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Checks that the fixed part and the four addresses fit; bytes after them (Ethernet
    /// padding) are allowed and ignored.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet { buffer };
        let len = p.buffer.as_ref().len();
        if len < FIXED_LEN || len < p.packet_len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// The fixed part plus two hardware and two protocol addresses.
    pub fn packet_len(&self) -> usize {
        FIXED_LEN + 2 * usize::from(self.hlen()) + 2 * usize::from(self.plen())
    }

    pub fn htype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HTYPE)
    }

    pub fn ptype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PTYPE)
    }

    pub fn hlen(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    pub fn plen(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    pub fn operation(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OPER)
    }

    fn offsets(&self) -> [usize; 4] {
        let (h, p) = (usize::from(self.hlen()), usize::from(self.plen()));
        [
            FIXED_LEN,
            FIXED_LEN + h,
            FIXED_LEN + h + p,
            FIXED_LEN + 2 * h + p,
        ]
    }

    pub fn source_hardware_addr(&self) -> &[u8] {
        let at = self.offsets()[0];
        &self.buffer.as_ref()[at..at + usize::from(self.hlen())]
    }

    pub fn source_protocol_addr(&self) -> &[u8] {
        let at = self.offsets()[1];
        &self.buffer.as_ref()[at..at + usize::from(self.plen())]
    }

    pub fn target_hardware_addr(&self) -> &[u8] {
        let at = self.offsets()[2];
        &self.buffer.as_ref()[at..at + usize::from(self.hlen())]
    }

    pub fn target_protocol_addr(&self) -> &[u8] {
        let at = self.offsets()[3];
        &self.buffer.as_ref()[at..at + usize::from(self.plen())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_htype(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::HTYPE, v);
    }

    pub fn set_ptype(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::PTYPE, v);
    }

    /// Changing the lengths moves the addresses: set them before the addresses.
    pub fn set_hlen(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }

    pub fn set_plen(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }

    pub fn set_operation(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::OPER, v);
    }

    /// The four addresses in packet order; each slice must have the length `hlen`/`plen`
    /// announce (the copy panics otherwise).
    pub fn set_addrs(&mut self, sha: &[u8], spa: &[u8], tha: &[u8], tpa: &[u8]) {
        let at = self.offsets();
        let buf = self.buffer.as_mut();
        for (i, a) in [sha, spa, tha, tpa].into_iter().enumerate() {
            buf[at[i]..at[i] + a.len()].copy_from_slice(a);
        }
    }
}

/// An Ethernet/IPv4 ARP packet by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// [`arp::OP_REQUEST`], [`arp::OP_REPLY`] or any other value, kept as read.
    pub operation: u16,
    pub source_hardware_addr: EthernetAddress,
    pub source_protocol_addr: Ipv4Addr,
    pub target_hardware_addr: EthernetAddress,
    pub target_protocol_addr: Ipv4Addr,
}

impl Repr {
    /// [`Error::Unsupported`] unless the packet is Ethernet (6-byte) over IPv4 (4-byte).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        let len = packet.buffer.as_ref().len();
        if len < FIXED_LEN || len < packet.packet_len() {
            return Err(Error::Truncated);
        }
        if packet.htype() != arp::HTYPE_ETHERNET
            || packet.ptype() != ethertype::IPV4
            || packet.hlen() != 6
            || packet.plen() != 4
        {
            return Err(Error::Unsupported);
        }
        let v4 = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
        Ok(Repr {
            operation: packet.operation(),
            source_hardware_addr: EthernetAddress::from_bytes(packet.source_hardware_addr())?,
            source_protocol_addr: v4(packet.source_protocol_addr()),
            target_hardware_addr: EthernetAddress::from_bytes(packet.target_hardware_addr())?,
            target_protocol_addr: v4(packet.target_protocol_addr()),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        FIXED_LEN + 2 * 6 + 2 * 4
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_htype(arp::HTYPE_ETHERNET);
        packet.set_ptype(ethertype::IPV4);
        packet.set_hlen(6);
        packet.set_plen(4);
        packet.set_operation(self.operation);
        packet.set_addrs(
            &self.source_hardware_addr.0,
            &self.source_protocol_addr.octets(),
            &self.target_hardware_addr.0,
            &self.target_protocol_addr.octets(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // scapy: ARP(op=1, hwsrc="02:00:00:00:00:01", psrc="192.0.2.1", pdst="192.0.2.9")
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0xc0,
        0x00, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x02, 0x09,
    ];

    #[test]
    fn request_round_trip() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.operation, arp::OP_REQUEST);
        assert_eq!(r.source_protocol_addr, Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(r.target_protocol_addr, Ipv4Addr::new(192, 0, 2, 9));
        assert_eq!(r.target_hardware_addr, EthernetAddress([0; 6]));
        let mut out = [0u8; 28];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, REQUEST);
    }

    #[test]
    fn other_address_lengths_are_viewed_not_parsed() {
        let mut b = REQUEST;
        b[4] = 2; // hlen 2: the packet shrinks to 8 + 4 + 8 bytes
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.packet_len(), 20);
        assert_eq!(p.target_protocol_addr(), &b[16..20]);
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::Unsupported);
        b[4] = 255;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
    }
}
