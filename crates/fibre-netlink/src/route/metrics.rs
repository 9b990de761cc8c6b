//! RTA_METRICS: nested RTAX_* route metrics.

use crate::nla::{attributes, NlStr};

/// RTAX_* attribute numbers.
#[allow(non_snake_case)]
pub mod RTAX {
    pub const LOCK: u16 = 1;
    pub const MTU: u16 = 2;
    pub const WINDOW: u16 = 3;
    pub const RTT: u16 = 4;
    pub const RTTVAR: u16 = 5;
    pub const SSTHRESH: u16 = 6;
    pub const CWND: u16 = 7;
    pub const ADVMSS: u16 = 8;
    pub const REORDERING: u16 = 9;
    pub const HOPLIMIT: u16 = 10;
    pub const INITCWND: u16 = 11;
    pub const FEATURES: u16 = 12;
    pub const RTO_MIN: u16 = 13;
    pub const INITRWND: u16 = 14;
    pub const QUICKACK: u16 = 15;
    pub const CC_ALGO: u16 = 16;
    pub const FASTOPEN_NO_COOKIE: u16 = 17;
}

attributes! {
    /// An RTAX_* metric.
    pub enum MetricAttr<'a> {
        /// Bit `1 << RTAX_x` set: metric x is locked.
        Lock(u32) = RTAX::LOCK,
        Mtu(u32) = RTAX::MTU,
        Window(u32) = RTAX::WINDOW,
        Rtt(u32) = RTAX::RTT,
        RttVar(u32) = RTAX::RTTVAR,
        SsThresh(u32) = RTAX::SSTHRESH,
        Cwnd(u32) = RTAX::CWND,
        AdvMss(u32) = RTAX::ADVMSS,
        Reordering(u32) = RTAX::REORDERING,
        HopLimit(u32) = RTAX::HOPLIMIT,
        InitCwnd(u32) = RTAX::INITCWND,
        Features(u32) = RTAX::FEATURES,
        RtoMin(u32) = RTAX::RTO_MIN,
        InitRwnd(u32) = RTAX::INITRWND,
        QuickAck(u32) = RTAX::QUICKACK,
        /// Congestion control algorithm name.
        CcAlgo(NlStr<'a>) = RTAX::CC_ALGO,
        FastopenNoCookie(u32) = RTAX::FASTOPEN_NO_COOKIE,
    }
}
