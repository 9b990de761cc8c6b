//! IPv6 fixed headers (RFC 8200 section 3). The extension headers after it are read by
//! [`crate::ipv6_ext`], starting from [`Packet::next_header`] and [`Packet::payload`].
//!
//! Panic contract: [`Packet::new_unchecked`] never panics; on a packet built with it the field
//! accessors panic below [`HEADER_LEN`] bytes and [`Packet::payload`] when the payload length
//! points past the buffer. [`Packet::new_checked`] rejects both with [`Error::Truncated`];
//! after it no accessor or setter panics. The version is not checked by the view;
//! [`Repr::parse`] refuses anything but 6 with [`Error::Malformed`]. A payload length of zero
//! is read as zero bytes: jumbograms (RFC 2675) are not supported, and their payload is not
//! reached. [`Repr::emit`] panics on a buffer shorter than [`HEADER_LEN`].

use core::net::Ipv6Addr;

use crate::checksum;
use crate::consts::ip_proto;
use crate::error::{Error, Result};
use crate::field::{array, be16, be32, set_be16, set_be32};
use crate::{ipv6_ext, rpl};

pub const HEADER_LEN: usize = 40;

mod field {
    pub const VER_TC_FLOW: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
}

/// A view of an IPv6 header and its payload (extension headers included).
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

    /// Bytes past the payload length (link-layer padding) are allowed.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        // The first comparison guards the read in the second.
        if len < HEADER_LEN || len < HEADER_LEN + usize::from(self.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn first_word(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }

    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// 20 bits.
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000F_FFFF
    }

    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array::<16>(self.buffer.as_ref(), field::SRC))
    }

    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(array::<16>(self.buffer.as_ref(), field::DST))
    }

    /// The extension headers and upper-layer payload, up to the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// The destination the upper layer's pseudo-header names (RFC 8200 section 8.1): while a
    /// routing header has segments left, the route's final address (the last of a type 0 or
    /// type 2 header's list, the last of an RPL header's (type 3) with its elided octets the
    /// destination's, the first of a segment routing header's); otherwise, and for routing
    /// types it does not know, the destination address. A chain that cannot be walked ends the
    /// search.
    pub fn final_dst_addr(&self) -> Ipv6Addr {
        let mut dst = self.dst_addr();
        let chain = ipv6_ext::Chain::new(self.next_header(), self.payload());
        for h in chain
            .map_while(|h| h.ok())
            .filter(|h| h.kind == ip_proto::IPV6_ROUTING)
        {
            let r = ipv6_ext::Header::new_unchecked(h.bytes);
            if r.routing_type() == rpl::ROUTING_TYPE {
                if let Ok(p) = rpl::Packet::new_checked(h.bytes) {
                    let last = p.address_count().saturating_sub(1);
                    if let Some(a) = p.address(last, dst).filter(|_| p.segments_left() > 0) {
                        dst = a;
                    }
                }
                continue;
            }
            // The addresses start after the 8-byte fixed part in all three types.
            let addrs = &h.bytes[8..];
            let at = match r.routing_type() {
                0 | 2 => addrs.len() / 16 * 16,
                ipv6_ext::ROUTING_SRH => 16,
                _ => 0,
            };
            if r.segments_left() > 0 && at >= 16 && at <= addrs.len() {
                dst = Ipv6Addr::from(array::<16>(addrs, at - 16));
            }
        }
        dst
    }

    /// The pseudo-header an upper layer's checksum covers: the source and
    /// [`Packet::final_dst_addr`].
    pub fn pseudo_header(&self) -> checksum::PseudoHeader {
        checksum::PseudoHeader::V6 {
            src: self.src_addr(),
            dst: self.final_dst_addr(),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Version 6, traffic class and flow label (its low 20 bits) in the first word.
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (6 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000F_FFFF);
        set_be32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }

    pub fn set_payload_len(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::PAYLOAD_LEN, v);
    }

    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v;
    }

    /// IPv6 has no header checksum: forwarding's decrement is a store.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC..field::SRC + 16].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST..field::DST + 16].copy_from_slice(&a.octets());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The fixed header by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    /// The first extension header's or the upper layer's protocol.
    pub next_header: u8,
    /// Extension headers included.
    pub payload_len: usize,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// The fixed header alone: the payload is the caller's to write.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// `payload_len` must fit 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version_tc_flow(self.traffic_class, self.flow_label);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // scapy: IPv6(src="2001:db8::1", dst="2001:db8::2", tc=0xb8, fl=0x12345, hlim=1)/UDP()
    // (the header only; payload length 8).
    const HEADER: [u8; 40] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x08, 0x11, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 1, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
    ];

    #[test]
    fn known_header() {
        let mut b = [0u8; 48];
        b[..40].copy_from_slice(&HEADER);
        let p = Packet::new_checked(&b[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            (r.traffic_class, r.flow_label, r.hop_limit),
            (0xb8, 0x12345, 1)
        );
        assert_eq!((r.next_header, r.payload_len), (17, 8));
        assert_eq!(r.dst_addr, "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        let mut out = [0u8; 40];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, HEADER);
        assert_eq!(Packet::new_checked(&b[..47]).unwrap_err(), Error::Truncated);
    }
}
