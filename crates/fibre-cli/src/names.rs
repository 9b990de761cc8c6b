//! Names of numeric codes, both ways, as iproute2 6.1 knows them from its built-in tables and
//! the Debian defaults of /etc/iproute2 (rt_protos, rt_scopes, rt_tables, rt_dsfield). fibre
//! embeds them so it works with no files; numbers without a name print as numbers.

use std::cell::Cell;
use std::thread::LocalKey;

use crate::args::{matches, strtoul};
use fibre_fib::RouteType;

/// The one-entry cache of iproute2 6.1's `rtnl_rtprot_a2n`, `rtnl_rtscope_a2n` and
/// `rtnl_dsfield_a2n`: the last name found in the table, and in a separate variable the last
/// value either a name or a number produced. A name equal to the cached one answers that
/// variable, so after `proto kernel` then `proto 99` the next `proto kernel` means 99 (and the
/// kernel stores 99). `ip -batch` keeps the cache for the whole file; so does fibre, because
/// the same file must give the same routes.
struct A2nCache {
    name: Cell<Option<&'static str>>,
    value: Cell<u8>,
}

impl A2nCache {
    const fn new() -> A2nCache {
        A2nCache {
            name: Cell::new(None),
            value: Cell::new(0),
        }
    }
}

thread_local! {
    static PROTO_CACHE: A2nCache = const { A2nCache::new() };
    static SCOPE_CACHE: A2nCache = const { A2nCache::new() };
    static DSFIELD_CACHE: A2nCache = const { A2nCache::new() };
}

/// A name of `table`, else a number in `base`, through `cache` as iproute2 does it.
fn cached_a2n(
    cache: &'static LocalKey<A2nCache>,
    table: &[(u8, &'static str)],
    s: &str,
    base: u32,
) -> Option<u8> {
    cache.with(|c| {
        if c.name.get() == Some(s) {
            return Some(c.value.get());
        }
        if let Some((n, name)) = table.iter().find(|(_, name)| *name == s) {
            c.name.set(Some(name));
            c.value.set(*n);
            return Some(*n);
        }
        // A number that does not parse or exceeds 255 ends the batch (invarg), so only
        // valid numbers reach the cached value.
        let v = strtoul(s, base).and_then(|v| u8::try_from(v).ok())?;
        c.value.set(v);
        Some(v)
    })
}

const PROTOS: &[(u8, &str)] = &[
    (0, "unspec"),
    (1, "redirect"),
    (2, "kernel"),
    (3, "boot"),
    (4, "static"),
    (8, "gated"),
    (9, "ra"),
    (10, "mrt"),
    (11, "zebra"),
    (12, "bird"),
    (13, "dnrouted"),
    (14, "xorp"),
    (15, "ntk"),
    (16, "dhcp"),
    (18, "keepalived"),
    (42, "babel"),
    (99, "openr"),
    (186, "bgp"),
    (187, "isis"),
    (188, "ospf"),
    (189, "rip"),
    (192, "eigrp"),
];

const SCOPES: &[(u8, &str)] = &[
    (0, "global"),
    (255, "nowhere"),
    (254, "host"),
    (253, "link"),
    (200, "site"),
];

const TABLES: &[(u32, &str)] = &[
    (255, "local"),
    (254, "main"),
    (253, "default"),
    (0, "unspec"),
];

const DSFIELDS: &[(u8, &str)] = &[
    (0x00, "default"),
    (0x28, "AF11"),
    (0x30, "AF12"),
    (0x38, "AF13"),
    (0x48, "AF21"),
    (0x50, "AF22"),
    (0x58, "AF23"),
    (0x68, "AF31"),
    (0x70, "AF32"),
    (0x78, "AF33"),
    (0x88, "AF41"),
    (0x90, "AF42"),
    (0x98, "AF43"),
    (0x20, "CS1"),
    (0x40, "CS2"),
    (0x60, "CS3"),
    (0x80, "CS4"),
    (0xA0, "CS5"),
    (0xC0, "CS6"),
    (0xE0, "CS7"),
    (0xB8, "EF"),
];

/// `rtnl_rtprot_n2a`.
pub fn proto_n2a(p: u8) -> String {
    match PROTOS.iter().find(|(n, _)| *n == p) {
        Some((_, s)) => (*s).to_string(),
        None => p.to_string(),
    }
}

/// `rtnl_rtprot_a2n` (with its cache, see [`A2nCache`]).
pub fn proto_a2n(s: &str) -> Option<u8> {
    cached_a2n(&PROTO_CACHE, PROTOS, s, 0)
}

/// `rtnl_rtscope_n2a`.
pub fn scope_n2a(p: u8) -> String {
    match SCOPES.iter().find(|(n, _)| *n == p) {
        Some((_, s)) => (*s).to_string(),
        None => p.to_string(),
    }
}

/// `rtnl_rtscope_a2n` (with its cache, see [`A2nCache`]).
pub fn scope_a2n(s: &str) -> Option<u8> {
    cached_a2n(&SCOPE_CACHE, SCOPES, s, 0)
}

/// `rtnl_rttable_n2a`.
pub fn table_n2a(t: u32) -> String {
    match TABLES.iter().find(|(n, _)| *n == t) {
        Some((_, s)) => (*s).to_string(),
        None => t.to_string(),
    }
}

/// `rtnl_rttable_a2n`.
pub fn table_a2n(s: &str) -> Option<u32> {
    if let Some((n, _)) = TABLES.iter().find(|(_, name)| *name == s) {
        return Some(*n);
    }
    strtoul(s, 0).and_then(|v| u32::try_from(v).ok())
}

/// `rtnl_dsfield_n2a`.
pub fn dsfield_n2a(t: u8) -> String {
    match DSFIELDS.iter().find(|(n, _)| *n == t) {
        Some((_, s)) => (*s).to_string(),
        None => format!("0x{t:02x}"),
    }
}

/// `rtnl_dsfield_a2n`: names, else a hexadecimal number (base 16 even without "0x"); with
/// its cache, see [`A2nCache`].
pub fn dsfield_a2n(s: &str) -> Option<u8> {
    cached_a2n(&DSFIELD_CACHE, DSFIELDS, s, 16)
}

/// `rtnl_rtntype_n2a`.
pub fn rtntype_n2a(t: RouteType) -> &'static str {
    match t {
        RouteType::Unspec => "none",
        RouteType::Unicast => "unicast",
        RouteType::Local => "local",
        RouteType::Broadcast => "broadcast",
        RouteType::Anycast => "anycast",
        RouteType::Multicast => "multicast",
        RouteType::Blackhole => "blackhole",
        RouteType::Unreachable => "unreachable",
        RouteType::Prohibit => "prohibit",
        RouteType::Throw => "throw",
        RouteType::Nat => "nat",
        RouteType::Xresolve => "xresolve",
    }
}

/// The route type with numeric code `n`.
pub fn rtntype_from_u8(n: u8) -> Option<RouteType> {
    use RouteType::*;
    [
        Unspec,
        Unicast,
        Local,
        Broadcast,
        Anycast,
        Multicast,
        Blackhole,
        Unreachable,
        Prohibit,
        Throw,
        Nat,
        Xresolve,
    ]
    .get(n as usize)
    .copied()
}

/// `rtnl_rtntype_a2n`: exact words, iproute2's abbreviations, or a number.
pub fn rtntype_a2n(s: &str) -> Option<RouteType> {
    use RouteType::*;
    let t = if s == "local" {
        Local
    } else if s == "nat" {
        Nat
    } else if matches(s, "broadcast") || s == "brd" {
        Broadcast
    } else if matches(s, "anycast") {
        Anycast
    } else if matches(s, "multicast") {
        Multicast
    } else if matches(s, "prohibit") {
        Prohibit
    } else if matches(s, "unreachable") {
        Unreachable
    } else if matches(s, "blackhole") {
        Blackhole
    } else if matches(s, "xresolve") {
        Xresolve
    } else if matches(s, "unicast") {
        Unicast
    } else if s == "throw" {
        Throw
    } else {
        let v = strtoul(s, 0)?;
        return rtntype_from_u8(u8::try_from(v).ok()?);
    };
    Some(t)
}

/// IP protocol names (`inet_proto_n2a`/`inet_proto_a2n`, from /etc/protocols' common entries).
const IPPROTOS: &[(u8, &str)] = &[
    (0, "ip"),
    (1, "icmp"),
    (2, "igmp"),
    (4, "ipencap"),
    (6, "tcp"),
    (17, "udp"),
    (41, "ipv6"),
    (43, "ipv6-route"),
    (44, "ipv6-frag"),
    (47, "gre"),
    (50, "esp"),
    (51, "ah"),
    (58, "ipv6-icmp"),
    (59, "ipv6-nonxt"),
    (60, "ipv6-opts"),
    (89, "ospf"),
    (103, "pim"),
    (112, "vrrp"),
    (132, "sctp"),
    (136, "udplite"),
    (137, "mpls-in-ip"),
];

pub fn ipproto_n2a(p: u8) -> String {
    match IPPROTOS.iter().find(|(n, _)| *n == p) {
        Some((_, s)) => (*s).to_string(),
        None => p.to_string(),
    }
}

pub fn ipproto_a2n(s: &str) -> Option<u8> {
    if let Some((n, _)) = IPPROTOS.iter().find(|(_, name)| *name == s) {
        return Some(*n);
    }
    strtoul(s, 0).and_then(|v| u8::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(proto_a2n("static"), Some(4));
        assert_eq!(proto_n2a(4), "static");
        assert_eq!(proto_n2a(77), "77");
        assert_eq!(table_a2n("main"), Some(254));
        assert_eq!(table_a2n("100"), Some(100));
        assert_eq!(table_a2n("all"), None);
        assert_eq!(scope_a2n("link"), Some(253));
        assert_eq!(scope_n2a(0), "global");
        // `ip route add ... tos 0x10` prints "tos 0x10"; 0x28 prints as its rt_dsfield name.
        assert_eq!(dsfield_n2a(0x10), "0x10");
        assert_eq!(dsfield_n2a(0x28), "AF11");
        assert_eq!(dsfield_a2n("10"), Some(0x10));
        assert_eq!(rtntype_a2n("b"), Some(RouteType::Broadcast));
        assert_eq!(rtntype_a2n("blackhole"), Some(RouteType::Blackhole));
        assert_eq!(rtntype_a2n("default"), None);
    }

    #[test]
    fn a2n_cache_answers_the_last_number() {
        // iproute2 6.1 in `ip -batch`: proto kernel, proto 99, proto kernel stores 2, 99, 99;
        // another name resets the cache.
        assert_eq!(proto_a2n("kernel"), Some(2));
        assert_eq!(proto_a2n("99"), Some(99));
        assert_eq!(proto_a2n("kernel"), Some(99));
        assert_eq!(proto_a2n("zebra"), Some(11));
        assert_eq!(proto_a2n("kernel"), Some(2));
        // scope link, scope 200, scope link: the third is site (200).
        assert_eq!(scope_a2n("link"), Some(253));
        assert_eq!(scope_a2n("200"), Some(200));
        assert_eq!(scope_a2n("link"), Some(200));
    }
}
