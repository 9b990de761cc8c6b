//! The leaf the kernel's IPv6 radix tree keeps on a destination node that has source-specific
//! routes and no source-less one, and the lookups it changes.
//!
//! The kernel's `fib6_node` names its key through a route: the node's `leaf`. A node whose
//! routes all have a source (they live in its source subtree) has no route of its own in the
//! destination tree, so its leaf is some route: the source route last added there, or, after
//! the node lost its last source-less route (fib6_repair_tree) or the route it pointed to
//! (fib6_purge_rt), a route *borrowed* from a child node (fib6_find_prefix: the left child's
//! leaf, else the right child's, else a route of its own source subtree). The first search of
//! a lookup (fib6_node_lookup) tests the destination against the leaf's prefix, not the
//! node's: a destination inside the node but outside the borrowed route's prefix passes over
//! the node and its source routes. Backtracking (fib6_backtrack) does not test it.
//!
//! What decides a leaf is the tree's history, so it is kept, per node, from the moment the
//! table's first source route is added (before that no lookup reads one): for destination
//! nodes with source routes ([`SrcLeaf`]) and for branch nodes (routeless nodes where keys
//! diverge, whose leaves such nodes borrow). Each changes as the kernel changes it:
//! - a source route added at a node without source-less routes becomes its leaf (fib6_add_1
//!   empties the leaf of a node it meets exactly, and fib6_add fills an empty one with the
//!   route being added);
//! - a new branch node takes the leaf of the node it splits from (fib6_add_1);
//! - a route refused after the search met such a node (a duplicate, a `change` that matches
//!   nothing), the loss of a node's last source-less route or of a branch node's child, make
//!   the node borrow anew (fib6_add's error path, fib6_repair_tree);
//! - so does the deletion of the route a node points to (fib6_purge_rt).
//!
//! A route is named by its node, its source prefix and its metric ([`LeafRef`]): two routes
//! with all three equal differ only in next hops, and a leaf's prefix is all a lookup reads.
//! A branch node made before tracking began is taken to hold what it would borrow now.
//!
//! Called by the single writer only: the table notes which keys appear, change and vanish
//! ([`Leaves::note`]); [`attempt`] follows every IPv6 route add, replace or change that reached
//! the table; [`sync`] replays the notes before the table's changes are committed.

use std::collections::BTreeMap;

use super::Table;
use crate::prefix::Key;
use crate::route::{Entry, Infos};

/// A route, as a leaf names it: its destination node, source prefix and metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeafRef {
    pub node: Key,
    pub src: Option<Key>,
    pub metric: u32,
}

/// The kernel's state of one destination node that has source-specific routes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SrcLeaf {
    /// Whether the node also has source-less routes (RTN_RTINFO): its leaf is then its first.
    pub rtinfo: bool,
    /// The node's leaf while it has no source-less route.
    pub leaf: LeafRef,
}

/// What happened to a key of the table, as [`Leaves::note`] records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyEvent {
    Inserted,
    Changed,
    Removed,
}

/// The leaves of one IPv6 table that lookups can read, and the key changes not yet applied.
#[derive(Debug, Default)]
pub(crate) struct Leaves {
    /// Whether the table has had a source route (until then nothing is tracked).
    track: bool,
    src: BTreeMap<Key, SrcLeaf>,
    branch: BTreeMap<Key, LeafRef>,
    /// How many nodes of either map have each prefix length: the lengths a path probes.
    lens: Vec<u32>,
    log: Vec<(Key, KeyEvent)>,
}

impl Leaves {
    /// Records a change of `key` for the next [`sync`].
    #[inline]
    pub fn note(&mut self, key: Key, ev: KeyEvent) {
        if self.track {
            self.log.push((key, ev));
        }
    }

    /// Whether changes wait for the next [`sync`].
    #[inline]
    pub fn has_changes(&self) -> bool {
        !self.log.is_empty()
    }

    fn count(&mut self, len: u8, up: bool) {
        if self.lens.is_empty() {
            self.lens = vec![0; 129];
        }
        if up {
            self.lens[len as usize] += 1;
        } else {
            self.lens[len as usize] -= 1;
        }
    }

    fn set_src(&mut self, key: Key, s: SrcLeaf) {
        if self.src.insert(key, s).is_none() {
            self.count(key.len, true);
        }
    }

    fn del_src(&mut self, key: Key) {
        if self.src.remove(&key).is_some() {
            self.count(key.len, false);
        }
    }

    fn set_branch(&mut self, key: Key, leaf: LeafRef) {
        if self.branch.insert(key, leaf).is_none() {
            self.count(key.len, true);
        }
    }

    fn del_branch(&mut self, key: Key) -> bool {
        let had = self.branch.remove(&key).is_some();
        if had {
            self.count(key.len, false);
        }
        had
    }

    /// The tracked nodes on the path from the root to `key`, `key` included.
    fn on_path(&self, key: Key) -> impl Iterator<Item = Key> + '_ {
        (0..=key.len)
            .filter(|&l| self.lens.get(l as usize).is_some_and(|&c| c > 0))
            .map(move |l| prefix(key, l))
            .filter(|p| self.src.contains_key(p) || self.branch.contains_key(p))
    }
}

/// What a route add, replace or change did at its node, for [`attempt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Added.
    Added,
    /// Refused after the tree search met the destination node (a duplicate, a `change` that
    /// matches no route or no source node).
    Refused,
    /// Refused before the tree was searched, or where the table has no node for it.
    Untouched,
}

/// Whether the first search of a lookup for `dst` passes over `key`, a node whose entries
/// have sources and no source-less route, because its leaf is a borrowed route whose prefix
/// does not cover `dst`.
pub(crate) fn passes_over(t: &Table, key: Key, dst: u128) -> bool {
    t.leaves
        .src
        .get(&key)
        .is_some_and(|s| !s.rtinfo && s.leaf.node != key && !s.leaf.node.contains(dst, 128))
}

/// Records what a route add, replace or change with source `src` and metric `metric` did to
/// the leaf of node `key` of table `t`.
pub(crate) fn attempt(
    t: &mut Table,
    infos: &Infos,
    key: Key,
    src: Option<Key>,
    metric: u32,
    outcome: Outcome,
) {
    if key.len == 0 || outcome == Outcome::Untouched {
        return;
    }
    if src.is_some() && outcome == Outcome::Added {
        t.leaves.track = true;
    }
    if !t.leaves.track {
        return;
    }
    // Key changes of this request first, so the node's place in the tree is current.
    sync(t, infos);
    let Some(entries) = t.get(&key) else {
        // A branch node met by a refused `change`: repaired.
        if outcome == Outcome::Refused && is_branch(t, key) {
            let leaf = find_prefix(t, infos, key);
            t.leaves.set_branch(key, leaf);
        }
        return;
    };
    let rtinfo = entries.iter().any(|e| e.src().is_none());
    let has_src = entries.iter().any(|e| e.src().is_some());
    match (src, outcome) {
        (Some(s), Outcome::Added) if has_src => {
            let own = LeafRef {
                node: key,
                src: Some(s),
                metric,
            };
            let mut e = t
                .leaves
                .src
                .get(&key)
                .copied()
                .unwrap_or(SrcLeaf { rtinfo, leaf: own });
            if !rtinfo {
                e.leaf = own;
            }
            t.leaves.set_src(key, e);
        }
        (_, Outcome::Refused) if has_src && !rtinfo => {
            let leaf = find_prefix(t, infos, key);
            if let Some(e) = t.leaves.src.get_mut(&key) {
                e.leaf = leaf;
            }
        }
        _ => {}
    }
}

/// Applies the noted key changes of `t` to its leaves, in order: a new key may split a branch
/// node off, a vanished one repairs the nodes above it; then every node whose leaf route is
/// gone (on the paths of the changed keys) borrows anew, and every source-route node that lost
/// its last source-less route too.
pub(crate) fn sync(t: &mut Table, infos: &Infos) {
    if !t.leaves.track {
        return;
    }
    let log = std::mem::take(&mut t.leaves.log);
    for &(key, ev) in &log {
        match ev {
            KeyEvent::Inserted => inserted(t, infos, key),
            KeyEvent::Removed => removed(t, infos, key),
            KeyEvent::Changed => {}
        }
    }
    // Children before parents: a node that borrows anew reads its children's current leaves.
    // Only nodes on the paths of changed keys can have lost a route or a child.
    let mut changed: Vec<Key> = log.iter().map(|&(k, _)| k).collect();
    changed.sort_unstable();
    changed.dedup();
    let mut nodes: Vec<Key> = changed.iter().flat_map(|&k| t.leaves.on_path(k)).collect();
    nodes.sort_unstable_by(|a, b| b.len.cmp(&a.len).then(a.addr.cmp(&b.addr)));
    nodes.dedup();
    for key in nodes {
        if let Some(&leaf) = t.leaves.branch.get(&key) {
            // fib6_purge_rt.
            if t.contains(&key) {
                t.leaves.del_branch(key);
            } else if !exists(t, infos, leaf) {
                let leaf = find_prefix(t, infos, key);
                t.leaves.set_branch(key, leaf);
            }
            continue;
        }
        let Some(&s) = t.leaves.src.get(&key) else {
            continue;
        };
        let (has_src, rtinfo) = match t.get(&key) {
            Some(es) => (
                es.iter().any(|e| e.src().is_some()),
                es.iter().any(|e| e.src().is_none()),
            ),
            None => (false, false),
        };
        if !has_src {
            t.leaves.del_src(key);
            continue;
        }
        // The loss of the last source-less route (fib6_repair_tree), or of the leaf route.
        let reborrow = !rtinfo && (s.rtinfo || !exists(t, infos, s.leaf));
        let leaf = if reborrow {
            find_prefix(t, infos, key)
        } else {
            s.leaf
        };
        t.leaves.set_src(key, SrcLeaf { rtinfo, leaf });
    }
}

/// The prefix of `key` of length `len`.
fn prefix(key: Key, len: u8) -> Key {
    Key::new(key.addr, len, 128)
}

/// The half of `p` (one bit longer) that holds `key`, and the other.
fn sides(p: Key, key: Key) -> (Key, Key) {
    let [l, r] = halves(p);
    if l.contains(key.addr, 128) {
        (l, r)
    } else {
        (r, l)
    }
}

/// Whether `p`, not a key, is a branch node: keys lie on both sides of its next bit.
fn is_branch(t: &Table, p: Key) -> bool {
    p.len < 128 && {
        let [l, r] = halves(p);
        any_within(t, l) && any_within(t, r)
    }
}

/// A new key: the branch node it splits off, if any, takes the leaf of the node it splits
/// from. A branch node that becomes a key loses its leaf.
fn inserted(t: &mut Table, infos: &Infos, key: Key) {
    if t.leaves.del_branch(key) || key.len == 0 || !t.contains(&key) {
        return;
    }
    for len in (0..key.len).rev() {
        let p = prefix(key, len);
        if t.contains(&p) || t.leaves.branch.contains_key(&p) {
            return;
        }
        let (mine, other) = sides(p, key);
        if let Some(from) = topmost(t, other) {
            // Keys already on this side besides the new one: `p` was a branch node before.
            let before = t
                .range_from(Key {
                    addr: mine.addr,
                    len: u8::MAX,
                })
                .filter(|(k, _)| k.addr != mine.addr || k.len >= mine.len)
                .take_while(|(k, _)| k.addr <= mine.last(128))
                .any(|(k, _)| *k != key);
            if !before {
                let leaf = leaf_of(t, infos, from);
                t.leaves.set_branch(p, leaf);
            }
            return;
        }
    }
}

/// A vanished key: a node with two children stays as a branch node and borrows anew;
/// otherwise the node goes, and so does a branch node above left with one child; the first
/// branch node above that keeps two children borrows anew (fib6_repair_tree).
fn removed(t: &mut Table, infos: &Infos, key: Key) {
    if key.len == 0 || t.contains(&key) {
        return;
    }
    if is_branch(t, key) {
        let leaf = find_prefix(t, infos, key);
        t.leaves.set_branch(key, leaf);
        return;
    }
    t.leaves.del_branch(key);
    // Whether the node above loses a child (it does when the vanished node had none; a
    // host route's node never has one).
    let mut loses = key.len == 128 || {
        let [l, r] = halves(key);
        !(any_within(t, l) || any_within(t, r))
    };
    for len in (0..key.len).rev() {
        let p = prefix(key, len);
        if t.contains(&p) {
            return;
        }
        let (mine, other) = sides(p, key);
        if !any_within(t, other) && !t.leaves.branch.contains_key(&p) {
            continue;
        }
        if loses && !any_within(t, mine) {
            t.leaves.del_branch(p);
            loses = false;
            continue;
        }
        let leaf = find_prefix(t, infos, p);
        t.leaves.set_branch(p, leaf);
        return;
    }
}

fn metric(infos: &Infos, e: &Entry) -> u32 {
    infos.get(e.info).spec.priority
}

/// Whether the route `r` names is still in the table.
fn exists(t: &Table, infos: &Infos, r: LeafRef) -> bool {
    t.get(&r.node).is_some_and(|es| {
        es.iter()
            .any(|e| e.src() == r.src && metric(infos, e) == r.metric)
    })
}

/// fib6_find_prefix for node `key`: the leaf of its left child, else of its right child, else
/// one of its own source routes.
fn find_prefix(t: &Table, infos: &Infos, key: Key) -> LeafRef {
    let children = if key.len < 128 { &halves(key)[..] } else { &[] };
    for half in children {
        if let Some(child) = topmost(t, *half) {
            return leaf_of(t, infos, child);
        }
    }
    let own = t
        .get(&key)
        .and_then(|es| es.iter().find(|e| e.src().is_some()).copied());
    LeafRef {
        node: key,
        src: own.and_then(|e| e.src()),
        metric: own.map_or(0, |e| metric(infos, &e)),
    }
}

/// The leaf of node `n`: its first source-less route, its recorded leaf, or for a branch node
/// what it would borrow.
fn leaf_of(t: &Table, infos: &Infos, n: Key) -> LeafRef {
    match t.get(&n) {
        Some(es) => {
            if let Some(e) = es.iter().find(|e| e.src().is_none()) {
                return LeafRef {
                    node: n,
                    src: None,
                    metric: metric(infos, e),
                };
            }
            match t.leaves.src.get(&n) {
                Some(s) => s.leaf,
                None => find_prefix(t, infos, n),
            }
        }
        None => match t.leaves.branch.get(&n) {
            Some(&leaf) => leaf,
            None => find_prefix(t, infos, n),
        },
    }
}

/// The two halves of `key` (its prefixes one bit longer), left (bit clear) first. `key` is
/// shorter than 128 bits: a host prefix has no halves.
fn halves(key: Key) -> [Key; 2] {
    debug_assert!(key.len < 128, "a /128 has no halves");
    let bit = 1u128 << (127 - key.len);
    [
        Key {
            addr: key.addr,
            len: key.len + 1,
        },
        Key {
            addr: key.addr | bit,
            len: key.len + 1,
        },
    ]
}

/// Whether any key of the table lies within `p` (`p` itself included).
fn any_within(t: &Table, p: Key) -> bool {
    t.range_from(Key {
        addr: p.addr,
        len: u8::MAX,
    })
    .find(|(k, _)| k.addr != p.addr || k.len >= p.len)
    .is_some_and(|(k, _)| k.addr <= p.last(128))
}

/// The radix tree's topmost node within `p`: the shortest key covering every key within `p`,
/// or the branch point where those keys diverge. None when `p` holds no key.
fn topmost(t: &Table, p: Key) -> Option<Key> {
    if !any_within(t, p) {
        return None;
    }
    let mut q = p;
    loop {
        if t.contains(&q) || q.len == 128 {
            return Some(q);
        }
        let [l, r] = halves(q);
        match (any_within(t, l), any_within(t, r)) {
            (true, true) => return Some(q),
            (true, false) => q = l,
            _ => q = r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Key {
        let (a, l) = s.split_once('/').expect("prefix");
        let a: std::net::Ipv6Addr = a.parse().expect("address");
        Key::new(u128::from(a), l.parse().expect("length"), 128)
    }

    #[test]
    fn halves_split_on_the_next_bit() {
        let [l, r] = halves(k("2001:db8::/32"));
        assert_eq!(l, k("2001:db8::/33"));
        assert_eq!(r, k("2001:db8:8000::/33"));
    }
}
