//! The assertions the `dataplane_rx` fuzz target and the corpus replay share: any frame goes
//! through the receive checks and, when they pass, through every later stage of this crate
//! as both a forwarded and a local packet, without a panic, and with these invariants:
//! - what [`receive`] returns lies inside the frame (offsets ordered, lengths in bounds);
//! - forwarding writes only the TTL or hop limit (and for IPv4 the checksum and options), and
//!   leaves an IPv4 header whose checksum verifies;
//! - every ICMP message built fits its family's limit and parses back with its checksum;
//! - fragments fit the MTU and their payloads, put together, are the packet's.
//!
//! It allocates (a pool per call): test and fuzz code only.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fibre_packet::{Headroom, Pool, PoolConfig};
use fibre_wire::ethernet::Address;
use fibre_wire::{checksum, icmpv6, ipv4};

use crate::forward::{
    compile_options, forward_options_v4, forward_v4, forward_v6, Ipv4Options, V4Route, V6Route,
};
use crate::frag::fragment_v4;
use crate::icmp::{
    build_error_v4, build_error_v6, echo_reply_v4, echo_reply_v6, eligible_v4, eligible_v6,
    IcmpError, V4Reply, V6Reply, MAX_ERROR_V4_LEN, MAX_ERROR_V6_LEN,
};
use crate::rx::{receive, Meta, Rx};

/// The link the frames come in on; the first byte of a fuzz input picks among these MACs and
/// MTUs so that both the host and the other classes are reached.
const MAC: Address = Address([2, 0, 0, 0, 0, 1]);
const MTUS: [u32; 4] = [68, 576, 1280, 1500];

/// Runs `frame` through every stage; panics on a broken invariant.
pub fn stages(frame: &[u8]) {
    let Some((&sel, frame)) = frame.split_first() else {
        return;
    };
    // The frame's own destination MAC becomes the link's on even selectors, so most inputs
    // are for this host.
    let mac = match (sel & 1, frame.get(..6)) {
        (0, Some(d)) => Address::from_bytes(d).unwrap_or(MAC),
        _ => MAC,
    };
    let mtu = MTUS[usize::from(sel >> 1) & 3];
    let Ok(Rx::Ip(m)) = receive(frame, mac) else {
        return;
    };
    assert!(m.l3 <= m.l4 && m.l4 <= m.frame_len && usize::from(m.frame_len) <= frame.len());
    let ip = &frame[usize::from(m.l3)..usize::from(m.frame_len)];
    match (m.src, m.dst) {
        (IpAddr::V4(_), IpAddr::V4(dst)) => v4(ip, &m, dst, mtu),
        (IpAddr::V6(_), IpAddr::V6(dst)) => v6(ip, &m, dst, mtu),
        _ => panic!("mixed families"),
    }
}

fn v4(orig: &[u8], m: &Meta, dst: Ipv4Addr, mtu: u32) {
    let mut ip = orig.to_vec();
    let options = if m.options {
        match compile_options(&mut ip, dst, 0, |a| a == dst) {
            Ok(o) => o,
            Err(e) => return error4(e.discard.icmp, &ip, m, e.options),
        }
    } else {
        Ipv4Options::default()
    };
    let mut out = [0u8; 2048];
    if let Ok(n) = echo_reply_v4(&ip, false, &reply(options), &mut out) {
        if n != 0 {
            check_icmp4(&out[..n], orig.len() + 40);
        }
    }
    let local = ip.clone();
    match forward_v4(&mut ip, m.l2, &V4Route { mtu }) {
        Err(d) => error4(d.icmp, &local, m, options),
        Ok(f) => {
            forward_options_v4(&mut ip, &options, Ipv4Addr::new(192, 0, 2, 1));
            assert_eq!(ip.len(), orig.len());
            ipv4::Packet::new_checked(&ip[..])
                .and_then(|p| p.verify_checksum())
                .expect("a forwarded header verifies");
            if f.fragment {
                fragments(&ip, mtu);
            }
        }
    }
}

fn reply(options: Ipv4Options) -> V4Reply {
    V4Reply {
        src: Ipv4Addr::new(192, 0, 2, 1),
        ident: 7,
        mtu: 1500,
        options,
        now_ms: 1,
    }
}

fn error4(icmp: Option<IcmpError>, ip: &[u8], m: &Meta, options: Ipv4Options) {
    let Some(IcmpError::V4(e)) = icmp else {
        assert!(icmp.is_none(), "an IPv6 error for IPv4");
        return;
    };
    if eligible_v4(ip, m.l2, false).is_err() {
        return;
    }
    let mut out = [0u8; MAX_ERROR_V4_LEN];
    if let Ok(n) = build_error_v4(e, ip, &reply(options), &mut out) {
        check_icmp4(&out[..n], MAX_ERROR_V4_LEN);
    }
}

fn check_icmp4(b: &[u8], max: usize) {
    assert!(b.len() <= max.max(28));
    let p = ipv4::Packet::new_checked(b).expect("an ICMP message parses");
    p.verify_checksum().expect("its header checksum verifies");
    assert!(checksum::verifies(checksum::sum(p.payload())));
}

fn fragments(ip: &[u8], mtu: u32) {
    let mut pool = Pool::new(PoolConfig {
        frames: 64,
        frame_size: 2048,
        large_frames: 2,
        large_frame_size: 65536 + 256,
        headroom: Headroom::default(),
    })
    .expect("a pool");
    let mut b = pool.alloc_large().expect("a large frame");
    b.append(&mut pool, ip.len())
        .expect("room")
        .copy_from_slice(ip);
    let hlen = ipv4::Packet::new_unchecked(ip).header_len();
    let mut payload = Vec::new();
    let r = fragment_v4(&mut pool, b, 0, mtu, |pool, f| {
        let d = f.data(pool);
        assert!(d.len() <= mtu as usize);
        let p = ipv4::Packet::new_checked(d).expect("a fragment parses");
        p.verify_checksum().expect("a fragment's checksum verifies");
        payload.extend_from_slice(p.payload());
        pool.free(f);
    });
    if r.is_ok() {
        assert_eq!(payload, &ip[hlen..]);
    }
    assert_eq!(pool.available(), 64);
}

fn v6(orig: &[u8], m: &Meta, dst: Ipv6Addr, mtu: u32) {
    let mut out = [0u8; 2048];
    let l4 = usize::from(m.l4 - m.l3);
    if let Ok(n) = echo_reply_v6(orig, l4, dst, 0, &mut out) {
        if n != 0 {
            check_icmp6(&out[..n], orig.len());
        }
    }
    let mut ip = orig.to_vec();
    let route = V6Route {
        mtu,
        same_link: mtu == 576,
    };
    match forward_v6(&mut ip, m.l2, &route) {
        Ok(_) => assert_eq!((&ip[..7], &ip[8..]), (&orig[..7], &orig[8..])),
        Err(d) => {
            let Some(IcmpError::V6(e)) = d.icmp else {
                return;
            };
            if eligible_v6(e, &ip, m.l2).is_err() {
                return;
            }
            let reply = V6Reply {
                src: Ipv6Addr::LOCALHOST,
                flow_label: 1,
            };
            let mut out = [0u8; MAX_ERROR_V6_LEN];
            if let Ok(n) = build_error_v6(e, &ip, &reply, &mut out) {
                check_icmp6(&out[..n], MAX_ERROR_V6_LEN);
            }
        }
    }
}

fn check_icmp6(b: &[u8], max: usize) {
    assert!(b.len() <= max.max(48));
    let p = fibre_wire::ipv6::Packet::new_checked(b).expect("an ICMPv6 message parses");
    icmpv6::Packet::new_checked(p.payload())
        .and_then(|i| i.verify_checksum(p.src_addr(), p.dst_addr()))
        .expect("its checksum verifies");
}

#[cfg(test)]
mod tests {
    /// The frames fibre-wire's tests and fuzz targets start from, through every stage, with
    /// each selector.
    #[test]
    fn known_frames_pass_every_stage() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fibre-wire/tests/frames");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "bin") {
                let frame = std::fs::read(&path).unwrap();
                for sel in 0..8u8 {
                    let mut input = vec![sel];
                    input.extend_from_slice(&frame);
                    super::stages(&input);
                }
                n += 1;
            }
        }
        assert!(n > 20, "{n} frames");
    }
}
