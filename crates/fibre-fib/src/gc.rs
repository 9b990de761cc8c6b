//! The GC pass over expiring routes and exceptions, and the upkeep that ties the expiry queue
//! to the route infos: an info is queued when it is stored and forgotten when it is freed
//! (`reap_released`, before every mutation returns). The design, and why it cannot race with
//! lookups, is in [`crate::expiry`].

use std::sync::Arc;

use crate::expiry::{Clock, Expiry, GcStats, GC_EXCEPTIONS_PER_PASS};
use crate::ids::InfoId;
use crate::prefix::Key;
use crate::types::{Family, Prefix};
use crate::Fib;

impl Fib {
    /// Replaces the clock (tests and the offline CLI use a [`ManualClock`]).
    pub fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        self.clock = clock;
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    #[inline]
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The deadline of a route requested with `expires` seconds, stored under prefix `dst`.
    pub(crate) fn expiry_of(&self, expires: Option<u32>, dst: Key) -> Option<Expiry> {
        expires.map(|s| Expiry {
            at: self.now_ms() + s as u64 * 1000,
            dst,
        })
    }

    /// Whether the route info `id` has expired. Reads the clock only for expiring routes.
    #[inline]
    pub(crate) fn info_expired(&self, id: InfoId) -> bool {
        match self.infos.get(id).spec.expires {
            None => false,
            Some(x) => x.at <= self.now_ms(),
        }
    }

    /// Forgets the next hops' exceptions of infos freed since the last call. Called before
    /// every mutation returns.
    pub(crate) fn reap_released(&mut self) {
        for r in self.infos.take_released() {
            self.exceptions.drop_info((r.id, r.serial));
        }
    }

    /// The earliest deadline of anything that expires (routes and exceptions), on the clock.
    pub fn next_expiry(&self) -> Option<u64> {
        match (self.infos.expiry().next(), self.exceptions.next_expiry()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Number of routes and exceptions that have a deadline (due or not).
    pub fn expiring(&self) -> (usize, usize) {
        (self.infos.expiry().len(), self.exceptions.len())
    }

    /// One GC pass: removes every route and up to [`GC_EXCEPTIONS_PER_PASS`] exceptions whose
    /// deadline has passed. Costs O(k log n) for k due items among n expiring ones.
    pub fn expire(&mut self) -> GcStats {
        self.expire_at(self.now_ms())
    }

    /// A GC pass as of `now` on the clock (not after it): what [`Fib::expire`] does at that
    /// moment. A daemon that keeps two copies of the state logs `now` with the pass, so that
    /// replaying it later in the other copy reclaims exactly the same items.
    pub fn expire_at(&mut self, now: u64) -> GcStats {
        let mut st = GcStats {
            routes: self.expire_routes_at(now),
            ..GcStats::default()
        };
        // Resilient groups move the buckets whose idle or unbalanced timers ran out.
        self.nhobjs.upkeep(now);
        let (done, left) = self.exceptions.expire(now, GC_EXCEPTIONS_PER_PASS);
        st.exceptions = done;
        st.more_due = left;
        if st.routes > 0 {
            self.commit_fast();
        }
        st
    }

    /// Removes every due route; the part of GC that mutations run first.
    pub(crate) fn expire_routes(&mut self) -> usize {
        // Every route change comes through here: a table load must not read the clock per
        // route when nothing can expire.
        if self.infos.expiry().is_empty() {
            return 0;
        }
        self.expire_routes_at(self.now_ms())
    }

    /// The routes a GC pass at `now` removes, not reclaimed yet: (family, table, prefix) of
    /// each, in deadline order, a prefix once per expiring route info stored under it. For
    /// announcing them (RTM_DELROUTE) before they go.
    pub fn due_routes(&self, now: u64) -> Vec<(Family, u32, Prefix)> {
        self.infos
            .expiry()
            .due(now)
            .filter(|(id, serial)| self.infos.is_live(*id, *serial))
            .filter_map(|(id, _)| {
                let spec = &self.infos.get(id).spec;
                spec.expires.map(|x| {
                    let addr = crate::prefix::u128_ip(spec.family, x.dst.addr);
                    let dst = Prefix {
                        addr,
                        len: x.dst.len,
                    };
                    (spec.family, spec.table.0, dst)
                })
            })
            .collect()
    }

    fn expire_routes_at(&mut self, now: u64) -> usize {
        let mut n = 0;
        while let Some((id, serial)) = self.infos.pop_due(now) {
            if !self.infos.is_live(id, serial) {
                continue;
            }
            let spec = &self.infos.get(id).spec;
            let (family, tb) = (spec.family, spec.table);
            let Some(x) = spec.expires else { continue };
            // Every entry of the prefix that uses this info (several with different tos or
            // source prefixes); each removal may free the info.
            loop {
                let t = match family {
                    Family::Inet => self.t4.get(&tb),
                    Family::Inet6 => self.t6.get(&tb),
                };
                let Some(i) = t
                    .and_then(|t| t.get(&x.dst))
                    .and_then(|es| es.iter().position(|e| e.info == id))
                else {
                    break;
                };
                self.remove_entry(family, tb, x.dst, i);
                n += 1;
                if !self.infos.is_live(id, serial) {
                    break;
                }
            }
        }
        if n > 0 {
            self.reap_released();
        }
        n
    }
}
