//! Next-hop objects and groups (`ip nexthop`, RTM_NEWNEXTHOP), referenced by routes through
//! `nhid`.
//!
//! Invariants:
//! - Ids are unique; a group's members exist and are not groups themselves; a group's
//!   members share one family (blackholes cannot be members of multi-member groups).
//! - Routes using an object copy its next hops into their info (so lookups never chase ids);
//!   changing or deleting an object rewrites or removes those routes (`Fib::nexthop_*`).
//! - A resilient group (group_type 1) has a bucket table in `res` (see `resilient`), regrouped
//!   whenever its member list changes; a hash-threshold group has none.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::hash::KeyedMap;
use crate::ids::{IfIndex, NhId, TableId};
use crate::resilient::{ResTable, DEFAULT_IDLE_TIMER};
use crate::route::NhSpec;
use crate::types::einval;
use crate::types::{nh_flags, scope, Errno, NexthopBucket, NexthopObj, ResGroup, RtError};

/// NEXTHOP_GRP_TYPE_RES
pub(crate) const GROUP_RES: u16 = 1;

/// The scope of an IPv4 route's path through a next-hop object (the kernel's nhc_scope, which
/// the reverse-path check of input routing reads): host for a device alone, link through a
/// gateway.
pub(crate) fn object_path_scope4(n: &NhSpec) -> u8 {
    if n.gw.is_some() {
        scope::LINK
    } else {
        scope::HOST
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct NhObjs {
    pub by_id: BTreeMap<NhId, NexthopObj>,
    /// Bucket tables of resilient groups, by group id (chosen by netlink peers: keyed hash).
    pub res: KeyedMap<NhId, ResTable>,
    /// The id last given to an object added with id 0 (the kernel's last_id_allocated): the
    /// next such object gets the first free id after it.
    last_auto_id: u32,
    /// When each single next hop was last created or replaced: the kernel files each one at
    /// the head of its device's hash chain then, and a link going down removes them from the
    /// head on, newest first (nexthop_flush_dev), which decides how resilient groups holding
    /// several of them regroup. Keyed hash: next-hop ids are chosen by netlink peers.
    attached: KeyedMap<NhId, u64>,
    attach_count: u64,
}

impl NhObjs {
    /// nh_find_unused_id: the first free id after the last one given out, wrapping around
    /// (None when every id is taken).
    fn unused_id(&mut self) -> Option<u32> {
        let start = self.last_auto_id;
        loop {
            self.last_auto_id = self.last_auto_id.wrapping_add(1);
            if self.last_auto_id == start {
                return None;
            }
            if self.last_auto_id != 0 && !self.by_id.contains_key(&NhId(self.last_auto_id)) {
                return Some(self.last_auto_id);
            }
        }
    }

    pub fn get(&self, id: NhId) -> Option<&NexthopObj> {
        self.by_id.get(&id)
    }

    /// The member a resilient group `id` gives a flow hash (None for other objects).
    pub fn select_res(&self, id: NhId, hash: u32, now: u64) -> Option<NhId> {
        self.res.get(&id)?.select(hash, now)
    }

    /// The object as dumped: a resilient group with its parameters and current imbalance.
    pub fn answer(&self, o: &NexthopObj, now: u64) -> NexthopObj {
        let mut o = o.clone();
        if let Some(t) = self.res.get(&NhId(o.id)) {
            o.res = Some(ResGroup {
                buckets: Some(t.buckets.len() as u16),
                idle_timer: Some(t.idle_timer),
                unbalanced_timer: Some(t.unbalanced_timer),
                unbalanced_time: Some(t.unbalanced_time(now)),
            });
        }
        o
    }

    /// Runs the upkeep of every resilient group (the kernel's delayed work).
    pub fn upkeep(&mut self, now: u64) {
        for (id, t) in self.res.iter_mut() {
            if let Some(g) = self.by_id.get(id) {
                t.upkeep(&g.group, now);
            }
        }
    }

    /// nexthop_has_v4: the object (or a member of the group) is an IPv4 next hop.
    pub fn has_v4(&self, obj: &NexthopObj) -> bool {
        // A device-only next hop without a family is IPv4 (iproute2 sends AF_INET for it).
        let v4 = |o: &NexthopObj| {
            o.family != Some(crate::types::Family::Inet6) && !o.gateway.is_some_and(|g| g.is_ipv6())
        };
        if obj.group.is_empty() {
            v4(obj)
        } else {
            obj.group
                .iter()
                .filter_map(|m| self.by_id.get(&NhId(m.id)))
                .any(v4)
        }
    }

    /// nexthop_is_blackhole: a blackhole object, or a group of one blackhole (a blackhole is
    /// never beside other members).
    pub fn is_blackhole(&self, id: NhId) -> bool {
        self.by_id.get(&id).is_some_and(|o| {
            o.blackhole
                || (o.group.len() == 1
                    && self
                        .by_id
                        .get(&NhId(o.group[0].id))
                        .is_some_and(|m| m.blackhole))
        })
    }

    /// The next hops a route using `obj` gets (a group's members in order, with weights).
    pub fn route_nhs(&self, obj: &NexthopObj) -> Vec<NhSpec> {
        if obj.group.is_empty() {
            if obj.blackhole {
                return vec![NhSpec {
                    gw: None,
                    oif: IfIndex::LOOPBACK,
                    weight: 1,
                    flags: 0,
                    mtu: None,
                    protocol: None,
                    encap: None,
                }];
            }
            return vec![NhSpec {
                gw: obj.gateway,
                oif: IfIndex(obj.oif),
                weight: 1,
                flags: if obj.onlink { nh_flags::ONLINK } else { 0 },
                mtu: None,
                protocol: None,
                encap: obj.encap.clone(),
            }];
        }
        obj.group
            .iter()
            .filter_map(|m| {
                let o = self.by_id.get(&NhId(m.id))?;
                Some(NhSpec {
                    gw: o.gateway,
                    oif: if o.blackhole {
                        IfIndex::LOOPBACK
                    } else {
                        IfIndex(o.oif)
                    },
                    weight: m.weight_minus_one as u32 + 1,
                    flags: if o.onlink { nh_flags::ONLINK } else { 0 },
                    mtu: None,
                    protocol: None,
                    encap: o.encap.clone(),
                })
            })
            .collect()
    }

    /// Group validation (nh_check_attr_group), in the kernel's order: duplicates first, then
    /// member by member whether it exists, what it is (valid_group_nh), and whether it fits
    /// the group's fdb kind (an fdb group: fdb members of one family). IPv4 and IPv6 members
    /// may share a group.
    pub fn check_group(&self, obj: &NexthopObj) -> Result<(), RtError> {
        for (i, m) in obj.group.iter().enumerate() {
            if obj.group[..i].iter().any(|x| x.id == m.id) {
                return Err(einval("Nexthop id can not be used twice in a group"));
            }
        }
        let v6 = |o: &NexthopObj| {
            o.family == Some(crate::types::Family::Inet6) || o.gateway.is_some_and(|g| g.is_ipv6())
        };
        let mut family = None;
        for m in &obj.group {
            let Some(o) = self.by_id.get(&NhId(m.id)) else {
                return Err(einval("Invalid nexthop id"));
            };
            if !o.group.is_empty() {
                return Err(einval(if o.group_type == GROUP_RES {
                    "Resilient group can not be a nexthop within a group"
                } else {
                    "Hash-threshold group can not be a nexthop within a group"
                }));
            }
            if o.blackhole && obj.group.len() > 1 {
                return Err(einval(
                    "Blackhole nexthop can not be used in a group with more than 1 path",
                ));
            }
            if obj.fdb {
                if !o.fdb {
                    return Err(einval("FDB nexthop group can only have fdb nexthops"));
                }
                if *family.get_or_insert(v6(o)) != v6(o) {
                    return Err(einval(
                        "FDB nexthop group cannot have mixed family nexthops",
                    ));
                }
            } else if o.fdb {
                return Err(einval("Non FDB nexthop group cannot have fdb nexthops"));
            }
        }
        Ok(())
    }

    /// Removes an object: from the groups holding it (whose resilient tables regroup at
    /// `now`), and its own table if it is a resilient group.
    pub fn remove(&mut self, id: NhId, now: u64) -> Result<NexthopObj, RtError> {
        let o = self.by_id.remove(&id).ok_or(RtError::new(Errno::ENOENT))?;
        self.res.remove(&id);
        self.attached.remove(&id);
        for g in self.by_id.values_mut() {
            let before = g.group.len();
            g.group.retain(|m| NhId(m.id) != id);
            if g.group.len() != before && !g.group.is_empty() {
                if let Some(t) = self.res.get_mut(&NhId(g.id)) {
                    t.regroup(&g.group, now);
                }
            }
        }
        Ok(o)
    }

    /// The buckets of resilient groups, in group id then bucket order (the kernel's bucket
    /// dump): of group `id` only when given (ENOENT if it does not exist, EINVAL if it is not
    /// a resilient group), holding member `nhid` only when given, of members on device `dev`
    /// only when given.
    pub fn buckets(
        &self,
        id: Option<NhId>,
        nhid: Option<NhId>,
        dev: Option<IfIndex>,
        now: u64,
    ) -> Result<Vec<NexthopBucket>, RtError> {
        if let Some(id) = id {
            self.res_group(id)?;
        }
        let mut out = Vec::new();
        for g in self.by_id.values() {
            if id.is_some_and(|i| i != NhId(g.id)) {
                continue;
            }
            let Some(t) = self.res.get(&NhId(g.id)) else {
                continue;
            };
            for (index, b) in t.buckets.iter().enumerate() {
                let Some(member) = b.nh else { continue };
                if nhid.is_some_and(|n| n != member) {
                    continue;
                }
                // A blackhole member is on `lo`.
                let on = |m: &NexthopObj| {
                    if m.blackhole {
                        crate::link::LOOPBACK_IFINDEX
                    } else {
                        m.oif
                    }
                };
                if dev.is_some_and(|d| self.by_id.get(&member).map_or(0, on) != d.0) {
                    continue;
                }
                out.push(NexthopBucket {
                    id: g.id,
                    index: index as u16,
                    nhid: member.0,
                    idle_time: t.idle_time(b, now),
                    protocol: g.protocol,
                });
            }
        }
        Ok(out)
    }

    /// RTM_GETNEXTHOPBUCKET: one bucket of a resilient group.
    pub fn bucket(&self, id: NhId, index: u16, now: u64) -> Result<NexthopBucket, RtError> {
        let (g, t) = self.res_group(id)?;
        let b = t
            .buckets
            .get(index as usize)
            .ok_or_else(|| RtError::msg(Errno::ERANGE, "Bucket index out of bounds"))?;
        Ok(NexthopBucket {
            id: id.0,
            index,
            nhid: b.nh.map_or(0, |n| n.0),
            idle_time: t.idle_time(b, now),
            protocol: g.protocol,
        })
    }

    /// nh_valid_dump_bucket_req / nh_res_table_get: the resilient group `id`.
    fn res_group(&self, id: NhId) -> Result<(&NexthopObj, &ResTable), RtError> {
        let g = self.by_id.get(&id).ok_or(RtError::new(Errno::ENOENT))?;
        if g.group.is_empty() {
            return Err(einval("Not a nexthop group"));
        }
        let t = self
            .res
            .get(&id)
            .ok_or_else(|| RtError::msg(Errno::EINVAL, "Nexthop group not of type resilient"))?;
        Ok((g, t))
    }
}

impl crate::Fib {
    /// RTM_NEWNEXTHOP: validation (nh_create_config / nh_check_attr), then create or replace.
    pub(crate) fn nexthop_add(
        &mut self,
        nh: &NexthopObj,
        flags: crate::types::ReqFlags,
    ) -> Result<(), RtError> {
        let mut nh_scope = scope::UNIVERSE;
        if !nh.group.is_empty() {
            // rtm_to_nh_config: a group has no family of its own (`ip -6 nexthop add ...
            // group` sends AF_INET6 and fails).
            if nh.family.is_some() {
                return Err(einval("Invalid family for group"));
            }
            if nh.gateway.is_some() || nh.oif != 0 || nh.blackhole || nh.encap.is_some() {
                return Err(einval("Group can not have gateway, device or blackhole"));
            }
            self.nhobjs.check_group(nh)?;
            // rtm_to_nh_config_grp_res: the request policy ends at the unbalanced timer.
            if nh.group_type == GROUP_RES {
                if nh.res.is_some_and(|r| r.unbalanced_time.is_some()) {
                    return Err(einval("Unknown attribute type"));
                }
                if nh.res.and_then(|r| r.buckets) == Some(0) {
                    return Err(einval("Number of buckets needs to be non-0"));
                }
            }
        } else if nh.fdb {
            // An fdb next hop is a gateway for the bridge's FDB (VXLAN): no device, so no
            // route check; link scope.
            if nh.oif != 0 || nh.blackhole || nh.encap.is_some() {
                return Err(einval(
                    "Fdb attribute can not be used with encap, oif or blackhole",
                ));
            }
            nh_scope = scope::LINK;
        } else if nh.blackhole {
            if nh.gateway.is_some() || nh.oif != 0 || nh.onlink || nh.encap.is_some() {
                return Err(einval(
                    "Blackhole attribute can not be used with gateway, oif, encap or fdb",
                ));
            }
            // A blackhole is on `lo`, checked as any device (fib_check_nh_nongw for IPv4,
            // fib6_nh_init for IPv6).
            if !self.links.get(IfIndex::LOOPBACK).is_some_and(|l| l.up) {
                let text = if nh.family == Some(crate::types::Family::Inet6) {
                    "Nexthop device is not up"
                } else {
                    "Device for nexthop is not up"
                };
                return Err(RtError::msg(Errno::ENETDOWN, text));
            }
        } else {
            if nh.oif == 0 {
                return Err(einval(
                    "Device attribute required for non-blackhole and non-fdb nexthops",
                ));
            }
            let Some(l) = self.links.get(IfIndex(nh.oif)) else {
                return Err(einval("Invalid device index"));
            };
            if !l.up {
                return Err(RtError::msg(Errno::ENETDOWN, "Nexthop device is not up"));
            }
            nh_scope = match nh.gateway {
                Some(IpAddr::V4(_)) => {
                    let spec = NhSpec {
                        gw: nh.gateway,
                        oif: IfIndex(nh.oif),
                        weight: 1,
                        flags: if nh.onlink { nh_flags::ONLINK } else { 0 },
                        mtu: None,
                        protocol: None,
                        encap: None,
                    };
                    // fib_check_nh: the scope of the route the gateway resolves through
                    // (host for a local address).
                    self.check_nh4(&spec, TableId::MAIN, scope::UNIVERSE)?.scope
                }
                Some(IpAddr::V6(g)) => {
                    self.check_nh6_gw(
                        &g,
                        IfIndex(nh.oif),
                        if nh.onlink { nh_flags::ONLINK } else { 0 },
                        TableId::MAIN,
                    )?;
                    scope::LINK
                }
                // An IPv6 next hop always has link scope; an IPv4 device-only one is host.
                None if nh.family == Some(crate::types::Family::Inet6) => scope::LINK,
                None => scope::HOST,
            };
        }
        // nh_create_ipv4 / nh_create_ipv6: the encapsulation is built for the object's family
        // (its gateway's, else the message's).
        let family = match nh.gateway {
            Some(g) => crate::types::Family::of(&g),
            None => nh.family.unwrap_or(crate::types::Family::Inet),
        };
        let encap = self.build_encap(family, &nh.encap)?;
        // Id 0 asks for a free id, given once the object is known to be valid.
        let mut nh = std::borrow::Cow::Borrowed(nh);
        if nh.id == 0 {
            let id = self
                .nhobjs
                .unused_id()
                .ok_or_else(|| einval("No unused id"))?;
            nh.to_mut().id = id;
        }
        let nh = nh.as_ref();
        let exists = self.nhobjs.by_id.contains_key(&NhId(nh.id));
        if exists {
            if !flags.replace {
                return Err(RtError::new(Errno::EEXIST));
            }
        } else if !flags.create {
            return Err(RtError::msg(Errno::ENOENT, "Nexthop does not exist"));
        }
        let res = nh.res.unwrap_or_default();
        if exists {
            // replace_nexthop: the routes using the object (directly or through a group)
            // must accept its new definition, then the object's own rules apply.
            let in_multipath = self
                .nhobjs
                .by_id
                .values()
                .any(|g| g.group.len() > 1 && g.group.iter().any(|m| m.id == nh.id));
            if nh.blackhole && in_multipath {
                return Err(einval(
                    "Blackhole nexthop can not be a member of a group with more than one path",
                ));
            }
            self.check_replace(nh)?;
            let old = &self.nhobjs.by_id[&NhId(nh.id)];
            // An object stays a group or a single next hop (replace_nexthop_grp /
            // replace_nexthop_single).
            match (old.group.is_empty(), nh.group.is_empty()) {
                (false, true) => {
                    return Err(einval("Can not replace a nexthop group with a nexthop"))
                }
                (true, false) => {
                    return Err(einval("Can not replace a nexthop with a nexthop group"))
                }
                _ => {}
            }
            let member = self
                .nhobjs
                .by_id
                .values()
                .any(|g| g.group.iter().any(|m| m.id == nh.id));
            if old.fdb != nh.fdb && member {
                return Err(einval("Cannot change nexthop FDB status while in a group"));
            }
            // replace_nexthop_grp: the type stays, and so does a resilient group's size.
            if !old.group.is_empty() && old.group_type != nh.group_type {
                return Err(einval(
                    "Can not replace a nexthop group with one of a different type",
                ));
            }
            if let (Some(t), Some(b)) = (self.nhobjs.res.get(&NhId(nh.id)), res.buckets) {
                if t.buckets.len() != b as usize {
                    return Err(einval(
                        "Can not change number of buckets of a resilient nexthop group",
                    ));
                }
            }
        } else if !nh.group.is_empty() && nh.group_type == GROUP_RES && res.buckets.is_none() {
            // insert_nexthop: the size can be left out of a replace, not of a creation.
            return Err(einval(
                "Number of buckets not specified for nexthop group insertion",
            ));
        }
        let mut obj = nh.clone();
        obj.flags = 0;
        obj.scope = nh_scope;
        obj.res = None;
        obj.encap = encap;
        if !nh.group.is_empty() && nh.group_type == GROUP_RES {
            let now = self.now_ms();
            let t = self.nhobjs.res.entry(NhId(nh.id)).or_insert_with(|| {
                ResTable::new(
                    res.buckets.unwrap_or(1),
                    res.idle_timer.unwrap_or(DEFAULT_IDLE_TIMER),
                    res.unbalanced_timer.unwrap_or(0),
                )
            });
            if let Some(v) = res.idle_timer {
                t.idle_timer = v;
            }
            if let Some(v) = res.unbalanced_timer {
                t.unbalanced_timer = v;
            }
            t.regroup(&nh.group, now);
        }
        if obj.group.is_empty() {
            self.nhobjs.attach_count += 1;
            let n = self.nhobjs.attach_count;
            self.nhobjs.attached.insert(NhId(nh.id), n);
        }
        self.nhobjs.by_id.insert(NhId(nh.id), obj);
        if exists {
            self.refresh_nh_users();
        }
        self.route_changed(true);
        Ok(())
    }

    /// replace_nexthop's fib_check_nh_list and fib6_check_nh_list: every route using the
    /// object, directly or through a group holding it, must be able to use its new
    /// definition, with the checks a route through it meets when it is added.
    fn check_replace(&self, new: &NexthopObj) -> Result<(), RtError> {
        let id = new.id;
        let users: Vec<NhId> = std::iter::once(NhId(id))
            .chain(
                self.nhobjs
                    .by_id
                    .values()
                    .filter(|g| g.group.iter().any(|m| m.id == id))
                    .map(|g| NhId(g.id)),
            )
            .collect();
        // fib_check_nexthop checks a group's scope on its first member (members of one group
        // share a scope).
        let group = !new.group.is_empty();
        let first = if group {
            new.group.first().and_then(|m| self.nhobjs.get(NhId(m.id)))
        } else {
            Some(new)
        };
        let mut used6 = false;
        for i in self.infos.ids() {
            let s = &self.infos.get(i).spec;
            if !s.nhid.is_some_and(|n| users.contains(&n)) {
                continue;
            }
            if s.family == crate::types::Family::Inet6 {
                used6 = true;
                continue;
            }
            if new.fdb {
                return Err(einval("Route cannot point to a fdb nexthop"));
            }
            let host = s.scope == crate::types::scope::HOST;
            if host && group {
                return Err(einval(
                    "Route with host scope can not have multiple nexthops",
                ));
            }
            let Some(first) = first else { continue };
            if host && first.gateway.is_some() {
                return Err(einval("Route with host scope can not have a gateway"));
            }
            if first.onlink && s.scope >= crate::types::scope::LINK {
                return Err(einval("Scope mismatch with nexthop"));
            }
        }
        if used6 && self.nhobjs.has_v4(new) {
            return Err(einval("IPv6 routes can not use an IPv4 nexthop"));
        }
        Ok(())
    }

    /// RTM_DELNEXTHOP: the object goes, and every route using it (directly or via a group
    /// that becomes empty).
    pub(crate) fn nexthop_remove(&mut self, id: NhId) -> Result<(), RtError> {
        let now = self.now_ms();
        self.nhobjs.remove(id, now)?;
        // Groups left without members (no gateway, device, blackhole or member) go too.
        let gone: std::collections::HashSet<NhId> = std::iter::once(id)
            .chain(
                self.nhobjs
                    .by_id
                    .values()
                    .filter(|o| {
                        o.gateway.is_none() && o.oif == 0 && !o.blackhole && o.group.is_empty()
                    })
                    .map(|o| NhId(o.id)),
            )
            .collect();
        for g in &gone {
            if *g != id {
                let _ = self.nhobjs.remove(*g, now);
            }
        }
        self.flush_infos(|s| s.nhid.is_some_and(|n| gone.contains(&n)));
        self.refresh_nh_users();
        Ok(())
    }

    /// nexthop_flush_dev: when a link goes down or away, the next-hop objects through it go,
    /// and with them the routes using them (blackholes point at `lo` and stay).
    pub(crate) fn nexthop_flush_dev(&mut self, dev: IfIndex) {
        let mut dead: Vec<NhId> = self
            .nhobjs
            .by_id
            .values()
            .filter(|o| o.oif == dev.0 && o.group.is_empty() && !o.blackhole)
            .map(|o| NhId(o.id))
            .collect();
        let attached = |id: &NhId| self.nhobjs.attached.get(id).copied().unwrap_or(0);
        dead.sort_by_key(|id| std::cmp::Reverse(attached(id)));
        for id in dead {
            let _ = self.nexthop_remove(id);
        }
    }

    /// Rewrites the next hops of routes using objects (after an object changed).
    fn refresh_nh_users(&mut self) {
        let objs = self.nhobjs.clone();
        self.rewrite_infos(|s| {
            let id = s.nhid?;
            let o = objs.get(id)?;
            let nhs = objs.route_nhs(o);
            (nhs != s.nhs).then(|| {
                let mut n = s.clone();
                n.nhs = nhs;
                n
            })
        });
    }
}
