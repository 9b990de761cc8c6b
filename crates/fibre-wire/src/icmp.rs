//! ICMP for IPv4 (RFC 792): echo, destination unreachable (with RFC 1191's next-hop MTU for
//! "fragmentation needed"), time exceeded, redirect and parameter problem; any other type is
//! kept whole as [`Repr::Other`].
//!
//! Panic contract: [`Packet::new_unchecked`] never panics; the accessors of a packet built with
//! it panic below [`HEADER_LEN`] bytes, which [`Packet::new_checked`] rejects with
//! [`Error::Truncated`]; after it no accessor or setter panics. The whole buffer is the
//! message: callers pass the IPv4 payload, trimmed to the total length. Parsing never checks
//! the checksum ([`Packet::verify_checksum`] does). [`Repr::emit`] fills the checksum and
//! panics on a buffer shorter than [`Repr::buffer_len`].

use core::net::Ipv4Addr;

use crate::checksum;
use crate::consts::icmp;
use crate::error::{Error, Result};
use crate::field::{array, be16, be16_pair, set_be16};

/// Type, code, checksum and the 4 bytes whose meaning depends on the type.
pub const HEADER_LEN: usize = 8;

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    /// Echo identifier; the unused half of destination unreachable.
    pub const IDENT: usize = 4;
    /// Echo sequence number; destination unreachable's next-hop MTU.
    pub const SEQ: usize = 6;
    pub const REST: usize = 4;
}

/// A view of an ICMP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Echo messages' identifier.
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// Echo messages' sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SEQ)
    }

    /// Destination unreachable's next-hop MTU (RFC 1191; zero except for "fragmentation
    /// needed").
    pub fn next_hop_mtu(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SEQ)
    }

    /// Redirect's gateway.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(array::<4>(self.buffer.as_ref(), field::REST))
    }

    /// Parameter problem's pointer: the octet in error, counted from the quoted IP header.
    pub fn pointer(&self) -> u8 {
        self.buffer.as_ref()[field::REST]
    }

    /// The second 32-bit word, whatever the type.
    pub fn rest_of_header(&self) -> [u8; 4] {
        array(self.buffer.as_ref(), field::REST)
    }

    /// After the 8-byte header: echo data or the quoted datagram.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    pub fn verify_checksum(&self) -> Result<()> {
        checksum::check(checksum::sum(self.buffer.as_ref()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    pub fn set_checksum(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    pub fn set_rest_of_header(&mut self, v: [u8; 4]) {
        self.buffer.as_mut()[field::REST..field::REST + 4].copy_from_slice(&v);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Computes the checksum over the whole buffer and stores it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// An ICMP message by value; `data` borrows the packet (the echo payload, or the quoted IP
/// header and leading payload bytes of an error). The bytes that RFC 792 leaves unused in
/// errors (RFC 4884's length among them) are not kept and are emitted as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    EchoRequest {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    EchoReply {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    /// `next_hop_mtu` is the "fragmentation needed" code's (RFC 1191) and zero otherwise.
    DstUnreachable {
        code: u8,
        next_hop_mtu: u16,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
    Redirect {
        code: u8,
        gateway: Ipv4Addr,
        data: &'a [u8],
    },
    ParamProblem {
        code: u8,
        pointer: u8,
        data: &'a [u8],
    },
    /// Any other type, and echo messages with a code other than 0 (which the RFC does not
    /// define), with the second word as read.
    Other {
        msg_type: u8,
        code: u8,
        rest: [u8; 4],
        data: &'a [u8],
    },
}

impl<'a> Repr<'a> {
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        let p = Packet::new_checked(packet.buffer.as_ref())?;
        let data = &packet.buffer.as_ref()[HEADER_LEN..];
        let code = p.code();
        Ok(match p.msg_type() {
            icmp::ECHO_REQUEST if code == 0 => Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            icmp::ECHO_REPLY if code == 0 => Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            icmp::DEST_UNREACHABLE => Repr::DstUnreachable {
                code,
                next_hop_mtu: p.next_hop_mtu(),
                data,
            },
            icmp::TIME_EXCEEDED => Repr::TimeExceeded { code, data },
            icmp::REDIRECT => Repr::Redirect {
                code,
                gateway: p.gateway(),
                data,
            },
            icmp::PARAM_PROBLEM => Repr::ParamProblem {
                code,
                pointer: p.pointer(),
                data,
            },
            msg_type => Repr::Other {
                msg_type,
                code,
                rest: p.rest_of_header(),
                data,
            },
        })
    }

    /// The message type and code.
    pub fn type_and_code(&self) -> (u8, u8) {
        match *self {
            Repr::EchoRequest { .. } => (icmp::ECHO_REQUEST, 0),
            Repr::EchoReply { .. } => (icmp::ECHO_REPLY, 0),
            Repr::DstUnreachable { code, .. } => (icmp::DEST_UNREACHABLE, code),
            Repr::TimeExceeded { code, .. } => (icmp::TIME_EXCEEDED, code),
            Repr::Redirect { code, .. } => (icmp::REDIRECT, code),
            Repr::ParamProblem { code, .. } => (icmp::PARAM_PROBLEM, code),
            Repr::Other { msg_type, code, .. } => (msg_type, code),
        }
    }

    fn rest_and_data(&self) -> ([u8; 4], &'a [u8]) {
        match *self {
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => (be16_pair(ident, seq_no), data),
            Repr::DstUnreachable {
                next_hop_mtu, data, ..
            } => (be16_pair(0, next_hop_mtu), data),
            Repr::TimeExceeded { data, .. } => ([0; 4], data),
            Repr::Redirect { gateway, data, .. } => (gateway.octets(), data),
            Repr::ParamProblem { pointer, data, .. } => ([pointer, 0, 0, 0], data),
            Repr::Other { rest, data, .. } => (rest, data),
        }
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.rest_and_data().1.len()
    }

    /// Writes the whole message and its checksum.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let (msg_type, code) = self.type_and_code();
        let (rest, data) = self.rest_and_data();
        packet.set_msg_type(msg_type);
        packet.set_code(code);
        packet.set_rest_of_header(rest);
        packet.data_mut()[..data.len()].copy_from_slice(data);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::icmp::unreach;

    // scapy: ICMP(type=3, code=4, nexthopmtu=1400)/IP(src="10.0.0.1", dst="10.0.0.2")/UDP():
    // the quoted IPv4 header and the 8 bytes after it, checksums scapy's.
    const FRAG_NEEDED: [u8; 36] = [
        0x03, 0x04, 0x0b, 0xa0, 0x00, 0x00, 0x05, 0x78, 0x45, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x00,
        0x00, 0x40, 0x11, 0x66, 0xce, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x00, 0x35,
        0x00, 0x35, 0x00, 0x08, 0xeb, 0x71,
    ];

    #[test]
    fn frag_needed_carries_the_mtu() {
        let b = FRAG_NEEDED;
        let p = Packet::new_checked(&b[..]).unwrap();
        p.verify_checksum().unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr::DstUnreachable {
                code: unreach::FRAG_NEEDED,
                next_hop_mtu: 1400,
                data: &b[8..]
            }
        );
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn every_type_round_trips() {
        let data: &[u8] = &[1, 2, 3];
        let reprs = [
            Repr::EchoRequest {
                ident: 7,
                seq_no: 9,
                data,
            },
            Repr::EchoReply {
                ident: 7,
                seq_no: 9,
                data,
            },
            Repr::TimeExceeded { code: 0, data },
            Repr::Redirect {
                code: 1,
                gateway: Ipv4Addr::new(192, 0, 2, 254),
                data,
            },
            Repr::ParamProblem {
                code: 0,
                pointer: 20,
                data,
            },
            Repr::Other {
                msg_type: 13,
                code: 0,
                rest: [1, 2, 3, 4],
                data,
            },
        ];
        for r in reprs {
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            let p = Packet::new_checked(&out[..]).unwrap();
            p.verify_checksum().unwrap();
            assert_eq!(Repr::parse(&p).unwrap(), r);
        }
        assert_eq!(
            Packet::new_checked(&[0u8; 7][..]).unwrap_err(),
            Error::Truncated
        );
    }
}
