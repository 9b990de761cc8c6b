//! IFA_CACHEINFO: `struct ifa_cacheinfo`, an address's lifetimes and timestamps.

use crate::nla::struct_value;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct ifa_cacheinfo`. Lifetimes in seconds, 0xffffffff = forever; stamps in
    /// hundredths of a second since boot.
    pub struct AddressCacheInfo;
    /// View of `struct ifa_cacheinfo`.
    pub struct AddressCacheInfoPacket;
    len = 16, what = "ifa_cacheinfo";
    {
        preferred, set_preferred: u32 = 0;
        valid, set_valid: u32 = 4;
        created, set_created: u32 = 8;
        updated, set_updated: u32 = 12;
    }
}

struct_value!(AddressCacheInfo, AddressCacheInfoPacket);
