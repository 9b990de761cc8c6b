//! Answers to `route get` (RTM_GETROUTE without NLM_F_DUMP), filled as the kernel fills its
//! RTM_NEWROUTE reply: IPv4 through ip_route_output_key / ip_route_input plus rt_fill_info,
//! IPv6 through ip6_route_output / ip6_route_input_lookup plus rt6_fill_node; `fibmatch`
//! answers with the matched FIB entry instead.
//!
//! Only reads: the answer is assembled from the lookup result and the dst cached on the chosen
//! next hop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::flow::Flow;
use crate::flow::LookupFlags;
use crate::ids::{IfIndex, TableId};
use crate::input::{is_lbcast, is_multicast4, is_zeronet, Input4};
use crate::link::LOOPBACK_IFINDEX;
use crate::lookup::Res;
use crate::types::{
    rtcf, rtm_flags, scope, CacheInfo, Errno, Family, NextHop, Prefix, Route, RouteQuery,
    RouteType, RtError,
};
use crate::Fib;

/// The protocol of an IPv4 `route get` without `ipproto`.
const IPPROTO_UDP: u8 = 17;

/// 224.0.0.1, the all-hosts group (IGMP_ALL_HOSTS).
const IGMP_ALL_HOSTS: u32 = 0xe000_0001;

fn err(e: Errno) -> RtError {
    RtError::new(e)
}

impl Fib {
    fn query_flow(&self, q: &RouteQuery) -> Flow {
        Flow {
            dst: crate::prefix::ip_u128(q.dst),
            src: q.src.map(crate::prefix::ip_u128).unwrap_or(0),
            iif: q.iif.unwrap_or(LOOPBACK_IFINDEX),
            oif: q.oif.unwrap_or(0),
            tos: q.tos,
            mark: q.mark,
            uid: q.uid.unwrap_or(0),
            // inet_rtm_getroute builds a UDP packet unless told otherwise; IPv6 leaves the
            // protocol at 0.
            proto: q.ipproto.unwrap_or(match q.family {
                Family::Inet => IPPROTO_UDP,
                Family::Inet6 => 0,
            }),
            sport: q.sport.unwrap_or(0),
            dport: q.dport.unwrap_or(0),
            flowlabel: 0,
            scope: scope::UNIVERSE,
            // inet_rtm_getroute hashes the packet it builds; inet6_rtm_getroute has none.
            packet: q.family == Family::Inet,
        }
    }

    pub(crate) fn get_route(&self, q: &RouteQuery) -> Result<Route, RtError> {
        if Family::of(&q.dst) != q.family || q.src.is_some_and(|s| Family::of(&s) != q.family) {
            return Err(err(Errno::EINVAL));
        }
        if let Some(i) = q.iif {
            if self.links.get(IfIndex(i)).is_none() {
                return Err(err(Errno::ENODEV));
            }
        }
        if let Some(o) = q.oif {
            if self.links.get(IfIndex(o)).is_none() {
                return Err(err(Errno::ENODEV));
            }
        }
        match q.family {
            Family::Inet => self.get4(q),
            Family::Inet6 => self.get6(q),
        }
    }

    /// A route-get answer skeleton for `q`.
    fn answer(&self, q: &RouteQuery, family: Family) -> Route {
        let mut r = Route::new(
            family,
            Prefix {
                addr: q.dst,
                len: family.max_len(),
            },
        );
        r.mark = (q.mark != 0).then_some(q.mark);
        r.iif = q.iif;
        r
    }

    fn get4(&self, q: &RouteQuery) -> Result<Route, RtError> {
        let flow = self.query_flow(q);
        if q.fibmatch {
            // fibmatch routes the packet first (source and device checks included) and answers
            // with the FIB entry the lookup matched; a route made without one (the on-link
            // fallback of an output with an oif) is EHOSTUNREACH.
            let res = if q.iif.is_some() {
                self.input4(&flow, q.table).map_err(|d| err(d.errno()))?;
                self.lookup_in(Family::Inet, q.table, &flow, LookupFlags::packet())
                    .map_err(|e| err(e.errno()))?
            } else {
                self.output4(q, flow)?.1.ok_or(err(Errno::EHOSTUNREACH))?
            };
            let t = self.t4.get(&res.table).expect("result table exists");
            let e = t
                .get(&res.key)
                .and_then(|es| es.iter().find(|e| **e == res.entry))
                .expect("result entry");
            return Ok(self.entry_route(Family::Inet, res.table, res.key, e));
        }
        if q.iif.is_some() {
            return self.input_answer4(q, &flow);
        }
        self.output4(q, flow).map(|(ans, _)| ans)
    }

    /// ip_route_output_key_hash_rcu: the answer, and the FIB lookup result it came from (none
    /// when the route was made without one).
    fn output4(&self, q: &RouteQuery, flow: Flow) -> Result<(Route, Option<Res>), RtError> {
        let d = flow.dst as u32;
        let s = flow.src as u32;
        let mut ans = self.answer(q, Family::Inet);
        ans.uid = Some(q.uid.unwrap_or(0));
        ans.src = q.src.map(|a| Prefix { addr: a, len: 32 });
        ans.flags = rtm_flags::CLONED;
        ans.cache = Some(CacheInfo::default());
        if s != 0 {
            if is_multicast4(s) || is_lbcast(s) || is_zeronet(s) {
                return Err(err(Errno::EINVAL));
            }
            if !self.is_local4(s) {
                return Err(err(Errno::ENETUNREACH));
            }
        }
        if flow.oif != 0 {
            let l = self
                .links
                .get(IfIndex(flow.oif))
                .ok_or(err(Errno::ENODEV))?;
            if !l.up {
                return Err(err(Errno::ENETUNREACH));
            }
        }
        if d == 0 {
            // The route goes to the source (or 127.0.0.1) through `lo`; the answer keeps the
            // destination asked for, as inet_rtm_getroute fills RTA_DST from the request.
            let a = if s != 0 {
                s
            } else {
                u32::from(Ipv4Addr::LOCALHOST)
            };
            ans.rtype = RouteType::Local;
            ans.nexthop.oif = LOOPBACK_IFINDEX;
            ans.flags |= rtcf::LOCAL;
            if s == 0 {
                ans.prefsrc = Some(IpAddr::V4(Ipv4Addr::from(a)));
            }
            return Ok((ans, None));
        }
        let mut res = match self.lookup_in(Family::Inet, q.table, &flow, LookupFlags::packet()) {
            Ok(r) => r,
            Err(e) => {
                if flow.oif != 0 {
                    // "Apparently, routing tables are wrong. Assume, that the destination is
                    // on link." (the kernel's output path with an oif)
                    ans.nexthop.oif = flow.oif;
                    if s == 0 {
                        ans.prefsrc = crate::srcsel::select_v4(
                            &self.links,
                            IfIndex(flow.oif),
                            0,
                            scope::LINK,
                        )
                        .map(|a| IpAddr::V4(Ipv4Addr::from(a)));
                    }
                    self.classify_out4(&mut ans, d, IfIndex(flow.oif));
                    return Ok((ans, None));
                }
                return Err(err(e.errno()));
            }
        };
        let info = self.infos.get(res.entry.info);
        ans.table = self.reported_table4(res.table);
        // rt_fill_info reports the matched entry's tos (the flow's tos is never echoed).
        ans.tos = res.entry.tos;
        if res.rtype == RouteType::Local {
            let saddr = if s != 0 {
                s
            } else {
                match info.spec.prefsrc {
                    Some(IpAddr::V4(p)) => u32::from(p),
                    _ => d,
                }
            };
            ans.rtype = RouteType::Local;
            ans.nexthop.oif = LOOPBACK_IFINDEX;
            ans.flags |= rtcf::LOCAL;
            if saddr != s {
                ans.prefsrc = Some(IpAddr::V4(Ipv4Addr::from(saddr)));
            }
            ans.metrics = info.spec.metrics.clone();
            return Ok((ans, Some(res)));
        }
        self.select_multipath(&mut res, &flow);
        let dst = &info.nh[res.nh].dst;
        let n = &info.spec.nhs[res.nh];
        ans.nexthop.oif = n.oif.0;
        if n.gw.is_some() && info.nh[res.nh].scope == scope::LINK {
            ans.nexthop.gateway = n.gw;
        }
        // The dst carries the next hop's encapsulation (rt_set_nexthop), which rt_fill_info
        // reports.
        ans.nexthop.encap = n.encap.clone();
        // rt_fill_info reports route-cache flags only: never the next hop's LINKDOWN.
        ans.metrics = info.spec.metrics.clone();
        if s == 0 {
            ans.prefsrc = dst.prefsrc;
        }
        ans.rtype = res.rtype;
        self.classify_out4(&mut ans, d, n.oif);
        if is_lbcast(d) || (ans.rtype == RouteType::Multicast && res.key.len < 4) {
            // __mkroute_output leaves the route's fib_info out of a limited broadcast and of a
            // multicast answered by a route shorter than /4 (a default route): no gateway, no
            // metrics, no exception.
            ans.nexthop.gateway = None;
            ans.metrics = Default::default();
        } else {
            self.exception_answer(&res, flow.dst, &mut ans);
        }
        Ok((ans, Some(res)))
    }

    /// __mkroute_output's type and flag adjustments.
    fn classify_out4(&self, ans: &mut Route, d: u32, oif: IfIndex) {
        if is_lbcast(d) || ans.rtype == RouteType::Broadcast {
            ans.rtype = RouteType::Broadcast;
            ans.flags |= rtcf::BROADCAST | rtcf::LOCAL;
        } else if is_multicast4(d) || ans.rtype == RouteType::Multicast {
            // A multicast route's type counts as a multicast destination's does. The only
            // group joined here is all-hosts, which every up IPv4 device joins (ip_mc_up):
            // for it the route is also local (ip_check_mc_rcu).
            ans.rtype = RouteType::Multicast;
            ans.flags |= rtcf::MULTICAST;
            if d == IGMP_ALL_HOSTS {
                ans.flags |= rtcf::LOCAL;
            }
        } else if ans.rtype == RouteType::Unspec {
            ans.rtype = RouteType::Unicast;
        }
        if oif == IfIndex::LOOPBACK {
            ans.flags |= rtcf::LOCAL;
        }
    }

    /// The table a `route get` answer names: until the first IPv4 rule is added the kernel
    /// keeps table local merged into main (fib_unmerge), so local routes answer as main.
    fn reported_table4(&self, t: TableId) -> u32 {
        if t == TableId::LOCAL && !self.custom_rules4 {
            TableId::MAIN.0
        } else {
            t.0
        }
    }

    /// __ip_dev_find: an address of some link, or a local route of table local.
    pub(crate) fn is_local4(&self, a: u32) -> bool {
        self.links.iter().any(|l| l.v4.iter().any(|x| x.local == a))
            || self.addr_type4(a, TableId::LOCAL) == RouteType::Local
    }

    /// The answer to `route get ... iif`: the input decision ([`Fib::input4`]) as
    /// rt_fill_info reports it.
    fn input_answer4(&self, q: &RouteQuery, flow: &Flow) -> Result<Route, RtError> {
        let mut ans = self.answer(q, Family::Inet);
        ans.src = q.src.map(|a| Prefix { addr: a, len: 32 });
        ans.flags = rtm_flags::CLONED;
        ans.cache = Some(CacheInfo::default());
        let (res, rtype) = match self.input4(flow, q.table).map_err(|d| err(d.errno()))? {
            Input4::LimitedBroadcast => {
                ans.rtype = RouteType::Broadcast;
                ans.nexthop.oif = LOOPBACK_IFINDEX;
                ans.flags |= rtcf::BROADCAST | rtcf::LOCAL;
                return Ok(ans);
            }
            Input4::Broadcast(res) => {
                ans.nexthop.oif = LOOPBACK_IFINDEX;
                ans.flags |= rtcf::BROADCAST | rtcf::LOCAL;
                (res, RouteType::Broadcast)
            }
            Input4::Local(res) => {
                ans.nexthop.oif = LOOPBACK_IFINDEX;
                ans.flags |= rtcf::LOCAL;
                (res, RouteType::Local)
            }
            Input4::Forward { res, redirect } => {
                if redirect {
                    ans.flags |= rtcf::DOREDIRECT;
                }
                let info = self.infos.get(res.entry.info);
                let n = &info.spec.nhs[res.nh];
                ans.nexthop.oif = n.oif.0;
                if n.gw.is_some() && info.nh[res.nh].scope == scope::LINK {
                    ans.nexthop.gateway = n.gw;
                }
                ans.nexthop.encap = n.encap.clone();
                ans.metrics = info.spec.metrics.clone();
                (res, RouteType::Unicast)
            }
        };
        // Answers from a route name its table (the merged trie counts as main).
        ans.table = self.reported_table4(res.table);
        ans.tos = res.entry.tos;
        ans.rtype = rtype;
        Ok(ans)
    }

    fn get6(&self, q: &RouteQuery) -> Result<Route, RtError> {
        let flow = self.query_flow(q);
        let IpAddr::V6(d6) = q.dst else {
            return Err(err(Errno::EINVAL));
        };
        let input = q.iif.is_some();
        let res = self
            .lookup6(&flow, q.table, input)
            .map_err(|e| err(e.errno()))?;
        let info = self.infos.get(res.entry.info);
        if q.fibmatch {
            let t = self.t6.get(&res.table).expect("result table exists");
            let e = t
                .get(&res.key)
                .and_then(|es| es.iter().find(|e| **e == res.entry))
                .expect("result entry");
            let mut r = self.entry_route(Family::Inet6, res.table, res.key, e);
            // The kernel answers with the chosen sibling, then the others in their circular
            // list order; a group object's members keep the group's order.
            if info.spec.nhid.is_none() && res.nh < r.multipath.len() {
                r.multipath.rotate_left(res.nh);
                r.metrics.mtu = info.spec.mtu_of(res.nh);
                r.protocol = info.spec.protocol_of(res.nh);
            }
            r.iif = q.iif;
            return Ok(r);
        }
        let n = &info.spec.nhs[res.nh];
        let mut ans = self.answer(q, Family::Inet6);
        // rt6_fill_node puts no RTA_MARK in the answer.
        ans.mark = None;
        ans.src = Some(Prefix {
            addr: q.src.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
            len: 128,
        });
        ans.table = res.table.0;
        ans.protocol = info.spec.protocol_of(res.nh);
        ans.priority = Some(info.spec.priority);
        ans.pref = info.spec.pref.or(Some(0));
        ans.rtype = res.rtype;
        ans.metrics = info.spec.metrics.clone();
        ans.metrics.mtu = info.spec.mtu_of(res.nh);
        ans.nexthop = NextHop {
            gateway: n.gw,
            oif: n.oif.0,
            hops: 0,
            flags: 0,
            encap: n.encap.clone(),
        };
        // An answer built from a dst carries no next-hop flags (rt6_fill_node fills them for
        // FIB entries only), so never `linkdown`.
        // ip6_rt_get_dev_rcu: copies of RTF_LOCAL / RTF_ANYCAST routes live on `lo`.
        if res.rtype == RouteType::Local || info.spec.rtf_anycast {
            ans.nexthop.oif = LOOPBACK_IFINDEX;
        }
        if input {
            ans.prefsrc = info.spec.prefsrc;
        } else {
            // ip6_route_get_saddr selects on the route's device (fib6_info_nh_dev): for a
            // route through a group object that is the first member's, whichever member the
            // flow took.
            let dev = if info.spec.nhid.is_some() {
                info.spec.nhs[0].oif
            } else {
                n.oif
            };
            ans.prefsrc = info
                .spec
                .prefsrc
                .or_else(|| crate::srcsel::select_v6(&self.links, Some(dev), &d6).map(IpAddr::V6));
            self.exception_answer(&res, flow.dst, &mut ans);
        }
        Ok(ans)
    }
}
