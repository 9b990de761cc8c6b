//! The IPv4 lookup index: a 16-bit direct array whose entries each locate, by themselves, the one
//! cache line that answers any address of their /16 -- one read of a 256 KiB array (which stays
//! in a core's L2) and one line read per lookup, for every prefix up to /24.
//!
//! # Shape
//! [`Dir16`] mirrors the 18-bit direct level of the IPv4 trie (`Trie<u32, 18, Dir16>`): each /16
//! *chunk* is the trie's four direct entries ("quarters", 64 /24 slots each) side by side. A chunk
//! whose 256 slots all hold one value is that value, in its top entry. Otherwise its quarters are
//! laid out in one block of lines, quarter 0 first, each quarter in one of three codes:
//! - code 0, one line: the quarter's run bitmap (words 0-1; bit s: slot s starts a run of equal
//!   values) and up to [`PACKED_RUNS`] run values from word 2;
//! - code 1, two lines of 32 slots: each a run bitmap (word 0) and up to 15 run values from word 1;
//! - code 2, four flat lines: the 64 slot values themselves.
//!
//! The top entry holds the block's first line and the four codes, so a lookup computes the line
//! from the entry and the address alone (prefetchable), then finds the value in the line with at
//! most one popcount. A quarter that hangs a trie node with children (routes longer than /24) is
//! laid out as one run of the value `TRIE | n`, n the node: lookups that find it continue in the
//! trie (one well-predicted branch on bit 31 of the answer).
//!
//! The lines are the only compiled form of the trie's childless /18 nodes (every node of a 2026
//! table): the trie keeps their routes, not their leaves, and reads their slot values back from
//! here ([`Mirror::slots`]) when it patches them.
//!
//! # Invariants
//! - After every trie update (or flush), each quarter holds exactly the 64 slot values its trie
//!   direct entry resolves to, or `TRIE | n` for a node with children: the trie reports every
//!   change of a direct entry through [`Mirror::direct_changed`] (a bulk build lays every chunk
//!   out once through [`Mirror::refill`]).
//! - A chunk is a value iff its 256 slots are equal and no quarter hangs a node with children
//!   (canonical: the index depends on the route set, not on the order of updates; block
//!   placement does not).
//!
//! Single-threaded like the trie; readers go through [`crate::sync`].

use crate::huge::HugeVec;
use crate::trie::SLOTS;

/// Bits of the address resolved by the top array.
pub(crate) const TOP_BITS: u32 = 16;
const TOP: usize = 1 << TOP_BITS;
/// Top entry bit 31: a chunk, not a value (values are at most 2^31 - 1).
pub(crate) const CHUNK: u32 = 0x8000_0000;
/// Bit 31 of a slot value: not a value but `TRIE | n`, the trie node that answers the slot.
pub(crate) const TRIE: u32 = 0x8000_0000;
/// `u32`s in a line.
const LINE_WORDS: usize = 16;
/// Quarter codes, 2 bits each from bit 22 (quarter 0 lowest).
pub(crate) const CODES_SHIFT: u32 = 22;
/// The block's first line: 22 bits, so at most 2^22 lines (256 MiB) -- sixteen times the most a
/// full table of 2^16 chunks of at most 16 lines can hold at once.
const BASE_MASK: u32 = (1 << CODES_SHIFT) - 1;
const MAX_LINES: usize = 1 << CODES_SHIFT;
/// Run values beside a 64-bit bitmap in a code-0 line.
pub(crate) const PACKED_RUNS: usize = 14;
/// Run values beside a 32-bit bitmap in a code-1 line.
const HALF_RUNS: usize = 15;
/// Lines of the largest block (four flat quarters).
const MAX_BLOCK: usize = 16;

/// One cache line of a chunk's block (see the module comment for the three layouts).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct Line(pub(crate) [u32; LINE_WORDS]);

/// A quarter as the trie reports it.
#[derive(Clone, Copy)]
pub(crate) enum Quarter<'a> {
    /// All 64 slots hold this value.
    Value(u32),
    /// The 64 slot values and their run bitmap (bit 0 always set).
    Runs(&'a [u32; SLOTS], u64),
    /// Trie node `n`, which has children, answers the quarter.
    Node(u32),
}

/// Receives the trie's direct-entry changes and keeps the compiled form of its /18 nodes.
pub(crate) trait Mirror: Clone + std::fmt::Debug + Default {
    /// Direct entry `s` now resolves as `q`.
    fn direct_changed(&mut self, s: usize, q: Quarter<'_>);
    /// Lays out the chunk of `s` afresh from its four quarters (`qs[i]` is quarter i).
    fn refill(&mut self, s: usize, qs: [Quarter<'_>; 4]);
    /// The 64 slot values of direct entry `s`, as last reported (not for a `Node` quarter).
    fn slots(&self, s: usize) -> [u32; SLOTS];
    /// Bytes held.
    fn memory_bytes(&self) -> usize;
}

/// The 16-bit lookup index (see the module comment).
#[derive(Clone, Debug)]
pub(crate) struct Dir16 {
    pub(crate) top: Box<[u32; TOP]>,
    pub(crate) lines: HugeVec<Line>,
    /// free[n]: first lines of free blocks of n lines.
    free: Vec<Vec<u32>>,
}

impl Default for Dir16 {
    fn default() -> Self {
        Dir16 {
            top: vec![crate::trie::NONE; TOP]
                .into_boxed_slice()
                .try_into()
                .expect("TOP entries"),
            lines: HugeVec::new(),
            free: vec![Vec::new(); MAX_BLOCK + 1],
        }
    }
}

/// Lines of a quarter in code `c`.
#[inline(always)]
fn code_lines(c: u32) -> usize {
    1 << c
}

/// The code a quarter with run bitmap `runs` needs (see the module comment).
fn code_for(runs: u64) -> u32 {
    if runs.count_ones() as usize <= PACKED_RUNS {
        0
    } else if (runs as u32 | 1).count_ones() as usize <= HALF_RUNS
        && ((runs >> 32) as u32 | 1).count_ones() as usize <= HALF_RUNS
    {
        1
    } else {
        2
    }
}

/// Offsets (in lines) of quarters 0..4 within a block, one byte each, for every 8-bit code
/// word: a table so that a lookup needs no arithmetic over the other quarters' codes.
static OFFSETS: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut codes = 0;
    while codes < 256 {
        let mut off = 0u32;
        let mut packed = 0u32;
        let mut q = 0;
        while q < 4 {
            packed |= off << (8 * q);
            off += 1 << ((codes >> (2 * q)) & 3);
            q += 1;
        }
        t[codes] = packed;
        codes += 1;
    }
    t
};

/// A line every non-chunk lane of a batch reads instead of a block line: branch-free lanes.
static ZERO_LINE: Line = Line([0; 16]);

/// Where a lookup of `addr` in chunk entry `e` finds its value: (line index, code, slot within
/// the line's part of the quarter).
#[inline(always)]
fn locate(e: u32, addr: u32) -> (usize, u32, u32) {
    let q = (addr >> 14) & 3;
    let codes = (e >> CODES_SHIFT) & 0xFF;
    let c = (codes >> (2 * q)) & 3;
    let off = (OFFSETS[codes as usize] >> (8 * q)) & 0xFF;
    let slot = (addr >> 8) & 63;
    let line = (e & BASE_MASK) + off + (slot >> (6 - c));
    (line as usize, c, slot & (63 >> c))
}

/// The value at `pos` of a line in code `c`, without branches.
#[inline(always)]
fn in_line(line: &Line, c: u32, pos: u32) -> u32 {
    let w = u64::from(line.0[0]) | u64::from(line.0[1]) << 32;
    let rank = (w & (u64::MAX >> (63 - pos))).count_ones();
    // Code 0: runs from word 2 (rank >= 1); code 1: from word 1; code 2: flat.
    let packed = rank + u32::from(c == 0);
    let idx = std::hint::select_unpredictable(c == 2, pos, packed);
    line.0[(idx & 15) as usize]
}

impl Dir16 {
    /// The slot value for `addr`: a value in the internal encoding (NONE for none), or `TRIE |
    /// n` when trie node n answers. Branch-free, so that a loop of lookups overlaps their
    /// memory reads.
    #[inline(always)]
    pub(crate) fn lookup(&self, addr: u32) -> u32 {
        let e = self.top[(addr >> (32 - TOP_BITS)) as usize];
        let chunk = e & CHUNK != 0;
        let (line, c, pos) = locate(e, addr);
        let p = self.line_or_zero(chunk, line);
        // SAFETY: see `line_or_zero`.
        let v = in_line(unsafe { &*p }, c, pos);
        std::hint::select_unpredictable(chunk, v, e)
    }

    /// The address of line `line` when `chunk` (the line a chunk entry locates), else of
    /// `ZERO_LINE`, without a branch. Dereferencing it is sound while `self` is borrowed:
    /// chunk entries only ever name lines of their own live block, inside `self.lines` (see
    /// `write_block`), and the lines can neither move nor be freed under a shared borrow.
    #[inline(always)]
    fn line_or_zero(&self, chunk: bool, line: usize) -> *const Line {
        let lines = self.lines.as_ptr() as usize;
        let zero = &ZERO_LINE as *const Line as usize;
        let keep = 0usize.wrapping_sub(usize::from(chunk));
        (((lines + line * std::mem::size_of::<Line>()) & keep) | (zero & !keep)) as *const Line
    }

    /// Batched `lookup` of up to 64 addresses: every lane's top entry is prefetched, then every
    /// lane's line located and prefetched, before any line is read; lanes take no
    /// data-dependent branch. Lanes the trie answers are left to the caller: bit i of the
    /// result set means `out[i]` must be looked up in the trie.
    #[inline(always)]
    pub(crate) fn lookup_group(&self, addrs: &[u32], out: &mut [u32]) -> u64 {
        let n = addrs.len();
        debug_assert!(n <= 64 && out.len() == n);
        let mut at = [0usize; 64];
        let mut info = [0u32; 64];
        let top = &*self.top;
        for &a in addrs {
            crate::prefetch(&top[(a >> (32 - TOP_BITS)) as usize]);
        }
        for i in 0..n {
            let a = addrs[i];
            let e = top[(a >> (32 - TOP_BITS)) as usize];
            let (line, c, pos) = locate(e, a);
            let chunk = e & CHUNK != 0;
            // Values read the zero line (an L1 hit) and keep their entry.
            let p = self.line_or_zero(chunk, line);
            crate::prefetch(p);
            at[i] = p as usize;
            let code = if chunk { c } else { 3 };
            info[i] = code << 8 | pos;
            out[i] = e;
        }
        let mut trie = 0u64;
        for i in 0..n {
            // SAFETY: `at[i]` comes from `line_or_zero` under this borrow of `self`.
            let line = unsafe { &*(at[i] as *const Line) };
            let (c, pos) = (info[i] >> 8, info[i] & 63);
            let v = in_line(line, c & 3, pos);
            let v = std::hint::select_unpredictable(c == 3, out[i], v);
            trie |= u64::from(v >> 31) << i;
            out[i] = v;
        }
        trie
    }

    /// Bytes of what lookups read (top array and lines).
    pub(crate) fn lookup_bytes(&self) -> usize {
        TOP * 4 + self.lines.len() * std::mem::size_of::<Line>()
    }

    fn alloc(&mut self, n: usize) -> u32 {
        if let Some(at) = self.free[n].pop() {
            return at;
        }
        let at = self.lines.len();
        assert!(
            at + n <= MAX_LINES,
            "fibre-lpm: IPv4 line index space exhausted"
        );
        self.lines.resize(at + n, Line::default());
        at as u32
    }

    /// Frees the block of chunk entry `e`, if it has one.
    fn release(&mut self, e: u32) {
        if e & CHUNK != 0 {
            let codes = (e >> CODES_SHIFT) & 0xFF;
            let n = (0..4)
                .map(|q| code_lines(codes >> (2 * q) & 3))
                .sum::<usize>();
            self.free[n].push(e & BASE_MASK);
        }
    }

    /// Writes quarter `q` in code `c` at line `at`.
    fn write_quarter(&mut self, at: usize, c: u32, q: Quarter<'_>) {
        match q {
            Quarter::Value(v) | Quarter::Node(v) => {
                let v = if let Quarter::Node(_) = q {
                    TRIE | v
                } else {
                    v
                };
                debug_assert_eq!(c, 0);
                let l = &mut self.lines[at].0;
                *l = [0; 16];
                l[0] = 1;
                l[2] = v;
            }
            Quarter::Runs(slots, runs) => match c {
                0 => {
                    let l = &mut self.lines[at].0;
                    l[0] = runs as u32;
                    l[1] = (runs >> 32) as u32;
                    fill_runs(&mut l[2..], slots, 0, runs);
                }
                1 => {
                    for h in 0..2 {
                        let bits = (runs >> (32 * h)) as u32 | 1;
                        let l = &mut self.lines[at + h].0;
                        l[0] = bits;
                        fill_runs(&mut l[1..], slots, 32 * h, u64::from(bits));
                    }
                }
                _ => {
                    for (i, part) in slots.chunks_exact(16).enumerate() {
                        self.lines[at + i].0.copy_from_slice(part);
                    }
                }
            },
        }
    }

    /// The code of quarter `q` as laid out now (`e` a chunk entry).
    fn code_of(e: u32, q: usize) -> u32 {
        (e >> (CODES_SHIFT + 2 * q as u32)) & 3
    }

    /// The value of quarter `q` of chunk entry `e` if it is uniform.
    fn uniform(&self, e: u32, q: usize) -> Option<u32> {
        if Self::code_of(e, q) != 0 {
            return None;
        }
        let off = (OFFSETS[((e >> CODES_SHIFT) & 0xFF) as usize] >> (8 * q)) & 0xFF;
        let l = &self.lines[((e & BASE_MASK) + off) as usize].0;
        (l[0] == 1 && l[1] == 0 && l[2] & TRIE == 0).then_some(l[2])
    }

    /// Lays chunk `ch` out afresh from its four quarters (`None`: keep that quarter's lines from
    /// the current block), or makes it a value when all four are the same value.
    fn write_block(&mut self, ch: usize, qs: [Option<Quarter<'_>>; 4]) {
        let old = self.top[ch];
        let kept: [Option<u32>; 4] =
            std::array::from_fn(|q| qs[q].is_none().then(|| self.uniform(old, q)).flatten());
        let value_of = |q: usize| match qs[q] {
            Some(Quarter::Value(v)) => Some(v),
            Some(_) => None,
            None => kept[q],
        };
        if let Some(v) = value_of(0) {
            if (1..4).all(|q| value_of(q) == Some(v)) {
                self.release(old);
                self.top[ch] = v;
                return;
            }
        }
        let codes: [u32; 4] = std::array::from_fn(|q| match qs[q] {
            Some(Quarter::Value(_)) => 0,
            Some(Quarter::Runs(_, runs)) => code_for(runs),
            Some(Quarter::Node(_)) => 0,
            None => Self::code_of(old, q),
        });
        let code_word = codes
            .iter()
            .enumerate()
            .fold(0, |w, (q, &c)| w | c << (2 * q));
        let n: usize = codes.iter().map(|&c| code_lines(c)).sum();
        let at = self.alloc(n) as usize;
        let mut line = at;
        let old_offsets = OFFSETS[((old >> CODES_SHIFT) & 0xFF) as usize];
        for q in 0..4 {
            match qs[q] {
                Some(quarter) => self.write_quarter(line, codes[q], quarter),
                None => {
                    let from = ((old & BASE_MASK) + ((old_offsets >> (8 * q)) & 0xFF)) as usize;
                    self.lines
                        .copy_within(from..from + code_lines(codes[q]), line);
                }
            }
            line += code_lines(codes[q]);
        }
        self.release(old);
        self.top[ch] = CHUNK | code_word << CODES_SHIFT | at as u32;
    }
}

/// Writes into `dst` the values of `slots[from..from + 64]` at the run starts `runs` (bit i:
/// slot from + i).
fn fill_runs(dst: &mut [u32], slots: &[u32; SLOTS], from: usize, mut runs: u64) {
    let mut i = 0;
    while runs != 0 {
        dst[i] = slots[from + runs.trailing_zeros() as usize];
        runs &= runs - 1;
        i += 1;
    }
}

impl Mirror for Dir16 {
    fn direct_changed(&mut self, s: usize, q: Quarter<'_>) {
        let (ch, qi) = (s >> 2, s & 3);
        let e = self.top[ch];
        if e & CHUNK == 0 {
            // A value chunk: the other quarters are that value.
            if let Quarter::Value(v) = q {
                if v == e {
                    return;
                }
            }
            let mut qs = [Some(Quarter::Value(e)); 4];
            qs[qi] = Some(q);
            self.write_block(ch, qs);
            return;
        }
        let same_code = match q {
            Quarter::Value(_) | Quarter::Node(_) => Self::code_of(e, qi) == 0,
            Quarter::Runs(_, runs) => code_for(runs) == Self::code_of(e, qi),
        };
        let becomes_value = matches!(q, Quarter::Value(_))
            && (0..4)
                .filter(|&o| o != qi)
                .all(|o| self.uniform(e, o).is_some());
        if same_code && !becomes_value {
            let off = (OFFSETS[((e >> CODES_SHIFT) & 0xFF) as usize] >> (8 * qi)) & 0xFF;
            self.write_quarter(((e & BASE_MASK) + off) as usize, Self::code_of(e, qi), q);
        } else {
            let mut qs = [None; 4];
            qs[qi] = Some(q);
            self.write_block(ch, qs);
        }
    }

    fn refill(&mut self, s: usize, qs: [Quarter<'_>; 4]) {
        self.write_block(s >> 2, qs.map(Some));
    }

    fn slots(&self, s: usize) -> [u32; SLOTS] {
        let (ch, q) = (s >> 2, s & 3);
        let e = self.top[ch];
        if e & CHUNK == 0 {
            return [e; SLOTS];
        }
        let c = Self::code_of(e, q);
        let off = (OFFSETS[((e >> CODES_SHIFT) & 0xFF) as usize] >> (8 * q)) & 0xFF;
        let at = ((e & BASE_MASK) + off) as usize;
        let mut slots = [0; SLOTS];
        for (i, v) in slots.iter_mut().enumerate() {
            let (line, pos) = (at + (i >> (6 - c)), (i as u32) & (63 >> c));
            *v = in_line(&self.lines[line], c, pos);
        }
        slots
    }

    fn memory_bytes(&self) -> usize {
        TOP * 4
            + self.lines.capacity() * std::mem::size_of::<Line>()
            + self.free.iter().map(|f| f.capacity() * 4).sum::<usize>()
    }
}
