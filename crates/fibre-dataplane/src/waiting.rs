//! Packets waiting for a neighbour's link-layer address (the kernel's `arp_queue` of an
//! INCOMPLETE entry): a FIFO per neighbour, bounded per neighbour and in all, in storage
//! allocated once.
//!
//! Bounds: at most [`QUEUE_LEN`] packets per neighbour (the kernel's `unres_qlen`, 101; it
//! counts bytes of socket-buffer truesize, `unres_qlen_bytes` 212992, which its `unres_qlen`
//! sysctl turns into 101 full-size frames), the oldest dropped first when a new one comes, as
//! `__neigh_event_send` does; at most `neighbours` neighbours and `packets` packets in all,
//! beyond which a new packet is refused. The neighbour keys are chosen by packets (an on-link
//! destination), so the index is a keyed hash, sized once.

use core::net::IpAddr;

use fibre_fib::hash::KeyedMap;
use fibre_packet::Buf;

/// Packets held per neighbour (`unres_qlen`).
pub const QUEUE_LEN: u32 = 101;

const NIL: u32 = u32::MAX;

type Key = (u32, IpAddr);

#[derive(Debug)]
struct Queue {
    key: Key,
    head: u32,
    tail: u32,
    len: u32,
    /// The source address of the newest packet: the kernel's solicitation asks from it when
    /// it is the router's own.
    newest_src: IpAddr,
}

#[derive(Debug)]
struct Node {
    buf: Option<Buf>,
    /// The link the packet came in on (0: the router made it): an error about it answers
    /// from that link's address.
    iif: u32,
    next: u32,
}

/// Why [`Waiting::push`] refused a packet; the packet comes back with it.
#[derive(Debug)]
pub enum Full {
    /// No room for another neighbour or packet: the new packet is refused.
    Refused(Buf),
}

/// The waiting packets of one worker.
#[derive(Debug)]
pub struct Waiting {
    index: KeyedMap<Key, u32>,
    queues: Vec<Queue>,
    free_queues: Vec<u32>,
    nodes: Vec<Node>,
    free_node: u32,
    max_queues: usize,
    /// Packets held in all queues.
    held: usize,
}

impl Waiting {
    /// Room for `neighbours` neighbours and `packets` packets, allocated now.
    pub fn new(neighbours: usize, packets: usize) -> Waiting {
        let mut nodes: Vec<Node> = (0..packets)
            .map(|i| Node {
                buf: None,
                iif: 0,
                next: if i + 1 < packets { i as u32 + 1 } else { NIL },
            })
            .collect();
        nodes.shrink_to_fit();
        let mut index = KeyedMap::default();
        index.reserve(neighbours);
        Waiting {
            index,
            queues: Vec::with_capacity(neighbours),
            free_queues: Vec::with_capacity(neighbours),
            nodes,
            free_node: if packets > 0 { 0 } else { NIL },
            max_queues: neighbours,
            held: 0,
        }
    }

    /// Holds `buf` (from `src`, received on `iif`) for the neighbour `addr` on `oif`. When
    /// the neighbour's queue is full its oldest packet makes room and is returned, for the
    /// caller to drop (NEIGH_QUEUEFULL).
    pub fn push(
        &mut self,
        oif: u32,
        addr: IpAddr,
        src: IpAddr,
        iif: u32,
        buf: Buf,
    ) -> Result<Option<Buf>, Full> {
        let key = (oif, addr);
        let q = match self.index.get(&key) {
            Some(&q) => q,
            None => {
                let q = match self.free_queues.pop() {
                    Some(q) => q,
                    None if self.queues.len() < self.max_queues => {
                        self.queues.push(Queue {
                            key,
                            head: NIL,
                            tail: NIL,
                            len: 0,
                            newest_src: src,
                        });
                        self.queues.len() as u32 - 1
                    }
                    None => return Err(Full::Refused(buf)),
                };
                self.queues[q as usize].key = key;
                self.index.insert(key, q);
                q
            }
        };
        let evicted = if self.queues[q as usize].len >= QUEUE_LEN {
            self.pop(q).map(|(b, _)| b)
        } else {
            None
        };
        let n = self.free_node;
        if n == NIL {
            if self.queues[q as usize].len == 0 {
                self.release(q);
            }
            return Err(Full::Refused(buf));
        }
        self.free_node = self.nodes[n as usize].next;
        self.nodes[n as usize] = Node {
            buf: Some(buf),
            iif,
            next: NIL,
        };
        let queue = &mut self.queues[q as usize];
        if queue.tail == NIL {
            queue.head = n;
        } else {
            self.nodes[queue.tail as usize].next = n;
        }
        queue.tail = n;
        queue.len += 1;
        self.held += 1;
        queue.newest_src = src;
        Ok(evicted)
    }

    fn pop(&mut self, q: u32) -> Option<(Buf, u32)> {
        let queue = &mut self.queues[q as usize];
        let n = queue.head;
        if n == NIL {
            return None;
        }
        let node = &mut self.nodes[n as usize];
        queue.head = node.next;
        if queue.head == NIL {
            queue.tail = NIL;
        }
        queue.len -= 1;
        self.held -= 1;
        let buf = node.buf.take();
        node.next = self.free_node;
        self.free_node = n;
        buf.map(|b| (b, node.iif))
    }

    fn release(&mut self, q: u32) {
        let key = self.queues[q as usize].key;
        self.index.remove(&key);
        self.free_queues.push(q);
    }

    /// The source of the newest packet waiting for `addr` on `oif`.
    pub fn newest_src(&self, oif: u32, addr: IpAddr) -> Option<IpAddr> {
        let q = *self.index.get(&(oif, addr))?;
        Some(self.queues[q as usize].newest_src)
    }

    /// Hands every packet waiting for `addr` on `oif` to `each` with the link it came in on,
    /// oldest first, and forgets the neighbour.
    pub fn drain(&mut self, oif: u32, addr: IpAddr, mut each: impl FnMut(Buf, u32)) {
        let Some(&q) = self.index.get(&(oif, addr)) else {
            return;
        };
        while let Some((b, iif)) = self.pop(q) {
            each(b, iif);
        }
        self.release(q);
    }

    /// How many packets wait in all.
    pub fn len(&self) -> usize {
        self.held
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fibre_packet::{Pool, PoolConfig};
    use proptest::prelude::*;
    use std::collections::{BTreeMap, VecDeque};

    fn pool(n: u32) -> Pool {
        Pool::new(PoolConfig {
            frames: n,
            frame_size: 2048,
            large_frames: 1,
            large_frame_size: 2048,
            headroom: fibre_packet::Headroom::default(),
        })
        .unwrap()
    }

    #[test]
    fn the_oldest_makes_room_and_drain_keeps_order() {
        let mut p = pool(200);
        let mut w = Waiting::new(4, 150);
        let a: IpAddr = "10.0.0.5".parse().unwrap();
        let src: IpAddr = "10.1.0.1".parse().unwrap();
        let mut ids = Vec::new();
        let mut evicted = Vec::new();
        for _ in 0..QUEUE_LEN + 2 {
            let b = p.alloc().unwrap();
            ids.push(b.idx());
            if let Some(old) = w.push(3, a, src, 1, b).unwrap() {
                evicted.push(old.idx());
                p.free(old);
            }
        }
        assert_eq!(evicted, ids[..2].to_vec());
        let mut got = Vec::new();
        w.drain(3, a, |b, iif| {
            assert_eq!(iif, 1);
            got.push(b.idx());
            p.free(b);
        });
        assert_eq!(got, ids[2..].to_vec());
        assert!(w.is_empty());
        assert_eq!(w.newest_src(3, a), None);
    }

    proptest! {
        /// Against a model of per-key FIFOs with the same bounds: the same packets come out,
        /// in the same order, and every buffer is accounted for.
        #[test]
        fn matches_a_model(ops in proptest::collection::vec((0u8..3, 0u32..6), 1..400)) {
            let mut p = pool(64);
            let mut w = Waiting::new(3, 40);
            let mut model: BTreeMap<u32, VecDeque<u32>> = BTreeMap::new();
            let src: IpAddr = "10.1.0.1".parse().unwrap();
            for (op, k) in ops {
                let addr = IpAddr::from([10, 0, 0, k as u8]);
                if op < 2 {
                    let Ok(b) = p.alloc() else { continue };
                    let id = b.idx().get();
                    let total: usize = model.values().map(|q| q.len()).sum();
                    let has = model.contains_key(&k);
                    match w.push(1, addr, src, 2, b) {
                        Ok(ev) => {
                            prop_assert!(has || model.len() < 3);
                            let q = model.entry(k).or_default();
                            if q.len() as u32 >= QUEUE_LEN {
                                let old = q.pop_front().unwrap();
                                prop_assert_eq!(ev.as_ref().map(|b| b.idx().get()), Some(old));
                            } else {
                                prop_assert!(ev.is_none());
                                prop_assert!(total < 40);
                            }
                            if let Some(b) = ev { p.free(b); }
                            q.push_back(id);
                        }
                        Err(Full::Refused(b)) => {
                            prop_assert!(total >= 40 || (!has && model.len() >= 3));
                            p.free(b);
                        }
                    }
                } else {
                    let mut got = Vec::new();
                    w.drain(1, addr, |b, _| { got.push(b.idx().get()); p.free(b); });
                    let want: Vec<u32> = model.remove(&k).map(Vec::from).unwrap_or_default();
                    prop_assert_eq!(got, want);
                }
                prop_assert_eq!(w.len(), model.values().map(|q| q.len()).sum::<usize>());
            }
        }
    }
}
