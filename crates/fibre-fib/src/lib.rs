//! fibre's routing model with the Linux kernel's semantics.
//!
//! [`Fib`] is the whole routing state of one fibre instance, as a network namespace is for the
//! kernel: links, addresses, policy rules, routing tables, next-hop objects and the settings
//! (forwarding, rp_filter) that change lookups. Requests and answers are the rtnetlink-shaped
//! types of [`types`]; the entry points are named after the rtnetlink message they handle
//! (`route_new` = RTM_NEWROUTE with the given NLM_F_* modifiers, and so on) and return the
//! errno and extended-ACK text the kernel would.
//!
//! Ownership rule: a `Fib` has one writer. Mutating entry points take `&mut self`; lookups take
//! `&self`. Lock-free readers on other threads get published snapshots of the compiled lookup
//! structures, never a reference into the writer's state.

pub mod types;

pub use types::*;

/// Settings with the kernel's meaning (the sysctls that change lookups). fibre is a router, so
/// forwarding is on by default, unlike a fresh kernel namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// net.ipv4.conf.all.forwarding
    pub ipv4_forwarding: bool,
    /// net.ipv6.conf.all.forwarding
    pub ipv6_forwarding: bool,
    /// net.ipv4.conf.all.rp_filter: 0 off, 1 strict, 2 loose.
    pub rp_filter: u8,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { ipv4_forwarding: true, ipv6_forwarding: true, rp_filter: 0 }
    }
}

/// The routing state of one fibre instance. See the crate documentation for the rules.
#[derive(Debug)]
pub struct Fib {
    settings: Settings,
}

impl Default for Fib {
    fn default() -> Self {
        Fib::new(Settings::default())
    }
}

impl Fib {
    /// A state as a fresh network namespace has it: `lo` (down), the three default rules per
    /// family, empty tables.
    pub fn new(settings: Settings) -> Fib {
        Fib { settings }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Changes a setting; takes effect for the next lookup.
    pub fn set_settings(&mut self, settings: Settings) {
        self.settings = settings;
    }

    /// RTM_NEWLINK: creates a link (`flags.create`) or changes one named by index or name.
    pub fn link_new(&mut self, _link: &Link, _flags: ReqFlags) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_DELLINK, by index or name.
    pub fn link_del(&mut self, _link: &Link) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_GETLINK dump, in ifindex order.
    pub fn links(&self) -> Vec<Link> {
        Vec::new()
    }

    /// The index of the link named `name`.
    pub fn link_index(&self, _name: &str) -> Option<u32> {
        None
    }

    /// RTM_NEWADDR.
    pub fn addr_new(&mut self, _addr: &Address, _flags: ReqFlags) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_DELADDR.
    pub fn addr_del(&mut self, _addr: &Address) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_GETADDR dump, in the kernel's order.
    pub fn addrs(&self, _family: Option<Family>) -> Vec<Address> {
        Vec::new()
    }

    /// RTM_NEWROUTE with the given NLM_F_* modifiers.
    pub fn route_new(&mut self, _route: &Route, _flags: ReqFlags) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_DELROUTE: attributes present in `route` must match; absent ones are wildcards.
    pub fn route_del(&mut self, _route: &Route) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_GETROUTE dump: every table, in the kernel's dump order.
    pub fn routes(&self, _family: Option<Family>) -> Vec<Route> {
        Vec::new()
    }

    /// RTM_GETROUTE: an output lookup, or an input lookup when `query.iif` is set.
    pub fn route_get(&self, _query: &RouteQuery) -> Result<Route, RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_NEWRULE.
    pub fn rule_new(&mut self, _rule: &Rule, _flags: ReqFlags) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_DELRULE: attributes present in `rule` must match.
    pub fn rule_del(&mut self, _rule: &Rule) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_GETRULE dump, in priority order.
    pub fn rules(&self, _family: Option<Family>) -> Vec<Rule> {
        Vec::new()
    }

    /// RTM_NEWNEXTHOP.
    pub fn nexthop_new(&mut self, _nh: &NexthopObj, _flags: ReqFlags) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_DELNEXTHOP by id.
    pub fn nexthop_del(&mut self, _id: u32) -> Result<(), RtError> {
        Err(RtError::new(Errno::EOPNOTSUPP))
    }

    /// RTM_GETNEXTHOP dump, in id order.
    pub fn nexthops(&self) -> Vec<NexthopObj> {
        Vec::new()
    }
}
