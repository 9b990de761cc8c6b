//! RTA_CACHEINFO: `struct rta_cacheinfo`.

use crate::nla::struct_value;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct rta_cacheinfo`. Times in jiffies as the kernel reports them (`expires` in
    /// USER_HZ ticks, negative when past).
    pub struct RouteCacheInfo;
    /// View of `struct rta_cacheinfo`.
    pub struct RouteCacheInfoPacket;
    len = 32, what = "rta_cacheinfo";
    {
        clntref, set_clntref: u32 = 0;
        last_use, set_last_use: u32 = 4;
        expires, set_expires: i32 = 8;
        error, set_error: u32 = 12;
        used, set_used: u32 = 16;
        id, set_id: u32 = 20;
        ts, set_ts: u32 = 24;
        ts_age, set_ts_age: u32 = 28;
    }
}

struct_value!(RouteCacheInfo, RouteCacheInfoPacket);
