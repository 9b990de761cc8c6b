//! fibre's private membership message, the Unix-socket stand-in for the
//! NETLINK_ADD_MEMBERSHIP / NETLINK_DROP_MEMBERSHIP socket options and for `nl_groups` in
//! bind(2), which a Unix socket does not have.
//!
//! Its `nlmsg_type` is [`FIBRE_MEMBERSHIP`], below NLMSG_MIN_TYPE (0x10) and beside the ring's
//! setup message (0x0f), so no rtnetlink request can be mistaken for it. Body: a u32 operation
//! ([`MEMBERSHIP_ADD`], [`MEMBERSHIP_DROP`], [`MEMBERSHIP_SET_GROUPS`]) and a u32 argument (an
//! RTNLGRP_* number, or the legacy `nl_groups` bitmask), native endian. Clients build it with
//! [`request`]; the daemon applies it to a client's mask with [`apply`].

use crate::groups;
use fibre_fib::types::{Errno, RtError};
use fibre_netlink::message::flags as nf;
use fibre_netlink::NetlinkHeader;

/// `nlmsg_type` of the membership message.
pub const FIBRE_MEMBERSHIP: u16 = 0x0e;
/// Join the RTNLGRP_* group given as argument (NETLINK_ADD_MEMBERSHIP).
pub const MEMBERSHIP_ADD: u32 = 1;
/// Leave the group (NETLINK_DROP_MEMBERSHIP).
pub const MEMBERSHIP_DROP: u32 = 2;
/// Replace the groups 1..=32 by the `nl_groups` bitmask given as argument (bind(2)).
pub const MEMBERSHIP_SET_GROUPS: u32 = 3;

/// A membership message as bytes, asking for an ACK.
pub fn request(op: u32, arg: u32, seq: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(&24u32.to_ne_bytes());
    out.extend_from_slice(&FIBRE_MEMBERSHIP.to_ne_bytes());
    out.extend_from_slice(&(nf::NLM_F_REQUEST | nf::NLM_F_ACK).to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&op.to_ne_bytes());
    out.extend_from_slice(&arg.to_ne_bytes());
    out
}

/// Applies the membership message `msg` (header included) to the membership mask `groups`
/// ([`groups::bit`]); a malformed message changes nothing.
pub fn apply(msg: &[u8], groups: &mut u64) -> Result<(), RtError> {
    let body = msg.get(NetlinkHeader::LEN..).unwrap_or_default();
    let (Some(op), Some(arg)) = (body.get(0..4), body.get(4..8)) else {
        return Err(RtError::msg(Errno::EINVAL, "Membership request too short"));
    };
    let op = u32::from_ne_bytes([op[0], op[1], op[2], op[3]]);
    let arg = u32::from_ne_bytes([arg[0], arg[1], arg[2], arg[3]]);
    match op {
        MEMBERSHIP_ADD | MEMBERSHIP_DROP => {
            if arg == 0 || arg > groups::MAX {
                return Err(RtError::msg(Errno::EINVAL, "Unknown multicast group"));
            }
            if op == MEMBERSHIP_ADD {
                *groups |= groups::bit(arg);
            } else {
                *groups &= !groups::bit(arg);
            }
        }
        MEMBERSHIP_SET_GROUPS => *groups = (*groups & !0xffff_ffff) | u64::from(arg),
        _ => return Err(RtError::msg(Errno::EINVAL, "Unknown membership operation")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bind(2)'s `nl_groups` replaces groups 1..=32 only; what a malformed message or an
    /// unknown group or operation asks changes nothing.
    #[test]
    fn set_groups_keeps_the_high_groups_and_refusals_change_nothing() {
        let mut mask = 0;
        apply(&request(MEMBERSHIP_ADD, groups::MAX, 1), &mut mask).unwrap();
        apply(&request(MEMBERSHIP_SET_GROUPS, 0x41, 2), &mut mask).unwrap();
        let want =
            groups::bit(groups::MAX) | groups::bit(groups::LINK) | groups::bit(groups::IPV4_ROUTE);
        assert_eq!(mask, want);
        for bad in [
            request(MEMBERSHIP_ADD, groups::MAX + 1, 3),
            request(MEMBERSHIP_DROP, 0, 4),
            request(9, groups::LINK, 5),
            request(MEMBERSHIP_DROP, groups::LINK, 6)[..20].to_vec(),
        ] {
            assert_eq!(apply(&bad, &mut mask).unwrap_err().errno, Errno::EINVAL);
            assert_eq!(mask, want);
        }
    }
}
