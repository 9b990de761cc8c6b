//! Properties of the stages over random packets: the receive checks read well-formed packets
//! as fibre-wire's frame walk does, and fragmentation loses, adds and reorders nothing.

use std::net::{Ipv4Addr, Ipv6Addr};

use fibre_dataplane::frag::fragment_v4;
use fibre_dataplane::rx::{receive, Rx};
use fibre_packet::{Headroom, Pool, PoolConfig};
use fibre_wire::consts::{ethertype, ip_proto};
use fibre_wire::ethernet::{self, Address};
use fibre_wire::frame::{Frame, Network};
use fibre_wire::{ipv4, ipv6, OptionBytes};
use proptest::prelude::*;

const MAC: Address = Address([2, 0, 0, 0, 0, 1]);

fn ether(ty: u16, body: &[u8], padding: usize) -> Vec<u8> {
    let mut f = vec![0u8; ethernet::HEADER_LEN];
    ethernet::Repr {
        dst_addr: MAC,
        src_addr: Address([2, 0, 0, 0, 0, 2]),
        ethertype: ty,
    }
    .emit(&mut ethernet::Frame::new_unchecked(&mut f[..]));
    f.extend_from_slice(body);
    f.resize(f.len() + padding, 0);
    f
}

/// An IPv4 packet with `options` (NOPs and a record route), a UDP-like header and payload.
fn ipv4_packet(src: u32, dst: u32, nops: usize, payload: &[u8], df: bool) -> Vec<u8> {
    let mut opts = vec![1u8; nops];
    opts.extend_from_slice(&[7, 7, 4, 0, 0, 0, 0]);
    opts.resize(opts.len().next_multiple_of(4), 0);
    let r = ipv4::Repr {
        src_addr: Ipv4Addr::from(src),
        dst_addr: Ipv4Addr::from(dst),
        protocol: ip_proto::UDP,
        payload_len: payload.len(),
        ttl: 64,
        tos: 0,
        ident: 9,
        reserved_flag: false,
        dont_frag: df,
        more_frags: false,
        frag_offset: 0,
        options: OptionBytes::new(&opts).unwrap(),
    };
    let mut b = vec![0u8; r.header_len()];
    r.emit(&mut ipv4::Packet::new_unchecked(&mut b[..]));
    b.extend_from_slice(payload);
    b
}

proptest! {
    #[test]
    fn ipv4_meta_matches_the_frame_walk(
        src in 1u32..0xE000_0000, dst in 1u32..0xE000_0000, nops in 0usize..29,
        payload in proptest::collection::vec(any::<u8>(), 4..200), padding in 0usize..30,
    ) {
        let ip = ipv4_packet(src, dst, nops, &payload, true);
        let f = ether(ethertype::IPV4, &ip, padding);
        let Ok(Rx::Ip(m)) = receive(&f, MAC) else { panic!("refused") };
        let walked = Frame::parse(&f).unwrap();
        let Network::Ipv4 { repr, .. } = walked.network else { panic!("not IPv4") };
        prop_assert_eq!(m.src, std::net::IpAddr::V4(repr.src_addr));
        prop_assert_eq!(m.dst, std::net::IpAddr::V4(repr.dst_addr));
        prop_assert_eq!(usize::from(m.frame_len), f.len() - padding);
        prop_assert_eq!(usize::from(m.l4), 14 + repr.header_len());
        prop_assert_eq!(Some((m.sport, m.dport)), walked.ports());
        prop_assert!(m.df && m.options);
    }

    #[test]
    fn ipv6_meta_matches_the_frame_walk(
        src in any::<u128>(), dst in any::<u128>(), hop in 0u8..,
        payload in proptest::collection::vec(any::<u8>(), 8..200), padding in 0usize..30,
    ) {
        let (src, dst) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
        // The addresses the receive checks refuse are tested on their own.
        prop_assume!(!src.is_multicast() && !src.is_loopback() && !dst.is_loopback());
        prop_assume!(!dst.is_multicast() || dst.octets()[1] & 0x0F > 1);
        let mut ip = vec![0u8; 40];
        let mut p = ipv6::Packet::new_unchecked(&mut ip[..]);
        p.set_version_tc_flow(0, 0);
        p.set_payload_len(payload.len() as u16);
        p.set_next_header(ip_proto::UDP);
        p.set_hop_limit(hop);
        p.set_src_addr(src);
        p.set_dst_addr(dst);
        ip.extend_from_slice(&payload);
        let f = ether(ethertype::IPV6, &ip, padding);
        let Ok(Rx::Ip(m)) = receive(&f, MAC) else { panic!("refused") };
        let walked = Frame::parse(&f).unwrap();
        prop_assert_eq!(usize::from(m.frame_len), f.len() - padding);
        prop_assert_eq!((m.ttl, m.proto), (hop, ip_proto::UDP));
        prop_assert_eq!(Some((m.sport, m.dport)), walked.ports());
    }

    #[test]
    fn fragments_put_together_are_the_packet(
        nops in 0usize..29, len in 1usize..3000, mtu in 68u32..1600,
    ) {
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let ip = ipv4_packet(0x0a00_0001, 0x0a00_0002, nops, &payload, false);
        let hlen = ip.len() - len;
        prop_assume!(mtu as usize >= hlen + 8);
        let mut pool = Pool::new(PoolConfig {
            frames: 8,
            frame_size: 2048,
            large_frames: 1,
            large_frame_size: 4096,
            headroom: Headroom::default(),
        })
        .unwrap();
        let mut b = pool.alloc_large().unwrap();
        b.append(&mut pool, ip.len()).unwrap().copy_from_slice(&ip);
        let mut frags = Vec::new();
        fragment_v4(&mut pool, b, 0, mtu, |pool, f| {
            frags.push(f.data(pool).to_vec());
            pool.free(f);
        })
        .unwrap();
        let mut whole = Vec::new();
        for (i, f) in frags.iter().enumerate() {
            let p = ipv4::Packet::new_checked(&f[..]).unwrap();
            p.verify_checksum().unwrap();
            prop_assert!(f.len() <= mtu as usize);
            prop_assert_eq!(p.header_len(), hlen);
            prop_assert_eq!(usize::from(p.frag_offset()) * 8, whole.len());
            let last = i + 1 == frags.len();
            prop_assert_eq!(p.more_frags(), !last);
            prop_assert!(last || p.payload().len() % 8 == 0);
            whole.extend_from_slice(p.payload());
        }
        prop_assert_eq!(whole, payload);
        prop_assert_eq!(pool.available(), 8);
    }
}
