//! FRA_* attributes of a rule message.

use super::{PortRange, UidRange};
use crate::nla::{attributes, NlStr};
use std::net::IpAddr;

/// FRA_* attribute numbers.
#[allow(non_snake_case)]
pub mod FRA {
    pub const DST: u16 = 1;
    pub const SRC: u16 = 2;
    pub const IIFNAME: u16 = 3;
    pub const GOTO: u16 = 4;
    pub const PRIORITY: u16 = 6;
    pub const FWMARK: u16 = 10;
    pub const FLOW: u16 = 11;
    pub const TUN_ID: u16 = 12;
    pub const SUPPRESS_IFGROUP: u16 = 13;
    pub const SUPPRESS_PREFIXLEN: u16 = 14;
    pub const TABLE: u16 = 15;
    pub const FWMASK: u16 = 16;
    pub const OIFNAME: u16 = 17;
    pub const L3MDEV: u16 = 19;
    pub const UID_RANGE: u16 = 20;
    pub const PROTOCOL: u16 = 21;
    pub const IP_PROTO: u16 = 22;
    pub const SPORT_RANGE: u16 = 23;
    pub const DPORT_RANGE: u16 = 24;
    pub const DSCP: u16 = 25;
}

attributes! {
    /// An FRA_* attribute.
    pub enum RuleAttr<'a> {
        Dst(IpAddr) = FRA::DST,
        Src(IpAddr) = FRA::SRC,
        IifName(NlStr<'a>) = FRA::IIFNAME,
        Goto(u32) = FRA::GOTO,
        Priority(u32) = FRA::PRIORITY,
        FwMark(u32) = FRA::FWMARK,
        Flow(u32) = FRA::FLOW,
        /// Tunnel id, network byte order, undecoded.
        TunId(&'a [u8]) = FRA::TUN_ID,
        SuppressIfGroup(u32) = FRA::SUPPRESS_IFGROUP,
        SuppressPrefixLen(u32) = FRA::SUPPRESS_PREFIXLEN,
        Table(u32) = FRA::TABLE,
        FwMask(u32) = FRA::FWMASK,
        OifName(NlStr<'a>) = FRA::OIFNAME,
        L3mdev(u8) = FRA::L3MDEV,
        UidRange(UidRange) = FRA::UID_RANGE,
        /// RTPROT_* of the rule's creator.
        Protocol(u8) = FRA::PROTOCOL,
        IpProto(u8) = FRA::IP_PROTO,
        SourcePortRange(PortRange) = FRA::SPORT_RANGE,
        DestinationPortRange(PortRange) = FRA::DPORT_RANGE,
        Dscp(u8) = FRA::DSCP,
    }
}
