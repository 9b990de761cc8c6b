//! IPv4 headers (RFC 791), options kept as raw bytes and read through [`crate::ipv4_option`].
//!
//! Panic contract: [`Packet::new_unchecked`] never panics; on a packet built with it the fixed
//! field accessors panic below [`HEADER_LEN`] bytes, and [`Packet::options`] and
//! [`Packet::payload`] when the IHL or total length point past the buffer.
//! [`Packet::new_checked`] returns [`Error::Truncated`] when the buffer is shorter than 20
//! bytes, the IHL or the total length, and [`Error::Malformed`] when the IHL is below 5 or
//! the total length below the header length; after it succeeds no accessor or setter panics.
//! The version is not checked by the view (a receive check counts it on its own):
//! [`Repr::parse`] refuses anything but 4 with [`Error::Malformed`]. Neither looks at the
//! checksum: [`Packet::verify_checksum`] does, so a bad checksum is a drop reason of its own.
//! [`Repr::emit`] panics on a buffer shorter than [`Repr::buffer_len`], and fills the checksum.

use core::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Error, Result};
use crate::field::{array, be16, set_be16, OptionBytes};
use crate::ipv4_option::{Ipv4Option, Options};

/// The header without options.
pub const HEADER_LEN: usize = 20;

mod field {
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
/// The reserved ("evil") bit: kept as read, not interpreted.
const FLAG_RESERVED: u16 = 0x8000;
const FRAG_OFFSET_MASK: u16 = 0x1FFF;

/// A view of an IPv4 header and its payload.
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

    /// The length checks of [`Packet::new_checked`]. Bytes past the total length (link-layer
    /// padding) are allowed: [`Packet::payload`] ends at the total length.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = self.header_len();
        let total_len = usize::from(self.total_len());
        if header_len < HEADER_LEN || total_len < header_len {
            return Err(Error::Malformed);
        }
        if len < header_len || len < total_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The IHL in bytes.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0F) * 4
    }

    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// The whole TOS byte, as the kernel's `iph->tos`.
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    // Inlined so that the three flags a receive check reads share one load.
    #[inline]
    fn flags_frag(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLAGS_FRAG)
    }

    pub fn reserved_flag(&self) -> bool {
        self.flags_frag() & FLAG_RESERVED != 0
    }

    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }

    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }

    /// The fragment offset in 8-byte units, as on the wire.
    pub fn frag_offset(&self) -> u16 {
        self.flags_frag() & FRAG_OFFSET_MASK
    }

    /// A fragment, first or later: MF set or a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        self.flags_frag() & (FLAG_MF | FRAG_OFFSET_MASK) != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(array::<4>(self.buffer.as_ref(), field::SRC))
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(array::<4>(self.buffer.as_ref(), field::DST))
    }

    /// The option bytes (between the fixed header and the IHL), padding included.
    pub fn options_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The options one by one.
    pub fn options(&self) -> Options<'_> {
        Options::new(self.options_bytes())
    }

    /// The destination the upper layer's pseudo-header names (RFC 1122 section 4.1.3.6 for
    /// UDP, RFC 9293 section 3.1 for TCP): with a loose or strict source route, its last
    /// address; otherwise the destination address. A malformed option list ends the search.
    pub fn final_dst_addr(&self) -> Ipv4Addr {
        let mut last = self.dst_addr();
        for opt in self.options().map_while(|o| o.ok()) {
            if let Ipv4Option::LooseSourceRoute { data, .. }
            | Ipv4Option::StrictSourceRoute { data, .. } = opt
            {
                if let Some(a) = data.len().checked_sub(4).and_then(|at| data.get(at..)) {
                    last = Ipv4Addr::from(array::<4>(a, 0));
                }
            }
        }
        last
    }

    /// From the end of the header to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }

    /// [`Error::Checksum`] unless the header sums to all ones.
    pub fn verify_checksum(&self) -> Result<()> {
        checksum::check(checksum::sum(&self.buffer.as_ref()[..self.header_len()]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the version to 4 and the IHL to `header_len / 4`.
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0F);
    }

    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = tos;
    }

    pub fn set_total_len(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::TOTAL_LEN, v);
    }

    pub fn set_ident(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::IDENT, v);
    }

    /// The flags and the fragment offset (in 8-byte units; its low 13 bits are used).
    pub fn set_flags_frag(&mut self, reserved: bool, df: bool, mf: bool, offset: u16) {
        let mut v = offset & FRAG_OFFSET_MASK;
        for (set, bit) in [(reserved, FLAG_RESERVED), (df, FLAG_DF), (mf, FLAG_MF)] {
            if set {
                v |= bit;
            }
        }
        set_be16(self.buffer.as_mut(), field::FLAGS_FRAG, v);
    }

    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    pub fn set_checksum(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC..field::SRC + 4].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST..field::DST + 4].copy_from_slice(&a.octets());
    }

    pub fn options_bytes_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[start..end]
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(&self.buffer.as_ref()[..self.header_len()]);
        self.set_checksum(c);
    }

    /// Forwarding's TTL decrement with the incremental checksum update (RFC 1624). A TTL of 0
    /// wraps to 255: the caller drops such packets before.
    pub fn decrement_ttl(&mut self) {
        let (ttl, proto, c) = (self.ttl(), self.protocol(), self.checksum());
        self.set_ttl(ttl.wrapping_sub(1));
        self.set_checksum(checksum::decrement_ttl(c, ttl, proto));
    }

    /// Rewrites the source address (NAT, a tunnel's outer header) with the checksum updated
    /// incrementally.
    pub fn rewrite_src_addr(&mut self, a: Ipv4Addr) {
        let c = checksum::update32(self.checksum(), self.src_addr().to_bits(), a.to_bits());
        self.set_src_addr(a);
        self.set_checksum(c);
    }

    /// [`Packet::rewrite_src_addr`] for the destination.
    pub fn rewrite_dst_addr(&mut self, a: Ipv4Addr) {
        let c = checksum::update32(self.checksum(), self.dst_addr().to_bits(), a.to_bits());
        self.set_dst_addr(a);
        self.set_checksum(c);
    }
}

/// An IPv4 header by value: everything but the checksum (which emit computes) and the
/// lengths (derived from the options and `payload_len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: u8,
    pub payload_len: usize,
    pub ttl: u8,
    /// DSCP and ECN, the whole byte.
    pub tos: u8,
    pub ident: u16,
    pub reserved_flag: bool,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// In 8-byte units.
    pub frag_offset: u16,
    /// Every option byte as read, padding included (their length is a multiple of 4).
    pub options: OptionBytes,
}

impl Repr {
    /// [`Error::Malformed`] for a version other than 4; lengths as [`Packet::new_checked`].
    /// The options are not interpreted (iterate `repr.options` or [`Packet::options`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            ttl: packet.ttl(),
            tos: packet.tos(),
            ident: packet.ident(),
            reserved_flag: packet.reserved_flag(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
            options: OptionBytes::new(packet.options_bytes())?,
        })
    }

    /// The header's length with its options.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// The header alone: the payload is the caller's to write.
    pub fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header, its total length (header plus `payload_len`, which must fit 16
    /// bits) and its checksum.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let header_len = self.header_len();
        packet.set_version_and_header_len(header_len);
        packet.set_tos(self.tos);
        packet.set_total_len((header_len + self.payload_len) as u16);
        packet.set_ident(self.ident);
        packet.set_flags_frag(
            self.reserved_flag,
            self.dont_frag,
            self.more_frags,
            self.frag_offset,
        );
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.buffer.as_mut()[HEADER_LEN..header_len].copy_from_slice(self.options.as_slice());
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::ip_proto;

    // scapy: IP(src="192.0.2.1", dst="198.51.100.7", ttl=64, id=0x1234, flags="DF",
    //           options=[IPOption_Router_Alert()])/UDP(sport=1000, dport=53)
    // (the UDP checksum, the last two bytes, is scapy's too)
    const UDP_WITH_RA: [u8; 32] = [
        0x46, 0x00, 0x00, 0x20, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0xa7, 0x58, 0xc0, 0x00, 0x02,
        0x01, 0xc6, 0x33, 0x64, 0x07, 0x94, 0x04, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x35, 0x00, 0x08,
        0x0f, 0x85,
    ];

    #[test]
    fn known_header_with_router_alert() {
        let p = Packet::new_checked(&UDP_WITH_RA[..]).unwrap();
        p.verify_checksum().unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.protocol, ip_proto::UDP);
        assert_eq!(
            (r.ttl, r.ident, r.dont_frag, r.payload_len),
            (64, 0x1234, true, 8)
        );
        assert_eq!(r.dst_addr, Ipv4Addr::new(198, 51, 100, 7));
        let opts: Vec<_> = p.options().collect();
        assert_eq!(opts, [Ok(Ipv4Option::RouterAlert { value: 0 })]);
        let mut out = [0u8; 32];
        out[24..].copy_from_slice(&UDP_WITH_RA[24..]);
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, UDP_WITH_RA);
    }

    #[test]
    fn ttl_and_address_rewrites_keep_the_checksum_valid() {
        let mut b = UDP_WITH_RA;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        for _ in 0..64 {
            p.decrement_ttl();
            p.verify_checksum().unwrap();
        }
        assert_eq!(p.ttl(), 0);
        p.rewrite_src_addr(Ipv4Addr::new(10, 255, 0, 1));
        p.rewrite_dst_addr(Ipv4Addr::new(255, 255, 255, 255));
        p.verify_checksum().unwrap();
        let c = p.checksum();
        p.fill_checksum();
        assert_eq!(p.checksum(), c);
    }

    #[test]
    fn length_checks() {
        let mut b = UDP_WITH_RA;
        assert_eq!(Packet::new_checked(&b[..19]).unwrap_err(), Error::Truncated);
        assert_eq!(Packet::new_checked(&b[..31]).unwrap_err(), Error::Truncated);
        b[0] = 0x44;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[0] = 0x46;
        b[3] = 23;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[3] = 32;
        b[0] = 0x66;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.verify_checksum(), Err(Error::Checksum));
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::Malformed);
    }
}
