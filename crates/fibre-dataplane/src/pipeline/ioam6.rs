//! IOAM traces in the pipeline: a received IPv6 packet whose hop-by-hop header carries an IOAM
//! pre-allocated trace gets this node's data once its route decision is known (ipv6_hop_ioam
//! routes the packet first to know its output link), on a link with
//! `net.ipv6.conf.LINK.ioam6_enabled`; a packet forwarded through a next hop with an `encap
//! ioam6` object gets a trace inserted after forwarding, the first node's data filled in
//! (ioam6_output: inline, or in an outer header to the tunnel destination).

use core::net::IpAddr;

use fibre_fib::{Fib, InputDrop, InputRoute};
use fibre_fwd::encap::{Ioam6Mode, Ioam6Push};
use fibre_fwd::EncapIdx;
use fibre_packet::Buf;
use fibre_wire::consts::ip_proto;
use fibre_wire::ipv6;

use super::errors::{Quote, Why};
use super::{Dataplane, Hop, Tx, View};
use crate::drop::DropReason;
use crate::forward::Ipv4Options;
use crate::icmp::{Icmp6Error, IcmpError};
use crate::ioam6::{self, Node, Outcome, U32_UNAVAILABLE, U64_UNAVAILABLE};
use crate::rx::{L2Class, Meta};

impl Dataplane {
    /// Fills the trace of the packet in `buf` (its IP header at `meta.l3`, its IOAM option
    /// at `meta.ioam` from there), given its route decision. `Err` with the reason when the
    /// option is malformed and the packet is to be dropped.
    pub(super) fn ioam6_transit(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: &Buf,
        meta: &Meta,
        route: &Result<InputRoute, InputDrop>,
    ) -> Result<(), DropReason> {
        if !v.fib.ioam6_link(iif).enabled {
            return Ok(());
        }
        let egress = match route {
            Ok(InputRoute::Forward(f)) => Some(f.oif),
            _ => None,
        };
        let node = node_of(v.fib, iif, egress, meta.ttl.wrapping_sub(1), now);
        let at = usize::from(meta.l3) + usize::from(meta.ioam);
        let hbh_end = usize::from(meta.l3) + 40 + {
            let d = buf.data(&self.pool);
            (usize::from(d.get(usize::from(meta.l3) + 41).copied().unwrap_or(0)) + 1) * 8
        };
        let opt = buf
            .data_mut(&mut self.pool)
            .get_mut(at..hbh_end)
            .unwrap_or_default();
        match ioam6::transit(opt, node) {
            Outcome::Drop => Err(DropReason::IpInhdr),
            Outcome::Filled | Outcome::Untouched => Ok(()),
        }
    }

    /// ioam6_output for a packet forwarded through object `i` (`p`) by a route of MTU `mtu`,
    /// its IP header at `l3` and its hop limit already lowered: the trace inserted (in `k` of
    /// every `n` packets), inline when the packet has no hop-by-hop header yet, or under an
    /// outer header; the packet and where it now goes, its IP header at the buffer's start,
    /// or `None` when it was dropped.
    ///
    /// The insertion comes after ip6_forward's MTU check and ioam6_output checks none of its
    /// own, so a packet it grows past the MTU of the route it leaves by meets ip6_fragment,
    /// which does not fragment a forwarded packet: ICMPv6 Packet Too Big with that MTU, about
    /// the grown packet, to its source, and the packet dropped (counted `PKT_TOO_BIG`). In
    /// encap mode that source is the router's own tunnel source: the kernel's error goes to
    /// itself, so here none leaves.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ioam6_insert(
        &mut self,
        v: View<'_>,
        now: u64,
        mut buf: Buf,
        l3: usize,
        i: EncapIdx,
        p: &Ioam6Push,
        hop: Hop,
        mtu: u32,
        tx: &mut dyn Tx,
    ) -> Option<(Buf, Hop, usize)> {
        let seen = self.encap_stats.get(i.get()).map_or(0, |s| s.packets);
        if let Some(s) = self.encap_stats.get_mut(i.get()) {
            s.packets += 1;
        }
        let nexthdr = buf
            .data(&self.pool)
            .get(l3 + 6)
            .copied()
            .unwrap_or(ip_proto::HOP_BY_HOP);
        let skip = seen % u64::from(p.n) >= u64::from(p.k)
            || (p.mode == Ioam6Mode::Inline && nexthdr == ip_proto::HOP_BY_HOP);
        if skip {
            return Some((buf, hop, l3));
        }
        if buf.trim_front(l3).is_err() {
            self.drop_packet(hop.iif, DropReason::Nomem);
            self.pool.free(buf);
            return None;
        }
        if let Err(r) = self.room(&mut buf, p.need, i) {
            self.drop_packet(hop.iif, r);
            self.pool.free(buf);
            return None;
        }
        let h = p.template.len();
        let written = match p.mode {
            Ioam6Mode::Inline => buf
                .insert_after(&mut self.pool, fibre_wire::ipv6::HEADER_LEN, h)
                .is_ok(),
            Ioam6Mode::Encap => buf
                .prepend(&mut self.pool, fibre_wire::ipv6::HEADER_LEN + h)
                .is_ok(),
        };
        if !written {
            self.drop_packet(hop.iif, DropReason::Nomem);
            self.pool.free(buf);
            return None;
        }
        let len = buf.len();
        let d = buf.data_mut(&mut self.pool);
        if p.mode == Ioam6Mode::Encap {
            d.copy_within(
                fibre_wire::ipv6::HEADER_LEN + h..2 * fibre_wire::ipv6::HEADER_LEN + h,
                0,
            );
        }
        let (hdr, rest) = d.split_at_mut(fibre_wire::ipv6::HEADER_LEN);
        let mut ip = ipv6::Packet::new_unchecked(hdr);
        rest[..h].copy_from_slice(&p.template);
        rest[0] = match p.mode {
            Ioam6Mode::Inline => ip.next_header(),
            Ioam6Mode::Encap => ip_proto::IPV6,
        };
        ip.set_next_header(ip_proto::HOP_BY_HOP);
        ip.set_payload_len((len - fibre_wire::ipv6::HEADER_LEN) as u16);
        if p.mode == Ioam6Mode::Encap {
            ip.set_src_addr(p.src);
            ip.set_dst_addr(p.dst);
        }
        let hop_limit = ip.hop_limit();
        let node = node_of(v.fib, hop.iif, Some(hop.oif), hop_limit, now);
        ioam6::transit(&mut rest[Ioam6Push::TRACE_AT - 4..h], node);
        if p.mode == Ioam6Mode::Inline {
            if buf.len() > mtu as usize {
                self.too_big(v, now, buf, hop.iif, mtu, tx);
                return None;
            }
            return Some((buf, hop, 0));
        }
        // The outer packet goes where the tunnel destination's route says (ip6_route_output).
        let Ok(d) = v
            .fib
            .route_output(IpAddr::V6(p.dst), Some(IpAddr::V6(p.src)), 0)
        else {
            self.drop_packet(hop.iif, DropReason::NotSpecified);
            self.pool.free(buf);
            return None;
        };
        if buf.len() > d.mtu as usize {
            self.drop_packet(hop.iif, DropReason::PktTooBig);
            self.pool.free(buf);
            return None;
        }
        let hop = Hop {
            adj: None,
            oif: d.oif,
            nh: d.gateway.unwrap_or(IpAddr::V6(p.dst)),
            src: IpAddr::V6(p.src),
            iif: hop.iif,
        };
        Some((buf, hop, 0))
    }
}

impl Dataplane {
    /// Drops the forwarded IPv6 packet `buf` (from its header) that an insertion grew past
    /// `mtu`, with ICMPv6 Packet Too Big to its source (ip6_fragment's fail_toobig).
    fn too_big(&mut self, v: View<'_>, now: u64, buf: Buf, iif: u32, mtu: u32, tx: &mut dyn Tx) {
        let why = Why {
            err: IcmpError::V6(Icmp6Error::PacketTooBig { mtu }),
            l2: L2Class::Host,
            local_dst: false,
            opts: &Ipv4Options::default(),
            dev: iif,
        };
        self.icmp_error(v, now, &why, Quote::Held(&buf, 0), tx);
        self.drop_packet(iif, DropReason::PktTooBig);
        self.pool.free(buf);
    }
}

/// What this node writes into a trace of a packet in on `iif` and out on `egress` (`None`:
/// for the router itself) with hop limit `hop_limit`, by namespace id.
fn node_of<'a>(
    fib: &'a Fib,
    iif: u32,
    egress: Option<u32>,
    hop_limit: u8,
    now: u64,
) -> impl Fn(u16) -> Option<Node<'a>> + 'a {
    let ingress = fib.ioam6_link(iif);
    let egress = egress.map(|o| {
        let l = fib.ioam6_link(o);
        (l.id, l.id_wide)
    });
    let s = fib.settings();
    let ioam = fib.ioam();
    move |id: u16| {
        let ns = ioam.namespace(id)?;
        let schema = ns
            .schema
            .and_then(|sc| Some((sc, &ioam.schema(sc)?.data[..])));
        Some(Node {
            hop_limit,
            id: s.ioam6_id,
            id_wide: s.ioam6_id_wide,
            ingress: (ingress.id, ingress.id_wide),
            egress,
            ns_data: ns.data.unwrap_or(U32_UNAVAILABLE),
            ns_wide: ns.wide.unwrap_or(U64_UNAVAILABLE),
            schema,
            now,
        })
    }
}
