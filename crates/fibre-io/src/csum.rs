//! Completing a transport checksum the sender left to the hardware.
//!
//! A veth peer with transmit checksum offload on (the default) passes TCP and UDP packets
//! with CHECKSUM_PARTIAL: the checksum field holds only the pseudo-header's folded sum and the
//! "hardware" that would finish it is never reached. AF_PACKET marks such frames
//! TP_STATUS_CSUMNOTREADY; a router that forwards them must finish the sum first, as the
//! kernel's `skb_checksum_help` does, or the receiver drops them. The field's offset is not in
//! the ring's header, so it is found by parsing the frame (fibre-wire's `Frame`): IPv4, and
//! IPv6 after its extension chain; TCP and UDP, the only protocols the kernel offloads this
//! way on veth.

use fibre_wire::checksum;
use fibre_wire::consts::ip_proto;
use fibre_wire::frame::Frame;

/// Offset of the checksum field in a TCP header.
const TCP_CHECKSUM: usize = 16;
/// Offset of the checksum field in a UDP header.
const UDP_CHECKSUM: usize = 6;

/// Finishes the TCP or UDP checksum of `frame` in place: the one's-complement sum from the
/// transport header to the end of the IP packet, field included (it holds the pseudo-header's
/// sum), complemented; a zero result is sent as 0xFFFF (RFC 768; the kernel does the same for
/// TCP). False, and `frame` unchanged, when the frame is not an unfragmented TCP or UDP packet
/// that parses.
pub fn complete(frame: &mut [u8]) -> bool {
    let Some((field, start, end)) = locate(frame) else {
        return false;
    };
    let mut c = checksum::finish(checksum::sum(&frame[start..end]));
    if c == 0 {
        c = 0xFFFF;
    }
    frame[start + field..start + field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// The checksum field's offset in the transport header, and the transport segment's bounds.
fn locate(frame: &[u8]) -> Option<(usize, usize, usize)> {
    let parsed = Frame::parse(frame).ok()?;
    let upper = parsed.upper()?;
    let field = match upper.protocol {
        ip_proto::TCP => TCP_CHECKSUM,
        ip_proto::UDP => UDP_CHECKSUM,
        _ => return None,
    };
    if upper.bytes.len() < field + 2 {
        return None;
    }
    // `upper.bytes` is a subslice of `frame`: its offset is the distance between the starts.
    let start = upper.bytes.as_ptr() as usize - frame.as_ptr() as usize;
    Some((field, start, start + upper.bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn udp4(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + 8 + payload.len()) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = ip_proto::UDP;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 1, 2]);
        let c = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let udp = &mut f[34..42];
        udp[0..2].copy_from_slice(&1234u16.to_be_bytes());
        udp[2..4].copy_from_slice(&5678u16.to_be_bytes());
        udp[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// What a CHECKSUM_PARTIAL sender leaves: the pseudo-header's folded sum, not complemented.
    fn partial(frame: &mut [u8], l4: usize, field: usize, pseudo: u32) {
        let folded = !checksum::finish(pseudo);
        frame[l4 + field..l4 + field + 2].copy_from_slice(&folded.to_be_bytes());
    }

    #[test]
    fn completes_udp_over_ipv4() {
        let mut f = udp4(b"hello, odd");
        let len = (f.len() - 34) as u16;
        let pseudo = checksum::pseudo_v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 1, 2),
            ip_proto::UDP,
            len,
        );
        partial(&mut f, 34, UDP_CHECKSUM, pseudo);
        assert!(complete(&mut f));
        assert!(checksum::verifies(checksum::combine(&[
            pseudo,
            checksum::sum(&f[34..])
        ])));
        assert_ne!(&f[40..42], &[0, 0]);
    }

    #[test]
    fn completes_tcp_over_ipv6() {
        let src = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        let dst = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
        let tcp_len = 20 + 5;
        let mut f = vec![0u8; 14 + 40 + tcp_len];
        f[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
        f[14] = 0x60;
        f[18..20].copy_from_slice(&(tcp_len as u16).to_be_bytes());
        f[20] = ip_proto::TCP;
        f[21] = 64;
        f[22..38].copy_from_slice(&src.octets());
        f[38..54].copy_from_slice(&dst.octets());
        f[54 + 12] = 5 << 4;
        f[54 + 20..].copy_from_slice(b"abcde");
        let pseudo = checksum::pseudo_v6(src, dst, ip_proto::TCP, tcp_len as u32);
        partial(&mut f, 54, TCP_CHECKSUM, pseudo);
        assert!(complete(&mut f));
        assert!(checksum::verifies(checksum::combine(&[
            pseudo,
            checksum::sum(&f[54..])
        ])));
    }

    #[test]
    fn leaves_other_frames_alone() {
        let mut f = udp4(b"x");
        f[14 + 9] = 1;
        let c = checksum::checksum(&{
            let mut h = f[14..34].to_vec();
            h[10] = 0;
            h[11] = 0;
            h
        });
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let before = f.clone();
        assert!(!complete(&mut f));
        assert_eq!(f, before);
        let mut short = vec![0u8; 10];
        assert!(!complete(&mut short));
    }
}
