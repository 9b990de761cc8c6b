//! The frame header and the frame state machine.
//!
//! Every frame starts with a header of six 32-bit words (status, length, multicast
//! group, sender pid/uid/gid) followed by the payload. Ownership of a frame moves between the
//! producer and the consumer of its ring only through the `status` word:
//!
//! ```text
//!            producer                          consumer
//!  UNUSED ──reserve──▶ RESERVED ──publish──▶ VALID ──copy/read──▶ UNUSED
//!                                 └────────▶ COPY  ──recv socket─▶ UNUSED
//!  VALID ──consumer keeps it──▶ SKIP ──consumer done──▶ UNUSED
//! ```
//!
//! - `UNUSED`: owned by the producer, free for a new message.
//! - `RESERVED`: the producer is writing the frame.
//! - `VALID`: the frame holds a message; owned by the consumer.
//! - `COPY`: the message was too large for a frame; the producer sent it over the control
//!   socket *before* publishing this placeholder, so the consumer reads it from the socket in
//!   ring order. Owned by the consumer.
//! - `SKIP`: the consumer kept the message past its read position (user space may queue
//!   frames for later, as NL_MMAP_STATUS_SKIP allowed in Linux 3.10's netlink mmap); the
//!   producer passes over SKIP frames when it looks for a free one and only finds the ring
//!   full when no frame is UNUSED. Owned by the consumer.
//!
//! Memory ordering: the producer writes payload, length and sender, then stores the status with
//! `Release`; the consumer loads the status with `Acquire` and only then reads length and
//! payload, so the payload it reads is the one published. The consumer finishes reading, then
//! stores `UNUSED` with `Release`; the producer loads it with `Acquire` before writing again, so
//! its new writes never overlap the consumer's reads. Length and sender are atomics accessed
//! `Relaxed`: the status store/load pair orders them.
//!
//! Trust: all header words are atomics, so a peer rewriting them at any time is defined
//! behaviour for us. The daemon treats every header word of the TX ring as hostile: it reads the
//! length once, bounds-checks it against the frame, and ignores the sender words entirely
//! (the sender of a TX frame is the peer credential of the socket).

use std::sync::atomic::AtomicU32;

/// Bytes of header before each frame's payload.
pub const FRAME_HEADER_LEN: usize = std::mem::size_of::<FrameHeader>();

/// The state of one frame; the numeric values are the wire values in the status word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum FrameStatus {
    Unused = 0,
    Reserved = 1,
    Valid = 2,
    Copy = 3,
    Skip = 4,
}

impl FrameStatus {
    /// Decodes a status word; anything else is a peer's garbage and maps to `None`.
    pub fn from_raw(raw: u32) -> Option<FrameStatus> {
        Some(match raw {
            0 => FrameStatus::Unused,
            1 => FrameStatus::Reserved,
            2 => FrameStatus::Valid,
            3 => FrameStatus::Copy,
            4 => FrameStatus::Skip,
            _ => return None,
        })
    }

    /// True when the consumer owns the frame in this state.
    pub fn owned_by_consumer(self) -> bool {
        matches!(
            self,
            FrameStatus::Valid | FrameStatus::Copy | FrameStatus::Skip
        )
    }
}

/// Who sent a message: the kernel-reported credentials of a client, or the daemon itself
/// (pid 0, as the kernel is port 0 in netlink), and the multicast group it was sent to (0 for
/// unicast). Filled by the daemon on RX frames; never read from TX frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sender {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    pub group: u32,
}

impl Sender {
    /// Messages the daemon originates (replies, notifications it makes itself).
    pub const DAEMON: Sender = Sender {
        pid: 0,
        uid: 0,
        gid: 0,
        group: 0,
    };
}

/// The header at the start of every frame, in shared memory. Only ever accessed through a
/// shared reference, which is sound while a peer writes concurrently because every field is
/// an atomic.
#[repr(C)]
pub(crate) struct FrameHeader {
    pub status: AtomicU32,
    pub len: AtomicU32,
    pub group: AtomicU32,
    pub pid: AtomicU32,
    pub uid: AtomicU32,
    pub gid: AtomicU32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_and_rejects_garbage() {
        for s in [
            FrameStatus::Unused,
            FrameStatus::Reserved,
            FrameStatus::Valid,
            FrameStatus::Copy,
            FrameStatus::Skip,
        ] {
            assert_eq!(FrameStatus::from_raw(s as u32), Some(s));
        }
        assert_eq!(FrameStatus::from_raw(5), None);
        assert_eq!(FrameStatus::from_raw(u32::MAX), None);
    }

    #[test]
    fn header_is_six_words_and_keeps_payload_aligned() {
        assert_eq!(FRAME_HEADER_LEN, 24);
        assert_eq!(
            FRAME_HEADER_LEN % crate::geometry::FRAME_ALIGNMENT as usize,
            0
        );
    }
}
