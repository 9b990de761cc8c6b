//! Concurrent churn, expiry and lookups against a reference model.
//!
//! The writer thread owns an [`ExpiryQueue`] and a left-right published IPv6 table
//! (`fibre_lpm::sync`), exactly the split `fibre_fib::expiry` describes: it adds, replaces
//! (permanent <-> expiring both ways) and deletes routes, advances a shared clock, runs GC
//! passes, and publishes after every step. Each published version's reference model is logged
//! before it is published. Reader threads look up addresses lock-free and apply the expiry rule
//! themselves (a route whose deadline is <= the clock does not match); every answer must equal
//! what the model of some version published during the lookup says at the reader's time. The
//! log is behind a mutex, but only the checking uses it, never the lookup.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fibre_fib::expiry::ExpiryQueue;
use fibre_fib::{Clock, ManualClock};
use fibre_lpm::sync::{PrefixWriter, Writer};
use fibre_lpm::v6::Lpm6;

/// Disjoint /64 prefixes, so an expired route leaves no route (no shorter fallback).
const PREFIXES: u64 = 16;
/// Values encode the deadline (ms) above the prefix's slot, 0 for a permanent route.
const SLOT_BITS: u32 = 4;
const WRITER_STEPS: usize = 20_000;

fn prefix(i: u64) -> u128 {
    (0x2001_0db8u128 << 96) | ((i as u128) << 64)
}

fn value(slot: u64, deadline: u64) -> u32 {
    ((deadline << SLOT_BITS) | slot) as u32
}

fn deadline_of(v: u32) -> u64 {
    (v >> SLOT_BITS) as u64
}

/// A route is live at `now` when permanent or due later.
fn live(v: u32, now: u64) -> bool {
    let d = deadline_of(v);
    d == 0 || d > now
}

/// Each published version: the value stored for each prefix.
type Model = Vec<Option<u32>>;

struct Xorshift(u64);
impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn readers_agree_with_the_model_under_churn_expiry_and_gc() {
    let clock = Arc::new(ManualClock::new(1));
    let log: Arc<Mutex<Vec<Model>>> = Arc::new(Mutex::new(vec![vec![None; PREFIXES as usize]]));
    // begun: versions whose model is logged; done: versions published.
    let begun = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (mut writer, reader) = Writer::new(Lpm6::new());

    let mut readers = Vec::new();
    for seed in 1..=2u64 {
        let (reader, clock, log, begun, done, stop) = (
            reader.clone(),
            clock.clone(),
            log.clone(),
            begun.clone(),
            done.clone(),
            stop.clone(),
        );
        readers.push(std::thread::spawn(move || {
            let mut rng = Xorshift(0x9e37_79b9 * seed);
            let (mut checked, mut found) = (0u64, 0u64);
            while !stop.load(Ordering::Acquire) {
                let p = rng.next() % PREFIXES;
                let first = done.load(Ordering::Acquire);
                let (answer, now) = {
                    let g = reader.read();
                    let now = clock.now_ms();
                    let v = g.lookup(prefix(p) | 0x42);
                    (v.filter(|v| live(*v, now)), now)
                };
                let last = begun.load(Ordering::Acquire);
                let log = log.lock().unwrap();
                let ok = (first..=last)
                    .any(|k| log[k as usize][p as usize].filter(|v| live(*v, now)) == answer);
                assert!(
                    ok,
                    "prefix {p} at {now}: answered {answer:?}, versions {first}..={last} say {:?}",
                    (first..=last)
                        .map(|k| log[k as usize][p as usize])
                        .collect::<Vec<_>>()
                );
                checked += 1;
                found += answer.is_some() as u64;
            }
            (checked, found)
        }));
    }

    let mut rng = Xorshift(0x1234_5678);
    let mut model: Model = vec![None; PREFIXES as usize];
    let mut queue: ExpiryQueue<u64> = ExpiryQueue::default();
    let mut gc_removed = 0usize;
    for _ in 0..WRITER_STEPS {
        let now = clock.now_ms();
        let p = rng.next() % PREFIXES;
        match rng.next() % 8 {
            // Add or replace: permanent or expiring within 1..64 ms.
            0..=3 => {
                if let Some(old) = model[p as usize] {
                    if deadline_of(old) != 0 {
                        queue.remove(deadline_of(old), p);
                    }
                }
                let d = if rng.next().is_multiple_of(2) {
                    0
                } else {
                    now + 1 + rng.next() % 64
                };
                if d != 0 {
                    queue.insert(d, p);
                }
                let v = value(p, d);
                model[p as usize] = Some(v);
                writer.insert(prefix(p), 64, v).unwrap();
            }
            4 => {
                if let Some(old) = model[p as usize].take() {
                    if deadline_of(old) != 0 {
                        queue.remove(deadline_of(old), p);
                    }
                    writer.remove(prefix(p), 64);
                }
            }
            5 | 6 => clock.advance(1 + rng.next() % 8),
            _ => {
                while let Some((_, q)) = queue.pop_due(now) {
                    model[q as usize] = None;
                    writer.remove(prefix(q), 64);
                    gc_removed += 1;
                }
            }
        }
        let k = {
            let mut log = log.lock().unwrap();
            log.push(model.clone());
            log.len() as u64 - 1
        };
        begun.store(k, Ordering::Release);
        writer.publish();
        done.store(k, Ordering::Release);
    }
    stop.store(true, Ordering::Release);
    let mut total = 0;
    for r in readers {
        let (checked, found) = r.join().unwrap();
        assert!(checked > 0 && found > 0, "checked {checked}, found {found}");
        total += checked;
    }
    assert!(gc_removed > 100, "GC removed {gc_removed}");
    eprintln!("{total} concurrent lookups checked; GC removed {gc_removed} routes");
}
