//! A reader for the capture files the generator replays: pcap (both byte orders, micro- and
//! nanosecond magics) and pcapng (section, interface description and enhanced or simple
//! packet blocks), Ethernet link type only. Frames are read whole into memory before the
//! replay starts, so the send loop never touches the file; their capture times are not kept
//! (the generator paces by its own rate).

use std::fmt;
use std::path::Path;

/// pcap's link type for Ethernet (LINKTYPE_ETHERNET).
const ETHERNET: u32 = 1;
/// pcap's magic numbers, microsecond and nanosecond timestamps, as read little-endian.
const PCAP_US: u32 = 0xa1b2_c3d4;
const PCAP_NS: u32 = 0xa1b2_3c4d;
/// pcapng's block types and its byte-order magic.
const NG_SECTION: u32 = 0x0a0d_0d0a;
const NG_INTERFACE: u32 = 1;
const NG_SIMPLE: u32 = 3;
const NG_ENHANCED: u32 = 6;
const NG_BYTE_ORDER: u32 = 0x1a2b_3c4d;

/// Why a capture could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PcapError {
    Io(String),
    /// Not a pcap or pcapng file.
    Format,
    /// A record that runs past the end of the file or is inconsistent, at this offset.
    Truncated(usize),
    /// A link type other than Ethernet.
    LinkType(u32),
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapError::Io(e) => f.write_str(e),
            PcapError::Format => f.write_str("not a pcap or pcapng file"),
            PcapError::Truncated(at) => write!(f, "truncated or malformed record at byte {at}"),
            PcapError::LinkType(t) => write!(f, "link type {t}, not Ethernet"),
        }
    }
}

impl std::error::Error for PcapError {}

/// Every frame of the capture at `path`, in file order. Errors do not name the file.
pub fn read(path: &Path) -> Result<Vec<Vec<u8>>, PcapError> {
    let data = std::fs::read(path).map_err(|e| PcapError::Io(e.to_string()))?;
    parse(&data)
}

/// Every frame of a capture held in memory.
pub fn parse(data: &[u8]) -> Result<Vec<Vec<u8>>, PcapError> {
    let magic = u32_at(data, 0, false).ok_or(PcapError::Format)?;
    match magic {
        NG_SECTION => pcapng(data),
        PCAP_US | PCAP_NS => pcap(data, false),
        m if m.swap_bytes() == PCAP_US || m.swap_bytes() == PCAP_NS => pcap(data, true),
        _ => Err(PcapError::Format),
    }
}

/// `N` bytes at `at`, when the data holds them.
fn bytes_at<const N: usize>(data: &[u8], at: usize) -> Option<[u8; N]> {
    data.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn u32_at(data: &[u8], at: usize, big: bool) -> Option<u32> {
    let b = bytes_at(data, at)?;
    Some(if big {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

fn u16_at(data: &[u8], at: usize, big: bool) -> Option<u16> {
    let b = bytes_at(data, at)?;
    Some(if big {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    })
}

fn pcap(data: &[u8], big: bool) -> Result<Vec<Vec<u8>>, PcapError> {
    let link = u32_at(data, 20, big).ok_or(PcapError::Truncated(0))?;
    // The upper bits of the field carry FCS information (pcap's LINKTYPE field layout).
    if link & 0x0fff_ffff != ETHERNET {
        return Err(PcapError::LinkType(link));
    }
    let mut out = Vec::new();
    let mut at = 24;
    while at < data.len() {
        let caplen = u32_at(data, at + 8, big).ok_or(PcapError::Truncated(at))? as usize;
        let start = at + 16;
        let frame = data
            .get(start..start.saturating_add(caplen))
            .ok_or(PcapError::Truncated(at))?;
        out.push(frame.to_vec());
        at = start + caplen;
    }
    Ok(out)
}

fn pcapng(data: &[u8]) -> Result<Vec<Vec<u8>>, PcapError> {
    let mut out = Vec::new();
    let mut links: Vec<u32> = Vec::new();
    let mut big = false;
    let mut at = 0;
    while at < data.len() {
        let kind = u32_at(data, at, big).ok_or(PcapError::Truncated(at))?;
        if kind == NG_SECTION {
            // The byte order is the section's: its magic tells.
            let bom = u32_at(data, at + 8, false).ok_or(PcapError::Truncated(at))?;
            big = bom != NG_BYTE_ORDER;
            if big && bom.swap_bytes() != NG_BYTE_ORDER {
                return Err(PcapError::Format);
            }
            links.clear();
        }
        let len = u32_at(data, at + 4, big).ok_or(PcapError::Truncated(at))? as usize;
        if len < 12 || len % 4 != 0 || at.saturating_add(len) > data.len() {
            return Err(PcapError::Truncated(at));
        }
        let body = &data[at + 8..at + len - 4];
        match kind {
            NG_INTERFACE => links.push(u32::from(
                u16_at(body, 0, big).ok_or(PcapError::Truncated(at))?,
            )),
            NG_ENHANCED => {
                let iface = u32_at(body, 0, big).ok_or(PcapError::Truncated(at))? as usize;
                let caplen = u32_at(body, 12, big).ok_or(PcapError::Truncated(at))? as usize;
                let link = *links.get(iface).ok_or(PcapError::Truncated(at))?;
                if link != ETHERNET {
                    return Err(PcapError::LinkType(link));
                }
                let frame = body
                    .get(20..20usize.saturating_add(caplen))
                    .ok_or(PcapError::Truncated(at))?;
                out.push(frame.to_vec());
            }
            NG_SIMPLE => {
                let link = *links.first().ok_or(PcapError::Truncated(at))?;
                if link != ETHERNET {
                    return Err(PcapError::LinkType(link));
                }
                let orig = u32_at(body, 0, big).ok_or(PcapError::Truncated(at))? as usize;
                let frame = &body[4..];
                out.push(frame[..orig.min(frame.len())].to_vec());
            }
            _ => {}
        }
        at += len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcap_file(big: bool, frames: &[&[u8]]) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut d = Vec::new();
        d.extend(w32(PCAP_NS));
        d.extend(w16(2));
        d.extend(w16(4));
        d.extend([0; 8]);
        d.extend(w32(65535));
        d.extend(w32(ETHERNET));
        for (i, f) in frames.iter().enumerate() {
            d.extend(w32(i as u32));
            d.extend(w32(0));
            d.extend(w32(f.len() as u32));
            d.extend(w32(f.len() as u32));
            d.extend_from_slice(f);
        }
        d
    }

    fn block(kind: u32, body: &[u8]) -> Vec<u8> {
        let pad = (4 - body.len() % 4) % 4;
        let len = (12 + body.len() + pad) as u32;
        let mut b = Vec::new();
        b.extend(kind.to_le_bytes());
        b.extend(len.to_le_bytes());
        b.extend_from_slice(body);
        b.extend(std::iter::repeat_n(0, pad));
        b.extend(len.to_le_bytes());
        b
    }

    #[test]
    fn pcap_in_both_byte_orders() {
        let frames: [&[u8]; 2] = [&[1; 60], &[2; 61]];
        for big in [false, true] {
            assert_eq!(parse(&pcap_file(big, &frames)).unwrap(), frames);
        }
        let mut cut = pcap_file(false, &frames);
        cut.truncate(cut.len() - 1);
        assert!(matches!(parse(&cut), Err(PcapError::Truncated(_))));
    }

    #[test]
    fn pcapng_enhanced_and_simple_blocks() {
        let mut shb = Vec::new();
        shb.extend(NG_BYTE_ORDER.to_le_bytes());
        shb.extend(1u16.to_le_bytes());
        shb.extend(0u16.to_le_bytes());
        shb.extend((-1i64).to_le_bytes());
        let mut idb = Vec::new();
        idb.extend(1u16.to_le_bytes());
        idb.extend(0u16.to_le_bytes());
        idb.extend(0u32.to_le_bytes());
        let frame = [7u8; 61];
        let mut epb = Vec::new();
        epb.extend(0u32.to_le_bytes());
        epb.extend([0; 8]);
        epb.extend((frame.len() as u32).to_le_bytes());
        epb.extend((frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(&frame);
        let mut spb = Vec::new();
        spb.extend(60u32.to_le_bytes());
        spb.extend_from_slice(&[9u8; 60]);
        let mut d = block(NG_SECTION, &shb);
        d.extend(block(NG_INTERFACE, &idb));
        d.extend(block(NG_ENHANCED, &epb));
        d.extend(block(NG_SIMPLE, &spb));
        assert_eq!(parse(&d).unwrap(), vec![frame.to_vec(), vec![9u8; 60]]);
    }

    #[test]
    fn other_link_types_and_files_are_refused() {
        let mut d = pcap_file(false, &[]);
        d[20] = 101; // LINKTYPE_RAW
        assert_eq!(parse(&d), Err(PcapError::LinkType(101)));
        assert_eq!(parse(b"GIF89a.."), Err(PcapError::Format));
        assert_eq!(parse(b""), Err(PcapError::Format));
    }
}
