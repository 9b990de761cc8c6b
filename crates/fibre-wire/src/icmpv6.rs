//! ICMPv6 (RFC 4443): errors (destination unreachable, packet too big, time exceeded,
//! parameter problem), echo, and the Neighbor Discovery messages read by [`crate::ndp`]; any
//! other type is kept whole as [`Repr::Other`].
//!
//! Panic contract: [`Packet::new_unchecked`] never panics; the accessors of a packet built with
//! it panic below [`HEADER_LEN`] bytes, which [`Packet::new_checked`] rejects with
//! [`Error::Truncated`]; after it no accessor or setter panics. The whole buffer is the
//! message (the upper-layer bytes the extension-header walk found). The checksum covers the
//! IPv6 pseudo-header, so [`Packet::verify_checksum`], [`Packet::fill_checksum`] and
//! [`Repr::emit`] take the addresses; parsing never checks it. NDP messages with a code other
//! than 0 are [`Error::Malformed`] (RFC 4861's validity checks; the hop limit of 255 is the
//! caller's to check, from the IPv6 header). [`Repr::emit`] panics on a buffer shorter than
//! [`Repr::buffer_len`].

use core::net::Ipv6Addr;

use crate::checksum;
use crate::consts::{icmpv6, ip_proto};
use crate::error::{Error, Result};
use crate::field::{array, be16, be16_pair, be32, set_be16};
use crate::ndp;

/// Type, code, checksum and the 4 bytes whose meaning depends on the type.
pub const HEADER_LEN: usize = 8;

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    /// Echo identifier and sequence number, the MTU of packet too big, parameter problem's
    /// pointer; NDP messages' fields start here.
    pub const REST: usize = 4;
}

/// A view of an ICMPv6 message.
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

    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::REST)
    }

    pub fn echo_seq_no(&self) -> u16 {
        be16(self.buffer.as_ref(), field::REST + 2)
    }

    /// Packet too big's MTU; parameter problem's pointer.
    pub fn rest_u32(&self) -> u32 {
        be32(self.buffer.as_ref(), field::REST)
    }

    pub fn rest_of_header(&self) -> [u8; 4] {
        array(self.buffer.as_ref(), field::REST)
    }

    /// After the type, code and checksum: what [`ndp::Repr::parse`] reads.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[field::REST..]
    }

    /// After the 8-byte header: echo data or the quoted packet.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    fn sum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        let b = self.buffer.as_ref();
        checksum::combine(&[
            checksum::pseudo_v6(src, dst, ip_proto::ICMPV6, b.len() as u32),
            checksum::sum(b),
        ])
    }

    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> Result<()> {
        checksum::check(self.sum(src, dst))
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

    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::REST..]
    }

    /// Computes the checksum over the pseudo-header and the whole buffer and stores it.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let c = checksum::finish(self.sum(src, dst));
        self.set_checksum(c);
    }
}

/// An ICMPv6 message by value; `data` borrows the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    /// The 4 unused bytes are not kept and are emitted as zero (as in every error below).
    DstUnreachable {
        code: u8,
        data: &'a [u8],
    },
    PacketTooBig {
        mtu: u32,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
    /// `pointer`: the offset of the octet in error in the quoted packet.
    ParamProblem {
        code: u8,
        pointer: u32,
        data: &'a [u8],
    },
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
    Ndp(ndp::Repr<'a>),
    /// Any other type, and echo and packet-too-big messages with a code other than 0 (which
    /// the RFC does not define), with the second word as read.
    Other {
        msg_type: u8,
        code: u8,
        rest: [u8; 4],
        data: &'a [u8],
    },
}

impl<'a> Repr<'a> {
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        let b: &'a [u8] = packet.buffer.as_ref();
        let p = Packet::new_checked(b)?;
        let data = &b[HEADER_LEN..];
        let code = p.code();
        Ok(match p.msg_type() {
            icmpv6::DEST_UNREACHABLE => Repr::DstUnreachable { code, data },
            icmpv6::PACKET_TOO_BIG if code == 0 => Repr::PacketTooBig {
                mtu: p.rest_u32(),
                data,
            },
            icmpv6::TIME_EXCEEDED => Repr::TimeExceeded { code, data },
            icmpv6::PARAM_PROBLEM => Repr::ParamProblem {
                code,
                pointer: p.rest_u32(),
                data,
            },
            icmpv6::ECHO_REQUEST if code == 0 => Repr::EchoRequest {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            icmpv6::ECHO_REPLY if code == 0 => Repr::EchoReply {
                ident: p.echo_ident(),
                seq_no: p.echo_seq_no(),
                data,
            },
            t if ndp::is_ndp(t) => {
                if code != 0 {
                    return Err(Error::Malformed);
                }
                Repr::Ndp(ndp::Repr::parse(t, &b[field::REST..])?)
            }
            msg_type => Repr::Other {
                msg_type,
                code,
                rest: p.rest_of_header(),
                data,
            },
        })
    }

    pub fn type_and_code(&self) -> (u8, u8) {
        match *self {
            Repr::DstUnreachable { code, .. } => (icmpv6::DEST_UNREACHABLE, code),
            Repr::PacketTooBig { .. } => (icmpv6::PACKET_TOO_BIG, 0),
            Repr::TimeExceeded { code, .. } => (icmpv6::TIME_EXCEEDED, code),
            Repr::ParamProblem { code, .. } => (icmpv6::PARAM_PROBLEM, code),
            Repr::EchoRequest { .. } => (icmpv6::ECHO_REQUEST, 0),
            Repr::EchoReply { .. } => (icmpv6::ECHO_REPLY, 0),
            Repr::Ndp(n) => (n.msg_type(), 0),
            Repr::Other { msg_type, code, .. } => (msg_type, code),
        }
    }

    /// The second word and the data after it, for every type but NDP's.
    fn rest_and_data(&self) -> Option<([u8; 4], &'a [u8])> {
        Some(match *self {
            Repr::DstUnreachable { data, .. } | Repr::TimeExceeded { data, .. } => ([0; 4], data),
            Repr::PacketTooBig { mtu: v, data }
            | Repr::ParamProblem {
                pointer: v, data, ..
            } => (v.to_be_bytes(), data),
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
            Repr::Other { rest, data, .. } => (rest, data),
            Repr::Ndp(_) => return None,
        })
    }

    pub fn buffer_len(&self) -> usize {
        match (self, self.rest_and_data()) {
            (Repr::Ndp(n), _) => field::REST + n.body_len(),
            (_, Some((_, data))) => HEADER_LEN + data.len(),
            (_, None) => HEADER_LEN,
        }
    }

    /// Writes the whole message and its checksum, which covers `src` and `dst`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) {
        let (msg_type, code) = self.type_and_code();
        packet.set_msg_type(msg_type);
        packet.set_code(code);
        match (self, self.rest_and_data()) {
            (Repr::Ndp(n), _) => n.emit(packet.body_mut()),
            (_, Some((rest, data))) => {
                let body = packet.body_mut();
                body[..4].copy_from_slice(&rest);
                body[4..4 + data.len()].copy_from_slice(data);
            }
            (_, None) => {}
        }
        packet.fill_checksum(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ndp_option::NdpOption;

    const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);

    // scapy: ICMPv6ND_NS(tgt="fe80::2")/ICMPv6NDOptSrcLLAddr(lladdr="02:00:00:00:00:01") from
    // fe80::1 to ff02::1:ff00:2. The checksum is scapy's: 0x7a97.
    const NS: [u8; 32] = [
        0x87, 0x00, 0x7a, 0x97, 0, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
        0x01, 0x01, 0x02, 0, 0, 0, 0, 0x01,
    ];

    #[test]
    fn neighbor_solicitation() {
        let p = Packet::new_checked(&NS[..]).unwrap();
        p.verify_checksum(SRC, DST).unwrap();
        let r = Repr::parse(&p).unwrap();
        let Repr::Ndp(n @ ndp::Repr::NeighborSolicit { target, .. }) = r else {
            panic!("{r:?}")
        };
        assert_eq!(target, Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2));
        let opts: Vec<_> = n.options().collect();
        assert_eq!(
            opts,
            [Ok(NdpOption::SourceLinkLayerAddr(&[2, 0, 0, 0, 0, 1]))]
        );
        let mut out = [0u8; 32];
        r.emit(&mut Packet::new_unchecked(&mut out[..]), SRC, DST);
        assert_eq!(out, NS);
        assert_eq!(
            p.verify_checksum(DST, SRC),
            Ok(()),
            "the pseudo-header sum is symmetric"
        );
        assert_eq!(p.verify_checksum(SRC, SRC), Err(Error::Checksum));
    }

    #[test]
    fn every_type_round_trips() {
        let data: &[u8] = &[0x60, 0, 0, 0];
        let opts = [1u8, 1, 2, 0, 0, 0, 0, 1];
        let t = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        let reprs = [
            Repr::DstUnreachable { code: 3, data },
            Repr::PacketTooBig { mtu: 1280, data },
            Repr::TimeExceeded { code: 0, data },
            Repr::ParamProblem {
                code: 1,
                pointer: 40,
                data,
            },
            Repr::EchoRequest {
                ident: 1,
                seq_no: 2,
                data,
            },
            Repr::EchoReply {
                ident: 1,
                seq_no: 2,
                data,
            },
            Repr::Other {
                msg_type: 200,
                code: 9,
                rest: [9, 8, 7, 6],
                data,
            },
            Repr::Ndp(ndp::Repr::RouterSolicit { options: &opts }),
            Repr::Ndp(ndp::Repr::RouterAdvert {
                hop_limit: 64,
                flags: ndp::ra_flags::MANAGED,
                router_lifetime: 1800,
                reachable_time: 30_000,
                retrans_time: 1000,
                options: &opts,
            }),
            Repr::Ndp(ndp::Repr::NeighborSolicit {
                target: t,
                options: &[],
            }),
            Repr::Ndp(ndp::Repr::NeighborAdvert {
                flags: ndp::na_flags::SOLICITED,
                target: t,
                options: &opts,
            }),
            Repr::Ndp(ndp::Repr::Redirect {
                target: t,
                dest: SRC,
                options: &opts,
            }),
        ];
        for r in reprs {
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut out[..]), SRC, DST);
            let p = Packet::new_checked(&out[..]).unwrap();
            p.verify_checksum(SRC, DST).unwrap();
            assert_eq!(Repr::parse(&p).unwrap(), r);
        }
        let mut bad = NS;
        bad[1] = 1;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&bad[..]).unwrap()),
            Err(Error::Malformed)
        );
        bad[1] = 0;
        bad[25] = 0;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&bad[..]).unwrap()),
            Err(Error::Malformed)
        );
    }
}
