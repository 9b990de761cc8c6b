//! The punt path as the data plane sees it: with a host stack behind a link (`Tx::host_behind`),
//! the router's own traffic that came in on that link and that the data plane does not answer
//! goes to the host as received, and so do ARP replies (the host resolves its neighbours
//! itself), and neighbour advertisements too; what the data plane answers (echo requests, ARP
//! requests) stays its own. Without
//! a host behind the link, nothing changes: UDP to the router gets port unreachable.

use std::net::{Ipv4Addr, Ipv6Addr};

use fibre_dataplane::pipeline::{Config, Dataplane, Tx, View};
use fibre_fib::build::*;
use fibre_fib::types::{iff, nud, Link};
use fibre_fib::Fib;
use fibre_fwd::FwdWriter;
use fibre_wire::checksum::PseudoHeader;
use fibre_wire::consts::arp as arp_consts;
use fibre_wire::consts::icmpv6 as icmpv6_consts;
use fibre_wire::ndp::{self, na_flags};
use fibre_wire::{arp, ethernet, icmpv6, ipv4, ipv6, udp};

const ROUTER: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]];
const HOST: [u8; 6] = [2, 0, 0, 0, 1, 0];

/// Links a0 (10.0.0.1/24) and a1 (10.1.0.1/24), up, with ARP, each with the host 10.L.0.2
/// as a permanent neighbour.
fn build() -> (Fib, [u32; 2]) {
    let mut fib = Fib::default();
    let mut idx = [0; 2];
    for (l, i) in idx.iter_mut().enumerate() {
        *i = link(&mut fib, &format!("a{l}"), ROUTER[l]);
        set_link(
            &mut fib,
            *i,
            Link {
                flags: iff::UP,
                change: iff::NOARP,
                ..Link::default()
            },
        );
        addr(&mut fib, *i, &format!("10.{l}.0.1"), 24);
        addr(&mut fib, *i, &format!("2001:db8:{l}::1"), 64);
        neigh(
            &mut fib,
            *i,
            &format!("10.{l}.0.2"),
            Some(HOST),
            nud::PERMANENT,
        );
    }
    (fib, idx)
}

/// What the data plane sent and punted; a host stands behind link `host` only.
struct Sink {
    host: u32,
    sent: Vec<(u32, Vec<u8>)>,
    punted: Vec<(u32, Vec<u8>)>,
}

impl Tx for Sink {
    fn send(&mut self, oif: u32, frame: &[u8]) {
        self.sent.push((oif, frame.to_vec()));
    }

    fn host_behind(&self, iif: u32) -> bool {
        iif == self.host
    }

    fn punt(&mut self, iif: u32, frame: &[u8]) {
        self.punted.push((iif, frame.to_vec()));
    }
}

fn eth(dst: [u8; 6], ethertype: u16, payload_len: usize) -> Vec<u8> {
    let mut f = vec![0u8; ethernet::HEADER_LEN + payload_len];
    let mut e = ethernet::Frame::new_unchecked(&mut f[..]);
    e.set_dst_addr(ethernet::Address(dst));
    e.set_src_addr(ethernet::Address(HOST));
    e.set_ethertype(ethertype);
    f
}

/// A UDP datagram from 10.L.0.2 to `dst` in a frame to link L's MAC.
fn udp_to(link: usize, dst: Ipv4Addr, dport: u16) -> Vec<u8> {
    let src = Ipv4Addr::new(10, link as u8, 0, 2);
    let payload = b"for the host";
    let udp_len = udp::HEADER_LEN + payload.len();
    let ip = ipv4::Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: 17,
        payload_len: udp_len,
        ttl: 64,
        tos: 0,
        ident: 1,
        reserved_flag: false,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        options: fibre_wire::OptionBytes::EMPTY,
    };
    let mut f = eth(ROUTER[link], 0x0800, ip.buffer_len() + udp_len);
    let mut e = ethernet::Frame::new_unchecked(&mut f[..]);
    let mut p = ipv4::Packet::new_unchecked(e.payload_mut());
    ip.emit(&mut p);
    let mut u = udp::Packet::new_unchecked(p.payload_mut());
    udp::Repr {
        src_port: 179,
        dst_port: dport,
        payload_len: payload.len(),
    }
    .emit(&mut u);
    u.payload_mut().copy_from_slice(payload);
    u.fill_checksum(&PseudoHeader::V4 { src, dst });
    f
}

/// A solicited neighbour advertisement on link 0 from the host 2001:db8:0::2 to the router.
fn na_on_link0() -> Vec<u8> {
    let (src, dst) = (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
    );
    let na = ndp::Repr::NeighborAdvert {
        flags: na_flags::SOLICITED,
        target: src,
        options: &[],
    };
    let icmp_len = 4 + na.body_len();
    let ip = ipv6::Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: 58,
        payload_len: icmp_len,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
    };
    let mut f = eth(ROUTER[0], 0x86dd, ipv6::HEADER_LEN + icmp_len);
    let mut e = ethernet::Frame::new_unchecked(&mut f[..]);
    let mut p = ipv6::Packet::new_unchecked(e.payload_mut());
    ip.emit(&mut p);
    let mut m = icmpv6::Packet::new_unchecked(&mut p.payload_mut()[..icmp_len]);
    m.set_msg_type(icmpv6_consts::NEIGHBOR_ADVERT);
    m.set_code(0);
    na.emit(m.body_mut());
    m.fill_checksum(src, dst);
    f
}

/// An ARP message on link 0 from the host 10.0.0.2 about the router's 10.0.0.1.
fn arp_on_link0(operation: u16) -> Vec<u8> {
    let dst = if operation == arp_consts::OP_REPLY {
        ROUTER[0]
    } else {
        [0xff; 6]
    };
    let mut f = eth(dst, 0x0806, 28);
    let mut e = ethernet::Frame::new_unchecked(&mut f[..]);
    arp::Repr {
        operation,
        source_hardware_addr: ethernet::Address(HOST),
        source_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
        target_hardware_addr: ethernet::Address(ROUTER[0]),
        target_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
    }
    .emit(&mut arp::Packet::new_unchecked(e.payload_mut()));
    f
}

fn run(frames: &[(u32, Vec<u8>)], host: u32) -> (Sink, fibre_dataplane::pipeline::Counters) {
    let (fib, _) = build();
    let (fwd, _) = FwdWriter::new(&fib);
    let mut dp = Dataplane::new(&Config::default()).expect("dataplane");
    let mut sink = Sink {
        host,
        sent: Vec::new(),
        punted: Vec::new(),
    };
    let v: Vec<(u32, &[u8])> = frames.iter().map(|(i, f)| (*i, f.as_slice())).collect();
    let view = View {
        fib: &fib,
        fwd: fwd.latest(),
    };
    dp.receive(view, 1_000_000_000, &v, &mut sink);
    (sink, dp.counters())
}

#[test]
fn the_hosts_traffic_goes_to_the_host_behind_its_link() {
    let (_, idx) = build();
    let own = udp_to(0, Ipv4Addr::new(10, 0, 0, 1), 179);
    // The other link's address, reached through link 0: still link 0's host's.
    let other = udp_to(0, Ipv4Addr::new(10, 1, 0, 1), 22);
    let (sink, c) = run(&[(idx[0], own.clone()), (idx[0], other.clone())], idx[0]);
    assert_eq!(sink.punted, vec![(idx[0], own), (idx[0], other)]);
    assert!(sink.sent.is_empty(), "{:?}", sink.sent);
    assert_eq!((c.punted, c.delivered), (2, 0));
}

#[test]
fn without_a_host_behind_the_link_udp_finds_its_port_closed() {
    let (_, idx) = build();
    let own = udp_to(1, Ipv4Addr::new(10, 1, 0, 1), 179);
    let (sink, c) = run(&[(idx[1], own)], idx[0]);
    assert!(sink.punted.is_empty());
    let [(oif, reply)] = sink.sent.as_slice() else {
        panic!("{:?}", sink.sent)
    };
    assert_eq!(*oif, idx[1]);
    // ICMP destination unreachable (3), port unreachable (3), after a 20-byte IPv4 header.
    let icmp = &reply[ethernet::HEADER_LEN + 20..];
    assert_eq!((icmp[0], icmp[1]), (3, 3));
    assert_eq!((c.punted, c.delivered), (0, 1));
}

#[test]
fn arp_replies_reach_the_host_and_requests_are_answered_once() {
    let (_, idx) = build();
    let reply = arp_on_link0(arp_consts::OP_REPLY);
    let request = arp_on_link0(arp_consts::OP_REQUEST);
    let (sink, c) = run(&[(idx[0], reply.clone()), (idx[0], request)], idx[0]);
    assert_eq!(sink.punted, vec![(idx[0], reply)]);
    // The data plane answered the request, and learnt from both.
    let [(oif, answer)] = sink.sent.as_slice() else {
        panic!("{:?}", sink.sent)
    };
    assert_eq!(*oif, idx[0]);
    let a = arp::Packet::new_unchecked(&answer[ethernet::HEADER_LEN..]);
    assert_eq!(a.operation(), arp_consts::OP_REPLY);
    assert_eq!((c.delivered, c.punted), (2, 0));
}

#[test]
fn neighbour_advertisements_reach_the_host_too() {
    let (_, idx) = build();
    let na = na_on_link0();
    let (sink, c) = run(&[(idx[0], na.clone())], idx[0]);
    assert_eq!(sink.punted, vec![(idx[0], na)]);
    // Learnt from by the data plane, its fate is "delivered"; the host's copy is no fate.
    assert_eq!((c.delivered, c.punted, c.dropped), (1, 0, 0));
}
