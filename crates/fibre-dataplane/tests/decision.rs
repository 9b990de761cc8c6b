//! The pipeline's decision for a packet is the routing core's input decision for it: over
//! random configurations (links, addresses, routes of every type, permanent neighbours) and
//! random UDP packets, each packet received alone must end where `Fib::route_input` says —
//! forwarded out of its output link with the TTL one lower, delivered to the router, or
//! dropped under the reason that decision maps to — and the accounting must add up.

use std::net::{IpAddr, Ipv4Addr};

use fibre_dataplane::drop::DropReason;
use fibre_dataplane::pipeline::{apply_events, Config, Dataplane, Tx, View};
use fibre_fib::build::*;
use fibre_fib::types::{iff, nud, Link, RouteType};
use fibre_fib::*;
use fibre_fwd::FwdWriter;
use fibre_wire::checksum::PseudoHeader;
use fibre_wire::{ethernet, ipv4, udp};
use proptest::prelude::*;

const LINKS: usize = 4;

fn mac(link: usize) -> [u8; 6] {
    [2, 0, 0, 0, 0, 0x10 + link as u8]
}

/// The host on each link that every gateway and test source is: 10.L.0.2.
fn host(link: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, link as u8, 0, 2)
}

fn host_mac(link: usize) -> [u8; 6] {
    [2, 0, 0, 0, 1, link as u8]
}

#[derive(Debug, Clone)]
struct RouteSpec {
    dst: Ipv4Addr,
    len: u8,
    via: usize,
    kind: u8,
}

fn route_spec() -> impl Strategy<Value = RouteSpec> {
    (any::<u32>(), 8u8..=30, 0..LINKS, 0u8..8).prop_map(|(a, len, via, kind)| RouteSpec {
        dst: Ipv4Addr::from(a & !(u32::MAX >> len)),
        len,
        via,
        kind,
    })
}

/// Links a0.. (ARP on, up), 10.L.0.1/24 on each, a permanent neighbour 10.L.0.2 on each,
/// and the routes: mostly through a link's host, some unreachable, prohibit or blackhole.
fn build(routes: &[RouteSpec]) -> (Fib, Vec<u32>) {
    let mut fib = Fib::default();
    let lo = fib.link_index("lo");
    if lo.is_none() {
        fib.link_new(
            &Link {
                ifindex: 1,
                flags: iff::UP,
                change: iff::UP,
                ..Link::default()
            },
            ReqFlags::NONE,
        )
        .expect("lo");
    }
    let mut idx = Vec::new();
    for l in 0..LINKS {
        let i = link(&mut fib, &format!("a{l}"), mac(l));
        set_link(
            &mut fib,
            i,
            Link {
                flags: iff::UP,
                change: iff::NOARP,
                ..Link::default()
            },
        );
        addr(&mut fib, i, &format!("10.{l}.0.1"), 24);
        neigh(
            &mut fib,
            i,
            &host(l).to_string(),
            Some(host_mac(l)),
            nud::PERMANENT,
        );
        idx.push(i);
    }
    for r in routes {
        let mut req = route(&r.dst.to_string(), r.len, &[&host(r.via).to_string()]);
        match r.kind {
            0 => {
                req.rtype = RouteType::Unreachable;
                req.nexthop.gateway = None;
            }
            1 => {
                req.rtype = RouteType::Prohibit;
                req.nexthop.gateway = None;
            }
            2 => {
                req.rtype = RouteType::Blackhole;
                req.nexthop.gateway = None;
            }
            _ => {}
        }
        // Overlaps with the links' own prefixes and repeats are refused like `ip route add`
        // refuses them; the configuration is whatever was accepted.
        let _ = fib.route_new(&req, ReqFlags::ADD);
    }
    (fib, idx)
}

/// A UDP datagram in an Ethernet frame to the link's MAC, TTL 64, checksums right.
fn frame(link: usize, src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    frame_ttl(link, src, dst, 64)
}

fn frame_ttl(link: usize, src: Ipv4Addr, dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    let payload = b"fibre decision";
    let udp_len = udp::HEADER_LEN + payload.len();
    let ip = ipv4::Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: 17,
        payload_len: udp_len,
        ttl,
        tos: 0,
        ident: 7,
        reserved_flag: false,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        options: fibre_wire::OptionBytes::EMPTY,
    };
    let mut f = vec![0u8; ethernet::HEADER_LEN + ip.buffer_len() + udp_len];
    let mut eth = ethernet::Frame::new_unchecked(&mut f[..]);
    eth.set_dst_addr(ethernet::Address(mac(link)));
    eth.set_src_addr(ethernet::Address(host_mac(link)));
    eth.set_ethertype(0x0800);
    let mut p = ipv4::Packet::new_unchecked(eth.payload_mut());
    ip.emit(&mut p);
    let mut u = udp::Packet::new_unchecked(p.payload_mut());
    udp::Repr {
        src_port: 4000,
        dst_port: 5000,
        payload_len: payload.len(),
    }
    .emit(&mut u);
    u.payload_mut().copy_from_slice(payload);
    u.fill_checksum(&PseudoHeader::V4 { src, dst });
    f
}

#[derive(Default)]
struct Sent(Vec<(u32, Vec<u8>)>);

impl Tx for Sent {
    fn send(&mut self, oif: u32, frame: &[u8]) {
        self.0.push((oif, frame.to_vec()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn each_packet_goes_where_route_input_says(
        routes in proptest::collection::vec(route_spec(), 1..40),
        packets in proptest::collection::vec((0..LINKS, any::<u32>(), any::<u32>(), any::<bool>()), 1..60),
    ) {
        let (mut fib, idx) = build(&routes);
        let (mut fwd, _) = FwdWriter::new(&fib);
        let mut dp = Dataplane::new(&Config::default()).expect("dataplane");
        let mut now = 1_000_000_000u64;
        for (link, a, b, to_route) in packets {
            // Half the packets go to a configured route's prefix, the rest anywhere.
            let dst = if to_route {
                let r = &routes[a as usize % routes.len()];
                Ipv4Addr::from(u32::from(r.dst) | (b & (u32::MAX >> r.len)))
            } else {
                Ipv4Addr::from(a)
            };
            let src = if b % 3 == 0 { host(link) } else { Ipv4Addr::from(b) };
            let iif = idx[link];
            let key = InputKey {
                dst: IpAddr::V4(dst),
                src: IpAddr::V4(src),
                iif,
                tos: 0,
                mark: 0,
                proto: 17,
                sport: 4000,
                dport: 5000,
                flowlabel: 0,
            };
            let want = fib.route_input(&key);
            let before = dp.counters();
            let drops_before = *dp.drops();
            let mut sent = Sent::default();
            let f = frame(link, src, dst);
            {
                let table = fwd.latest();
                let v = View { fib: &fib, fwd: table };
                dp.receive(v, now, &[(iif, &f)], &mut sent);
            }
            let mut actions = Vec::new();
            apply_events(&mut fib, dp.take_events(), now, &mut actions);
            fwd.update(&fib);
            let after = dp.counters();
            let step = |a: u64, b: u64| a - b;
            prop_assert_eq!(step(after.received, before.received), 1);
            prop_assert_eq!(
                step(after.forwarded, before.forwarded)
                    + step(after.delivered, before.delivered)
                    + step(after.punted, before.punted)
                    + step(after.dropped, before.dropped),
                1,
                "one fate per packet"
            );
            match want {
                Ok(InputRoute::Forward(r)) => {
                    prop_assert_eq!(step(after.forwarded, before.forwarded), 1);
                    // The packet leaves by the route's link unless its neighbour is being
                    // resolved (an on-link destination without an entry: it waits).
                    let out: Vec<_> = sent.0.iter().filter(|(o, _)| *o == r.oif).collect();
                    let held = after.waiting > before.waiting;
                    prop_assert!(held || out.iter().any(|(_, fr)| fr.len() == f.len() && fr[22] == 63),
                        "{:?}: not sent on {} with TTL 63: {:?}", key, r.oif, sent.0.iter().map(|(o, fr)| (*o, fr.len())).collect::<Vec<_>>());
                }
                Ok(InputRoute::Local { .. }) => {
                    prop_assert_eq!(step(after.delivered, before.delivered) + step(after.punted, before.punted), 1);
                }
                Ok(InputRoute::Broadcast { .. }) => {
                    prop_assert_eq!(step(after.punted, before.punted), 1);
                }
                Err(d) => {
                    prop_assert_eq!(step(after.dropped, before.dropped), 1);
                    let reason = match d {
                        InputDrop::MartianSource => DropReason::IpInvalidSource,
                        InputDrop::LocalSource => DropReason::IpLocalSource,
                        InputDrop::ReversePath => DropReason::IpRpfilter,
                        InputDrop::MartianDestination => DropReason::IpInvalidDest,
                        InputDrop::Multicast => DropReason::NotSpecified,
                        InputDrop::NoRoute => DropReason::IpInnoroutes,
                        InputDrop::Unreachable | InputDrop::Prohibit => DropReason::RejectRoute,
                        InputDrop::Blackhole => DropReason::Blackhole,
                        InputDrop::ForwardingOff => DropReason::IpInaddrerrors,
                    };
                    prop_assert_eq!(dp.drops().get(reason), drops_before.get(reason) + 1);
                }
            }
            now += 10_000_000;
        }
    }
}

/// Time-exceeded errors for a burst of TTL-1 packets from one sender, 1 ms apart: how many
/// the rate limits let out.
fn time_exceeded_answered(settings: Option<(ConfKey, i64)>) -> u64 {
    let routes = [RouteSpec {
        dst: Ipv4Addr::new(203, 0, 113, 0),
        len: 24,
        via: 1,
        kind: 7,
    }];
    let (mut fib, idx) = build(&routes);
    if let Some((k, v)) = settings {
        fib.set_conf(ConfTarget::All, k, v).expect("sysctl");
    }
    let (fwd, _) = FwdWriter::new(&fib);
    let mut dp = Dataplane::new(&Config::default()).expect("dataplane");
    let f = frame_ttl(0, host(0), Ipv4Addr::new(203, 0, 113, 9), 1);
    for i in 0..10u64 {
        let v = View {
            fib: &fib,
            fwd: fwd.latest(),
        };
        dp.receive(
            v,
            1_000_000_000 + i * 1_000_000,
            &[(idx[0], &f)],
            &mut Sent::default(),
        );
    }
    dp.counters().icmp_errors
}

#[test]
fn the_icmp_limits_follow_their_sysctls() {
    // The kernel's default: a burst of six per destination (inet_peer_xrlim_allow).
    assert_eq!(time_exceeded_answered(None), 6);
    // icmp_ratelimit 0 lifts the per-destination limit.
    assert_eq!(
        time_exceeded_answered(Some((ConfKey::IcmpRatelimit4, 0))),
        10
    );
    // Time exceeded (type 11) out of the mask: no limit either.
    assert_eq!(
        time_exceeded_answered(Some((ConfKey::IcmpRatemask, 0x1018 & !(1 << 11)))),
        10
    );
    // The global bucket holds two credits: two errors, then none within the 20 ms refill.
    assert_eq!(time_exceeded_answered(Some((ConfKey::IcmpMsgsBurst, 2))), 2);
}
