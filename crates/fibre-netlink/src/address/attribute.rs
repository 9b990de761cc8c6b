//! IFA_* attributes of an address message.

use super::AddressCacheInfo;
use crate::nla::{attributes, NlStr};
use std::net::IpAddr;

/// IFA_* attribute numbers.
#[allow(non_snake_case)]
pub mod IFA {
    pub const ADDRESS: u16 = 1;
    pub const LOCAL: u16 = 2;
    pub const LABEL: u16 = 3;
    pub const BROADCAST: u16 = 4;
    pub const ANYCAST: u16 = 5;
    pub const CACHEINFO: u16 = 6;
    pub const MULTICAST: u16 = 7;
    pub const FLAGS: u16 = 8;
    pub const RT_PRIORITY: u16 = 9;
    pub const TARGET_NETNSID: u16 = 10;
    pub const PROTO: u16 = 11;
}

attributes! {
    /// An IFA_* attribute.
    pub enum AddressAttr<'a> {
        /// The peer on point-to-point links, else the address itself.
        Address(IpAddr) = IFA::ADDRESS,
        Local(IpAddr) = IFA::LOCAL,
        Label(NlStr<'a>) = IFA::LABEL,
        Broadcast(IpAddr) = IFA::BROADCAST,
        Anycast(IpAddr) = IFA::ANYCAST,
        CacheInfo(AddressCacheInfo) = IFA::CACHEINFO,
        Multicast(IpAddr) = IFA::MULTICAST,
        /// All IFA_F_* flags.
        Flags(u32) = IFA::FLAGS,
        /// Metric of the prefix route.
        RtPriority(u32) = IFA::RT_PRIORITY,
        TargetNetnsId(i32) = IFA::TARGET_NETNSID,
        Proto(u8) = IFA::PROTO,
    }
}
