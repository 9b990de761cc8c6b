//! fibre's forwarding plane: Ethernet frames in, forwarded frames, ICMP errors and ARP/NDP
//! out, with the Linux kernel's behaviour, on the routing core's decisions.
//!
//! The crate reads the routing state (`fibre_fib::Fib`) and never changes it: what a packet
//! teaches (a neighbour's address) leaves as an event for the writer. Nothing here locks or
//! allocates per packet; buffers come from a `fibre_packet::Pool` allocated once.
//!
//! The per-packet stages are pure functions over a frame's bytes, each documenting what it
//! reads, what it writes and what it returns, in the order a packet meets them: [`rx`]
//! (receive checks), [`forward`] (TTL, options, MTU), [`frag`] (IPv4 fragmentation), [`icmp`]
//! (errors and echo replies) with [`ratelimit`], [`srv6`] (SRv6 encapsulation and endpoint
//! behaviours), [`rpl`] (RPL source routing header insertion), [`ioam6`] (IOAM traces filled in
//! transit), and [`mod@drop`] (reasons and counters).
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod drop;
pub mod forward;
pub mod frag;
pub mod icmp;
pub mod input_cache;
pub mod ioam6;
pub mod neigh;
pub mod pipeline;
pub mod ratelimit;
pub mod reasm;
pub mod rpl;
pub mod rx;
pub mod srv6;
pub mod waiting;

// Test and fuzz code: an assertion that fails is the point.
#[cfg(any(test, feature = "check"))]
#[doc(hidden)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod check;
