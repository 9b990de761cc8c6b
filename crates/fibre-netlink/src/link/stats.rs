//! IFLA_STATS64: `struct rtnl_link_stats64`, a link's counters.

use crate::nla::struct_value;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct rtnl_link_stats64` (Linux 5.19's, with `rx_otherhost_dropped`), every counter
    /// kept so that a captured one is written back byte for byte; fibre fills the core ones
    /// and leaves the detailed error counters zero.
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
        collisions, set_collisions: u64 = 72;
        rx_length_errors, set_rx_length_errors: u64 = 80;
        rx_over_errors, set_rx_over_errors: u64 = 88;
        rx_crc_errors, set_rx_crc_errors: u64 = 96;
        rx_frame_errors, set_rx_frame_errors: u64 = 104;
        rx_fifo_errors, set_rx_fifo_errors: u64 = 112;
        rx_missed_errors, set_rx_missed_errors: u64 = 120;
        tx_aborted_errors, set_tx_aborted_errors: u64 = 128;
        tx_carrier_errors, set_tx_carrier_errors: u64 = 136;
        tx_fifo_errors, set_tx_fifo_errors: u64 = 144;
        tx_heartbeat_errors, set_tx_heartbeat_errors: u64 = 152;
        tx_window_errors, set_tx_window_errors: u64 = 160;
        rx_compressed, set_rx_compressed: u64 = 168;
        tx_compressed, set_tx_compressed: u64 = 176;
        rx_nohandler, set_rx_nohandler: u64 = 184;
        rx_otherhost_dropped, set_rx_otherhost_dropped: u64 = 192;
    }
}

struct_value!(LinkStats64, LinkStats64Packet);
