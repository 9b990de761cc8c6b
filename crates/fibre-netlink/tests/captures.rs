//! Kernel captures (tests/captures/*.bin, made by capture.py; see the README there) parse
//! completely and re-emit byte for byte.

use fibre_netlink::{emit_stream, Messages, NetlinkMessage, Payload};
use std::path::PathBuf;

fn captures() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/captures");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .expect("captures directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 12,
        "expected the committed captures, found {}",
        out.len()
    );
    out
}

#[test]
fn every_captured_message_round_trips() {
    let mut total = 0;
    for (name, bytes) in captures() {
        let mut messages = Vec::new();
        for r in Messages::new(&bytes) {
            let (offset, msg) = r.unwrap_or_else(|e| panic!("{name}: {e}"));
            let len = msg.header.length as usize;
            assert_eq!(
                msg.to_bytes(),
                &bytes[offset..offset + len],
                "{name} @ {offset}: {msg:?}"
            );
            assert!(
                !matches!(msg.payload, Payload::Other(_)),
                "{name} @ {offset} untyped"
            );
            messages.push(msg);
        }
        let mut again = Vec::new();
        emit_stream(&messages, &mut again);
        assert_eq!(again, bytes, "{name}: stream");
        total += messages.len();
    }
    assert!(total > 150, "only {total} messages");
}

/// Typed decoding covers what the kernel sends: any attribute left raw must be one this crate
/// deliberately does not decode (statistics, per-family link settings other than IPv6, ...).
#[test]
fn kernel_attributes_are_typed_where_decoded() {
    use fibre_netlink::route::RouteAttr;
    for (name, bytes) in captures() {
        for r in Messages::new(&bytes) {
            let (offset, msg) = r.unwrap();
            if let Payload::Route(m) = &msg.payload {
                for a in &m.attributes {
                    assert!(
                        !matches!(a, RouteAttr::Other(_)),
                        "{name} @ {offset}: {a:?}"
                    );
                }
            }
            let _: &NetlinkMessage = &msg;
        }
    }
}
