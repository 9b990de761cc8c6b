//! A buffer: one frame of a [`Pool`] and where the packet's bytes lie inside it.
//!
//! # Invariants
//! - `start + len <= frame_size`: the data is always inside its frame, so
//!   `headroom() + len() + tailroom() == frame_size()` after every operation, failed or not.
//! - A failed operation changes nothing.
//! - Bytes that an operation adds (`prepend`, `append`, `insert_after`) hold whatever the frame
//!   held before, possibly an earlier packet's bytes; the caller writes all of them through the
//!   slice it gets back.

use std::fmt;

use crate::pool::{BufIdx, Empty, Pool};

/// Why a buffer operation changed nothing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BufError {
    /// The frame has not that many bytes free on the side asked for.
    NoRoom,
    /// The data has fewer bytes than the operation strips or skips.
    Short,
}

/// Why [`Buf::ensure_headroom`] could not make room; the buffer is unchanged and still owned by
/// the caller, who drops the packet and counts it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CopyError {
    /// The headroom asked for plus the data do not fit even a large frame.
    TooLarge,
    /// Room needs a large frame and none is free.
    Empty,
}

impl fmt::Display for BufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BufError::NoRoom => "no room in the frame",
            BufError::Short => "packet shorter than the operation needs",
        })
    }
}

impl std::error::Error for BufError {}

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CopyError::TooLarge => "packet and headroom exceed a large frame",
            CopyError::Empty => "no free large frame",
        })
    }
}

impl std::error::Error for CopyError {}

impl From<Empty> for CopyError {
    fn from(Empty: Empty) -> CopyError {
        CopyError::Empty
    }
}

/// A packet in a frame of a [`Pool`]. Not `Clone`: exactly one `Buf` holds a frame, and
/// [`Pool::free`] takes it back. Dropping a `Buf` without freeing it loses its frame until the
/// pool is dropped.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a buffer's frame goes back to its pool through Pool::free"]
pub struct Buf {
    idx: BufIdx,
    start: u32,
    len: u32,
    frame_size: u32,
}

impl Buf {
    /// An empty buffer at `start` of frame `idx`; `start < frame_size <= u32::MAX` (the pool
    /// checks both when it is made).
    pub(crate) fn new(idx: BufIdx, start: usize, frame_size: usize) -> Buf {
        Buf {
            idx,
            start: start as u32,
            len: 0,
            frame_size: frame_size as u32,
        }
    }

    /// The frame this buffer holds.
    pub fn idx(&self) -> BufIdx {
        self.idx
    }

    /// The packet's length.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the packet has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Free bytes in front of the packet: the packet's offset in its frame.
    pub fn headroom(&self) -> usize {
        self.start as usize
    }

    /// Free bytes after the packet.
    pub fn tailroom(&self) -> usize {
        (self.frame_size - self.start - self.len) as usize
    }

    /// The size of this buffer's frame.
    pub fn frame_size(&self) -> usize {
        self.frame_size as usize
    }

    /// The packet's bytes.
    pub fn data<'p>(&self, pool: &'p Pool) -> &'p [u8] {
        pool.bytes(self.idx, self.headroom(), self.len())
    }

    /// The packet's bytes, to change in place.
    pub fn data_mut<'p>(&self, pool: &'p mut Pool) -> &'p mut [u8] {
        pool.bytes_mut(self.idx, self.headroom(), self.len())
    }

    /// `len` bytes at `at` of the data, as a range of the frame.
    fn range(&self, at: usize, len: usize) -> std::ops::Range<usize> {
        let start = self.headroom() + at;
        start..start + len
    }

    /// Grows the packet by `n` bytes at the front (a header to write) and returns them.
    pub fn prepend<'p>(&mut self, pool: &'p mut Pool, n: usize) -> Result<&'p mut [u8], BufError> {
        if n > self.headroom() {
            return Err(BufError::NoRoom);
        }
        self.start -= n as u32;
        self.len += n as u32;
        Ok(&mut pool.frame_mut(self.idx)[self.range(0, n)])
    }

    /// Grows the packet by `n` bytes at the end and returns them.
    pub fn append<'p>(&mut self, pool: &'p mut Pool, n: usize) -> Result<&'p mut [u8], BufError> {
        if n > self.tailroom() {
            return Err(BufError::NoRoom);
        }
        let at = self.len();
        self.len += n as u32;
        Ok(&mut pool.frame_mut(self.idx)[self.range(at, n)])
    }

    /// Strips `n` bytes from the front (a header read and done with); they become headroom.
    pub fn trim_front(&mut self, n: usize) -> Result<(), BufError> {
        if n > self.len() {
            return Err(BufError::Short);
        }
        self.start += n as u32;
        self.len -= n as u32;
        Ok(())
    }

    /// Strips `n` bytes from the end (padding, a trailer); they become tailroom.
    pub fn trim_back(&mut self, n: usize) -> Result<(), BufError> {
        if n > self.len() {
            return Err(BufError::Short);
        }
        self.len -= n as u32;
        Ok(())
    }

    /// Opens `n` bytes after the first `offset` bytes of the packet (SRv6 H.Insert puts an SRH
    /// after the IPv6 header) and returns them. The first `offset` bytes move `n` bytes towards
    /// the front, into the headroom: one move of the headers, never of the payload.
    pub fn insert_after<'p>(
        &mut self,
        pool: &'p mut Pool,
        offset: usize,
        n: usize,
    ) -> Result<&'p mut [u8], BufError> {
        if offset > self.len() {
            return Err(BufError::Short);
        }
        if n > self.headroom() {
            return Err(BufError::NoRoom);
        }
        let from = self.range(0, offset);
        self.start -= n as u32;
        self.len += n as u32;
        let frame = pool.frame_mut(self.idx);
        frame.copy_within(from, self.headroom());
        Ok(&mut frame[self.range(offset, n)])
    }

    /// Makes sure at least `n` bytes are free in front of the packet, for encapsulations larger
    /// than the configured headroom. When they are, nothing happens: the common path. When the
    /// frame's tailroom has the bytes missing, the data moves towards the end of its own frame;
    /// otherwise it is copied into a large frame and the old frame goes back to the pool.
    /// Either way the packet is copied once, and [`Pool::copies`] counts it.
    ///
    /// After a copy the data starts at the larger of `n` and the pool's headroom, as far as the
    /// frame allows, so that a link-layer header still fits in front of the encapsulation.
    pub fn ensure_headroom(&mut self, pool: &mut Pool, n: usize) -> Result<(), CopyError> {
        if n <= self.headroom() {
            return Ok(());
        }
        let len = self.len();
        let fits = |frame_size: usize| n.checked_add(len).is_some_and(|need| need <= frame_size);
        let start = |frame_size: usize| n.max(pool.headroom()).min(frame_size - len);
        if fits(self.frame_size()) {
            let to = start(self.frame_size());
            pool.copy(self.idx, self.headroom(), self.idx, to, len);
            self.start = to as u32;
            pool.count_copy(false);
            return Ok(());
        }
        if !fits(pool.large_frame_size()) {
            return Err(CopyError::TooLarge);
        }
        let to = start(pool.large_frame_size());
        let mut large = pool.alloc_large()?;
        pool.copy(self.idx, self.headroom(), large.idx, to, len);
        large.start = to as u32;
        large.len = len as u32;
        pool.free(std::mem::replace(self, large));
        pool.count_copy(true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Copies, Encap, Headroom, PoolConfig};

    fn pool(large_frames: u32) -> Pool {
        Pool::new(PoolConfig {
            frames: 2,
            frame_size: 2048,
            large_frames,
            large_frame_size: 4096,
            headroom: Headroom::default(),
        })
        .unwrap()
    }

    fn packet(pool: &mut Pool, bytes: &[u8]) -> Buf {
        let mut b = pool.alloc().unwrap();
        b.append(pool, bytes.len()).unwrap().copy_from_slice(bytes);
        b
    }

    fn rooms(b: &Buf) -> (usize, usize, usize) {
        assert_eq!(b.headroom() + b.len() + b.tailroom(), b.frame_size());
        (b.headroom(), b.len(), b.tailroom())
    }

    #[test]
    fn prepend_and_trim_front_move_the_start_only() {
        let mut p = pool(0);
        let mut b = packet(&mut p, b"payload");
        b.prepend(&mut p, 4).unwrap().copy_from_slice(b"hdr:");
        assert_eq!(b.data(&p), b"hdr:payload");
        assert_eq!(rooms(&b), (124, 11, 2048 - 135));
        b.trim_front(4).unwrap();
        assert_eq!(b.data(&p), b"payload");
        assert_eq!(b.prepend(&mut p, 129), Err(BufError::NoRoom));
        assert_eq!(b.trim_front(8), Err(BufError::Short));
        assert_eq!(b.data(&p), b"payload");
        b.prepend(&mut p, 128).unwrap().fill(0);
        assert_eq!(b.headroom(), 0);
        p.free(b);
    }

    #[test]
    fn append_and_trim_back_move_the_end_only() {
        let mut p = pool(0);
        let mut b = packet(&mut p, b"ab");
        assert_eq!(b.append(&mut p, 2048 - 130 + 1), Err(BufError::NoRoom));
        b.append(&mut p, 2).unwrap().copy_from_slice(b"cd");
        b.trim_back(1).unwrap();
        assert_eq!(b.data(&p), b"abc");
        assert_eq!(b.trim_back(4), Err(BufError::Short));
        b.data_mut(&mut p)[0] = b'A';
        assert_eq!(b.data(&p), b"Abc");
        assert_eq!(rooms(&b), (128, 3, 2048 - 131));
        p.free(b);
    }

    #[test]
    fn insert_after_moves_only_the_header() {
        let mut p = pool(0);
        // An IPv6 header stand-in of 40 bytes, then the payload.
        let mut bytes = vec![6u8; 40];
        bytes.extend_from_slice(b"payload");
        let mut b = packet(&mut p, &bytes);
        let srh = Encap::Srv6Insert { sids: 1 }.len();
        b.insert_after(&mut p, 40, srh).unwrap().fill(0x2b);
        let data = b.data(&p);
        assert_eq!(&data[..40], &[6u8; 40][..]);
        assert_eq!(&data[40..40 + srh], &vec![0x2b; srh][..]);
        assert_eq!(&data[40 + srh..], b"payload");
        assert_eq!(rooms(&b), (128 - srh, 47 + srh, 2048 - 128 - 47));
        assert_eq!(b.insert_after(&mut p, b.len() + 1, 1), Err(BufError::Short));
        assert_eq!(
            b.insert_after(&mut p, 0, b.headroom() + 1),
            Err(BufError::NoRoom)
        );
        // At offset 0 it is a prepend.
        b.insert_after(&mut p, 0, 1).unwrap()[0] = b'E';
        assert_eq!(b.data(&p)[0], b'E');
        p.free(b);
    }

    #[test]
    fn ensure_headroom_is_free_when_the_room_is_there() {
        let mut p = pool(1);
        let mut b = packet(&mut p, b"x");
        b.ensure_headroom(&mut p, 128).unwrap();
        assert_eq!((b.idx().get(), b.headroom()), (0, 128));
        assert_eq!(p.copies(), Copies::default());
        p.free(b);
    }

    #[test]
    fn ensure_headroom_moves_within_the_frame_when_the_tail_has_room() {
        let mut p = pool(1);
        let mut b = packet(&mut p, &[7; 1514]);
        // An IOAM trace in encap mode under an Ethernet header: beyond the 128 in front.
        let need = Encap::Ioam6Trace {
            data: 244,
            encap: true,
        }
        .len()
            + 14;
        b.ensure_headroom(&mut p, need).unwrap();
        assert_eq!(rooms(&b), (need, 1514, 2048 - need - 1514));
        assert_eq!(b.data(&p), &[7; 1514][..]);
        assert_eq!(
            p.copies(),
            Copies {
                in_frame: 1,
                to_large: 0
            }
        );
        assert_eq!(b.idx().get(), 0);
        p.free(b);
    }

    #[test]
    fn ensure_headroom_copies_into_a_large_frame_once() {
        let mut p = pool(1);
        let mut b = packet(&mut p, &[9; 1900]);
        b.ensure_headroom(&mut p, 300).unwrap();
        assert_eq!(b.idx().get(), 2);
        assert_eq!(rooms(&b), (300, 1900, 4096 - 2200));
        assert_eq!(b.data(&p), &[9; 1900][..]);
        assert_eq!(
            p.copies(),
            Copies {
                in_frame: 0,
                to_large: 1
            }
        );
        // The base frame went back.
        assert_eq!(p.available(), 2);
        b.prepend(&mut p, 300).unwrap().fill(1);
        p.free(b);
        assert_eq!(p.available_large(), 1);
    }

    #[test]
    fn ensure_headroom_fails_without_changing_anything() {
        let mut p = pool(1);
        let mut b = packet(&mut p, &[3; 1900]);
        assert_eq!(
            b.ensure_headroom(&mut p, 4096 - 1899),
            Err(CopyError::TooLarge)
        );
        assert_eq!(
            b.ensure_headroom(&mut p, usize::MAX),
            Err(CopyError::TooLarge)
        );
        let hold = p.alloc_large().unwrap();
        assert_eq!(b.ensure_headroom(&mut p, 300), Err(CopyError::Empty));
        assert_eq!(rooms(&b), (128, 1900, 20));
        assert_eq!(b.data(&p), &[3; 1900][..]);
        assert_eq!(p.copies(), Copies::default());
        p.free(hold);
        p.free(b);
    }
}
