//! Addresses: RTM_NEWADDR / RTM_DELADDR / RTM_GETADDR, `struct ifaddrmsg` + IFA_*.

mod attribute;
mod cache_info;

pub use attribute::{AddressAttr, IFA};
pub use cache_info::AddressCacheInfo;

use crate::nla::object_message;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct ifaddrmsg`.
    pub struct AddressHeader;
    /// View of `struct ifaddrmsg`.
    pub struct AddressHeaderPacket;
    len = 8, what = "ifaddrmsg";
    {
        family, set_family: u8 = 0;
        prefix_len, set_prefix_len: u8 = 1;
        /// The low 8 IFA_F_* flags (IFA_FLAGS carries all 32).
        flags, set_flags: u8 = 2;
        scope, set_scope: u8 = 3;
        index, set_index: u32 = 4;
    }
}

object_message! {
    /// An address message.
    pub struct AddressMessage<'a> { AddressHeader, AddressAttr }
}
