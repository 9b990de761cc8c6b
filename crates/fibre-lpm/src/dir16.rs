//! The IPv4 lookup index: a 16-bit direct array whose entries each locate, by themselves, the one
//! cache line that answers any address of their /16 -- one read of a 256 KiB array (which stays
//! in a core's L2) and one line read per lookup, for every prefix up to /24.
//!
//! # Shape
//! [`Dir16`] mirrors the 18-bit direct level of the IPv4 trie (`Trie<u32, 18, Dir16>`): each /16
//! *chunk* is the trie's four direct entries ("quarters", 64 /24 slots each) side by side. A chunk
//! whose 256 slots all hold one value is that value, in its top entry. Otherwise its quarters are
//! laid out in one block of lines, quarter 0 first, each quarter in one of four codes:
//! - code 0, one line: the quarter's run bitmap (words 0-1; bit s: slot s starts a run of equal
//!   values) and up to [`PACKED_RUNS`] run values from word 2;
//! - code 1, two lines of 32 slots: the first a run bitmap (word 0) and up to 15 run values from
//!   word 1, the second a 1 (word 0), its run bitmap (word 1) and up to 14 run values from word 2
//!   (so that one bit count over the line's first 64 bits serves both halves);
//! - code 2, four flat lines: the 64 slot values themselves;
//! - code 3, no line of its own, for a quarter of one value (a third of a 2026 table's quarters):
//!   the value is *hosted* in a spare word at the end of the first line of the block's first
//!   code-0 or code-1 quarter (the host), words 15, 14, 13 for the chunk's first, second, third
//!   code-3 quarter. The codes are a function of the four quarters ([`codes_for`]): single values
//!   take code 3 as long as the host has room, else code 0 (a line holding one run).
//!
//! The top entry holds the block's first line and the four codes, so a lookup computes where in
//! which line its value's count starts from the entry and the address alone (prefetchable, with
//! one read of a 16 KiB table indexed by the codes and the quarter: [`LANES`]), then counts
//! the run bits up to its slot and reads the value that many words further, with one formula
//! for every code (a flat line or a hosted value counts no bit), without branches. A quarter that hangs a trie node with children (routes longer than /24) is laid out
//! as one run of the value `TRIE | n`, n the node: lookups that find it continue in the trie (one
//! well-predicted branch on bit 31 of the answer).
//!
//! The lines are the only compiled form of the trie's childless /18 nodes (every node of a 2026
//! table): the trie keeps their routes, not their leaves, and reads their slot values back from
//! here ([`Mirror::slots`]) when it patches them.
//!
//! # Invariants
//! - After every trie update outside a batch, and after every flush, each quarter holds exactly
//!   the 64 slot values its trie direct entry resolves to, or `TRIE | n` for a node with
//!   children: the trie reports every change of a direct entry through
//!   [`Mirror::direct_changed`] or, for whole chunks (a bulk build, a batch's changed values),
//!   [`Mirror::refill`].
//! - A chunk is a value iff its 256 slots are equal and no quarter hangs a node with children
//!   (canonical: the index depends on the route set, not on the order of updates; block
//!   placement does not).
//!
//! Single-threaded like the trie; readers go through [`crate::sync`].

use crate::huge::HugeVec;
use crate::trie::SLOTS;
use crate::written::{copy_vec, Marks, Released};

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
/// Run values beside a 32-bit bitmap in the first line of a code-1 quarter (words 1-15), and in
/// its second line (words 2-15: word 0 is 1 there, see [`LANES`]).
const HALF_RUNS: [usize; 2] = [15, 14];
/// Lines of the largest block (four flat quarters).
const MAX_BLOCK: usize = 16;
/// The word of a code-3 quarter's host line holding the chunk's first hosted value; the next
/// ones are just below.
const HOSTED_FIRST: u32 = 15;

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
    /// Whether the record of what this mirror wrote since [`Self::restart_record`] lists
    /// every place (see [`crate::written`]).
    fn record_complete(&self) -> bool;
    /// Makes this mirror byte-equal to `src`, copying the places `src`'s complete record
    /// lists, given that this mirror equals what `src` was when its record restarted.
    fn copy_from_twin(&mut self, src: &Self);
    /// Starts a new record: this mirror equals its twin from here on.
    fn restart_record(&mut self);
    /// Panics unless this mirror holds the same bytes as `other`.
    #[cfg(test)]
    fn assert_same_bytes(&self, other: &Self);
}

/// The 16-bit lookup index (see the module comment).
#[derive(Clone, Debug)]
pub(crate) struct Dir16 {
    pub(crate) top: Top,
    pub(crate) lines: HugeVec<Line>,
    /// free[n]: first lines of free blocks of n lines.
    free: Vec<Vec<u32>>,
    /// The chunks reported since the record restarted (their top entries and blocks).
    written: Marks,
    /// The blocks released since the record restarted.
    released: Released,
}

impl Default for Dir16 {
    fn default() -> Self {
        Dir16 {
            top: Top::new(crate::trie::NONE),
            lines: HugeVec::new(),
            free: vec![Vec::new(); MAX_BLOCK + 1],
            written: Marks::default(),
            released: Released::default(),
        }
    }
}

/// Lines of a quarter in code `c`.
#[inline(always)]
fn code_lines(c: u32) -> usize {
    (1 << c) & 7
}

/// The code a quarter with run bitmap `runs` (more than one run) needs.
fn code_for(runs: u64) -> u32 {
    if runs.count_ones() as usize <= PACKED_RUNS {
        0
    } else if (runs as u32 | 1).count_ones() as usize <= HALF_RUNS[0]
        && ((runs >> 32) as u32 | 1).count_ones() as usize <= HALF_RUNS[1]
    {
        1
    } else {
        2
    }
}

/// What a quarter asks of the layout: the code it takes on its own (3 for a single value) and
/// the words of its first line it uses in that code, or in code 0 for a single value.
#[derive(Clone, Copy, Debug)]
struct Need {
    code: u32,
    used: u32,
}

/// The `Need` of a quarter as the trie reports it.
fn need_of(q: Quarter<'_>) -> Need {
    match q {
        Quarter::Value(_) | Quarter::Node(_) => Need { code: 3, used: 3 },
        Quarter::Runs(_, runs) => {
            let code = code_for(runs);
            let used = match code {
                0 => 2 + runs.count_ones(),
                1 => 1 + (runs as u32 | 1).count_ones(),
                _ => LINE_WORDS as u32,
            };
            Need { code, used }
        }
    }
}

/// The host of a chunk in `codes`: its first code-0 or code-1 quarter.
fn host(codes: [u32; 4]) -> Option<usize> {
    (0..4).find(|&q| codes[q] < 2)
}

/// The codes of a chunk's quarters: each its own code, except single values beyond the host's
/// room, which take code 0 -- the last ones first, or the first one when there is no host (it
/// then becomes the host). A function of the quarters alone, so the layout is canonical.
fn codes_for(needs: [Need; 4]) -> [u32; 4] {
    let mut codes = needs.map(|n| n.code);
    loop {
        let hosted = codes.iter().filter(|&&c| c == 3).count() as u32;
        if hosted == 0 {
            return codes;
        }
        let demote = match host(codes) {
            Some(h) if needs[h].used + hosted <= LINE_WORDS as u32 => return codes,
            Some(_) => (0..4).rev().find(|&q| codes[q] == 3),
            None => (0..4).find(|&q| codes[q] == 3),
        };
        codes[demote.expect("a hosted quarter")] = 0;
    }
}

/// Where each quarter lives, for every 8-bit code word: one byte per quarter (quarter 0
/// lowest), the line's offset within the block in the low nibble and, for code 3, the hosted
/// word in the high nibble (the offset is then the host's). A table, so that a lookup needs no
/// arithmetic over the other quarters' codes.
static PLACES: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut codes = 0;
    while codes < 256 {
        let mut off = [0u32; 4];
        let mut at = 0u32;
        let mut host = 4;
        let mut q = 0;
        while q < 4 {
            let c = (codes >> (2 * q)) & 3;
            off[q] = at;
            if c < 2 && host == 4 {
                host = q;
            }
            at += ((1 << c) & 7) as u32;
            q += 1;
        }
        let mut packed = 0u32;
        let mut hosted = 0;
        q = 0;
        while q < 4 {
            let byte = if (codes >> (2 * q)) & 3 == 3 {
                let word = HOSTED_FIRST - hosted;
                hosted += 1;
                (if host < 4 { off[host] } else { 0 }) | word << 4
            } else {
                off[q]
            };
            packed |= byte << (8 * q);
            q += 1;
        }
        t[codes] = packed;
        codes += 1;
    }
    t
};

/// How a lookup finds a slot's value, for every (8-bit code word, quarter) pair: index
/// `codes << 2 | q`. A table, so that a lookup does no arithmetic over the quarters' codes and
/// takes no branch on them. With `s` the slot (0..64), the value's *base* is at byte
/// `((s * mul) & gm) + off` of the block, and the value is `r` words after its base, `r` the
/// count of set bits among the first `n = (s + 1) & nm` bits of the base line's first two words
/// (the run bitmap; see [`read_value`]):
/// - code 0: base at word 1 of the quarter's line, n = s + 1 (r >= 1: runs from word 2);
/// - code 1: base at the start of the half's line (`(s * 2) & 64`), n = s + 1: the first line's
///   bitmap is its word 0 (runs from word 1); the second line's word 0 is 1 and its bitmap word
///   1, so that `r` counts one more there, where runs start at word 2;
/// - code 2: base at the slot's own word (`s * 4`), n = 0;
/// - code 3: base at the hosted word of the host's line, n = 0.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
struct Lane {
    mul: u32,
    gm: u32,
    off: u32,
    /// All ones where the run bitmap counts (codes 0 and 1), else 0.
    nm: u32,
}

static LANES: [Lane; 1024] = {
    let mut t = [Lane {
        mul: 0,
        gm: 0,
        off: 0,
        nm: 0,
    }; 1024];
    let mut k = 0;
    while k < 1024 {
        let (codes, q) = (k >> 2, k & 3);
        let place = (PLACES[codes] >> (8 * q)) & 0xFF;
        let line = (place & 15) * LINE_BYTES as u32;
        t[k] = match (codes >> (2 * q)) & 3 {
            0 => Lane {
                mul: 0,
                gm: 0,
                off: line + 4,
                nm: u32::MAX,
            },
            1 => Lane {
                mul: 2,
                gm: LINE_BYTES as u32,
                off: line,
                nm: u32::MAX,
            },
            2 => Lane {
                mul: 4,
                gm: 0xFF,
                off: line,
                nm: 0,
            },
            _ => Lane {
                mul: 0,
                gm: 0,
                off: line + 4 * (place >> 4),
                nm: 0,
            },
        };
        k += 1;
    }
    t
};

/// Bytes in a line.
const LINE_BYTES: usize = std::mem::size_of::<Line>();

impl Lane {
    /// The lane of `addr` under chunk entry `e` (bounded nonsense for a value entry).
    #[inline(always)]
    fn of(e: u32, addr: u32) -> &'static Lane {
        let k = ((e >> (CODES_SHIFT - 2)) & 0x3FC) | ((addr >> 14) & 3);
        &LANES[k as usize]
    }

    /// The byte offset within the lines of the value's base for slot `s` under chunk entry `e`.
    #[inline(always)]
    fn base(&self, e: u32, s: u32) -> usize {
        (e & BASE_MASK) as usize * LINE_BYTES + (((s * self.mul) & self.gm) + self.off) as usize
    }

    /// How many run-bitmap bits count for slot `s` (`n` in the table's comment).
    #[inline(always)]
    fn n(&self, s: u32) -> u32 {
        (s + 1) & self.nm
    }

    /// Bits `0..n` of `head` (`n <= 64`), shifted to the top, portably.
    #[inline(always)]
    fn low_bits(head: u64, n: u32) -> u64 {
        head.checked_shl(64 - n).unwrap_or(0)
    }
}

/// The slot of `addr` within its quarter.
#[inline(always)]
fn slot_of(addr: u32) -> u32 {
    (addr >> 8) & 63
}

/// The line a single lookup of a value entry reads instead of a block line, so that it takes
/// no branch.
static ZERO_LINE: Line = Line([0; 16]);

/// The 16-bit top array, held as lines so that it is line-aligned (a batch lane of a value
/// entry reads its own entry's line as if it were a block line) and lives on the heap only (a
/// 256 KiB array by value would pass through the stack when built or cloned).
#[derive(Clone, Debug)]
pub(crate) struct Top(Box<[Line]>);

impl Top {
    /// Every entry `v`.
    fn new(v: u32) -> Top {
        Top(vec![Line([v; LINE_WORDS]); TOP / LINE_WORDS].into_boxed_slice())
    }
}

impl std::ops::Deref for Top {
    type Target = [u32; TOP];
    fn deref(&self) -> &[u32; TOP] {
        // SAFETY: TOP / LINE_WORDS lines (built so in `new`, never resized) of LINE_WORDS u32s
        // each, `repr(C)`: exactly TOP contiguous, initialised, aligned u32s.
        unsafe { &*self.0.as_ptr().cast::<[u32; TOP]>() }
    }
}

impl std::ops::DerefMut for Top {
    fn deref_mut(&mut self) -> &mut [u32; TOP] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { &mut *self.0.as_mut_ptr().cast::<[u32; TOP]>() }
    }
}

/// The raw slot value a single-value quarter lays out (`TRIE | n` for a node).
fn raw(q: Quarter<'_>) -> Option<u32> {
    match q {
        Quarter::Value(v) => Some(v),
        Quarter::Node(n) => Some(TRIE | n),
        Quarter::Runs(..) => None,
    }
}

/// The quarter a raw single value stands for.
fn single_quarter<'a>(v: u32) -> Quarter<'a> {
    if v & TRIE != 0 {
        Quarter::Node(v & !TRIE)
    } else {
        Quarter::Value(v)
    }
}

/// Bits `0..n` of `head` (`n <= 64`), with one `bzhi`.
#[inline(always)]
fn bzhi(head: u64, n: u32) -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: only reached from `lookup_group` with `BMI2`, whose caller promises bmi2.
    return unsafe { core::arch::x86_64::_bzhi_u64(head, n) };
    #[cfg(not(target_arch = "x86_64"))]
    return Lane::low_bits(head, n);
}

/// The x86-64-v3 (avx2) form of a batch's locating pass.
#[cfg(target_arch = "x86_64")]
mod v3 {
    use super::{BASE_MASK, CODES_SHIFT, PLACES, TOP_BITS};
    use core::arch::x86_64::*;

    /// Locates lanes `addrs[0..8]` as the scalar pass of `Dir16::lookup_group` does, eight at a
    /// time: writes each lane's value base to `at[0..8]` and bit count to `cnt[0..8]`, and
    /// prefetches the bases' lines. Computes each lane's `LANES` row from its code instead of
    /// reading it: with c the quarter's code and `place` its `PLACES` byte, the base is the
    /// quarter's line (`place & 15`) plus `((s << sh) & gm) + add`, sh, gm and add picked from
    /// constants by c (code 3 adds its hosted word, `place >> 4`), and the count is `s + 1`
    /// for codes 0 and 1, else 0.
    /// # Safety
    /// The CPU must have avx2; `top` must be the 2^16-entry top array, `lines` the lines' start,
    /// `addrs` 8 readable addresses, `at` and `cnt` 8 writable elements.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn locate8(
        top: *const u32,
        lines: usize,
        addrs: *const u32,
        at: *mut usize,
        cnt: *mut u32,
    ) {
        let k = _mm256_set1_epi32;
        // SAFETY: the caller's contract; every gather index is below its table's length (top
        // index < 2^16, code word < 256).
        unsafe {
            let a = _mm256_loadu_si256(addrs.cast());
            let t = _mm256_srli_epi32::<{ 32 - TOP_BITS as i32 }>(a);
            let e = _mm256_i32gather_epi32::<4>(top.cast(), t);
            let codes = _mm256_and_si256(_mm256_srli_epi32::<{ CODES_SHIFT as i32 }>(e), k(0xFF));
            let q = _mm256_and_si256(_mm256_srli_epi32::<14>(a), k(3));
            let c = _mm256_and_si256(_mm256_srlv_epi32(codes, _mm256_add_epi32(q, q)), k(3));
            let places = _mm256_i32gather_epi32::<4>(PLACES.as_ptr().cast(), codes);
            let place = _mm256_and_si256(
                _mm256_srlv_epi32(places, _mm256_slli_epi32::<3>(q)),
                k(0xFF),
            );
            let s = _mm256_and_si256(_mm256_srli_epi32::<8>(a), k(63));
            // Byte c of each constant is code c's sh, gm and add.
            let c8 = _mm256_slli_epi32::<3>(c);
            let pick = |bytes: i32| _mm256_and_si256(_mm256_srlv_epi32(k(bytes), c8), k(0xFF));
            let sh = pick(0x0002_0100);
            let gm = pick(0x00FF_4000);
            let hosted = _mm256_and_si256(
                _mm256_cmpeq_epi32(c, k(3)),
                _mm256_slli_epi32::<2>(_mm256_srli_epi32::<4>(place)),
            );
            let g = _mm256_add_epi32(
                _mm256_and_si256(_mm256_sllv_epi32(s, sh), gm),
                _mm256_add_epi32(pick(0x0000_0004), hosted),
            );
            let line = _mm256_add_epi32(
                _mm256_and_si256(e, k(BASE_MASK as i32)),
                _mm256_and_si256(place, k(15)),
            );
            let off = _mm256_add_epi32(_mm256_slli_epi32::<6>(line), g);
            let chunk = _mm256_srai_epi32::<31>(e);
            let n = _mm256_and_si256(
                _mm256_and_si256(_mm256_add_epi32(s, k(1)), _mm256_cmpgt_epi32(k(2), c)),
                chunk,
            );
            _mm256_storeu_si256(cnt.cast(), n);
            // Bases as pointers: into the lines for chunk lanes, the lane's own top entry else.
            let own = _mm256_slli_epi32::<2>(t);
            let wide = |v: __m256i, half: bool| {
                _mm256_cvtepu32_epi64(if half {
                    _mm256_extracti128_si256::<1>(v)
                } else {
                    _mm256_castsi256_si128(v)
                })
            };
            for (h, half) in [false, true].into_iter().enumerate() {
                let in_lines = _mm256_add_epi64(wide(off, half), _mm256_set1_epi64x(lines as i64));
                let in_top = _mm256_add_epi64(wide(own, half), _mm256_set1_epi64x(top as i64));
                let mask = _mm256_cvtepi32_epi64(if half {
                    _mm256_extracti128_si256::<1>(chunk)
                } else {
                    _mm256_castsi256_si128(chunk)
                });
                _mm256_storeu_si256(
                    at.add(4 * h).cast(),
                    _mm256_blendv_epi8(in_top, in_lines, mask),
                );
            }
            for j in 0..8 {
                crate::prefetch(*at.add(j) as *const u8);
            }
        }
    }
}

/// The value `r` words after the value's base at address `base`, with `r` the count of the bits
/// `bits` keeps of the line's head (its first two words).
/// # Safety
/// `base` must point into a readable line-aligned line whose word `r` words after `base` is in
/// the line: a block line located by a chunk entry (the layout keeps every run value, hence
/// every `r`, inside its line: see `code_for` and `codes_for`), `ZERO_LINE` (head 0, so `r` is
/// 0), or a top-array entry (`Top` is line-aligned) with `bits` keeping none.
#[inline(always)]
unsafe fn read_value(base: usize, bits: impl Fn(u64) -> u64) -> u32 {
    // SAFETY: the caller's contract: the line holding `base` is readable, and so is the word.
    unsafe {
        let head = ((base & !(LINE_BYTES - 1)) as *const u64).read();
        *(base as *const u32).add(bits(head).count_ones() as usize)
    }
}

impl Dir16 {
    /// The slot value for `addr`: a value in the internal encoding (NONE for none), or `TRIE |
    /// n` when trie node n answers. Branch-free, so that a loop of lookups overlaps their
    /// memory reads.
    #[inline(always)]
    pub(crate) fn lookup(&self, addr: u32) -> u32 {
        let e = self.top[(addr >> (32 - TOP_BITS)) as usize];
        let chunk = e & CHUNK != 0;
        let s = slot_of(addr);
        let lane = Lane::of(e, addr);
        // A conditional move: a branch here would be mispredicted on every other lookup.
        let base = std::hint::select_unpredictable(
            chunk,
            self.lines.as_ptr() as usize + lane.base(e, s),
            &ZERO_LINE as *const Line as usize,
        );
        // Bits 0..=s of the head, shifted to the top (a shift count is taken mod 64), where the
        // lane counts them (`n` is s + 1 or 0).
        let keep = lane.nm as i32 as i64 as u64;
        // SAFETY: a chunk entry names lines of its own live block inside `self.lines` (see
        // `write_block`), which cannot move or be freed while `self` is borrowed; else `base`
        // is `ZERO_LINE`.
        let v = unsafe { read_value(base, |head| head.wrapping_shl(!s) & keep) };
        std::hint::select_unpredictable(chunk, v, e)
    }

    /// Batched `lookup` of up to 64 addresses, answering in the external encoding
    /// ([`crate::NO_ROUTE`] for none): every lane's top entry is prefetched, then every lane's
    /// value base located and its line prefetched, before any line is read; lanes take no
    /// data-dependent branch. A lane whose top entry is a value reads that entry back as its
    /// value (base: the entry, no bit counted). `BMI2`: locate eight lanes at a time with
    /// avx2 and count the head's bits with `bzhi`. Lanes the trie answers
    /// are left to the caller: bit i of the result set means `out[i]` must be looked up in the
    /// trie.
    ///
    /// # Safety
    /// With `BMI2`, the CPU must have avx2 and bmi2 (and the caller is best compiled with
    /// them, so that their instructions inline).
    #[inline(always)]
    pub(crate) unsafe fn lookup_group<const BMI2: bool>(
        &self,
        addrs: &[u32],
        out: &mut [u32],
    ) -> u64 {
        let n = addrs.len();
        // Checked once here, so that no lane checks its indices.
        assert!(n <= 64 && out.len() == n);
        // Each lane's value base and bit count (written before read, so left uninitialised:
        // clearing them cost more than a lane's work).
        let mut at = [std::mem::MaybeUninit::<usize>::uninit(); 64];
        let mut cnt = [std::mem::MaybeUninit::<u32>::uninit(); 64];
        // Each lane's value in the internal encoding: translated into `out` by a pass of its
        // own, which then stores whole vectors (translating `out` in place compiles to masked
        // stores, several times slower on Zen 3).
        let mut raw = [0u32; 64];
        let top = &*self.top;
        for &a in addrs {
            crate::prefetch(&top[(a >> (32 - TOP_BITS)) as usize]);
        }
        let lines = self.lines.as_ptr() as usize;
        // Lanes below `first` are located eight at a time (x86-64-v3), the rest one by one.
        #[cfg(target_arch = "x86_64")]
        let first = if BMI2 { n & !7 } else { 0 };
        #[cfg(not(target_arch = "x86_64"))]
        let first = 0;
        #[cfg(target_arch = "x86_64")]
        for i in (0..first).step_by(8) {
            // SAFETY: the CPU has avx2 (this function's contract); lanes i..i + 8 are below n,
            // inside `addrs`, `at` and `cnt`.
            unsafe {
                v3::locate8(
                    top.as_ptr(),
                    lines,
                    addrs.as_ptr().add(i),
                    at.as_mut_ptr().add(i).cast(),
                    cnt.as_mut_ptr().add(i).cast(),
                )
            };
        }
        for i in first..n {
            let a = addrs[i];
            let t = (a >> (32 - TOP_BITS)) as usize;
            let e = top[t];
            let chunk = e & CHUNK != 0;
            let s = slot_of(a);
            let lane = Lane::of(e, a);
            let base = std::hint::select_unpredictable(
                chunk,
                lines + lane.base(e, s),
                &top[t] as *const u32 as usize,
            );
            crate::prefetch(base as *const u8);
            at[i].write(base);
            cnt[i].write(std::hint::select_unpredictable(chunk, lane.n(s), 0));
        }
        for i in 0..n {
            // SAFETY: both written for every lane below n just above.
            let (base, c) = unsafe { (at[i].assume_init(), cnt[i].assume_init()) };
            // SAFETY: `base` is in a line of this chunk's live block (see `lookup`), or is the
            // lane's own top entry with a count of 0.
            raw[i] = unsafe {
                read_value(base, |head| {
                    if BMI2 {
                        bzhi(head, c)
                    } else {
                        Lane::low_bits(head, c)
                    }
                })
            };
        }
        // Bit 31 of any lane's value: some lane met a trie marker (the lanes are found again
        // below only then). A separate pass, so that it runs on vectors.
        let mut any = 0u32;
        for (o, &v) in out.iter_mut().zip(&raw) {
            any |= v;
            *o = crate::external(v);
        }
        if any & TRIE == 0 {
            return 0;
        }
        // `TRIE | n` is never `NO_ROUTE`: node indices stay far below 2^31 - 1 (the trie keeps
        // `HEADROOM` of its index space free).
        (0..n).fold(0, |m, i| {
            m | u64::from(out[i] & TRIE != 0 && out[i] != crate::NO_ROUTE) << i
        })
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
            let n = Self::block_lines(e);
            self.free[n].push(e & BASE_MASK);
            self.released.push(e & BASE_MASK, n);
        }
    }

    /// Writes quarter `q` in code `c` (not 3) at line `at`.
    fn write_quarter(&mut self, at: usize, c: u32, q: Quarter<'_>) {
        if let Some(v) = raw(q) {
            debug_assert_eq!(c, 0);
            let l = &mut self.lines[at].0;
            *l = [0; 16];
            l[0] = 1;
            l[2] = v;
            return;
        }
        let Quarter::Runs(slots, runs) = q else {
            unreachable!("single values are handled above")
        };
        match c {
            0 => {
                let l = &mut self.lines[at].0;
                l[0] = runs as u32;
                l[1] = (runs >> 32) as u32;
                fill_runs(&mut l[2..], slots, 0, runs);
            }
            1 => {
                let first = runs as u32;
                let l = &mut self.lines[at].0;
                l[0] = first;
                fill_runs(&mut l[1..], slots, 0, u64::from(first));
                let second = (runs >> 32) as u32 | 1;
                let l = &mut self.lines[at + 1].0;
                l[0] = 1;
                l[1] = second;
                fill_runs(&mut l[2..], slots, 32, u64::from(second));
            }
            _ => {
                for (i, part) in slots.chunks_exact(16).enumerate() {
                    self.lines[at + i].0.copy_from_slice(part);
                }
            }
        }
    }

    /// The four quarter codes of chunk entry `e`.
    fn codes(e: u32) -> [u32; 4] {
        std::array::from_fn(|q| (e >> (CODES_SHIFT + 2 * q as u32)) & 3)
    }

    /// Lines of the block of chunk entry `e`.
    fn block_lines(e: u32) -> usize {
        Self::codes(e).iter().map(|&c| code_lines(c)).sum()
    }

    /// Line and word (for code 3) of quarter `q` of chunk entry `e`.
    fn place(e: u32, q: usize) -> (usize, usize) {
        let place = (PLACES[((e >> CODES_SHIFT) & 0xFF) as usize] >> (8 * q)) & 0xFF;
        (
            ((e & BASE_MASK) + (place & 15)) as usize,
            (place >> 4) as usize,
        )
    }

    /// The raw value of quarter `q` of chunk entry `e` if it is a single value (`TRIE | n`
    /// included).
    fn single(&self, e: u32, q: usize) -> Option<u32> {
        let (line, word) = Self::place(e, q);
        let l = &self.lines[line].0;
        match Self::codes(e)[q] {
            3 => Some(l[word]),
            0 => (l[0] == 1 && l[1] == 0).then_some(l[2]),
            _ => None,
        }
    }

    /// The value of quarter `q` of chunk entry `e` if it is uniform.
    fn uniform(&self, e: u32, q: usize) -> Option<u32> {
        self.single(e, q).filter(|v| v & TRIE == 0)
    }

    /// The `Need` of quarter `q` of chunk entry `e` as laid out now.
    fn need_at(&self, e: u32, q: usize) -> Need {
        if self.single(e, q).is_some() {
            return Need { code: 3, used: 3 };
        }
        let c = Self::codes(e)[q];
        let l = &self.lines[Self::place(e, q).0].0;
        let used = match c {
            0 => 2 + l[0].count_ones() + l[1].count_ones(),
            1 => 1 + l[0].count_ones(),
            _ => LINE_WORDS as u32,
        };
        Need { code: c, used }
    }

    /// Lays chunk `ch` out afresh from its four quarters (`None`: keep that quarter's lines from
    /// the current block), or makes it a value when all four are the same value.
    fn write_block(&mut self, ch: usize, qs: [Option<Quarter<'_>>; 4]) {
        let old = self.top[ch];
        // Kept single values are laid out again: their code may change with the others'.
        let kept: [Option<u32>; 4] =
            std::array::from_fn(|q| qs[q].is_none().then(|| self.single(old, q)).flatten());
        let qs: [Option<Quarter<'_>>; 4] =
            std::array::from_fn(|q| qs[q].or(kept[q].map(single_quarter)));
        if let Some(Quarter::Value(v)) = qs[0] {
            if qs[1..]
                .iter()
                .all(|q| matches!(q, Some(Quarter::Value(w)) if *w == v))
            {
                self.release(old);
                self.top[ch] = v;
                return;
            }
        }
        let needs: [Need; 4] = std::array::from_fn(|q| match qs[q] {
            Some(quarter) => need_of(quarter),
            None => self.need_at(old, q),
        });
        let codes = codes_for(needs);
        let code_word = codes
            .iter()
            .enumerate()
            .fold(0, |w, (q, &c)| w | c << (2 * q));
        let n: usize = codes.iter().map(|&c| code_lines(c)).sum();
        let at = self.alloc(n) as usize;
        let e = CHUNK | code_word << CODES_SHIFT | at as u32;
        for q in 0..4 {
            let (line, _) = Self::place(e, q);
            match qs[q] {
                Some(_) if codes[q] == 3 => {}
                Some(quarter) => self.write_quarter(line, codes[q], quarter),
                None => {
                    let (from, _) = Self::place(old, q);
                    self.lines
                        .copy_within(from..from + code_lines(codes[q]), line);
                }
            }
        }
        // Hosted values last: the host's own write fills its line.
        for q in 0..4 {
            if codes[q] == 3 {
                let (line, word) = Self::place(e, q);
                self.lines[line].0[word] = qs[q].and_then(raw).expect("a single value");
            }
        }
        self.release(old);
        self.top[ch] = e;
    }
}

impl Dir16 {
    /// True when quarter `qi` of chunk entry `e` can take `q` in place, known without the
    /// other quarters' needs: the common update of a quarter of runs that keeps its code, in a
    /// chunk where no single value had to give up code 3 (so the host is the one its own code
    /// makes), and which still leaves the host room for the hosted values.
    fn keeps_layout(&self, e: u32, qi: usize, q: Quarter<'_>) -> bool {
        let Quarter::Runs(_, runs) = q else {
            return false;
        };
        let codes = Self::codes(e);
        if codes[qi] == 3 || code_for(runs) != codes[qi] {
            return false;
        }
        if (0..4).any(|o| codes[o] == 0 && self.single(e, o).is_some()) {
            return false;
        }
        let hosted = codes.iter().filter(|&&c| c == 3).count() as u32;
        host(codes) != Some(qi) || need_of(q).used + hosted <= LINE_WORDS as u32
    }

    /// Rewrites quarter `qi` of chunk entry `e` as `q`, in place (the layout stays).
    fn rewrite(&mut self, e: u32, qi: usize, q: Quarter<'_>) {
        let codes = Self::codes(e);
        let (line, word) = Self::place(e, qi);
        if codes[qi] == 3 {
            self.lines[line].0[word] = raw(q).expect("a single value");
            return;
        }
        let first = self.lines[line].0;
        self.write_quarter(line, codes[qi], q);
        // If this quarter hosts the others, its write cleared their words.
        if host(codes) == Some(qi) {
            for o in (0..4).filter(|&o| codes[o] == 3) {
                let w = Self::place(e, o).1;
                self.lines[line].0[w] = first[w];
            }
        }
    }
}

/// Fills `dst` with runs: bit i of `runs` starts a run at `dst[i]`, the runs' values are
/// `values` in order (`fill_runs` backwards).
fn expand_runs(dst: &mut [u32], mut runs: u64, values: &[u32]) {
    for &v in values {
        if runs == 0 {
            break;
        }
        let from = runs.trailing_zeros() as usize;
        runs &= runs - 1;
        let to = if runs == 0 {
            dst.len()
        } else {
            runs.trailing_zeros() as usize
        };
        dst[from..to].fill(v);
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
        self.written.mark(ch, TOP);
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
        let becomes_value = match q {
            Quarter::Value(v) => (0..4)
                .filter(|&o| o != qi)
                .all(|o| self.uniform(e, o) == Some(v)),
            _ => false,
        };
        let codes = Self::codes(e);
        if self.keeps_layout(e, qi, q) {
            return self.rewrite(e, qi, q);
        }
        let needs: [Need; 4] = std::array::from_fn(|o| {
            if o == qi {
                need_of(q)
            } else {
                self.need_at(e, o)
            }
        });
        if becomes_value || codes_for(needs) != codes {
            let mut qs = [None; 4];
            qs[qi] = Some(q);
            return self.write_block(ch, qs);
        }
        self.rewrite(e, qi, q);
    }

    fn refill(&mut self, s: usize, qs: [Quarter<'_>; 4]) {
        self.written.mark(s >> 2, TOP);
        self.write_block(s >> 2, qs.map(Some));
    }

    fn slots(&self, s: usize) -> [u32; SLOTS] {
        let (ch, q) = (s >> 2, s & 3);
        let e = self.top[ch];
        if e & CHUNK == 0 {
            return [e; SLOTS];
        }
        if let Some(v) = self.single(e, q) {
            return [v; SLOTS];
        }
        let (at, _) = Self::place(e, q);
        let mut slots = [0; SLOTS];
        match Self::codes(e)[q] {
            0 => {
                let l = &self.lines[at].0;
                expand_runs(&mut slots, u64::from(l[0]) | u64::from(l[1]) << 32, &l[2..]);
            }
            1 => {
                let (first, second) = slots.split_at_mut(32);
                let l = &self.lines[at].0;
                expand_runs(first, u64::from(l[0]), &l[1..]);
                let l = &self.lines[at + 1].0;
                expand_runs(second, u64::from(l[1]), &l[2..]);
            }
            _ => {
                for (i, part) in slots.chunks_exact_mut(LINE_WORDS).enumerate() {
                    part.copy_from_slice(&self.lines[at + i].0);
                }
            }
        }
        slots
    }

    fn memory_bytes(&self) -> usize {
        TOP * 4
            + self.lines.capacity() * std::mem::size_of::<Line>()
            + self.free.iter().map(|f| f.capacity() * 4).sum::<usize>()
            + self.written.heap_bytes()
            + self.released.heap_bytes()
    }

    fn record_complete(&self) -> bool {
        self.released.ranges().is_some()
    }

    fn copy_from_twin(&mut self, src: &Self) {
        self.lines.grow_like(&src.lines, Line::default());
        for &ch in src.written.listed() {
            let e = src.top[ch as usize];
            self.top[ch as usize] = e;
            if e & CHUNK != 0 {
                let at = (e & BASE_MASK) as usize;
                let lines = at..at + Self::block_lines(e);
                self.lines[lines.clone()].copy_from_slice(&src.lines[lines]);
            }
        }
        for lines in src.released.ranges().into_iter().flatten() {
            self.lines[lines.clone()].copy_from_slice(&src.lines[lines]);
        }
        for (d, s) in self.free.iter_mut().zip(&src.free) {
            copy_vec(d, s);
        }
    }

    fn restart_record(&mut self) {
        self.written.clear();
        self.released.clear();
    }

    #[cfg(test)]
    fn assert_same_bytes(&self, other: &Self) {
        let lines = |m: &Self| -> Vec<[u32; LINE_WORDS]> { m.lines.iter().map(|l| l.0).collect() };
        assert_eq!(*self.top, *other.top);
        assert_eq!(lines(self), lines(other));
        assert_eq!(self.free, other.free);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The /16 the tests lay out.
    const CH: usize = 0x0A01;

    /// A quarter to report: a single value, a node, or runs drawn from `toggles` (bit i: slot
    /// i + 1 starts a new run) over values `vals`.
    #[derive(Clone, Debug)]
    enum Q {
        Value(u32),
        Node(u32),
        Runs(u64, Vec<u32>),
    }

    fn quarter() -> impl Strategy<Value = Q> {
        prop_oneof![
            3 => (0u32..3).prop_map(Q::Value),
            1 => (0u32..3).prop_map(Q::Node),
            // Few, some and many runs: codes 0, 1 and 2.
            2 => (any::<u64>(), 0u32..3, prop::collection::vec(0u32..5, 64))
                .prop_map(|(t, density, vals)| {
                    let t = match density { 0 => t & t >> 7 & t >> 13, 1 => t & t >> 3, _ => t };
                    Q::Runs(t, vals)
                }),
        ]
    }

    /// The slot values of `q`, and the quarter as the trie reports it.
    fn expand(q: &Q) -> [u32; SLOTS] {
        match q {
            Q::Value(v) => [*v; SLOTS],
            Q::Node(n) => [TRIE | n; SLOTS],
            Q::Runs(t, vals) => {
                let mut slots = [0; SLOTS];
                let mut v = vals[0];
                for (i, s) in slots.iter_mut().enumerate() {
                    if i > 0 && t >> (i - 1) & 1 != 0 {
                        // A new run: a value different from the previous one.
                        v = (v + 1 + vals[i] % 4) % 5;
                    }
                    *s = v;
                }
                slots
            }
        }
    }

    fn report(slots: &[u32; SLOTS]) -> Quarter<'_> {
        let runs = (0..SLOTS).fold(0u64, |m, s| {
            m | u64::from(s == 0 || slots[s] != slots[s - 1]) << s
        });
        if runs == 1 {
            single_quarter(slots[0])
        } else {
            Quarter::Runs(slots, runs)
        }
    }

    /// Batched lookups of `addrs` (whole groups and short ones), portable and, where the CPU
    /// has it, x86-64-v3, against `want`.
    fn check_batches(d: &Dir16, addrs: &[u32], want: &[u32]) -> Result<(), TestCaseError> {
        let mut out = vec![0; 64];
        #[cfg(target_arch = "x86_64")]
        let v3 = crate::has_x86_v3();
        #[cfg(not(target_arch = "x86_64"))]
        let v3 = false;
        for (group, want) in addrs.chunks(64).zip(want.chunks(64)) {
            for len in [group.len(), 13] {
                let (group, out) = (&group[..len], &mut out[..len]);
                for fast in [false, v3] {
                    // SAFETY: the portable form has no requirement; the v3 form runs only
                    // where the CPU has it.
                    let trie = unsafe {
                        if fast {
                            d.lookup_group::<true>(group, out)
                        } else {
                            d.lookup_group::<false>(group, out)
                        }
                    };
                    for (i, &a) in group.iter().enumerate() {
                        prop_assert_eq!(out[i], crate::external(want[i]), "batch {:#x}", a);
                        prop_assert_eq!(trie >> i & 1 != 0, want[i] & TRIE != 0);
                    }
                }
            }
        }
        Ok(())
    }

    fn check(d: &Dir16, model: &[[u32; SLOTS]; 4]) -> Result<(), TestCaseError> {
        let addrs: Vec<u32> = (0..256u32)
            .map(|s| (CH as u32) << 16 | s << 8 | 0x5A)
            .collect();
        let want: Vec<u32> = model.iter().flatten().copied().collect();
        for (&a, &w) in addrs.iter().zip(&want) {
            prop_assert_eq!(d.lookup(a), w, "single {:#x}", a);
        }
        check_batches(d, &addrs, &want)?;
        // Lanes of a value entry (the next /16, empty) between the chunk's.
        let (mixed, want): (Vec<u32>, Vec<u32>) = addrs
            .iter()
            .zip(&want)
            .flat_map(|(&a, &w)| [(a, w), (a + (1 << 16), crate::trie::NONE)])
            .unzip();
        check_batches(d, &mixed, &want)?;
        for (q, m) in model.iter().enumerate() {
            prop_assert_eq!(&d.slots(CH << 2 | q)[..], &m[..]);
        }
        let uniform = model
            .iter()
            .all(|m| m.iter().all(|&v| v == model[0][0] && v & TRIE == 0));
        prop_assert_eq!(d.top[CH] & CHUNK == 0, uniform);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Quarters changed one by one, and the same quarters laid out at once, answer every
        /// slot as reported, single and batched, whatever codes and hosting they need.
        #[test]
        fn quarters_match_their_slots(ops in prop::collection::vec((0usize..4, quarter()), 1..60)) {
            let mut d = Dir16::default();
            let mut model = [[crate::trie::NONE; SLOTS]; 4];
            for (qi, q) in &ops {
                model[*qi] = expand(q);
                d.direct_changed(CH << 2 | qi, report(&model[*qi]));
                check(&d, &model)?;
            }
            let mut fresh = Dir16::default();
            fresh.refill(CH << 2, std::array::from_fn(|q| report(&model[q])));
            check(&fresh, &model)?;
            prop_assert_eq!(fresh.top[CH] >> CODES_SHIFT, d.top[CH] >> CODES_SHIFT);
        }
    }

    /// Every code word's places: code-3 quarters share the host's line at distinct words from
    /// 15 down; the others follow each other.
    #[test]
    fn places_follow_the_codes() {
        let codes = [2, 3, 0, 3];
        let word = codes
            .iter()
            .enumerate()
            .fold(0, |w, (q, &c)| w | c << (2 * q));
        let p = PLACES[word as usize];
        let byte = |q: usize| (p >> (8 * q)) & 0xFF;
        assert_eq!(byte(0), 0);
        assert_eq!(byte(2), 4);
        assert_eq!(byte(1), 4 | 15 << 4);
        assert_eq!(byte(3), 4 | 14 << 4);
    }
}
