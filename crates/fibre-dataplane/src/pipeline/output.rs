//! Where packets leave: through their adjacency's link-layer rewrite when the neighbour is
//! resolved, else held until it is (ip_finish_output2, neigh_output, __neigh_event_send);
//! the packets the router makes; and what the writer's neighbour states ask (solicitations,
//! held packets sent or failed).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fibre_fib::{Family, NudAction};
use fibre_fwd::{AdjIdx, FwdTable, NeighState, REWRITE_LEN};
use fibre_packet::Buf;
use fibre_wire::ethernet;

use super::errors::{Quote, Why};
use super::{transmit, Dataplane, Event, Hop, Tx, View};
use crate::drop::DropReason;
use crate::forward::Ipv4Options;
use crate::icmp::{Icmp4Error, Icmp6Error, IcmpError};
use crate::neigh;
use crate::rx::L2Class;
use crate::waiting::Full;

impl Dataplane {
    /// Sends the IP packet at `l3` in `buf` to the neighbour `nh` on `oif` (ip_finish_output2
    /// and neigh_output): with the link-layer header when the neighbour's address is known,
    /// else held until it is (the writer starts resolution on the [`Event::Used`]).
    pub(super) fn output(
        &mut self,
        v: View<'_>,
        hop: Hop,
        mut buf: Buf,
        l3: usize,
        tx: &mut dyn Tx,
    ) {
        let Hop {
            adj,
            oif,
            nh,
            src,
            iif,
        } = hop;
        let family = match buf.data(&self.pool).get(l3).map(|b| b >> 4) {
            Some(4) => Family::Inet,
            _ => Family::Inet6,
        };
        let adj = adj.or_else(|| adjacency_of(v.fwd, oif, nh, family));
        let Some(a) = adj.map(|a| v.fwd.adj(a)).filter(|a| v.fwd.link(a.link).up) else {
            self.drop_packet(oif, DropReason::DevReady);
            self.pool.free(buf);
            return;
        };
        if a.state != NeighState::Resolved {
            self.event(Event::Used { oif, addr: nh });
            let held = match buf.trim_front(l3) {
                Ok(()) => self.waiting.push(oif, nh, src, iif, buf),
                Err(_) => Err(Full::Refused(buf)),
            };
            match held {
                Ok(None) => {}
                Ok(Some(old)) | Err(Full::Refused(old)) => {
                    self.drop_packet(oif, DropReason::NeighQueuefull);
                    self.pool.free(old);
                }
            }
            return;
        }
        if a.report_use {
            self.event(Event::Used { oif, addr: nh });
        }
        // The link-layer header goes right before the IP header: over the received one (and
        // any tags) when there is one, else into the headroom.
        let written = if l3 >= REWRITE_LEN {
            buf.trim_front(l3 - REWRITE_LEN)
                .map(|()| &mut buf.data_mut(&mut self.pool)[..REWRITE_LEN])
        } else {
            buf.trim_front(l3)
                .and_then(|()| buf.prepend(&mut self.pool, REWRITE_LEN))
        };
        match written {
            Ok(h) => h.copy_from_slice(&a.rewrite),
            Err(_) => {
                self.drop_packet(oif, DropReason::Nomem);
                self.pool.free(buf);
                return;
            }
        }
        transmit(&mut self.links, tx, oif, buf.data(&self.pool));
        self.pool.free(buf);
    }

    /// Sends the `len` bytes of an IP packet the router built in the scratch frame (after
    /// room for a link-layer header) to `dst`, through the route back.
    pub(super) fn originate(
        &mut self,
        v: View<'_>,
        route: (u32, IpAddr),
        src: IpAddr,
        len: usize,
        tx: &mut dyn Tx,
    ) {
        let Ok(mut buf) = self.pool.alloc() else {
            self.drops.count(DropReason::Nomem);
            return;
        };
        match buf.append(&mut self.pool, len) {
            Ok(b) => {
                b.copy_from_slice(&self.scratch[ethernet::HEADER_LEN..ethernet::HEADER_LEN + len])
            }
            Err(_) => {
                self.pool.free(buf);
                self.drops.count(DropReason::Nomem);
                return;
            }
        }
        let hop = Hop {
            adj: None,
            oif: route.0,
            nh: route.1,
            src,
            iif: 0,
        };
        self.output(v, hop, buf, 0, tx);
    }

    /// Carries out what the writer's neighbour states ask: solicitations to send, held
    /// packets to send now that their neighbour resolved, or to answer with "unreachable"
    /// when it failed.
    pub fn neigh_actions(&mut self, v: View<'_>, now: u64, actions: &[NudAction], tx: &mut dyn Tx) {
        self.follow_settings(v.fib);
        for a in actions {
            match *a {
                NudAction::Probe {
                    ifindex,
                    addr,
                    unicast,
                } => {
                    let Some(mac) = v.fib.link_mac(ifindex) else {
                        continue;
                    };
                    let newest = self.waiting.newest_src(ifindex, addr);
                    let len = match (addr, newest) {
                        (IpAddr::V4(t), s) => neigh::arp_request(
                            v.fib,
                            ifindex,
                            mac,
                            t,
                            unicast,
                            s.and_then(v4),
                            &mut self.scratch[..],
                        ),
                        (IpAddr::V6(t), s) => neigh::neighbour_solicit(
                            v.fib,
                            ifindex,
                            mac,
                            t,
                            unicast,
                            s.and_then(v6),
                            &mut self.scratch[..],
                        ),
                    };
                    if len > 0 {
                        self.counters.neigh_sent += 1;
                        transmit(&mut self.links, tx, ifindex, &self.scratch[..len]);
                    }
                }
                NudAction::Resolved { ifindex, addr, .. } => {
                    let mut flush = std::mem::take(&mut self.flush);
                    self.waiting
                        .drain(ifindex, addr, |b, iif| flush.push((b, iif)));
                    for (b, iif) in flush.drain(..) {
                        let hop = Hop {
                            adj: None,
                            oif: ifindex,
                            nh: addr,
                            src: addr,
                            iif,
                        };
                        self.output(v, hop, b, 0, tx);
                    }
                    self.flush = flush;
                }
                NudAction::Failed { ifindex, addr } => {
                    let mut flush = std::mem::take(&mut self.flush);
                    self.waiting
                        .drain(ifindex, addr, |b, iif| flush.push((b, iif)));
                    for (b, iif) in flush.drain(..) {
                        let err = if addr.is_ipv4() {
                            IcmpError::V4(Icmp4Error::HostUnreachable)
                        } else {
                            IcmpError::V6(Icmp6Error::AddressUnreachable)
                        };
                        // The options such a packet had were read when it came in; the held
                        // copy does not keep them, so the error echoes none.
                        let none = Ipv4Options::default();
                        let why = Why {
                            err,
                            l2: L2Class::Host,
                            local_dst: false,
                            opts: &none,
                            dev: iif,
                        };
                        self.icmp_error(v, now, &why, Quote::Held(&b, 0), tx);
                        self.drop_packet(ifindex, DropReason::NeighFailed);
                        self.pool.free(b);
                    }
                    self.flush = flush;
                }
            }
        }
    }
}

fn v4(a: IpAddr) -> Option<Ipv4Addr> {
    match a {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(_) => None,
    }
}

fn v6(a: IpAddr) -> Option<Ipv6Addr> {
    match a {
        IpAddr::V6(a) => Some(a),
        IpAddr::V4(_) => None,
    }
}

/// The adjacency a packet of `family` the router sends to `nh` on `oif` takes: the neighbour
/// entry's, else the link's glean adjacency.
fn adjacency_of(fwd: &FwdTable, oif: u32, nh: IpAddr, family: Family) -> Option<AdjIdx> {
    fwd.neighbour(oif, nh, family).or_else(|| {
        let link = fwd.link(fwd.link_index(oif)?);
        Some(link.glean[usize::from(family == Family::Inet6)])
    })
}
