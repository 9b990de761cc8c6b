//! Property tests: generated well-formed message streams re-emit byte for byte; arbitrary and
//! corrupted bytes never make the parser (or the conversions) panic.

use fibre_netlink::nla::{align, NLA_F_NESTED};
use fibre_netlink::{check_round_trip, convert, parse_stream};
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
fn object_message() -> impl Strategy<Value = Vec<u8>> {
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

fn stream() -> impl Strategy<Value = Vec<u8>> {
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn generated_streams_round_trip(bytes in stream()) {
        let messages = parse_stream(&bytes).expect("generated stream parses");
        let mut out = Vec::new();
        fibre_netlink::emit_stream(&messages, &mut out);
        prop_assert_eq!(out, bytes.clone());
        prop_assert_eq!(check_round_trip(&bytes), messages.len());
        convert::check_requests(&bytes);
    }

    #[test]
    fn corrupted_streams_never_panic(bytes in stream(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let mut bytes = bytes;
        for (at, v) in flips {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        check_round_trip(&bytes);
        convert::check_requests(&bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_round_trip(&bytes);
        convert::check_requests(&bytes);
    }
}

/// Routes with every attribute the model carries, present or absent.
fn route() -> impl Strategy<Value = fibre_fib::types::Route> {
    use fibre_fib::types::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let addr = |v6: bool| -> BoxedStrategy<IpAddr> {
        if v6 {
            any::<u128>()
                .prop_map(|a| IpAddr::V6(Ipv6Addr::from(a)))
                .boxed()
        } else {
            any::<u32>()
                .prop_map(|a| IpAddr::V4(Ipv4Addr::from(a)))
                .boxed()
        }
    };
    let hop = move |v6: bool| {
        (
            proptest::option::of(prop_oneof![addr(v6), addr(!v6)]),
            any::<u32>(),
            any::<u8>(),
            0u32..64,
        )
            .prop_map(|(gateway, oif, hops, flags)| NextHop {
                gateway,
                oif,
                hops,
                flags,
            })
    };
    any::<bool>().prop_flat_map(move |v6| {
        let max = if v6 { 128u8 } else { 32 };
        (
            (addr(v6), 0..=max, proptest::option::of((addr(v6), 0..=max))),
            (
                any::<u8>(),
                prop_oneof![Just(0u32), Just(254), any::<u32>()],
                any::<u8>(),
                any::<u8>(),
                0u8..12,
                any::<u32>(),
            ),
            (
                proptest::option::of(any::<u32>()),
                proptest::option::of(addr(v6)),
                hop(v6),
                proptest::collection::vec(hop(v6), 0..3),
            ),
            (
                proptest::option::of(any::<u32>()),
                proptest::option::of(1u32..9000),
                proptest::option::of(any::<u8>()),
                proptest::option::of(any::<u32>()),
            ),
            (
                proptest::option::of(any::<u32>()),
                proptest::option::of(any::<u32>()),
                proptest::option::of(any::<u32>()),
            ),
            proptest::option::of((
                proptest::option::of(0u32..100_000),
                any::<i32>(),
                any::<u32>(),
            )),
        )
            .prop_map(move |(d, h, n, x, y, c)| {
                let family = if v6 { Family::Inet6 } else { Family::Inet };
                let mut r = Route::new(
                    family,
                    Prefix {
                        addr: d.0,
                        len: d.1,
                    },
                );
                r.src = d.2.map(|(addr, len)| Prefix { addr, len });
                (r.tos, r.table, r.protocol, r.scope) = (h.0, h.1, h.2, h.3);
                r.rtype = [
                    RouteType::Unspec,
                    RouteType::Unicast,
                    RouteType::Local,
                    RouteType::Broadcast,
                    RouteType::Anycast,
                    RouteType::Multicast,
                    RouteType::Blackhole,
                    RouteType::Unreachable,
                    RouteType::Prohibit,
                    RouteType::Throw,
                    RouteType::Nat,
                    RouteType::Xresolve,
                ][h.4 as usize];
                r.flags = h.5;
                (r.priority, r.prefsrc, r.nexthop, r.multipath) = n;
                r.nhid = x.0;
                r.metrics.mtu = x.1;
                r.pref = x.2;
                r.expires = x.3;
                (r.iif, r.mark, r.uid) = y;
                r.cache = c.map(|(expires, error, used)| CacheInfo {
                    expires,
                    error,
                    used,
                });
                r
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The direct encoder the dumps use writes what the message model writes.
    #[test]
    fn direct_route_emission_matches_the_model(r in route(), seq in any::<u32>(), port in any::<u32>()) {
        use fibre_netlink::message::{flags, types};
        let mut want = Vec::new();
        convert::message(types::RTM_NEWROUTE, flags::NLM_F_MULTI, seq, port,
            fibre_netlink::Payload::Route(convert::route_message(&r))).emit(&mut want);
        let mut got = vec![0xaa];
        convert::emit_route(&r, types::RTM_NEWROUTE, flags::NLM_F_MULTI, seq, port, &mut got);
        prop_assert_eq!(&got[1..], &want[..]);
    }
}

/// The general path: check the attribute policy, parse, then convert.
fn slow_request(msg: &[u8]) -> Result<convert::Request, convert::RequestError> {
    convert::request_bytes(msg)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// The daemon's direct route-request reader answers what parsing then converting does,
    /// for well-formed requests, corrupted ones and random objects.
    #[test]
    fn direct_route_requests_match_the_general_path(
        r in route(),
        del in any::<bool>(),
        flags in any::<u16>(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        other in object_message(),
        family in prop_oneof![Just(2u8), Just(10u8), any::<u8>()],
    ) {
        use fibre_netlink::message::types;
        let mut m = convert::message(
            if del { types::RTM_DELROUTE } else { types::RTM_NEWROUTE },
            flags,
            7,
            0,
            fibre_netlink::Payload::Route(convert::route_message(&r)),
        )
        .to_bytes();
        for (at, v) in flips {
            let n = m.len();
            // Keep the length word: the engine hands over exactly one framed message.
            if at % n >= 4 {
                m[at % n] = v;
            }
        }
        let mut other = other;
        if other.len() > 16 {
            other[16] = family;
        }
        for msg in [m, other] {
            if let Some(fast) = convert::route_request(&msg) {
                prop_assert_eq!(fast, slow_request(&msg));
            }
        }
    }
}
