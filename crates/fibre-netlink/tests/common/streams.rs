//! proptest strategies for rtnetlink message streams: object messages of every type the codec
//! knows (any header bytes, attributes nested up to two levels, `rtnexthop` lists), and control
//! messages (NLMSG_ERROR with echoes and extended ACK, NLMSG_DONE). Shared by this crate's
//! property tests and fibre-proto's (`#[path]`), which run the conversions on the same streams.

use fibre_netlink::nla::{align, NLA_F_NESTED};
use proptest::prelude::*;

fn put_attr(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(align(out.len()), 0);
}

/// Values with the shapes rtnetlink uses: scalars, addresses, strings, raw bytes.
fn scalar() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<u8>().prop_map(|v| vec![v]),
        any::<u16>().prop_map(|v| v.to_ne_bytes().to_vec()),
        any::<u32>().prop_map(|v| v.to_ne_bytes().to_vec()),
        any::<[u8; 16]>().prop_map(|v| v.to_vec()),
        "[a-z0-9]{0,15}".prop_map(|s| {
            let mut b = s.into_bytes();
            b.push(0);
            b
        }),
        proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

/// An attribute region: attributes of types 0..40 (so most are known ones) whose values are
/// scalars, nested regions, or `rtnexthop` lists.
fn attrs(depth: u32) -> BoxedStrategy<Vec<u8>> {
    let leaf = (0u16..40, scalar()).prop_map(|(k, v)| {
        let mut out = Vec::new();
        put_attr(&mut out, k, &v);
        out
    });
    let one = if depth == 0 {
        leaf.boxed()
    } else {
        let nested = (0u16..40, any::<bool>(), attrs(depth - 1)).prop_map(|(k, flag, inner)| {
            let mut out = Vec::new();
            put_attr(&mut out, k | if flag { NLA_F_NESTED } else { 0 }, &inner);
            out
        });
        let multipath = proptest::collection::vec((any::<(u8, u8, i32)>(), attrs(depth - 1)), 0..3)
            .prop_map(|hops| {
                let mut value = Vec::new();
                for ((flags, w, ifindex), inner) in hops {
                    value.extend_from_slice(&((8 + inner.len()) as u16).to_ne_bytes());
                    value.extend_from_slice(&[flags, w]);
                    value.extend_from_slice(&ifindex.to_ne_bytes());
                    value.extend_from_slice(&inner);
                }
                let mut out = Vec::new();
                put_attr(&mut out, 9, &value);
                out
            });
        prop_oneof![4 => leaf, 2 => nested, 1 => multipath].boxed()
    };
    proptest::collection::vec(one, 0..6)
        .prop_map(|v| v.concat())
        .boxed()
}

const OBJECT_TYPES: &[(u16, usize)] = &[
    (16, 16),
    (17, 16),
    (18, 16),
    (19, 16),
    (20, 8),
    (21, 8),
    (22, 8),
    (24, 12),
    (25, 12),
    (26, 12),
    (28, 12),
    (29, 12),
    (30, 12),
    (32, 12),
    (33, 12),
    (34, 12),
    (104, 8),
    (105, 8),
    (106, 8),
    (200, 5),
];

fn header(len: usize, t: u16, flags: u16, seq: u32, port: u32) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(len as u32).to_ne_bytes());
    out.extend_from_slice(&t.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&port.to_ne_bytes());
    out
}

/// One object message: fixed header of the type's size (any bytes) then attributes.
pub fn object_message() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::sample::select(OBJECT_TYPES),
        any::<(u16, u32, u32)>(),
        proptest::collection::vec(any::<u8>(), 16),
        attrs(2),
    )
        .prop_map(|((t, hlen), (flags, seq, port), fixed, attrs)| {
            let mut body = fixed[..hlen].to_vec();
            body.extend_from_slice(&attrs);
            let mut out = header(16 + body.len(), t, flags, seq, port);
            out.extend_from_slice(&body);
            out
        })
}

/// Control messages: NLMSG_ERROR echoing a message (whole or capped, with or without
/// extended-ACK attributes) and NLMSG_DONE.
fn control_message() -> impl Strategy<Value = Vec<u8>> {
    (
        object_message(),
        any::<i32>(),
        any::<bool>(),
        any::<bool>(),
        attrs(1),
    )
        .prop_map(|(inner, error, capped, tlvs, extack)| {
            let mut body = error.to_ne_bytes().to_vec();
            body.extend_from_slice(if capped { &inner[..16] } else { &inner });
            body.resize(align(body.len()), 0);
            if tlvs {
                body.extend_from_slice(&extack);
            }
            let flags = if capped { 0x100 } else { 0 } | if tlvs { 0x200 } else { 0 };
            let mut out = header(16 + body.len(), 2, flags, 1, 2);
            out.extend_from_slice(&body);
            let mut done = 0i32.to_ne_bytes().to_vec();
            done.extend_from_slice(&extack);
            out.extend_from_slice(&header(16 + done.len(), 3, 2, 1, 2));
            out.extend_from_slice(&done);
            out
        })
}

pub fn stream() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![3 => object_message(), 1 => control_message()],
        1..5,
    )
    .prop_map(|msgs| {
        let mut out = Vec::new();
        for m in msgs {
            out.resize(align(out.len()), 0);
            out.extend_from_slice(&m);
        }
        out
    })
}

/// A generated stream with one to three of its bytes overwritten.
pub fn corrupted_stream() -> impl Strategy<Value = Vec<u8>> {
    (
        stream(),
        proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
    )
        .prop_map(|(mut bytes, flips)| {
            for (at, v) in flips {
                let n = bytes.len();
                bytes[at % n] = v;
            }
            bytes
        })
}
