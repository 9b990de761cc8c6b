//! Updates racing lookups: one writer applies and publishes updates one by one while reader
//! threads look up a fixed set of probe addresses. Every read section must see exactly the
//! table of one published version between the versions published before and after it.

#[path = "common/rib.rs"]
mod rib;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use fibre_lpm::sync::{Reader, Replica, Update, Writer};
use fibre_lpm::v4::Lpm4;
use fibre_lpm::v6::Lpm6;
use fibre_lpm::NO_ROUTE;
use rib::Rng;

const UPDATES: usize = if cfg!(debug_assertions) { 1_000 } else { 4_000 };
/// Readers beside the writer. The machine may have fewer cores than threads: readers yield
/// between sections so the writer's waits end within a time slice, not after one.
const READERS: usize = 2;
/// Extra lookup passes over the probes inside each read section.
const PASSES: usize = 8;

/// Runs the race for one family. `lookup` reads one address through a guard's table.
fn race<T, A>(
    ops: Vec<Update<A>>,
    probes: Vec<A>,
    naive: impl Fn(&[(A, u8, u32)], A) -> u32,
    mask: impl Fn(A, u8) -> A,
    lookup: fn(&T, &[A], &mut [u32], bool),
) where
    T: Replica<Op = Update<A>, Output = fibre_lpm::sync::UpdateResult>
        + Clone
        + Default
        + Send
        + Sync
        + 'static,
    A: Copy + PartialEq + Send + Sync + 'static,
{
    // answers[v][i]: the answer for probes[i] once the first v updates are published.
    let mut routes: Vec<(A, u8, u32)> = Vec::new();
    let mut answers = vec![probes
        .iter()
        .map(|&a| naive(&routes, a))
        .collect::<Vec<_>>()];
    for op in &ops {
        match *op {
            Update::Insert(p, l, v) => {
                let p = mask(p, l);
                routes.retain(|r| (r.0, r.1) != (p, l));
                routes.push((p, l, v));
            }
            Update::Remove(p, l) => {
                let p = mask(p, l);
                routes.retain(|r| (r.0, r.1) != (p, l));
            }
        }
        answers.push(probes.iter().map(|&a| naive(&routes, a)).collect());
    }

    let (mut writer, reader): (Writer<T>, Reader<T>) = Writer::new(T::default());
    let published = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for r in 0..READERS {
            let reader = reader.clone();
            let (answers, probes, published, done) = (&answers, &probes, &published, &done);
            s.spawn(move || {
                let mut out = vec![0u32; probes.len()];
                let mut again = out.clone();
                let mut sections = 0u64;
                while !done.load(Ordering::Acquire) || sections == 0 {
                    let before = published.load(Ordering::Acquire);
                    {
                        // Several passes in one section, so that a writer that wrote the copy
                        // under a reader would show as passes that disagree.
                        let table = reader.read();
                        lookup(&table, probes, &mut out, (sections + r as u64) & 1 == 0);
                        for pass in 0..PASSES {
                            lookup(&table, probes, &mut again, pass % 2 == 0);
                            assert!(again == out, "reader {r}: one section saw two states");
                        }
                    }
                    let after = published.load(Ordering::Acquire);
                    // The guard's version v: published no earlier than `before`, and at most one
                    // publish ahead of the counter the writer bumps right after publishing.
                    let last = (after + 1).min(answers.len() - 1);
                    assert!(
                        (before..=last).any(|v| answers[v] == out),
                        "reader {r} saw a state of no version in {before}..={last}"
                    );
                    sections += 1;
                    std::thread::yield_now();
                }
            });
        }
        for (i, op) in ops.iter().enumerate() {
            writer.apply(*op).unwrap();
            writer.publish();
            published.store(i + 1, Ordering::Release);
        }
        done.store(true, Ordering::Release);
    });
}

fn mask4(a: u32, l: u8) -> u32 {
    if l == 0 {
        0
    } else {
        a & (u32::MAX << (32 - l))
    }
}
fn mask6(a: u128, l: u8) -> u128 {
    if l == 0 {
        0
    } else {
        a & (u128::MAX << (128 - l))
    }
}

fn naive<A: Copy + PartialEq>(mask: fn(A, u8) -> A) -> impl Fn(&[(A, u8, u32)], A) -> u32 {
    move |routes, a| {
        routes
            .iter()
            .filter(|&&(p, l, _)| mask(a, l) == p)
            .max_by_key(|r| r.1)
            .map_or(NO_ROUTE, |r| r.2)
    }
}

/// Random updates over prefixes nested around one base so that they interact.
fn ops<A: Copy>(rng: &mut Rng, addr: impl Fn(&mut Rng) -> A, lens: &[u8]) -> Vec<Update<A>> {
    let mut live: Vec<(A, u8)> = Vec::new();
    (0..UPDATES)
        .map(|_| {
            if !live.is_empty() && rng.below(3) == 0 {
                let (p, l) = live.swap_remove(rng.below(live.len()));
                Update::Remove(p, l)
            } else {
                let (p, l) = (addr(rng), lens[rng.below(lens.len())]);
                live.push((p, l));
                Update::Insert(p, l, rng.below(1000) as u32)
            }
        })
        .collect()
}

fn lookup4(t: &Lpm4, probes: &[u32], out: &mut [u32], batch: bool) {
    if batch {
        t.lookup_batch(probes, out);
    } else {
        for (o, &a) in out.iter_mut().zip(probes) {
            *o = t.lookup(a).unwrap_or(NO_ROUTE);
        }
    }
}

fn lookup6(t: &Lpm6, probes: &[u128], out: &mut [u32], batch: bool) {
    if batch {
        t.lookup_batch(probes, out);
    } else {
        for (o, &a) in out.iter_mut().zip(probes) {
            *o = t.lookup(a).unwrap_or(NO_ROUTE);
        }
    }
}

#[test]
fn updates_race_lookups_v4() {
    let mut rng = Rng(0xACE5);
    let addr = |rng: &mut Rng| 0x0A00_0000 | (rng.next() as u32 & 0x00FF_FFFF & !0x00F0_F0F0);
    let ops = ops(&mut rng, addr, &[0, 8, 12, 16, 18, 20, 24, 26, 30, 32]);
    let probes = (0..48).map(|_| addr(&mut rng)).collect();
    race::<Lpm4, u32>(ops, probes, naive(mask4), mask4, lookup4);
}

#[test]
fn updates_race_lookups_v6() {
    let mut rng = Rng(0xD15C);
    let addr = |rng: &mut Rng| {
        (0x2001_0db8u128 << 96) | (u128::from(rng.next() & 0x0F0F_00FF_0000_000F) << 32)
    };
    let ops = ops(&mut rng, addr, &[0, 16, 29, 32, 40, 48, 56, 64, 96, 128]);
    let probes = (0..48).map(|_| addr(&mut rng)).collect();
    race::<Lpm6, u128>(ops, probes, naive(mask6), mask6, lookup6);
}
