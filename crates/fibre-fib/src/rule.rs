//! Policy rules (the kernel's fib_rules): storage, matching and the RTM_NEWRULE / RTM_DELRULE
//! semantics.
//!
//! Invariants:
//! - Each family's list is sorted by priority; among equal priorities, older rules first
//!   (a new rule goes after every rule whose priority is <= its own).
//! - A fresh instance has, per family, `0: lookup local`, `32766: lookup main`,
//!   `32767: lookup default` (IPv6 has no `default` table routes, but the rule exists).
//! - `iif`/`oif` are kept by name and resolved to an index at match time, so a rule naming a
//!   link that does not exist (yet) never matches, as the kernel's "[detached]" rules.
//! - Output lookups match with iif = `lo` (ifindex 1), as the kernel fills flowi_iif.

use crate::flow::Flow;
use crate::types::{table, Errno, Family, Prefix, RtError, Rule, RuleAction};

/// Priority of the default `lookup main` rule; automatic priorities are chosen below it.
const MAIN_RULE_PRIO: u32 = 32766;

#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub v4: Vec<Rule>,
    pub v6: Vec<Rule>,
    /// Per family (IPv4, IPv6): whether the list is a fresh instance's, so that a lookup may
    /// walk the default tables in their order without matching rules (see [`Rules::plain`]).
    plain: [bool; 2],
}

fn default_rule(family: Family, prio: u32, table: u32) -> Rule {
    Rule {
        priority: Some(prio),
        protocol: crate::types::protocol::KERNEL,
        ..Rule::new(family, table)
    }
}

fn prefix_bits(p: &Option<Prefix>) -> Option<(u128, u8)> {
    p.map(|p| (crate::prefix::ip_u128(p.addr), p.len))
}

impl Rules {
    pub fn new() -> Rules {
        let mk = |f| {
            vec![
                default_rule(f, 0, table::LOCAL),
                default_rule(f, MAIN_RULE_PRIO, table::MAIN),
            ]
        };
        let mut v4 = mk(Family::Inet);
        // IPv4 also has `32767: lookup default`; IPv6 does not (kernel: `ip -6 rule`).
        v4.push(default_rule(
            Family::Inet,
            MAIN_RULE_PRIO + 1,
            table::DEFAULT,
        ));
        Rules {
            v4,
            v6: mk(Family::Inet6),
            plain: [true; 2],
        }
    }

    /// Whether `f`'s rules are a fresh instance's (`0: lookup local`, `32766: lookup main`
    /// and, for IPv4, `32767: lookup default`, without selectors): then every flow walks those
    /// tables in that order.
    #[inline]
    pub fn plain(&self, f: Family) -> bool {
        self.plain[(f == Family::Inet6) as usize]
    }

    fn changed(&mut self, f: Family) {
        self.plain[(f == Family::Inet6) as usize] = *self.list(f) == *Rules::new().list(f);
    }

    pub fn list(&self, f: Family) -> &Vec<Rule> {
        match f {
            Family::Inet => &self.v4,
            Family::Inet6 => &self.v6,
        }
    }

    fn list_mut(&mut self, f: Family) -> &mut Vec<Rule> {
        match f {
            Family::Inet => &mut self.v4,
            Family::Inet6 => &mut self.v6,
        }
    }

    /// RTM_NEWRULE (fib_nl_newrule).
    pub fn add(&mut self, r: &Rule, excl: bool) -> Result<(), RtError> {
        let bits = r.family.max_len();
        for (p, what) in [
            (&r.src, "Invalid source address"),
            (&r.dst, "Invalid dst address"),
        ] {
            if let Some(p) = p {
                if p.len > bits || Family::of(&p.addr) != r.family {
                    return Err(RtError::msg(Errno::EINVAL, what));
                }
            }
        }
        let list = self.list_mut(r.family);
        let mut rule = r.clone();
        if rule.priority.is_none() {
            // The kernel picks one less than the second rule's priority, or 0 when there is
            // no second rule or its priority is 0 -- before checking a goto against it.
            let p = list
                .get(1)
                .and_then(|x| x.priority)
                .filter(|&p| p > 0)
                .map(|p| p - 1)
                .unwrap_or(0);
            rule.priority = Some(p);
        }
        if rule.action == RuleAction::Goto {
            match rule.goto {
                None => {
                    return Err(RtError::msg(
                        Errno::EINVAL,
                        "Missing goto target for action goto",
                    ))
                }
                Some(t) if Some(t) <= rule.priority => {
                    return Err(RtError::msg(Errno::EINVAL, "Backward goto not supported"))
                }
                _ => {}
            }
        }
        if r.action == RuleAction::ToTbl && r.table == 0 {
            return Err(RtError::msg(Errno::EINVAL, "Invalid table"));
        }
        if let Some((a, b)) = r.uid_range {
            if a > b {
                return Err(RtError::msg(Errno::EINVAL, "Invalid uid range"));
            }
        }
        for (a, b) in [r.sport, r.dport].into_iter().flatten() {
            if a > b || a == 0 {
                return Err(RtError::msg(Errno::EINVAL, "Invalid port range"));
            }
        }
        if rule.fwmark.is_some() && rule.fwmask.is_none() {
            rule.fwmask = Some(u32::MAX);
        }
        if excl && list.iter().any(|x| rule_exists(x, &rule)) {
            return Err(RtError::new(Errno::EEXIST));
        }
        let prio = rule.priority.unwrap_or(0);
        let pos = list
            .iter()
            .position(|x| x.priority.unwrap_or(0) > prio)
            .unwrap_or(list.len());
        list.insert(pos, rule);
        self.changed(r.family);
        Ok(())
    }

    /// RTM_DELRULE: the first rule matching every attribute present in `r`.
    pub fn del(&mut self, r: &Rule) -> Result<(), RtError> {
        let list = self.list_mut(r.family);
        let pos = list.iter().position(|x| rule_matches_del(x, r));
        match pos {
            Some(i) => {
                list.remove(i);
                self.changed(r.family);
                Ok(())
            }
            None => Err(RtError::new(Errno::ENOENT)),
        }
    }

    /// Whether `rule` applies to `flow` (fib_rule_match plus the family's match).
    pub fn matches(
        rule: &Rule,
        flow: &Flow,
        bits: u8,
        link_index: impl Fn(&str) -> Option<u32>,
    ) -> bool {
        let m = (|| {
            if let Some(n) = &rule.iifname {
                if link_index(n) != Some(flow.iif) {
                    return false;
                }
            }
            if let Some(n) = &rule.oifname {
                if link_index(n) != Some(flow.oif) {
                    return false;
                }
            }
            if let Some(mark) = rule.fwmark {
                let m = rule.fwmask.unwrap_or(u32::MAX);
                if (mark ^ flow.mark) & m != 0 {
                    return false;
                }
            } else if let Some(m) = rule.fwmask {
                if flow.mark & m != 0 {
                    return false;
                }
            }
            if let Some((a, b)) = rule.uid_range {
                if flow.uid < a || flow.uid > b {
                    return false;
                }
            }
            if let Some((a, l)) = prefix_bits(&rule.src) {
                if flow.src & crate::prefix::mask(l, bits) != a & crate::prefix::mask(l, bits) {
                    return false;
                }
            }
            if let Some((a, l)) = prefix_bits(&rule.dst) {
                if flow.dst & crate::prefix::mask(l, bits) != a & crate::prefix::mask(l, bits) {
                    return false;
                }
            }
            // IPv4 rules compare the routing bits of the tos (fib4_rule_match); IPv6 the
            // whole traffic class.
            let tos_ok = if bits == 32 {
                crate::flow::tos_matches(rule.tos, flow.tos)
            } else {
                rule.tos == 0 || rule.tos == flow.tos
            };
            if !tos_ok {
                return false;
            }
            if let Some(p) = rule.ipproto {
                if p != flow.proto {
                    return false;
                }
            }
            if let Some((a, b)) = rule.sport {
                if flow.sport < a || flow.sport > b {
                    return false;
                }
            }
            if let Some((a, b)) = rule.dport {
                if flow.dport < a || flow.dport > b {
                    return false;
                }
            }
            true
        })();
        if rule.flags & crate::types::rule_flags::INVERT != 0 {
            !m
        } else {
            m
        }
    }
}

/// NLM_F_EXCL's duplicate test (the kernel's rule_exists, `old` an installed rule, `new` the
/// request with its priority filled in): action, table, priority, links, fwmark and mask,
/// suppressors, ipproto, ports, uid range, protocol and l3mdev must be equal, while an
/// address, tos or dscp is compared only when the request gives one (the family's compare
/// hook). The `not` flag and a goto's target are not compared: `not to P` duplicates `to P`.
fn rule_exists(old: &Rule, new: &Rule) -> bool {
    let mark = |r: &Rule| {
        let m = r.fwmark.unwrap_or(0);
        (m, r.fwmask.unwrap_or(if m != 0 { u32::MAX } else { 0 }))
    };
    let given = |p: &Option<Prefix>| p.filter(|p| p.len != 0);
    old.action == new.action
        && old.table == new.table
        && old.priority == new.priority
        && old.iifname == new.iifname
        && old.oifname == new.oifname
        && mark(old) == mark(new)
        && old.suppress_ifgroup == new.suppress_ifgroup
        && old.suppress_prefixlen == new.suppress_prefixlen
        && old.l3mdev == new.l3mdev
        && old.uid_range == new.uid_range
        && old.ipproto == new.ipproto
        && old.protocol == new.protocol
        && old.sport == new.sport
        && old.dport == new.dport
        && given(&new.src).is_none_or(|p| given(&old.src) == Some(p))
        && given(&new.dst).is_none_or(|p| given(&old.dst) == Some(p))
        && (new.tos == 0 || old.tos == new.tos)
        && new.dscp.is_none_or(|d| old.dscp == Some(d))
}

/// RTM_DELRULE matching: attributes present in the request must be equal.
fn rule_matches_del(x: &Rule, r: &Rule) -> bool {
    (r.priority.is_none() || x.priority == r.priority)
        && (r.src.is_none() || x.src == r.src)
        && (r.dst.is_none() || x.dst == r.dst)
        && (r.tos == 0 || x.tos == r.tos)
        && (r.table == 0 || x.table == r.table)
        && (r.action == RuleAction::Unspec || x.action == r.action)
        && (r.fwmark.is_none() || x.fwmark == r.fwmark)
        && (r.fwmask.is_none() || x.fwmask == r.fwmask)
        && (r.iifname.is_none() || x.iifname == r.iifname)
        && (r.oifname.is_none() || x.oifname == r.oifname)
        && (r.goto.is_none() || x.goto == r.goto)
        && (r.suppress_prefixlen.is_none() || x.suppress_prefixlen == r.suppress_prefixlen)
        && (r.ipproto.is_none() || x.ipproto == r.ipproto)
        && (r.sport.is_none() || x.sport == r.sport)
        && (r.dport.is_none() || x.dport == r.dport)
        && (r.uid_range.is_none() || x.uid_range == r.uid_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_per_family() {
        // Kernel: `ip rule` in a new namespace lists 0 local, 32766 main, 32767 default;
        // `ip -6 rule` lists 0 local, 32766 main.
        let r = Rules::new();
        let got = |l: &Vec<Rule>| -> Vec<(u32, u32)> {
            l.iter().map(|x| (x.priority.unwrap(), x.table)).collect()
        };
        assert_eq!(got(&r.v4), [(0, 255), (32766, 254), (32767, 253)]);
        assert_eq!(got(&r.v6), [(0, 255), (32766, 254)]);
    }

    #[test]
    fn automatic_priority_below_second_rule() {
        let mut r = Rules::new();
        let mut x = default_rule(Family::Inet, 0, 100);
        x.priority = None;
        r.add(&x, true).unwrap();
        assert_eq!(r.v4[1].priority, Some(32765));
        r.add(&x, false).unwrap();
        assert_eq!(r.v4[1].priority, Some(32764));
    }

    #[test]
    fn exclusive_add_compares_only_given_selectors() {
        // Kernel: after `rule add pref 1024 not to 192.168.0.0/16 tos 0x1c table 101`,
        // `rule add pref 1024 to 192.168.0.0/16 table 101` and `rule add pref 1024 table 101`
        // fail with EEXIST; `from 192.168.0.0/16` and another protocol do not.
        let p = |s: &str| {
            let (a, l) = s.split_once('/').unwrap();
            Some(Prefix {
                addr: a.parse().unwrap(),
                len: l.parse().unwrap(),
            })
        };
        let mut r = Rules::new();
        let mk = |dst, src, tos, flags, protocol| Rule {
            priority: Some(1024),
            dst,
            src,
            tos,
            flags,
            protocol,
            ..Rule::new(Family::Inet, 101)
        };
        let invert = crate::types::rule_flags::INVERT;
        r.add(&mk(p("192.168.0.0/16"), None, 0x1c, invert, 0), true)
            .unwrap();
        let dup = |r: &mut Rules, x: Rule| r.add(&x, true).map_err(|e| e.errno);
        assert_eq!(
            dup(&mut r, mk(p("192.168.0.0/16"), None, 0, 0, 0)),
            Err(Errno::EEXIST)
        );
        assert_eq!(dup(&mut r, mk(None, None, 0, 0, 0)), Err(Errno::EEXIST));
        assert_eq!(dup(&mut r, mk(None, p("192.168.0.0/16"), 0, 0, 0)), Ok(()));
        assert_eq!(dup(&mut r, mk(p("192.168.0.0/16"), None, 0, 0, 4)), Ok(()));
    }
}
