//! The pipeline of one worker: a vector of received frames in, frames out, in stages that
//! each run over the whole vector (VPP's graph nodes, grout's rte_graph): receive checks,
//! the input route decision, then delivery, forwarding or the drop, each with what the kernel
//! sends back.
//!
//! Files by stage: this one receives (the checks, ARP, the route decision for the vector,
//! the dispatch); `transit` forwards, `srv6` applies SRv6 encapsulations and endpoint
//! behaviours and routes the result again, `ioam6` fills and inserts IOAM traces, `local`
//! delivers to the router, `output` sends through adjacencies and holds packets for
//! neighbours, `errors` builds the ICMP errors.
//!
//! Who calls what: the worker owns its [`Dataplane`] and calls [`Dataplane::receive`] with a
//! vector of frames and a [`View`] of the routing state and the forwarding objects, which it
//! reads and never changes; what the vector teaches (a
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
//! delivered + punted + dropped + reasm_queued`, checked by the fuzz target; a fragment taken
//! into reassembly is `reasm_queued`, and the one that makes its packet whole counts as the
//! packet's fate). What happens to a packet after
//! it was forwarded (a full neighbour queue, a failed resolution) and to the packets the
//! router makes (ICMP errors, echo replies, ARP and NDP) is counted under drop reasons and
//! link counters, not again in that sum.
//!
//! Values the kernel draws from keyed hashes or random numbers, which no other router can
//! reproduce: the IPv4 ID of originated packets (a counter here; the differential check masks
//! it), the IPv6 flow label of originated packets (0 here, the kernel's with
//! `auto_flowlabels` 0), and the 0-2 credits each ICMP error takes from the global bucket
//! (always 1 here: the mean).

use core::net::{IpAddr, Ipv4Addr};

use fibre_fib::{Fib, IcmpLimits, InputDrop, InputKey, InputRoute, NudAction, RouteType};
use fibre_fwd::{AdjIdx, FwdTable};
use fibre_packet::{Buf, Pool, PoolConfig};
use fibre_wire::consts::arp as arp_consts;
use fibre_wire::ethernet::{self, Address};
use fibre_wire::{arp, vlan};

use crate::drop::{Discard, DropCounters, DropReason, LinkStats};
use crate::forward::{self, Ipv4Options};
use crate::icmp::{Icmp4Error, Icmp6Error, IcmpError};
use crate::input_cache::{self, CacheConfig, CacheCounters, InputCache};
use crate::neigh::{self, Learned, OnLink};
use crate::ratelimit::{self, RateLimiter};
use crate::reasm::Reassembly;
use crate::rx::{self, L2Class, Meta, Rx};
use crate::waiting::{Waiting, QUEUE_LEN};

mod errors;
use errors::{Quote, Why};
mod ioam6;
mod local;
mod output;
pub mod srv6;
mod transit;

/// Bytes of a large pool frame: the headroom, a link-layer header and the largest IPv4
/// packet, which reassembly and the copies of packets outgrowing their frame need.
const LARGE_FRAME: u32 = 66 * 1024;

/// The most frames one call takes (VPP's and grout's vector size).
pub const VECTOR: usize = 256;
/// Packets per call of the input route decision (`InputCache::decide`, then
/// `Fib::route_input_batch_memo` for what the cache did not answer): the batch's own chunk
/// size, so each call makes its lookups for all of them together; keys and answers stay on
/// the stack.
const ROUTE_BATCH: usize = input_cache::CHUNK;

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
    /// The rate limiter's settings at the start (the tick rate among them); its ICMP limits
    /// then follow the routing state's (`sysctl -w net.ipv4.icmp_ratelimit=...`) once those
    /// differ from the kernel's defaults.
    pub ratelimit: ratelimit::Settings,
    /// Destinations the ICMP rate limiter remembers.
    pub ratelimit_peers: usize,
    /// Links the per-link counters have room for (ifindex below this).
    pub max_links: usize,
    /// Whether a host stack takes the router's own traffic (the real-I/O layer hands it
    /// over). Without one the router answers as a host where nothing listens: UDP gets port
    /// unreachable.
    pub host: bool,
    /// The input route cache and hints (`input_cache`): on by default, as
    /// crates/fibre-bench/RESULTS.md measures them.
    pub input_cache: CacheConfig,
    /// Encapsulation objects the per-object counters have room for (`EncapIdx` below this;
    /// objects beyond it work, uncounted).
    pub max_encaps: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pool: PoolConfig {
                frames: 4096,
                frame_size: 2048,
                large_frames: 64,
                large_frame_size: LARGE_FRAME,
                headroom: fibre_packet::Headroom::default(),
            },
            waiting_neighbours: 1024,
            waiting_packets: 2048,
            ratelimit: ratelimit::Settings::default(),
            ratelimit_peers: 4096,
            max_links: 4096,
            host: false,
            input_cache: CacheConfig::default(),
            max_encaps: 4096,
        }
    }
}

impl Config {
    /// This configuration with the pool's headroom covering the largest encapsulation a route
    /// of `fib` applies and the link-layer header (`fibre_fwd::encap::largest_added`), so that
    /// no packet is copied for its encapsulation. A route added later with a larger one copies
    /// its packets once each, counted (`Counters::encap_reallocs`).
    pub fn with_encap_headroom(mut self, fib: &Fib) -> Config {
        let reserved = fibre_packet::Headroom::new(
            fibre_fwd::encap::largest_added(fib),
            fibre_fwd::encap::L2_RESERVE,
        );
        self.pool.headroom = self.pool.headroom.max(reserved);
        self
    }
}

/// Where frames leave.
pub trait Tx {
    fn send(&mut self, oif: u32, frame: &[u8]);

    /// Whether a host stack stands behind link `iif` (a punt path): the router's own traffic
    /// that came in on it and that the data plane does not answer is the host's, and the
    /// host learns its neighbours from the answers to its own solicitations.
    fn host_behind(&self, _iif: u32) -> bool {
        false
    }

    /// Hands the host stack behind link `iif` a received frame (the link's own: its
    /// destination MAC is the link's, or a group's), as it came in.
    fn punt(&mut self, _iif: u32, _frame: &[u8]) {}
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
    /// IPv4 fragments for the router taken into reassembly (the one that makes a packet
    /// whole is counted by the packet's own fate instead).
    pub reasm_queued: u64,
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
    /// How the input route decisions were answered.
    pub input_cache: CacheCounters,
    /// Packets an SRv6 encapsulation copied for want of headroom (the sum of every object's
    /// [`srv6::EncapStats::reallocs`]).
    pub encap_reallocs: u64,
}

impl Counters {
    /// Adds another worker's counts (the packets waiting now included).
    pub fn add(&mut self, o: &Counters) {
        self.received += o.received;
        self.forwarded += o.forwarded;
        self.fragments += o.fragments;
        self.delivered += o.delivered;
        self.punted += o.punted;
        self.reasm_queued += o.reasm_queued;
        self.dropped += o.dropped;
        self.waiting += o.waiting;
        self.icmp_errors += o.icmp_errors;
        self.echo_replies += o.echo_replies;
        self.neigh_sent += o.neigh_sent;
        self.icmp_ratelimited += o.icmp_ratelimited;
        self.events_dropped += o.events_dropped;
        self.input_cache.add(&o.input_cache);
        self.encap_reallocs += o.encap_reallocs;
    }
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
    /// SRv6 stages the packet went through (`srv6::MAX_PASSES`).
    passes: u8,
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
    reasm: Reassembly,
    events: Vec<Event>,
    slots: Vec<Slot>,
    scratch: Box<[u8; SCRATCH]>,
    /// Fragments of one packet, and packets leaving a neighbour's queue, between stages.
    frags: Vec<Buf>,
    flush: Vec<(Buf, u32)>,
    next_ident: u16,
    host: bool,
    /// The FIB's ICMP limits the rate limiter was last given.
    icmp_limits: IcmpLimits,
    /// The pool's frames of both classes.
    frames: usize,
    cache: InputCache,
    /// Per encapsulation object, by `EncapIdx`.
    encap_stats: Vec<srv6::EncapStats>,
    /// The last decision an SRv6 stage's packet was routed again by.
    again: Option<srv6::Again>,
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
            reasm: Reassembly::default(),
            events: Vec::with_capacity(EVENTS),
            slots: Vec::with_capacity(VECTOR),
            scratch: Box::new([0; SCRATCH]),
            frags: Vec::with_capacity(MAX_FRAGMENTS),
            flush: Vec::with_capacity(QUEUE_LEN as usize),
            next_ident: 0,
            host: cfg.host,
            icmp_limits: IcmpLimits::default(),
            frames: (cfg.pool.frames + cfg.pool.large_frames) as usize,
            cache: InputCache::new(cfg.input_cache),
            encap_stats: vec![srv6::EncapStats::default(); cfg.max_encaps],
            again: None,
        })
    }

    pub fn counters(&self) -> Counters {
        Counters {
            waiting: self.waiting.len() as u64,
            input_cache: self.cache.counters(),
            ..self.counters
        }
    }

    /// Pool frames (base and large) held now. Between calls only packets waiting for a
    /// neighbour and packets in reassembly hold one: `frames_held() == counters().waiting +
    /// reassembling()` (the fuzz target checks it).
    pub fn frames_held(&self) -> usize {
        self.frames - self.pool.available() - self.pool.available_large()
    }

    /// Packets in IPv4 reassembly now.
    pub fn reassembling(&self) -> usize {
        self.reasm.len()
    }

    /// When the data plane's own next timer fires (a reassembly expiring), if one runs; the
    /// caller runs [`Dataplane::run_timers`] then, as it runs the FIB's neighbour timers.
    pub fn next_timer(&self) -> Option<u64> {
        self.reasm.next_expiry()
    }

    /// Takes the ICMP limits of the routing state's settings (`sysctl
    /// net.ipv4.icmp_ratelimit` and the others) when they changed: one compare per call.
    pub(super) fn follow_settings(&mut self, fib: &Fib) {
        let l = fib.settings().icmp;
        if l == self.icmp_limits {
            return;
        }
        self.icmp_limits = l;
        let s = &mut self.rate.settings;
        s.icmp_ratelimit_ms = l.ratelimit_ms;
        s.icmp_ratemask = l.ratemask;
        s.icmp_msgs_per_sec = l.msgs_per_sec;
        s.icmp_msgs_burst = l.msgs_burst;
        s.icmpv6_ratelimit_ms = l.ratelimit6_ms;
    }

    /// Runs the data plane's timers due at `now`.
    pub fn run_timers(&mut self, v: View<'_>, now: u64, tx: &mut dyn Tx) {
        self.follow_settings(v.fib);
        self.expire_reassembly(v, now, tx);
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
            crate::drop::count_drop(s, reason);
        }
    }

    /// Processes a vector of frames received at `now` (nanoseconds), each with the link it
    /// came in on. Takes at most [`VECTOR`] frames; the caller splits longer runs.
    pub fn receive(&mut self, v: View<'_>, now: u64, frames: &[(u32, &[u8])], tx: &mut dyn Tx) {
        self.follow_settings(v.fib);
        debug_assert!(frames.len() <= VECTOR);
        // Stage 1: receive checks; ARP is answered here, IP packets go into buffers.
        for &(iif, frame) in frames.iter().take(VECTOR) {
            self.counters.received += 1;
            self.rx_one(v, now, iif, frame, tx);
        }
        // Stage 2: the input route decision for the whole vector, `ROUTE_BATCH` packets at a
        // time: from the cache and the hints, the rest in one batch call.
        let mut slots = std::mem::take(&mut self.slots);
        for chunk in slots.chunks_mut(ROUTE_BATCH) {
            let keys: [InputKey; ROUTE_BATCH] = std::array::from_fn(|i| {
                let s = &chunk[i.min(chunk.len() - 1)];
                let m = &s.meta;
                InputKey {
                    dst: m.dst,
                    src: m.src,
                    iif: s.iif,
                    tos: m.tos,
                    mark: 0,
                    proto: m.proto,
                    sport: m.sport,
                    dport: m.dport,
                    flowlabel: m.flow_label,
                }
            });
            let mut routes = [Err(InputDrop::NoRoute); ROUTE_BATCH];
            let n = chunk.len();
            self.cache.decide(v.fib, &keys[..n], &mut routes[..n]);
            for (s, r) in chunk.iter_mut().zip(routes) {
                s.route = r;
            }
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
                    let why = Why {
                        err: e,
                        l2,
                        local_dst: false,
                        opts: &Ipv4Options::default(),
                        dev: iif,
                    };
                    self.icmp_error(v, now, &why, Quote::Frame(orig), tx);
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
                // The host resolves its own neighbours (its ARP requests leave by the port
                // unchanged) and learns from the replies: each reply goes to it too. Requests
                // stay the data plane's, which answers for the router's addresses once.
                let reply = o.drop.is_none()
                    && arp::Packet::new_checked(body)
                        .is_ok_and(|a| a.operation() == arp_consts::OP_REPLY);
                if reply && tx.host_behind(iif) {
                    tx.punt(iif, frame);
                }
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
                    passes: 0,
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
        // By reference: a slot is a few lines, and copying its metadata and decision into
        // locals cost a tenth of a forwarded packet's instructions.
        let Slot {
            iif,
            buf,
            ref meta,
            ref route,
            passes,
        } = s;
        let l3 = usize::from(meta.l3);
        let local = matches!(route, Ok(InputRoute::Local { .. }));
        // The hop-by-hop header is parsed before anything else happens to the packet; an IOAM
        // trace in it is filled in on the way (the packet as received only, not what an SRv6
        // stage made of it).
        if meta.ioam != 0 && passes == 0 {
            if let Err(reason) = self.ioam6_transit(v, now, iif, &buf, meta, route) {
                self.drop_received(iif, reason);
                self.pool.free(buf);
                return;
            }
        }
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
                        meta,
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
                let (reason, err) = input_drop(*d, meta.is_ipv4());
                if let Some(e) = err {
                    let allowed = match meta.src {
                        IpAddr::V4(src) if meta.is_ipv4() => self.rate.route_error_v4(src, now),
                        _ => true,
                    };
                    if allowed {
                        let why = Why {
                            err: e,
                            l2: meta.l2,
                            local_dst: false,
                            opts: &opts,
                            dev: iif,
                        };
                        self.icmp_error(v, now, &why, Quote::Held(&buf, l3), tx);
                    }
                }
                self.drop_received(iif, reason);
                self.pool.free(buf);
                return;
            }
        };
        match route {
            InputRoute::Forward(f) => self.forward(v, now, iif, buf, meta, f, &opts, passes, tx),
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
            let why = Why {
                err: e,
                l2: meta.l2,
                local_dst: local,
                opts,
                dev,
            };
            self.icmp_error(v, now, &why, Quote::Held(&buf, l3), tx);
        }
        self.drop_received(iif, d.reason);
        self.pool.free(buf);
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

/// Where the IP header of a received frame starts (after the Ethernet header and any VLAN
/// tags) and the frame's class by its destination MAC, for a frame the receive checks read.
fn ip_start(frame: &[u8], mac: [u8; 6]) -> (usize, L2Class) {
    let eth = ethernet::Frame::new_unchecked(frame);
    let tags = vlan::Tags::parse(eth.ethertype(), eth.payload()).map_or(0, |(_, _, len)| len);
    // Only a frame of one of the three classes gets that far.
    let l2 = rx::class_of(eth.dst_addr(), Address(mac)).unwrap_or(L2Class::Multicast);
    (ethernet::HEADER_LEN + tags, l2)
}

/// Milliseconds since midnight UTC at `now` (nanoseconds since the epoch): the IPv4
/// timestamp option's clock (`inet_current_timestamp`).
fn ms_of_day(now: u64) -> u32 {
    ((now / 1_000_000) % 86_400_000) as u32
}
