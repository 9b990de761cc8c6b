//! Replays the server fuzz target's property (`engine::check_datagram`, what
//! fuzz/fuzz_targets/server.rs runs) over its seed corpus -- the kernel captures of
//! crates/fibre-netlink/tests/captures, whole and message by message -- and over every input
//! with which fuzzing found a bug (crates/fibre-netlink/tests/fuzz-regressions/, shared by the
//! targets: each is a stream of netlink messages), so CI checks them without a nightly
//! compiler. Likewise the state target's property (`state::check_state_file`,
//! fuzz/fuzz_targets/state.rs) over its seeds: the state files of tests/state-files/ and the
//! captures.

use fibre_netlink::Messages;
use fibred::engine::check_datagram;
use std::path::{Path, PathBuf};

fn files(dir: &Path, ext: Option<&str>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| ext.is_none_or(|x| p.extension().is_some_and(|e| e == x)))
        .collect();
    v.sort();
    v
}

#[test]
fn seed_corpus_passes_the_server_fuzz_check() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fibre-netlink/tests/captures");
    let mut messages = 0;
    for f in files(&dir, Some("bin")) {
        let seed = std::fs::read(&f).unwrap();
        check_datagram(&seed);
        for r in Messages::new(&seed) {
            let (offset, msg) = r.unwrap();
            check_datagram(&seed[offset..offset + msg.header.length as usize]);
            messages += 1;
        }
    }
    assert!(messages > 150, "{messages}");
}

#[test]
fn fuzz_regressions_pass_the_server_fuzz_check() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fibre-netlink/tests/fuzz-regressions");
    let inputs = files(&dir, None);
    assert!(!inputs.is_empty());
    for f in inputs {
        check_datagram(&std::fs::read(&f).unwrap());
    }
}

/// The state-file corpus (tests/state-files/): saves of issue 12's reproduction and of every
/// object kind (`ok-*`: restored whole), and damaged files (`bad-*`: flipped bytes,
/// truncations, a request the engine refuses) that must be refused before a start; each also
/// passes the state fuzz target's property (`state::check_state_file`).
#[test]
fn state_files_are_restored_or_refused_whole() {
    use fibred::state::{check_state_file, restore, snapshot, Damage, HEADER_LEN};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/state-files");
    let (mut good, mut bad) = (0, 0);
    for f in files(&dir, Some("state")) {
        let bytes = std::fs::read(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let mut e = fibred::Engine::default();
        let r = restore(&mut e, &bytes);
        if name.starts_with("ok-") {
            assert!(r.is_ok(), "{name}: {r:?}");
            let routes = snapshot(e.fib()).routes;
            assert!(routes.iter().any(|r| r.nhid == Some(9)), "{name}");
            good += 1;
        } else {
            match r {
                Err(Damage::Refused { .. }) => assert!(name.contains("refused"), "{name}"),
                Err(Damage::Corrupt { .. }) => assert!(!name.contains("refused"), "{name}"),
                Ok(n) => panic!("{name}: {n} requests restored"),
            }
            bad += 1;
        }
        check_state_file(&bytes);
        check_state_file(bytes.get(HEADER_LEN..).unwrap_or_default());
    }
    assert!(good >= 2 && bad >= 10, "{good} {bad}");
    // The state target's other seeds: the kernel captures, as payloads.
    let captures =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fibre-netlink/tests/captures");
    for f in files(&captures, Some("bin")) {
        check_state_file(&std::fs::read(&f).unwrap());
    }
}

/// The feeds target's properties (fuzz/fuzz_targets/feeds.rs) over its seeds: the FPM
/// streams recorded from zebra (tests/fpm) and fibre-netlink's FPM frames for the FPM feed,
/// the kernel captures for mirror mode.
#[test]
fn seed_corpus_passes_the_feeds_fuzz_checks() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut streams = files(&root.join("tests/fpm"), Some("fpm"));
    streams.extend(files(
        &root.join("crates/fibre-netlink/tests/fpm-frames"),
        Some("bin"),
    ));
    assert!(streams.len() > 2);
    for f in streams {
        fibred::fpm::session::check_stream(&std::fs::read(&f).unwrap());
    }
    let captures = files(
        &root.join("crates/fibre-netlink/tests/captures"),
        Some("bin"),
    );
    for f in captures {
        fibred::mirror::session::check_messages(&std::fs::read(&f).unwrap());
    }
}

/// The HMAC key message (`fibre_proto::seg6_hmac`), a set and a dump in one datagram and the
/// set with each byte flipped in turn, passes the server fuzz check: seeds the captures lack.
#[test]
fn hmac_key_messages_pass_the_server_fuzz_check() {
    use fibre_fib::seg6_hmac::{algo, HmacKey};
    use fibre_proto::seg6_hmac::{Seg6Hmac, HMAC_SET};
    let set = Seg6Hmac {
        op: HMAC_SET,
        key: HmacKey {
            id: 7,
            algo: algo::SHA256,
            secret: b"secret1".to_vec(),
        },
    }
    .request(1);
    let mut both = set.clone();
    both.extend_from_slice(&Seg6Hmac::dump().request(2));
    check_datagram(&both);
    for i in 0..set.len() {
        let mut m = set.clone();
        m[i] ^= 0xff;
        check_datagram(&m);
    }
}
