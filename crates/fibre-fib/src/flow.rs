//! What a lookup asks: the flow ([`Flow`], the kernel's flowi4/flowi6 fields that matter
//! here), its modifiers ([`LookupFlags`]), the links whose LINKDOWN next hops a packet lookup
//! skips ([`LinkdownIgnored`]) and the tos match rule shared by routes and rules.
//!
//! The crate's lowest layer: this module uses nothing of the crate but `types`.

use crate::ids::IfIndex;
use crate::types::{nh_flags, scope};

/// A flow as rules and tables see it (the kernel's flowi4/flowi6 fields that matter here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub dst: u128,
    pub src: u128,
    pub iif: u32,
    pub oif: u32,
    pub tos: u8,
    pub mark: u32,
    pub uid: u32,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    /// IPv6: the flow label (flowi6_flowlabel's low 20 bits), which the multipath hash reads.
    pub flowlabel: u32,
    /// Minimum route scope accepted (flowi4_scope): universe for ordinary lookups.
    pub scope: u8,
    /// Whether the kernel would have the packet in hand for the multipath hash (forwarding,
    /// IPv4 `route get`, which builds one) rather than the flow alone (IPv6 `route get`,
    /// exception lookups): policy 3 hashes the two differently (see `mphash`).
    pub packet: bool,
}

impl Flow {
    /// A packet's flow with every selector absent.
    pub fn empty() -> Flow {
        Flow {
            dst: 0,
            src: 0,
            iif: 0,
            oif: 0,
            tos: 0,
            mark: 0,
            uid: 0,
            proto: 0,
            sport: 0,
            dport: 0,
            flowlabel: 0,
            scope: scope::UNIVERSE,
            packet: true,
        }
    }
}

/// IPTOS_RT_MASK: the bits of a packet's IPv4 tos that select routes and rules (DSCP bits
/// 2-4 of the old tos field). ECN bits and the class-selector bits are ignored, so a route
/// with `tos 0xe0` is never chosen by a lookup.
pub(crate) const IPTOS_RT_MASK: u8 = 0x1c;

/// fib_dscp_masked_match: a route or rule `tos` against a flow's.
#[inline]
pub(crate) fn tos_matches(tos: u8, flow_tos: u8) -> bool {
    tos == 0 || tos == flow_tos & IPTOS_RT_MASK
}

/// Lookup modifiers (FIB_LOOKUP_* flags).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LookupFlags {
    /// IPv6 RT6_LOOKUP_F_IFACE: next hops on another device than the flow's oif are unusable.
    pub strict_oif: bool,
    /// IPv6 input (ip6_pol_route_input): the tables are searched with the input device in
    /// the oif's place, while the rules see the flow's own oif (none).
    pub iif_as_oif: bool,
    /// A lookup for a packet (`route get`, forwarding, the first reverse-path lookup):
    /// LINKDOWN next hops on links that ignore such routes are unusable. Left out (the
    /// kernel's FIB_LOOKUP_IGNORE_LINKSTATE / RT6_LOOKUP_F_IGNORE_LINKSTATE) by gateway
    /// validation and the loose reverse-path lookup.
    pub linkdown_conf: bool,
}

impl LookupFlags {
    /// The flags of a lookup for a packet.
    pub(crate) fn packet() -> LookupFlags {
        LookupFlags {
            linkdown_conf: true,
            ..LookupFlags::default()
        }
    }
}

/// The links whose LINKDOWN next hops a packet lookup skips (ignore_routes_with_linkdown, see
/// `conf`), sorted; empty unless the setting is used anywhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LinkdownIgnored(Vec<IfIndex>);

/// The set a compiled structure is built with: compiled answers are used only while a
/// family's set is empty (see `Fib::fast_applies`).
pub(crate) static NONE_IGNORED: LinkdownIgnored = LinkdownIgnored(Vec::new());

impl LinkdownIgnored {
    pub fn new(sorted: Vec<IfIndex>) -> LinkdownIgnored {
        LinkdownIgnored(sorted)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the next hop through `dev` in state `st` is unusable for a packet lookup.
    #[inline]
    pub fn skips(&self, flags: LookupFlags, st_flags: u32, dev: IfIndex) -> bool {
        flags.linkdown_conf
            && st_flags & nh_flags::LINKDOWN != 0
            && !self.0.is_empty()
            && self.0.binary_search(&dev).is_ok()
    }
}
