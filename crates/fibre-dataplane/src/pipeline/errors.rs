//! The ICMP errors the router sends about a packet (icmp_send, icmp6_send): eligibility, the
//! rate limits, the route back and the source address, then the message, sent as a packet
//! the router made.

use core::net::IpAddr;

use fibre_fib::Fib;
use fibre_packet::Buf;
use fibre_wire::{ethernet, ipv4, ipv6};

use super::{
    ms_of_day, Counters, Dataplane, Tx, View, ICMP_CREDITS, INADDR_DUMMY, ORIGINATED_FLOW_LABEL,
};
use crate::forward::Ipv4Options;
use crate::icmp::{self, IcmpError, V4Reply, V6Reply};
use crate::ratelimit::{Global, RateLimiter};
use crate::rx::L2Class;

/// The packet an error is about (from its IP header on).
pub(super) enum Quote<'a> {
    /// In a pool buffer, at this offset.
    Held(&'a Buf, usize),
    /// Still in the received frame.
    Frame(&'a [u8]),
}

impl Dataplane {
    /// icmp_send / icmp6_send about a packet (see [`icmp_error`]), sent as a packet the
    /// router made.
    pub(super) fn icmp_error(
        &mut self,
        v: View<'_>,
        now: u64,
        why: &Why,
        quote: Quote,
        tx: &mut dyn Tx,
    ) {
        let orig = match quote {
            Quote::Held(buf, l3) => buf.data(&self.pool).get(l3..).unwrap_or(&[]),
            Quote::Frame(f) => f,
        };
        let mut o = Originating {
            rate: &mut self.rate,
            counters: &mut self.counters,
            next_ident: &mut self.next_ident,
        };
        let out = &mut self.scratch[ethernet::HEADER_LEN..];
        if let Some((len, route, from)) = icmp_error(v.fib, now, why, orig, &mut o, out) {
            self.originate(v, route, from, len, tx);
        }
    }
}

/// An ICMP error to send, and what the kernel knows of the packet it is about: how its
/// frame came in, whether it was for the router, and its IPv4 options (echoed in the error).
#[derive(Clone, Copy)]
pub(super) struct Why<'a> {
    pub err: IcmpError,
    pub l2: L2Class,
    pub local_dst: bool,
    pub opts: &'a Ipv4Options,
    /// The link the packet came in on (0 for one the router made): IPv6 answers from the
    /// address this link would use towards the sender.
    pub dev: u32,
}

/// What building a packet the router originates changes in the worker's state.
struct Originating<'a> {
    rate: &'a mut RateLimiter,
    counters: &'a mut Counters,
    next_ident: &'a mut u16,
}

/// icmp_send / icmp6_send about the IP packet `orig` (from its IP header): eligibility, the
/// global limit, the route back and its source, the per-destination limit, then the message,
/// built into `out`. Returns its length, the route back (output link and neighbour) and its
/// source; `None` when the kernel sends nothing. `local_dst`: the packet was for one of the
/// router's addresses, which answers from it.
fn icmp_error(
    fib: &Fib,
    now: u64,
    why: &Why,
    orig: &[u8],
    o: &mut Originating,
    out: &mut [u8],
) -> Option<(usize, (u32, IpAddr), IpAddr)> {
    let Why {
        err,
        l2,
        local_dst,
        opts,
        dev,
    } = *why;
    let built = match err {
        IcmpError::V4(e) => {
            let Ok(p) = ipv4::Packet::new_checked(orig) else {
                return None;
            };
            let (src, dst, tos) = (p.src_addr(), p.dst_addr(), p.tos());
            if icmp::eligible_v4(orig, l2, false).is_err() {
                return None;
            }
            let (t, code, _) = e.type_code_info();
            let Global::Allowed { apply_peer_limit } = o.rate.global_v4(t, code, now) else {
                o.counters.icmp_ratelimited += 1;
                return None;
            };
            let Ok(back) = fib.route_output(IpAddr::V4(src), None, tos) else {
                return None;
            };
            let from = if local_dst {
                dst
            } else {
                match back.prefsrc {
                    Some(IpAddr::V4(a)) => a,
                    _ => INADDR_DUMMY,
                }
            };
            if !o.rate.peer_v4(src, apply_peer_limit, ICMP_CREDITS, now) {
                o.counters.icmp_ratelimited += 1;
                return None;
            }
            *o.next_ident = o.next_ident.wrapping_add(1);
            let reply = V4Reply {
                src: from,
                ident: *o.next_ident,
                mtu: back.mtu,
                options: *opts,
                now_ms: ms_of_day(now),
            };
            let nh = back.gateway.unwrap_or(IpAddr::V4(src));
            icmp::build_error_v4(e, orig, &reply, out)
                .map(|n| (n, (back.oif, nh), IpAddr::V4(from)))
        }
        IcmpError::V6(e) => {
            let Ok(p) = ipv6::Packet::new_checked(orig) else {
                return None;
            };
            let (src, dst) = (p.src_addr(), p.dst_addr());
            if icmp::eligible_v6(e, orig, l2).is_err() {
                return None;
            }
            let (t, _, _) = e.type_code_info();
            let Global::Allowed { apply_peer_limit } = o.rate.global_v6(t, now) else {
                o.counters.icmp_ratelimited += 1;
                return None;
            };
            let Ok(back) = fib.route_output(IpAddr::V6(src), None, 0) else {
                return None;
            };
            // icmp6_send: the offending packet's destination when it is ours; else the route
            // back's preferred source; else the address the input link would use towards
            // the sender ("a more meaningful saddr from input if"), or for a packet the router
            // made itself the one its route back would.
            let from = if local_dst || fib.is_own_addr6(&dst) {
                dst
            } else if let Some(IpAddr::V6(a)) = back.prefsrc {
                a
            } else {
                let d = if dev != 0 { dev } else { back.oif };
                fib.select_src6(Some(d), &src)?
            };
            if !o
                .rate
                .peer_v6(src, 128, apply_peer_limit, ICMP_CREDITS, now)
            {
                o.counters.icmp_ratelimited += 1;
                return None;
            }
            let reply = V6Reply {
                src: from,
                flow_label: ORIGINATED_FLOW_LABEL,
            };
            let nh = back.gateway.unwrap_or(IpAddr::V6(src));
            icmp::build_error_v6(e, orig, &reply, out)
                .map(|n| (n, (back.oif, nh), IpAddr::V6(from)))
        }
    };
    let built = built.ok()?;
    o.counters.icmp_errors += 1;
    Some(built)
}
