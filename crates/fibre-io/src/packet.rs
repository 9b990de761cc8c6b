//! AF_PACKET ports: one socket receives through a TPACKET_V3 ring, another transmits through a
//! TPACKET_V2 ring.
//!
//! Receive: the kernel fills fixed-size blocks with variable-size frames and hands a block to
//! user space when it is full or when the retire timeout ([`Config::retire_ms`]) passes, by
//! setting the block's status to TP_STATUS_USER; the port reads frames in place and gives the
//! block back (TP_STATUS_KERNEL) once every frame of it has been handed out and the batch is
//! over. PACKET_IGNORE_OUTGOING keeps the frames this host sends on the interface (the
//! transmit socket's among them) out of the ring. With [`Config::fanout`], sockets of several
//! workers that name the same group share the interface's traffic by flow hash.
//!
//! Transmit: a separate socket bound with protocol 0, so it receives nothing and its ring is
//! transmit-only; fixed slots, each a `tpacket2_hdr` and the frame, marked
//! TP_STATUS_SEND_REQUEST and sent by a zero-length `sendto` (the kick). PACKET_QDISC_BYPASS
//! sends straight to the driver, as a router's forwarded frames need no local queueing
//! discipline. Two sockets rather than one with both rings keep the halves independent: a
//! worker may own either without the other.
//!
//! A frame the sender left with CHECKSUM_PARTIAL (TP_STATUS_CSUMNOTREADY, what a veth peer
//! with checksum offload sends) has its transport checksum completed in the ring before it is
//! handed out ([`crate::csum`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys::{self, LinkProbe, Mmap};
use crate::{csum, Counters, Kind, OpenError, Port, PortError, RxQueue, TxQueue};

/// ETH_P_ALL: every protocol, what a router's receive socket must see.
const ETH_P_ALL: u16 = 0x0003;

/// PACKET_VERSION values (`enum tpacket_versions`).
const TPACKET_V2: i32 = 1;
const TPACKET_V3: i32 = 2;

/// Offsets in a V3 block descriptor (`struct tpacket_block_desc`, its `tpacket_hdr_v1` at 8).
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;

/// Where a V2 transmit slot's frame starts: the header rounded up to TPACKET_ALIGNMENT, as the
/// kernel expects without PACKET_TX_HAS_OFF.
const TX_DATA: usize = (size_of::<libc::tpacket2_hdr>() + libc::TPACKET_ALIGNMENT - 1)
    & !(libc::TPACKET_ALIGNMENT - 1);

/// A port's ring geometry and options.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bytes per receive block: a multiple of the page size. 64 KiB holds about 40 full-size
    /// frames, so a block fills in tens of microseconds under load.
    pub block_size: u32,
    /// Receive blocks: with `block_size`, how much the kernel can queue while a worker is
    /// busy (2 MiB by default: about 1300 full-size or 14000 minimum-size frames, each with
    /// its 80-byte header).
    pub block_count: u32,
    /// How long a block that is not full waits before the kernel hands it over, in
    /// milliseconds: the latency bound at low rates. 1 ms is the least one can ask (0 means
    /// the kernel's default, several milliseconds).
    pub retire_ms: u32,
    /// Bytes per transmit slot, a power of two: the largest frame the port sends is this less
    /// the slot header (32 bytes).
    pub tx_slot_size: u32,
    /// Transmit slots: more than a vector (256 frames), so a worker's vector never fills the
    /// ring on its own.
    pub tx_slots: u32,
    /// Join this PACKET_FANOUT group (hash mode): one socket per worker on the same
    /// interface, each receiving whole flows.
    pub fanout: Option<u16>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            block_size: 1 << 16,
            block_count: 32,
            retire_ms: 1,
            tx_slot_size: 2048,
            tx_slots: 512,
            fanout: None,
        }
    }
}

/// Opens an AF_PACKET port on interface `dev` of the calling thread's network namespace.
pub fn open(dev: &str, config: &Config) -> Result<Port, OpenError> {
    let ifindex = sys::ifindex(dev)?;
    let step = |step, e| OpenError::step(step, e, dev);
    let rx = PacketRx::open(ifindex, config).map_err(|(s, e)| step(s, e))?;
    let tx = PacketTx::open(ifindex, config).map_err(|(s, e)| step(s, e))?;
    Ok(Port {
        dev: dev.to_owned(),
        ifindex,
        kind: Kind::AfPacket,
        detail: "TPACKET_V3 receive, TPACKET_V2 transmit",
        rx: Box::new(rx),
        tx: Box::new(tx),
    })
}

/// Opens the transmit half alone on interface `dev`: a worker's way out through an interface
/// whose frames another worker receives (through any kind of port).
pub fn open_tx(dev: &str, config: &Config) -> Result<Box<dyn TxQueue>, OpenError> {
    let ifindex = sys::ifindex(dev)?;
    let tx = PacketTx::open(ifindex, config).map_err(|(s, e)| OpenError::step(s, e, dev))?;
    Ok(Box::new(tx))
}

type Step<T> = Result<T, (&'static str, std::io::Error)>;

fn at<T>(step: &'static str, r: std::io::Result<T>) -> Step<T> {
    r.map_err(|e| (step, e))
}

fn invalid(what: &'static str) -> (&'static str, std::io::Error) {
    (what, std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// The receive half: the V3 ring and where reading is in it.
///
/// Fields drop in order: the mapping goes before the socket that owns the ring.
struct PacketRx {
    ring: Mmap,
    fd: OwnedFd,
    probe: LinkProbe,
    block_size: usize,
    blocks: usize,
    /// The block being read.
    block: usize,
    /// Frames of `block` not read yet; 0 when it is not opened.
    left: u32,
    /// Offset in `block` of the next frame.
    offset: usize,
    /// Blocks read to the end, just before `block`, not given back yet.
    held: usize,
    counters: Counters,
}

impl PacketRx {
    fn open(ifindex: u32, c: &Config) -> Step<PacketRx> {
        if c.block_size == 0 || c.block_size % sys::page_size() != 0 || c.block_count == 0 {
            return Err(invalid("receive ring geometry"));
        }
        // Protocol 0 until the ring is set up, so nothing is queued outside it.
        let fd = at("socket", sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0))?;
        let f = fd.as_fd();
        at(
            "PACKET_VERSION",
            sys::setsockopt(f, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3),
        )?;
        // V3 packs frames by their size; frame_size only has to divide the block.
        let frame_size = 2048.min(c.block_size);
        let req = libc::tpacket_req3 {
            tp_block_size: c.block_size,
            tp_block_nr: c.block_count,
            tp_frame_size: frame_size,
            tp_frame_nr: (c.block_size / frame_size) * c.block_count,
            tp_retire_blk_tov: c.retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        at(
            "PACKET_RX_RING",
            sys::setsockopt(f, libc::SOL_PACKET, libc::PACKET_RX_RING, &req),
        )?;
        at(
            "PACKET_IGNORE_OUTGOING",
            sys::setsockopt(f, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1i32),
        )?;
        let len = c.block_size as usize * c.block_count as usize;
        let ring = at("mmap", Mmap::shared(f, len, 0))?;
        at("bind", sys::bind_packet(f, ifindex, ETH_P_ALL))?;
        if let Some(group) = c.fanout {
            let arg = u32::from(group) | (libc::PACKET_FANOUT_HASH << 16);
            at(
                "PACKET_FANOUT",
                sys::setsockopt(f, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg),
            )?;
        }
        let probe = at("socket", LinkProbe::new(ifindex))?;
        Ok(PacketRx {
            ring,
            fd,
            probe,
            block_size: c.block_size as usize,
            blocks: c.block_count as usize,
            block: 0,
            left: 0,
            offset: 0,
            held: 0,
            counters: Counters::default(),
        })
    }

    fn block_base(&self, block: usize) -> *mut u8 {
        debug_assert!(block < self.blocks);
        // SAFETY: callers pass `block < blocks` (the read position and the held blocks, both
        // kept modulo `blocks`), so the offset stays inside the mapping.
        unsafe { self.ring.ptr().add(block * self.block_size) }
    }

    /// A `u32` of block `block`'s descriptor, as an atomic shared with the kernel.
    fn block_word(&self, block: usize, offset: usize) -> &AtomicU32 {
        // SAFETY: the descriptor's words are 4-aligned (blocks are page-aligned) and inside
        // the mapping, which lives as long as `self`.
        unsafe { AtomicU32::from_ptr(self.block_base(block).add(offset).cast()) }
    }

    /// Opens the next block if the kernel has handed it over.
    fn open_block(&mut self) -> bool {
        let status = self
            .block_word(self.block, BLOCK_STATUS)
            .load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return false;
        }
        let pkts = self
            .block_word(self.block, BLOCK_NUM_PKTS)
            .load(Ordering::Relaxed);
        let first = self
            .block_word(self.block, BLOCK_FIRST_PKT)
            .load(Ordering::Relaxed);
        self.left = pkts;
        self.offset = first as usize;
        if pkts == 0 {
            self.next_block();
        }
        true
    }

    /// Moves past the frame just read, to the next one in the block or the next block.
    fn advance(&mut self, next_offset: u32) {
        self.left -= 1;
        if self.left == 0 || next_offset == 0 {
            self.next_block();
        } else {
            self.offset += next_offset as usize;
        }
    }

    fn next_block(&mut self) {
        self.left = 0;
        self.held += 1;
        self.block = (self.block + 1) % self.blocks;
    }
}

impl RxQueue for PacketRx {
    fn recv<'a>(&'a mut self, frames: &mut [&'a [u8]]) -> Result<usize, PortError> {
        self.release();
        let mut n = 0;
        while n < frames.len() {
            if self.left == 0 {
                if self.held == self.blocks || !self.open_block() {
                    break;
                }
                continue;
            }
            let base = self.block_base(self.block);
            // A frame header the kernel wrote, read field by field: it may be unaligned for
            // a struct read only if the kernel broke its own layout, which is checked below.
            let hdr_end = self.offset + size_of::<libc::tpacket3_hdr>();
            if hdr_end > self.block_size {
                self.counters.errors += 1;
                self.next_block();
                continue;
            }
            // SAFETY: `offset..hdr_end` is inside this block, which the kernel handed over
            // (TP_STATUS_USER) and does not write until it is given back.
            let hdr = unsafe {
                base.add(self.offset)
                    .cast::<libc::tpacket3_hdr>()
                    .read_unaligned()
            };
            let start = self.offset + usize::from(hdr.tp_mac);
            let end = start + hdr.tp_snaplen as usize;
            if end > self.block_size {
                self.counters.errors += 1;
                self.next_block();
                continue;
            }
            self.advance(hdr.tp_next_offset);
            if hdr.tp_snaplen < hdr.tp_len {
                // Cut to fit a block (a 64 KiB GSO frame from a peer with segmentation
                // offload): no whole frame to forward.
                self.counters.errors += 1;
                continue;
            }
            // SAFETY: `start..end` is inside the handed-over block; each frame's bytes are
            // disjoint from every other's, and the slice lives no longer than `'a`, the
            // borrow of `self`: the block is given back only by the next `recv`/`release`.
            let frame: &'a mut [u8] =
                unsafe { std::slice::from_raw_parts_mut(base.add(start), end - start) };
            if hdr.tp_status & libc::TP_STATUS_CSUMNOTREADY != 0 && csum::complete(frame) {
                self.counters.rx_csum_completed += 1;
            }
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += frame.len() as u64;
            frames[n] = frame;
            n += 1;
        }
        Ok(n)
    }

    fn release(&mut self) {
        for i in 0..self.held {
            let b = (self.block + self.blocks - self.held + i) % self.blocks;
            self.block_word(b, BLOCK_STATUS)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        }
        self.held = 0;
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn check(&mut self) -> Result<(), PortError> {
        let pending = sys::take_error(self.fd.as_fd());
        self.probe.state()?;
        pending
    }

    fn mtu(&self) -> Option<u32> {
        self.probe.mtu()
    }

    fn counters(&mut self) -> Counters {
        // PACKET_STATISTICS resets the kernel's counts on each read: add them up here.
        if let Ok(s) = sys::getsockopt::<libc::tpacket_stats_v3>(
            self.fd.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
        ) {
            self.counters.rx_ring_drops += u64::from(s.tp_drops);
        }
        self.counters
    }
}

/// The transmit half: fixed slots, filled in order.
struct PacketTx {
    ring: Mmap,
    fd: OwnedFd,
    slot_size: usize,
    slots: usize,
    /// The next slot to fill.
    next: usize,
    /// Slots filled since the last kick.
    pending: usize,
    counters: Counters,
}

impl PacketTx {
    fn open(ifindex: u32, c: &Config) -> Step<PacketTx> {
        let slot = c.tx_slot_size;
        let block = sys::page_size().max(slot);
        if !slot.is_power_of_two() || (slot as usize) <= TX_DATA || c.tx_slots == 0 {
            return Err(invalid("transmit ring geometry"));
        }
        let per_block = block / slot;
        let blocks = c.tx_slots.div_ceil(per_block);
        let fd = at("socket", sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0))?;
        let f = fd.as_fd();
        at(
            "PACKET_VERSION",
            sys::setsockopt(f, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V2),
        )?;
        at(
            "PACKET_QDISC_BYPASS",
            sys::setsockopt(f, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32),
        )?;
        let req = libc::tpacket_req {
            tp_block_size: block,
            tp_block_nr: blocks,
            tp_frame_size: slot,
            tp_frame_nr: per_block * blocks,
        };
        at(
            "PACKET_TX_RING",
            sys::setsockopt(f, libc::SOL_PACKET, libc::PACKET_TX_RING, &req),
        )?;
        let ring = at("mmap", Mmap::shared(f, block as usize * blocks as usize, 0))?;
        at("bind", sys::bind_packet(f, ifindex, 0))?;
        Ok(PacketTx {
            ring,
            fd,
            slot_size: slot as usize,
            slots: (per_block * blocks) as usize,
            next: 0,
            pending: 0,
            counters: Counters::default(),
        })
    }

    fn slot(&self, i: usize) -> *mut u8 {
        debug_assert!((i + 1) * self.slot_size <= self.ring.len());
        // SAFETY: slots tile the mapping (the block size is a multiple of the slot size).
        unsafe { self.ring.ptr().add(i * self.slot_size) }
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the slot's first word, 4-aligned, inside the mapping that
        // lives as long as `self`.
        unsafe { AtomicU32::from_ptr(self.slot(i).cast()) }
    }

    /// Whether slot `i` may be filled; a slot the kernel refused is counted and reused.
    fn slot_free(&mut self, i: usize) -> bool {
        match self.status(i).load(Ordering::Acquire) {
            libc::TP_STATUS_AVAILABLE => true,
            libc::TP_STATUS_WRONG_FORMAT => {
                self.counters.errors += 1;
                true
            }
            _ => false,
        }
    }
}

impl TxQueue for PacketTx {
    fn send(&mut self, frame: &[u8]) -> Result<(), PortError> {
        if frame.len() > self.slot_size - TX_DATA {
            self.counters.errors += 1;
            return Err(PortError::TooBig);
        }
        let i = self.next;
        if !self.slot_free(i) {
            // The ring is full of frames not sent yet: send them and look again.
            if self.pending > 0 {
                self.flush()?;
            }
            if !self.slot_free(i) {
                self.counters.tx_full += 1;
                return Err(PortError::Full);
            }
        }
        let slot = self.slot(i);
        // SAFETY: the slot is available, so the kernel does not read it until its status says
        // SEND_REQUEST; the frame fits after the header (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(TX_DATA), frame.len());
            let hdr = slot.cast::<libc::tpacket2_hdr>();
            std::ptr::addr_of_mut!((*hdr).tp_len).write(frame.len() as u32);
            std::ptr::addr_of_mut!((*hdr).tp_snaplen).write(frame.len() as u32);
        }
        self.status(i)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.next = (i + 1) % self.slots;
        self.pending += 1;
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += frame.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if self.pending == 0 {
            return Ok(());
        }
        self.pending = 0;
        sys::kick(self.fd.as_fd())
            .map(drop)
            .inspect_err(|_| self.counters.errors += 1)
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn counters(&mut self) -> Counters {
        self.counters
    }
}
