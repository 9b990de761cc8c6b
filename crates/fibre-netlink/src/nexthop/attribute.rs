//! NHA_* attributes of a next-hop object message.

use super::{GroupEntry, ResBucketAttr, ResGroupAttr};
use crate::lwtunnel::Encap;
use crate::nla::{attributes, Flag, Nest, NestedBytes};
use std::net::IpAddr;

/// NHA_* attribute numbers.
#[allow(non_snake_case)]
pub mod NHA {
    pub const ID: u16 = 1;
    pub const GROUP: u16 = 2;
    pub const GROUP_TYPE: u16 = 3;
    pub const BLACKHOLE: u16 = 4;
    pub const OIF: u16 = 5;
    pub const GATEWAY: u16 = 6;
    pub const ENCAP_TYPE: u16 = 7;
    pub const ENCAP: u16 = 8;
    pub const GROUPS: u16 = 9;
    pub const MASTER: u16 = 10;
    pub const FDB: u16 = 11;
    pub const RES_GROUP: u16 = 12;
    pub const RES_BUCKET: u16 = 13;
    pub const OP_FLAGS: u16 = 14;
}

attributes! {
    /// An NHA_* attribute.
    pub enum NexthopAttr<'a> {
        Id(u32) = NHA::ID,
        /// Members of a group (`struct nexthop_grp` array).
        Group(Vec<GroupEntry>) = NHA::GROUP,
        /// NEXTHOP_GRP_TYPE_*: 0 multipath, 1 resilient.
        GroupType(u16) = NHA::GROUP_TYPE,
        Blackhole(Flag) = NHA::BLACKHOLE,
        Oif(u32) = NHA::OIF,
        Gateway(IpAddr) = NHA::GATEWAY,
        EncapType(u16) = NHA::ENCAP_TYPE,
        /// Undecoded; `lwtunnel::Encap::decode` reads it with NHA_ENCAP_TYPE.
        Encap(NestedBytes<'a>) = NHA::ENCAP,
        /// An encapsulation built to be sent; parsing gives [`NexthopAttr::Encap`].
        EncapOut(Encap<'a>) = NHA::ENCAP,
        /// In a dump request: groups only.
        Groups(Flag) = NHA::GROUPS,
        Master(u32) = NHA::MASTER,
        Fdb(Flag) = NHA::FDB,
        /// Resilient-group parameters.
        ResGroup(Nest<ResGroupAttr<'a>>) = NHA::RES_GROUP,
        /// One bucket of a resilient group (bucket messages), or a bucket filter.
        ResBucket(Nest<ResBucketAttr<'a>>) = NHA::RES_BUCKET,
        OpFlags(u32) = NHA::OP_FLAGS,
    }
}
