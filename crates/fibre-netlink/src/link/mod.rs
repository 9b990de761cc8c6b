//! Links: RTM_NEWLINK / RTM_DELLINK / RTM_GETLINK / RTM_SETLINK, `struct ifinfomsg` + IFLA_*.

mod af_spec;
mod attribute;
mod link_info;
mod stats;

pub use af_spec::{AfSpecAttr, Inet6Attr};
pub use attribute::{LinkAttr, IFLA};
pub use link_info::{
    port_data, LinkInfoAttr, PortAttr, FIBRE_PORT, IFLA_INFO, IO_AF_PACKET, IO_AF_XDP, IO_TAP,
    PORT_KIND,
};
pub use stats::LinkStats64;

use crate::nla::object_message;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct ifinfomsg`.
    pub struct LinkHeader;
    /// View of `struct ifinfomsg`.
    pub struct LinkHeaderPacket;
    len = 16, what = "ifinfomsg";
    {
        family, set_family: u8 = 0;
        /// `__ifi_pad`.
        pad, set_pad: u8 = 1;
        /// ARPHRD_* link-layer type.
        link_type, set_link_type: u16 = 2;
        index, set_index: i32 = 4;
        /// IFF_* flags.
        flags, set_flags: u32 = 8;
        /// Which IFF_* bits a request changes.
        change, set_change: u32 = 12;
    }
}

object_message! {
    /// A link message.
    pub struct LinkMessage<'a> { LinkHeader, LinkAttr }
}
