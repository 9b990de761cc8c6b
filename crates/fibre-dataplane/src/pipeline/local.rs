//! Packets for the router itself (ip_local_deliver, ip6_input_finish): echo requests
//! answered, NDP handled, UDP answered as a closed port when no host stack is behind the
//! link it came in on, the rest punted to the host (handed to the one behind that link
//! through [`Tx::punt`], so that the host sees it arrive where it did; counted `punted`
//! either way). Neighbour advertisements go to that host too, after the data plane learnt
//! from them.

use core::net::IpAddr;

use fibre_packet::Buf;
use fibre_wire::checksum::PseudoHeader;
use fibre_wire::consts::{icmpv6 as icmpv6_consts, ip_proto};
use fibre_wire::{ethernet, icmpv6, ipv6, udp};

use super::errors::{Quote, Why};
use super::{ms_of_day, Dataplane, Tx, View, ORIGINATED_FLOW_LABEL};
use crate::drop::DropReason;
use crate::forward::{self, Ipv4Options};
use crate::icmp::{self, Icmp4Error, Icmp6Error, IcmpError, V4Reply};
use crate::neigh::{self, OnLink};
use crate::reasm::Added;
use crate::rx::{self, Meta, Rx};

impl Dataplane {
    /// Packets for the router itself: echo requests answered, ARP's IPv6 counterpart (NDP)
    /// handled, the rest punted to the host.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn local(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: Buf,
        meta: &Meta,
        broadcast: bool,
        opts: &Ipv4Options,
        tx: &mut dyn Tx,
    ) {
        let l3 = usize::from(meta.l3);
        let l4 = usize::from(meta.l4) - l3;
        if meta.fragment {
            return self.defragment(v, now, iif, buf, meta, broadcast, tx);
        }
        let buf = match meta.is_ipv4() {
            true => buf,
            false => match self.srh_for_router(v, now, iif, buf, meta, tx) {
                Some(b) => b,
                None => return,
            },
        };
        if !meta.is_ipv4() {
            let ip = buf.data(&self.pool).get(l3..).unwrap_or(&[]);
            if let Err(d) = rx::local_headers6(ip) {
                return self.discard(v, now, iif, buf, meta, d, true, opts, iif, tx);
            }
        }
        let data = buf.data(&self.pool);
        let ip = data.get(l3..).unwrap_or(&[]);
        let out = &mut self.scratch[ethernet::HEADER_LEN..];
        let answer = match (meta.src, meta.dst, meta.proto) {
            (IpAddr::V4(src), IpAddr::V4(dst), ip_proto::ICMP) => {
                self.next_ident = self.next_ident.wrapping_add(1);
                let reply = V4Reply {
                    src: dst,
                    ident: self.next_ident,
                    mtu: 0,
                    options: *opts,
                    now_ms: ms_of_day(now),
                };
                icmp::echo_reply_v4(ip, broadcast, &reply, out)
                    .map(|n| (n, IpAddr::V4(src), IpAddr::V4(dst)))
            }
            (IpAddr::V6(src), IpAddr::V6(dst), ip_proto::ICMPV6) => {
                let kind = ip.get(l4).copied().unwrap_or(0);
                if kind == icmpv6_consts::NEIGHBOR_SOLICIT || kind == icmpv6_consts::NEIGHBOR_ADVERT
                {
                    let p = ipv6::Packet::new_unchecked(ip);
                    let msg = icmpv6::Packet::new_unchecked(&ip[l4..]);
                    if msg.verify_checksum(src, dst).is_err() {
                        self.drop_received(iif, DropReason::IcmpCsum);
                        self.pool.free(buf);
                        return;
                    }
                    let eth_src = ethernet::Frame::new_unchecked(data).src_addr().0;
                    let mac = v.fib.link_mac(iif).unwrap_or_default();
                    let link = OnLink {
                        ifindex: iif,
                        mac,
                        l2: meta.l2,
                    };
                    let o = neigh::ndp_input(v.fib, link, eth_src, &p, &msg, &mut self.scratch[..]);
                    // As ARP replies (see `rx_one`): advertisements go to the host too.
                    if kind == icmpv6_consts::NEIGHBOR_ADVERT
                        && o.drop.is_none()
                        && tx.host_behind(iif)
                    {
                        tx.punt(iif, data);
                    }
                    self.pool.free(buf);
                    self.neigh_outcome(iif, o, tx);
                    return;
                }
                // A reply to a group or an anycast address comes from the address the route
                // back selects (icmpv6_echo_reply without anycast_src_echo_reply).
                let from = if dst.is_multicast() || !v.fib.is_own_addr6(&dst) {
                    let back = v.fib.route_output(IpAddr::V6(src), None, 0).ok();
                    let sel = back.and_then(|b| match b.prefsrc {
                        Some(IpAddr::V6(a)) => Some(a),
                        _ => v.fib.select_src6(Some(b.oif), &src),
                    });
                    sel.unwrap_or(dst)
                } else {
                    dst
                };
                icmp::echo_reply_v6(ip, l4, from, ORIGINATED_FLOW_LABEL, out)
                    .map(|n| (n, IpAddr::V6(src), IpAddr::V6(from)))
            }
            (_, _, ip_proto::UDP)
                if !self.host && !tx.host_behind(iif) && !broadcast && !meta.dst.is_multicast() =>
            {
                // No host stack behind the router: every port is closed (__udp4_lib_rcv and
                // __udp6_lib_rcv without a socket): a datagram whose checksum verifies gets
                // port unreachable.
                let udp = udp::Packet::new_checked(ip.get(l4..).unwrap_or(&[]));
                let pseudo = match (meta.src, meta.dst) {
                    (IpAddr::V4(src), IpAddr::V4(dst)) => PseudoHeader::V4 { src, dst },
                    (IpAddr::V6(src), IpAddr::V6(dst)) => PseudoHeader::V6 { src, dst },
                    _ => unreachable!("one family per packet"),
                };
                let verified = udp.is_ok_and(|u| u.verify_checksum(&pseudo).is_ok());
                if !verified {
                    self.drop_received(iif, DropReason::UdpCsum);
                    self.pool.free(buf);
                    return;
                }
                let err = if meta.is_ipv4() {
                    IcmpError::V4(Icmp4Error::PortUnreachable)
                } else {
                    IcmpError::V6(Icmp6Error::PortUnreachable)
                };
                self.counters.delivered += 1;
                self.icmp_error(
                    v,
                    now,
                    &Why {
                        err,
                        l2: meta.l2,
                        local_dst: true,
                        opts,
                        dev: iif,
                    },
                    Quote::Held(&buf, l3),
                    tx,
                );
                self.pool.free(buf);
                return;
            }
            _ => Ok((0, meta.src, meta.dst)),
        };
        let punted = matches!(answer, Ok((0, _, _)) | Err(icmp::EchoError::NotSent(_)));
        if punted && tx.host_behind(iif) {
            tx.punt(iif, data);
        }
        self.pool.free(buf);
        match answer {
            Ok((0, _, _)) | Err(icmp::EchoError::NotSent(_)) => self.counters.punted += 1,
            Ok((len, to, from)) => {
                self.counters.delivered += 1;
                self.counters.echo_replies += 1;
                let Ok(back) = v.fib.route_output(to, Some(from), meta.tos) else {
                    return;
                };
                let nh = back.gateway.unwrap_or(to);
                self.originate(v, (back.oif, nh), from, len, tx);
            }
            Err(icmp::EchoError::Drop(r)) => self.drop_received(iif, r),
        }
    }

    /// ip_defrag before local delivery: an IPv4 fragment joins its packet's queue; the
    /// fragment that makes the packet whole delivers it (with the options of its first
    /// fragment read again, as the kernel keeps them from the head). IPv6 fragments for the
    /// router are not reassembled.
    #[allow(clippy::too_many_arguments)]
    fn defragment(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: Buf,
        meta: &Meta,
        broadcast: bool,
        tx: &mut dyn Tx,
    ) {
        if !meta.is_ipv4() {
            self.drop_received(iif, DropReason::FragNotReassembled);
            self.pool.free(buf);
            return;
        }
        // The fragment's bytes pass through the scratch frame: the queue's buffer and the
        // fragment's are both the pool's.
        let len = buf.len().min(self.scratch.len());
        self.scratch[..len].copy_from_slice(&buf.data(&self.pool)[..len]);
        self.pool.free(buf);
        let frame = &self.scratch[..len];
        let added = self
            .reasm
            .add(&mut self.pool, now, iif, frame, usize::from(meta.l3));
        match added {
            Added::Queued => self.counters.reasm_queued += 1,
            Added::Dropped(r) => self.drop_received(iif, r),
            Added::Whole(whole) => {
                let mac = ethernet::Frame::new_unchecked(whole.data(&self.pool)).dst_addr();
                let Ok(Rx::Ip(meta)) = rx::receive(whole.data(&self.pool), mac) else {
                    self.drop_received(iif, DropReason::FragReasmFailed);
                    self.pool.free(whole);
                    return;
                };
                let mut opts = Ipv4Options::default();
                if meta.options {
                    let l3 = usize::from(meta.l3);
                    let IpAddr::V4(dst) = meta.dst else {
                        unreachable!("IPv4 reassembly")
                    };
                    let ip = &mut whole.data_mut(&mut self.pool)[l3..];
                    let stamps = |a| v.fib.addr_type4_on(0, a) != fibre_fib::RouteType::Unicast;
                    if let Ok(o) = forward::compile_options(ip, dst, ms_of_day(now), stamps) {
                        opts = o;
                    }
                }
                self.local(v, now, iif, whole, &meta, broadcast, &opts, tx);
            }
        }
    }

    /// ip_expire for the packets whose reassembly ran out of time by `now`: "fragment
    /// reassembly time exceeded" quoting the first fragment, when it came.
    pub(super) fn expire_reassembly(&mut self, v: View<'_>, now: u64, tx: &mut dyn Tx) {
        let mut expired = std::mem::take(&mut self.flush);
        self.reasm
            .expire(&mut self.pool, now, |_, b, iif| expired.push((b, iif)));
        for (b, iif) in expired.drain(..) {
            self.drops.count(DropReason::FragReasmTimeout);
            let meta_l2 = crate::rx::L2Class::Host;
            let none = Ipv4Options::default();
            let err = IcmpError::V4(Icmp4Error::ReassemblyTimeExceeded);
            let why = Why {
                err,
                l2: meta_l2,
                local_dst: true,
                opts: &none,
                dev: iif,
            };
            self.icmp_error(v, now, &why, Quote::Held(&b, ethernet::HEADER_LEN), tx);
            self.pool.free(b);
        }
        self.flush = expired;
    }
}
