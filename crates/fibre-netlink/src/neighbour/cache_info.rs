//! NDA_CACHEINFO: `struct nda_cacheinfo`.

use crate::nla::struct_value;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct nda_cacheinfo`: ages in clock ticks and the reference count.
    pub struct NeighbourCacheInfo;
    /// View of `struct nda_cacheinfo`.
    pub struct NeighbourCacheInfoPacket;
    len = 16, what = "nda_cacheinfo";
    {
        confirmed, set_confirmed: u32 = 0;
        used, set_used: u32 = 4;
        updated, set_updated: u32 = 8;
        refcnt, set_refcnt: u32 = 12;
    }
}

struct_value!(NeighbourCacheInfo, NeighbourCacheInfoPacket);
