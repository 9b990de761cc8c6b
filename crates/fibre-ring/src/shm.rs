//! The shared mapping: a sealed memfd holding a control page, the RX ring and the TX ring, and
//! the doorbells that wake a sleeping peer.
//!
//! Layout (offsets in bytes, `P` = page size):
//!
//! ```text
//! 0            control page: magic, version, both geometries (written once by the daemon),
//!              daemon "sleeping" word at 64, client "sleeping" word at 128 (own cache lines)
//! P            RX ring (daemon -> client), rx.ring_bytes()
//! P + rx       TX ring (client -> daemon), tx.ring_bytes()
//! ```
//!
//! The daemon creates the memfd, sizes it and seals it against shrinking and growing before it
//! hands it out, so a client cannot truncate the file under the daemon's mapping (which would
//! turn the daemon's next access into SIGBUS). The daemon never reads the control page's magic
//! or geometry back: it keeps its own private copy of the layout.
//!
//! Doorbells: a side that finds nothing to do sets its sleeping word, issues a SeqCst fence,
//! checks its rings once more, and only then waits on its eventfd. A side that publishes or
//! frees frames issues a SeqCst fence, then reads the peer's sleeping word and, if set, clears
//! it and signals the peer's eventfd; within a burst it does so every few frames and always
//! before it may sleep itself. The two fences make it impossible for both sides to miss
//! each other (the sleeper sees the new frame, or the waker sees the sleeping word), so no
//! wake-up is lost and no side spins. A hostile peer can only set or clear words that govern its
//! own wake-ups, costing the daemon at most one eventfd write per batch.

use crate::geometry::{page_size, RingGeometry};
use crate::sys;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;

pub(crate) const MAGIC: u32 = u32::from_be_bytes(*b"FRNG");
pub(crate) const VERSION: u32 = 1;
const DAEMON_SLEEPING_OFFSET: usize = 64;
/// Frames published or freed between two checks of the peer's sleeping word inside a burst:
/// the peer starts on the first frames while the rest are written, and a peer that consumes
/// faster than we produce is woken once per 32 frames instead of once per frame.
const WAKE_BATCH: u32 = 32;
const CLIENT_SLEEPING_OFFSET: usize = 128;

/// Where everything lives in the mapping; computed from validated geometries only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub rx: RingGeometry,
    pub tx: RingGeometry,
}

impl Layout {
    pub fn control_len() -> usize {
        page_size() as usize
    }
    pub fn rx_offset(&self) -> usize {
        Self::control_len()
    }
    pub fn tx_offset(&self) -> usize {
        self.rx_offset() + self.rx.ring_bytes() as usize
    }
    pub fn total_len(&self) -> usize {
        self.tx_offset() + self.tx.ring_bytes() as usize
    }
}

/// An mmap of the memfd, unmapped on drop. Shared by the rings through `Arc` so a frame a
/// client keeps can outlive the borrow of its client.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; every access to it goes through atomics or raw-pointer
// copies whose exclusion is provided by the frame protocol, never through Rust references to
// non-atomic data that another thread could alias.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Creates, sizes and seals a memfd for `layout` and maps it. Returns the descriptor to send
    /// to the client and the daemon's mapping.
    pub fn create(layout: &Layout) -> io::Result<(OwnedFd, Arc<Mapping>)> {
        let len = layout.total_len();
        // SAFETY: the name is a NUL-terminated literal; memfd_create returns a new descriptor.
        let raw = unsafe {
            libc::memfd_create(
                c"fibre-ring".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a new descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate/fcntl on a live descriptor with integer arguments.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let map = Self::map_fd(fd.as_fd(), len)?;
        let control = map.ptr.as_ptr();
        // SAFETY: the control page is inside the fresh mapping, page-aligned, and nobody else
        // has the file yet; the words are 4-byte aligned.
        unsafe {
            let words = control.cast::<u32>();
            words.write(MAGIC);
            words.add(1).write(VERSION);
            for (i, w) in layout
                .rx
                .to_words()
                .into_iter()
                .chain(layout.tx.to_words())
                .enumerate()
            {
                words.add(2 + i).write(w);
            }
        }
        Ok((fd, Arc::new(map)))
    }

    /// Maps a memfd received from the daemon after checking that the file is exactly as large
    /// as `layout` says and sealed against shrinking, and that the control page agrees with the
    /// layout the daemon announced.
    pub fn open(fd: BorrowedFd<'_>, layout: &Layout) -> io::Result<Arc<Mapping>> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        // SAFETY: stat is plain old data, fstat writes it fully on success.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: st is valid for writes; fd is live.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if st.st_size as u64 != layout.total_len() as u64 {
            return Err(invalid("ring file size does not match its geometry"));
        }
        // SAFETY: fcntl with integer arguments on a live descriptor.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return Err(invalid("ring file is not sealed against shrinking"));
        }
        let map = Self::map_fd(fd, layout.total_len())?;
        let mut words = [0u32; 10];
        // SAFETY: the first 40 bytes of the page-aligned control page are inside the mapping;
        // they are written once by the daemon before the descriptor was sent.
        unsafe {
            std::ptr::copy_nonoverlapping(
                map.ptr.as_ptr().cast::<u32>(),
                words.as_mut_ptr(),
                words.len(),
            );
        }
        let rx = RingGeometry::from_words([words[2], words[3], words[4], words[5]]);
        let tx = RingGeometry::from_words([words[6], words[7], words[8], words[9]]);
        if words[0] != MAGIC || words[1] != VERSION || rx != layout.rx || tx != layout.tx {
            return Err(invalid(
                "ring control page does not match the announced geometry",
            ));
        }
        Ok(Arc::new(map))
    }

    fn map_fd(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh shared mapping of a file we checked/sized to len bytes; the kernel
        // picks the address.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?,
            len,
        })
    }

    pub fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// A 4-byte-aligned word of the control page, as an atomic.
    fn control_word(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset % 4 == 0 && offset + 4 <= Layout::control_len());
        // SAFETY: offset is a fixed in-page constant, 4-byte aligned on a page-aligned mapping
        // that lives as long as &self; AtomicU32 tolerates concurrent writes by the peer.
        unsafe { &*self.ptr.as_ptr().add(offset).cast::<AtomicU32>() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping we created and nobody uses after drop (every user
        // holds an Arc to it).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Which side of the connection a doorbell pair serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Daemon,
    Client,
}

/// One side's doorbells: its own sleeping word and eventfd (to wait on), and the peer's
/// sleeping word and eventfd (to ring).
pub(crate) struct Doorbells {
    map: Arc<Mapping>,
    own_offset: usize,
    peer_offset: usize,
    own: OwnedFd,
    peer: OwnedFd,
    /// Frames published or freed since the peer was last rung.
    unrung: AtomicU32,
}

impl Doorbells {
    pub fn new(
        map: Arc<Mapping>,
        side: Side,
        daemon_efd: OwnedFd,
        client_efd: OwnedFd,
    ) -> Doorbells {
        let (own_offset, peer_offset, own, peer) = match side {
            Side::Daemon => (
                DAEMON_SLEEPING_OFFSET,
                CLIENT_SLEEPING_OFFSET,
                daemon_efd,
                client_efd,
            ),
            Side::Client => (
                CLIENT_SLEEPING_OFFSET,
                DAEMON_SLEEPING_OFFSET,
                client_efd,
                daemon_efd,
            ),
        };
        Doorbells {
            map,
            own_offset,
            peer_offset,
            own,
            peer,
            unrung: AtomicU32::new(0),
        }
    }

    /// The eventfd this side waits on.
    pub fn wait_fd(&self) -> BorrowedFd<'_> {
        self.own.as_fd()
    }

    /// Announces that this side is about to sleep. The caller must look at its rings once more
    /// after this and sleep only if there is still nothing to do.
    pub fn arm(&self) {
        self.map
            .control_word(self.own_offset)
            .store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// This side is awake again: clear the word and the eventfd's counter.
    pub fn disarm(&self) {
        self.map
            .control_word(self.own_offset)
            .store(0, Ordering::Relaxed);
        sys::eventfd_drain(self.own.as_fd());
    }

    /// Records one frame published or freed; rings the peer every [`WAKE_BATCH`] of them.
    /// Every path that can sleep calls [`Doorbells::flush`] first, so no deferred ring is lost.
    pub fn note(&self) {
        if self.unrung.fetch_add(1, Ordering::Relaxed) + 1 >= WAKE_BATCH {
            self.flush();
        }
    }

    /// Rings the peer if frames were noted since the last ring.
    pub fn flush(&self) {
        if self.unrung.swap(0, Ordering::Relaxed) != 0 {
            self.ring_peer();
        }
    }

    /// Called after publishing or freeing frames: wakes the peer if it sleeps.
    pub fn ring_peer(&self) {
        fence(Ordering::SeqCst);
        let word = self.map.control_word(self.peer_offset);
        if word.load(Ordering::Relaxed) != 0 && word.swap(0, Ordering::AcqRel) != 0 {
            sys::eventfd_signal(self.peer.as_fd());
        }
    }
}
