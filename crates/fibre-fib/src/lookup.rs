//! Lookups: one table (fib_table_lookup / fib6_table_lookup), the rules walk (fib_lookup),
//! multipath selection, and the data plane's entry point [`crate::Fib::lookup_output`].
//!
//! Invariants and rules kept from the kernel:
//! - Within a table the longest matching prefix wins, but an entry is skipped (and shorter
//!   prefixes tried) when its tos does not match, its scope is below the flow's minimum scope,
//!   it is dead, or none of its next hops is usable (dead, or not on the requested oif).
//! - A reject route ends the lookup with its error; `throw` ends the table's lookup with
//!   "try the next rule" (EAGAIN).
//! - Rules are walked in priority order; `goto` jumps to the first rule at or after its target
//!   priority, `nop` continues, `suppress_prefixlength` rejects too-short results.
//! - Until the first IPv4 rule is added, IPv4 tables local and main act as one table (the
//!   kernel's merged trie), then default: see `merged4`.
//! - No lookup allocates or builds a dst: results point at next-hop state built beforehand.

use crate::dst::{Dst, LookupError};
use crate::fibtable::Table;
use crate::flow::{tos_matches, Flow, LinkdownIgnored, LookupFlags, IPTOS_RT_MASK, NONE_IGNORED};
use crate::ids::{IfIndex, NhId, TableId};
use crate::nexthop::NhObjs;
use crate::prefix::Key;
use crate::route::{Entry, Info, Infos};
use crate::rule::Rules;
use crate::types::{nh_flags, scope, Family, RouteType, RuleAction};
use crate::Fib;

/// lo's 127.0.0.0/8, a local route every instance has: leaving it out of the merged-tables
/// test (`merged4`) keeps ordinary lookups on the per-table path; what that gives up is a main
/// route inside 127/8, which only martian destinations could match.
const LOOPBACK_NET4: u32 = 0x7f00_0000;

/// A lookup's outcome: which stored route and which of its next hops.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Res {
    pub table: TableId,
    pub key: Key,
    pub entry: Entry,
    pub nh: usize,
    pub rtype: RouteType,
}

/// Outcome of one table: found, rejected, or "continue with the next rule".
pub(crate) enum TableResult {
    Found(Res),
    Reject(LookupError),
    Continue,
}

/// What a plain flow (tos 0, no oif, universe scope, no source) stops at in one key's
/// entries: the entry compiled for the key (None: fall through to shorter prefixes), and how
/// many entries the compiled answer cannot stand for.
pub(crate) fn winner(
    infos: &Infos,
    nhobjs: &NhObjs,
    family: Family,
    entries: &[Entry],
) -> (Option<Entry>, u32) {
    let v6 = family == Family::Inet6;
    let skip = |e: &Entry| if v6 { e.src().is_some() } else { e.tos != 0 };
    let special = entries.iter().filter(|e| skip(e)).count() as u32;
    let flow = Flow::empty();
    if v6 {
        let in_node = |e: &Entry| !skip(e);
        let w = pick6(
            infos,
            nhobjs,
            &NONE_IGNORED,
            entries,
            in_node,
            &flow,
            LookupFlags::default(),
            |_| true,
        );
        return (w.map(|(e, _)| *e), special);
    }
    for e in entries {
        if skip(e) {
            continue;
        }
        let info = infos.get(e.info);
        let rtype = effective_type(nhobjs, info);
        if rtype == RouteType::Throw || LookupError::of_type(rtype).is_some() {
            return (Some(*e), special);
        }
        if info.dead {
            continue;
        }
        if first_good_nh(info, &flow, LookupFlags::default(), v6, &NONE_IGNORED).is_some() {
            return (Some(*e), special);
        }
    }
    (None, special)
}

/// A usable next hop of `info` for `flow`, in next-hop order.
#[inline]
pub(crate) fn first_good_nh(
    info: &Info,
    flow: &Flow,
    flags: LookupFlags,
    v6: bool,
    ign: &LinkdownIgnored,
) -> Option<usize> {
    for (i, (spec, st)) in info.spec.nhs.iter().zip(&info.nh).enumerate() {
        if st.flags & nh_flags::DEAD != 0 || ign.skips(flags, st.flags, spec.oif) {
            continue;
        }
        if flow.oif != 0 && flow.oif != spec.oif.0 && (!v6 || flags.strict_oif) {
            continue;
        }
        return Some(i);
    }
    None
}

/// rt6_select over one node's routes: the kernel scores each usable next hop
/// (rt6_score_route: router preference above "on the flow's oif"; under RT6_LOOKUP_F_IFACE a
/// next hop on another device does not qualify, and reject routes sit on `lo`) and keeps the
/// first best score among the routes of the node's first metric; only when none of those
/// qualifies does it score all the remaining routes, of every metric, together.
///
/// The routes are taken in the kernel's leaf order, where a sibling group is separate routes:
/// a route of the group's run added between two siblings (`Entry::hops_before`) is scored
/// between them. `in_node` selects the node's entries, `live` says whether a route may be used
/// at all (not expired).
#[allow(clippy::too_many_arguments)]
fn pick6<'a>(
    infos: &Infos,
    nhobjs: &NhObjs,
    ign: &LinkdownIgnored,
    entries: &'a [Entry],
    in_node: impl Fn(&Entry) -> bool,
    flow: &Flow,
    flags: LookupFlags,
    live: impl Fn(&Entry) -> bool,
) -> Option<(&'a Entry, usize)> {
    let mut sel = Select6 {
        infos,
        nhobjs,
        ign,
        flow,
        flags,
        first_metric: None,
        first_run: true,
        best: None,
    };
    // The sibling group of the run being walked.
    let mut group: Option<&Entry> = None;
    for (i, e) in entries.iter().enumerate() {
        if !in_node(e) {
            continue;
        }
        if group.is_some_and(|g| crate::route::between_siblings(infos, g, e).is_some()) {
            // Scored with the group, between its siblings.
            continue;
        }
        let spec = &infos.get(e.info).spec;
        let metric = spec.priority;
        let n = spec.nhs.len();
        if n < 2 || spec.nhid.is_some() {
            match sel.visit(e, None, &live) {
                Visit::Go => continue,
                Visit::Stop => break,
                Visit::Take => return Some((e, 0)),
            }
        }
        group = Some(e);
        for h in 0..n {
            let inside = entries[i + 1..].iter().filter(|x| {
                in_node(x)
                    && x.hops_before as usize == h
                    && infos.get(x.info).spec.priority == metric
            });
            for x in inside {
                match sel.visit(x, None, &live) {
                    Visit::Go => {}
                    Visit::Stop => return sel.best(),
                    Visit::Take => return Some((x, 0)),
                }
            }
            if let Visit::Stop = sel.visit(e, Some(h), &live) {
                return sel.best();
            }
        }
    }
    sel.best()
}

/// What `Select6::visit` says about the walk.
enum Visit {
    Go,
    /// The first metric's routes are done and one of them qualified.
    Stop,
    /// A route through a blackhole object: taken as soon as it is reached.
    Take,
}

/// The state of an rt6_select walk (see `pick6`).
struct Select6<'a, 'f> {
    infos: &'f Infos,
    nhobjs: &'f NhObjs,
    ign: &'f LinkdownIgnored,
    flow: &'f Flow,
    flags: LookupFlags,
    first_metric: Option<u32>,
    first_run: bool,
    /// The best (score, route, next hop) so far.
    best: Option<(u8, &'a Entry, usize)>,
}

impl<'a> Select6<'a, '_> {
    fn best(&self) -> Option<(&'a Entry, usize)> {
        self.best.map(|(_, e, i)| (e, i))
    }

    /// Scores next hop `only` of `e` (all of them when None).
    fn visit(
        &mut self,
        e: &'a Entry,
        only: Option<usize>,
        live: &impl Fn(&Entry) -> bool,
    ) -> Visit {
        let info = self.infos.get(e.info);
        let metric = *self.first_metric.get_or_insert(info.spec.priority);
        if self.first_run && info.spec.priority != metric {
            if self.best.is_some() {
                return Visit::Stop;
            }
            self.first_run = false;
        }
        if info.dead || !live(e) {
            return Visit::Go;
        }
        // A route through a group object takes the first member that improves the score.
        let object = info.spec.nhid.is_some();
        if object && effective_type(self.nhobjs, info) == RouteType::Blackhole {
            return Visit::Take;
        }
        // IPV6_DECODE_PREF: low 1, medium 2, high 3.
        let pref = (info.spec.pref.unwrap_or(0) ^ 2) & 3;
        for (i, (n, st)) in info.spec.nhs.iter().zip(&info.nh).enumerate() {
            if only.is_some_and(|h| h != i)
                || st.flags & nh_flags::DEAD != 0
                || self.ign.skips(self.flags, st.flags, n.oif)
            {
                continue;
            }
            let on_oif = self.flow.oif == 0 || n.oif == IfIndex(self.flow.oif);
            if !on_oif && self.flags.strict_oif {
                continue;
            }
            let score = (pref << 2) | if on_oif { 2 } else { 0 };
            if self.best.is_none_or(|(b, _, _)| score > b) {
                self.best = Some((score, e, i));
                if object {
                    break;
                }
            }
        }
        Visit::Go
    }
}

/// The longest source prefix length below `below` among the source-specific entries that
/// cover `src` (a walk up the kernel's source trie).
fn longest_src_below(entries: &[Entry], src: u128, below: u8) -> Option<u8> {
    entries
        .iter()
        .filter_map(|e| e.src())
        .filter(|s| s.len < below && s.contains(src, 128))
        .map(|s| s.len)
        .max()
}

/// The type a route acts as: a route using a blackhole next-hop object is a blackhole.
#[inline]
fn effective_type(nhobjs: &NhObjs, info: &Info) -> RouteType {
    if let Some(id) = info.spec.nhid {
        if nhobjs.is_blackhole(id) {
            return RouteType::Blackhole;
        }
    }
    info.spec.rtype
}

impl Fib {
    pub(crate) fn table(&self, family: Family, id: TableId) -> Option<&Table> {
        match family {
            Family::Inet => self.t4.get(&id).map(|t| &**t),
            Family::Inet6 => self.t6.get(&id).map(|t| &**t),
        }
    }

    /// The compiled answer, when it stands for this flow: no oif, universe scope, no entries
    /// in the table the compiled answers skip for it, and no change pending compilation
    /// (lookups made in the middle of a mutation walk the map).
    #[inline]
    fn fast_applies(t: &Table, flow: &Flow, v6: bool) -> bool {
        t.is_clean()
            && flow.oif == 0
            && flow.scope == scope::UNIVERSE
            && (t.special_entries() == 0 || (!v6 && flow.tos & IPTOS_RT_MASK == 0))
    }

    /// The table's answer through its compiled structure.
    #[inline]
    fn fast_table_lookup(
        &self,
        t: &Table,
        flow: &Flow,
        flags: LookupFlags,
        v6: bool,
    ) -> Option<TableResult> {
        let Some((key, e)) = t.fast_lookup(flow.dst) else {
            return Some(TableResult::Continue);
        };
        let info = self.infos.get(e.info);
        if info.spec.expires.is_some() && self.info_expired(e.info) {
            // Expired, not yet reclaimed: the walk skips it and finds what lies below.
            return None;
        }
        let rtype = self.effective_type(info);
        if rtype == RouteType::Throw {
            return Some(TableResult::Continue);
        }
        if let Some(err) = LookupError::of_type(rtype) {
            return Some(TableResult::Reject(err));
        }
        Some(match first_good_nh(info, flow, flags, v6, &NONE_IGNORED) {
            Some(nh) => TableResult::Found(Res {
                table: t.id,
                key,
                entry: e,
                nh,
                rtype,
            }),
            None => TableResult::Continue,
        })
    }

    /// Recompiles the winners of every changed key (called before a mutation returns), and
    /// the compiled structures unless a batch defers that to its end ([`Fib::begin_batch`]).
    pub(crate) fn commit_fast(&mut self) {
        self.commit_fast_from(None);
    }

    /// `commit_fast`, flushing compiled structures from `src`'s tables when given (see
    /// [`Fib::end_batch_from`]).
    pub(crate) fn commit_fast_from(&mut self, src: Option<&Fib>) {
        self.reap_released();
        let mut moved = self.infos.take_moved();
        if !moved.is_empty() {
            moved.sort_unstable();
            moved.dedup();
            for t in self.t4.values_mut().chain(self.t6.values_mut()) {
                t.mark_dirty_using(&moved);
            }
        }
        let (infos, nhobjs) = (&self.infos, &self.nhobjs);
        for (family, tables) in [(Family::Inet, &mut self.t4), (Family::Inet6, &mut self.t6)] {
            let twins = src.map(|f| if family == Family::Inet { &f.t4 } else { &f.t6 });
            for t in tables.values_mut() {
                if t.is_clean() {
                    continue;
                }
                // Inside a batch of route changes a table usually has only compiled updates
                // queued: nothing to sync or commit, and the flush waits.
                if t.has_uncommitted() {
                    crate::fibtable::leaf6::sync(t, infos);
                    t.commit(|es| winner(infos, nhobjs, family, es));
                }
                if !self.batching {
                    match twins.and_then(|ts| ts.get(&t.id)) {
                        Some(twin) => t.flush_compiled_from(twin),
                        None => t.flush_compiled(),
                    }
                }
            }
        }
    }

    /// fib_table_lookup for IPv4.
    pub(crate) fn table_lookup4(&self, t: &Table, flow: &Flow, flags: LookupFlags) -> TableResult {
        if self.confs.ignored()[0].is_empty() && Self::fast_applies(t, flow, false) {
            if let Some(r) = self.fast_table_lookup(t, flow, flags, false) {
                return r;
            }
        }
        // The kernel's trie keeps every prefix with one network address in one leaf; a route
        // through a next-hop object with no usable next hop ends the search of its leaf
        // (fib_table_lookup's `goto miss`), shorter prefixes of that address included.
        let mut missed_leaf: Option<u128> = None;
        for (key, entries) in t.lpm(flow.dst) {
            if missed_leaf == Some(key.addr) {
                continue;
            }
            for e in entries {
                if let Some(r) = self.entry_result4(t.id, key, e, flow, flags) {
                    return r;
                }
                let info = self.infos.get(e.info);
                let considered = tos_matches(e.tos, flow.tos)
                    && info.spec.scope >= flow.scope
                    && !info.dead
                    && !(info.spec.expires.is_some() && self.info_expired(e.info));
                if considered && info.spec.nhid.is_some() {
                    missed_leaf = Some(key.addr);
                    break;
                }
            }
        }
        TableResult::Continue
    }

    /// What one IPv4 entry makes of `flow`: `None` when it is skipped (tos, scope, dead, no
    /// usable next hop), else the table's outcome (a throw continues with the next rule).
    #[inline]
    fn entry_result4(
        &self,
        table: TableId,
        key: Key,
        e: &Entry,
        flow: &Flow,
        flags: LookupFlags,
    ) -> Option<TableResult> {
        if !tos_matches(e.tos, flow.tos) {
            return None;
        }
        let info = self.infos.get(e.info);
        if info.spec.scope < flow.scope {
            return None;
        }
        if info.spec.expires.is_some() && self.info_expired(e.info) {
            return None;
        }
        let rtype = self.effective_type(info);
        if rtype == RouteType::Throw {
            return Some(TableResult::Continue);
        }
        if let Some(err) = LookupError::of_type(rtype) {
            return Some(TableResult::Reject(err));
        }
        if info.dead {
            return None;
        }
        first_good_nh(info, flow, flags, false, &self.confs.ignored()[0]).map(|nh| {
            TableResult::Found(Res {
                table,
                key,
                entry: *e,
                nh,
                rtype,
            })
        })
    }

    /// Whether IPv4 lookups must walk tables local and main as one: until the first IPv4 rule
    /// is added the kernel keeps both in one trie (fib_unmerge splits them), so a route of
    /// main longer than a matching route of local wins. That differs from the rules' order
    /// only when local holds prefixes shorter than /32 besides lo's 127.0.0.0/8.
    pub(crate) fn merged4(&self) -> Option<(&Table, &Table)> {
        if self.custom_rules4 {
            return None;
        }
        let local = self.t4.get(&TableId::LOCAL)?;
        let main = self.t4.get(&TableId::MAIN)?;
        let lo_net = Key::new(u128::from(LOOPBACK_NET4), 8, 32);
        let competes = local
            .lengths()
            .iter()
            .any(|&l| l < 32 && !(l == 8 && local.key_count(8) == 1 && local.contains(&lo_net)));
        competes.then_some((local, main))
    }

    /// The kernel's fib_lookup without custom rules over the merged local+main trie: the
    /// longest prefix of either table (at equal prefixes local's entries first, as the trie
    /// orders aliases by table id), then table default when that finds nothing or a throw.
    fn merged_lookup4(
        &self,
        local: &Table,
        main: &Table,
        flow: &Flow,
        flags: LookupFlags,
    ) -> Result<Res, LookupError> {
        let mut l = local.lpm(flow.dst).peekable();
        let mut m = main.lpm(flow.dst).peekable();
        let merged = loop {
            let from_local = match (l.peek(), m.peek()) {
                (Some((a, _)), Some((b, _))) => a.len >= b.len,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break TableResult::Continue,
            };
            let (tid, next) = if from_local {
                (TableId::LOCAL, l.next())
            } else {
                (TableId::MAIN, m.next())
            };
            let Some((key, entries)) = next else {
                break TableResult::Continue;
            };
            if let Some(r) = entries
                .iter()
                .find_map(|e| self.entry_result4(tid, key, e, flow, flags))
            {
                break r;
            }
        };
        let outcome = match merged {
            TableResult::Continue => match self.t4.get(&TableId::DEFAULT) {
                Some(t) => self.table_lookup4(t, flow, flags),
                None => TableResult::Continue,
            },
            r => r,
        };
        match outcome {
            TableResult::Found(r) => Ok(r),
            TableResult::Reject(e) => Err(e),
            TableResult::Continue => Err(LookupError::NoRoute),
        }
    }

    /// fib6_table_lookup: the kernel's walk of its destination trie and, below a destination
    /// with source-specific routes, that destination's source trie (fib6_node_lookup, then
    /// fib6_backtrack while the node reached has no usable route).
    ///
    /// Kernel rules kept (checked in a namespace):
    /// - The first node: the longest destination whose routes are source-less, or that has
    ///   source-specific routes of which one covers the flow's source (then the longest such
    ///   source). A destination with source-specific routes none of which covers the source is
    ///   passed over, its source-less routes with it; so is a destination with only
    ///   source-specific routes whose leaf is a borrowed route not covering the flow's
    ///   destination (`leaf6`). When nothing is found the table root
    ///   (`::/0` without source) is the node, so source-less default routes are never shadowed.
    /// - Backtracking from a node without a usable route: shorter covering sources of the same
    ///   destination, then that destination's source-less routes, then the shorter destinations,
    ///   each with its covering sources first and its source-less routes last.
    pub(crate) fn table_lookup6(&self, t: &Table, flow: &Flow, flags: LookupFlags) -> TableResult {
        if self.confs.ignored()[1].is_empty() && Self::fast_applies(t, flow, true) {
            if let Some(r) = self.fast_table_lookup(t, flow, flags, true) {
                return r;
            }
        }
        // Whether the first node was found (fib6_node_lookup) and the walk is backtracking.
        let mut found = false;
        for (key, entries) in t.lpm(flow.dst) {
            let subtree = entries.iter().any(|e| e.src().is_some());
            let best_src = longest_src_below(entries, flow.src, u8::MAX);
            if !found
                && subtree
                && (best_src.is_none() || crate::fibtable::leaf6::passes_over(t, key, flow.dst))
            {
                continue;
            }
            found = true;
            let mut src = best_src;
            while let Some(sl) = src {
                if let Some(r) = self.select6(t, key, entries, Some(sl), flow, flags) {
                    return r;
                }
                src = longest_src_below(entries, flow.src, sl);
            }
            if let Some(r) = self.select6(t, key, entries, None, flow, flags) {
                return r;
            }
        }
        if !found {
            let root = Key::new(0, 0, 128);
            if let Some(entries) = t.get(&root) {
                if let Some(r) = self.select6(t, root, entries, None, flow, flags) {
                    return r;
                }
            }
        }
        TableResult::Continue
    }

    /// rt6_select on one node (see `pick6`): the routes of `key` with source prefix length
    /// `src` (None: the source-less ones) that cover the flow's source. None when no route is
    /// usable.
    fn select6(
        &self,
        t: &Table,
        key: Key,
        entries: &[Entry],
        src: Option<u8>,
        flow: &Flow,
        flags: LookupFlags,
    ) -> Option<TableResult> {
        let in_node = |e: &Entry| match (e.src(), src) {
            (None, None) => true,
            (Some(s), Some(sl)) => s.len == sl && s.contains(flow.src, 128),
            _ => false,
        };
        let live =
            |e: &Entry| self.infos.get(e.info).spec.expires.is_none() || !self.info_expired(e.info);
        let (e, nh) = pick6(
            &self.infos,
            &self.nhobjs,
            &self.confs.ignored()[1],
            entries,
            in_node,
            flow,
            flags,
            live,
        )?;
        let rtype = self.effective_type(self.infos.get(e.info));
        if let Some(err) = LookupError::of_type(rtype) {
            return Some(TableResult::Reject(err));
        }
        if rtype == RouteType::Throw {
            return Some(TableResult::Continue);
        }
        Some(TableResult::Found(Res {
            table: t.id,
            key,
            entry: *e,
            nh,
            rtype,
        }))
    }

    pub(crate) fn effective_type(&self, info: &Info) -> RouteType {
        effective_type(&self.nhobjs, info)
    }

    pub(crate) fn table_lookup(
        &self,
        family: Family,
        t: &Table,
        flow: &Flow,
        flags: LookupFlags,
    ) -> TableResult {
        match family {
            Family::Inet => self.table_lookup4(t, flow, flags),
            Family::Inet6 if flags.iif_as_oif => {
                let flow = Flow {
                    oif: flow.iif,
                    ..*flow
                };
                self.table_lookup6(t, &flow, flags)
            }
            Family::Inet6 => self.table_lookup6(t, flow, flags),
        }
    }

    /// fib_lookup: the rules walk. `Err(NoRoute)` when no rule produced a result.
    pub(crate) fn fib_lookup(
        &self,
        family: Family,
        flow: &Flow,
        flags: LookupFlags,
    ) -> Result<Res, LookupError> {
        if family == Family::Inet {
            if let Some((local, main)) = self.merged4() {
                return self.merged_lookup4(local, main, flow, flags);
            }
        }
        let rules = self.rules.list(family);
        let bits = family.max_len();
        let mut i = 0;
        while i < rules.len() {
            let r = &rules[i];
            i += 1;
            if !Rules::matches(r, flow, bits, |n| self.links.index_of(n).map(|i| i.0)) {
                continue;
            }
            let tid = match r.action {
                RuleAction::Goto => {
                    // The target is the first rule with exactly the goto priority; a goto
                    // whose target does not exist is unresolved and skipped.
                    let target = r
                        .goto
                        .and_then(|t| rules.iter().position(|x| x.priority == Some(t)));
                    if let Some(j) = target {
                        i = j;
                    }
                    continue;
                }
                RuleAction::Nop => continue,
                RuleAction::Unreachable => return Err(LookupError::NoRoute),
                RuleAction::Prohibit => return Err(LookupError::Prohibit),
                RuleAction::Blackhole | RuleAction::Unspec => return Err(LookupError::Blackhole),
                RuleAction::ToTbl => TableId(r.table),
            };
            let Some(t) = self.table(family, tid) else {
                continue;
            };
            match self.table_lookup(family, t, flow, flags) {
                TableResult::Continue => continue,
                TableResult::Reject(e) => return Err(e),
                TableResult::Found(res) => {
                    if let Some(sp) = r.suppress_prefixlen {
                        if (res.key.len as u32) <= sp {
                            continue;
                        }
                    }
                    return Ok(res);
                }
            }
        }
        Err(LookupError::NoRoute)
    }

    /// fib_select_multipath: the first live next hop whose upper bound is >= the kernel's flow
    /// hash (`mphash`), preferring for an IPv4 output lookup one whose source address is the
    /// flow's; through a resilient group, the member in the hash's bucket
    /// (nexthop_select_path_res).
    pub(crate) fn select_multipath(&self, res: &mut Res, flow: &Flow) {
        res.nh = self.multipath_nh(self.infos.get(res.entry.info), res.nh, flow);
    }

    /// The next hop of `info` [`Fib::select_multipath`] chooses for `flow`, `nh` when it
    /// chooses none.
    #[inline]
    pub(crate) fn multipath_nh(&self, info: &Info, nh: usize, flow: &Flow) -> usize {
        if info.nh.len() <= 1 || flow.oif != 0 {
            return nh;
        }
        let h = crate::mphash::flow_hash(&self.settings().multipath, info.spec.family, flow);
        if let Some(id) = info.spec.nhid {
            if let Some(member) = self.nhobjs.select_res(id, h, self.now_ms()) {
                // A route through a group has the group's members as its next hops, in order.
                return self
                    .nhobjs
                    .get(id)
                    .and_then(|g| g.group.iter().position(|m| NhId(m.id) == member))
                    .unwrap_or(nh);
            }
        }
        // The first live next hop with the best score: 1 within its bound, 2 more when its own
        // source address (nh_saddr) is the flow's, which only an IPv4 output lookup with a
        // source through a route of its own next hops asks (ipv4's "prefer multipath nexthop
        // that matches source address", 32607a332cfe, with its scoring fix).
        let saddr = match (info.spec.family, info.spec.nhid) {
            (Family::Inet, None) if flow.iif == crate::link::LOOPBACK_IFINDEX => flow.src as u32,
            _ => 0,
        };
        let own = |n: &crate::route::NhSpec| {
            let gw = match n.gw {
                Some(std::net::IpAddr::V4(g)) => u32::from(g),
                _ => 0,
            };
            crate::srcsel::select_v4(&self.links, n.oif, gw, info.spec.scope) == Some(saddr)
        };
        let h = h as i64;
        let mut best: Option<(usize, u8)> = None;
        for (i, (n, s)) in info.spec.nhs.iter().zip(&info.nh).enumerate() {
            if s.upper_bound < 0 {
                continue;
            }
            let score = 2 * u8::from(saddr != 0 && own(n)) + u8::from(h <= s.upper_bound);
            if best.is_none_or(|(_, b)| score > b) {
                best = Some((i, score));
            }
            if score == 3 || (saddr == 0 && score == 1) {
                break;
            }
        }
        best.map_or(nh, |(i, _)| i)
    }

    /// The data plane's entry point: an output lookup through the rules, multipath selection
    /// included, answered with the ready [`Dst`] cached on the chosen next hop.
    pub fn lookup_output(&self, family: Family, flow: &Flow) -> Result<&Dst, LookupError> {
        let mut f = *flow;
        if f.iif == 0 {
            f.iif = crate::link::LOOPBACK_IFINDEX;
        }
        let mut res = self.fib_lookup(family, &f, LookupFlags::packet())?;
        self.select_multipath(&mut res, &f);
        Ok(&self.infos.get(res.entry.info).nh[res.nh].dst)
    }
}
