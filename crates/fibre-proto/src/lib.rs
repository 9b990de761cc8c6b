//! fibre's rtnetlink protocol: what fibred and its clients agree on above the codec.
//!
//! - [`convert`]: codec messages ([`fibre_netlink`]) to and from the FIB's requests and
//!   objects ([`fibre_fib::types`]), and the answers (ACKs, errors with extended ACK) as the
//!   kernel encodes them.
//!   Encapsulations (RTA_ENCAP) are converted in `encap`, beside it.
//! - [`groups`]: the multicast groups notifications go to and the bitmask a membership is
//!   kept in.
//! - [`membership`]: fibre's private message that joins and leaves groups over a Unix socket.
//! - [`sysctl`]: fibre's private message that writes and reads settings (`sysctl`).
//! - [`seg6_hmac`]: fibre's private message that sets and lists SRH HMAC keys (`sr hmac`).
//! - [`client`]: where fibred listens by default, and a minimal socket client.
//!
//! The crate sits between the codec and the FIB below it and the daemon and the CLI above it;
//! it decides nothing the FIB decides (conversion keeps the kernel's reading of a message, not
//! its meaning) and holds no state.

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod client;
pub mod convert;
mod encap;
pub mod groups;
pub mod membership;
pub mod seg6_hmac;
pub mod sysctl;
