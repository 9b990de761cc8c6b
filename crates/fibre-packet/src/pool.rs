//! The frames: two classes, each one contiguous region allocated when the pool is made, and a
//! free list per class.
//!
//! # Invariants
//! - A frame is either on its class's free list or held by exactly one [`Buf`]; `in_use`
//!   records which, and `alloc`/`free` check it, so the pool never hands out a frame twice.
//! - The free lists are allocated with room for every frame, so `alloc` and `free` are one pop
//!   or push and never allocate.
//! - Indices `0..frames` are base frames, `frames..frames + large_frames` large ones; a frame's
//!   bytes are `region[local * frame_size..][..frame_size]` of its class.

use std::fmt;

use crate::buf::Buf;
use crate::headroom::Headroom;

/// A frame of a [`Pool`], by index: base frames first, then large ones.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufIdx(u32);

impl BufIdx {
    /// The index as a number, for tables indexed by frame.
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// How many frames of which sizes a [`Pool`] holds, and where received data starts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Base frames: every received packet gets one.
    pub frames: u32,
    /// Bytes per base frame (an AF_XDP UMEM's `frame_size`: 2048 or 4096). It must hold the
    /// headroom and the largest frame receive accepts: a frame longer than the tailroom of a
    /// fresh buffer does not fit (`append` says `NoRoom`), and receive counts it as a drop.
    pub frame_size: u32,
    /// Large frames, for the copy when a packet outgrows its base frame.
    pub large_frames: u32,
    /// Bytes per large frame; at least `frame_size`.
    pub large_frame_size: u32,
    /// Where data starts in a fresh buffer of either class.
    pub headroom: Headroom,
}

/// Why a [`PoolConfig`] was refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The headroom leaves no byte for data in a base frame.
    HeadroomTooLarge { headroom: usize, frame_size: u32 },
    /// Large frames must be at least as large as base frames.
    LargeSmallerThanBase {
        frame_size: u32,
        large_frame_size: u32,
    },
    /// The frames' indices do not fit a `u32`, or a region's bytes do not fit a `usize`.
    TooManyFrames,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::HeadroomTooLarge { headroom, frame_size } => {
                write!(f, "headroom {headroom} leaves no room in a frame of {frame_size} bytes")
            }
            ConfigError::LargeSmallerThanBase { frame_size, large_frame_size } => write!(
                f,
                "large frames ({large_frame_size} bytes) are smaller than base frames ({frame_size} bytes)"
            ),
            ConfigError::TooManyFrames => write!(f, "too many frames for one pool"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The class asked for has no free frame: the caller drops the packet and counts it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Empty;

impl fmt::Display for Empty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no free frame")
    }
}

impl std::error::Error for Empty {}

/// Payload copies [`Buf::ensure_headroom`] made, by where the data went.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Copies {
    /// Moved towards the end of its own frame, whose tailroom had the bytes missing in front.
    pub in_frame: u64,
    /// Copied into a large frame.
    pub to_large: u64,
}

/// One class of equal frames in one region.
struct Class {
    region: Box<[u8]>,
    frame_size: usize,
    /// The first [`BufIdx`] of this class.
    first: u32,
    /// Free frames by local index, used as a stack: the frame reused next is the one freed
    /// last, the likeliest still in cache (VPP's buffer free lists do the same).
    free: Vec<u32>,
}

impl Class {
    fn new(frames: u32, frame_size: u32, first: u32) -> Result<Class, ConfigError> {
        let bytes = (frames as usize)
            .checked_mul(frame_size as usize)
            .ok_or(ConfigError::TooManyFrames)?;
        Ok(Class {
            region: vec![0; bytes].into_boxed_slice(),
            frame_size: frame_size as usize,
            first,
            free: (0..frames).rev().collect(),
        })
    }

    fn frame(&self, local: u32) -> std::ops::Range<usize> {
        let start = local as usize * self.frame_size;
        start..start + self.frame_size
    }
}

/// Frames allocated once, handed out as [`Buf`]s and taken back by [`Pool::free`].
///
/// A `Buf` belongs to the pool that allocated it: passing it to another pool's methods panics
/// or reaches a frame of that pool, never memory outside it.
pub struct Pool {
    base: Class,
    large: Class,
    in_use: Box<[bool]>,
    headroom: usize,
    copies: Copies,
}

impl Pool {
    /// Allocates every frame of `config` (zeroed) and the free lists.
    pub fn new(config: PoolConfig) -> Result<Pool, ConfigError> {
        let headroom = config.headroom.bytes();
        if headroom >= config.frame_size as usize {
            return Err(ConfigError::HeadroomTooLarge {
                headroom,
                frame_size: config.frame_size,
            });
        }
        if config.large_frame_size < config.frame_size {
            return Err(ConfigError::LargeSmallerThanBase {
                frame_size: config.frame_size,
                large_frame_size: config.large_frame_size,
            });
        }
        let total = config
            .frames
            .checked_add(config.large_frames)
            .ok_or(ConfigError::TooManyFrames)?;
        Ok(Pool {
            base: Class::new(config.frames, config.frame_size, 0)?,
            large: Class::new(config.large_frames, config.large_frame_size, config.frames)?,
            in_use: vec![false; total as usize].into_boxed_slice(),
            headroom,
            copies: Copies::default(),
        })
    }

    /// An empty base buffer whose data starts at the configured headroom: receive appends the
    /// packet to it.
    pub fn alloc(&mut self) -> Result<Buf, Empty> {
        self.take(false)
    }

    /// An empty large buffer whose data starts at the configured headroom.
    pub fn alloc_large(&mut self) -> Result<Buf, Empty> {
        self.take(true)
    }

    fn take(&mut self, large: bool) -> Result<Buf, Empty> {
        let class = if large {
            &mut self.large
        } else {
            &mut self.base
        };
        let local = class.free.pop().ok_or(Empty)?;
        let idx = class.first + local;
        let in_use = &mut self.in_use[idx as usize];
        assert!(!*in_use, "frame {idx} on a free list while in use");
        *in_use = true;
        Ok(Buf::new(BufIdx(idx), self.headroom, class.frame_size))
    }

    /// Takes a buffer's frame back.
    ///
    /// # Panics
    /// If the buffer's frame is not in use: the buffer came from another pool.
    pub fn free(&mut self, buf: Buf) {
        let idx = buf.idx().0;
        let in_use = self.in_use.get_mut(idx as usize).filter(|u| **u);
        let in_use = in_use.unwrap_or_else(|| panic!("frame {idx} freed but not in use"));
        *in_use = false;
        if idx < self.large.first {
            self.base.free.push(idx);
        } else {
            self.large.free.push(idx - self.large.first);
        }
    }

    /// Where data starts in a fresh buffer.
    pub fn headroom(&self) -> usize {
        self.headroom
    }

    /// Bytes per base frame.
    pub fn frame_size(&self) -> usize {
        self.base.frame_size
    }

    /// Bytes per large frame.
    pub fn large_frame_size(&self) -> usize {
        self.large.frame_size
    }

    /// Free base frames.
    pub fn available(&self) -> usize {
        self.base.free.len()
    }

    /// Free large frames.
    pub fn available_large(&self) -> usize {
        self.large.free.len()
    }

    /// The payload copies made so far.
    pub fn copies(&self) -> Copies {
        self.copies
    }

    /// The offset of `idx`'s frame in its class's region; for a base frame, the address the
    /// AF_XDP rings carry once the region is a UMEM.
    pub fn frame_offset(&self, idx: BufIdx) -> usize {
        self.locate(idx).1.start
    }

    /// Which class holds `idx` (true: large) and its frame's bytes in that class's region.
    fn locate(&self, idx: BufIdx) -> (bool, std::ops::Range<usize>) {
        if idx.0 < self.large.first {
            (false, self.base.frame(idx.0))
        } else {
            (true, self.large.frame(idx.0 - self.large.first))
        }
    }

    pub(crate) fn frame_mut(&mut self, idx: BufIdx) -> &mut [u8] {
        match self.locate(idx) {
            (false, r) => &mut self.base.region[r],
            (true, r) => &mut self.large.region[r],
        }
    }

    /// `len` bytes at `at` of `idx`'s frame, with one bounds check (of the region) where
    /// slicing the frame and then the bytes takes two: a packet's data is read this way
    /// several times per packet. `at + len` must not exceed the frame (a `Buf` keeps that);
    /// if it did, the bytes would run into the next frame of the same pool, never outside it.
    pub(crate) fn bytes(&self, idx: BufIdx, at: usize, len: usize) -> &[u8] {
        debug_assert!(at + len <= self.locate(idx).1.len());
        match self.locate(idx) {
            (false, r) => &self.base.region[r.start + at..r.start + at + len],
            (true, r) => &self.large.region[r.start + at..r.start + at + len],
        }
    }

    /// [`Pool::bytes`], to change in place.
    pub(crate) fn bytes_mut(&mut self, idx: BufIdx, at: usize, len: usize) -> &mut [u8] {
        debug_assert!(at + len <= self.locate(idx).1.len());
        match self.locate(idx) {
            (false, r) => &mut self.base.region[r.start + at..r.start + at + len],
            (true, r) => &mut self.large.region[r.start + at..r.start + at + len],
        }
    }

    /// Copies `len` bytes at `src_at` of `src`'s frame to `dst_at` of `dst`'s frame (which may
    /// be the same frame; the ranges may overlap).
    pub(crate) fn copy(
        &mut self,
        src: BufIdx,
        src_at: usize,
        dst: BufIdx,
        dst_at: usize,
        len: usize,
    ) {
        let (src_large, s) = self.locate(src);
        let (dst_large, d) = self.locate(dst);
        let (from, to) = (s.start + src_at, d.start + dst_at);
        assert!(src_at + len <= s.len() && dst_at + len <= d.len());
        match (src_large, dst_large) {
            (false, false) => self.base.region.copy_within(from..from + len, to),
            (true, true) => self.large.region.copy_within(from..from + len, to),
            (false, true) => {
                self.large.region[to..to + len].copy_from_slice(&self.base.region[from..from + len])
            }
            (true, false) => {
                self.base.region[to..to + len].copy_from_slice(&self.large.region[from..from + len])
            }
        }
    }

    pub(crate) fn count_copy(&mut self, to_large: bool) {
        if to_large {
            self.copies.to_large += 1;
        } else {
            self.copies.in_frame += 1;
        }
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("frames", &(self.large.first as usize))
            .field("frame_size", &self.base.frame_size)
            .field("available", &self.available())
            .field(
                "large_frames",
                &(self.in_use.len() - self.large.first as usize),
            )
            .field("large_frame_size", &self.large.frame_size)
            .field("available_large", &self.available_large())
            .field("headroom", &self.headroom)
            .field("copies", &self.copies)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PoolConfig {
        PoolConfig {
            frames: 3,
            frame_size: 2048,
            large_frames: 1,
            large_frame_size: 4096,
            headroom: Headroom::default(),
        }
    }

    #[test]
    fn refuses_configurations_that_cannot_hold_a_packet() {
        let headroom = Headroom::new(2048, 0);
        let err = Pool::new(PoolConfig {
            headroom,
            ..config()
        })
        .map(|_| ())
        .unwrap_err();
        assert_eq!(
            err,
            ConfigError::HeadroomTooLarge {
                headroom: 2048,
                frame_size: 2048
            }
        );
        let err = Pool::new(PoolConfig {
            large_frame_size: 1024,
            ..config()
        })
        .map(|_| ());
        assert!(matches!(err, Err(ConfigError::LargeSmallerThanBase { .. })));
        let err = Pool::new(PoolConfig {
            frames: u32::MAX,
            large_frames: 1,
            ..config()
        });
        assert_eq!(err.map(|_| ()), Err(ConfigError::TooManyFrames));
    }

    #[test]
    fn hands_out_each_frame_once_and_reports_empty() {
        let mut pool = Pool::new(config()).unwrap();
        let bufs: Vec<Buf> = (0..3).map(|_| pool.alloc().unwrap()).collect();
        let mut idx: Vec<u32> = bufs.iter().map(|b| b.idx().get()).collect();
        idx.sort_unstable();
        assert_eq!(idx, [0, 1, 2]);
        assert_eq!(pool.alloc(), Err(Empty));
        assert_eq!(pool.available(), 0);
        let large = pool.alloc_large().unwrap();
        assert_eq!((large.idx().get(), large.frame_size()), (3, 4096));
        assert_eq!(pool.alloc_large(), Err(Empty));
        for b in bufs {
            let last = b.idx();
            pool.free(b);
            // Freed last, reused first.
            let again = pool.alloc().unwrap();
            assert_eq!(again.idx(), last);
            pool.free(again);
        }
        pool.free(large);
        assert_eq!((pool.available(), pool.available_large()), (3, 1));
    }

    #[test]
    fn fresh_buffers_start_at_the_headroom_and_frames_at_their_offsets() {
        let mut pool = Pool::new(config()).unwrap();
        let b = pool.alloc().unwrap();
        assert_eq!((b.headroom(), b.len(), b.tailroom()), (128, 0, 2048 - 128));
        assert_eq!(pool.frame_offset(b.idx()), b.idx().get() as usize * 2048);
        let l = pool.alloc_large().unwrap();
        assert_eq!(pool.frame_offset(l.idx()), 0);
        assert_eq!((l.headroom(), l.tailroom()), (128, 4096 - 128));
        pool.free(b);
        pool.free(l);
    }

    #[test]
    #[should_panic(expected = "not in use")]
    fn a_buffer_of_another_pool_is_refused() {
        let mut a = Pool::new(config()).unwrap();
        let mut b = Pool::new(config()).unwrap();
        let buf = a.alloc().unwrap();
        b.free(buf);
    }
}
