//! Model check, under loom, of expiry with lock-free publication: a writer that owns the
//! expiry queue reclaims a due route and publishes (fibre-lpm's left-right `sync`) while a
//! reader looks up and applies the expiry rule at read time. In every interleaving the reader
//! sees a whole published version, never a route after its deadline, always the permanent
//! route, and never memory the writer is changing (loom flags any such overlap). Run with:
//!   RUSTFLAGS="--cfg loom" cargo test -p fibre-fib --release --test expiry_loom
#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

use fibre_fib::expiry::ExpiryQueue;
use fibre_lpm::sync::{PrefixWriter, Writer};
use fibre_lpm::v6::Lpm6;

const EXPIRING: u128 = 0x2001_0db8_0001u128 << 80;
const PERMANENT: u128 = 0x2001_0db8_0002u128 << 80;
/// Values: the deadline in ticks above bit 4 (0 = permanent), a route tag below.
const EXP_VALUE: u32 = (1 << 4) | 1;
const PERM_VALUE: u32 = 2;

fn live(v: u32, now: u64) -> bool {
    let d = (v >> 4) as u64;
    d == 0 || d > now
}

#[test]
fn gc_and_replace_race_lookups_without_changing_answers() {
    loom::model(|| {
        let clock = Arc::new(AtomicU64::new(0));
        let mut t = Lpm6::new();
        t.insert(EXPIRING, 48, EXP_VALUE).unwrap();
        t.insert(PERMANENT, 48, PERM_VALUE).unwrap();
        let (mut writer, reader) = Writer::new(t);
        let mut queue: ExpiryQueue<u128> = ExpiryQueue::default();
        queue.insert(1, EXPIRING);

        let rclock = clock.clone();
        let r = loom::thread::spawn(move || {
            let mut reclaimed = false;
            for _ in 0..2 {
                let g = reader.read();
                let now = rclock.load(Ordering::Acquire);
                let raw = g.lookup(EXPIRING | 1);
                // Versions only move forward: once reclaimed, never back.
                assert!(!(reclaimed && raw == Some(EXP_VALUE)), "resurrected");
                reclaimed |= raw != Some(EXP_VALUE);
                let e = raw.filter(|v| live(*v, now));
                let p = g.lookup(PERMANENT | 1).filter(|v| live(*v, now));
                // The permanent route always matches; the expiring one only before tick 1,
                // whether or not the GC has reclaimed it yet; a replacement (tag 3) is
                // permanent and matches once published.
                assert_eq!(p, Some(PERM_VALUE));
                match e {
                    None => {}
                    Some(EXP_VALUE) => assert!(now < 1),
                    Some(v) => assert_eq!(v, 3),
                }
            }
        });

        // Time passes: the route expires; the reader alone may already skip it.
        clock.store(1, Ordering::Release);
        // GC: the single writer pops what is due and publishes the removal.
        while let Some((_, p)) = queue.pop_due(clock.load(Ordering::Acquire)) {
            writer.remove(p, 48);
        }
        writer.publish();
        // A replace of the reclaimed prefix by a permanent route, published.
        writer.insert(EXPIRING, 48, 3).unwrap();
        writer.publish();
        r.join().unwrap();
    });
}
