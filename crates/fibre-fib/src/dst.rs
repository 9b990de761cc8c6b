//! Precomputed forwarding results ("dsts"), cached on next hops.
//!
//! After the kernel removed its route cache (Linux 3.6, merge commit 5e9965c15ba8 "Merge
//! branch 'kill_rtcache'"), a lookup ends at a FIB next hop that
//! already holds a ready-made output route; nothing is built per packet. fibre does the same:
//! every next hop of every stored route carries a [`Dst`], built when the route is created and
//! rebuilt when something it depends on changes (link state, MTU, addresses, which decide the
//! preferred source). The [`crate::Fib`] generation counter is bumped by every such change, and
//! each `Dst` records the generation it was built at, so a holder of a copied `Dst` (the data
//! plane, a per-worker cache) can tell in one compare whether it is still valid.
//!
//! Invariants: after any `&mut Fib` call returns, every cached `Dst` reflects the current links,
//! addresses and route attributes; `Fib::gen()` changes on every mutation, so a cache of lookup
//! results (destination to `Dst`) is valid exactly while `Fib::gen()` is unchanged.

use std::net::IpAddr;

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
    /// `Fib` generation this was built at.
    pub gen: u64,
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
