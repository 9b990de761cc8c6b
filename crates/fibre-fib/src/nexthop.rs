//! Next-hop objects and groups (`ip nexthop`, RTM_NEWNEXTHOP), referenced by routes through
//! `nhid`.
//!
//! Invariants:
//! - Ids are unique; a group's members exist and are not groups themselves; a group's
//!   members share one family (blackholes cannot be members of multi-member groups).
//! - Routes using an object copy its next hops into their info (so lookups never chase ids);
//!   changing or deleting an object rewrites or removes those routes (`Fib::nexthop_*`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::route::NhSpec;
use crate::route4::einval;
use crate::types::{nh_flags, Errno, NexthopObj, RtError};

#[derive(Debug, Clone, Default)]
pub(crate) struct NhObjs {
    pub by_id: BTreeMap<u32, NexthopObj>,
}

impl NhObjs {
    pub fn get(&self, id: u32) -> Option<&NexthopObj> {
        self.by_id.get(&id)
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
                .filter_map(|m| self.by_id.get(&m.id))
                .any(v4)
        }
    }

    pub fn is_blackhole(&self, id: u32) -> bool {
        self.by_id.get(&id).is_some_and(|o| o.blackhole)
    }

    /// The next hops a route using `obj` gets (a group's members in order, with weights).
    pub fn route_nhs(&self, obj: &NexthopObj) -> Vec<NhSpec> {
        if obj.group.is_empty() {
            if obj.blackhole {
                return vec![NhSpec {
                    gw: None,
                    oif: crate::link::LOOPBACK_IFINDEX,
                    weight: 1,
                    flags: 0,
                }];
            }
            return vec![NhSpec {
                gw: obj.gateway,
                oif: obj.oif,
                weight: 1,
                flags: if obj.onlink { nh_flags::ONLINK } else { 0 },
            }];
        }
        obj.group
            .iter()
            .filter_map(|m| {
                let o = self.by_id.get(&m.id)?;
                Some(NhSpec {
                    gw: o.gateway,
                    oif: o.oif,
                    weight: m.weight_minus_one as u32 + 1,
                    flags: if o.onlink { nh_flags::ONLINK } else { 0 },
                })
            })
            .collect()
    }

    /// Group validation (nh_check_attr_group).
    pub fn check_group(&self, obj: &NexthopObj) -> Result<(), RtError> {
        let mut fam = None;
        for (i, m) in obj.group.iter().enumerate() {
            if obj.group[..i].iter().any(|x| x.id == m.id) {
                return Err(einval("Duplicate nexthop id in group"));
            }
            let Some(o) = self.by_id.get(&m.id) else {
                return Err(einval("Invalid nexthop id"));
            };
            if !o.group.is_empty() {
                return Err(einval("Nested groups are not allowed"));
            }
            if o.blackhole && obj.group.len() > 1 {
                return Err(einval(
                    "Blackhole nexthop can not be used in a group with more than 1 path",
                ));
            }
            let f = o.gateway.map(|g| matches!(g, IpAddr::V4(_)));
            if let (Some(a), Some(b)) = (fam, f) {
                if a != b {
                    return Err(einval("Nexthop group members must have the same family"));
                }
            }
            fam = fam.or(f);
        }
        Ok(())
    }

    pub fn remove(&mut self, id: u32) -> Result<NexthopObj, RtError> {
        let o = self
            .by_id
            .remove(&id)
            .ok_or(RtError::msg(Errno::ENOENT, "Nexthop id does not exist"))?;
        for g in self.by_id.values_mut() {
            g.group.retain(|m| m.id != id);
        }
        Ok(o)
    }
}

impl crate::Fib {
    /// RTM_NEWNEXTHOP: validation (nh_create_config / nh_check_attr), then create or replace.
    pub(crate) fn nexthop_add(
        &mut self,
        nh: &NexthopObj,
        flags: crate::types::ReqFlags,
    ) -> Result<(), RtError> {
        if nh.id == 0 {
            return Err(einval("Invalid nexthop id"));
        }
        if !nh.group.is_empty() {
            // rtm_to_nh_config: a group has no family of its own (`ip -6 nexthop add ...
            // group` sends AF_INET6 and fails).
            if nh.family.is_some() {
                return Err(einval("Invalid family for group"));
            }
            if nh.gateway.is_some() || nh.oif != 0 || nh.blackhole {
                return Err(einval("Group can not have gateway, device or blackhole"));
            }
            self.nhobjs.check_group(nh)?;
        } else if nh.blackhole {
            if nh.gateway.is_some() || nh.oif != 0 || nh.onlink {
                return Err(einval(
                    "Blackhole attribute can not be used with gateway or oif",
                ));
            }
        } else {
            if nh.oif == 0 {
                return Err(einval(
                    "Device attribute required for non-blackhole and non-fdb nexthops",
                ));
            }
            let Some(l) = self.links.get(nh.oif) else {
                return Err(einval("Invalid device index"));
            };
            if !l.up {
                return Err(RtError::msg(Errno::ENETDOWN, "Nexthop device is not up"));
            }
            match nh.gateway {
                Some(IpAddr::V4(g)) => {
                    let spec = NhSpec {
                        gw: nh.gateway,
                        oif: nh.oif,
                        weight: 1,
                        flags: if nh.onlink { nh_flags::ONLINK } else { 0 },
                    };
                    let _ = g;
                    self.check_nh4(
                        &spec,
                        crate::types::table::MAIN,
                        crate::types::scope::UNIVERSE,
                    )?;
                }
                Some(IpAddr::V6(g)) => {
                    self.check_nh6_gw(
                        &g,
                        nh.oif,
                        if nh.onlink { nh_flags::ONLINK } else { 0 },
                        crate::types::table::MAIN,
                    )?;
                }
                None => {}
            }
        }
        let exists = self.nhobjs.by_id.contains_key(&nh.id);
        if exists {
            if !flags.replace {
                return Err(RtError::new(Errno::EEXIST));
            }
        } else if !flags.create {
            return Err(RtError::msg(Errno::ENOENT, "Nexthop does not exist"));
        }
        if exists {
            self.check_replace6(nh)?;
        }
        let mut obj = nh.clone();
        obj.flags = 0;
        self.nhobjs.by_id.insert(nh.id, obj);
        if exists {
            self.refresh_nh_users();
        }
        self.route_changed(true);
        Ok(())
    }

    /// replace_nexthop's fib6_check_nh_list: IPv6 routes using the object, directly or
    /// through a group holding it, must be able to use its new definition.
    fn check_replace6(&self, new: &NexthopObj) -> Result<(), RtError> {
        let id = new.id;
        let users: Vec<u32> = std::iter::once(id)
            .chain(
                self.nhobjs
                    .by_id
                    .values()
                    .filter(|g| g.group.iter().any(|m| m.id == id))
                    .map(|g| g.id),
            )
            .collect();
        let used6 = self.infos.ids().into_iter().any(|i| {
            let s = &self.infos.get(i).spec;
            s.family == crate::types::Family::Inet6 && s.nhid.is_some_and(|n| users.contains(&n))
        });
        if used6 && self.nhobjs.has_v4(new) {
            return Err(einval("IPv6 routes can not use an IPv4 nexthop"));
        }
        Ok(())
    }

    /// RTM_DELNEXTHOP: the object goes, and every route using it (directly or via a group
    /// that becomes empty).
    pub(crate) fn nexthop_remove(&mut self, id: u32) -> Result<(), RtError> {
        self.nhobjs.remove(id)?;
        let empty: Vec<u32> = self
            .nhobjs
            .by_id
            .values()
            .filter(|o| o.group.is_empty() && !o.blackhole && o.oif == 0)
            .map(|o| o.id)
            .collect();
        let _ = empty;
        let gone: std::collections::HashSet<u32> = std::iter::once(id)
            .chain(
                self.nhobjs
                    .by_id
                    .values()
                    .filter(|o| {
                        o.gateway.is_none() && o.oif == 0 && !o.blackhole && o.group.is_empty()
                    })
                    .map(|o| o.id),
            )
            .collect();
        for g in &gone {
            if *g != id {
                let _ = self.nhobjs.remove(*g);
            }
        }
        self.flush_infos(|s| s.nhid.is_some_and(|n| gone.contains(&n)));
        self.refresh_nh_users();
        Ok(())
    }

    /// nexthop_flush_dev for NETDEV_DOWN and for carrier loss: the objects through `dev`
    /// go (blackholes have no device), with the routes using them and their group slots.
    pub(crate) fn nexthop_flush_dev(&mut self, dev: u32) {
        let ids: Vec<u32> = self
            .nhobjs
            .by_id
            .values()
            .filter(|o| o.group.is_empty() && !o.blackhole && o.oif == dev)
            .map(|o| o.id)
            .collect();
        for id in ids {
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
