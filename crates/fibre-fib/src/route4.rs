//! IPv4 route requests with the kernel's semantics (fib_frontend.c, fib_semantics.c,
//! fib_trie.c): validation in the kernel's order with its errno and extack texts, fib_info
//! creation and next-hop checks, and the alias rules of add / append / prepend / replace /
//! change / delete.
//!
//! Invariants:
//! - The entries of one key are ordered by tos (descending), then metric (ascending), then
//!   the position the request's flags chose; exactly what fib_find_alias expects.
//! - Every gateway check is one longest-prefix walk (or a cache hit), never a scan; the cache
//!   of gateway resolutions is dropped whenever a change could alter one (`memo`).

use std::net::IpAddr;

use crate::dst::LookupError;
use crate::flow::Flow;
use crate::flow::LookupFlags;
use crate::ids::{IfIndex, InfoId, NhId, TableId};
use crate::lookup::TableResult;
use crate::prefix::Key;
use crate::route::{Entry, InfoSpec, NhSpec, NhState};
use crate::types::einval;
use crate::types::{nh_flags, scope, Errno, Family, NextHop, ReqFlags, Route, RouteType, RtError};
use crate::Fib;

/// fib_props[type].scope: the narrowest scope a route of this type may have.
fn min_scope(t: RouteType) -> u8 {
    match t {
        RouteType::Local => scope::HOST,
        RouteType::Broadcast | RouteType::Anycast => scope::LINK,
        RouteType::Xresolve => scope::NOWHERE,
        _ => scope::UNIVERSE,
    }
}

/// The attributes of a plain request (one next hop, no metrics, no next-hop object, no
/// encapsulation) that decide its route info. Requests with equal keys get equal infos as long
/// as nothing they were validated against changed (`memo::Generations::resolve`) and no info
/// was freed (ids stay meaningful), so a bulk load validates each distinct next hop once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SimpleKey {
    table: TableId,
    protocol: u8,
    scope: u8,
    rtype: RouteType,
    flags: u32,
    priority: Option<u32>,
    prefsrc: Option<IpAddr>,
    gw: Option<IpAddr>,
    oif: IfIndex,
    nh_flags: u32,
}

/// A table load hashes a key per route: the fields go in as five words instead of one
/// hasher round per field and per address byte. Equal keys write equal words.
impl std::hash::Hash for SimpleKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        /// An optional address as (kind, bits): 0 none, 1 IPv4, 2 IPv6.
        fn ip(a: Option<IpAddr>) -> (u64, u128) {
            match a {
                None => (0, 0),
                Some(IpAddr::V4(v)) => (1, u32::from(v).into()),
                Some(IpAddr::V6(v)) => (2, v.into()),
            }
        }
        let (pk, pv) = ip(self.prefsrc);
        let (gk, gv) = ip(self.gw);
        h.write_u64(
            u64::from(self.table.0) << 32
                | u64::from(self.protocol) << 24
                | u64::from(self.scope) << 16
                | u64::from(self.rtype as u8) << 8
                | pk << 2
                | gk,
        );
        h.write_u64(u64::from(self.flags) << 32 | u64::from(self.nh_flags));
        h.write_u64(
            u64::from(self.oif.0) << 33 | self.priority.map_or(0, |p| 1 << 32 | u64::from(p)),
        );
        h.write_u128(gv);
        if pk != 0 {
            h.write_u128(pv);
        }
    }
}

impl SimpleKey {
    fn of(r: &Route, tb: TableId) -> Option<SimpleKey> {
        let plain = r.nhid.is_none()
            && r.multipath.is_empty()
            && r.expires.is_none()
            && r.metrics.is_empty()
            && r.nexthop.encap.is_none();
        plain.then_some(SimpleKey {
            table: tb,
            protocol: r.protocol,
            scope: r.scope,
            rtype: r.rtype,
            flags: r.flags,
            priority: r.priority,
            prefsrc: r.prefsrc,
            gw: r.nexthop.gateway,
            oif: IfIndex(r.nexthop.oif),
            nh_flags: r.nexthop.flags,
        })
    }
}

/// What a gateway check resolved: device, next-hop scope and whether the link is down.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NhResolved {
    pub oif: IfIndex,
    pub scope: u8,
    pub linkdown: bool,
}

/// What an IPv4 route add's plain-request cache decided (see [`Fib::route_new_hinted`]): the
/// route info, the validation generation it was valid at, and where the entry goes. A FIB
/// equal to the one that recorded it makes the same change at the same generation without
/// checking and hashing the request again: the checks passed on the equal FIB and the cache
/// hit is a read, so skipping them leaves the two FIBs equal, caches included. Empty when the
/// cache did not decide (the change is then applied in full).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteHint {
    decided: Option<Decided>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decided {
    info: InfoId,
    /// `(resolution generation, infos.frees())` when the cache decided.
    at: (u64, u64),
    table: TableId,
    key: Key,
    tos: u8,
    /// A local route (it makes the local table's routes custom, see `custom_local4`).
    local: bool,
    /// What the add did to the key's entries, when it changed them.
    placed: Option<Placed>,
}

/// Where an IPv4 add put its entry and what the key then compiled to: the results of
/// fib_table_insert's alias decision and of the key's winner (`lookup::winner`), which an
/// equal table reaches again from the same entries. The replay writes them without walking
/// the key's entries, comparing their priorities or judging their next hops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placed {
    /// The index in the key's entries the new entry went to.
    at: u32,
    /// It replaced the entry at `at` (else it was inserted there).
    replace: bool,
    /// The index in the key's entries (after the change) of its winner, or [`NO_WINNER`].
    winner: u32,
    /// The key's entries the compiled answer skips (see `Table::special_entries`).
    special: u32,
    /// The route's scope is link or narrower: gateway resolutions may change.
    affects_gw: bool,
    /// The route info of the entry it replaced: a replay that leaves the table to a copy
    /// (`Fib::copy_tables_at_end`) releases it without reading the table.
    old: Option<InfoId>,
}

/// [`Placed::winner`] when no entry of the key wins.
const NO_WINNER: u32 = u32::MAX;

impl RouteHint {
    /// The table of an IPv4 add whose hint says where its entry went (which a replay can
    /// make without reading the table; see [`Fib::copy_tables_at_end`]).
    pub fn placed_table(&self) -> Option<u32> {
        self.decided
            .filter(|d| d.placed.is_some())
            .map(|d| d.table.0)
    }
}

impl Fib {
    pub(crate) fn route4_new(&mut self, r: &Route, flags: ReqFlags) -> Result<(), RtError> {
        self.route4_new_hinted(r, flags, &mut RouteHint::default())
    }

    pub(crate) fn route4_new_hinted(
        &mut self,
        r: &Route,
        flags: ReqFlags,
        hint: &mut RouteHint,
    ) -> Result<(), RtError> {
        // rtm_to_fib_config
        if r.tos & 0x03 != 0 {
            return Err(einval("Invalid dsfield (tos): ECN bits must be 0"));
        }
        if r.nhid.is_some()
            && (r.nexthop.oif != 0 || r.nexthop.gateway.is_some() || !r.multipath.is_empty())
        {
            return Err(einval(
                "Nexthop specification and nexthop id are mutually exclusive",
            ));
        }
        let IpAddr::V4(d) = r.dst.addr else {
            return Err(RtError::new(Errno::EINVAL));
        };
        let tb = TableId::or_main(r.table);
        // inet_rtm_newroute makes the table before fib_table_insert validates anything else.
        if !self.t4.contains_key(&tb) {
            self.table_seq += 1;
            self.t4
                .insert(tb, crate::fibtable::Table::new(tb, 32, self.table_seq));
        }
        // fib_valid_key_len
        if r.dst.len > 32 {
            return Err(einval("Invalid prefix length"));
        }
        let key = Key::new(u32::from(d) as u128, r.dst.len, 32);
        if key.addr != u32::from(d) as u128 {
            return Err(einval("Invalid prefix for given prefix length"));
        }
        let gen = (self.gens.resolve(), self.infos.frees());
        let simple = SimpleKey::of(r, tb);
        if let Some(sk) = &simple {
            if let Some(&id) = self.simple_memo.get(gen, sk) {
                let mut placed = None;
                let res = self.insert4_placing(tb, key, r.tos, id, flags, &mut placed);
                hint.decided = Some(Decided {
                    info: id,
                    at: gen,
                    table: tb,
                    key,
                    tos: r.tos,
                    local: r.rtype == RouteType::Local,
                    placed,
                });
                return res;
            }
        }
        let (spec, states) = self.create_info4(r, tb)?;
        let id = self.intern(spec, states);
        if let Some(sk) = simple {
            let now = (self.gens.resolve(), self.infos.frees());
            self.simple_memo.insert(now, sk, id);
        }
        self.insert4(tb, key, r.tos, id, flags)
    }

    /// The add `hint` recorded, made without the request (`None`: the hint is empty or from
    /// another generation, and the request must be applied in full). Called once the due
    /// routes are gone, where [`Fib::route4_new_hinted`] would check the request.
    pub(crate) fn route4_decided(
        &mut self,
        hint: &RouteHint,
        flags: ReqFlags,
    ) -> Option<Result<(), RtError>> {
        let d = hint.decided?;
        let gen = (self.gens.resolve(), self.infos.frees());
        if d.at != gen || !self.simple_memo.is_at(gen) {
            return None;
        }
        // A missing table is made by the full path, before anything else is checked.
        let r = match d.placed {
            Some(p) => self.insert4_placed(d.table, d.key, Entry::new(d.tos, d.info, None), p)?,
            None if self.t4.contains_key(&d.table) => {
                self.insert4(d.table, d.key, d.tos, d.info, flags)
            }
            None => return None,
        };
        if r.is_ok() && d.local {
            self.custom_local4 = true;
        }
        Some(r)
    }

    /// fib_create_info: validates and resolves everything but the position in the table.
    pub(crate) fn create_info4(
        &mut self,
        r: &Route,
        tb: TableId,
    ) -> Result<(InfoSpec, Vec<NhState>), RtError> {
        let rtype = r.rtype;
        if (rtype as u8) > RouteType::Xresolve as u8 {
            return Err(einval("Invalid route type"));
        }
        if min_scope(rtype) > r.scope {
            return Err(einval("Invalid scope"));
        }
        if r.flags & (nh_flags::DEAD | nh_flags::LINKDOWN) != 0 {
            return Err(einval(
                "Invalid rtm_flags - can not contain DEAD or LINKDOWN",
            ));
        }
        let mut nhs: Vec<NhSpec> = Vec::new();
        if let Some(id) = r.nhid {
            let Some(obj) = self.nhobjs.get(NhId(id)) else {
                return Err(einval("Nexthop id does not exist"));
            };
            if obj.fdb {
                return Err(einval("Route cannot point to a fdb nexthop"));
            }
            nhs = self.nhobjs.route_nhs(obj);
        } else if !r.multipath.is_empty() {
            for m in &r.multipath {
                if m.flags & (nh_flags::DEAD | nh_flags::LINKDOWN) != 0 {
                    return Err(einval(
                        "Invalid flags for nexthop - can not contain DEAD or LINKDOWN",
                    ));
                }
                nhs.push(NhSpec {
                    gw: m.gateway,
                    oif: IfIndex(m.oif),
                    weight: m.hops as u32 + 1,
                    flags: (r.flags & !0xff) | m.flags,
                    mtu: None,
                    protocol: None,
                    encap: self.build_encap(Family::Inet, &m.encap)?,
                });
            }
            if r.nexthop.oif != 0 && nhs[0].oif != IfIndex(r.nexthop.oif) {
                return Err(einval("Nexthop device index does not match RTA_OIF"));
            }
            if r.nexthop.gateway.is_some() && nhs[0].gw != r.nexthop.gateway {
                return Err(einval(
                    "Nexthop gateway does not match RTA_GATEWAY or RTA_VIA",
                ));
            }
        } else {
            nhs.push(NhSpec {
                gw: r.nexthop.gateway,
                oif: IfIndex(r.nexthop.oif),
                weight: 1,
                flags: r.flags | r.nexthop.flags,
                mtu: None,
                protocol: None,
                encap: self.build_encap(Family::Inet, &r.nexthop.encap)?,
            });
        }
        for n in &mut nhs {
            n.flags &= nh_flags::ONLINK | nh_flags::PERVASIVE;
        }
        let mut states: Vec<NhState> = Vec::with_capacity(nhs.len());
        let is_reject = LookupError::of_type(rtype).is_some() || rtype == RouteType::Throw;
        if is_reject {
            if r.nhid.is_none()
                && (r.nexthop.gateway.is_some() || r.nexthop.oif != 0 || !r.multipath.is_empty())
            {
                return Err(einval(
                    "Gateway, device and multipath can not be specified for this route type",
                ));
            }
            for n in &nhs {
                states.push(NhState {
                    flags: 0,
                    scope: scope::NOWHERE,
                    upper_bound: -1,
                    dst: self.dead_dst(n),
                });
            }
        } else {
            match rtype {
                RouteType::Unicast
                | RouteType::Local
                | RouteType::Broadcast
                | RouteType::Anycast
                | RouteType::Multicast => {}
                _ => return Err(einval("Invalid route type")),
            }
            if r.scope > scope::HOST {
                return Err(einval("Invalid scope"));
            }
            if let Some(id) = r.nhid {
                // The kernel checks a group's scope once, on its first member: members of
                // one group share a scope.
                let is_group = self
                    .nhobjs
                    .get(NhId(id))
                    .is_some_and(|o| !o.group.is_empty());
                if r.scope == scope::HOST && is_group {
                    return Err(einval(
                        "Route with host scope can not have multiple nexthops",
                    ));
                }
                if let Some(first) = nhs.first() {
                    if r.scope == scope::HOST && first.gw.is_some() {
                        return Err(einval("Route with host scope can not have a gateway"));
                    }
                    if first.flags & nh_flags::ONLINK != 0 && r.scope >= scope::LINK {
                        return Err(einval("Scope mismatch with nexthop"));
                    }
                }
                for n in &nhs {
                    let l = self.links.get(n.oif);
                    let linkdown = l.is_some_and(|l| !l.carrier);
                    states.push(NhState {
                        flags: if linkdown { nh_flags::LINKDOWN } else { 0 },
                        scope: crate::nexthop::object_path_scope4(n),
                        upper_bound: -1,
                        dst: self.dead_dst(n),
                    });
                }
            } else if r.scope == scope::HOST {
                if nhs.len() != 1 {
                    return Err(einval(
                        "Route with host scope can not have multiple nexthops",
                    ));
                }
                if nhs[0].gw.is_some() {
                    return Err(einval("Route with host scope can not have a gateway"));
                }
                if self.links.get(nhs[0].oif).is_none() {
                    return Err(RtError::new(Errno::ENODEV));
                }
                states.push(NhState {
                    flags: 0,
                    scope: scope::NOWHERE,
                    upper_bound: -1,
                    dst: self.dead_dst(&nhs[0]),
                });
            } else {
                for n in nhs.iter_mut() {
                    let res = self.check_nh4(n, tb, r.scope)?;
                    n.oif = res.oif;
                    states.push(NhState {
                        flags: if res.linkdown { nh_flags::LINKDOWN } else { 0 },
                        scope: res.scope,
                        upper_bound: -1,
                        dst: self.dead_dst(n),
                    });
                }
            }
        }
        if let Some(src) = r.prefsrc {
            if !self.valid_prefsrc4(r, tb, src) {
                return Err(einval("Invalid prefsrc address"));
            }
        }
        let spec = InfoSpec {
            family: Family::Inet,
            table: tb,
            rtype,
            protocol: r.protocol,
            scope: r.scope,
            priority: r.priority.unwrap_or(0),
            prefsrc: r.prefsrc,
            metrics: r.metrics.clone(),
            nhs,
            nhid: r.nhid.map(NhId),
            pref: None,
            expires: self.expiry_of(
                r.expires,
                Key::new(crate::prefix::ip_u128(r.dst.addr), r.dst.len.min(32), 32),
            ),
            rtf_anycast: false,
        };
        Ok((spec, states))
    }

    /// fib_valid_prefsrc: the address must be local (in the route's table, or `local`).
    fn valid_prefsrc4(&self, r: &Route, tb: TableId, src: IpAddr) -> bool {
        if r.rtype == RouteType::Local && r.dst.len == 32 && r.dst.addr == src {
            return true;
        }
        let IpAddr::V4(s) = src else { return false };
        let s = u32::from(s);
        let t = if tb == TableId::MAIN {
            TableId::LOCAL
        } else {
            tb
        };
        if self.addr_type4(s, t) == RouteType::Local {
            return true;
        }
        t != TableId::LOCAL && self.addr_type4(s, TableId::LOCAL) == RouteType::Local
    }

    /// inet_addr_type_table: the type of the route `addr` matches in table `tb`
    /// (unicast when nothing matches).
    pub(crate) fn addr_type4(&self, addr: u32, tb: TableId) -> RouteType {
        if addr == 0 || addr == u32::MAX {
            return RouteType::Broadcast;
        }
        if addr >> 28 == 0xe {
            return RouteType::Multicast;
        }
        let Some(t) = self.t4.get(&tb).or_else(|| self.t4.get(&TableId::MAIN)) else {
            return RouteType::Unicast;
        };
        let flow = Flow {
            dst: addr as u128,
            ..Flow::empty()
        };
        match self.table_lookup4(t, &flow, LookupFlags::default()) {
            TableResult::Found(res) => res.rtype,
            TableResult::Reject(_) => self.rejected_type4(t, addr),
            TableResult::Continue => RouteType::Unicast,
        }
    }

    fn rejected_type4(&self, t: &crate::fibtable::Table, addr: u32) -> RouteType {
        t.lpm(addr as u128)
            .flat_map(|(_, es)| es.iter())
            .map(|e| self.infos.get(e.info).spec.rtype)
            .next()
            .unwrap_or(RouteType::Unicast)
    }

    /// fib_check_nh: resolves and validates one next hop of a route of scope `rscope`.
    pub(crate) fn check_nh4(
        &mut self,
        n: &NhSpec,
        tb: TableId,
        rscope: u8,
    ) -> Result<NhResolved, RtError> {
        match n.gw {
            Some(IpAddr::V4(gw)) => self.check_nh4_gw(u32::from(gw), n.oif, n.flags, tb, rscope),
            Some(IpAddr::V6(gw)) => {
                let (oif, linkdown) = self.check_nh6_gw(&gw, n.oif, n.flags, tb)?;
                Ok(NhResolved {
                    oif,
                    scope: scope::LINK,
                    linkdown,
                })
            }
            None => {
                if n.flags & (nh_flags::PERVASIVE | nh_flags::ONLINK) != 0 {
                    return Err(einval(
                        "Invalid flags for nexthop - PERVASIVE and ONLINK can not be set",
                    ));
                }
                let Some(l) = self.links.get(n.oif) else {
                    return Err(RtError::new(Errno::ENODEV));
                };
                if !l.up {
                    return Err(RtError::msg(
                        Errno::ENETDOWN,
                        "Device for nexthop is not up",
                    ));
                }
                Ok(NhResolved {
                    oif: n.oif,
                    scope: scope::HOST,
                    linkdown: !l.carrier,
                })
            }
        }
    }

    fn check_nh4_gw(
        &mut self,
        gw: u32,
        oif: IfIndex,
        flags: u32,
        tb: TableId,
        rscope: u8,
    ) -> Result<NhResolved, RtError> {
        if flags & nh_flags::ONLINK != 0 {
            if rscope >= scope::LINK {
                return Err(einval("Nexthop has invalid scope"));
            }
            let Some(l) = self.links.get(oif) else {
                return Err(RtError::msg(
                    Errno::ENODEV,
                    "Nexthop device required for onlink",
                ));
            };
            if !l.up {
                return Err(RtError::msg(Errno::ENETDOWN, "Nexthop device is not up"));
            }
            let carrier = l.carrier;
            if self.addr_type_dev4(gw, oif) != RouteType::Unicast {
                return Err(einval("Nexthop has invalid gateway"));
            }
            return Ok(NhResolved {
                oif,
                scope: scope::LINK,
                linkdown: !carrier,
            });
        }
        let want_scope = (rscope as u16 + 1).max(scope::LINK as u16).min(255) as u8;
        let ckey = (gw, oif, tb, want_scope);
        let at = self.gens.resolve();
        if let Some(r) = self.gw_memo.get(at, &ckey) {
            return Ok(*r);
        }
        let flow = Flow {
            dst: gw as u128,
            oif: oif.0,
            iif: crate::link::LOOPBACK_IFINDEX,
            scope: want_scope,
            ..Flow::empty()
        };
        let lf = LookupFlags::default();
        let mut found = None;
        if tb != TableId::MAIN {
            if let Some(t) = self.t4.get(&tb) {
                if let TableResult::Found(r) = self.table_lookup4(t, &flow, lf) {
                    found = Some(r);
                }
            }
        }
        let res = match found {
            Some(r) => r,
            None => match self.fib_lookup(Family::Inet, &flow, lf) {
                Ok(r) => r,
                Err(e) => return Err(RtError::msg(e.errno(), "Nexthop has invalid gateway")),
            },
        };
        if res.rtype != RouteType::Unicast && res.rtype != RouteType::Local {
            return Err(einval("Nexthop has invalid gateway"));
        }
        let info = self.infos.get(res.entry.info);
        let dev = info.spec.nhs[res.nh].oif;
        let rs = NhResolved {
            oif: dev,
            scope: info.spec.scope,
            linkdown: false,
        };
        let Some(l) = self.links.get(dev) else {
            return Err(einval("No egress device for nexthop gateway"));
        };
        let rs = NhResolved {
            linkdown: !l.carrier,
            ..rs
        };
        if !l.up {
            return Err(RtError::new(Errno::ENETDOWN));
        }
        self.gw_memo.insert(at, ckey, rs);
        Ok(rs)
    }

    /// inet_addr_type_dev_table: the address type seen from `dev`'s table (main).
    fn addr_type_dev4(&self, addr: u32, _dev: IfIndex) -> RouteType {
        self.addr_type4(addr, TableId::LOCAL)
    }

    /// fib_table_insert after fib_create_info.
    pub(crate) fn insert4(
        &mut self,
        tb: TableId,
        key: Key,
        tos: u8,
        new_id: InfoId,
        flags: ReqFlags,
    ) -> Result<(), RtError> {
        self.insert4_placing(tb, key, tos, new_id, flags, &mut None)
    }

    /// The add [`Fib::insert4_placing`] recorded in `p` on an equal FIB, made again: the same
    /// entry at the same place, the same winner, without deciding either. `None` (nothing
    /// done) when the table is missing.
    fn insert4_placed(
        &mut self,
        tb: TableId,
        key: Key,
        entry: Entry,
        p: Placed,
    ) -> Option<Result<(), RtError>> {
        // Adds to those are made by `route_replay_copied`.
        debug_assert!(!self.copy_at_end.contains(&tb), "a copied table changed");
        let t = self.t4.get_mut(&tb)?;
        let at = p.at as usize;
        let old = t.update(
            key,
            |list| {
                if p.replace {
                    list.get_mut(at).map(|e| std::mem::replace(e, entry).info)
                } else {
                    // An equal list has `at` in range; `min` only keeps a broken copy from
                    // panicking.
                    list.insert(at.min(list.len()), entry);
                    None
                }
            },
            |es| (es.get(p.winner as usize).copied(), p.special),
        );
        self.entry_placed(entry.info, old, p.affects_gw);
        Some(Ok(()))
    }

    /// What an add that put an entry of `info` in a table changes outside it: the info is
    /// held, the one of the entry it replaced (`old`) released, the generations moved.
    fn entry_placed(&mut self, info: InfoId, old: Option<InfoId>, affects_gw: bool) {
        self.infos.hold(info);
        if let Some(o) = old {
            self.infos.put(o);
        }
        self.route_changed(affects_gw);
    }

    /// [`Fib::route_new_hinted`] for an add in a replay that [`Fib::copy_tables_at_end`]
    /// told to leave its table to the copy: what the add changes outside the table, from its
    /// hint alone. False (nothing done) when `hint` is no such add, which the caller then
    /// makes in full.
    pub fn route_replay_copied(&mut self, hint: &RouteHint) -> bool {
        let Some(d) = hint.decided else {
            return false;
        };
        let Some(p) = d.placed else { return false };
        if !self.copy_at_end.contains(&d.table) {
            return false;
        }
        // As `route_new_hinted` makes it on an equal FIB: nothing expires (the add read no
        // clock), the hint holds, and released infos are reaped inside the batch.
        debug_assert!(self.infos.expiry().is_empty());
        debug_assert!(d.at == (self.gens.resolve(), self.infos.frees()));
        self.entry_placed(d.info, p.old, p.affects_gw);
        if d.local {
            self.custom_local4 = true;
        }
        self.reap_released();
        true
    }

    /// fib_table_insert once the route info is made: decides where the entry goes among the
    /// key's (or refuses the add), and records in `placed` what it changed, if anything.
    fn insert4_placing(
        &mut self,
        tb: TableId,
        key: Key,
        tos: u8,
        new_id: InfoId,
        flags: ReqFlags,
        placed: &mut Option<Placed>,
    ) -> Result<(), RtError> {
        /// What fib_table_insert decided for the request.
        enum Outcome {
            Fail(Errno),
            Unchanged,
            Replace(usize),
            Insert(usize),
        }
        let spec = &self.infos.get(new_id).spec;
        let prio = spec.priority;
        let affects_gw = spec.scope >= scope::LINK;
        let seq = &mut self.table_seq;
        let t = self.t4.entry(tb).or_insert_with(|| {
            *seq += 1;
            crate::fibtable::Table::new(tb, 32, *seq)
        });
        let infos = &self.infos;
        let nhobjs = &self.nhobjs;
        let pr = |e: &Entry| infos.get(e.info).spec.priority;
        let decide = |list: &mut crate::fibtable::Entries| {
            let fa = list
                .iter()
                .position(|e| e.tos < tos || (e.tos == tos && pr(e) >= prio));
            let mut outcome = Outcome::Insert(fa.unwrap_or(list.len()));
            if let Some(i) = fa.filter(|&i| list[i].tos == tos && pr(&list[i]) == prio) {
                let mut j = i;
                let mut fa_match = None;
                while j < list.len() && list[j].tos == tos && pr(&list[j]) == prio {
                    if list[j].info == new_id {
                        fa_match = Some(j);
                        break;
                    }
                    j += 1;
                }
                outcome = if flags.excl {
                    Outcome::Fail(Errno::EEXIST)
                } else if flags.replace {
                    match fa_match {
                        Some(m) if m == i => Outcome::Unchanged,
                        Some(_) => Outcome::Fail(Errno::EEXIST),
                        None => Outcome::Replace(i),
                    }
                } else if fa_match.is_some() {
                    Outcome::Fail(Errno::EEXIST)
                } else {
                    Outcome::Insert(if flags.append { j } else { i })
                };
            }
            if matches!(outcome, Outcome::Insert(_)) && !flags.create {
                outcome = Outcome::Fail(Errno::ENOENT);
            }
            let entry = Entry::new(tos, new_id, None);
            let mut old = None;
            match outcome {
                Outcome::Insert(at) => list.insert(at, entry),
                Outcome::Replace(at) => old = Some(std::mem::replace(&mut list[at], entry).info),
                Outcome::Fail(_) | Outcome::Unchanged => {}
            }
            (outcome, old)
        };
        // One map probe: the key's list (created empty for a new prefix, removed if left
        // empty), changed and recompiled.
        let mut won = (NO_WINNER, 0);
        let (outcome, old) = t.update(key, decide, |es| {
            let (w, special) = crate::lookup::winner(infos, nhobjs, Family::Inet, es);
            let at = w.and_then(|w| es.iter().position(|e| *e == w));
            won = (at.map_or(NO_WINNER, |i| i as u32), special);
            (w, special)
        });
        match outcome {
            Outcome::Fail(e) => {
                self.infos.drop_if_unused(new_id);
                Err(RtError::new(e))
            }
            Outcome::Unchanged => Ok(()),
            Outcome::Insert(at) | Outcome::Replace(at) => {
                *placed = Some(Placed {
                    at: at as u32,
                    replace: matches!(outcome, Outcome::Replace(_)),
                    winner: won.0,
                    special: won.1,
                    affects_gw,
                    old,
                });
                self.entry_placed(new_id, old, affects_gw);
                Ok(())
            }
        }
    }

    /// fib_table_delete.
    pub(crate) fn route4_del(&mut self, r: &Route) -> Result<(), RtError> {
        let IpAddr::V4(d) = r.dst.addr else {
            return Err(RtError::new(Errno::EINVAL));
        };
        let tb = TableId::or_main(r.table);
        let Some(t) = self.t4.get(&tb) else {
            return Err(RtError::msg(Errno::ESRCH, "FIB table does not exist"));
        };
        if r.dst.len > 32 {
            return Err(einval("Invalid prefix length"));
        }
        let key = Key::new(u32::from(d) as u128, r.dst.len, 32);
        if key.addr != u32::from(d) as u128 {
            return Err(einval("Invalid prefix for given prefix length"));
        }
        let Some(list) = t.get(&key) else {
            return Err(RtError::new(Errno::ESRCH));
        };
        let Some(start) = list.iter().position(|e| e.tos <= r.tos) else {
            return Err(RtError::new(Errno::ESRCH));
        };
        let mut victim = None;
        for (i, e) in list.iter().enumerate().skip(start) {
            if e.tos != r.tos {
                break;
            }
            let info = self.infos.get(e.info);
            let s = &info.spec;
            if (r.rtype == RouteType::Unspec || s.rtype == r.rtype)
                && (r.scope == scope::NOWHERE || s.scope == r.scope)
                && (r.prefsrc.is_none() || s.prefsrc == r.prefsrc)
                && (r.protocol == 0 || s.protocol == r.protocol)
                && nh_match4(r, s)
                && metrics_match(r, s)
            {
                victim = Some(i);
                break;
            }
        }
        let Some(i) = victim else {
            return Err(RtError::new(Errno::ESRCH));
        };
        self.remove_entry(Family::Inet, tb, key, i);
        Ok(())
    }
}

/// fib_nh_match: the request's next-hop attributes, where present, equal the route's.
fn nh_match4(r: &Route, s: &InfoSpec) -> bool {
    if let Some(p) = r.priority {
        if p != 0 && p != s.priority {
            return false;
        }
    }
    if let Some(id) = r.nhid {
        return s.nhid == Some(NhId(id));
    }
    if s.nhid.is_some() {
        return r.nexthop.oif == 0 && r.nexthop.gateway.is_none() && r.multipath.is_empty();
    }
    if r.nexthop.oif != 0 || r.nexthop.gateway.is_some() {
        let Some(n) = s.nhs.first() else { return false };
        if !encap_match4(&r.nexthop, n) {
            return false;
        }
        if r.nexthop.oif != 0 && r.nexthop.oif != n.oif.0 {
            return false;
        }
        if let Some(g) = r.nexthop.gateway {
            return n.gw == Some(g);
        }
        return true;
    }
    if r.multipath.is_empty() {
        return true;
    }
    if r.multipath.len() > s.nhs.len() {
        return false;
    }
    r.multipath
        .iter()
        .zip(&s.nhs)
        .all(|(m, n): (&NextHop, &NhSpec)| {
            (m.oif == 0 || m.oif == n.oif.0)
                && (m.gateway.is_none() || m.gateway == n.gw)
                && encap_match4(m, n)
        })
}

/// fib_encap_match: an encapsulation in a delete request must equal the next hop's, as built;
/// one that does not build matches anything.
fn encap_match4(m: &NextHop, n: &NhSpec) -> bool {
    let Some(e) = &m.encap else { return true };
    e.build(Family::Inet, |_| false)
        .map_or(true, |b| n.encap.as_ref() == Some(&b))
}

/// fib_metrics_match: only a requested RTAX_MTU... the kernel compares every metric given.
fn metrics_match(r: &Route, s: &InfoSpec) -> bool {
    let m = &r.metrics;
    let o = &s.metrics;
    let eq = |a: Option<u32>, b: Option<u32>| a.is_none() || a == b;
    eq(m.mtu, o.mtu)
        && eq(m.window, o.window)
        && eq(m.rtt, o.rtt)
        && eq(m.advmss, o.advmss)
        && eq(m.hoplimit, o.hoplimit)
        && eq(m.initcwnd, o.initcwnd)
}

#[cfg(test)]
mod hint_tests {
    use super::RouteHint;
    use crate::ids::TableId;
    use crate::types::*;
    use crate::Fib;
    use std::net::{IpAddr, Ipv4Addr};

    /// lo and d0 up, 10.0.0.1/24 on d0.
    fn base() -> Fib {
        let mut f = Fib::default();
        let d0 = Link {
            ifname: Some("d0".into()),
            kind: Some(LinkKind::Dummy),
            flags: iff::UP,
            change: iff::UP,
            ..Default::default()
        };
        f.link_new(&d0, ReqFlags::ADD).unwrap();
        let lo = Link {
            ifindex: 1,
            flags: iff::UP,
            change: iff::UP,
            ..Default::default()
        };
        f.link_new(&lo, ReqFlags::NONE).unwrap();
        f.addr_new(&addr_on_d0("10.0.0.1"), ReqFlags::ADD).unwrap();
        f
    }

    /// `address add A/24 dev d0`.
    fn addr_on_d0(a: &str) -> Address {
        let a: IpAddr = a.parse().unwrap();
        Address {
            family: Family::Inet,
            prefixlen: 24,
            flags: 0,
            scope: 0,
            ifindex: 2,
            local: Some(a),
            address: Some(a),
            broadcast: None,
            label: None,
            metric: None,
            valid_lft: None,
            preferred_lft: None,
        }
    }

    fn route(third: u8, gw: &str) -> Route {
        let mut r = Route::new(
            Family::Inet,
            Prefix {
                addr: IpAddr::V4(Ipv4Addr::new(192, 168, third, 0)),
                len: 24,
            },
        );
        r.nexthop.gateway = Some(gw.parse().unwrap());
        r
    }

    const APPEND: ReqFlags = ReqFlags {
        append: true,
        excl: false,
        ..ReqFlags::ADD
    };

    fn with_metric(mut r: Route, metric: u32) -> Route {
        r.priority = Some(metric);
        r
    }

    fn with_tos(mut r: Route, tos: u8) -> Route {
        r.tos = tos;
        r
    }

    /// Adds applied with the hints an equal FIB recorded give that FIB's results and state,
    /// and a hint from another generation is not used.
    #[test]
    fn hints_replay_to_the_same_state() {
        let changes = [
            (route(1, "10.0.0.2"), ReqFlags::ADD),
            (route(2, "10.0.0.2"), ReqFlags::ADD),
            (route(3, "10.0.0.3"), ReqFlags::ADD),
            (route(4, "10.0.0.3"), ReqFlags::ADD),
            // Exists: EEXIST, decided by the cache all the same.
            (route(4, "10.0.0.3"), ReqFlags::ADD),
            (route(1, "10.0.0.3"), ReqFlags::REPLACE),
            // Unreachable gateway: refused by validation, no hint.
            (route(5, "192.0.2.1"), ReqFlags::ADD),
            (route(6, "10.0.0.2"), ReqFlags::ADD),
            // Several entries under one key, placed by the alias rules once the next hops
            // and metrics are cached (keys 8 and 9): appended after an equal one, a replace
            // that changes nothing, a higher metric behind them, a tos entry first (which the
            // compiled winner skips), and one replaced in the middle of the list.
            (with_metric(route(8, "10.0.0.2"), 5), ReqFlags::ADD),
            (with_metric(route(8, "10.0.0.3"), 5), APPEND),
            (with_metric(route(9, "10.0.0.4"), 5), ReqFlags::ADD),
            (route(7, "10.0.0.2"), ReqFlags::ADD),
            (route(7, "10.0.0.3"), APPEND),
            (route(7, "10.0.0.2"), ReqFlags::REPLACE),
            (with_metric(route(7, "10.0.0.2"), 5), ReqFlags::ADD),
            (with_metric(route(7, "10.0.0.3"), 5), APPEND),
            (with_tos(route(7, "10.0.0.3"), 0x10), ReqFlags::ADD),
            (with_metric(route(7, "10.0.0.4"), 5), ReqFlags::REPLACE),
        ];
        let (mut first, mut replay) = (base(), base());
        let mut hints = Vec::new();
        for (r, f) in &changes {
            let mut h = RouteHint::default();
            let result = first.route_new_hinted(r, *f, &mut h);
            hints.push((result, h));
        }
        assert!(
            hints.iter().filter(|(_, h)| h.decided.is_some()).count() >= 4,
            "the cache decided the repeated next hops: {hints:?}"
        );
        let placed_behind = |h: &RouteHint| {
            h.decided
                .and_then(|d| d.placed)
                .is_some_and(|p| p.at > 0 || p.winner > 0)
        };
        assert!(
            hints.iter().filter(|(_, h)| placed_behind(h)).count() >= 2,
            "entries placed behind others are replayed: {hints:?}"
        );
        for ((r, f), (result, h)) in changes.iter().zip(&mut hints) {
            let recorded = *h;
            assert_eq!(replay.route_new_hinted(r, *f, h), *result);
            assert_eq!(*h, recorded, "a used hint is left as it was");
        }
        assert_eq!(first.routes(None), replay.routes(None));
        assert_eq!(first.gen(), replay.gen());
        assert_eq!(
            first.route_get(&RouteQuery::to("192.168.1.9".parse().unwrap())),
            replay.route_get(&RouteQuery::to("192.168.1.9".parse().unwrap()))
        );

        // The same inside a batch (as fibred applies and replays), where an IPv4 add leaves
        // nothing to commit until the batch ends: the compiled answers are the same.
        // Without hints too (the first application).
        let (mut batched, mut unhinted) = (base(), base());
        batched.begin_batch();
        unhinted.begin_batch();
        for ((r, f), (result, h)) in changes.iter().zip(&mut hints) {
            assert_eq!(batched.route_new_hinted(r, *f, h), *result);
            assert_eq!(unhinted.route_new(r, *f), *result);
        }
        batched.end_batch();
        unhinted.end_batch();
        for fib in [&batched, &unhinted] {
            assert_eq!(first.routes(None), fib.routes(None));
            assert_eq!(first.gen(), fib.gen());
            for third in 1..=9 {
                let q = RouteQuery::to(IpAddr::V4(Ipv4Addr::new(192, 168, third, 9)));
                assert_eq!(first.route_get(&q), fib.route_get(&q), "192.168.{third}.9");
                // The compiled answers themselves (a route get may walk the entries).
                let addr = u128::from(u32::from(Ipv4Addr::new(192, 168, third, 9)));
                let compiled = |f: &Fib| f.t4[&TableId::MAIN].fast_lookup(addr);
                assert_eq!(compiled(&first), compiled(fib), "192.168.{third}.9");
            }
        }

        // A FIB whose validation generation moved (a second address) does not take the
        // hint: it decides for itself, as route_new does.
        let moved = |f: &mut Fib| {
            f.addr_new(&addr_on_d0("10.0.1.1"), ReqFlags::ADD).unwrap();
        };
        let (mut hinted, mut plain) = (base(), base());
        moved(&mut hinted);
        moved(&mut plain);
        let (r, f) = &changes[1];
        let mut h = hints[1].1;
        let at = h.decided.map(|d| d.at);
        assert!(at.is_some());
        assert_ne!(
            at,
            Some((hinted.gens.resolve(), hinted.infos.frees())),
            "the generation moved"
        );
        assert_eq!(
            hinted.route_new_hinted(r, *f, &mut h),
            plain.route_new(r, *f)
        );
        assert_eq!(hinted.routes(None), plain.routes(None));
    }
}
