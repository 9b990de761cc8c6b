//! IFLA_STATS64: `struct rtnl_link_stats64`, a link's counters.

use crate::nla::struct_value;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct rtnl_link_stats64` (Linux 5.19's, with `rx_otherhost_dropped`): the counters
    /// fibre keeps; the detailed error counters between them are zero.
    pub struct LinkStats64;
    /// View of `struct rtnl_link_stats64`.
    pub struct LinkStats64Packet;
    len = 200, what = "rtnl_link_stats64";
    {
        rx_packets, set_rx_packets: u64 = 0;
        tx_packets, set_tx_packets: u64 = 8;
        rx_bytes, set_rx_bytes: u64 = 16;
        tx_bytes, set_tx_bytes: u64 = 24;
        rx_errors, set_rx_errors: u64 = 32;
        tx_errors, set_tx_errors: u64 = 40;
        rx_dropped, set_rx_dropped: u64 = 48;
        tx_dropped, set_tx_dropped: u64 = 56;
        multicast, set_multicast: u64 = 64;
        rx_otherhost_dropped, set_rx_otherhost_dropped: u64 = 192;
    }
}

struct_value!(LinkStats64, LinkStats64Packet);
