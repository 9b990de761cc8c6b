//! Forwarding a packet the input route decision sent on (ip_forward, ip6_forward): the
//! forward stage's checks and rewrites, the redirects, fragmentation, then output.

use core::net::{IpAddr, Ipv4Addr};

use fibre_fib::ForwardRoute;
use fibre_fwd::{EncapObj, HopEncap};
use fibre_packet::Buf;
use fibre_wire::ethernet;

use super::errors::{Quote, Why};
use super::{Dataplane, Hop, Tx, View};
use crate::drop::DropReason;
use crate::forward::{self, Ipv4Options, V4Route, V6Route};
use crate::icmp::{Icmp4Error, IcmpError};
use crate::neigh;
use crate::rx::{L2Class, Meta};

impl Dataplane {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: Buf,
        meta: &Meta,
        f: &ForwardRoute,
        opts: &Ipv4Options,
        passes: u8,
        tx: &mut dyn Tx,
    ) {
        // A next hop with an SRv6 encapsulation takes the packet before forwarding touches it
        // (the kernel's lightweight-tunnel input redirect: seg6_input, seg6_local_input); an
        // IOAM one after (an output redirect: ioam6_output).
        let ioam = match v.fwd.encap(f) {
            HopEncap::None => None,
            HopEncap::Obj(i) => match v.fwd.encap_obj(i) {
                EncapObj::Ioam6(p) => Some((i, p)),
                _ => return self.srv6(v, now, iif, buf, meta, i, passes, tx),
            },
            HopEncap::Stale => {
                self.drop_received(iif, DropReason::Seg6Unsupported);
                self.pool.free(buf);
                return;
            }
        };
        let l3 = usize::from(meta.l3);
        let nh = f.gateway.unwrap_or(meta.dst);
        let hop = Hop {
            adj: v.fwd.adjacency(f, meta.dst),
            oif: f.oif,
            nh,
            src: meta.src,
            iif,
        };
        if meta.is_ipv4() {
            let ip = &mut buf.data_mut(&mut self.pool)[l3..];
            let fwd = match forward::forward_v4(ip, meta.l2, &V4Route { mtu: f.mtu }) {
                Ok(x) => x,
                Err(d) => return self.discard(v, now, iif, buf, meta, d, false, opts, iif, tx),
            };
            // Source-routed packets never get here (compile_options drops them), so every
            // redirect the route asks for is sent.
            if f.redirect {
                if let IpAddr::V4(src) = meta.src {
                    if self.rate.redirect_v4(src, now) {
                        let gw = match nh {
                            IpAddr::V4(g) => g,
                            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
                        };
                        let e = IcmpError::V4(Icmp4Error::RedirectHost { gateway: gw });
                        let why = Why {
                            err: e,
                            l2: meta.l2,
                            local_dst: false,
                            opts,
                            dev: iif,
                        };
                        self.icmp_error(v, now, &why, Quote::Held(&buf, l3), tx);
                    }
                }
            }
            if meta.options {
                let egress = v
                    .fib
                    .route_output(meta.dst, None, meta.tos)
                    .ok()
                    .and_then(|d| d.prefsrc)
                    .or_else(|| {
                        v.fib
                            .select_src4(f.oif, Ipv4Addr::UNSPECIFIED, fibre_fib::scope::UNIVERSE)
                            .map(IpAddr::V4)
                    });
                if let Some(IpAddr::V4(e)) = egress {
                    let ip = &mut buf.data_mut(&mut self.pool)[l3..];
                    forward::forward_options_v4(ip, opts, e);
                }
            }
            if fwd.fragment {
                let mut frags = std::mem::take(&mut self.frags);
                let cut = crate::frag::fragment_v4(&mut self.pool, buf, l3, f.mtu, |_, frag| {
                    frags.push(frag)
                });
                // A packet cut short is a drop (the fragments made before the failure still
                // leave, as in ip_do_fragment).
                match cut {
                    Ok(_) => self.counters.forwarded += 1,
                    Err(e) => self.drop_received(iif, e.reason()),
                }
                for frag in frags.drain(..) {
                    self.counters.fragments += 1;
                    self.output(v, hop, frag, 0, tx);
                }
                self.frags = frags;
                return;
            }
            self.counters.forwarded += 1;
            self.output(v, hop, buf, l3, tx);
        } else {
            if f.oif == iif {
                self.redirect6(v, now, iif, &buf, meta, f.gateway, tx);
            }
            let ip = &mut buf.data_mut(&mut self.pool)[l3..];
            let route = V6Route {
                mtu: f.mtu,
                same_link: f.oif == iif,
            };
            match forward::forward_v6(ip, meta.l2, &route) {
                Ok(_) => {}
                Err(d) => return self.discard(v, now, iif, buf, meta, d, false, opts, iif, tx),
            }
            self.counters.forwarded += 1;
            let (buf, hop, l3) = match ioam {
                None => (buf, hop, l3),
                Some((i, p)) => match self.ioam6_insert(v, now, buf, l3, i, p, hop, f.mtu, tx) {
                    Some(x) => x,
                    None => return,
                },
            };
            self.output(v, hop, buf, l3, tx);
        }
    }

    /// ip6_forward's redirect for a packet leaving by the link it came in on, made before the
    /// hop limit is decremented and the MTU checked (so it quotes the packet as received):
    /// the destination's rate limit, then ndisc_send_redirect's conditions and the source's.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn redirect6(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: &Buf,
        meta: &Meta,
        gateway: Option<IpAddr>,
        tx: &mut dyn Tx,
    ) {
        let (IpAddr::V6(src), IpAddr::V6(dst)) = (meta.src, meta.dst) else {
            return;
        };
        if meta.l2 != L2Class::Host || meta.ttl <= 1 {
            return;
        }
        let target = match gateway {
            Some(IpAddr::V6(g)) => g,
            _ => dst,
        };
        if !self.rate.redirect_v6(dst, now) {
            return;
        }
        let Some(lladdr) = neigh::redirect6_source(v.fib, iif, src, dst, target) else {
            return;
        };
        if !self.rate.redirect_v6(src, now) {
            return;
        }
        let orig = buf
            .data(&self.pool)
            .get(usize::from(meta.l3)..)
            .unwrap_or(&[]);
        let out = &mut self.scratch[ethernet::HEADER_LEN..];
        let len = neigh::redirect6(v.fib, iif, lladdr, target, orig, out);
        if len > 0 {
            self.counters.neigh_sent += 1;
            self.originate(v, (iif, IpAddr::V6(src)), IpAddr::V6(lladdr), len, tx);
        }
    }
}
