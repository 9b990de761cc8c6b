//! The input route cache of one worker, and route hints inside a vector: the input route
//! decision ([`Fib::route_input`]) remembered per [`InputCacheKey`] (input link, destination,
//! source, tos or traffic class, mark), so that a packet of a key seen before takes a probe
//! instead of the rules walk, the lookups and the source check.
//!
//! Shape: two set-associative tables allocated once by [`InputCache::new`], one for IPv4 keys
//! and one for the others, each of sets of [`WAYS`] entries. A set's tags and stamps fill one
//! 64-byte line ([`Tags`]); the entries live apart and are read only when a tag matches. An
//! IPv4 entry is one line, its key and the whole decision packed together
//! ([`fibre_fib::InputLine4`]): a hit reads that line and nothing else, which is what lets the
//! cache pay where the uncached decision is already cheap (thousands of keys per worker beside
//! a table whose hot lines stay in L2: an entry of two lines cost more L3 reads than the
//! decision it saved, crates/fibre-bench/RESULTS.md). An IPv6 entry ([`ENTRY_BYTES`] = 128)
//! holds the key and the [`InputMemo`] as they are. The value is the decision, or for a
//! multipath route the group with the route's first usable next hop (a typed index with its
//! generation, [`fibre_fib::DstRef`]); the leg is chosen per packet by the multipath hash
//! ([`Fib::route_input_replay`]). Memory per worker, fixed at creation: `entries * 192 +
//! entries / 4 * 64` bytes (entries of 64 and 128 bytes, a line of tags per 8 of each) and
//! 17 KiB of working arrays (the default, 8192 entries of each family: 1.5 MiB + 128 KiB +
//! 17 KiB; `a_set_is_one_line_of_tags_and_an_entry_one_or_two`), of which a workload touches
//! the lines of the keys it has.
//!
//! Validity, checked lazily on lookup, never by a timer or a sweep: each entry carries the
//! cache's stamp of when it was made, and an entry answers only while its stamp is the
//! current one. The stamp moves whenever the routing state the worker reads has another
//! [`Fib::gen`] (every change to routes, rules, links, addresses, next hops and settings
//! moves it, in the copy the writer publishes as in the one it keeps; neighbours do not, and
//! no input decision reads them). Time is the other input: a route deadline
//! ([`Fib::route_input_deadline`]) makes lookups skip the route from then on. A chunk of
//! packets uses the cache only when its clock reading at the start is before the earliest
//! deadline, and when its reading at the end is not, the answers it took from the cache are
//! made again without it (the lookups in between read the same monotonic clock, so none of
//! them saw the deadline pass unless the end reading did).
//!
//! "After", for the publication (fibre-publish's protocol): a change is published when the
//! writer's `fibre_publish::Writer::publish` returns. A vector the worker starts after that
//! (its read guard taken after the publish, as fibre-publish orders reads) reads that copy or a
//! newer one, whose generation differs from every copy before the change, so no entry made
//! before the change answers a packet of that vector. A vector that took its guard before the
//! publish may still answer from the old copy, with or without the cache: that is the
//! publication's own semantics, not the cache's.
//!
//! Hints: a packet whose cache key is its predecessor's in the chunk takes the predecessor's
//! memo. The kernel's route hints (ip_extract_route_hint, ip_route_use_hint) compare only the
//! destination and tos, later also the source, and are off with custom rules; these compare
//! the whole key, so they hold with rules and multipath routes, and for strict rp_filter,
//! because the key carries the input link and source the check is made for.
//!
//! Cost: a probe hashes the key (keyed), reads the set's tag line and, on a tag match, the
//! entry; a miss adds that line and the store of the memo to the batch lookup the packet takes
//! anyway. While fewer than 1 in [`MIN_HIT_SHARE`] probes of a window of [`WINDOW`] hit, only
//! one chunk in [`SAMPLE_EVERY`] probes (and stores), the others take the hints and the batch
//! lookup alone: a flood of unique keys pays the probe on that share of its packets.
//!
//! The objections to Linux's input dst cache (Leone Fernando's series "net: dst_cache: add
//! input_dst_cache API" and "net: route: replace route hints with input_dst_cache", netdev,
//! 2024, not merged) and to the route cache removed in Linux 3.6 (merge 5e9965c15ba8 "Merge
//! branch 'kill_rtcache'"), each answered, with the test that shows it:
//! - IPv4 only: both families are cached, keyed alike; `tests/input_cache.rs`
//!   `cache_on_decides_as_cache_off` mixes IPv4 and IPv6 packets.
//! - No custom rules: rules are part of the state the generation covers, and rules whose
//!   selectors the key cannot hold (ipproto, sport, dport) make the family's lookups bypass the
//!   cache, counted (`bypassed`); `cache_on_decides_as_cache_off` adds and removes rules on
//!   every selector.
//! - No multipath: the memo keeps the group and the leg is chosen per packet, so the flow hash
//!   spreads the packets of one key as without the cache; `cache_on_decides_as_cache_off`
//!   varies ports under both hash policies, `rules_on_the_input_link_keep_multipath_legs_apart`
//!   covers legs whose source checks differ, and fibre-fib's `route_input_batch_is_route_input`
//!   replays each memo with other ports.
//! - Device teardown leaving references: an entry holds indices and generations, never a
//!   reference; removing a device moves the generation, and a group's next hop is checked
//!   against its own generation before use; `cache_on_decides_as_cache_off` removes and
//!   re-creates the egress link between packets, and `tests/input_cache_loom.rs` shows that no
//!   vector after the change was published answers from an entry made before it.
//! - Hints that let packets bypass strict rp_filter: the key holds the input link and source,
//!   and a memo keeps the source check's outcome for exactly them;
//!   `strict_and_loose_rp_filter_and_martians_hold_for_cached_packets`.
//! - Route expiry: `an_expired_route_is_not_answered_from_the_cache`.
//! - Flood and DoS (the old cache's garbage-collection storms and hash-chain attacks): fixed
//!   size, no allocation after `new`, a keyed hash (`fibre_fib::hash::KeyedState`) the sender
//!   cannot aim at one set, a full set replaces a way the hash and a count of evictions pick
//!   (so no two keys evict each other for ever), a bounded share of probes while the cache
//!   does not pay, every decision meanwhile the uncached one; `tests/input_cache_flood.rs`
//!   `a_flood_of_unique_keys_evicts_without_allocating` and
//!   `a_cache_that_stopped_probing_decides_as_no_cache_and_probes_again_when_keys_recur`, and
//!   `fibre-bench cache` measures the flood against no cache.
//! - Modest, narrow gains: `fibre-bench cache` measures cache, hints and no cache side by
//!   side, with rules and multipath routes too (crates/fibre-bench/RESULTS.md). Where the
//!   uncached decision is already the batch path on a table in L2 (seed 000's workload without
//!   rules), a hit saves part of a decision that costs a third of the pipeline, and the one
//!   line it reads per IPv4 key comes from L3 where the table's own lines stayed in L2: the
//!   gain is a few percent; where the decision walks rules or picks a leg, it pays 2-3x.
//!
//! Who calls what: the worker's [`crate::pipeline::Dataplane`] owns one cache and calls
//! [`InputCache::decide`] for each chunk of its vector with the routing state of that vector;
//! nothing else reads or writes it, and it allocates nothing after [`InputCache::new`].

use core::net::{IpAddr, Ipv4Addr};
use std::hash::BuildHasher;

use fibre_fib::hash::KeyedState;
use fibre_fib::{Fib, InputCacheKey, InputDrop, InputKey, InputLine4, InputMemo, InputRoute};

/// Entries of a set: one line of tags and stamps (8 of each, 4 bytes each).
pub const WAYS: usize = 8;

/// The most packets [`InputCache::decide`] takes at once: the pipeline's route batch.
pub const CHUNK: usize = 64;

/// Bytes of one IPv6 entry: its key and memo, aligned to a cache line.
pub const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

/// What the cache does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every packet looked up.
    Off,
    /// Only a packet of its predecessor's key takes its decision.
    Hints,
    /// Hints, and the cache.
    Cache,
}

/// How a worker's cache is sized and used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    pub mode: Mode,
    /// Entries, rounded up to a power of two and to at least one set.
    pub entries: usize,
}

/// Entries by default: with the default vector, 8192 keys cover a worker's share of a few
/// thousand destinations times a few sources and tos values (`fibre-bench cache`'s seed
/// workload), at 1 MiB.
pub const DEFAULT_ENTRIES: usize = 8192;

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            mode: Mode::Cache,
            entries: DEFAULT_ENTRIES,
        }
    }
}

/// Packets by how the cache answered them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Answered from the cache.
    pub hits: u64,
    /// Answered from the previous packet's decision (a route hint).
    pub hinted: u64,
    /// Looked up (not in the cache, or its memo sent the packet to the general path).
    pub misses: u64,
    /// Entries replaced while still valid.
    pub evictions: u64,
    /// Looked up without the cache: a rule selects on what the key leaves out, or a route
    /// deadline passed and the garbage collection has not reclaimed the route yet.
    pub bypassed: u64,
}

impl CacheCounters {
    /// Adds another worker's counts.
    pub fn add(&mut self, o: &CacheCounters) {
        self.hits += o.hits;
        self.hinted += o.hinted;
        self.misses += o.misses;
        self.evictions += o.evictions;
        self.bypassed += o.bypassed;
    }
}

/// One set's tags (the high half of the key's hash) and stamps, in one line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Tags {
    tag: [u32; WAYS],
    stamp: [u32; WAYS],
}

/// An entry of any family: the key and memo as they are (two lines).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Entry {
    key: InputCacheKey,
    /// `None` only in an entry never written (whose stamp is 0).
    memo: Option<InputMemo>,
}

/// What a table's entries are: a key with its memo, written and compared whole.
trait Line: Copy {
    fn blank() -> Self;
    /// `memo` for `key`; `None` when this layout cannot hold them.
    fn pack(key: InputCacheKey, memo: InputMemo) -> Option<Self>;
    /// The memo, when the entry holds `key`.
    fn memo_for(&self, key: &InputCacheKey) -> Option<InputMemo>;
    fn holds(&self, key: &InputCacheKey) -> bool;
}

impl Line for Entry {
    fn blank() -> Self {
        Entry {
            key: BLANK.cache_key(),
            memo: None,
        }
    }

    fn pack(key: InputCacheKey, memo: InputMemo) -> Option<Self> {
        Some(Entry {
            key,
            memo: Some(memo),
        })
    }

    #[inline]
    fn memo_for(&self, key: &InputCacheKey) -> Option<InputMemo> {
        self.memo.filter(|_| self.key == *key)
    }

    fn holds(&self, key: &InputCacheKey) -> bool {
        self.memo.is_some() && self.key == *key
    }
}

impl Line for InputLine4 {
    fn blank() -> Self {
        InputLine4::BLANK
    }

    fn pack(key: InputCacheKey, memo: InputMemo) -> Option<Self> {
        InputLine4::pack(&key, &memo)
    }

    #[inline]
    fn memo_for(&self, key: &InputCacheKey) -> Option<InputMemo> {
        InputLine4::memo_for(self, key)
    }

    fn holds(&self, key: &InputCacheKey) -> bool {
        InputLine4::holds(self, key)
    }
}

/// A key for the unused places of the fixed arrays.
const BLANK: InputKey = InputKey {
    dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    src: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    iif: 0,
    tos: 0,
    mark: 0,
    proto: 0,
    sport: 0,
    dport: 0,
    flowlabel: 0,
};

/// How one packet of a chunk was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// Looked up without the cache.
    Bypass,
    /// Its predecessor's key: answered after it.
    Follow,
    /// To probe; `way` the way whose tag matched, `WAYS` for none.
    Probe {
        way: usize,
    },
    Hit,
    /// Looked up, its memo to be stored when `store`.
    Miss {
        store: bool,
    },
}

/// Probed packets over which the hit rate is judged (see [`InputCache::decide`]).
const WINDOW: u64 = 4096;
/// The cache is probed while at least 1 in `MIN_HIT_SHARE` probes of a window hits: below
/// that, the probes and stores of the misses cost more than the hits save (a hit saves about
/// four times what a miss costs beyond the lookup, `fibre-bench cache`).
const MIN_HIT_SHARE: u64 = 4;
/// While the hit rate is below that, one chunk in `SAMPLE_EVERY` still probes and stores, so
/// that the cache notices when keys recur again: a flood pays the cache's cost on that share
/// of its packets only.
const SAMPLE_EVERY: u64 = 64;

/// The per-chunk working arrays, allocated once with the cache.
struct Scratch {
    ck: [InputCacheKey; CHUNK],
    hash: [u64; CHUNK],
    /// The key is IPv4 (source and destination): its entry is in the IPv4 table.
    v4: [bool; CHUNK],
    how: [How; CHUNK],
    memos: [Option<InputMemo>; CHUNK],
    pending: [u8; CHUNK],
    pkeys: [InputKey; CHUNK],
    pout: [Result<InputRoute, InputDrop>; CHUNK],
    pmemo: [Option<InputMemo>; CHUNK],
}

/// One table: its sets' tags and stamps, and the entries.
struct Sets<L> {
    tags: Box<[Tags]>,
    entries: Box<[L]>,
    /// `sets - 1`.
    mask: usize,
    /// Evictions so far: turns the way a key evicts, so that two keys of one full set that
    /// would evict the same way do not evict each other for ever while the other ways hold
    /// keys that no longer come (a flood's).
    evicted: u32,
}

/// The two tables, and the stamp valid entries of both carry (0 is never current: a fresh
/// set's).
struct Tables {
    v4: Sets<InputLine4>,
    other: Sets<Entry>,
    stamp: u32,
}

/// Whether the cache is worth probing, judged from its hit rate over windows of probes.
struct Use {
    /// Probes and hits of the current window.
    window: (u64, u64),
    /// Whether the last window's hit rate let every chunk probe.
    warm: bool,
    chunks: u64,
}

/// One worker's input route cache (see the module documentation).
pub struct InputCache {
    mode: Mode,
    sets: Tables,
    hasher: KeyedState,
    /// The generation of the routing state `sets.stamp` was taken for.
    gen: Option<u64>,
    counters: CacheCounters,
    scratch: Box<Scratch>,
    usage: Use,
}

impl InputCache {
    pub fn new(cfg: CacheConfig) -> InputCache {
        let sets = (cfg.entries.div_ceil(WAYS)).next_power_of_two().max(1);
        // Nothing to hold without the cache: hints live in the chunk.
        let held = if cfg.mode == Mode::Cache { sets } else { 0 };
        InputCache {
            mode: cfg.mode,
            sets: Tables {
                v4: Sets::new(held),
                other: Sets::new(held),
                stamp: 1,
            },
            hasher: KeyedState::default(),
            gen: None,
            counters: CacheCounters::default(),
            scratch: Box::new(Scratch {
                ck: [BLANK.cache_key(); CHUNK],
                hash: [0; CHUNK],
                v4: [false; CHUNK],
                how: [How::Bypass; CHUNK],
                memos: [None; CHUNK],
                pending: [0; CHUNK],
                pkeys: [BLANK; CHUNK],
                pout: [Err(InputDrop::NoRoute); CHUNK],
                pmemo: [None; CHUNK],
            }),
            usage: Use {
                window: (0, 0),
                warm: true,
                chunks: 0,
            },
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn counters(&self) -> CacheCounters {
        self.counters
    }

    /// Bytes the cache holds (fixed at creation).
    pub fn bytes(&self) -> usize {
        self.sets.v4.bytes() + self.sets.other.bytes() + std::mem::size_of::<Scratch>()
    }

    /// Moves the stamp when the routing state is another generation: every entry made
    /// before is invalid from here on.
    fn follow(&mut self, fib: &Fib) {
        if self.gen == Some(fib.gen()) {
            return;
        }
        self.gen = Some(fib.gen());
        let s = &mut self.sets;
        s.stamp = s.stamp.wrapping_add(1);
        if s.stamp == 0 {
            // 2^32 changes later the stamps would repeat: every set forgets (the one sweep,
            // once per 2^32 generations).
            s.v4.tags.fill(Tags::default());
            s.other.tags.fill(Tags::default());
            s.stamp = 1;
        }
    }

    /// The decisions for `keys` (at most [`CHUNK`]) into `out`: [`Fib::route_input`]'s for
    /// each, from the cache, a hint or the batch lookup of the rest.
    pub fn decide(
        &mut self,
        fib: &Fib,
        keys: &[InputKey],
        out: &mut [Result<InputRoute, InputDrop>],
    ) {
        assert!(keys.len() <= CHUNK && keys.len() == out.len());
        if self.mode == Mode::Off {
            fib.route_input_batch(keys, out);
            return;
        }
        self.follow(fib);
        let n = keys.len();
        let suffices = [fib.input_key_suffices(false), fib.input_key_suffices(true)];
        let deadline = fib.route_input_deadline();
        let timely = deadline.is_none_or(|d| fib.clock().now_ms() < d);
        let cache = self.mode == Mode::Cache && timely && self.usage.probes_now();
        if !cache
            && timely
            && suffices == [true, true]
            && !keys.windows(2).any(|w| w[1].same_cache_key(&w[0]))
        {
            // No hint to take and nothing to probe (hints only, or a chunk the sampling
            // skips, as in a flood): the batch as without the cache, after one comparison
            // per packet.
            self.counters.misses += n as u64;
            fib.route_input_batch(keys, out);
            return;
        }
        let sc = &mut *self.scratch;
        let sets = &mut self.sets;
        // Sort the packets out; prefetch the tag lines of those to probe.
        let (mut follows, mut probes) = (0, 0);
        for i in 0..n {
            sc.how[i] = if !timely || !suffices[usize::from(keys[i].dst.is_ipv6())] {
                self.counters.bypassed += 1;
                How::Bypass
            } else if i > 0 && sc.how[i - 1] != How::Bypass && keys[i].same_cache_key(&keys[i - 1])
            {
                follows += 1;
                How::Follow
            } else if cache {
                sc.ck[i] = keys[i].cache_key();
                sc.hash[i] = self.hasher.hash_one(sc.ck[i]);
                sc.v4[i] = keys[i].dst.is_ipv4() && keys[i].src.is_ipv4();
                sets.prefetch_tags(sc.v4[i], sc.hash[i]);
                probes += 1;
                How::Probe { way: WAYS }
            } else {
                self.counters.misses += 1;
                How::Miss { store: false }
            };
        }
        if follows == 0 && probes == 0 {
            // Nothing to answer but by lookups: the batch as without the cache.
            fib.route_input_batch(keys, out);
            return;
        }
        // Find the ways whose tag matches; prefetch their entries.
        for i in 0..n {
            if let How::Probe { way } = &mut sc.how[i] {
                *way = sets.find(sc.v4[i], sc.hash[i]).unwrap_or(WAYS);
            }
        }
        // Answer from the entries found; gather the rest for one batch lookup.
        let (mut np, mut hits) = (0, 0);
        for i in 0..n {
            let found = match sc.how[i] {
                How::Probe { way } if way < WAYS => sets.get(sc.v4[i], sc.hash[i], way, &sc.ck[i]),
                How::Probe { .. } | How::Miss { .. } | How::Bypass => None,
                How::Follow | How::Hit => continue,
            };
            match found.and_then(|m| Some((fib.route_input_replay(&m, &keys[i])?, m))) {
                Some((r, m)) => {
                    out[i] = r;
                    // Only a hint reads it.
                    if sc.how.get(i + 1) == Some(&How::Follow) {
                        sc.memos[i] = Some(m);
                    }
                    sc.how[i] = How::Hit;
                    hits += 1;
                }
                None => {
                    if let How::Probe { .. } = sc.how[i] {
                        sc.how[i] = How::Miss { store: true };
                        self.counters.misses += 1;
                    }
                    sc.pending[np] = i as u8;
                    sc.pkeys[np] = keys[i];
                    np += 1;
                }
            }
        }
        self.counters.hits += hits;
        if cache {
            self.usage.judge(probes, hits);
        }
        if np == n {
            fib.route_input_batch_memo(keys, out, &mut sc.memos[..n]);
        } else if np > 0 {
            fib.route_input_batch_memo(&sc.pkeys[..np], &mut sc.pout[..np], &mut sc.pmemo[..np]);
            for (k, &i) in sc.pending[..np].iter().enumerate() {
                out[usize::from(i)] = sc.pout[k];
                sc.memos[usize::from(i)] = sc.pmemo[k];
            }
        }
        for &i in &sc.pending[..np] {
            let i = usize::from(i);
            if let (How::Miss { store: true }, Some(m)) = (sc.how[i], sc.memos[i]) {
                if sets.insert(sc.v4[i], sc.hash[i], sc.ck[i], m) {
                    self.counters.evictions += 1;
                }
            }
        }
        // The hints, in order, so that each predecessor is answered before its follower.
        for i in (1..n).filter(|&i| sc.how[i] == How::Follow) {
            let hinted = sc.memos[i - 1]
                .and_then(|m| Some((fib.route_input_replay(&m, &keys[i])?, Some(m))));
            let (r, m) = match hinted {
                Some(d) => {
                    self.counters.hinted += 1;
                    d
                }
                None => {
                    self.counters.misses += 1;
                    fib.route_input_memo(&keys[i])
                }
            };
            out[i] = r;
            sc.memos[i] = m;
        }
        // A deadline passed while the chunk was decided: what the cache and the hints
        // answered is made again.
        if let (Some(d), true) = (deadline, timely) {
            if fib.clock().now_ms() >= d {
                for i in (0..n).filter(|&i| matches!(sc.how[i], How::Hit | How::Follow)) {
                    out[i] = fib.route_input(&keys[i]);
                }
            }
        }
    }
}

impl Use {
    /// Whether this chunk probes the cache: always while the hit rate is high enough, one
    /// chunk in [`SAMPLE_EVERY`] while it is not.
    fn probes_now(&mut self) -> bool {
        self.chunks = self.chunks.wrapping_add(1);
        self.warm || self.chunks.is_multiple_of(SAMPLE_EVERY)
    }

    /// Counts a chunk's probes and hits; at the end of a window, judges the hit rate.
    fn judge(&mut self, probes: u64, hits: u64) {
        let (p, h) = (self.window.0 + probes, self.window.1 + hits);
        if p < WINDOW {
            self.window = (p, h);
            return;
        }
        self.warm = h * MIN_HIT_SHARE >= p;
        self.window = (0, 0);
    }
}

impl Tables {
    #[inline]
    fn prefetch_tags(&self, v4: bool, h: u64) {
        if v4 {
            self.v4.prefetch_tags(h);
        } else {
            self.other.prefetch_tags(h);
        }
    }

    /// The way of `h`'s set whose tag is `h`'s and current, its entry prefetched.
    #[inline]
    fn find(&self, v4: bool, h: u64) -> Option<usize> {
        if v4 {
            self.v4.find(h, self.stamp)
        } else {
            self.other.find(h, self.stamp)
        }
    }

    /// The memo of `key` (of hash `h`) in way `way` of its set, if that entry holds `key`.
    #[inline]
    fn get(&self, v4: bool, h: u64, way: usize, key: &InputCacheKey) -> Option<InputMemo> {
        if v4 {
            self.v4.entry(h, way).memo_for(key)
        } else {
            self.other.entry(h, way).memo_for(key)
        }
    }

    /// Stores `memo` for `key` (of hash `h`); true when that evicted a valid entry.
    fn insert(&mut self, v4: bool, h: u64, key: InputCacheKey, memo: InputMemo) -> bool {
        if v4 {
            self.v4.insert(h, key, memo, self.stamp)
        } else {
            self.other.insert(h, key, memo, self.stamp)
        }
    }
}

impl<L: Line> Sets<L> {
    fn new(sets: usize) -> Sets<L> {
        Sets {
            tags: vec![Tags::default(); sets].into_boxed_slice(),
            entries: vec![L::blank(); sets * WAYS].into_boxed_slice(),
            mask: sets.max(1) - 1,
            evicted: 0,
        }
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.tags) + std::mem::size_of_val(&*self.entries)
    }

    #[inline]
    fn prefetch_tags(&self, h: u64) {
        fibre_lpm::prefetch(&self.tags[h as usize & self.mask]);
    }

    #[inline]
    fn find(&self, h: u64, stamp: u32) -> Option<usize> {
        let set = h as usize & self.mask;
        let t = &self.tags[set];
        let tag = (h >> 32) as u32;
        let w = (0..WAYS).find(|&w| t.tag[w] == tag && t.stamp[w] == stamp)?;
        let e = &self.entries[set * WAYS + w];
        fibre_lpm::prefetch(e);
        if std::mem::size_of::<L>() > 64 {
            fibre_lpm::prefetch(std::ptr::from_ref(e).cast::<u8>().wrapping_add(64));
        }
        Some(w)
    }

    #[inline]
    fn entry(&self, h: u64, way: usize) -> &L {
        &self.entries[(h as usize & self.mask) * WAYS + way]
    }

    /// Stores `memo` for `key` (of hash `h`) at `stamp`: over its own entry, else in a way no
    /// valid entry holds, else over the way the hash and the count of evictions pick. True
    /// when that evicted a valid entry. A pair the layout cannot hold is not stored.
    fn insert(&mut self, h: u64, key: InputCacheKey, memo: InputMemo, stamp: u32) -> bool {
        let Some(line) = L::pack(key, memo) else {
            return false;
        };
        let set = h as usize & self.mask;
        let tag = (h >> 32) as u32;
        let t = &mut self.tags[set];
        let base = set * WAYS;
        let entries = &self.entries;
        let own = (0..WAYS)
            .find(|&w| t.stamp[w] == stamp && t.tag[w] == tag && entries[base + w].holds(&key));
        let (way, evicted) = match own.or_else(|| (0..WAYS).find(|&w| t.stamp[w] != stamp)) {
            Some(w) => (w, false),
            // Bits above the set index and below the tag: independent of both.
            None => {
                self.evicted = self.evicted.wrapping_add(1);
                (
                    ((h >> 20) as usize).wrapping_add(self.evicted as usize) % WAYS,
                    true,
                )
            }
        };
        t.tag[way] = tag;
        t.stamp[way] = stamp;
        self.entries[base + way] = line;
        evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the module documentation states: a set's tags in one line, an IPv4 entry in
    /// one, another in two, the working arrays within 17 KiB.
    #[test]
    fn a_set_is_one_line_of_tags_and_an_entry_one_or_two() {
        assert_eq!(std::mem::size_of::<Tags>(), 64);
        assert_eq!(std::mem::size_of::<InputLine4>(), 64);
        assert_eq!(ENTRY_BYTES, 128);
        let c = InputCache::new(CacheConfig::default());
        let sets = DEFAULT_ENTRIES / WAYS;
        assert_eq!(
            c.bytes(),
            2 * sets * 64 + DEFAULT_ENTRIES * (64 + 128) + std::mem::size_of::<Scratch>()
        );
        assert!(std::mem::size_of::<Scratch>() <= 17 * 1024);
    }
}
