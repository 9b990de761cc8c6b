//! The input route decision: what the kernel decides for a packet received on a link, as
//! [`Fib::route_input`] answers it per packet for the data plane and as `route get ... iif`
//! answers it (`get` builds its answers on the same functions, so the two cannot disagree).
//!
//! IPv4 follows ip_route_input_slow: martian addresses, the limited broadcast, the rules
//! walk, then fib_validate_source (the martian-source and reverse-path checks) for local,
//! broadcast and forwarded packets. IPv6 follows ip6_route_input: the rules walk with the input
//! link standing for the output link (RT6_LOOKUP_F_IFACE for multicast, loopback and
//! link-local destinations), then the type of the route found; the forwarding switch and the
//! redirect condition are ip6_forward's.
//!
//! Rules for callers: [`Fib::route_input`] takes `&self`, never allocates and returns `Copy`
//! values; a [`DstRef`] stays meaningful only while [`Fib::dst_ref_is_current`] says so (the
//! contract of `dst`). What a drop leads to on the wire is stated on each [`InputDrop`]
//! variant: the route lookup decides, the ICMP error is the caller's to build.

mod line4;

use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv6Addr};

use crate::dst::{Dst, DstAt, LookupError};
use crate::flow::{Flow, LookupFlags};
use crate::ids::{IfIndex, InfoId, TableId};
use crate::link::LOOPBACK_IFINDEX;
use crate::lookup::{Res, TableResult};
use crate::prefix::{ip_u128, u128_ip};
use crate::route::Info;
use crate::types::{scope, Errno, Family, RouteType};
use crate::Fib;

pub use line4::InputLine4;

/// A received packet as the input route decision sees it (the fields of the kernel's flowi4 /
/// flowi6 that ip_route_input_slow and ip6_route_input fill from the packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputKey {
    pub dst: IpAddr,
    pub src: IpAddr,
    /// The link the packet came in on.
    pub iif: u32,
    /// IPv4: the header's TOS byte (only IPTOS_RT_MASK bits select routes and rules); IPv6:
    /// the traffic class.
    pub tos: u8,
    pub mark: u32,
    /// The transport protocol (IPv6: the last next header), for rules that select on it.
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    /// IPv6's flow label (0 for IPv4), which the multipath hash may cover
    /// (`fib_multipath_hash_policy`).
    pub flowlabel: u32,
}

impl InputKey {
    /// The flow the packet's lookups are made for.
    #[inline]
    pub(crate) fn flow(&self) -> Flow {
        Flow {
            dst: ip_u128(self.dst),
            src: ip_u128(self.src),
            iif: self.iif,
            tos: self.tos,
            mark: self.mark,
            proto: self.proto,
            sport: self.sport,
            dport: self.dport,
            flowlabel: self.flowlabel,
            ..Flow::empty()
        }
    }
}

/// Where an input packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputRoute {
    /// To this host: a local address (IPv6 also an anycast address, or a multicast group the
    /// input link joined).
    Local {
        /// The table of the route that said so.
        table: u32,
    },
    /// A broadcast to this host's subnet or the limited broadcast: delivered here, never
    /// forwarded.
    Broadcast {
        /// The table of the broadcast route; `None` for 255.255.255.255 and for a packet from
        /// and to 0.0.0.0, which the kernel takes as broadcasts before any lookup.
        table: Option<u32>,
    },
    Forward(ForwardRoute),
}

/// A packet to forward: the chosen next hop's forwarding result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardRoute {
    /// The output link.
    pub oif: u32,
    /// The neighbour to send to: the gateway of a next hop that has one at link scope (the
    /// kernel's rt_gw4 / rt6i_gateway); `None` when the destination is on link and the
    /// packet's own destination is the neighbour.
    pub gateway: Option<IpAddr>,
    /// The MTU the kernel's forward path checks the packet against: for IPv4 the route's `mtu`
    /// metric, else the output link's MTU (ip_dst_mtu_maybe_forward, without
    /// ip_forward_use_pmtu); for IPv6 the output link's MTU, the route's metric only when
    /// locked (ip6_dst_mtu_maybe_forward). PMTU exceptions are not used for forwarding.
    pub mtu: u32,
    /// RTCF_DOREDIRECT: the packet leaves by the link it came in on, towards a source on
    /// that link, so the kernel sends an ICMP redirect (IPv4: __mkroute_input with the
    /// default send_redirects and shared_media; IPv6: ip6_forward's condition, which also
    /// excludes source-routed packets, a check for the caller that parses the header).
    pub redirect: bool,
    /// The table the route lives in.
    pub table: u32,
    /// The next hop's forwarding result, as a handle (see [`DstRef`]).
    pub dst: DstRef,
}

/// A handle of one next hop's forwarding result ([`Dst`]): where it lives and which
/// generation of it the decision saw. Forwarding state built beside the FIB keys its per-next-
/// hop objects by [`DstRef::slot`] and [`DstRef::hop`] (small, dense numbers) and checks
/// [`DstRef::gen`] against what it built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DstRef {
    slot: u32,
    hop: u32,
    gen: u64,
}

impl DstRef {
    fn of(d: &Dst) -> DstRef {
        DstRef {
            slot: d.at.info.map_or(u32::MAX, |i| i.raw()),
            hop: d.at.nh as u32,
            gen: d.gen,
        }
    }

    /// The slot of the route info holding the next hop: below the number of infos the FIB
    /// ever held at once.
    #[inline]
    pub fn slot(self) -> usize {
        self.slot as usize
    }

    /// The next hop's position in its route info.
    #[inline]
    pub fn hop(self) -> usize {
        self.hop as usize
    }

    /// The result's generation (see `Dst::gen`).
    #[inline]
    pub fn gen(self) -> u64 {
        self.gen
    }
}

/// A next hop packets can be forwarded through, as [`Fib::forward_hops`] lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardHop {
    pub dst: DstRef,
    /// The family of the packets the route forwards (an IPv4 route's gateway may be IPv6).
    pub family: Family,
    pub oif: u32,
    /// As [`ForwardRoute::gateway`].
    pub gateway: Option<IpAddr>,
}

/// Why an input packet is not delivered or forwarded: one variant per outcome of the kernel's
/// input path, each saying what the kernel sends back (dst.input = ip_error for IPv4; the
/// reject routes' ip6_pkt_discard / ip6_pkt_prohibit for IPv6). ICMP errors from these are
/// rate-limited by the kernel (IPv4 ip_error: a token bucket per source, on top of the
/// icmp_ratelimit rules; IPv6: icmpv6_xrlim_allow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputDrop {
    /// A source that is multicast, the limited broadcast, 0.0.0.0 (with a destination other
    /// than 0.0.0.0) or in 127/8 (ip_route_input_slow's `martian_source`,
    /// SKB_DROP_REASON_IP_INVALID_SOURCE); also a key whose source and destination are of
    /// different families. Silent.
    MartianSource,
    /// The route back to the source is not unicast: the source is one of this host's
    /// addresses (fib_validate_source without accept_local), or the route back is a broadcast
    /// or reject route (fib_validate_source's EINVAL, SKB_DROP_REASON_IP_LOCAL_SOURCE). Silent.
    LocalSource,
    /// Reverse-path filtering failed (rp_filter 1 or 2: the source is not reachable back
    /// through the input link, or not at all; SKB_DROP_REASON_IP_RPFILTER). Silent.
    ReversePath,
    /// A destination that is 0.0.0.0 or in 127/8, or a route found of a type that is neither
    /// local, broadcast nor unicast (`martian_destination`,
    /// SKB_DROP_REASON_IP_INVALID_DEST). Silent.
    MartianDestination,
    /// An IPv6 multicast destination the input link did not join, or any IPv4 multicast
    /// destination: fibre routes no multicast (the kernel forwards it only with a multicast
    /// router running). The kernel delivers an IPv4 group the link joined (224.0.0.1 on every
    /// up link) locally; fibre drops it, as its `route get ... iif` answers EINVAL for it.
    /// Silent.
    Multicast,
    /// No route (ENETUNREACH). IPv4: ip_error sends destination unreachable, net
    /// unreachable (type 3 code 0). IPv6: ip6_pkt_discard sends destination unreachable, no
    /// route (type 1 code 0), except to an unspecified destination.
    NoRoute,
    /// An `unreachable` route or rule (EHOSTUNREACH). IPv4: host unreachable (type 3 code
    /// 1). IPv6: ip6_pkt_discard, no route (type 1 code 0).
    Unreachable,
    /// A `prohibit` route or rule (EACCES). IPv4: communication administratively prohibited
    /// (type 3 code 13, ICMP_PKT_FILTERED). IPv6: ip6_pkt_prohibit, administratively
    /// prohibited (type 1 code 1).
    Prohibit,
    /// A `blackhole` route or rule (EINVAL). Silent.
    Blackhole,
    /// Forwarding is off. IPv4: a packet not for this host, and any failed lookup, become
    /// EHOSTUNREACH, which ip_error drops without an error when forwarding is off (counted as
    /// InAddrErrors). IPv6: ip6_forward drops a packet to forward (InAddrErrors); reject
    /// routes keep their own outcome. Silent.
    ForwardingOff,
}

impl InputDrop {
    /// The error `route get ... iif` answers with: since Linux 6.13 the kernel's input path
    /// returns drop reasons, and every source or destination check answers EINVAL (a
    /// reverse-path failure included, which fib_validate_source itself reports as EXDEV).
    pub fn errno(self) -> Errno {
        match self {
            InputDrop::NoRoute => Errno::ENETUNREACH,
            InputDrop::Unreachable | InputDrop::ForwardingOff => Errno::EHOSTUNREACH,
            InputDrop::Prohibit => Errno::EACCES,
            InputDrop::MartianSource
            | InputDrop::LocalSource
            | InputDrop::ReversePath
            | InputDrop::MartianDestination
            | InputDrop::Multicast
            | InputDrop::Blackhole => Errno::EINVAL,
        }
    }

    fn of(e: LookupError) -> InputDrop {
        match e {
            LookupError::NoRoute | LookupError::NoDevice => InputDrop::NoRoute,
            LookupError::Unreachable => InputDrop::Unreachable,
            LookupError::Prohibit => InputDrop::Prohibit,
            LookupError::Blackhole => InputDrop::Blackhole,
        }
    }
}

/// What of an [`InputKey`] the input decision depends on, whenever
/// [`Fib::input_key_suffices`] says so for the key's family: every field but the transport
/// protocol, the ports and the flow label (which only rules selecting on them and the
/// multipath hash read; the hash picks a multipath route's leg per packet, see
/// [`InputMemo`]). The key of a cache of input decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputCacheKey {
    dst: u128,
    src: u128,
    iif: u32,
    mark: u32,
    tos: u8,
    /// Bit 0: the destination is IPv6; bit 1: the source is.
    families: u8,
}

/// Three words folded from the key: a cache hashes them with its keyed hasher, which costs
/// half of hashing every field. Keys that fold alike land in one set, which costs hits only:
/// a cache compares whole keys.
impl Hash for InputCacheKey {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        let fold = |a: u128| (a as u64) ^ ((a >> 64) as u64).rotate_left(32);
        h.write_u64(fold(self.dst));
        h.write_u64(fold(self.src));
        h.write_u64(
            (u64::from(self.iif) << 32 | u64::from(self.mark))
                ^ (u64::from(self.tos) << 8 | u64::from(self.families)).rotate_right(16),
        );
    }
}

impl InputKey {
    /// Whether `self` and `o` have the same [`InputCacheKey`], compared without making it.
    #[inline]
    pub fn same_cache_key(&self, o: &InputKey) -> bool {
        self.dst == o.dst
            && self.src == o.src
            && self.iif == o.iif
            && self.tos == o.tos
            && self.mark == o.mark
    }

    /// The part of the key an input decision depends on (see [`InputCacheKey`]).
    #[inline]
    pub fn cache_key(&self) -> InputCacheKey {
        InputCacheKey {
            dst: ip_u128(self.dst),
            src: ip_u128(self.src),
            iif: self.iif,
            mark: self.mark,
            tos: self.tos,
            families: u8::from(self.dst.is_ipv6()) | u8::from(self.src.is_ipv6()) << 1,
        }
    }
}

/// An input decision and what a cache may keep of it.
pub type InputDecision = (Result<InputRoute, InputDrop>, Option<InputMemo>);

/// What a cache of input decisions keeps of one: enough to answer every later packet of the
/// same [`InputCacheKey`] exactly as [`Fib::route_input`] would, for as long as the routing
/// state is the one the memo was made in. That is: the same [`Fib::gen`] (every change moves
/// it), and no route deadline ([`Fib::route_input_deadline`]) passed in between. Made by
/// [`Fib::route_input_memo`] and [`Fib::route_input_batch_memo`], answered from by
/// [`Fib::route_input_replay`]; `Copy`, no reference into the routing state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputMemo(Memo);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Memo {
    /// The same decision for every packet of the key.
    Fixed(Result<InputRoute, InputDrop>),
    /// An IPv4 multipath route: the group, not the leg. Each packet's leg is chosen from
    /// `first`, the route's first usable next hop, by the packet's own hash. The source check
    /// (`checked`: whether the source is directly connected through the input link) holds for
    /// every leg: no rule selects on the input link, which the check's reverse lookup takes
    /// from the leg, or every leg leaves by the same link. With `scan` the check was the
    /// local-address scan, which holds only for a leg leaving by another link than the input
    /// link; a leg through the input link takes the general path.
    Group4 {
        first: DstRef,
        table: TableId,
        checked: Result<bool, InputDrop>,
        scan: bool,
    },
    /// An IPv6 multipath route: the group; the leg is chosen per packet as for `Group4`
    /// (IPv6 has no source check).
    Group6 { first: DstRef, table: TableId },
}

/// A decision that holds for every packet of its key.
fn fixed(r: Result<InputRoute, InputDrop>) -> InputDecision {
    (r, Some(InputMemo(Memo::Fixed(r))))
}

/// The memo of an IPv6 forwarding decision `r` through next hop `first` of `info` (before
/// the multipath choice): the group when it has legs to choose from.
pub(crate) fn memo6(
    info: &Info,
    first: usize,
    table: TableId,
    r: Result<InputRoute, InputDrop>,
) -> InputMemo {
    InputMemo(match info.nh.len() {
        0 | 1 => Memo::Fixed(r),
        _ => Memo::Group6 {
            first: DstRef::of(&info.nh[first].dst),
            table,
        },
    })
}

/// The memo of an IPv4 forwarding decision through next hop `first` of `info` (before the
/// multipath choice) whose source check gave `checked` for the leg chosen, `oif`, of a
/// packet in on `iif`; `scan` when the check was the local-address scan. `None` when a leg
/// could be checked otherwise: `iif_rules`, rules select on the input link (the reverse
/// lookup's, which is the leg's) and the legs leave by different links, or the scan did not
/// apply to the leg chosen.
pub(crate) fn memo4(
    info: &Info,
    first: usize,
    table: TableId,
    (r, checked): (Result<InputRoute, InputDrop>, Result<bool, InputDrop>),
    (oif, iif): (IfIndex, IfIndex),
    (scan, iif_rules): (bool, bool),
) -> Option<InputMemo> {
    if info.nh.len() <= 1 {
        return Some(InputMemo(Memo::Fixed(r)));
    }
    if iif_rules || (scan && oif == iif) {
        return None;
    }
    Some(InputMemo(Memo::Group4 {
        first: DstRef::of(&info.nh[first].dst),
        table,
        checked,
        scan,
    }))
}

/// The IPv4 decision with the lookup result it came from (which `route get` reports).
#[derive(Clone, Copy)]
pub(crate) enum Input4 {
    /// 255.255.255.255, or 0.0.0.0 to 0.0.0.0: no lookup made.
    LimitedBroadcast,
    Broadcast(Res),
    Local(Res),
    Forward {
        res: Res,
        redirect: bool,
    },
}

/// ip_route_input_slow up to the choice of a next hop.
enum Route4 {
    /// Decided without one.
    Done(Input4),
    /// A unicast route to forward through, and the flow it was looked up for.
    Unicast(Res, Flow),
}

pub(crate) fn is_lbcast(a: u32) -> bool {
    a == u32::MAX
}
/// 0.0.0.0 only: since Linux 5.3 the rest of 0.0.0.0/8 is ordinary unicast.
pub(crate) fn is_zeronet(a: u32) -> bool {
    a == 0
}
pub(crate) fn is_multicast4(a: u32) -> bool {
    a >> 28 == 0xe
}
pub(crate) fn is_loopback4(a: u32) -> bool {
    a >> 24 == 127
}

/// The gateway packets through next hop `nh` of `info` are sent to (rt_set_nexthop: only a
/// gateway at link scope).
fn neighbour_gateway(info: &Info, nh: usize) -> Option<IpAddr> {
    info.spec.nhs[nh]
        .gw
        .filter(|_| info.nh[nh].scope == scope::LINK)
}

/// RTAX_MTU's bit in a route's `lock` metric.
const LOCK_MTU: u32 = 1 << 2;

impl Fib {
    /// The kernel's input route decision for a packet received on link `k.iif`: deliver
    /// here, take as a broadcast, forward through a next hop, or drop (see [`InputDrop`] for
    /// the ICMP error each drop leads to). Multipath routes choose the next hop by the
    /// packet's flow hash. No allocation, no lock: the data plane's per-packet call.
    pub fn route_input(&self, k: &InputKey) -> Result<InputRoute, InputDrop> {
        self.route_input_memo(k).0
    }

    /// [`Fib::route_input`]'s decision and what a cache may keep of it for the later packets
    /// of the same [`InputKey::cache_key`] (`None`: nothing, the decision depends on more
    /// than the key holds). Only for keys of a family [`Fib::input_key_suffices`] answers true for.
    pub fn route_input_memo(&self, k: &InputKey) -> InputDecision {
        let flow = k.flow();
        match (k.dst, k.src) {
            (IpAddr::V4(_), IpAddr::V4(_)) => self.input4_memo(&flow),
            (IpAddr::V6(d6), IpAddr::V6(_)) => self.input6_memo(&flow, &d6),
            _ => fixed(Err(InputDrop::MartianSource)),
        }
    }

    /// The decision a memo made by [`Fib::route_input_memo`] for a packet of `k`'s cache key
    /// gives for `k`, as [`Fib::route_input`] gives it, provided the memo is current (see
    /// [`InputMemo`]: the caller checks the generation and the deadline). `None` when the
    /// packet needs the general path: its multipath leg leaves by its input link where the
    /// memo's source check does not cover that, or the memo's route is gone (a second line
    /// behind the caller's check). A multipath group's leg is chosen here, per packet.
    #[inline]
    pub fn route_input_replay(
        &self,
        m: &InputMemo,
        k: &InputKey,
    ) -> Option<Result<InputRoute, InputDrop>> {
        match m.0 {
            Memo::Fixed(r) => Some(r),
            _ => self.replay_group(m, k),
        }
    }

    /// [`Fib::route_input_replay`] for a multipath group: the leg chosen for `k`.
    fn replay_group(&self, m: &InputMemo, k: &InputKey) -> Option<Result<InputRoute, InputDrop>> {
        match m.0 {
            Memo::Fixed(r) => Some(r),
            Memo::Group4 {
                first,
                table,
                checked,
                scan,
            } => {
                let info = self.group_of(first)?;
                let nh = self.multipath_nh(info, first.hop(), &k.flow());
                let (oif, iif) = (info.spec.nhs[nh].oif, IfIndex(k.iif));
                if scan && oif == iif {
                    return None;
                }
                Some(checked.map(|direct| {
                    InputRoute::Forward(self.forward4(info, nh, table, direct && oif == iif))
                }))
            }
            Memo::Group6 { first, table } => {
                let info = self.group_of(first)?;
                let nh = self.multipath_nh(info, first.hop(), &k.flow());
                Some(Ok(InputRoute::Forward(
                    self.forward6(info, nh, table, k.iif),
                )))
            }
        }
    }

    /// The route info of next hop `first` while its result is still the one the memo saw.
    #[inline]
    fn group_of(&self, first: DstRef) -> Option<&Info> {
        self.dst_ref_is_current(first)
            .then(|| self.infos.get(InfoId::new(first.slot())))
    }

    /// Whether [`InputCacheKey`] holds everything the input decisions of a family
    /// (`v6`) depend on: false while a rule of the family selects on the transport protocol
    /// or ports, which the key leaves out. A walk over the family's rules: once per vector.
    pub fn input_key_suffices(&self, v6: bool) -> bool {
        let f = if v6 { Family::Inet6 } else { Family::Inet };
        self.rules.plain(f)
            || !self
                .rules
                .list(f)
                .iter()
                .any(|r| r.ipproto.is_some() || r.sport.is_some() || r.dport.is_some())
    }

    /// The earliest deadline of an expiring route, on the FIB's clock (`None`: no route
    /// expires). Until it, no input decision changes without a change to the state (which
    /// moves [`Fib::gen`]); from it on, lookups skip the route, before the GC reclaims it.
    #[inline]
    pub fn route_input_deadline(&self) -> Option<u64> {
        self.infos.expiry().next()
    }

    /// Whether the result `r` names is still its next hop's (see `dst`'s contract).
    #[inline]
    pub fn dst_ref_is_current(&self, r: DstRef) -> bool {
        self.dst_of(r).is_some_and(|d| d.gen == r.gen)
    }

    /// The current result of the next hop `r` names, whatever its generation; `None` once
    /// its route info is gone.
    pub fn dst_of(&self, r: DstRef) -> Option<&Dst> {
        self.infos.dst_at(DstAt {
            info: (r.slot != u32::MAX).then(|| InfoId::new(r.slot())),
            nh: r.hop(),
        })
    }

    /// The encapsulation of the next hop `r` names (seg6, seg6local, ioam6, rpl), as built;
    /// `None` for a plain next hop or one whose route info is gone. Forwarding objects compile
    /// it once per next hop; the data path never reads it here.
    pub fn hop_encap(&self, r: DstRef) -> Option<&crate::types::Encap> {
        if r.slot == u32::MAX {
            return None;
        }
        let info = self.infos.live(InfoId::new(r.slot()))?;
        info.spec.nhs.get(r.hop())?.encap.as_ref()
    }

    /// Every unicast next hop with an output link that a [`ForwardRoute`] can name, with its
    /// current handle: what forwarding state built beside the FIB is built from.
    pub fn forward_hops(&self) -> impl Iterator<Item = ForwardHop> + '_ {
        self.infos.iter().flat_map(|(_, info)| {
            let unicast = self.effective_type(info) == RouteType::Unicast;
            info.nh
                .iter()
                .zip(&info.spec.nhs)
                .filter(move |(_, n)| unicast && n.oif != IfIndex::NONE)
                .map(move |(st, n)| ForwardHop {
                    dst: DstRef::of(&st.dst),
                    family: info.spec.family,
                    oif: st.dst.oif,
                    gateway: n.gw.filter(|_| st.scope == scope::LINK),
                })
        })
    }

    /// The IPv4 forwarding result of next hop `nh` of `info`, a route of table `table`.
    #[inline]
    pub(crate) fn forward4(
        &self,
        info: &Info,
        nh: usize,
        table: TableId,
        redirect: bool,
    ) -> ForwardRoute {
        let d = &info.nh[nh].dst;
        ForwardRoute {
            oif: d.oif,
            gateway: neighbour_gateway(info, nh),
            mtu: d.mtu,
            redirect,
            table: table.0,
            dst: DstRef::of(d),
        }
    }

    /// The IPv6 forwarding result of next hop `nh` of `info`, a route of table `table`, for a
    /// packet in on `iif`.
    #[inline]
    pub(crate) fn forward6(
        &self,
        info: &Info,
        nh: usize,
        table: TableId,
        iif: u32,
    ) -> ForwardRoute {
        let d = &info.nh[nh].dst;
        let locked = info.spec.metrics.lock & LOCK_MTU != 0;
        let mtu = match info.spec.mtu_of(nh) {
            Some(m) if locked => m,
            Some(_) => self.links.get(IfIndex(d.oif)).map_or(d.mtu, |l| l.mtu),
            None => d.mtu,
        };
        ForwardRoute {
            oif: d.oif,
            gateway: neighbour_gateway(info, nh),
            mtu,
            redirect: d.oif == iif,
            table: table.0,
            dst: DstRef::of(d),
        }
    }

    /// The rules walk of an input or `route get` lookup, or one table's lookup when `table`
    /// names one (RTM_F_LOOKUP_TABLE).
    pub(crate) fn lookup_in(
        &self,
        family: Family,
        table: Option<u32>,
        flow: &Flow,
        lf: LookupFlags,
    ) -> Result<Res, LookupError> {
        match table {
            Some(t) => match self.table(family, TableId(t)) {
                Some(tb) => match self.table_lookup(family, tb, flow, lf) {
                    TableResult::Found(r) => Ok(r),
                    TableResult::Reject(e) => Err(e),
                    TableResult::Continue => Err(LookupError::NoRoute),
                },
                None => Err(LookupError::NoRoute),
            },
            None => self.fib_lookup(family, flow, lf),
        }
    }

    /// ip_route_input_slow for `flow` (its `oif` is ignored), restricted to one table when
    /// `table` names one.
    pub(crate) fn input4(&self, flow: &Flow, table: Option<u32>) -> Result<Input4, InputDrop> {
        let (mut res, flow) = match self.input4_route(flow, table)? {
            Route4::Done(x) => return Ok(x),
            Route4::Unicast(res, flow) => (res, flow),
        };
        self.select_multipath(&mut res, &flow);
        let oif = self.infos.get(res.entry.info).spec.nhs[res.nh].oif;
        let redirect = self.validate_source4(&flow, oif)? && oif == IfIndex(flow.iif);
        Ok(Input4::Forward { res, redirect })
    }

    /// [`Fib::input4`] for an input packet (all tables), as an [`InputRoute`], with what a
    /// cache may keep of the decision.
    fn input4_memo(&self, flow: &Flow) -> InputDecision {
        let (res, flow) = match self.input4_route(flow, None) {
            Err(d) => return fixed(Err(d)),
            Ok(Route4::Done(x)) => return fixed(Ok(self.route4(x))),
            Ok(Route4::Unicast(res, flow)) => (res, flow),
        };
        let info = self.infos.get(res.entry.info);
        let nh = self.multipath_nh(info, res.nh, &flow);
        let (oif, iif) = (info.spec.nhs[nh].oif, IfIndex(flow.iif));
        let checked = self.validate_source4(&flow, oif);
        let r = checked.map(|direct| {
            InputRoute::Forward(self.forward4(info, nh, res.table, direct && oif == iif))
        });
        // The reverse lookup's input link is the leg's output link: rules on the input link
        // can tell legs apart only when their output links differ.
        let legs_differ = info.spec.nhs.iter().any(|n| n.oif != oif);
        let iif_rules = legs_differ
            && self
                .rules
                .list(Family::Inet)
                .iter()
                .any(|r| r.iifname.is_some());
        let memo = memo4(
            info,
            res.nh,
            res.table,
            (r, checked),
            (oif, iif),
            (self.source_scan4(iif), iif_rules),
        );
        (r, memo)
    }

    /// An IPv4 decision as the data plane takes it.
    fn route4(&self, x: Input4) -> InputRoute {
        match x {
            Input4::LimitedBroadcast => InputRoute::Broadcast { table: None },
            Input4::Broadcast(res) => InputRoute::Broadcast {
                table: Some(res.table.0),
            },
            Input4::Local(res) => InputRoute::Local { table: res.table.0 },
            Input4::Forward { res, redirect } => {
                let info = self.infos.get(res.entry.info);
                InputRoute::Forward(self.forward4(info, res.nh, res.table, redirect))
            }
        }
    }

    /// Whether fib_validate_source checks a source received on `iif` by scanning the local
    /// addresses instead of a lookup back to it, for a packet leaving by another link: with
    /// rp_filter off and neither custom rules nor custom local routes
    /// (fib4_has_custom_rules, fib_has_custom_local_routes).
    fn source_scan4(&self, iif: IfIndex) -> bool {
        self.confs.rp_filter(self.settings().rp_filter, iif) == 0
            && !self.custom_rules4
            && !self.custom_local4
    }

    /// ip_route_input_slow up to the choice of a next hop: the decision when no next hop is
    /// needed, else the unicast route found and the flow it was looked up for.
    fn input4_route(&self, flow: &Flow, table: Option<u32>) -> Result<Route4, InputDrop> {
        let d = flow.dst as u32;
        let s = flow.src as u32;
        if is_multicast4(s) || is_lbcast(s) {
            return Err(InputDrop::MartianSource);
        }
        if is_lbcast(d) || (s == 0 && d == 0) {
            // brd_input: a source other than 0.0.0.0 must pass the reverse-path check, which
            // brd_input runs without the destination (the reverse flow has no source).
            if s != 0 {
                self.validate_source4(&Flow { dst: 0, ..*flow }, IfIndex::NONE)?;
            }
            return Ok(Route4::Done(Input4::LimitedBroadcast));
        }
        if is_multicast4(d) {
            return Err(InputDrop::Multicast);
        }
        if is_zeronet(s) {
            return Err(InputDrop::MartianSource);
        }
        if is_zeronet(d) || is_loopback4(d) {
            return Err(InputDrop::MartianDestination);
        }
        if is_loopback4(s) {
            return Err(InputDrop::MartianSource);
        }
        let fwd = self.settings().ipv4_forwarding;
        let flow = Flow { oif: 0, ..*flow };
        let res = match self.lookup_in(Family::Inet, table, &flow, LookupFlags::packet()) {
            Ok(r) => r,
            Err(_) if !fwd => return Err(InputDrop::ForwardingOff),
            Err(e) => return Err(InputDrop::of(e)),
        };
        match res.rtype {
            RouteType::Broadcast => {
                self.validate_source4(&Flow { dst: 0, ..flow }, IfIndex::NONE)?;
                Ok(Route4::Done(Input4::Broadcast(res)))
            }
            RouteType::Local => {
                self.validate_source4(&flow, IfIndex::NONE)?;
                Ok(Route4::Done(Input4::Local(res)))
            }
            _ if !fwd => Err(InputDrop::ForwardingOff),
            RouteType::Unicast => Ok(Route4::Unicast(res, flow)),
            _ => Err(InputDrop::MartianDestination),
        }
    }

    /// fib_validate_source: martian and reverse-path checks of an input packet's source
    /// (`oif` is the output device of a forwarded packet, none for local delivery). `Ok(true)`
    /// when the source is directly connected through the input device (a redirect may be
    /// due).
    fn validate_source4(&self, flow: &Flow, oif: IfIndex) -> Result<bool, InputDrop> {
        let (s, d, iif) = (flow.src as u32, flow.dst as u32, flow.iif);
        // IN_DEV_RPFILTER: the larger of conf.all and the input link's own setting.
        let rpf = self
            .confs
            .rp_filter(self.settings().rp_filter, IfIndex(iif));
        // accept_local is off, tx_redirects and shared_media are on (the kernel defaults).
        if self.source_scan4(IfIndex(iif)) && iif != oif.0 {
            if self.links.iter().any(|l| l.v4.iter().any(|a| a.local == s)) {
                return Err(InputDrop::LocalSource);
            }
            return Ok(false);
        }
        let last_resort = || {
            if rpf != 0 {
                Err(InputDrop::ReversePath)
            } else {
                Ok(false)
            }
        };
        // The reverse flow keeps the packet's protocol and swaps its ports.
        let rev = Flow {
            dst: s as u128,
            src: d as u128,
            iif: if oif != IfIndex::NONE {
                oif.0
            } else {
                LOOPBACK_IFINDEX
            },
            tos: flow.tos,
            proto: flow.proto,
            sport: flow.dport,
            dport: flow.sport,
            ..Flow::empty()
        };
        let Ok(res) = self.fib_lookup(Family::Inet, &rev, LookupFlags::packet()) else {
            return last_resort();
        };
        if res.rtype != RouteType::Unicast {
            return Err(InputDrop::LocalSource);
        }
        let info = self.infos.get(res.entry.info);
        if info.spec.nhs.iter().any(|n| n.oif == IfIndex(iif)) {
            return Ok(info.nh[res.nh].scope >= scope::HOST);
        }
        if self.links.get(IfIndex(iif)).is_none_or(|l| l.v4.is_empty()) {
            return last_resort();
        }
        if rpf == 1 {
            return Err(InputDrop::ReversePath);
        }
        let rev = Flow { oif: iif, ..rev };
        match self.fib_lookup(Family::Inet, &rev, LookupFlags::default()) {
            Ok(r) if r.rtype == RouteType::Unicast => {
                Ok(self.infos.get(r.entry.info).nh[r.nh].scope >= scope::HOST)
            }
            _ => Ok(false),
        }
    }

    /// ip6_route_input_lookup (`input`) or the table walk of ip6_route_output: the lookup
    /// flags the destination calls for, then multipath selection.
    pub(crate) fn lookup6(
        &self,
        flow: &Flow,
        table: Option<u32>,
        input: bool,
    ) -> Result<Res, LookupError> {
        let mut res = self.lookup6_route(flow, table, input)?;
        self.select_multipath(&mut res, flow);
        Ok(res)
    }

    /// [`Fib::lookup6`] before the multipath choice: `res.nh` is the route's first usable
    /// next hop.
    fn lookup6_route(
        &self,
        flow: &Flow,
        table: Option<u32>,
        input: bool,
    ) -> Result<Res, LookupError> {
        let d6 = match u128_ip(Family::Inet6, flow.dst) {
            IpAddr::V6(a) => a,
            IpAddr::V4(_) => Ipv6Addr::UNSPECIFIED,
        };
        let need_strict =
            d6.is_multicast() || d6.is_loopback() || d6.segments()[0] & 0xffc0 == 0xfe80;
        let strict = need_strict || (!input && flow.oif != 0 && flow.src == 0);
        let lf = LookupFlags {
            strict_oif: strict,
            iif_as_oif: input,
            linkdown_conf: true,
        };
        self.lookup_in(Family::Inet6, table, flow, lf)
    }

    /// ip6_route_input, then what the route found's input function does with the packet;
    /// with what a cache may keep of the decision.
    fn input6_memo(&self, flow: &Flow, d6: &Ipv6Addr) -> InputDecision {
        self.input6_in(flow, d6, None)
    }

    /// The input decision for a packet of `k` looked up in table `table` alone, rules
    /// skipped: the SRv6 behaviours that name a table look up so (End.T and End.DT6:
    /// seg6_lookup_any_nexthop with a table id; End.DT4, End.DT46: ip_route_input on the VRF
    /// device whose rule leads to the table). Not cached.
    pub fn route_input_table(&self, k: &InputKey, table: u32) -> Result<InputRoute, InputDrop> {
        match (k.dst, k.src) {
            (IpAddr::V4(_), IpAddr::V4(_)) => {
                self.input4(&k.flow(), Some(table)).map(|x| self.route4(x))
            }
            (IpAddr::V6(d6), IpAddr::V6(_)) => self.input6_in(&k.flow(), &d6, Some(table)).0,
            _ => Err(InputDrop::MartianSource),
        }
    }

    fn input6_in(&self, flow: &Flow, d6: &Ipv6Addr, table: Option<u32>) -> InputDecision {
        let mut res = match self.lookup6_route(flow, table, true) {
            Ok(r) => r,
            Err(e) => return fixed(Err(InputDrop::of(e))),
        };
        let info = self.infos.get(res.entry.info);
        let first = res.nh;
        self.select_multipath(&mut res, flow);
        let table = res.table.0;
        if res.rtype == RouteType::Local || info.spec.rtf_anycast {
            return fixed(Ok(InputRoute::Local { table }));
        }
        if d6.is_multicast() {
            return fixed(match self.joined6(IfIndex(flow.iif), d6) {
                true => Ok(InputRoute::Local { table }),
                false => Err(InputDrop::Multicast),
            });
        }
        if !self.settings().ipv6_forwarding {
            return fixed(Err(InputDrop::ForwardingOff));
        }
        let r = Ok(InputRoute::Forward(
            self.forward6(info, res.nh, res.table, flow.iif),
        ));
        (r, Some(memo6(info, first, res.table, r)))
    }

    /// Whether link `dev` is in multicast group `g`: every IPv6 link joins all-nodes
    /// (ipv6_add_dev), all-routers while forwarding (dev_forward_change) and the
    /// solicited-node group of each of its addresses (addrconf_join_solict).
    fn joined6(&self, dev: IfIndex, g: &Ipv6Addr) -> bool {
        let s = g.segments();
        let all_nodes = s == [0xff01, 0, 0, 0, 0, 0, 0, 1] || s == [0xff02, 0, 0, 0, 0, 0, 0, 1];
        let all_routers =
            matches!(s[0], 0xff01 | 0xff02 | 0xff05) && s[1..] == [0, 0, 0, 0, 0, 0, 2];
        if all_nodes || (all_routers && self.settings().ipv6_forwarding) {
            return true;
        }
        let solicited = s[..6] == [0xff02, 0, 0, 0, 0, 1] && s[6] >> 8 == 0xff;
        solicited
            && self.links.get(dev).is_some_and(|l| {
                l.v6.iter().any(|a| {
                    let o = a.addr.octets();
                    let go = g.octets();
                    o[13..] == go[13..]
                })
            })
    }
}
