//! The ICMP and ICMPv6 messages the router originates: errors about packets it could not
//! deliver (`icmp_send`, `icmp6_send`) and echo replies for its own addresses (`icmp_echo`,
//! `icmpv6_echo_reply`), byte for byte as Linux builds them.
//!
//! Each builder is pure: it reads the offending packet (from its IP header, trimmed to the IP
//! length as [`crate::rx::receive`] leaves it), writes the whole reply from its IP header into
//! `out` and returns its length; the caller puts the link-layer header in front. What the
//! kernel decides from its routing state comes in as arguments: the source address, the MTU of
//! the route back, and the two values Linux draws from keyed hashes of its own, which no other
//! router can reproduce and which the differential check masks:
//! - the IPv4 ID: `ip_select_ident` draws it from `ip_idents_reserve`, a per-boot keyed hash of
//!   (destination, source, protocol) into a table of counters (the ICMP socket sends with DF
//!   clear, so every message takes its ID from there);
//! - the IPv6 flow label: with `auto_flowlabels` 1 (the default) `ip6_make_flowlabel` takes it
//!   from the flow hash (`skb_get_hash_flowi6`, keyed per boot) of the reply.
//!
//! The order of the kernel's checks is the caller's to keep: eligibility
//! ([`eligible_v4`], [`eligible_v6`]), then the global rate limit, then the route back and the
//! per-destination rate limit ([`crate::ratelimit`]), then the build (which may still decline:
//! [`NotSent::TinyMtu`]). Everything here is allocation-free; `out` must hold
//! [`MAX_ERROR_V4_LEN`] / [`MAX_ERROR_V6_LEN`] bytes for errors and the request's length for
//! echo replies, else the builder returns [`NotSent::NoRoom`].
//!
//! An IPv4 packet's record-route and timestamp options come back in the reply, with the
//! reply's source and time added where they have room (`__ip_options_echo`, then
//! `ip_options_build`): the caller passes what [`crate::forward::compile_options`] read.
//! Source routes never get this far (they are dropped on receive), nor CIPSO.

use core::net::{Ipv4Addr, Ipv6Addr};

use fibre_wire::checksum;
use fibre_wire::consts::{icmp, icmpv6, ip_proto};
use fibre_wire::{ipv4, ipv6, ipv6_ext, MAX_OPTION_LEN};

use crate::drop::DropReason;
use crate::forward::{Ipv4Options, TS_PRESPEC};
use crate::rx::L2Class;

/// `sysctl_ip_default_ttl` and IPv6's `hop_limit` devconf: the TTL of what the router
/// originates.
pub const DEFAULT_TTL: u8 = 64;

/// RFC 1812 section 4.3.2.3: an ICMPv4 error is at most 576 bytes (IP header included).
pub const MAX_ERROR_V4_LEN: usize = 576;

/// RFC 4443 section 2.4 (c): an ICMPv6 error fits the minimum MTU, 1280 bytes.
pub const MAX_ERROR_V6_LEN: usize = 1280;

/// IPv4 precedence "internetwork control" (RFC 791), which `icmp_send` gives its errors.
const IPTOS_PREC_INTERNETCONTROL: u8 = 0xC0;
/// The four RFC 1349 TOS bits an ICMPv4 error keeps from the offending packet.
const IPTOS_TOS_MASK: u8 = 0x1E;

/// The highest ICMPv4 type the kernel knows (`NR_ICMP_TYPES`): a quoted ICMP message of a
/// higher type counts as an error, and is not answered.
const NR_ICMP_TYPES: u8 = 18;

/// An ICMPv4 error the router sends, with the kernel's names in the docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmp4Error {
    /// Time exceeded in transit (`ICMP_EXC_TTL`), from `ip_forward`.
    TimeExceeded,
    /// Net unreachable: no route (`ENETUNREACH` in `ip_error`).
    NetUnreachable,
    /// Host unreachable: an `unreachable` route (`EHOSTUNREACH`), a failed neighbour.
    HostUnreachable,
    /// Protocol unreachable, for local delivery to a protocol nothing handles.
    ProtoUnreachable,
    /// Port unreachable, for local delivery to a closed port.
    PortUnreachable,
    /// Fragmentation needed and DF set, with the next hop's MTU (RFC 1191).
    FragNeeded { mtu: u32 },
    /// Source route failed (`ICMP_SR_FAILED`).
    SourceRouteFailed,
    /// Communication administratively prohibited (`ICMP_PKT_FILTERED`): a `prohibit` route.
    AdminProhibited,
    /// Parameter problem, the pointer counting from the quoted IP header.
    ParamProblem { pointer: u8 },
    /// Redirect for the host (`ICMP_REDIR_HOST`), naming the better gateway.
    RedirectHost { gateway: Ipv4Addr },
}

impl Icmp4Error {
    /// Type, code and the second 32-bit word of the message.
    pub fn type_code_info(self) -> (u8, u8, [u8; 4]) {
        use icmp::unreach;
        let unreach = |code| (icmp::DEST_UNREACHABLE, code, [0; 4]);
        match self {
            Icmp4Error::TimeExceeded => (icmp::TIME_EXCEEDED, icmp::time_exceeded::TTL, [0; 4]),
            Icmp4Error::NetUnreachable => unreach(unreach::NET),
            Icmp4Error::HostUnreachable => unreach(unreach::HOST),
            Icmp4Error::ProtoUnreachable => unreach(unreach::PROTOCOL),
            Icmp4Error::PortUnreachable => unreach(unreach::PORT),
            Icmp4Error::FragNeeded { mtu } => (
                icmp::DEST_UNREACHABLE,
                unreach::FRAG_NEEDED,
                mtu.to_be_bytes(),
            ),
            Icmp4Error::SourceRouteFailed => unreach(unreach::SOURCE_ROUTE_FAILED),
            Icmp4Error::AdminProhibited => unreach(unreach::ADMIN_PROHIBITED),
            Icmp4Error::ParamProblem { pointer } => (
                icmp::PARAM_PROBLEM,
                icmp::param_problem::POINTER,
                [pointer, 0, 0, 0],
            ),
            Icmp4Error::RedirectHost { gateway } => {
                (icmp::REDIRECT, icmp::redirect::HOST, gateway.octets())
            }
        }
    }
}

/// An ICMPv6 error the router sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmp6Error {
    /// Destination unreachable, no route (`ICMPV6_NOROUTE`): no route, `unreachable` routes.
    NoRoute,
    /// Administratively prohibited (`ICMPV6_ADM_PROHIBITED`): a `prohibit` route.
    AdminProhibited,
    /// Beyond the scope of the source (`ICMPV6_NOT_NEIGHBOUR`): a link-local source leaving
    /// its link.
    BeyondScope,
    /// Address unreachable (`ICMPV6_ADDR_UNREACH`): neighbour resolution failed.
    AddressUnreachable,
    /// Port unreachable.
    PortUnreachable,
    /// Reject route to destination (`ICMPV6_REJECT_ROUTE`).
    RejectRoute,
    /// Packet too big, with the next hop's MTU.
    PacketTooBig { mtu: u32 },
    /// Hop limit exceeded in transit.
    HopLimitExceeded,
    /// Parameter problem: `code` 0 erroneous header field, 1 unknown next header, 2 unknown
    /// option; `pointer` counts from the quoted IPv6 header.
    ParamProblem { code: u8, pointer: u32 },
}

impl Icmp6Error {
    /// Type, code and the second 32-bit word of the message.
    pub fn type_code_info(self) -> (u8, u8, [u8; 4]) {
        use icmpv6::unreach;
        let unreach = |code| (icmpv6::DEST_UNREACHABLE, code, [0; 4]);
        match self {
            Icmp6Error::NoRoute => unreach(unreach::NO_ROUTE),
            Icmp6Error::AdminProhibited => unreach(unreach::ADMIN_PROHIBITED),
            Icmp6Error::BeyondScope => unreach(unreach::BEYOND_SCOPE),
            Icmp6Error::AddressUnreachable => unreach(unreach::ADDRESS),
            Icmp6Error::PortUnreachable => unreach(unreach::PORT),
            Icmp6Error::RejectRoute => unreach(unreach::REJECT_ROUTE),
            Icmp6Error::PacketTooBig { mtu } => (icmpv6::PACKET_TOO_BIG, 0, mtu.to_be_bytes()),
            Icmp6Error::HopLimitExceeded => (
                icmpv6::TIME_EXCEEDED,
                icmpv6::time_exceeded::HOP_LIMIT,
                [0; 4],
            ),
            Icmp6Error::ParamProblem { code, pointer } => {
                (icmpv6::PARAM_PROBLEM, code, pointer.to_be_bytes())
            }
        }
    }
}

/// An error of either family, as the stages return it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpError {
    V4(Icmp4Error),
    V6(Icmp6Error),
}

impl IcmpError {
    /// The ICMP type, which the rate limits key on.
    pub fn msg_type(self) -> u8 {
        match self {
            IcmpError::V4(e) => e.type_code_info().0,
            IcmpError::V6(e) => e.type_code_info().0,
        }
    }
}

/// Why no message was built: the kernel stays silent in each case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSent {
    /// The offending frame came to a link-layer broadcast or multicast address.
    L2NotHost,
    /// The offending packet was routed as broadcast or multicast.
    RouteBroadcast,
    /// A fragment other than the first.
    LaterFragment,
    /// An error about an ICMP error (or an ICMPv4 message of an unknown type).
    AboutError,
    /// IPv6: the offending packet's source is unspecified or multicast, or its destination was
    /// multicast.
    BadAddress,
    /// The route back's MTU leaves no room for the quoted IP header.
    TinyMtu,
    /// The options to echo have no room for what the reply adds (`__ip_options_echo` fails).
    OptionsEcho,
    /// `out` is too small, or the packet is too short to quote.
    NoRoom,
}

/// `icmp_send`'s checks on the offending IPv4 packet `orig` (from its IP header): whether an
/// error may be sent about it at all. `l2` is how its frame came in,
/// `route_broadcast` whether its input route was broadcast or multicast (`RTCF_BROADCAST`,
/// `RTCF_MULTICAST`). Rate limits come after, in [`crate::ratelimit`].
pub fn eligible_v4(orig: &[u8], l2: L2Class, route_broadcast: bool) -> Result<(), NotSent> {
    let p = ipv4::Packet::new_checked(orig).map_err(|_| NotSent::NoRoom)?;
    if l2 != L2Class::Host {
        return Err(NotSent::L2NotHost);
    }
    if route_broadcast {
        return Err(NotSent::RouteBroadcast);
    }
    if p.frag_offset() != 0 {
        return Err(NotSent::LaterFragment);
    }
    if p.protocol() == ip_proto::ICMP {
        // RFC 1122 3.2.2: never an error about an error; unknown types count as errors.
        let inner = *p.payload().first().ok_or(NotSent::AboutError)?;
        if inner > NR_ICMP_TYPES || icmp4_is_error(inner) {
            return Err(NotSent::AboutError);
        }
    }
    Ok(())
}

/// The kernel's `icmp_pointers[type].error`.
fn icmp4_is_error(t: u8) -> bool {
    matches!(
        t,
        icmp::DEST_UNREACHABLE
            | 4 // source quench
            | icmp::REDIRECT
            | icmp::TIME_EXCEEDED
            | icmp::PARAM_PROBLEM
    )
}

/// What the caller decided for an ICMPv4 message the router originates (an error or an echo
/// reply): the values `icmp_send` and `icmp_reply` take from the routing state and their own
/// hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V4Reply {
    /// The source: the offending packet's destination when it was one of the router's
    /// addresses (`RTCF_LOCAL`); otherwise the preferred source of the route back to the
    /// sender (`icmp_route_lookup` with no source, as `icmp_errors_use_inbound_ifaddr` is 0),
    /// and 192.0.0.8 (`INADDR_DUMMY`) when the router has none.
    pub src: Ipv4Addr,
    /// The IPv4 ID (see the module comment).
    pub ident: u16,
    /// The MTU of the route back to the sender: errors are cut to it when below 576 (echo
    /// replies ignore it).
    pub mtu: u32,
    /// The offending packet's options as [`crate::forward::compile_options`] read them (the
    /// default when it had none).
    pub options: Ipv4Options,
    /// Milliseconds since midnight UTC, for a timestamp option.
    pub now_ms: u32,
}

/// `__ip_options_echo` and `ip_options_build`: the options of a reply to `orig`, whose options
/// `o` describes, sent from `src` at `now_ms`, into `out`; returns their length (a multiple of
/// 4, padded with End of List). Record route and timestamp are copied, in that order, with
/// the reply's source address and time in the next free slot when the router's own receive
/// left one for it.
fn echo_options(
    orig: &[u8],
    o: &Ipv4Options,
    src: Ipv4Addr,
    now_ms: u32,
    out: &mut [u8; MAX_OPTION_LEN],
) -> Result<usize, NotSent> {
    let mut len = 0;
    if o.rr != 0 {
        let (opt, ptr) = copy_option(orig, o.rr, out, &mut len)?;
        if o.rr_needaddr && ptr <= opt.len() {
            if ptr + 3 > opt.len() {
                return Err(NotSent::OptionsEcho);
            }
            opt[2] = (ptr + 4) as u8;
            opt[ptr - 1..ptr + 3].copy_from_slice(&src.octets());
        }
    }
    if o.ts != 0 {
        let (opt, mut ptr) = copy_option(orig, o.ts, out, &mut len)?;
        if ptr <= opt.len() {
            if o.ts_needaddr {
                if ptr + 3 > opt.len() {
                    return Err(NotSent::OptionsEcho);
                }
                opt[ptr - 1..ptr + 3].copy_from_slice(&src.octets());
                ptr += 4;
            }
            if o.ts_needtime {
                if ptr + 3 > opt.len() {
                    return Err(NotSent::OptionsEcho);
                }
                if opt[3] & 0x0F != TS_PRESPEC {
                    opt[ptr - 1..ptr + 3].copy_from_slice(&now_ms.to_be_bytes());
                    ptr += 4;
                } else if o.ts_prespec_next_here && ptr + 7 <= opt.len() {
                    opt[ptr + 3..ptr + 7].copy_from_slice(&now_ms.to_be_bytes());
                    ptr += 8;
                }
            }
            opt[2] = ptr as u8;
        }
    }
    let padded = len.next_multiple_of(4);
    out[len..padded].fill(0);
    Ok(padded)
}

/// Appends the option at offset `at` of `orig`'s header to `out` at `*len`; returns the copy
/// and its pointer byte.
fn copy_option<'o>(
    orig: &[u8],
    at: u8,
    out: &'o mut [u8; MAX_OPTION_LEN],
    len: &mut usize,
) -> Result<(&'o mut [u8], usize), NotSent> {
    let at = usize::from(at);
    let opt_len = usize::from(*orig.get(at + 1).ok_or(NotSent::NoRoom)?);
    let src = orig.get(at..at + opt_len).ok_or(NotSent::NoRoom)?;
    let start = *len;
    let dst = out
        .get_mut(start..start + opt_len)
        .ok_or(NotSent::OptionsEcho)?;
    dst.copy_from_slice(src);
    *len += opt_len;
    let ptr = usize::from(*dst.get(2).unwrap_or(&0));
    Ok((dst, ptr))
}

/// Builds the ICMPv4 error `err` about `orig` (an IPv4 packet from its header, as received),
/// after [`eligible_v4`] and the rate limits passed, into `out`; returns its length. The IP
/// header: TOS = the offending TOS's RFC 1349 bits with precedence 6, DF clear, TTL 64, no
/// options. The quote: as much of the offending packet as fits 576 bytes (or the route back's
/// MTU when smaller).
pub fn build_error_v4(
    err: Icmp4Error,
    orig: &[u8],
    reply: &V4Reply,
    out: &mut [u8],
) -> Result<usize, NotSent> {
    let p = ipv4::Packet::new_checked(orig).map_err(|_| NotSent::NoRoom)?;
    let mut opts = [0u8; MAX_OPTION_LEN];
    let opts_len = echo_options(orig, &reply.options, reply.src, reply.now_ms, &mut opts)?;
    let room = (reply.mtu as usize)
        .min(MAX_ERROR_V4_LEN)
        .saturating_sub(ipv4::HEADER_LEN + opts_len + 8);
    if room <= ipv4::HEADER_LEN {
        return Err(NotSent::TinyMtu);
    }
    let quote = &orig[..usize::from(p.total_len()).min(room)];
    let tos = (p.tos() & IPTOS_TOS_MASK) | IPTOS_PREC_INTERNETCONTROL;
    let (t, code, info) = err.type_code_info();
    emit_v4(
        out,
        V4Header {
            src: reply.src,
            dst: p.src_addr(),
            tos,
            ident: reply.ident,
            options: &opts[..opts_len],
        },
        [t, code],
        info,
        quote,
    )
}

/// The IPv4 header fields of an ICMP message the router originates.
struct V4Header<'a> {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    tos: u8,
    ident: u16,
    /// Echoed options, a multiple of 4 bytes.
    options: &'a [u8],
}

/// Writes an IPv4 header (DF clear, TTL 64) and an ICMP message of type and code `tc`, second
/// word `info` and `data`, with both checksums.
fn emit_v4(
    out: &mut [u8],
    h: V4Header,
    tc: [u8; 2],
    info: [u8; 4],
    data: &[u8],
) -> Result<usize, NotSent> {
    let hlen = ipv4::HEADER_LEN + h.options.len();
    let len = hlen + 8 + data.len();
    let out = out.get_mut(..len).ok_or(NotSent::NoRoom)?;
    let repr = ipv4::Repr {
        src_addr: h.src,
        dst_addr: h.dst,
        protocol: ip_proto::ICMP,
        payload_len: 8 + data.len(),
        ttl: DEFAULT_TTL,
        tos: h.tos,
        ident: h.ident,
        reserved_flag: false,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
        options: fibre_wire::OptionBytes::new(h.options).map_err(|_| NotSent::OptionsEcho)?,
    };
    let (hdr, msg) = out.split_at_mut(hlen);
    msg[..2].copy_from_slice(&tc);
    msg[2..4].fill(0);
    msg[4..8].copy_from_slice(&info);
    msg[8..].copy_from_slice(data);
    let c = checksum::checksum(msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    repr.emit(&mut ipv4::Packet::new_unchecked(hdr));
    Ok(len)
}

/// `icmp6_send`'s checks on the offending IPv6 packet `orig` (from its IP header): whether
/// `err` may be sent about it. Unlike IPv4, packets to a multicast destination or in a
/// link-layer multicast frame still get a packet too big, and a parameter problem about an
/// unknown option whose type asks for one even then (action bits 10).
pub fn eligible_v6(err: Icmp6Error, orig: &[u8], l2: L2Class) -> Result<(), NotSent> {
    let p = ipv6::Packet::new_checked(orig).map_err(|_| NotSent::NoRoom)?;
    if p.dst_addr().is_multicast() || l2 != L2Class::Host {
        let always = match err {
            Icmp6Error::PacketTooBig { .. } => true,
            Icmp6Error::ParamProblem { code: 2, pointer } => orig
                .get(pointer as usize)
                .is_some_and(|kind| kind & 0xC0 == 0x80),
            _ => false,
        };
        if !always {
            return Err(if l2 == L2Class::Host {
                NotSent::BadAddress
            } else {
                NotSent::L2NotHost
            });
        }
    }
    let src = p.src_addr();
    if src.is_unspecified() || src.is_multicast() {
        return Err(NotSent::BadAddress);
    }
    if about_icmpv6_error(&p) {
        return Err(NotSent::AboutError);
    }
    Ok(())
}

/// The kernel's `is_ineligible`: the packet carries an ICMPv6 error, or an ICMPv6 message
/// whose type cannot be read (unless a later fragment hides it).
fn about_icmpv6_error(p: &ipv6::Packet<&[u8]>) -> bool {
    let payload = p.payload();
    let Ok(end) = ipv6_ext::walk(p.next_header(), payload) else {
        return false;
    };
    if end.protocol != ip_proto::ICMPV6 {
        return false;
    }
    match payload.get(end.offset) {
        None => !end.later_fragment,
        Some(t) => t & 0x80 == 0,
    }
}

/// What the caller decided for an ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V6Reply {
    /// The source: the offending packet's destination when it is one of the router's
    /// (unicast or anycast) addresses; otherwise the source the route back prefers, or else
    /// the address `ipv6_dev_get_saddr` picks on the incoming link for the sender's address
    /// (packet too big included: `ip6_forward` switches only the device whose table the
    /// reply is routed in to the outgoing one).
    pub src: Ipv6Addr,
    /// The flow label (see the module comment).
    pub flow_label: u32,
}

/// Builds the ICMPv6 error `err` about `orig` (from its IPv6 header, trimmed to its payload
/// length) after [`eligible_v6`] and the rate limits passed; returns its length. Traffic class
/// 0, hop limit 64, and as much of the offending packet as fits 1280 bytes.
pub fn build_error_v6(
    err: Icmp6Error,
    orig: &[u8],
    reply: &V6Reply,
    out: &mut [u8],
) -> Result<usize, NotSent> {
    let p = ipv6::Packet::new_checked(orig).map_err(|_| NotSent::NoRoom)?;
    let quote_len = (ipv6::HEADER_LEN + usize::from(p.payload_len()))
        .min(MAX_ERROR_V6_LEN - ipv6::HEADER_LEN - 8);
    let (t, code, info) = err.type_code_info();
    emit_v6(
        out,
        V6Header {
            src: reply.src,
            dst: p.src_addr(),
            traffic_class: 0,
            flow_label: reply.flow_label,
        },
        [t, code],
        info,
        &orig[..quote_len],
    )
}

struct V6Header {
    src: Ipv6Addr,
    dst: Ipv6Addr,
    traffic_class: u8,
    flow_label: u32,
}

/// Writes an IPv6 header (hop limit 64) and an ICMPv6 message with its checksum.
fn emit_v6(
    out: &mut [u8],
    h: V6Header,
    tc: [u8; 2],
    info: [u8; 4],
    data: &[u8],
) -> Result<usize, NotSent> {
    let msg_len = 8 + data.len();
    let len = ipv6::HEADER_LEN + msg_len;
    let out = out.get_mut(..len).ok_or(NotSent::NoRoom)?;
    let (hdr, msg) = out.split_at_mut(ipv6::HEADER_LEN);
    let mut ip = ipv6::Packet::new_unchecked(hdr);
    ip.set_version_tc_flow(h.traffic_class, h.flow_label);
    ip.set_payload_len(msg_len as u16);
    ip.set_next_header(ip_proto::ICMPV6);
    ip.set_hop_limit(DEFAULT_TTL);
    ip.set_src_addr(h.src);
    ip.set_dst_addr(h.dst);
    msg[..2].copy_from_slice(&tc);
    msg[4..8].copy_from_slice(&info);
    msg[8..].copy_from_slice(data);
    let mut icmp = fibre_wire::icmpv6::Packet::new_unchecked(msg);
    icmp.fill_checksum(h.src, h.dst);
    Ok(len)
}

/// Why an echo request goes unanswered: a drop with its reason, or a reply the kernel
/// declines to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoError {
    Drop(DropReason),
    NotSent(NotSent),
}

/// `icmp_rcv` and `icmp_echo` for an IPv4 ICMP message to one of the router's addresses:
/// `req` is the packet from its IP header (trimmed, not a fragment: the kernel would
/// reassemble first, and the caller counts fragments apart). Writes the echo reply into `out`
/// and returns its length; other ICMP types are the caller's ([`EchoError::NotSent`] with
/// `NoRoom` is never returned for them: they come back as `Ok(0)`).
///
/// Checks, in the kernel's order: the ICMP checksum ([`DropReason::IcmpCsum`]), at least the
/// 8-byte header, an unknown type (above 18: `UnhandledProto`), and an echo to a broadcast or
/// multicast route (`route_broadcast`) with `icmp_echo_ignore_broadcasts` 1
/// ([`DropReason::InvalidProto`]). The reply: the request's ICMP header with type 0 (the code
/// and the identifier and sequence are kept), its data, and an IP header with the request's
/// TOS, TTL 64, DF clear, the request's options echoed, and `reply.src` as the source
/// (`fib_compute_spec_dst`: the request's destination when it is a local unicast address);
/// `reply.mtu` is not used. Echo replies are not rate-limited with the
/// default `icmp_ratemask`. A reply longer than the route back's MTU is fragmented by the
/// caller ([`crate::frag`]), as `ip_append_data` would.
pub fn echo_reply_v4(
    req: &[u8],
    route_broadcast: bool,
    reply: &V4Reply,
    out: &mut [u8],
) -> Result<usize, EchoError> {
    let p = ipv4::Packet::new_checked(req).map_err(|_| EchoError::Drop(DropReason::IpInhdr))?;
    let msg = p.payload();
    if !checksum::verifies(checksum::sum(msg)) {
        return Err(EchoError::Drop(DropReason::IcmpCsum));
    }
    let (&t, _) = msg
        .split_first()
        .filter(|_| msg.len() >= 8)
        .ok_or(EchoError::Drop(DropReason::NotSpecified))?;
    if t > NR_ICMP_TYPES {
        return Err(EchoError::Drop(DropReason::UnhandledProto));
    }
    if route_broadcast && t == icmp::ECHO_REQUEST {
        return Err(EchoError::Drop(DropReason::InvalidProto));
    }
    if t != icmp::ECHO_REQUEST {
        return Ok(0);
    }
    let mut opts = [0u8; MAX_OPTION_LEN];
    let opts_len = echo_options(req, &reply.options, reply.src, reply.now_ms, &mut opts)
        .map_err(EchoError::NotSent)?;
    emit_v4(
        out,
        V4Header {
            src: reply.src,
            dst: p.src_addr(),
            tos: p.tos(),
            ident: reply.ident,
            options: &opts[..opts_len],
        },
        [icmp::ECHO_REPLY, msg[1]],
        [msg[4], msg[5], msg[6], msg[7]],
        &msg[8..],
    )
    .map_err(EchoError::NotSent)
}

/// `icmpv6_rcv` and `icmpv6_echo_reply` for an ICMPv6 message to one of the router's
/// addresses: `req` is the packet from its IPv6 header (trimmed), `l4` the offset of the
/// ICMPv6 message in it. Returns the reply's length, or `Ok(0)` for other ICMPv6 types (the
/// caller's: NDP, errors).
///
/// Checks the ICMPv6 checksum ([`DropReason::IcmpCsum`]) and the 8-byte header. The reply: the
/// request's ICMPv6 header with type 129 (code, identifier and sequence kept), its data, and
/// an IPv6 header with the request's traffic class, hop limit 64 and the caller's `src` (the
/// request's destination when it is a unicast address of the router; for a multicast or
/// anycast destination, the source the route back selects) and flow label (module comment).
/// Echo replies are not rate-limited with the default `ratemask`.
pub fn echo_reply_v6(
    req: &[u8],
    l4: usize,
    src: Ipv6Addr,
    flow_label: u32,
    out: &mut [u8],
) -> Result<usize, EchoError> {
    let p = ipv6::Packet::new_checked(req).map_err(|_| EchoError::Drop(DropReason::IpInhdr))?;
    let end = ipv6::HEADER_LEN + usize::from(p.payload_len());
    let msg = req
        .get(l4..end)
        .ok_or(EchoError::Drop(DropReason::NotSpecified))?;
    let icmp = fibre_wire::icmpv6::Packet::new_unchecked(msg);
    if icmp
        .verify_checksum(p.src_addr(), p.final_dst_addr())
        .is_err()
    {
        return Err(EchoError::Drop(DropReason::IcmpCsum));
    }
    if msg.len() < 8 {
        return Err(EchoError::Drop(DropReason::NotSpecified));
    }
    if msg[0] != icmpv6::ECHO_REQUEST {
        return Ok(0);
    }
    emit_v6(
        out,
        V6Header {
            src,
            dst: p.src_addr(),
            traffic_class: p.traffic_class(),
            flow_label,
        },
        [icmpv6::ECHO_REPLY, msg[1]],
        [msg[4], msg[5], msg[6], msg[7]],
        &msg[8..],
    )
    .map_err(EchoError::NotSent)
}
