//! Neighbours: RTM_NEWNEIGH / RTM_DELNEIGH / RTM_GETNEIGH, `struct ndmsg` + NDA_*.

mod attribute;
mod cache_info;

pub use attribute::{NeighbourAttr, NDA};
pub use cache_info::{NeighbourCacheInfo, NeighbourCacheInfoPacket};

use crate::nla::object_message;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct ndmsg`.
    pub struct NeighbourHeader;
    /// View of `struct ndmsg`.
    pub struct NeighbourHeaderPacket;
    len = 12, what = "ndmsg";
    {
        family, set_family: u8 = 0;
        pad1, set_pad1: u8 = 1;
        pad2, set_pad2: u16 = 2;
        ifindex, set_ifindex: i32 = 4;
        /// NUD_* state.
        state, set_state: u16 = 8;
        /// NTF_* flags.
        flags, set_flags: u8 = 10;
        /// RTN_* type.
        kind, set_kind: u8 = 11;
    }
}

object_message! {
    /// A neighbour message.
    pub struct NeighbourMessage<'a> { NeighbourHeader, NeighbourAttr }
}
