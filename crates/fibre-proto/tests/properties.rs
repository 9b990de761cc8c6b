//! Property tests of the conversions: no stream makes them panic (generated, corrupted or
//! arbitrary bytes), the direct route encoder writes what the message model writes, and the
//! daemon's direct route-request reader answers what parsing then converting does, for
//! routes and for arbitrary attribute lists.

#[path = "../../fibre-netlink/tests/common/streams.rs"]
mod streams;

use fibre_proto::convert;
use proptest::prelude::*;
use streams::{corrupted_stream, object_message, stream};

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn generated_streams_convert_without_panic(bytes in stream()) {
        convert::check_requests(&bytes);
    }

    #[test]
    fn corrupted_streams_never_panic(bytes in corrupted_stream()) {
        convert::check_requests(&bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
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
                encap: None,
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

/// One attribute of an arbitrary route message: its type (the RTA_* range and a little past
/// it, NLA_F_NESTED now and then) and value. Values are of the lengths the route tables tell
/// apart (short, an IPv4 address, a structure, an IPv6 address, long), or a nest of
/// 4-byte attributes of the metric types, so that checks and conversion fail at any
/// attribute, alone or together.
fn attribute() -> impl Strategy<Value = (u16, Vec<u8>)> {
    let plain = (
        0u16..34,
        prop_oneof![Just(0u16), Just(0x8000)],
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..4),
            proptest::collection::vec(any::<u8>(), 4),
            proptest::collection::vec(any::<u8>(), 8),
            proptest::collection::vec(any::<u8>(), 16),
            proptest::collection::vec(any::<u8>(), 17..40),
        ],
    )
        .prop_map(|(t, nested, v)| (t | nested, v));
    let metrics = proptest::collection::vec((0u16..20, any::<u32>()), 0..3).prop_map(|m| {
        let mut v = Vec::new();
        for (t, x) in m {
            v.extend_from_slice(&8u16.to_ne_bytes());
            v.extend_from_slice(&t.to_ne_bytes());
            v.extend_from_slice(&x.to_ne_bytes());
        }
        (8u16, v)
    });
    prop_oneof![4 => plain, 1 => metrics]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// The daemon's route-request reader, which checks and converts the attributes in one
    /// walk into the request's place, answers what checking, parsing then converting does
    /// for any list of attributes: the first refusal in the kernel's order (framing and
    /// policy of every attribute, then the nests, then the header, then conversion), or the
    /// same request. A message it leaves to the general path is one the general path refuses.
    #[test]
    fn route_requests_of_any_attributes_match_the_general_path(
        del in any::<bool>(),
        flags in any::<u16>(),
        v6 in any::<bool>(),
        header in (0u8..140, 0u8..140, any::<u8>(), any::<u8>(), 0u8..14, any::<u32>()),
        attrs in proptest::collection::vec(attribute(), 0..6),
        tail in proptest::collection::vec(any::<u8>(), 0..6),
    ) {
        use fibre_netlink::message::types;
        let (dst_len, src_len, table, scope, kind, rflags) = header;
        let mut m = vec![0u8; 16];
        let t = if del { types::RTM_DELROUTE } else { types::RTM_NEWROUTE };
        m[4..6].copy_from_slice(&t.to_ne_bytes());
        m[6..8].copy_from_slice(&flags.to_ne_bytes());
        m.extend_from_slice(&[if v6 { 10 } else { 2 }, dst_len, src_len, 0, table, 0, scope, kind]);
        m.extend_from_slice(&rflags.to_ne_bytes());
        for (t, v) in &attrs {
            m.extend_from_slice(&(4 + v.len() as u16).to_ne_bytes());
            m.extend_from_slice(&t.to_ne_bytes());
            m.extend_from_slice(v);
            m.resize(m.len().next_multiple_of(4), 0);
        }
        // Bytes that frame no attribute, sometimes.
        m.extend_from_slice(&tail);
        let len = m.len() as u32;
        m[..4].copy_from_slice(&len.to_ne_bytes());
        let slow = slow_request(&m);
        match convert::route_request(&m) {
            Some(fast) => prop_assert_eq!(fast, slow),
            None => prop_assert!(slow.is_err()),
        }
    }
}
