//! Ring geometry: how a ring is cut into blocks and frames, and the checks both sides apply.
//!
//! A ring is `block_count` blocks of `block_size` bytes; each block holds
//! `block_size / frame_size` frames and frames never straddle a block boundary, as in memory-mapped netlink's
//! `nl_mmap_req`. The daemon validates the geometry a client asks for before it allocates
//! anything; the client validates the geometry the daemon answers with and the size of the file
//! it receives before it maps it. Everything here is plain arithmetic on private values.

use crate::frame::FRAME_HEADER_LEN;
use std::fmt;

/// Frames start on this boundary. The header's atomics need 4-byte alignment; 8 keeps every
/// payload 8-byte aligned so a codec can read u64 attributes in place on the client side.
pub const FRAME_ALIGNMENT: u32 = 8;

/// Upper bound of one ring's size. The daemon allocates two rings per client, so this bounds the
/// shared memory a client can make the daemon create (2 x 64 MiB) and, with the number of
/// clients, its total footprint.
pub const MAX_RING_BYTES: u64 = 64 << 20;

/// Upper bound of frames per ring. A producer looking for a free frame may pass over every
/// SKIP frame of the ring, so this bounds the work one hostile client can make the daemon do
/// per attempt (64 Ki frames of 1 KiB already fill [`MAX_RING_BYTES`]).
pub const MAX_FRAMES: u32 = 1 << 16;

/// Smallest useful frame: a header plus one netlink header (16 bytes) of payload.
pub const MIN_FRAME_SIZE: u32 = FRAME_HEADER_LEN as u32 + 16;

/// The page size of this machine; blocks are whole pages, and both sides run on one host.
pub fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

/// The shape of one ring (RX or TX).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingGeometry {
    /// Bytes per block: a positive multiple of the page size.
    pub block_size: u32,
    /// Number of blocks.
    pub block_count: u32,
    /// Bytes per frame, header included: a multiple of [`FRAME_ALIGNMENT`], at most `block_size`.
    pub frame_size: u32,
    /// Number of frames: exactly `block_count * (block_size / frame_size)`.
    pub frame_count: u32,
}

/// Why a geometry was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// `block_size` is zero or not a multiple of the page size.
    BlockSize,
    /// `frame_size` is below [`MIN_FRAME_SIZE`], not a multiple of [`FRAME_ALIGNMENT`] or larger
    /// than a block.
    FrameSize,
    /// `frame_count` does not match `block_count * (block_size / frame_size)`, or is zero.
    FrameCount,
    /// The ring would exceed [`MAX_RING_BYTES`] or [`MAX_FRAMES`].
    TooLarge,
}

impl fmt::Display for GeometryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GeometryError::BlockSize => "block size must be a positive multiple of the page size",
            GeometryError::FrameSize => {
                "frame size must be aligned, hold a header and a netlink header, and fit a block"
            }
            GeometryError::FrameCount => "frame count must equal blocks x frames per block",
            GeometryError::TooLarge => "ring larger than the daemon allows",
        })
    }
}

impl std::error::Error for GeometryError {}

impl RingGeometry {
    /// The smallest valid geometry with frames of at least `frame_size` bytes (header included)
    /// and at least `frames` frames: `frame_size` is rounded up to the alignment, blocks are the
    /// smallest whole number of pages holding one frame, and the frame count is rounded up to
    /// fill the last block.
    pub fn for_frames(frame_size: u32, frames: u32) -> Result<RingGeometry, GeometryError> {
        let page = page_size();
        let frame_size = frame_size
            .max(MIN_FRAME_SIZE)
            .checked_next_multiple_of(FRAME_ALIGNMENT)
            .ok_or(GeometryError::FrameSize)?;
        let block_size = frame_size
            .checked_next_multiple_of(page)
            .ok_or(GeometryError::BlockSize)?;
        let per_block = block_size / frame_size;
        let block_count = frames.max(1).div_ceil(per_block);
        let frame_count = block_count
            .checked_mul(per_block)
            .ok_or(GeometryError::TooLarge)?;
        let geometry = RingGeometry {
            block_size,
            block_count,
            frame_size,
            frame_count,
        };
        geometry.validate()?;
        Ok(geometry)
    }

    /// Checks every rule above; both sides call it on every geometry they did not compute.
    pub fn validate(&self) -> Result<(), GeometryError> {
        let page = page_size();
        if self.block_size == 0 || self.block_size % page != 0 {
            return Err(GeometryError::BlockSize);
        }
        if self.frame_size < MIN_FRAME_SIZE
            || self.frame_size % FRAME_ALIGNMENT != 0
            || self.frame_size > self.block_size
        {
            return Err(GeometryError::FrameSize);
        }
        if self.ring_bytes() > MAX_RING_BYTES || self.frame_count > MAX_FRAMES {
            return Err(GeometryError::TooLarge);
        }
        let per_block = self.block_size / self.frame_size;
        if self.block_count == 0
            || u64::from(self.block_count) * u64::from(per_block) != u64::from(self.frame_count)
        {
            return Err(GeometryError::FrameCount);
        }
        Ok(())
    }

    /// Bytes the ring occupies in the mapping.
    pub fn ring_bytes(&self) -> u64 {
        u64::from(self.block_size) * u64::from(self.block_count)
    }

    /// Frames in one block.
    pub fn frames_per_block(&self) -> u32 {
        self.block_size / self.frame_size
    }

    /// Payload bytes one frame can carry.
    pub fn frame_capacity(&self) -> usize {
        self.frame_size as usize - FRAME_HEADER_LEN
    }

    /// Offset of frame `index` from the start of the ring. Only meaningful for a validated
    /// geometry and `index < frame_count`, which the ring code guarantees.
    pub(crate) fn frame_offset(&self, index: u32) -> usize {
        let per_block = self.frames_per_block();
        (index / per_block) as usize * self.block_size as usize
            + (index % per_block) as usize * self.frame_size as usize
    }

    pub(crate) fn to_words(self) -> [u32; 4] {
        [
            self.block_size,
            self.block_count,
            self.frame_size,
            self.frame_count,
        ]
    }

    pub(crate) fn from_words(w: [u32; 4]) -> RingGeometry {
        RingGeometry {
            block_size: w[0],
            block_count: w[1],
            frame_size: w[2],
            frame_count: w[3],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_frames_rounds_up_to_valid_geometry() {
        let page = page_size();
        let g = RingGeometry::for_frames(1000, 10).unwrap();
        assert_eq!(g.frame_size, 1000);
        assert_eq!(g.block_size, page);
        assert!(g.frame_count >= 10);
        assert_eq!(g.frame_count % g.frames_per_block(), 0);
        g.validate().unwrap();

        let g = RingGeometry::for_frames(1001, 1).unwrap();
        assert_eq!(g.frame_size, 1008);
        let g = RingGeometry::for_frames(3 * page, 4).unwrap();
        assert_eq!(
            (g.block_size, g.frames_per_block(), g.frame_count),
            (3 * page, 1, 4)
        );
    }

    #[test]
    fn frames_never_straddle_blocks() {
        let g = RingGeometry::for_frames(1500, 40).unwrap();
        for i in 0..g.frame_count {
            let off = g.frame_offset(i);
            let block = off / g.block_size as usize;
            let end = off + g.frame_size as usize - 1;
            assert_eq!(end / g.block_size as usize, block, "frame {i}");
            assert!((end as u64) < g.ring_bytes());
        }
    }

    #[test]
    fn validate_rejects_each_broken_rule() {
        let page = page_size();
        let good = RingGeometry {
            block_size: page,
            block_count: 2,
            frame_size: page / 2,
            frame_count: 4,
        };
        good.validate().unwrap();
        // Small enough in bytes, but more frames than a scan may cross.
        let per_block = page / MIN_FRAME_SIZE;
        let blocks = MAX_FRAMES / per_block + 1;
        let tiny_frames = RingGeometry {
            block_size: page,
            block_count: blocks,
            frame_size: MIN_FRAME_SIZE,
            frame_count: blocks * per_block,
        };
        assert!(tiny_frames.ring_bytes() <= MAX_RING_BYTES);
        let cases = [
            (
                RingGeometry {
                    block_size: 0,
                    ..good
                },
                GeometryError::BlockSize,
            ),
            (
                RingGeometry {
                    block_size: page + 8,
                    ..good
                },
                GeometryError::BlockSize,
            ),
            (
                RingGeometry {
                    frame_size: 12,
                    ..good
                },
                GeometryError::FrameSize,
            ),
            (
                RingGeometry {
                    frame_size: page / 2 + 4,
                    ..good
                },
                GeometryError::FrameSize,
            ),
            (
                RingGeometry {
                    frame_size: 2 * page,
                    ..good
                },
                GeometryError::FrameSize,
            ),
            (
                RingGeometry {
                    frame_count: 5,
                    ..good
                },
                GeometryError::FrameCount,
            ),
            (
                RingGeometry {
                    frame_count: 0,
                    block_count: 0,
                    ..good
                },
                GeometryError::FrameCount,
            ),
            (
                RingGeometry {
                    block_count: u32::MAX,
                    frame_count: u32::MAX,
                    ..good
                },
                GeometryError::TooLarge,
            ),
        ];
        for (g, want) in cases {
            assert_eq!(g.validate(), Err(want), "{g:?}");
        }
    }
}
