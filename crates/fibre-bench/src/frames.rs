//! The forwarding benchmark's network and traffic, the same for fibre and for the kernel: a
//! router with an input link (`fbi0`) where one host sends, and an output link (`fbk0`, the
//! table-load benchmark's device) towards the table's 64 gateways, each a permanent neighbour
//! with its own MAC; 64-byte UDP frames from the host to destinations inside the table's
//! prefixes.
//!
//! A frame is 64 bytes as handed to the router (Ethernet header to the end of the UDP payload,
//! no FCS): IPv4 carries 22 bytes of UDP payload, IPv6 2. Every frame is addressed to the
//! router's input MAC, TTL / hop limit 64, with valid IPv4 header and UDP checksums.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fibre_wire::checksum::PseudoHeader;
use fibre_wire::ethernet::{self, Address};
use fibre_wire::{ipv4, ipv6, udp};

use crate::addrs::{self, RandomAddr, Rng};
use crate::kernel;
use crate::table::{Route, NEXT_HOPS};

/// Bytes of every frame (see the module documentation).
pub const FRAME_LEN: usize = 64;

/// The router's links: input, and output towards the gateways (as in `kernel.rs`).
pub const IN_DEV: &str = "fbi0";
pub const OUT_DEV: &str = kernel::DEV;
/// Their peers' names in the kernel benchmark's sender namespace.
pub const IN_PEER: &str = "fbi1";
pub const OUT_PEER: &str = "fbk1";

pub const ROUTER_IN_MAC: [u8; 6] = [0x02, 0xfb, 0, 0, 0, 0x01];
pub const ROUTER_OUT_MAC: [u8; 6] = [0x02, 0xfb, 0, 0, 1, 0x01];
pub const HOST_MAC: [u8; 6] = [0x02, 0xfb, 0, 0, 0, 0x02];
/// A unicast MAC no link has: frames sent to it are the kernel's PACKET_OTHERHOST, dropped at
/// the start of ip_rcv / ipv6_rcv (the kernel benchmark's baseline).
pub const NOBODY_MAC: [u8; 6] = [0x02, 0xfb, 0, 0, 0xee, 0xee];

/// The input subnet: the router is .1, the host .2.
pub const IN_ADDR4: &str = "10.254.0.1/24";
pub const IN_ADDR6: &str = "fd00:fe::1/64";
pub const HOST4: Ipv4Addr = Ipv4Addr::new(10, 254, 0, 2);
pub const HOST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xfe, 0, 0, 0, 0, 0, 2);
/// The output subnet (`kernel.rs`'s): the router is .1, next hop n is gateway .(n+2).
pub const OUT_ADDR4: &str = "10.255.0.1/24";
pub const OUT_ADDR6: &str = "fd00:fb::1/64";

/// Gateway `n`'s address, as `kernel.rs`'s route lines name it.
pub fn gateway4(n: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 255, 0, (n + 2) as u8)
}

pub fn gateway6(n: u32) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0xfb, 0, 0, 0, 0, 0, (n + 2) as u16)
}

/// Gateway `n`'s MAC.
pub fn gateway_mac(n: u32) -> [u8; 6] {
    [0x02, 0xfb, 1, 0, 0, (n + 2) as u8]
}

/// The gateways, with their MACs, for both families.
pub fn gateways() -> impl Iterator<Item = (IpAddr, [u8; 6])> {
    (0..NEXT_HOPS).flat_map(|n| {
        [
            (IpAddr::V4(gateway4(n)), gateway_mac(n)),
            (IpAddr::V6(gateway6(n)), gateway_mac(n)),
        ]
    })
}

/// An address family of the benchmark: its key type's conversion to an address, and the host
/// sending.
pub trait Family: RandomAddr + Send + Sync {
    const NAME: &'static str;
    /// The output link's subnet.
    const OUT_NET: (Self, u8);
    fn ip(self) -> IpAddr;
    /// The kernel's `route add` lines for `routes`, their count and the routes left out
    /// (`kernel.rs`'s).
    fn route_lines(routes: &[Route<Self>]) -> (String, usize, usize);
}

impl Family for u32 {
    const NAME: &'static str = "IPv4";
    const OUT_NET: (u32, u8) = kernel::NET4;
    fn ip(self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(self))
    }
    fn route_lines(routes: &[Route<u32>]) -> (String, usize, usize) {
        kernel::route_lines(routes, kernel::NET4, kernel::v4_line)
    }
}

impl Family for u128 {
    const NAME: &'static str = "IPv6";
    const OUT_NET: (u128, u8) = kernel::NET6;
    fn ip(self) -> IpAddr {
        IpAddr::V6(Ipv6Addr::from(self))
    }
    fn route_lines(routes: &[Route<u128>]) -> (String, usize, usize) {
        kernel::route_lines(routes, kernel::NET6, kernel::v6_line)
    }
}

/// `n` destinations inside the table's prefixes (a route picked uniformly, random host bits),
/// keeping those `keep` accepts (the router forwards them), up to `4n` draws; the drawn count
/// is returned beside them.
pub fn destinations<A: Family>(
    routes: &[Route<A>],
    n: usize,
    seed: u64,
    mut keep: impl FnMut(A) -> bool,
) -> (Vec<A>, usize) {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(n);
    let mut drawn = 0;
    while out.len() < n && drawn < 4 * n {
        let chunk = addrs::inside(routes, n - out.len(), &mut rng);
        drawn += chunk.len();
        out.extend(chunk.into_iter().filter(|&a| keep(a)));
    }
    (out, drawn)
}

/// One frame per destination, back to back (`FRAME_LEN` bytes each), from the host to the
/// router's input MAC.
pub fn build<A: Family>(dsts: &[A]) -> Vec<u8> {
    let host = |d: IpAddr| match d {
        IpAddr::V4(_) => IpAddr::V4(HOST4),
        IpAddr::V6(_) => IpAddr::V6(HOST6),
    };
    let packets: Vec<Packet> = dsts
        .iter()
        .map(|d| Packet {
            dst: d.ip(),
            src: host(d.ip()),
            tos: 0,
        })
        .collect();
    build_packets(&packets)
}

/// What varies between the frames of a workload: the addresses and the tos (IPv6: the
/// traffic class).
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    pub dst: IpAddr,
    pub src: IpAddr,
    pub tos: u8,
}

/// One frame per packet, back to back, to the router's input MAC; the source and destination
/// of a packet are of one family.
pub fn build_packets(packets: &[Packet]) -> Vec<u8> {
    let mut out = vec![0u8; packets.len() * FRAME_LEN];
    for (i, (frame, p)) in out.chunks_exact_mut(FRAME_LEN).zip(packets).enumerate() {
        write_frame(frame, p, i as u16);
    }
    out
}

/// Writes one frame of `p`; `seq` varies the IPv4 ID and the source port.
fn write_frame(frame: &mut [u8], p: &Packet, seq: u16) {
    let dst = p.dst;
    let ethertype = if dst.is_ipv4() { 0x0800 } else { 0x86dd };
    let mut eth = ethernet::Frame::new_unchecked(&mut *frame);
    ethernet::Repr {
        dst_addr: Address(ROUTER_IN_MAC),
        src_addr: Address(HOST_MAC),
        ethertype,
    }
    .emit(&mut eth);
    let ip = &mut frame[ethernet::HEADER_LEN..];
    let sport = 1024 + (seq % 60000);
    let (l4, pseudo) = match dst {
        IpAddr::V4(d) => {
            let IpAddr::V4(src) = p.src else {
                unreachable!("a packet's addresses are of one family")
            };
            let repr = ipv4::Repr {
                src_addr: src,
                dst_addr: d,
                protocol: 17,
                payload_len: ip.len() - ipv4::HEADER_LEN,
                ttl: 64,
                tos: p.tos,
                ident: seq,
                reserved_flag: false,
                dont_frag: false,
                more_frags: false,
                frag_offset: 0,
                options: Default::default(),
            };
            repr.emit(&mut ipv4::Packet::new_unchecked(&mut *ip));
            (ipv4::HEADER_LEN, PseudoHeader::V4 { src, dst: d })
        }
        IpAddr::V6(d) => {
            let IpAddr::V6(src) = p.src else {
                unreachable!("a packet's addresses are of one family")
            };
            let repr = ipv6::Repr {
                src_addr: src,
                dst_addr: d,
                next_header: 17,
                payload_len: ip.len() - ipv6::HEADER_LEN,
                hop_limit: 64,
                traffic_class: p.tos,
                flow_label: 0,
            };
            repr.emit(&mut ipv6::Packet::new_unchecked(&mut *ip));
            (ipv6::HEADER_LEN, PseudoHeader::V6 { src, dst: d })
        }
    };
    let l4 = &mut ip[l4..];
    let payload_len = l4.len() - udp::HEADER_LEN;
    let mut u = udp::Packet::new_unchecked(l4);
    udp::Repr {
        src_port: sport,
        dst_port: 9,
        payload_len,
    }
    .emit(&mut u);
    u.fill_checksum(&pseudo);
}

/// The frames with their destination MAC replaced by `mac`.
pub fn readdressed(frames: &[u8], mac: [u8; 6]) -> Vec<u8> {
    let mut out = frames.to_vec();
    for f in out.chunks_exact_mut(FRAME_LEN) {
        f[..6].copy_from_slice(&mac);
    }
    out
}

/// The kernel's route lines and fibre's routes leave out a route equal to the output link's
/// subnet (it would collide with the connected route; `kernel.rs`).
pub fn own_subnet<A: Family>(r: &Route<A>) -> bool {
    (r.prefix, r.len) == A::OUT_NET
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_64_bytes_of_checked_udp_to_the_router() {
        let frames = build(&[0x0102_0304u32]);
        assert_eq!(frames.len(), FRAME_LEN);
        let eth = ethernet::Frame::new_checked(&frames[..]).unwrap();
        assert_eq!(eth.dst_addr(), Address(ROUTER_IN_MAC));
        let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
        assert!(ip.verify_checksum().is_ok());
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(1, 2, 3, 4));
        assert_eq!(
            usize::from(ip.total_len()),
            FRAME_LEN - ethernet::HEADER_LEN
        );
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        let pseudo = PseudoHeader::V4 {
            src: HOST4,
            dst: ip.dst_addr(),
        };
        assert!(u.verify_checksum(&pseudo).is_ok());

        let d6 = 0x2001_0db8u128 << 96 | 7;
        let frames = build(&[d6]);
        let eth = ethernet::Frame::new_checked(&frames[..]).unwrap();
        let ip = ipv6::Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.dst_addr(), Ipv6Addr::from(d6));
        assert_eq!(ip.hop_limit(), 64);
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        let pseudo = PseudoHeader::V6 {
            src: HOST6,
            dst: ip.dst_addr(),
        };
        assert!(u.verify_checksum(&pseudo).is_ok());
        assert_eq!(readdressed(&frames, NOBODY_MAC)[..6], NOBODY_MAC);
    }
}
