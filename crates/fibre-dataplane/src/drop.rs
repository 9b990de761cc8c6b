//! Why a packet went no further, and the counters that say how often.
//!
//! Every packet the pipeline does not send or punt ends with one [`DropReason`], named after
//! the kernel's `enum skb_drop_reason` (include/net/dropreason-core.h) where one fits, so that
//! `perf trace -e skb:kfree_skb` on a kernel router and fibre's counters speak the same names.
//! [`DropCounters`] counts them per reason in a fixed array; [`LinkStats`] holds the per-link
//! counters `ip -s -s link` prints. Both are plain integers a worker owns: nothing here locks
//! or allocates, and the counters wrap rather than panic.

use crate::icmp::IcmpError;

/// A packet a stage refused: why, and the ICMP error the kernel sends about it, if any (the
/// caller checks eligibility and rate limits and builds it with [`crate::icmp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Discard {
    pub reason: DropReason,
    pub icmp: Option<IcmpError>,
}

impl Discard {
    /// A drop that the kernel answers with `icmp`.
    pub fn with_icmp(reason: DropReason, icmp: IcmpError) -> Discard {
        Discard {
            reason,
            icmp: Some(icmp),
        }
    }
}

impl From<DropReason> for Discard {
    fn from(reason: DropReason) -> Discard {
        Discard { reason, icmp: None }
    }
}

/// Why a packet was dropped. `Copy` and one byte: stages return it by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DropReason {
    /// `NOT_SPECIFIED`: the kernel drops without naming a reason (a unicast IP packet that came
    /// in a link-layer broadcast or multicast frame reaching `ip_forward`, a source-routed
    /// packet on a link that does not accept source routes).
    NotSpecified,
    /// `OTHERHOST`: a frame for another station's MAC (ip_rcv_core, ipv6_rcv), or tagged with
    /// a VLAN no device of this link carries.
    Otherhost,
    /// `UNHANDLED_PROTO`: an EtherType nothing here handles, or an IPv6 header whose version
    /// is not 6.
    UnhandledProto,
    /// `PKT_TOO_SMALL`: the frame ends before the IP header's length says.
    PktTooSmall,
    /// `IP_INHDR`: a malformed IP header (IHL, version, length below the header, malformed
    /// options) or a TTL or hop limit that ran out (`IPSTATS_MIB_INHDRERRORS`).
    IpInhdr,
    /// `IP_CSUM`: the IPv4 header checksum does not verify.
    IpCsum,
    /// `IP_INADDRERRORS`: an address the kernel refuses (`IPSTATS_MIB_INADDRERRORS`): IPv6
    /// forwarding of an unspecified, multicast, loopback or link-local source; IPv4 host
    /// unreachable routes with forwarding off.
    IpInaddrerrors,
    /// `IP_INNOROUTES`: no route (`IPSTATS_MIB_INNOROUTES`).
    IpInnoroutes,
    /// `IP_RPFILTER`: reverse-path filtering refused the source.
    IpRpfilter,
    /// `IP_INVALID_SOURCE`: a martian source address.
    IpInvalidSource,
    /// `IP_INVALID_DEST`: a martian destination address.
    IpInvalidDest,
    /// `IP_LOCAL_SOURCE`: a packet from outside claims one of the router's addresses.
    IpLocalSource,
    /// `IP_LOCALNET`: a loopback address where the link does not route it (route_localnet).
    IpLocalnet,
    /// `PKT_TOO_BIG`: larger than the next hop's MTU and not to be fragmented (DF set, or
    /// IPv6).
    PktTooBig,
    /// `ICMP_CSUM`: an ICMP or ICMPv6 message for the router whose checksum does not verify.
    IcmpCsum,
    /// `INVALID_PROTO`: a message the protocol says to ignore (an echo request to a broadcast
    /// address with `icmp_echo_ignore_broadcasts`).
    InvalidProto,
    /// `IPV6_BAD_EXTHDR`: a malformed IPv6 extension header (hop-by-hop options).
    Ipv6BadExthdr,
    /// An IPv6 fragment for the router itself, which the kernel would reassemble
    /// (`ipv6_frag_rcv`) and fibre does not (IPv4 fragments are: [`crate::reasm`]). No kernel
    /// reason of its own.
    FragNotReassembled,
    /// `NOMEM`: no free buffer in the pool for a fragment or an ICMP error.
    Nomem,
    /// `NEIGH_FAILED`: the next hop's link-layer address could not be resolved.
    NeighFailed,
    /// `NEIGH_QUEUEFULL`: the queue of packets waiting for a neighbour is full.
    NeighQueuefull,
    /// A `blackhole` route: dropped in silence. No kernel reason of its own (IPv4's
    /// `ip_error` for `EINVAL` and IPv6's `dst_discard` say `NOT_SPECIFIED`); fibre counts it
    /// apart.
    Blackhole,
    /// An `unreachable` or `prohibit` route (or an IPv4 no-route outcome the kernel turns into
    /// one): dropped after its ICMP error. The kernel says `NOT_SPECIFIED` for IPv4's host
    /// unreachable and prohibit and `IP_INNOROUTES` for the rest; fibre counts them apart.
    RejectRoute,
    /// `DEV_READY`: the egress link is down or has no carrier.
    DevReady,
    /// `DUP_FRAG`: a fragment entirely inside bytes already queued for reassembly.
    DupFrag,
    /// `FRAG_REASM_TIMEOUT`: a packet in reassembly that did not arrive whole in time.
    FragReasmTimeout,
    /// A packet in reassembly given up (overlapping fragments, a length that disagrees,
    /// beyond 65,535 bytes, or no room for another packet or fragment): the kernel counts it
    /// as `IPSTATS_MIB_REASMFAILS` without a reason of its own.
    FragReasmFailed,
    /// `UDP_CSUM`: a UDP datagram for the router whose checksum does not verify.
    UdpCsum,
    /// `IPV6_NDISC_HOP_LIMIT`: an NDP message whose hop limit is not 255 (it came from
    /// beyond the link).
    Ipv6NdiscHopLimit,
    /// `IPV6_NDISC_BAD_CODE`: an NDP message with a code other than 0.
    Ipv6NdiscBadCode,
    /// `IPV6_NDISC_BAD_OPTIONS`: a malformed NDP message or option, or one that breaks a
    /// rule of RFC 4861 section 7.1 (a multicast target, a solicited advertisement to a
    /// group, a duplicate address probe with a link-layer option).
    Ipv6NdiscBadOptions,
    /// `IPV6_NDISC_NS_OTHERHOST`: a neighbour solicitation for an address that is not the
    /// router's (nor proxied).
    Ipv6NdiscNsOtherhost,
    /// An SRv6 endpoint behaviour found no valid SRH with segments left (no SRH, a routing
    /// header of another type, seg6_validate_srh failing: bad lengths, segments left beyond
    /// the list, TLVs that do not tile): the kernel's get_and_validate_srh refuses it and
    /// frees the packet without a reason of its own.
    Seg6BadSrh,
    /// An SRH with an HMAC to check or to push whose key id `ip sr hmac` does not hold, or
    /// an SRH with the HMAC flag but no HMAC TLV to push into (seg6_push_hmac).
    Seg6Hmac,
    /// A decapsulating behaviour (End.DX4, End.DX6, End.DT6) found no inner packet of its
    /// protocol, or an SRH with segments left (decap_and_validate).
    Seg6NoInner,
    /// A next hop whose encapsulation the data path does not apply (End.DX2), compiled in
    /// another generation than the route decision,
    /// or a packet encapsulated again more often than `pipeline::srv6` allows (a loop of
    /// routes).
    Seg6Unsupported,
    /// A packet with an SRH for the router on a link that does not accept them
    /// (net.ipv6.conf.{all,LINK}.seg6_enabled 0: ipv6_srh_rcv).
    Seg6Disabled,
    /// An End.X with the USD flavor uncovered an IPv4 packet: its neighbour is an IPv6
    /// address, and fibre's IPv4 forwarding has no IPv6 gateways.
    Seg6FamilyMismatch,
    /// An SRH without an HMAC TLV received on a link whose seg6_require_hmac is above 0
    /// (seg6_hmac_validate_skb).
    Seg6HmacMissing,
    /// An SRH whose HMAC is not the one its key computes, or one that cannot be computed
    /// (more segments than Linux authenticates: `fibre_fwd::hmac::MAX_SEGMENTS`).
    Seg6HmacMismatch,
}

impl DropReason {
    /// Every reason, in declaration order: `ALL[r.index()] == r`.
    pub const ALL: [DropReason; 40] = [
        DropReason::NotSpecified,
        DropReason::Otherhost,
        DropReason::UnhandledProto,
        DropReason::PktTooSmall,
        DropReason::IpInhdr,
        DropReason::IpCsum,
        DropReason::IpInaddrerrors,
        DropReason::IpInnoroutes,
        DropReason::IpRpfilter,
        DropReason::IpInvalidSource,
        DropReason::IpInvalidDest,
        DropReason::IpLocalSource,
        DropReason::IpLocalnet,
        DropReason::PktTooBig,
        DropReason::IcmpCsum,
        DropReason::InvalidProto,
        DropReason::Ipv6BadExthdr,
        DropReason::FragNotReassembled,
        DropReason::Nomem,
        DropReason::NeighFailed,
        DropReason::NeighQueuefull,
        DropReason::Blackhole,
        DropReason::RejectRoute,
        DropReason::DevReady,
        DropReason::DupFrag,
        DropReason::FragReasmTimeout,
        DropReason::FragReasmFailed,
        DropReason::UdpCsum,
        DropReason::Ipv6NdiscHopLimit,
        DropReason::Ipv6NdiscBadCode,
        DropReason::Ipv6NdiscBadOptions,
        DropReason::Ipv6NdiscNsOtherhost,
        DropReason::Seg6BadSrh,
        DropReason::Seg6Hmac,
        DropReason::Seg6NoInner,
        DropReason::Seg6Unsupported,
        DropReason::Seg6Disabled,
        DropReason::Seg6FamilyMismatch,
        DropReason::Seg6HmacMissing,
        DropReason::Seg6HmacMismatch,
    ];

    /// How many reasons there are: the length of [`DropCounters`]' array.
    pub const COUNT: usize = Self::ALL.len();

    /// The reason's place in [`DropReason::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name as counters print it: the kernel's `SKB_DROP_REASON_` suffix where there is
    /// one.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::NotSpecified => "NOT_SPECIFIED",
            DropReason::Otherhost => "OTHERHOST",
            DropReason::UnhandledProto => "UNHANDLED_PROTO",
            DropReason::PktTooSmall => "PKT_TOO_SMALL",
            DropReason::IpInhdr => "IP_INHDR",
            DropReason::IpCsum => "IP_CSUM",
            DropReason::IpInaddrerrors => "IP_INADDRERRORS",
            DropReason::IpInnoroutes => "IP_INNOROUTES",
            DropReason::IpRpfilter => "IP_RPFILTER",
            DropReason::IpInvalidSource => "IP_INVALID_SOURCE",
            DropReason::IpInvalidDest => "IP_INVALID_DEST",
            DropReason::IpLocalSource => "IP_LOCAL_SOURCE",
            DropReason::IpLocalnet => "IP_LOCALNET",
            DropReason::PktTooBig => "PKT_TOO_BIG",
            DropReason::IcmpCsum => "ICMP_CSUM",
            DropReason::InvalidProto => "INVALID_PROTO",
            DropReason::Ipv6BadExthdr => "IPV6_BAD_EXTHDR",
            DropReason::FragNotReassembled => "FRAG_NOT_REASSEMBLED",
            DropReason::Nomem => "NOMEM",
            DropReason::NeighFailed => "NEIGH_FAILED",
            DropReason::NeighQueuefull => "NEIGH_QUEUEFULL",
            DropReason::Blackhole => "BLACKHOLE",
            DropReason::RejectRoute => "REJECT_ROUTE",
            DropReason::DevReady => "DEV_READY",
            DropReason::DupFrag => "DUP_FRAG",
            DropReason::FragReasmTimeout => "FRAG_REASM_TIMEOUT",
            DropReason::FragReasmFailed => "FRAG_REASM_FAILED",
            DropReason::UdpCsum => "UDP_CSUM",
            DropReason::Ipv6NdiscHopLimit => "IPV6_NDISC_HOP_LIMIT",
            DropReason::Ipv6NdiscBadCode => "IPV6_NDISC_BAD_CODE",
            DropReason::Ipv6NdiscBadOptions => "IPV6_NDISC_BAD_OPTIONS",
            DropReason::Ipv6NdiscNsOtherhost => "IPV6_NDISC_NS_OTHERHOST",
            DropReason::Seg6BadSrh => "SEG6_BAD_SRH",
            DropReason::Seg6Hmac => "SEG6_HMAC",
            DropReason::Seg6HmacMissing => "SEG6_HMAC_MISSING",
            DropReason::Seg6HmacMismatch => "SEG6_HMAC_MISMATCH",
            DropReason::Seg6NoInner => "SEG6_NO_INNER",
            DropReason::Seg6Unsupported => "SEG6_UNSUPPORTED",
            DropReason::Seg6Disabled => "SEG6_DISABLED",
            DropReason::Seg6FamilyMismatch => "SEG6_FAMILY_MISMATCH",
        }
    }

    /// The link counter the kernel also raises for this drop, beyond the IP statistics: only
    /// the core's receive drops reach `ip -s link` (`dev_core_stats_*_inc`); IP-layer drops
    /// do not.
    pub fn link_counter(self) -> Option<LinkCounter> {
        match self {
            DropReason::Otherhost => Some(LinkCounter::RxOtherhostDropped),
            DropReason::UnhandledProto => Some(LinkCounter::RxDropped),
            DropReason::DevReady | DropReason::NeighQueuefull => Some(LinkCounter::TxDropped),
            _ => None,
        }
    }
}

/// Packets dropped, per reason: a fixed array indexed by [`DropReason::index`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropCounters {
    counts: [u64; DropReason::COUNT],
}

impl Default for DropCounters {
    fn default() -> Self {
        DropCounters {
            counts: [0; DropReason::COUNT],
        }
    }
}

impl DropCounters {
    pub fn count(&mut self, reason: DropReason) {
        let c = &mut self.counts[reason.index()];
        *c = c.wrapping_add(1);
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        self.counts[reason.index()]
    }

    /// The sum over every reason.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0, |a, c| a.wrapping_add(*c))
    }

    /// The reasons counted at least once, with their counts, in [`DropReason::ALL`] order.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|r| (*r, self.get(*r)))
            .filter(|(_, c)| *c != 0)
    }

    /// Adds another worker's counts into these.
    pub fn merge(&mut self, other: &DropCounters) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a = a.wrapping_add(*b);
        }
    }
}

/// The per-link counters that a drop may raise besides its reason (see
/// [`DropReason::link_counter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkCounter {
    RxDropped,
    RxOtherhostDropped,
    TxDropped,
}

pub use fibre_fib::LinkStats;

/// Raises the counter of `s` that a drop for `reason` raises, if any.
pub fn count_drop(s: &mut LinkStats, reason: DropReason) {
    let c = match reason.link_counter() {
        Some(LinkCounter::RxDropped) => &mut s.rx_dropped,
        Some(LinkCounter::RxOtherhostDropped) => &mut s.rx_otherhost_dropped,
        Some(LinkCounter::TxDropped) => &mut s.tx_dropped,
        None => return,
    };
    *c = c.wrapping_add(1);
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_reason_at_its_index_with_a_distinct_name() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
    }

    #[test]
    fn counters_count_per_reason_and_merge() {
        let mut a = DropCounters::default();
        a.count(DropReason::IpCsum);
        a.count(DropReason::IpCsum);
        a.count(DropReason::Otherhost);
        let mut b = DropCounters::default();
        b.count(DropReason::IpCsum);
        b.merge(&a);
        assert_eq!(b.get(DropReason::IpCsum), 3);
        assert_eq!(b.total(), 4);
        assert_eq!(
            b.nonzero().collect::<Vec<_>>(),
            [(DropReason::Otherhost, 1), (DropReason::IpCsum, 3)]
        );
    }

    #[test]
    fn link_stats_raise_only_the_core_counters() {
        let mut s = LinkStats::default();
        s.received(60, true);
        s.received(1514, false);
        s.sent(98);
        count_drop(&mut s, DropReason::Otherhost);
        count_drop(&mut s, DropReason::UnhandledProto);
        count_drop(&mut s, DropReason::IpCsum);
        assert_eq!(
            s,
            LinkStats {
                rx_packets: 2,
                rx_bytes: 1574,
                multicast: 1,
                rx_dropped: 1,
                rx_otherhost_dropped: 1,
                tx_packets: 1,
                tx_bytes: 98,
                ..LinkStats::default()
            }
        );
    }
}
