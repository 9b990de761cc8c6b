//! What a change did, for notifications: the routes stored under one prefix of one table.
//!
//! A daemon that sends RTM_NEWROUTE / RTM_DELROUTE notifications reads the prefix a route
//! request names before and after applying it; the difference is what the kernel announces
//! (the route as stored, with its resolved defaults, not the request). Reading one prefix
//! costs a hash lookup, so bulk loads with listeners stay linear.

use crate::ids::TableId;
use crate::prefix::ip_u128;
use crate::prefix::Key;
use crate::types::{Family, Prefix, Route};
use crate::Fib;

impl Fib {
    /// The routes of table `table` (0 = main) stored under exactly `dst`, as a dump shows
    /// them, in dump order.
    pub fn routes_at(&self, family: Family, table: u32, dst: Prefix) -> Vec<Route> {
        let table = TableId::or_main(table);
        let tables = match family {
            Family::Inet => &self.t4,
            Family::Inet6 => &self.t6,
        };
        let Some(t) = tables.get(&table) else {
            return Vec::new();
        };
        if Family::of(&dst.addr) != family || dst.len > family.max_len() {
            return Vec::new();
        }
        let key = Key::new(ip_u128(dst.addr), dst.len, family.max_len());
        t.get(&key)
            .map(|es| {
                es.iter()
                    .map(|e| self.entry_route(family, table, key, e))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use crate::types::*;
    use crate::Fib;

    #[test]
    fn routes_at_reads_one_prefix_as_the_dump_shows_it() {
        let mut fib = Fib::default();
        let p: Prefix = Prefix {
            addr: "10.1.0.0".parse().unwrap(),
            len: 16,
        };
        let mut r = Route::new(Family::Inet, p);
        r.rtype = RouteType::Blackhole;
        fib.route_new(&r, ReqFlags::ADD).unwrap();
        let other = Prefix { len: 24, ..p };
        let mut r2 = Route::new(Family::Inet, other);
        r2.rtype = RouteType::Blackhole;
        fib.route_new(&r2, ReqFlags::ADD).unwrap();
        let at = fib.routes_at(Family::Inet, 0, p);
        let dumped: Vec<Route> = fib
            .routes(Some(Family::Inet))
            .into_iter()
            .filter(|x| x.dst == p && x.table == 254)
            .collect();
        assert_eq!(at, dumped);
        assert_eq!(at.len(), 1);
        assert!(fib.routes_at(Family::Inet, 100, p).is_empty());
        assert!(fib.routes_at(Family::Inet6, 0, p).is_empty());
    }
}
