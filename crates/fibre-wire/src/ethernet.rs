//! Ethernet II frames: destination, source, EtherType, payload.
//!
//! Panic contract: [`Frame::new_unchecked`] never panics, and the accessors of a frame built
//! with it panic when the buffer is shorter than [`HEADER_LEN`]. [`Frame::new_checked`] fails
//! with [`Error::Truncated`] on such buffers, after which no accessor or setter can panic.
//! [`Repr::emit`] panics when the frame is shorter than [`Repr::buffer_len`]; callers size the
//! buffer with it first. The EtherType is kept as read, whatever its value: a value below
//! [`ethertype::MIN_TYPE`](crate::consts::ethertype::MIN_TYPE) is an 802.3 length, which this
//! view does not interpret.

use core::fmt;

use crate::error::{Error, Result};
use crate::field::{array, be16, set_be16};

/// The fixed header: two addresses and the EtherType.
pub const HEADER_LEN: usize = 14;

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
}

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Address(pub [u8; 6]);

impl Address {
    pub const BROADCAST: Address = Address([0xFF; 6]);

    /// From a slice of exactly 6 bytes.
    pub fn from_bytes(b: &[u8]) -> Result<Address> {
        <[u8; 6]>::try_from(b)
            .map(Address)
            .map_err(|_| Error::Malformed)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// The group bit (the least significant bit of the first octet): multicast or broadcast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The locally administered bit (the second bit of the first octet).
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A view of an Ethernet II frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    pub fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Fails with [`Error::Truncated`] when the buffer cannot hold the header.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn dst_addr(&self) -> Address {
        Address(array(self.buffer.as_ref(), field::DST.start))
    }

    pub fn src_addr(&self) -> Address {
        Address(array(self.buffer.as_ref(), field::SRC.start))
    }

    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Everything after the header, up to the end of the buffer (Ethernet has no length
    /// field: padding to the 60-byte minimum stays in the payload, for the layer above to
    /// trim by its own length).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst_addr(&mut self, addr: Address) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.0);
    }

    pub fn set_src_addr(&mut self, addr: Address) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.0);
    }

    pub fn set_ethertype(&mut self, ethertype: u16) {
        set_be16(self.buffer.as_mut(), field::ETHERTYPE, ethertype);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The header's fields by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub dst_addr: Address,
    pub src_addr: Address,
    pub ethertype: u16,
}

impl Repr {
    /// Never fails on a checked frame; the `Result` keeps the shape of the other `Repr`s.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            ethertype: frame.ethertype(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::ethertype;

    // An ARP request as scapy builds it: Ether()/ARP(), broadcast to ff:ff:ff:ff:ff:ff.
    const FRAME: [u8; 14] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06,
    ];

    #[test]
    fn parse_and_emit_known_header() {
        let frame = Frame::new_checked(&FRAME[..]).unwrap();
        let repr = Repr::parse(&frame).unwrap();
        assert!(repr.dst_addr.is_broadcast());
        assert_eq!(repr.src_addr.to_string(), "02:00:00:00:00:01");
        assert!(repr.src_addr.is_local() && repr.src_addr.is_unicast());
        assert_eq!(repr.ethertype, ethertype::ARP);
        let mut out = [0u8; HEADER_LEN];
        repr.emit(&mut Frame::new_unchecked(&mut out[..]));
        assert_eq!(out, FRAME);
    }

    #[test]
    fn short_buffer_is_truncated() {
        assert_eq!(
            Frame::new_checked(&FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
    }
}
