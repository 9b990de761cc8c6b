//! What a routing table costs: thousands of one-route tables (one per VRF or policy, as
//! routers use them) hold heap in proportion to their routes, not a compiled structure's fixed
//! megabyte each.

use std::net::IpAddr;

use fibre_fib::*;

#[path = "common/counting.rs"]
mod counting;
#[path = "common/dummy.rs"]
mod dummy;

/// Heap bytes one table with one route may hold, map slot included: its entry, the compiled
/// interval array and the table's own fields. (The large compiled structures alone are 1.5 MiB
/// for IPv4 and 0.8 MiB for IPv6.)
const BOUND_PER_TABLE: isize = 4096;

#[test]
fn one_route_tables_cost_kilobytes_not_megabytes() {
    const TABLES: u32 = 2000;
    let mut f = Fib::default();
    let d0 = dummy::dummy_up(&mut f, "d0");
    for (family, dst) in [("IPv4", "10.1.0.0"), ("IPv6", "2001:db8:1::")] {
        let addr: IpAddr = dst.parse().unwrap();
        let before = counting::live();
        for t in 0..TABLES {
            let mut r = Route::new(
                Family::of(&addr),
                Prefix {
                    addr,
                    len: if addr.is_ipv4() { 16 } else { 48 },
                },
            );
            r.table = 1000 + t;
            r.nexthop.oif = d0;
            r.scope = if addr.is_ipv4() {
                scope::LINK
            } else {
                scope::UNIVERSE
            };
            f.route_new(&r, ReqFlags::ADD).unwrap();
        }
        let per_table = (counting::live() - before) / TABLES as isize;
        eprintln!("{family}: {per_table} heap bytes per one-route table");
        assert!(
            per_table < BOUND_PER_TABLE,
            "{family}: {per_table} bytes per table"
        );
        // Each table answers through its compiled interval array.
        let q = RouteQuery {
            table: Some(1000 + TABLES - 1),
            ..RouteQuery::to(addr)
        };
        assert!(f.route_get(&q).is_ok(), "{family}");
    }
}
