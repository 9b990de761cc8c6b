//! The kernel's SRv6 encapsulations (tests/captures/encap_*.bin, made by capture_encap.py; see
//! the README there): every RTA_ENCAP, a route's own and each multipath next hop's, decodes in
//! the space its RTA_ENCAP_TYPE names with no attribute left raw, and re-emits byte for byte.

use fibre_netlink::lwtunnel::seg6::{Seg6Attr, SEG6_IPTUN_MODE};
use fibre_netlink::lwtunnel::seg6local::{
    CounterAttr, FlavorAttr, Seg6LocalAttr, SEG6_LOCAL_ACTION, SEG6_LOCAL_FLV_OP,
};
use fibre_netlink::lwtunnel::{Encap, LWTUNNEL_ENCAP};
use fibre_netlink::nla::NestedBytes;
use fibre_netlink::route::RouteAttr;
use fibre_netlink::{Messages, Payload};
use std::path::PathBuf;

fn capture(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/captures")
            .join(name),
    )
    .unwrap()
}

/// The (type, nest) pairs of one attribute list.
fn encaps<'a>(attrs: &[RouteAttr<'a>]) -> Option<(u16, NestedBytes<'a>)> {
    let kind = attrs.iter().find_map(|a| match a {
        RouteAttr::EncapType(t) => Some(*t),
        _ => None,
    });
    let nest = attrs.iter().find_map(|a| match a {
        RouteAttr::Encap(n) => Some(*n),
        _ => None,
    });
    assert_eq!(
        kind.is_some(),
        nest.is_some(),
        "RTA_ENCAP without its type: {attrs:?}"
    );
    kind.zip(nest)
}

/// Every encapsulation of every route message in `name`, decoded and checked to re-emit.
fn decoded(name: &str) -> Vec<Encap<'static>> {
    let bytes: &'static [u8] = Box::leak(capture(name).into_boxed_slice());
    let mut out = Vec::new();
    for r in Messages::new(bytes) {
        let (_, msg) = r.unwrap();
        let Payload::Route(m) = msg.payload else {
            continue;
        };
        let mut lists = vec![m.attributes.clone()];
        for a in &m.attributes {
            if let RouteAttr::Multipath(hops) = a {
                lists.extend(hops.iter().map(|h| h.attributes.clone()));
            }
        }
        for (kind, nest) in lists.iter().filter_map(|l| encaps(l)) {
            assert!(
                !nest.flagged,
                "{name}: the kernel nests RTA_ENCAP without NLA_F_NESTED"
            );
            let e = Encap::decode(kind, &nest);
            assert_eq!(e.kind(), Some(kind), "{name}: {e:?}");
            let mut again = Vec::new();
            e.emit_value(&mut again);
            assert_eq!(again, nest.bytes, "{name}: {e:?}");
            out.push(e);
        }
    }
    out
}

#[test]
fn every_encapsulation_decodes_and_reemits() {
    for name in [
        "encap_dump_routes.bin",
        "encap_notify.bin",
        "encap_get_route4.bin",
        "encap_get_route6.bin",
        "dump_routes.bin",
        "notify.bin",
    ] {
        for e in decoded(name) {
            let raw = match &e {
                Encap::Seg6(a) => a.iter().any(|a| matches!(a, Seg6Attr::Other(_))),
                Encap::Seg6Local(a) => a.iter().any(|a| match a {
                    Seg6LocalAttr::Other(_) => true,
                    Seg6LocalAttr::Counters(n) => {
                        n.attrs.iter().any(|c| matches!(c, CounterAttr::Other(_)))
                    }
                    Seg6LocalAttr::Flavors(n) => {
                        n.attrs.iter().any(|f| matches!(f, FlavorAttr::Other(_)))
                    }
                    _ => false,
                }),
                _ => true,
            };
            assert!(!raw, "{name}: {e:?}");
        }
    }
}

/// The values match what the routes were made with (capture_encap.py's ENCAP_STATE).
#[test]
fn values_are_those_configured() {
    let all = decoded("encap_dump_routes.bin");
    let modes: Vec<i32> = all
        .iter()
        .filter_map(|e| match e {
            Encap::Seg6(a) => a.iter().find_map(|a| match a {
                Seg6Attr::Srh(t) => Some(t.mode),
                _ => None,
            }),
            _ => None,
        })
        .collect();
    // 10.11/16, 10.12/16, 10.13/16's first leg, 10.50/16 (through next-hop object 2: the
    // kernel reports the object's encapsulation with the route); 2001:db8:10::/64, :11::/64,
    // :12::/64's leg, :50::/64 (object 1).
    assert_eq!(
        modes,
        [
            SEG6_IPTUN_MODE::ENCAP,
            SEG6_IPTUN_MODE::L2ENCAP_RED,
            SEG6_IPTUN_MODE::ENCAP,
            SEG6_IPTUN_MODE::ENCAP_RED,
            SEG6_IPTUN_MODE::INLINE,
            SEG6_IPTUN_MODE::ENCAP_RED,
            SEG6_IPTUN_MODE::L2ENCAP,
            SEG6_IPTUN_MODE::ENCAP,
        ]
    );
    let actions: Vec<u32> = all
        .iter()
        .filter_map(|e| match e {
            Encap::Seg6Local(a) => a.iter().find_map(|a| match a {
                Seg6LocalAttr::Action(x) => Some(*x),
                _ => None,
            }),
            _ => None,
        })
        .collect();
    use SEG6_LOCAL_ACTION as A;
    assert_eq!(
        actions,
        [
            A::END_X,
            A::END_T,
            A::END_DX4,
            A::END_DX6,
            A::END_DT6,
            A::END_B6,
            A::END_B6_ENCAP,
            A::END,
            A::END_DX2
        ]
    );
    let end_x = all
        .iter()
        .find(|e| matches!(e, Encap::Seg6Local(a) if a.contains(&Seg6LocalAttr::Action(A::END_X))))
        .unwrap();
    let Encap::Seg6Local(attrs) = end_x else {
        unreachable!()
    };
    let flavors = attrs
        .iter()
        .find_map(|a| match a {
            Seg6LocalAttr::Flavors(n) => Some(n),
            _ => None,
        })
        .unwrap();
    // The kernel nests the flavors with NLA_F_NESTED, and reports the lengths it used.
    assert!(flavors.flagged);
    assert_eq!(
        flavors.attrs,
        [
            FlavorAttr::Operation(1 << SEG6_LOCAL_FLV_OP::NEXT_CSID),
            FlavorAttr::LcblockBits(48),
            FlavorAttr::LcnodeFnBits(16)
        ]
    );
    assert_eq!(
        Encap::decode(
            LWTUNNEL_ENCAP::MPLS,
            &NestedBytes {
                flagged: false,
                bytes: &[8, 0, 1, 0, 0, 0, 1, 0]
            }
        ),
        Encap::Other(&[8, 0, 1, 0, 0, 0, 1, 0])
    );
}
