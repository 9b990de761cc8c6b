//! SRv6 encapsulation in the pipeline and the headroom rule: with the pool's headroom sized
//! from the routes (`Headroom::new(largest_added, L2_RESERVE)`) no packet is ever copied, for
//! 1 to 24 segments; with the default headroom a packet whose encapsulation does not fit is
//! copied exactly once, and the copy is counted on its encapsulation object. The frames that
//! leave carry the outer header and SRH the route asks for (the differential test in
//! tests/forward/test_srv6.py compares them with the kernel's byte for byte).

use std::net::{IpAddr, Ipv6Addr};

use fibre_dataplane::drop::DropReason;
use fibre_dataplane::pipeline::{Config, Dataplane, Tx, View};
use fibre_fib::build::*;
use fibre_fib::encap::seg6_mode;
use fibre_fib::types::{iff, nud, Encap, Link, Rpl, Seg6};
use fibre_fib::*;
use fibre_fwd::{encap, FwdWriter, HopEncap};
use fibre_packet::Headroom;
use fibre_wire::{ethernet, ipv6, srh};

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
const HOST_A: [u8; 6] = [2, 0, 0, 0, 0xa0, 2];
const HOST_B: [u8; 6] = [2, 0, 0, 0, 0xb0, 2];

fn a6(s: &str) -> Ipv6Addr {
    s.parse().expect("address")
}

/// The SRH iproute2 builds for `segs` in encap mode: the list stored last segment first.
fn srh_of(segs: &[Ipv6Addr]) -> Vec<u8> {
    let n = segs.len();
    let mut b = vec![0u8; srh::HEADER_LEN + srh::SEGMENT_LEN * n];
    b[1] = (2 * n) as u8;
    b[2] = srh::ROUTING_TYPE;
    b[3] = (n - 1) as u8;
    b[4] = (n - 1) as u8;
    for (i, s) in segs.iter().enumerate() {
        let at = srh::HEADER_LEN + srh::SEGMENT_LEN * (n - 1 - i);
        b[at..at + 16].copy_from_slice(&s.octets());
    }
    b
}

/// Links a0 (in) and b0 (out), 2001:db8:b::/64 on b0 with the first segment a permanent
/// neighbour, and `2001:db8:e1::/64 encap seg6 mode MODE segs S1,...,Sn dev b0` (S1 the
/// neighbour). Returns the FIB and a0's index.
fn router(n: usize, mode: i32, first: &str) -> (Fib, u32) {
    let mut fib = Fib::default();
    let mut idx = Vec::new();
    for (name, mac) in [("a0", MAC_A), ("b0", MAC_B)] {
        let i = link(&mut fib, name, mac);
        set_link(
            &mut fib,
            i,
            Link {
                flags: iff::UP,
                change: iff::UP,
                ..Link::default()
            },
        );
        idx.push(i);
    }
    addr(&mut fib, idx[0], "2001:db8:a::1", 64);
    addr(&mut fib, idx[1], "2001:db8:b::1", 64);
    neigh(
        &mut fib,
        idx[1],
        "2001:db8:b::10",
        Some(HOST_B),
        nud::PERMANENT,
    );
    fib.set_seg6_tunsrc(a6("2001:db8:ff::1"));
    let mut segs = vec![a6(first)];
    segs.extend((1..n).map(|i| a6(&format!("2001:db8:5e::{i:x}"))));
    let mut r = route("2001:db8:e1::", 64, &[]);
    r.nexthop.oif = idx[1];
    r.nexthop.encap = Some(Encap::Seg6(Seg6 {
        mode,
        srh: srh_of(&segs),
    }));
    fib.route_new(&r, ReqFlags::ADD).expect("seg6 route");
    (fib, idx[0])
}

/// A UDP datagram to 2001:db8:e1::5 in a frame for a0, hop limit 64, flow label 0x12345.
fn frame() -> Vec<u8> {
    let payload = 8 + 32;
    let mut f = vec![0u8; ethernet::HEADER_LEN + ipv6::HEADER_LEN + payload];
    f[..6].copy_from_slice(&MAC_A);
    f[6..12].copy_from_slice(&HOST_A);
    f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    let mut p = ipv6::Packet::new_unchecked(&mut f[ethernet::HEADER_LEN..]);
    p.set_version_tc_flow(0, 0x12345);
    p.set_payload_len(payload as u16);
    p.set_next_header(17);
    p.set_hop_limit(64);
    p.set_src_addr(a6("2001:db8:a::2"));
    p.set_dst_addr(a6("2001:db8:e1::5"));
    let u = &mut f[ethernet::HEADER_LEN + ipv6::HEADER_LEN..];
    u[..2].copy_from_slice(&4000u16.to_be_bytes());
    u[2..4].copy_from_slice(&5000u16.to_be_bytes());
    u[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
    f
}

#[derive(Default)]
struct Sent(Vec<(u32, Vec<u8>)>);

impl Tx for Sent {
    fn send(&mut self, oif: u32, frame: &[u8]) {
        self.0.push((oif, frame.to_vec()));
    }
}

/// Sends `packets` copies of [`frame`] through a data plane whose pool has `headroom`;
/// returns the data plane and what it sent.
fn run(fib: &Fib, iif: u32, headroom: Headroom, packets: usize) -> (Dataplane, Sent) {
    let (fwd, _) = FwdWriter::new(fib);
    let mut cfg = Config::default();
    cfg.pool.headroom = headroom;
    let mut dp = Dataplane::new(&cfg).expect("dataplane");
    let f = frame();
    let frames: Vec<(u32, &[u8])> = (0..packets).map(|_| (iif, &f[..])).collect();
    let mut sent = Sent::default();
    let table = fwd.latest();
    let v = View { fib, fwd: table };
    dp.receive(v, 1_000_000_000, &frames, &mut sent);
    (dp, sent)
}

#[test]
fn reserved_headroom_never_copies_and_default_headroom_copies_at_most_once() {
    const PACKETS: usize = 32;
    for n in 1..=24 {
        let (fib, iif) = router(n, seg6_mode::ENCAP, "2001:db8:b::10");
        let added = encap::largest_added(&fib);
        assert_eq!(added, 40 + 8 + 16 * n, "{n} segments");
        let reserved = Headroom::new(added, encap::L2_RESERVE);
        let (dp, sent) = run(&fib, iif, reserved, PACKETS);
        assert_eq!(dp.counters().forwarded, PACKETS as u64, "{n} segments");
        assert_eq!(
            dp.counters().encap_reallocs,
            0,
            "{n} segments, reserved headroom"
        );
        assert_eq!(sent.0.len(), PACKETS);
        let (oif, out) = &sent.0[0];
        assert_ne!(*oif, iif);
        assert_eq!(out.len(), frame().len() + added);
        // The outer header: the tunnel source, the first segment, the inner flow label, the
        // hop limit one lower than the inner's, an SRH of n segments before the inner packet.
        let o = ipv6::Packet::new_unchecked(&out[ethernet::HEADER_LEN..]);
        assert_eq!(o.src_addr(), a6("2001:db8:ff::1"));
        assert_eq!(o.dst_addr(), a6("2001:db8:b::10"));
        assert_eq!(o.flow_label(), 0x12345);
        assert_eq!(o.hop_limit(), 63);
        assert_eq!(o.next_header(), 43);
        let s = srh::Packet::new_checked(o.payload()).expect("srh");
        assert_eq!((s.next_header(), s.segment_count()), (41, n));
        assert_eq!(&out[..6], &HOST_B);

        // The default headroom (128) holds the received Ethernet header and the
        // encapsulation up to 5 segments; beyond, each packet is copied once.
        let (dp, sent2) = run(&fib, iif, Headroom::default(), PACKETS);
        let copies = dp.counters().encap_reallocs;
        let fits = ethernet::HEADER_LEN + Headroom::default().bytes() >= added + encap::L2_RESERVE;
        assert_eq!(
            copies,
            if fits { 0 } else { PACKETS as u64 },
            "{n} segments"
        );
        assert_eq!(sent2.0, sent.0, "{n} segments: the copy changes no byte");
        let (i, stats) = dp.encap_stats_used().next().expect("one object");
        let (fwd, _) = FwdWriter::new(&fib);
        let f = route_of(&fib);
        assert_eq!(fwd.latest().encap(&f), HopEncap::Obj(index(i, &fwd, &f)));
        assert_eq!(stats.packets, PACKETS as u64);
        assert_eq!(stats.reallocs, copies);
    }
}

fn route_of(fib: &Fib) -> ForwardRoute {
    let k = InputKey {
        dst: IpAddr::V6(a6("2001:db8:e1::5")),
        src: IpAddr::V6(a6("2001:db8:a::2")),
        iif: fib.link_index("a0").expect("a0"),
        tos: 0,
        mark: 0,
        proto: 17,
        sport: 4000,
        dport: 5000,
        flowlabel: 0x12345,
    };
    match fib.route_input(&k) {
        Ok(InputRoute::Forward(f)) => f,
        other => panic!("not forwarded: {other:?}"),
    }
}

/// The object the table reaches for `f`, checked to be the one counted at `i`.
fn index(i: usize, fwd: &FwdWriter, f: &ForwardRoute) -> fibre_fwd::EncapIdx {
    match fwd.latest().encap(f) {
        HopEncap::Obj(o) => {
            assert_eq!(o.get(), i);
            o
        }
        other => panic!("no object: {other:?}"),
    }
}

#[test]
fn an_encapsulation_whose_first_segment_loops_back_is_dropped() {
    // The first segment falls in the encapsulating route's own prefix: every pass encapsulates
    // again, until the pass limit drops the packet.
    let (fib, iif) = router(1, seg6_mode::ENCAP, "2001:db8:e1::77");
    let (dp, sent) = run(&fib, iif, Headroom::new(1024, 14), 1);
    assert!(sent.0.is_empty());
    assert_eq!(dp.counters().dropped, 1);
    assert_eq!(dp.drops().get(DropReason::Seg6Unsupported), 1);
}

/// `encap seg6 mode encap segs SEGS hmac 7` to 2001:db8:e1::/64 out of b0: the SRH with the
/// HMAC flag and a 40-byte HMAC TLV of key 7, its 32 bytes left for the data path to fill.
fn hmac_route(fib: &mut Fib, segs: &[Ipv6Addr]) {
    let mut s = srh_of(segs);
    s[5] = srh::FLAG_HMAC;
    s[1] += 5;
    s.extend_from_slice(&[srh::tlv::HMAC, 38, 0, 0, 0, 0, 0, 7]);
    s.extend_from_slice(&[0; 32]);
    let mut r = route("2001:db8:e1::", 64, &[]);
    r.nexthop.oif = fib.link_index("b0").expect("b0");
    r.nexthop.encap = Some(Encap::Seg6(Seg6 {
        mode: seg6_mode::ENCAP,
        srh: s,
    }));
    fib.route_new(&r, ReqFlags::REPLACE).expect("hmac route");
}

#[test]
fn an_hmac_srh_is_dropped_for_want_of_keys() {
    let (mut fib, iif) = router(1, seg6_mode::ENCAP, "2001:db8:b::10");
    hmac_route(&mut fib, &[a6("2001:db8:b::10")]);
    let (dp, sent) = run(&fib, iif, Headroom::default(), 1);
    assert!(sent.0.is_empty());
    assert_eq!(dp.drops().get(DropReason::Seg6Hmac), 1);
}

/// With the key set, H.Encaps fills the HMAC TLV as the kernel did for the same route, key
/// and tunnel source (6.18, captured from a namespace: `ip sr hmac set 7 sha256` with secret
/// "secret1", `encap seg6 mode encap segs 2001:db8:b::10,2001:db8:b::11 hmac 7`); a key
/// changed later reaches the compiled object at the writer's next update.
#[test]
fn an_hmac_srh_gets_the_kernels_hmac() {
    const KERNEL: &str = "14a99258c7d25db3af633742d1bc327ea649079aa18ce0301c0f4d913eb7aa05";
    let (mut fib, iif) = router(1, seg6_mode::ENCAP, "2001:db8:b::10");
    hmac_route(&mut fib, &[a6("2001:db8:b::10"), a6("2001:db8:b::11")]);
    fib.set_seg6_hmac(7, seg6_hmac::algo::SHA256, b"secret1")
        .expect("key");
    let (mut fwd, _) = FwdWriter::new(&fib);
    let mut dp = Dataplane::new(&Config::default()).expect("dataplane");
    let f = frame();
    let field = |sent: &Sent| {
        // Ethernet, the outer IPv6 header, the SRH's fixed part and two segments, the TLV's
        // fixed part.
        let at = ethernet::HEADER_LEN + ipv6::HEADER_LEN + srh::HEADER_LEN + 2 * 16 + 8;
        let out = &sent.0.last().expect("a frame").1;
        out[at..at + 32]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let mut sent = Sent::default();
    let v = View {
        fib: &fib,
        fwd: fwd.latest(),
    };
    dp.receive(v, 1_000_000_000, &[(iif, &f[..])], &mut sent);
    assert_eq!(field(&sent), KERNEL);
    fib.set_seg6_hmac(7, seg6_hmac::algo::SHA256, b"secret2")
        .expect("key");
    fwd.update(&fib);
    let v = View {
        fib: &fib,
        fwd: fwd.latest(),
    };
    dp.receive(v, 1_000_000_000, &[(iif, &f[..])], &mut sent);
    assert_eq!(sent.0.len(), 2);
    assert_ne!(field(&sent), KERNEL);
}

/// `2001:db8:e1::/64 encap rpl` with `n` stored addresses, the first (the new destination)
/// b0's neighbour 2001:db8:b::10, the others under 2001:db8:5e::/64.
fn rpl_router(n: usize) -> (Fib, u32) {
    let (mut fib, iif) = router(1, seg6_mode::ENCAP, "2001:db8:b::10");
    let mut h = vec![
        0,
        (2 * n) as u8,
        fibre_wire::rpl::ROUTING_TYPE,
        n as u8,
        0,
        0,
        0,
        0,
    ];
    h.extend_from_slice(&a6("2001:db8:b::10").octets());
    for i in 1..n {
        h.extend_from_slice(&a6(&format!("2001:db8:5e::{i:x}")).octets());
    }
    let mut r = route("2001:db8:e1::", 64, &[]);
    r.nexthop.oif = fib.link_index("b0").expect("b0");
    r.nexthop.encap = Some(Encap::Rpl(Rpl { srh: h }));
    fib.route_new(&r, ReqFlags::REPLACE).expect("rpl route");
    (fib, iif)
}

#[test]
fn rpl_insertion_is_sized_once_and_copies_at_most_once() {
    const PACKETS: usize = 8;
    for n in [1, 4, 12] {
        let (fib, iif) = rpl_router(n);
        // The largest header: every address but the last as the route compresses it (5
        // octets of 2001:db8:00 shared with 2001:db8:b::10: 11 carried), the last carried
        // whole, padded to 8; the packet's destination (2001:db8:e1::5) shares 5 octets too.
        let largest = (8 + 11 * (n - 1) + 16).next_multiple_of(8);
        assert_eq!(encap::largest_added(&fib), largest, "{n} addresses");
        let reserved = Headroom::new(largest, encap::L2_RESERVE);
        let (dp, sent) = run(&fib, iif, reserved, PACKETS);
        assert_eq!(dp.counters().forwarded, PACKETS as u64);
        assert_eq!(
            dp.counters().encap_reallocs,
            0,
            "{n} addresses, reserved headroom"
        );
        let (_, out) = &sent.0[0];
        assert_eq!(&out[..6], &HOST_B);
        let o = ipv6::Packet::new_unchecked(&out[ethernet::HEADER_LEN..]);
        assert_eq!(
            (o.dst_addr(), o.next_header(), o.hop_limit()),
            (a6("2001:db8:b::10"), 43, 63)
        );
        let r = fibre_wire::rpl::Packet::new_checked(o.payload()).expect("rpl header");
        assert_eq!((r.segments_left(), r.address_count()), (n as u8, n));
        assert_eq!(r.address(n - 1, o.dst_addr()), Some(a6("2001:db8:e1::5")));
        assert_eq!(out.len(), frame().len() + (8 + 11 * n).next_multiple_of(8));

        let (dp, sent2) = run(&fib, iif, Headroom::default(), PACKETS);
        let fits =
            ethernet::HEADER_LEN + Headroom::default().bytes() >= largest + encap::L2_RESERVE;
        let copies = dp.counters().encap_reallocs;
        assert_eq!(
            copies,
            if fits { 0 } else { PACKETS as u64 },
            "{n} addresses"
        );
        assert_eq!(sent2.0, sent.0, "{n} addresses: the copy changes no byte");
        let (_, stats) = dp.encap_stats_used().next().expect("one object");
        assert_eq!((stats.packets, stats.reallocs), (PACKETS as u64, copies));
    }
}
