//! The frames scapy built (`tests/frames/*.bin`, written by `tests/frames/make.py`): each one
//! parses through every layer, and re-emitting it layer by layer from the `Repr`s, checksums
//! computed by this crate, gives back scapy's bytes exactly.

use fibre_wire::check::known_frames;
use fibre_wire::checksum::PseudoHeader;
use fibre_wire::consts::ip_proto;
use fibre_wire::frame::{Frame, Network};
use fibre_wire::{arp, ethernet, icmp, icmpv6, ipv4, ipv6, ipv6_ext, tcp, udp, vlan};

/// The upper layer re-emitted from its `Repr` (checksums included), or copied when it is
/// opaque (a later fragment, ESP, unknown protocols).
fn emit_upper(protocol: u8, bytes: &[u8], pseudo: &PseudoHeader, out: &mut Vec<u8>) {
    let start = out.len();
    match protocol {
        ip_proto::UDP => {
            let p = udp::Packet::new_checked(bytes).unwrap();
            let r = udp::Repr::parse(&p).unwrap();
            out.resize(start + r.buffer_len(), 0);
            out.extend_from_slice(p.payload());
            let mut q = udp::Packet::new_unchecked(&mut out[start..]);
            r.emit(&mut q);
            q.fill_checksum(pseudo);
        }
        ip_proto::TCP => {
            let p = tcp::Packet::new_checked(bytes).unwrap();
            let r = tcp::Repr::parse(&p).unwrap();
            out.resize(start + r.buffer_len(), 0);
            out.extend_from_slice(p.payload());
            let mut q = tcp::Packet::new_unchecked(&mut out[start..]);
            r.emit(&mut q);
            q.fill_checksum(pseudo);
        }
        ip_proto::ICMP => {
            let r = icmp::Repr::parse(&icmp::Packet::new_checked(bytes).unwrap()).unwrap();
            out.resize(start + r.buffer_len(), 0);
            r.emit(&mut icmp::Packet::new_unchecked(&mut out[start..]));
        }
        ip_proto::ICMPV6 => {
            let r = icmpv6::Repr::parse(&icmpv6::Packet::new_checked(bytes).unwrap()).unwrap();
            let PseudoHeader::V6 { src, dst } = *pseudo else {
                panic!("ICMPv6 over IPv4")
            };
            out.resize(start + r.buffer_len(), 0);
            r.emit(
                &mut icmpv6::Packet::new_unchecked(&mut out[start..]),
                src,
                dst,
            );
        }
        _ => out.extend_from_slice(bytes),
    }
}

fn rebuild(bytes: &[u8]) -> Vec<u8> {
    let f = Frame::parse(bytes).unwrap();
    let mut out = vec![0; ethernet::HEADER_LEN];
    f.ethernet
        .emit(&mut ethernet::Frame::new_unchecked(&mut out[..]));
    for (_, tag) in f.tags.as_slice() {
        let at = out.len();
        out.resize(at + vlan::HEADER_LEN, 0);
        tag.emit(&mut vlan::Tag::new_unchecked(&mut out[at..]));
    }
    let net = out.len();
    match f.network {
        Network::Arp(r) => {
            out.resize(net + r.buffer_len(), 0);
            r.emit(&mut arp::Packet::new_unchecked(&mut out[net..]));
        }
        Network::Ipv4 { repr, payload } => {
            out.resize(net + repr.buffer_len(), 0);
            let final_dst = ipv4::Packet::new_checked(&bytes[f.network_offset..])
                .unwrap()
                .final_dst_addr();
            let pseudo = PseudoHeader::V4 {
                src: repr.src_addr,
                dst: final_dst,
            };
            match f.upper() {
                Some(u) => emit_upper(u.protocol, u.bytes, &pseudo, &mut out),
                None => out.extend_from_slice(payload),
            }
            repr.emit(&mut ipv4::Packet::new_unchecked(&mut out[net..]));
        }
        Network::Ipv6 {
            repr,
            chain,
            payload,
        } => {
            out.resize(net + repr.buffer_len(), 0);
            repr.emit(&mut ipv6::Packet::new_unchecked(&mut out[net..]));
            for h in ipv6_ext::Chain::new(repr.next_header, payload) {
                let h = h.unwrap();
                let at = out.len();
                out.resize(at + h.bytes.len(), 0);
                if h.kind == ip_proto::IPV6_FRAGMENT {
                    let fr = ipv6_ext::FragmentRepr::parse(
                        &ipv6_ext::Fragment::new_checked(h.bytes).unwrap(),
                    )
                    .unwrap();
                    fr.emit(&mut ipv6_ext::Fragment::new_unchecked(&mut out[at..]));
                } else if h.kind == ip_proto::IPV6_ROUTING {
                    let r = ipv6_ext::RoutingRepr::parse(
                        &ipv6_ext::Header::new_checked(h.bytes).unwrap(),
                    )
                    .unwrap();
                    r.emit(&mut ipv6_ext::Header::new_unchecked(&mut out[at..]));
                } else {
                    let r = ipv6_ext::OptionsRepr::parse(
                        &ipv6_ext::Header::new_checked(h.bytes).unwrap(),
                    )
                    .unwrap();
                    r.emit(&mut ipv6_ext::Header::new_unchecked(&mut out[at..]));
                }
            }
            let pseudo = ipv6::Packet::new_checked(&bytes[f.network_offset..])
                .unwrap()
                .pseudo_header();
            let rest = &payload[chain.offset..];
            match f.upper() {
                Some(u) => emit_upper(u.protocol, u.bytes, &pseudo, &mut out),
                None => out.extend_from_slice(rest),
            }
        }
        Network::Other { payload, .. } => out.extend_from_slice(payload),
    }
    // Link-layer padding after the network packet.
    out.extend_from_slice(&bytes[out.len()..]);
    out
}

#[test]
fn every_frame_re_emits_byte_for_byte() {
    for (name, bytes) in known_frames() {
        assert_eq!(rebuild(&bytes), bytes, "{name}");
    }
}

#[test]
fn frames_are_classified_as_built() {
    for (name, bytes) in known_frames() {
        let f = Frame::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let upper = f.upper().map(|u| u.protocol);
        match name.as_str() {
            "arp_request" | "arp_reply_padded" => {
                assert!(matches!(f.network, Network::Arp(_)), "{name}")
            }
            "vlan_ipv4_udp" => {
                assert_eq!((f.tags.inner_vid(), f.ports()), (Some(10), Some((9, 10))))
            }
            "qinq_ipv6_tcp" => {
                assert_eq!(f.tags.len(), 2);
                assert_eq!(f.ports(), Some((11, 12)));
            }
            "ipv6_ext_chain_udp" => {
                let Network::Ipv6 { chain, .. } = f.network else {
                    panic!("{name}")
                };
                assert_eq!((chain.protocol, chain.headers), (ip_proto::UDP, 5));
                assert_eq!(f.ports(), Some((13, 14)));
            }
            "ipv6_srh_tcp" => assert_eq!(f.ports(), Some((15, 16))),
            "ipv4_fragment_later" | "ipv6_fragment_later" => assert_eq!(upper, None, "{name}"),
            "ipv6_esp" => assert_eq!(upper, Some(ip_proto::ESP)),
            "ipv6_no_next" => assert_eq!(upper, Some(ip_proto::IPV6_NONE)),
            n if n.starts_with("ndp_") || n.starts_with("ipv6_icmpv6") => {
                assert_eq!(upper, Some(ip_proto::ICMPV6), "{name}");
                let Network::Ipv6 { repr, .. } = f.network else {
                    panic!("{name}")
                };
                let p = icmpv6::Packet::new_checked(f.upper().unwrap().bytes).unwrap();
                p.verify_checksum(repr.src_addr, repr.dst_addr).unwrap();
                let r = icmpv6::Repr::parse(&p).unwrap();
                assert_eq!(
                    matches!(r, icmpv6::Repr::Ndp(_)),
                    n.starts_with("ndp_"),
                    "{name}"
                );
            }
            n if n.starts_with("ipv4_icmp") => {
                let p = icmp::Packet::new_checked(f.upper().unwrap().bytes).unwrap();
                p.verify_checksum().unwrap();
            }
            _ => {}
        }
        if let Network::Ipv4 { .. } = f.network {
            ipv4::Packet::new_checked(&bytes[f.network_offset..])
                .unwrap()
                .verify_checksum()
                .unwrap();
        }
    }
}

#[test]
fn options_are_read_as_built() {
    use fibre_wire::ipv4_option::Ipv4Option;
    use fibre_wire::ndp_option::NdpOption;
    let all = known_frames();
    let get = |n: &str| all.iter().find(|(name, _)| name == n).unwrap().1.clone();

    let b = get("ipv4_options_lsrr_ra");
    let p = ipv4::Packet::new_checked(&b[14..]).unwrap();
    let opts: Vec<_> = p.options().map(|o| o.unwrap()).collect();
    assert_eq!(
        opts,
        [
            Ipv4Option::LooseSourceRoute {
                pointer: 4,
                data: &[203, 0, 113, 1, 203, 0, 113, 2]
            },
            Ipv4Option::RouterAlert { value: 0 },
            Ipv4Option::EndOfList,
        ]
    );

    let b = get("ndp_ra");
    let f = Frame::parse(&b).unwrap();
    let p = icmpv6::Packet::new_checked(f.upper().unwrap().bytes).unwrap();
    let icmpv6::Repr::Ndp(n) = icmpv6::Repr::parse(&p).unwrap() else {
        panic!()
    };
    let opts: Vec<_> = n.options().map(|o| o.unwrap()).collect();
    assert_eq!(
        opts[0].ethernet_addr().unwrap().to_string(),
        "02:00:00:00:00:02"
    );
    assert_eq!(opts[1], NdpOption::Mtu(1500));
    assert!(matches!(
        opts[2],
        NdpOption::PrefixInfo { prefix_len: 64, .. }
    ));

    let b = get("ndp_ra_unknown_option");
    let f = Frame::parse(&b).unwrap();
    let p = icmpv6::Packet::new_checked(f.upper().unwrap().bytes).unwrap();
    let icmpv6::Repr::Ndp(n) = icmpv6::Repr::parse(&p).unwrap() else {
        panic!()
    };
    let opts: Vec<_> = n.options().map(|o| o.unwrap()).collect();
    assert!(matches!(opts[..], [NdpOption::Unknown { kind: 25, data }] if data.len() == 22));
}

/// The segment routing, RPL and IOAM headers scapy built read as built, and each re-emits
/// from its `Repr` byte for byte.
#[test]
fn routing_headers_and_ioam_read_as_built() {
    use fibre_wire::check::{hop_by_hop_option, routing_header};
    use fibre_wire::{ioam6, rpl, srh};
    let all: std::collections::HashMap<_, _> = known_frames().into_iter().collect();
    let a = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap();

    let b = routing_header(&all["ipv6_srh_hmac_udp"]);
    let p = srh::Packet::new_checked(b).unwrap();
    assert_eq!((p.segments_left(), p.last_entry(), p.tag()), (0, 0, 9));
    assert_eq!(p.flags(), srh::FLAG_HMAC);
    assert_eq!(p.segment(0), Some(a("2001:db8:3::1")));
    assert_eq!(p.hmac_key_id(), Some(7));
    p.validate(b.len(), false).unwrap();
    let r = srh::Repr::parse(&p).unwrap();
    let mut out = vec![0; r.buffer_len()];
    r.emit(&mut srh::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);

    let b = routing_header(&all["ipv6_srh_tcp"]);
    srh::Packet::new_checked(b)
        .unwrap()
        .validate(b.len(), false)
        .unwrap();

    let b = routing_header(&all["ipv6_rpl_udp"]);
    let p = rpl::Packet::new_checked(b).unwrap();
    assert_eq!(
        (p.routing_type(), p.segments_left(), p.address_count()),
        (3, 2, 2)
    );
    assert_eq!(p.address(1, a("2001:db8:1::7")), Some(a("2001:db8:4::2")));
    let r = rpl::Repr::parse(&p).unwrap();
    let mut out = vec![0; r.buffer_len()];
    r.emit(&mut rpl::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b);

    let b = hop_by_hop_option(&all["ipv6_hbh_ioam_udp"], ioam6::OPTION_TYPE);
    let p = ioam6::Packet::new_checked(b).unwrap();
    assert_eq!(
        (p.namespace_id(), p.node_len(), p.remaining_len()),
        (1, 1, 1)
    );
    assert_eq!((p.trace_type(), p.next_node()), (0x80_0000, Some(0..4)));
    assert_eq!(&p.data()[4..], [64, 0, 0, 1]);
    let r = ioam6::Repr::parse(&p).unwrap();
    let mut out = vec![0; r.buffer_len()];
    r.emit(&mut ioam6::Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, b[..p.option_len()]);
}
