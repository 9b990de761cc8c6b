//! Netlink messages: `nlmsghdr`, the control messages (NLMSG_NOOP, NLMSG_ERROR with extended
//! ACK, NLMSG_DONE, NLMSG_OVERRUN) and the rtnetlink payloads, plus message streams.
//!
//! A stream is what one datagram (or `ip monitor file`) carries: messages one after another,
//! each starting on a 4-byte boundary. [`NetlinkMessage::parse`] reads one message and
//! [`Messages`] walks a stream. A message's bytes are `nlmsg_len` long; [`NetlinkMessage::emit`]
//! reproduces exactly those bytes, and [`emit_stream`] adds the zero padding between messages.

use crate::address::AddressMessage;
use crate::link::LinkMessage;
use crate::neighbour::NeighbourMessage;
use crate::nexthop::NexthopMessage;
use crate::nla::{self, attributes, Nest, NlStr};
use crate::route::RouteMessage;
use crate::rule::RuleMessage;
use crate::wire::fixed_header;
use crate::DecodeError;

/// Message types (`nlmsg_type`).
pub mod types {
    pub const NLMSG_NOOP: u16 = 1;
    pub const NLMSG_ERROR: u16 = 2;
    pub const NLMSG_DONE: u16 = 3;
    pub const NLMSG_OVERRUN: u16 = 4;
    pub const RTM_NEWLINK: u16 = 16;
    pub const RTM_DELLINK: u16 = 17;
    pub const RTM_GETLINK: u16 = 18;
    pub const RTM_SETLINK: u16 = 19;
    pub const RTM_NEWADDR: u16 = 20;
    pub const RTM_DELADDR: u16 = 21;
    pub const RTM_GETADDR: u16 = 22;
    pub const RTM_NEWROUTE: u16 = 24;
    pub const RTM_DELROUTE: u16 = 25;
    pub const RTM_GETROUTE: u16 = 26;
    pub const RTM_NEWNEIGH: u16 = 28;
    pub const RTM_DELNEIGH: u16 = 29;
    pub const RTM_GETNEIGH: u16 = 30;
    pub const RTM_NEWRULE: u16 = 32;
    pub const RTM_DELRULE: u16 = 33;
    pub const RTM_GETRULE: u16 = 34;
    pub const RTM_NEWNEXTHOP: u16 = 104;
    pub const RTM_DELNEXTHOP: u16 = 105;
    pub const RTM_GETNEXTHOP: u16 = 106;
    pub const RTM_NEWNEXTHOPBUCKET: u16 = 116;
    pub const RTM_DELNEXTHOPBUCKET: u16 = 117;
    pub const RTM_GETNEXTHOPBUCKET: u16 = 118;
}

/// `nlmsg_flags` (NLM_F_*). The modifiers of "new" requests and of "get" requests share bits.
pub mod flags {
    pub const NLM_F_REQUEST: u16 = 0x01;
    pub const NLM_F_MULTI: u16 = 0x02;
    pub const NLM_F_ACK: u16 = 0x04;
    pub const NLM_F_ECHO: u16 = 0x08;
    pub const NLM_F_DUMP_INTR: u16 = 0x10;
    pub const NLM_F_DUMP_FILTERED: u16 = 0x20;
    // Modifiers of GET requests.
    pub const NLM_F_ROOT: u16 = 0x100;
    pub const NLM_F_MATCH: u16 = 0x200;
    pub const NLM_F_ATOMIC: u16 = 0x400;
    pub const NLM_F_DUMP: u16 = NLM_F_ROOT | NLM_F_MATCH;
    // Modifiers of NEW requests.
    pub const NLM_F_REPLACE: u16 = 0x100;
    pub const NLM_F_EXCL: u16 = 0x200;
    pub const NLM_F_CREATE: u16 = 0x400;
    pub const NLM_F_APPEND: u16 = 0x800;
    // Modifiers of DELETE requests.
    pub const NLM_F_NONREC: u16 = 0x100;
    pub const NLM_F_BULK: u16 = 0x200;
    // Flags of ACK (NLMSG_ERROR) messages.
    /// The request is echoed without its payload.
    pub const NLM_F_CAPPED: u16 = 0x100;
    /// Extended-ACK attributes follow the echoed request.
    pub const NLM_F_ACK_TLVS: u16 = 0x200;
}

/// rtnetlink multicast groups (RTNLGRP_*, named without the prefix) that carry the
/// notifications of the objects this codec knows. Groups 1..=32 are also bits of bind(2)'s
/// legacy `nl_groups` mask (RTMGRP_*): group `g` is bit `g - 1`.
pub mod groups {
    pub const LINK: u32 = 1;
    pub const NEIGH: u32 = 3;
    pub const IPV4_IFADDR: u32 = 5;
    pub const IPV4_ROUTE: u32 = 7;
    pub const IPV4_RULE: u32 = 8;
    pub const IPV6_IFADDR: u32 = 9;
    pub const IPV6_ROUTE: u32 = 11;
    pub const IPV6_RULE: u32 = 19;
    pub const NEXTHOP: u32 = 32;
}

fixed_header! {
    /// `struct nlmsghdr`.
    pub struct NetlinkHeader;
    /// View of `struct nlmsghdr`.
    pub struct NetlinkHeaderPacket;
    len = 16, what = "nlmsghdr";
    {
        /// Length of the message including this header, without trailing padding.
        length, set_length: u32 = 0;
        message_type, set_message_type: u16 = 4;
        flags, set_flags: u16 = 6;
        sequence, set_sequence: u32 = 8;
        /// Sending port id (0 for the kernel).
        port, set_port: u32 = 12;
    }
}

/// Extended-ACK attribute numbers (NLMSGERR_ATTR_*).
pub mod extack {
    pub const NLMSGERR_ATTR_MSG: u16 = 1;
    pub const NLMSGERR_ATTR_OFFS: u16 = 2;
    pub const NLMSGERR_ATTR_COOKIE: u16 = 3;
    pub const NLMSGERR_ATTR_POLICY: u16 = 4;
    pub const NLMSGERR_ATTR_MISS_TYPE: u16 = 5;
    pub const NLMSGERR_ATTR_MISS_NEST: u16 = 6;
}

attributes! {
    /// Extended-ACK attributes (NLMSGERR_ATTR_*), after the echoed request of an NLMSG_ERROR
    /// or the code of an NLMSG_DONE when NLM_F_ACK_TLVS is set.
    pub enum ExtAckAttr<'a> {
        /// Human-readable error text ("Error: ..." in iproute2).
        Msg(NlStr<'a>) = extack::NLMSGERR_ATTR_MSG,
        /// Offset of the offending attribute from the start of the echoed request header.
        Offset(u32) = extack::NLMSGERR_ATTR_OFFS,
        Cookie(&'a [u8]) = extack::NLMSGERR_ATTR_COOKIE,
        Policy(Nest<nla::RawNlaAttr<'a>>) = extack::NLMSGERR_ATTR_POLICY,
        MissingType(u32) = extack::NLMSGERR_ATTR_MISS_TYPE,
        MissingNest(u32) = extack::NLMSGERR_ATTR_MISS_NEST,
    }
}

/// NLMSG_ERROR: an ACK (`error == 0`) or an error (`-errno`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorMessage<'a> {
    /// 0 or a negative errno.
    pub error: i32,
    /// The request as echoed: its header, and its payload unless NLM_F_CAPPED.
    pub request: &'a [u8],
    /// Extended-ACK attributes; present on the wire only with NLM_F_ACK_TLVS.
    pub extack: Vec<ExtAckAttr<'a>>,
}

impl<'a> ErrorMessage<'a> {
    /// The echoed request's header.
    pub fn request_header(&self) -> Option<NetlinkHeader> {
        NetlinkHeader::parse_bytes(self.request, 0).ok()
    }

    /// The NLMSGERR_ATTR_MSG text.
    pub fn message(&self) -> Option<&'a str> {
        self.extack.iter().find_map(|a| match a {
            ExtAckAttr::Msg(s) => s.as_str(),
            _ => None,
        })
    }

    fn parse(body: &'a [u8], flags: u16, base: usize) -> Result<Self, DecodeError> {
        let error = crate::nla_i32(body, base, "nlmsgerr")?;
        let echoed = &body[4..];
        let inner = NetlinkHeader::parse_bytes(echoed, base + 4)?;
        let len = if flags & flags::NLM_F_CAPPED != 0 {
            NetlinkHeader::LEN
        } else {
            inner.length as usize
        };
        if len < NetlinkHeader::LEN || len > echoed.len() {
            return Err(DecodeError::EchoedLength {
                offset: base + 4,
                len: inner.length,
            });
        }
        let padded = nla::align(len);
        if padded > echoed.len() {
            // An echo at the very end of a message needs no padding only if nothing follows;
            // the kernel always pads, so treat a missing pad as not re-emittable.
            return Err(DecodeError::MissingPadding { offset: base + 4 });
        }
        if echoed[len..padded].iter().any(|&b| b != 0) {
            return Err(DecodeError::NonZeroPadding {
                offset: base + 4 + len,
            });
        }
        let rest = &echoed[padded..];
        let extack = if flags & flags::NLM_F_ACK_TLVS != 0 {
            nla::parse_attrs(rest, base + 4 + padded)?
        } else if !rest.is_empty() {
            return Err(DecodeError::TrailingBytes {
                offset: base + 4 + padded,
                count: rest.len(),
            });
        } else {
            Vec::new()
        };
        Ok(ErrorMessage {
            error,
            request: &echoed[..len],
            extack,
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.error.to_ne_bytes());
        out.extend_from_slice(self.request);
        out.resize(
            out.len() + nla::align(self.request.len()) - self.request.len(),
            0,
        );
        nla::emit_attrs(&self.extack, out);
    }
}

/// NLMSG_DONE: the end of a dump, with the dump's result code and, with NLM_F_ACK_TLVS,
/// extended-ACK attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoneMessage<'a> {
    /// 0 or a negative errno; `None` when the message has no body (not from the kernel, which
    /// always sends the code, but legal).
    pub code: Option<i32>,
    pub extack: Vec<ExtAckAttr<'a>>,
}

impl<'a> DoneMessage<'a> {
    fn parse(body: &'a [u8], base: usize) -> Result<Self, DecodeError> {
        if body.is_empty() {
            return Ok(DoneMessage {
                code: None,
                extack: Vec::new(),
            });
        }
        let code = crate::nla_i32(body, base, "NLMSG_DONE code")?;
        let extack = nla::parse_attrs(&body[4..], base + 4)?;
        Ok(DoneMessage {
            code: Some(code),
            extack,
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        if let Some(code) = self.code {
            out.extend_from_slice(&code.to_ne_bytes());
        }
        nla::emit_attrs(&self.extack, out);
    }
}

/// What a message carries, by `nlmsg_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload<'a> {
    Noop(&'a [u8]),
    Error(ErrorMessage<'a>),
    Done(DoneMessage<'a>),
    Overrun(&'a [u8]),
    /// RTM_NEWLINK, RTM_DELLINK, RTM_GETLINK, RTM_SETLINK.
    Link(LinkMessage<'a>),
    /// RTM_NEWADDR, RTM_DELADDR, RTM_GETADDR.
    Address(AddressMessage<'a>),
    /// RTM_NEWROUTE, RTM_DELROUTE, RTM_GETROUTE.
    Route(RouteMessage<'a>),
    /// RTM_NEWNEIGH, RTM_DELNEIGH, RTM_GETNEIGH.
    Neighbour(NeighbourMessage<'a>),
    /// RTM_NEWRULE, RTM_DELRULE, RTM_GETRULE.
    Rule(RuleMessage<'a>),
    /// RTM_NEWNEXTHOP, RTM_DELNEXTHOP, RTM_GETNEXTHOP, and the same for buckets of resilient
    /// groups (RTM_*NEXTHOPBUCKET: the same header and attributes, with NHA_RES_BUCKET).
    Nexthop(NexthopMessage<'a>),
    /// Any other type, and GET requests whose body is shorter than the object's header (the
    /// legacy `struct rtgenmsg` form: one family byte), kept as they came.
    Other(&'a [u8]),
}

/// One netlink message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetlinkMessage<'a> {
    /// The header as parsed; [`NetlinkMessage::emit`] recomputes `length`.
    pub header: NetlinkHeader,
    pub payload: Payload<'a>,
}

fn is_get(t: u16) -> bool {
    use types::*;
    matches!(
        t,
        RTM_GETLINK | RTM_GETADDR | RTM_GETROUTE | RTM_GETNEIGH | RTM_GETRULE | RTM_GETNEXTHOP
    )
}

impl<'a> NetlinkMessage<'a> {
    /// Parses the message at the start of `buf`, which may hold more messages after it.
    /// `base` is the offset of `buf` in the caller's input, for errors. Returns the message and
    /// its length (`nlmsg_len`, without the padding that precedes a next message).
    pub fn parse(buf: &'a [u8], base: usize) -> Result<(Self, usize), DecodeError> {
        use types::*;
        let header = NetlinkHeader::parse_bytes(buf, base)?;
        let len = header.length as usize;
        if len < NetlinkHeader::LEN || len > buf.len() {
            return Err(DecodeError::MessageLength {
                offset: base,
                len: header.length,
                available: buf.len(),
            });
        }
        let body = &buf[NetlinkHeader::LEN..len];
        let at = base + NetlinkHeader::LEN;
        let t = header.message_type;
        let short = |need: usize| is_get(t) && body.len() < need;
        let payload = match t {
            NLMSG_NOOP => Payload::Noop(body),
            NLMSG_ERROR => Payload::Error(ErrorMessage::parse(body, header.flags, at)?),
            NLMSG_DONE => Payload::Done(DoneMessage::parse(body, at)?),
            NLMSG_OVERRUN => Payload::Overrun(body),
            RTM_NEWLINK..=RTM_SETLINK if !short(crate::link::LinkHeader::LEN) => {
                Payload::Link(LinkMessage::parse(body, at)?)
            }
            RTM_NEWADDR..=RTM_GETADDR if !short(crate::address::AddressHeader::LEN) => {
                Payload::Address(AddressMessage::parse(body, at)?)
            }
            RTM_NEWROUTE..=RTM_GETROUTE if !short(crate::route::RouteHeader::LEN) => {
                Payload::Route(RouteMessage::parse(body, at)?)
            }
            RTM_NEWNEIGH..=RTM_GETNEIGH if !short(crate::neighbour::NeighbourHeader::LEN) => {
                Payload::Neighbour(NeighbourMessage::parse(body, at)?)
            }
            RTM_NEWRULE..=RTM_GETRULE if !short(crate::rule::RuleHeader::LEN) => {
                Payload::Rule(RuleMessage::parse(body, at)?)
            }
            RTM_NEWNEXTHOP..=RTM_GETNEXTHOP | RTM_NEWNEXTHOPBUCKET..=RTM_GETNEXTHOPBUCKET
                if !short(crate::nexthop::NexthopHeader::LEN) =>
            {
                Payload::Nexthop(NexthopMessage::parse(body, at)?)
            }
            _ => Payload::Other(body),
        };
        Ok((NetlinkMessage { header, payload }, len))
    }

    /// Appends the message, with `nlmsg_len` set to what was written.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        self.header.emit(out);
        match &self.payload {
            Payload::Noop(b) | Payload::Overrun(b) | Payload::Other(b) => out.extend_from_slice(b),
            Payload::Error(m) => m.emit(out),
            Payload::Done(m) => m.emit(out),
            Payload::Link(m) => m.emit(out),
            Payload::Address(m) => m.emit(out),
            Payload::Route(m) => m.emit(out),
            Payload::Neighbour(m) => m.emit(out),
            Payload::Rule(m) => m.emit(out),
            Payload::Nexthop(m) => m.emit(out),
        }
        let len = (out.len() - start) as u32;
        NetlinkHeaderPacket::new_unchecked(&mut out[start..]).set_length(len);
    }

    /// The message as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.emit(&mut out);
        out
    }
}

/// Iterates over the messages of a stream. Yields each message with its offset; after an error
/// it yields nothing more. The padding between messages must be zero.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Messages<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Messages { buf, pos: 0 }
    }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<(usize, NetlinkMessage<'a>), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let offset = self.pos;
        if offset >= self.buf.len() {
            return None;
        }
        self.pos = self.buf.len();
        let (msg, len) = match NetlinkMessage::parse(&self.buf[offset..], offset) {
            Ok(m) => m,
            Err(e) => return Some(Err(e)),
        };
        let end = offset + len;
        let next = nla::align(end).min(self.buf.len());
        if self.buf[end..next].iter().any(|&b| b != 0) {
            return Some(Err(DecodeError::NonZeroPadding { offset: end }));
        }
        self.pos = next;
        Some(Ok((offset, msg)))
    }
}

/// Parses a whole stream.
pub fn parse_stream(buf: &[u8]) -> Result<Vec<NetlinkMessage<'_>>, DecodeError> {
    Messages::new(buf).map(|r| r.map(|(_, m)| m)).collect()
}

/// Emits messages as a stream, each after the zero padding that aligns it.
pub fn emit_stream(messages: &[NetlinkMessage<'_>], out: &mut Vec<u8>) {
    for m in messages {
        out.resize(nla::align(out.len()), 0);
        m.emit(out);
    }
}

/// The codec's round-trip property, for the fuzzer and the tests that replay its corpus:
/// parses `buf` as a stream as far as it is well-formed, and checks that every message parsed
/// re-emits exactly the bytes it came from. Returns how many messages were checked.
///
/// Panics when the property fails, which is a bug in this crate, never a property of the input.
#[allow(
    clippy::expect_used,
    reason = "a property check: it panics when the property fails"
)]
pub fn check_round_trip(buf: &[u8]) -> usize {
    let mut checked = 0;
    for item in Messages::new(buf) {
        let Ok((offset, msg)) = item else { break };
        let len = msg.header.length as usize;
        let emitted = msg.to_bytes();
        assert_eq!(
            emitted,
            &buf[offset..offset + len],
            "message at offset {offset} re-emits differently"
        );
        let (again, _) = NetlinkMessage::parse(&emitted, 0).expect("emitted message parses");
        assert_eq!(
            again, msg,
            "message at offset {offset} re-parses differently"
        );
        checked += 1;
    }
    checked
}
