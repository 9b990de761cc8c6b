//! Resilient next-hop groups through the `Fib` API: the commands of a namespace experiment
//! (kernel 6.18, iproute2 6.1) and what the kernel answered, where the answer is a bucket
//! assignment: `ip nexthop bucket show` also prints each bucket's idle time, which no recording
//! can fix, so these stay here; the refusals are scenarios (`tests/scenarios/model/resilient_*`).

use super::*;

fn group(id: u32, members: &[(u32, u8)], res: Option<ResGroup>) -> NexthopObj {
    NexthopObj {
        family: None,
        group: members
            .iter()
            .map(|&(id, w)| GroupMember {
                id,
                weight_minus_one: w - 1,
            })
            .collect(),
        group_type: 1,
        res,
        ..nh_obj(id, None, 0)
    }
}

fn buckets(n: u16) -> Option<ResGroup> {
    Some(ResGroup {
        buckets: Some(n),
        ..ResGroup::default()
    })
}

fn assignment(f: &Fib, id: u32) -> Vec<u32> {
    f.nexthop_buckets(Some(id), None, 0)
        .unwrap()
        .iter()
        .map(|b| b.nhid)
        .collect()
}

/// d0 with `id 1 via 10.0.0.2`, d1 with `id 2 via 10.9.0.2` and `id 3 dev d1`.
fn objects() -> (Fib, u32, u32) {
    let (mut f, d0, d1) = two_links();
    f.nexthop_new(&nh_obj(1, Some("10.0.0.2"), d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&nh_obj(2, Some("10.9.0.2"), d1), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(&nh_obj(3, None, d1), ReqFlags::ADD).unwrap();
    (f, d0, d1)
}

#[test]
fn resilient_groups_are_created_shown_and_replaced_as_the_kernel_does() {
    let (mut f, _, d1) = objects();
    f.nexthop_new(&group(10, &[(1, 1), (2, 3)], buckets(8)), ReqFlags::ADD)
        .unwrap();
    assert_eq!(assignment(&f, 10), [2, 2, 2, 2, 2, 2, 1, 1]);
    let shown = f.nexthops().into_iter().find(|n| n.id == 10).unwrap();
    assert_eq!(
        shown.res,
        Some(ResGroup {
            buckets: Some(8),
            idle_timer: Some(12000),
            unbalanced_timer: Some(0),
            unbalanced_time: Some(0),
        })
    );
    // `nexthop replace id 10 group 1/2 type resilient`, then `group 3,2/2 ... idle_timer 0`.
    f.nexthop_new(&group(10, &[(1, 1), (2, 1)], None), ReqFlags::REPLACE)
        .unwrap();
    assert_eq!(assignment(&f, 10), [1, 1, 2, 2, 2, 2, 1, 1]);
    let idle0 = Some(ResGroup {
        idle_timer: Some(0),
        ..ResGroup::default()
    });
    f.nexthop_new(&group(10, &[(3, 2), (2, 1)], idle0), ReqFlags::REPLACE)
        .unwrap();
    assert_eq!(assignment(&f, 10), [3, 3, 3, 2, 2, 2, 3, 3]);
    // `nexthop bucket show dev d1` / `nhid 2` / `bucket get id 10 index 3`.
    assert_eq!(f.nexthop_buckets(None, None, d1).unwrap().len(), 8);
    let of2: Vec<u16> = f
        .nexthop_buckets(None, Some(2), 0)
        .unwrap()
        .iter()
        .map(|b| b.index)
        .collect();
    assert_eq!(of2, [3, 4, 5]);
    assert_eq!(f.nexthop_bucket(10, 3).unwrap().nhid, 2);
    // Deleting a member regroups: id 3 goes, id 2 takes every bucket.
    f.nexthop_del(3).unwrap();
    assert_eq!(assignment(&f, 10), [2; 8]);
}

/// Lookups through a resilient group answer with the member of the flow's bucket, and mark
/// it used: with the default idle timer (120 s), a later change leaves the used buckets of an
/// overweight member where they are until they have been idle that long.
#[test]
fn lookups_use_the_bucket_and_keep_busy_flows_in_place() {
    let (mut f, _, _) = objects();
    let clock = std::sync::Arc::new(ManualClock::new(1_000));
    f.set_clock(clock.clone());
    f.nexthop_new(&group(10, &[(1, 1)], buckets(4)), ReqFlags::ADD)
        .unwrap();
    let mut r = rt("10.77.0.0/16", None, 0);
    r.nhid = Some(10);
    r.scope = scope::UNIVERSE;
    f.route_new(&r, ReqFlags::ADD).unwrap();
    let a = get(&f, "10.77.1.1").unwrap();
    assert_eq!(a.nexthop.gateway, Some(ip("10.0.0.2")));
    // Member 2 joins: the buckets no lookup used move to it at once.
    f.nexthop_new(&group(10, &[(1, 1), (2, 1)], None), ReqFlags::REPLACE)
        .unwrap();
    let now = assignment(&f, 10);
    assert_eq!(now.iter().filter(|&&m| m == 2).count(), 2, "{now:?}");
    let used = f
        .nexthop_buckets(Some(10), None, 0)
        .unwrap()
        .into_iter()
        .filter(|b| b.nhid == 1)
        .count();
    assert_eq!(used, 2);
    // Every answer is one of the group's next hops, the one its bucket holds.
    for i in 0..64 {
        let a = get(&f, &format!("10.77.{i}.9")).unwrap();
        assert!(
            [Some(ip("10.0.0.2")), Some(ip("10.9.0.2"))].contains(&a.nexthop.gateway),
            "{a:?}"
        );
    }
    let shown = f.nexthops().into_iter().find(|n| n.id == 10).unwrap();
    assert_eq!(shown.res.unwrap().unbalanced_time, Some(0));
    // Member 1 now weighs 3: it wants one of member 2's buckets, but the lookups above used
    // them all, so nothing moves and the group is unbalanced until they have been idle for
    // 120 s; the GC pass (the kernel's upkeep work) then moves one.
    clock.advance(10);
    f.nexthop_new(&group(10, &[(1, 3), (2, 1)], None), ReqFlags::REPLACE)
        .unwrap();
    let count1 = |f: &Fib| assignment(f, 10).iter().filter(|&&m| m == 1).count();
    assert_eq!(count1(&f), 2);
    clock.advance(30_000);
    let shown = f.nexthops().into_iter().find(|n| n.id == 10).unwrap();
    assert_eq!(shown.res.unwrap().unbalanced_time, Some(3000));
    f.expire();
    assert_eq!(count1(&f), 2);
    clock.advance(90_000);
    f.expire();
    assert_eq!(count1(&f), 3);
    let shown = f.nexthops().into_iter().find(|n| n.id == 10).unwrap();
    assert_eq!(shown.res.unwrap().unbalanced_time, Some(0));
}

/// A link going down removes its next hops newest first (the head of the device's hash
/// chain), and a resilient group holding two of them regroups after each removal in turn:
/// `nexthop add id 10 group 1/4/3/2 type resilient buckets 8`, `link set d1 down` (ids 2 and 3
/// on d1, 3 the newer) left `4 4 1 1 4 4 1 1` in the kernel; oldest first gives `4 1 4 1 ...`.
#[test]
fn a_link_down_removes_its_next_hops_newest_first() {
    let (mut f, d0, d1) = objects();
    f.nexthop_new(&nh_obj(4, Some("10.0.0.3"), d0), ReqFlags::ADD)
        .unwrap();
    f.nexthop_new(
        &group(10, &[(1, 1), (4, 1), (3, 1), (2, 1)], buckets(8)),
        ReqFlags::ADD,
    )
    .unwrap();
    assert_eq!(assignment(&f, 10), [2, 2, 3, 3, 4, 4, 1, 1]);
    set_up(&mut f, d1, false);
    assert_eq!(assignment(&f, 10), [4, 4, 1, 1, 4, 4, 1, 1]);
}
