//! Encapsulation objects ([`EncapObj`], by [`EncapIdx`]): what a next hop with an SRv6
//! encapsulation (`encap seg6`), endpoint behaviour (`encap seg6local`), IOAM trace
//! insertion (`encap ioam6`) or RPL source routing header insertion (`encap rpl`) does to a
//! packet,
//! compiled once from the FIB's built form so that the data path only copies bytes.
//!
//! A [`Seg6Push`] holds the header bytes an encapsulation writes (the outer IPv6 header and
//! the SRH, or the SRH alone for insertion) with every field that does not depend on the packet
//! already filled in: version, next header, addresses (the tunnel source resolved from `ip sr
//! tunsrc` or, when that is unset, the source the egress link would pick, as the kernel's
//! set_tun_src), the segment list. The data path patches the per-packet fields (traffic class,
//! flow label, payload length, hop limit, the SRH's next header, H.Insert's last segment).
//!
//! HMAC (RFC 8754 2.1.2): an SRH whose HMAC TLV Linux reads gets its HMAC as seg6_push_hmac
//! writes it ([`PushHmac`]). For an encapsulation the input (the tunnel source, the segment
//! list, the key) is the route's, so the HMAC is computed here, once, into the template;
//! an insertion authenticates the packet's own source and destination, so it is computed per
//! packet with the key compiled into the object (`crate::hmac`). The objects are compiled
//! again whenever a key changes (`compile`).
//!
//! Headroom: [`Seg6Push::need`] is the bytes the encapsulation adds plus the link-layer
//! header the rewrite prepends afterwards, known here, so a packet is checked once and copied
//! at most once (`fibre_packet::Buf::ensure_headroom`) before the headers go in, never twice
//! as the kernel's lightweight tunnels once did (a first check with the generic MAC length, a
//! second with the device's reserve, until the kernel computed the device's overhead from the
//! cached route once: dst_dev_overhead()).
//!
//! Invariants: every template's SRH passed fibre-wire's `srh::Packet::validate` when its route
//! was built (`fibre_fib::encap`); an object is compiled from one next hop and holds no
//! reference into the FIB.

use std::net::{Ipv4Addr, Ipv6Addr};

use fibre_fib::encap::{action, flavor, ioam6_mode, seg6_mode};
use fibre_fib::types::{Encap, Ioam6, Seg6Local};
use fibre_fib::Fib;
use fibre_wire::consts::ip_proto;

use crate::hmac::HmacKey;
use crate::table::REWRITE_LEN;

/// An encapsulation object's place in [`crate::FwdTable`]'s objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EncapIdx(pub(crate) u32);

impl EncapIdx {
    /// The index as a number below the number of objects a table ever held: per-object
    /// counters kept beside the table use it.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// How a [`Seg6Push`] puts its headers on a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushMode {
    /// H.Encaps and H.Encaps.Red: an outer IPv6 header (and an SRH, unless a reduced list
    /// leaves none) in front of the IP packet.
    Encap,
    /// The same in front of the Ethernet frame as received (l2encap, l2encap.red).
    L2Encap,
    /// H.Insert: the SRH after the packet's IPv6 header, its last segment the packet's
    /// destination.
    Insert,
}

/// The headers one SRv6 encapsulation or insertion writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seg6Push {
    pub mode: PushMode,
    /// The bytes written in front of (Encap, L2Encap) or after the IPv6 header of (Insert) the
    /// packet: outer IPv6 header then SRH, or the SRH alone.
    pub template: Vec<u8>,
    /// Where the SRH starts in `template`; `None` when the reduced encapsulation of one
    /// segment carries none (the outer header's next header is then the payload's).
    pub srh_at: Option<usize>,
    /// The new destination: the first segment of the path.
    pub first: Ipv6Addr,
    /// What is done about the SRH's HMAC per packet.
    pub hmac: PushHmac,
    /// Headroom the packet needs in front of its IP header (of its Ethernet header for
    /// L2Encap): `template.len()` plus the link-layer header.
    pub need: usize,
}

/// What a [`Seg6Push`] does about its SRH's HMAC TLV (seg6_push_hmac).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushHmac {
    /// Nothing per packet: the SRH has the HMAC flag clear, or its HMAC was computed into the
    /// template (encapsulations).
    Ready,
    /// Computed per packet with `key` (H.Insert, End.B6: the packet's source and destination
    /// are authenticated), into the TLV at `tlv_at` of the SRH.
    PerPacket { key: Box<HmacKey>, tlv_at: usize },
    /// Cannot be computed (the flag set without a TLV Linux reads, no key of the TLV's id, a
    /// list longer than `hmac::MAX_SEGMENTS`): every packet is dropped, as seg6_push_hmac's
    /// error drops it.
    Fail,
}

impl Seg6Push {
    /// The bytes the packet grows by.
    pub fn added(&self) -> usize {
        self.template.len()
    }
}

/// An SRv6 endpoint behaviour (RFC 8986) as the data path runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    End,
    /// Forward to this IPv6 neighbour.
    EndX(Ipv6Addr),
    /// Look the next segment up in this table.
    EndT(u32),
    /// Decapsulate, forward the inner IPv4 packet to this neighbour (0.0.0.0: by its
    /// destination).
    EndDx4(Ipv4Addr),
    /// Decapsulate, forward the inner IPv6 packet to this neighbour (`::`: by its destination).
    EndDx6(Ipv6Addr),
    /// Decapsulate, look the inner IPv6 packet up in this table (`table`, or the VRF
    /// table of `vrftable`).
    EndDt6(u32),
    /// Decapsulate, look the inner IPv4 packet up in this VRF table.
    EndDt4(u32),
    /// Decapsulate, look the inner IPv4 or IPv6 packet up in this VRF table.
    EndDt46(u32),
    /// Insert this SRH (End.B6) or encapsulate with it after the End processing
    /// (End.B6.Encaps).
    EndB6(Seg6Push),
    EndB6Encaps(Seg6Push),
}

/// A seg6local route's compiled behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalSid {
    pub behaviour: Behaviour,
    /// PSP: the penultimate segment's endpoint removes the SRH when it makes Segments Left 0.
    pub psp: bool,
    /// NEXT-C-SID (RFC 9800): the Locator-Block and Locator-Node Function lengths in bytes.
    /// A destination with a non-zero Argument (the bytes after both) carries the next
    /// compressed SID there: it moves up into the Function and the SRH is not touched.
    pub next_csid: Option<(u8, u8)>,
    /// USP (RFC 8986 4.16.2): a packet that arrives with Segments Left 0 loses its SRH and is
    /// delivered to the router.
    pub usp: bool,
    /// USD (RFC 8986 4.16.3): a packet that arrives with Segments Left 0 or no SRH and
    /// carries an IPv6 or IPv4 packet is decapsulated and the inner one routed (End.X: to
    /// its neighbour; End.T: in its table).
    pub usd: bool,
}

/// How an IOAM encapsulation puts its trace on a forwarded IPv6 packet (ioam6_output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ioam6Mode {
    /// A hop-by-hop header inserted after the packet's IPv6 header, when it has none.
    Inline,
    /// An outer IPv6 header (a copy of the packet's, to the tunnel destination) and the
    /// hop-by-hop header in front (ip6ip6). `auto` is this for forwarded packets.
    Encap,
}

/// The headers an IOAM encapsulation (`encap ioam6`) writes, as ioam6_build_state lays them
/// out: a hop-by-hop header of PadN(2), the IOAM option and the trace header as configured,
/// the zeroed node data, and a PadN(4) when the data leaves the header short of 8 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ioam6Push {
    pub mode: Ioam6Mode,
    /// The hop-by-hop header, its next header patched per packet.
    pub template: Vec<u8>,
    /// Encap mode: the tunnel source (the address the route's link picks for the
    /// destination, as ipv6_dev_get_saddr) and destination.
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    /// The route inserts into `k` of every `n` packets it forwards.
    pub k: u32,
    pub n: u32,
    /// Headroom needed in front of the IP header: the bytes added and the link-layer header.
    pub need: usize,
}

impl Ioam6Push {
    /// Where the IOAM option's trace header starts in the hop-by-hop header.
    pub const TRACE_AT: usize = 2 + 2 + 4;

    /// The bytes the packet grows by.
    pub fn added(&self) -> usize {
        self.template.len()
            + match self.mode {
                Ioam6Mode::Inline => 0,
                Ioam6Mode::Encap => fibre_wire::ipv6::HEADER_LEN,
            }
    }
}

/// The RPL source routing header an `encap rpl` route inserts (RFC 6554), as rpl_iptunnel's
/// rpl_do_srh_inline builds it: the route's first stored address becomes the destination; the
/// header lists the others and then the packet's own destination, compressed against the new
/// one. All but the last address are the route's, so their compression (CmprI) and carried
/// octets are computed here; only the last address's (CmprE) and the padding depend on the
/// packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RplPush {
    /// The header's fixed 8 bytes (routing type, Segments Left, CmprI; the rest patched per
    /// packet) and the carried octets of every address but the last.
    pub template: Vec<u8>,
    /// CmprI: the octets every address but the last shares with `first`.
    pub cmpri: u8,
    /// The new destination.
    pub first: Ipv6Addr,
    /// Headroom needed in front of the IP header: the largest header (the last address
    /// carried whole, 7 bytes of padding at most) and the link-layer header.
    pub need: usize,
}

/// What a next hop's encapsulation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncapObj {
    Seg6(Seg6Push),
    Seg6Local(LocalSid),
    /// Applied on output, after forwarding (an output redirect, unlike the SRv6 ones).
    Ioam6(Ioam6Push),
    /// Applied on input, before forwarding, as seg6's insertion is.
    Rpl(RplPush),
    /// An encapsulation the data path does not apply (seg6local behaviours fibre does
    /// not run: End.DX2): the packet is dropped and counted, as
    /// forwarding it bare would send what the route forbids.
    Unsupported,
}

/// The link-layer header every egress link prepends (fibre's adjacencies rewrite an untagged
/// Ethernet header).
pub const L2_RESERVE: usize = REWRITE_LEN;

/// The most bytes any next hop's encapsulation in `fib` adds in front of a packet: what the
/// pool's headroom must cover, beside the link-layer header, for no packet ever to be copied
/// (`fibre_packet::Headroom::new(largest_added(fib), L2_RESERVE)`). Compiles every such next
/// hop: a configuration-time cost.
pub fn largest_added(fib: &Fib) -> usize {
    fib.forward_hops()
        .filter_map(|h| Some((h.oif, fib.hop_encap(h.dst)?)))
        .map(|(oif, e)| match compile(fib, oif, e) {
            EncapObj::Seg6(p) => p.added(),
            EncapObj::Seg6Local(LocalSid {
                behaviour: Behaviour::EndB6(p) | Behaviour::EndB6Encaps(p),
                ..
            }) => p.added(),
            EncapObj::Ioam6(p) => p.added(),
            EncapObj::Rpl(p) => p.max_added(),
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

/// Compiles next hop `oif`'s encapsulation `e`, with the namespace's tunnel source.
pub(crate) fn compile(fib: &Fib, oif: u32, e: &Encap) -> EncapObj {
    match e {
        Encap::Seg6(s) => {
            let mode = match s.mode {
                seg6_mode::INLINE => Some((PushMode::Insert, false)),
                seg6_mode::ENCAP => Some((PushMode::Encap, false)),
                seg6_mode::ENCAP_RED => Some((PushMode::Encap, true)),
                seg6_mode::L2ENCAP => Some((PushMode::L2Encap, false)),
                seg6_mode::L2ENCAP_RED => Some((PushMode::L2Encap, true)),
                _ => None,
            };
            match mode.and_then(|(m, red)| push(fib, oif, m, red, &s.srh)) {
                Some(p) => EncapObj::Seg6(p),
                None => EncapObj::Unsupported,
            }
        }
        Encap::Seg6Local(l) => match local_sid(fib, oif, l) {
            Some(s) => EncapObj::Seg6Local(s),
            None => EncapObj::Unsupported,
        },
        Encap::Ioam6(i) => match ioam6(fib, oif, i) {
            Some(p) => EncapObj::Ioam6(p),
            None => EncapObj::Unsupported,
        },
        Encap::Rpl(r) => match RplPush::from_header(&r.srh) {
            Some(p) => EncapObj::Rpl(p),
            None => EncapObj::Unsupported,
        },
    }
}

impl RplPush {
    /// The insertion of a built `encap rpl` header (uncompressed, Segments Left its address
    /// count: `fibre_fib::encap`'s invariant); `None` for bytes that are not one.
    pub fn from_header(srh: &[u8]) -> Option<RplPush> {
        let h = fibre_wire::rpl::Packet::new_checked(srh).ok()?;
        let n = h.address_count();
        // Uncompressed: no octet is taken from the destination.
        let addr = |i: usize| h.address(i, Ipv6Addr::UNSPECIFIED);
        let first = addr(0)?;
        let init: Vec<Ipv6Addr> = (1..n).map(addr).collect::<Option<_>>()?;
        let cmpri = init
            .iter()
            .map(|a| fibre_wire::rpl::elided(a, &first))
            .min()
            .unwrap_or(fibre_wire::rpl::MAX_ELIDED);
        let mut template = vec![0u8; fibre_wire::rpl::HEADER_LEN];
        template[2] = fibre_wire::rpl::ROUTING_TYPE;
        template[3] = h.segments_left();
        for a in &init {
            template.extend_from_slice(&a.octets()[usize::from(cmpri)..]);
        }
        let mut p = RplPush {
            template,
            cmpri,
            first,
            need: 0,
        };
        p.need = p.max_added() + L2_RESERVE;
        Some(p)
    }

    /// The most bytes the packet grows by.
    pub fn max_added(&self) -> usize {
        (self.template.len() + 16).next_multiple_of(8)
    }
}

fn local_sid(fib: &Fib, oif: u32, l: &Seg6Local) -> Option<LocalSid> {
    let any6 = Ipv6Addr::UNSPECIFIED;
    let behaviour = match l.action {
        action::END => Behaviour::End,
        action::END_X => Behaviour::EndX(l.nh6?),
        action::END_T => Behaviour::EndT(l.table?),
        action::END_DX4 => Behaviour::EndDx4(l.nh4.unwrap_or(Ipv4Addr::UNSPECIFIED)),
        action::END_DX6 => Behaviour::EndDx6(l.nh6.unwrap_or(any6)),
        // VRF tables are served by the table itself: fibre has no VRF device to receive on.
        action::END_DT6 => Behaviour::EndDt6(l.table.or(l.vrftable)?),
        action::END_DT4 => Behaviour::EndDt4(l.vrftable?),
        action::END_DT46 => Behaviour::EndDt46(l.vrftable?),
        action::END_B6 => {
            Behaviour::EndB6(push(fib, oif, PushMode::Insert, false, l.srh.as_ref()?)?)
        }
        action::END_B6_ENCAP => {
            Behaviour::EndB6Encaps(push(fib, oif, PushMode::Encap, false, l.srh.as_ref()?)?)
        }
        _ => return None,
    };
    let f = l.flavors.unwrap_or_default();
    let ops = f.ops.unwrap_or(0);
    // The build keeps whole-octet lengths that fit an address (fibre_fib::encap).
    let next_csid = (ops & (1 << flavor::NEXT_CSID) != 0)
        .then(|| Some((f.lcblock_bits? / 8, f.lcnode_fn_bits? / 8)))
        .flatten();
    Some(LocalSid {
        behaviour,
        psp: ops & (1 << flavor::PSP) != 0,
        next_csid,
        usp: ops & (1 << flavor::USP) != 0,
        usd: ops & (1 << flavor::USD) != 0,
    })
}

/// The headers of an encapsulation (`Encap`, `L2Encap`, reduced or not) or an insertion with
/// the SRH `srh` as configured; `None` for bytes that are not a valid SRH.
fn push(fib: &Fib, oif: u32, mode: PushMode, red: bool, srh: &[u8]) -> Option<Seg6Push> {
    let p = fibre_wire::srh::Packet::new_checked(srh).ok()?;
    let first_seg = usize::from(p.last_entry());
    let first = p.segment(first_seg)?;
    let has_hmac = p.flags() & fibre_wire::srh::FLAG_HMAC != 0;
    let len = srh.len();
    // seg6_do_srh_encap_red: the first segment travels in the destination only; a list of one
    // segment without an HMAC leaves no SRH at all.
    let srh_out: Vec<u8> = match (red, first_seg) {
        (false, _) => srh.to_vec(),
        (true, 0) if !has_hmac => Vec::new(),
        (true, 0) => srh.to_vec(),
        (true, _) => {
            let tlv_at =
                fibre_wire::srh::HEADER_LEN + (first_seg + 1) * fibre_wire::srh::SEGMENT_LEN;
            let mut v = Vec::with_capacity(len - fibre_wire::srh::SEGMENT_LEN);
            v.extend_from_slice(&srh[..tlv_at - fibre_wire::srh::SEGMENT_LEN]);
            v.extend_from_slice(&srh[tlv_at..]);
            v[4] -= 1;
            v[1] -= 2;
            v
        }
    };
    let src = tunnel_source(fib, oif, first);
    let mut template = Vec::with_capacity(fibre_wire::ipv6::HEADER_LEN + srh_out.len());
    let srh_at = match mode {
        PushMode::Insert => {
            template.extend_from_slice(&srh_out);
            Some(0)
        }
        PushMode::Encap | PushMode::L2Encap => {
            let mut h = [0u8; fibre_wire::ipv6::HEADER_LEN];
            h[0] = 0x60;
            h[6] = ip_proto::IPV6_ROUTING;
            h[8..24].copy_from_slice(&src.octets());
            h[24..40].copy_from_slice(&first.octets());
            template.extend_from_slice(&h);
            template.extend_from_slice(&srh_out);
            (!srh_out.is_empty()).then_some(fibre_wire::ipv6::HEADER_LEN)
        }
    };
    let hmac = match srh_at {
        Some(at) if has_hmac => push_hmac(fib, mode, &mut template, at, &src),
        _ => PushHmac::Ready,
    };
    Some(Seg6Push {
        mode,
        need: template.len() + L2_RESERVE,
        template,
        srh_at,
        first,
        hmac,
    })
}

/// seg6_push_hmac for the SRH at `at` of `template`, sent from `src`: filled in now for an
/// encapsulation, left to each packet for an insertion.
fn push_hmac(
    fib: &Fib,
    mode: PushMode,
    template: &mut [u8],
    at: usize,
    src: &Ipv6Addr,
) -> PushHmac {
    let srh = &mut template[at..];
    let Some(tlv_at) = fibre_wire::srh::Packet::new_checked(&*srh)
        .ok()
        .and_then(|p| p.hmac_tlv_at())
    else {
        return PushHmac::Fail;
    };
    let id = fibre_wire::srh::HMAC_KEY_ID_AT + tlv_at;
    let id = u32::from_be_bytes([srh[id], srh[id + 1], srh[id + 2], srh[id + 3]]);
    let Some(key) = fib.seg6_hmac().get(id).and_then(HmacKey::new) else {
        return PushHmac::Fail;
    };
    match mode {
        PushMode::Insert => PushHmac::PerPacket {
            key: Box::new(key),
            tlv_at,
        },
        PushMode::Encap | PushMode::L2Encap => match key.fill(&src.octets(), srh, tlv_at) {
            true => PushHmac::Ready,
            false => PushHmac::Fail,
        },
    }
}

/// ioam6_build_state's hop-by-hop header for a built `encap ioam6`.
fn ioam6(fib: &Fib, oif: u32, i: &Ioam6) -> Option<Ioam6Push> {
    let trace = i.trace.as_deref().filter(|t| t.len() == 8)?;
    let data = usize::from(trace[3] & 0x7f) * 4;
    let aligned = data.next_multiple_of(8);
    let mut h = vec![0u8; 2 + 2 + 4 + 8 + aligned];
    h[1] = ((h.len() >> 3) - 1) as u8;
    h[2] = PADN;
    h[4] = fibre_wire::ioam6::OPTION_TYPE;
    h[5] = (2 + 8 + data) as u8;
    h[7] = fibre_wire::ioam6::PREALLOC_TRACE;
    h[Ioam6Push::TRACE_AT..Ioam6Push::TRACE_AT + 8].copy_from_slice(trace);
    if aligned != data {
        let pad = Ioam6Push::TRACE_AT + 8 + data;
        h[pad] = PADN;
        h[pad + 1] = 2;
    }
    let mode = match i.mode.unwrap_or(ioam6_mode::INLINE) {
        ioam6_mode::INLINE => Ioam6Mode::Inline,
        _ => Ioam6Mode::Encap,
    };
    let dst = i.dst.unwrap_or(Ipv6Addr::UNSPECIFIED);
    let src = match mode {
        Ioam6Mode::Encap => fib
            .select_src6(Some(oif), &dst)
            .unwrap_or(Ipv6Addr::UNSPECIFIED),
        Ioam6Mode::Inline => Ipv6Addr::UNSPECIFIED,
    };
    let mut p = Ioam6Push {
        mode,
        template: h,
        src,
        dst,
        k: i.freq_k.unwrap_or(1),
        n: i.freq_n.unwrap_or(1).max(1),
        need: 0,
    };
    p.need = p.added() + L2_RESERVE;
    Some(p)
}

/// The PadN option type of IPv6 hop-by-hop headers.
const PADN: u8 = 1;

/// set_tun_src: `ip sr tunsrc` when set, else the source the route's link picks for the first
/// segment (`::` when it has none).
fn tunnel_source(fib: &Fib, oif: u32, first: Ipv6Addr) -> Ipv6Addr {
    let t = fib.seg6_tunsrc();
    if !t.is_unspecified() {
        return t;
    }
    fib.select_src6(Some(oif), &first)
        .unwrap_or(Ipv6Addr::UNSPECIFIED)
}
