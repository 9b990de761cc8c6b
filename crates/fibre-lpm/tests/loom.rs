//! Model check of the publication protocol (`fibre_lpm::sync`) under loom, which explores the
//! interleavings of the writer and readers and flags any read of a table copy that overlaps a
//! write of it. Run with:
//!   RUSTFLAGS="--cfg loom" cargo test -p fibre-lpm --release --test loom
#![cfg(loom)]

use fibre_lpm::sync::Writer;
use fibre_lpm::v4::Lpm4;

const NET: u32 = 0x0A00_0000;

/// A reader racing two updates sees versions 1, 2, 3 in order, never anything else; the writer's
/// own thread sees its last publish at once.
#[test]
fn readers_see_published_versions_in_order() {
    loom::model(|| {
        let mut table = Lpm4::new();
        table.insert(NET, 8, 1).unwrap();
        let (mut writer, reader) = Writer::new(table);
        let racing = reader.clone();
        let t = loom::thread::spawn(move || {
            let first = racing.read().lookup(NET + 1);
            let second = racing.read().lookup(NET + 1);
            assert!(matches!(first, Some(1..=3)), "{first:?}");
            assert!(matches!(second, Some(1..=3)), "{second:?}");
            assert!(first <= second, "went back from {first:?} to {second:?}");
        });
        writer.insert(NET, 8, 2).unwrap();
        writer.publish();
        // The second update must wait for readers of the old copy before writing it.
        writer.insert(NET, 16, 3).unwrap();
        writer.publish();
        assert_eq!(reader.read().lookup(NET + 1), Some(3));
        t.join().unwrap();
    });
}

/// Two readers (one nesting guards) against two publishes: each guard's view is one version,
/// and an inner guard never sees an older version than its outer one.
#[test]
fn nested_guards_and_two_readers() {
    loom::model(|| {
        let (mut writer, reader) = Writer::new(Lpm4::new());
        let other = reader.clone();
        let t = loom::thread::spawn(move || {
            let outer = other.read();
            let a = outer.lookup(NET);
            let inner = other.read();
            let b = inner.lookup(NET);
            assert_eq!(a, outer.lookup(NET));
            assert!(a <= b, "{a:?} then {b:?}");
        });
        writer.insert(NET, 8, 5).unwrap();
        writer.publish();
        writer.insert(NET, 16, 6).unwrap();
        writer.remove(NET, 8);
        writer.publish();
        assert_eq!(reader.read().lookup(NET), Some(6));
        t.join().unwrap();
    });
}
