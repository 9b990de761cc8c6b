//! NDA_* attributes of a neighbour message.

use super::NeighbourCacheInfo;
use crate::nla::{attributes, Be16, NestedBytes};
use std::net::IpAddr;

/// NDA_* attribute numbers.
#[allow(non_snake_case)]
pub mod NDA {
    pub const DST: u16 = 1;
    pub const LLADDR: u16 = 2;
    pub const CACHEINFO: u16 = 3;
    pub const PROBES: u16 = 4;
    pub const VLAN: u16 = 5;
    pub const PORT: u16 = 6;
    pub const VNI: u16 = 7;
    pub const IFINDEX: u16 = 8;
    pub const MASTER: u16 = 9;
    pub const LINK_NETNSID: u16 = 10;
    pub const SRC_VNI: u16 = 11;
    pub const PROTOCOL: u16 = 12;
    pub const NH_ID: u16 = 13;
    pub const FDB_EXT_ATTRS: u16 = 14;
    pub const FLAGS_EXT: u16 = 15;
}

attributes! {
    /// An NDA_* attribute.
    pub enum NeighbourAttr<'a> {
        Dst(IpAddr) = NDA::DST,
        LinkLayerAddress(&'a [u8]) = NDA::LLADDR,
        CacheInfo(NeighbourCacheInfo) = NDA::CACHEINFO,
        Probes(u32) = NDA::PROBES,
        Vlan(u16) = NDA::VLAN,
        Port(Be16) = NDA::PORT,
        Vni(u32) = NDA::VNI,
        IfIndex(u32) = NDA::IFINDEX,
        Master(u32) = NDA::MASTER,
        LinkNetnsId(i32) = NDA::LINK_NETNSID,
        SrcVni(u32) = NDA::SRC_VNI,
        Protocol(u8) = NDA::PROTOCOL,
        NhId(u32) = NDA::NH_ID,
        FdbExtAttrs(NestedBytes<'a>) = NDA::FDB_EXT_ATTRS,
        FlagsExt(u32) = NDA::FLAGS_EXT,
    }
}
