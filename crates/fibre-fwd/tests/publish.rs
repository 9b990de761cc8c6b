//! Workers resolve adjacencies on other threads while the writer changes the FIB and updates
//! the forwarding objects: every read sees one whole table (an adjacency's MTU and source MAC
//! are its link's in the same read), never a missing adjacency for a route that exists
//! throughout, and, once the writer is done, its last update.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use fibre_fib::types::nud;
use fibre_fib::*;
use fibre_fwd::*;

const A: [u8; 6] = [0x0a, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [0x0a, 0, 0, 0, 0, 0xb];
const ROUNDS: u32 = 2000;

/// The gateway's MAC in round `round`.
fn mac(round: u32) -> [u8; 6] {
    if round.is_multiple_of(2) {
        B
    } else {
        A
    }
}

#[test]
fn readers_resolve_while_the_writer_updates() {
    let mut f = Fib::default();
    let d0 = link(&mut f, "d0", [2, 0, 0, 0, 0, 0]);
    let d1 = link(&mut f, "d1", [2, 0, 0, 0, 0, 1]);
    addr(&mut f, d0, "10.0.0.1", 24);
    addr(&mut f, d1, "10.1.0.1", 24);
    f.route_new(&route("198.51.100.0", 24, &["10.1.0.2"]), ReqFlags::ADD)
        .expect("route");
    neigh(&mut f, d1, "10.1.0.2", Some(A), nud::PERMANENT);
    let through_gw = packet("198.51.100.7", "10.0.0.5", d0);
    let on_link = packet("10.1.0.7", "10.0.0.5", d0);
    let routes = [
        (forward(&f, &through_gw), through_gw.dst),
        (forward(&f, &on_link), on_link.dst),
    ];
    let (mut w, reader) = FwdWriter::new(&f);
    let done = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..2)
        .map(|_| {
            let reader = reader.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) {
                    let t = reader.read();
                    for (r, dst) in &routes {
                        let i = t.adjacency(r, *dst).expect("the routes exist throughout");
                        let a = t.adj(i);
                        let l = t.link(a.link);
                        assert_eq!((l.ifindex, a.mtu), (r.oif, l.mtu), "one table per read");
                        assert_eq!(a.rewrite[6..12], l.mac);
                        assert_eq!(a.rewrite[12..], ETHERTYPE_IPV4.to_be_bytes());
                        if a.neighbour.is_some() {
                            assert!(a.rewrite[..6] == A || a.rewrite[..6] == B);
                        }
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();

    for round in 0..ROUNDS {
        neigh(&mut f, d1, "10.1.0.2", Some(mac(round)), nud::PERMANENT);
        let mtu = 1400 + round % 7 * 10;
        set_link(
            &mut f,
            d1,
            Link {
                mtu: Some(mtu),
                address: Some(vec![2, 0, 0, 0, (round % 3) as u8, 1]),
                ..Default::default()
            },
        );
        // A second gateway comes and goes: its adjacency is made and freed, its place reused.
        if round.is_multiple_of(2) {
            f.route_new(&route("203.0.113.0", 24, &["10.1.0.3"]), ReqFlags::ADD)
                .expect("route");
        } else {
            f.route_del(&route("203.0.113.0", 24, &["10.1.0.3"]))
                .expect("route del");
        }
        w.update(&f);
    }
    done.store(true, Ordering::Relaxed);
    for h in workers {
        assert!(h.join().expect("a worker panicked") > 0);
    }
    let t = reader.read();
    let i = t.adjacency(&routes[0].0, routes[0].1).expect("compiled");
    assert_eq!(t.adj(i).rewrite[..6], mac(ROUNDS - 1));
    assert_eq!(t.adj(i).mtu, 1400 + (ROUNDS - 1) % 7 * 10);
}
