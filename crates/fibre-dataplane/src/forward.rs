//! Forwarding a packet the input route decision sent on: `ip_rcv_options` (the IPv4 options
//! read on receive), `ip_forward` and `ip_forward_options`, and `ip6_forward`, as functions
//! over the IP packet's bytes (from its IP header, trimmed as [`crate::rx::receive`] leaves
//! it).
//!
//! For IPv4 the caller runs, in the kernel's order: [`compile_options`] when the header has
//! options (after the route decision, before local delivery or forwarding), then
//! [`forward_v4`] (TTL, MTU, the decrement), then — after any redirect, which quotes the
//! packet as it is at that point — [`forward_options_v4`], then fragmentation
//! ([`crate::frag`]) when [`Forwarded::fragment`] says so. For IPv6, [`forward_v6`] alone.
//! Each returns what the packet needs next or a [`Discard`] with the ICMP error the kernel
//! sends about it; none allocates.
//!
//! Source routing is not built: with `accept_source_route` 0 (the kernel's default for every
//! link) a packet with a loose or strict source route option is dropped on receive, before
//! `ip_forward` could look at it, and that is what [`compile_options`] does.

use core::net::{Ipv4Addr, Ipv6Addr};

use fibre_wire::ipv4_option::kind;
use fibre_wire::{ipv4, ipv6};

use crate::drop::{Discard, DropReason};
use crate::icmp::{Icmp4Error, Icmp6Error, IcmpError};
use crate::rx::L2Class;

/// IPv6's minimum link MTU (RFC 8200 section 5): `ip6_forward` never uses a smaller one.
pub const IPV6_MIN_MTU: u32 = 1280;

/// What [`compile_options`] found: offsets of the options from the start of the IP header, as
/// the kernel's `struct ip_options` keeps them (0: absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ipv4Options {
    /// Record route, and whether a slot was left for this router's address.
    pub rr: u8,
    pub rr_needaddr: bool,
    /// Timestamp, and whether this router had an address and a time to put in it.
    pub ts: u8,
    pub ts_needaddr: bool,
    pub ts_needtime: bool,
    /// A prespecified timestamp whose next named address, after this router's stamp, is
    /// again one of the router's: a reply stamps that one too.
    pub ts_prespec_next_here: bool,
    /// Router Alert with value 0.
    pub router_alert: u8,
    /// Bytes of the header were rewritten: the checksum must be recomputed before the packet
    /// leaves ([`forward_options_v4`] does).
    pub changed: bool,
}

/// The prespecified-address timestamp flag (RFC 791): stamp only where named.
pub(crate) const TS_PRESPEC: u8 = 3;
const TS_ONLY: u8 = 0;
const TS_AND_ADDR: u8 = 1;
/// The Commercial IP Security Option (CIPSO, FIPS PUB 188): refused, as no DOI is configured.
const CIPSO: u8 = 134;

/// `__ip_options_compile` on a received packet, and `ip_rcv_options`' refusal of source
/// routes: reads the options of the IPv4 packet `ip` and writes what a router writes on
/// receive, in place and without fixing the checksum (as the kernel; it is fixed when the
/// packet is forwarded): its address in a record-route slot, its timestamps, zeros after End
/// of Options List, the timestamp overflow count.
///
/// - `spec_dst`: the router's address the packet is "for" (`fib_compute_spec_dst`): its
///   destination when that is a local unicast address, else the preferred source of the route
///   back to its sender on the incoming link.
/// - `now_ms`: milliseconds since midnight UTC (`inet_current_timestamp`); deterministic when
///   the caller passes the capture's time.
/// - `stamps_here`: for prespecified timestamps, whether an address is not a plain remote
///   unicast address (`inet_addr_type(addr) != RTN_UNICAST`: one of the router's addresses, a
///   broadcast or multicast address).
///
/// A malformed option is a [`DropReason::IpInhdr`] with a parameter problem pointing at the
/// faulty byte (from the IP header), and the options read before it, which that error echoes;
/// a source route is a [`DropReason::NotSpecified`] drop. Panics if `ip` is shorter than its
/// IHL (the receive checks guarantee it is not).
pub fn compile_options(
    ip: &mut [u8],
    spec_dst: Ipv4Addr,
    now_ms: u32,
    stamps_here: impl Fn(Ipv4Addr) -> bool,
) -> Result<Ipv4Options, OptionsDiscard> {
    let mut o = Ipv4Options::default();
    compile_into(ip, spec_dst, now_ms, stamps_here, &mut o)
        .map(|()| o)
        .map_err(|discard| OptionsDiscard {
            discard,
            options: o,
        })
}

/// A packet [`compile_options`] refused, and what it had read of the options by then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionsDiscard {
    pub discard: Discard,
    pub options: Ipv4Options,
}

fn compile_into(
    ip: &mut [u8],
    spec_dst: Ipv4Addr,
    now_ms: u32,
    stamps_here: impl Fn(Ipv4Addr) -> bool,
    o: &mut Ipv4Options,
) -> Result<(), Discard> {
    let hlen = ipv4::Packet::new_unchecked(&*ip).header_len();
    let mut srr = false;
    let error = |at: usize| {
        Discard::with_icmp(
            DropReason::IpInhdr,
            IcmpError::V4(Icmp4Error::ParamProblem { pointer: at as u8 }),
        )
    };
    let mut at = ipv4::HEADER_LEN;
    while at < hlen {
        match ip[at] {
            kind::END => {
                for b in &mut ip[at + 1..hlen] {
                    if *b != kind::END {
                        *b = kind::END;
                        o.changed = true;
                    }
                }
                break;
            }
            kind::NOP => {
                at += 1;
                continue;
            }
            _ => {}
        }
        let left = hlen - at;
        if left < 2 {
            return Err(error(at));
        }
        let optlen = usize::from(ip[at + 1]);
        if optlen < 2 || optlen > left {
            return Err(error(at));
        }
        let ptr = usize::from(*ip.get(at + 2).unwrap_or(&0));
        match ip[at] {
            kind::LSRR | kind::SSRR => {
                if optlen < 3 {
                    return Err(error(at + 1));
                }
                if ptr < 4 {
                    return Err(error(at + 2));
                }
                // RFC 1812 5.2.4.1: one source route at most.
                if srr {
                    return Err(error(at));
                }
                srr = true;
            }
            kind::RECORD_ROUTE => {
                if o.rr != 0 {
                    return Err(error(at));
                }
                if optlen < 3 {
                    return Err(error(at + 1));
                }
                if ptr < 4 {
                    return Err(error(at + 2));
                }
                if ptr <= optlen {
                    if ptr + 3 > optlen {
                        return Err(error(at + 2));
                    }
                    ip[at + ptr - 1..at + ptr + 3].copy_from_slice(&spec_dst.octets());
                    ip[at + 2] += 4;
                    o.rr_needaddr = true;
                    o.changed = true;
                }
                o.rr = at as u8;
            }
            kind::TIMESTAMP => {
                if o.ts != 0 {
                    return Err(error(at));
                }
                if optlen < 4 {
                    return Err(error(at + 1));
                }
                if ptr < 5 {
                    return Err(error(at + 2));
                }
                let flags = ip[at + 3] & 0x0F;
                if ptr <= optlen {
                    if ptr + 3 > optlen {
                        return Err(error(at + 2));
                    }
                    let stamp_at = match flags {
                        TS_ONLY => {
                            ip[at + 2] += 4;
                            o.ts_needtime = true;
                            Some(at + ptr - 1)
                        }
                        TS_AND_ADDR => {
                            if ptr + 7 > optlen {
                                return Err(error(at + 2));
                            }
                            ip[at + ptr - 1..at + ptr + 3].copy_from_slice(&spec_dst.octets());
                            ip[at + 2] += 8;
                            o.ts_needaddr = true;
                            o.ts_needtime = true;
                            Some(at + ptr + 3)
                        }
                        TS_PRESPEC => {
                            if ptr + 7 > optlen {
                                return Err(error(at + 2));
                            }
                            let named = Ipv4Addr::new(
                                ip[at + ptr - 1],
                                ip[at + ptr],
                                ip[at + ptr + 1],
                                ip[at + ptr + 2],
                            );
                            if stamps_here(named) {
                                ip[at + 2] += 8;
                                o.ts_needtime = true;
                                o.ts_prespec_next_here = ip
                                    .get(at + ptr + 7..at + ptr + 11)
                                    .filter(|_| ptr + 15 <= optlen)
                                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                                    .is_some_and(|b| stamps_here(Ipv4Addr::from(b)));
                                Some(at + ptr + 3)
                            } else {
                                None
                            }
                        }
                        _ => None,
                    };
                    if let Some(s) = stamp_at {
                        ip[s..s + 4].copy_from_slice(&now_ms.to_be_bytes());
                        o.changed = true;
                    }
                } else if flags != TS_PRESPEC {
                    let overflow = ip[at + 3] >> 4;
                    if overflow == 15 {
                        return Err(error(at + 3));
                    }
                    ip[at + 3] = flags | ((overflow + 1) << 4);
                    o.changed = true;
                }
                o.ts = at as u8;
            }
            kind::ROUTER_ALERT => {
                if optlen < 4 {
                    return Err(error(at + 1));
                }
                if ip[at + 2] == 0 && ip[at + 3] == 0 {
                    o.router_alert = at as u8;
                }
            }
            CIPSO => {
                // cipso_v4_validate: the option's length first, then its DOI, which is never
                // known here.
                return Err(error(at + if optlen < 8 { 1 } else { 2 }));
            }
            _ => {}
        }
        at += optlen;
    }
    if srr {
        return Err(DropReason::NotSpecified.into());
    }
    Ok(())
}

/// What the caller knows of the route that forwards an IPv4 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V4Route {
    /// The MTU the packet leaves with (`ip_dst_mtu_maybe_forward`: the route's `mtu` metric,
    /// else the egress link's).
    pub mtu: u32,
}

/// What a forwarded packet needs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarded {
    /// Longer than the MTU (DF clear): [`crate::frag::fragment_v4`] cuts it.
    pub fragment: bool,
}

/// `ip_forward` for the IPv4 packet `ip` that the route decision forwards: checks the frame
/// class, the TTL and the MTU, then decrements the TTL with the incremental checksum update
/// (RFC 1624, which gives the bytes `ip_decrease_ttl` gives on every valid header). Writes
/// only the TTL and checksum. The kernel then sends a redirect when the route says so
/// (`RTCF_DOREDIRECT` and no source route), quoting the packet as this leaves it; the caller
/// does ([`Icmp4Error::RedirectHost`] naming the route's gateway, or the destination when it
/// is on-link, limited by [`crate::ratelimit::RateLimiter::redirect_v4`] and by nothing
/// else), then runs [`forward_options_v4`].
///
/// Drops: a unicast packet in a link-layer broadcast or multicast frame
/// ([`DropReason::NotSpecified`]); TTL 1 or 0 ([`DropReason::IpInhdr`], time exceeded); longer
/// than the MTU with DF set ([`DropReason::PktTooBig`], fragmentation needed with the MTU).
pub fn forward_v4(ip: &mut [u8], l2: L2Class, route: &V4Route) -> Result<Forwarded, Discard> {
    if l2 != L2Class::Host {
        return Err(DropReason::NotSpecified.into());
    }
    let mut p = ipv4::Packet::new_unchecked(ip);
    if p.ttl() <= 1 {
        return Err(Discard::with_icmp(
            DropReason::IpInhdr,
            IcmpError::V4(Icmp4Error::TimeExceeded),
        ));
    }
    let too_big = usize::from(p.total_len()) > route.mtu as usize;
    if too_big && p.dont_frag() {
        return Err(Discard::with_icmp(
            DropReason::PktTooBig,
            IcmpError::V4(Icmp4Error::FragNeeded { mtu: route.mtu }),
        ));
    }
    p.decrement_ttl();
    Ok(Forwarded { fragment: too_big })
}

/// `ip_forward_options`: on a forwarded IPv4 packet whose options [`compile_options`] read,
/// puts `egress_src` (the address the packet leaves from: `ip_rt_get_source`, the route's
/// preferred source or the egress link's address) in the record-route slot left for it, and
/// recomputes the header checksum when any option byte changed since receive. `opts` must be
/// what [`compile_options`] returned for this packet (other values write nothing out of
/// bounds, but no sense either).
pub fn forward_options_v4(ip: &mut [u8], opts: &Ipv4Options, egress_src: Ipv4Addr) {
    let mut changed = opts.changed;
    if opts.rr_needaddr {
        // compile_options advanced the pointer past the slot it filled: that slot is 5 bytes
        // before it (the pointer counts from 1).
        let rr = usize::from(opts.rr);
        let at = rr + usize::from(*ip.get(rr + 2).unwrap_or(&0));
        if let Some(slot) = at.checked_sub(5).and_then(|s| ip.get_mut(s..s + 4)) {
            slot.copy_from_slice(&egress_src.octets());
            changed = true;
        }
    }
    if changed {
        ipv4::Packet::new_unchecked(ip).fill_checksum();
    }
}

/// What the caller knows of the route that forwards an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V6Route {
    /// The route's or the egress link's MTU; raised to 1280 if below.
    pub mtu: u32,
    /// The packet leaves by the link it came in on: the kernel sends a redirect instead of
    /// checking the source's scope.
    pub same_link: bool,
}

/// What a forwarded IPv6 packet needs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarded6 {
    /// The kernel sends a redirect (`ndisc_send_redirect`, rate-limited per destination): the
    /// packet leaves by the link it came in on. The neighbour stage builds it; the packet is
    /// forwarded all the same.
    pub redirect: bool,
}

/// `ip6_forward` for the IPv6 packet `ip` that the route decision forwards: checks the frame
/// class, the hop limit, the source's scope and the MTU, then decrements the hop limit (the
/// only byte written).
///
/// Drops: a unicast packet in a link-layer broadcast or multicast frame
/// ([`DropReason::NotSpecified`]); hop limit 1 or 0 ([`DropReason::IpInhdr`], hop limit
/// exceeded); when leaving by another link, an unspecified, multicast or loopback source
/// ([`DropReason::IpInaddrerrors`]) or a link-local one (the same, with destination
/// unreachable "beyond scope"); longer than the MTU ([`DropReason::PktTooBig`], packet too big
/// with the MTU).
pub fn forward_v6(ip: &mut [u8], l2: L2Class, route: &V6Route) -> Result<Forwarded6, Discard> {
    if l2 != L2Class::Host {
        return Err(DropReason::NotSpecified.into());
    }
    let mut p = ipv6::Packet::new_unchecked(ip);
    let hop_limit = p.hop_limit();
    if hop_limit <= 1 {
        return Err(Discard::with_icmp(
            DropReason::IpInhdr,
            IcmpError::V6(Icmp6Error::HopLimitExceeded),
        ));
    }
    let src = p.src_addr();
    // The kernel skips the redirect for packets whose routing header it processed itself
    // (`IP6CB(skb)->srcrt`), which only happens on local delivery: never here.
    let redirect = route.same_link;
    if !route.same_link {
        if src.is_unspecified() || src.is_multicast() || src.is_loopback() {
            return Err(DropReason::IpInaddrerrors.into());
        }
        if is_link_local(&src) {
            return Err(Discard::with_icmp(
                DropReason::IpInaddrerrors,
                IcmpError::V6(Icmp6Error::BeyondScope),
            ));
        }
    }
    let mtu = route.mtu.max(IPV6_MIN_MTU);
    if ipv6::HEADER_LEN + usize::from(p.payload_len()) > mtu as usize {
        return Err(Discard::with_icmp(
            DropReason::PktTooBig,
            IcmpError::V6(Icmp6Error::PacketTooBig { mtu }),
        ));
    }
    p.set_hop_limit(hop_limit - 1);
    Ok(Forwarded6 { redirect })
}

/// fe80::/10.
fn is_link_local(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xFFC0 == 0xFE80
}

#[cfg(test)]
mod tests {
    use super::*;
    use fibre_wire::checksum;
    use fibre_wire::consts::ip_proto;

    const SPEC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const EGRESS: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);

    /// The incremental checksum update the kernel makes for a TTL decrement
    /// (`ip_decrease_ttl`): the checksum plus 0x0100 with the end-around carry, 0xFFFF folded
    /// to 0. The test below shows RFC 1624's update, which fibre-wire uses, gives the same
    /// bytes.
    fn kernel_decrease_ttl_check(check: u16) -> u16 {
        let s = u32::from(check) + 0x0100;
        let s = s + u32::from(s >= 0xFFFF);
        s as u16
    }

    fn packet(options: &[u8], ttl: u8, df: bool, payload: usize) -> Vec<u8> {
        let opts = fibre_wire::OptionBytes::new(options).unwrap();
        let r = ipv4::Repr {
            src_addr: Ipv4Addr::new(192, 0, 2, 1),
            dst_addr: Ipv4Addr::new(198, 51, 100, 7),
            protocol: ip_proto::UDP,
            payload_len: payload,
            ttl,
            tos: 0,
            ident: 7,
            reserved_flag: false,
            dont_frag: df,
            more_frags: false,
            frag_offset: 0,
            options: opts,
        };
        let mut b = vec![0u8; r.header_len() + payload];
        r.emit(&mut ipv4::Packet::new_unchecked(&mut b[..]));
        b
    }

    #[test]
    fn rfc1624_update_equals_the_kernels_on_every_valid_checksum() {
        // A header's checksum is never 0xFFFF: that would need all its words to be zero.
        for c in 0..0xFFFFu16 {
            assert_eq!(
                checksum::decrement_ttl(c, 64, 17),
                kernel_decrease_ttl_check(c),
                "{c:#06x}"
            );
        }
    }

    #[test]
    fn ttl_and_mtu() {
        let route = V4Route { mtu: 1500 };
        for ttl in [0, 1] {
            let mut p = packet(&[], ttl, false, 8);
            assert_eq!(
                forward_v4(&mut p, L2Class::Host, &route).unwrap_err(),
                Discard::with_icmp(DropReason::IpInhdr, IcmpError::V4(Icmp4Error::TimeExceeded))
            );
        }
        let mut p = packet(&[], 2, true, 1480);
        let before = p.clone();
        assert_eq!(
            forward_v4(&mut p, L2Class::Host, &route),
            Ok(Forwarded { fragment: false })
        );
        assert_eq!(p[8], 1);
        ipv4::Packet::new_unchecked(&p[..])
            .verify_checksum()
            .unwrap();
        assert_eq!(
            (&p[..8], &p[9..10], &p[12..]),
            (&before[..8], &before[9..10], &before[12..])
        );
        let mut p = packet(&[], 64, true, 1481);
        assert_eq!(
            forward_v4(&mut p, L2Class::Host, &route).unwrap_err(),
            Discard::with_icmp(
                DropReason::PktTooBig,
                IcmpError::V4(Icmp4Error::FragNeeded { mtu: 1500 })
            )
        );
        assert_eq!(p[8], 64, "the error quotes the packet as received");
        let mut p = packet(&[], 64, false, 1481);
        assert_eq!(
            forward_v4(&mut p, L2Class::Host, &route),
            Ok(Forwarded { fragment: true })
        );
        let mut p = packet(&[], 64, false, 8);
        assert_eq!(
            forward_v4(&mut p, L2Class::Broadcast, &route).unwrap_err(),
            Discard::from(DropReason::NotSpecified)
        );
    }

    fn compile(ip: &mut [u8]) -> Result<Ipv4Options, Discard> {
        compile_options(ip, SPEC, 0x0102_0304, |a| a == SPEC).map_err(|e| e.discard)
    }

    fn pointer(d: Discard) -> u8 {
        match d.icmp {
            Some(IcmpError::V4(Icmp4Error::ParamProblem { pointer })) => pointer,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn record_route_gets_the_ingress_then_the_egress_address() {
        // NOP, RR with two slots; pointer at the first.
        let mut p = packet(&[1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0], 64, false, 4);
        let o = compile(&mut p).unwrap();
        assert_eq!(
            o,
            Ipv4Options {
                rr: 21,
                rr_needaddr: true,
                changed: true,
                ..Default::default()
            }
        );
        assert_eq!(&p[21..32], &[7, 11, 8, 10, 0, 0, 1, 0, 0, 0, 0]);
        forward_v4(&mut p, L2Class::Host, &V4Route { mtu: 1500 }).unwrap();
        forward_options_v4(&mut p, &o, EGRESS);
        assert_eq!(&p[21..32], &[7, 11, 8, 10, 1, 0, 1, 0, 0, 0, 0]);
        ipv4::Packet::new_unchecked(&p[..])
            .verify_checksum()
            .unwrap();
        // A full record route is left alone.
        let mut p = packet(&[7, 7, 8, 1, 2, 3, 4, 0], 64, false, 4);
        let o = compile(&mut p).unwrap();
        assert!(!o.rr_needaddr && !o.changed && o.rr == 20);
    }

    #[test]
    fn timestamps() {
        // Timestamps only, room for one.
        let mut p = packet(&[68, 8, 5, 0, 0, 0, 0, 0], 64, false, 0);
        compile(&mut p).unwrap();
        assert_eq!(&p[20..28], &[68, 8, 9, 0, 1, 2, 3, 4]);
        // Full: the overflow count goes up; at 15 it is a parameter problem at the flags.
        let mut p = packet(&[68, 8, 9, 0x20, 0, 0, 0, 0], 64, false, 0);
        compile(&mut p).unwrap();
        assert_eq!(p[23], 0x30);
        let mut p = packet(&[68, 8, 9, 0xf0, 0, 0, 0, 0], 64, false, 0);
        assert_eq!(pointer(compile(&mut p).unwrap_err()), 23);
        // Address and time.
        let mut p = packet(&[68, 12, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0], 64, false, 0);
        compile(&mut p).unwrap();
        assert_eq!(&p[20..32], &[68, 12, 13, 1, 10, 0, 0, 1, 1, 2, 3, 4]);
        // Prespecified: stamped only where the address is ours.
        let mut p = packet(&[68, 12, 5, 3, 10, 0, 0, 1, 0, 0, 0, 0], 64, false, 0);
        compile(&mut p).unwrap();
        assert_eq!(&p[20..32], &[68, 12, 13, 3, 10, 0, 0, 1, 1, 2, 3, 4]);
        let mut p = packet(&[68, 12, 5, 3, 10, 0, 0, 9, 0, 0, 0, 0], 64, false, 0);
        let o = compile(&mut p).unwrap();
        assert!(!o.changed && p[22] == 5);
    }

    #[test]
    fn malformed_options_point_at_the_fault() {
        for (opts, at) in [
            (&[7u8, 6, 4, 0, 0, 0, 0, 0][..], 22), // RR slot past the option's end
            (&[7, 7, 3, 0, 0, 0, 0, 0][..], 22),   // RR pointer below 4
            (&[7, 2, 0, 0][..], 21),               // RR too short for a pointer
            (&[7, 9, 4, 0, 0, 0, 0, 0][..], 20),   // longer than the header
            (&[1, 1, 1, 0x99][..], 23),            // a kind without its length
            (&[148, 2, 0, 0][..], 21),             // Router Alert too short
            (&[68, 3, 5, 0][..], 21),              // timestamp too short
            (&[68, 8, 4, 0, 0, 0, 0, 0][..], 22),  // timestamp pointer below 5
            (&[134, 8, 0, 0, 0, 1, 0, 0][..], 22), // CIPSO, no DOI
        ] {
            let mut p = packet(opts, 64, false, 0);
            let d = compile(&mut p).unwrap_err();
            assert_eq!(
                (d.reason, pointer(d)),
                (DropReason::IpInhdr, at),
                "{opts:?}"
            );
        }
        // Two record routes: the second is the fault.
        let mut p = packet(&[7, 3, 4, 7, 3, 4, 0, 0], 64, false, 0);
        assert_eq!(pointer(compile(&mut p).unwrap_err()), 23);
        // Source routes are refused without an error message.
        let mut p = packet(&[131, 7, 4, 10, 0, 0, 9, 0], 64, false, 0);
        assert_eq!(
            compile(&mut p).unwrap_err(),
            Discard::from(DropReason::NotSpecified)
        );
        // Router Alert 0 is noted; bytes after End of List are zeroed.
        let mut p = packet(&[148, 4, 0, 0, 0, 1, 2, 0], 64, false, 0);
        let o = compile(&mut p).unwrap();
        assert_eq!((o.router_alert, o.changed), (20, true));
        assert_eq!(&p[24..28], &[0, 0, 0, 0]);
    }

    fn v6(src: Ipv6Addr, hop_limit: u8, payload: usize) -> Vec<u8> {
        let mut b = vec![0u8; 40 + payload];
        let mut p = ipv6::Packet::new_unchecked(&mut b[..]);
        p.set_version_tc_flow(0, 0);
        p.set_payload_len(payload as u16);
        p.set_next_header(ip_proto::UDP);
        p.set_hop_limit(hop_limit);
        p.set_src_addr(src);
        p.set_dst_addr(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7));
        b
    }

    #[test]
    fn ipv6_forwarding() {
        let src = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        let route = V6Route {
            mtu: 1000,
            same_link: false,
        };
        let mut p = v6(src, 2, 1240);
        assert_eq!(
            forward_v6(&mut p, L2Class::Host, &route),
            Ok(Forwarded6 { redirect: false })
        );
        assert_eq!(p[7], 1);
        let mut p = v6(src, 1, 8);
        assert_eq!(
            forward_v6(&mut p, L2Class::Host, &route).unwrap_err().icmp,
            Some(IcmpError::V6(Icmp6Error::HopLimitExceeded))
        );
        let mut p = v6(src, 64, 1241);
        assert_eq!(
            forward_v6(&mut p, L2Class::Host, &route).unwrap_err(),
            Discard::with_icmp(
                DropReason::PktTooBig,
                IcmpError::V6(Icmp6Error::PacketTooBig { mtu: 1280 })
            )
        );
        assert_eq!(p[7], 64);
        let ll = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
        let mut p = v6(ll, 64, 8);
        assert_eq!(
            forward_v6(&mut p, L2Class::Host, &route).unwrap_err().icmp,
            Some(IcmpError::V6(Icmp6Error::BeyondScope))
        );
        let back = V6Route {
            mtu: 1500,
            same_link: true,
        };
        assert_eq!(
            forward_v6(&mut p, L2Class::Host, &back),
            Ok(Forwarded6 { redirect: true })
        );
        for bad in [
            Ipv6Addr::UNSPECIFIED,
            Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
        ] {
            let mut p = v6(bad, 64, 8);
            assert_eq!(
                forward_v6(&mut p, L2Class::Host, &route).unwrap_err(),
                Discard::from(DropReason::IpInaddrerrors)
            );
        }
        let mut p = v6(src, 64, 8);
        assert_eq!(
            forward_v6(&mut p, L2Class::Multicast, &route).unwrap_err(),
            Discard::from(DropReason::NotSpecified)
        );
    }
}
