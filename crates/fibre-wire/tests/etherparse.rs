//! fibre-wire against an independent decoder, etherparse: on the scapy frames, on frames
//! etherparse's builder writes, on frames this crate writes (IPv6 extension chains of random
//! shape), and on random mutations of all of them, every field both decoders read must agree:
//! addresses, VLAN ids, lengths, protocols, the IPv6 chain's final protocol, ports, ICMP
//! types and codes.
//!
//! Where the two differ by design the comparison is skipped, not weakened: etherparse also
//! takes 0x9100 and MACsec as tags and walks past AH, which this crate reports as the end of
//! the chain, and it goes on reading extension headers after a fragment header whose offset is
//! not zero (where this crate stops: those bytes are the middle of the original packet, not
//! headers); it parses the transport header and so fails on truncated ones, which
//! `Frame::parse` leaves to the layer above.

use etherparse::{
    LinkExtSlice, LinkSlice, NetSlice, PacketBuilder, SlicedPacket, TransportSlice, VlanId,
};
use fibre_wire::check::known_frames;
use fibre_wire::consts::{ethertype, ip_proto};
use fibre_wire::frame::{Frame, Network};
use fibre_wire::{icmp, icmpv6, ipv6, ipv6_ext, udp};
use proptest::prelude::*;

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Both decoded the frame and agreed on every field compared.
    Agreed,
    /// At least one refused it (or the frame uses what only one of them knows).
    Skipped,
}

/// True when the tag stack holds an EtherType only etherparse reads as a tag.
fn has_foreign_tag(bytes: &[u8]) -> bool {
    let mut at = 12;
    while let Some(t) = bytes.get(at..at + 2) {
        match u16::from_be_bytes([t[0], t[1]]) {
            0x9100 | 0x88E5 => return true,
            ethertype::VLAN | ethertype::QINQ => at += 4,
            _ => return false,
        }
    }
    false
}

fn compare(bytes: &[u8]) -> Outcome {
    let theirs = SlicedPacket::from_ethernet(bytes);
    if let Ok(eth) = fibre_wire::ethernet::Frame::new_checked(bytes) {
        if let Ok(SlicedPacket {
            link: Some(LinkSlice::Ethernet2(e)),
            ..
        }) = &theirs
        {
            assert_eq!(eth.dst_addr().0, e.destination());
            assert_eq!(eth.src_addr().0, e.source());
        }
    }
    let (Ok(ours), Ok(theirs)) = (Frame::parse(bytes), theirs) else {
        return Outcome::Skipped;
    };
    if has_foreign_tag(bytes) {
        return Outcome::Skipped;
    }
    let their_vids: Vec<u16> = theirs
        .link_exts
        .iter()
        .filter_map(|e| match e {
            LinkExtSlice::Vlan(v) => Some(v.vlan_identifier().value()),
            _ => None,
        })
        .collect();
    let our_vids: Vec<u16> = ours.tags.as_slice().iter().map(|(_, t)| t.vid).collect();
    assert_eq!(our_vids, their_vids, "VLAN ids");

    match (ours.network, &theirs.net) {
        (Network::Arp(a), Some(NetSlice::Arp(b))) => {
            assert_eq!(a.operation, b.operation().0);
            assert_eq!(&a.source_hardware_addr.0[..], b.sender_hw_addr());
            assert_eq!(
                &a.source_protocol_addr.octets()[..],
                b.sender_protocol_addr()
            );
            assert_eq!(&a.target_hardware_addr.0[..], b.target_hw_addr());
            assert_eq!(
                &a.target_protocol_addr.octets()[..],
                b.target_protocol_addr()
            );
        }
        (Network::Ipv4 { repr, payload }, Some(NetSlice::Ipv4(b))) => {
            let h = b.header();
            assert_eq!(repr.src_addr, h.source_addr());
            assert_eq!(repr.dst_addr, h.destination_addr());
            assert_eq!(repr.ttl, h.ttl());
            assert_eq!(repr.protocol, h.protocol().0);
            assert_eq!(repr.ident, h.identification());
            assert_eq!(repr.frag_offset, h.fragments_offset().value());
            assert_eq!(
                (repr.dont_frag, repr.more_frags),
                (h.dont_fragment(), h.more_fragments())
            );
            assert_eq!(
                usize::from(h.total_len()),
                repr.header_len() + repr.payload_len
            );
            if repr.protocol != ip_proto::AH {
                assert_eq!(payload, b.payload().payload, "IPv4 payload");
            }
        }
        (
            Network::Ipv6 {
                repr,
                chain,
                payload,
            },
            Some(NetSlice::Ipv6(b)),
        ) => {
            let h = b.header();
            if h.payload_length() == 0 {
                // etherparse reads a zero payload length as "the rest of the slice" (its
                // leniency for jumbograms and coalesced receives); without a jumbo option
                // RFC 8200 makes it an empty payload, which is what fibre-wire reads.
                return Outcome::Skipped;
            }
            assert_eq!(repr.src_addr, h.source_addr());
            assert_eq!(repr.dst_addr, h.destination_addr());
            assert_eq!(repr.hop_limit, h.hop_limit());
            assert_eq!(repr.next_header, h.next_header().0);
            assert_eq!(repr.traffic_class, h.traffic_class());
            assert_eq!(repr.flow_label, h.flow_label().value());
            assert_eq!(repr.payload_len, usize::from(h.payload_length()));
            if chain.protocol != ip_proto::AH && !chain.later_fragment {
                assert_eq!(chain.protocol, b.payload().ip_number.0, "final protocol");
                assert_eq!(
                    &payload[chain.offset..],
                    b.payload().payload,
                    "upper-layer bytes"
                );
                let fragmenting = chain.fragment_at.is_some_and(|at| {
                    let f = ipv6_ext::Fragment::new_checked(&payload[at..]).unwrap();
                    f.frag_offset() != 0 || f.more_frags()
                });
                assert_eq!(fragmenting, b.is_payload_fragmented(), "fragmented");
            } else if chain.later_fragment {
                assert!(b.is_payload_fragmented());
            }
        }
        (Network::Other { .. }, _) => return Outcome::Skipped,
        (ours, theirs) => panic!("network layers differ: {ours:?} vs {theirs:?}"),
    }

    match (&theirs.transport, ours.upper()) {
        // etherparse reads a UDP length of 0 as a jumbogram's (RFC 2675), which this crate does
        // not support: its view refuses the datagram.
        (Some(TransportSlice::Udp(t)), Some(_)) if t.length() == 0 => return Outcome::Skipped,
        (Some(TransportSlice::Udp(t)), Some(u)) => {
            assert_eq!(ours.ports(), Some((t.source_port(), t.destination_port())));
            let p = udp::Packet::new_checked(u.bytes).unwrap();
            assert_eq!(p.length(), t.length());
        }
        (Some(TransportSlice::Tcp(t)), Some(_)) => {
            assert_eq!(ours.ports(), Some((t.source_port(), t.destination_port())));
        }
        (Some(TransportSlice::Icmpv4(t)), Some(u)) => {
            let r = icmp::Repr::parse(&icmp::Packet::new_checked(u.bytes).unwrap()).unwrap();
            assert_eq!(r.type_and_code(), (t.type_u8(), t.code_u8()));
        }
        (Some(TransportSlice::Icmpv6(t)), Some(u)) => {
            let p = icmpv6::Packet::new_checked(u.bytes).unwrap();
            assert_eq!((p.msg_type(), p.code()), (t.type_u8(), t.code_u8()));
            if let Ok(r) = icmpv6::Repr::parse(&p) {
                assert_eq!(r.type_and_code(), (t.type_u8(), t.code_u8()));
            }
        }
        (Some(t), None) => panic!("etherparse found {t:?} where the chain ends without one"),
        _ => {}
    }
    Outcome::Agreed
}

#[test]
fn known_frames_agree() {
    for (name, bytes) in known_frames() {
        // AH is the one chain end etherparse walks past; the scapy set has none.
        assert_eq!(compare(&bytes), Outcome::Agreed, "{name}");
    }
}

/// A frame etherparse's builder writes, from random fields.
fn built_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<([u8; 6], [u8; 6], [u8; 16], [u8; 16], u8)>(),
        0u8..3,
        (0u16..4096, 0u16..4096),
        any::<bool>(),
        0u8..4,
        any::<(u16, u16, u32, u16)>(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(
            |(
                (mac_a, mac_b, ip_a, ip_b, ttl),
                tags,
                (v1, v2),
                v6,
                upper,
                (sp, dp, seq, win),
                payload,
            )| {
                let b = PacketBuilder::ethernet2(mac_a, mac_b);
                let vid = |v| VlanId::try_new(v).unwrap();
                let mut out = Vec::new();
                // Each step of etherparse's builder is a type of its own, so one closure cannot
                // take the tag and IP choices: the two macros spell out every combination.
                macro_rules! finish {
                    ($ip:expr) => {
                        match upper {
                            0 => $ip.udp(sp, dp).write(&mut out, &payload),
                            1 => $ip.tcp(sp, dp, seq, win).syn().write(&mut out, &payload),
                            2 if v6 => $ip.icmpv6_echo_request(sp, dp).write(&mut out, &payload),
                            2 => $ip.icmpv4_echo_request(sp, dp).write(&mut out, &payload),
                            _ if v6 => $ip.icmpv6_echo_reply(sp, dp).write(&mut out, &payload),
                            _ => $ip.icmpv4_echo_reply(sp, dp).write(&mut out, &payload),
                        }
                    };
                }
                macro_rules! ip {
                    ($l:expr) => {
                        if v6 {
                            finish!($l.ipv6(ip_a, ip_b, ttl))
                        } else {
                            let a4 = [ip_a[0], ip_a[1], ip_a[2], ip_a[3]];
                            let b4 = [ip_b[0], ip_b[1], ip_b[2], ip_b[3]];
                            finish!($l.ipv4(a4, b4, ttl))
                        }
                    };
                }
                match tags {
                    0 => ip!(b),
                    1 => ip!(b.single_vlan(vid(v1))),
                    _ => ip!(b.double_vlan(vid(v1), vid(v2))),
                }
                .unwrap();
                out
            },
        )
}

/// An IPv6 frame whose extension chain this crate writes: optional hop-by-hop, up to three
/// destination-options headers, an optional routing header, an optional fragment header with a
/// random offset, then UDP.
fn own_chain_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        0usize..4,
        any::<bool>(),
        proptest::option::of((0u16..8, any::<bool>())),
        0u8..3,
        any::<(u16, u16)>(),
    )
        .prop_map(|(hbh, dest, routing, frag, pad_units, (sp, dp))| {
            let mut kinds = Vec::new();
            if hbh {
                kinds.push(ip_proto::HOP_BY_HOP);
            }
            kinds.extend(std::iter::repeat_n(ip_proto::IPV6_DEST_OPTS, dest));
            if routing {
                kinds.push(ip_proto::IPV6_ROUTING);
            }
            if frag.is_some() {
                kinds.push(ip_proto::IPV6_FRAGMENT);
            }
            let mut chain = Vec::new();
            for (i, &k) in kinds.iter().enumerate() {
                let next = kinds.get(i + 1).copied().unwrap_or(ip_proto::UDP);
                let at = chain.len();
                if k == ip_proto::IPV6_FRAGMENT {
                    let (offset, more) = frag.unwrap();
                    chain.resize(at + 8, 0);
                    let r = ipv6_ext::FragmentRepr {
                        next_header: next,
                        frag_offset: offset,
                        more_frags: more,
                        ident: 7,
                    };
                    r.emit(&mut ipv6_ext::Fragment::new_unchecked(&mut chain[at..]));
                } else {
                    // PadN filling the header to (1 + pad_units) * 8 bytes; a routing header
                    // of an unknown type (253, for experiments) with no segments left.
                    let len = 8 * (1 + usize::from(pad_units));
                    chain.resize(at + len, 0);
                    let mut h = ipv6_ext::Header::new_unchecked(&mut chain[at..]);
                    h.set_head(next, len);
                    let d = h.data_mut();
                    if k == ip_proto::IPV6_ROUTING {
                        d[0] = 253;
                    } else {
                        d[0] = 1;
                        d[1] = (len - 4) as u8;
                    }
                }
            }
            let upper_at = chain.len();
            chain.resize(upper_at + 8, 0);
            let u = udp::Repr {
                src_port: sp,
                dst_port: dp,
                payload_len: 0,
            };
            u.emit(&mut udp::Packet::new_unchecked(&mut chain[upper_at..]));
            let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd];
            let at = frame.len();
            frame.resize(at + ipv6::HEADER_LEN, 0);
            let ip = ipv6::Repr {
                src_addr: "2001:db8::1".parse().unwrap(),
                dst_addr: "2001:db8::2".parse().unwrap(),
                next_header: kinds.first().copied().unwrap_or(ip_proto::UDP),
                payload_len: chain.len(),
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            };
            ip.emit(&mut ipv6::Packet::new_unchecked(&mut frame[at..]));
            frame.extend_from_slice(&chain);
            frame
        })
}

/// Up to 4 bytes set to random values, and maybe a truncation.
fn mutate(frame: Vec<u8>, edits: Vec<(usize, u8)>, cut: Option<usize>) -> Vec<u8> {
    let mut f = frame;
    for (at, v) in edits {
        if !f.is_empty() {
            let i = at % f.len();
            f[i] = v;
        }
    }
    if let Some(c) = cut {
        f.truncate(c % (f.len() + 1));
    }
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn frames_built_by_etherparse_agree(frame in built_frame()) {
        prop_assert_eq!(compare(&frame), Outcome::Agreed);
    }

    #[test]
    fn extension_chains_written_here_agree(frame in own_chain_frame()) {
        prop_assert_eq!(compare(&frame), Outcome::Agreed);
        let f = Frame::parse(&frame).unwrap();
        let Network::Ipv6 { chain, .. } = f.network else { panic!() };
        prop_assert!(chain.later_fragment || chain.protocol == ip_proto::UDP);
    }

    #[test]
    fn mutated_frames_agree_where_both_decode(
        which in any::<prop::sample::Index>(),
        built in built_frame(),
        own in own_chain_frame(),
        edits in proptest::collection::vec((0usize..200, any::<u8>()), 0..4),
        cut in proptest::option::of(any::<usize>()),
    ) {
        let known = known_frames();
        let pick = which.index(known.len() + 2);
        let base = match pick {
            0 => built,
            1 => own,
            i => known[i - 2].1.clone(),
        };
        compare(&mutate(base, edits, cut));
    }
}

/// The mutation test is not vacuous: most single-byte edits of the known frames still decode
/// on both sides and are compared field by field.
#[test]
fn most_mutations_are_compared() {
    let known = known_frames();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut agreed, total) = (0, 5000);
    for _ in 0..total {
        let (_, base) = &known[next() as usize % known.len()];
        let edits = vec![(next() as usize, next() as u8)];
        if compare(&mutate(base.clone(), edits, None)) == Outcome::Agreed {
            agreed += 1;
        }
    }
    assert!(
        agreed * 2 > total,
        "only {agreed} of {total} mutated frames compared"
    );
}
