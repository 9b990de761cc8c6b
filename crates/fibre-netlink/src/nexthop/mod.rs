//! Next-hop objects: RTM_NEWNEXTHOP / RTM_DELNEXTHOP / RTM_GETNEXTHOP, `struct nhmsg` + NHA_*.

mod attribute;
mod group;
mod res_group;

pub use attribute::{NexthopAttr, NHA};
pub use group::{GroupEntry, GroupEntryPacket};
pub use res_group::{ResBucketAttr, ResGroupAttr, NHA_RES_BUCKET, NHA_RES_GROUP};

use crate::nla::object_message;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct nhmsg`.
    pub struct NexthopHeader;
    /// View of `struct nhmsg`.
    pub struct NexthopHeaderPacket;
    len = 8, what = "nhmsg";
    {
        family, set_family: u8 = 0;
        scope, set_scope: u8 = 1;
        protocol, set_protocol: u8 = 2;
        resvd, set_resvd: u8 = 3;
        /// RTNH_F_*.
        flags, set_flags: u32 = 4;
    }
}

object_message! {
    /// A next-hop object message.
    pub struct NexthopMessage<'a> { NexthopHeader, NexthopAttr }
}
