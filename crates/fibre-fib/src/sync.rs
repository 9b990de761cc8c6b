//! The routing effects of link and address events, as the kernel's notifier chains apply
//! them (fib_add_ifaddr / fib_del_ifaddr / fib_sync_down_dev / fib_sync_up for IPv4,
//! addrconf and rt6_sync_down_dev for IPv6), and the upkeep of cached dsts.
//!
//! Kernel behaviour kept (checked in a namespace, see the tests in lib.rs):
//! - IPv4 address: its local route (table local) always; the prefix route (main, scope link,
//!   metric IFA_RT_PRIORITY) and broadcast routes (the explicit one, and the subnet's last
//!   address for prefixes shorter than /31) only while the link is up.
//! - IPv4 link down: next hops through it die; routes whose next hops all died are flushed
//!   (prefix and broadcast routes included), host-scope (local) routes stay; multipath routes
//!   keep their dead next hops marked `dead linkdown`. Link up re-adds the address routes and
//!   revives the next hops.
//! - Carrier loss marks next hops LINKDOWN and keeps them (both families).
//! - IPv6 link down drops every address of the link (keep_addr_on_down is 0) and every route
//!   through it; link up (with carrier) adds ff00::/8, the EUI-64 link-local address (unless
//!   addr_gen_mode is none) and fe80::/64.
//! - Address delete removes the routes it implied; when the address is gone from the host,
//!   IPv4 routes of table main with it as prefsrc are flushed, IPv6 routes lose the prefsrc.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::addr::{self, Addr4, Addr6};
use crate::dst::{Dst, DstAt, Reason, Walk};
use crate::ids::{IfIndex, InfoId, TableId};
use crate::link::LOOPBACK_IFINDEX;
use crate::prefix::Key;

use crate::route::{between_siblings, InfoSpec, NhSpec, NhState};
use crate::route6::{Internal6, PRIO_ADDRCONF};
use crate::types::{
    ifa_flags, nh_flags, protocol, scope, Family, Prefix, ReqFlags, Route, RouteType,
};
use crate::Fib;

#[allow(clippy::too_many_arguments)] // the fields of fib_magic's request, one each
fn kernel_route4(
    rtype: RouteType,
    dst: u32,
    len: u8,
    tb: TableId,
    rscope: u8,
    prefsrc: u32,
    oif: IfIndex,
    metric: u32,
) -> Route {
    let mut r = Route::new(
        Family::Inet,
        Prefix {
            addr: IpAddr::V4(Ipv4Addr::from(dst)),
            len,
        },
    );
    r.rtype = rtype;
    r.table = tb.0;
    r.scope = rscope;
    r.protocol = protocol::KERNEL;
    r.prefsrc = Some(IpAddr::V4(Ipv4Addr::from(prefsrc)));
    r.nexthop.oif = oif.0;
    r.priority = Some(metric);
    r
}

fn kernel_route6(
    rtype: RouteType,
    dst: Ipv6Addr,
    len: u8,
    tb: TableId,
    oif: IfIndex,
    metric: u32,
) -> Route {
    let mut r = Route::new(
        Family::Inet6,
        Prefix {
            addr: IpAddr::V6(dst),
            len,
        },
    );
    r.rtype = rtype;
    r.table = tb.0;
    r.protocol = protocol::KERNEL;
    r.nexthop.oif = oif.0;
    r.priority = Some(metric);
    r
}

/// Metric 0 for IPv6 local/anycast routes: RTA_PRIORITY absent would mean 1024.
const LOCAL6_METRIC: u32 = 0;

impl Fib {
    /// fib_add_ifaddr.
    pub(crate) fn add_ifaddr4(&mut self, dev: IfIndex, a: &Addr4) {
        let Some(l) = self.links.get(dev) else { return };
        let up = l.up;
        let lo = l.is_loopback();
        let prim_local = if a.is_secondary() {
            match addr::primary_for(&l.v4, a.address, a.prefixlen) {
                Some(p) => p.local,
                None => return,
            }
        } else {
            a.local
        };
        let add = |fib: &mut Fib, r: Route| {
            let _ = fib.route4_new(&r, ReqFlags::APPEND);
        };
        add(
            self,
            kernel_route4(
                RouteType::Local,
                a.local,
                32,
                TableId::LOCAL,
                scope::HOST,
                prim_local,
                dev,
                0,
            ),
        );
        if !up {
            return;
        }
        if a.broadcast != 0 && a.broadcast != u32::MAX {
            add(
                self,
                kernel_route4(
                    RouteType::Broadcast,
                    a.broadcast,
                    32,
                    TableId::LOCAL,
                    scope::LINK,
                    prim_local,
                    dev,
                    0,
                ),
            );
        }
        let prefix = a.prefix();
        if prefix != 0 && !a.is_secondary() && (prefix != a.local || a.prefixlen < 32) {
            if a.flags & ifa_flags::NOPREFIXROUTE == 0 {
                let (t, tb, sc) = if lo {
                    (RouteType::Local, TableId::LOCAL, scope::HOST)
                } else {
                    (RouteType::Unicast, TableId::MAIN, scope::LINK)
                };
                add(
                    self,
                    kernel_route4(t, prefix, a.prefixlen, tb, sc, prim_local, dev, a.metric),
                );
            }
            if a.prefixlen < 31 {
                let brd = a.address | !a.mask();
                add(
                    self,
                    kernel_route4(
                        RouteType::Broadcast,
                        brd,
                        32,
                        TableId::LOCAL,
                        scope::LINK,
                        prim_local,
                        dev,
                        0,
                    ),
                );
            }
        }
    }

    /// fib_del_ifaddr, after `a` left the list of `dev`.
    pub(crate) fn del_ifaddr4(&mut self, dev: IfIndex, a: &Addr4) {
        const LOCAL_OK: u32 = 1;
        const BRD_OK: u32 = 2;
        const BRD0_OK: u32 = 4;
        const BRD1_OK: u32 = 8;
        let Some(l) = self.links.get(dev) else { return };
        let lo = l.is_loopback();
        let any = a.prefix();
        let brd = a.address | !a.mask();
        let prim = if a.is_secondary() {
            match addr::primary_for(&l.v4, any, a.prefixlen) {
                Some(p) => p.clone(),
                None => return,
            }
        } else {
            a.clone()
        };
        let mut subnet = false;
        let mut dels: Vec<Route> = Vec::new();
        if !a.is_secondary() && any != 0 && (any != a.local || a.prefixlen < 32) {
            if a.flags & ifa_flags::NOPREFIXROUTE == 0 {
                let (t, tb, sc) = if lo {
                    (RouteType::Local, TableId::LOCAL, scope::HOST)
                } else {
                    (RouteType::Unicast, TableId::MAIN, scope::LINK)
                };
                let mut r = kernel_route4(t, any, a.prefixlen, tb, sc, prim.local, dev, 0);
                r.priority = None;
                dels.push(r);
            }
            subnet = true;
        }
        let mut ok = 0u32;
        let mut same_prefsrc = false;
        let mut prim1: Option<Addr4>;
        for b in &l.v4 {
            if b.is_secondary() {
                if b.prefixlen == prim.prefixlen && prim.covers(b.address) {
                    prim1 = Some(prim.clone());
                } else {
                    if !same_prefsrc {
                        continue;
                    }
                    let p1 = addr::primary_for(&l.v4, b.address, b.prefixlen).cloned();
                    match p1 {
                        Some(p) if p.local == prim.local => prim1 = Some(p),
                        _ => continue,
                    }
                }
            } else {
                if prim.local != b.local {
                    continue;
                }
                if prim.prefixlen != b.prefixlen || prim.address != b.address {
                    same_prefsrc = true;
                }
                prim1 = Some(b.clone());
            }
            if a.local == b.local {
                ok |= LOCAL_OK;
            }
            if a.broadcast == b.broadcast {
                ok |= BRD_OK;
            }
            if brd == b.broadcast {
                ok |= BRD1_OK;
            }
            if any == b.broadcast {
                ok |= BRD0_OK;
            }
            if prim1.as_ref() == Some(b) && b.prefixlen < 31 {
                let brd1 = b.address | !b.mask();
                let any1 = b.prefix();
                if any1 != 0 {
                    if a.broadcast == brd1 || a.broadcast == any1 {
                        ok |= BRD_OK;
                    }
                    if brd == brd1 || brd == any1 {
                        ok |= BRD1_OK;
                    }
                    if any == brd1 || any == any1 {
                        ok |= BRD0_OK;
                    }
                }
            }
        }
        let bcast = |d: u32| {
            kernel_route4(
                RouteType::Broadcast,
                d,
                32,
                TableId::LOCAL,
                scope::LINK,
                prim.local,
                dev,
                0,
            )
        };
        if ok & BRD_OK == 0 && a.broadcast != 0 {
            dels.push(bcast(a.broadcast));
        }
        if subnet && a.prefixlen < 31 {
            if ok & BRD1_OK == 0 {
                dels.push(bcast(brd));
            }
            if ok & BRD0_OK == 0 {
                dels.push(bcast(any));
            }
        }
        let local_gone = ok & LOCAL_OK == 0;
        if local_gone {
            dels.push(kernel_route4(
                RouteType::Local,
                a.local,
                32,
                TableId::LOCAL,
                scope::HOST,
                prim.local,
                dev,
                0,
            ));
        }
        for mut r in dels {
            if r.priority == Some(0) {
                r.priority = None;
            }
            let _ = self.route4_del(&r);
        }
        if local_gone && self.addr_type4(a.local, TableId::LOCAL) != RouteType::Local {
            // fib_sync_down_addr: routes of table main using the address as prefsrc die.
            let src = Some(IpAddr::V4(Ipv4Addr::from(a.local)));
            self.flush_infos(|s| {
                s.family == Family::Inet && s.table == TableId::MAIN && s.prefsrc == src
            });
        }
    }

    /// fib_modify_prefix_metric: a replace that changes an IPv4 address's metric moves its
    /// prefix route to the new metric (added first, then the old one deleted). Addresses
    /// without a prefix route of their own (secondary, noprefixroute, a /32, a down link)
    /// have nothing to move.
    pub(crate) fn modify_prefix_metric4(&mut self, dev: IfIndex, a: &Addr4, new_metric: u32) {
        let up = self.links.get(dev).is_some_and(|l| l.up);
        let prefix = a.prefix();
        if !up
            || a.is_secondary()
            || a.flags & ifa_flags::NOPREFIXROUTE != 0
            || prefix == 0
            || (prefix == a.local && a.prefixlen == 32)
        {
            return;
        }
        let route = |metric: u32| {
            kernel_route4(
                RouteType::Unicast,
                prefix,
                a.prefixlen,
                TableId::MAIN,
                scope::LINK,
                a.local,
                dev,
                metric,
            )
        };
        let _ = self.route4_new(&route(new_metric), ReqFlags::APPEND);
        let mut old = route(a.metric);
        if a.metric == 0 {
            old.priority = None;
        }
        let _ = self.route4_del(&old);
    }

    /// modify_prefix_route: a replace giving an IPv6 address a new metric moves its prefix
    /// route to it (the new route first, then the old deleted); metric 0 keeps the old one.
    pub(crate) fn modify_prefix_metric6(&mut self, dev: IfIndex, a: &Addr6, new_metric: u32) {
        let eff = |m: u32| if m != 0 { m } else { PRIO_ADDRCONF };
        if new_metric == 0 || eff(new_metric) == eff(a.metric) {
            return;
        }
        if a.flags & ifa_flags::NOPREFIXROUTE != 0 || !self.links.get(dev).is_some_and(|l| l.up) {
            return;
        }
        let p = Ipv6Addr::from(u128::from(a.addr) & crate::prefix::mask(a.prefixlen, 128));
        let route = |metric: u32| {
            kernel_route6(
                RouteType::Unicast,
                p,
                a.prefixlen,
                TableId::MAIN,
                dev,
                metric,
            )
        };
        let int = Internal6 { kernel: true };
        let _ = self.route6_new_internal(&route(new_metric), ReqFlags::PREPEND, int);
        let _ = self.route6_del(&route(eff(a.metric)));
    }

    /// Adds the routes of an IPv6 address whose link is ready (addrconf's NEWADDR work).
    pub(crate) fn add_ifaddr6(&mut self, dev: IfIndex, a: &Addr6, with_prefix: bool) {
        let int = Internal6 { kernel: true };
        let add = |fib: &mut Fib, r: Route| {
            let _ = fib.route6_new_internal(&r, ReqFlags::PREPEND, int);
        };
        // Kernel (checked): an address added to a down link gets its local and anycast
        // routes at once, its prefix route only once the link is up; /128 gets one too.
        let up = self.links.get(dev).is_some_and(|l| l.up);
        let with_prefix = with_prefix && up;
        if with_prefix && a.flags & ifa_flags::NOPREFIXROUTE == 0 {
            let p = Ipv6Addr::from(u128::from(a.addr) & crate::prefix::mask(a.prefixlen, 128));
            let metric = if a.metric != 0 {
                a.metric
            } else {
                PRIO_ADDRCONF
            };
            add(
                self,
                kernel_route6(
                    RouteType::Unicast,
                    p,
                    a.prefixlen,
                    TableId::MAIN,
                    dev,
                    metric,
                ),
            );
        }
        if let Some(peer) = a.peer {
            add(
                self,
                kernel_route6(
                    RouteType::Unicast,
                    peer,
                    a.prefixlen,
                    TableId::MAIN,
                    dev,
                    PRIO_ADDRCONF,
                ),
            );
        }
        add(
            self,
            kernel_route6(
                RouteType::Local,
                a.addr,
                128,
                TableId::LOCAL,
                dev,
                LOCAL6_METRIC,
            ),
        );
        if self.settings().ipv6_forwarding && a.prefixlen < 127 {
            let p = Ipv6Addr::from(u128::from(a.addr) & crate::prefix::mask(a.prefixlen, 128));
            if !p.is_unspecified() {
                add(
                    self,
                    kernel_route6(
                        RouteType::Anycast,
                        p,
                        128,
                        TableId::LOCAL,
                        dev,
                        LOCAL6_METRIC,
                    ),
                );
            }
        }
    }

    /// Removes the routes of an IPv6 address that left `dev`.
    pub(crate) fn del_ifaddr6(&mut self, dev: IfIndex, a: &Addr6) {
        let del = |fib: &mut Fib,
                   rtype: RouteType,
                   d: Ipv6Addr,
                   len: u8,
                   tb: TableId,
                   metric: Option<u32>| {
            let r = Route {
                priority: metric,
                ..kernel_route6(rtype, d, len, tb, dev, 0)
            };
            let _ = fib.route6_del(&r);
        };
        del(
            self,
            RouteType::Local,
            a.addr,
            128,
            TableId::LOCAL,
            Some(LOCAL6_METRIC),
        );
        let p = Ipv6Addr::from(u128::from(a.addr) & crate::prefix::mask(a.prefixlen, 128));
        let others = self.links.get(dev).map(|l| {
            l.v6.iter()
                .filter(|b| {
                    b.prefixlen == a.prefixlen
                        && u128::from(b.addr) & crate::prefix::mask(b.prefixlen, 128)
                            == u128::from(p)
                })
                .count()
        });
        // The subnet-router anycast address is counted per device (__ipv6_dev_ac_dec): it
        // stays while another address of any prefix length has it too (2001:db8:5::1/64 and
        // 2001:db8:5:c4::1/48 share 2001:db8:5::).
        let anycast_users = self.links.get(dev).map_or(0, |l| {
            l.v6.iter()
                .filter(|b| {
                    b.prefixlen < 127
                        && u128::from(b.addr) & crate::prefix::mask(b.prefixlen, 128)
                            == u128::from(p)
                })
                .count()
        });
        if a.prefixlen < 127 && !p.is_unspecified() && anycast_users == 0 {
            del(
                self,
                RouteType::Anycast,
                p,
                128,
                TableId::LOCAL,
                Some(LOCAL6_METRIC),
            );
        }
        if others == Some(0) && a.flags & ifa_flags::NOPREFIXROUTE == 0 {
            let metric = if a.metric != 0 {
                a.metric
            } else {
                PRIO_ADDRCONF
            };
            self.del_kernel_route6(dev, p, a.prefixlen, metric);
        }
        self.remove_prefsrc6(a.addr);
    }

    /// fib6_remove_prefsrc: routes whose prefsrc was `addr` forget it when the address is
    /// no longer valid for the route's device (a global address still on another link is).
    pub(crate) fn remove_prefsrc6(&mut self, addr: Ipv6Addr) {
        let gone = Some(IpAddr::V6(addr));
        let valid: Vec<IfIndex> = self
            .links
            .iter()
            .map(|l| l.ifindex)
            .filter(|&d| self.chk_addr6(IpAddr::V6(addr), Some(d)))
            .collect();
        self.rewrite_infos(|s| {
            let dead = s.family == Family::Inet6
                && s.nhid.is_none()
                && s.prefsrc == gone
                && s.nhs.first().is_some_and(|n| !valid.contains(&n.oif));
            dead.then(|| InfoSpec {
                prefsrc: None,
                ..s.clone()
            })
        });
    }

    fn del_kernel_route6(&mut self, dev: IfIndex, p: Ipv6Addr, len: u8, metric: u32) {
        let mut r = kernel_route6(RouteType::Unicast, p, len, TableId::MAIN, dev, metric);
        r.protocol = protocol::KERNEL;
        let _ = self.route6_del(&r);
    }

    /// addrconf_dev_config when a link becomes ready (up with carrier).
    pub(crate) fn v6_link_ready(&mut self, dev: IfIndex) {
        let Some(l) = self.links.get(dev) else { return };
        if l.is_loopback() {
            let lo = Addr6 {
                addr: Ipv6Addr::LOCALHOST,
                peer: None,
                prefixlen: 128,
                scope: scope::HOST,
                flags: ifa_flags::PERMANENT,
                metric: 0,
                valid_lft: None,
                preferred_lft: None,
            };
            if let Some(l) = self.links.get_mut(dev) {
                let _ = addr::insert6(&mut l.v6, lo.clone());
            }
            self.add_ifaddr6(dev, &lo, false);
            return;
        }
        let existing: Vec<Addr6> = l.v6.clone();
        let gen_ll = l.addr_gen_mode == 0;
        let mac = l.mac.clone();
        let int = Internal6 { kernel: true };
        let _ = self.route6_new_internal(
            &kernel_route6(
                RouteType::Multicast,
                "ff00::".parse().expect("literal"),
                8,
                TableId::LOCAL,
                dev,
                PRIO_ADDRCONF,
            ),
            ReqFlags::PREPEND,
            int,
        );
        if gen_ll {
            if let Some(iid) = addr::eui64(&mac) {
                let mut o = [0u8; 16];
                o[0] = 0xfe;
                o[1] = 0x80;
                o[8..].copy_from_slice(&iid);
                let ll = Addr6 {
                    addr: Ipv6Addr::from(o),
                    peer: None,
                    prefixlen: 64,
                    scope: scope::LINK,
                    flags: ifa_flags::PERMANENT,
                    metric: 0,
                    valid_lft: None,
                    preferred_lft: None,
                };
                let inserted = self
                    .links
                    .get_mut(dev)
                    .is_some_and(|l| addr::insert6(&mut l.v6, ll.clone()).is_ok());
                if inserted {
                    self.add_ifaddr6(dev, &ll, true);
                }
            }
        }
        for a in existing {
            self.add_ifaddr6(dev, &a, true);
        }
    }

    /// addrconf_ifdown (without keep_addr_on_down): the link's IPv6 addresses go without
    /// ipv6_del_addr, so routes elsewhere keep them as prefsrc, and the routes through it go
    /// as on NETDEV_DOWN, or with `unregister` as on NETDEV_UNREGISTER (multipath siblings
    /// through it removed, not marked dead).
    pub(crate) fn v6_ifdown(&mut self, dev: IfIndex, unregister: bool) {
        if let Some(l) = self.links.get_mut(dev) {
            l.v6.clear();
        }
        self.drop_nhs6(dev, unregister);
    }

    /// rt6_sync_down_dev (fib6_ifdown). `unregister` false is NETDEV_DOWN: single-path routes
    /// through `dev` go; in a sibling group the next hops through it are marked dead and
    /// linkdown (the group goes once every next hop is dead). `unregister` true: every
    /// next hop through `dev` goes, and with it the route when it was the last.
    pub(crate) fn drop_nhs6(&mut self, dev: IfIndex, unregister: bool) {
        if !unregister {
            self.mark_siblings6_dead(dev);
        }
        // By id, as `tables_by_id_mut` walks them, for the same reason.
        let mut ids: Vec<TableId> = self.t6.keys().copied().collect();
        ids.sort_unstable();
        for tb in ids {
            let keys: Vec<Key> = self.t6[&tb].iter().map(|(k, _)| *k).collect();
            for key in keys {
                while let Some(list) = self.t6.get(&tb).and_then(|t| t.get(&key)) {
                    // NETDEV_DOWN's walk jumps from a live sibling group's first route to
                    // its last: the routes added between its siblings are not visited.
                    let mut passed = vec![false; list.len()];
                    if !unregister {
                        for (i, e) in list.iter().enumerate() {
                            let info = self.infos.get(e.info);
                            if !info.nh.iter().any(|h| h.flags & nh_flags::DEAD == 0) {
                                continue;
                            }
                            for (j, x) in list.iter().enumerate().skip(i + 1) {
                                if between_siblings(&self.infos, e, x).is_some() {
                                    passed[j] = true;
                                }
                            }
                        }
                    }
                    let hit = list.iter().enumerate().find_map(|(i, e)| {
                        if passed[i] {
                            return None;
                        }
                        let info = self.infos.get(e.info);
                        let s = &info.spec;
                        // Routes through next-hop objects live and die with their objects
                        // (fib6_ifdown passes over them).
                        if s.nhid.is_some() {
                            return None;
                        }
                        if !unregister && s.nhs.len() > 1 {
                            // Marked above; flushed only when all of them are dead.
                            let all_dead = info.nh.iter().all(|n| n.flags & nh_flags::DEAD != 0);
                            return all_dead.then_some((i, 0, 1));
                        }
                        s.nhs
                            .iter()
                            .position(|n| n.oif == dev)
                            .map(|k| (i, k, s.nhs.len()))
                    });
                    match hit {
                        Some((i, _, 1)) => self.remove_entry(Family::Inet6, tb, key, i),
                        Some((i, k, _)) => self.remove_sibling6(tb, key, i, k),
                        None => break,
                    }
                }
            }
        }
    }

    /// NETDEV_CHANGEMTU for IPv6 (rt6_mtu_change): a route through `dev` whose `mtu` metric
    /// is set and not locked follows the device MTU down (a metric at or above the new MTU
    /// becomes it) and up (a metric equal to the old device MTU becomes the new one). Routes
    /// without the metric keep none (their dsts read the device MTU). IPv4 routes keep their
    /// metrics: fib_sync_mtu only updates next-hop exceptions.
    ///
    /// Each sibling of a multipath route has its own metrics: only those of the siblings
    /// through `dev` move (`NhSpec::mtu`). A route through an object moves when any of the
    /// object's next hops is on `dev`.
    pub(crate) fn mtu_change6(&mut self, dev: IfIndex, old: u32, new: u32) {
        let lock = 1 << crate::exception::RTAX_MTU;
        let moves = |m: Option<u32>| m.filter(|&m| (m >= new || m == old) && m != new).is_some();
        self.rewrite_infos(|s| {
            if s.family != Family::Inet6 || s.metrics.lock & lock != 0 {
                return None;
            }
            if !s.mtu_per_hop() {
                if !moves(s.metrics.mtu) || !s.nhs.iter().any(|n| n.oif == dev) {
                    return None;
                }
                let mut s = s.clone();
                s.metrics.mtu = Some(new);
                return Some(s);
            }
            if !s.nhs.iter().any(|n| n.oif == dev && moves(n.mtu)) {
                return None;
            }
            let mut s = s.clone();
            for n in s.nhs.iter_mut().filter(|n| n.oif == dev && moves(n.mtu)) {
                n.mtu = Some(new);
            }
            s.metrics.mtu = s.nhs[0].mtu;
            Some(s)
        });
    }

    /// NETDEV_DOWN on IPv6 sibling groups (rt6_multipath_nh_flags_set): next hops through
    /// `dev` become dead and linkdown, and the group is rebalanced over the others.
    fn mark_siblings6_dead(&mut self, dev: IfIndex) {
        let ign = &self.confs.ignored();
        let ids = self.infos.on_link(dev);
        self.infos.update(&ids, |info| {
            let s = &info.spec;
            if s.family != Family::Inet6 || s.nhid.is_some() || s.nhs.len() < 2 {
                return;
            }
            if !s.nhs.iter().any(|n| n.oif == dev) {
                return;
            }
            for (spec, st) in info.spec.nhs.iter().zip(info.nh.iter_mut()) {
                if spec.oif == dev {
                    st.flags |= nh_flags::DEAD | nh_flags::LINKDOWN;
                }
            }
            info.rebalance(ign);
        });
    }

    /// fib_sync_down_dev for IPv4: DOWN marks next hops dead (except host-scope ones) and
    /// flushes routes with every next hop dead; CHANGE (carrier loss) marks them linkdown;
    /// UNREGISTER (`force`) kills every route with any next hop on the device.
    pub(crate) fn sync_down4(&mut self, dev: IfIndex, down: bool, force: bool) {
        let ign = &self.confs.ignored();
        let ids = self.infos.on_link(dev);
        self.infos.update(&ids, |info| {
            // IPv6 routes are dropped on down (drop_nhs6); only carrier changes mark them here.
            if info.spec.family == Family::Inet6 && down {
                return;
            }
            if !info.spec.nhs.iter().any(|n| n.oif == dev) {
                return;
            }
            let v6 = info.spec.family == Family::Inet6;
            // fib6_ifdown skips RTF_LOCAL and RTF_ANYCAST routes (a user's `anycast` route
            // lacks the flag).
            if v6 && (info.spec.rtype == RouteType::Local || info.spec.rtf_anycast) {
                return;
            }
            let mut dead = 0;
            let n = info.nh.len();
            for (spec, st) in info.spec.nhs.iter().zip(info.nh.iter_mut()) {
                if st.flags & nh_flags::DEAD != 0 {
                    dead += 1;
                } else if spec.oif == dev && (force || st.scope != scope::NOWHERE) {
                    st.flags |= nh_flags::LINKDOWN;
                    if down {
                        st.flags |= nh_flags::DEAD;
                    }
                    dead += 1;
                }
                if force && spec.oif == dev {
                    dead = n;
                    break;
                }
            }
            if dead == n && !v6 {
                info.linkdown = true;
                info.dead |= down;
            }
            info.rebalance(ign);
        });
        if down {
            self.flush_dead();
        }
    }

    /// fib_disable_ip after the last IPv4 address of `dev` went (fib_inetaddr_event,
    /// NETDEV_DOWN with force): every IPv4 next hop through `dev` dies whatever its scope, and
    /// routes left without a live next hop are flushed. Routes through next-hop objects keep
    /// theirs: objects follow link events only.
    pub(crate) fn disable_ip4(&mut self, dev: IfIndex) {
        let ign = &self.confs.ignored();
        let ids = self.infos.on_link(dev);
        self.infos.update(&ids, |info| {
            if info.spec.family != Family::Inet
                || info.spec.nhid.is_some()
                || !info.spec.nhs.iter().any(|n| n.oif == dev)
            {
                return;
            }
            let mut dead = 0;
            for (spec, st) in info.spec.nhs.iter().zip(info.nh.iter_mut()) {
                if st.flags & nh_flags::DEAD != 0 {
                    dead += 1;
                } else if spec.oif == dev {
                    st.flags |= nh_flags::DEAD | nh_flags::LINKDOWN;
                    dead += 1;
                }
            }
            if dead == info.nh.len() {
                info.dead = true;
            }
            info.rebalance(ign);
        });
        self.flush_dead();
    }

    /// fib_sync_up / rt6_sync_up: clears `flag` (DEAD or LINKDOWN) on next hops through
    /// `dev` (LINKDOWN stays while the carrier is off).
    pub(crate) fn sync_up(&mut self, dev: IfIndex) {
        let carrier = self.links.get(dev).is_some_and(|l| l.carrier);
        let ign = &self.confs.ignored();
        let ids = self.infos.on_link(dev);
        self.infos.update(&ids, |info| {
            // rt6_sync_up runs when the link becomes ready (up with carrier).
            if info.spec.family == Family::Inet6 && !carrier {
                return;
            }
            let mut changed = false;
            for (spec, st) in info.spec.nhs.iter().zip(info.nh.iter_mut()) {
                if spec.oif != dev {
                    continue;
                }
                st.flags &= !nh_flags::DEAD;
                if carrier {
                    st.flags &= !nh_flags::LINKDOWN;
                }
                changed = true;
            }
            if changed {
                info.dead = false;
                info.linkdown &= !carrier;
                info.rebalance(ign);
            }
        });
    }

    /// Removes every entry whose info is dead (fib_flush): the keys using dead infos come from
    /// each table's users index, so the cost follows what is flushed, not the table's size.
    pub(crate) fn flush_dead(&mut self) {
        let mut dead: Vec<InfoId> = self
            .infos
            .ids()
            .into_iter()
            .filter(|&i| self.infos.get(i).dead)
            .collect();
        if dead.is_empty() {
            return;
        }
        dead.sort_unstable();
        let mut dropped = Vec::new();
        for (_, t) in self.tables_by_id_mut() {
            let keys = t.keys_using(&dead);
            t.retain_entries_at(&keys, |e| {
                let gone = dead.binary_search(&e.info).is_ok();
                if gone {
                    dropped.push(e.info);
                }
                !gone
            });
        }
        for d in dropped {
            self.infos.put(d);
        }
        self.route_changed(true);
    }

    /// Marks dead and flushes the infos `pred` selects.
    pub(crate) fn flush_infos(&mut self, pred: impl Fn(&InfoSpec) -> bool) {
        let ids = self.infos.ids();
        self.infos.update(&ids, |info| {
            if pred(&info.spec) {
                info.dead = true;
            }
        });
        self.flush_dead();
    }

    /// Replaces the info of every entry for which `f` returns a new spec.
    pub(crate) fn rewrite_infos(&mut self, f: impl Fn(&InfoSpec) -> Option<InfoSpec>) {
        let mut map: Vec<(InfoId, InfoId)> = Vec::new();
        for id in self.infos.ids() {
            let info = self.infos.get(id);
            if let Some(spec) = f(&info.spec) {
                let mut st = info.nh.clone();
                // A next-hop object's members changed: fresh state for the new hops.
                if st.len() != spec.nhs.len() {
                    st = spec
                        .nhs
                        .iter()
                        .map(|n| {
                            let linkdown = self.links.get(n.oif).is_some_and(|l| !l.carrier);
                            NhState {
                                flags: if linkdown { nh_flags::LINKDOWN } else { 0 },
                                scope: scope::LINK,
                                upper_bound: -1,
                                dst: self.dead_dst(n),
                            }
                        })
                        .collect();
                }
                if spec.family == Family::Inet && spec.nhid.is_some() {
                    for (state, n) in st.iter_mut().zip(&spec.nhs) {
                        state.scope = crate::nexthop::object_path_scope4(n);
                    }
                }
                let nid = self.intern(spec, st);
                map.push((id, nid));
            }
        }
        if map.is_empty() {
            return;
        }
        let lookup: std::collections::HashMap<InfoId, InfoId> = map.iter().copied().collect();
        let mut olds: Vec<InfoId> = lookup.keys().copied().collect();
        olds.sort_unstable();
        let mut holds = Vec::new();
        let mut puts = Vec::new();
        for (_, t) in self.tables_by_id_mut() {
            let keys = t.keys_using(&olds);
            t.modify_at(&keys, |es| {
                for e in es.iter_mut() {
                    if let Some(&n) = lookup.get(&e.info) {
                        puts.push(e.info);
                        holds.push(n);
                        e.info = n;
                    }
                }
            });
        }
        for h in holds {
            self.infos.hold(h);
        }
        for p in puts {
            self.infos.put(p);
        }
        for (_, n) in map {
            self.infos.drop_if_unused(n);
        }
        self.route_changed(true);
    }

    /// Removes entry `i` of `key`.
    pub(crate) fn remove_entry(&mut self, family: Family, tb: TableId, key: Key, i: usize) {
        let t = match family {
            Family::Inet => self.t4.get_mut(&tb),
            Family::Inet6 => self.t6.get_mut(&tb),
        };
        let Some(t) = t else { return };
        if !t.contains(&key) {
            return;
        }
        let list = t.entries_mut(key);
        if i >= list.len() {
            return;
        }
        let e = list.remove(i);
        let spec = &self.infos.get(e.info).spec;
        if family == Family::Inet6 && spec.nhs.len() > 1 && spec.nhid.is_none() {
            // The routes added between the group's siblings no longer have any before them.
            for x in list.iter_mut() {
                if x.src() == e.src() && self.infos.get(x.info).spec.priority == spec.priority {
                    x.hops_before = 0;
                }
            }
        }
        t.prune(&key);
        let affects = self.infos.get(e.info).spec.scope >= scope::LINK || family == Family::Inet6;
        self.infos.put(e.info);
        self.route_changed(affects);
    }

    /// A dst for next hop `n` of `spec`, from the current links and addresses.
    pub(crate) fn build_dst(&self, spec: &InfoSpec, i: usize, st: &NhState) -> Dst {
        let n: &NhSpec = &spec.nhs[i];
        let link = self.links.get(n.oif);
        let mtu = spec.mtu_of(i).unwrap_or_else(|| link.map_or(0, |l| l.mtu));
        let prefsrc = spec.prefsrc.or_else(|| match spec.family {
            Family::Inet => {
                let gw = match n.gw {
                    Some(IpAddr::V4(g)) => u32::from(g),
                    _ => 0,
                };
                crate::srcsel::select_v4(&self.links, n.oif, gw, spec.scope)
                    .map(|a| IpAddr::V4(Ipv4Addr::from(a)))
            }
            Family::Inet6 => None,
        });
        Dst {
            rtype: spec.rtype,
            oif: if spec.rtype == RouteType::Local && spec.family == Family::Inet {
                LOOPBACK_IFINDEX
            } else {
                n.oif.0
            },
            gateway: n.gw,
            mtu,
            prefsrc,
            table: spec.table.0,
            nh_flags: st.flags | n.flags,
            gen: 0,
            at: DstAt::default(),
        }
    }

    /// A placeholder dst for state being built; replaced by `build_dst` before any reader
    /// can see it (in `new_info`).
    pub(crate) fn dead_dst(&self, n: &NhSpec) -> Dst {
        Dst {
            rtype: RouteType::Unspec,
            oif: n.oif.0,
            gateway: n.gw,
            mtu: 0,
            prefsrc: None,
            table: 0,
            nh_flags: nh_flags::DEAD,
            gen: 0,
            at: DstAt::default(),
        }
    }

    /// Rebuilds the dsts of the objects that can depend on the changes `why` (see `dst`),
    /// each once; those whose result did not change keep their generation.
    pub(crate) fn refresh_dsts(&mut self, why: &[Reason]) {
        let mut ids = if why.iter().any(|r| r.walk() == Walk::All) {
            self.infos.ids()
        } else {
            let mut links: Vec<IfIndex> = why
                .iter()
                .filter_map(|r| match r.walk() {
                    Walk::Link(dev) => Some(dev),
                    Walk::None | Walk::All => None,
                })
                .collect();
            links.sort_unstable();
            links.dedup();
            links.iter().flat_map(|&l| self.infos.on_link(l)).collect()
        };
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            let info = self.infos.get(id);
            let dsts: Vec<Dst> = (0..info.nh.len())
                .map(|i| self.build_dst(&info.spec, i, &info.nh[i]))
                .collect();
            for (i, d) in dsts.into_iter().enumerate() {
                self.infos.set_dst(id, i, d);
            }
        }
    }
}
