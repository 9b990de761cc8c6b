//! Receive checks: what the kernel does to a frame between the driver and the route lookup
//! (`eth_type_trans`, the VLAN untagging of `__netif_receive_skb_core`, `ip_rcv_core`,
//! `ip6_rcv_core` and `ipv6_parse_hopopts`), as one pure function, [`receive`].
//!
//! It reads the frame and never writes it; what it learns comes back as a small `Copy`
//! [`Meta`] (or an [`Rx::Arp`]), what it refuses as an [`Discard`]. The checks run in the
//! kernel's order, so a frame with two faults is counted under the reason the kernel names.
//! IPv4's address-class checks (martian sources and destinations, loopback, zero network) are
//! not here: the kernel makes them in `ip_route_input_slow`, and so does the input route
//! decision (`fibre_fib::Fib::route_input`); IPv6's are here, as in `ip6_rcv_core`. IPv4
//! options are read after the route decision (`ip_rcv_options`), by
//! [`crate::forward::compile_options`].
//!
//! Settings are the kernel's defaults and not configurable here: `drop_unicast_in_l2_multicast`
//! 0, `max_hbh_opts_cnt` 8, `max_hbh_opts_len` unlimited, `ioam6_enabled` 0 (IOAM options are
//! skipped) and no CALIPSO DOI configured (a CALIPSO option drops the packet).

use core::net::{IpAddr, Ipv6Addr};

use fibre_wire::consts::{ethertype, ip_proto};
use fibre_wire::ethernet::{self, Address};
use fibre_wire::{frame, ipv4, ipv6, ipv6_ext, vlan};

use crate::drop::{Discard, DropReason};
use crate::icmp::{Icmp6Error, IcmpError};

/// The frame's class by its destination MAC, as `eth_type_trans` sets `skb->pkt_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L2Class {
    /// To this link's MAC (`PACKET_HOST`).
    Host,
    /// To ff:ff:ff:ff:ff:ff (`PACKET_BROADCAST`).
    Broadcast,
    /// To another group address (`PACKET_MULTICAST`).
    Multicast,
}

/// What [`receive`] learnt of an IP packet. Offsets are from the start of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub l2: L2Class,
    /// Where the IP header starts: 14, or 18/22 behind priority tags (VLAN id 0).
    pub l3: u16,
    /// Where the upper-layer header starts (IPv4: after the options; IPv6: after the
    /// extension headers the chain walk could read, else right after the fixed header).
    pub l4: u16,
    /// The frame's length once link-layer padding is trimmed: `l3` plus the IP total length.
    /// The caller trims the buffer to it (`Buf::trim_back(len - frame_len)`).
    pub frame_len: u16,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IPv4's TOS byte; IPv6's traffic class.
    pub tos: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// The upper-layer protocol (IPv6: at the end of the extension-header chain).
    pub proto: u8,
    /// TCP, UDP or SCTP ports for flow hashing; zero when there are none (a later fragment).
    pub sport: u16,
    pub dport: u16,
    /// IPv6's flow label; zero for IPv4.
    pub flow_label: u32,
    /// IPv4 Don't Fragment.
    pub df: bool,
    /// A fragment: IPv4 MF or offset, IPv6 a fragment header.
    pub fragment: bool,
    /// A fragment other than the first (no upper-layer header).
    pub later_fragment: bool,
    /// IPv4 header options (IHL above 5): the caller runs
    /// [`crate::forward::compile_options`] after the route decision.
    pub options: bool,
    /// A Router Alert option (IPv4 options are only read later; this is IPv6's hop-by-hop).
    pub router_alert: bool,
    /// Where IPv6's hop-by-hop IOAM option starts, from the IP header (its type byte; 4-byte
    /// aligned); 0 when there is none. The first one only: the pipeline fills its trace.
    pub ioam: u16,
}

impl Meta {
    pub fn is_ipv4(&self) -> bool {
        self.src.is_ipv4()
    }

    /// The IP packet's length (header included).
    pub fn ip_len(&self) -> usize {
        usize::from(self.frame_len - self.l3)
    }
}

/// What a frame is, once the checks passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rx {
    Ip(Meta),
    /// An ARP packet at `l3`, for the neighbour stage (it makes its own checks).
    Arp {
        l2: L2Class,
        l3: u16,
    },
}

/// The most hop-by-hop options (padding aside) the kernel reads before it drops the packet:
/// `net.ipv6.max_hbh_opts_cnt`'s default.
const MAX_HBH_OPTS: usize = 8;

/// The class `eth_type_trans` gives a frame to `dst` on a link whose MAC is `mac`; `None` for
/// another station's (`PACKET_OTHERHOST`).
pub fn class_of(dst: Address, mac: Address) -> Option<L2Class> {
    if dst == mac {
        Some(L2Class::Host)
    } else if dst.is_broadcast() {
        Some(L2Class::Broadcast)
    } else if dst.is_multicast() {
        Some(L2Class::Multicast)
    } else {
        None
    }
}

/// Checks one received frame as the kernel does before the route lookup, for a link whose MAC
/// is `mac`. Reads `frame` only; returns what it is ([`Rx`]) or why it goes no further (with
/// the parameter problem that IPv6 hop-by-hop options may ask for). A frame longer than 65535
/// bytes is `PktTooBig`, one shorter than an Ethernet header `PktTooSmall` (the kernel's
/// drivers hand neither up). The caller trims the frame to [`Meta::frame_len`] before
/// forwarding it.
pub fn receive(frame: &[u8], mac: Address) -> Result<Rx, Discard> {
    // Offsets are 16-bit: no link fibre drives carries a larger frame.
    if frame.len() > usize::from(u16::MAX) {
        return Err(DropReason::PktTooBig.into());
    }
    let eth = ethernet::Frame::new_checked(frame).map_err(|_| DropReason::PktTooSmall)?;
    let mut l2 = class_of(eth.dst_addr(), mac);
    // Tags are taken off in the core: a VLAN id no device of this link carries makes the
    // frame another host's; priority tags (id 0) are dropped and the frame goes on untagged.
    // An untagged frame, nearly every one, skips the walk.
    let (ty, tag_len) = match eth.ethertype() {
        ty if !vlan::is_tag(ty) => (ty, 0),
        ty => {
            let (tags, ty, tag_len) =
                vlan::Tags::parse(ty, eth.payload()).map_err(|_| DropReason::UnhandledProto)?;
            if tags.as_slice().iter().any(|(_, t)| t.vid != 0) {
                l2 = None;
            }
            (ty, tag_len)
        }
    };
    let l3 = ethernet::HEADER_LEN + tag_len;
    let body = &frame[l3..];
    match ty {
        ethertype::IPV4 => receive_ipv4(body, l3, l2.ok_or(DropReason::Otherhost)?),
        ethertype::IPV6 => receive_ipv6(body, l3, l2.ok_or(DropReason::Otherhost)?),
        ethertype::ARP => Ok(Rx::Arp {
            l2: l2.ok_or(DropReason::Otherhost)?,
            l3: l3 as u16,
        }),
        _ => Err(DropReason::UnhandledProto.into()),
    }
}

/// The receive checks and the [`Meta`] of an IP packet (of either version) that starts at
/// `ip[0]` with no link-layer header: a packet an SRv6 stage built or uncovered, routed again
/// as the kernel routes it after an encapsulation or a decapsulation. `l2` is the class of the
/// frame it came in.
pub fn ip_meta(ip: &[u8], l2: L2Class) -> Result<Meta, Discard> {
    let got = match ip.first().map(|b| b >> 4) {
        Some(4) => receive_ipv4(ip, 0, l2)?,
        Some(6) => receive_ipv6(ip, 0, l2)?,
        _ => return Err(DropReason::UnhandledProto.into()),
    };
    match got {
        Rx::Ip(m) => Ok(m),
        Rx::Arp { .. } => Err(DropReason::UnhandledProto.into()),
    }
}

/// ip_rcv_core's checks, in its order.
fn receive_ipv4(b: &[u8], l3: usize, l2: L2Class) -> Result<Rx, Discard> {
    if b.len() < ipv4::HEADER_LEN {
        return Err(DropReason::IpInhdr.into());
    }
    let p = ipv4::Packet::new_unchecked(b);
    let hlen = p.header_len();
    if hlen < ipv4::HEADER_LEN || p.version() != 4 || b.len() < hlen {
        return Err(DropReason::IpInhdr.into());
    }
    if p.verify_checksum().is_err() {
        return Err(DropReason::IpCsum.into());
    }
    let total = usize::from(p.total_len());
    if b.len() < total {
        return Err(DropReason::PktTooSmall.into());
    }
    if total < hlen {
        return Err(DropReason::IpInhdr.into());
    }
    let later = p.frag_offset() != 0;
    let proto = p.protocol();
    let (sport, dport) = if later {
        None
    } else {
        frame::ports(proto, &b[hlen..total])
    }
    .unwrap_or((0, 0));
    Ok(Rx::Ip(Meta {
        l2,
        l3: l3 as u16,
        l4: (l3 + hlen) as u16,
        frame_len: (l3 + total) as u16,
        src: IpAddr::V4(p.src_addr()),
        dst: IpAddr::V4(p.dst_addr()),
        tos: p.tos(),
        ttl: p.ttl(),
        proto,
        sport,
        dport,
        flow_label: 0,
        df: p.dont_frag(),
        fragment: p.is_fragment(),
        later_fragment: later,
        options: hlen > ipv4::HEADER_LEN,
        router_alert: false,
        ioam: 0,
    }))
}

/// RFC 4291's multicast scope: the low nibble of the second byte.
fn mc_scope(a: &Ipv6Addr) -> u8 {
    a.octets()[1] & 0x0F
}

/// ip6_rcv_core's checks, in its order, then the hop-by-hop options.
fn receive_ipv6(b: &[u8], l3: usize, l2: L2Class) -> Result<Rx, Discard> {
    if b.len() < ipv6::HEADER_LEN {
        return Err(DropReason::IpInhdr.into());
    }
    let p = ipv6::Packet::new_unchecked(b);
    if p.version() != 6 {
        return Err(DropReason::UnhandledProto.into());
    }
    let (src, dst) = (p.src_addr(), p.dst_addr());
    // RFC 4291 2.5.3 (loopback never on the wire), errata 3480 (interface-local multicast
    // stays on its node), 2.7 (multicast scope 0 is reserved; multicast is never a source).
    if src.is_loopback()
        || dst.is_loopback()
        || (dst.is_multicast() && mc_scope(&dst) <= 1)
        || src.is_multicast()
    {
        return Err(DropReason::IpInhdr.into());
    }
    let payload_len = usize::from(p.payload_len());
    let next = p.next_header();
    // A zero payload length with hop-by-hop options announces a jumbogram: nothing is trimmed
    // and the options decide.
    let total = if payload_len != 0 || next != ip_proto::HOP_BY_HOP {
        if ipv6::HEADER_LEN + payload_len > b.len() {
            return Err(DropReason::PktTooSmall.into());
        }
        ipv6::HEADER_LEN + payload_len
    } else {
        b.len()
    };
    let b = &b[..total];
    let (router_alert, ioam) = if next == ip_proto::HOP_BY_HOP {
        hop_by_hop(b, &dst)?
    } else {
        (false, 0)
    };
    let payload = &b[ipv6::HEADER_LEN..];
    // The kernel reads nothing past hop-by-hop before the route lookup: a chain it cannot
    // walk is forwarded as it is, and only the flow hash loses its ports.
    let end = ipv6_ext::walk(next, payload).ok();
    let (proto, l4, later, fragment) = match end {
        Some(e) => (
            e.protocol,
            e.offset,
            e.later_fragment,
            e.fragment_at.is_some(),
        ),
        None => (next, 0, false, false),
    };
    let (sport, dport) = match end {
        Some(_) if !later => frame::ports(proto, &payload[l4..]),
        _ => None,
    }
    .unwrap_or((0, 0));
    Ok(Rx::Ip(Meta {
        l2,
        l3: l3 as u16,
        l4: (l3 + ipv6::HEADER_LEN + l4) as u16,
        frame_len: (l3 + total) as u16,
        src: IpAddr::V6(src),
        dst: IpAddr::V6(dst),
        tos: p.traffic_class(),
        ttl: p.hop_limit(),
        proto,
        sport,
        dport,
        flow_label: p.flow_label(),
        df: false,
        fragment,
        later_fragment: later,
        options: false,
        router_alert,
        ioam,
    }))
}

/// ipv6_parse_hopopts and ip6_parse_tlv over the hop-by-hop header that follows the fixed
/// header of `b` (trimmed to the packet): whether a Router Alert was found and where the first
/// IOAM option starts (0: none; one not 4-byte aligned is dropped, ipv6_hop_ioam's first
/// check, made whether or not the link takes IOAM), or the drop and
/// the parameter problem the kernel sends. Offsets in the ICMP pointer count from the IPv6
/// header.
fn hop_by_hop(b: &[u8], dst: &Ipv6Addr) -> Result<(bool, u16), Discard> {
    const START: usize = ipv6::HEADER_LEN;
    let len = match b.get(START + 1) {
        Some(l) if b.len() >= START + ipv6_ext::UNIT => (usize::from(*l) + 1) * ipv6_ext::UNIT,
        _ => return Err(DropReason::NotSpecified.into()),
    };
    let opts = b
        .get(START + 2..START + len)
        .ok_or(DropReason::NotSpecified)?;
    let bad = || Discard::from(DropReason::IpInhdr);
    let param_problem = |code, pointer: usize, reason| {
        let pointer = pointer as u32;
        Discard::with_icmp(
            reason,
            IcmpError::V6(Icmp6Error::ParamProblem { code, pointer }),
        )
    };
    let (mut at, mut padlen, mut count, mut router_alert) = (0, 0, 0, false);
    let mut ioam = 0;
    while at < opts.len() {
        let off = START + 2 + at;
        let kind = opts[at];
        if kind == ipv6_ext::option_kind::PAD1 {
            padlen += 1;
            if padlen > 7 {
                return Err(bad());
            }
            at += 1;
            continue;
        }
        let optlen = match opts.get(at + 1) {
            Some(l) if at + 2 + usize::from(*l) <= opts.len() => 2 + usize::from(*l),
            _ => return Err(bad()),
        };
        let data = &opts[at + 2..at + optlen];
        if kind == ipv6_ext::option_kind::PADN {
            // RFC 4942 section 2.1.9.5: padding aligns to 8 bytes at most, and is zeros.
            padlen += optlen;
            if padlen > 7 || data.iter().any(|b| *b != 0) {
                return Err(bad());
            }
        } else {
            count += 1;
            if count > MAX_HBH_OPTS {
                return Err(bad());
            }
            match kind {
                ipv6_ext::option_kind::ROUTER_ALERT => {
                    if data.len() != 2 {
                        return Err(bad());
                    }
                    router_alert = true;
                }
                ipv6_ext::option_kind::JUMBO => {
                    if data.len() != 4 || off % 4 != 2 {
                        return Err(bad());
                    }
                    let jumbo_len = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
                    if jumbo_len <= u32::from(u16::MAX) {
                        return Err(param_problem(0, off + 2, DropReason::IpInhdr));
                    }
                    if b[4..6] != [0, 0] {
                        return Err(param_problem(0, off, DropReason::IpInhdr));
                    }
                    // A jumbogram longer than any frame: its bytes cannot all be here.
                    return Err(DropReason::PktTooSmall.into());
                }
                IOAM => {
                    if !off.is_multiple_of(4) {
                        return Err(bad());
                    }
                    if ioam == 0 {
                        ioam = off as u16;
                    }
                }
                CALIPSO => return Err(bad()),
                _ => match kind >> 6 {
                    0 => {}
                    1 => return Err(DropReason::UnhandledProto.into()),
                    3 if dst.is_multicast() => return Err(DropReason::UnhandledProto.into()),
                    _ => return Err(param_problem(2, off, DropReason::UnhandledProto)),
                },
            }
            padlen = 0;
        }
        at += optlen;
    }
    Ok((router_alert, ioam))
}

/// The IOAM option (RFC 9486), skipped while `ioam6_enabled` is 0.
const IOAM: u8 = 0x31;
/// The CALIPSO option (RFC 5570).
const CALIPSO: u8 = 0x07;

/// The fixed IPv6 header's next-header byte (RFC 8200 section 3).
const IPV6_NEXT_HEADER_FIELD: usize = 6;

/// The routing header type of Mobile IPv6 (RFC 6275), which the kernel processes at a node
/// even with `accept_source_route` 0; every other type with segments left is refused there.
const RH_TYPE_MOBILE: u8 = 2;

/// ip6_input_finish's walk over the extension headers of an IPv6 packet for the router (`ip`
/// from its fixed header, trimmed), before the upper layer sees it: a hop-by-hop header
/// anywhere but first has no handler (parameter problem, unrecognized next header, pointing
/// at the field that named it); a routing header with segments left of a type the router
/// does not process (type 0 is deprecated, RFC 5095) is a parameter problem pointing at its
/// type (ipv6_rthdr_rcv). A chain that cannot be read is a header error.
pub fn local_headers6(ip: &[u8]) -> Result<(), Discard> {
    let Ok(p) = ipv6::Packet::new_checked(ip) else {
        return Err(DropReason::IpInhdr.into());
    };
    let payload = &ip[ipv6::HEADER_LEN..];
    let mut chain = ipv6_ext::Chain::new(p.next_header(), payload);
    // Where the field naming the next header is, from the IPv6 header's start: first the
    // fixed header's.
    let mut naming = IPV6_NEXT_HEADER_FIELD;
    let param_problem = |code, pointer: usize, reason| {
        Discard::with_icmp(
            reason,
            IcmpError::V6(Icmp6Error::ParamProblem {
                code,
                pointer: pointer as u32,
            }),
        )
    };
    for h in &mut chain {
        let h = match h {
            Ok(h) => h,
            Err(_) if chain.end().protocol == ip_proto::HOP_BY_HOP => {
                return Err(param_problem(1, naming, DropReason::UnhandledProto));
            }
            Err(_) => return Err(DropReason::IpInhdr.into()),
        };
        let at = ipv6::HEADER_LEN + h.offset;
        if h.kind == ip_proto::IPV6_ROUTING {
            let (rh_type, segments_left) = (h.bytes[2], h.bytes[3]);
            if segments_left != 0 && rh_type != RH_TYPE_MOBILE {
                return Err(param_problem(0, at + 2, DropReason::IpInhdr));
            }
        }
        naming = at;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    const MAC: Address = Address([2, 0, 0, 0, 0, 1]);

    fn eth(dst: [u8; 6], ty: u16) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&ty.to_be_bytes());
        f
    }

    /// A UDP datagram 192.0.2.1:1000 -> 198.51.100.7:53 with 4 bytes of payload.
    fn ipv4_udp() -> Vec<u8> {
        let mut ip = vec![0u8; 20 + 12];
        let r = ipv4::Repr {
            src_addr: Ipv4Addr::new(192, 0, 2, 1),
            dst_addr: Ipv4Addr::new(198, 51, 100, 7),
            protocol: ip_proto::UDP,
            payload_len: 12,
            ttl: 64,
            tos: 0x10,
            ident: 1,
            reserved_flag: false,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            options: fibre_wire::OptionBytes::EMPTY,
        };
        r.emit(&mut ipv4::Packet::new_unchecked(&mut ip[..]));
        ip[20..24].copy_from_slice(&[0x03, 0xe8, 0x00, 0x35]);
        ip
    }

    fn v4_frame(ip: &[u8]) -> Vec<u8> {
        let mut f = eth(MAC.0, ethertype::IPV4);
        f.extend_from_slice(ip);
        f
    }

    fn err(f: &[u8]) -> DropReason {
        receive(f, MAC).unwrap_err().reason
    }

    #[test]
    fn ipv4_meta_and_padding_trimmed() {
        let mut f = v4_frame(&ipv4_udp());
        f.extend_from_slice(&[0; 6]);
        let Rx::Ip(m) = receive(&f, MAC).unwrap() else {
            panic!("not IP")
        };
        assert_eq!((m.l3, m.l4, m.frame_len), (14, 34, 46));
        assert_eq!(
            (m.proto, m.sport, m.dport, m.ttl, m.tos),
            (17, 1000, 53, 64, 0x10)
        );
        assert!(m.df && !m.fragment && !m.options && m.is_ipv4());
        assert_eq!(m.ip_len(), 32);
    }

    #[test]
    fn ipv4_checks_in_the_kernels_order() {
        let ip = ipv4_udp();
        // Another host's MAC wins over every header fault.
        let mut f = v4_frame(&ip[..10]);
        f[0] = 4;
        assert_eq!(err(&f), DropReason::Otherhost);
        assert_eq!(err(&v4_frame(&ip[..19])), DropReason::IpInhdr);
        let mut bad = ip.clone();
        bad[0] = 0x55;
        assert_eq!(err(&v4_frame(&bad)), DropReason::IpInhdr);
        bad[0] = 0x44;
        assert_eq!(err(&v4_frame(&bad)), DropReason::IpInhdr);
        // IHL 6 with 20 bytes there.
        bad[0] = 0x46;
        assert_eq!(err(&v4_frame(&bad[..20])), DropReason::IpInhdr);
        let mut bad = ip.clone();
        bad[10] ^= 1;
        assert_eq!(err(&v4_frame(&bad)), DropReason::IpCsum);
        // Total length past the frame, then below the header (checksums refilled).
        for (tot, want) in [(33u16, DropReason::PktTooSmall), (19, DropReason::IpInhdr)] {
            let mut bad = ip.clone();
            let mut p = ipv4::Packet::new_unchecked(&mut bad[..]);
            p.set_total_len(tot);
            p.fill_checksum();
            assert_eq!(err(&v4_frame(&bad)), want);
        }
    }

    #[test]
    fn l2_classes_and_tags() {
        let ip = ipv4_udp();
        let class = |dst: [u8; 6]| {
            let mut f = eth(dst, ethertype::IPV4);
            f.extend_from_slice(&ip);
            match receive(&f, MAC) {
                Ok(Rx::Ip(m)) => Ok(m.l2),
                Ok(Rx::Arp { .. }) => panic!("ARP"),
                Err(e) => Err(e.reason),
            }
        };
        assert_eq!(class([0xff; 6]), Ok(L2Class::Broadcast));
        assert_eq!(class([1, 0, 0x5e, 0, 0, 1]), Ok(L2Class::Multicast));
        assert_eq!(class(MAC.0), Ok(L2Class::Host));
        // A priority tag is stripped; a real VLAN id makes the frame another host's.
        for (vid, want) in [(0u16, Ok(18)), (10, Err(DropReason::Otherhost))] {
            let mut f = eth(MAC.0, ethertype::VLAN);
            f.extend_from_slice(&vid.to_be_bytes());
            f.extend_from_slice(&ethertype::IPV4.to_be_bytes());
            f.extend_from_slice(&ip);
            let got = receive(&f, MAC).map(|r| match r {
                Rx::Ip(m) => m.l3,
                Rx::Arp { l3, .. } => l3,
            });
            assert_eq!(got.map_err(|e| e.reason), want);
        }
        let mut arp = eth([0xff; 6], ethertype::ARP);
        arp.extend_from_slice(&[0; 28]);
        assert_eq!(
            receive(&arp, MAC),
            Ok(Rx::Arp {
                l2: L2Class::Broadcast,
                l3: 14
            })
        );
        assert_eq!(err(&eth(MAC.0, 0x88cc)), DropReason::UnhandledProto);
        assert_eq!(err(&[0; 13]), DropReason::PktTooSmall);
    }

    fn v6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = eth(MAC.0, ethertype::IPV6);
        let mut h = [0u8; 40];
        let mut p = ipv6::Packet::new_unchecked(&mut h[..]);
        p.set_version_tc_flow(0xb8, 0x12345);
        p.set_payload_len(payload.len() as u16);
        p.set_next_header(next);
        p.set_hop_limit(2);
        p.set_src_addr(src);
        p.set_dst_addr(dst);
        f.extend_from_slice(&h);
        f.extend_from_slice(payload);
        f
    }

    const A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7);

    #[test]
    fn ipv6_meta_and_address_checks() {
        let udp = [0x04, 0xd2, 0x00, 0x35, 0, 8, 0, 0];
        let mut f = v6(A, B, ip_proto::UDP, &udp);
        f.extend_from_slice(&[0; 4]);
        let Rx::Ip(m) = receive(&f, MAC).unwrap() else {
            panic!("not IP")
        };
        assert_eq!((m.l4, m.frame_len, m.sport, m.dport), (54, 62, 1234, 53));
        assert_eq!((m.tos, m.flow_label, m.ttl), (0xb8, 0x12345, 2));
        let mc = |s: u16| Ipv6Addr::new(0xff00 | s, 0, 0, 0, 0, 0, 0, 1);
        for (s, d) in [
            (Ipv6Addr::LOCALHOST, B),
            (A, Ipv6Addr::LOCALHOST),
            (A, mc(1)),
            (A, mc(0)),
            (mc(2), B),
        ] {
            assert_eq!(
                err(&v6(s, d, ip_proto::UDP, &udp)),
                DropReason::IpInhdr,
                "{s} {d}"
            );
        }
        assert!(receive(&v6(A, mc(2), ip_proto::UDP, &udp), MAC).is_ok());
        let mut short = v6(A, B, ip_proto::UDP, &udp);
        short.truncate(short.len() - 1);
        assert_eq!(err(&short), DropReason::PktTooSmall);
        let mut v = v6(A, B, ip_proto::UDP, &udp);
        v[14] = 0x40;
        assert_eq!(err(&v), DropReason::UnhandledProto);
        assert_eq!(err(&v[..53]), DropReason::IpInhdr);
    }

    fn hbh(opts: &[u8]) -> Result<Rx, Discard> {
        let mut h = vec![ip_proto::UDP, (opts.len() + 2) as u8 / 8 - 1];
        h.extend_from_slice(opts);
        h.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
        receive(&v6(A, B, ip_proto::HOP_BY_HOP, &h), MAC)
    }

    #[test]
    fn hop_by_hop_options() {
        // Router Alert and PadN.
        let Rx::Ip(m) = hbh(&[5, 2, 0, 0, 1, 0]).unwrap() else {
            panic!()
        };
        assert!(m.router_alert && m.proto == ip_proto::UDP && m.dport == 2);
        // PadN with a non-zero byte, then padding longer than 7.
        assert_eq!(
            hbh(&[1, 4, 0, 0, 0, 1]).unwrap_err().reason,
            DropReason::IpInhdr
        );
        let pad8 = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(hbh(&pad8).unwrap_err().reason, DropReason::IpInhdr);
        // Unknown options by their action bits; the pointer is from the IPv6 header.
        assert!(hbh(&[0x1e, 4, 0, 0, 0, 0]).is_ok());
        assert_eq!(
            hbh(&[0x5e, 4, 0, 0, 0, 0]).unwrap_err(),
            Discard::from(DropReason::UnhandledProto)
        );
        for kind in [0x9e, 0xde] {
            assert_eq!(
                hbh(&[1, 0, kind, 2, 0, 0]).unwrap_err(),
                Discard::with_icmp(
                    DropReason::UnhandledProto,
                    IcmpError::V6(Icmp6Error::ParamProblem {
                        code: 2,
                        pointer: 44
                    })
                )
            );
        }
        // A jumbo option with a payload length: pointer at the option's value.
        for (value, pointer) in [([0, 0, 0xff, 0xff], 44), ([0, 1, 0, 0], 42)] {
            let mut o = vec![0xc2, 4];
            o.extend_from_slice(&value);
            o.extend_from_slice(&[1, 6, 0, 0, 0, 0, 0, 0]);
            assert_eq!(
                hbh(&o).unwrap_err().icmp,
                Some(IcmpError::V6(Icmp6Error::ParamProblem { code: 0, pointer }))
            );
        }
        // A jumbo option off its 4n+2 alignment is a header error without a message.
        let misaligned = [0, 0, 0xc2, 4, 0, 1, 0, 0, 1, 2, 0, 0, 0, 0];
        assert_eq!(
            hbh(&misaligned).unwrap_err(),
            Discard::from(DropReason::IpInhdr)
        );
        // Nine non-padding options are one too many.
        let mut many = Vec::new();
        for _ in 0..9 {
            many.extend_from_slice(&[0x1e, 0]);
        }
        many.extend_from_slice(&[1, 2, 0, 0]);
        assert_eq!(hbh(&many).unwrap_err().reason, DropReason::IpInhdr);
    }
}
