//! The ring setup handshake on the control socket.
//!
//! Both messages are netlink-framed (a 16-byte `nlmsghdr` in host byte order, like every
//! netlink message) with type [`RING_SETUP`], so a daemon that reads netlink requests from the
//! socket can recognise the handshake with [`is_setup_request`] and hand the connection to
//! [`crate::server::Session::accept`]. The type sits in netlink's reserved control range
//! (below `NLMSG_MIN_TYPE` = 0x10), which the kernel leaves unused above `NLMSG_OVERRUN` = 4.
//!
//! ```text
//! request: nlmsghdr | magic u32 | version u32 | rx geometry 4 x u32 | tx geometry 4 x u32
//! reply:   nlmsghdr | magic u32 | version u32 | error i32 (0 or -errno) | pad u32
//!                   | map length u64 | rx geometry 4 x u32 | tx geometry 4 x u32
//!          + SCM_RIGHTS [memfd, daemon eventfd, client eventfd] when error is 0
//! ```

use crate::geometry::RingGeometry;
use crate::shm::{MAGIC, VERSION};

/// nlmsg_type of the setup request and reply.
pub const RING_SETUP: u16 = 0x0f;
const NLMSG_HDRLEN: usize = 16;
const NLM_F_REQUEST: u16 = 0x1;
/// Size of a setup request.
pub const REQUEST_LEN: usize = NLMSG_HDRLEN + 8 + 32;
/// Size of a setup reply.
pub const REPLY_LEN: usize = NLMSG_HDRLEN + 16 + 8 + 32;

/// What a client asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetupRequest {
    pub rx: RingGeometry,
    pub tx: RingGeometry,
}

/// What the daemon answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetupReply {
    /// 0, or a negative errno explaining the refusal.
    pub error: i32,
    pub map_len: u64,
    pub rx: RingGeometry,
    pub tx: RingGeometry,
}

/// Why a handshake message could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Wrong length, netlink type or length field.
    Framing,
    /// Not our magic number or an unknown version.
    Version,
}

fn header(out: &mut Vec<u8>, len: usize, flags: u16, seq: u32) {
    out.extend_from_slice(&(len as u32).to_ne_bytes());
    out.extend_from_slice(&RING_SETUP.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
}

fn put_geometry(out: &mut Vec<u8>, g: RingGeometry) {
    for w in g.to_words() {
        out.extend_from_slice(&w.to_ne_bytes());
    }
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn geometry_at(b: &[u8], at: usize) -> RingGeometry {
    RingGeometry::from_words([
        word(b, at),
        word(b, at + 4),
        word(b, at + 8),
        word(b, at + 12),
    ])
}

fn check_header(b: &[u8], want_len: usize) -> Result<(), DecodeError> {
    if b.len() != want_len
        || word(b, 0) as usize != want_len
        || u16::from_ne_bytes([b[4], b[5]]) != RING_SETUP
    {
        return Err(DecodeError::Framing);
    }
    if word(b, NLMSG_HDRLEN) != MAGIC || word(b, NLMSG_HDRLEN + 4) != VERSION {
        return Err(DecodeError::Version);
    }
    Ok(())
}

/// True when `msg` is a ring setup request (by its netlink type), whatever its validity.
pub fn is_setup_request(msg: &[u8]) -> bool {
    msg.len() >= NLMSG_HDRLEN && u16::from_ne_bytes([msg[4], msg[5]]) == RING_SETUP
}

impl SetupRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(REQUEST_LEN);
        header(&mut out, REQUEST_LEN, NLM_F_REQUEST, 1);
        out.extend_from_slice(&MAGIC.to_ne_bytes());
        out.extend_from_slice(&VERSION.to_ne_bytes());
        put_geometry(&mut out, self.rx);
        put_geometry(&mut out, self.tx);
        out
    }

    /// Decodes the fields; the geometries are not validated here.
    pub fn decode(b: &[u8]) -> Result<SetupRequest, DecodeError> {
        check_header(b, REQUEST_LEN)?;
        Ok(SetupRequest {
            rx: geometry_at(b, NLMSG_HDRLEN + 8),
            tx: geometry_at(b, NLMSG_HDRLEN + 24),
        })
    }
}

impl SetupReply {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(REPLY_LEN);
        header(&mut out, REPLY_LEN, 0, 1);
        out.extend_from_slice(&MAGIC.to_ne_bytes());
        out.extend_from_slice(&VERSION.to_ne_bytes());
        out.extend_from_slice(&self.error.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&self.map_len.to_ne_bytes());
        put_geometry(&mut out, self.rx);
        put_geometry(&mut out, self.tx);
        out
    }

    pub fn decode(b: &[u8]) -> Result<SetupReply, DecodeError> {
        check_header(b, REPLY_LEN)?;
        let at = NLMSG_HDRLEN + 8;
        let mut len = [0u8; 8];
        len.copy_from_slice(&b[at + 8..at + 16]);
        Ok(SetupReply {
            error: word(b, at) as i32,
            map_len: u64::from_ne_bytes(len),
            rx: geometry_at(b, at + 16),
            tx: geometry_at(b, at + 32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_reply_round_trip() {
        let rx = RingGeometry::for_frames(16384, 64).unwrap();
        let tx = RingGeometry::for_frames(2048, 128).unwrap();
        let req = SetupRequest { rx, tx };
        let bytes = req.encode();
        assert_eq!(bytes.len(), REQUEST_LEN);
        assert!(is_setup_request(&bytes));
        assert_eq!(SetupRequest::decode(&bytes), Ok(req));

        let rep = SetupReply {
            error: -22,
            map_len: 12345,
            rx,
            tx,
        };
        assert_eq!(SetupReply::decode(&rep.encode()), Ok(rep));
    }

    #[test]
    fn decode_rejects_bad_framing_and_magic() {
        let req = SetupRequest {
            rx: RingGeometry::for_frames(4096, 4).unwrap(),
            tx: RingGeometry::for_frames(4096, 4).unwrap(),
        };
        let good = req.encode();
        assert_eq!(
            SetupRequest::decode(&good[..good.len() - 1]),
            Err(DecodeError::Framing)
        );
        let mut bad_len = good.clone();
        bad_len[0] = 200;
        assert_eq!(SetupRequest::decode(&bad_len), Err(DecodeError::Framing));
        let mut bad_magic = good.clone();
        bad_magic[NLMSG_HDRLEN] ^= 1;
        assert_eq!(SetupRequest::decode(&bad_magic), Err(DecodeError::Version));
        assert!(!is_setup_request(&[0u8; 4]));
    }
}
