//! Route changes, deletions, rejected requests and input lookups, as in the parent module:
//! commands replayed from a namespace experiment (kernel 6.18, the `two_links` set-up),
//! expecting what the kernel answered.

use super::*;

fn rt6_metric(dst: &str, dev: u32, metric: u32) -> Route {
    let mut r = rt(dst, None, dev);
    r.priority = Some(metric);
    r
}

/// `ip -6 route change` of a route that does not exist: "Can not replace route - no match
/// found" when the table's radix tree has no node for the prefix, a bare ENOENT when it has
/// one (a prefix with routes of other metrics, a branch point of longer prefixes, the root).
#[test]
fn ipv6_change_of_a_missing_route_names_the_missing_node() {
    let (mut f, d0, _) = two_links();
    let text = Err(RtError::msg(
        Errno::ENOENT,
        "Can not replace route - no match found",
    ));
    let bare = Err(RtError::new(Errno::ENOENT));
    let change = |f: &mut Fib, dst: &str| f.route_new(&rt(dst, None, d0), ReqFlags::CHANGE);
    let add = |f: &mut Fib, dst: &str| {
        f.route_new(&rt6_metric(dst, d0, 5), ReqFlags::ADD)
            .unwrap()
    };
    assert_eq!(change(&mut f, "2001:db8:1e00::/40"), text);
    add(&mut f, "2001:db8:1e00::/40");
    assert_eq!(change(&mut f, "2001:db8:1e00::/40"), bare);
    assert_eq!(change(&mut f, "2001:db8:1e00::/48"), text);
    add(&mut f, "2001:db8:1e01::/48");
    assert_eq!(change(&mut f, "2001:db8:1e00::/47"), text);
    assert_eq!(change(&mut f, "2001:db8:1e00::/44"), text);
    // 1e01 and 1e03 diverge at bit 46: a branch node at 2001:db8:1e00::/46.
    add(&mut f, "2001:db8:1e03::/48");
    assert_eq!(change(&mut f, "2001:db8:1e00::/46"), bare);
    assert_eq!(change(&mut f, "2001:db8:1e00::/45"), text);
    // The /40 and the link prefixes 2001:db8::/64 and 2001:db8:9::/64 branch at /35 and /44.
    assert_eq!(change(&mut f, "2001:db8::/35"), bare);
    assert_eq!(change(&mut f, "2001:db8::/44"), bare);
    // Without its route the /40 node has one child and leaves the tree.
    f.route_del(&rt6_metric("2001:db8:1e00::/40", d0, 5))
        .unwrap();
    assert_eq!(change(&mut f, "2001:db8:1e00::/40"), text);
    let in100 = |dst: &str| Route {
        table: 100,
        ..rt(dst, None, d0)
    };
    assert_eq!(f.route_new(&in100("::/0"), ReqFlags::CHANGE), bare);
    assert_eq!(f.route_new(&in100("2001:db8::/64"), ReqFlags::CHANGE), text);
}
