//! fibred, fibre's daemon: the routing state of one fibre instance, served over rtnetlink.
//!
//! - [`engine`]: requests in, answers and notifications out; owns the FIB; no I/O.
//! - [`view`]: the FIB as published to lock-free readers (a left-right pair of copies).
//! - [`server`]: the threads -- one writer owning the engine, one per client connection
//!   (netlink datagrams over AF_UNIX SOCK_SEQPACKET, or the shared-memory ring of fibre-ring
//!   when the connection starts with its setup request), one for AF_UNIX SOCK_DGRAM.
//! - [`fpm`]: the FPM server (`--fpm`): FRR's zebra streams routes and next-hop groups, which
//!   the writer applies through the engine like any client's requests.
//! - [`metrics`]: Prometheus's text format at `/metrics` (`--metrics`).
//! - [`ports`]: port links forwarding real frames: host interfaces opened through fibre-io,
//!   the forwarding worker, its hand-off with the writer.
//! - [`mirror`]: mirror mode (`--mirror`): a Linux network namespace's state followed over
//!   rtnetlink and applied through the engine.
//! - [`state`]: the state file (`--state`): its format, what it saves in which order, the
//!   checked restore and the atomic write.
//! - [`config`]: the configuration file (`--config`, TOML) and its embedded default.
//! - [`log`]: the logger (`tracing` to stderr, text or JSON, rate-limited per call site).
//! - [`alloc`]: the C allocator's settings for memory that crosses the daemon's threads.
//!
//! What the daemon shares with its clients (message conversions, multicast groups, the
//! membership message, the default socket path) is fibre-proto's.
//!
//! Who may call what: only the writer thread calls [`engine::Engine`] (and through it
//! changes the state); client threads answer reads (`route get`, dumps) themselves from the
//! published state ([`engine::handle_reads`], [`view::FibReader`]) and hand everything else
//! to the writer through the server's job queue.

#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod alloc;
pub mod config;
pub mod engine;
pub mod fpm;
pub mod log;
pub mod metrics;
pub mod mirror;
pub mod ports;
pub mod server;
pub mod state;
use fibre_sys as sys;
pub mod view;

pub use engine::Engine;
pub use server::{Config, Daemon};
