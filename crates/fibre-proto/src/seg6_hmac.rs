//! fibre's private SRH HMAC key message: `sr hmac` over fibred's socket.
//!
//! The kernel takes `ip sr hmac` keys over generic netlink (the SEG6 family's SETHMAC and
//! DUMPHMAC commands), which fibred does not speak: `fibre sr hmac` reaches it with this message
//! instead. Its `nlmsg_type` is [`FIBRE_SEG6_HMAC`], below NLMSG_MIN_TYPE (0x10) beside the
//! settings message (0x0d), so no rtnetlink request can be mistaken for it.
//!
//! Body, native endian, [`BODY_LEN`] bytes: a u32 operation ([`HMAC_SET`], [`HMAC_DUMP`], or
//! [`HMAC_KEY`] in the daemon's answer to a dump, one message per key), the u32 key id, the u8
//! algorithm (`fibre_fib::seg6_hmac::algo`), the u8 secret length, two zero bytes, and the
//! secret in a field of [`SECRET_MAX`] bytes, zero-padded (an empty secret deletes, as
//! SEG6_ATTR_SECRETLEN 0 does). A set is answered with an ACK or an error, a dump with its
//! [`HMAC_KEY`] messages then the ACK. fibred's state file keeps the keys as sets.
//!
//! The secret travels in the clear, as in the kernel's generic netlink message: fibred's
//! socket is as private as its permissions make it.

use fibre_fib::seg6_hmac::{HmacKey, SECRET_MAX};
use fibre_fib::types::{Errno, RtError};
use fibre_netlink::message::flags as nf;
use fibre_netlink::NetlinkHeader;

/// `nlmsg_type` of the HMAC key message.
pub const FIBRE_SEG6_HMAC: u16 = 0x0c;
/// Set (or, with an empty secret, delete) a key.
pub const HMAC_SET: u32 = 1;
/// List every key.
pub const HMAC_DUMP: u32 = 2;
/// One key of the daemon's answer to a dump.
pub const HMAC_KEY: u32 = 3;
/// Bytes of the body.
pub const BODY_LEN: usize = 4 + 4 + 1 + 1 + 2 + SECRET_MAX;

/// One HMAC key message's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seg6Hmac {
    pub op: u32,
    pub key: HmacKey,
}

impl Seg6Hmac {
    /// A dump request (its key is not read).
    pub fn dump() -> Seg6Hmac {
        Seg6Hmac {
            op: HMAC_DUMP,
            key: HmacKey {
                id: 0,
                algo: 0,
                secret: Vec::new(),
            },
        }
    }

    /// The whole message, `flags` beside NLM_F_REQUEST (an answer has none). A secret longer
    /// than [`SECRET_MAX`] is cut there (the model refuses such keys before any is sent).
    pub fn message(&self, seq: u32, port: u32, flags: u16) -> Vec<u8> {
        let len = NetlinkHeader::LEN + BODY_LEN;
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&(len as u32).to_ne_bytes());
        out.extend_from_slice(&FIBRE_SEG6_HMAC.to_ne_bytes());
        out.extend_from_slice(&flags.to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&port.to_ne_bytes());
        out.extend_from_slice(&self.op.to_ne_bytes());
        out.extend_from_slice(&self.key.id.to_ne_bytes());
        let secret = &self.key.secret[..self.key.secret.len().min(SECRET_MAX)];
        out.extend_from_slice(&[self.key.algo, secret.len() as u8, 0, 0]);
        out.extend_from_slice(secret);
        out.resize(len, 0);
        out
    }

    /// A request asking for an ACK.
    pub fn request(&self, seq: u32) -> Vec<u8> {
        self.message(seq, 0, nf::NLM_F_REQUEST | nf::NLM_F_ACK)
    }

    /// Reads the message `msg` (header included); EINVAL with the reason for one too short,
    /// of an unknown operation, or whose secret length exceeds its field.
    pub fn parse(msg: &[u8]) -> Result<Seg6Hmac, RtError> {
        let body = msg
            .get(NetlinkHeader::LEN..NetlinkHeader::LEN + BODY_LEN)
            .ok_or_else(|| RtError::msg(Errno::EINVAL, "HMAC key message too short"))?;
        let word = |i: usize| u32::from_ne_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
        let op = word(0);
        if !(HMAC_SET..=HMAC_KEY).contains(&op) {
            return Err(RtError::msg(Errno::EINVAL, "Unknown HMAC key operation"));
        }
        let slen = usize::from(body[9]);
        if slen > SECRET_MAX {
            return Err(RtError::msg(Errno::EINVAL, "HMAC secret too long"));
        }
        Ok(Seg6Hmac {
            op,
            key: HmacKey {
                id: word(4),
                algo: body[8],
                secret: body[12..12 + slen].to_vec(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_bad_bodies_are_refused() {
        for secret in [&b""[..], b"abc", &[0xa5; SECRET_MAX]] {
            let s = Seg6Hmac {
                op: HMAC_SET,
                key: HmacKey {
                    id: 0xdead_beef,
                    algo: fibre_fib::seg6_hmac::algo::SHA256,
                    secret: secret.to_vec(),
                },
            };
            let m = s.request(3);
            assert_eq!(m.len(), NetlinkHeader::LEN + BODY_LEN);
            assert_eq!(Seg6Hmac::parse(&m), Ok(s));
        }
        let good = Seg6Hmac::dump().request(1);
        assert_eq!(Seg6Hmac::parse(&good).map(|s| s.op), Ok(HMAC_DUMP));
        let mut bad_op = good.clone();
        bad_op[16] = 9;
        let mut bad_len = good.clone();
        bad_len[16 + 9] = SECRET_MAX as u8 + 1;
        for (m, why) in [
            (&good[..40], "HMAC key message too short"),
            (&bad_op[..], "Unknown HMAC key operation"),
            (&bad_len[..], "HMAC secret too long"),
        ] {
            assert_eq!(Seg6Hmac::parse(m), Err(RtError::msg(Errno::EINVAL, why)));
        }
    }
}
