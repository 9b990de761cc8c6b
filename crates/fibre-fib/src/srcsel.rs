//! Source-address selection.
//!
//! IPv4 follows the kernel's inet_select_addr: on the output device, the first primary address
//! whose scope is within the wanted scope, preferring one whose subnet holds the destination
//! (or gateway); failing that, the first primary non-link-scope address of any device, devices
//! in ifindex order (so `lo` first).
//!
//! IPv6 follows ipv6_dev_get_saddr (RFC 6724 as the kernel implements it): candidates are the
//! output device's addresses when the destination is link-local or multicast, else every
//! device's; compared rule by rule (same address, appropriate scope, avoid deprecated, prefer
//! the outgoing interface, matching label, longest matching prefix); ties keep the first found.

use std::net::Ipv6Addr;

use crate::addr::{v6_src_scope, Addr6};
use crate::ids::IfIndex;
use crate::link::{LinkState, Links};
use crate::types::{ifa_flags, scope};

/// inet_select_addr(dev, dst, scope).
pub(crate) fn select_v4(links: &Links, dev: IfIndex, dst: u32, want_scope: u8) -> Option<u32> {
    if let Some(l) = links.get(dev) {
        let mut addr = None;
        for a in &l.v4 {
            if a.is_secondary() {
                continue;
            }
            // route_localnet is off: host-scope addresses count as host scope.
            if a.scope.min(scope::HOST) > want_scope {
                continue;
            }
            if dst == 0 || a.covers(dst) {
                return Some(a.local);
            }
            if addr.is_none() {
                addr = Some(a.local);
            }
        }
        if addr.is_some() {
            return addr;
        }
    }
    links.iter().find_map(|l| dev_select_v4(l, want_scope))
}

/// in_dev_select_addr: a primary, non-link-scope address within `want_scope`.
fn dev_select_v4(l: &LinkState, want_scope: u8) -> Option<u32> {
    l.v4.iter()
        .find(|a| !a.is_secondary() && a.scope != scope::LINK && a.scope <= want_scope)
        .map(|a| a.local)
}

/// The kernel's default address-label table (RFC 6724 policy, ip6addrlbl_init_table).
const LABELS: &[(u128, u8, u32)] = &[
    (0x0000_0000_0000_0000_0000_0000_0000_0001, 128, 0),
    (0x0000_0000_0000_0000_0000_ffff_0000_0000, 96, 4),
    (0x2001_0010_0000_0000_0000_0000_0000_0000, 28, 7),
    (0x2001_0000_0000_0000_0000_0000_0000_0000, 32, 6),
    (0x2002_0000_0000_0000_0000_0000_0000_0000, 16, 2),
    (0x3ffe_0000_0000_0000_0000_0000_0000_0000, 16, 12),
    (0xfc00_0000_0000_0000_0000_0000_0000_0000, 7, 5),
    (0xfec0_0000_0000_0000_0000_0000_0000_0000, 10, 11),
    (0x0000_0000_0000_0000_0000_0000_0000_0000, 96, 3),
    (0, 0, 1),
];

fn label(a: &Ipv6Addr) -> u32 {
    let v = u128::from(*a);
    LABELS
        .iter()
        .find(|(p, l, _)| v & crate::prefix::mask(*l, 128) == *p)
        .map(|x| x.2)
        .unwrap_or(1)
}

fn common_prefix(a: &Ipv6Addr, b: &Ipv6Addr) -> u32 {
    (u128::from(*a) ^ u128::from(*b)).leading_zeros()
}

/// One candidate's scores, compared rule by rule; larger wins.
fn score(
    a: &Addr6,
    dev: IfIndex,
    dst: &Ipv6Addr,
    dst_scope: i32,
    out_dev: Option<IfIndex>,
) -> [i64; 6] {
    let same = (a.addr == *dst) as i64;
    let sc = v6_src_scope(&a.addr) as i32;
    let scope_rank = if sc >= dst_scope {
        -(sc as i64)
    } else {
        sc as i64 - 128
    };
    let not_deprecated = (a.flags & ifa_flags::DEPRECATED == 0) as i64;
    let oif = out_dev.is_none_or(|o| o == dev) as i64;
    let lbl = (label(&a.addr) == label(dst)) as i64;
    let prefix = common_prefix(&a.addr, dst).min(a.prefixlen as u32) as i64;
    [same, scope_rank, not_deprecated, oif, lbl, prefix]
}

/// ipv6_dev_get_saddr(dst_dev, daddr).
pub(crate) fn select_v6(
    links: &Links,
    out_dev: Option<IfIndex>,
    dst: &Ipv6Addr,
) -> Option<Ipv6Addr> {
    let dst_scope = v6_src_scope(dst) as i32;
    let restrict = dst.is_multicast() || dst_scope <= 0x2;
    let mut best: Option<([i64; 6], Ipv6Addr)> = None;
    let mut consider = |l: &LinkState| {
        for a in &l.v6 {
            if a.flags & (ifa_flags::TENTATIVE | ifa_flags::DADFAILED) != 0 {
                continue;
            }
            let s = score(a, l.ifindex, dst, dst_scope, out_dev);
            // A candidate of too narrow a scope never beats one of sufficient scope; the
            // lexicographic compare gives exactly the kernel's rule-by-rule order.
            if best.as_ref().is_none_or(|(b, _)| s > *b) {
                best = Some((s, a.addr));
            }
        }
    };
    match out_dev {
        Some(d) if restrict => {
            if let Some(l) = links.get(d) {
                consider(l);
            }
        }
        Some(d) => {
            if let Some(l) = links.get(d) {
                consider(l);
            }
            for l in links.iter().filter(|l| l.ifindex != d) {
                consider(l);
            }
        }
        None => links.iter().for_each(consider),
    }
    best.map(|(_, a)| a)
}
