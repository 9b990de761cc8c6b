//! RTA_* attributes of a route message (also those inside each RTA_MULTIPATH next hop).

use super::{MetricAttr, RouteCacheInfo, RouteNextHop, Via};
use crate::lwtunnel::Encap;
use crate::nla::{attributes, Be16, Nest, NestedBytes};
use std::net::IpAddr;

/// RTA_* attribute numbers.
#[allow(non_snake_case)]
pub mod RTA {
    pub const DST: u16 = 1;
    pub const SRC: u16 = 2;
    pub const IIF: u16 = 3;
    pub const OIF: u16 = 4;
    pub const GATEWAY: u16 = 5;
    pub const PRIORITY: u16 = 6;
    pub const PREFSRC: u16 = 7;
    pub const METRICS: u16 = 8;
    pub const MULTIPATH: u16 = 9;
    pub const FLOW: u16 = 11;
    pub const CACHEINFO: u16 = 12;
    pub const TABLE: u16 = 15;
    pub const MARK: u16 = 16;
    pub const VIA: u16 = 18;
    pub const PREF: u16 = 20;
    pub const ENCAP_TYPE: u16 = 21;
    pub const ENCAP: u16 = 22;
    pub const EXPIRES: u16 = 23;
    pub const UID: u16 = 25;
    pub const TTL_PROPAGATE: u16 = 26;
    pub const IP_PROTO: u16 = 27;
    pub const SPORT: u16 = 28;
    pub const DPORT: u16 = 29;
    pub const NH_ID: u16 = 30;
}

attributes! {
    /// An RTA_* attribute.
    pub enum RouteAttr<'a> {
        Dst(IpAddr) = RTA::DST,
        Src(IpAddr) = RTA::SRC,
        Iif(u32) = RTA::IIF,
        Oif(u32) = RTA::OIF,
        Gateway(IpAddr) = RTA::GATEWAY,
        /// The metric.
        Priority(u32) = RTA::PRIORITY,
        PrefSrc(IpAddr) = RTA::PREFSRC,
        Metrics(Nest<MetricAttr<'a>>) = RTA::METRICS,
        Multipath(Vec<RouteNextHop<'a>>) = RTA::MULTIPATH,
        Flow(u32) = RTA::FLOW,
        CacheInfo(RouteCacheInfo) = RTA::CACHEINFO,
        Table(u32) = RTA::TABLE,
        Mark(u32) = RTA::MARK,
        /// A gateway of another family (IPv4 route via an IPv6 next hop).
        Via(Via<'a>) = RTA::VIA,
        /// ICMPV6_ROUTER_PREF_*: 0 medium, 1 high, 3 low.
        Pref(u8) = RTA::PREF,
        /// LWTUNNEL_ENCAP_*.
        EncapType(u16) = RTA::ENCAP_TYPE,
        /// Encapsulation attributes of the space RTA_ENCAP_TYPE names, undecoded (parsing
        /// gives this; `lwtunnel::Encap::decode` reads it once the type is known).
        Encap(NestedBytes<'a>) = RTA::ENCAP,
        /// An encapsulation built to be sent. Parsing never gives it (the attribute's space is
        /// not known when it is read): it gives [`RouteAttr::Encap`].
        EncapOut(Encap<'a>) = RTA::ENCAP,
        /// Seconds until the route expires.
        Expires(u32) = RTA::EXPIRES,
        Uid(u32) = RTA::UID,
        TtlPropagate(u8) = RTA::TTL_PROPAGATE,
        IpProto(u8) = RTA::IP_PROTO,
        SourcePort(Be16) = RTA::SPORT,
        DestinationPort(Be16) = RTA::DPORT,
        /// The next-hop object the route uses.
        NhId(u32) = RTA::NH_ID,
    }
}
