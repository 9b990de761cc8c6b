//! One ring inside the mapping, and its producer and consumer cursors.
//!
//! This module holds the only code that touches frame payloads. What it offers the daemon is
//! deliberately narrow: a consumer can *copy* a frame into private memory ([`Consumer::copy_out`])
//! and a producer can *copy* private bytes into a frame ([`Producer::write`]). Borrowing a
//! payload in place ([`Ring::payload`]) is an `unsafe fn`, and the server module forbids
//! `unsafe` code, so the daemon cannot obtain a reference into shared memory: the compiler
//! enforces that whatever it validates is its own copy.
//!
//! Cursor rules (see `frame` for the states): each side keeps its position privately and both
//! move through the ring in order, so messages arrive in the order they were written. The
//! producer looks for a free frame from its position, passing over SKIP frames, and finds the
//! ring full at the first frame the consumer still owns. SKIP frames are what makes order
//! subtle, because a kept frame can be released at any time:
//! - the consumer moves past a SKIP frame, or past a frame it kept that is now UNUSED, only once
//!   a later frame is published -- proof that the producer passed it in this lap; without that
//!   proof the producer may still write there, so the consumer waits;
//! - the producer reuses a frame it passed over as SKIP only once the consumer has read past the
//!   first frame written after it -- otherwise the consumer, still behind, would meet the new
//!   message before older ones.
//!
//! `tests::random_schedules_keep_fifo_order` checks both rules against a FIFO model, and fails
//! if either is removed.

use crate::frame::{FrameHeader, FrameStatus, Sender, FRAME_HEADER_LEN};
use crate::geometry::RingGeometry;
use crate::shm::Mapping;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A view of one ring: the mapping it lives in, its offset and its validated geometry.
#[derive(Clone)]
pub(crate) struct Ring {
    map: Arc<Mapping>,
    offset: usize,
    geometry: RingGeometry,
}

impl Ring {
    /// `geometry` must be validated and the ring must lie inside the mapping; both are checked
    /// here once so every later frame access is in bounds by construction.
    pub fn new(map: Arc<Mapping>, offset: usize, geometry: RingGeometry) -> Ring {
        assert!(
            geometry.validate().is_ok(),
            "ring geometry must be validated before use"
        );
        assert!(offset % crate::geometry::FRAME_ALIGNMENT as usize == 0);
        assert!(
            offset as u64 + geometry.ring_bytes() <= map.len() as u64,
            "ring outside its mapping"
        );
        Ring {
            map,
            offset,
            geometry,
        }
    }

    pub fn capacity(&self) -> usize {
        self.geometry.frame_capacity()
    }

    fn frame_ptr(&self, index: u32) -> *mut u8 {
        assert!(index < self.geometry.frame_count);
        // SAFETY: index < frame_count, so frame_offset(index) + frame_size <= ring_bytes, and
        // the ring lies inside the mapping (checked in new).
        unsafe {
            self.map
                .base()
                .add(self.offset + self.geometry.frame_offset(index))
        }
    }

    pub fn header(&self, index: u32) -> &FrameHeader {
        // SAFETY: frame_ptr is in bounds and 8-byte aligned (page-aligned mapping, aligned ring
        // offset, aligned frame size); FrameHeader is all atomics, so a shared reference stays
        // sound while the peer writes; the mapping outlives &self.
        unsafe { &*self.frame_ptr(index).cast::<FrameHeader>() }
    }

    pub fn status(&self, index: u32) -> Option<FrameStatus> {
        FrameStatus::from_raw(self.header(index).status.load(Ordering::Acquire))
    }

    pub(crate) fn payload_ptr(&self, index: u32) -> *mut u8 {
        // SAFETY: the payload starts FRAME_HEADER_LEN bytes into an in-bounds frame whose size
        // is at least MIN_FRAME_SIZE > FRAME_HEADER_LEN.
        unsafe { self.frame_ptr(index).add(FRAME_HEADER_LEN) }
    }

    /// Borrows a frame's payload in place.
    ///
    /// # Safety
    /// The caller must own frame `index` (VALID as returned by [`Consumer::peek`] and not yet
    /// released, or SKIP after [`Consumer::keep`]) and trust the producer to leave frames it
    /// does not own alone for the lifetime of the borrow. Only the client may rely on that:
    /// the daemon never trusts the client (and the server module forbids `unsafe`).
    pub unsafe fn payload(&self, index: u32, len: u32) -> &[u8] {
        assert!(len as usize <= self.capacity(), "length not bounds-checked");
        // SAFETY: in bounds as in payload_ptr and len <= capacity; immutability for the
        // borrow is the caller's contract.
        unsafe { std::slice::from_raw_parts(self.payload_ptr(index), len as usize) }
    }

    #[cfg(test)]
    pub(crate) fn frame_count(&self) -> u32 {
        self.geometry.frame_count
    }

    fn next(&self, index: u32) -> u32 {
        if index + 1 == self.geometry.frame_count {
            0
        } else {
            index + 1
        }
    }
}

/// A frame the producer owns (status RESERVED) and may fill.
#[derive(Debug)]
pub(crate) struct Reserved {
    index: u32,
}

/// The writing side of a ring.
pub(crate) struct Producer {
    ring: Ring,
    head: u32,
    /// Frames passed over as SKIP on this producer's last visit, one bit per frame (see
    /// `find_free`).
    skipped: Bits,
}

impl Producer {
    pub fn new(ring: Ring) -> Producer {
        let skipped = Bits::new(ring.geometry.frame_count);
        Producer {
            ring,
            head: 0,
            skipped,
        }
    }

    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    #[cfg(test)]
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// The next free frame from the producer's position, passing over frames the consumer
    /// keeps (SKIP). `None` when the consumer still owns the first frame that is not SKIP, or
    /// every frame is SKIP.
    ///
    /// A frame passed over as SKIP and since freed is only reused once the consumer has read
    /// past it: otherwise, with the messages written after it still unread, the consumer (which
    /// reads in ring order) would meet the new message before those older ones. The proof is
    /// the first frame written after it on the last visit: once that frame is no longer the
    /// consumer's unread message, the consumer has passed both.
    fn find_free(&self) -> Option<u32> {
        let mut index = self.head;
        for _ in 0..self.ring.geometry.frame_count {
            match self.ring.status(index) {
                Some(FrameStatus::Unused)
                    if !self.skipped.get(index) || self.consumer_passed(index) =>
                {
                    return Some(index)
                }
                Some(FrameStatus::Skip) => index = self.ring.next(index),
                _ => return None,
            }
        }
        None
    }

    /// True when the consumer has read past `skipped`, a frame passed over on the last visit.
    fn consumer_passed(&self, skipped: u32) -> bool {
        let mut index = self.ring.next(skipped);
        for _ in 1..self.ring.geometry.frame_count {
            if !self.skipped.get(index) {
                return !matches!(
                    self.ring.status(index),
                    Some(FrameStatus::Valid | FrameStatus::Copy | FrameStatus::Reserved)
                );
            }
            index = self.ring.next(index);
        }
        // Nothing was written after it: no newer message can be read out of order.
        true
    }

    /// Takes the next free frame (see `find_free`).
    pub fn reserve(&mut self) -> Option<Reserved> {
        let index = self.find_free()?;
        while self.head != index {
            self.skipped.set(self.head, true);
            self.head = self.ring.next(self.head);
        }
        self.skipped.set(index, false);
        // The Acquire load in find_free ordered the consumer's last reads of this frame before
        // our writes to it.
        self.ring
            .header(index)
            .status
            .store(FrameStatus::Reserved as u32, Ordering::Relaxed);
        Some(Reserved { index })
    }

    /// Copies `bytes` into the reserved frame's payload.
    pub fn write(&mut self, frame: &Reserved, bytes: &[u8]) {
        assert!(
            bytes.len() <= self.capacity(),
            "message larger than a frame"
        );
        // SAFETY: the payload area has capacity() bytes and bytes.len() <= capacity(); the
        // source is private memory, so the regions cannot overlap. The frame is RESERVED, so a
        // peer following the protocol does not touch it; one that does only corrupts bytes it
        // will itself read.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ring.payload_ptr(frame.index),
                bytes.len(),
            )
        };
    }

    /// Gives a reserved frame back unused (the message could not go out after all).
    pub fn unreserve(&mut self, frame: Reserved) {
        self.ring
            .header(frame.index)
            .status
            .store(FrameStatus::Unused as u32, Ordering::Relaxed);
    }

    /// Hands the frame to the consumer: length and sender first, then the status with Release
    /// so the consumer's Acquire load sees payload, length and sender.
    pub fn publish(&mut self, frame: Reserved, len: u32, sender: Sender, status: FrameStatus) {
        debug_assert!(matches!(status, FrameStatus::Valid | FrameStatus::Copy));
        let h = self.ring.header(frame.index);
        h.len.store(len, Ordering::Relaxed);
        h.group.store(sender.group, Ordering::Relaxed);
        h.pid.store(sender.pid, Ordering::Relaxed);
        h.uid.store(sender.uid, Ordering::Relaxed);
        h.gid.store(sender.gid, Ordering::Relaxed);
        h.status.store(status as u32, Ordering::Release);
        self.head = self.ring.next(frame.index);
    }

    /// True when the next `reserve` would find a frame (used to re-check before sleeping).
    pub fn has_room(&self) -> bool {
        self.find_free().is_some()
    }
}

/// A fixed-size set of frame indexes.
struct Bits(Vec<u64>);

impl Bits {
    fn new(frames: u32) -> Bits {
        Bits(vec![0; frames.div_ceil(64) as usize])
    }

    fn get(&self, index: u32) -> bool {
        self.0[index as usize / 64] & (1 << (index % 64)) != 0
    }

    fn set(&mut self, index: u32, on: bool) {
        let (word, bit) = (index as usize / 64, 1u64 << (index % 64));
        if on {
            self.0[word] |= bit;
        } else {
            self.0[word] &= !bit;
        }
    }
}

/// What the consumer found at its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Nothing published yet.
    Empty,
    /// A message of `len` bytes (already bounds-checked against the frame) in frame `index`.
    Message {
        index: u32,
        len: u32,
        sender: Sender,
    },
    /// The message travels over the socket; `len` is the producer's claim, a hint only.
    Copy { index: u32, len: u32 },
    /// A published frame whose length exceeds the frame: the producer broke the protocol.
    Malformed { index: u32 },
}

/// The reading side of a ring.
pub(crate) struct Consumer {
    ring: Ring,
    head: u32,
    /// Frames this consumer kept (SKIP) and has not read past since. Such a frame may be
    /// released (UNUSED) after the producer passed over it, so at the consumer's position an
    /// UNUSED frame in this set proves nothing by itself (see `peek`).
    kept: Bits,
}

impl Consumer {
    pub fn new(ring: Ring) -> Consumer {
        let kept = Bits::new(ring.geometry.frame_count);
        Consumer {
            ring,
            head: 0,
            kept,
        }
    }

    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Looks at the frame at the consumer's position. Reads the length exactly once and checks
    /// it against the frame.
    ///
    /// Frames the producer may have passed over without writing are SKIP frames and frames this
    /// consumer kept and then released (UNUSED). The consumer moves past such frames only when
    /// a frame beyond them is published, which proves the producer passed them in this lap; an
    /// UNUSED frame it never kept is where the producer will write next, so it stops there.
    pub fn peek(&mut self) -> Slot {
        let mut index = self.head;
        for _ in 0..self.ring.geometry.frame_count {
            let status = self.ring.status(index);
            let published = matches!(status, Some(FrameStatus::Valid | FrameStatus::Copy));
            if published {
                self.move_to(index);
            }
            match status {
                Some(FrameStatus::Valid) => {
                    let h = self.ring.header(index);
                    let len = h.len.load(Ordering::Relaxed);
                    if len as usize > self.ring.capacity() {
                        return Slot::Malformed { index };
                    }
                    let sender = Sender {
                        pid: h.pid.load(Ordering::Relaxed),
                        uid: h.uid.load(Ordering::Relaxed),
                        gid: h.gid.load(Ordering::Relaxed),
                        group: h.group.load(Ordering::Relaxed),
                    };
                    return Slot::Message { index, len, sender };
                }
                Some(FrameStatus::Copy) => {
                    let len = self.ring.header(index).len.load(Ordering::Relaxed);
                    return Slot::Copy { index, len };
                }
                Some(FrameStatus::Skip) => index = self.ring.next(index),
                Some(FrameStatus::Unused) if self.kept.get(index) => index = self.ring.next(index),
                _ => return Slot::Empty,
            }
        }
        Slot::Empty
    }

    /// Moves the position to `index`, a published frame, past frames the producer has passed:
    /// a kept frame already released there is an ordinary frame again from the next lap on.
    fn move_to(&mut self, index: u32) {
        while self.head != index {
            let head = self.head;
            if self.kept.get(head) && self.ring.status(head) != Some(FrameStatus::Skip) {
                self.kept.set(head, false);
            }
            self.head = self.ring.next(head);
        }
        // A new message sits here: whatever this frame was before, it is an ordinary frame now.
        self.kept.set(index, false);
    }

    /// Copies `len` payload bytes of frame `index` into `out` (replacing its contents). `len`
    /// must come from `peek` (bounds-checked); the copy is the only read of the payload, so
    /// whatever the producer writes afterwards cannot reach the caller.
    pub fn copy_out(&self, index: u32, len: u32, out: &mut Vec<u8>) {
        let len = len as usize;
        assert!(len <= self.ring.capacity(), "length not bounds-checked");
        out.clear();
        out.reserve(len);
        // SAFETY: the source is len <= capacity bytes inside frame `index`, the destination has
        // room for len bytes after reserve, and private heap memory cannot overlap the shared
        // mapping. A hostile producer writing concurrently can change which bytes we copy, never
        // how many or where; the result is ours alone.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ring.payload_ptr(index), out.as_mut_ptr(), len);
            out.set_len(len);
        }
    }

    /// Returns frame `index` (at the consumer's position) to the producer and moves on. The
    /// Release store orders every read of the frame before the producer's next writes.
    pub fn release(&mut self, index: u32) {
        debug_assert_eq!(index, self.head);
        self.ring
            .header(index)
            .status
            .store(FrameStatus::Unused as u32, Ordering::Release);
        self.head = self.ring.next(index);
    }

    /// Marks frame `index` (at the consumer's position) SKIP: the consumer keeps it and moves
    /// on; the producer will pass over it until [`release_kept`] frees it.
    pub fn keep(&mut self, index: u32) {
        debug_assert_eq!(index, self.head);
        self.kept.set(index, true);
        self.ring
            .header(index)
            .status
            .store(FrameStatus::Skip as u32, Ordering::Release);
        self.head = self.ring.next(index);
    }
}

/// Frees a frame kept with [`Consumer::keep`]; needs only the ring, so a kept frame can
/// outlive the consumer's borrow.
pub(crate) fn release_kept(ring: &Ring, index: u32) {
    ring.header(index)
        .status
        .store(FrameStatus::Unused as u32, Ordering::Release);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::shm::Layout;

    pub(crate) fn test_rings(frame_size: u32, frames: u32) -> (Producer, Consumer) {
        let g = RingGeometry::for_frames(frame_size, frames).unwrap();
        let layout = Layout { rx: g, tx: g };
        let (_fd, map) = Mapping::create(&layout).unwrap();
        let ring = Ring::new(map, layout.rx_offset(), g);
        (Producer::new(ring.clone()), Consumer::new(ring))
    }

    fn send(p: &mut Producer, bytes: &[u8]) -> bool {
        match p.reserve() {
            Some(f) => {
                p.write(&f, bytes);
                p.publish(f, bytes.len() as u32, Sender::DAEMON, FrameStatus::Valid);
                true
            }
            None => false,
        }
    }

    fn take(c: &mut Consumer) -> Option<Vec<u8>> {
        match c.peek() {
            Slot::Message { index, len, .. } => {
                let mut v = Vec::new();
                c.copy_out(index, len, &mut v);
                c.release(index);
                Some(v)
            }
            Slot::Empty => None,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn reserve_publish_consume_release_cycle() {
        let (mut p, mut c) = test_rings(256, 4);
        let n = p.ring.geometry.frame_count;
        assert_eq!(c.peek(), Slot::Empty);
        let f = p.reserve().unwrap();
        assert_eq!(p.ring.status(f.index), Some(FrameStatus::Reserved));
        // RESERVED is still the producer's: the consumer sees nothing.
        assert_eq!(c.peek(), Slot::Empty);
        p.write(&f, b"hello");
        p.publish(
            f,
            5,
            Sender {
                pid: 7,
                uid: 8,
                gid: 9,
                group: 3,
            },
            FrameStatus::Valid,
        );
        match c.peek() {
            Slot::Message { index, len, sender } => {
                assert_eq!((index, len), (0, 5));
                assert_eq!(
                    sender,
                    Sender {
                        pid: 7,
                        uid: 8,
                        gid: 9,
                        group: 3
                    }
                );
                c.release(index);
                assert_eq!(p.ring.status(index), Some(FrameStatus::Unused));
            }
            other => panic!("{other:?}"),
        }
        // Fill the ring: the producer stops at the first frame the consumer owns.
        for i in 0..n {
            assert!(send(&mut p, &i.to_le_bytes()), "frame {i}");
        }
        assert!(!send(&mut p, b"x"));
        assert!(!p.has_room());
        for i in 0..n {
            assert_eq!(take(&mut c).unwrap(), i.to_le_bytes());
        }
        assert_eq!(take(&mut c), None);
        assert!(p.has_room());
    }

    #[test]
    fn oversized_length_is_malformed_not_read() {
        let (mut p, mut c) = test_rings(256, 2);
        let f = p.reserve().unwrap();
        p.publish(f, 100_000, Sender::DAEMON, FrameStatus::Valid);
        assert_eq!(c.peek(), Slot::Malformed { index: 0 });
        c.release(0);
        assert_eq!(c.peek(), Slot::Empty);
    }

    #[test]
    fn copy_placeholder_keeps_ring_order() {
        let (mut p, mut c) = test_rings(256, 4);
        assert!(send(&mut p, b"a"));
        let f = p.reserve().unwrap();
        p.publish(f, 9000, Sender::DAEMON, FrameStatus::Copy);
        assert!(send(&mut p, b"b"));
        assert_eq!(take(&mut c).unwrap(), b"a");
        assert_eq!(
            c.peek(),
            Slot::Copy {
                index: 1,
                len: 9000
            }
        );
        c.release(1);
        assert_eq!(take(&mut c).unwrap(), b"b");
    }

    #[test]
    fn producer_passes_over_kept_frames() {
        let (mut p, mut c) = test_rings(256, 4);
        let n = p.ring.geometry.frame_count;
        for i in 0..n {
            assert!(send(&mut p, &[i as u8]));
        }
        // Keep frame 0, consume the rest.
        match c.peek() {
            Slot::Message { index, .. } => c.keep(index),
            other => panic!("{other:?}"),
        }
        for i in 1..n {
            assert_eq!(take(&mut c).unwrap(), [i as u8]);
        }
        // The producer skips the kept frame 0 and fills 1..n again.
        for i in 1..n {
            assert!(send(&mut p, &[100 + i as u8]), "refill {i}");
        }
        assert!(!send(&mut p, b"x"), "only kept frame left");
        // The consumer, at frame 0 (SKIP), passes it because frame 1 is published.
        for i in 1..n {
            assert_eq!(take(&mut c).unwrap(), [100 + i as u8]);
        }
        assert_eq!(take(&mut c), None);
        release_kept(&p.ring, 0);
        assert!(send(&mut p, b"z"));
        assert_eq!(take(&mut c).unwrap(), b"z");
    }

    #[test]
    fn consumer_waits_at_skip_until_producer_passes_it() {
        let (mut p, mut c) = test_rings(256, 4);
        let n = p.ring.geometry.frame_count;
        for i in 0..n {
            assert!(send(&mut p, &[i as u8]));
        }
        for i in 0..n {
            match c.peek() {
                Slot::Message { index, .. } if i == 1 => c.keep(index),
                Slot::Message { index, .. } => c.release(index),
                other => panic!("{other:?}"),
            }
        }
        // Producer writes frame 0 only; consumer reads it, then sits at kept frame 1, with no
        // later published frame: it must not move past it.
        assert!(send(&mut p, b"f0"));
        assert_eq!(take(&mut c).unwrap(), b"f0");
        assert_eq!(c.peek(), Slot::Empty);
        // The consumer frees frame 1 before the producer got there: the producer fills it and
        // the consumer reads it in order.
        release_kept(&p.ring, 1);
        assert!(send(&mut p, b"f1"));
        assert!(send(&mut p, b"f2"));
        assert_eq!(take(&mut c).unwrap(), b"f1");
        assert_eq!(take(&mut c).unwrap(), b"f2");
    }

    #[test]
    fn released_kept_frame_the_producer_passed_does_not_hide_later_frames() {
        let (mut p, mut c) = test_rings(1024, 4);
        let n = p.ring.frame_count();
        for i in 0..n {
            assert!(send(&mut p, &[i as u8]));
        }
        // Keep frame 0, consume the rest: the consumer is back at frame 0.
        match c.peek() {
            Slot::Message { index, .. } => c.keep(index),
            other => panic!("{other:?}"),
        }
        for i in 1..n {
            assert_eq!(take(&mut c).unwrap(), [i as u8]);
        }
        // The producer passes over kept frame 0 and writes frame 1; then the consumer releases
        // frame 0 before looking. Frame 0 is UNUSED but the message is in frame 1.
        assert!(send(&mut p, b"next"));
        release_kept(&p.ring, 0);
        assert_eq!(take(&mut c).unwrap(), b"next");
        // The producer reaches frame 0 again in the next lap, in order.
        for i in 2..n {
            assert!(send(&mut p, &[i as u8]));
            assert_eq!(take(&mut c).unwrap(), [i as u8]);
        }
        assert!(send(&mut p, b"lap"));
        assert_eq!(take(&mut c).unwrap(), b"lap");
        assert_eq!(take(&mut c), None);
    }

    /// Random interleavings of produce, consume, keep and release against the model "every
    /// message arrives once, in order; a kept frame is never overwritten; the ring only stalls
    /// when kept frames fill it".
    #[test]
    fn random_schedules_keep_fifo_order() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for round in 0..300 {
            // Rings of 2 to 32 frames.
            let frame_size = [2048, 1024, 256][round % 3];
            let (mut p, mut c) = test_rings(frame_size, 1 + (round as u32 / 3) % 32);
            let n = p.ring.frame_count();
            let (mut produced, mut expect) = (0u32, 0u32);
            let mut kept: Vec<(u32, u32)> = Vec::new();
            for _ in 0..5_000 {
                match next() % 4 {
                    0 | 1 => {
                        if send(&mut p, &produced.to_le_bytes()) {
                            produced += 1;
                        } else {
                            // Full is only legitimate while the consumer has something to do.
                            assert!(!kept.is_empty() || c.peek() != Slot::Empty, "stalled");
                        }
                    }
                    2 => match c.peek() {
                        Slot::Message { index, len, .. } => {
                            let mut v = Vec::new();
                            c.copy_out(index, len, &mut v);
                            assert_eq!(v, expect.to_le_bytes(), "message order");
                            if next() % 4 == 0 && (kept.len() as u32) < n - 1 {
                                c.keep(index);
                                kept.push((index, expect));
                            } else {
                                c.release(index);
                            }
                            expect += 1;
                        }
                        Slot::Empty => {
                            assert!(expect == produced || !kept.is_empty(), "lost messages")
                        }
                        other => panic!("{other:?}"),
                    },
                    _ if !kept.is_empty() => {
                        let (index, seq) = kept.swap_remove(next() as usize % kept.len());
                        let mut v = Vec::new();
                        c.copy_out(index, 4, &mut v);
                        assert_eq!(v, seq.to_le_bytes(), "kept frame overwritten");
                        release_kept(&p.ring, index);
                    }
                    _ => {}
                }
            }
            for (index, _) in kept.drain(..) {
                release_kept(&p.ring, index);
            }
            while let Some(v) = take(&mut c) {
                assert_eq!(v, expect.to_le_bytes());
                expect += 1;
            }
            assert_eq!(expect, produced, "round {round}: every message delivered");
            assert!(send(&mut p, b"end") && take(&mut c).unwrap() == b"end");
        }
    }

    #[test]
    fn garbage_status_is_never_consumed_or_reused() {
        let (mut p, mut c) = test_rings(256, 2);
        p.ring.header(0).status.store(77, Ordering::Relaxed);
        assert_eq!(c.peek(), Slot::Empty);
        assert!(p.reserve().is_none());
    }
}
