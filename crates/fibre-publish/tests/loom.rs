//! Model check of the publication protocol under loom, which explores the interleavings of the
//! writer and readers and flags any read of a copy that overlaps a write of it. Run with:
//!   RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p fibre-publish --test loom
#![cfg(loom)]

use fibre_publish::{Replica, Writer};

/// A table whose one change writes two fields and leaves work for the flush: a read that saw
/// one field without the other, or a copy published unflushed, would show.
#[derive(Clone, Debug)]
struct Pair {
    first: u32,
    second: u32,
    flushed: bool,
}

impl Pair {
    fn new(v: u32) -> Pair {
        Pair {
            first: v,
            second: v,
            flushed: true,
        }
    }

    fn set(&mut self, v: u32) {
        self.first = v;
        self.flushed = false;
        self.second = v;
    }

    /// The version a reader sees, checking that it is one whole, published one.
    fn version(&self) -> u32 {
        assert_eq!(self.first, self.second, "a change seen in part");
        assert!(self.flushed, "an unflushed copy published");
        self.first
    }
}

impl Replica for Pair {
    type Op = u32;
    type Output = u32;
    type Log = Vec<u32>;
    fn apply(&mut self, v: u32, log: &mut Vec<u32>) -> u32 {
        let old = self.first;
        self.set(v);
        log.push(v);
        old
    }
    fn replay(&mut self, log: &mut Vec<u32>) {
        for v in log.drain(..) {
            self.set(v);
        }
    }
    fn flush(&mut self) {
        self.flushed = true;
    }
}

/// A reader racing two publishes sees versions 1, 2, 3 in order, never anything else; the
/// writer's own thread sees its last publish at once.
#[test]
fn readers_see_published_versions_in_order() {
    loom::model(|| {
        let (mut writer, reader) = Writer::new(Pair::new(1));
        let racing = reader.clone();
        let t = loom::thread::spawn(move || {
            let first = racing.read().version();
            let second = racing.read().version();
            assert!((1..=3).contains(&first), "{first}");
            assert!((1..=3).contains(&second), "{second}");
            assert!(first <= second, "went back from {first} to {second}");
        });
        assert_eq!(writer.apply(2), 1);
        writer.publish();
        // The second change must wait for readers of the old copy before writing it.
        assert_eq!(writer.apply(3), 2);
        writer.publish();
        assert_eq!(reader.read().version(), 3);
        t.join().unwrap();
    });
}

/// Two readers, one nesting guards, against three changes in two publishes: a guard sees one
/// version, and an inner guard the outer guard's.
#[test]
fn nested_guards_read_the_outer_guards_copy() {
    loom::model(|| {
        let (mut writer, reader) = Writer::new(Pair::new(0));
        let other = reader.clone();
        let t = loom::thread::spawn(move || {
            let outer = other.read();
            let a = outer.version();
            let inner = other.read();
            assert_eq!(inner.version(), a);
            drop(outer);
            assert_eq!(inner.version(), a);
        });
        writer.apply(5);
        writer.publish();
        writer.apply(6);
        writer.apply(7);
        writer.publish();
        assert_eq!(reader.read().version(), 7);
        t.join().unwrap();
    });
}

/// A thread may clone and drop its handle inside a read while the writer waits for that read:
/// the writer does not hold the list of readers while it waits.
#[test]
fn a_handle_cloned_inside_a_read_does_not_stall_the_writer() {
    loom::model(|| {
        let (mut writer, reader) = Writer::new(Pair::new(0));
        let t = loom::thread::spawn(move || {
            let g = reader.read();
            let again = reader.clone();
            assert!(again.read().version() >= g.version());
            drop(again);
            g.version()
        });
        writer.apply(1);
        writer.publish();
        writer.apply(2);
        writer.catch_up();
        assert!(t.join().unwrap() <= 1);
    });
}
