//! IFLA_* attributes of a link message.

use super::{AfSpecAttr, LinkInfoAttr, LinkStats64};
use crate::nla::{attributes, Nest, NlStr};

/// IFLA_* attribute numbers.
#[allow(non_snake_case)]
pub mod IFLA {
    pub const ADDRESS: u16 = 1;
    pub const BROADCAST: u16 = 2;
    pub const IFNAME: u16 = 3;
    pub const MTU: u16 = 4;
    pub const LINK: u16 = 5;
    pub const QDISC: u16 = 6;
    pub const STATS: u16 = 7;
    pub const MASTER: u16 = 10;
    pub const TXQLEN: u16 = 13;
    pub const OPERSTATE: u16 = 16;
    pub const LINKMODE: u16 = 17;
    pub const LINKINFO: u16 = 18;
    pub const IFALIAS: u16 = 20;
    pub const STATS64: u16 = 23;
    pub const AF_SPEC: u16 = 26;
    pub const GROUP: u16 = 27;
    pub const PROMISCUITY: u16 = 30;
    pub const NUM_TX_QUEUES: u16 = 31;
    pub const NUM_RX_QUEUES: u16 = 32;
    pub const CARRIER: u16 = 33;
    pub const CARRIER_CHANGES: u16 = 35;
    pub const LINK_NETNSID: u16 = 37;
    pub const MIN_MTU: u16 = 50;
    pub const MAX_MTU: u16 = 51;
}

attributes! {
    /// An IFLA_* attribute.
    pub enum LinkAttr<'a> {
        /// Link-layer address.
        Address(&'a [u8]) = IFLA::ADDRESS,
        Broadcast(&'a [u8]) = IFLA::BROADCAST,
        IfName(NlStr<'a>) = IFLA::IFNAME,
        Mtu(u32) = IFLA::MTU,
        /// The peer or lower link's index.
        Link(u32) = IFLA::LINK,
        Qdisc(NlStr<'a>) = IFLA::QDISC,
        Master(u32) = IFLA::MASTER,
        TxQueueLen(u32) = IFLA::TXQLEN,
        /// IF_OPER_* (RFC 2863 state).
        OperState(u8) = IFLA::OPERSTATE,
        LinkMode(u8) = IFLA::LINKMODE,
        LinkInfo(Nest<LinkInfoAttr<'a>>) = IFLA::LINKINFO,
        IfAlias(NlStr<'a>) = IFLA::IFALIAS,
        AfSpec(Nest<AfSpecAttr<'a>>) = IFLA::AF_SPEC,
        Group(u32) = IFLA::GROUP,
        Promiscuity(u32) = IFLA::PROMISCUITY,
        NumTxQueues(u32) = IFLA::NUM_TX_QUEUES,
        NumRxQueues(u32) = IFLA::NUM_RX_QUEUES,
        Carrier(u8) = IFLA::CARRIER,
        CarrierChanges(u32) = IFLA::CARRIER_CHANGES,
        LinkNetnsId(i32) = IFLA::LINK_NETNSID,
        MinMtu(u32) = IFLA::MIN_MTU,
        MaxMtu(u32) = IFLA::MAX_MTU,
        Stats64(LinkStats64) = IFLA::STATS64,
    }
}
