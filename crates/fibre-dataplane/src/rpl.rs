//! RPL source routing header insertion (RFC 6554) on an IPv6 packet's bytes, as the kernel's
//! rpl_iptunnel does it for an `encap rpl` route: the header goes right after the fixed IPv6
//! header, the route's first address becomes the destination, and the header lists the
//! route's other addresses and then the packet's own destination, compressed against the new
//! one (CmprI from the route, computed once: `fibre_fwd::encap::RplPush`; CmprE and the
//! padding from the packet's destination). The pipeline (`pipeline::srv6`) makes the room and
//! routes the result.
//!
//! Pure functions: [`added`] reads the destination, [`write_insert`] writes only the fixed
//! header's next header, payload length and destination and the bytes opened for it.

use core::net::Ipv6Addr;

use fibre_fwd::encap::RplPush;
use fibre_wire::consts::ip_proto;
use fibre_wire::{ipv6, rpl};

/// How the header for a packet to `dst` is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Octets the last address (`dst`) shares with the new destination, left out.
    pub cmpre: u8,
    /// Zero octets that end the header on an 8-octet boundary.
    pub pad: u8,
    /// The whole header's length: the bytes the packet grows by.
    pub len: usize,
}

/// The header [`write_insert`] writes for a packet to `dst`.
pub fn added(p: &RplPush, dst: &Ipv6Addr) -> Layout {
    let cmpre = rpl::elided(dst, &p.first);
    let body = p.template.len() + 16 - usize::from(cmpre);
    let len = body.next_multiple_of(8);
    Layout {
        cmpre,
        pad: (len - body) as u8,
        len,
    }
}

/// rpl_do_srh_inline: the IPv6 packet `ip` has `l.len` bytes opened after its fixed header
/// (`Buf::insert_after`), `l` from [`added`] for its destination; writes the header there and
/// makes the route's first address the destination.
pub fn write_insert(p: &RplPush, l: &Layout, ip: &mut [u8]) {
    let (hdr, rest) = ip.split_at_mut(fibre_wire::ipv6::HEADER_LEN);
    let mut h = ipv6::Packet::new_unchecked(hdr);
    let dst = h.dst_addr();
    let out = &mut rest[..l.len];
    let fixed = p.template.len();
    let last = 16 - usize::from(l.cmpre);
    out[..fixed].copy_from_slice(&p.template);
    out[fixed..fixed + last].copy_from_slice(&dst.octets()[usize::from(l.cmpre)..]);
    out[fixed + last..].fill(0);
    let mut r = rpl::Packet::new_unchecked(out);
    r.set_next_header(h.next_header());
    r.set_header_len(l.len);
    r.set_cmpr(p.cmpri, l.cmpre);
    r.set_pad(l.pad);
    h.set_next_header(ip_proto::IPV6_ROUTING);
    h.set_dst_addr(p.first);
    let plen = usize::from(h.payload_len()) + l.len;
    h.set_payload_len(plen as u16);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// The push for a route whose header stores `stored` (the first the new destination), as
    /// the route's built header holds them.
    fn push(stored: &[&str]) -> RplPush {
        let n = stored.len() as u8;
        let mut h = vec![0, 2 * n, rpl::ROUTING_TYPE, n, 0, 0, 0, 0];
        for x in stored {
            h.extend_from_slice(&a(x).octets());
        }
        RplPush::from_header(&h).unwrap()
    }

    fn packet(dst: &str, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; fibre_wire::ipv6::HEADER_LEN];
        let mut h = ipv6::Packet::new_unchecked(&mut v[..]);
        h.set_version_tc_flow(0, 0);
        h.set_next_header(17);
        h.set_hop_limit(64);
        h.set_payload_len(payload.len() as u16);
        h.set_src_addr(a("2001:db8:1::9"));
        h.set_dst_addr(a(dst));
        v.extend_from_slice(payload);
        v
    }

    fn insert(p: &RplPush, pkt: &[u8]) -> Vec<u8> {
        let dst = ipv6::Packet::new_unchecked(pkt).dst_addr();
        let l = added(p, &dst);
        let mut out = pkt[..40].to_vec();
        out.extend(std::iter::repeat_n(0xee, l.len));
        out.extend_from_slice(&pkt[40..]);
        write_insert(p, &l, &mut out);
        out
    }

    /// RFC 6554 section 3 by hand: a route through 2001:db8::2 then 2001:db8::3, a packet to
    /// 2001:db8::4. The new destination is 2001:db8::2; the header lists ::3 and the packet's
    /// destination ::4, each sharing 15 octets with it (CmprI = CmprE = 15): one octet each,
    /// six of padding, 16 bytes.
    #[test]
    fn addresses_under_one_prefix_carry_one_octet_each() {
        let p = push(&["2001:db8::2", "2001:db8::3"]);
        let out = insert(&p, &packet("2001:db8::4", b"udp!"));
        let h = ipv6::Packet::new_unchecked(&out[..]);
        assert_eq!(h.next_header(), 43);
        assert_eq!(h.dst_addr(), a("2001:db8::2"));
        assert_eq!(usize::from(h.payload_len()), 16 + 4);
        assert_eq!(
            &out[40..56],
            &[17, 1, 3, 2, 0xff, 0x60, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&out[56..], b"udp!");
        let r = rpl::Packet::new_checked(&out[40..56]).unwrap();
        assert_eq!(r.address_count(), 2);
        assert_eq!(r.address(0, h.dst_addr()), Some(a("2001:db8::3")));
        assert_eq!(r.address(1, h.dst_addr()), Some(a("2001:db8::4")));
    }

    /// Addresses that share less with the destination: CmprI from the route's (7 octets:
    /// 2001:db8:1:0 against 2001:db8:1:2 and :3), CmprE from the packet's destination (4:
    /// only 2001:db8 shared), the padding what completes 8.
    #[test]
    fn compression_follows_the_common_prefixes() {
        let p = push(&["2001:db8:1::2", "2001:db8:1:2::3", "2001:db8:1:3::3"]);
        assert_eq!(p.cmpri, 7);
        let dst = a("2001:db8:ffff::1");
        let l = added(&p, &dst);
        // 8 fixed, 2 x 9 carried, 12 for the last: 38, padded to 40.
        assert_eq!(
            l,
            Layout {
                cmpre: 4,
                pad: 2,
                len: 40
            }
        );
        let out = insert(&p, &packet("2001:db8:ffff::1", &[]));
        let r = rpl::Packet::new_checked(&out[40..80]).unwrap();
        assert_eq!(
            (r.cmpri(), r.cmpre(), r.pad(), r.segments_left()),
            (7, 4, 2, 3)
        );
        let first = a("2001:db8:1::2");
        assert_eq!(r.address(0, first), Some(a("2001:db8:1:2::3")));
        assert_eq!(r.address(1, first), Some(a("2001:db8:1:3::3")));
        assert_eq!(r.address(2, first), Some(dst));
        assert_eq!(&out[78..80], &[0, 0], "padding zeroed");
    }

    /// One stored address: the header holds the packet's destination alone; CmprI 15 as the
    /// kernel sets it for a list with no address but the last.
    #[test]
    fn one_address_route() {
        let p = push(&["2001:db8::2"]);
        let out = insert(&p, &packet("2001:db8::2", b""));
        let r = rpl::Packet::new_checked(&out[40..]).unwrap();
        // The destination equals the new one: 15 octets elided, the last still carried.
        assert_eq!((r.cmpri(), r.cmpre(), r.segments_left()), (15, 15, 1));
        assert_eq!(r.header_len(), 16);
        assert_eq!(r.address(0, a("2001:db8::2")), Some(a("2001:db8::2")));
    }
}
