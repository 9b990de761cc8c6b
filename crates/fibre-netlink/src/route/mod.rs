//! Routes: RTM_NEWROUTE / RTM_DELROUTE / RTM_GETROUTE, `struct rtmsg` + RTA_*.

mod attribute;
mod cache_info;
mod metrics;
mod multipath;
mod via;

pub use attribute::{RouteAttr, RTA};
pub use cache_info::{RouteCacheInfo, RouteCacheInfoPacket};
pub use metrics::{MetricAttr, RTAX};
pub use multipath::{NextHopHeader, NextHopHeaderPacket, RouteNextHop};
pub use via::Via;

use crate::nla::object_message;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct rtmsg`.
    pub struct RouteHeader;
    /// View of `struct rtmsg`.
    pub struct RouteHeaderPacket;
    len = 12, what = "rtmsg";
    {
        family, set_family: u8 = 0;
        dst_len, set_dst_len: u8 = 1;
        src_len, set_src_len: u8 = 2;
        tos, set_tos: u8 = 3;
        /// Table id when below 256, else RT_TABLE_COMPAT (252) and RTA_TABLE holds it.
        table, set_table: u8 = 4;
        /// RTPROT_*.
        protocol, set_protocol: u8 = 5;
        /// RT_SCOPE_*.
        scope, set_scope: u8 = 6;
        /// RTN_*.
        kind, set_kind: u8 = 7;
        /// RTM_F_* and RTNH_F_*.
        flags, set_flags: u32 = 8;
    }
}

object_message! {
    /// A route message.
    pub struct RouteMessage<'a> { RouteHeader, RouteAttr }
}
