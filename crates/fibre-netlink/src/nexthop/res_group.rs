//! NHA_RES_GROUP and NHA_RES_BUCKET: the nested parameters of a resilient next-hop group, and
//! one of its buckets (RTM_*NEXTHOPBUCKET).

use crate::nla::attributes;

/// NHA_RES_GROUP_* attribute numbers.
#[allow(non_snake_case)]
pub mod NHA_RES_GROUP {
    pub const BUCKETS: u16 = 1;
    pub const IDLE_TIMER: u16 = 2;
    pub const UNBALANCED_TIMER: u16 = 3;
    pub const UNBALANCED_TIME: u16 = 4;
}

attributes! {
    /// An NHA_RES_GROUP_* attribute. Times are in clock_t (1/100 s).
    pub enum ResGroupAttr<'a> {
        /// The number of buckets.
        Buckets(u16) = NHA_RES_GROUP::BUCKETS,
        /// How long a bucket stays unused before it may move to another member.
        IdleTimer(u32) = NHA_RES_GROUP::IDLE_TIMER,
        /// How long the group may stay unbalanced before buckets move regardless (0: forever).
        UnbalancedTimer(u32) = NHA_RES_GROUP::UNBALANCED_TIMER,
        /// Answers only: how long the group has been unbalanced.
        UnbalancedTime(u64) = NHA_RES_GROUP::UNBALANCED_TIME,
    }
}

/// NHA_RES_BUCKET_* attribute numbers.
#[allow(non_snake_case)]
pub mod NHA_RES_BUCKET {
    pub const INDEX: u16 = 1;
    pub const IDLE_TIME: u16 = 2;
    pub const NH_ID: u16 = 3;
}

attributes! {
    /// An NHA_RES_BUCKET_* attribute.
    pub enum ResBucketAttr<'a> {
        Index(u16) = NHA_RES_BUCKET::INDEX,
        /// Time since the bucket was last used or moved, in clock_t.
        IdleTime(u64) = NHA_RES_BUCKET::IDLE_TIME,
        /// The member the bucket holds.
        NhId(u32) = NHA_RES_BUCKET::NH_ID,
    }
}
