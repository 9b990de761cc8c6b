//! The input route cache of one worker, and route hints inside a vector: the input route
//! decision ([`Fib::route_input`]) remembered per [`InputCacheKey`] (input link, destination,
//! source, tos or traffic class, mark), so that a packet of a key seen before takes a probe
//! instead of the rules walk, the lookups and the source check.
//!
//! Shape: a set-associative table allocated once by [`InputCache::new`]: `sets` sets of
//! [`WAYS`] entries. A set's tags and stamps fill one 64-byte line ([`Tags`]); the entries (key
//! and memo, [`ENTRY_BYTES`] each) live apart and are read only when a tag matches. The value
//! is an [`InputMemo`]: the decision, or for a multipath route the group with the route's
//! first usable next hop (a typed index with its generation, [`fibre_fib::DstRef`]); the leg is
//! chosen per packet by the multipath hash ([`Fib::route_input_replay`]). Memory per worker:
//! `entries * ENTRY_BYTES + entries / WAYS * 64` bytes, fixed at creation (the default, 8192
//! entries: 1 MiB and 64 KiB).
//!
//! Validity, checked lazily on lookup, never by a timer or a sweep: each entry carries the
//! cache's stamp of when it was made, and an entry answers only while its stamp is the
//! current one. The stamp moves whenever the routing state the worker reads has another
//! [`Fib::gen`] (every change to routes, rules, links, addresses, next hops and settings
//! moves it, in the copy the writer publishes as in the one it keeps). Time is the other
//! input: a route deadline ([`Fib::route_input_deadline`]) makes lookups skip the route from
//! then on. A chunk of packets uses the cache only when its clock reading at the start is
//! before the earliest deadline, and when its reading at the end is not, the answers it took
//! from the cache are made again without it (the lookups in between read the same monotonic
//! clock, so none of them saw the deadline pass unless the end reading did).
//!
//! "After", for the publication (fibre-publish's protocol): a change is published when the
//! writer's [`fibre_publish::Writer::publish`] returns. A vector the worker starts after that
//! (its read guard taken after the publish, as fibre-publish orders reads) reads that copy or a
//! newer one, whose generation differs from every copy before the change, so no entry made
//! before the change answers a packet of that vector. A vector that took its guard before the
//! publish may still answer from the old copy, with or without the cache: that is the
//! publication's own semantics, not the cache's.
//!
//! Hints: a packet whose cache key is its predecessor's in the chunk takes the predecessor's
//! memo (the kernel's route hints, ip_extract_route_hint and ip_route_use_hint, compare only
//! destination and tos, later also the source, and are off with custom rules; these compare
//! the whole key, so they hold with rules and multipath routes, and hold for strict rp_filter
//! because the key carries the input link and source the check is made for).
//!
//! The objections to Linux's input dst cache (netdev, "[PATCH net-next v2 0/4] net: route:
//! improve route hinting", Leone Fernando, 2024, not merged) and the old route cache removed
//! in Linux 3.6 (merge 5e9965c15ba8 "Merge branch 'kill_rtcache'"), each answered:
//! - IPv4 only: both families are cached, keyed alike; `tests/input_cache.rs`
//!   `cache_on_decides_as_cache_off` mixes IPv4 and IPv6 packets.
//! - No custom rules: rules are part of the state the generation covers; rules whose selectors
//!   the key cannot hold (ipproto, sport, dport) make the family's lookups bypass the cache,
//!   counted (`bypassed`); `cache_on_decides_as_cache_off` adds and removes such rules and
//!   rules on every other selector.
//! - No multipath: the memo keeps the group and the leg is chosen per packet, so the flow hash
//!   spreads the packets of one key as without the cache; `cache_on_decides_as_cache_off`
//!   varies ports over multipath routes, and fibre-fib's `route_input_batch_is_route_input`
//!   replays each memo with other ports.
//! - Device teardown leaving references: an entry holds indices and generations, no
//!   reference; removing a device changes the generation, and a group's next hop is checked
//!   again against its own generation before use; `cache_on_decides_as_cache_off` removes and
//!   re-creates the egress link between packets, and `tests/input_cache_loom.rs` shows no
//!   worker answers from an entry after the change that invalidated it was published.
//! - rp_filter bypassed by hints: the key holds the input link and source, and a memo keeps
//!   the source check's outcome for exactly them; `strict_and_loose_rp_filter_and_martians_hold_for_cached_packets`.
//! - Flood and DoS (the old cache's GC storms and hash-chain attacks): fixed size, no
//!   allocation after `new`, a keyed hash (`fibre_fib::hash::KeyedState`) the sender cannot
//!   aim at one set, a full set replaces a way chosen by the hash; a miss probes one line
//!   beyond the uncached path, and its lookups are the uncached path's own batched ones;
//!   `a_flood_of_unique_keys_evicts_without_allocating`; `fibre-bench cache` measures the
//!   flood against no cache.
//! - Modest, narrow gains: measured side by side in `fibre-bench cache`
//!   (crates/fibre-bench/RESULTS.md).
//!
//! Who calls what: the worker's [`crate::pipeline::Dataplane`] owns one cache and calls
//! [`InputCache::decide`] for each chunk of its vector with the routing state of that vector;
//! nothing else reads or writes it, and it allocates nothing after [`InputCache::new`].

use core::net::{IpAddr, Ipv4Addr};
use std::hash::BuildHasher;

use fibre_fib::hash::KeyedState;
use fibre_fib::{Fib, InputCacheKey, InputDrop, InputKey, InputMemo, InputRoute};

/// Entries of a set: one line of tags and stamps (8 of each, 4 bytes each).
pub const WAYS: usize = 8;

/// The most packets [`InputCache::decide`] takes at once: the pipeline's route batch.
pub const CHUNK: usize = 64;

/// Bytes of one entry: its key and memo, aligned to a cache line.
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

/// One set's tags (the high half of the key's hash) and stamps, in one line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Tags {
    tag: [u32; WAYS],
    stamp: [u32; WAYS],
}

#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Entry {
    key: InputCacheKey,
    /// `None` only in an entry never written (whose stamp is 0).
    memo: Option<InputMemo>,
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
    /// Probed: found (`way`) or not.
    Probe {
        way: usize,
    },
    Hit,
    /// Looked up, its memo to be stored.
    Miss,
}

/// One worker's input route cache (see the module documentation).
pub struct InputCache {
    mode: Mode,
    tags: Box<[Tags]>,
    entries: Box<[Entry]>,
    /// `sets - 1`.
    mask: usize,
    hasher: KeyedState,
    /// The stamp valid entries carry; 0 is never current (a fresh set's).
    stamp: u32,
    /// The generation of the routing state `stamp` was taken for.
    gen: Option<u64>,
    counters: CacheCounters,
}

impl InputCache {
    pub fn new(cfg: CacheConfig) -> InputCache {
        let sets = (cfg.entries.div_ceil(WAYS)).next_power_of_two().max(1);
        let (tags, entries) = match cfg.mode {
            // Nothing to hold: hints live in the chunk.
            Mode::Off | Mode::Hints => (0, 0),
            Mode::Cache => (sets, sets * WAYS),
        };
        let blank = Entry {
            key: BLANK.cache_key(),
            memo: None,
        };
        InputCache {
            mode: cfg.mode,
            tags: vec![Tags::default(); tags].into_boxed_slice(),
            entries: vec![blank; entries].into_boxed_slice(),
            mask: sets - 1,
            hasher: KeyedState::default(),
            stamp: 1,
            gen: None,
            counters: CacheCounters::default(),
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
        std::mem::size_of_val(&*self.tags) + std::mem::size_of_val(&*self.entries)
    }

    /// Moves the stamp when the routing state is another generation: every entry made
    /// before is invalid from here on.
    fn follow(&mut self, fib: &Fib) {
        if self.gen == Some(fib.gen()) {
            return;
        }
        self.gen = Some(fib.gen());
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // 2^32 changes later the stamps would repeat: every set forgets (the one sweep,
            // once per 2^32 generations).
            self.tags.fill(Tags::default());
            self.stamp = 1;
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
        let started = deadline.map(|_| fib.clock().now_ms());
        let timely = match (deadline, started) {
            (Some(d), Some(t)) => t < d,
            _ => true,
        };
        let cache = self.mode == Mode::Cache && timely;
        let mut ck = [BLANK.cache_key(); CHUNK];
        let mut hash = [0u64; CHUNK];
        let mut how = [How::Bypass; CHUNK];
        let mut memos: [Option<InputMemo>; CHUNK] = [None; CHUNK];
        // Sort the packets out; prefetch the tag lines of those to probe.
        for i in 0..n {
            ck[i] = keys[i].cache_key();
            how[i] = if !timely || !suffices[usize::from(keys[i].dst.is_ipv6())] {
                self.counters.bypassed += 1;
                How::Bypass
            } else if i > 0 && how[i - 1] != How::Bypass && ck[i] == ck[i - 1] {
                How::Follow
            } else if cache {
                hash[i] = self.hasher.hash_one(ck[i]);
                fibre_lpm::prefetch(&self.tags[hash[i] as usize & self.mask]);
                How::Probe { way: WAYS }
            } else {
                How::Miss
            };
        }
        // Find the ways whose tag matches; prefetch their entries.
        for i in 0..n {
            if let How::Probe { way } = &mut how[i] {
                let set = hash[i] as usize & self.mask;
                let t = &self.tags[set];
                let tag = (hash[i] >> 32) as u32;
                if let Some(w) = (0..WAYS).find(|&w| t.tag[w] == tag && t.stamp[w] == self.stamp) {
                    *way = w;
                    fibre_lpm::prefetch(&self.entries[set * WAYS + w]);
                }
            }
        }
        // Answer from the entries found; gather the rest for one batch lookup.
        let mut pending = [0u8; CHUNK];
        let mut np = 0;
        let mut pkeys = [BLANK; CHUNK];
        for i in 0..n {
            let found = match how[i] {
                How::Probe { way } if way < WAYS => {
                    let e = &self.entries[(hash[i] as usize & self.mask) * WAYS + way];
                    e.memo.filter(|_| e.key == ck[i])
                }
                How::Probe { .. } | How::Miss | How::Bypass => None,
                How::Follow | How::Hit => continue,
            };
            let answered = found.and_then(|m| Some((fib.route_input_replay(&m, &keys[i])?, m)));
            match answered {
                Some((r, m)) => {
                    out[i] = r;
                    memos[i] = Some(m);
                    how[i] = How::Hit;
                    self.counters.hits += 1;
                }
                None => {
                    if how[i] != How::Bypass {
                        how[i] = How::Miss;
                        self.counters.misses += 1;
                    }
                    pending[np] = i as u8;
                    pkeys[np] = keys[i];
                    np += 1;
                }
            }
        }
        if np > 0 {
            let mut pout = [Err(InputDrop::NoRoute); CHUNK];
            let mut pmemo = [None; CHUNK];
            fib.route_input_batch_memo(&pkeys[..np], &mut pout[..np], &mut pmemo[..np]);
            for ((&i, r), m) in pending[..np].iter().zip(pout).zip(pmemo) {
                let i = usize::from(i);
                out[i] = r;
                memos[i] = m;
                if let (true, How::Miss, Some(m)) = (cache, how[i], m) {
                    self.insert(hash[i], ck[i], m);
                }
            }
        }
        // The hints, in order: a predecessor is answered by now.
        for i in 0..n {
            if how[i] != How::Follow {
                continue;
            }
            let hinted =
                memos[i - 1].and_then(|m| Some((fib.route_input_replay(&m, &keys[i])?, Some(m))));
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
            memos[i] = m;
        }
        // A deadline passed while the chunk was decided: what the cache and the hints
        // answered is made again.
        if let (Some(d), true) = (deadline, timely) {
            if fib.clock().now_ms() >= d {
                for i in (0..n).filter(|&i| matches!(how[i], How::Hit | How::Follow)) {
                    out[i] = fib.route_input(&keys[i]);
                }
            }
        }
    }

    /// Stores `memo` for `key` (of hash `h`): over its own entry, else in a way no valid
    /// entry holds, else over the way the hash picks (counted as an eviction).
    fn insert(&mut self, h: u64, key: InputCacheKey, memo: InputMemo) {
        let set = h as usize & self.mask;
        let tag = (h >> 32) as u32;
        let t = &mut self.tags[set];
        let base = set * WAYS;
        let entries = &self.entries;
        let own = (0..WAYS)
            .find(|&w| t.stamp[w] == self.stamp && t.tag[w] == tag && entries[base + w].key == key);
        let way = match own.or_else(|| (0..WAYS).find(|&w| t.stamp[w] != self.stamp)) {
            Some(w) => w,
            None => {
                self.counters.evictions += 1;
                // Bits above the set index and below the tag: independent of both.
                (h >> 20) as usize % WAYS
            }
        };
        t.tag[way] = tag;
        t.stamp[way] = self.stamp;
        self.entries[base + way] = Entry {
            key,
            memo: Some(memo),
        };
    }
}
