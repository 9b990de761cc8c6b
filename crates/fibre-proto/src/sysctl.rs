//! fibre's private settings message: `sysctl` over fibred's socket.
//!
//! The kernel takes most of the settings fibre gives its meaning to (`rp_filter`, the
//! multipath hash, the ICMP limits, IOAM and SRv6 switches) through /proc/sys, not rtnetlink,
//! and fibred has no /proc of its own: `fibre sysctl` reaches it with this message instead.
//! Its `nlmsg_type` is [`FIBRE_SYSCTL`], below NLMSG_MIN_TYPE (0x10) beside the membership
//! message (0x0e) and the ring's setup (0x0f), so no rtnetlink request can be mistaken for it.
//!
//! Body, native endian, [`BODY_LEN`] bytes: a u32 operation ([`SYSCTL_SET`], [`SYSCTL_GET`],
//! or [`SYSCTL_VALUE`] in the daemon's answer to a get), a u32 target (0 `all`, 1 `default`,
//! 2 a link), the link's u32 ifindex (0 otherwise), the key's u32 number
//! (`fibre_fib::ConfKey::number`) and an i64 value (0 in a get). A set is answered with an ACK
//! or an error, a get with a [`SYSCTL_VALUE`] message (then the ACK when one was asked for)
//! or an error. fibred's state file keeps the sets it applied as these messages.

use fibre_fib::types::{Errno, RtError};
use fibre_fib::{ConfKey, ConfTarget};
use fibre_netlink::message::flags as nf;
use fibre_netlink::NetlinkHeader;

/// `nlmsg_type` of the settings message.
pub const FIBRE_SYSCTL: u16 = 0x0d;
/// Write the value.
pub const SYSCTL_SET: u32 = 1;
/// Read the value.
pub const SYSCTL_GET: u32 = 2;
/// The daemon's answer to a get, carrying the value.
pub const SYSCTL_VALUE: u32 = 3;
/// Bytes of the body.
pub const BODY_LEN: usize = 24;

/// One settings message's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sysctl {
    pub op: u32,
    pub target: ConfTarget,
    pub key: ConfKey,
    pub value: i64,
}

impl Sysctl {
    /// The whole message, `flags` beside NLM_F_REQUEST (an answer has none).
    pub fn message(&self, seq: u32, port: u32, flags: u16) -> Vec<u8> {
        let len = NetlinkHeader::LEN + BODY_LEN;
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&(len as u32).to_ne_bytes());
        out.extend_from_slice(&FIBRE_SYSCTL.to_ne_bytes());
        out.extend_from_slice(&flags.to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&port.to_ne_bytes());
        let (target, ifindex) = match self.target {
            ConfTarget::All => (0u32, 0u32),
            ConfTarget::Default => (1, 0),
            ConfTarget::Dev(i) => (2, i),
        };
        for w in [self.op, target, ifindex, self.key.number()] {
            out.extend_from_slice(&w.to_ne_bytes());
        }
        out.extend_from_slice(&self.value.to_ne_bytes());
        out
    }

    /// A request asking for an ACK.
    pub fn request(&self, seq: u32) -> Vec<u8> {
        self.message(seq, 0, nf::NLM_F_REQUEST | nf::NLM_F_ACK)
    }

    /// Reads the message `msg` (header included); EINVAL with the reason for one too short,
    /// of an unknown operation, target or key.
    pub fn parse(msg: &[u8]) -> Result<Sysctl, RtError> {
        let body = msg
            .get(NetlinkHeader::LEN..NetlinkHeader::LEN + BODY_LEN)
            .ok_or_else(|| RtError::msg(Errno::EINVAL, "Settings message too short"))?;
        let word = |i: usize| u32::from_ne_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
        let op = word(0);
        if !(SYSCTL_SET..=SYSCTL_VALUE).contains(&op) {
            return Err(RtError::msg(Errno::EINVAL, "Unknown settings operation"));
        }
        let target = match (word(4), word(8)) {
            (0, _) => ConfTarget::All,
            (1, _) => ConfTarget::Default,
            (2, i) => ConfTarget::Dev(i),
            _ => return Err(RtError::msg(Errno::EINVAL, "Unknown settings target")),
        };
        let key = ConfKey::from_number(word(12))
            .ok_or_else(|| RtError::msg(Errno::EINVAL, "Unknown setting"))?;
        let mut v = [0; 8];
        v.copy_from_slice(&body[16..24]);
        Ok(Sysctl {
            op,
            target,
            key,
            value: i64::from_ne_bytes(v),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_and_target_round_trips_and_bad_bodies_are_refused() {
        for key in ConfKey::ALL {
            for target in [ConfTarget::All, ConfTarget::Default, ConfTarget::Dev(7)] {
                let s = Sysctl {
                    op: SYSCTL_SET,
                    target,
                    key,
                    value: -5,
                };
                let m = s.request(9);
                assert_eq!(m.len(), NetlinkHeader::LEN + BODY_LEN);
                assert_eq!(Sysctl::parse(&m), Ok(s));
            }
        }
        let good = Sysctl {
            op: SYSCTL_GET,
            target: ConfTarget::All,
            key: ConfKey::RpFilter,
            value: 0,
        }
        .request(1);
        let mut bad_op = good.clone();
        bad_op[16] = 9;
        let mut bad_target = good.clone();
        bad_target[20] = 3;
        let mut bad_key = good.clone();
        bad_key[28] = 200;
        for (m, why) in [
            (&good[..30], "Settings message too short"),
            (&bad_op[..], "Unknown settings operation"),
            (&bad_target[..], "Unknown settings target"),
            (&bad_key[..], "Unknown setting"),
        ] {
            assert_eq!(Sysctl::parse(m), Err(RtError::msg(Errno::EINVAL, why)));
        }
    }
}
