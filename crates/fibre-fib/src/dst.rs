//! Precomputed forwarding results ("dsts"), held by the shared route infos, and the walk that
//! keeps them current.
//!
//! After the kernel removed its route cache (Linux 3.6, merge commit 5e9965c15ba8 "Merge
//! branch 'kill_rtcache'"), a lookup ends at a FIB next hop that already holds a ready-made
//! output route; nothing is built per packet. fibre does the same, shaped as VPP's FIB: routes
//! reference a shared forwarding object by typed index (a table entry names its route info,
//! `ids::InfoId`, which every route with the same attributes and next hops shares), and the
//! object holds one [`Dst`] per next hop.
//!
//! Dependents, not everything: a change names its [`Reason`], which says which objects can
//! depend on it. A link's state, carrier or MTU reaches only the objects with a next hop on that
//! link (`route::Infos::on_link`, the index from a link to its dependents); an address change
//! reaches every IPv4 object (inet_select_addr may take a preferred source from any link);
//! settings reach none. Only the objects walked are rebuilt, and a dst whose result did not
//! change keeps its generation.
//!
//! Contract for holders: each dst carries its own generation, unique over the life of a
//! `Fib` and replaced whenever that next hop's forwarding result changes or its object is
//! freed. A holder of a copy (the data plane, a per-worker cache) asks
//! [`crate::Fib::dst_is_current`], one indexed load and one compare, whether its copy still
//! holds; a change elsewhere leaves it current. Whether a destination still resolves to the
//! same object is a question for the lookup (and [`crate::Fib::gen`]), not for the dst.

use std::net::IpAddr;

use crate::ids::{IfIndex, InfoId};
use crate::types::{Errno, RouteType};

/// A ready forwarding decision for one next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dst {
    /// What to do with the packet (unicast = forward or send; local = deliver here; ...).
    pub rtype: RouteType,
    /// Output device.
    pub oif: u32,
    /// The neighbour to resolve: the gateway, or `None` when the destination is on-link (then
    /// the packet's destination address is the neighbour key).
    pub gateway: Option<IpAddr>,
    /// Path MTU: the route's `mtu` metric when set, else the device MTU.
    pub mtu: u32,
    /// Preferred source for locally generated packets when the route fixes one (prefsrc, or
    /// for IPv4 the address the kernel's inet_select_addr picks for this next hop).
    pub prefsrc: Option<IpAddr>,
    /// Table the route lives in.
    pub table: u32,
    /// RTNH_F_* state of the next hop (LINKDOWN, DEAD, ONLINK).
    pub nh_flags: u32,
    /// This result's generation (see the module documentation): a copy whose generation is
    /// its object's is current.
    pub gen: u64,
    /// The object and next hop this result belongs to.
    pub(crate) at: DstAt,
}

/// Where a [`Dst`] lives: its route info and the next hop's index in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DstAt {
    pub info: Option<InfoId>,
    pub nh: usize,
}

impl Dst {
    /// Whether `o` is the same forwarding result (generation and place aside).
    pub(crate) fn same_result(&self, o: &Dst) -> bool {
        (
            self.rtype,
            self.oif,
            self.gateway,
            self.mtu,
            self.prefsrc,
            self.table,
            self.nh_flags,
        ) == (
            o.rtype, o.oif, o.gateway, o.mtu, o.prefsrc, o.table, o.nh_flags,
        )
    }
}

/// What changed, as a walk over forwarding results is told: it decides which objects can
/// depend on the change (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The link went administratively down.
    LinkDown(IfIndex),
    LinkUp(IfIndex),
    /// The link lost or regained its carrier.
    CarrierDown(IfIndex),
    CarrierUp(IfIndex),
    MtuChange(IfIndex),
    /// An address was added, removed or changed (the link's, or any: source selection falls
    /// back to other links' addresses).
    AddrChange,
    /// A setting changed (forwarding, rp_filter, ignore_routes_with_linkdown): no forwarding
    /// result holds one.
    Settings,
}

/// Which objects a walk visits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    None,
    /// The dependents of one link.
    Link(IfIndex),
    All,
}

impl Reason {
    pub(crate) fn walk(self) -> Walk {
        match self {
            Reason::LinkDown(l)
            | Reason::LinkUp(l)
            | Reason::CarrierDown(l)
            | Reason::CarrierUp(l)
            | Reason::MtuChange(l) => Walk::Link(l),
            Reason::AddrChange => Walk::All,
            Reason::Settings => Walk::None,
        }
    }
}

/// Why a lookup found no usable route: small and Copy for the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupError {
    /// No route (ENETUNREACH).
    NoRoute,
    /// An `unreachable` route or rule (EHOSTUNREACH).
    Unreachable,
    /// A `prohibit` route or rule (EACCES).
    Prohibit,
    /// A `blackhole` route or rule (EINVAL).
    Blackhole,
    /// The output device is down or gone (ENETUNREACH / ENODEV at the API edge).
    NoDevice,
}

impl LookupError {
    pub fn errno(self) -> Errno {
        match self {
            LookupError::NoRoute => Errno::ENETUNREACH,
            LookupError::Unreachable => Errno::EHOSTUNREACH,
            LookupError::Prohibit => Errno::EACCES,
            LookupError::Blackhole => Errno::EINVAL,
            LookupError::NoDevice => Errno::ENODEV,
        }
    }

    /// The error a route or rule of type `t` produces, if it is a reject type
    /// (fib_props[].error; `throw` is not an error but "continue with the next rule").
    pub(crate) fn of_type(t: RouteType) -> Option<LookupError> {
        match t {
            RouteType::Unreachable => Some(LookupError::Unreachable),
            RouteType::Prohibit => Some(LookupError::Prohibit),
            RouteType::Blackhole | RouteType::Nat | RouteType::Xresolve => {
                Some(LookupError::Blackhole)
            }
            _ => None,
        }
    }
}
