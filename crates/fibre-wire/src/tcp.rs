//! TCP headers (RFC 9293): ports for flow hashing, sequence numbers, flags, window; options
//! kept as bytes. A router reads TCP only to hash flows and to quote it in ICMP errors, so no
//! option is interpreted here.
//!
//! Panic contract: [`Packet::new_unchecked`] never panics; the accessors of a packet built with
//! it panic below [`HEADER_LEN`] bytes and [`Packet::options`]/[`Packet::payload`] when the
//! data offset points past the buffer. [`Packet::new_checked`] rejects those with
//! [`Error::Truncated`] and a data offset below 5 with [`Error::Malformed`]; after it no
//! accessor or setter panics. [`Repr::emit`] panics on a buffer shorter than
//! [`Repr::buffer_len`] and writes a zero checksum, to be filled with
//! [`Packet::fill_checksum`] once the payload is in place. Parsing never checks the checksum.

use crate::checksum::{self, PseudoHeader};
use crate::consts::ip_proto;
use crate::error::{Error, Result};
use crate::field::{be16, be32, set_be16, set_be32, OptionBytes};

/// The header without options.
pub const HEADER_LEN: usize = 20;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    /// Data offset (4 bits), reserved (3 bits) and the 9 flag bits.
    pub const OFFSET_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// The flag bits, as in the low 9 bits of the offset/flags word.
pub mod flags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;
    /// RFC 3540's nonce sum, historic (RFC 8311); kept as read.
    pub const NS: u16 = 0x100;
    /// Every flag and the 3 reserved bits.
    pub const MASK: u16 = 0xFFF;
}

/// A view of a TCP segment.
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
        if self.header_len() < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if self.header_len() > len {
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

    pub fn seq_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ)
    }

    pub fn ack_number(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK)
    }

    /// The data offset in bytes.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::OFFSET_FLAGS] >> 4) * 4
    }

    /// The flag bits and the reserved bits above them ([`flags`]).
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OFFSET_FLAGS) & flags::MASK
    }

    pub fn syn(&self) -> bool {
        self.flags() & flags::SYN != 0
    }

    pub fn fin(&self) -> bool {
        self.flags() & flags::FIN != 0
    }

    pub fn rst(&self) -> bool {
        self.flags() & flags::RST != 0
    }

    pub fn ack(&self) -> bool {
        self.flags() & flags::ACK != 0
    }

    pub fn window_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WINDOW)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn urgent_at(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }

    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// To the end of the buffer: TCP has no length field, the caller passes the IP payload.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    fn sum(&self, pseudo: &PseudoHeader) -> u32 {
        let b = self.buffer.as_ref();
        checksum::combine(&[pseudo.sum(ip_proto::TCP, b.len()), checksum::sum(b)])
    }

    pub fn verify_checksum(&self, pseudo: &PseudoHeader) -> Result<()> {
        checksum::check(self.sum(pseudo))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    pub fn set_dst_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    pub fn set_seq_number(&mut self, v: u32) {
        set_be32(self.buffer.as_mut(), field::SEQ, v);
    }

    pub fn set_ack_number(&mut self, v: u32) {
        set_be32(self.buffer.as_mut(), field::ACK, v);
    }

    /// The data offset (`header_len / 4`) and the flag and reserved bits.
    pub fn set_header_len_and_flags(&mut self, header_len: usize, flag_bits: u16) {
        let v = ((header_len as u16 / 4) << 12) | (flag_bits & flags::MASK);
        set_be16(self.buffer.as_mut(), field::OFFSET_FLAGS, v);
    }

    pub fn set_window_len(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::WINDOW, v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    pub fn set_urgent_at(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::URGENT, v);
    }

    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Computes the checksum over the pseudo-header and the whole buffer (header and payload).
    pub fn fill_checksum(&mut self, pseudo: &PseudoHeader) {
        self.set_checksum(0);
        let c = checksum::finish(self.sum(pseudo));
        self.set_checksum(c);
    }
}

/// A TCP header by value (the checksum is computed, not kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq_number: u32,
    pub ack_number: u32,
    /// The flag and reserved bits of [`flags`].
    pub flags: u16,
    pub window_len: u16,
    pub urgent_at: u16,
    pub options: OptionBytes,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_at: packet.urgent_at(),
            options: OptionBytes::new(packet.options())?,
        })
    }

    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    pub fn buffer_len(&self) -> usize {
        self.header_len()
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        packet.set_header_len_and_flags(self.header_len(), self.flags);
        packet.set_window_len(self.window_len);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent_at);
        packet
            .options_mut()
            .copy_from_slice(self.options.as_slice());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv6Addr;

    // scapy: IPv6(src="2001:db8::1", dst="2001:db8::2")/TCP(sport=40000, dport=443,
    // flags="S", seq=1, window=65535, options=[("MSS", 1440)]); the checksum is scapy's.
    const SYN: [u8; 24] = [
        0x9c, 0x40, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x02, 0xff, 0xff, 0x9e, 0xc9, 0, 0,
        0x02, 0x04, 0x05, 0xa0,
    ];

    #[test]
    fn known_syn() {
        let pseudo = PseudoHeader::V6 {
            src: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
            dst: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
        };
        let p = Packet::new_checked(&SYN[..]).unwrap();
        p.verify_checksum(&pseudo).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert!(p.syn() && !p.ack() && !p.fin() && !p.rst());
        assert_eq!(
            (r.src_port, r.dst_port, r.seq_number, r.flags),
            (40000, 443, 1, flags::SYN)
        );
        assert_eq!(r.options.as_slice(), &[2, 4, 5, 0xa0]);
        let mut out = [0u8; 24];
        let mut q = Packet::new_unchecked(&mut out[..]);
        r.emit(&mut q);
        q.fill_checksum(&pseudo);
        assert_eq!(out, SYN);
        let mut b = SYN;
        b[12] = 0x40;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[12] = 0x70;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
    }
}
