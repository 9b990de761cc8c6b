//! fibre's traffic generator and sink, on fibre-io's ports (AF_XDP, AF_PACKET): the
//! benchmarks' and live tests' traffic through fibre, the kernel, or a bare veth pair.
//!
//! - [`frame`]: the frames (Ethernet, IPv4/IPv6, UDP) and the probe each carries: a set, a
//!   sequence number and the send time, with the UDP checksum kept right as they change;
//! - [`workload`]: destination sets (prefixes, seed 000's workload from the 2026 table, a
//!   flood of unique addresses), frame sizes (fixed, IMIX) and the cycle of frames sent;
//! - [`pcap`]: the captures the generator replays;
//! - [`gen`]: the send loop (token bucket or flat out, duration or count);
//! - [`sink`]: the receive loop (counts, checks, latency) and [`hist`], its histogram.
//!
//! Who calls what: `fibre-traffic` (main.rs) builds a workload, opens one port, and runs one
//! loop on it in one thread; the loops take a port's queue and a stop flag any thread may set.
//! Neither loop allocates per frame. No `unsafe`: system calls go through fibre-io and
//! fibre-sys.

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod frame;
pub mod gen;
pub mod hist;
pub mod pcap;
pub mod sink;
pub mod workload;
