//! Packet buffers for fibre's forwarding plane: frames of fixed size allocated once in a
//! [`Pool`], handed out as [`Buf`]s by typed index, with room in front of every packet sized
//! from the configuration ([`Headroom`]) so that encapsulation and the link-layer rewrite
//! prepend without copying.
//!
//! # Invariants
//! - Memory: a pool owns two regions, allocated when it is made and never again: `frames`
//!   base frames of `frame_size` bytes and `large_frames` large frames of `large_frame_size`
//!   bytes, each region contiguous (`frames * frame_size` bytes), a frame identified by its
//!   offset there. Nothing allocates per packet: `alloc`, `free` and every buffer operation are
//!   O(1) apart from the bytes they move, and an exhausted class is the error [`Empty`], never
//!   a panic or an allocation.
//! - Data always lies inside its frame: `headroom() + len() + tailroom() == frame_size()`
//!   after every operation; an operation that fails ([`BufError`], [`CopyError`]) changes
//!   nothing.
//! - Ownership: a frame is either free in its pool or held by exactly one [`Buf`] (not
//!   `Clone`); whoever holds the `Buf` owns the packet and gives it back with [`Pool::free`].
//!   Byte access goes through the pool (`buf.data(&pool)`, `buf.prepend(&mut pool, n)`), so
//!   one `&mut Pool` per worker is all the borrowing there is.
//! - Counted: the payload copies [`Buf::ensure_headroom`] makes ([`Pool::copies`]), by whether
//!   the data moved inside its frame or into a large one. Exhaustion and lack of room are
//!   returned to the caller, whose drop counters name the reason.
//!
//! # Who calls what
//! Receive allocates with [`Pool::alloc`] (data starts at the headroom) and appends the frame;
//! the stages strip headers with `trim_front`/`trim_back`; encapsulation calls
//! `ensure_headroom` for what it is about to add when that may exceed the configured headroom,
//! then `prepend` or `insert_after`; the rewrite stage prepends the link-layer header; transmit
//! reads `data` and frees the buffer once the frame is sent.
//!
//! ```
//! use fibre_packet::{headroom, Encap, Headroom, Pool, PoolConfig};
//!
//! // Routes encapsulate with up to three SIDs; one egress link is QinQ.
//! let headroom = Headroom::for_config([Encap::Srv6Encaps { sids: 3 }], [0, 2]);
//! let mut pool = Pool::new(PoolConfig {
//!     frames: 64,
//!     frame_size: 2048,
//!     large_frames: 4,
//!     large_frame_size: 4096,
//!     headroom,
//! })?;
//!
//! // Receive: the frame's bytes go in at the headroom.
//! let received = [0u8; 14 + 40 + 8];
//! let mut buf = pool.alloc()?; // Err(Empty): the caller counts a drop
//! buf.append(&mut pool, received.len())?.copy_from_slice(&received);
//! buf.trim_front(headroom::ETH_HLEN)?;
//!
//! // H.Encaps, then the rewrite: both in front of the packet, no copy.
//! let encap = Encap::Srv6Encaps { sids: 3 }.len();
//! buf.ensure_headroom(&mut pool, encap + headroom::MAX_L2_RESERVE)?;
//! buf.prepend(&mut pool, encap)?.fill(0); // outer IPv6 header and SRH written here
//! buf.prepend(&mut pool, headroom::MAX_L2_RESERVE)?.fill(0); // Ethernet and two tags
//! assert_eq!(buf.len(), 40 + 8 + encap + 22);
//! assert_eq!(pool.copies().in_frame + pool.copies().to_large, 0);
//!
//! // Transmit reads the bytes, then the frame goes back.
//! let _frame: &[u8] = buf.data(&pool);
//! pool.free(buf);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod buf;
pub mod headroom;
mod pool;

pub use buf::{Buf, BufError, CopyError};
pub use headroom::{Encap, Headroom};
pub use pool::{BufIdx, ConfigError, Copies, Empty, Pool, PoolConfig};
