//! fibre's shared-memory ring transport between `fibred` and its clients.
//!
//! Modelled on memory-mapped netlink (Patrick McHardy's series, merged as "Merge branch
//! 'netlink-mmap'" for Linux 3.10): an RX ring (daemon -> client) and a TX ring
//! (client -> daemon) of fixed-size frames in one shared mapping, each frame carrying a header
//! (status, length, sender) and one message; messages too large for a frame travel over the
//! control socket behind a COPY frame. Messages are opaque bytes here: one message is what one
//! netlink `recvmsg` returns (a datagram that may hold several netlink messages).
//!
//! Linux removed memory-mapped netlink in 4.6 because user space could rewrite a TX frame after
//! the kernel had validated it. Here that cannot happen by construction: the daemon copies every
//! TX frame into private memory before anything looks at it, and the server module (which has
//! `#![forbid(unsafe_code)]`) can only ever obtain such copies -- there is no safe way to get a
//! reference into shared memory, and the one unsafe way is unavailable to it. Header words are
//! atomics and the length is read once and bounds-checked, so a hostile client can make the
//! daemon drop its own frames, never read out of bounds or act on bytes it did not validate.
//!
//! Pieces:
//! - [`geometry`]: block/frame geometry and its validation (both sides).
//! - [`frame`]: frame states, header, the state machine and its memory ordering.
//! - [`proto`]: the setup handshake on the control socket (netlink-framed).
//! - [`server`]: the daemon's per-client [`server::Session`] and a [`server::Listener`].
//! - [`client`]: the client library ([`client::Client`]).
//!
//! Setup: the client connects to the daemon's AF_UNIX SOCK_SEQPACKET socket and sends a setup
//! request with the geometry it wants; the daemon validates it, creates a memfd of exactly that
//! layout, seals it against resizing, and returns it with two eventfds (doorbells) by
//! SCM_RIGHTS; the client validates the answer, the file's size and seals, then maps it.

#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod client;
pub mod frame;
pub mod geometry;
#[cfg(test)]
mod hostile;
pub mod proto;
mod ring;
pub mod server;
mod shm;
use fibre_sys as sys;

pub use client::{Client, ClientConfig, ClientError, KeptFrame, Message};
pub use fibre_sys::Credentials;
pub use frame::{FrameStatus, Sender};
pub use geometry::{GeometryError, RingGeometry};
pub use server::{
    AcceptError, Dump, Handler, Limits, Listener, Overrun, Request, Responder, RingBudget, Session,
    SessionError, SessionStats, Via, IDLE_WAKE_BUDGET, IDLE_WAKE_PAUSE,
};
