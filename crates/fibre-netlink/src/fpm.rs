//! FPM framing: the Forwarding Plane Manager stream over which FRR's zebra (`dplane_fpm_nl`)
//! sends routes and next-hop groups to a data plane.
//!
//! The stream is TCP; zebra connects, the data plane listens. Every frame starts with a 4-byte
//! header -- version (1), message type (1: netlink; 2: protobuf, which this codec refuses) and
//! the frame's length including the header, big-endian -- followed by one or more complete
//! netlink messages (zebra puts an update's RTM_DELROUTE and RTM_NEWROUTE in one frame). The
//! facts come from FRR's `fpm/fpm.h` (`fpm_msg_hdr_t`) and `zebra/dplane_fpm_nl.c`.
//!
//! [`FrameDecoder`] reads the stream as it arrives, in pieces of any size, and hands out each
//! whole frame ([`Frame`]) with its netlink messages parsed, so that the caller can apply a
//! frame as one batch. Its error contract ([`FpmError::is_fatal`]):
//! - a bad header (version, type, a length shorter than the header) is fatal: the length
//!   cannot be trusted, so the stream has lost sync and the connection must be closed; the
//!   decoder then returns the same error on every call. A stream that ends inside a frame
//!   ([`FrameDecoder::finish`]) is fatal too;
//! - bad content in a well-framed frame (a netlink message that overruns the frame, trailing
//!   bytes, a malformed message) is not: the frame's bytes have been consumed, the frame is
//!   rejected whole (none of its messages are handed out), and decoding continues with the next.
//!
//! A frame length that is not a multiple of 4 is accepted: `fpm.h` asks senders for aligned
//! netlink frames, but zebra's own reader does not insist, and the netlink parser needs no
//! padding after the last message. An empty frame (the header alone) is an empty batch.
//!
//! [`emit_frames`] wraps netlink messages into frames, starting a new frame when the next
//! message would push the 16-bit length over [`MAX_FRAME_LEN`].

use crate::message::{Messages, NetlinkHeader, NetlinkMessage};
use crate::nla::align;
use crate::DecodeError;
use std::fmt;

/// Length of the FPM header: version, type, and the 16-bit length. It is a multiple of netlink's
/// 4-byte alignment, so the messages after it need no padding.
pub const HEADER_LEN: usize = 4;
/// The only FPM protocol version (`FPM_PROTO_VERSION`).
pub const VERSION: u8 = 1;
/// Message type of frames that carry netlink messages.
pub const TYPE_NETLINK: u8 = 1;
/// Message type of frames that carry protobuf messages (FRR's older `zebra_fpm` module can send
/// them; `dplane_fpm_nl` never does). Refused.
pub const TYPE_PROTOBUF: u8 = 2;
/// The largest frame the 16-bit length field can describe, header included.
pub const MAX_FRAME_LEN: usize = u16::MAX as usize;
/// The largest payload (netlink messages and their padding) one frame can carry.
pub const MAX_PAYLOAD_LEN: usize = MAX_FRAME_LEN - HEADER_LEN;
/// The TCP port zebra connects to when its `fpm address` configuration names none
/// (`FPM_DEFAULT_PORT`), the default for a server that speaks FPM.
pub const DEFAULT_PORT: u16 = 2620;

/// View of an FPM header over a buffer, in the style of the codec's other views: `new_checked`
/// guarantees that no accessor panics. Written out rather than declared with
/// `wire::fixed_header!`, whose fields are in host byte order: the FPM length is big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FpmHeaderPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FpmHeaderPacket<T> {
    /// Wraps `buffer` without checking its length; accessors panic if it is too short.
    pub fn new_unchecked(buffer: T) -> Self {
        FpmHeaderPacket { buffer }
    }

    /// Wraps `buffer` after checking it holds the whole header. `offset` locates the buffer in
    /// the caller's input, for the error.
    pub fn new_checked(buffer: T, offset: usize) -> Result<Self, DecodeError> {
        let have = buffer.as_ref().len();
        if have < HEADER_LEN {
            return Err(DecodeError::Truncated {
                what: "fpm_msg_hdr",
                offset,
                need: HEADER_LEN,
                have,
            });
        }
        Ok(FpmHeaderPacket { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    pub fn message_type(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Length of the frame including the header; big-endian on the wire, unlike netlink.
    pub fn length(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[2], b[3]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FpmHeaderPacket<T> {
    pub fn set_version(&mut self, value: u8) {
        self.buffer.as_mut()[0] = value;
    }

    pub fn set_message_type(&mut self, value: u8) {
        self.buffer.as_mut()[1] = value;
    }

    pub fn set_length(&mut self, value: u16) {
        self.buffer.as_mut()[2..4].copy_from_slice(&value.to_be_bytes());
    }
}

/// An FPM header (`fpm_msg_hdr_t`), as it came: [`FpmHeader::check`] judges it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FpmHeader {
    pub version: u8,
    pub message_type: u8,
    /// Length of the frame including the header.
    pub length: u16,
}

impl FpmHeader {
    /// Size of the header in bytes.
    pub const LEN: usize = HEADER_LEN;

    /// The header of a netlink frame with `payload_len` bytes after it (at most
    /// [`MAX_PAYLOAD_LEN`]; the length saturates beyond).
    pub fn netlink(payload_len: usize) -> Self {
        FpmHeader {
            version: VERSION,
            message_type: TYPE_NETLINK,
            length: u16::try_from(HEADER_LEN + payload_len).unwrap_or(u16::MAX),
        }
    }

    /// Copies the fields out of a checked view.
    pub fn parse<T: AsRef<[u8]>>(packet: &FpmHeaderPacket<T>) -> Self {
        FpmHeader {
            version: packet.version(),
            message_type: packet.message_type(),
            length: packet.length(),
        }
    }

    /// Parses the header at the start of `buf`; `offset` locates `buf` for errors.
    pub fn parse_bytes(buf: &[u8], offset: usize) -> Result<Self, DecodeError> {
        Ok(Self::parse(&FpmHeaderPacket::new_checked(buf, offset)?))
    }

    /// Appends the header to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + HEADER_LEN, 0);
        let mut packet = FpmHeaderPacket::new_unchecked(&mut out[start..]);
        packet.set_version(self.version);
        packet.set_message_type(self.message_type);
        packet.set_length(self.length);
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN);
        self.emit(&mut out);
        out
    }

    /// Checks that the header describes a netlink frame this codec accepts. Every error it
    /// returns is fatal: see the module documentation.
    pub fn check(&self) -> Result<(), FpmErrorKind> {
        if self.version != VERSION {
            return Err(FpmErrorKind::Version(self.version));
        }
        match self.message_type {
            TYPE_NETLINK => {}
            TYPE_PROTOBUF => return Err(FpmErrorKind::Protobuf),
            t => return Err(FpmErrorKind::Type(t)),
        }
        if usize::from(self.length) < HEADER_LEN {
            return Err(FpmErrorKind::Length(self.length));
        }
        Ok(())
    }
}

/// What was wrong with an FPM frame. In-frame offsets count from the start of the frame's
/// payload (its first netlink message), as do those of a [`DecodeError`] inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FpmErrorKind {
    /// The version is not [`VERSION`].
    Version(u8),
    /// The type is neither netlink nor protobuf.
    Type(u8),
    /// A protobuf frame: not spoken here (zebra's `dplane_fpm_nl` sends netlink only).
    Protobuf,
    /// The length is shorter than the header itself.
    Length(u16),
    /// The input ends inside the frame: `need` bytes make the frame, `have` arrived.
    Truncated { need: usize, have: usize },
    /// A netlink message's `nlmsg_len` is below the netlink header or runs past the frame.
    MessageOverrun {
        offset: usize,
        len: u32,
        available: usize,
    },
    /// Fewer bytes than a netlink header are left after the last message (beyond its padding).
    TrailingBytes { offset: usize, count: usize },
    /// A netlink message of the frame is malformed.
    Netlink(DecodeError),
}

/// An FPM error and where: `frame` is the offset of the frame's header in the stream (for
/// [`Frame::parse`], in its buffer plus the base it was given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FpmError {
    pub frame: u64,
    pub kind: FpmErrorKind,
}

impl FpmError {
    /// Whether the stream has lost sync: after a fatal error the connection cannot continue.
    /// Errors in the content of a well-framed frame are not fatal; the frame is skipped.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self.kind,
            FpmErrorKind::Version(_)
                | FpmErrorKind::Type(_)
                | FpmErrorKind::Protobuf
                | FpmErrorKind::Length(_)
                | FpmErrorKind::Truncated { .. }
        )
    }
}

impl fmt::Display for FpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.frame;
        match self.kind {
            FpmErrorKind::Version(v) => write!(f, "FPM frame at {at}: version {v}, expected 1"),
            FpmErrorKind::Type(t) => write!(f, "FPM frame at {at}: unknown message type {t}"),
            FpmErrorKind::Protobuf => {
                write!(f, "FPM frame at {at}: protobuf frames are not supported")
            }
            FpmErrorKind::Length(l) => {
                write!(
                    f,
                    "FPM frame at {at}: length {l} is shorter than the header"
                )
            }
            FpmErrorKind::Truncated { need, have } => {
                write!(f, "FPM frame at {at}: {have} of its {need} bytes arrived")
            }
            FpmErrorKind::MessageOverrun {
                offset,
                len,
                available,
            } => write!(
                f,
                "FPM frame at {at}: netlink message at {offset} has length {len}, \
                 {available} bytes left in the frame"
            ),
            FpmErrorKind::TrailingBytes { offset, count } => write!(
                f,
                "FPM frame at {at}: {count} stray bytes at {offset} after its messages"
            ),
            FpmErrorKind::Netlink(e) => write!(f, "FPM frame at {at}: {e}"),
        }
    }
}

impl std::error::Error for FpmError {}

/// One whole FPM frame, its messages parsed: the unit the caller applies as one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    pub header: FpmHeader,
    /// The netlink messages and their padding.
    pub payload: &'a [u8],
    /// The messages of `payload`, in order.
    pub messages: Vec<NetlinkMessage<'a>>,
}

impl<'a> Frame<'a> {
    /// Parses the frame at the start of `buf`, which may hold more after it; `base` is the
    /// frame's offset in the stream, for errors. Returns the frame and its length.
    pub fn parse(buf: &'a [u8], base: u64) -> Result<(Self, usize), FpmError> {
        let err = |kind| FpmError { frame: base, kind };
        let header = FpmHeader::parse_bytes(buf, 0).map_err(|_| {
            err(FpmErrorKind::Truncated {
                need: HEADER_LEN,
                have: buf.len(),
            })
        })?;
        header.check().map_err(err)?;
        let len = usize::from(header.length);
        let payload = buf
            .get(HEADER_LEN..len)
            .ok_or(err(FpmErrorKind::Truncated {
                need: len,
                have: buf.len(),
            }))?;
        let messages = parse_payload(payload).map_err(err)?;
        Ok((
            Frame {
                header,
                payload,
                messages,
            },
            len,
        ))
    }
}

/// Checks that `payload` is whole netlink messages (each `nlmsg_len` within the frame, nothing
/// after the last but its padding), then parses them with [`Messages`].
fn parse_payload(payload: &[u8]) -> Result<Vec<NetlinkMessage<'_>>, FpmErrorKind> {
    let mut pos = 0;
    while pos < payload.len() {
        let rest = &payload[pos..];
        let Ok(header) = NetlinkHeader::parse_bytes(rest, pos) else {
            return Err(FpmErrorKind::TrailingBytes {
                offset: pos,
                count: rest.len(),
            });
        };
        let len = header.length as usize;
        if len < NetlinkHeader::LEN || len > rest.len() {
            return Err(FpmErrorKind::MessageOverrun {
                offset: pos,
                len: header.length,
                available: rest.len(),
            });
        }
        pos = align(pos + len);
    }
    Messages::new(payload)
        .map(|r| r.map(|(_, m)| m).map_err(FpmErrorKind::Netlink))
        .collect()
}

/// Reassembles frames from a byte stream that arrives in pieces of any size; see the module
/// documentation for its error contract. It buffers at most one frame ([`MAX_FRAME_LEN`]
/// bytes): [`FrameDecoder::decode`] takes from its input only what completes the frame at hand.
#[derive(Debug, Clone, Default)]
pub struct FrameDecoder {
    /// The frame being assembled (or last handed out, when `handed_out`).
    buf: Vec<u8>,
    /// Stream offset of `buf[0]`.
    offset: u64,
    /// The frame in `buf` was returned; drop it on the next call.
    handed_out: bool,
    /// The fatal error the stream stopped at.
    failed: Option<FpmError>,
}

impl FrameDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes bytes from the front of `input` (advancing it) until a frame is whole, and returns
    /// it, or `None` once `input` is used up with the frame still incomplete. Call it again
    /// with the rest of `input` while that is not empty. The frame borrows the decoder, so it
    /// must be dropped before the next call.
    ///
    /// A non-fatal error rejects one frame and decoding continues on the next call; after a
    /// fatal one every call returns that error ([`FpmError::is_fatal`]).
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Frame<'_>>, FpmError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.handed_out {
            self.offset += self.buf.len() as u64;
            self.buf.clear();
            self.handed_out = false;
        }
        if self.buf.len() < HEADER_LEN && !self.fill(input, HEADER_LEN) {
            return Ok(None);
        }
        let header = FpmHeader::parse(&FpmHeaderPacket::new_unchecked(&self.buf[..]));
        if let Err(kind) = header.check() {
            let e = FpmError {
                frame: self.offset,
                kind,
            };
            self.failed = Some(e);
            return Err(e);
        }
        if !self.fill(input, usize::from(header.length)) {
            return Ok(None);
        }
        self.handed_out = true;
        Frame::parse(&self.buf, self.offset).map(|(frame, _)| Some(frame))
    }

    /// Moves bytes from `input` into the buffer until it holds `want`; whether it does.
    fn fill(&mut self, input: &mut &[u8], want: usize) -> bool {
        let take = want.saturating_sub(self.buf.len()).min(input.len());
        self.buf.extend_from_slice(&input[..take]);
        *input = &input[take..];
        self.buf.len() >= want
    }

    /// Stream offset of the next byte `decode` will take.
    pub fn position(&self) -> u64 {
        self.offset + self.buf.len() as u64
    }

    /// At the end of the stream: an error when it ended inside a frame (or had failed).
    pub fn finish(&self) -> Result<(), FpmError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.handed_out || self.buf.is_empty() {
            return Ok(());
        }
        let need = match FpmHeaderPacket::new_checked(&self.buf[..], 0) {
            Ok(p) => usize::from(p.length()),
            Err(_) => HEADER_LEN,
        };
        Err(FpmError {
            frame: self.offset,
            kind: FpmErrorKind::Truncated {
                need,
                have: self.buf.len(),
            },
        })
    }
}

/// A netlink message too long for any frame: its length, padded, exceeds [`MAX_PAYLOAD_LEN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OversizedMessage {
    pub len: usize,
}

impl fmt::Display for OversizedMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "netlink message of {} bytes does not fit in an FPM frame (at most {MAX_PAYLOAD_LEN})",
            self.len
        )
    }
}

impl std::error::Error for OversizedMessage {}

/// Appends `messages` to `out` as netlink FPM frames, as many messages per frame as fit in
/// [`MAX_FRAME_LEN`], each padded to 4 bytes as netlink aligns them (so frame lengths are
/// multiples of 4, as `fpm.h` expects). Returns the number of frames; none for no messages.
/// On error `out` is left as it was.
pub fn emit_frames<'m, 'a: 'm>(
    messages: impl IntoIterator<Item = &'m NetlinkMessage<'a>>,
    out: &mut Vec<u8>,
) -> Result<usize, OversizedMessage> {
    let start = out.len();
    let mut frames = 0;
    let mut open: Option<usize> = None;
    let mut scratch = Vec::new();
    for m in messages {
        scratch.clear();
        m.emit(&mut scratch);
        let padded = align(scratch.len());
        if padded > MAX_PAYLOAD_LEN {
            out.truncate(start);
            return Err(OversizedMessage { len: scratch.len() });
        }
        let fits = open.is_some_and(|f| out.len() - f + padded <= MAX_FRAME_LEN);
        if !fits {
            if let Some(f) = open {
                close_frame(out, f);
            }
            open = Some(out.len());
            FpmHeader::netlink(0).emit(out);
            frames += 1;
        }
        out.extend_from_slice(&scratch);
        out.resize(out.len() + padded - scratch.len(), 0);
    }
    if let Some(f) = open {
        close_frame(out, f);
    }
    Ok(frames)
}

/// Writes the length of the frame that starts at `at` and ends at the end of `out`.
fn close_frame(out: &mut [u8], at: usize) {
    let len = out.len() - at;
    FpmHeaderPacket::new_unchecked(&mut out[at..])
        .set_length(u16::try_from(len).unwrap_or(u16::MAX));
}

/// The decoder's properties, for the fuzzer and the tests that replay its seeds: decoding
/// `buf` as a stream whole and in pieces (of a size its first byte picks) yields the same
/// frames and errors, and the messages of every frame, framed again by [`emit_frames`], decode
/// to the same messages. Returns how many frames were decoded.
///
/// Panics when a property fails, which is a bug in this crate, never a property of the input.
#[allow(
    clippy::expect_used,
    reason = "a property check: it panics when the property fails"
)]
pub fn check_stream(buf: &[u8]) -> usize {
    let step = buf.first().map_or(1, |&b| usize::from(b % 64) + 1);
    let whole = decode_all(buf.chunks(buf.len().max(1)));
    let pieces = decode_all(buf.chunks(step));
    assert_eq!(whole, pieces, "pieces of {step} bytes decode differently");
    let mut frames = 0;
    for (header, payload) in whole.iter().filter_map(|r| r.as_ref().ok()) {
        let mut framed = header.to_bytes();
        framed.extend_from_slice(payload);
        let (frame, _) = Frame::parse(&framed, 0).expect("a decoded frame parses alone");
        let mut again = Vec::new();
        emit_frames(&frame.messages, &mut again).expect("decoded messages fit in frames");
        let mut messages = Vec::new();
        let mut input = &again[..];
        let mut decoder = FrameDecoder::new();
        while !input.is_empty() {
            let f = decoder.decode(&mut input).expect("emitted frames decode");
            messages.extend(
                f.iter()
                    .flat_map(|f| f.messages.iter().map(|m| m.to_bytes())),
            );
        }
        let expected: Vec<Vec<u8>> = frame.messages.iter().map(|m| m.to_bytes()).collect();
        assert_eq!(messages, expected, "re-framed messages decode differently");
        frames += 1;
    }
    frames
}

/// Decodes a stream given in pieces: each frame (header and payload) or error, in order, up to
/// the first fatal error or the end.
fn decode_all<'a>(
    pieces: impl Iterator<Item = &'a [u8]>,
) -> Vec<Result<(FpmHeader, Vec<u8>), FpmError>> {
    let mut decoder = FrameDecoder::new();
    let mut out = Vec::new();
    for mut input in pieces {
        while !input.is_empty() {
            match decoder.decode(&mut input) {
                Ok(Some(f)) => out.push(Ok((f.header, f.payload.to_vec()))),
                Ok(None) => {}
                Err(e) => {
                    out.push(Err(e));
                    if e.is_fatal() {
                        return out;
                    }
                }
            }
        }
    }
    if let Err(e) = decoder.finish() {
        out.push(Err(e));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_big_endian() {
        let h = FpmHeader::netlink(0x0102 - 4);
        let mut out = Vec::new();
        h.emit(&mut out);
        assert_eq!(out, [1, 1, 0x01, 0x02]);
        assert_eq!(FpmHeader::parse_bytes(&out, 0), Ok(h));
        assert!(FpmHeader::parse_bytes(&out[..3], 7).is_err());
    }
}
