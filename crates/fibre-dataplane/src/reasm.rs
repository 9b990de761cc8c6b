//! Reassembly of IPv4 fragments addressed to the router, as the kernel's `ip_defrag` does
//! before local delivery (`ip_frag_queue`, `inet_frag_queue_insert`, `ip_frag_reasm`,
//! `ip_expire`), in storage allocated once.
//!
//! The kernel's rules kept: fragments are queued by (source, destination, ID, protocol);
//! every fragment but the last carries a multiple of 8 bytes (a longer one is cut to it); a
//! fragment entirely inside bytes already queued is a duplicate and dropped alone, any other
//! overlap drops the whole queue (RFC 5722's rule, which Linux applies to IPv4 too); a last
//! fragment that disagrees with the length already known, an empty fragment, or a packet
//! beyond 65,535 bytes drops the queue. The packet is whole when its first and last
//! fragments and every byte between have come: it gets the first fragment's header (options
//! included) with the total length set, the fragment fields cleared (DF kept when a fragment
//! had it) and the checksum recomputed. A queue not whole after `ipfrag_time` (30 s) expires;
//! when its first fragment had come the router answers "fragment reassembly time exceeded",
//! quoting that fragment.
//!
//! Bounds, each a drop counted as `FRAG_REASM_FAILED` where the kernel's are memory limits
//! (`ipfrag_high_thresh` 4 MiB): [`MAX_QUEUES`] packets in reassembly at once, each in one
//! large buffer of the pool, and [`MAX_FRAGMENTS`] fragments per packet.

use core::net::Ipv4Addr;

use fibre_fib::hash::KeyedMap;
use fibre_packet::{Buf, Pool};
use fibre_wire::{ethernet, ipv4};

use crate::drop::DropReason;

/// Packets being reassembled at once.
pub const MAX_QUEUES: usize = 64;
/// Fragments one packet may come in.
pub const MAX_FRAGMENTS: usize = 64;
/// `net.ipv4.ipfrag_time`: how long a packet may take to arrive whole.
pub const IPFRAG_TIME_NS: u64 = 30_000_000_000;

/// The largest IPv4 header.
const MAX_HEADER: usize = 60;
/// Where payload byte 0 goes in a queue's buffer: after room for a link-layer header and the
/// largest IPv4 header, so that the whole packet can be laid out in front of it at the end.
const PAYLOAD_AT: usize = ethernet::HEADER_LEN + MAX_HEADER;
/// The largest IPv4 packet.
const MAX_PACKET: usize = 65_535;

type Key = (Ipv4Addr, Ipv4Addr, u16, u8);

/// What a fragment came to.
#[derive(Debug)]
pub enum Added {
    /// Queued; the packet is not whole yet.
    Queued,
    /// The packet is whole: its buffer holds a link-layer header's room (14 bytes, the first
    /// fragment's Ethernet header) then the packet.
    Whole(Buf),
    /// The fragment (and for some reasons its whole queue) was dropped.
    Dropped(DropReason),
}

#[derive(Debug)]
struct Queue {
    key: Key,
    buf: Option<Buf>,
    /// Byte ranges of payload received, as (start, end), in arrival order.
    ranges: [(u32, u32); MAX_FRAGMENTS],
    count: usize,
    /// The payload's length once the last fragment came, else the highest end seen.
    len: u32,
    last_in: bool,
    /// The first fragment's header length, once it came (its header is in the buffer, right
    /// before the payload).
    first_header: Option<usize>,
    df: bool,
    expires: u64,
    /// The link the first fragment came in on, which an expiry error answers from.
    iif: u32,
}

/// One worker's packets in reassembly.
#[derive(Debug)]
pub struct Reassembly {
    index: KeyedMap<Key, usize>,
    queues: Vec<Queue>,
    free: Vec<usize>,
}

impl Default for Reassembly {
    fn default() -> Self {
        let mut index = KeyedMap::default();
        index.reserve(MAX_QUEUES);
        Reassembly {
            index,
            queues: Vec::with_capacity(MAX_QUEUES),
            free: Vec::with_capacity(MAX_QUEUES),
        }
    }
}

impl Reassembly {
    /// Queues the fragment `frame` (a received frame whose IPv4 header starts at `l3`, trimmed
    /// to the packet), which came in on `iif` at `now`.
    pub fn add(&mut self, pool: &mut Pool, now: u64, iif: u32, frame: &[u8], l3: usize) -> Added {
        let Some(Ok(p)) = frame.get(l3..).map(ipv4::Packet::new_checked) else {
            return Added::Dropped(DropReason::IpInhdr);
        };
        let key = (p.src_addr(), p.dst_addr(), p.ident(), p.protocol());
        let hlen = p.header_len();
        let offset = u32::from(p.frag_offset()) * 8;
        let payload = &frame[l3 + hlen..l3 + usize::from(p.total_len())];
        let mut end = offset + payload.len() as u32;
        let q = match self.index.get(&key) {
            Some(&q) => q,
            None => match self.open(pool, key, now, iif) {
                Some(q) => q,
                None => return Added::Dropped(DropReason::FragReasmFailed),
            },
        };
        let queue = &mut self.queues[q];
        if !p.more_frags() {
            if end < queue.len || (queue.last_in && end != queue.len) {
                return self.kill(pool, q, DropReason::FragReasmFailed);
            }
            queue.last_in = true;
            queue.len = end;
        } else {
            end &= !7;
            if end > queue.len {
                if queue.last_in {
                    return self.kill(pool, q, DropReason::FragReasmFailed);
                }
                queue.len = end;
            }
        }
        if end == offset || hlen + end as usize > MAX_PACKET {
            return self.kill(pool, q, DropReason::FragReasmFailed);
        }
        let queue = &mut self.queues[q];
        let covered = queue.ranges[..queue.count]
            .iter()
            .any(|&(s, e)| s <= offset && end <= e);
        if covered {
            return Added::Dropped(DropReason::DupFrag);
        }
        let overlaps = queue.ranges[..queue.count]
            .iter()
            .any(|&(s, e)| offset < e && s < end);
        if overlaps || queue.count == MAX_FRAGMENTS {
            return self.kill(pool, q, DropReason::FragReasmFailed);
        }
        queue.ranges[queue.count] = (offset, end);
        queue.count += 1;
        queue.df |= p.dont_frag();
        let Some(buf) = queue.buf.as_ref() else {
            return self.kill(pool, q, DropReason::Nomem);
        };
        let data = buf.data_mut(pool);
        let at = PAYLOAD_AT + offset as usize;
        data[at..at + (end - offset) as usize].copy_from_slice(&payload[..(end - offset) as usize]);
        if offset == 0 {
            data[PAYLOAD_AT - hlen..PAYLOAD_AT].copy_from_slice(&frame[l3..l3 + hlen]);
            data[..ethernet::HEADER_LEN].copy_from_slice(&frame[..ethernet::HEADER_LEN]);
            queue.first_header = Some(hlen);
            queue.iif = iif;
        }
        let meat: u32 = queue.ranges[..queue.count].iter().map(|(s, e)| e - s).sum();
        match queue.first_header {
            Some(hlen) if queue.last_in && meat == queue.len => self.finish(pool, q, hlen),
            _ => Added::Queued,
        }
    }

    fn open(&mut self, pool: &mut Pool, key: Key, now: u64, iif: u32) -> Option<usize> {
        let q = match self.free.pop() {
            Some(q) => q,
            None if self.queues.len() < MAX_QUEUES => {
                self.queues.push(Queue {
                    key,
                    buf: None,
                    ranges: [(0, 0); MAX_FRAGMENTS],
                    count: 0,
                    len: 0,
                    last_in: false,
                    first_header: None,
                    df: false,
                    expires: 0,
                    iif,
                });
                self.queues.len() - 1
            }
            None => return None,
        };
        let Ok(mut buf) = pool.alloc_large() else {
            self.free.push(q);
            return None;
        };
        if buf.append(pool, PAYLOAD_AT + MAX_PACKET).is_err() {
            pool.free(buf);
            self.free.push(q);
            return None;
        }
        self.queues[q] = Queue {
            key,
            buf: Some(buf),
            ranges: [(0, 0); MAX_FRAGMENTS],
            count: 0,
            len: 0,
            last_in: false,
            first_header: None,
            df: false,
            expires: now + IPFRAG_TIME_NS,
            iif,
        };
        self.index.insert(key, q);
        Some(q)
    }

    fn release(&mut self, q: usize) -> Option<Buf> {
        let key = self.queues[q].key;
        self.index.remove(&key);
        self.free.push(q);
        self.queues[q].buf.take()
    }

    fn kill(&mut self, pool: &mut Pool, q: usize, reason: DropReason) -> Added {
        if let Some(b) = self.release(q) {
            pool.free(b);
        }
        Added::Dropped(reason)
    }

    fn finish(&mut self, pool: &mut Pool, q: usize, hlen: usize) -> Added {
        let (len, df) = (self.queues[q].len as usize, self.queues[q].df);
        let Some(mut buf) = self.release(q) else {
            return Added::Dropped(DropReason::Nomem);
        };
        if hlen + len > MAX_PACKET {
            pool.free(buf);
            return Added::Dropped(DropReason::FragReasmFailed);
        }
        // The packet is laid out from PAYLOAD_AT - hlen; the link-layer header goes right
        // before it.
        let start = PAYLOAD_AT - hlen;
        let data = buf.data_mut(pool);
        data.copy_within(..ethernet::HEADER_LEN, start - ethernet::HEADER_LEN);
        let mut p = ipv4::Packet::new_unchecked(&mut data[start..]);
        p.set_total_len((hlen + len) as u16);
        p.set_flags_frag(false, df, false, 0);
        p.fill_checksum();
        let trimmed = buf.trim_front(start - ethernet::HEADER_LEN).and_then(|()| {
            let keep = ethernet::HEADER_LEN + hlen + len;
            buf.trim_back(buf.len() - keep)
        });
        match trimmed {
            Ok(()) => Added::Whole(buf),
            Err(_) => {
                pool.free(buf);
                Added::Dropped(DropReason::Nomem)
            }
        }
    }

    /// When the next queue expires, if one is open.
    pub fn next_expiry(&self) -> Option<u64> {
        self.index.values().map(|&q| self.queues[q].expires).min()
    }

    /// Expires the queues due at `now` (`ip_expire`): for each whose first fragment came,
    /// `each` gets that fragment back (link-layer header, then the IP header and payload as
    /// received) and the link it came in on, to answer with "reassembly time exceeded"; the
    /// buffer is the caller's to free.
    pub fn expire(&mut self, pool: &mut Pool, now: u64, mut each: impl FnMut(&mut Pool, Buf, u32)) {
        while let Some((&key, &q)) = self
            .index
            .iter()
            .find(|(_, &q)| self.queues[q].expires <= now)
        {
            debug_assert_eq!(self.queues[q].key, key);
            let first = self.queues[q].first_header;
            let first_len = self.queues[q].ranges[..self.queues[q].count]
                .iter()
                .find(|(s, _)| *s == 0)
                .map(|(_, e)| *e as usize);
            let iif = self.queues[q].iif;
            let Some(mut buf) = self.release(q) else {
                continue;
            };
            let (Some(hlen), Some(plen)) = (first, first_len) else {
                pool.free(buf);
                continue;
            };
            let start = PAYLOAD_AT - hlen;
            let data = buf.data_mut(pool);
            data.copy_within(..ethernet::HEADER_LEN, start - ethernet::HEADER_LEN);
            let kept = buf.trim_front(start - ethernet::HEADER_LEN).and_then(|()| {
                let keep = ethernet::HEADER_LEN + hlen + plen;
                buf.trim_back(buf.len() - keep)
            });
            match kept {
                Ok(()) => each(pool, buf, iif),
                Err(_) => pool.free(buf),
            }
        }
    }

    /// Packets in reassembly now (each holding one buffer).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fibre_packet::{Headroom, PoolConfig};

    const SRC: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

    fn pool() -> Pool {
        Pool::new(PoolConfig {
            frames: 8,
            frame_size: 2048,
            large_frames: 4,
            large_frame_size: 66 * 1024,
            headroom: Headroom::default(),
        })
        .unwrap()
    }

    /// A fragment of a 40-byte UDP payload (bytes 0..40), ID 9: `offset` and `len` in bytes.
    fn fragment(offset: usize, len: usize, more: bool) -> Vec<u8> {
        let payload: Vec<u8> = (0..40u8).collect();
        let mut f = vec![0u8; ethernet::HEADER_LEN + 20 + len];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = ipv4::Repr {
            src_addr: SRC,
            dst_addr: DST,
            protocol: 17,
            payload_len: len,
            ttl: 64,
            tos: 0,
            ident: 9,
            reserved_flag: false,
            dont_frag: false,
            more_frags: more,
            frag_offset: (offset / 8) as u16,
            options: fibre_wire::OptionBytes::EMPTY,
        };
        let mut p = ipv4::Packet::new_unchecked(&mut f[ethernet::HEADER_LEN..]);
        ip.emit(&mut p);
        p.payload_mut()
            .copy_from_slice(&payload[offset..offset + len]);
        f
    }

    fn add(r: &mut Reassembly, pool: &mut Pool, f: &[u8]) -> Added {
        r.add(pool, 0, 3, f, ethernet::HEADER_LEN)
    }

    #[test]
    fn out_of_order_fragments_make_the_packet_with_the_first_header() {
        let (mut pool, mut r) = (pool(), Reassembly::default());
        assert!(matches!(
            add(&mut r, &mut pool, &fragment(24, 16, false)),
            Added::Queued
        ));
        assert!(matches!(
            add(&mut r, &mut pool, &fragment(8, 16, true)),
            Added::Queued
        ));
        let Added::Whole(buf) = add(&mut r, &mut pool, &fragment(0, 8, true)) else {
            panic!("not whole")
        };
        let data = buf.data(&pool);
        let p = ipv4::Packet::new_checked(&data[ethernet::HEADER_LEN..]).unwrap();
        assert_eq!(p.total_len(), 60);
        assert!(!p.more_frags() && p.frag_offset() == 0);
        assert!(p.verify_checksum().is_ok());
        assert_eq!(p.payload(), (0..40u8).collect::<Vec<_>>().as_slice());
        pool.free(buf);
        assert!(r.is_empty());
        assert_eq!(pool.available_large(), 4);
    }

    #[test]
    fn a_duplicate_is_dropped_alone_an_overlap_drops_the_packet() {
        let (mut pool, mut r) = (pool(), Reassembly::default());
        add(&mut r, &mut pool, &fragment(0, 16, true));
        assert!(matches!(
            add(&mut r, &mut pool, &fragment(8, 8, true)),
            Added::Dropped(DropReason::DupFrag)
        ));
        assert_eq!(r.len(), 1);
        assert!(matches!(
            add(&mut r, &mut pool, &fragment(8, 16, true)),
            Added::Dropped(DropReason::FragReasmFailed)
        ));
        assert!(r.is_empty());
        assert_eq!(pool.available_large(), 4);
    }

    #[test]
    fn a_late_packet_expires_with_its_first_fragment_quoted() {
        let (mut pool, mut r) = (pool(), Reassembly::default());
        let first = fragment(0, 16, true);
        r.add(&mut pool, 5, 3, &first, ethernet::HEADER_LEN);
        assert_eq!(r.next_expiry(), Some(5 + IPFRAG_TIME_NS));
        let mut got = Vec::new();
        r.expire(&mut pool, 5 + IPFRAG_TIME_NS - 1, |_, _, _| {
            unreachable!("not due")
        });
        r.expire(&mut pool, 5 + IPFRAG_TIME_NS, |pool, b, iif| {
            got.push((b.data(pool).to_vec(), iif));
            pool.free(b);
        });
        assert_eq!(got, vec![(first, 3)]);
        assert!(r.is_empty());
    }
}
