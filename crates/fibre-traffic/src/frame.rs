//! The generator's frames: Ethernet, IPv4 or IPv6, UDP, and a probe at the start of the UDP
//! payload that the sink reads back.
//!
//! The probe is 16 bytes, big-endian: a magic (`0xfb7c`), the destination set the frame
//! belongs to (`u16`), the sequence number (`u32`, one count per generator run, wrapping) and
//! the send time (`u64`, CLOCK_MONOTONIC nanoseconds, which every network namespace of a host
//! shares). [`stamp`] writes the sequence number and the time into a built frame and keeps
//! its UDP checksum right by RFC 1624's incremental update, so a frame is built once and
//! stamped per send without reading it whole.
//!
//! Sizes are Ethernet frame sizes with the 4-byte FCS, as RFC 2544 and the IMIX mixes count
//! them: a 64-byte frame is 60 bytes handed to the port. The smallest frame with a probe is 64
//! bytes over IPv4 and [`MIN_V6`] over IPv6 (its header is 20 bytes longer).

use std::net::IpAddr;

use fibre_wire::checksum::{self, PseudoHeader};
use fibre_wire::ethernet::{self, Address};
use fibre_wire::{ipv4, ipv6, udp};

/// The bytes an Ethernet frame size counts that a port never sees.
pub const FCS_LEN: usize = 4;
/// The probe's length and magic.
pub const PROBE_LEN: usize = 16;
pub const MAGIC: u16 = 0xfb7c;
/// The UDP destination port of every generated frame (discard, RFC 863).
pub const DST_PORT: u16 = 9;
/// The smallest frame sizes (FCS included): Ethernet's minimum over IPv4 (the probe needs 62
/// bytes), the headers and the probe over IPv6.
pub const MIN_V4: usize = 64;
pub const MIN_V6: usize =
    ethernet::HEADER_LEN + ipv6::HEADER_LEN + udp::HEADER_LEN + PROBE_LEN + FCS_LEN;
/// The largest: a 1500-byte IP packet.
pub const MAX: usize = 1518;

/// Where the probe's fields sit, from the start of the UDP payload.
const SET: usize = 2;
const SEQ: usize = 4;
const TIME: usize = 8;

/// What varies between the flows of a workload: the addresses and the tos (IPv6: the
/// traffic class).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Flow {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub tos: u8,
}

/// The Ethernet addresses of every frame.
#[derive(Debug, Clone, Copy)]
pub struct Macs {
    pub src: [u8; 6],
    pub dst: [u8; 6],
}

/// A frame built once and stamped per send: its bytes (FCS excluded) and where its UDP
/// checksum and payload are.
#[derive(Debug, Clone)]
pub struct Template {
    pub bytes: Vec<u8>,
    /// Offset of the UDP header.
    udp: usize,
}

/// The smallest frame size (FCS included) for `flow`'s family.
pub fn min_size(flow: &Flow) -> usize {
    if flow.dst.is_ipv4() {
        MIN_V4
    } else {
        MIN_V6
    }
}

/// Why a frame could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// Source and destination of different families.
    Families(Flow),
    /// The size is outside `min_size..=MAX`.
    Size { size: usize, min: usize },
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Families(fl) => {
                write!(
                    f,
                    "source {} and destination {} differ in family",
                    fl.src, fl.dst
                )
            }
            BuildError::Size { size, min } => {
                write!(f, "frame size {size} outside {min}..={MAX}")
            }
        }
    }
}

impl std::error::Error for BuildError {}

impl Template {
    /// The frame of `flow`, `size` bytes on the wire (FCS included), with UDP source port
    /// `sport`, set `set` and sequence number and time zero.
    pub fn build(
        flow: &Flow,
        macs: &Macs,
        size: usize,
        sport: u16,
        set: u16,
    ) -> Result<Template, BuildError> {
        let min = min_size(flow);
        if !(min..=MAX).contains(&size) {
            return Err(BuildError::Size { size, min });
        }
        let mut bytes = vec![0u8; size - FCS_LEN];
        let ethertype = if flow.dst.is_ipv4() { 0x0800 } else { 0x86dd };
        ethernet::Repr {
            dst_addr: Address(macs.dst),
            src_addr: Address(macs.src),
            ethertype,
        }
        .emit(&mut ethernet::Frame::new_unchecked(&mut bytes[..]));
        let ip = &mut bytes[ethernet::HEADER_LEN..];
        let (hlen, pseudo) = match (flow.src, flow.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                ipv4::Repr {
                    src_addr: src,
                    dst_addr: dst,
                    protocol: 17,
                    payload_len: ip.len() - ipv4::HEADER_LEN,
                    ttl: 64,
                    tos: flow.tos,
                    ident: sport,
                    reserved_flag: false,
                    dont_frag: false,
                    more_frags: false,
                    frag_offset: 0,
                    options: Default::default(),
                }
                .emit(&mut ipv4::Packet::new_unchecked(&mut *ip));
                (ipv4::HEADER_LEN, PseudoHeader::V4 { src, dst })
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                ipv6::Repr {
                    src_addr: src,
                    dst_addr: dst,
                    next_header: 17,
                    payload_len: ip.len() - ipv6::HEADER_LEN,
                    hop_limit: 64,
                    traffic_class: flow.tos,
                    flow_label: 0,
                }
                .emit(&mut ipv6::Packet::new_unchecked(&mut *ip));
                (ipv6::HEADER_LEN, PseudoHeader::V6 { src, dst })
            }
            _ => return Err(BuildError::Families(*flow)),
        };
        let l4 = &mut ip[hlen..];
        let payload_len = l4.len() - udp::HEADER_LEN;
        let mut u = udp::Packet::new_unchecked(l4);
        udp::Repr {
            src_port: sport,
            dst_port: DST_PORT,
            payload_len,
        }
        .emit(&mut u);
        let p = u.payload_mut();
        p[..2].copy_from_slice(&MAGIC.to_be_bytes());
        p[SET..SET + 2].copy_from_slice(&set.to_be_bytes());
        u.fill_checksum(&pseudo);
        Ok(Template {
            bytes,
            udp: ethernet::HEADER_LEN + hlen,
        })
    }

    /// The frame's size on the wire (FCS included).
    pub fn wire_len(&self) -> usize {
        self.bytes.len() + FCS_LEN
    }

    /// Writes `seq` and `time_ns` into the probe, updating the UDP checksum for the words that
    /// changed.
    pub fn stamp(&mut self, seq: u32, time_ns: u64) {
        let probe = self.udp + udp::HEADER_LEN;
        let mut new = [0u8; PROBE_LEN - SEQ];
        new[..4].copy_from_slice(&seq.to_be_bytes());
        new[4..].copy_from_slice(&time_ns.to_be_bytes());
        let old = &self.bytes[probe + SEQ..probe + PROBE_LEN];
        let check = u16::from_be_bytes([self.bytes[self.udp + 6], self.bytes[self.udp + 7]]);
        let mut c = checksum::update_bytes(check, old, &new);
        // Zero means "no checksum" over IPv4 and is invalid over IPv6: its one's complement
        // twin is sent instead (RFC 768).
        if c == 0 {
            c = 0xffff;
        }
        self.bytes[probe + SEQ..probe + PROBE_LEN].copy_from_slice(&new);
        self.bytes[self.udp + 6..self.udp + 8].copy_from_slice(&c.to_be_bytes());
    }
}

/// A probe read back from a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub set: u16,
    pub seq: u32,
    pub time_ns: u64,
}

/// What the sink makes of a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A generator's frame with valid checksums.
    Probe(Probe),
    /// A generator's frame (its magic and UDP port) with a wrong IPv4 header or UDP checksum.
    Corrupt,
    /// Anything else: the hosts' own traffic (neighbour discovery, router solicitations), or
    /// frames of another tool.
    Other,
}

/// Reads the probe of `frame`, checking the IPv4 header checksum and the UDP checksum.
pub fn parse(frame: &[u8]) -> Parsed {
    let Ok(eth) = ethernet::Frame::new_checked(frame) else {
        return Parsed::Other;
    };
    let l3 = eth.payload();
    let (udp_bytes, pseudo, header_ok) = match eth.ethertype() {
        0x0800 => {
            let Ok(ip) = ipv4::Packet::new_checked(l3) else {
                return Parsed::Other;
            };
            if ip.protocol() != 17 {
                return Parsed::Other;
            }
            let pseudo = PseudoHeader::V4 {
                src: ip.src_addr(),
                dst: ip.dst_addr(),
            };
            let range = ip.header_len()..usize::from(ip.total_len());
            (&l3[range], pseudo, ip.verify_checksum().is_ok())
        }
        0x86dd => {
            let Ok(ip) = ipv6::Packet::new_checked(l3) else {
                return Parsed::Other;
            };
            if ip.next_header() != 17 {
                return Parsed::Other;
            }
            let pseudo = PseudoHeader::V6 {
                src: ip.src_addr(),
                dst: ip.dst_addr(),
            };
            let end = ipv6::HEADER_LEN + usize::from(ip.payload_len());
            (&l3[ipv6::HEADER_LEN..end], pseudo, true)
        }
        _ => return Parsed::Other,
    };
    let Ok(u) = udp::Packet::new_checked(udp_bytes) else {
        return Parsed::Other;
    };
    let p = u.payload();
    if u.dst_port() != DST_PORT || p.len() < PROBE_LEN || p[..2] != MAGIC.to_be_bytes() {
        return Parsed::Other;
    }
    // A zero UDP checksum over IPv4 verifies ("none"), but the generator always sends one.
    if !header_ok || u.checksum() == 0 || u.verify_checksum(&pseudo).is_err() {
        return Parsed::Corrupt;
    }
    let be = |r: std::ops::Range<usize>| p[r].iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
    Parsed::Probe(Probe {
        set: be(SET..SET + 2) as u16,
        seq: be(SEQ..SEQ + 4) as u32,
        time_ns: be(TIME..PROBE_LEN),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACS: Macs = Macs {
        src: [2, 0, 0, 0, 0, 1],
        dst: [2, 0, 0, 0, 0, 2],
    };

    fn flows() -> [Flow; 2] {
        [
            Flow {
                src: "10.0.0.2".parse().unwrap(),
                dst: "198.18.3.4".parse().unwrap(),
                tos: 0x10,
            },
            Flow {
                src: "fd00::2".parse().unwrap(),
                dst: "2001:db8::7".parse().unwrap(),
                tos: 0x08,
            },
        ]
    }

    #[test]
    fn stamped_frames_keep_valid_checksums_and_read_back() {
        for flow in flows() {
            for size in [min_size(&flow), 570, MAX] {
                let mut t = Template::build(&flow, &MACS, size, 4242, 3).unwrap();
                assert_eq!(t.wire_len(), size);
                for (seq, time) in [
                    (0u32, 0u64),
                    (1, 12_345),
                    (u32::MAX, u64::MAX),
                    (7, 1 << 40),
                ] {
                    t.stamp(seq, time);
                    let want = Probe {
                        set: 3,
                        seq,
                        time_ns: time,
                    };
                    assert_eq!(parse(&t.bytes), Parsed::Probe(want), "{flow:?} {size}");
                    // The incremental update equals a checksum computed from scratch.
                    let mut fresh = t.bytes.clone();
                    let pseudo = match (flow.src, flow.dst) {
                        (IpAddr::V4(s), IpAddr::V4(d)) => PseudoHeader::V4 { src: s, dst: d },
                        (IpAddr::V6(s), IpAddr::V6(d)) => PseudoHeader::V6 { src: s, dst: d },
                        _ => unreachable!(),
                    };
                    udp::Packet::new_unchecked(&mut fresh[t.udp..]).fill_checksum(&pseudo);
                    assert_eq!(fresh, t.bytes);
                }
            }
        }
    }

    #[test]
    fn damaged_frames_are_corrupt_and_foreign_ones_other() {
        let mut t = Template::build(&flows()[0], &MACS, 64, 1, 0).unwrap();
        t.stamp(9, 99);
        let mut bad = t.bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(parse(&bad), Parsed::Corrupt);
        let mut bad_header = t.bytes.clone();
        bad_header[ethernet::HEADER_LEN + 8] = 1; // the TTL, without fixing the header sum
        assert_eq!(parse(&bad_header), Parsed::Corrupt);
        let mut foreign = t.bytes.clone();
        foreign[t.udp + udp::HEADER_LEN] = 0;
        assert_eq!(parse(&foreign), Parsed::Other);
        assert_eq!(parse(&t.bytes[..20]), Parsed::Other);
    }

    #[test]
    fn sizes_outside_the_family_range_are_refused() {
        let [v4, v6] = flows();
        assert!(Template::build(&v4, &MACS, 63, 1, 0).is_err());
        assert!(Template::build(&v6, &MACS, 64, 1, 0).is_err());
        assert!(Template::build(&v6, &MACS, MIN_V6, 1, 0).is_ok());
        assert!(Template::build(&v4, &MACS, MAX + 1, 1, 0).is_err());
        let mixed = Flow {
            src: v4.src,
            dst: v6.dst,
            tos: 0,
        };
        assert_eq!(
            Template::build(&mixed, &MACS, 100, 1, 0).unwrap_err(),
            BuildError::Families(mixed)
        );
    }
}
