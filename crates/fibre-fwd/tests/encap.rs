//! Encapsulation objects as next hops' seg6 and seg6local encapsulations make them: the header
//! bytes precomputed, the tunnel source followed, the reduced list of encap.red, the headroom
//! need; an object goes with its route, and a decision of another generation is not trusted
//! with it.

mod common;

use std::net::Ipv6Addr;

use common::*;
use fibre_fib::encap::{action, seg6_mode};
use fibre_fib::types::{Encap, Seg6, Seg6Local};
use fibre_fib::*;
use fibre_fwd::encap::{Behaviour, PushMode, L2_RESERVE};
use fibre_fwd::*;

fn a6(s: &str) -> Ipv6Addr {
    s.parse().expect("address")
}

/// The SRH iproute2 builds for `segs` (`inline`: one more place, for the destination).
fn srh_of(segs: &[&str], inline: bool) -> Vec<u8> {
    let n = segs.len() + usize::from(inline);
    let mut b = vec![0u8; 8 + 16 * n];
    b[1] = (2 * n) as u8;
    b[2] = 4;
    b[3] = (n - 1) as u8;
    b[4] = (n - 1) as u8;
    for (i, s) in segs.iter().enumerate() {
        let at = 8 + 16 * (n - 1 - i);
        b[at..at + 16].copy_from_slice(&a6(s).octets());
    }
    b
}

/// d0 in, d1 out (2001:db8:9::1/64), and `DST/64 encap ENCAP dev d1`.
fn fib_with(dst: &str, e: Encap) -> (Fib, u32) {
    let mut f = Fib::default();
    let d0 = link(&mut f, "d0", [2, 0, 0, 0, 0, 0x10]);
    let d1 = link(&mut f, "d1", [2, 0, 0, 0, 0, 0x11]);
    addr(&mut f, d0, "2001:db8::1", 64);
    addr(&mut f, d1, "2001:db8:9::1", 64);
    let mut r = route(dst, 64, &[]);
    r.nexthop.oif = d1;
    r.nexthop.encap = Some(e);
    f.route_new(&r, ReqFlags::ADD).expect("encap route");
    (f, d0)
}

fn seg6(mode: i32, segs: &[&str]) -> Encap {
    Encap::Seg6(Seg6 {
        mode,
        srh: srh_of(segs, mode == seg6_mode::INLINE),
    })
}

fn object(f: &Fib, w: &FwdWriter, d0: u32) -> EncapObj {
    let r = forward(f, &packet("2001:db8:e1::5", "2001:db8::2", d0));
    let t = w.latest();
    match t.encap(&r) {
        HopEncap::Obj(i) => t.encap_obj(i).clone(),
        other => panic!("no object: {other:?}"),
    }
}

#[test]
fn h_encaps_holds_the_outer_header_and_the_srh() {
    let segs = ["2001:db8:9::10", "2001:db8:5e::1"];
    let (mut f, d0) = fib_with("2001:db8:e1::", seg6(seg6_mode::ENCAP, &segs));
    let (mut w, _) = FwdWriter::new(&f);
    let EncapObj::Seg6(p) = object(&f, &w, d0) else {
        panic!("not seg6")
    };
    assert_eq!(p.mode, PushMode::Encap);
    assert_eq!(p.added(), 40 + 8 + 32);
    assert_eq!(p.need, p.added() + L2_RESERVE);
    assert_eq!(p.first, a6("2001:db8:9::10"));
    assert_eq!(p.srh_at, Some(40));
    // Without `ip sr tunsrc`, the source d1 picks for the first segment.
    assert_eq!(&p.template[8..24], &a6("2001:db8:9::1").octets());
    assert_eq!(&p.template[24..40], &a6("2001:db8:9::10").octets());
    assert_eq!(&p.template[40..], &srh_of(&segs, false)[..]);
    // The tunnel source set: the object follows, with no other change to the FIB.
    f.set_seg6_tunsrc(a6("2001:db8:ff::1"));
    assert!(w.update(&f) > 0);
    let EncapObj::Seg6(p) = object(&f, &w, d0) else {
        panic!("not seg6")
    };
    assert_eq!(&p.template[8..24], &a6("2001:db8:ff::1").octets());
    assert_eq!(w.update(&f), 0, "nothing left to do");
}

#[test]
fn encap_red_leaves_the_first_segment_out_and_one_segment_no_srh() {
    let (f, d0) = fib_with(
        "2001:db8:e1::",
        seg6(seg6_mode::ENCAP_RED, &["2001:db8:9::10", "2001:db8:5e::1"]),
    );
    let (w, _) = FwdWriter::new(&f);
    let EncapObj::Seg6(p) = object(&f, &w, d0) else {
        panic!("not seg6")
    };
    let srh = &p.template[40..];
    assert_eq!(srh.len(), 8 + 16);
    // Last entry one lower, segments left kept: the first segment lives in the destination.
    assert_eq!((srh[1], srh[3], srh[4]), (2, 1, 0));
    assert_eq!(&srh[8..24], &a6("2001:db8:5e::1").octets());
    let (f, d0) = fib_with(
        "2001:db8:e1::",
        seg6(seg6_mode::ENCAP_RED, &["2001:db8:9::10"]),
    );
    let (w, _) = FwdWriter::new(&f);
    let EncapObj::Seg6(p) = object(&f, &w, d0) else {
        panic!("not seg6")
    };
    assert_eq!((p.added(), p.srh_at), (40, None));
}

#[test]
fn inline_holds_the_srh_alone_and_largest_added_covers_every_route() {
    let (mut f, d0) = fib_with(
        "2001:db8:e1::",
        seg6(seg6_mode::INLINE, &["2001:db8:9::10", "2001:db8:5e::1"]),
    );
    let (w, _) = FwdWriter::new(&f);
    let EncapObj::Seg6(p) = object(&f, &w, d0) else {
        panic!("not seg6")
    };
    assert_eq!(
        (p.mode, p.added(), p.srh_at),
        (PushMode::Insert, 8 + 48, Some(0))
    );
    let mut r = route("2001:db8:e2::", 64, &[]);
    r.nexthop.oif = f.link_index("d1").expect("d1");
    r.nexthop.encap = Some(seg6(seg6_mode::L2ENCAP, &["2001:db8:9::10"; 5]));
    f.route_new(&r, ReqFlags::ADD).expect("l2encap route");
    assert_eq!(fibre_fwd::encap::largest_added(&f), 40 + 8 + 16 * 5);
}

#[test]
fn seg6local_behaviours_compile_and_unsupported_ones_are_marked() {
    let end_x = Encap::Seg6Local(Seg6Local {
        action: action::END_X,
        nh6: Some(a6("2001:db8:9::2")),
        ..Seg6Local::default()
    });
    let (f, d0) = fib_with("2001:db8:e1::", end_x);
    let (w, _) = FwdWriter::new(&f);
    let EncapObj::Seg6Local(sid) = object(&f, &w, d0) else {
        panic!("not seg6local")
    };
    assert_eq!(sid.behaviour, Behaviour::EndX(a6("2001:db8:9::2")));
    assert!(!sid.psp);
    let dx2 = Encap::Seg6Local(Seg6Local {
        action: action::END_DX2,
        oif: Some(2),
        ..Seg6Local::default()
    });
    let (f, d0) = fib_with("2001:db8:e1::", dx2);
    let (w, _) = FwdWriter::new(&f);
    assert_eq!(object(&f, &w, d0), EncapObj::Unsupported);
}

#[test]
fn vrf_table_behaviours_and_ultimate_flavors_compile() {
    let cases = [
        (action::END_DT4, Behaviour::EndDt4(100)),
        (action::END_DT46, Behaviour::EndDt46(100)),
        (action::END_DT6, Behaviour::EndDt6(100)),
    ];
    for (action, want) in cases {
        let dt = Encap::Seg6Local(Seg6Local {
            action,
            vrftable: Some(100),
            ..Seg6Local::default()
        });
        let (f, d0) = fib_with("2001:db8:e1::", dt);
        let (w, _) = FwdWriter::new(&f);
        let EncapObj::Seg6Local(sid) = object(&f, &w, d0) else {
            panic!("not seg6local")
        };
        assert_eq!(sid.behaviour, want);
    }
    let ops = 1 << fibre_fib::encap::flavor::USP | 1 << fibre_fib::encap::flavor::USD;
    let end_t = Encap::Seg6Local(Seg6Local {
        action: action::END_T,
        table: Some(100),
        flavors: Some(fibre_fib::types::Flavors {
            ops: Some(ops),
            ..Default::default()
        }),
        ..Seg6Local::default()
    });
    let (f, d0) = fib_with("2001:db8:e1::", end_t);
    let (w, _) = FwdWriter::new(&f);
    let EncapObj::Seg6Local(sid) = object(&f, &w, d0) else {
        panic!("not seg6local")
    };
    assert_eq!((sid.usp, sid.usd, sid.psp), (true, true, false));
}

#[test]
fn rpl_compiles_its_routes_part_of_the_header_once() {
    // `segs 2001:db8:9::3,2001:db8:9::2` as iproute2 stores it: the last given first.
    let mut h = vec![0, 4, 3, 2, 0, 0, 0, 0];
    h.extend_from_slice(&a6("2001:db8:9::2").octets());
    h.extend_from_slice(&a6("2001:db8:9::3").octets());
    let (f, d0) = fib_with(
        "2001:db8:e1::",
        Encap::Rpl(fibre_fib::types::Rpl { srh: h }),
    );
    let (w, _) = FwdWriter::new(&f);
    let EncapObj::Rpl(p) = object(&f, &w, d0) else {
        panic!("not rpl")
    };
    assert_eq!(p.first, a6("2001:db8:9::2"));
    assert_eq!(p.cmpri, 15);
    assert_eq!(p.template, [0, 0, 3, 2, 0, 0, 0, 0, 3]);
    // The last address carried whole at most, padded: 8 + 1 + 16 -> 32.
    assert_eq!(p.max_added(), 32);
    assert_eq!(p.need, 32 + L2_RESERVE);
    assert_eq!(fibre_fwd::encap::largest_added(&f), 32);
}

#[test]
fn an_object_goes_with_its_route_and_a_stale_decision_is_not_trusted() {
    let (mut f, d0) = fib_with("2001:db8:e1::", seg6(seg6_mode::ENCAP, &["2001:db8:9::10"]));
    let (mut w, _) = FwdWriter::new(&f);
    let old = forward(&f, &packet("2001:db8:e1::5", "2001:db8::2", d0));
    assert!(matches!(w.latest().encap(&old), HopEncap::Obj(_)));
    // Replaced by a route with another list: a decision made before sees Stale, a new one the
    // new object.
    let mut r = route("2001:db8:e1::", 64, &[]);
    r.nexthop.oif = f.link_index("d1").expect("d1");
    r.nexthop.encap = Some(seg6(seg6_mode::ENCAP, &["2001:db8:9::11"]));
    f.route_new(&r, ReqFlags::REPLACE).expect("replace");
    w.update(&f);
    let new = forward(&f, &packet("2001:db8:e1::5", "2001:db8::2", d0));
    let t = w.latest();
    if old.dst == new.dst {
        panic!("the replaced route kept its next hop's handle");
    }
    assert!(matches!(t.encap(&old), HopEncap::Stale | HopEncap::None));
    let HopEncap::Obj(i) = t.encap(&new) else {
        panic!("no object for the new route")
    };
    let EncapObj::Seg6(p) = t.encap_obj(i) else {
        panic!("not seg6")
    };
    assert_eq!(p.first, a6("2001:db8:9::11"));
    // Deleted: no object for any decision, and a plain route in its place has none.
    f.route_del(&r).expect("delete");
    let mut plain = route("2001:db8:e1::", 64, &[]);
    plain.nexthop.oif = f.link_index("d1").expect("d1");
    f.route_new(&plain, ReqFlags::ADD).expect("plain");
    w.update(&f);
    let r = forward(&f, &packet("2001:db8:e1::5", "2001:db8::2", d0));
    assert_eq!(w.latest().encap(&r), HopEncap::None);
}
