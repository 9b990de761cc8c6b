//! AF_XDP ports: one XSK socket on one queue of an interface, its UMEM, its four rings, and
//! the redirect program ([`crate::bpf`]) that steers the queue's frames into it.
//!
//! The UMEM is one anonymous mapping cut into [`Config::frame_size`] chunks. The first
//! [`Config::rx_frames`] chunks belong to the receive half: they cycle fill ring -> kernel ->
//! RX ring -> the worker (frames borrowed in place) -> fill ring at the next `recv`. The rest
//! belong to the transmit half: free list -> TX ring -> kernel -> completion ring -> free
//! list. Each half owns its chunks and its two rings, so the halves need no shared state but
//! the socket, the UMEM and the program, which an `Arc` keeps until both are dropped.
//!
//! Binding asks for zero-copy where the driver offers it and takes copy mode otherwise (veth
//! is copy-only); the program runs native where the driver has XDP (veth does) and generic
//! where it does not ([`Mode`]). The kernel receives into a chunk at its start plus the
//! UMEM headroom ([`Config::headroom`]) plus XDP_PACKET_HEADROOM (256 bytes); what the port
//! sends it writes after the UMEM headroom, room left for headers pushed in front.
//!
//! An XSK socket does not report POLLERR when its interface goes away (it is unbound and
//! polls as idle): a worker learns it from [`RxQueue::check`], which it calls now and then
//! while idle, or from `flush` (ENXIO).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use crate::bpf::{Link, Mode, Program, XskMap};
use crate::ring::Ring;
use crate::sys::{self, LinkProbe, Mmap};
use crate::{Counters, Kind, OpenError, Port, PortError, RxQueue, TxQueue};

/// Frames the kernel sends per sendto in copy mode (`TX_BATCH_SIZE` in net/xdp/xsk.c): a
/// bound on the kicks one flush needs.
const COPY_BATCH: u32 = 32;

/// The smallest UMEM chunk the kernel accepts (XDP_UMEM_MIN_CHUNK_SIZE).
const MIN_CHUNK: u32 = 2048;
/// What the kernel leaves free before a received frame, after the UMEM headroom.
const XDP_PACKET_HEADROOM: u32 = 256;
/// The smallest Ethernet frame with its FCS: a chunk must hold at least that after the
/// headrooms.
const MIN_FRAME: u32 = 64;

/// Where the UMEM's rings are mapped on the socket (libc has them as `u64`, mmap takes
/// `off_t`).
const FILL_PGOFF: i64 = libc::XDP_UMEM_PGOFF_FILL_RING as i64;
const COMPLETION_PGOFF: i64 = libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64;

/// A port's UMEM and ring sizes, queue and modes.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bytes per UMEM chunk, a power of two from 2048 to the page size: one frame each.
    pub frame_size: u32,
    /// Chunks for receiving; also the fill and RX rings' size, a power of two, so the fill
    /// ring always has room for every chunk given back.
    pub rx_frames: u32,
    /// Chunks for transmitting; also the TX and completion rings' size, a power of two.
    pub tx_frames: u32,
    /// Bytes the kernel leaves free at the start of each chunk, before its own
    /// XDP_PACKET_HEADROOM on receive.
    pub headroom: u32,
    /// The interface's queue to bind; frames of other queues go on to the kernel's stack.
    pub queue: u32,
    /// Slots of the XSKMAP: queues `0..queues` may have sockets.
    pub queues: u32,
    pub mode: Mode,
    /// Insist on zero-copy (`Some(true)`) or copy (`Some(false)`); `None` takes zero-copy
    /// where offered.
    pub zerocopy: Option<bool>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            frame_size: 2048,
            rx_frames: 2048,
            tx_frames: 2048,
            headroom: 0,
            queue: 0,
            queues: 64,
            mode: Mode::Auto,
            zerocopy: None,
        }
    }
}

/// What both halves hold: dropped in field order, the program first so that no frame is
/// steered to a socket being closed, the UMEM last.
struct Shared {
    _link: Link,
    _prog: Program,
    _map: XskMap,
    fd: OwnedFd,
    umem: Mmap,
    probe: LinkProbe,
    zerocopy: bool,
}

impl Shared {
    /// The socket's drop and error counts since it opened (XDP_STATISTICS).
    fn statistics(&self) -> Option<libc::xdp_statistics> {
        sys::getsockopt(self.fd.as_fd(), libc::SOL_XDP, libc::XDP_STATISTICS).ok()
    }
}

/// Opens an AF_XDP port on queue `config.queue` of interface `dev` in the calling thread's
/// network namespace.
pub fn open(dev: &str, config: &Config) -> Result<Port, OpenError> {
    let ifindex = sys::ifindex(dev)?;
    let step = |step, e| OpenError::step(step, e, dev);
    let c = config;
    let page = sys::page_size();
    if !c.frame_size.is_power_of_two()
        || c.frame_size < MIN_CHUNK
        || c.frame_size > page
        || !c.rx_frames.is_power_of_two()
        || !c.tx_frames.is_power_of_two()
        || c.queue >= c.queues
        || c.headroom + XDP_PACKET_HEADROOM + MIN_FRAME > c.frame_size
    {
        return Err(step(
            "AF_XDP configuration",
            std::io::Error::from_raw_os_error(libc::EINVAL),
        ));
    }
    let frames = (c.rx_frames + c.tx_frames) as usize;
    let umem = Mmap::anonymous(frames * c.frame_size as usize).map_err(|e| step("UMEM", e))?;
    let fd = sys::socket(libc::AF_XDP, libc::SOCK_RAW, 0).map_err(|e| step("socket", e))?;
    let f = fd.as_fd();
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr() as u64,
        len: umem.len() as u64,
        chunk_size: c.frame_size,
        headroom: c.headroom,
        flags: 0,
        tx_metadata_len: 0,
    };
    let opt =
        |name, v: &u32, what| sys::setsockopt(f, libc::SOL_XDP, name, v).map_err(|e| step(what, e));
    sys::setsockopt(f, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
        .map_err(|e| step("XDP_UMEM_REG", e))?;
    opt(libc::XDP_UMEM_FILL_RING, &c.rx_frames, "XDP_UMEM_FILL_RING")?;
    opt(
        libc::XDP_UMEM_COMPLETION_RING,
        &c.tx_frames,
        "XDP_UMEM_COMPLETION_RING",
    )?;
    opt(libc::XDP_RX_RING, &c.rx_frames, "XDP_RX_RING")?;
    opt(libc::XDP_TX_RING, &c.tx_frames, "XDP_TX_RING")?;
    let off = sys::getsockopt::<libc::xdp_mmap_offsets>(f, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS)
        .map_err(|e| step("XDP_MMAP_OFFSETS", e))?;
    let mut fill = MappedRing::<u64>::new(f, &off.fr, c.rx_frames, FILL_PGOFF, true)
        .map_err(|e| step("mmap fill ring", e))?;
    let comp = MappedRing::<u64>::new(f, &off.cr, c.tx_frames, COMPLETION_PGOFF, false)
        .map_err(|e| step("mmap completion ring", e))?;
    let rx =
        MappedRing::<libc::xdp_desc>::new(f, &off.rx, c.rx_frames, libc::XDP_PGOFF_RX_RING, false)
            .map_err(|e| step("mmap RX ring", e))?;
    let tx =
        MappedRing::<libc::xdp_desc>::new(f, &off.tx, c.tx_frames, libc::XDP_PGOFF_TX_RING, true)
            .map_err(|e| step("mmap TX ring", e))?;
    // Every receive chunk starts on the fill ring, for the kernel to fill.
    let fs = u64::from(c.frame_size);
    for i in 0..u64::from(c.rx_frames) {
        fill.ring.push(i * fs);
    }
    fill.ring.submit();
    let mut sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: libc::XDP_USE_NEED_WAKEUP,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: c.queue,
        sxdp_shared_umem_fd: 0,
    };
    match c.zerocopy {
        Some(true) => sxdp.sxdp_flags |= libc::XDP_ZEROCOPY,
        Some(false) => sxdp.sxdp_flags |= libc::XDP_COPY,
        None => {}
    }
    // SAFETY: the pointer and length describe `sxdp`, which outlives the call.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sxdp as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(step("bind", std::io::Error::last_os_error()));
    }
    let zerocopy = sys::getsockopt::<libc::xdp_options>(f, libc::SOL_XDP, libc::XDP_OPTIONS)
        .map(|o| o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
        .map_err(|e| step("XDP_OPTIONS", e))?;
    let map = XskMap::new(c.queues).map_err(|e| step("BPF_MAP_CREATE", e))?;
    map.insert(c.queue, &fd)
        .map_err(|e| step("BPF_MAP_UPDATE_ELEM", e))?;
    let prog = Program::load(&map).map_err(|e| step("BPF_PROG_LOAD", e))?;
    let link = Link::attach(&prog, ifindex, c.mode).map_err(|e| step("BPF_LINK_CREATE", e))?;
    let probe = LinkProbe::new(ifindex).map_err(|e| step("socket", e))?;
    let detail = match (zerocopy, link.native) {
        (true, true) => "zero-copy, native XDP",
        (true, false) => "zero-copy, generic XDP",
        (false, true) => "copy, native XDP",
        (false, false) => "copy, generic XDP",
    };
    let shared = Arc::new(Shared {
        _link: link,
        _prog: prog,
        _map: map,
        fd,
        umem,
        probe,
        zerocopy,
    });
    let rx_half = XdpRx {
        fill,
        rx,
        held: Vec::with_capacity(c.rx_frames as usize),
        frame_mask: !(fs - 1),
        shared: shared.clone(),
        counters: Counters::default(),
    };
    let tx_half = XdpTx {
        tx,
        comp,
        free: (u64::from(c.rx_frames)..u64::from(c.rx_frames + c.tx_frames))
            .map(|i| i * fs)
            .collect(),
        frame_mask: !(fs - 1),
        room: c.frame_size as usize - c.headroom as usize,
        headroom: u64::from(c.headroom),
        pending: 0,
        size: c.tx_frames,
        shared,
        counters: Counters::default(),
        invalid: 0,
    };
    Ok(Port {
        dev: dev.to_owned(),
        ifindex,
        kind: Kind::AfXdp,
        detail,
        rx: Box::new(rx_half),
        tx: Box::new(tx_half),
    })
}

/// A ring and the mapping it lives in, which outlives it (fields drop in order).
struct MappedRing<T> {
    ring: Ring<T>,
    _map: Mmap,
}

impl<T: Copy> MappedRing<T> {
    /// Maps the ring of `n` entries that the kernel offers at `pgoff` of the socket, where
    /// `o` (from XDP_MMAP_OFFSETS) places its indices, flags and descriptors.
    fn new(
        fd: BorrowedFd<'_>,
        o: &libc::xdp_ring_offset,
        n: u32,
        pgoff: i64,
        producer: bool,
    ) -> std::io::Result<MappedRing<T>> {
        let len = o.desc as usize + n as usize * size_of::<T>();
        let map = Mmap::shared(fd, len, pgoff)?;
        let at = |x: u64| map.ptr().wrapping_add(x as usize);
        // SAFETY: the kernel's offsets place the indices, the flags and `n` descriptors inside
        // this mapping of `len` bytes, aligned; `n` is a power of two (checked by `open`);
        // the mapping is stored beside the ring and dropped after it; only this ring's owner
        // writes it from user space.
        let ring = unsafe {
            Ring::new(
                at(o.producer).cast(),
                at(o.consumer).cast(),
                at(o.flags).cast(),
                at(o.desc).cast(),
                n,
                producer,
            )
        };
        Ok(MappedRing { ring, _map: map })
    }
}

/// The receive half: fill and RX rings and the chunks handed out.
struct XdpRx {
    fill: MappedRing<u64>,
    rx: MappedRing<libc::xdp_desc>,
    /// Chunks of the last batch, to give back to the fill ring.
    held: Vec<u64>,
    frame_mask: u64,
    shared: Arc<Shared>,
    counters: Counters,
}

impl RxQueue for XdpRx {
    fn recv<'a>(&'a mut self, frames: &mut [&'a [u8]]) -> Result<usize, PortError> {
        self.release();
        let want = u32::try_from(frames.len()).unwrap_or(u32::MAX);
        let n = self.rx.ring.available(want).min(want) as usize;
        let umem = &self.shared.umem;
        let mut out = 0;
        for _ in 0..n {
            let d = self.rx.ring.pop();
            self.held.push(d.addr & self.frame_mask);
            let (start, len) = (d.addr as usize, d.len as usize);
            if start + len > umem.len() {
                self.counters.errors += 1;
                continue;
            }
            // SAFETY: `start..start + len` is inside the UMEM, in a chunk the kernel handed
            // over on the RX ring; the chunk returns to the fill ring only at the next
            // `recv`/`release`, after the borrow `'a` ends; chunks are disjoint.
            frames[out] = unsafe { std::slice::from_raw_parts(umem.ptr().add(start), len) };
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += len as u64;
            out += 1;
        }
        if n > 0 {
            self.rx.ring.release();
        }
        Ok(out)
    }

    fn release(&mut self) {
        if self.held.is_empty() {
            return;
        }
        // The fill ring has a slot for every receive chunk, so there is room for these.
        let room = self.fill.ring.free(self.held.len() as u32) as usize;
        debug_assert!(room >= self.held.len());
        for &a in self.held.iter().take(room) {
            self.fill.ring.push(a);
        }
        self.held.clear();
        self.fill.ring.submit();
        if self.fill.ring.needs_wakeup() {
            // SAFETY: a zero-length non-blocking recvfrom reads nothing into user memory; it
            // only wakes the driver to take the fill ring's chunks.
            unsafe {
                libc::recvfrom(
                    self.shared.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }

    fn check(&mut self) -> Result<(), PortError> {
        let pending = sys::take_error(self.shared.fd.as_fd());
        self.shared.probe.state()?;
        // The socket reports ENETDOWN only when unbound by the interface's removal.
        pending.map_err(|e| {
            if e == PortError::Down {
                PortError::Gone
            } else {
                e
            }
        })
    }

    fn mtu(&self) -> Option<u32> {
        self.shared.probe.mtu()
    }

    fn counters(&mut self) -> Counters {
        if let Some(s) = self.shared.statistics() {
            self.counters.rx_ring_drops = s.rx_dropped + s.rx_ring_full;
        }
        self.counters
    }
}

/// The transmit half: TX and completion rings and the free chunks.
struct XdpTx {
    tx: MappedRing<libc::xdp_desc>,
    comp: MappedRing<u64>,
    /// Chunk addresses not in the kernel's hands.
    free: Vec<u64>,
    frame_mask: u64,
    /// Bytes a frame may have: the chunk less the headroom.
    room: usize,
    headroom: u64,
    /// Descriptors pushed and not yet submitted.
    pending: u32,
    /// The TX ring's size.
    size: u32,
    shared: Arc<Shared>,
    counters: Counters,
    /// Descriptors the kernel found invalid (XDP_STATISTICS), part of `errors`.
    invalid: u64,
}

impl XdpTx {
    /// Takes back the chunks the kernel has sent.
    fn reclaim(&mut self) {
        let n = self.comp.ring.available(u32::MAX);
        for _ in 0..n {
            let a = self.comp.ring.pop();
            self.free.push(a & self.frame_mask);
        }
        if n > 0 {
            self.comp.ring.release();
        }
    }
}

impl TxQueue for XdpTx {
    fn send(&mut self, frame: &[u8]) -> Result<(), PortError> {
        if frame.len() > self.room {
            self.counters.errors += 1;
            return Err(PortError::TooBig);
        }
        if self.free.is_empty() {
            self.reclaim();
            if self.free.is_empty() && self.pending > 0 {
                self.flush()?;
                self.reclaim();
            }
        }
        let (Some(&chunk), true) = (self.free.last(), self.tx.ring.free(1) > 0) else {
            self.counters.tx_full += 1;
            return Err(PortError::Full);
        };
        self.free.pop();
        let addr = chunk + self.headroom;
        // SAFETY: the chunk is free (not in any ring), inside the UMEM, and the frame fits
        // after the headroom (checked above); no borrow of this chunk exists.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.shared.umem.ptr().add(addr as usize),
                frame.len(),
            );
        }
        self.tx.ring.push(libc::xdp_desc {
            addr,
            len: frame.len() as u32,
            options: 0,
        });
        self.pending += 1;
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += frame.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if self.pending > 0 {
            self.tx.ring.submit();
            self.pending = 0;
        }
        let mut r = Ok(());
        if !self.shared.zerocopy {
            // Copy mode sends only from sendto, at most a batch (32 frames) per call: kick
            // until the ring is empty or the device pushes back.
            for _ in 0..=self.size / COPY_BATCH {
                if self.tx.ring.free(self.size) == self.size {
                    break;
                }
                match sys::kick(self.shared.fd.as_fd()) {
                    Ok(true) => {}
                    Ok(false) if self.tx.ring.free(self.size) < self.size => {}
                    Ok(false) => break,
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
        } else if self.tx.ring.needs_wakeup() {
            r = sys::kick(self.shared.fd.as_fd()).map(drop);
        }
        self.reclaim();
        r.inspect_err(|_| self.counters.errors += 1)
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }

    fn counters(&mut self) -> Counters {
        if let Some(s) = self.shared.statistics() {
            self.invalid = s.tx_invalid_descs;
        }
        let mut c = self.counters;
        c.errors += self.invalid;
        c
    }
}
