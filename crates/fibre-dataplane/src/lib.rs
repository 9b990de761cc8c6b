//! fibre's forwarding plane: Ethernet frames in, forwarded frames, ICMP errors and ARP/NDP
//! out, with the Linux kernel's behaviour, on the routing core's decisions.
//!
//! The crate reads the routing state (`fibre_fib::Fib`) and never changes it: what a packet
//! teaches (a neighbour's address) leaves as an event for the writer. Nothing here locks or
//! allocates per packet; buffers come from a `fibre_packet::Pool` allocated once.
#![forbid(unsafe_code)]
pub mod waiting;
