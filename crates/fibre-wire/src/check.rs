//! Assertions over arbitrary bytes, shared by the fuzz targets (`fuzz/fuzz_targets/wire_*`)
//! and the property tests: for each decoder, a successful `new_checked` makes every accessor
//! and setter safe to call (setting a field to the value read leaves the bytes unchanged), and
//! a successful `Repr::parse` re-emits to bytes that parse to the same `Repr`.
//!
//! These functions panic when a property fails: that is their job. They allocate, so they
//! exist only for tests and with the `check` feature, which the fuzz crate enables.
#![allow(clippy::unwrap_used, clippy::expect_used)]

extern crate std;

use core::net::{Ipv4Addr, Ipv6Addr};
use std::vec;
use std::vec::Vec;

use crate::checksum::PseudoHeader;
use crate::frame::Frame;
use crate::{
    arp, ethernet, icmp, icmpv6, ioam6, ipv4, ipv4_option, ipv6, ipv6_ext, ndp, rpl, srh, tcp, udp,
    vlan,
};

/// Ethernet header and VLAN tags.
pub fn ethernet(data: &[u8]) {
    let Ok(f) = ethernet::Frame::new_checked(data) else {
        return;
    };
    let mut copy = data.to_vec();
    let mut m = ethernet::Frame::new_unchecked(&mut copy[..]);
    m.set_dst_addr(f.dst_addr());
    m.set_src_addr(f.src_addr());
    m.set_ethertype(f.ethertype());
    assert_eq!(copy, data);
    let repr = ethernet::Repr::parse(&f).unwrap();
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut ethernet::Frame::new_unchecked(&mut out[..]));
    assert_eq!(
        ethernet::Repr::parse(&ethernet::Frame::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
    vlan_tags(repr.ethertype, f.payload());
}

fn vlan_tags(ethertype: u16, payload: &[u8]) {
    if let Ok(t) = vlan::Tag::new_checked(payload) {
        let mut copy = payload.to_vec();
        let mut m = vlan::Tag::new_unchecked(&mut copy[..]);
        m.set_tci(t.pcp(), t.dei(), t.vid());
        m.set_ethertype(t.ethertype());
        assert_eq!(copy, payload);
        let _ = t.payload();
    }
    let Ok((tags, _, len)) = vlan::Tags::parse(ethertype, payload) else {
        return;
    };
    let mut out = vec![0; len];
    for (i, (_, tag)) in tags.as_slice().iter().enumerate() {
        tag.emit(&mut vlan::Tag::new_unchecked(
            &mut out[i * vlan::HEADER_LEN..],
        ));
    }
    assert_eq!(out, payload[..len]);
}

pub fn arp(data: &[u8]) {
    let Ok(p) = arp::Packet::new_checked(data) else {
        return;
    };
    let (sha, spa, tha, tpa) = (
        p.source_hardware_addr(),
        p.source_protocol_addr(),
        p.target_hardware_addr(),
        p.target_protocol_addr(),
    );
    let mut copy = data.to_vec();
    let mut m = arp::Packet::new_unchecked(&mut copy[..]);
    m.set_htype(p.htype());
    m.set_ptype(p.ptype());
    m.set_hlen(p.hlen());
    m.set_plen(p.plen());
    m.set_operation(p.operation());
    m.set_addrs(sha, spa, tha, tpa);
    assert_eq!(copy, data);
    let Ok(repr) = arp::Repr::parse(&p) else {
        return;
    };
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut arp::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, data[..p.packet_len()]);
    assert_eq!(
        arp::Repr::parse(&arp::Packet::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
}

pub fn ipv4(data: &[u8]) {
    let Ok(p) = ipv4::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.version(),
        p.dscp(),
        p.ecn(),
        p.is_fragment(),
        p.payload(),
        p.verify_checksum(),
    );
    let mut copy = data.to_vec();
    let mut m = ipv4::Packet::new_unchecked(&mut copy[..]);
    m.set_tos(p.tos());
    m.set_total_len(p.total_len());
    m.set_ident(p.ident());
    m.set_flags_frag(
        p.reserved_flag(),
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
    );
    m.set_ttl(p.ttl());
    m.set_protocol(p.protocol());
    m.set_checksum(p.checksum());
    m.set_src_addr(p.src_addr());
    m.set_dst_addr(p.dst_addr());
    let _ = (m.options_bytes_mut().len(), m.payload_mut().len());
    assert_eq!(copy, data);
    ipv4_options(p.options_bytes());
    let Ok(repr) = ipv4::Repr::parse(&p) else {
        return;
    };
    let mut out = vec![0; repr.buffer_len() + repr.payload_len];
    let mut q = ipv4::Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut q);
    q.payload_mut().copy_from_slice(p.payload());
    let q = ipv4::Packet::new_checked(&out[..]).unwrap();
    q.verify_checksum().unwrap();
    assert_eq!(ipv4::Repr::parse(&q), Ok(repr));
    // The incremental updates agree with a full recompute.
    let mut r = out.clone();
    let mut m = ipv4::Packet::new_unchecked(&mut r[..]);
    m.decrement_ttl();
    m.rewrite_src_addr(Ipv4Addr::new(192, 0, 2, 1));
    m.verify_checksum().unwrap();
}

fn ipv4_options(bytes: &[u8]) {
    let mut it = ipv4_option::Options::new(bytes);
    let mut out = vec![0; bytes.len()];
    let mut at = 0;
    for o in &mut it {
        let Ok(o) = o else { return };
        o.emit(&mut out[at..]);
        at += o.buffer_len();
        assert_eq!(
            ipv4_option::Ipv4Option::parse(&out[at - o.buffer_len()..]).map(|(o, _)| o),
            Ok(o)
        );
    }
    assert_eq!(out[..at], bytes[..at]);
}

pub fn ipv6(data: &[u8]) {
    let Ok(p) = ipv6::Packet::new_checked(data) else {
        return;
    };
    let mut copy = data.to_vec();
    let mut m = ipv6::Packet::new_unchecked(&mut copy[..]);
    m.set_version_tc_flow(p.traffic_class(), p.flow_label());
    m.set_payload_len(p.payload_len());
    m.set_next_header(p.next_header());
    m.set_hop_limit(p.hop_limit());
    m.set_src_addr(p.src_addr());
    m.set_dst_addr(p.dst_addr());
    let _ = m.payload_mut().len();
    if p.version() == 6 {
        assert_eq!(copy, data);
    }
    ext_chain(p.next_header(), p.payload());
    let Ok(repr) = ipv6::Repr::parse(&p) else {
        return;
    };
    let mut out = vec![0; repr.buffer_len() + repr.payload_len];
    let mut q = ipv6::Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut q);
    q.payload_mut().copy_from_slice(p.payload());
    assert_eq!(
        ipv6::Repr::parse(&ipv6::Packet::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
}

fn ext_chain(next_header: u8, payload: &[u8]) {
    let mut count = 0;
    for h in ipv6_ext::Chain::new(next_header, payload) {
        let Ok(h) = h else { return };
        count += 1;
        assert!(count <= ipv6_ext::MAX_EXT_HEADERS);
        let mut out = vec![0; h.bytes.len()];
        if h.kind == crate::consts::ip_proto::IPV6_FRAGMENT {
            let f =
                ipv6_ext::FragmentRepr::parse(&ipv6_ext::Fragment::new_checked(h.bytes).unwrap())
                    .unwrap();
            f.emit(&mut ipv6_ext::Fragment::new_unchecked(&mut out[..]));
            let back =
                ipv6_ext::FragmentRepr::parse(&ipv6_ext::Fragment::new_checked(&out[..]).unwrap());
            assert_eq!(back, Ok(f));
            continue;
        }
        let hdr = ipv6_ext::Header::new_checked(h.bytes).unwrap();
        let _ = (hdr.routing_type(), hdr.segments_left());
        for o in hdr.options().flatten() {
            let _ = o.action();
        }
        if h.kind == crate::consts::ip_proto::IPV6_ROUTING {
            let r = ipv6_ext::RoutingRepr::parse(&hdr).unwrap();
            r.emit(&mut ipv6_ext::Header::new_unchecked(&mut out[..]));
        } else {
            let r = ipv6_ext::OptionsRepr::parse(&hdr).unwrap();
            r.emit(&mut ipv6_ext::Header::new_unchecked(&mut out[..]));
        }
        assert_eq!(out, h.bytes);
    }
    let _ = ipv6_ext::walk(next_header, payload);
}

/// A segment routing header: every accessor and setter, the TLV walk, Linux's validation, and
/// the `Repr` round trip, which re-emits the bytes exactly.
pub fn srh(data: &[u8]) {
    let Ok(p) = srh::Packet::new_checked(data) else {
        return;
    };
    let _ = (p.flags(), p.tag(), p.hmac_key_id(), p.segment_list().len());
    if let Some(at) = p.hmac_tlv_at() {
        assert!(at >= srh::HEADER_LEN + p.segment_list().len());
        assert_eq!(at + srh::HMAC_TLV_LEN, p.header_len());
    }
    let _ = (
        p.validate(data.len(), false),
        p.validate(p.header_len(), true),
    );
    for t in p.tlvs() {
        let Ok(t) = t else { break };
        assert!(t.wire_len() >= 1 && t.hmac_key_id().is_none_or(|_| t.kind == srh::tlv::HMAC));
    }
    let mut copy = data.to_vec();
    let mut m = srh::Packet::new_unchecked(&mut copy[..]);
    m.set_next_header(p.next_header());
    m.set_segments_left(p.segments_left());
    m.set_flags(p.flags());
    m.set_tag(p.tag());
    for i in 0..=p.segment_count() {
        match p.segment(i) {
            Some(a) => m.set_segment(i, a).unwrap(),
            None => assert!(m.set_segment(i, Ipv6Addr::UNSPECIFIED).is_err()),
        }
    }
    assert_eq!(copy, data);
    let Ok(repr) = srh::Repr::parse(&p) else {
        return;
    };
    assert_eq!(
        repr.segment(p.segment_count() - 1),
        p.segment(p.segment_count() - 1)
    );
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut srh::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, data[..p.header_len()]);
    assert_eq!(
        srh::Repr::parse(&srh::Packet::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
}

/// An RPL source routing header: the accessors against any destination, the setters, and the
/// `Repr` round trip.
pub fn rpl(data: &[u8]) {
    let Ok(p) = rpl::Packet::new_checked(data) else {
        return;
    };
    let dst = Ipv6Addr::from([0xa5; 16]);
    let n = p.address_count();
    assert!(n >= 1);
    let addrs: Vec<Ipv6Addr> = (0..n).map(|i| p.address(i, dst).unwrap()).collect();
    assert_eq!(p.address(n, dst), None);
    let mut copy = data.to_vec();
    let mut m = rpl::Packet::new_unchecked(&mut copy[..]);
    m.set_next_header(p.next_header());
    m.set_segments_left(p.segments_left());
    for (i, a) in addrs.iter().enumerate() {
        m.set_address(i, *a).unwrap();
    }
    assert!(m.set_address(n, dst).is_err());
    assert_eq!(copy, data);
    let Ok(repr) = rpl::Repr::parse(&p) else {
        return;
    };
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut rpl::Packet::new_unchecked(&mut out[..]));
    let q = rpl::Packet::new_checked(&out[..]).unwrap();
    assert_eq!(rpl::Repr::parse(&q), Ok(repr));
    assert_eq!(q.address(n - 1, dst), addrs.last().copied());
    // The addresses compressed against `dst` again carry the same list.
    let mut carried = vec![0; 16 * n];
    let c = rpl::compress(dst, &addrs, &mut carried).unwrap();
    assert!((n == 1 || c.cmpri >= p.cmpri()) && c.cmpre >= p.cmpre());
}

/// An IOAM pre-allocated trace option: every accessor, the next node's slot within the data,
/// the setters, and the `Repr` round trip, which re-emits the option byte for byte but for the
/// two reserved octets.
pub fn ioam6(data: &[u8]) {
    let Ok(p) = ioam6::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.namespace_id(),
        p.overflow(),
        p.trace_type(),
        ioam6::node_len(p.trace_type()),
    );
    if let Some(slot) = p.next_node() {
        assert!(slot.end <= p.data().len() && slot.len() == usize::from(p.node_len()) * 4);
    }
    let mut copy = data.to_vec();
    let mut m = ioam6::Packet::new_unchecked(&mut copy[..]);
    m.set_namespace_id(p.namespace_id());
    m.set_flags(p.flags());
    m.set_remaining_len(p.remaining_len());
    let _ = m.data_mut().len();
    assert_eq!(copy, data);
    let Ok(repr) = ioam6::Repr::parse(&p) else {
        return;
    };
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut ioam6::Packet::new_unchecked(&mut out[..]));
    let mut want = data[..p.option_len()].to_vec();
    want[2] = 0;
    want[11] = 0;
    assert_eq!(out, want);
    assert_eq!(
        ioam6::Repr::parse(&ioam6::Packet::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
}

/// The first hop-by-hop option of type `kind` in an Ethernet frame carrying IPv6, from its
/// type octet to the end of its header, or nothing.
pub fn hop_by_hop_option(data: &[u8], kind: u8) -> &[u8] {
    let net = network_layer(data);
    let Ok(p) = ipv6::Packet::new_checked(net) else {
        return &[];
    };
    if p.next_header() != crate::consts::ip_proto::HOP_BY_HOP {
        return &[];
    }
    let payload = &net[ipv6::HEADER_LEN..ipv6::HEADER_LEN + usize::from(p.payload_len())];
    let Ok(h) = ipv6_ext::Header::new_checked(payload) else {
        return &[];
    };
    let area = &payload[2..h.header_len()];
    let mut at = 0;
    while at < area.len() {
        if area[at] == 0 {
            at += 1;
            continue;
        }
        if area[at] == kind {
            return &area[at..];
        }
        at += 2 + usize::from(*area.get(at + 1).unwrap_or(&0));
    }
    &[]
}

/// The first routing header of an Ethernet frame carrying IPv6, or nothing: lets a fuzz target
/// seeded with whole frames reach the routing-header decoders.
pub fn routing_header(data: &[u8]) -> &[u8] {
    let net = network_layer(data);
    let Ok(p) = ipv6::Packet::new_checked(net) else {
        return &[];
    };
    let payload = &net[ipv6::HEADER_LEN..ipv6::HEADER_LEN + usize::from(p.payload_len())];
    ipv6_ext::Chain::new(p.next_header(), payload)
        .map_while(|h| h.ok())
        .find(|h| h.kind == crate::consts::ip_proto::IPV6_ROUTING)
        .map_or(&[], |h| h.bytes)
}

pub fn icmp(data: &[u8]) {
    let Ok(p) = icmp::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.gateway(),
        p.pointer(),
        p.next_hop_mtu(),
        p.echo_ident(),
        p.echo_seq_no(),
        p.verify_checksum(),
    );
    let repr = icmp::Repr::parse(&p).unwrap();
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut icmp::Packet::new_unchecked(&mut out[..]));
    let q = icmp::Packet::new_checked(&out[..]).unwrap();
    q.verify_checksum().unwrap();
    assert_eq!(icmp::Repr::parse(&q), Ok(repr));
}

pub fn icmpv6(data: &[u8]) {
    let (src, dst) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
    let Ok(p) = icmpv6::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.echo_ident(),
        p.echo_seq_no(),
        p.rest_u32(),
        p.data(),
        p.verify_checksum(src, dst),
    );
    let Ok(repr) = icmpv6::Repr::parse(&p) else {
        return;
    };
    if let icmpv6::Repr::Ndp(n) = repr {
        for o in n.options() {
            let o = o.unwrap();
            let mut buf = vec![0; o.buffer_len()];
            o.emit(&mut buf);
            assert_eq!(
                crate::ndp_option::NdpOption::parse(&buf).map(|(o, _)| o),
                Ok(o)
            );
            let _ = o.ethernet_addr();
        }
        assert_eq!(ndp::Repr::parse(n.msg_type(), p.body()), Ok(n));
    }
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut icmpv6::Packet::new_unchecked(&mut out[..]), src, dst);
    let q = icmpv6::Packet::new_checked(&out[..]).unwrap();
    q.verify_checksum(src, dst).unwrap();
    assert_eq!(icmpv6::Repr::parse(&q), Ok(repr));
}

/// UDP and TCP over the same bytes.
pub fn transport(data: &[u8]) {
    let pseudo = PseudoHeader::V6 {
        src: Ipv6Addr::LOCALHOST,
        dst: Ipv6Addr::UNSPECIFIED,
    };
    if let Ok(p) = udp::Packet::new_checked(data) {
        let _ = (p.payload(), p.verify_checksum(&pseudo), p.checksum());
        let repr = udp::Repr::parse(&p).unwrap();
        let mut out = vec![0; repr.buffer_len() + repr.payload_len];
        let mut q = udp::Packet::new_unchecked(&mut out[..]);
        repr.emit(&mut q);
        q.payload_mut().copy_from_slice(p.payload());
        q.fill_checksum(&pseudo);
        let q = udp::Packet::new_checked(&out[..]).unwrap();
        q.verify_checksum(&pseudo).unwrap();
        assert_eq!(udp::Repr::parse(&q), Ok(repr));
    }
    if let Ok(p) = tcp::Packet::new_checked(data) {
        let _ = (
            p.payload(),
            p.verify_checksum(&pseudo),
            p.syn(),
            p.fin(),
            p.rst(),
            p.ack(),
            p.checksum(),
        );
        let repr = tcp::Repr::parse(&p).unwrap();
        let mut out: Vec<u8> = vec![0; repr.buffer_len()];
        out.extend_from_slice(p.payload());
        let mut q = tcp::Packet::new_unchecked(&mut out[..]);
        repr.emit(&mut q);
        q.fill_checksum(&pseudo);
        let q = tcp::Packet::new_checked(&out[..]).unwrap();
        q.verify_checksum(&pseudo).unwrap();
        assert_eq!(tcp::Repr::parse(&q), Ok(repr));
        assert_eq!(q.payload(), p.payload());
    }
}

/// The frames of `tests/frames` (built by `tests/frames/make.py`), by name, sorted: the known
/// frames the tests re-emit and compare, and the fuzz targets' seeds.
pub fn known_frames() -> Vec<(std::string::String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/frames");
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/frames")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .map(|p| {
            let name = p
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("a frame"))
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 30,
        "tests/frames holds {} frames: run make.py",
        out.len()
    );
    out
}

/// The network layer of `data` read as an Ethernet frame (after the VLAN tags), or nothing:
/// lets a fuzz target seeded with whole frames reach its own decoder.
pub fn network_layer(data: &[u8]) -> &[u8] {
    let Ok(f) = ethernet::Frame::new_checked(data) else {
        return &[];
    };
    match vlan::Tags::parse(f.ethertype(), f.payload()) {
        Ok((_, _, len)) => &data[ethernet::HEADER_LEN + len..],
        Err(_) => &[],
    }
}

/// The upper layer of `data` read as an Ethernet frame carrying IP, or nothing.
pub fn upper_layer(data: &[u8]) -> &[u8] {
    Frame::parse(data)
        .ok()
        .and_then(|f| f.upper())
        .map_or(&[], |u| u.bytes)
}

/// A whole frame through every layer: [`Frame::parse`] never panics, and each layer it reaches
/// passes its own check.
pub fn frame(data: &[u8]) {
    ethernet(data);
    let Ok(f) = Frame::parse(data) else { return };
    let _ = f.ports();
    let net = &data[f.network_offset..];
    match f.network {
        crate::frame::Network::Arp(_) => arp(net),
        crate::frame::Network::Ipv4 { .. } => ipv4(net),
        crate::frame::Network::Ipv6 { .. } => ipv6(net),
        crate::frame::Network::Other { .. } => {}
    }
    if let Some(u) = f.upper() {
        match u.protocol {
            crate::consts::ip_proto::ICMP => icmp(u.bytes),
            crate::consts::ip_proto::ICMPV6 => icmpv6(u.bytes),
            _ => transport(u.bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The fuzz targets' seeds pass their checks (what the fuzz targets replay first).
    #[test]
    fn known_frames_pass_every_check() {
        for (_, f) in known_frames() {
            assert!(Frame::parse(&f).is_ok());
            frame(&f);
            ethernet(&f);
            arp(network_layer(&f));
            ipv4(network_layer(&f));
            ipv6(network_layer(&f));
            icmp(upper_layer(&f));
            icmpv6(upper_layer(&f));
            transport(upper_layer(&f));
            srh(routing_header(&f));
            rpl(routing_header(&f));
            ioam6(hop_by_hop_option(&f, ioam6::OPTION_TYPE));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Known frames with bytes changed and cut: reaches the deep layers that random bytes
        /// rarely do.
        #[test]
        fn mutated_frames_through_every_decoder(
            which in any::<prop::sample::Index>(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let all = known_frames();
            let mut f = all[which.index(all.len())].1.clone();
            for (at, v) in edits {
                let i = at.index(f.len());
                f[i] = v;
            }
            f.truncate(cut.index(f.len() + 1).max(f.len() / 2));
            frame(&f);
            arp(network_layer(&f));
            ipv4(network_layer(&f));
            ipv6(network_layer(&f));
            icmp(upper_layer(&f));
            icmpv6(upper_layer(&f));
            transport(upper_layer(&f));
            srh(routing_header(&f));
            rpl(routing_header(&f));
            ioam6(hop_by_hop_option(&f, ioam6::OPTION_TYPE));
        }

        #[test]
        fn any_bytes_through_every_decoder(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            frame(&data);
            arp(&data);
            ipv4(&data);
            ipv6(&data);
            icmp(&data);
            icmpv6(&data);
            transport(&data);
            srh(&data);
            rpl(&data);
            ioam6(&data);
        }
    }
}
