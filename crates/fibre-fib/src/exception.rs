//! Next-hop exceptions: per-destination path MTU and redirect gateways learnt from ICMP, hung
//! off the next hop a destination's lookup ends at, each with a deadline (the kernel's fnhe /
//! rt6 exception buckets).
//!
//! The data plane calls [`Fib::pmtu_update`] on ICMP "fragmentation needed" / ICMPv6 "packet
//! too big" and [`Fib::redirect`] on a redirect; it reads [`Fib::exception`] after a lookup.
//! The CLI shows them with `route get` (`cache expires Nsec mtu N`) and `route show cache`,
//! drops them with `route flush cache`, and can create them offline with fibre's own
//! `route exception add` (how scenario files stand in for ICMP events).
//!
//! Invariants:
//! - A bucket belongs to one next hop of one stored route info, named by (info id, info
//!   serial, next-hop index): when the info is freed (its route deleted or replaced by a
//!   different one) its buckets go with it (`Fib::reap_released`); when a device goes down or
//!   away the buckets of next hops through it go (`Fib::exceptions_dev_down`).
//! - A bucket holds at most [`ExceptionConfig::max_per_nh`] exceptions (the kernel bounds its
//!   buckets by hash size and chain depth: 2048 x 5 for IPv4, 1024 x 5 for IPv6). A new
//!   destination beyond the bound evicts the one that would expire first. So a flood of
//!   "packet too big" for distinct destinations costs at most `max_per_nh` x
//!   [`BYTES_PER_EXCEPTION`] bytes per next hop, however long it lasts.
//! - Every exception is in the shared [`ExpiryQueue`] exactly once, under its deadline; GC
//!   (`Fib::expire`) pops due ones, at most `GC_EXCEPTIONS_PER_PASS` per pass.
//! - Readers ignore an exception whose deadline has passed (checked at read time), so GC
//!   timing never changes an answer.

use std::collections::BTreeSet;
use std::net::IpAddr;

use smallvec::SmallVec;

use crate::dst::LookupError;
use crate::expiry::{remaining_secs, ExpiryQueue, InfoRef};
use crate::flow::Flow;
use crate::flow::LookupFlags;
use crate::hash::{InternalMap, KeyedMap};
use crate::ids::{IfIndex, InfoId, TableId};
use crate::lookup::Res;
use crate::types::{rtm_flags, CacheInfo, Errno, Family, NextHop, Prefix, Route, RtError};
use crate::Fib;

/// RTAX_MTU: the bit of the metrics lock mask that locks the MTU.
pub(crate) const RTAX_MTU: u32 = 2;
/// IPv6's minimum link MTU (IPV6_MIN_MTU, RFC 8200): a "packet too big" reporting less is ignored.
pub use crate::link::IPV6_MIN_MTU;

/// Heap bytes one exception costs at most (hash entry, its place in the bucket's eviction
/// order and in the expiry queue, with the containers' slack), measured by
/// `tests/exception_flood.rs` with a counting allocator.
pub const BYTES_PER_EXCEPTION: usize = 448;

/// The knobs of the kernel's sysctls for exceptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExceptionConfig {
    /// net.ipv4.route.mtu_expires / net.ipv6.route.mtu_expires (ip_rt_mtu_expires): seconds a
    /// learnt path MTU lives. Default 600.
    pub mtu_expires: u32,
    /// net.ipv4.route.min_pmtu: an IPv4 PMTU below it is raised to it and locked. Default 552.
    pub min_pmtu4: u32,
    /// Seconds a redirect lives: the kernel gives IPv4 redirects ip_rt_gc_timeout (300 s);
    /// fibre uses the same for IPv6.
    pub redirect_expires: u32,
    /// Exceptions kept per next hop; beyond it the one expiring first is evicted.
    pub max_per_nh: usize,
}

impl Default for ExceptionConfig {
    fn default() -> Self {
        ExceptionConfig {
            mtu_expires: 600,
            min_pmtu4: 552,
            redirect_expires: 300,
            max_per_nh: 4096,
        }
    }
}

/// What a destination learnt: a path MTU, a redirect gateway, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exception {
    pub mtu: Option<u32>,
    /// The MTU was clamped to the minimum and is locked (IPv4 `mtu lock`).
    pub mtu_locked: bool,
    pub gateway: Option<IpAddr>,
    /// Deadline on the `Fib`'s clock, in milliseconds.
    pub expires_at: u64,
}

/// What an ICMP event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExceptionOutcome {
    /// An exception was created or refreshed.
    Stored,
    /// Nothing to learn (the MTU is not smaller than the path's, or is locked by the route).
    Ignored,
}

/// Why an ICMP event could not be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExceptionError {
    /// The destination has no usable route (or a reject route).
    Lookup(LookupError),
    /// The address is not of the requested family, or not a unicast destination.
    BadAddress,
    /// A redirect to a gateway that is not on-link through the route's device.
    BadGateway,
}

impl ExceptionError {
    pub fn errno(self) -> Errno {
        match self {
            ExceptionError::Lookup(e) => e.errno(),
            ExceptionError::BadAddress | ExceptionError::BadGateway => Errno::EINVAL,
        }
    }
}

impl From<ExceptionError> for RtError {
    fn from(e: ExceptionError) -> RtError {
        match e {
            ExceptionError::BadGateway => {
                RtError::msg(Errno::EINVAL, "Redirect gateway is not on-link")
            }
            e => RtError::new(e.errno()),
        }
    }
}

/// One next hop's exceptions.
#[derive(Debug, Clone)]
struct Bucket {
    nh: u16,
    family: Family,
    oif: IfIndex,
    /// The next hop's own gateway (what a PMTU-only exception is reached through).
    via: Option<IpAddr>,
    /// Destinations named by ICMP messages, which anyone on the path can send: keyed hash, so
    /// no sender can pick destinations that share one probe sequence.
    by_dst: KeyedMap<u128, Exception>,
    /// Eviction order: the exception expiring first goes first.
    by_deadline: BTreeSet<(u64, u128)>,
}

/// Names one exception in the expiry queue.
type ExcRef = (InfoId, u64, u16, u128);

#[derive(Debug, Clone, Default)]
pub(crate) struct Exceptions {
    /// Buckets of each route info (usually one next hop). Fixed-seed hash: info ids and serials
    /// are fibre's own.
    by_info: InternalMap<InfoRef, SmallVec<[Bucket; 1]>>,
    queue: ExpiryQueue<ExcRef>,
    pub config: ExceptionConfig,
}

impl Exceptions {
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn next_expiry(&self) -> Option<u64> {
        self.queue.next()
    }

    /// The live exception for `dst` on next hop `nh` of `info`.
    pub fn get(&self, info: InfoRef, nh: usize, dst: u128, now: u64) -> Option<&Exception> {
        let b = self
            .by_info
            .get(&info)?
            .iter()
            .find(|b| b.nh as usize == nh)?;
        b.by_dst.get(&dst).filter(|e| e.expires_at > now)
    }

    /// Creates or changes the exception for `dst`, evicting the bucket's first-expiring one
    /// when the bucket is full.
    fn upsert(
        &mut self,
        info: InfoRef,
        (nh, family, oif, via): (u16, Family, IfIndex, Option<IpAddr>),
        dst: u128,
        now: u64,
        change: impl FnOnce(&mut Exception),
    ) {
        let max = self.config.max_per_nh.max(1);
        let list = self.by_info.entry(info).or_default();
        let pos = match list.iter().position(|b| b.nh == nh) {
            Some(p) => p,
            None => {
                list.push(Bucket {
                    nh,
                    family,
                    oif,
                    via,
                    by_dst: KeyedMap::default(),
                    by_deadline: BTreeSet::new(),
                });
                list.len() - 1
            }
        };
        let b = &mut list[pos];
        let old = b.by_dst.get(&dst).copied().filter(|e| e.expires_at > now);
        if let Some(o) = b.by_dst.get(&dst).copied() {
            b.by_deadline.remove(&(o.expires_at, dst));
            self.queue.remove(o.expires_at, (info.0, info.1, nh, dst));
        } else if b.by_dst.len() >= max {
            if let Some((at, victim)) = b.by_deadline.pop_first() {
                b.by_dst.remove(&victim);
                self.queue.remove(at, (info.0, info.1, nh, victim));
            }
        }
        let mut e = old.unwrap_or(Exception {
            mtu: None,
            mtu_locked: false,
            gateway: None,
            expires_at: now,
        });
        change(&mut e);
        b.by_dst.insert(dst, e);
        b.by_deadline.insert((e.expires_at, dst));
        self.queue.insert(e.expires_at, (info.0, info.1, nh, dst));
    }

    fn remove_bucket(queue: &mut ExpiryQueue<ExcRef>, info: InfoRef, b: &Bucket) {
        for (at, dst) in &b.by_deadline {
            queue.remove(*at, (info.0, info.1, b.nh, *dst));
        }
    }

    /// Drops every exception of a freed info.
    pub fn drop_info(&mut self, info: InfoRef) {
        if let Some(list) = self.by_info.remove(&info) {
            for b in &list {
                Self::remove_bucket(&mut self.queue, info, b);
            }
        }
    }

    /// Drops the buckets of next hops matching `keep == false`; returns how many exceptions.
    fn retain_buckets(&mut self, mut keep: impl FnMut(&Bucket) -> bool) -> usize {
        let mut n = 0;
        let queue = &mut self.queue;
        self.by_info.retain(|info, list| {
            list.retain(|b| {
                if keep(b) {
                    return true;
                }
                n += b.by_dst.len();
                Self::remove_bucket(queue, *info, b);
                false
            });
            !list.is_empty()
        });
        n
    }

    /// Removes up to `budget` due exceptions: (removed, whether due ones are left).
    pub fn expire(&mut self, now: u64, budget: usize) -> (usize, bool) {
        let mut n = 0;
        while n < budget {
            let Some((at, (id, serial, nh, dst))) = self.queue.pop_due(now) else {
                return (n, false);
            };
            n += 1;
            let info = (id, serial);
            let Some(list) = self.by_info.get_mut(&info) else {
                continue;
            };
            if let Some(b) = list.iter_mut().find(|b| b.nh == nh) {
                b.by_dst.remove(&dst);
                b.by_deadline.remove(&(at, dst));
            }
            list.retain(|b| !b.by_dst.is_empty());
            if list.is_empty() {
                self.by_info.remove(&info);
            }
        }
        (n, self.queue.next().is_some_and(|at| at <= now))
    }
}

impl Fib {
    pub fn exception_config(&self) -> ExceptionConfig {
        self.exceptions.config
    }

    pub fn set_exception_config(&mut self, c: ExceptionConfig) {
        self.exceptions.config = c;
    }

    /// The route and next hop a packet to `dst` leaves through (output lookup, multipath
    /// included): where its exceptions hang.
    fn exception_target(&self, family: Family, dst: IpAddr) -> Result<Res, ExceptionError> {
        if Family::of(&dst) != family {
            return Err(ExceptionError::BadAddress);
        }
        let flow = Flow {
            dst: crate::prefix::ip_u128(dst),
            iif: crate::link::LOOPBACK_IFINDEX,
            // The kernel's PMTU and redirect updates look the route up without the packet.
            packet: false,
            ..Flow::empty()
        };
        let mut res = self
            .fib_lookup(family, &flow, LookupFlags::default())
            .map_err(ExceptionError::Lookup)?;
        self.select_multipath(&mut res, &flow);
        if res.rtype != crate::types::RouteType::Unicast {
            return Err(ExceptionError::BadAddress);
        }
        Ok(res)
    }

    fn bucket_of(&self, res: &Res) -> (InfoRef, (u16, Family, IfIndex, Option<IpAddr>)) {
        let info = self.infos.get(res.entry.info);
        let n = &info.spec.nhs[res.nh];
        (
            (res.entry.info, info.serial),
            (res.nh as u16, info.spec.family, n.oif, n.gw),
        )
    }

    /// An ICMP "fragmentation needed" (IPv4) or "packet too big" (IPv6) for `dst` reporting
    /// `mtu`: learns the smaller path MTU for `mtu_expires` seconds, with the kernel's rules
    /// (ignored when the route locks its MTU or the MTU is not smaller than the path's; IPv4
    /// raises an MTU below `min_pmtu4` to it and locks it; IPv6 ignores one below 1280).
    pub fn pmtu_update(
        &mut self,
        family: Family,
        dst: IpAddr,
        mtu: u32,
    ) -> Result<ExceptionOutcome, ExceptionError> {
        self.expire_routes();
        let res = self.exception_target(family, dst)?;
        let now = self.now_ms();
        let info = self.infos.get(res.entry.info);
        if info.spec.metrics.lock & (1 << RTAX_MTU) != 0 {
            return Ok(ExceptionOutcome::Ignored);
        }
        let (iref, b) = self.bucket_of(&res);
        let d = crate::prefix::ip_u128(dst);
        let path = self
            .exceptions
            .get(iref, res.nh, d, now)
            .and_then(|e| e.mtu)
            .unwrap_or(info.nh[res.nh].dst.mtu);
        let (mtu, lock) = match family {
            Family::Inet => {
                if mtu > path {
                    return Ok(ExceptionOutcome::Ignored);
                }
                let min = self.exceptions.config.min_pmtu4;
                if mtu < min {
                    (path.min(min), true)
                } else {
                    (mtu, false)
                }
            }
            Family::Inet6 => {
                // Kernel 5.15+ discards a next-hop MTU below the IPv6 minimum (RFC 8200:
                // such a report is bogus) instead of raising it to 1280.
                if mtu < IPV6_MIN_MTU || mtu >= path {
                    return Ok(ExceptionOutcome::Ignored);
                }
                (mtu, false)
            }
        };
        let at = now + self.exceptions.config.mtu_expires as u64 * 1000;
        self.exceptions.upsert(iref, b, d, now, |e| {
            // A lower MTU for a live IPv6 exception keeps its deadline (the kernel's
            // dst_set_expires only moves it earlier); IPv4 starts the lifetime again.
            e.expires_at = match (family, e.mtu) {
                (Family::Inet6, Some(_)) => e.expires_at.min(at),
                _ => at,
            };
            e.mtu = Some(mtu);
            e.mtu_locked = lock;
        });
        Ok(ExceptionOutcome::Stored)
    }

    /// A redirect for `dst` to `gateway`, which must be on-link through the device the route
    /// to `dst` uses. Lives `redirect_expires` seconds.
    pub fn redirect(
        &mut self,
        family: Family,
        dst: IpAddr,
        gateway: IpAddr,
    ) -> Result<ExceptionOutcome, ExceptionError> {
        self.expire_routes();
        let res = self.exception_target(family, dst)?;
        if Family::of(&gateway) != family {
            return Err(ExceptionError::BadGateway);
        }
        let (iref, b) = self.bucket_of(&res);
        let gw = self
            .exception_target(family, gateway)
            .map_err(|_| ExceptionError::BadGateway)?;
        let ginfo = self.infos.get(gw.entry.info);
        let gn = &ginfo.spec.nhs[gw.nh];
        if gn.gw.is_some() || gn.oif != b.2 || self.is_local_addr(gateway) {
            return Err(ExceptionError::BadGateway);
        }
        let now = self.now_ms();
        let at = now + self.exceptions.config.redirect_expires as u64 * 1000;
        self.exceptions
            .upsert(iref, b, crate::prefix::ip_u128(dst), now, |e| {
                e.gateway = Some(gateway);
                e.expires_at = e.expires_at.max(at);
            });
        Ok(ExceptionOutcome::Stored)
    }

    fn is_local_addr(&self, a: IpAddr) -> bool {
        match a {
            IpAddr::V4(v) => self.is_local4(u32::from(v)),
            IpAddr::V6(v) => self.links.iter().any(|l| l.v6.iter().any(|x| x.addr == v)),
        }
    }

    /// The live exception a packet to `dst` meets (for the data plane, after its lookup).
    pub fn exception(&self, family: Family, dst: IpAddr) -> Option<Exception> {
        let res = self.exception_target(family, dst).ok()?;
        let info = self.infos.get(res.entry.info);
        self.exceptions
            .get(
                (res.entry.info, info.serial),
                res.nh,
                crate::prefix::ip_u128(dst),
                self.now_ms(),
            )
            .copied()
    }

    /// Puts the exception of `res` for `dst` into a `route get` answer, as the kernel answers
    /// from a cached route: `cache expires Nsec mtu N`, the redirect's gateway.
    pub(crate) fn exception_answer(&self, res: &Res, dst: u128, ans: &mut Route) {
        if self.exceptions.len() == 0 {
            return;
        }
        let info = self.infos.get(res.entry.info);
        let now = self.now_ms();
        let Some(e) = self
            .exceptions
            .get((res.entry.info, info.serial), res.nh, dst, now)
        else {
            return;
        };
        ans.flags |= rtm_flags::CLONED;
        let mut c = ans.cache.take().unwrap_or_default();
        c.expires = Some(remaining_secs(e.expires_at, now));
        ans.cache = Some(c);
        if let Some(m) = e.mtu {
            ans.metrics.mtu = Some(m);
            if e.mtu_locked {
                ans.metrics.lock |= 1 << RTAX_MTU;
            }
        }
        if e.gateway.is_some() {
            ans.nexthop.gateway = e.gateway;
            if ans.family == Family::Inet {
                ans.flags |= crate::types::rtcf::REDIRECTED;
            }
        }
    }

    /// `route show cache`: every live exception as the kernel dumps cached routes (host
    /// prefix, RTM_F_CLONED, the next hop's device and gateway, `expires`, `mtu`). IPv4 walks
    /// the routes as fib_dump_info_fnhe does, so an exception on a next hop that several routes
    /// share is listed once per route (the kernel's fib_info is shared the same way); IPv6
    /// exceptions belong to one route each and are listed once. Destinations ascending within
    /// a next hop (the kernel: hash order).
    pub fn exceptions(&self, family: Option<Family>) -> Vec<Route> {
        let mut out = Vec::new();
        if self.exceptions.len() == 0 {
            return out;
        }
        let now = self.now_ms();
        if family != Some(Family::Inet6) {
            for t in self.tables_in_order(Family::Inet) {
                for (_, es) in t.iter() {
                    for e in es {
                        let serial = self.infos.get(e.info).serial;
                        if let Some(list) = self.exceptions.by_info.get(&(e.info, serial)) {
                            for b in list.iter() {
                                self.bucket_routes(b, t.id, e.info, now, &mut out);
                            }
                        }
                    }
                }
            }
        }
        if family != Some(Family::Inet) {
            let mut keys: Vec<&InfoRef> = self.exceptions.by_info.keys().collect();
            keys.sort_unstable();
            for iref in keys {
                let info = self.infos.get(iref.0);
                if info.spec.family != Family::Inet6 {
                    continue;
                }
                for b in self.exceptions.by_info[iref].iter() {
                    self.bucket_routes(b, info.spec.table, iref.0, now, &mut out);
                }
            }
        }
        out
    }

    /// The live exceptions of one bucket as cached routes of table `tb`.
    fn bucket_routes(&self, b: &Bucket, tb: TableId, info: InfoId, now: u64, out: &mut Vec<Route>) {
        let info = self.infos.get(info);
        let f = b.family;
        let mut dsts: Vec<(&u128, &Exception)> = b
            .by_dst
            .iter()
            .filter(|(_, e)| e.expires_at > now)
            .collect();
        dsts.sort_unstable_by_key(|(d, _)| **d);
        for (dst, e) in dsts {
            let mut r = Route::new(
                f,
                Prefix {
                    addr: crate::prefix::u128_ip(f, *dst),
                    len: f.max_len(),
                },
            );
            r.table = tb.0;
            r.protocol = info.spec.protocol;
            r.flags = rtm_flags::CLONED;
            if e.gateway.is_some() && f == Family::Inet {
                r.flags |= crate::types::rtcf::REDIRECTED;
            }
            r.nexthop = NextHop {
                gateway: e.gateway.or(b.via),
                oif: b.oif.0,
                hops: 0,
                flags: 0,
                encap: None,
            };
            r.metrics.mtu = e.mtu;
            if e.mtu_locked {
                r.metrics.lock |= 1 << RTAX_MTU;
            }
            r.cache = Some(CacheInfo {
                expires: Some(remaining_secs(e.expires_at, now)),
                ..CacheInfo::default()
            });
            if f == Family::Inet6 {
                r.priority = Some(info.spec.priority);
                r.pref = info.spec.pref.or(Some(0));
            }
            out.push(r);
        }
    }

    /// `route flush cache`: drops every exception (of `family`); returns how many.
    pub fn flush_exceptions(&mut self, family: Option<Family>) -> usize {
        let n = self
            .exceptions
            .retain_buckets(|b| family.is_some_and(|f| f != b.family));
        if n > 0 {
            self.gens.changed(false);
        }
        n
    }

    /// A device went down or away: exceptions through it go.
    pub(crate) fn exceptions_dev_down(&mut self, dev: IfIndex) {
        self.exceptions.retain_buckets(|b| b.oif != dev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> InfoRef {
        (InfoId::new(7), 1)
    }
    fn b() -> (u16, Family, IfIndex, Option<IpAddr>) {
        (0, Family::Inet6, IfIndex(2), None)
    }

    #[test]
    fn bucket_evicts_the_first_expiring_when_full() {
        let mut x = Exceptions::default();
        x.config.max_per_nh = 3;
        for (i, at) in [(1u128, 50u64), (2, 10), (3, 30), (4, 40)] {
            x.upsert(info(), b(), i, 0, |e| e.expires_at = at);
        }
        assert_eq!(x.len(), 3);
        assert!(x.get(info(), 0, 2, 0).is_none(), "the first to expire went");
        for d in [1, 3, 4] {
            assert!(x.get(info(), 0, d, 0).is_some());
        }
    }

    #[test]
    fn gc_pass_is_bounded_and_resumes() {
        let mut x = Exceptions::default();
        for i in 0..10u128 {
            x.upsert(info(), b(), i, 0, |e| e.expires_at = 5);
        }
        assert_eq!(x.expire(10, 4), (4, true));
        assert_eq!(x.expire(10, 4), (4, true));
        assert_eq!(x.expire(10, 4), (2, false));
        assert_eq!(x.len(), 0);
        assert!(x.by_info.is_empty());
    }

    #[test]
    fn refresh_moves_the_deadline_and_drop_info_forgets_everything() {
        let mut x = Exceptions::default();
        x.upsert(info(), b(), 1, 0, |e| e.expires_at = 5);
        x.upsert(info(), b(), 1, 0, |e| e.expires_at = 50);
        assert_eq!(x.len(), 1);
        assert_eq!(x.expire(10, 100), (0, false));
        assert!(x.get(info(), 0, 1, 10).is_some());
        assert!(x.get(info(), 0, 1, 50).is_none(), "expired at read time");
        x.drop_info(info());
        assert_eq!(x.len(), 0);
    }
}
