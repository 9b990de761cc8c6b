//! IPv6 route requests with the kernel's semantics (ip6_fib.c, route.c): validation with its
//! errno and extack texts, next-hop checks, and fib6_add_rt2node's rules, which differ from
//! IPv4: one metric per "slot" (add of an equal metric is EEXIST), gateway routes of equal
//! metric merge into one multipath route ("siblings") on append and prepend alike, replace
//! swaps a whole sibling group, and delete with a gateway removes only that sibling.
//!
//! Invariants:
//! - Host bits of destination and source prefixes are cleared (the kernel masks them).
//! - The entries of one (destination, source) are ordered by metric; an entry with several
//!   next hops is a sibling group, all of which have gateways.
//! - A multipath request is all or nothing: on a failed sibling the key's entries are restored.

use std::net::{IpAddr, Ipv6Addr};

use crate::fibtable::leaf6;
use crate::flow::Flow;
use crate::flow::LookupFlags;
use crate::ids::{IfIndex, NhId, TableId};
use crate::lookup::TableResult;
use crate::prefix::Key;
use crate::route::{between_siblings, sibling_hops, Entry, InfoSpec, Infos, NhSpec, NhState};
use crate::types::einval;
use crate::types::{
    nh_flags, scope, Encap, Errno, Family, NextHop, ReqFlags, Route, RouteType, RtError,
};
use crate::Fib;

/// Metric of user routes without RTA_PRIORITY (IP6_RT_PRIO_USER).
pub(crate) const PRIO_USER: u32 = 1024;
/// Metric of address-derived prefix routes (IP6_RT_PRIO_ADDRCONF).
pub(crate) const PRIO_ADDRCONF: u32 = 256;

fn is_reject_type(t: RouteType) -> bool {
    matches!(
        t,
        RouteType::Unreachable | RouteType::Prohibit | RouteType::Blackhole | RouteType::Throw
    )
}

fn is_linklocal(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// ipv6_addr_type says unicast (or v4-mapped): not multicast, not unspecified.
fn is_unicast_gw(a: &Ipv6Addr) -> bool {
    !a.is_multicast() && !a.is_unspecified()
}

/// Options the kernel's internal callers (addrconf) set that user requests cannot.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Internal6 {
    /// The request comes from the kernel itself (addrconf): the device may be down and the
    /// metric is taken as given (0 stays 0).
    pub kernel: bool,
}

impl Fib {
    pub(crate) fn route6_new(&mut self, r: &Route, flags: ReqFlags) -> Result<(), RtError> {
        self.route6_new_internal(r, flags, Internal6::default())
    }

    pub(crate) fn route6_new_internal(
        &mut self,
        r: &Route,
        flags: ReqFlags,
        int: Internal6,
    ) -> Result<(), RtError> {
        if r.nexthop.gateway.is_some_and(|g| g.is_ipv4())
            || r.multipath
                .iter()
                .any(|m| m.gateway.is_some_and(|g| g.is_ipv4()))
        {
            return Err(einval("IPv6 does not support RTA_VIA attribute"));
        }
        if r.nhid.is_some()
            && (r.nexthop.oif != 0 || r.nexthop.gateway.is_some() || !r.multipath.is_empty())
        {
            return Err(einval(
                "Nexthop specification and nexthop id are mutually exclusive",
            ));
        }
        if (r.rtype as u8) > RouteType::Xresolve as u8 {
            return Err(einval("Invalid route type"));
        }
        if r.dst.len > 128 {
            return Err(einval("Invalid prefix length"));
        }
        let src = match r.src {
            Some(s) if s.len > 128 => return Err(einval("Invalid source address length")),
            Some(s) if s.len > 0 => Some(Key::new(crate::prefix::ip_u128(s.addr), s.len, 128)),
            _ => None,
        };
        // fib6_config_validate, before any table is made.
        if r.nhid.is_some() && src.is_some() {
            return Err(einval("Nexthops can not be used with source routing"));
        }
        let tb = TableId::or_main(r.table);
        let key = Key::new(crate::prefix::ip_u128(r.dst.addr), r.dst.len, 128);
        let hops: Vec<NextHop> = if r.multipath.is_empty() {
            vec![NextHop {
                flags: r.flags | r.nexthop.flags,
                ..r.nexthop.clone()
            }]
        } else {
            r.multipath
                .iter()
                .map(|m| NextHop {
                    flags: (r.flags & !0xff) | m.flags,
                    ..m.clone()
                })
                .collect()
        };
        // ip6_route_info_create makes the table before validating the next hops, so even a
        // failed add leaves it existing.
        self.table6_mut(tb);
        // Build every sibling first: validation errors leave the table untouched.
        let mut built = Vec::with_capacity(hops.len());
        for h in &hops {
            built.push(self.create_info6(r, tb, h, int)?);
        }
        let snapshot = self.snapshot6(tb, key);
        let metric = built.first().map_or(0, |(s, _)| s.priority);
        let mut fl = flags;
        for (spec, st) in built {
            if let Err(e) = self.insert6_one(tb, key, src, spec, st, fl) {
                self.restore6(tb, key, snapshot);
                // A `change` that finds no node for its destination gives an extack text
                // (see `insert6_one`); one that finds no source node gives it too.
                let outcome = match (e.errno, &e.extack) {
                    (Errno::EEXIST, _) | (Errno::ENOENT, None) => leaf6::Outcome::Refused,
                    (Errno::ENOENT, Some(_)) if self.t6[&tb].has_radix_node(&key) => {
                        leaf6::Outcome::Refused
                    }
                    _ => leaf6::Outcome::Untouched,
                };
                let t = self.t6.get_mut(&tb).expect("table made above");
                leaf6::attempt(t, &self.infos, key, src, metric, outcome);
                return Err(e);
            }
            // After the first sibling, the rest are added to it (ip6_route_multipath_add).
            fl = ReqFlags {
                create: true,
                excl: false,
                replace: false,
                append: fl.append,
            };
        }
        self.release_snapshot(snapshot);
        let t = self.t6.get_mut(&tb).expect("table made above");
        leaf6::attempt(t, &self.infos, key, src, metric, leaf6::Outcome::Added);
        Ok(())
    }

    fn create_info6(
        &mut self,
        r: &Route,
        tb: TableId,
        h: &NextHop,
        int: Internal6,
    ) -> Result<(InfoSpec, Vec<NhState>), RtError> {
        let mut nhs = Vec::new();
        let protocol = if r.protocol == 0 {
            crate::types::protocol::BOOT
        } else {
            r.protocol
        };
        let mut linkdown = false;
        if let Some(id) = r.nhid {
            let Some(obj) = self.nhobjs.get(NhId(id)) else {
                return Err(einval("Nexthop id does not exist"));
            };
            // fib6_check_nexthop: the family first, then fdb.
            if self.nhobjs.has_v4(obj) {
                return Err(einval("IPv6 routes can not use an IPv4 nexthop"));
            }
            if obj.fdb {
                return Err(einval("Route cannot point to a fdb nexthop"));
            }
            nhs = self.nhobjs.route_nhs(obj);
        } else {
            let (oif, ld, gw) = self.nh6_init(r, h, tb, int)?;
            linkdown = ld;
            nhs.push(NhSpec {
                gw,
                oif,
                weight: h.hops as u32 + 1,
                flags: h.flags & nh_flags::ONLINK,
                mtu: r.metrics.mtu,
                protocol: Some(protocol),
                encap: self.build_encap(Family::Inet6, &h.encap)?,
            });
        }
        if let Some(ps) = r.prefsrc {
            let dev = nhs.first().map(|n| n.oif).unwrap_or(IfIndex::NONE);
            if !self.chk_addr6(ps, Some(dev)) {
                return Err(einval("Invalid source address"));
            }
        }
        let rtype = if r.rtype == RouteType::Unspec {
            RouteType::Unicast
        } else {
            r.rtype
        };
        let spec = InfoSpec {
            family: Family::Inet6,
            table: tb,
            rtype,
            protocol,
            scope: scope::UNIVERSE,
            priority: match r.priority {
                Some(p) if p != 0 || int.kernel => p,
                _ => PRIO_USER,
            },
            prefsrc: r.prefsrc,
            metrics: r.metrics.clone(),
            nhs,
            nhid: r.nhid.map(NhId),
            // ip6_route_info_create sets a reject route's flags to RTF_REJECT alone: the
            // router preference kept in those flags is lost (shown as medium).
            pref: Some(if is_reject6(rtype) {
                0
            } else {
                r.pref.unwrap_or(0)
            }),
            expires: self.expiry_of(
                r.expires,
                Key::new(crate::prefix::ip_u128(r.dst.addr), r.dst.len.min(128), 128),
            ),
            rtf_anycast: rtype == RouteType::Anycast && int.kernel,
        };
        // One state per next hop: a route through a group object has the group's members.
        let st = spec
            .nhs
            .iter()
            .map(|n| NhState {
                flags: if linkdown { nh_flags::LINKDOWN } else { 0 },
                scope: scope::LINK,
                upper_bound: -1,
                dst: self.dead_dst(n),
            })
            .collect();
        Ok((spec, st))
    }

    /// fib6_nh_init: returns (device, linkdown, gateway).
    fn nh6_init(
        &self,
        r: &Route,
        h: &NextHop,
        tb: TableId,
        int: Internal6,
    ) -> Result<(IfIndex, bool, Option<IpAddr>), RtError> {
        let mut dev = None;
        if h.oif != 0 {
            if self.links.get(IfIndex(h.oif)).is_none() {
                return Err(RtError::new(Errno::ENODEV));
            }
            dev = Some(IfIndex(h.oif));
        }
        if h.flags & nh_flags::ONLINK != 0 {
            let Some(d) = dev else {
                return Err(einval("Nexthop device required for onlink"));
            };
            if !self.links.is_up(d) {
                return Err(RtError::msg(Errno::ENETDOWN, "Nexthop device is not up"));
            }
        }
        // Reject routes point at `lo` (kernel 6.18 keeps a unicast route via `lo` unicast).
        if is_reject_type(r.rtype) {
            return Ok((IfIndex::LOOPBACK, false, None));
        }
        let mut gw = None;
        if let Some(IpAddr::V6(g)) = h.gateway {
            dev = Some(self.validate_gw6(&g, dev, h.flags, tb)?);
            gw = Some(IpAddr::V6(g));
        }
        let Some(d) = dev else {
            return Err(RtError::new(Errno::ENODEV));
        };
        let l = self.links.get(d).ok_or(RtError::new(Errno::ENODEV))?;
        if !l.up && !int.kernel {
            return Err(RtError::msg(Errno::ENETDOWN, "Nexthop device is not up"));
        }
        // fib6_nh_init: RTF_LOCAL and RTF_ANYCAST routes never start linkdown; a user's
        // `anycast` route has no RTF_ANYCAST (only addrconf's do), so it does.
        let rtf_local_or_anycast =
            r.rtype == RouteType::Local || (r.rtype == RouteType::Anycast && int.kernel);
        let linkdown = !rtf_local_or_anycast && !l.carrier;
        Ok((d, linkdown, gw))
    }

    /// ip6_validate_gw: returns the egress device.
    fn validate_gw6(
        &self,
        g: &Ipv6Addr,
        dev: Option<IfIndex>,
        flags: u32,
        tb: TableId,
    ) -> Result<IfIndex, RtError> {
        let ll = is_linklocal(g);
        if let Some(d) = dev {
            if self.gw_is_local6(g, d, ll) {
                return Err(einval("Gateway can not be a local address"));
            }
        }
        let mut dev = dev;
        if !ll {
            if !is_unicast_gw(g) {
                return Err(einval("Invalid gateway address"));
            }
            if flags & nh_flags::ONLINK != 0 {
                self.check_nh6_onlink(g, dev, tb)?;
            } else {
                dev = Some(self.check_nh6(g, dev, tb)?);
            }
        }
        let Some(d) = dev else {
            return Err(einval("Egress device not specified"));
        };
        if d == IfIndex::LOOPBACK {
            return Err(einval(
                "Egress device can not be loopback device for this route",
            ));
        }
        if self.gw_is_local6(g, d, ll) {
            return Err(einval("Gateway can not be a local address"));
        }
        Ok(d)
    }

    /// ipv6_chk_addr_and_flags for a gateway: a local address (any device unless link-local).
    fn gw_is_local6(&self, g: &Ipv6Addr, dev: IfIndex, ll: bool) -> bool {
        self.links
            .iter()
            .any(|l| (!ll || l.ifindex == dev) && l.v6.iter().any(|a| a.addr == *g))
    }

    /// A next hop's requested encapsulation as the route will keep it (`None` without one).
    pub(crate) fn build_encap(
        &self,
        family: Family,
        e: &Option<Encap>,
    ) -> Result<Option<Encap>, RtError> {
        e.as_ref()
            .map(|e| e.build(family, |a| self.chk_addr6(std::net::IpAddr::V6(a), None)))
            .transpose()
    }

    /// ipv6_chk_addr(addr, dev, strict=0): the address is local; link- and host-scope ones
    /// must be on `dev`.
    pub(crate) fn chk_addr6(&self, a: IpAddr, dev: Option<IfIndex>) -> bool {
        let IpAddr::V6(a) = a else { return false };
        self.links.iter().any(|l| {
            l.v6.iter().any(|x| {
                x.addr == a
                    && (dev.is_none_or(|d| d == l.ifindex)
                        || !(x.scope == scope::LINK || x.scope == scope::HOST))
            })
        })
    }

    /// ip6_route_check_nh: the gateway must be reachable without a gateway.
    fn check_nh6(
        &self,
        g: &Ipv6Addr,
        dev: Option<IfIndex>,
        tb: TableId,
    ) -> Result<IfIndex, RtError> {
        let flow = Flow {
            dst: u128::from(*g),
            oif: dev.map_or(0, |d| d.0),
            iif: crate::link::LOOPBACK_IFINDEX,
            ..Flow::empty()
        };
        let lf = LookupFlags {
            strict_oif: true,
            ..LookupFlags::default()
        };
        let ok = |fib: &Fib, res: &crate::lookup::Res| {
            let info = fib.infos.get(res.entry.info);
            let n = &info.spec.nhs[res.nh];
            let unusable = crate::dst::LookupError::of_type(res.rtype).is_some()
                || n.gw.is_some()
                || dev.is_some_and(|d| d != n.oif);
            (!unusable).then_some(n.oif)
        };
        if tb != TableId::UNSPEC {
            if let Some(t) = self.t6.get(&tb) {
                if let TableResult::Found(res) = self.table_lookup6(t, &flow, lf) {
                    if let Some(d) = ok(self, &res) {
                        return Ok(d);
                    }
                }
            }
        }
        match self.fib_lookup(Family::Inet6, &flow, lf) {
            Ok(res) => ok(self, &res).ok_or(RtError::new(Errno::EHOSTUNREACH)),
            Err(_) => Err(RtError::new(Errno::EHOSTUNREACH)),
        }
    }

    /// ip6_route_check_nh_onlink: an onlink gateway must not be covered by a route of
    /// another device or type (the default route does not count).
    fn check_nh6_onlink(
        &self,
        g: &Ipv6Addr,
        dev: Option<IfIndex>,
        _tb: TableId,
    ) -> Result<(), RtError> {
        let Some(t) = self.t6.get(&TableId::MAIN) else {
            return Ok(());
        };
        let flow = Flow {
            dst: u128::from(*g),
            ..Flow::empty()
        };
        if let TableResult::Found(res) = self.table_lookup6(t, &flow, LookupFlags::default()) {
            let info = self.infos.get(res.entry.info);
            if res.key.len != 0
                && (res.rtype != RouteType::Unicast || Some(info.spec.nhs[res.nh].oif) != dev)
            {
                return Err(einval("Nexthop has invalid gateway or device mismatch"));
            }
        }
        Ok(())
    }

    /// IPv4 route via an IPv6 gateway (fib_check_nh_v6_gw): the IPv6 next-hop rules.
    pub(crate) fn check_nh6_gw(
        &self,
        g: &Ipv6Addr,
        oif: IfIndex,
        flags: u32,
        tb: TableId,
    ) -> Result<(IfIndex, bool), RtError> {
        let r = Route::new(
            Family::Inet6,
            crate::types::Prefix {
                addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                len: 0,
            },
        );
        let h = NextHop {
            gateway: Some(IpAddr::V6(*g)),
            oif: oif.0,
            hops: 0,
            flags,
            encap: None,
        };
        let (d, ld, _) = self.nh6_init(&r, &h, tb, Internal6::default())?;
        Ok((d, ld))
    }

    /// fib6_add_rt2node for one single-next-hop route.
    fn insert6_one(
        &mut self,
        tb: TableId,
        key: Key,
        src: Option<Key>,
        spec: InfoSpec,
        st: Vec<NhState>,
        flags: ReqFlags,
    ) -> Result<(), RtError> {
        let metric = spec.priority;
        let qual = |s: &InfoSpec| s.nhid.is_none() && s.nhs.iter().all(|n| n.gw.is_some());
        let rt_ecmp = qual(&spec);
        let new_nh = spec.nhs[0].clone();
        let list: Vec<Entry> = self
            .t6
            .get(&tb)
            .and_then(|t| t.get(&key))
            .map(|v| v.to_vec())
            .unwrap_or_default();
        let mut ins = 0usize;
        let mut found = None;
        let mut fallback = None;
        let mut sibling = None;
        for (i, e) in list.iter().enumerate() {
            if e.src() != src {
                continue;
            }
            let s = &self.infos.get(e.info).spec;
            if s.priority == metric {
                if flags.excl {
                    return Err(RtError::new(Errno::EEXIST));
                }
                if flags.replace {
                    if rt_ecmp == qual(s) {
                        found = Some(i);
                        break;
                    }
                    fallback.get_or_insert(i);
                    ins = i + 1;
                    continue;
                }
                let dup = if spec.nhid.is_some() || s.nhid.is_some() {
                    spec.nhid == s.nhid
                } else {
                    // rt6_duplicate_nexthop: the same device, gateway and encapsulation.
                    s.nhs.iter().any(|n| {
                        n.oif == new_nh.oif && n.gw == new_nh.gw && n.encap == new_nh.encap
                    })
                };
                if dup {
                    return Err(RtError::new(Errno::EEXIST));
                }
                if rt_ecmp && qual(s) && sibling.is_none() {
                    sibling = Some(i);
                }
            }
            if s.priority > metric {
                break;
            }
            ins = i + 1;
        }
        if found.is_none() {
            found = fallback;
        }
        if flags.replace && found.is_none() && !flags.create {
            // fib6_add_1 gives the text when the tree has no node for the prefix;
            // fib6_add_rt2node, on a node without a matching route, gives none.
            // A source route is looked for twice: its destination in the table's tree, then
            // its source in that node's source subtree.
            let node = self.t6.get(&tb).is_some_and(|t| t.has_radix_node(&key))
                && src.is_none_or(|s| src_node_exists(list.iter().filter_map(Entry::src), s));
            return Err(if node {
                RtError::new(Errno::ENOENT)
            } else {
                RtError::msg(Errno::ENOENT, "Can not replace route - no match found")
            });
        }
        let affects_gw = true;
        if let (false, Some(i)) = (flags.replace, sibling) {
            // Join the sibling group: the merged route gets one more next hop.
            let old = list[i].info;
            let oinfo = self.infos.get(old);
            let mut mspec = oinfo.spec.clone();
            let mut mst = oinfo.nh.clone();
            mspec.nhs.push(new_nh);
            mst.extend(st);
            let id = self.intern(mspec, mst);
            self.infos.hold(id);
            let t = self.t6.get_mut(&tb).expect("table of an existing entry");
            t.entries_mut(key)[i].info = id;
            self.infos.put(old);
        } else {
            // Where the kernel's leaf list has the new route relative to the run's siblings
            // (see `Entry::hops_before`): the run's entries, and its sibling group's size.
            let run: Vec<usize> = (0..list.len())
                .filter(|&j| {
                    list[j].src() == src && self.infos.get(list[j].info).spec.priority == metric
                })
                .collect();
            let group_hops = run
                .iter()
                .map(|&j| &self.infos.get(list[j].info).spec)
                .find(|s| qual(s))
                .map_or(0, |s| s.nhs.len().min(u8::MAX as usize) as u8);
            let replaced_group = match (flags.replace, found) {
                (true, Some(i)) => qual(&self.infos.get(list[i].info).spec),
                _ => false,
            };
            let id = self.intern(spec, st);
            self.infos.hold(id);
            let t = self.table6_mut(tb);
            let l = t.entries_mut(key);
            let mut e = Entry::new(0, id, src);
            match (flags.replace, found) {
                (true, Some(i)) => {
                    let old = l[i].info;
                    e.hops_before = l[i].hops_before;
                    l[i] = e;
                    // A group replaced (its other siblings go) or formed by the new route:
                    // the run's later entries now follow a group of at most the new route.
                    if rt_ecmp || replaced_group {
                        for &j in run.iter().filter(|&&j| j > i) {
                            l[j].hops_before = rt_ecmp as u8;
                        }
                    }
                    self.infos.put(old);
                }
                _ => {
                    e.hops_before = group_hops;
                    l.insert(ins.min(l.len()), e)
                }
            }
        }
        self.route_changed(affects_gw);
        Ok(())
    }

    fn snapshot6(&mut self, tb: TableId, key: Key) -> Vec<Entry> {
        let v: Vec<Entry> = self
            .t6
            .get(&tb)
            .and_then(|t| t.get(&key))
            .map(|v| v.to_vec())
            .unwrap_or_default();
        for e in &v {
            self.infos.hold(e.info);
        }
        v
    }

    fn release_snapshot(&mut self, v: Vec<Entry>) {
        for e in v {
            self.infos.put(e.info);
        }
    }

    fn restore6(&mut self, tb: TableId, key: Key, v: Vec<Entry>) {
        let t = self.table6_mut(tb);
        let cur = std::mem::replace(t.entries_mut(key), crate::fibtable::Entries::from_vec(v));
        t.prune(&key);
        for e in cur {
            self.infos.put(e.info);
        }
        self.route_changed(true);
    }

    /// ip6_route_del (and ip6_route_multipath_del for RTA_MULTIPATH requests).
    pub(crate) fn route6_del(&mut self, r: &Route) -> Result<(), RtError> {
        let tb = TableId::or_main(r.table);
        if !self.t6.contains_key(&tb) {
            return Err(RtError::msg(Errno::ESRCH, "FIB table does not exist"));
        }
        if !r.multipath.is_empty() {
            let mut last = Ok(());
            for m in &r.multipath {
                let mut one = r.clone();
                one.multipath.clear();
                one.nexthop = m.clone();
                if let Err(e) = self.route6_del(&one) {
                    last = Err(e);
                }
            }
            return last;
        }
        let key = Key::new(crate::prefix::ip_u128(r.dst.addr), r.dst.len.min(128), 128);
        let src = r
            .src
            .filter(|s| s.len > 0)
            .map(|s| Key::new(crate::prefix::ip_u128(s.addr), s.len.min(128), 128));
        let Some(list) = self
            .t6
            .get(&tb)
            .and_then(|t| t.get(&key))
            .map(|v| v.to_vec())
            .or_else(|| (key.len == 0).then(Vec::new))
        else {
            return Err(RtError::new(Errno::ESRCH));
        };
        // fib6_locate descends into a source subtree only where the destination has one
        // (some route there has a source prefix); elsewhere the `from` of a delete is ignored
        // and the destination's plain routes match.
        let src = src.filter(|_| list.iter().any(|e| e.src().is_some()));
        for (i, hop) in leaf_order6(&self.infos, &list, src) {
            let e = &list[i];
            let s = &self.infos.get(e.info).spec;
            if r.nhid.is_some() && s.nhid.is_some() && r.nhid.map(NhId) != s.nhid {
                continue;
            }
            if r.priority.is_some_and(|p| p != 0 && p != s.priority) {
                continue;
            }
            if s.nhid.is_some() {
                if r.protocol != 0 && r.protocol != s.protocol {
                    continue;
                }
                self.remove_entry(Family::Inet6, tb, key, i);
                return Ok(());
            }
            if r.nhid.is_some() {
                continue;
            }
            let hops = match hop {
                Some(k) => k..k + 1,
                None => 0..s.nhs.len(),
            };
            for (k, n) in s.nhs.iter().enumerate().take(hops.end).skip(hops.start) {
                // Each sibling is a route of its own with its own protocol.
                if r.protocol != 0 && r.protocol != s.protocol_of(k) {
                    continue;
                }
                if r.nexthop.oif != 0 && n.oif != IfIndex(r.nexthop.oif) {
                    continue;
                }
                if r.nexthop.gateway.is_some() && n.gw != r.nexthop.gateway {
                    continue;
                }
                if r.nexthop.gateway.is_some() && s.nhs.len() > 1 {
                    self.remove_sibling6(tb, key, i, k);
                } else {
                    self.remove_entry(Family::Inet6, tb, key, i);
                }
                return Ok(());
            }
        }
        // The tree root always exists and holds the null entry, which a filterless delete
        // of ::/0 matches and refuses (ENOENT).
        if key.len == 0
            && src.is_none()
            && r.nhid.is_none()
            && r.priority.unwrap_or(0) == 0
            && r.protocol == 0
            && r.nexthop.oif == 0
            && r.nexthop.gateway.is_none()
        {
            return Err(RtError::new(Errno::ENOENT));
        }
        Err(RtError::new(Errno::ESRCH))
    }

    /// Removes next hop `k` of the sibling group at `key[i]`.
    pub(crate) fn remove_sibling6(&mut self, tb: TableId, key: Key, i: usize, k: usize) {
        let list = self.t6[&tb].get(&key).expect("entry");
        let old = list[i].info;
        let (metric, src) = (self.infos.get(old).spec.priority, list[i].src());
        let run: Vec<usize> = (i + 1..list.len())
            .filter(|&j| {
                list[j].src() == src && self.infos.get(list[j].info).spec.priority == metric
            })
            .collect();
        let oinfo = self.infos.get(old);
        let mut spec = oinfo.spec.clone();
        let mut st = oinfo.nh.clone();
        spec.nhs.remove(k);
        st.remove(k);
        if spec.mtu_per_hop() {
            spec.metrics.mtu = spec.nhs.first().and_then(|n| n.mtu);
            spec.protocol = spec.protocol_of(0);
        }
        let id = self.intern(spec, st);
        self.infos.hold(id);
        let l = self.t6.get_mut(&tb).expect("table").entries_mut(key);
        l[i].info = id;
        // The routes after the removed sibling in the kernel's leaf list have one sibling
        // less before them; those that were between the first sibling and the second now
        // come before the group, whose first route is the second one.
        let mut last_before = None;
        for &j in &run {
            if l[j].hops_before as usize > k {
                l[j].hops_before -= 1;
                if l[j].hops_before == 0 {
                    last_before = Some(j);
                }
            }
        }
        if let Some(j) = last_before {
            let g = l.remove(i);
            l.insert(j, g);
        }
        self.infos.put(old);
        self.route_changed(true);
    }

    pub(crate) fn table6_mut(&mut self, tb: TableId) -> &mut crate::fibtable::Table {
        let seq = &mut self.table_seq;
        self.t6.entry(tb).or_insert_with(|| {
            *seq += 1;
            crate::fibtable::Table::new(tb, 128, *seq)
        })
    }
}

/// The routes of one IPv6 prefix with source `src`, in the kernel's leaf-list order, where a
/// sibling group is separate routes: (entry, None) for a route that is one entry, (entry,
/// Some(hop)) for each next hop of a sibling group, with the routes of the group's run added
/// between two siblings (`Entry::hops_before`) between them. Walks that stop at the first
/// match (ip6_route_del) must take the routes in this order.
fn leaf_order6(infos: &Infos, list: &[Entry], src: Option<Key>) -> Vec<(usize, Option<usize>)> {
    let mut order = Vec::with_capacity(list.len());
    let mut inside = vec![false; list.len()];
    for (i, e) in list.iter().enumerate() {
        if e.src() != src || inside[i] {
            continue;
        }
        let n = infos.get(e.info).spec.nhs.len();
        if sibling_hops(infos, e).is_none() {
            order.push((i, None));
            continue;
        }
        for h in 0..n {
            for (j, x) in list.iter().enumerate().skip(i + 1) {
                if between_siblings(infos, e, x) == Some(h) {
                    inside[j] = true;
                    order.push((j, None));
                }
            }
            order.push((i, Some(h)));
        }
    }
    order
}

/// Whether a prefix's source subtree, holding the source prefixes `srcs`, has a node for `key`:
/// one of them, or the branching point of two of them (the radix tree keeps no other node).
fn src_node_exists(srcs: impl Iterator<Item = Key> + Clone, key: Key) -> bool {
    if key.len >= 128 {
        return srcs.clone().any(|s| s == key);
    }
    let bit = 1u128 << (127 - key.len);
    let below = |s: &Key| s.len > key.len && key.contains(s.addr, 128);
    srcs.clone().any(|s| s == key)
        || (srcs.clone().any(|s| below(&s) && s.addr & bit == 0)
            && srcs.clone().any(|s| below(&s) && s.addr & bit != 0))
}

/// The types ip6_route_info_create turns into RTF_REJECT routes.
fn is_reject6(t: RouteType) -> bool {
    matches!(
        t,
        RouteType::Blackhole | RouteType::Unreachable | RouteType::Prohibit | RouteType::Throw
    )
}
