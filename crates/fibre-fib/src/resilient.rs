//! Resilient next-hop groups (`nexthop add id N group ... type resilient buckets B`): a fixed
//! table of hash buckets, each holding one member, so that a change of the group moves only
//! the flows whose bucket must move.
//!
//! The kernel's rules, which fibre follows exactly (bucket contents are compared with the
//! kernel's `ip nexthop bucket show` by the differential tests):
//! - Each member wants `round(B * cumulative_weight / total) - previous` buckets. A member with
//!   fewer than it wants is underweight, with more overweight.
//! - Upkeep walks the buckets in index order. An unoccupied bucket (new table, or its member
//!   left the group) always moves; a bucket of an overweight member moves when it is idle
//!   (unused for `idle_timer`, or never used since it last moved) or when the table has been
//!   unbalanced for longer than a non-zero `unbalanced_timer`. A moving bucket goes to the
//!   first underweight member in *reverse* member order (the kernel keeps that list by
//!   pushing each member on its head), which leaves the list once it has what it wants.
//! - The table is unbalanced while some member is underweight; `unbalanced_time` counts from
//!   when that began, and a change that leaves it unbalanced keeps the earlier start.
//! - A lookup picks bucket `hash % B` and marks it used (that is what keeps a busy flow on its
//!   next hop). Readers do this through `&self`: the use time is an atomic per bucket.
//!
//! Who calls what: `nexthop.rs` builds and regroups tables on group creation, replace and
//! member removal; `lookup.rs` selects through them; the GC pass (`expiry.rs`) runs upkeep,
//! as the kernel's delayed work does.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::NhId;
use crate::types::GroupMember;

/// NH_RES_DEFAULT_IDLE_TIMER: 120 s, in clock_t (1/100 s) as netlink carries it.
pub const DEFAULT_IDLE_TIMER: u32 = 120 * 100;
/// Milliseconds per clock_t tick (USER_HZ is 100).
const MS_PER_TICK: u64 = 10;
/// `used` of a bucket not used since it last moved (the kernel compares used_time with
/// migrated_time; a sentinel survives a clock that stands still, as fibre's offline one does).
const NOT_USED: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct Bucket {
    /// The member id, None while unoccupied.
    pub nh: Option<NhId>,
    /// Clock time (ms) of the last lookup through this bucket, or NOT_USED.
    used: AtomicU64,
    /// Clock time (ms) the bucket last moved.
    migrated: u64,
}

impl Clone for Bucket {
    fn clone(&self) -> Bucket {
        Bucket {
            nh: self.nh,
            used: AtomicU64::new(self.used.load(Ordering::Relaxed)),
            migrated: self.migrated,
        }
    }
}

/// One resilient group's bucket table.
#[derive(Debug, Clone)]
pub(crate) struct ResTable {
    pub buckets: Vec<Bucket>,
    /// In clock_t, as configured (shown by `nexthop show`).
    pub idle_timer: u32,
    pub unbalanced_timer: u32,
    /// When the table last became unbalanced; None while balanced.
    unbalanced_since: Option<u64>,
}

impl ResTable {
    /// A table of `n` unoccupied buckets (n > 0), filled by [`ResTable::regroup`].
    pub fn new(n: u16, idle_timer: u32, unbalanced_timer: u32) -> ResTable {
        ResTable {
            buckets: (0..n)
                .map(|_| Bucket {
                    nh: None,
                    used: AtomicU64::new(NOT_USED),
                    migrated: 0,
                })
                .collect(),
            idle_timer,
            unbalanced_timer,
            unbalanced_since: None,
        }
    }

    /// The buckets each member wants, in member order (nh_res_group_rebalance).
    fn wants(&self, members: &[GroupMember]) -> Vec<u64> {
        let n = self.buckets.len() as u64;
        let total: u64 = members.iter().map(|m| m.weight_minus_one as u64 + 1).sum();
        let (mut acc, mut prev) = (0u64, 0u64);
        members
            .iter()
            .map(|m| {
                acc += m.weight_minus_one as u64 + 1;
                // DIV_ROUND_CLOSEST
                let upper = (n * acc + total / 2) / total;
                let w = upper - prev;
                prev = upper;
                w
            })
            .collect()
    }

    fn counts(&self, members: &[GroupMember]) -> Vec<u64> {
        let mut c = vec![0u64; members.len()];
        for b in &self.buckets {
            if let Some(i) =
                b.nh.and_then(|id| members.iter().position(|m| NhId(m.id) == id))
            {
                c[i] += 1;
            }
        }
        c
    }

    /// The group's members are now `members` (creation, replace, member removal): buckets of
    /// members that left become unoccupied, the balance is recomputed and upkeep runs
    /// (replace_nexthop_grp_res).
    pub fn regroup(&mut self, members: &[GroupMember], now: u64) {
        for b in &mut self.buckets {
            if b.nh
                .is_some_and(|id| !members.iter().any(|m| NhId(m.id) == id))
            {
                b.nh = None;
            }
        }
        let prev = self.unbalanced_since;
        let unbalanced = self
            .counts(members)
            .iter()
            .zip(self.wants(members))
            .any(|(c, w)| *c < w);
        self.unbalanced_since = unbalanced.then(|| prev.unwrap_or(now));
        self.upkeep(members, now);
    }

    /// Moves the buckets that may move now (nh_res_table_upkeep).
    pub fn upkeep(&mut self, members: &[GroupMember], now: u64) {
        let wants = self.wants(members);
        let mut counts = self.counts(members);
        // Underweight members, last member first.
        let mut uw: Vec<usize> = (0..members.len())
            .rev()
            .filter(|&i| counts[i] < wants[i])
            .collect();
        let idle_ms = self.idle_timer as u64 * MS_PER_TICK;
        let unb_ms = self.unbalanced_timer as u64 * MS_PER_TICK;
        let forced = self.unbalanced_timer != 0
            && self
                .unbalanced_since
                .is_some_and(|s| now > s.saturating_add(unb_ms));
        for b in &mut self.buckets {
            let Some(&to) = uw.first() else {
                break;
            };
            let from =
                b.nh.and_then(|id| members.iter().position(|m| NhId(m.id) == id));
            let moves = match from {
                None => true,
                Some(i) if counts[i] <= wants[i] => false,
                Some(_) => {
                    let used = b.used.load(Ordering::Relaxed);
                    used == NOT_USED || now >= used.saturating_add(idle_ms) || forced
                }
            };
            if !moves {
                continue;
            }
            if let Some(i) = from {
                counts[i] -= 1;
            }
            b.nh = Some(NhId(members[to].id));
            b.used.store(NOT_USED, Ordering::Relaxed);
            b.migrated = now;
            counts[to] += 1;
            if counts[to] == wants[to] {
                uw.remove(0);
            }
        }
        if uw.is_empty() {
            self.unbalanced_since = None;
        }
    }

    /// The member for a flow hash, marking its bucket used (nexthop_select_path_res).
    pub fn select(&self, hash: u32, now: u64) -> Option<NhId> {
        let b = self.buckets.get(hash as usize % self.buckets.len())?;
        b.used.store(now, Ordering::Relaxed);
        b.nh
    }

    /// How long bucket `b` has been idle, in clock_t (NHA_RES_BUCKET_IDLE_TIME).
    pub fn idle_time(&self, b: &Bucket, now: u64) -> u64 {
        let used = b.used.load(Ordering::Relaxed);
        let since = if used == NOT_USED { b.migrated } else { used };
        now.saturating_sub(since) / MS_PER_TICK
    }

    /// How long the table has been unbalanced, in clock_t (NHA_RES_GROUP_UNBALANCED_TIME).
    pub fn unbalanced_time(&self, now: u64) -> u64 {
        self.unbalanced_since
            .map_or(0, |s| now.saturating_sub(s) / MS_PER_TICK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: u32, weight: u8) -> GroupMember {
        GroupMember {
            id,
            weight_minus_one: weight - 1,
        }
    }

    fn ids(t: &ResTable) -> Vec<u32> {
        t.buckets.iter().map(|b| b.nh.map_or(0, |n| n.0)).collect()
    }

    /// Recorded from kernel 6.18 (`ip nexthop bucket show` after the same commands).
    #[test]
    fn new_tables_fill_from_the_last_member() {
        let mut t = ResTable::new(8, DEFAULT_IDLE_TIMER, 0);
        t.regroup(&[m(1, 1), m(2, 3)], 0);
        assert_eq!(ids(&t), [2, 2, 2, 2, 2, 2, 1, 1]);
        let mut t = ResTable::new(16, 6000, 3000);
        t.regroup(&[m(1, 2), m(2, 1), m(3, 1)], 0);
        assert_eq!(ids(&t), [3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]);
        // Rounding can leave a member without a bucket.
        let mut t = ResTable::new(2, DEFAULT_IDLE_TIMER, 0);
        t.regroup(&[m(1, 1), m(2, 1), m(3, 1)], 0);
        assert_eq!(ids(&t), [3, 1]);
    }

    /// Kernel 6.18: `group 1/2,3` (8 buckets), replaced by `group 1/2`, then by `group 3,2/2`.
    #[test]
    fn replace_moves_only_what_must_move() {
        let mut t = ResTable::new(8, DEFAULT_IDLE_TIMER, 0);
        t.regroup(&[m(1, 1), m(2, 3)], 0);
        t.regroup(&[m(1, 1), m(2, 1)], 1000);
        assert_eq!(ids(&t), [1, 1, 2, 2, 2, 2, 1, 1]);
        t.regroup(&[m(3, 2), m(2, 1)], 2000);
        assert_eq!(ids(&t), [3, 3, 3, 2, 2, 2, 3, 3]);
        assert_eq!(t.unbalanced_time(5000), 0);
    }

    /// A used bucket of an overweight member stays until it has been idle for the idle
    /// timer, or until the unbalanced timer forces it; meanwhile the table is unbalanced.
    #[test]
    fn busy_buckets_wait_for_the_idle_timer() {
        let mut t = ResTable::new(4, 100, 0); // idle timer 1 s
        t.regroup(&[m(1, 1)], 0);
        assert_eq!(ids(&t), [1, 1, 1, 1]);
        for h in 0..4 {
            assert_eq!(t.select(h, 500), Some(NhId(1)));
        }
        t.regroup(&[m(1, 1), m(2, 1)], 600);
        assert_eq!(ids(&t), [1, 1, 1, 1]);
        assert_eq!(t.unbalanced_time(900), 30);
        assert_eq!(t.idle_time(&t.buckets[0], 900), 40);
        t.upkeep(&[m(1, 1), m(2, 1)], 1499);
        assert_eq!(ids(&t), [1, 1, 1, 1]);
        t.upkeep(&[m(1, 1), m(2, 1)], 1500);
        assert_eq!(ids(&t), [2, 2, 1, 1]);
        assert_eq!(t.unbalanced_time(1500), 0);

        let mut t = ResTable::new(4, 100 * 60, 200); // forced after 2 s unbalanced
        t.regroup(&[m(1, 1)], 0);
        for h in 0..4 {
            t.select(h, 10);
        }
        t.regroup(&[m(1, 1), m(2, 1)], 100);
        t.upkeep(&[m(1, 1), m(2, 1)], 2100);
        assert_eq!(ids(&t), [1, 1, 1, 1]);
        t.upkeep(&[m(1, 1), m(2, 1)], 2101);
        assert_eq!(ids(&t), [2, 2, 1, 1]);
    }

    /// Whatever the changes, a table settles with every member holding what it wants, and
    /// only buckets that had to move moved.
    #[test]
    fn random_changes_settle_balanced() {
        let mut state = 0x9e37_79b9_u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..300 {
            let n = 1 + next(64) as u16;
            let mut t = ResTable::new(n, 0, 0);
            let mut members: Vec<GroupMember> = Vec::new();
            for step in 0..6u64 {
                let k = 1 + next(5) as u32;
                let new: Vec<GroupMember> = (0..k)
                    .map(|i| m(1 + (i + next(3) as u32) % 7, 1 + next(8) as u8))
                    .fold(Vec::new(), |mut v, x| {
                        if !v.iter().any(|y: &GroupMember| y.id == x.id) {
                            v.push(x);
                        }
                        v
                    });
                let before = ids(&t);
                t.regroup(&new, step * 10);
                let wants = t.wants(&new);
                assert_eq!(t.counts(&new), wants);
                // A bucket whose member stayed and was not overweight kept it.
                let old_counts: Vec<u64> = new
                    .iter()
                    .map(|x| before.iter().filter(|&&b| b == x.id).count() as u64)
                    .collect();
                for (i, b) in before.iter().enumerate() {
                    if let Some(j) = new.iter().position(|x| x.id == *b) {
                        if old_counts[j] <= wants[j] {
                            assert_eq!(t.buckets[i].nh, Some(NhId(*b)));
                        }
                    }
                }
                members = new;
            }
            assert!(!members.is_empty());
        }
    }
}
