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
//!
//! Modules, one job each, in three layers. A module imports only from the layers below it and
//! from the modules listed before it in its own layer, so the imports form a DAG; only the top
//! layer names `Fib` (`tests/module_dag.rs` checks this and prints the graph):
//!
//! 1. Vocabulary, depending on nothing but [`types`]: [`types`] (requests and answers),
//!    [`encap`] (next hops' encapsulations checked and built as the kernel keeps them),
//!    [`ids`] (typed arena indices), [`prefix`] (addresses as u128, masked prefixes),
//!    [`flow`] (what a lookup asks), [`hash`] (keyed and internal hash maps), [`mphash`] (the
//!    kernel's multipath flow hash).
//! 2. Stores and the pure functions over them, which know nothing of `Fib`: [`memo`] (change
//!    counters and the validation memos stamped with them), [`addr`] (address lists),
//!    [`link`] (interfaces), [`resilient`] (resilient groups' bucket tables), [`dst`]
//!    (forwarding results and the reasons they are revisited), [`expiry`] (clock and deadline
//!    queue), [`route`] (stored routes, the shared route infos that hold their forwarding
//!    results, and the index from links to them), [`fibtable`] (one table's prefixes,
//!    longest-prefix match, IPv6 leaves, and the index from route infos to their prefixes),
//!    [`rule`] (policy rules), [`srcsel`] (source address selection), [`ioam`] (IOAM
//!    namespaces and schemas).
//! 3. `Fib`'s methods, split by job, in this order: [`nexthop`] (next-hop objects),
//!    [`lookup`] (table, rules and multipath lookups), [`route4`] / [`route6`] (the two
//!    families' request semantics), [`exception`] (PMTU and redirect exceptions), [`input`]
//!    (the input route decision for packets), `input_batch` (the same for a vector of
//!    packets, the common case looked up together), [`get`] (answers to `route get`), [`sync`]
//!    (effects of link and address events), and [`conf`] (per-link settings), [`neigh`]
//!    (ARP/NDP neighbours and proxies, and their resolution states on the data plane's
//!    clock), [`local`] (the router's own links and addresses as the data plane asks about
//!    them), [`notify`] (route change notices), [`gc`] (expiry passes), which use none of the
//!    others.

#![forbid(unsafe_code)]

mod addr;
pub mod build;
mod conf;
mod dst;
pub mod encap;
pub mod exception;
pub mod expiry;
mod fibtable;
mod flow;
mod gc;
mod get;
pub mod hash;
mod ids;
mod input;
mod input_batch;
pub mod ioam;
mod link;
mod local;
mod lookup;
mod memo;
pub mod mphash;
mod neigh;
mod nexthop;
mod notify;
mod prefix;
mod resilient;
mod route;
mod route4;
mod route6;
mod rule;
pub mod seg6_hmac;
mod srcsel;
mod sync;
pub mod types;

#[cfg(test)]
mod expiry_tests;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, Ipv4Addr};

pub use conf::{ConfKey, ConfTarget, Ioam6Link};
pub use dst::{Dst, LookupError};
pub use exception::{Exception, ExceptionConfig, ExceptionError, ExceptionOutcome};
pub use expiry::{Clock, GcStats, ManualClock, SystemClock};
pub use flow::Flow;
pub use input::{
    DstRef, ForwardHop, ForwardRoute, InputCacheKey, InputDecision, InputDrop, InputKey,
    InputLine4, InputMemo, InputRoute,
};
pub use link::LOOPBACK_IFINDEX;
pub use mphash::MultipathHash;
pub use neigh::resolve::{Heard, Learn, NudAction, NudParams, Override};
pub use route4::RouteHint;
pub use types::*;

use addr::{Addr4, Addr6, AddrInsertError};
use dst::Reason;
use fibtable::Table;
use hash::KeyedMap;
use ids::{IfIndex, InfoId, NhId, TableId};
use link::{LinkState, Links};
use nexthop::NhObjs;
use prefix::{u128_ip, Key};
use route::{Entry, Info, InfoSpec, Infos, NhState};
use route4::NhResolved;
use rule::Rules;

/// Settings with the kernel's meaning (the sysctls that change lookups). fibre is a router, so
/// forwarding is on by default, unlike a fresh kernel namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// net.ipv4.conf.all.forwarding
    pub ipv4_forwarding: bool,
    /// net.ipv6.conf.all.forwarding
    pub ipv6_forwarding: bool,
    /// net.ipv4.conf.all.rp_filter: 0 off, 1 strict, 2 loose (each link has its own too:
    /// see [`Fib::set_conf`]).
    pub rp_filter: u8,
    /// net.ipv4.conf.all.ignore_routes_with_linkdown
    pub ignore_routes_with_linkdown4: bool,
    /// net.ipv6.conf.all.ignore_routes_with_linkdown
    pub ignore_routes_with_linkdown6: bool,
    /// net.ipv{4,6}.fib_multipath_hash_{policy,fields} and net.ipv4.fib_multipath_hash_seed.
    pub multipath: MultipathHash,
    /// The limits on the ICMP errors the router sends: net.ipv4.icmp_ratelimit,
    /// icmp_ratemask, icmp_msgs_per_sec, icmp_msgs_burst and net.ipv6.icmp.ratelimit.
    pub icmp: IcmpLimits,
    /// net.ipv6.seg6_flowlabel: the flow label of an SRv6 encapsulation's outer header. 0
    /// (the kernel's default) copies an IPv6 inner packet's and gives others 0; a negative
    /// value always gives 0; a positive one a hash of the flow (seg6_make_flowlabel).
    pub seg6_flowlabel: i32,
    /// net.ipv6.conf.all.seg6_enabled (each link has its own: see [`Fib::set_conf`]).
    pub seg6_enabled: i32,
    /// net.ipv6.ioam6_id and ioam6_id_wide: the node ids IOAM traces record (24 and 56 bits,
    /// all ones by default: "unavailable").
    pub ioam6_id: u32,
    pub ioam6_id_wide: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            ipv4_forwarding: true,
            ipv6_forwarding: true,
            rp_filter: 0,
            ignore_routes_with_linkdown4: false,
            ignore_routes_with_linkdown6: false,
            multipath: MultipathHash::default(),
            icmp: IcmpLimits::default(),
            seg6_flowlabel: 0,
            seg6_enabled: 0,
            ioam6_id: conf::IOAM6_NODE_ID_MAX,
            ioam6_id_wide: conf::IOAM6_NODE_ID_WIDE_MAX,
        }
    }
}

/// The routing state of one fibre instance. See the crate documentation for the rules.
///
/// The fields are private, but every module of the crate is a child of its root and so sees
/// them; what keeps a state consistent is that each invariant between pieces of state has one
/// owner, whose own fields are private to it: the change counters and the memos stamped with
/// them (`memo`), the expiry queue and the infos it names (`route::Infos`), the links whose
/// LINKDOWN next hops lookups skip and the settings they come from (`conf::Confs`).
#[derive(Debug)]
pub struct Fib {
    settings: Settings,
    links: Links,
    /// Tables by id, boxed: a router may hold thousands of small ones, and a map of inline
    /// tables would reserve a table's fields for every empty slot it keeps. Keyed hash: table
    /// ids are chosen by netlink peers.
    t4: KeyedMap<TableId, Box<Table>>,
    t6: KeyedMap<TableId, Box<Table>>,
    table_seq: u64,
    infos: Infos,
    rules: Rules,
    nhobjs: NhObjs,
    /// Change counters: what `gen()` answers, and the stamp of the validation memos.
    gens: memo::Generations,
    /// Gateway resolutions by (gateway, device, table, scope) of route requests, valid at one
    /// `gens.resolve()`.
    gw_memo: memo::Memo<(u32, IfIndex, TableId, u8), NhResolved, u64>,
    /// Infos of plain requests already validated (see `route4::SimpleKey`), valid at one
    /// (`gens.resolve()`, `infos.frees()`).
    simple_memo: memo::Memo<route4::SimpleKey, InfoId, (u64, u64)>,
    /// The kernel's fib4_has_custom_rules / fib_has_custom_local_routes: once a rule or a
    /// local route was added by a user, input source checks take the full path. Sticky.
    custom_rules4: bool,
    custom_local4: bool,
    /// Neighbour and proxy entries (ARP/NDP), see [`neigh`].
    neighs: neigh::Neighs,
    /// Inside [`Fib::begin_batch`] .. [`Fib::end_batch`]: compiled-structure updates wait.
    batching: bool,
    /// IPv4 tables whose replayed adds leave the table alone until the batch's end, where
    /// [`Fib::end_batch_from`] copies their changes from the published copy (see
    /// [`Fib::copy_tables_at_end`]). Empty outside such a replay.
    copy_at_end: Vec<TableId>,
    /// Time for expiring routes and exceptions (see `expiry`).
    clock: std::sync::Arc<dyn Clock>,
    /// Next-hop exceptions (PMTU, redirects).
    exceptions: exception::Exceptions,
    /// Per-link settings (`conf`).
    confs: conf::Confs,
    /// The source address SRv6 encapsulation gives the outer IPv6 header (`ip sr tunsrc`;
    /// the kernel's per-namespace seg6 tun_src), `::` until set.
    seg6_tunsrc: std::net::Ipv6Addr,
    /// SRH HMAC keys (`ip sr hmac`).
    seg6_hmac: seg6_hmac::Keys,
    /// IOAM namespaces and schemas (`ip ioam`).
    ioam: ioam::Ioam,
}

impl Default for Fib {
    fn default() -> Self {
        Fib::new(Settings::default())
    }
}

/// Largest RTAX_MTU a route keeps: 65535 minus the 15 bytes ip_metrics_convert reserves.
const MAX_ROUTE_MTU: u32 = 65535 - 15;
/// Largest RTAX_ADVMSS: 65535 minus 40 bytes of IPv4 and TCP headers.
const MAX_ROUTE_ADVMSS: u32 = 65535 - 40;
/// Largest RTAX_HOPLIMIT: an 8-bit field on the wire.
const MAX_ROUTE_HOPLIMIT: u32 = 255;

/// The TCP congestion-control algorithms a route's RTAX_CC_ALGO may name: those of the
/// kernel fibre is compared with (its tcp_available_congestion_control), which
/// ip_metrics_convert looks names up in.
const CONGESTION_CONTROLS: [&str; 3] = ["reno", "cubic", "bbr"];

/// ip_metrics_convert refuses a congestion-control algorithm the kernel does not have.
fn check_congctl(m: &Metrics) -> Result<(), RtError> {
    match &m.congctl {
        Some(name) if !CONGESTION_CONTROLS.contains(&name.as_str()) => Err(RtError::msg(
            Errno::EINVAL,
            "Unknown tcp congestion algorithm",
        )),
        _ => Ok(()),
    }
}

/// ip_metrics_convert caps mtu, advmss and hoplimit of a new route (both families): the
/// capped metrics, or None when nothing is over its cap. Deletes compare the values as given.
fn capped_metrics(m: &Metrics) -> Option<Metrics> {
    let over = |v: Option<u32>, cap: u32| v.is_some_and(|v| v > cap);
    if !over(m.mtu, MAX_ROUTE_MTU)
        && !over(m.advmss, MAX_ROUTE_ADVMSS)
        && !over(m.hoplimit, MAX_ROUTE_HOPLIMIT)
    {
        return None;
    }
    let cap = |v: Option<u32>, c: u32| v.map(|v| v.min(c));
    Some(Metrics {
        mtu: cap(m.mtu, MAX_ROUTE_MTU),
        advmss: cap(m.advmss, MAX_ROUTE_ADVMSS),
        hoplimit: cap(m.hoplimit, MAX_ROUTE_HOPLIMIT),
        ..m.clone()
    })
}

impl Fib {
    /// A state as a fresh network namespace has it: `lo` (down), the three default rules per
    /// family, empty tables.
    pub fn new(settings: Settings) -> Fib {
        let settings_copy = settings.clone();
        let mut f = Fib {
            settings,
            links: Links::new(),
            t4: KeyedMap::default(),
            t6: KeyedMap::default(),
            table_seq: 0,
            infos: Infos::default(),
            rules: Rules::new(),
            nhobjs: NhObjs::default(),
            gens: Default::default(),
            gw_memo: Default::default(),
            simple_memo: Default::default(),
            custom_rules4: false,
            custom_local4: false,
            neighs: neigh::Neighs::default(),
            batching: false,
            copy_at_end: Vec::new(),
            clock: std::sync::Arc::new(SystemClock::new()),
            exceptions: Default::default(),
            confs: conf::Confs::new(&settings_copy),
            seg6_tunsrc: std::net::Ipv6Addr::UNSPECIFIED,
            seg6_hmac: seg6_hmac::Keys::default(),
            ioam: ioam::Ioam::default(),
        };
        let all4 = f.settings.ignore_routes_with_linkdown4;
        f.confs.link_added(IfIndex::LOOPBACK, all4);
        for tb in [TableId::LOCAL, TableId::MAIN] {
            f.table_seq += 1;
            f.t4.insert(tb, Table::new(tb, 32, f.table_seq));
            f.t6.insert(tb, Table::new(tb, 128, f.table_seq));
        }
        f
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// `ip sr tunsrc show`.
    pub fn seg6_tunsrc(&self) -> std::net::Ipv6Addr {
        self.seg6_tunsrc
    }

    /// `ip sr tunsrc set ADDR`: any address (`::` clears it), as the kernel takes it.
    pub fn set_seg6_tunsrc(&mut self, a: std::net::Ipv6Addr) {
        self.seg6_tunsrc = a;
    }

    /// `ip sr hmac show`.
    pub fn seg6_hmac(&self) -> &seg6_hmac::Keys {
        &self.seg6_hmac
    }

    /// `ip sr hmac set ID ALGO` with `secret` (empty: delete), as [`seg6_hmac::Keys::set`].
    pub fn set_seg6_hmac(&mut self, id: u32, algo: u8, secret: &[u8]) -> Result<(), RtError> {
        self.seg6_hmac.set(id, algo, secret)
    }

    /// Whether packets with an SRH for the router are accepted on `iif`
    /// (`net.ipv6.conf.{all,IIF}.seg6_enabled`, both on).
    pub fn seg6_enabled(&self, iif: u32) -> bool {
        self.confs
            .seg6_enabled(self.settings.seg6_enabled, IfIndex(iif))
    }

    /// Input link `iif`'s `net.ipv6.conf.IIF.seg6_require_hmac` (see
    /// [`ConfKey::Seg6RequireHmac`]).
    pub fn seg6_require_hmac(&self, iif: u32) -> i32 {
        self.confs.seg6_require_hmac(IfIndex(iif))
    }

    /// Link `ifindex`'s IOAM settings (`net.ipv6.conf.LINK.ioam6_*`).
    pub fn ioam6_link(&self, ifindex: u32) -> Ioam6Link {
        self.confs.ioam6(IfIndex(ifindex))
    }

    /// IOAM namespaces and schemas (`ip ioam ... show`).
    pub fn ioam(&self) -> &ioam::Ioam {
        &self.ioam
    }

    /// `ip ioam namespace|schema add|del|set`.
    pub fn ioam_mut(&mut self) -> &mut ioam::Ioam {
        &mut self.ioam
    }

    /// Changes a setting; takes effect for the next lookup.
    pub fn set_settings(&mut self, settings: Settings) {
        self.settings = settings;
        self.after_state_change(&[Reason::Settings]);
        self.commit_fast();
    }

    /// Starts a batch of changes: until [`Fib::end_batch`], the compiled lookup structures
    /// are not updated per change but once at the end, each trie node touched recompiled once
    /// (a bulk load then runs at bulk-build speed). Every answer in between is the same as
    /// without the batch: lookups of tables with queued updates walk the prefix map instead.
    pub fn begin_batch(&mut self) {
        self.batching = true;
    }

    /// Ends a batch: brings every compiled structure up to date.
    pub fn end_batch(&mut self) {
        self.batching = false;
        self.commit_fast();
    }

    /// [`Self::end_batch`] for the second copy of a pair: `published` is the copy that
    /// applied the same changes first (equal to this one before them) and has ended its
    /// batch since. A large IPv4 compiled structure copies what `published`'s wrote
    /// instead of computing it again; every answer is the same as after `end_batch`.
    ///
    /// The tables [`Fib::copy_tables_at_end`] chose copy what `published`'s changed first.
    /// Then both copies are equal, and every table records that nothing changed since (for
    /// the next batch, which this copy applies first).
    pub fn end_batch_from(&mut self, published: &Fib) {
        for tb in std::mem::take(&mut self.copy_at_end) {
            if let (Some(t), Some(src)) = (self.t4.get_mut(&tb), published.t4.get(&tb)) {
                t.copy_changes_from(src);
            }
        }
        self.batching = false;
        self.commit_fast_from(Some(published));
        for t in self.t4.values_mut().chain(self.t6.values_mut()) {
            t.settle();
        }
    }

    /// For the second copy of a pair, in a batch's replay, before adds that are all IPv4 adds
    /// whose hints say where their entries went ([`RouteHint::placed_table`]; `tables` lists
    /// each one's table) and read no clock, and after every other change of the batch:
    /// chooses the tables whose changes in `published` (the copy that applied the batch
    /// first, equal to this one before it) cost less to copy than to make again. The adds
    /// to those tables are then made by [`Fib::route_replay_copied`], which changes
    /// everything but the tables (route infos' references, the generations), and
    /// [`Fib::end_batch_from`] copies the tables.
    ///
    /// Why it is the same: the adds' hints make them read nothing of the tables (no check,
    /// no decision), nothing after them in the batch reads the tables, and a table's arrays
    /// record the lowest place written since both copies were last equal
    /// (`fibtable::Table::settle`), so copying from there on reproduces every change of the
    /// batch, those made on this copy before the adds included.
    ///
    /// Returns how many tables it chose.
    pub fn copy_tables_at_end(
        &mut self,
        published: &Fib,
        tables: impl Iterator<Item = u32>,
    ) -> usize {
        /// Elements (keys, slots, winners) copied per add beyond which making the adds again
        /// is cheaper: an element costs a copy of at most one cache line, a replayed add
        /// about 900 instructions (its map insert, winner and compiled-structure update).
        const COPIED_PER_ADD: usize = 16;
        let mut adds: Vec<(TableId, usize)> = Vec::new();
        for tb in tables.map(TableId) {
            // Consecutive adds mostly go to one table: the last one counted is tried first.
            match adds.iter_mut().rev().find(|(t, _)| *t == tb) {
                Some((_, n)) => *n += 1,
                None => adds.push((tb, 1)),
            }
        }
        for (tb, n) in adds {
            let (Some(t), Some(src)) = (self.t4.get(&tb), published.t4.get(&tb)) else {
                continue;
            };
            if t.copies_changes() && src.changed() <= COPIED_PER_ADD * n {
                self.copy_at_end.push(tb);
            }
        }
        self.copy_at_end.len()
    }

    /// The generation counter: changes on every mutation, so a cache of lookup results is
    /// valid exactly while it is unchanged.
    pub fn gen(&self) -> u64 {
        self.gens.all()
    }

    pub(crate) fn route_changed(&mut self, affects_gw: bool) {
        self.gens.changed(affects_gw);
    }

    /// After a link, address or settings change: resolution memos go, the dsts that can
    /// depend on the change are rebuilt (the keys whose compiled answers it moved are marked
    /// by `commit_fast`, from `route::Infos::take_moved`).
    fn after_state_change(&mut self, why: &[Reason]) {
        self.gens.changed(true);
        self.refresh_dsts(why);
    }

    /// Whether `d`, a copy of a result [`Fib::lookup_output`] gave, is still its next hop's
    /// result: false once anything it was built from changed or its route is gone (see
    /// `dst`'s contract). One indexed load and one compare.
    #[inline]
    pub fn dst_is_current(&self, d: &Dst) -> bool {
        self.infos.dst_is_current(d)
    }

    /// Stores a new info, building its dsts and multipath bounds.
    pub(crate) fn new_info(&mut self, spec: InfoSpec, mut st: Vec<NhState>) -> InfoId {
        for (i, s) in st.iter_mut().enumerate() {
            s.dst = self.build_dst(&spec, i, s);
        }
        let mut info = Info::new(spec, st);
        info.rebalance(self.confs.ignored());
        self.infos.insert(info)
    }

    /// The shared info for `spec` (found or created).
    pub(crate) fn intern(&mut self, spec: InfoSpec, st: Vec<NhState>) -> InfoId {
        match self.infos.find(&spec) {
            Some(id) => id,
            None => self.new_info(spec, st),
        }
    }

    fn find_link(&self, l: &Link) -> Option<IfIndex> {
        if l.ifindex != 0 {
            return self.links.get(IfIndex(l.ifindex)).map(|x| x.ifindex);
        }
        l.ifname.as_deref().and_then(|n| self.links.index_of(n))
    }

    /// RTM_NEWLINK: creates a link (`flags.create`) or changes one named by index or name.
    pub fn link_new(&mut self, link: &Link, flags: ReqFlags) -> Result<(), RtError> {
        let r = self.link_new_inner(link, flags);
        self.commit_fast();
        r
    }

    fn link_new_inner(&mut self, link: &Link, flags: ReqFlags) -> Result<(), RtError> {
        let existing = self.find_link(link);
        let idx = match existing {
            Some(i) => {
                if flags.create && flags.excl {
                    return Err(RtError::new(Errno::EEXIST));
                }
                i
            }
            None => {
                if link.ifindex != 0 && link.ifname.is_none() {
                    return Err(RtError::new(Errno::ENODEV));
                }
                if !flags.create {
                    return Err(RtError::new(Errno::ENODEV));
                }
                let kind = match &link.kind {
                    Some(k @ (LinkKind::Dummy | LinkKind::Port(_))) => k.clone(),
                    Some(LinkKind::Loopback) => return Err(RtError::new(Errno::EOPNOTSUPP)),
                    None => return Err(RtError::msg(Errno::EOPNOTSUPP, "Unknown device type")),
                };
                if let LinkKind::Port(p) = &kind {
                    if !link::valid_name(&p.dev) {
                        return Err(RtError::msg(Errno::EINVAL, "invalid host interface name"));
                    }
                }
                let Some(name) = link.ifname.clone() else {
                    return Err(RtError::new(Errno::EINVAL));
                };
                if !link::valid_name(&name) {
                    return Err(RtError::new(Errno::EINVAL));
                }
                let idx = if link.ifindex != 0 {
                    if self.links.get(IfIndex(link.ifindex)).is_some() {
                        return Err(RtError::new(Errno::EBUSY));
                    }
                    IfIndex(link.ifindex)
                } else {
                    self.links.alloc_index()
                };
                self.confs
                    .link_added(idx, self.settings.ignore_routes_with_linkdown4);
                self.links.insert(LinkState {
                    ifindex: idx,
                    name,
                    // A dummy starts without ARP (dummy_setup), an Ethernet port with it
                    // (ether_setup).
                    noarp: kind == LinkKind::Dummy,
                    kind,
                    up: false,
                    carrier: true,
                    mtu: link::DEFAULT_MTU,
                    mac: link::default_mac(idx),
                    txqlen: link::DEFAULT_TXQLEN,
                    addr_gen_mode: 0,
                    v4: Vec::new(),
                    v6: Vec::new(),
                });
                idx
            }
        };
        self.link_change(idx, link)
    }

    /// Applies the changeable attributes of `link` to link `idx`.
    fn link_change(&mut self, idx: IfIndex, link: &Link) -> Result<(), RtError> {
        let Some(cur) = self.links.get(idx) else {
            return Err(RtError::new(Errno::ENODEV));
        };
        let is_lo = cur.is_loopback();
        if let Some(m) = link.mtu {
            let (lo_min, hi) = if is_lo {
                (0, u32::MAX)
            } else {
                (link::MIN_MTU, link::MAX_MTU)
            };
            if m < lo_min {
                return Err(RtError::msg(Errno::EINVAL, "mtu less than device minimum"));
            }
            if m > hi {
                return Err(RtError::msg(
                    Errno::EINVAL,
                    "mtu greater than device maximum",
                ));
            }
        }
        if let Some(a) = &link.address {
            if a.len() != 6 || is_lo {
                return Err(RtError::new(Errno::EINVAL));
            }
        }
        if let Some(n) = &link.ifname {
            if link.ifindex != 0 && *n != cur.name {
                if !link::valid_name(n) {
                    return Err(RtError::new(Errno::EINVAL));
                }
                if self.links.index_of(n).is_some() {
                    return Err(RtError::new(Errno::EEXIST));
                }
                self.links.rename(idx, n);
            }
        }
        let l = self.links.get_mut(idx).expect("checked above");
        let old_mtu = l.mtu;
        if let Some(m) = link.mtu {
            l.mtu = m;
        }
        if let Some(a) = &link.address {
            l.mac = a.clone();
        }
        if let Some(q) = link.txqlen {
            l.txqlen = q;
        }
        if let Some(g) = link.addr_gen_mode {
            l.addr_gen_mode = g;
        }
        let v6_was = link::ipv6_runs_at(old_mtu);
        let v6_now = l.ipv6_enabled();
        let was_up = l.up;
        let was_ready = l.oper_up();
        let had_carrier = l.carrier;
        if link.change & iff::UP != 0 {
            l.up = link.flags & iff::UP != 0;
        }
        if let Some(c) = link.carrier {
            if !is_lo {
                l.carrier = c;
            }
        }
        let had_noarp = l.noarp;
        if link.change & iff::NOARP != 0 {
            l.noarp = link.flags & iff::NOARP != 0;
        }
        let noarp_changed = l.noarp != had_noarp;
        let now_up = l.up;
        let now_ready = l.oper_up();
        let carrier = l.carrier;
        if (was_up && !now_up) || (now_up && had_carrier && !carrier) {
            self.nexthop_flush_dev(idx);
        }
        if was_up && !now_up {
            self.neigh_ifdown(idx, None);
            self.sync_down4(idx, true, false);
            self.v6_ifdown(idx, false);
            self.exceptions_dev_down(idx);
        }
        if !was_up && now_up {
            self.link_up4(idx);
        }
        if was_up && now_up && had_carrier && !carrier {
            self.neigh_carrier_down(idx);
            self.sync_down4(idx, false, false);
        }
        if now_up && !had_carrier && carrier {
            self.sync_up(idx);
        }
        // A NOARP change leaving the link up (NETDEV_CHANGE, sent only to an up link) makes
        // ARP and NDP forget the link's entries, PERMANENT ones too (neigh_changeaddr).
        if noarp_changed && now_up {
            self.neigh_changeaddr(idx);
        }
        // addrconf's NETDEV_CHANGEMTU: below IPv6's minimum the link loses its IPv6 state as
        // if unregistered (lo only as if down); back above it, IPv6 starts as on a link that
        // becomes ready. Neither crossing moves route MTU metrics.
        if v6_was && !v6_now {
            self.v6_ifdown(idx, !is_lo);
        }
        if v6_now && now_ready && (!was_ready || !v6_was) {
            self.v6_link_ready(idx);
        }
        let mut why: Vec<Reason> = Vec::new();
        if let Some(m) = link.mtu.filter(|&m| m != old_mtu) {
            if v6_was && v6_now {
                self.mtu_change6(idx, old_mtu, m);
            }
            why.push(Reason::MtuChange(idx));
        }
        if was_up != now_up {
            why.push(if now_up {
                Reason::LinkUp(idx)
            } else {
                Reason::LinkDown(idx)
            });
            // lo coming up gains 127.0.0.1 (`link_up4`), which source selection may take.
            if is_lo {
                why.push(Reason::AddrChange);
            }
        }
        if had_carrier != carrier {
            why.push(if carrier {
                Reason::CarrierUp(idx)
            } else {
                Reason::CarrierDown(idx)
            });
        }
        self.after_state_change(&why);
        Ok(())
    }

    /// IPv4 side of a link coming up (inetdev NETDEV_UP, then fib_netdev_event).
    fn link_up4(&mut self, idx: IfIndex) {
        if self.links.get(idx).is_some_and(|l| l.is_loopback()) {
            let lo = Addr4 {
                local: u32::from(Ipv4Addr::LOCALHOST),
                address: u32::from(Ipv4Addr::LOCALHOST),
                prefixlen: 8,
                broadcast: 0,
                scope: scope::HOST,
                flags: ifa_flags::PERMANENT,
                label: "lo".into(),
                metric: 0,
                valid_lft: None,
                preferred_lft: None,
            };
            if let Some(l) = self.links.get_mut(idx) {
                let _ = addr::insert4(&mut l.v4, lo);
            }
        }
        let addrs: Vec<Addr4> = self
            .links
            .get(idx)
            .map(|l| l.v4.clone())
            .unwrap_or_default();
        for a in &addrs {
            self.add_ifaddr4(idx, a);
        }
        self.sync_up(idx);
    }

    /// RTM_DELLINK, by index or name.
    pub fn link_del(&mut self, link: &Link) -> Result<(), RtError> {
        let r = self.link_del_inner(link);
        self.commit_fast();
        r
    }

    fn link_del_inner(&mut self, link: &Link) -> Result<(), RtError> {
        let Some(idx) = self.find_link(link) else {
            return Err(RtError::new(Errno::ENODEV));
        };
        if idx == IfIndex::LOOPBACK {
            return Err(RtError::new(Errno::EOPNOTSUPP));
        }
        // Closing the device comes first (NETDEV_DOWN before NETDEV_UNREGISTER): its next-hop
        // objects go and leave their groups, so a route through a group keeps its other
        // members; the device sweeps below never see those routes' next hops on it.
        self.nexthop_flush_dev(idx);
        let addrs4: Vec<Addr4> = self
            .links
            .get_mut(idx)
            .map(|l| std::mem::take(&mut l.v4))
            .unwrap_or_default();
        for a in addrs4.iter().rev() {
            self.del_ifaddr4(idx, a);
        }
        self.neigh_ifdown(idx, None);
        self.v6_ifdown(idx, false);
        self.sync_down4(idx, true, true);
        self.drop_nhs6(idx, true);
        self.exceptions_dev_down(idx);
        self.links.remove(idx);
        self.confs
            .link_removed(idx, self.settings.ignore_routes_with_linkdown4);
        self.after_state_change(&[Reason::AddrChange]);
        Ok(())
    }

    /// RTM_GETLINK dump, in ifindex order.
    pub fn links(&self) -> Vec<Link> {
        self.links
            .iter()
            .map(|l| Link {
                ifindex: l.ifindex.0,
                ifname: Some(l.name.clone()),
                kind: Some(l.kind.clone()),
                flags: l.flags(),
                change: 0,
                mtu: Some(l.mtu),
                address: Some(l.mac.clone()),
                carrier: Some(l.carrier),
                txqlen: Some(l.txqlen),
                addr_gen_mode: Some(l.addr_gen_mode),
                stats: None,
                punt: None,
            })
            .collect()
    }

    /// The index of the link named `name`.
    pub fn link_index(&self, name: &str) -> Option<u32> {
        self.links.index_of(name).map(|i| i.0)
    }

    /// RTM_NEWADDR.
    pub fn addr_new(&mut self, a: &Address, flags: ReqFlags) -> Result<(), RtError> {
        let r = self.addr_new_inner(a, flags);
        self.commit_fast();
        r
    }

    fn addr_new_inner(&mut self, a: &Address, flags: ReqFlags) -> Result<(), RtError> {
        // A lifetime of u32::MAX (or none) is forever; a valid lifetime of 0, or a preferred
        // one beyond the valid one, is refused before the link is looked up.
        let (valid, preferred) = (
            a.valid_lft.unwrap_or(u32::MAX),
            a.preferred_lft.unwrap_or(u32::MAX),
        );
        if valid == 0 || preferred > valid {
            let text = match a.family {
                Family::Inet => "ipv4: address lifetime invalid",
                Family::Inet6 => "ipv6: address lifetime invalid",
            };
            return Err(RtError::msg(Errno::EINVAL, text));
        }
        let dev = IfIndex(a.ifindex);
        if self.links.get(dev).is_none() {
            return Err(RtError::new(Errno::ENODEV));
        }
        let local = a.local.or(a.address);
        match (a.family, local) {
            (Family::Inet, Some(IpAddr::V4(l))) => {
                if a.prefixlen > 32 {
                    return Err(RtError::new(Errno::EINVAL));
                }
                let address = match a.address {
                    Some(IpAddr::V4(x)) => u32::from(x),
                    _ => u32::from(l),
                };
                let new = Addr4 {
                    local: u32::from(l),
                    address,
                    prefixlen: a.prefixlen,
                    broadcast: match a.broadcast {
                        Some(IpAddr::V4(b)) => u32::from(b),
                        _ => 0,
                    },
                    scope: a.scope,
                    // Infinite lifetime: the kernel marks the address permanent.
                    flags: (a.flags & !ifa_flags::SECONDARY)
                        | if a.valid_lft.is_none_or(|v| v == u32::MAX) {
                            ifa_flags::PERMANENT
                        } else {
                            0
                        },
                    label: a.label.clone().unwrap_or_else(|| {
                        self.links
                            .get(dev)
                            .map(|l| l.name.clone())
                            .unwrap_or_default()
                    }),
                    metric: a.metric.unwrap_or(0),
                    valid_lft: a.valid_lft,
                    preferred_lft: a.preferred_lft,
                };
                let l = self.links.get_mut(dev).expect("checked");
                if let Some(pos) =
                    l.v4.iter()
                        .position(|x| x.local == new.local && x.prefixlen == new.prefixlen)
                {
                    if flags.excl || !flags.replace {
                        return Err(RtError::msg(
                            Errno::EEXIST,
                            "ipv4: Address already assigned",
                        ));
                    }
                    // A replace updates lifetimes and the metric in place, moving the prefix
                    // route to a new metric.
                    let old = l.v4[pos].clone();
                    l.v4[pos].valid_lft = new.valid_lft;
                    l.v4[pos].preferred_lft = new.preferred_lft;
                    l.v4[pos].metric = new.metric;
                    if old.metric != new.metric {
                        self.modify_prefix_metric4(dev, &old, new.metric);
                    }
                    self.after_state_change(&[Reason::AddrChange]);
                    return Ok(());
                }
                if !flags.create {
                    return Err(RtError::new(Errno::ENOENT));
                }
                let inserted = match addr::insert4(&mut l.v4, new) {
                    Ok(p) => l.v4[p].clone(),
                    Err(AddrInsertError::Exists) => {
                        return Err(RtError::msg(
                            Errno::EEXIST,
                            "ipv4: Address already assigned",
                        ))
                    }
                    Err(AddrInsertError::ScopeMismatch) => {
                        return Err(RtError::msg(Errno::EINVAL, "ipv4: Invalid scope value"))
                    }
                };
                self.add_ifaddr4(dev, &inserted);
                self.after_state_change(&[Reason::AddrChange]);
                Ok(())
            }
            (Family::Inet6, Some(IpAddr::V6(l))) => {
                if a.prefixlen > 128 {
                    return Err(RtError::new(Errno::EINVAL));
                }
                // ipv6_find_idev fails on a link below IPv6's minimum MTU.
                if !self.links.get(dev).is_some_and(|l| l.ipv6_enabled()) {
                    return Err(RtError::new(Errno::EINVAL));
                }
                let peer = match a.address {
                    Some(IpAddr::V6(p)) if a.local.is_some() && p != l => Some(p),
                    _ => None,
                };
                let new = Addr6 {
                    addr: l,
                    peer,
                    prefixlen: a.prefixlen,
                    scope: addr::v6_rt_scope(&l),
                    flags: (a.flags | ifa_flags::PERMANENT)
                        & !(ifa_flags::SECONDARY | ifa_flags::TENTATIVE),
                    metric: a.metric.unwrap_or(0),
                    valid_lft: a.valid_lft,
                    preferred_lft: a.preferred_lft,
                };
                let lk = self.links.get_mut(dev).expect("checked");
                if let Some(pos) = lk.v6.iter().position(|x| x.addr == l) {
                    if flags.excl || !flags.replace {
                        return Err(RtError::new(Errno::EEXIST));
                    }
                    // inet6_addr_modify: lifetimes follow the request, the metric only when
                    // one is given.
                    let old = lk.v6[pos].clone();
                    lk.v6[pos].valid_lft = new.valid_lft;
                    lk.v6[pos].preferred_lft = new.preferred_lft;
                    if new.metric != 0 {
                        lk.v6[pos].metric = new.metric;
                    }
                    self.modify_prefix_metric6(dev, &old, new.metric);
                    self.after_state_change(&[Reason::AddrChange]);
                    return Ok(());
                }
                if !flags.create {
                    return Err(RtError::new(Errno::ENOENT));
                }
                if addr::insert6(&mut lk.v6, new.clone()).is_err() {
                    return Err(RtError::new(Errno::EEXIST));
                }
                self.add_ifaddr6(dev, &new, true);
                self.after_state_change(&[Reason::AddrChange]);
                Ok(())
            }
            _ => Err(RtError::new(Errno::EINVAL)),
        }
    }

    /// RTM_DELADDR.
    pub fn addr_del(&mut self, a: &Address) -> Result<(), RtError> {
        let r = self.addr_del_inner(a);
        self.commit_fast();
        r
    }

    fn addr_del_inner(&mut self, a: &Address) -> Result<(), RtError> {
        let dev = IfIndex(a.ifindex);
        let Some(l) = self.links.get(dev) else {
            return Err(RtError::new(Errno::ENODEV));
        };
        let local = a.local.or(a.address);
        match local {
            Some(IpAddr::V4(x)) => {
                let x = u32::from(x);
                let Some(pos) = l.v4.iter().position(|b| {
                    b.local == x
                        && (a.prefixlen == 0 || b.prefixlen == a.prefixlen)
                        && a.prefixlen <= 32
                }) else {
                    return Err(RtError::msg(
                        Errno::EADDRNOTAVAIL,
                        "ipv4: Address not found",
                    ));
                };
                self.del_addr4_at(dev, pos);
                // The last IPv4 address gone disables IPv4 on the link (fib_disable_ip).
                if self.links.get(dev).is_some_and(|l| l.v4.is_empty()) {
                    self.neigh_ifdown(dev, Some(Family::Inet));
                }
            }
            Some(IpAddr::V6(x)) => {
                let Some(pos) = l
                    .v6
                    .iter()
                    .position(|b| b.addr == x && (a.prefixlen == 0 || b.prefixlen == a.prefixlen))
                else {
                    return Err(RtError::msg(
                        Errno::EADDRNOTAVAIL,
                        "ipv6: address not found",
                    ));
                };
                let gone = self.links.get_mut(dev).expect("checked").v6.remove(pos);
                self.del_ifaddr6(dev, &gone);
            }
            None => return Err(RtError::new(Errno::EINVAL)),
        }
        self.after_state_change(&[Reason::AddrChange]);
        Ok(())
    }

    /// __inet_del_ifa without promotion: a primary takes its secondaries with it.
    fn del_addr4_at(&mut self, dev: IfIndex, pos: usize) {
        let Some(l) = self.links.get(dev) else { return };
        let victim = l.v4[pos].clone();
        if !victim.is_secondary() {
            loop {
                let Some(l) = self.links.get(dev) else { return };
                let sec = l.v4.iter().position(|b| {
                    b.is_secondary() && b.prefixlen == victim.prefixlen && victim.covers(b.address)
                });
                let Some(i) = sec else { break };
                let s = self.links.get_mut(dev).expect("present").v4.remove(i);
                self.del_ifaddr4(dev, &s);
            }
        }
        let Some(l) = self.links.get_mut(dev) else {
            return;
        };
        if let Some(i) = l.v4.iter().position(|b| *b == victim) {
            l.v4.remove(i);
        }
        let last = l.v4.is_empty();
        self.del_ifaddr4(dev, &victim);
        if last {
            self.disable_ip4(dev);
        }
    }

    /// RTM_GETADDR dump, in the kernel's order: IPv4 of every link, then IPv6.
    pub fn addrs(&self, family: Option<Family>) -> Vec<Address> {
        let mut out = Vec::new();
        if family != Some(Family::Inet6) {
            for l in self.links.iter() {
                for a in &l.v4 {
                    out.push(Address {
                        family: Family::Inet,
                        prefixlen: a.prefixlen,
                        flags: a.flags,
                        scope: a.scope,
                        ifindex: l.ifindex.0,
                        local: Some(IpAddr::V4(Ipv4Addr::from(a.local))),
                        address: Some(IpAddr::V4(Ipv4Addr::from(a.address))),
                        broadcast: (a.broadcast != 0)
                            .then(|| IpAddr::V4(Ipv4Addr::from(a.broadcast))),
                        label: Some(a.label.clone()),
                        metric: (a.metric != 0).then_some(a.metric),
                        valid_lft: a.valid_lft,
                        preferred_lft: a.preferred_lft,
                    });
                }
            }
        }
        if family != Some(Family::Inet) {
            for l in self.links.iter() {
                for a in &l.v6 {
                    out.push(Address {
                        family: Family::Inet6,
                        prefixlen: a.prefixlen,
                        flags: a.flags,
                        scope: a.scope,
                        ifindex: l.ifindex.0,
                        local: a.peer.map(|_| IpAddr::V6(a.addr)),
                        address: Some(IpAddr::V6(a.peer.unwrap_or(a.addr))),
                        broadcast: None,
                        label: None,
                        metric: (a.metric != 0).then_some(a.metric),
                        valid_lft: a.valid_lft,
                        preferred_lft: a.preferred_lft,
                    });
                }
            }
        }
        out
    }

    /// RTM_NEWROUTE with the given NLM_F_* modifiers.
    pub fn route_new(&mut self, route: &Route, flags: ReqFlags) -> Result<(), RtError> {
        self.route_new_hinted(route, flags, &mut RouteHint::default())
    }

    /// [`Fib::route_new`] that records in an empty `hint` what it decided, and makes the
    /// change a recorded one names instead of checking and deciding again: for applying the
    /// same change to an equal FIB (the other copy of a left-right pair), with the same
    /// result.
    pub fn route_new_hinted(
        &mut self,
        route: &Route,
        flags: ReqFlags,
        hint: &mut RouteHint,
    ) -> Result<(), RtError> {
        let expired = self.expire_routes();
        let r = match self.route4_decided(hint, flags) {
            Some(r) => r,
            None => {
                // The full path reads the tables, which such a replay leaves behind.
                debug_assert!(self.copy_at_end.is_empty(), "an add left a copied table");
                self.route_new_inner(route, flags, hint)
            }
        };
        // An IPv4 add changes one table, through `Table::update`, which recompiles the key
        // at once (a table it makes is empty): inside a batch, with nothing expired, only
        // released infos are left to reap, not every table to walk.
        if self.batching && expired == 0 && route.family == Family::Inet {
            self.reap_released();
        } else {
            self.commit_fast();
        }
        r
    }

    /// [`Fib::route_new`] once the due routes are gone.
    fn route_new_inner(
        &mut self,
        route: &Route,
        flags: ReqFlags,
        hint: &mut RouteHint,
    ) -> Result<(), RtError> {
        if Family::of(&route.dst.addr) != route.family {
            return Err(RtError::new(Errno::EINVAL));
        }
        check_congctl(&route.metrics)?;
        let capped;
        let route = match capped_metrics(&route.metrics) {
            Some(metrics) => {
                capped = Route {
                    metrics,
                    ..route.clone()
                };
                &capped
            }
            None => route,
        };
        match route.family {
            Family::Inet => {
                self.route4_new_hinted(route, flags, hint)?;
                if route.rtype == RouteType::Local {
                    self.custom_local4 = true;
                }
                Ok(())
            }
            Family::Inet6 => self.route6_new(route, flags),
        }
    }

    /// RTM_DELROUTE: attributes present in `route` must match; absent ones are wildcards.
    pub fn route_del(&mut self, route: &Route) -> Result<(), RtError> {
        let r = self.route_del_inner(route);
        self.commit_fast();
        r
    }

    fn route_del_inner(&mut self, route: &Route) -> Result<(), RtError> {
        self.expire_routes();
        if Family::of(&route.dst.addr) != route.family {
            return Err(RtError::new(Errno::EINVAL));
        }
        // inet_rtm_delroute / inet6_rtm_delroute check the next-hop id before any table.
        if let Some(id) = route.nhid {
            if route.nexthop.oif != 0
                || route.nexthop.gateway.is_some()
                || !route.multipath.is_empty()
            {
                return Err(types::einval(
                    "Nexthop specification and nexthop id are mutually exclusive",
                ));
            }
            if self.nhobjs.get(NhId(id)).is_none() {
                return Err(types::einval("Nexthop id does not exist"));
            }
        }
        match route.family {
            Family::Inet => self.route4_del(route),
            Family::Inet6 => self.route6_del(route),
        }
    }

    /// Tables of `family` in the kernel's dump order: by id modulo the hash size (256), newest
    /// first within one bucket.
    pub(crate) fn tables_in_order(&self, family: Family) -> Vec<&Table> {
        let m = match family {
            Family::Inet => &self.t4,
            Family::Inet6 => &self.t6,
        };
        let mut v: Vec<&Table> = m.values().map(|t| &**t).collect();
        v.sort_by(|a, b| {
            (a.id.0 & 0xff)
                .cmp(&(b.id.0 & 0xff))
                .then(b.seq.cmp(&a.seq))
        });
        v
    }

    /// Every table, IPv4 first, each family by ascending id. Walks that free route infos go in
    /// this order: the order of the frees decides which ids later routes get, and the table
    /// maps' own order changes with their hash seed.
    pub(crate) fn tables_by_id_mut(&mut self) -> Vec<(Family, &mut Table)> {
        let mut v: Vec<(Family, &mut Table)> = self
            .t4
            .values_mut()
            .map(|t| (Family::Inet, &mut **t))
            .chain(self.t6.values_mut().map(|t| (Family::Inet6, &mut **t)))
            .collect();
        v.sort_unstable_by_key(|(f, t)| (*f == Family::Inet6, t.id));
        v
    }

    /// The prefixes of every table, by family and table id, in ascending order (counted as
    /// they are inserted: no walk over the routes, for metrics read while tables are large).
    pub fn table_sizes(&self) -> Vec<(Family, u32, u64)> {
        let mut v: Vec<(Family, u32, u64)> = [(Family::Inet, &self.t4), (Family::Inet6, &self.t6)]
            .into_iter()
            .flat_map(|(f, m)| {
                m.values().map(move |t| {
                    let n = t.lengths().iter().map(|&l| u64::from(t.key_count(l))).sum();
                    (f, t.id.0, n)
                })
            })
            .collect();
        v.sort_unstable_by_key(|&(f, id, _)| (f == Family::Inet6, id));
        v
    }

    /// RTM_GETROUTE dump: every table, in the kernel's dump order (IPv4 before IPv6).
    pub fn routes(&self, family: Option<Family>) -> Vec<Route> {
        let mut out = Vec::new();
        self.dump_routes(family, &mut RouteDumpPos::default(), |r| {
            out.push(r.clone());
            true
        });
        out
    }

    /// A piece of the RTM_GETROUTE dump: from `pos` on, hands `emit` each route in
    /// [`Fib::routes`]' order until `emit` returns false (that route is not consumed: the
    /// next call starts with it) or the dump ends. Returns true while routes are left.
    ///
    /// `pos` may be kept across changes of the state, as the kernel's dump cursor is: an IPv4
    /// dump resumes at the first prefix after the last one handed out, an IPv6 one at the
    /// next entry of the table's order as it was when the dump reached that table (entries
    /// deleted since are skipped, entries added since are not shown); a table created or
    /// deleted in between can shift which tables are shown.
    pub fn dump_routes(
        &self,
        family: Option<Family>,
        pos: &mut RouteDumpPos,
        mut emit: impl FnMut(&Route) -> bool,
    ) -> bool {
        self.dump_route_entries(family, pos, |e| emit(&e.route()))
    }

    /// [`Fib::dump_routes`] with each route as a [`RouteEntry`], which gives the destination
    /// and tos without building the whole route, and says which routes differ only in those
    /// (for encoders that reuse what they encoded).
    pub fn dump_route_entries(
        &self,
        family: Option<Family>,
        pos: &mut RouteDumpPos,
        mut emit: impl FnMut(&RouteEntry<'_>) -> bool,
    ) -> bool {
        let families = [Family::Inet, Family::Inet6];
        while let Some(&f) = families.get(pos.family) {
            if family.is_some_and(|x| x != f) {
                pos.next_family();
                continue;
            }
            let tables = self.tables_in_order(f);
            while let Some(t) = tables.get(pos.table) {
                let more = match f {
                    Family::Inet => self.dump4_from(t, pos, &mut emit),
                    Family::Inet6 => self.dump6_from(t, pos, &mut emit),
                };
                if more {
                    return true;
                }
                pos.next_table();
            }
            pos.next_family();
        }
        false
    }

    /// One IPv4 table from `pos`: the map in order. True if `emit` stopped it.
    fn dump4_from(
        &self,
        t: &Table,
        pos: &mut RouteDumpPos,
        emit: &mut impl FnMut(&RouteEntry<'_>) -> bool,
    ) -> bool {
        let start = pos.key.unwrap_or(Key { addr: 0, len: 32 });
        for (k, es) in t.range_from(start) {
            let skip = if Some(*k) == pos.key { pos.entry } else { 0 };
            for (i, e) in es.iter().enumerate().skip(skip) {
                // Expired routes not reclaimed yet are gone for every reader.
                if self.info_expired(e.info) {
                    continue;
                }
                let entry = RouteEntry {
                    fib: self,
                    family: Family::Inet,
                    table: t.id,
                    key: *k,
                    entry: *e,
                };
                if !emit(&entry) {
                    pos.key = Some(*k);
                    pos.entry = i;
                    return true;
                }
            }
        }
        false
    }

    /// One IPv6 table from `pos`, in the fib6 walker's order (computed when the dump reaches
    /// the table). True if `emit` stopped it.
    fn dump6_from(
        &self,
        t: &Table,
        pos: &mut RouteDumpPos,
        emit: &mut impl FnMut(&RouteEntry<'_>) -> bool,
    ) -> bool {
        let order = pos.order6.get_or_insert_with(|| order6(&self.infos, t));
        while let Some(&(k, e)) = order.get(pos.entry) {
            // Entries removed since the order was taken are skipped; ids may have been
            // reused, so the entry must still be at its key.
            let entry = RouteEntry {
                fib: self,
                family: Family::Inet6,
                table: t.id,
                key: k,
                entry: e,
            };
            if t.get(&k).is_some_and(|es| es.contains(&e))
                && !self.info_expired(e.info)
                && !emit(&entry)
            {
                return true;
            }
            pos.entry += 1;
        }
        false
    }

    /// A stored entry as RTM_NEWROUTE shows it (fib_dump_info / rt6_fill_node).
    pub(crate) fn entry_route(&self, f: Family, tb: TableId, k: Key, e: &Entry) -> Route {
        let info = self.infos.get(e.info);
        let s = &info.spec;
        let mut r = Route::new(
            f,
            Prefix {
                addr: u128_ip(f, k.addr),
                len: k.len,
            },
        );
        r.tos = e.tos;
        r.table = tb.0;
        r.protocol = s.protocol;
        r.scope = s.scope;
        r.rtype = self.effective_type(info);
        r.prefsrc = s.prefsrc;
        r.metrics = s.metrics.clone();
        r.nhid = s.nhid.map(|n| n.0);
        r.expires = s
            .expires
            .map(|x| expiry::remaining_secs(x.at, self.now_ms()));
        r.src = e.src().map(|x| Prefix {
            addr: u128_ip(f, x.addr),
            len: x.len,
        });
        match f {
            Family::Inet => r.priority = (s.priority != 0).then_some(s.priority),
            Family::Inet6 => {
                r.priority = Some(s.priority);
                r.pref = s.pref.or(Some(0));
            }
        }
        let reject = LookupError::of_type(s.rtype).is_some() || s.rtype == RouteType::Throw;
        // fib_nexthop_info: a LINKDOWN next hop on a link that ignores such routes is shown
        // dead as well.
        let ign = &self.confs.ignored()[(f == Family::Inet6) as usize];
        let nh_of = |i: usize| {
            let mut flags = s.nhs[i].flags | info.nh[i].flags;
            if ign.skips(flow::LookupFlags::packet(), flags, s.nhs[i].oif) {
                flags |= nh_flags::DEAD;
            }
            NextHop {
                gateway: s.nhs[i].gw,
                oif: s.nhs[i].oif.0,
                hops: (s.nhs[i].weight.saturating_sub(1)).min(255) as u8,
                flags,
                encap: s.nhs[i].encap.clone(),
            }
        };
        // rt6_fill_node shows an IPv6 route through a group object as multipath, whatever
        // the number of members; IPv4 (fib_dump_info) counts the group's next hops.
        let v6_group = f == Family::Inet6
            && s.nhid
                .and_then(|id| self.nhobjs.get(id))
                .is_some_and(|o| !o.group.is_empty());
        if s.nhs.len() == 1 && !v6_group {
            let n = nh_of(0);
            r.flags |= n.flags;
            if !(reject && f == Family::Inet) {
                r.nexthop = NextHop {
                    hops: 0,
                    flags: 0,
                    ..n
                };
            }
        } else {
            if info.dead {
                r.flags |= nh_flags::DEAD;
            }
            // IPv6 sibling groups carry no route-level flags (rt6_fill_node).
            if info.linkdown && f == Family::Inet {
                r.flags |= nh_flags::LINKDOWN;
            }
            r.multipath = (0..s.nhs.len()).map(nh_of).collect();
        }
        r
    }

    /// RTM_GETROUTE: an output lookup, or an input lookup when `query.iif` is set.
    pub fn route_get(&self, query: &RouteQuery) -> Result<Route, RtError> {
        self.get_route(query)
    }

    /// RTM_NEWRULE.
    pub fn rule_new(&mut self, rule: &Rule, flags: ReqFlags) -> Result<(), RtError> {
        // fib4_rule_configure: an IPv4 rule to table 0 gets a table of its own, the first id
        // no table has (IPv6 refuses table 0: "Invalid table").
        let allocates =
            rule.family == Family::Inet && rule.action == RuleAction::ToTbl && rule.table == 0;
        let with_table;
        let rule = if allocates {
            let table = (1..=u32::MAX)
                .find(|id| !self.t4.contains_key(&TableId(*id)))
                .ok_or_else(|| RtError::new(Errno::ENOBUFS))?;
            with_table = Rule {
                table,
                ..rule.clone()
            };
            &with_table
        } else {
            rule
        };
        self.rules.add(rule, flags.excl)?;
        if allocates {
            let seq = &mut self.table_seq;
            self.t4.entry(TableId(rule.table)).or_insert_with(|| {
                *seq += 1;
                fibtable::Table::new(TableId(rule.table), 32, *seq)
            });
        }
        match rule.family {
            Family::Inet => self.custom_rules4 = true,
            // fib6_rule_configure makes the rule's table.
            Family::Inet6 if rule.action == RuleAction::ToTbl && rule.table != 0 => {
                self.table6_mut(TableId(rule.table));
            }
            Family::Inet6 => {}
        }
        self.route_changed(true);
        Ok(())
    }

    /// RTM_DELRULE: attributes present in `rule` must match.
    pub fn rule_del(&mut self, rule: &Rule) -> Result<(), RtError> {
        self.rules.del(rule)?;
        self.route_changed(true);
        Ok(())
    }

    /// RTM_GETRULE dump, in priority order.
    pub fn rules(&self, family: Option<Family>) -> Vec<Rule> {
        let mut out = Vec::new();
        for (f, list) in [
            (Family::Inet, &self.rules.v4),
            (Family::Inet6, &self.rules.v6),
        ] {
            if family.is_some_and(|x| x != f) {
                continue;
            }
            for r in list {
                let mut r = r.clone();
                // A goto whose target priority has no rule is "[unresolved]".
                if r.action == RuleAction::Goto && !list.iter().any(|x| x.priority == r.goto) {
                    r.flags |= rule_flags::UNRESOLVED;
                }
                // A rule naming a link that does not exist is "[detached]".
                if r.iifname
                    .as_deref()
                    .is_some_and(|n| self.links.index_of(n).is_none())
                {
                    r.flags |= rule_flags::IIF_DETACHED;
                }
                if r.oifname
                    .as_deref()
                    .is_some_and(|n| self.links.index_of(n).is_none())
                {
                    r.flags |= rule_flags::OIF_DETACHED;
                }
                out.push(r);
            }
        }
        out
    }

    /// RTM_NEWNEXTHOP.
    pub fn nexthop_new(&mut self, nh: &NexthopObj, flags: ReqFlags) -> Result<(), RtError> {
        let r = self.nexthop_new_inner(nh, flags);
        self.commit_fast();
        r
    }

    fn nexthop_new_inner(&mut self, nh: &NexthopObj, flags: ReqFlags) -> Result<(), RtError> {
        self.nexthop_add(nh, flags)
    }

    /// RTM_DELNEXTHOP by id.
    pub fn nexthop_del(&mut self, id: u32) -> Result<(), RtError> {
        let r = self.nexthop_del_inner(id);
        self.commit_fast();
        r
    }

    fn nexthop_del_inner(&mut self, id: u32) -> Result<(), RtError> {
        // nh_valid_get_del_req: id 0 names no object.
        if id == 0 {
            return Err(RtError::msg(Errno::EINVAL, "Invalid nexthop id"));
        }
        self.nexthop_remove(NhId(id))
    }

    /// RTM_GETNEXTHOP dump, in id order.
    pub fn nexthops(&self) -> Vec<NexthopObj> {
        let now = self.now_ms();
        self.nhobjs
            .by_id
            .values()
            .map(|o| self.nhobjs.answer(o, now))
            .collect()
    }

    /// RTM_GETNEXTHOPBUCKET dump: the buckets of resilient groups (of group `id` only, of
    /// member `nhid` only, of members on device `dev` only, when given).
    pub fn nexthop_buckets(
        &self,
        id: Option<u32>,
        nhid: Option<u32>,
        dev: u32,
    ) -> Result<Vec<NexthopBucket>, RtError> {
        let dev = (dev != 0).then_some(IfIndex(dev));
        self.nhobjs
            .buckets(id.map(NhId), nhid.map(NhId), dev, self.now_ms())
    }

    /// RTM_GETNEXTHOPBUCKET for bucket `index` of resilient group `id`.
    pub fn nexthop_bucket(&self, id: u32, index: u16) -> Result<NexthopBucket, RtError> {
        self.nhobjs.bucket(NhId(id), index, self.now_ms())
    }
}

/// One stored route, as a dump walks them ([`Fib::dump_route_entries`]).
pub struct RouteEntry<'a> {
    fib: &'a Fib,
    family: Family,
    table: TableId,
    key: Key,
    entry: Entry,
}

impl RouteEntry<'_> {
    /// The route as RTM_NEWROUTE shows it.
    pub fn route(&self) -> Route {
        self.fib
            .entry_route(self.family, self.table, self.key, &self.entry)
    }

    pub fn family(&self) -> Family {
        self.family
    }

    pub fn table(&self) -> u32 {
        self.table.0
    }

    /// The destination prefix.
    pub fn dst(&self) -> Prefix {
        Prefix {
            addr: u128_ip(self.family, self.key.addr),
            len: self.key.len,
        }
    }

    pub fn tos(&self) -> u8 {
        self.entry.tos
    }

    /// Whether the route has a source prefix (IPv6 `from`).
    pub fn has_src(&self) -> bool {
        self.entry.src().is_some()
    }

    /// The shared route information this route uses. Two routes of one family and table,
    /// without a source prefix, whose `info` is equal differ only in destination and tos,
    /// for as long as [`Fib::gen`] is unchanged.
    pub fn info(&self) -> u32 {
        self.entry.info.raw()
    }
}

/// Where a route dump stands ([`Fib::dump_routes`]); `Default` is the start.
#[derive(Debug, Clone, Default)]
pub struct RouteDumpPos {
    /// 0 IPv4, 1 IPv6, then done.
    family: usize,
    /// Index in the family's table order.
    table: usize,
    /// IPv4: the prefix to resume at and the index of its next entry.
    key: Option<Key>,
    /// IPv4: see `key`; IPv6: the next index in `order6`.
    entry: usize,
    /// IPv6: the current table's order.
    order6: Option<Vec<(Key, Entry)>>,
}

impl RouteDumpPos {
    fn next_table(&mut self) {
        self.table += 1;
        self.key = None;
        self.entry = 0;
        self.order6 = None;
    }

    fn next_family(&mut self) {
        self.next_table();
        self.family += 1;
        self.table = 0;
    }
}

/// One IPv6 table in the fib6 walker's order: at each prefix node first its source subtree
/// (source-specific routes, themselves children before parents), then the more specific
/// prefixes, then the node's own routes (so source-less routes come after every more specific
/// prefix, and source-specific ones before them).
fn order6(infos: &Infos, t: &Table) -> Vec<(Key, Entry)> {
    let mut out = Vec::new();
    let mut keys: Vec<Key> = t.iter().map(|(k, _)| *k).collect();
    keys.sort_by(|a, b| a.addr.cmp(&b.addr).then(a.len.cmp(&b.len)));
    let own = |k: &Key, out: &mut Vec<(Key, Entry)>| {
        if let Some(es) = t.get(k) {
            let own: Vec<&Entry> = es.iter().filter(|e| e.src().is_none()).collect();
            out.extend(dumped6(infos, own).map(|e| (*k, *e)));
        }
    };
    let mut open: Vec<Key> = Vec::new();
    for k in keys {
        while let Some(top) = open.last() {
            if top.contains(k.addr, 128) && top.len <= k.len {
                break;
            }
            own(top, &mut out);
            open.pop();
        }
        if let Some(es) = t.get(&k) {
            let mut s: Vec<&Entry> = es.iter().filter(|e| e.src().is_some()).collect();
            s.sort_by(|a, b| {
                let (x, y) = (a.src().unwrap_or(k), b.src().unwrap_or(k));
                x.last(128).cmp(&y.last(128)).then(y.len.cmp(&x.len))
            });
            out.extend(dumped6(infos, s).map(|e| (k, *e)));
        }
        open.push(k);
    }
    while let Some(top) = open.pop() {
        own(&top, &mut out);
    }
    out
}

/// The entries of one IPv6 prefix the kernel's dump shows: after a sibling group it jumps to
/// the group's last route, passing over the routes of the run added between its siblings
/// (`Entry::hops_before`); they stay in the table, lookups see them.
fn dumped6<'a>(infos: &'a Infos, es: Vec<&'a Entry>) -> impl Iterator<Item = &'a Entry> + 'a {
    let mut group: Option<&Entry> = None;
    es.into_iter().filter(move |e| {
        if group.is_some_and(|g| crate::route::between_siblings(infos, g, e).is_some()) {
            return false;
        }
        let s = &infos.get(e.info).spec;
        if s.nhs.len() > 1 && s.nhid.is_none() {
            group = Some(e);
        }
        true
    })
}
