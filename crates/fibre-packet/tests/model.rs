//! Random sequences of buffer operations against a naive model: every buffer a `Vec<u8>` with
//! its offset in a frame of known size. After every operation the pool's bytes, rooms, free
//! counts and copy counters must equal the model's, and no frame may be held twice.

use std::collections::HashSet;

use fibre_packet::{Buf, BufError, Copies, CopyError, Empty, Headroom, Pool, PoolConfig};
use proptest::prelude::*;

const FRAMES: u32 = 4;
const FRAME_SIZE: usize = 512;
const LARGE_FRAMES: u32 = 2;
const LARGE_FRAME_SIZE: usize = 1024;
/// Sizes up to beyond a large frame, so every operation also fails for lack of room.
const MAX_N: usize = LARGE_FRAME_SIZE + 64;

#[derive(Clone, Debug)]
enum Op {
    Alloc,
    AllocLarge,
    /// Operations on a live buffer pick it by this number modulo the live count.
    Free(usize),
    Prepend(usize, usize, u8),
    Append(usize, usize, u8),
    TrimFront(usize, usize),
    TrimBack(usize, usize),
    InsertAfter(usize, usize, usize, u8),
    EnsureHeadroom(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let n = || prop_oneof![0..=MAX_N, 0..=64usize];
    prop_oneof![
        2 => Just(Op::Alloc),
        1 => Just(Op::AllocLarge),
        1 => any::<usize>().prop_map(Op::Free),
        3 => (any::<usize>(), n(), any::<u8>()).prop_map(|(i, n, b)| Op::Prepend(i, n, b)),
        3 => (any::<usize>(), n(), any::<u8>()).prop_map(|(i, n, b)| Op::Append(i, n, b)),
        2 => (any::<usize>(), n()).prop_map(|(i, n)| Op::TrimFront(i, n)),
        2 => (any::<usize>(), n()).prop_map(|(i, n)| Op::TrimBack(i, n)),
        3 => (any::<usize>(), any::<usize>(), n(), any::<u8>())
            .prop_map(|(i, o, n, b)| Op::InsertAfter(i, o, n, b)),
        3 => (any::<usize>(), n()).prop_map(|(i, n)| Op::EnsureHeadroom(i, n)),
    ]
}

/// What a buffer should hold: its bytes, where they start, the size of its frame.
struct Model {
    bytes: Vec<u8>,
    start: usize,
    cap: usize,
}

struct State {
    pool: Pool,
    live: Vec<(Buf, Model)>,
    base_free: usize,
    large_free: usize,
    copies: Copies,
    headroom: usize,
}

impl State {
    fn alloc(&mut self, large: bool) {
        let (got, free, cap) = if large {
            (
                self.pool.alloc_large(),
                &mut self.large_free,
                LARGE_FRAME_SIZE,
            )
        } else {
            (self.pool.alloc(), &mut self.base_free, FRAME_SIZE)
        };
        if *free == 0 {
            assert_eq!(got, Err(Empty));
            return;
        }
        *free -= 1;
        let buf = got.unwrap();
        self.live.push((
            buf,
            Model {
                bytes: Vec::new(),
                start: self.headroom,
                cap,
            },
        ));
    }

    fn apply(&mut self, op: Op) {
        let pick = |i: usize, live: usize| (live > 0).then(|| i % live);
        let headroom = self.headroom;
        let pool = &mut self.pool;
        match op {
            Op::Alloc => self.alloc(false),
            Op::AllocLarge => self.alloc(true),
            Op::Free(i) => {
                let Some(i) = pick(i, self.live.len()) else {
                    return;
                };
                let (buf, m) = self.live.swap_remove(i);
                if m.cap == FRAME_SIZE {
                    self.base_free += 1;
                } else {
                    self.large_free += 1;
                }
                pool.free(buf);
            }
            Op::Prepend(i, n, byte) => {
                let Some(i) = pick(i, self.live.len()) else {
                    return;
                };
                let (buf, m) = &mut self.live[i];
                let got = buf.prepend(pool, n).map(|s| s.fill(byte));
                if n > m.start {
                    assert_eq!(got, Err(BufError::NoRoom));
                } else {
                    got.unwrap();
                    m.start -= n;
                    m.bytes.splice(0..0, std::iter::repeat_n(byte, n));
                }
            }
            Op::Append(i, n, byte) => {
                let Some(i) = pick(i, self.live.len()) else {
                    return;
                };
                let (buf, m) = &mut self.live[i];
                let got = buf.append(pool, n).map(|s| s.fill(byte));
                if n > m.cap - m.start - m.bytes.len() {
                    assert_eq!(got, Err(BufError::NoRoom));
                } else {
                    got.unwrap();
                    m.bytes.extend(std::iter::repeat_n(byte, n));
                }
            }
            Op::TrimFront(i, n) => {
                let Some(i) = pick(i, self.live.len()) else {
                    return;
                };
                let (buf, m) = &mut self.live[i];
                let got = buf.trim_front(n);
                if n > m.bytes.len() {
                    assert_eq!(got, Err(BufError::Short));
                } else {
                    got.unwrap();
                    m.start += n;
                    m.bytes.drain(..n);
                }
            }
            Op::TrimBack(i, n) => {
                let Some(i) = pick(i, self.live.len()) else {
                    return;
                };
                let (buf, m) = &mut self.live[i];
                let got = buf.trim_back(n);
                if n > m.bytes.len() {
                    assert_eq!(got, Err(BufError::Short));
                } else {
                    got.unwrap();
                    m.bytes.truncate(m.bytes.len() - n);
                }
            }
            Op::InsertAfter(i, offset, n, byte) => {
                let Some(i) = pick(i, self.live.len()) else {
                    return;
                };
                let (buf, m) = &mut self.live[i];
                // Mostly inside the data, sometimes one past its end.
                let offset = offset % (m.bytes.len() + 2);
                let got = buf.insert_after(pool, offset, n).map(|s| s.fill(byte));
                if offset > m.bytes.len() {
                    assert_eq!(got, Err(BufError::Short));
                } else if n > m.start {
                    assert_eq!(got, Err(BufError::NoRoom));
                } else {
                    got.unwrap();
                    m.start -= n;
                    m.bytes.splice(offset..offset, std::iter::repeat_n(byte, n));
                }
            }
            Op::EnsureHeadroom(i, n) => {
                let Some(i) = pick(i, self.live.len()) else {
                    return;
                };
                let (buf, m) = &mut self.live[i];
                let got = buf.ensure_headroom(pool, n);
                let len = m.bytes.len();
                let start = |cap: usize| n.max(headroom).min(cap - len);
                if n <= m.start {
                    got.unwrap();
                } else if n + len <= m.cap {
                    got.unwrap();
                    m.start = start(m.cap);
                    self.copies.in_frame += 1;
                } else if n + len > LARGE_FRAME_SIZE {
                    assert_eq!(got, Err(CopyError::TooLarge));
                } else if self.large_free == 0 {
                    assert_eq!(got, Err(CopyError::Empty));
                } else {
                    got.unwrap();
                    self.large_free -= 1;
                    if m.cap == FRAME_SIZE {
                        self.base_free += 1;
                    } else {
                        self.large_free += 1;
                    }
                    m.cap = LARGE_FRAME_SIZE;
                    m.start = start(m.cap);
                    self.copies.to_large += 1;
                }
            }
        }
    }

    fn check(&self) {
        let mut held = HashSet::new();
        for (buf, m) in &self.live {
            assert!(held.insert(buf.idx()), "frame {:?} held twice", buf.idx());
            assert_eq!(
                buf.idx().get() < FRAMES,
                m.cap == FRAME_SIZE,
                "{:?} in the wrong class",
                buf.idx()
            );
            assert_eq!(buf.data(&self.pool), &m.bytes[..]);
            assert_eq!(
                (buf.headroom(), buf.len(), buf.frame_size()),
                (m.start, m.bytes.len(), m.cap)
            );
            assert_eq!(
                buf.headroom() + buf.len() + buf.tailroom(),
                buf.frame_size()
            );
            assert_eq!(self.pool.frame_offset(buf.idx()) % m.cap, 0);
        }
        assert_eq!(
            (self.pool.available(), self.pool.available_large()),
            (self.base_free, self.large_free)
        );
        assert_eq!(self.pool.copies(), self.copies);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn buffers_behave_as_the_model(headroom in 0..=256usize, ops in proptest::collection::vec(op(), 1..200)) {
        let headroom = Headroom::new(headroom, 0);
        let pool = Pool::new(PoolConfig {
            frames: FRAMES,
            frame_size: FRAME_SIZE as u32,
            large_frames: LARGE_FRAMES,
            large_frame_size: LARGE_FRAME_SIZE as u32,
            headroom,
        })
        .unwrap();
        let mut state = State {
            pool,
            live: Vec::new(),
            base_free: FRAMES as usize,
            large_free: LARGE_FRAMES as usize,
            copies: Copies::default(),
            headroom: headroom.bytes(),
        };
        for op in ops {
            state.apply(op);
            state.check();
        }
        // Every frame goes back, and each one exactly once.
        for (buf, _) in state.live.drain(..) {
            state.pool.free(buf);
        }
        prop_assert_eq!(state.pool.available(), FRAMES as usize);
        prop_assert_eq!(state.pool.available_large(), LARGE_FRAMES as usize);
    }
}
