//! ARP and NDP on the data path: answering for the router's addresses (and proxy entries),
//! learning neighbours from what they send, the solicitations of resolution, and the packets
//! that wait for it.
//!
//! The states and timers of resolution belong to the routing state (`fibre_fib`'s
//! `neigh::resolve`): this module reads the FIB, builds frames, and reports what it heard as
//! [`Learned`] events for the writer to apply. Frames are byte for byte what Linux 6.18 sends
//! (checked live over veth: an ARP request or reply is 42 bytes, unpadded; a neighbour
//! solicitation 86 bytes with the source link-layer option; an advertisement answers a
//! multicast solicitation with the target link-layer option and the override flag, a unicast
//! one without either).
//!
//! Differences from the kernel, each for determinism: a proxy ARP answer goes out at once
//! (the kernel waits a random part of `proxy_delay` unless the request was unicast to it), and
//! an advertisement to a neighbour whose address is unknown goes to the solicitation's
//! Ethernet source instead of waiting for a resolution of its own.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fibre_fib::{Fib, Heard, InputKey, InputRoute, Learn, Override, RouteType};
use fibre_wire::consts::{arp as arp_op, ethertype, ip_proto};
use fibre_wire::ethernet::{self, Address};
use fibre_wire::ndp::{self, na_flags};
use fibre_wire::ndp_option::NdpOption;
use fibre_wire::{arp, icmpv6, ipv6};

use crate::drop::DropReason;
use crate::rx::L2Class;

/// An ARP packet for Ethernet and IPv4 on the wire, and the frame that carries it.
pub const ARP_LEN: usize = 28;
pub const ARP_FRAME_LEN: usize = ethernet::HEADER_LEN + ARP_LEN;
/// A neighbour solicitation or advertisement with one link-layer option, in its frame.
pub const NDP_FRAME_LEN: usize = ethernet::HEADER_LEN + ipv6::HEADER_LEN + 32;
/// The largest frame this module builds.
pub const MAX_FRAME_LEN: usize = NDP_FRAME_LEN;

/// NDP messages are only accepted from the link itself (RFC 4861 section 7.1.1).
const NDP_HOP_LIMIT: u8 = 255;

/// What the writer should learn from a message: [`Heard`] with its address owned, so that it
/// can wait in a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    pub ifindex: u32,
    pub addr: IpAddr,
    pub lladdr: [u8; 6],
    pub how: Learn,
    pub create: bool,
    pub override_ll: Override,
}

impl Learned {
    pub fn heard(&self) -> Heard<'_> {
        Heard {
            ifindex: self.ifindex,
            addr: self.addr,
            lladdr: &self.lladdr,
            how: self.how,
            create: self.create,
            override_ll: self.override_ll,
        }
    }
}

/// What an ARP or NDP message came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Bytes of the answer written into the caller's frame (0: no answer).
    pub reply_len: usize,
    pub learned: Option<Learned>,
    /// Why the message was dropped; `None` when it was consumed (answered, learnt from, or
    /// ignored as the kernel ignores it).
    pub drop: Option<DropReason>,
}

impl Outcome {
    fn consumed() -> Outcome {
        Outcome {
            reply_len: 0,
            learned: None,
            drop: None,
        }
    }

    fn dropped(r: DropReason) -> Outcome {
        Outcome {
            drop: Some(r),
            ..Outcome::consumed()
        }
    }
}

/// The link a message came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnLink {
    pub ifindex: u32,
    pub mac: [u8; 6],
    pub l2: L2Class,
}

fn write_arp(out: &mut [u8], op: u16, eth_dst: [u8; 6], r: &arp::Repr) -> usize {
    let Some(frame) = out.get_mut(..ARP_FRAME_LEN) else {
        return 0;
    };
    let mut eth = ethernet::Frame::new_unchecked(&mut *frame);
    eth.set_dst_addr(Address(eth_dst));
    eth.set_src_addr(r.source_hardware_addr);
    eth.set_ethertype(ethertype::ARP);
    let repr = arp::Repr {
        operation: op,
        ..*r
    };
    repr.emit(&mut arp::Packet::new_unchecked(eth.payload_mut()));
    ARP_FRAME_LEN
}

/// arp_rcv and arp_process for one ARP packet (`body`, after the link-layer header), with the
/// kernel's defaults (arp_ignore, arp_accept, arp_filter and proxy_arp off). Writes the reply,
/// if any, into `out` (at least [`ARP_FRAME_LEN`] bytes).
pub fn arp_input(fib: &Fib, link: OnLink, body: &[u8], out: &mut [u8]) -> Outcome {
    let Ok(p) = arp::Packet::new_checked(body) else {
        return Outcome::dropped(DropReason::PktTooSmall);
    };
    if p.hlen() != 6 || p.plen() != 4 {
        return Outcome::consumed();
    }
    let Ok(a) = arp::Repr::parse(&p) else {
        return Outcome::dropped(DropReason::NotSpecified);
    };
    if a.operation != arp_op::OP_REQUEST && a.operation != arp_op::OP_REPLY {
        return Outcome::dropped(DropReason::NotSpecified);
    }
    let (sip, tip) = (a.source_protocol_addr, a.target_protocol_addr);
    if tip.is_multicast() || tip.is_loopback() {
        return Outcome::dropped(DropReason::IpInvalidDest);
    }
    let sha = a.source_hardware_addr.0;
    let reply = arp::Repr {
        operation: arp_op::OP_REPLY,
        source_hardware_addr: Address(link.mac),
        source_protocol_addr: tip,
        target_hardware_addr: Address(sha),
        target_protocol_addr: sip,
    };
    // A duplicate address probe (RFC 5227): answered for our own address, nothing learnt.
    if sip.is_unspecified() {
        let mut o = Outcome::consumed();
        if a.operation == arp_op::OP_REQUEST
            && fib.addr_type4_on(link.ifindex, tip) == RouteType::Local
        {
            o.reply_len = write_arp(out, arp_op::OP_REPLY, sha, &reply);
        }
        return o;
    }
    if a.operation == arp_op::OP_REQUEST {
        let key = InputKey {
            dst: IpAddr::V4(tip),
            src: IpAddr::V4(sip),
            iif: link.ifindex,
            tos: 0,
            mark: 0,
            proto: 0,
            sport: 0,
            dport: 0,
            flowlabel: 0,
        };
        let answer = match fib.route_input(&key) {
            Ok(InputRoute::Local { .. }) => true,
            // Proxy ARP for a proxy entry, when the target is reached through another link.
            Ok(InputRoute::Forward(f)) => {
                f.oif != link.ifindex && fib.neigh_proxies(link.ifindex, IpAddr::V4(tip))
            }
            _ => false,
        };
        if answer {
            return Outcome {
                reply_len: write_arp(out, arp_op::OP_REPLY, sha, &reply),
                learned: Some(Learned {
                    ifindex: link.ifindex,
                    addr: IpAddr::V4(sip),
                    lladdr: sha,
                    how: Learn::Unconfirmed,
                    create: true,
                    override_ll: Override::Always,
                }),
                drop: None,
            };
        }
    }
    // Anything else updates an entry that exists: a gratuitous ARP (sender and target the
    // same unicast address; for a reply also the same hardware addresses) overrides at once,
    // others after the lock time; a unicast reply confirms.
    let garp = sip == tip
        && (a.operation != arp_op::OP_REPLY || a.target_hardware_addr.0 == sha)
        && fib.addr_type4_on(link.ifindex, sip) == RouteType::Unicast;
    let confirmed = a.operation == arp_op::OP_REPLY && link.l2 == L2Class::Host;
    Outcome {
        reply_len: 0,
        learned: Some(Learned {
            ifindex: link.ifindex,
            addr: IpAddr::V4(sip),
            lladdr: sha,
            how: if confirmed {
                Learn::Confirmed
            } else {
                Learn::Unconfirmed
            },
            create: false,
            override_ll: if garp {
                Override::Always
            } else {
                Override::AfterLocktime
            },
        }),
        drop: None,
    }
}

/// The ARP request that resolves `target` on `link` (arp_solicit with arp_announce 0): from
/// `queued_src` when it is one of the link's own addresses (the source of the packet that
/// waits), else the address inet_select_addr picks at link scope; broadcast, or to `unicast`
/// when re-probing a known address. Returns the frame length, 0 when the link has no IPv4
/// address to ask from.
pub fn arp_request(
    fib: &Fib,
    ifindex: u32,
    mac: [u8; 6],
    target: Ipv4Addr,
    unicast: Option<[u8; 6]>,
    queued_src: Option<Ipv4Addr>,
    out: &mut [u8],
) -> usize {
    let own = queued_src.filter(|s| fib.addr_type4_on(ifindex, *s) == RouteType::Local);
    let Some(sip) = own.or_else(|| fib.select_src4(ifindex, target, fibre_fib::scope::LINK)) else {
        return 0;
    };
    let r = arp::Repr {
        operation: arp_op::OP_REQUEST,
        source_hardware_addr: Address(mac),
        source_protocol_addr: sip,
        target_hardware_addr: Address([0; 6]),
        target_protocol_addr: target,
    };
    write_arp(out, arp_op::OP_REQUEST, unicast.unwrap_or([0xff; 6]), &r)
}

/// The solicited-node multicast group of `a` (RFC 4291 section 2.7.1).
pub fn solicited_node(a: &Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet address of an IPv6 multicast group (RFC 2464 section 7).
fn multicast_mac(a: &Ipv6Addr) -> [u8; 6] {
    let o = a.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// Writes an NDP message (its options included) as an IPv6 packet into `out`; returns its
/// length, 0 when `out` is too small.
fn write_ndp_ip(out: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr, msg: &ndp::Repr) -> usize {
    let icmp_len = 4 + msg.body_len();
    let len = ipv6::HEADER_LEN + icmp_len;
    let Some(packet) = out.get_mut(..len) else {
        return 0;
    };
    let ip = ipv6::Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: ip_proto::ICMPV6,
        payload_len: icmp_len,
        hop_limit: NDP_HOP_LIMIT,
        traffic_class: 0,
        flow_label: 0,
    };
    let mut pkt = ipv6::Packet::new_unchecked(packet);
    ip.emit(&mut pkt);
    let mut icmp = icmpv6::Packet::new_unchecked(pkt.payload_mut());
    icmp.set_msg_type(msg.msg_type());
    icmp.set_code(0);
    msg.emit(icmp.body_mut());
    icmp.fill_checksum(src, dst);
    len
}

/// Writes an NDP message in a frame to `eth_dst`.
fn write_ndp(
    out: &mut [u8],
    eth_dst: [u8; 6],
    eth_src: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    msg: &ndp::Repr,
) -> usize {
    let Some((hdr, rest)) = out.split_at_mut_checked(ethernet::HEADER_LEN) else {
        return 0;
    };
    let len = write_ndp_ip(rest, src, dst, msg);
    if len == 0 {
        return 0;
    }
    let mut eth = ethernet::Frame::new_unchecked(hdr);
    eth.set_dst_addr(Address(eth_dst));
    eth.set_src_addr(Address(eth_src));
    eth.set_ethertype(ethertype::IPV6);
    ethernet::HEADER_LEN + len
}

/// The neighbour solicitation that resolves `target` on `link` (ndisc_solicit): from
/// `queued_src` when it is an address of the link, else the link's link-local address; to the
/// solicited-node group, or to `unicast` when re-probing. Returns 0 when the link has no
/// usable source address (the kernel sends nothing then either).
pub fn neighbour_solicit(
    fib: &Fib,
    ifindex: u32,
    mac: [u8; 6],
    target: Ipv6Addr,
    unicast: Option<[u8; 6]>,
    queued_src: Option<Ipv6Addr>,
    out: &mut [u8],
) -> usize {
    let usable = |flags: u32| {
        flags & (fibre_fib::ifa_flags::TENTATIVE | fibre_fib::ifa_flags::OPTIMISTIC) == 0
    };
    let own = queued_src.filter(|s| fib.addr6_flags_on(ifindex, s).is_some_and(usable));
    let Some(src) = own.or_else(|| fib.link_local6(ifindex)) else {
        return 0;
    };
    let (eth_dst, dst) = match unicast {
        Some(m) => (m, target),
        None => {
            let g = solicited_node(&target);
            (multicast_mac(&g), g)
        }
    };
    let mut opt = [0u8; 8];
    NdpOption::SourceLinkLayerAddr(&mac).emit(&mut opt);
    let msg = ndp::Repr::NeighborSolicit {
        target,
        options: &opt,
    };
    write_ndp(out, eth_dst, mac, src, dst, &msg)
}

/// ndisc_rcv's checks and ndisc_recv_ns / ndisc_recv_na for one NS or NA, whose ICMPv6
/// checksum the caller verified. `ip` is the IPv6 packet (its header first), `icmp` the
/// ICMPv6 message in it. Other NDP messages are the caller's (a router ignores router
/// solicitations and advertisements and redirects; they are punted to the host). Writes an
/// advertisement in answer to a solicitation into `out` (at least [`NDP_FRAME_LEN`] bytes).
pub fn ndp_input(
    fib: &Fib,
    link: OnLink,
    eth_src: [u8; 6],
    ip: &ipv6::Packet<&[u8]>,
    icmp: &icmpv6::Packet<&[u8]>,
    out: &mut [u8],
) -> Outcome {
    if ip.hop_limit() != NDP_HOP_LIMIT {
        return Outcome::dropped(DropReason::Ipv6NdiscHopLimit);
    }
    if icmp.code() != 0 {
        return Outcome::dropped(DropReason::Ipv6NdiscBadCode);
    }
    let Ok(msg) = ndp::Repr::parse(icmp.msg_type(), icmp.body()) else {
        return Outcome::dropped(DropReason::Ipv6NdiscBadOptions);
    };
    let lladdr = |want_source: bool| {
        msg.options().find_map(|o| match (o, want_source) {
            (Ok(NdpOption::SourceLinkLayerAddr(l)), true)
            | (Ok(NdpOption::TargetLinkLayerAddr(l)), false) => {
                l.get(..6).and_then(|l| <[u8; 6]>::try_from(l).ok())
            }
            _ => None,
        })
    };
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    match msg {
        ndp::Repr::NeighborSolicit { target, .. } => {
            let sllao = lladdr(true);
            let dad = src.is_unspecified();
            if target.is_multicast() || (dad && (dst != solicited_node(&target) || sllao.is_some()))
            {
                return Outcome::dropped(DropReason::Ipv6NdiscBadOptions);
            }
            let ours = fib.addr6_flags_on(link.ifindex, &target);
            let proxied = ours.is_none() && fib.neigh_proxies(link.ifindex, IpAddr::V6(target));
            if ours.is_none() && !proxied {
                return Outcome::dropped(DropReason::Ipv6NdiscNsOtherhost);
            }
            if ours.is_some_and(|f| f & fibre_fib::ifa_flags::TENTATIVE != 0) {
                // Our own address still under duplicate address detection: fibre runs none,
                // so such an address never answers.
                return Outcome::consumed();
            }
            let multicast = dst.is_multicast();
            let mut flags = na_flags::SOLICITED;
            if fib.settings().ipv6_forwarding {
                flags |= na_flags::ROUTER;
            }
            let (na_dst, eth_dst) = if dad {
                flags &= !na_flags::SOLICITED;
                let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
                (all, multicast_mac(&all))
            } else {
                let mac = sllao
                    .or_else(|| {
                        fib.neigh_state(link.ifindex, IpAddr::V6(src))
                            .and_then(|(_, ha)| ha)
                    })
                    .unwrap_or(eth_src);
                (src, mac)
            };
            // The override flag and the target's address go with an answer to a multicast
            // solicitation (a unicast one already knew the address); a proxy answer never
            // overrides.
            let with_tllao = multicast || dad;
            if with_tllao && ours.is_some() {
                flags |= na_flags::OVERRIDE;
            }
            let mut opt = [0u8; 8];
            NdpOption::TargetLinkLayerAddr(&link.mac).emit(&mut opt);
            let na = ndp::Repr::NeighborAdvert {
                flags,
                target,
                options: if with_tllao { &opt } else { &[] },
            };
            let na_src = if ours.is_some() {
                target
            } else {
                match fib.select_src6(Some(link.ifindex), &na_dst) {
                    Some(a) => a,
                    None => return Outcome::consumed(),
                }
            };
            let reply_len = write_ndp(out, eth_dst, link.mac, na_src, na_dst, &na);
            // The sender is learnt from a unicast solicitation or one with its address.
            let learned = (!dad && (!multicast || sllao.is_some())).then(|| Learned {
                ifindex: link.ifindex,
                addr: IpAddr::V6(src),
                lladdr: sllao.unwrap_or(eth_src),
                how: Learn::Unconfirmed,
                create: true,
                override_ll: Override::Always,
            });
            Outcome {
                reply_len,
                // Without the option a unicast solicitation creates the entry but teaches no
                // address: the kernel leaves it without one.
                learned: learned.filter(|_| sllao.is_some()),
                drop: None,
            }
        }
        ndp::Repr::NeighborAdvert { flags, target, .. } => {
            if target.is_multicast() || (dst.is_multicast() && flags & na_flags::SOLICITED != 0) {
                return Outcome::dropped(DropReason::Ipv6NdiscBadOptions);
            }
            let Some(tllao) = lladdr(false) else {
                return Outcome::consumed();
            };
            Outcome {
                reply_len: 0,
                learned: Some(Learned {
                    ifindex: link.ifindex,
                    addr: IpAddr::V6(target),
                    lladdr: tllao,
                    how: if flags & na_flags::SOLICITED != 0 {
                        Learn::Confirmed
                    } else {
                        Learn::Unconfirmed
                    },
                    create: false,
                    override_ll: if flags & na_flags::OVERRIDE != 0 {
                        Override::Always
                    } else {
                        Override::Never
                    },
                }),
                drop: None,
            }
        }
        _ => Outcome::consumed(),
    }
}

/// The most bytes of a redirected packet a redirect quotes: what fits IPv6's minimum MTU
/// after the IPv6 header, the redirect's fixed part and a target link-layer option.
const REDIRECT_QUOTE_ROOM: usize = 1280 - 40 - 40 - 8;

/// Whether `ndisc_send_redirect` would tell the source `src` of a packet to `dst`, received
/// and leaving on `ifindex`, to use `target` instead: the link needs a link-local address
/// (the redirect's source, returned), the target must be the destination itself or a
/// link-local unicast address, and the source must be reachable on the link directly.
pub fn redirect6_source(
    fib: &Fib,
    ifindex: u32,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
) -> Option<Ipv6Addr> {
    let lladdr = fib.link_local6(ifindex)?;
    let link_local = target.segments()[0] & 0xffc0 == 0xfe80;
    if target != dst && !link_local {
        return None;
    }
    let back = fib
        .route_output(IpAddr::V6(src), Some(IpAddr::V6(lladdr)), 0)
        .ok()?;
    (back.gateway.is_none() && back.oif == ifindex).then_some(lladdr)
}

/// Builds the redirect (RFC 4861 section 8.2) about `orig` (the IPv6 packet as received, its
/// hop limit not yet decremented) from `lladdr` to its source: `target` and the packet's
/// destination, the target's link-layer address when its neighbour entry has one, and as much
/// of the packet as fits 1280 bytes, in whole 8-byte units. Writes the IPv6 packet into `out`
/// and returns its length (0 when `out` is too small).
pub fn redirect6(
    fib: &Fib,
    ifindex: u32,
    lladdr: Ipv6Addr,
    target: Ipv6Addr,
    orig: &[u8],
    out: &mut [u8],
) -> usize {
    let Ok(p) = ipv6::Packet::new_checked(orig) else {
        return 0;
    };
    let ha = fib
        .neigh_state(ifindex, IpAddr::V6(target))
        .and_then(|(_, ha)| ha);
    let tllao = if ha.is_some() { 8 } else { 0 };
    let rd_len = (REDIRECT_QUOTE_ROOM + 8 - tllao).min(orig.len() + 8) & !7;
    let mut opts = [0u8; REDIRECT_QUOTE_ROOM + 8];
    if let Some(ha) = ha {
        NdpOption::TargetLinkLayerAddr(&ha).emit(&mut opts[..8]);
    }
    NdpOption::RedirectedHeader(&orig[..rd_len - 8]).emit(&mut opts[tllao..tllao + rd_len]);
    let msg = ndp::Repr::Redirect {
        target,
        dest: p.dst_addr(),
        options: &opts[..tllao + rd_len],
    };
    write_ndp_ip(out, lladdr, p.src_addr(), &msg)
}
