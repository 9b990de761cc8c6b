//! Per-link settings with the meaning of the kernel's `net.ipv4.conf.*` and `net.ipv6.conf.*`
//! sysctls: reverse-path filtering and ignoring routes whose next hop has lost its carrier; and
//! the namespace-wide multipath hash settings (`net.ipv{4,6}.fib_multipath_hash_*`, see
//! `mphash`), which exist for `all` only and refuse values the kernel refuses (EINVAL).
//!
//! The kernel's rules, which fibre follows:
//! - IPv4 (`devinet`): each link has its own values, copied from `default` when the link is
//!   created; a later write to `default` reaches every link whose value was never written on
//!   its own (devinet_copy_dflt_conf). The effective `rp_filter` of an input link is
//!   max(all, link) (IN_DEV_MAXCONF); `ignore_routes_with_linkdown` is all || link
//!   (IN_DEV_ORCONF), read for the next hop's device.
//! - IPv6 (`addrconf`): a link copies `default` when created and keeps its own value; a write
//!   to `all` sets `default` and every link (addrconf_linkdown_change); the link's own value
//!   is what lookups read.
//! - Lookups skip a LINKDOWN next hop on a link that ignores such routes (fib_table_lookup,
//!   find_match), and multipath bounds computed while it is so leave it out (fib_rebalance,
//!   rt6_multipath_rebalance). A write changes neither the bounds nor any route by itself,
//!   as in the kernel: the bounds follow at the next link event.
//!
//! Who calls what: `Fib::set_conf`/`Fib::conf` are the entry points; link creation and
//! deletion keep `Confs::dev` in step; lookups read `Fib::linkdown_ignored`, the derived set of
//! links whose LINKDOWN next hops are skipped, empty unless the feature is used.

use crate::flow::LinkdownIgnored;
use crate::hash::KeyedMap;
use crate::ids::IfIndex;
use crate::types::{Errno, Family, RtError};

/// The largest net.ipv6.ioam6_id and ioam6_id_wide (24 and 56 bits: the trace's hop limit
/// takes the top byte); also their defaults (IOAM6_DEFAULT_ID, IOAM6_DEFAULT_ID_WIDE).
pub const IOAM6_NODE_ID_MAX: u32 = u32::MAX >> 8;
pub const IOAM6_NODE_ID_WIDE_MAX: u64 = u64::MAX >> 8;

/// Which copy of a setting: `all`, `default`, or one link's (by ifindex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfTarget {
    All,
    Default,
    Dev(u32),
}

/// The settings fibre gives the kernel's meaning to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfKey {
    /// net.ipv4.conf.X.forwarding (`all` only: fibre forwards on every link or none).
    Forwarding4,
    /// net.ipv6.conf.X.forwarding (`all` only).
    Forwarding6,
    /// net.ipv4.conf.X.rp_filter: 0 off, 1 strict, 2 loose.
    RpFilter,
    /// net.ipv4.conf.X.ignore_routes_with_linkdown
    IgnoreLinkdown4,
    /// net.ipv6.conf.X.ignore_routes_with_linkdown
    IgnoreLinkdown6,
    /// net.ipv4.fib_multipath_hash_policy (no `conf.X`: one per instance).
    MultipathHashPolicy4,
    /// net.ipv6.fib_multipath_hash_policy
    MultipathHashPolicy6,
    /// net.ipv4.fib_multipath_hash_fields
    MultipathHashFields4,
    /// net.ipv6.fib_multipath_hash_fields
    MultipathHashFields6,
    /// net.ipv4.fib_multipath_hash_seed (both families' hash)
    MultipathHashSeed,
    /// net.ipv4.icmp_ratelimit, icmp_ratemask, icmp_msgs_per_sec, icmp_msgs_burst and
    /// net.ipv6.icmp.ratelimit (see [`crate::IcmpLimits`]).
    IcmpRatelimit4,
    IcmpRatemask,
    IcmpMsgsPerSec,
    IcmpMsgsBurst,
    IcmpRatelimit6,
    /// net.ipv6.seg6_flowlabel (see [`crate::Settings::seg6_flowlabel`]).
    Seg6Flowlabel,
    /// net.ipv6.conf.X.ioam6_enabled (0 or 1): whether IOAM pre-allocated traces are filled
    /// in for packets received on the link (only the input link's value counts).
    Ioam6Enabled,
    /// net.ipv6.conf.X.ioam6_id (at most 0xffff) and ioam6_id_wide (a u32): the link's
    /// interface ids in IOAM traces (all ones, "unavailable", by default).
    Ioam6IfId,
    Ioam6IfIdWide,
    /// net.ipv6.ioam6_id (at most 0xffffff) and ioam6_id_wide (at most 2^56 - 1): the
    /// router's node ids in IOAM traces (see [`crate::Settings::ioam6_id`]).
    Ioam6NodeId,
    Ioam6NodeIdWide,
    /// net.ipv6.conf.X.seg6_enabled: whether packets with an SRH addressed to one of the
    /// router's addresses are accepted on the link (0 by default, as in the kernel). What
    /// counts is min(all, link), as ipv6_srh_rcv reads them.
    Seg6Enabled,
    /// net.ipv6.conf.X.seg6_require_hmac: how the HMAC TLV of an SRH received on the link
    /// is checked (seg6_hmac_validate_skb): below 0 never, 0 when the SRH carries one (the
    /// default), above 0 always (an SRH without one is dropped). Only the input link's value
    /// counts.
    Seg6RequireHmac,
}

impl ConfKey {
    /// Every key, each at the index that numbers it on fibred's socket
    /// (`fibre_proto::sysctl`): the order of the declaration, which only grows at its end.
    pub const ALL: [ConfKey; 23] = [
        ConfKey::Forwarding4,
        ConfKey::Forwarding6,
        ConfKey::RpFilter,
        ConfKey::IgnoreLinkdown4,
        ConfKey::IgnoreLinkdown6,
        ConfKey::MultipathHashPolicy4,
        ConfKey::MultipathHashPolicy6,
        ConfKey::MultipathHashFields4,
        ConfKey::MultipathHashFields6,
        ConfKey::MultipathHashSeed,
        ConfKey::IcmpRatelimit4,
        ConfKey::IcmpRatemask,
        ConfKey::IcmpMsgsPerSec,
        ConfKey::IcmpMsgsBurst,
        ConfKey::IcmpRatelimit6,
        ConfKey::Seg6Flowlabel,
        ConfKey::Ioam6Enabled,
        ConfKey::Ioam6IfId,
        ConfKey::Ioam6IfIdWide,
        ConfKey::Ioam6NodeId,
        ConfKey::Ioam6NodeIdWide,
        ConfKey::Seg6Enabled,
        ConfKey::Seg6RequireHmac,
    ];

    /// The key's number (its index in [`ConfKey::ALL`]).
    pub fn number(self) -> u32 {
        self as u32
    }

    /// The key numbered `n`, if any.
    pub fn from_number(n: u32) -> Option<ConfKey> {
        ConfKey::ALL.get(usize::try_from(n).ok()?).copied()
    }

    /// The key's sysctl name (the last component) and family.
    pub fn parse(family: Family, name: &str) -> Option<ConfKey> {
        Some(match (family, name) {
            (Family::Inet, "forwarding") => ConfKey::Forwarding4,
            (Family::Inet6, "forwarding") => ConfKey::Forwarding6,
            (Family::Inet, "rp_filter") => ConfKey::RpFilter,
            (Family::Inet, "ignore_routes_with_linkdown") => ConfKey::IgnoreLinkdown4,
            (Family::Inet6, "ignore_routes_with_linkdown") => ConfKey::IgnoreLinkdown6,
            (Family::Inet6, "seg6_enabled") => ConfKey::Seg6Enabled,
            (Family::Inet6, "seg6_require_hmac") => ConfKey::Seg6RequireHmac,
            (Family::Inet6, "ioam6_enabled") => ConfKey::Ioam6Enabled,
            (Family::Inet6, "ioam6_id") => ConfKey::Ioam6IfId,
            (Family::Inet6, "ioam6_id_wide") => ConfKey::Ioam6IfIdWide,
            _ => return None,
        })
    }

    /// A namespace-wide key `net.ipv{4,6}.NAME` (target `all`).
    pub fn parse_global(family: Family, name: &str) -> Option<ConfKey> {
        Some(match (family, name) {
            (Family::Inet, "ip_forward") => ConfKey::Forwarding4,
            (Family::Inet, "fib_multipath_hash_policy") => ConfKey::MultipathHashPolicy4,
            (Family::Inet6, "fib_multipath_hash_policy") => ConfKey::MultipathHashPolicy6,
            (Family::Inet, "fib_multipath_hash_fields") => ConfKey::MultipathHashFields4,
            (Family::Inet6, "fib_multipath_hash_fields") => ConfKey::MultipathHashFields6,
            (Family::Inet, "fib_multipath_hash_seed") => ConfKey::MultipathHashSeed,
            (Family::Inet, "icmp_ratelimit") => ConfKey::IcmpRatelimit4,
            (Family::Inet, "icmp_ratemask") => ConfKey::IcmpRatemask,
            (Family::Inet, "icmp_msgs_per_sec") => ConfKey::IcmpMsgsPerSec,
            (Family::Inet, "icmp_msgs_burst") => ConfKey::IcmpMsgsBurst,
            (Family::Inet6, "icmp.ratelimit") => ConfKey::IcmpRatelimit6,
            (Family::Inet6, "seg6_flowlabel") => ConfKey::Seg6Flowlabel,
            (Family::Inet6, "ioam6_id") => ConfKey::Ioam6NodeId,
            (Family::Inet6, "ioam6_id_wide") => ConfKey::Ioam6NodeIdWide,
            _ => return None,
        })
    }

    fn is_global(self) -> bool {
        matches!(
            self,
            ConfKey::MultipathHashPolicy4
                | ConfKey::MultipathHashPolicy6
                | ConfKey::MultipathHashFields4
                | ConfKey::MultipathHashFields6
                | ConfKey::MultipathHashSeed
                | ConfKey::IcmpRatelimit4
                | ConfKey::IcmpRatemask
                | ConfKey::IcmpMsgsPerSec
                | ConfKey::IcmpMsgsBurst
                | ConfKey::IcmpRatelimit6
                | ConfKey::Seg6Flowlabel
                | ConfKey::Ioam6NodeId
                | ConfKey::Ioam6NodeIdWide
        )
    }
}

/// One link's (or `default`'s, or for the IPv6 keys no link reads, `all`'s) values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DevConf {
    rp_filter: i32,
    ignore_linkdown4: i32,
    ignore_linkdown6: i32,
    seg6_enabled: i32,
    seg6_require_hmac: i32,
    ioam6: Ioam6Link,
    /// IPv4 values written on this link itself (the kernel's cnf.state bits), which a write
    /// to `default` no longer reaches.
    rp_filter_set: bool,
    ignore_linkdown4_set: bool,
}

/// A link's IOAM settings, as the data path reads them for the input and output links of a
/// packet with a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ioam6Link {
    pub enabled: bool,
    pub id: u16,
    pub id_wide: u32,
}

impl Default for Ioam6Link {
    /// The kernel's: off, both ids "unavailable" (IOAM6_DEFAULT_IF_ID, _WIDE).
    fn default() -> Self {
        Ioam6Link {
            enabled: false,
            id: u16::MAX,
            id_wide: u32::MAX,
        }
    }
}

/// Every link's settings and `default`; `all` lives in [`crate::Settings`]. Keeps the sets of
/// links whose LINKDOWN next hops packet lookups skip equal to what the settings say: every
/// method that changes a link's settings, or the set of links, recomputes them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Confs {
    default: DevConf,
    /// `all`'s copy of the IPv6 keys `crate::Settings` does not hold: addrconf keeps it apart
    /// and nothing reads it.
    all6: DevConf,
    /// By interface index, which a netlink peer may choose when it creates a link: keyed hash.
    dev: KeyedMap<IfIndex, DevConf>,
    /// IPv4, IPv6: derived from `dev` and `all`'s ignore_routes_with_linkdown.
    ignored: [LinkdownIgnored; 2],
}

impl Confs {
    /// The state of a fresh instance with `all` as given: an IPv6 `all` is `default` too.
    pub fn new(all: &crate::Settings) -> Confs {
        let mut c = Confs::default();
        c.default.ignore_linkdown6 = all.ignore_routes_with_linkdown6 as i32;
        c
    }

    /// A new link starts from `default`; `all4` is `all`'s IPv4 ignore_routes_with_linkdown.
    pub fn link_added(&mut self, ifindex: IfIndex, all4: bool) {
        let c = DevConf {
            rp_filter_set: false,
            ignore_linkdown4_set: false,
            ..self.default
        };
        self.dev.insert(ifindex, c);
        self.refresh_ignored(all4);
    }

    pub fn link_removed(&mut self, ifindex: IfIndex, all4: bool) {
        self.dev.remove(&ifindex);
        self.refresh_ignored(all4);
    }

    /// The links whose LINKDOWN next hops packet lookups skip: IPv4, IPv6.
    #[inline]
    pub fn ignored(&self) -> &[LinkdownIgnored; 2] {
        &self.ignored
    }

    fn refresh_ignored(&mut self, all4: bool) {
        self.ignored = [
            LinkdownIgnored::new(self.ignoring(Family::Inet, all4)),
            LinkdownIgnored::new(self.ignoring(Family::Inet6, all4)),
        ];
    }

    /// Link `ifindex`'s IOAM settings (the defaults for a link that does not exist).
    pub fn ioam6(&self, ifindex: IfIndex) -> Ioam6Link {
        self.dev.get(&ifindex).map(|c| c.ioam6).unwrap_or_default()
    }

    /// Input link `iif`'s seg6_require_hmac (0, the default, for a link that does not exist).
    pub fn seg6_require_hmac(&self, iif: IfIndex) -> i32 {
        self.dev.get(&iif).map_or(0, |c| c.seg6_require_hmac)
    }

    /// Whether input link `iif` accepts SRH packets for the router: min(all, link) above 0.
    pub fn seg6_enabled(&self, all: i32, iif: IfIndex) -> bool {
        all.min(self.dev.get(&iif).map_or(0, |c| c.seg6_enabled)) > 0
    }

    /// The effective rp_filter of input link `iif` given `all`.
    pub fn rp_filter(&self, all: u8, iif: IfIndex) -> u8 {
        let dev = self.dev.get(&iif).map_or(0, |c| c.rp_filter);
        (all as i32).max(dev).clamp(0, u8::MAX as i32) as u8
    }

    /// The links whose LINKDOWN next hops lookups skip, sorted, for `family`.
    fn ignoring(&self, family: Family, all4: bool) -> Vec<IfIndex> {
        let mut v: Vec<IfIndex> = self
            .dev
            .iter()
            .filter(|(_, c)| match family {
                Family::Inet => all4 || c.ignore_linkdown4 != 0,
                Family::Inet6 => c.ignore_linkdown6 != 0,
            })
            .map(|(&i, _)| i)
            .collect();
        v.sort_unstable();
        v
    }
}

impl crate::Fib {
    /// Writes a setting, as `sysctl -w net.ipv{4,6}.conf.TARGET.KEY=VALUE` does. ENODEV for
    /// a link that does not exist; EOPNOTSUPP for a forwarding setting other than `all`;
    /// EINVAL for a multipath hash value out of the kernel's range (policy 0-3, fields 1 to
    /// 0xfff, seed a u32), a negative ICMP limit, or one of those namespace-wide keys with
    /// another target.
    pub fn set_conf(
        &mut self,
        target: ConfTarget,
        key: ConfKey,
        value: i64,
    ) -> Result<(), RtError> {
        if key.is_global() {
            return self.set_global(target, key, value);
        }
        if let Some(r) = self.set_apart6(target, key, value) {
            return r;
        }
        // The per-link settings are C ints in the kernel.
        let value = i32::try_from(value).map_err(|_| RtError::new(Errno::EINVAL))?;
        if let ConfTarget::Dev(i) = target {
            if !self.confs.dev.contains_key(&IfIndex(i)) {
                return Err(RtError::new(Errno::ENODEV));
            }
        }
        let mut s = self.settings().clone();
        match (key, target) {
            (ConfKey::Forwarding4, ConfTarget::All) => s.ipv4_forwarding = value != 0,
            (ConfKey::Forwarding6, ConfTarget::All) => s.ipv6_forwarding = value != 0,
            (ConfKey::Forwarding4 | ConfKey::Forwarding6, _) => {
                return Err(RtError::msg(
                    Errno::EOPNOTSUPP,
                    "fibre forwards on every link or none: only conf.all.forwarding exists",
                ))
            }
            (ConfKey::RpFilter, ConfTarget::All) => s.rp_filter = value.clamp(0, 255) as u8,
            (ConfKey::IgnoreLinkdown4, ConfTarget::All) => {
                s.ignore_routes_with_linkdown4 = value != 0
            }
            (ConfKey::IgnoreLinkdown6, ConfTarget::All) => {
                // addrconf_linkdown_change: `all` is written through to `default` and to
                // every link.
                s.ignore_routes_with_linkdown6 = value != 0;
                self.confs.default.ignore_linkdown6 = value;
                for c in self.confs.dev.values_mut() {
                    c.ignore_linkdown6 = value;
                }
            }
            (ConfKey::RpFilter, ConfTarget::Default) => {
                self.confs.default.rp_filter = value;
                for c in self.confs.dev.values_mut().filter(|c| !c.rp_filter_set) {
                    c.rp_filter = value;
                }
            }
            (ConfKey::IgnoreLinkdown4, ConfTarget::Default) => {
                self.confs.default.ignore_linkdown4 = value;
                for c in self
                    .confs
                    .dev
                    .values_mut()
                    .filter(|c| !c.ignore_linkdown4_set)
                {
                    c.ignore_linkdown4 = value;
                }
            }
            (ConfKey::IgnoreLinkdown6, ConfTarget::Default) => {
                self.confs.default.ignore_linkdown6 = value
            }
            // addrconf keeps `all` apart: a write to it reaches no link.
            (ConfKey::Seg6Enabled, ConfTarget::All) => s.seg6_enabled = value,
            (ConfKey::Seg6Enabled, ConfTarget::Default) => self.confs.default.seg6_enabled = value,
            // The namespace-wide keys returned above.
            (_, ConfTarget::All | ConfTarget::Default) => return Err(RtError::new(Errno::EINVAL)),
            (key, ConfTarget::Dev(i)) => {
                let c = self.confs.dev.get_mut(&IfIndex(i)).expect("checked above");
                match key {
                    ConfKey::RpFilter => {
                        c.rp_filter = value;
                        c.rp_filter_set = true;
                    }
                    ConfKey::IgnoreLinkdown4 => {
                        c.ignore_linkdown4 = value;
                        c.ignore_linkdown4_set = true;
                    }
                    ConfKey::Seg6Enabled => c.seg6_enabled = value,
                    _ => c.ignore_linkdown6 = value,
                }
            }
        }
        let all4 = s.ignore_routes_with_linkdown4;
        self.set_settings(s);
        self.confs.refresh_ignored(all4);
        Ok(())
    }

    /// The per-link IPv6 keys of [`Fib::set_conf`] whose copies addrconf keeps apart (IOAM,
    /// seg6_require_hmac; `None` for the others): the kernel's ranges (EINVAL beyond), no
    /// write reaching another copy.
    fn set_apart6(
        &mut self,
        target: ConfTarget,
        key: ConfKey,
        value: i64,
    ) -> Option<Result<(), RtError>> {
        let (min, max) = match key {
            ConfKey::Ioam6Enabled => (0, 1),
            ConfKey::Ioam6IfId => (0, i64::from(u16::MAX)),
            ConfKey::Ioam6IfIdWide => (0, i64::from(u32::MAX)),
            ConfKey::Seg6RequireHmac => (i64::from(i32::MIN), i64::from(i32::MAX)),
            _ => return None,
        };
        if !(min..=max).contains(&value) {
            return Some(Err(RtError::new(Errno::EINVAL)));
        }
        let c = match target {
            ConfTarget::All => &mut self.confs.all6,
            ConfTarget::Default => &mut self.confs.default,
            ConfTarget::Dev(i) => match self.confs.dev.get_mut(&IfIndex(i)) {
                Some(c) => c,
                None => return Some(Err(RtError::new(Errno::ENODEV))),
            },
        };
        match key {
            ConfKey::Ioam6Enabled => c.ioam6.enabled = value != 0,
            ConfKey::Ioam6IfId => c.ioam6.id = value as u16,
            ConfKey::Seg6RequireHmac => c.seg6_require_hmac = value as i32,
            _ => c.ioam6.id_wide = value as u32,
        }
        Some(Ok(()))
    }

    /// The namespace-wide keys of [`Fib::set_conf`]: the multipath hash and the ICMP limits.
    fn set_global(&mut self, target: ConfTarget, key: ConfKey, value: i64) -> Result<(), RtError> {
        let inval = || RtError::new(Errno::EINVAL);
        if target != ConfTarget::All {
            return Err(inval());
        }
        let policy = || {
            u8::try_from(value)
                .ok()
                .filter(|&p| p <= crate::mphash::MAX_POLICY)
                .ok_or_else(inval)
        };
        let fields = || {
            u32::try_from(value)
                .ok()
                .filter(|&f| (1..=crate::mphash::fields::ALL_MASK).contains(&f))
                .ok_or_else(inval)
        };
        let mut s = self.settings().clone();
        // The ICMP limits are C ints the kernel keeps at 0 or above (proc_dointvec_minmax).
        let limit = || {
            u32::try_from(value)
                .ok()
                .filter(|&v| v <= i32::MAX as u32)
                .ok_or_else(inval)
        };
        let icmp = &mut s.icmp;
        match key {
            ConfKey::IcmpRatelimit4 => icmp.ratelimit_ms = limit()?,
            ConfKey::IcmpRatemask => icmp.ratemask = limit()?,
            ConfKey::IcmpMsgsPerSec => icmp.msgs_per_sec = limit()?,
            ConfKey::IcmpMsgsBurst => icmp.msgs_burst = limit()?,
            ConfKey::IcmpRatelimit6 => icmp.ratelimit6_ms = limit()?,
            ConfKey::Seg6Flowlabel => {
                s.seg6_flowlabel = i32::try_from(value).map_err(|_| inval())?;
                self.set_settings(s);
                return Ok(());
            }
            ConfKey::Ioam6NodeId | ConfKey::Ioam6NodeIdWide => {
                let max = match key {
                    ConfKey::Ioam6NodeId => u64::from(IOAM6_NODE_ID_MAX),
                    _ => IOAM6_NODE_ID_WIDE_MAX,
                };
                let v = u64::try_from(value)
                    .ok()
                    .filter(|v| *v <= max)
                    .ok_or_else(inval)?;
                match key {
                    ConfKey::Ioam6NodeId => s.ioam6_id = v as u32,
                    _ => s.ioam6_id_wide = v,
                }
                self.set_settings(s);
                return Ok(());
            }
            _ => {}
        }
        let m = &mut s.multipath;
        match key {
            ConfKey::IcmpRatelimit4
            | ConfKey::IcmpRatemask
            | ConfKey::IcmpMsgsPerSec
            | ConfKey::IcmpMsgsBurst
            | ConfKey::IcmpRatelimit6 => {}
            ConfKey::MultipathHashPolicy4 => m.policy4 = policy()?,
            ConfKey::MultipathHashPolicy6 => m.policy6 = policy()?,
            ConfKey::MultipathHashFields4 => m.fields4 = fields()?,
            ConfKey::MultipathHashFields6 => m.fields6 = fields()?,
            _ => m.seed = u32::try_from(value).map_err(|_| inval())?,
        }
        self.set_settings(s);
        Ok(())
    }

    /// Reads a setting (`sysctl net.ipv{4,6}.conf.TARGET.KEY`, `sysctl net.ipv{4,6}.KEY`).
    pub fn conf(&self, target: ConfTarget, key: ConfKey) -> Result<i64, RtError> {
        let s = self.settings();
        let m = &s.multipath;
        let c = match target {
            ConfTarget::All => {
                return Ok(match key {
                    ConfKey::Forwarding4 => s.ipv4_forwarding as i64,
                    ConfKey::Forwarding6 => s.ipv6_forwarding as i64,
                    ConfKey::RpFilter => s.rp_filter as i64,
                    ConfKey::IgnoreLinkdown4 => s.ignore_routes_with_linkdown4 as i64,
                    ConfKey::IgnoreLinkdown6 => s.ignore_routes_with_linkdown6 as i64,
                    ConfKey::MultipathHashPolicy4 => m.policy4 as i64,
                    ConfKey::MultipathHashPolicy6 => m.policy6 as i64,
                    ConfKey::MultipathHashFields4 => m.fields4 as i64,
                    ConfKey::MultipathHashFields6 => m.fields6 as i64,
                    ConfKey::MultipathHashSeed => m.seed as i64,
                    ConfKey::IcmpRatelimit4 => s.icmp.ratelimit_ms as i64,
                    ConfKey::IcmpRatemask => s.icmp.ratemask as i64,
                    ConfKey::IcmpMsgsPerSec => s.icmp.msgs_per_sec as i64,
                    ConfKey::IcmpMsgsBurst => s.icmp.msgs_burst as i64,
                    ConfKey::IcmpRatelimit6 => s.icmp.ratelimit6_ms as i64,
                    ConfKey::Seg6Flowlabel => s.seg6_flowlabel as i64,
                    ConfKey::Seg6Enabled => s.seg6_enabled as i64,
                    ConfKey::Ioam6NodeId => i64::from(s.ioam6_id),
                    ConfKey::Ioam6NodeIdWide => s.ioam6_id_wide as i64,
                    ConfKey::Ioam6Enabled => i64::from(self.confs.all6.ioam6.enabled),
                    ConfKey::Ioam6IfId => i64::from(self.confs.all6.ioam6.id),
                    ConfKey::Ioam6IfIdWide => i64::from(self.confs.all6.ioam6.id_wide),
                    ConfKey::Seg6RequireHmac => i64::from(self.confs.all6.seg6_require_hmac),
                })
            }
            _ if key.is_global() => return Err(RtError::new(Errno::EINVAL)),
            ConfTarget::Default => &self.confs.default,
            ConfTarget::Dev(i) => self
                .confs
                .dev
                .get(&IfIndex(i))
                .ok_or(RtError::new(Errno::ENODEV))?,
        };
        Ok(match key {
            ConfKey::Forwarding4 => s.ipv4_forwarding as i64,
            ConfKey::Forwarding6 => s.ipv6_forwarding as i64,
            ConfKey::RpFilter => c.rp_filter as i64,
            ConfKey::IgnoreLinkdown4 => c.ignore_linkdown4 as i64,
            ConfKey::IgnoreLinkdown6 => c.ignore_linkdown6 as i64,
            ConfKey::Seg6Enabled => c.seg6_enabled as i64,
            ConfKey::Ioam6Enabled => i64::from(c.ioam6.enabled),
            ConfKey::Ioam6IfId => i64::from(c.ioam6.id),
            ConfKey::Ioam6IfIdWide => i64::from(c.ioam6.id_wide),
            ConfKey::Seg6RequireHmac => i64::from(c.seg6_require_hmac),
            _ => return Err(RtError::new(Errno::EINVAL)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_numbered_by_its_place() {
        for (i, k) in ConfKey::ALL.iter().enumerate() {
            assert_eq!(k.number() as usize, i, "{k:?}");
            assert_eq!(ConfKey::from_number(i as u32), Some(*k));
        }
        assert_eq!(ConfKey::from_number(ConfKey::ALL.len() as u32), None);
        assert_eq!(ConfKey::from_number(u32::MAX), None);
    }
}
