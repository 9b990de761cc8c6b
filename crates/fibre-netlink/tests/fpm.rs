//! FPM framing (`fibre_netlink::fpm`): a frame written by hand around a captured RTM_NEWROUTE,
//! splitting by the encoder, every error case with its fatality, and properties: frames cut
//! into random pieces decode as they do whole, and arbitrary bytes never panic the decoder.

#[path = "common/streams.rs"]
mod streams;

use fibre_netlink::fpm::{
    check_stream, emit_frames, FpmError, FpmErrorKind, FpmHeader, Frame, FrameDecoder,
    DEFAULT_PORT, HEADER_LEN, MAX_FRAME_LEN, MAX_PAYLOAD_LEN,
};
use fibre_netlink::message::types::{RTM_DELROUTE, RTM_NEWROUTE};
use fibre_netlink::{parse_stream, Messages, NetlinkMessage};
use proptest::prelude::*;
use std::path::PathBuf;

/// The first RTM_NEWROUTE of the kernel's route dump capture.
fn captured_route() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/captures/dump_routes.bin");
    let dump = std::fs::read(path).unwrap();
    for r in Messages::new(&dump) {
        let (offset, msg) = r.unwrap();
        if msg.header.message_type == RTM_NEWROUTE {
            return dump[offset..offset + msg.header.length as usize].to_vec();
        }
    }
    panic!("no RTM_NEWROUTE in dump_routes.bin");
}

#[test]
fn seed_frames_decode_and_hold_their_properties() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fpm-frames");
    let mut seeds = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "bin") {
            let bytes = std::fs::read(&path).unwrap();
            let (frames, err) = decode(&[&bytes]);
            assert_eq!(err, None, "{}", path.display());
            assert!(frames.iter().all(|f| !f.2.is_empty()));
            assert_eq!(check_stream(&bytes), frames.len());
            seeds += 1;
        }
    }
    assert!(seeds >= 4);
}

/// A frame, owned: header, payload and each message re-emitted.
type Owned = (FpmHeader, Vec<u8>, Vec<Vec<u8>>);

fn own(frame: &Frame<'_>) -> Owned {
    (
        frame.header,
        frame.payload.to_vec(),
        frame
            .messages
            .iter()
            .map(NetlinkMessage::to_bytes)
            .collect(),
    )
}

/// Decodes `pieces` in turn; the frames, or the first error and the frames before it.
fn decode(pieces: &[&[u8]]) -> (Vec<Owned>, Option<FpmError>) {
    let mut dec = FrameDecoder::new();
    let mut frames = Vec::new();
    for piece in pieces {
        let mut input = *piece;
        while !input.is_empty() {
            match dec.decode(&mut input) {
                Ok(Some(f)) => frames.push(own(&f)),
                Ok(None) => {}
                Err(e) => return (frames, Some(e)),
            }
        }
    }
    (frames, dec.finish().err())
}

#[test]
fn hand_written_frame_holds_a_captured_route() {
    let route = captured_route();
    // version 1, type 1 (netlink), big-endian length including the 4-byte header.
    let len = (4 + route.len()) as u16;
    let mut frame = vec![1, 1, (len >> 8) as u8, len as u8];
    frame.extend_from_slice(&route);

    let (frames, err) = decode(&[&frame]);
    assert_eq!(err, None);
    assert_eq!(frames.len(), 1);
    let (header, payload, messages) = &frames[0];
    assert_eq!(
        (header.version, header.message_type, header.length),
        (1, 1, len)
    );
    assert_eq!(payload, &route);
    assert_eq!(messages, &vec![route.clone()]);

    let parsed = parse_stream(&route).unwrap();
    let mut out = Vec::new();
    assert_eq!(emit_frames(&parsed, &mut out), Ok(1));
    assert_eq!(out, frame);
    assert_eq!(DEFAULT_PORT, 2620);
}

#[test]
fn an_update_is_one_frame_of_delete_and_add() {
    let route = captured_route();
    let mut del = route.clone();
    del[4..6].copy_from_slice(&RTM_DELROUTE.to_ne_bytes());
    let mut payload = del.clone();
    payload.extend_from_slice(&route);
    let msgs = parse_stream(&payload).unwrap();
    let mut out = Vec::new();
    assert_eq!(emit_frames(&msgs, &mut out), Ok(1));
    let mut input = &out[..];
    let mut dec = FrameDecoder::new();
    let frame = dec.decode(&mut input).unwrap().unwrap();
    let types: Vec<u16> = frame
        .messages
        .iter()
        .map(|m| m.header.message_type)
        .collect();
    assert_eq!(types, [RTM_DELROUTE, RTM_NEWROUTE]);
    assert!(input.is_empty());
}

#[test]
fn encoder_splits_where_the_length_would_overflow() {
    let route = captured_route();
    let msg = parse_stream(&route).unwrap().remove(0);
    let count = 2 * MAX_PAYLOAD_LEN / route.len() + 3;
    let msgs = vec![msg; count];
    let mut out = Vec::new();
    let frames = emit_frames(&msgs, &mut out).unwrap();
    assert!(frames >= 3);
    let (decoded, err) = decode(&[&out]);
    assert_eq!(err, None);
    assert_eq!(decoded.len(), frames);
    let mut total = 0;
    for (header, payload, messages) in &decoded {
        assert!(usize::from(header.length) <= MAX_FRAME_LEN);
        assert_eq!(usize::from(header.length) % 4, 0);
        // Full frames: the next message would not have fitted.
        assert!(payload.len() + route.len() > MAX_PAYLOAD_LEN || total + messages.len() == count);
        assert!(messages.iter().all(|m| m == &route));
        total += messages.len();
    }
    assert_eq!(total, count);

    assert_eq!(emit_frames(&[], &mut out), Ok(0));
}

#[test]
fn encoder_refuses_a_message_no_frame_can_hold() {
    let mut big = vec![0u8; MAX_PAYLOAD_LEN + 1];
    let len = big.len() as u32;
    big[..4].copy_from_slice(&len.to_ne_bytes());
    big[4..6].copy_from_slice(&0x7777u16.to_ne_bytes());
    let msg = parse_stream(&big).unwrap();
    let mut out = vec![9];
    let e = emit_frames(&msg, &mut out).unwrap_err();
    assert_eq!(e.len, MAX_PAYLOAD_LEN + 1);
    assert_eq!(out, [9]);
}

fn frame_of(version: u8, kind: u8, len: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![version, kind];
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn netlink_frame(payload: &[u8]) -> Vec<u8> {
    frame_of(1, 1, (HEADER_LEN + payload.len()) as u16, payload)
}

/// Decodes `bad` followed by a good frame: the error, and whether the good frame still came.
fn error_then_good(bad: &[u8]) -> (FpmError, bool) {
    let good = netlink_frame(&captured_route());
    let mut stream = bad.to_vec();
    stream.extend_from_slice(&good);
    let mut dec = FrameDecoder::new();
    let mut input = &stream[..];
    let mut error = None;
    let mut got_good = false;
    while !input.is_empty() {
        match dec.decode(&mut input) {
            Ok(Some(f)) => got_good |= f.payload == &good[4..],
            Ok(None) => {}
            Err(e) => {
                assert!(error.is_none() || e.is_fatal(), "one error per bad frame");
                if e.is_fatal() {
                    // The decoder keeps refusing.
                    assert_eq!(dec.decode(&mut &good[..]).unwrap_err(), e);
                    return (e, false);
                }
                error = Some(e);
            }
        }
    }
    (error.expect("an error"), got_good)
}

#[test]
fn header_errors_are_fatal() {
    let route = captured_route();
    let len = (4 + route.len()) as u16;
    for (bad, kind) in [
        (frame_of(2, 1, len, &route), FpmErrorKind::Version(2)),
        (frame_of(0, 1, len, &route), FpmErrorKind::Version(0)),
        (frame_of(1, 0, len, &route), FpmErrorKind::Type(0)),
        (frame_of(1, 3, len, &route), FpmErrorKind::Type(3)),
        (frame_of(1, 2, len, &route), FpmErrorKind::Protobuf),
        (frame_of(1, 1, 3, &[]), FpmErrorKind::Length(3)),
        (frame_of(1, 1, 0, &[]), FpmErrorKind::Length(0)),
    ] {
        let (e, continued) = error_then_good(&bad);
        assert_eq!(e, FpmError { frame: 0, kind });
        assert!(e.is_fatal() && !continued, "{e}");
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn content_errors_reject_one_frame_and_decoding_goes_on() {
    let route = captured_route();
    let mut overrun = route.clone();
    overrun[..4].copy_from_slice(&(route.len() as u32 + 4).to_ne_bytes());
    let mut short = route.clone();
    short[..4].copy_from_slice(&8u32.to_ne_bytes());
    let mut trailing = route.clone();
    trailing.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]);
    let mut bad_attr = route.clone();
    // The first attribute, after nlmsghdr (16) and rtmsg (12), claims 2 bytes.
    bad_attr[28..30].copy_from_slice(&2u16.to_ne_bytes());
    let n = route.len();
    for (payload, kind) in [
        (
            overrun,
            FpmErrorKind::MessageOverrun {
                offset: 0,
                len: n as u32 + 4,
                available: n,
            },
        ),
        (
            short,
            FpmErrorKind::MessageOverrun {
                offset: 0,
                len: 8,
                available: n,
            },
        ),
        (
            trailing,
            FpmErrorKind::TrailingBytes {
                offset: n,
                count: 8,
            },
        ),
    ] {
        let (e, continued) = error_then_good(&netlink_frame(&payload));
        assert_eq!(e, FpmError { frame: 0, kind });
        assert!(!e.is_fatal() && continued, "{e}");
    }
    let (e, continued) = error_then_good(&netlink_frame(&bad_attr));
    assert!(matches!(e.kind, FpmErrorKind::Netlink(_)), "{e}");
    assert!(!e.is_fatal() && continued);
}

#[test]
fn an_empty_frame_is_an_empty_batch() {
    let (frames, err) = decode(&[&netlink_frame(&[])]);
    assert_eq!(err, None);
    assert_eq!(frames.len(), 1);
    assert!(frames[0].2.is_empty());
}

#[test]
fn a_stream_ending_inside_a_frame_is_truncated() {
    let frame = netlink_frame(&captured_route());
    let good = netlink_frame(&[]);
    for cut in [1, 4, frame.len() - 1] {
        let (frames, err) = decode(&[&good, &frame[..cut]]);
        assert_eq!(frames.len(), 1);
        let e = err.expect("truncated");
        let need = if cut < HEADER_LEN {
            HEADER_LEN
        } else {
            frame.len()
        };
        assert_eq!(
            e,
            FpmError {
                frame: good.len() as u64,
                kind: FpmErrorKind::Truncated { need, have: cut }
            }
        );
        assert!(e.is_fatal());
    }
}

/// Netlink frames from generated message streams, each stream one frame or more.
fn frames() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(streams::stream(), 1..5).prop_map(|streams| {
        let mut out = Vec::new();
        for s in &streams {
            let msgs = parse_stream(s).unwrap();
            emit_frames(&msgs, &mut out).unwrap();
        }
        out
    })
}

/// Splits `bytes` at the given cut points.
fn cut<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut pieces = Vec::new();
    let mut prev = 0;
    for a in at.into_iter().chain([bytes.len()]) {
        pieces.push(&bytes[prev..a]);
        prev = a;
    }
    pieces
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn frames_cut_anywhere_decode_as_whole(
        bytes in frames(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let (whole, err) = decode(&[&bytes]);
        prop_assert_eq!(err, None);
        let mut offset = 0;
        for (header, payload, messages) in &whole {
            let (frame, len) = Frame::parse(&bytes[offset..], offset as u64).unwrap();
            prop_assert_eq!(&own(&frame), &(*header, payload.clone(), messages.clone()));
            prop_assert_eq!(&parse_stream(payload).unwrap(), &frame.messages);
            offset += len;
        }
        prop_assert_eq!(offset, bytes.len());
        let (pieces, err) = decode(&cut(&bytes, &cuts));
        prop_assert_eq!(err, None);
        prop_assert_eq!(check_stream(&bytes), whole.len());
        prop_assert_eq!(pieces, whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        framed in any::<bool>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        // A plausible header first lets the bytes reach the netlink parser.
        let bytes = if framed { netlink_frame(&bytes) } else { bytes };
        let (whole, e1) = decode(&[&bytes]);
        let (pieces, e2) = decode(&cut(&bytes, &cuts));
        prop_assert_eq!(whole, pieces);
        prop_assert_eq!(e1, e2);
        check_stream(&bytes);
    }

    #[test]
    fn corrupted_messages_reject_their_frame_only(
        payload in streams::corrupted_stream(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut bytes = netlink_frame(&payload);
        bytes.extend_from_slice(&netlink_frame(&[]));
        let (whole, e1) = decode(&[&bytes]);
        let (pieces, e2) = decode(&cut(&bytes, &cuts));
        prop_assert_eq!(&whole, &pieces);
        prop_assert_eq!(e1, e2);
        check_stream(&bytes);
        if let Some(e) = e1 {
            prop_assert!(!e.is_fatal(), "{}", e);
            prop_assert!(whole.is_empty());
        }
    }
}
