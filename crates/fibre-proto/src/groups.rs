//! The multicast groups fibre sends notifications to (the codec's RTNLGRP_* numbers, re-exported
//! so that one path names them all), the bitmask a client's membership is kept in (bit `g - 1`
//! for group `g`, which for groups 1..=32 is the legacy `nl_groups` bitmask of bind(2)), and
//! the groups `ip monitor OBJECT` joins.

pub use fibre_netlink::message::groups::*;

/// Highest group number a membership can name: the membership is a `u64` bitmask.
pub const MAX: u32 = 64;

/// The bit of `group` (1..=[`MAX`]) in a membership mask.
pub fn bit(group: u32) -> u64 {
    1u64 << (group - 1)
}

pub fn has(mask: u64, group: u32) -> bool {
    mask & bit(group) != 0
}

/// The groups `ip monitor OBJECT` joins, by object name (`all` for every one).
pub fn for_object(name: &str) -> Option<&'static [u32]> {
    Some(match name {
        "link" => &[LINK],
        "address" => &[IPV4_IFADDR, IPV6_IFADDR],
        "route" => &[IPV4_ROUTE, IPV6_ROUTE],
        "rule" => &[IPV4_RULE, IPV6_RULE],
        "nexthop" => &[NEXTHOP],
        "neigh" => &[NEIGH],
        "all" => &[
            LINK,
            NEIGH,
            IPV4_IFADDR,
            IPV6_IFADDR,
            IPV4_ROUTE,
            IPV6_ROUTE,
            IPV4_RULE,
            IPV6_RULE,
            NEXTHOP,
        ],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_up_to_32_are_the_legacy_bitmask() {
        // RTMGRP_IPV4_ROUTE is 0x40, RTMGRP_LINK 1.
        assert_eq!(bit(IPV4_ROUTE), 0x40);
        assert_eq!(bit(LINK), 1);
        assert!(has(0x40, IPV4_ROUTE));
        assert!(!has(0x40, IPV6_ROUTE));
    }
}
