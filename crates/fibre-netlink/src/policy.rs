//! Attribute policies: the length (and for integers the range) each attribute of a request
//! must have, checked on the request's bytes before anything reads their values (fibre-proto's
//! conversion to the FIB's types), as the kernel validates every attribute against its
//! family's `nla_policy` table (`validate_nla` in lib/nlattr.c) before a handler sees the
//! message.
//!
//! The codec itself never refuses a value of the wrong form: it keeps such an attribute raw
//! (see [`crate::nla`]), and conversion, which reads typed attributes only, would then act as
//! if the attribute were absent -- a delete aimed at table 100 with a 2-byte RTA_TABLE would
//! delete from the main table. [`check`] closes that gap; the conversion calls it first
//! (`fibre_proto::convert::request_bytes` and `route_request`).
//!
//! A refusal is the codec's own ([`Violation`]: errno, text, offset, rule): what the FIB's
//! error type makes of it is the conversion's business, so the codec knows nothing of the FIB.
//!
//! One table per object and operation, each named after the kernel table it mirrors. The
//! facts (type, length, range, which attributes are validated strictly, the errno and text of
//! each failure) were read from Linux 6.18's answers to requests carrying each attribute type
//! at each length from 0 to 40, 64 and 200; `tests/reliability/test_protocol.py` sends the
//! same requests to the kernel and to fibred and compares the answers.
//!
//! What a failure answers, as the kernel does (errno, extended-ACK text, NLMSGERR_ATTR_OFFS at
//! the attribute's header, and for the typed rules an NLMSGERR_ATTR_POLICY nest describing the
//! rule):
//! - a value shorter than its type, a string, binary or nest of the wrong size, a flag with
//!   a value: ERANGE "Attribute failed policy validation";
//! - an integer outside its range: ERANGE "integer out of range";
//! - in strict validation (next-hop tables; route attributes from RTA_NH_ID on; neighbour
//!   attributes from NDA_NH_ID on; FRA_DSCP on) an integer of any other length than its own:
//!   EINVAL "invalid attribute length"; a nest without NLA_F_NESTED: EINVAL "NLA_F_NESTED is
//!   missing"; an attribute type the table does not know: EINVAL "Unknown attribute type";
//! - an attribute the table refuses outright: EINVAL with the table's text.
//!
//! Attributes a table does not name pass (the codec keeps them, conversion ignores them),
//! except in the next-hop tables, which know every type up to their maximum. The kernel's
//! route handlers check the framing of RTA_MULTIPATH and each RTA_METRICS entry before
//! reading them; the route tables' [`Policy::nested`] step does the same here, after every
//! attribute has passed its rule. The attributes inside each next hop and NHA_GROUP's entries
//! are checked by conversion, as the handlers check them while reading.
//!
//! Each table lists its rules sorted by attribute type (a test checks it), and [`Policy::new`]
//! indexes them by type when the crate is built, so a rule is found in one step: table loads
//! check every attribute of every route.

use crate::nla::{NlaIter, NLA_F_NESTED, NLA_TYPE_MASK};
use crate::DecodeError;

/// The errnos a failed check answers (Linux's numbers, positive as `errno` holds them).
const EINVAL: i32 = 22;
const ERANGE: i32 = 34;

/// What one attribute's value must be (a kernel `nla_policy` entry, as far as it constrains
/// requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// NLA_U8 .. NLA_U64: at least `width` bytes (exactly `width` when `exact`), the value
    /// (the first `width` bytes) in `min..=max`.
    Uint {
        width: u8,
        exact: bool,
        min: u64,
        max: u64,
    },
    /// NLA_S32: as [`Rule::Uint`], signed.
    Sint {
        width: u8,
        exact: bool,
        min: i64,
        max: i64,
    },
    /// An unsigned integer with a mask of valid bits: exactly `width` bytes (the bits are the
    /// consumer's to check).
    Mask { width: u8, mask: u64 },
    /// NLA_BE32 validated strictly: exactly 4 bytes; the kernel describes no policy for it.
    Be32,
    /// NLA_FLAG: no value.
    Flag,
    /// A structure: at least this many bytes; the kernel describes no policy for it.
    Min(u16),
    /// NLA_BINARY: at most this many bytes.
    Binary(u16),
    /// NLA_STRING: at least one byte, at most this many before an optional final NUL.
    Str(u16),
    /// NLA_NUL_STRING: a NUL somewhere in the value.
    NulStr,
    /// NLA_NESTED: empty, or at least an attribute header.
    Nested,
    /// NLA_NESTED in strict validation: NLA_F_NESTED set.
    NestedFlagged,
    /// NLA_REJECT: never accepted; the text answered.
    Reject(&'static str),
}

/// A table: the rules by attribute type, and whether types it does not know are refused.
#[derive(Debug)]
pub struct Table {
    /// The kernel table this one mirrors.
    pub name: &'static str,
    /// Highest type a strict table knows; `None` for tables that ignore unknown types.
    pub strict_max: Option<u16>,
    /// The text the handler answers instead of the validator's (fib rules say "Error parsing
    /// msg" whatever failed; errno, offset and policy stay the validator's).
    pub text: Option<&'static str>,
    /// One rule per type, each below [`INDEXED`].
    pub rules: &'static [(u16, Rule)],
    /// The checks the kernel's handler makes on the bytes of nested attributes before reading
    /// them, run once every attribute has passed its rule (`attrs` at `base`).
    pub nested: Option<Nested>,
}

/// Attribute types a [`Policy`] indexes: every rule's type is below it (the highest, in the
/// link table, is 69), so a rule is found in one step.
const INDEXED: usize = 128;

/// A [`Table`] with its rules indexed by attribute type, built at compile time.
#[derive(Debug)]
pub struct Policy {
    pub table: Table,
    /// `index[n]`: 1 + the position in `rules` of type `n`'s rule; 0 when it has none.
    index: [u8; INDEXED],
}

/// A check of nested attributes on a message's attribute region (`attrs`, at `base`).
pub type NestedCheck = fn(attrs: &[u8], base: usize) -> Result<(), Violation>;

/// A table's [`NestedCheck`] and the attribute types it reads.
#[derive(Debug, Clone, Copy)]
pub struct Nested {
    pub check: NestedCheck,
    /// Bit `n` for each type `n` (below 64) the check reads: a region with none of them
    /// passes without the check's walk (a table load's routes carry no nest).
    pub types: u64,
}

impl Policy {
    /// Indexes `table`; a rule of a type from [`INDEXED`] on, or two rules of one type, fail
    /// the build.
    pub const fn new(table: Table) -> Policy {
        let mut index = [0u8; INDEXED];
        assert!(
            table.rules.len() < u8::MAX as usize,
            "positions fit the index"
        );
        let mut i = 0;
        while i < table.rules.len() {
            let t = table.rules[i].0 as usize;
            assert!(
                t < INDEXED && index[t] == 0,
                "one rule per type, below INDEXED"
            );
            index[t] = i as u8 + 1;
            i += 1;
        }
        Policy { table, index }
    }

    pub fn rule(&self, number: u16) -> Option<Rule> {
        let at = self.index.get(usize::from(number))?.checked_sub(1)?;
        self.table.rules.get(usize::from(at)).map(|(_, r)| *r)
    }
}

/// An attribute that breaks its table's rule: the kernel's errno (positive) and extended-ACK
/// text, the offset of the attribute's header in the message, and the rule when the kernel
/// describes it in NLMSGERR_ATTR_POLICY ([`describe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Violation {
    pub errno: i32,
    pub text: &'static str,
    pub offset: Option<usize>,
    pub rule: Option<Rule>,
}

/// Why [`check`] refused a region: its framing, or a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Framing(DecodeError),
    Policy(Violation),
}

const FAILED: &str = "Attribute failed policy validation";
const OUT_OF_RANGE: &str = "integer out of range";
const BAD_LENGTH: &str = "invalid attribute length";
const UNSUPPORTED: &str = "Unsupported attribute";

/// Checks one attribute (`kind` with its flags, `value`, its header at `offset`) against
/// `policy`.
pub fn check_one(policy: &Policy, kind: u16, value: &[u8], offset: usize) -> Result<(), Violation> {
    let number = kind & NLA_TYPE_MASK;
    let fail = |errno, text, rule| {
        Err(Violation {
            errno,
            text: policy.table.text.unwrap_or(text),
            offset: Some(offset),
            rule,
        })
    };
    let Some(rule) = policy.rule(number) else {
        return match policy.table.strict_max {
            Some(max) if number == 0 || number > max => {
                fail(EINVAL, "Unknown attribute type", None)
            }
            _ => Ok(()),
        };
    };
    let len = value.len();
    let width = |w: u8, exact: bool| -> Option<(i32, &'static str)> {
        let w = w as usize;
        if exact && len != w {
            Some((EINVAL, BAD_LENGTH))
        } else if len < w {
            Some((ERANGE, FAILED))
        } else {
            None
        }
    };
    let described = Some(rule);
    match rule {
        Rule::Uint {
            width: w,
            exact,
            min,
            max,
        } => {
            if let Some((e, t)) = width(w, exact) {
                return fail(e, t, described);
            }
            // Most rules take every value of their width: no value to read.
            let full = u64::MAX >> (64 - 8 * u32::from(w));
            if min > 0 || max < full {
                let v = unsigned(value, w);
                if v < min || v > max {
                    return fail(ERANGE, OUT_OF_RANGE, described);
                }
            }
        }
        Rule::Sint {
            width: w,
            exact,
            min,
            max,
        } => {
            if let Some((e, t)) = width(w, exact) {
                return fail(e, t, described);
            }
            // Sign-extended from its width.
            let shift = 64 - 8 * w as u32;
            let v = ((unsigned(value, w) << shift) as i64) >> shift;
            if v < min || v > max {
                return fail(ERANGE, OUT_OF_RANGE, described);
            }
        }
        Rule::Mask { width: w, .. } => {
            if let Some((e, t)) = width(w, true) {
                return fail(e, t, described);
            }
        }
        Rule::Be32 => {
            if len != 4 {
                return fail(EINVAL, BAD_LENGTH, None);
            }
        }
        Rule::Flag => {
            if len != 0 {
                return fail(ERANGE, FAILED, described);
            }
        }
        Rule::Min(n) => {
            if len < n as usize {
                return fail(ERANGE, FAILED, None);
            }
        }
        Rule::Binary(n) => {
            if len > n as usize {
                return fail(ERANGE, FAILED, described);
            }
        }
        Rule::Str(n) => {
            let text = match value.split_last() {
                Some((0, rest)) => rest,
                _ => value,
            };
            if len == 0 || text.len() > n as usize {
                return fail(ERANGE, FAILED, described);
            }
        }
        Rule::NulStr => {
            if !value.contains(&0) {
                return fail(EINVAL, FAILED, described);
            }
        }
        Rule::Nested => {
            if (1..4).contains(&len) {
                return fail(ERANGE, FAILED, described);
            }
        }
        Rule::NestedFlagged => {
            if kind & NLA_F_NESTED == 0 {
                return fail(EINVAL, "NLA_F_NESTED is missing", described);
            }
        }
        Rule::Reject(text) => return fail(EINVAL, text, None),
    }
    Ok(())
}

/// The native-endian unsigned integer in the first `width` (1, 2, 4 or 8) bytes of `value`,
/// which holds at least that many.
fn unsigned(value: &[u8], width: u8) -> u64 {
    let mut b = [0u8; 8];
    let w = width as usize;
    if cfg!(target_endian = "little") {
        b[..w].copy_from_slice(&value[..w]);
    } else {
        b[8 - w..].copy_from_slice(&value[..w]);
    }
    u64::from_ne_bytes(b)
}

/// Checks every attribute of `attrs` (a message's attribute region, at `base` in the
/// message) in order: the first framing error or broken rule, whichever comes first.
pub fn check(policy: &Policy, attrs: &[u8], base: usize) -> Result<(), Refusal> {
    let mut checker = Checker::new(policy);
    for item in NlaIter::new(attrs, base) {
        let (offset, nla) = item.map_err(Refusal::Framing)?;
        checker
            .attr(nla.kind, nla.value, offset)
            .map_err(Refusal::Policy)?;
    }
    checker.finish(attrs, base).map_err(Refusal::Policy)
}

/// [`check`] in steps, for a reader that converts each attribute in the walk that checks it:
/// [`Checker::attr`] on every attribute of the region in order (the caller walks it with
/// [`NlaIter`] and stops at its first framing error, as [`check`] does), then
/// [`Checker::finish`] on the whole region, which must have framed. A refusal from either
/// is [`check`]'s; what the reader made of the attributes is worth nothing then.
pub struct Checker<'p> {
    policy: &'p Policy,
    /// The types seen that the table's [`Nested`] check reads.
    seen: u64,
}

impl<'p> Checker<'p> {
    pub fn new(policy: &'p Policy) -> Checker<'p> {
        Checker { policy, seen: 0 }
    }

    /// Checks the next attribute (`kind` with its flags, `value`, its header at `offset`).
    pub fn attr(&mut self, kind: u16, value: &[u8], offset: usize) -> Result<(), Violation> {
        self.seen |= 1u64
            .checked_shl(u32::from(kind & NLA_TYPE_MASK))
            .unwrap_or(0);
        check_one(self.policy, kind, value, offset)
    }

    /// The table's checks of nested attributes, on the region (`attrs` at `base`) whose
    /// every attribute passed [`Checker::attr`].
    pub fn finish(self, attrs: &[u8], base: usize) -> Result<(), Violation> {
        match self.policy.table.nested {
            Some(n) if n.types & self.seen != 0 => (n.check)(attrs, base),
            _ => Ok(()),
        }
    }
}

const RTA_METRICS: u16 = 8;
const RTA_MULTIPATH: u16 = 9;
/// Highest RTAX_* metric type, and RTAX_CC_ALGO, the one metric that is not a u32.
const RTAX_MAX: u16 = 17;
const RTAX_CC_ALGO: u16 = 16;
/// `sizeof(struct rtnexthop)`.
const RTNH_LEN: usize = 8;

/// The route tables' [`Nested`] step: [`route_nests`].
const ROUTE_NESTS: Nested = Nested {
    check: route_nests,
    types: 1 << RTA_METRICS | 1 << RTA_MULTIPATH,
};

/// What the route handlers check of RTA_MULTIPATH and RTA_METRICS before reading them
/// (`fib_count_nexthops`/`rtm_to_fib6_config` and `ip_metrics_convert`): the next hops fill
/// the attribute exactly, each metric is a known type of 4 bytes (type 0 is skipped; the
/// congestion-control name is the FIB's to check). Regions that do not frame are left to
/// the codec, which keeps them raw.
fn route_nests(attrs: &[u8], base: usize) -> Result<(), Violation> {
    let invalid = |text, offset| Violation {
        errno: EINVAL,
        text,
        offset,
        rule: None,
    };
    for (offset, nla) in NlaIter::new(attrs, base).flatten() {
        match nla.number() {
            RTA_MULTIPATH => {
                let mut rest = nla.value;
                while rest.len() >= RTNH_LEN {
                    let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
                    if len < RTNH_LEN || len > rest.len() {
                        break;
                    }
                    rest = rest.get(crate::nla::align(len)..).unwrap_or_default();
                }
                if !rest.is_empty() {
                    return Err(invalid(
                        "Invalid nexthop configuration - extra data after nexthops",
                        None,
                    ));
                }
            }
            RTA_METRICS => {
                for (at, m) in NlaIter::new(nla.value, offset + crate::nla::NLA_HDRLEN).flatten() {
                    match m.number() {
                        0 | RTAX_CC_ALGO => {}
                        t if t > RTAX_MAX => return Err(invalid("Invalid metric type", None)),
                        _ if m.value.len() != 4 => {
                            return Err(invalid("Invalid attribute in metrics", Some(at)))
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

// NL_POLICY_TYPE_ATTR_* and NL_ATTR_TYPE_* (include/uapi/linux/netlink.h): the policy
// description the kernel puts in NLMSGERR_ATTR_POLICY.
const NL_POLICY_TYPE_ATTR_TYPE: u16 = 1;
const NL_POLICY_TYPE_ATTR_MIN_VALUE_S: u16 = 2;
const NL_POLICY_TYPE_ATTR_MAX_VALUE_S: u16 = 3;
const NL_POLICY_TYPE_ATTR_MIN_VALUE_U: u16 = 4;
const NL_POLICY_TYPE_ATTR_MAX_VALUE_U: u16 = 5;
const NL_POLICY_TYPE_ATTR_MAX_LENGTH: u16 = 7;
const NL_POLICY_TYPE_ATTR_MASK: u16 = 12;
const NL_ATTR_TYPE_FLAG: u32 = 1;
const NL_ATTR_TYPE_U8: u32 = 2;
const NL_ATTR_TYPE_S8: u32 = 6;
const NL_ATTR_TYPE_BINARY: u32 = 10;
const NL_ATTR_TYPE_STRING: u32 = 11;
const NL_ATTR_TYPE_NUL_STRING: u32 = 12;
const NL_ATTR_TYPE_NESTED: u32 = 13;

/// The NL_ATTR_TYPE_* of an integer `width` bytes wide: U8, U16, U32, U64 are 2..=5 and
/// S8..S64 6..=9.
fn int_type(width: u8, signed: bool) -> u32 {
    let base = if signed {
        NL_ATTR_TYPE_S8
    } else {
        NL_ATTR_TYPE_U8
    };
    base + width.max(1).ilog2()
}

/// The attributes of the NLMSGERR_ATTR_POLICY nest describing `rule`, in the kernel's order.
pub fn describe(rule: &Rule, out: &mut Vec<u8>) {
    use crate::nla::put;
    let u64_attr = |out: &mut Vec<u8>, t, v: u64| put(out, t, &v.to_ne_bytes());
    let ty = |out: &mut Vec<u8>, v: u32| put(out, NL_POLICY_TYPE_ATTR_TYPE, &v.to_ne_bytes());
    match *rule {
        Rule::Uint {
            width, min, max, ..
        } => {
            u64_attr(out, NL_POLICY_TYPE_ATTR_MIN_VALUE_U, min);
            u64_attr(out, NL_POLICY_TYPE_ATTR_MAX_VALUE_U, max);
            ty(out, int_type(width, false));
        }
        Rule::Sint {
            width, min, max, ..
        } => {
            u64_attr(out, NL_POLICY_TYPE_ATTR_MIN_VALUE_S, min as u64);
            u64_attr(out, NL_POLICY_TYPE_ATTR_MAX_VALUE_S, max as u64);
            ty(out, int_type(width, true));
        }
        Rule::Mask { width, mask } => {
            u64_attr(out, NL_POLICY_TYPE_ATTR_MASK, mask);
            ty(out, int_type(width, false));
        }
        Rule::Flag => ty(out, NL_ATTR_TYPE_FLAG),
        Rule::Binary(n) | Rule::Str(n) => {
            put(
                out,
                NL_POLICY_TYPE_ATTR_MAX_LENGTH,
                &(n as u32).to_ne_bytes(),
            );
            let t = if matches!(rule, Rule::Str(_)) {
                NL_ATTR_TYPE_STRING
            } else {
                NL_ATTR_TYPE_BINARY
            };
            ty(out, t);
        }
        Rule::NulStr => ty(out, NL_ATTR_TYPE_NUL_STRING),
        Rule::Nested | Rule::NestedFlagged => ty(out, NL_ATTR_TYPE_NESTED),
        Rule::Be32 | Rule::Min(_) | Rule::Reject(_) => {}
    }
}

const fn u(width: u8) -> Rule {
    Rule::Uint {
        width,
        exact: false,
        min: 0,
        max: if width == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * width as u32)) - 1
        },
    }
}

const fn exact(width: u8) -> Rule {
    match u(width) {
        Rule::Uint {
            width, min, max, ..
        } => Rule::Uint {
            width,
            exact: true,
            min,
            max,
        },
        r => r,
    }
}

const U8: Rule = u(1);
const U16: Rule = u(2);
const U32: Rule = u(4);
const U64: Rule = u(8);
const S32: Rule = Rule::Sint {
    width: 4,
    exact: false,
    min: i32::MIN as i64,
    max: i32::MAX as i64,
};
/// `sizeof(struct in6_addr)`.
const IN6: Rule = Rule::Min(16);
/// MAX_ADDR_LEN, the longest link-layer address.
const LLADDR: Rule = Rule::Binary(32);
/// IFNAMSIZ - 1.
const IFNAME: Rule = Rule::Str(15);
/// `sizeof(struct rtnexthop)`.
const RTNH: Rule = Rule::Min(8);
/// The smallest GSO size a link accepts (the kernel's MAX_TCP_HEADER + 1 on x86-64).
const GSO_SIZE: Rule = Rule::Uint {
    width: 4,
    exact: false,
    min: 193,
    max: u32::MAX as u64,
};

/// `rtm_ipv4_policy` (RTM_NEWROUTE, RTM_DELROUTE, RTM_GETROUTE of AF_INET); strict from
/// RTA_NH_ID.
pub static ROUTE4: Policy = Policy::new(Table {
    name: "rtm_ipv4_policy",
    strict_max: None,
    text: None,
    nested: Some(ROUTE_NESTS),
    rules: &[
        (1, U32),                        // RTA_DST
        (2, U32),                        // RTA_SRC
        (3, U32),                        // RTA_IIF
        (4, U32),                        // RTA_OIF
        (5, U32),                        // RTA_GATEWAY
        (6, U32),                        // RTA_PRIORITY
        (7, U32),                        // RTA_PREFSRC
        (8, Rule::Nested),               // RTA_METRICS
        (9, RTNH),                       // RTA_MULTIPATH
        (11, U32),                       // RTA_FLOW
        (15, U32),                       // RTA_TABLE
        (16, U32),                       // RTA_MARK
        (21, U16),                       // RTA_ENCAP_TYPE
        (22, Rule::Nested),              // RTA_ENCAP
        (25, U32),                       // RTA_UID
        (27, U8),                        // RTA_IP_PROTO
        (28, U16),                       // RTA_SPORT
        (29, U16),                       // RTA_DPORT
        (30, exact(4)),                  // RTA_NH_ID
        (31, Rule::Reject(UNSUPPORTED)), // RTA_FLOWLABEL
    ],
});

/// `rtm_ipv6_policy` (routes of AF_INET6); RTA_DST and RTA_SRC are checked against the
/// prefix length by conversion, as by the kernel's handler.
pub static ROUTE6: Policy = Policy::new(Table {
    name: "rtm_ipv6_policy",
    strict_max: None,
    text: None,
    nested: Some(ROUTE_NESTS),
    rules: &[
        (3, U32),           // RTA_IIF
        (4, U32),           // RTA_OIF
        (5, IN6),           // RTA_GATEWAY
        (6, U32),           // RTA_PRIORITY
        (7, IN6),           // RTA_PREFSRC
        (8, Rule::Nested),  // RTA_METRICS
        (9, RTNH),          // RTA_MULTIPATH
        (15, U32),          // RTA_TABLE
        (16, U32),          // RTA_MARK
        (20, U8),           // RTA_PREF
        (21, U16),          // RTA_ENCAP_TYPE
        (22, Rule::Nested), // RTA_ENCAP
        (23, U32),          // RTA_EXPIRES
        (25, U32),          // RTA_UID
        (27, U8),           // RTA_IP_PROTO
        (28, U16),          // RTA_SPORT
        (29, U16),          // RTA_DPORT
        (30, exact(4)),     // RTA_NH_ID
        (31, Rule::Be32),   // RTA_FLOWLABEL
    ],
});

/// `ifa_ipv4_policy` (RTM_NEWADDR, RTM_DELADDR of AF_INET).
pub static ADDR4: Policy = Policy::new(Table {
    name: "ifa_ipv4_policy",
    strict_max: None,
    text: None,
    nested: None,
    rules: &[
        (1, U32),           // IFA_ADDRESS
        (2, U32),           // IFA_LOCAL
        (3, IFNAME),        // IFA_LABEL
        (4, U32),           // IFA_BROADCAST
        (6, Rule::Min(16)), // IFA_CACHEINFO
        (8, U32),           // IFA_FLAGS
        (9, U32),           // IFA_RT_PRIORITY
        (10, S32),          // IFA_TARGET_NETNSID
        (11, U8),           // IFA_PROTO
    ],
});

/// `ifa_ipv6_policy` (addresses of AF_INET6).
pub static ADDR6: Policy = Policy::new(Table {
    name: "ifa_ipv6_policy",
    strict_max: None,
    text: None,
    nested: None,
    rules: &[
        (1, IN6),           // IFA_ADDRESS
        (2, IN6),           // IFA_LOCAL
        (6, Rule::Min(16)), // IFA_CACHEINFO
        (8, Rule::Min(4)),  // IFA_FLAGS
        (9, Rule::Min(4)),  // IFA_RT_PRIORITY
        (10, S32),          // IFA_TARGET_NETNSID
        (11, U8),           // IFA_PROTO
    ],
});

/// `ifla_policy` (RTM_NEWLINK, RTM_SETLINK, RTM_DELLINK, RTM_GETLINK).
pub static LINK: Policy = Policy::new(Table {
    name: "ifla_policy",
    strict_max: None,
    text: None,
    nested: None,
    rules: &[
        (1, LLADDR),         // IFLA_ADDRESS
        (2, LLADDR),         // IFLA_BROADCAST
        (3, IFNAME),         // IFLA_IFNAME
        (4, U32),            // IFLA_MTU
        (5, U32),            // IFLA_LINK
        (10, U32),           // IFLA_MASTER
        (13, U32),           // IFLA_TXQLEN
        (14, Rule::Min(32)), // IFLA_MAP
        (15, U32),           // IFLA_WEIGHT
        (16, U8),            // IFLA_OPERSTATE
        (17, U8),            // IFLA_LINKMODE
        (18, Rule::Nested),  // IFLA_LINKINFO
        (19, U32),           // IFLA_NET_NS_PID
        (22, Rule::Nested),  // IFLA_VFINFO_LIST
        (24, Rule::Nested),  // IFLA_VF_PORTS
        (25, Rule::Nested),  // IFLA_PORT_SELF
        (26, Rule::Nested),  // IFLA_AF_SPEC
        (27, U32),           // IFLA_GROUP
        (28, U32),           // IFLA_NET_NS_FD
        (29, U32),           // IFLA_EXT_MASK
        (30, U32),           // IFLA_PROMISCUITY
        (31, U32),           // IFLA_NUM_TX_QUEUES
        (32, U32),           // IFLA_NUM_RX_QUEUES
        (33, U8),            // IFLA_CARRIER
        (34, LLADDR),        // IFLA_PHYS_PORT_ID
        (35, U32),           // IFLA_CARRIER_CHANGES
        (36, LLADDR),        // IFLA_PHYS_SWITCH_ID
        (37, S32),           // IFLA_LINK_NETNSID
        (39, U8),            // IFLA_PROTO_DOWN
        (40, U32),           // IFLA_GSO_MAX_SEGS
        (41, GSO_SIZE),      // IFLA_GSO_MAX_SIZE
        (43, Rule::Nested),  // IFLA_XDP
        (44, U32),           // IFLA_EVENT
        (46, S32),           // IFLA_TARGET_NETNSID
        (47, U32),           // IFLA_CARRIER_UP_COUNT
        (48, U32),           // IFLA_CARRIER_DOWN_COUNT
        (
            49,
            Rule::Sint {
                width: 4,
                exact: false,
                min: 1,
                max: i32::MAX as i64,
            },
        ), // IFLA_NEW_IFINDEX
        (50, U32),           // IFLA_MIN_MTU
        (51, U32),           // IFLA_MAX_MTU
        (52, Rule::Nested),  // IFLA_PROP_LIST
        (53, Rule::Str(127)), // IFLA_ALT_IFNAME
        (54, Rule::Reject(FAILED)), // IFLA_PERM_ADDRESS
        (55, Rule::Nested),  // IFLA_PROTO_DOWN_REASON
        (56, Rule::NulStr),  // IFLA_PARENT_DEV_NAME
        (58, U32),           // IFLA_GRO_MAX_SIZE
        (59, Rule::Reject(FAILED)), // IFLA_TSO_MAX_SIZE
        (60, Rule::Reject(FAILED)), // IFLA_TSO_MAX_SEGS
        (61, Rule::Reject(FAILED)), // IFLA_ALLMULTI
        (63, GSO_SIZE),      // IFLA_GSO_IPV4_MAX_SIZE
        (64, U32),           // IFLA_GRO_IPV4_MAX_SIZE
        (65, Rule::Reject(UNSUPPORTED)), // IFLA_DPLL_PIN
        (66, Rule::Reject(UNSUPPORTED)), // IFLA_MAX_PACING_OFFLOAD_HORIZON
        (67, Rule::Reject(FAILED)), // IFLA_NETNS_IMMUTABLE
        (68, Rule::Reject(FAILED)), // IFLA_HEADROOM
        (69, Rule::Reject(FAILED)), // IFLA_TAILROOM
    ],
});

/// `fib_rule_policy` (RTM_NEWRULE, RTM_DELRULE); FRA_DST and FRA_SRC are checked against the
/// family by conversion. The handler answers "Error parsing msg" for every failure.
pub static RULE: Policy = Policy::new(Table {
    name: "fib_rule_policy",
    strict_max: None,
    text: Some("Error parsing msg"),
    nested: None,
    rules: &[
        (3, IFNAME),        // FRA_IIFNAME
        (4, U32),           // FRA_GOTO
        (6, U32),           // FRA_PRIORITY
        (10, U32),          // FRA_FWMARK
        (11, U32),          // FRA_FLOW
        (12, U64),          // FRA_TUN_ID
        (13, U32),          // FRA_SUPPRESS_IFGROUP
        (14, U32),          // FRA_SUPPRESS_PREFIXLEN
        (15, U32),          // FRA_TABLE
        (16, U32),          // FRA_FWMASK
        (17, IFNAME),       // FRA_OIFNAME
        (19, U8),           // FRA_L3MDEV
        (20, Rule::Min(8)), // FRA_UID_RANGE
        (21, U8),           // FRA_PROTOCOL
        (22, U8),           // FRA_IP_PROTO
        (23, Rule::Min(4)), // FRA_SPORT_RANGE
        (24, Rule::Min(4)), // FRA_DPORT_RANGE
        (
            25,
            Rule::Uint {
                width: 1,
                exact: true,
                min: 0,
                max: 63,
            },
        ), // FRA_DSCP
        (26, Rule::Be32),   // FRA_FLOWLABEL
        (27, Rule::Be32),   // FRA_FLOWLABEL_MASK
    ],
});

/// `nda_policy` (RTM_NEWNEIGH, RTM_DELNEIGH); strict from NDA_NH_ID.
pub static NEIGH: Policy = Policy::new(Table {
    name: "nda_policy",
    strict_max: None,
    text: None,
    nested: None,
    rules: &[
        (1, LLADDR),                            // NDA_DST
        (2, LLADDR),                            // NDA_LLADDR
        (3, Rule::Min(16)),                     // NDA_CACHEINFO
        (4, U32),                               // NDA_PROBES
        (5, U16),                               // NDA_VLAN
        (6, U16),                               // NDA_PORT
        (7, U32),                               // NDA_VNI
        (8, U32),                               // NDA_IFINDEX
        (9, U32),                               // NDA_MASTER
        (12, U8),                               // NDA_PROTOCOL
        (13, exact(4)),                         // NDA_NH_ID
        (14, Rule::NestedFlagged),              // NDA_FDB_EXT_ATTRS
        (15, Rule::Mask { width: 4, mask: 5 }), // NDA_FLAGS_EXT
        (16, Rule::Reject(UNSUPPORTED)),        // NDA_NDM_STATE_MASK
    ],
});

/// `rtm_nh_policy_new` (RTM_NEWNEXTHOP), strict. NHA_GROUP and NHA_GATEWAY are binary of
/// any length here; conversion checks them.
pub static NEXTHOP_NEW: Policy = Policy::new(Table {
    name: "rtm_nh_policy_new",
    strict_max: Some(16),
    text: None,
    nested: None,
    rules: &[
        (1, exact(4)),                   // NHA_ID
        (3, exact(2)),                   // NHA_GROUP_TYPE
        (4, Rule::Flag),                 // NHA_BLACKHOLE
        (5, exact(4)),                   // NHA_OIF
        (7, exact(2)),                   // NHA_ENCAP_TYPE
        (8, Rule::NestedFlagged),        // NHA_ENCAP
        (9, Rule::Reject(UNSUPPORTED)),  // NHA_GROUPS
        (10, Rule::Reject(UNSUPPORTED)), // NHA_MASTER
        (11, Rule::Flag),                // NHA_FDB
        (12, Rule::NestedFlagged),       // NHA_RES_GROUP
        (13, Rule::Reject(UNSUPPORTED)), // NHA_RES_BUCKET
        (14, Rule::Reject(UNSUPPORTED)), // NHA_OP_FLAGS
        (15, Rule::Reject(UNSUPPORTED)), // NHA_GROUP_STATS
        (
            16,
            Rule::Uint {
                width: 4,
                exact: true,
                min: 0,
                max: 1,
            },
        ), // NHA_HW_STATS_ENABLE
    ],
});

/// `rtm_nh_policy_del` (RTM_DELNEXTHOP), strict: NHA_ID only.
pub static NEXTHOP_DEL: Policy = Policy::new(Table {
    name: "rtm_nh_policy_del",
    strict_max: Some(1),
    text: None,
    nested: None,
    rules: &[(1, exact(4))],
});

/// NHA_OP_FLAGS: the bits a get or dump may ask for (NHA_OP_FLAG_DUMP_STATS,
/// NHA_OP_FLAG_DUMP_HW_STATS).
const NH_OP_FLAGS: Rule = Rule::Mask { width: 4, mask: 3 };

/// `rtm_nh_policy_get` (RTM_GETNEXTHOP of one object), strict.
pub static NEXTHOP_GET: Policy = Policy::new(Table {
    name: "rtm_nh_policy_get",
    strict_max: Some(14),
    text: None,
    nested: None,
    rules: &[
        (1, exact(4)), // NHA_ID
        (2, Rule::Reject(UNSUPPORTED)),
        (3, Rule::Reject(UNSUPPORTED)),
        (4, Rule::Reject(UNSUPPORTED)),
        (5, Rule::Reject(UNSUPPORTED)),
        (6, Rule::Reject(UNSUPPORTED)),
        (7, Rule::Reject(UNSUPPORTED)),
        (8, Rule::Reject(UNSUPPORTED)),
        (9, Rule::Reject(UNSUPPORTED)),
        (10, Rule::Reject(UNSUPPORTED)),
        (11, Rule::Reject(UNSUPPORTED)),
        (12, Rule::Reject(UNSUPPORTED)),
        (13, Rule::Reject(UNSUPPORTED)),
        (14, NH_OP_FLAGS), // NHA_OP_FLAGS
    ],
});

/// `rtm_nh_policy_dump` (RTM_GETNEXTHOP dumps), strict: filters only.
pub static NEXTHOP_DUMP: Policy = Policy::new(Table {
    name: "rtm_nh_policy_dump",
    strict_max: Some(14),
    text: None,
    nested: None,
    rules: &[
        (1, Rule::Reject(UNSUPPORTED)), // NHA_ID
        (2, Rule::Reject(UNSUPPORTED)),
        (3, Rule::Reject(UNSUPPORTED)),
        (4, Rule::Reject(UNSUPPORTED)),
        (5, exact(4)), // NHA_OIF
        (6, Rule::Reject(UNSUPPORTED)),
        (7, Rule::Reject(UNSUPPORTED)),
        (8, Rule::Reject(UNSUPPORTED)),
        (9, Rule::Flag),  // NHA_GROUPS
        (10, exact(4)),   // NHA_MASTER
        (11, Rule::Flag), // NHA_FDB
        (12, Rule::Reject(UNSUPPORTED)),
        (13, Rule::Reject(UNSUPPORTED)),
        (14, NH_OP_FLAGS), // NHA_OP_FLAGS
    ],
});

/// The table a request message of `message_type` is checked against, from its flags and
/// the family byte of its header; `None` for messages whose attributes the kernel does not
/// validate by table (dumps other than next-hop dumps, next-hop bucket requests, which
/// conversion checks itself).
pub fn for_request(message_type: u16, flags: u16, family: u8) -> Option<&'static Policy> {
    use crate::message::{flags as nf, types as mt};
    const AF_INET: u8 = 2;
    const AF_INET6: u8 = 10;
    let dump = flags & nf::NLM_F_DUMP == nf::NLM_F_DUMP;
    match message_type {
        mt::RTM_NEWLINK | mt::RTM_SETLINK | mt::RTM_DELLINK => Some(&LINK),
        mt::RTM_GETLINK if !dump => Some(&LINK),
        mt::RTM_NEWADDR | mt::RTM_DELADDR => match family {
            AF_INET => Some(&ADDR4),
            AF_INET6 => Some(&ADDR6),
            _ => None,
        },
        mt::RTM_NEWROUTE | mt::RTM_DELROUTE => match family {
            AF_INET => Some(&ROUTE4),
            AF_INET6 => Some(&ROUTE6),
            _ => None,
        },
        mt::RTM_GETROUTE if !dump => match family {
            AF_INET => Some(&ROUTE4),
            AF_INET6 => Some(&ROUTE6),
            _ => None,
        },
        mt::RTM_NEWRULE | mt::RTM_DELRULE => Some(&RULE),
        mt::RTM_NEWNEIGH | mt::RTM_DELNEIGH => Some(&NEIGH),
        mt::RTM_NEWNEXTHOP => Some(&NEXTHOP_NEW),
        mt::RTM_DELNEXTHOP => Some(&NEXTHOP_DEL),
        mt::RTM_GETNEXTHOP if dump => Some(&NEXTHOP_DUMP),
        mt::RTM_GETNEXTHOP => Some(&NEXTHOP_GET),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(p: &Policy, kind: u16, len: usize) -> Option<(i32, &'static str, bool)> {
        check_one(p, kind, &vec![0u8; len], 28)
            .err()
            .map(|v| (v.errno, v.text, v.rule.is_some()))
    }

    /// The reproductions: a 2-byte and a 1-byte RTA_TABLE, a 3-byte RTA_DST, a
    /// 2-byte RTA_PRIORITY, a 200-byte NDA_LLADDR.
    #[test]
    fn short_and_long_values_fail_as_the_kernel_answers() {
        let failed = Some((34, FAILED, true));
        assert_eq!(answer(&ROUTE4, 15, 2), failed);
        assert_eq!(answer(&ROUTE4, 15, 1), failed);
        assert_eq!(answer(&ROUTE4, 1, 3), failed);
        assert_eq!(answer(&ROUTE4, 6, 2), failed);
        assert_eq!(answer(&NEIGH, 2, 200), failed);
        // Longer than its type, outside strict validation: the kernel reads the first bytes.
        assert_eq!(answer(&ROUTE4, 15, 5), None);
        assert_eq!(answer(&ROUTE4, 30, 5), Some((22, BAD_LENGTH, true)));
        assert_eq!(answer(&ROUTE6, 1, 3), None, "checked by conversion");
        assert_eq!(answer(&ROUTE6, 5, 4), Some((34, FAILED, false)));
        assert_eq!(answer(&RULE, 15, 2), Some((34, "Error parsing msg", true)));
        assert_eq!(
            answer(&NEXTHOP_NEW, 17, 4),
            Some((22, "Unknown attribute type", false))
        );
        assert_eq!(
            answer(&NEXTHOP_NEW, 0, 4),
            Some((22, "Unknown attribute type", false))
        );
        assert_eq!(
            answer(&NEXTHOP_NEW, 8, 4),
            Some((22, "NLA_F_NESTED is missing", true))
        );
        assert_eq!(answer(&NEXTHOP_NEW, 8 | NLA_F_NESTED, 4), None);
        assert_eq!(answer(&LINK, 41, 4), Some((34, OUT_OF_RANGE, true)));
        assert_eq!(answer(&LINK, 3, 16), None, "15 bytes and a NUL");
        assert_eq!(answer(&LINK, 3, 0), Some((34, FAILED, true)));
        assert_eq!(answer(&LINK, 200, 3), None, "unknown types are ignored");
    }

    #[test]
    fn tables_are_sorted_by_type() {
        for p in [
            &ROUTE4,
            &ROUTE6,
            &ADDR4,
            &ADDR6,
            &LINK,
            &RULE,
            &NEIGH,
            &NEXTHOP_NEW,
            &NEXTHOP_DEL,
            &NEXTHOP_GET,
            &NEXTHOP_DUMP,
        ] {
            assert!(
                p.table.rules.windows(2).all(|w| w[0].0 < w[1].0),
                "{} is sorted",
                p.table.name
            );
        }
    }

    /// The policy descriptions the kernel sent for these rules, byte for byte.
    #[test]
    fn descriptions_are_the_kernels() {
        let hex = |r: Rule| {
            let mut out = Vec::new();
            describe(&r, &mut out);
            out.iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        assert_eq!(
            hex(U32),
            "0c00040000000000000000000c000500ffffffff000000000800010004000000"
        );
        assert_eq!(
            hex(U8),
            "0c00040000000000000000000c000500ff000000000000000800010002000000"
        );
        assert_eq!(
            hex(U64),
            "0c00040000000000000000000c000500ffffffffffffffff0800010005000000"
        );
        assert_eq!(hex(Rule::Flag), "0800010001000000");
        assert_eq!(hex(LLADDR), "0800070020000000080001000a000000");
        assert_eq!(hex(IFNAME), "080007000f000000080001000b000000");
        assert_eq!(hex(Rule::Nested), "080001000d000000");
        assert_eq!(
            hex(LINK.rule(49).unwrap()),
            "0c00020001000000000000000c000300ffffff7f000000000800010008000000"
        );
        assert_eq!(
            hex(NEIGH.rule(15).unwrap()),
            "0c000c0005000000000000000800010004000000"
        );
    }
}
