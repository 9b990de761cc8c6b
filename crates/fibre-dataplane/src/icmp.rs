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
    /// Fragment reassembly time exceeded (`ICMP_EXC_FRAGTIME`), from `ip_expire`.
    ReassemblyTimeExceeded,
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
            Icmp4Error::ReassemblyTimeExceeded => {
                (icmp::TIME_EXCEEDED, icmp::time_exceeded::REASSEMBLY, [0; 4])
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

    fn reply() -> V4Reply {
        V4Reply {
            src: Ipv4Addr::new(10, 0, 0, 1),
            ident: 1,
            mtu: 1500,
            options: Ipv4Options::default(),
            now_ms: 0,
        }
    }

    /// An IPv4 packet of `protocol` from 192.0.2.1 with `payload`.
    fn v4(protocol: u8, payload: &[u8], frag_offset: u16) -> Vec<u8> {
        let r = ipv4::Repr {
            src_addr: SRC,
            dst_addr: Ipv4Addr::new(10, 0, 0, 1),
            protocol,
            payload_len: payload.len(),
            ttl: 1,
            tos: 0,
            ident: 5,
            reserved_flag: false,
            dont_frag: false,
            more_frags: false,
            frag_offset,
            options: fibre_wire::OptionBytes::EMPTY,
        };
        let mut b = vec![0u8; 20];
        r.emit(&mut ipv4::Packet::new_unchecked(&mut b[..]));
        b.extend_from_slice(payload);
        b
    }

    #[test]
    fn v4_eligibility() {
        let udp = v4(ip_proto::UDP, &[0; 8], 0);
        assert_eq!(eligible_v4(&udp, L2Class::Host, false), Ok(()));
        assert_eq!(
            eligible_v4(&udp, L2Class::Broadcast, false),
            Err(NotSent::L2NotHost)
        );
        assert_eq!(
            eligible_v4(&udp, L2Class::Host, true),
            Err(NotSent::RouteBroadcast)
        );
        let later = v4(ip_proto::UDP, &[0; 8], 1);
        assert_eq!(
            eligible_v4(&later, L2Class::Host, false),
            Err(NotSent::LaterFragment)
        );
        for (t, ok) in [(8, true), (0, true), (3, false), (4, false), (19, false)] {
            let p = v4(ip_proto::ICMP, &[t, 0, 0, 0, 0, 0, 0, 0], 0);
            assert_eq!(
                eligible_v4(&p, L2Class::Host, false).is_ok(),
                ok,
                "type {t}"
            );
        }
        let empty = v4(ip_proto::ICMP, &[], 0);
        assert_eq!(
            eligible_v4(&empty, L2Class::Host, false),
            Err(NotSent::AboutError)
        );
        assert_eq!(
            eligible_v4(&udp[..19], L2Class::Host, false),
            Err(NotSent::NoRoom)
        );
    }

    #[test]
    fn v4_quotes_fit_the_route_back() {
        let big = v4(ip_proto::UDP, &[7; 1000], 0);
        let mut out = [0u8; MAX_ERROR_V4_LEN];
        let small_mtu = V4Reply {
            mtu: 100,
            ..reply()
        };
        let n = build_error_v4(Icmp4Error::HostUnreachable, &big, &small_mtu, &mut out);
        assert_eq!(n, Ok(100));
        let tiny = V4Reply { mtu: 48, ..reply() };
        assert_eq!(
            build_error_v4(Icmp4Error::HostUnreachable, &big, &tiny, &mut out),
            Err(NotSent::TinyMtu)
        );
        assert_eq!(
            build_error_v4(Icmp4Error::HostUnreachable, &big, &reply(), &mut out[..575]),
            Err(NotSent::NoRoom)
        );
        let n = build_error_v4(
            Icmp4Error::FragNeeded { mtu: 1400 },
            &big,
            &reply(),
            &mut out,
        );
        assert_eq!(n, Ok(576));
        assert_eq!(
            (&out[20..22], &out[24..28]),
            (&[3, 4][..], &[0, 0, 0x05, 0x78][..])
        );
        let n = build_error_v4(
            Icmp4Error::ParamProblem { pointer: 22 },
            &big,
            &reply(),
            &mut out,
        );
        assert_eq!((n, &out[20..22], out[24]), (Ok(576), &[12u8, 0][..], 22));
    }

    #[test]
    fn v4_options_without_room_for_the_reply_are_not_echoed() {
        // A record route with its pointer on a slot cut short: the echo cannot add the address.
        let mut p = v4(ip_proto::UDP, &[0; 8], 0);
        p.splice(20..20, [7, 7, 6, 10, 0, 0, 1, 0]);
        let mut q = ipv4::Packet::new_unchecked(&mut p[..]);
        q.set_version_and_header_len(28);
        q.set_total_len(36);
        let options = Ipv4Options {
            rr: 20,
            rr_needaddr: true,
            ..Ipv4Options::default()
        };
        let r = V4Reply { options, ..reply() };
        let mut out = [0u8; MAX_ERROR_V4_LEN];
        assert_eq!(
            build_error_v4(Icmp4Error::TimeExceeded, &p, &r, &mut out),
            Err(NotSent::OptionsEcho)
        );
    }

    #[test]
    fn v4_echo_checks() {
        let mut echo = [8u8, 0, 0, 0, 0, 1, 0, 2, b'x'];
        let c = checksum::checksum(&echo);
        echo[2..4].copy_from_slice(&c.to_be_bytes());
        let mut out = [0u8; 64];
        let req = v4(ip_proto::ICMP, &echo, 0);
        assert_eq!(echo_reply_v4(&req, false, &reply(), &mut out), Ok(29));
        assert_eq!(
            (&out[20..22], &out[24..29]),
            (&[0, 0][..], &[0, 1, 0, 2, b'x'][..])
        );
        assert!(checksum::verifies(checksum::sum(&out[20..29])));
        assert_eq!(
            echo_reply_v4(&req, true, &reply(), &mut out),
            Err(EchoError::Drop(DropReason::InvalidProto))
        );
        let mut bad = echo;
        bad[8] = b'y';
        assert_eq!(
            echo_reply_v4(&v4(ip_proto::ICMP, &bad, 0), false, &reply(), &mut out),
            Err(EchoError::Drop(DropReason::IcmpCsum))
        );
        // A checksum over fewer than 8 bytes verifies, and the header is still too short.
        let short = [0xff, 0xff];
        assert_eq!(
            echo_reply_v4(&v4(ip_proto::ICMP, &short, 0), false, &reply(), &mut out),
            Err(EchoError::Drop(DropReason::NotSpecified))
        );
        let mut unknown = [40u8, 0, 0, 0, 0, 0, 0, 0];
        let c = checksum::checksum(&unknown);
        unknown[2..4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            echo_reply_v4(&v4(ip_proto::ICMP, &unknown, 0), false, &reply(), &mut out),
            Err(EchoError::Drop(DropReason::UnhandledProto))
        );
        unknown[0] = 13;
        let c = checksum::checksum(&[13, 0, 0, 0, 0, 0, 0, 0]);
        unknown[2..4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(
            echo_reply_v4(&v4(ip_proto::ICMP, &unknown, 0), false, &reply(), &mut out),
            Ok(0)
        );
        assert_eq!(
            echo_reply_v4(&req, false, &reply(), &mut out[..28]),
            Err(EchoError::NotSent(NotSent::NoRoom))
        );
    }

    fn v6(src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 40];
        let mut p = ipv6::Packet::new_unchecked(&mut b[..]);
        p.set_version_tc_flow(0, 0);
        p.set_payload_len(payload.len() as u16);
        p.set_next_header(ip_proto::UDP);
        p.set_hop_limit(1);
        p.set_src_addr(src);
        p.set_dst_addr(dst);
        b.extend_from_slice(payload);
        b
    }

    #[test]
    fn v6_eligibility() {
        let a = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        let mc = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        let ok = v6(a, a, &[0; 8]);
        let hle = Icmp6Error::HopLimitExceeded;
        let ptb = Icmp6Error::PacketTooBig { mtu: 1280 };
        assert_eq!(eligible_v6(hle, &ok, L2Class::Host), Ok(()));
        assert_eq!(
            eligible_v6(hle, &ok, L2Class::Multicast),
            Err(NotSent::L2NotHost)
        );
        assert_eq!(eligible_v6(ptb, &ok, L2Class::Multicast), Ok(()));
        let to_mc = v6(a, mc, &[0; 8]);
        assert_eq!(
            eligible_v6(hle, &to_mc, L2Class::Host),
            Err(NotSent::BadAddress)
        );
        assert_eq!(eligible_v6(ptb, &to_mc, L2Class::Host), Ok(()));
        for src in [Ipv6Addr::UNSPECIFIED, mc] {
            assert_eq!(
                eligible_v6(ptb, &v6(src, a, &[0; 8]), L2Class::Host),
                Err(NotSent::BadAddress)
            );
        }
        // An unknown option of action 10 at offset 42 is answered even to multicast; 11 not.
        for (kind, ok) in [(0x9e, true), (0xde, false)] {
            let mut p = v6(a, mc, &[0; 8]);
            p[42] = kind;
            let e = Icmp6Error::ParamProblem {
                code: 2,
                pointer: 42,
            };
            assert_eq!(eligible_v6(e, &p, L2Class::Host).is_ok(), ok);
        }
    }

    #[test]
    fn v6_quotes_stop_at_1280() {
        let a = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        let big = v6(a, a, &[9; 1400]);
        let r = V6Reply {
            src: a,
            flow_label: 0xabcde,
        };
        let mut out = [0u8; MAX_ERROR_V6_LEN];
        let n = build_error_v6(Icmp6Error::NoRoute, &big, &r, &mut out).unwrap();
        assert_eq!(n, MAX_ERROR_V6_LEN);
        assert_eq!(&out[..4], &[0x60, 0x0a, 0xbc, 0xde]);
        assert_eq!(&out[40..44], &[1, 0, out[42], out[43]]);
        assert_eq!(
            build_error_v6(Icmp6Error::NoRoute, &big, &r, &mut out[..1279]),
            Err(NotSent::NoRoom)
        );
    }
}
