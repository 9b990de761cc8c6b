//! SRv6 in the pipeline: a packet whose route decision names a next hop with an encapsulation
//! object (`fibre_fwd::encap`) gets its headers here (SRv6, or an RPL source routing header),
//! or its endpoint behaviour run, and is then routed again by its new destination on the link
//! it came in on, as the kernel's seg6_input, seg6_local_input and rpl_input do
//! (ip6_route_input, then dst_input: the hop limit and MTU checks of forwarding apply to the
//! packet as it now is).
//!
//! Headroom: an encapsulation checks its object's precomputed need (the headers plus the
//! link-layer header) once, before it writes; a packet short of it is copied once
//! (`Buf::ensure_headroom`) and the copy is counted on the object ([`EncapStats`]). With the
//! pool's headroom sized from the routes (`Config::with_encap_headroom`) no packet is ever
//! copied.

use core::net::IpAddr;

use fibre_fib::{Fib, ForwardRoute, InputDrop, InputKey, InputMemo, InputRoute};
use fibre_fwd::encap::{Behaviour, LocalSid, PushHmac, PushMode, RplPush, Seg6Push};
use fibre_fwd::{EncapIdx, EncapObj};
use fibre_packet::Buf;
use fibre_wire::consts::ip_proto;
use fibre_wire::{ethernet, ipv6};

use super::errors::{Quote, Why};
use super::{Dataplane, Slot, Tx, View};
use crate::drop::DropReason;
use crate::forward::Ipv4Options;
use crate::icmp::{Icmp6Error, IcmpError};
use crate::rpl;
use crate::rx::{self, Meta};
use crate::srv6::{self, Outer, Srv6Drop};

/// How often one received packet may be encapsulated or handled by an endpoint behaviour
/// before it leaves: a behaviour's next segment may be another local SID, and a route loop
/// (an encapsulation whose first segment leads back into a route that encapsulates) must end.
/// The kernel recurses without a bound of its own; four covers an H.Encaps into an End into an
/// End.B6.Encaps into an End.DT6, with room to spare.
pub const MAX_PASSES: u8 = 4;

/// The hop limit an encapsulation gives the outer header of a packet that is not IPv6: the
/// kernel's ip6_dst_hoplimit without a route metric or a per-link setting
/// (IPV6_DEFAULT_HOPLIMIT).
pub const DEFAULT_HOP_LIMIT: u8 = 64;

/// One encapsulation object's counters in one worker, by the object's place (`EncapIdx`): a
/// place the writer reuses for a later object goes on counting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncapStats {
    /// Packets that got the object's headers (or ran its behaviour).
    pub packets: u64,
    /// Packets copied because their headroom was short of the object's need: at most one copy
    /// per packet, none when the pool's headroom covers every object.
    pub reallocs: u64,
}

/// The last input decision a packet was routed again by after an SRv6 stage, kept for the
/// next: the packets of one tunnel share their outer header's decision key (the first segment,
/// the tunnel source, the input link, the traffic class), so a full lookup per packet would
/// repeat one answer. Answered from only as the input cache answers (`Fib::route_input_replay`,
/// the same `Fib::gen`, no route deadline passed, the key enough for the family's rules).
#[derive(Clone, Copy)]
pub(super) struct Again {
    key: InputKey,
    gen: u64,
    memo: InputMemo,
}

/// How the packet a behaviour produced is routed again.
#[derive(Clone, Copy)]
struct Lookup {
    /// Looked up in this table alone (End.T, End.DT6) rather than through the rules.
    table: Option<u32>,
    /// The address looked up instead of the destination (End.X, End.DX6, End.DX4).
    nh: Option<IpAddr>,
    /// Whether `nh` is also the neighbour the packet goes to when the route has no gateway
    /// (IPv6's FLOWI_FLAG_KNOWN_NH; End.DX4's ip_route_input keeps the packet's destination
    /// as the neighbour of an on-link route).
    known_nh: bool,
    /// Looked up with TOS 0 (End.DX4's ip_route_input passes none), not the packet's.
    tos_zero: bool,
    /// Whether the result may be the router itself: only after a decapsulation
    /// (seg6_lookup_any_nexthop's local_delivery); otherwise such a packet is dropped, as the
    /// kernel sends it to its blackhole route.
    local: bool,
    /// Not looked up at all: delivered to the router (the USP and USD flavors' upper-layer
    /// processing, RFC 8986 4.1.1), its destination the SID that brought it here.
    deliver: bool,
}

const PLAIN: Lookup = Lookup {
    table: None,
    nh: None,
    known_nh: false,
    tos_zero: false,
    local: true,
    deliver: false,
};
const DELIVER: Lookup = Lookup {
    deliver: true,
    ..PLAIN
};
const NOT_LOCAL: Lookup = Lookup {
    local: false,
    ..PLAIN
};

impl Dataplane {
    /// Applies encapsulation object `i` to a packet forwarded through it, then routes the
    /// result again. `passes` counts the SRv6 stages the packet went through before.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn srv6(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: Buf,
        meta: &Meta,
        i: EncapIdx,
        passes: u8,
        tx: &mut dyn Tx,
    ) {
        if passes >= MAX_PASSES {
            return self.srv6_drop(iif, buf, DropReason::Seg6Unsupported);
        }
        if let Some(s) = self.encap_stats.get_mut(i.get()) {
            s.packets += 1;
        }
        let done = match v.fwd.encap_obj(i) {
            EncapObj::Seg6(p) => self.push(v, buf, meta, p, i).map(|b| (b, PLAIN)),
            EncapObj::Seg6Local(sid) => self.behaviour(v, iif, buf, meta, sid, i),
            EncapObj::Rpl(p) => self.rpl_insert(buf, meta, p, i).map(|b| (b, PLAIN)),
            // IOAM objects act on output (the transit stage keeps them from here).
            EncapObj::Ioam6(_) | EncapObj::Unsupported => Err((buf, DropReason::Seg6Unsupported)),
        };
        match done {
            Ok((buf, how)) => self.route_again(v, now, iif, buf, meta, how, passes + 1, tx),
            Err((buf, reason)) => self.srv6_drop(iif, buf, reason),
        }
    }

    fn srv6_drop(&mut self, iif: u32, buf: Buf, reason: DropReason) {
        self.drop_received(iif, reason);
        self.pool.free(buf);
    }

    /// Makes room for `need` bytes in front of the packet, copying it at most once and
    /// counting the copy on object `i`.
    pub(super) fn room(
        &mut self,
        buf: &mut Buf,
        need: usize,
        i: EncapIdx,
    ) -> Result<(), DropReason> {
        if buf.headroom() >= need {
            return Ok(());
        }
        if let Some(s) = self.encap_stats.get_mut(i.get()) {
            s.reallocs += 1;
        }
        self.counters.encap_reallocs += 1;
        buf.ensure_headroom(&mut self.pool, need)
            .map_err(|_| DropReason::Nomem)
    }

    /// Puts `p`'s headers on the IP packet at `meta.l3` (H.Encaps, H.Encaps.Red, H.Insert,
    /// L2 encapsulation). On success the buffer starts at the new IPv6 header.
    fn push(
        &mut self,
        v: View<'_>,
        mut buf: Buf,
        meta: &Meta,
        p: &Seg6Push,
        i: EncapIdx,
    ) -> Result<Buf, (Buf, DropReason)> {
        if p.hmac == PushHmac::Fail {
            return Err((buf, DropReason::Seg6Hmac));
        }
        let l3 = usize::from(meta.l3);
        let v6 = !meta.is_ipv4();
        // The front of what gets encapsulated: the IP packet, or for L2 the Ethernet header
        // as received, tags left out (the kernel takes them off before the route decision).
        let front = match p.mode {
            PushMode::L2Encap => {
                // A packet an SRv6 stage built has no Ethernet header of its own left.
                let Some(eth) = l3.checked_sub(ethernet::HEADER_LEN) else {
                    return Err((buf, DropReason::Seg6Unsupported));
                };
                let d = buf.data_mut(&mut self.pool);
                d.copy_within(0..12, eth);
                let ty: u16 = if v6 { 0x86dd } else { 0x0800 };
                d[l3 - 2..l3].copy_from_slice(&ty.to_be_bytes());
                eth
            }
            PushMode::Encap | PushMode::Insert => l3,
        };
        if buf.trim_front(front).is_err() {
            return Err((buf, DropReason::Nomem));
        }
        if let Err(r) = self.room(&mut buf, p.need, i) {
            return Err((buf, r));
        }
        if p.mode == PushMode::Insert {
            if !v6
                || buf
                    .insert_after(&mut self.pool, fibre_wire::ipv6::HEADER_LEN, p.added())
                    .is_err()
            {
                return Err((buf, DropReason::Seg6Unsupported));
            }
            return match srv6::write_insert(p, buf.data_mut(&mut self.pool)) {
                Ok(()) => Ok(buf),
                Err(e) => Err((buf, e.reason())),
            };
        }
        let next = match (p.mode, v6) {
            (PushMode::L2Encap, _) => ip_proto::ETHERNET,
            (_, true) => ip_proto::IPV6,
            (_, false) => ip_proto::IPIP,
        };
        let setting = v.fib.settings().seg6_flowlabel;
        let outer = outer_of(meta, setting, next);
        let payload_len = buf.len();
        match buf.prepend(&mut self.pool, p.added()) {
            Ok(out) => srv6::write_encap(p, out, payload_len, &outer),
            Err(_) => return Err((buf, DropReason::Nomem)),
        }
        Ok(buf)
    }

    /// Inserts `p`'s RPL source routing header into the IPv6 packet at `meta.l3`
    /// (rpl_input's rpl_do_srh); on success the buffer starts at its IPv6 header.
    fn rpl_insert(
        &mut self,
        mut buf: Buf,
        meta: &Meta,
        p: &RplPush,
        i: EncapIdx,
    ) -> Result<Buf, (Buf, DropReason)> {
        let IpAddr::V6(dst) = meta.dst else {
            return Err((buf, DropReason::Seg6Unsupported));
        };
        if buf.trim_front(usize::from(meta.l3)).is_err() {
            return Err((buf, DropReason::Nomem));
        }
        if let Err(r) = self.room(&mut buf, p.need, i) {
            return Err((buf, r));
        }
        let l = rpl::added(p, &dst);
        if buf
            .insert_after(&mut self.pool, fibre_wire::ipv6::HEADER_LEN, l.len)
            .is_err()
        {
            return Err((buf, DropReason::Nomem));
        }
        rpl::write_insert(p, &l, buf.data_mut(&mut self.pool));
        Ok(buf)
    }

    /// Runs an endpoint behaviour on the IPv6 packet at `meta.l3`, received on `iif`; on
    /// success the buffer starts at the IP header to route next, with how to route it.
    fn behaviour(
        &mut self,
        v: View<'_>,
        iif: u32,
        mut buf: Buf,
        meta: &Meta,
        sid: &LocalSid,
        i: EncapIdx,
    ) -> Result<(Buf, Lookup), (Buf, DropReason)> {
        if meta.is_ipv4() || buf.trim_front(usize::from(meta.l3)).is_err() {
            return Err((buf, DropReason::Seg6Unsupported));
        }
        let fail = |buf, e: Srv6Drop| Err((buf, e.reason()));
        let hmac = srv6::HmacCheck {
            require: v.fib.seg6_require_hmac(iif),
            keys: v.fwd,
        };
        // decap_and_validate, then the lookup `how` of the inner packet.
        let decap = |mut buf: Buf, pool: &mut fibre_packet::Pool, proto, how| {
            let cut = srv6::inner_at(buf.data(pool), proto, &hmac)
                .and_then(|at| buf.trim_front(at).map_err(|_| Srv6Drop::NoInner));
            match cut {
                Ok(()) => Ok((buf, how)),
                Err(e) => Err((buf, e.reason())),
            }
        };
        let end_lookup = |b: &Behaviour| match *b {
            Behaviour::EndX(nh) => Lookup {
                nh: Some(IpAddr::V6(nh)),
                known_nh: true,
                ..NOT_LOCAL
            },
            Behaviour::EndT(t) => Lookup {
                table: Some(t),
                ..NOT_LOCAL
            },
            _ => NOT_LOCAL,
        };
        // NEXT-C-SID with an Argument left: the next SID is in the destination, no SRH read.
        if let Some((block, func)) = sid.next_csid {
            if srv6::next_csid(buf.data_mut(&mut self.pool), block, func) {
                return Ok((buf, end_lookup(&sid.behaviour)));
            }
        }
        let how = match &sid.behaviour {
            Behaviour::End | Behaviour::EndX(_) | Behaviour::EndT(_) => {
                let mut check = hmac;
                if sid.usp || sid.usd {
                    match srv6::ultimate(buf.data(&self.pool), &hmac) {
                        Ok(Some(u)) => return self.ultimate(buf, sid, u, v.fwd),
                        // Segments left: the SRH's HMAC passed its check there.
                        Ok(None) => check = srv6::HmacCheck::done(v.fwd),
                        Err(e) => return fail(buf, e),
                    }
                }
                let at = match srv6::valid_srh(buf.data(&self.pool), &check) {
                    Ok(at) => at,
                    Err(e) => return fail(buf, e),
                };
                let left = srv6::advance(buf.data_mut(&mut self.pool), at);
                if left == 0 && sid.psp {
                    let cut = srv6::pop_srh(buf.data_mut(&mut self.pool), at);
                    if buf.trim_front(cut).is_err() {
                        return Err((buf, DropReason::Nomem));
                    }
                }
                end_lookup(&sid.behaviour)
            }
            Behaviour::EndDx6(nh) => {
                let how = Lookup {
                    nh: (!nh.is_unspecified()).then_some(IpAddr::V6(*nh)),
                    known_nh: true,
                    ..NOT_LOCAL
                };
                return decap(buf, &mut self.pool, ip_proto::IPV6, how);
            }
            Behaviour::EndDx4(nh) => {
                let how = Lookup {
                    nh: (!nh.is_unspecified()).then_some(IpAddr::V4(*nh)),
                    tos_zero: true,
                    ..PLAIN
                };
                return decap(buf, &mut self.pool, ip_proto::IPIP, how);
            }
            // End.DT4, End.DT46 and End.DT6 with a VRF table: the kernel receives the inner
            // packet on the VRF device bound to the table, whose rule sends the lookup there;
            // fibre has no VRF devices and looks the packet up in the table itself, on the
            // link it came in on.
            Behaviour::EndDt6(t) => {
                return decap(buf, &mut self.pool, ip_proto::IPV6, dt(*t, ip_proto::IPV6));
            }
            Behaviour::EndDt4(t) => {
                return decap(buf, &mut self.pool, ip_proto::IPIP, dt(*t, ip_proto::IPIP));
            }
            Behaviour::EndDt46(t) => {
                // input_action_end_dt46: the protocol after the outer headers picks End.DT4's
                // or End.DT6's processing.
                let proto = match srv6::upper_layer(buf.data(&self.pool)) {
                    Ok((p @ (ip_proto::IPIP | ip_proto::IPV6), _)) => p,
                    _ => return fail(buf, Srv6Drop::NoInner),
                };
                return decap(buf, &mut self.pool, proto, dt(*t, proto));
            }
            Behaviour::EndB6(p) | Behaviour::EndB6Encaps(p) => {
                let at = match srv6::valid_srh(buf.data(&self.pool), &hmac) {
                    Ok(at) => at,
                    Err(e) => return fail(buf, e),
                };
                let encaps = matches!(sid.behaviour, Behaviour::EndB6Encaps(_));
                if encaps {
                    srv6::advance(buf.data_mut(&mut self.pool), at);
                }
                // The behaviour's headers go on the packet as it is now: its own IPv6 header
                // is the inner one (End.B6.Encaps) or the one the SRH follows (End.B6).
                let meta = match rx::ip_meta(buf.data(&self.pool), meta.l2) {
                    Ok(m) => m,
                    Err(d) => return Err((buf, d.reason)),
                };
                let buf = self.push(v, buf, &meta, p, i)?;
                return Ok((buf, NOT_LOCAL));
            }
        };
        Ok((buf, how))
    }

    /// An End, End.X or End.T with the USP or USD flavor, for a packet at the end of its
    /// segment list (`u`: no SRH, or Segments Left 0). USD: an IPv6 or IPv4 payload is
    /// decapsulated and routed as the behaviour routes (End: by its destination; End.X: to
    /// the behaviour's neighbour; End.T: in its table). USP: the SRH is removed. Anything
    /// else is the upper-layer header processing of RFC 8986 4.1.1: the router's own.
    fn ultimate(
        &mut self,
        mut buf: Buf,
        sid: &LocalSid,
        u: srv6::Ultimate,
        keys: &fibre_fwd::FwdTable,
    ) -> Result<(Buf, Lookup), (Buf, DropReason)> {
        if sid.usd && (u.upper == ip_proto::IPV6 || u.upper == ip_proto::IPIP) {
            let how = match (&sid.behaviour, u.upper) {
                (Behaviour::EndT(t), _) => Lookup {
                    table: Some(*t),
                    ..PLAIN
                },
                (Behaviour::EndX(nh), ip_proto::IPV6) => Lookup {
                    nh: Some(IpAddr::V6(*nh)),
                    known_nh: true,
                    ..NOT_LOCAL
                },
                // The neighbour is an IPv6 address: fibre's IPv4 forwarding has no IPv6
                // gateways to hand an IPv4 packet to.
                (Behaviour::EndX(_), _) => return Err((buf, DropReason::Seg6FamilyMismatch)),
                _ => PLAIN,
            };
            // `srv6::ultimate` checked the SRH's HMAC.
            let done = srv6::HmacCheck::done(keys);
            let cut = srv6::inner_at(buf.data(&self.pool), u.upper, &done)
                .and_then(|at| buf.trim_front(at).map_err(|_| Srv6Drop::NoInner));
            return match cut {
                Ok(()) => Ok((buf, how)),
                Err(e) => Err((buf, e.reason())),
            };
        }
        if let (true, Some((at, link))) = (sid.usp, u.srh) {
            let cut = srv6::remove_srh(buf.data_mut(&mut self.pool), at, link);
            if buf.trim_front(cut).is_err() {
                return Err((buf, DropReason::Nomem));
            }
        }
        Ok((buf, DELIVER))
    }

    /// Routes the IP packet the buffer starts with, as the kernel routes it after an SRv6
    /// stage (on the input link, by its own header), and sends it on through the usual
    /// stages.
    #[allow(clippy::too_many_arguments)]
    fn route_again(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: Buf,
        meta: &Meta,
        how: Lookup,
        passes: u8,
        tx: &mut dyn Tx,
    ) {
        let m = match rx::ip_meta(buf.data(&self.pool), meta.l2) {
            Ok(m) => m,
            Err(d) => return self.srv6_drop(iif, buf, d.reason),
        };
        if how.deliver {
            let none = Ipv4Options::default();
            return self.local(v, now, iif, buf, &m, false, &none, tx);
        }
        let key = InputKey {
            dst: how.nh.unwrap_or(m.dst),
            tos: if how.tos_zero { 0 } else { m.tos },
            ..key_of(&m, iif)
        };
        let route = match how.table {
            Some(t) => v.fib.route_input_table(&key, t),
            None => self.input_again(v.fib, &key),
        };
        let route = match route {
            Ok(InputRoute::Local { .. } | InputRoute::Broadcast { .. }) if !how.local => {
                return self.srv6_drop(iif, buf, DropReason::Blackhole)
            }
            Ok(InputRoute::Forward(f)) => Ok(InputRoute::Forward(ForwardRoute {
                gateway: f.gateway.or(how.nh.filter(|_| how.known_nh)),
                ..f
            })),
            r => r,
        };
        self.act(
            v,
            now,
            Slot {
                iif,
                buf,
                meta: m,
                route,
                passes,
            },
            tx,
        );
    }

    /// `Fib::route_input` for `key`, from the last decision when it holds (see [`Again`]).
    fn input_again(&mut self, fib: &Fib, key: &InputKey) -> Result<InputRoute, InputDrop> {
        let timely = fib
            .route_input_deadline()
            .is_none_or(|d| fib.clock().now_ms() < d);
        if !timely || !fib.input_key_suffices(key.dst.is_ipv6()) {
            return fib.route_input(key);
        }
        let gen = fib.gen();
        let last = self
            .again
            .filter(|a| a.gen == gen && a.key.same_cache_key(key));
        if let Some(r) = last.and_then(|a| fib.route_input_replay(&a.memo, key)) {
            return r;
        }
        let (r, memo) = fib.route_input_memo(key);
        self.again = memo.map(|memo| Again {
            key: *key,
            gen,
            memo,
        });
        r
    }

    /// ipv6_srh_rcv: an IPv6 packet for the router whose first routing header is an SRH. Not
    /// accepted on a link without seg6_enabled (dropped, silently), nor when its HMAC fails
    /// the link's seg6_require_hmac (seg6_hmac_validate_skb, counted); with segments left the
    /// router is the active segment: the next one becomes the destination and the packet is
    /// routed again (a further segment of the router's own taken at once, the hop limit one
    /// lower each time); with none left an inner IPv6 or IPv4 packet is taken out and received
    /// again, anything else delivered past the SRH. Returns the packet when it is to be
    /// delivered here, `None` when this consumed it.
    pub(super) fn srh_for_router(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        mut buf: Buf,
        meta: &Meta,
        tx: &mut dyn Tx,
    ) -> Option<Buf> {
        let l3 = usize::from(meta.l3);
        let ip = buf.data(&self.pool).get(l3..).unwrap_or(&[]);
        // Routing headers of other types, and chains that end early, are local_headers6's.
        let Ok(Some(at)) = srv6::find_srh(ip) else {
            return Some(buf);
        };
        // ipv6_rthdr_rcv: a routing header the packet does not hold whole is a header error.
        let whole = ip
            .get(at + 1)
            .is_some_and(|l| ip.len() >= at + (usize::from(*l) + 1) * 8);
        if !whole {
            self.srv6_drop(iif, buf, DropReason::IpInhdr);
            return None;
        }
        if !v.fib.seg6_enabled(iif) {
            self.srv6_drop(iif, buf, DropReason::Seg6Disabled);
            return None;
        }
        let hmac = srv6::HmacCheck {
            require: v.fib.seg6_require_hmac(iif),
            keys: v.fwd,
        };
        if let Err(e) = hmac.check(ip, at) {
            self.srv6_drop(iif, buf, e.reason());
            return None;
        }
        if buf.trim_front(l3).is_err() {
            self.srv6_drop(iif, buf, DropReason::Nomem);
            return None;
        }
        loop {
            let ip = buf.data_mut(&mut self.pool);
            let (next, ext, left) = (ip[at], usize::from(ip[at + 1]), ip[at + 3]);
            if left == 0 {
                if next != ip_proto::IPV6 && next != ip_proto::IPIP {
                    // Delivered past the SRH: the caller reads the packet from l3 again.
                    return match buf.prepend(&mut self.pool, l3) {
                        Ok(_) => Some(buf),
                        Err(_) => {
                            self.srv6_drop(iif, buf, DropReason::Nomem);
                            None
                        }
                    };
                }
                let inner = at + (ext + 1) * 8;
                if buf.trim_front(inner).is_err() {
                    self.srv6_drop(iif, buf, DropReason::Seg6NoInner);
                    return None;
                }
                self.route_again(v, now, iif, buf, meta, PLAIN, 1, tx);
                return None;
            }
            if usize::from(left) >= ext / 2 {
                let e = Icmp6Error::ParamProblem {
                    code: 0,
                    pointer: (at + 3) as u32,
                };
                self.srh_error(v, now, iif, buf, meta, e, tx);
                return None;
            }
            srv6::advance(ip, at);
            let m = match rx::ip_meta(ip, meta.l2) {
                Ok(m) => m,
                Err(d) => {
                    self.srv6_drop(iif, buf, d.reason);
                    return None;
                }
            };
            // The packets of one path share this decision: the last one answers it when it
            // holds ([`Again`]).
            let route = self.input_again(v.fib, &key_of(&m, iif));
            if !matches!(route, Ok(InputRoute::Local { .. })) {
                self.act(
                    v,
                    now,
                    Slot {
                        iif,
                        buf,
                        meta: m,
                        route,
                        passes: 1,
                    },
                    tx,
                );
                return None;
            }
            // The router's own segment again: taken here, one hop later.
            if m.ttl <= 1 {
                self.srh_error(v, now, iif, buf, meta, Icmp6Error::HopLimitExceeded, tx);
                return None;
            }
            let ip = buf.data_mut(&mut self.pool);
            ipv6::Packet::new_unchecked(ip).set_hop_limit(m.ttl - 1);
        }
    }

    /// Drops a packet ipv6_srh_rcv refuses with an ICMPv6 error about it (the packet starts
    /// the buffer).
    #[allow(clippy::too_many_arguments)]
    fn srh_error(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: Buf,
        meta: &Meta,
        err: Icmp6Error,
        tx: &mut dyn Tx,
    ) {
        let why = Why {
            err: IcmpError::V6(err),
            l2: meta.l2,
            local_dst: true,
            opts: &Ipv4Options::default(),
            dev: iif,
        };
        self.icmp_error(v, now, &why, Quote::Held(&buf, 0), tx);
        self.srv6_drop(iif, buf, DropReason::IpInhdr);
    }

    /// The encapsulation objects that saw packets in this worker, by index, with their
    /// counters.
    pub fn encap_stats_used(&self) -> impl Iterator<Item = (usize, EncapStats)> + '_ {
        self.encap_stats
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, s)| s.packets != 0)
    }

    /// The counters of encapsulation object `i` in this worker.
    pub fn encap_stats(&self, i: EncapIdx) -> EncapStats {
        self.encap_stats.get(i.get()).copied().unwrap_or_default()
    }
}

/// The outer header's per-packet fields for a packet described by `meta` (seg6_do_srh_encap):
/// an IPv6 packet lends its traffic class and hop limit, any other gets 0 and the default hop
/// limit; the flow label follows net.ipv6.seg6_flowlabel.
fn outer_of(meta: &Meta, setting: i32, next: u8) -> Outer {
    let (src, dst) = (octets(meta.src), octets(meta.dst));
    let hash = srv6::flow_hash(&src, &dst, meta.proto, (meta.sport, meta.dport));
    match meta.is_ipv4() {
        false => Outer {
            traffic_class: meta.tos,
            flow_label: srv6::flow_label(setting, Some(meta.flow_label), hash),
            hop_limit: meta.ttl,
            next,
        },
        true => Outer {
            traffic_class: 0,
            flow_label: srv6::flow_label(setting, None, hash),
            hop_limit: DEFAULT_HOP_LIMIT,
            next,
        },
    }
}

/// How End.DT4, End.DT6 and End.DT46 route the inner packet of protocol `proto`: in table
/// `t`, an IPv4 packet with TOS 0 (input_action_end_dt4's ip_route_input passes none).
fn dt(t: u32, proto: u8) -> Lookup {
    Lookup {
        table: Some(t),
        tos_zero: proto == ip_proto::IPIP,
        ..PLAIN
    }
}

/// The input route decision's key for a packet described by `m` in on `iif`.
fn key_of(m: &Meta, iif: u32) -> InputKey {
    InputKey {
        dst: m.dst,
        src: m.src,
        iif,
        tos: m.tos,
        mark: 0,
        proto: m.proto,
        sport: m.sport,
        dport: m.dport,
        flowlabel: m.flow_label,
    }
}

fn octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}
