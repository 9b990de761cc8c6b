//! The pipeline of one worker: a vector of received frames in, frames out, in stages that
//! each run over the whole vector (VPP's graph nodes, grout's rte_graph): receive checks,
//! the input route decision, then delivery, forwarding or the drop, each with what the kernel
//! sends back.
//!
//! Who calls what: the worker owns its [`Dataplane`] and calls [`Dataplane::receive`] with a
//! vector of frames and a `&Fib` it reads and never changes; what the vector teaches (a
//! neighbour's address, a neighbour to resolve) leaves as [`Event`]s that the writer applies
//! between vectors with [`apply_events`], whose [`NudAction`]s (probes to send, neighbours
//! resolved or failed) come back through [`Dataplane::neigh_actions`]. Frames leave through
//! the caller's [`Tx`].
//!
//! Invariants: nothing allocates after [`Dataplane::new`] (buffers come from the pool, events
//! and the waiting packets have fixed room, and a full queue drops and counts); every frame
//! received is accounted for exactly once when its vector ends: forwarded (handed to its
//! neighbour: sent, or held until the neighbour resolves), delivered (answered or learnt
//! from), punted to the host, or dropped before any of these (`received = forwarded +
//! delivered + punted + dropped`, checked by the fuzz target). What happens to a packet after
//! it was forwarded (a full neighbour queue, a failed resolution) and to the packets the
//! router makes (ICMP errors, echo replies, ARP and NDP) is counted under drop reasons and
//! link counters, not again in that sum.
//!
//! Values the kernel draws from keyed hashes or random numbers, which no other router can
//! reproduce: the IPv4 ID of originated packets (a counter here; the differential check masks
//! it), the IPv6 flow label of originated packets (0 here, the kernel's with
//! `auto_flowlabels` 0), and the 0-2 credits each ICMP error takes from the global bucket
//! (always 1 here: the mean).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fibre_fib::{Family, Fib, ForwardRoute, InputDrop, InputKey, InputRoute, NudAction, RouteType};
use fibre_fwd::{AdjIdx, FwdTable, NeighState, REWRITE_LEN};
use fibre_packet::{Buf, Pool, PoolConfig};
use fibre_wire::checksum::PseudoHeader;
use fibre_wire::consts::{ethertype, icmpv6 as icmpv6_consts, ip_proto};
use fibre_wire::ethernet::{self, Address};
use fibre_wire::{icmpv6, ipv4, ipv6, udp};

use crate::drop::{Discard, DropCounters, DropReason, LinkStats};
use crate::forward::{self, Ipv4Options, V4Route, V6Route};
use crate::icmp::{self, Icmp4Error, Icmp6Error, IcmpError, V4Reply, V6Reply};
use crate::neigh::{self, Learned, OnLink};
use crate::ratelimit::{self, Global, RateLimiter};
use crate::rx::{self, L2Class, Meta, Rx};
use crate::waiting::{Full, Waiting, QUEUE_LEN};

/// The most frames one call takes (VPP's and grout's vector size).
pub const VECTOR: usize = 256;

/// Bytes of the scratch frame replies are built in: the largest ICMPv6 error (1280) behind
/// an Ethernet header, or an echo reply to a jumbo request.
const SCRATCH: usize = 9216 + ethernet::HEADER_LEN;

/// Events a vector can leave for the writer before further ones are dropped (and counted).
const EVENTS: usize = 2 * VECTOR;

/// The most fragments one IPv4 packet makes: 65,535 bytes in pieces of 8.
const MAX_FRAGMENTS: usize = 65_536 / 8;

/// The ICMP global bucket's credits an error takes (the kernel draws 0, 1 or 2).
const ICMP_CREDITS: u32 = 1;

/// The flow label of IPv6 packets the router originates: the kernel's with `auto_flowlabels`
/// 0. By default the kernel hashes the flow with a key drawn at boot, which no other router
/// can reproduce; 0 is its documented alternative.
const ORIGINATED_FLOW_LABEL: u32 = 0;

/// INADDR_DUMMY (RFC 7600): the source of an ICMP error when the router has no address.
const INADDR_DUMMY: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 8);

/// How the worker is sized.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub pool: PoolConfig,
    /// Neighbours that may have packets waiting at once, and packets waiting in all.
    pub waiting_neighbours: usize,
    pub waiting_packets: usize,
    pub ratelimit: ratelimit::Settings,
    /// Destinations the ICMP rate limiter remembers.
    pub ratelimit_peers: usize,
    /// Links the per-link counters have room for (ifindex below this).
    pub max_links: usize,
    /// Whether a host stack takes the router's own traffic (the real-I/O layer hands it
    /// over). Without one the router answers as a host where nothing listens: UDP gets port
    /// unreachable.
    pub host: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pool: PoolConfig {
                frames: 4096,
                frame_size: 2048,
                large_frames: 64,
                large_frame_size: 16384,
                headroom: fibre_packet::Headroom::default(),
            },
            waiting_neighbours: 1024,
            waiting_packets: 2048,
            ratelimit: ratelimit::Settings::default(),
            ratelimit_peers: 4096,
            max_links: 4096,
            host: false,
        }
    }
}

/// Where frames leave.
pub trait Tx {
    fn send(&mut self, oif: u32, frame: &[u8]);
}

/// What the writer should do after a vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An ARP or NDP message named a neighbour's address.
    Learned(Learned),
    /// A packet is leaving (or waiting) through the neighbour `addr` on `oif`: the kernel's
    /// `neigh_event_send` (resolution starts, a STALE entry goes to DELAY).
    Used { oif: u32, addr: IpAddr },
}

/// Packets by what became of them (the drops are in [`DropCounters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub received: u64,
    pub forwarded: u64,
    /// Fragments sent for forwarded packets (one forwarded packet, several fragments).
    pub fragments: u64,
    /// For the router: answered (echo, ARP, NDP) or learnt from.
    pub delivered: u64,
    /// For the router but not answered here: the host's (the real-I/O layer hands them to
    /// it; offline they end here).
    pub punted: u64,
    /// Received packets dropped before they were forwarded or delivered (drops after that,
    /// and of packets the router made, count only under their reason).
    pub dropped: u64,
    /// Held for a neighbour now (not cumulative).
    pub waiting: u64,
    /// Originated by the router: ICMP errors, echo replies, ARP and NDP.
    pub icmp_errors: u64,
    pub echo_replies: u64,
    pub neigh_sent: u64,
    /// ICMP errors the rate limits held back.
    pub icmp_ratelimited: u64,
    /// Events lost to a full queue.
    pub events_dropped: u64,
}

/// Where a packet leaves: its adjacency, the output link and the neighbour, and for a held
/// packet its source (a solicitation may ask from it) and the link it came in on (0: the
/// router made it).
#[derive(Debug, Clone, Copy)]
struct Hop {
    /// The adjacency when the route decision found it; else looked up from `oif` and `nh`.
    adj: Option<AdjIdx>,
    oif: u32,
    nh: IpAddr,
    src: IpAddr,
    iif: u32,
}

/// One received packet between stages.
struct Slot {
    iif: u32,
    buf: Buf,
    meta: Meta,
    route: Result<InputRoute, InputDrop>,
}

/// What a worker reads while it processes a vector: the routing state (for the route
/// decision and what the router answers for itself) and the forwarding objects compiled from
/// it (links and adjacencies). The two may be of different moments: `fibre_fwd` says how an
/// adjacency lookup copes.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub fib: &'a Fib,
    pub fwd: &'a FwdTable,
}

/// One worker's forwarding state: buffers, counters, limits and waiting packets.
pub struct Dataplane {
    pool: Pool,
    drops: DropCounters,
    links: Vec<LinkStats>,
    counters: Counters,
    rate: RateLimiter,
    waiting: Waiting,
    events: Vec<Event>,
    slots: Vec<Slot>,
    scratch: Box<[u8; SCRATCH]>,
    /// Fragments of one packet, and packets leaving a neighbour's queue, between stages.
    frags: Vec<Buf>,
    flush: Vec<(Buf, u32)>,
    next_ident: u16,
    host: bool,
    /// The pool's frames of both classes.
    frames: usize,
}

/// Why [`Dataplane::new`] refused a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    Pool(fibre_packet::ConfigError),
}

impl Dataplane {
    pub fn new(cfg: &Config) -> Result<Dataplane, ConfigError> {
        Ok(Dataplane {
            pool: Pool::new(cfg.pool).map_err(ConfigError::Pool)?,
            drops: DropCounters::default(),
            links: vec![LinkStats::default(); cfg.max_links],
            counters: Counters::default(),
            rate: RateLimiter::new(cfg.ratelimit, cfg.ratelimit_peers),
            waiting: Waiting::new(cfg.waiting_neighbours, cfg.waiting_packets),
            events: Vec::with_capacity(EVENTS),
            slots: Vec::with_capacity(VECTOR),
            scratch: Box::new([0; SCRATCH]),
            frags: Vec::with_capacity(MAX_FRAGMENTS),
            flush: Vec::with_capacity(QUEUE_LEN as usize),
            next_ident: 0,
            host: cfg.host,
            frames: (cfg.pool.frames + cfg.pool.large_frames) as usize,
        })
    }

    pub fn counters(&self) -> Counters {
        Counters {
            waiting: self.waiting.len() as u64,
            ..self.counters
        }
    }

    /// Pool frames (base and large) held now. Between calls only packets waiting for a
    /// neighbour hold one: `frames_held() == counters().waiting` (the fuzz target checks it).
    pub fn frames_held(&self) -> usize {
        self.frames - self.pool.available() - self.pool.available_large()
    }

    pub fn drops(&self) -> &DropCounters {
        &self.drops
    }

    /// The counters of link `ifindex` (zero for a link never seen).
    pub fn link_stats(&self, ifindex: u32) -> LinkStats {
        self.links
            .get(ifindex as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The events of the vectors since the last call, oldest first.
    pub fn take_events(&mut self) -> impl Iterator<Item = Event> + '_ {
        self.events.drain(..)
    }

    fn event(&mut self, e: Event) {
        if self.events.last() == Some(&e) {
            return;
        }
        if self.events.len() < EVENTS {
            self.events.push(e);
        } else {
            self.counters.events_dropped += 1;
        }
    }

    fn stats(&mut self, ifindex: u32) -> Option<&mut LinkStats> {
        self.links.get_mut(ifindex as usize)
    }

    /// Drops a received packet before it was forwarded or delivered: one of the four fates
    /// the accounting counts (see the module documentation).
    fn drop_received(&mut self, iif: u32, reason: DropReason) {
        self.counters.dropped += 1;
        self.drop_packet(iif, reason);
    }

    /// Counts a drop under its reason (a received packet's, or one the router made or
    /// already forwarded, which the accounting counted before).
    fn drop_packet(&mut self, iif: u32, reason: DropReason) {
        self.drops.count(reason);
        if let Some(s) = self.stats(iif) {
            s.dropped(reason);
        }
    }

    /// Processes a vector of frames received at `now` (nanoseconds), each with the link it
    /// came in on. Takes at most [`VECTOR`] frames; the caller splits longer runs.
    pub fn receive(&mut self, v: View<'_>, now: u64, frames: &[(u32, &[u8])], tx: &mut dyn Tx) {
        debug_assert!(frames.len() <= VECTOR);
        // Stage 1: receive checks; ARP is answered here, IP packets go into buffers.
        for &(iif, frame) in frames.iter().take(VECTOR) {
            self.counters.received += 1;
            self.rx_one(v, now, iif, frame, tx);
        }
        // Stage 2: the input route decision for the whole vector.
        let mut slots = std::mem::take(&mut self.slots);
        for s in slots.iter_mut() {
            let m = &s.meta;
            s.route = v.fib.route_input(&InputKey {
                dst: m.dst,
                src: m.src,
                iif: s.iif,
                tos: m.tos,
                mark: 0,
                proto: m.proto,
                sport: m.sport,
                dport: m.dport,
            });
        }
        // Stage 3: deliver, forward or drop.
        for s in slots.drain(..) {
            self.act(v, now, s, tx);
        }
        self.slots = slots;
    }

    fn rx_one(&mut self, v: View<'_>, now: u64, iif: u32, frame: &[u8], tx: &mut dyn Tx) {
        let multicast = frame.first().is_some_and(|b| b & 1 != 0);
        if let Some(s) = self.stats(iif) {
            s.received(frame.len(), multicast);
        }
        let link = v.fwd.link_index(iif).map(|i| v.fwd.link(i));
        let Some(mac) = link.filter(|l| l.up).map(|l| l.mac) else {
            self.drop_received(iif, DropReason::DevReady);
            return;
        };
        let got = match rx::receive(frame, Address(mac)) {
            Ok(r) => r,
            Err(d) => {
                if let Some(e) = d.icmp {
                    // Only IPv6's receive checks answer (a hop-by-hop option asking for a
                    // parameter problem): the packet is past its link-layer header and tags.
                    let (l3, l2) = ip_start(frame, mac);
                    let orig = frame.get(l3..).unwrap_or(&[]);
                    self.icmp_error_frame(v, now, e, orig, l2, iif, tx);
                }
                self.drop_received(iif, d.reason);
                return;
            }
        };
        match got {
            Rx::Arp { l2, l3 } => {
                let link = OnLink {
                    ifindex: iif,
                    mac,
                    l2,
                };
                let body = frame.get(usize::from(l3)..).unwrap_or(&[]);
                let o = neigh::arp_input(v.fib, link, body, &mut self.scratch[..]);
                self.neigh_outcome(iif, o, tx);
            }
            Rx::Ip(meta) => {
                let mut buf = match self.pool.alloc() {
                    Ok(b) => b,
                    Err(_) => {
                        self.drop_received(iif, DropReason::Nomem);
                        return;
                    }
                };
                let len = usize::from(meta.frame_len);
                match buf.append(&mut self.pool, len) {
                    Ok(b) => b.copy_from_slice(&frame[..len]),
                    Err(_) => {
                        self.pool.free(buf);
                        self.drop_received(iif, DropReason::Nomem);
                        return;
                    }
                }
                self.slots.push(Slot {
                    iif,
                    buf,
                    meta,
                    route: Err(InputDrop::NoRoute),
                });
            }
        }
    }

    fn neigh_outcome(&mut self, iif: u32, o: neigh::Outcome, tx: &mut dyn Tx) {
        if let Some(r) = o.drop {
            self.drop_received(iif, r);
            return;
        }
        self.counters.delivered += 1;
        if let Some(l) = o.learned {
            self.event(Event::Learned(l));
        }
        if o.reply_len > 0 {
            self.counters.neigh_sent += 1;
            transmit(&mut self.links, tx, iif, &self.scratch[..o.reply_len]);
        }
    }

    fn act(&mut self, v: View<'_>, now: u64, s: Slot, tx: &mut dyn Tx) {
        let Slot {
            iif,
            buf,
            meta,
            route,
        } = s;
        let l3 = usize::from(meta.l3);
        let local = matches!(route, Ok(InputRoute::Local { .. }));
        // ip_rcv_finish reads the options after the route decision, before the packet goes
        // anywhere (an error route included): what they say is echoed in any ICMP about it.
        let mut opts = Ipv4Options::default();
        if meta.options {
            let spec_dst = if local {
                meta.dst
            } else {
                v.fib
                    .route_output(meta.src, None, meta.tos)
                    .ok()
                    .and_then(|d| d.prefsrc)
                    .unwrap_or(meta.dst)
            };
            let IpAddr::V4(spec) = spec_dst else {
                unreachable!("IPv4 options come with IPv4 addresses")
            };
            let ip = &mut buf.data_mut(&mut self.pool)[l3..];
            let stamps = |a: Ipv4Addr| v.fib.addr_type4_on(0, a) != RouteType::Unicast;
            match forward::compile_options(ip, spec, ms_of_day(now), stamps) {
                Ok(o) => opts = o,
                Err(od) => {
                    return self.discard(
                        v,
                        now,
                        iif,
                        buf,
                        &meta,
                        od.discard,
                        local,
                        &od.options,
                        iif,
                        tx,
                    )
                }
            }
        }
        let route = match route {
            Ok(r) => r,
            Err(d) => {
                let (reason, err) = input_drop(d, meta.is_ipv4());
                if let Some(e) = err {
                    let allowed = match meta.src {
                        IpAddr::V4(src) if meta.is_ipv4() => self.rate.route_error_v4(src, now),
                        _ => true,
                    };
                    if allowed {
                        self.icmp_error(v, now, e, &buf, l3, meta.l2, false, &opts, iif, tx);
                    }
                }
                self.drop_received(iif, reason);
                self.pool.free(buf);
                return;
            }
        };
        match route {
            InputRoute::Forward(f) => self.forward(v, now, iif, buf, meta, f, &opts, tx),
            InputRoute::Local { .. } => self.local(v, now, iif, buf, meta, false, &opts, tx),
            InputRoute::Broadcast { .. } => self.local(v, now, iif, buf, meta, true, &opts, tx),
        }
    }

    /// A drop with the ICMP error the stage says the kernel sends about it.
    #[allow(clippy::too_many_arguments)]
    fn discard(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: Buf,
        meta: &Meta,
        d: Discard,
        local: bool,
        opts: &Ipv4Options,
        dev: u32,
        tx: &mut dyn Tx,
    ) {
        if let Some(e) = d.icmp {
            let l3 = usize::from(meta.l3);
            self.icmp_error(v, now, e, &buf, l3, meta.l2, local, opts, dev, tx);
        }
        self.drop_received(iif, d.reason);
        self.pool.free(buf);
    }

    #[allow(clippy::too_many_arguments)]
    fn forward(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: Buf,
        meta: Meta,
        f: ForwardRoute,
        opts: &Ipv4Options,
        tx: &mut dyn Tx,
    ) {
        let l3 = usize::from(meta.l3);
        let nh = f.gateway.unwrap_or(meta.dst);
        let hop = Hop {
            adj: v.fwd.adjacency(&f, meta.dst),
            oif: f.oif,
            nh,
            src: meta.src,
            iif,
        };
        if meta.is_ipv4() {
            let ip = &mut buf.data_mut(&mut self.pool)[l3..];
            let fwd = match forward::forward_v4(ip, meta.l2, &V4Route { mtu: f.mtu }) {
                Ok(x) => x,
                Err(d) => return self.discard(v, now, iif, buf, &meta, d, false, opts, iif, tx),
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
                        self.icmp_error(v, now, e, &buf, l3, meta.l2, false, opts, iif, tx);
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
                    self.output(v, now, hop, frag, 0, tx);
                }
                self.frags = frags;
                return;
            }
            self.counters.forwarded += 1;
            self.output(v, now, hop, buf, l3, tx);
        } else {
            if f.oif == iif {
                self.redirect6(v, now, iif, &buf, &meta, f.gateway, tx);
            }
            let ip = &mut buf.data_mut(&mut self.pool)[l3..];
            let route = V6Route {
                mtu: f.mtu,
                same_link: f.oif == iif,
            };
            match forward::forward_v6(ip, meta.l2, &route) {
                Ok(_) => {}
                Err(d) => return self.discard(v, now, iif, buf, &meta, d, false, opts, iif, tx),
            }
            self.counters.forwarded += 1;
            self.output(v, now, hop, buf, l3, tx);
        }
    }

    /// ip6_forward's redirect for a packet leaving by the link it came in on, made before the
    /// hop limit is decremented and the MTU checked (so it quotes the packet as received):
    /// the destination's rate limit, then ndisc_send_redirect's conditions and the source's.
    #[allow(clippy::too_many_arguments)]
    fn redirect6(
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
            self.originate(v, now, (iif, IpAddr::V6(src)), IpAddr::V6(lladdr), len, tx);
        }
    }

    /// Sends the IP packet at `l3` in `buf` to the neighbour `nh` on `oif` (ip_finish_output2
    /// and neigh_output): with the link-layer header when the neighbour's address is known,
    /// else held until it is (the writer starts resolution on the [`Event::Used`]).
    #[allow(clippy::too_many_arguments)]
    fn output(
        &mut self,
        v: View<'_>,
        now: u64,
        hop: Hop,
        mut buf: Buf,
        l3: usize,
        tx: &mut dyn Tx,
    ) {
        let _ = now;
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
        let Some(a) = adj.map(|a| *v.fwd.adj(a)).filter(|a| v.fwd.link(a.link).up) else {
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
    fn originate(
        &mut self,
        v: View<'_>,
        now: u64,
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
        self.output(v, now, hop, buf, 0, tx);
    }

    /// icmp_send / icmp6_send about the IP packet at `l3` in `buf` (see [`icmp_error`]).
    #[allow(clippy::too_many_arguments)]
    fn icmp_error(
        &mut self,
        v: View<'_>,
        now: u64,
        err: IcmpError,
        buf: &Buf,
        l3: usize,
        l2: L2Class,
        local_dst: bool,
        opts: &Ipv4Options,
        dev: u32,
        tx: &mut dyn Tx,
    ) {
        let orig = buf.data(&self.pool).get(l3..).unwrap_or(&[]);
        let mut o = Originating {
            rate: &mut self.rate,
            counters: &mut self.counters,
            next_ident: &mut self.next_ident,
        };
        let out = &mut self.scratch[ethernet::HEADER_LEN..];
        let why = Why {
            err,
            l2,
            local_dst,
            opts,
            dev,
        };
        if let Some((len, route, from)) = icmp_error(v.fib, now, &why, orig, &mut o, out) {
            self.originate(v, now, route, from, len, tx);
        }
    }

    /// The same about a packet still in the received frame (receive checks' errors).
    #[allow(clippy::too_many_arguments)]
    fn icmp_error_frame(
        &mut self,
        v: View<'_>,
        now: u64,
        err: IcmpError,
        orig: &[u8],
        l2: L2Class,
        dev: u32,
        tx: &mut dyn Tx,
    ) {
        let mut o = Originating {
            rate: &mut self.rate,
            counters: &mut self.counters,
            next_ident: &mut self.next_ident,
        };
        let out = &mut self.scratch[ethernet::HEADER_LEN..];
        let why = Why {
            err,
            l2,
            local_dst: false,
            opts: &Ipv4Options::default(),
            dev,
        };
        if let Some((len, route, from)) = icmp_error(v.fib, now, &why, orig, &mut o, out) {
            self.originate(v, now, route, from, len, tx);
        }
    }

    /// Packets for the router itself: echo requests answered, ARP's IPv6 counterpart (NDP)
    /// handled, the rest punted to the host.
    #[allow(clippy::too_many_arguments)]
    fn local(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: Buf,
        meta: Meta,
        broadcast: bool,
        opts: &Ipv4Options,
        tx: &mut dyn Tx,
    ) {
        let l3 = usize::from(meta.l3);
        let l4 = usize::from(meta.l4) - l3;
        if meta.fragment {
            self.drop_received(iif, DropReason::FragNotReassembled);
            self.pool.free(buf);
            return;
        }
        if !meta.is_ipv4() {
            let ip = buf.data(&self.pool).get(l3..).unwrap_or(&[]);
            if let Err(d) = rx::local_headers6(ip) {
                return self.discard(v, now, iif, buf, &meta, d, true, opts, iif, tx);
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
            (_, _, ip_proto::UDP) if !self.host && !broadcast && !meta.dst.is_multicast() => {
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
                self.icmp_error(v, now, err, &buf, l3, meta.l2, true, opts, iif, tx);
                self.pool.free(buf);
                return;
            }
            _ => Ok((0, meta.src, meta.dst)),
        };
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
                self.originate(v, now, (back.oif, nh), from, len, tx);
            }
            Err(icmp::EchoError::Drop(r)) => self.drop_received(iif, r),
        }
    }

    /// Carries out what the writer's neighbour states ask: solicitations to send, held
    /// packets to send now that their neighbour resolved, or to answer with "unreachable"
    /// when it failed.
    pub fn neigh_actions(&mut self, v: View<'_>, now: u64, actions: &[NudAction], tx: &mut dyn Tx) {
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
                        self.output(v, now, hop, b, 0, tx);
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
                        self.icmp_error(v, now, err, &b, 0, L2Class::Host, false, &none, iif, tx);
                        self.drop_packet(ifindex, DropReason::NeighFailed);
                        self.pool.free(b);
                    }
                    self.flush = flush;
                }
            }
        }
    }
}

/// The writer's side of a vector's events: applies them to the routing state and collects
/// what the data plane must do in return ([`Dataplane::neigh_actions`]).
pub fn apply_events(
    fib: &mut Fib,
    events: impl Iterator<Item = Event>,
    now: u64,
    actions: &mut Vec<NudAction>,
) {
    for e in events {
        match e {
            Event::Learned(l) => fib.neigh_learn(&l.heard(), now, actions),
            Event::Used { oif, addr } => {
                fib.neigh_event_send(oif, addr, now, actions);
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

/// Sends `frame` on `oif`, counting it on the link.
fn transmit(links: &mut [LinkStats], tx: &mut dyn Tx, oif: u32, frame: &[u8]) {
    if let Some(s) = links.get_mut(oif as usize) {
        s.sent(frame.len());
    }
    tx.send(oif, frame);
}

/// The drop reason and ICMP error of an input route decision's refusal.
fn input_drop(d: InputDrop, v4: bool) -> (DropReason, Option<IcmpError>) {
    let err = |e4, e6| {
        Some(if v4 {
            IcmpError::V4(e4)
        } else {
            IcmpError::V6(e6)
        })
    };
    match d {
        InputDrop::MartianSource => (DropReason::IpInvalidSource, None),
        InputDrop::LocalSource => (DropReason::IpLocalSource, None),
        InputDrop::ReversePath => (DropReason::IpRpfilter, None),
        InputDrop::MartianDestination => (DropReason::IpInvalidDest, None),
        InputDrop::Multicast => (DropReason::NotSpecified, None),
        InputDrop::NoRoute => (
            DropReason::IpInnoroutes,
            err(Icmp4Error::NetUnreachable, Icmp6Error::NoRoute),
        ),
        InputDrop::Unreachable => (
            DropReason::RejectRoute,
            err(Icmp4Error::HostUnreachable, Icmp6Error::NoRoute),
        ),
        InputDrop::Prohibit => (
            DropReason::RejectRoute,
            err(Icmp4Error::AdminProhibited, Icmp6Error::AdminProhibited),
        ),
        InputDrop::Blackhole => (DropReason::Blackhole, None),
        InputDrop::ForwardingOff => (DropReason::IpInaddrerrors, None),
    }
}

/// An ICMP error to send, and what the kernel knows of the packet it is about: how its
/// frame came in, whether it was for the router, and its IPv4 options (echoed in the error).
#[derive(Clone, Copy)]
struct Why<'a> {
    err: IcmpError,
    l2: L2Class,
    local_dst: bool,
    opts: &'a Ipv4Options,
    /// The link the packet came in on (0 for one the router made): IPv6 answers from the
    /// address this link would use towards the sender.
    dev: u32,
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

/// Where the IP header of a received frame starts (after the Ethernet header and any VLAN
/// tags) and the frame's class by its destination MAC, for a frame the receive checks read.
fn ip_start(frame: &[u8], mac: [u8; 6]) -> (usize, L2Class) {
    let mut l3 = ethernet::HEADER_LEN;
    let mut ty = ethernet::Frame::new_unchecked(frame).ethertype();
    while matches!(ty, ethertype::VLAN | ethertype::QINQ) {
        ty = frame
            .get(l3 + 2..l3 + 4)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
        l3 += 4;
    }
    let dst = ethernet::Frame::new_unchecked(frame).dst_addr();
    let l2 = if dst.0 == mac {
        L2Class::Host
    } else if dst.is_broadcast() {
        L2Class::Broadcast
    } else {
        L2Class::Multicast
    };
    (l3, l2)
}

/// Milliseconds since midnight UTC at `now` (nanoseconds since the epoch): the IPv4
/// timestamp option's clock (`inet_current_timestamp`).
fn ms_of_day(now: u64) -> u32 {
    ((now / 1_000_000) % 86_400_000) as u32
}

/// The adjacency a packet of `family` the router sends to `nh` on `oif` takes: the neighbour
/// entry's, else the link's glean adjacency.
fn adjacency_of(fwd: &FwdTable, oif: u32, nh: IpAddr, family: Family) -> Option<AdjIdx> {
    fwd.neighbour(oif, nh, family).or_else(|| {
        let link = fwd.link(fwd.link_index(oif)?);
        Some(link.glean[usize::from(family == Family::Inet6)])
    })
}
