//! SRv6 on IP packets' bytes (RFC 8754, RFC 8986), as the kernel's seg6_iptunnel.c and
//! seg6_local.c do it: the fields an encapsulation fills per packet, the SRH a behaviour
//! reads and advances, and the decapsulation of the inner packet. Pure functions over an IP
//! packet's bytes; the pipeline (`pipeline::srv6`) places the headers and routes the result.
//!
//! Every function reads only the slice it is given and writes only what its comment names;
//! a packet a function cannot read is refused with [`Srv6Drop`], never a panic.

use core::net::Ipv6Addr;

use fibre_fwd::encap::{PushHmac, Seg6Push};
use fibre_fwd::FwdTable;
use fibre_wire::consts::ip_proto;
use fibre_wire::{ipv6, srh};

use crate::drop::DropReason;

/// The 20 bits of a flow label.
const FLOW_LABEL_MASK: u32 = 0xf_ffff;

/// Why an SRv6 stage refused a packet. `Copy`: returned by value on the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Srv6Drop {
    /// No SRH where the behaviour needs one, an SRH that fails seg6_validate_srh, a routing
    /// header of another type, or Segments Left 0 for a behaviour that advances
    /// (get_and_validate_srh refuses all of these; the kernel frees the packet without a
    /// reason).
    BadSrh,
    /// An SRH whose HMAC TLV names a key id `ip sr hmac` does not hold (seg6_hmac_validate_skb,
    /// seg6_push_hmac).
    Hmac,
    /// No HMAC TLV on a link that requires one (seg6_require_hmac above 0).
    HmacMissing,
    /// An HMAC TLV that does not hold the HMAC its key computes, or one Linux cannot compute
    /// (a list longer than `fibre_fwd::hmac::MAX_SEGMENTS`).
    HmacMismatch,
    /// Decapsulation found no inner packet of the behaviour's protocol, or the SRH still had
    /// segments left (decap_and_validate).
    NoInner,
}

impl Srv6Drop {
    /// The drop reason counted.
    pub fn reason(self) -> DropReason {
        match self {
            Srv6Drop::BadSrh => DropReason::Seg6BadSrh,
            Srv6Drop::Hmac => DropReason::Seg6Hmac,
            Srv6Drop::HmacMissing => DropReason::Seg6HmacMissing,
            Srv6Drop::HmacMismatch => DropReason::Seg6HmacMismatch,
            Srv6Drop::NoInner => DropReason::Seg6NoInner,
        }
    }
}

/// How a received SRH's HMAC is checked (seg6_hmac_validate_skb): the input link's
/// `seg6_require_hmac` and the keys of `ip sr hmac`.
#[derive(Clone, Copy)]
pub struct HmacCheck<'a> {
    pub require: i32,
    pub keys: &'a FwdTable,
}

impl<'a> HmacCheck<'a> {
    /// For an SRH checked already: passes it again without computing anything.
    pub fn done(keys: &'a FwdTable) -> HmacCheck<'a> {
        HmacCheck { require: -1, keys }
    }

    /// Checks the SRH at `at` of IPv6 packet `ip` (held whole): below 0 nothing; an SRH
    /// without the HMAC TLV Linux reads (`srh::Packet::hmac_tlv_at`) passes unless the link
    /// requires one; one with it must name a known key and hold the HMAC of the packet's
    /// source and SRH under it.
    pub fn check(&self, ip: &[u8], at: usize) -> Result<(), Srv6Drop> {
        let len = (usize::from(*ip.get(at + 1).ok_or(Srv6Drop::BadSrh)?) + 1) * 8;
        let b = ip.get(at..at + len).ok_or(Srv6Drop::BadSrh)?;
        let tlv = srh::Packet::new_checked(b)
            .ok()
            .and_then(|p| p.hmac_tlv_at());
        let Some(tlv) = tlv else {
            return match self.require > 0 {
                true => Err(Srv6Drop::HmacMissing),
                false => Ok(()),
            };
        };
        if self.require < 0 {
            return Ok(());
        }
        let id = tlv + srh::HMAC_KEY_ID_AT;
        let id = u32::from_be_bytes([b[id], b[id + 1], b[id + 2], b[id + 3]]);
        let key = self.keys.hmac_key(id).ok_or(Srv6Drop::Hmac)?;
        let src = ipv6::Packet::new_unchecked(ip).src_addr().octets();
        match key.verify(&src, b, tlv) {
            true => Ok(()),
            false => Err(Srv6Drop::HmacMismatch),
        }
    }
}

/// seg6_make_flowlabel: the outer flow label for `setting` (net.ipv6.seg6_flowlabel), the
/// inner packet's flow label when it is IPv6, and the packet's flow hash.
pub fn flow_label(setting: i32, inner_v6: Option<u32>, hash: u32) -> u32 {
    match (setting, inner_v6) {
        (s, _) if s > 0 => hash.rotate_left(16) & FLOW_LABEL_MASK,
        (0, Some(l)) => l,
        _ => 0,
    }
}

/// A flow hash of the fields the kernel's flow dissector keys on (addresses, protocol,
/// ports). The kernel keys its hash with a secret drawn at boot, so no other router matches
/// its values; this one is fibre's, stable for a flow.
pub fn flow_hash(src: &[u8], dst: &[u8], proto: u8, ports: (u16, u16)) -> u32 {
    // FNV-1a over the fields, then a final avalanche (the murmur3 finalizer).
    let mut h: u32 = 0x811c_9dc5;
    let mut eat = |b: u8| h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    src.iter().chain(dst).for_each(|b| eat(*b));
    eat(proto);
    ports.0.to_be_bytes().iter().for_each(|b| eat(*b));
    ports.1.to_be_bytes().iter().for_each(|b| eat(*b));
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// The per-packet fields of an encapsulation's outer header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outer {
    pub traffic_class: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
    /// The payload's protocol: `ip_proto::IPV6`, `ip_proto::IPIP` or `ip_proto::ETHERNET`.
    pub next: u8,
}

/// seg6_do_srh_encap (and _red): writes `p`'s headers into `out` (exactly `p.added()` bytes,
/// in front of a payload of `payload_len` bytes) with the per-packet fields of `o`.
pub fn write_encap(p: &Seg6Push, out: &mut [u8], payload_len: usize, o: &Outer) {
    out.copy_from_slice(&p.template);
    let plen = out.len() - fibre_wire::ipv6::HEADER_LEN + payload_len;
    let mut h = ipv6::Packet::new_unchecked(&mut out[..fibre_wire::ipv6::HEADER_LEN]);
    h.set_version_tc_flow(o.traffic_class, o.flow_label);
    h.set_payload_len(plen as u16);
    h.set_hop_limit(o.hop_limit);
    match p.srh_at {
        Some(at) => out[at] = o.next,
        None => out[6] = o.next,
    }
}

/// seg6_do_srh_inline: the IPv6 packet `ip` has `p.added()` bytes opened after its fixed
/// header (`Buf::insert_after`); writes the SRH there, its last segment the packet's
/// destination, and makes the first segment the destination; then the HMAC, when the SRH
/// carries one (seg6_push_hmac over the packet's source). [`Srv6Drop::HmacMismatch`] when it
/// cannot be computed (the packet is to be dropped).
pub fn write_insert(p: &Seg6Push, ip: &mut [u8]) -> Result<(), Srv6Drop> {
    let added = p.added();
    let (hdr, rest) = ip.split_at_mut(fibre_wire::ipv6::HEADER_LEN);
    let srh = &mut rest[..added];
    srh.copy_from_slice(&p.template);
    let mut h = ipv6::Packet::new_unchecked(hdr);
    srh[0] = h.next_header();
    srh[fibre_wire::srh::HEADER_LEN..fibre_wire::srh::HEADER_LEN + fibre_wire::srh::SEGMENT_LEN]
        .copy_from_slice(&h.dst_addr().octets());
    h.set_next_header(ip_proto::IPV6_ROUTING);
    h.set_dst_addr(p.first);
    let len = usize::from(h.payload_len()) + added;
    h.set_payload_len(len as u16);
    match &p.hmac {
        PushHmac::Ready => Ok(()),
        PushHmac::PerPacket { key, tlv_at } => {
            let src = h.src_addr().octets();
            match key.fill(&src, srh, *tlv_at) {
                true => Ok(()),
                false => Err(Srv6Drop::HmacMismatch),
            }
        }
        PushHmac::Fail => Err(Srv6Drop::Hmac),
    }
}

/// Where the SRH of IPv6 packet `ip` starts, if it has one: the first routing header
/// after hop-by-hop and destination options (ipv6_find_hdr); `Err` for a routing header that
/// is no SRH or a chain that ends before its header does.
pub fn find_srh(ip: &[u8]) -> Result<Option<usize>, Srv6Drop> {
    Ok(srh_and_link(ip)?.map(|(at, _)| at))
}

/// [`find_srh`], with where the next-header byte that names the SRH is (6 in the fixed
/// header, else the first byte of the extension header before it).
fn srh_and_link(ip: &[u8]) -> Result<Option<(usize, usize)>, Srv6Drop> {
    let mut next = ipv6::Packet::new_unchecked(ip).next_header();
    let mut link = NEXT_HEADER_AT;
    let mut at = fibre_wire::ipv6::HEADER_LEN;
    loop {
        match next {
            ip_proto::IPV6_ROUTING => {
                let b = ip.get(at..at + 4).ok_or(Srv6Drop::BadSrh)?;
                return match b[2] {
                    srh::ROUTING_TYPE => Ok(Some((at, link))),
                    _ => Err(Srv6Drop::BadSrh),
                };
            }
            ip_proto::HOP_BY_HOP | ip_proto::IPV6_DEST_OPTS => {
                let b = ip.get(at..at + 2).ok_or(Srv6Drop::BadSrh)?;
                next = b[0];
                link = at;
                at += (usize::from(b[1]) + 1) * 8;
            }
            _ => return Ok(None),
        }
    }
}

/// Where the fixed IPv6 header keeps its next header.
const NEXT_HEADER_AT: usize = 6;

/// The upper-layer header of IPv6 packet `ip` past hop-by-hop, destination options and
/// routing headers (ipv6_find_hdr for the last header): its protocol and offset.
pub fn upper_layer(ip: &[u8]) -> Result<(u8, usize), Srv6Drop> {
    let mut next = ipv6::Packet::new_unchecked(ip).next_header();
    let mut at = fibre_wire::ipv6::HEADER_LEN;
    loop {
        match next {
            ip_proto::HOP_BY_HOP | ip_proto::IPV6_DEST_OPTS | ip_proto::IPV6_ROUTING => {
                let b = ip.get(at..at + 2).ok_or(Srv6Drop::NoInner)?;
                next = b[0];
                at += (usize::from(b[1]) + 1) * 8;
            }
            _ => return Ok((next, at)),
        }
    }
}

/// A packet at the end of its segment list, as an End, End.X or End.T with the USP or USD
/// flavor finds it (RFC 8986 4.16.2, 4.16.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ultimate {
    /// The SRH with Segments Left 0 and the next-header byte naming it, when there is one.
    pub srh: Option<(usize, usize)>,
    /// The upper-layer header's protocol.
    pub upper: u8,
}

/// Whether IPv6 packet `ip` is at the end of its segment list: no SRH, or one with Segments
/// Left 0 (`None` when segments are left: the behaviour runs as usual). An SRH that fails
/// validation or its HMAC check (`hmac`) is refused as [`valid_srh`] refuses it.
pub fn ultimate(ip: &[u8], hmac: &HmacCheck<'_>) -> Result<Option<Ultimate>, Srv6Drop> {
    let found = srh_and_link(ip)?;
    if let Some((at, _)) = found {
        let s = srh_at(ip, at)?;
        hmac.check(ip, at)?;
        if s.segments_left() > 0 {
            return Ok(None);
        }
    }
    let (upper, _) = upper_layer(ip)?;
    Ok(Some(Ultimate { srh: found, upper }))
}

/// get_and_validate_srh: the SRH of `ip`, checked as seg6_validate_srh checks packets'
/// (reduced lists allowed), its HMAC checked with `hmac`, with segments left; returns its
/// offset.
pub fn valid_srh(ip: &[u8], hmac: &HmacCheck<'_>) -> Result<usize, Srv6Drop> {
    let at = find_srh(ip)?.ok_or(Srv6Drop::BadSrh)?;
    let s = srh_at(ip, at)?;
    hmac.check(ip, at)?;
    if s.segments_left() == 0 {
        return Err(Srv6Drop::BadSrh);
    }
    Ok(at)
}

/// The SRH at `at`, validated against the bytes its length covers.
fn srh_at(ip: &[u8], at: usize) -> Result<srh::Packet<&[u8]>, Srv6Drop> {
    let len = (usize::from(*ip.get(at + 1).ok_or(Srv6Drop::BadSrh)?) + 1) * 8;
    let b = ip.get(at..at + len).ok_or(Srv6Drop::BadSrh)?;
    let s = srh::Packet::new_checked(b).map_err(|_| Srv6Drop::BadSrh)?;
    s.validate(len, true).map_err(|_| Srv6Drop::BadSrh)?;
    Ok(s)
}

/// advance_nextseg: Segments Left one lower, the destination the segment it now points at.
/// Returns the new Segments Left. `at` is a [`valid_srh`] offset.
pub fn advance(ip: &mut [u8], at: usize) -> u8 {
    let left = ip[at + 3] - 1;
    ip[at + 3] = left;
    let s = at + fibre_wire::srh::HEADER_LEN + usize::from(left) * fibre_wire::srh::SEGMENT_LEN;
    let mut seg = [0u8; fibre_wire::srh::SEGMENT_LEN];
    seg.copy_from_slice(&ip[s..s + fibre_wire::srh::SEGMENT_LEN]);
    ipv6::Packet::new_unchecked(ip).set_dst_addr(Ipv6Addr::from(seg));
    left
}

/// decap_and_validate: where the inner packet of protocol `proto` (after the IPv6 header and
/// any extension headers up to it) starts. An SRH on the way must have no segments left and
/// pass its HMAC check (`hmac`).
pub fn inner_at(ip: &[u8], proto: u8, hmac: &HmacCheck<'_>) -> Result<usize, Srv6Drop> {
    if let Some(at) = find_srh(ip).map_err(|_| Srv6Drop::NoInner)? {
        let s = srh_at(ip, at).map_err(|_| Srv6Drop::NoInner)?;
        if s.segments_left() > 0 {
            return Err(Srv6Drop::NoInner);
        }
        hmac.check(ip, at)?;
    }
    let (next, at) = upper_layer(ip)?;
    if next != proto || at >= ip.len() {
        return Err(Srv6Drop::NoInner);
    }
    Ok(at)
}

/// NEXT-C-SID (seg6_next_csid_is_arg_zero, seg6_next_csid_advance_arg): when the Argument of
/// `ip`'s destination (the bytes after a `block`-byte Locator-Block and a `func`-byte
/// Function) is not zero, moves it up by `func` bytes, zero-filling the end, and answers true;
/// false (and nothing changed) when it is zero.
pub fn next_csid(ip: &mut [u8], block: u8, func: u8) -> bool {
    let (b, f) = (usize::from(block), usize::from(func));
    let dst = &mut ip[24..40];
    if b + f >= dst.len() || dst[b + f..].iter().all(|x| *x == 0) {
        return false;
    }
    dst.copy_within(b + f.., b);
    let len = dst.len();
    dst[len - f..].fill(0);
    true
}

/// The PSP flavor: removes the SRH at `at` (right after the fixed header) from `ip`, moving
/// the IPv6 header over it; returns the SRH's length, the bytes the packet now starts later.
/// An SRH further in the chain stays (the kernel pops only one the fixed header leads to).
pub fn pop_srh(ip: &mut [u8], at: usize) -> usize {
    if at != fibre_wire::ipv6::HEADER_LEN {
        return 0;
    }
    remove_srh(ip, at, NEXT_HEADER_AT)
}

/// The USP flavor: removes the SRH at `at` wherever it is in the chain, `link` the byte that
/// names it (an [`Ultimate::srh`]), moving everything before it over it; returns the SRH's
/// length, the bytes the packet now starts later.
pub fn remove_srh(ip: &mut [u8], at: usize, link: usize) -> usize {
    let len = (usize::from(ip[at + 1]) + 1) * 8;
    ip[link] = ip[at];
    let mut h = ipv6::Packet::new_unchecked(&mut ip[..fibre_wire::ipv6::HEADER_LEN]);
    let plen = usize::from(h.payload_len()).saturating_sub(len);
    h.set_payload_len(plen as u16);
    ip.copy_within(0..at, len);
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check of a link at the default seg6_require_hmac, without keys.
    fn keyless() -> HmacCheck<'static> {
        HmacCheck {
            require: 0,
            keys: Box::leak(Box::default()),
        }
    }

    fn packet(next: u8, ext: &[u8], payload: usize) -> Vec<u8> {
        let mut v = vec![0u8; fibre_wire::ipv6::HEADER_LEN];
        v[0] = 0x60;
        v[6] = next;
        v[7] = 64;
        v.extend_from_slice(ext);
        v.extend(std::iter::repeat_n(0xab, payload));
        let plen = (v.len() - fibre_wire::ipv6::HEADER_LEN) as u16;
        v[4..6].copy_from_slice(&plen.to_be_bytes());
        v
    }

    fn srh(next: u8, left: u8, segs: &[Ipv6Addr]) -> Vec<u8> {
        let mut v = vec![
            next,
            (segs.len() * 2) as u8,
            4,
            left,
            segs.len() as u8 - 1,
            0,
            0,
            0,
        ];
        for s in segs {
            v.extend_from_slice(&s.octets());
        }
        v
    }

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn flow_labels_follow_the_sysctl() {
        assert_eq!(flow_label(0, Some(0x12345), 7), 0x12345);
        assert_eq!(flow_label(0, None, 7), 0);
        assert_eq!(flow_label(-1, Some(0x12345), 7), 0);
        assert_eq!(flow_label(1, None, 0x0001_0002), 0x2_0001 & FLOW_LABEL_MASK);
    }

    #[test]
    fn end_advances_and_psp_pops() {
        let segs = [a("fc00::3"), a("fc00::2")];
        let mut p = packet(43, &srh(17, 1, &segs), 8);
        let at = valid_srh(&p, &keyless()).unwrap();
        assert_eq!(advance(&mut p, at), 0);
        assert_eq!(ipv6::Packet::new_unchecked(&p).dst_addr(), a("fc00::3"));
        // Segments left 0: another End refuses it.
        assert_eq!(valid_srh(&p, &keyless()), Err(Srv6Drop::BadSrh));
        let cut = pop_srh(&mut p, at);
        assert_eq!(cut, 40);
        let h = ipv6::Packet::new_unchecked(&p[cut..]);
        assert_eq!(h.next_header(), 17);
        assert_eq!(usize::from(h.payload_len()), 8);
        assert_eq!(h.dst_addr(), a("fc00::3"));
    }

    #[test]
    fn next_csid_moves_the_argument_up() {
        let mut p = packet(17, &[], 8);
        p[24..40].copy_from_slice(&a("2001:db8:fa:77:88::").octets());
        assert!(next_csid(&mut p, 4, 2));
        assert_eq!(
            ipv6::Packet::new_unchecked(&p).dst_addr(),
            a("2001:db8:77:88::")
        );
        assert!(next_csid(&mut p, 4, 2));
        assert_eq!(
            ipv6::Packet::new_unchecked(&p).dst_addr(),
            a("2001:db8:88::")
        );
        assert!(!next_csid(&mut p, 4, 2), "no argument left");
    }

    #[test]
    fn malformed_srhs_are_refused() {
        let segs = [a("fc00::3"), a("fc00::2")];
        // Segments left beyond the list.
        let p = packet(43, &srh(17, 3, &segs), 8);
        assert_eq!(valid_srh(&p, &keyless()), Err(Srv6Drop::BadSrh));
        // A header length that disagrees with the last entry.
        let mut s = srh(17, 1, &segs);
        s[4] = 5;
        assert_eq!(
            valid_srh(&packet(43, &s, 8), &keyless()),
            Err(Srv6Drop::BadSrh)
        );
        // Cut short.
        let p = packet(43, &srh(17, 1, &segs), 0);
        assert_eq!(
            valid_srh(&p[..p.len() - 4], &keyless()),
            Err(Srv6Drop::BadSrh)
        );
        // Type 0.
        let mut s = srh(17, 1, &segs);
        s[2] = 0;
        assert_eq!(
            valid_srh(&packet(43, &s, 8), &keyless()),
            Err(Srv6Drop::BadSrh)
        );
        // None at all.
        assert_eq!(
            valid_srh(&packet(17, &[], 8), &keyless()),
            Err(Srv6Drop::BadSrh)
        );
    }

    #[test]
    fn the_ultimate_segment_is_found_with_or_without_an_srh() {
        let segs = [a("fc00::3"), a("fc00::2")];
        assert_eq!(
            ultimate(&packet(43, &srh(17, 1, &segs), 8), &keyless()),
            Ok(None)
        );
        let done = packet(43, &srh(ip_proto::IPV6, 0, &segs), 48);
        assert_eq!(
            ultimate(&done, &keyless()),
            Ok(Some(Ultimate {
                srh: Some((40, 6)),
                upper: ip_proto::IPV6
            }))
        );
        assert_eq!(
            ultimate(&packet(ip_proto::IPIP, &[], 20), &keyless()),
            Ok(Some(Ultimate {
                srh: None,
                upper: ip_proto::IPIP
            }))
        );
        let mut bad = srh(17, 0, &segs);
        bad[4] = 5;
        assert_eq!(
            ultimate(&packet(43, &bad, 8), &keyless()),
            Err(Srv6Drop::BadSrh)
        );
    }

    #[test]
    fn usp_removes_an_srh_behind_destination_options() {
        // IPv6, destination options (8 bytes), SRH with Segments Left 0, 8 bytes of UDP.
        let mut ext = vec![43, 0, 1, 4, 0, 0, 0, 0];
        ext.extend_from_slice(&srh(17, 0, &[a("fc00::3")]));
        let mut p = packet(60, &ext, 8);
        let u = ultimate(&p, &keyless()).unwrap().unwrap();
        assert_eq!(u.srh, Some((48, 40)));
        assert_eq!(u.upper, 17);
        let cut = remove_srh(&mut p, 48, 40);
        assert_eq!(cut, 24);
        let q = &p[cut..];
        let h = ipv6::Packet::new_unchecked(q);
        assert_eq!((h.next_header(), usize::from(h.payload_len())), (60, 16));
        assert_eq!(q[40], 17, "the destination options now lead to UDP");
        assert_eq!(upper_layer(q), Ok((17, 48)));
    }

    #[test]
    fn decapsulation_needs_the_list_done() {
        let inner = packet(17, &[], 8);
        let mut ext = srh(ip_proto::IPV6, 0, &[a("fc00::3")]);
        ext.extend_from_slice(&inner);
        let p = packet(43, &ext, 0);
        assert_eq!(
            inner_at(&p, ip_proto::IPV6, &keyless()),
            Ok(fibre_wire::ipv6::HEADER_LEN + 24)
        );
        assert_eq!(
            inner_at(&p, ip_proto::IPIP, &keyless()),
            Err(Srv6Drop::NoInner)
        );
        let mut ext = srh(ip_proto::IPV6, 1, &[a("fc00::3"), a("fc00::2")]);
        ext.extend_from_slice(&inner);
        assert_eq!(
            inner_at(&packet(43, &ext, 0), ip_proto::IPV6, &keyless()),
            Err(Srv6Drop::NoInner)
        );
        let mut plain = packet(ip_proto::IPV6, &[], 0);
        plain.extend_from_slice(&inner);
        assert_eq!(
            inner_at(&plain, ip_proto::IPV6, &keyless()),
            Ok(fibre_wire::ipv6::HEADER_LEN)
        );
    }

    /// seg6_hmac_validate_skb's cases: the link's seg6_require_hmac against an SRH without
    /// the TLV, with a good one (the HMAC of the packet's source under key 7), a bad one and
    /// one of an unknown key.
    #[test]
    fn hmac_checks_follow_require_hmac() {
        let mut fib = fibre_fib::Fib::default();
        fib.set_seg6_hmac(7, fibre_fib::seg6_hmac::algo::SHA1, b"abc")
            .unwrap();
        let (fwd, _) = fibre_fwd::FwdWriter::new(&fib);
        let keys = fwd.latest();
        let segs = [Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST];
        let plain = packet(43, &srh(17, 1, &segs), 8);
        let with_tlv = |key: u32| {
            let mut s = srh(17, 1, &segs);
            s[1] += 5;
            s[5] = srh::FLAG_HMAC;
            s.extend_from_slice(&[srh::tlv::HMAC, 38, 0, 0]);
            s.extend_from_slice(&key.to_be_bytes());
            s.extend_from_slice(&[0; 32]);
            packet(43, &s, 8)
        };
        let mut good = with_tlv(7);
        let at = fibre_wire::ipv6::HEADER_LEN;
        let k = keys.hmac_key(7).unwrap();
        let src = ipv6::Packet::new_unchecked(&good[..]).src_addr().octets();
        assert!(k.fill(&src, &mut good[at..], srh::HEADER_LEN + 32));
        let mut bad = good.clone();
        let last = bad.len() - 9;
        bad[last] ^= 1;
        let unknown = with_tlv(8);
        let check = |require, ip: &[u8]| HmacCheck { require, keys }.check(ip, at);
        for (require, ip, want) in [
            (-1, &plain, Ok(())),
            (-1, &bad, Ok(())),
            (0, &plain, Ok(())),
            (0, &good, Ok(())),
            (0, &bad, Err(Srv6Drop::HmacMismatch)),
            (0, &unknown, Err(Srv6Drop::Hmac)),
            (1, &plain, Err(Srv6Drop::HmacMissing)),
            (1, &good, Ok(())),
            (1, &bad, Err(Srv6Drop::HmacMismatch)),
        ] {
            assert_eq!(check(require, ip), want, "require {require}");
        }
    }
}
