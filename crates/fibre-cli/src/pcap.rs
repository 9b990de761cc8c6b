//! Capture files for `fibre forward`: Ethernet frames with their capture times in (pcap or
//! pcapng, told apart by their first bytes), pcap out. The formats are `pcap-file`'s; this
//! module only turns them into (time, frame) pairs and back.
//!
//! Times are nanoseconds since the Unix epoch. pcapng stores a packet's time in units its
//! interface chooses (`if_tsresol`: 10^-6 s when absent); `pcap-file` hands the raw count over
//! as if it were nanoseconds, so it is scaled here.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, TsResolution};
use std::io::{BufReader, BufWriter, Read, Write};
use std::time::Duration;

/// pcapng's section header block type, the first four bytes of every pcapng file.
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// What written files record of each frame: as much as a link can carry with room for a
/// jumbo frame, as tcpdump's default snap length does.
const SNAPLEN: u32 = 262_144;

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// Nanoseconds since the Unix epoch.
    pub time_ns: u64,
    pub frame: Vec<u8>,
}

/// Reads every Ethernet frame of a pcap or pcapng file, in file order. Errors name the file.
pub fn read(path: &str) -> Result<Vec<Captured>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open \"{path}\": {e}"))?;
    let mut input = BufReader::new(file);
    let mut magic = [0u8; 4];
    input
        .read_exact(&mut magic)
        .map_err(|_| format!("\"{path}\": not a pcap or pcapng file"))?;
    let chained = std::io::Cursor::new(magic).chain(input);
    let frames = if magic == PCAPNG_MAGIC {
        read_pcapng(chained)
    } else {
        read_pcap(chained)
    };
    frames.map_err(|e| format!("\"{path}\": {e}"))
}

fn read_pcap(input: impl Read) -> Result<Vec<Captured>, String> {
    let mut r = PcapReader::new(input).map_err(|e| e.to_string())?;
    if r.header().datalink != DataLink::ETHERNET {
        return Err(format!("link type {:?}, not Ethernet", r.header().datalink));
    }
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.map_err(|e| e.to_string())?;
        out.push(Captured {
            time_ns: nanos(p.timestamp),
            frame: p.data.into_owned(),
        });
    }
    Ok(out)
}

fn read_pcapng(input: impl Read) -> Result<Vec<Captured>, String> {
    let mut r = PcapNgReader::new(input).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(block) = r.next_block() {
        let (interface_id, timestamp, frame) = match block.map_err(|e| e.to_string())? {
            Block::EnhancedPacket(p) => (p.interface_id, p.timestamp, p.data.into_owned()),
            Block::SimplePacket(_) => {
                return Err("simple packet blocks carry no time; use enhanced packets".into())
            }
            _ => continue,
        };
        let iface = r
            .interfaces()
            .get(interface_id as usize)
            .ok_or_else(|| format!("packet names interface {interface_id}, not described"))?;
        if iface.linktype != DataLink::ETHERNET {
            return Err(format!("link type {:?}, not Ethernet", iface.linktype));
        }
        let resol = iface.options.iter().find_map(|o| match o {
            InterfaceDescriptionOption::IfTsResol(v) => Some(*v),
            _ => None,
        });
        out.push(Captured {
            time_ns: scale(nanos(timestamp), resol.unwrap_or(6))?,
            frame,
        });
    }
    Ok(out)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds from a pcapng raw time count in units of `if_tsresol` (top bit clear: 10^-v
/// seconds, set: 2^-v seconds).
fn scale(raw: u64, resol: u8) -> Result<u64, String> {
    let v = u32::from(resol & 0x7f);
    let ns = if resol & 0x80 == 0 {
        if v > 9 {
            // Finer than a nanosecond: dividing loses nothing a nanosecond clock could hold.
            raw / 10u64.pow(v.min(19) - 9)
        } else {
            raw.saturating_mul(10u64.pow(9 - v))
        }
    } else {
        if v > 63 {
            return Err(format!("timestamp resolution 2^-{v} is not supported"));
        }
        ((u128::from(raw) * 1_000_000_000) >> v) as u64
    };
    Ok(ns)
}

/// A pcap file being written, Ethernet, nanosecond times.
pub struct Writer {
    inner: PcapWriter<BufWriter<std::fs::File>>,
    path: String,
}

impl Writer {
    pub fn create(path: &str) -> Result<Writer, String> {
        let file =
            std::fs::File::create(path).map_err(|e| format!("cannot create \"{path}\": {e}"))?;
        let header = PcapHeader {
            snaplen: SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        let inner = PcapWriter::with_header(BufWriter::new(file), header)
            .map_err(|e| format!("\"{path}\": {e}"))?;
        Ok(Writer {
            inner,
            path: path.to_string(),
        })
    }

    pub fn write(&mut self, time_ns: u64, frame: &[u8]) -> Result<(), String> {
        let p = PcapPacket::new(Duration::from_nanos(time_ns), frame.len() as u32, frame);
        self.inner
            .write_packet(&p)
            .map(drop)
            .map_err(|e| format!("\"{}\": {e}", self.path))
    }

    pub fn finish(self) -> Result<(), String> {
        let path = self.path;
        self.inner
            .into_writer()
            .flush()
            .map_err(|e| format!("\"{path}\": {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcapng_resolutions_scale_to_nanoseconds() {
        assert_eq!(scale(1_500_000, 6), Ok(1_500_000_000));
        assert_eq!(scale(7, 9), Ok(7));
        assert_eq!(scale(3_000, 12), Ok(3));
        // 2^-10 s units: 1024 of them are one second.
        assert_eq!(scale(1024, 0x80 | 10), Ok(1_000_000_000));
    }

    #[test]
    fn written_pcap_reads_back() {
        let dir = std::env::temp_dir().join(format!("fibre-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pcap");
        let path = path.to_str().unwrap();
        let mut w = Writer::create(path).unwrap();
        w.write(1_700_000_000_123_456_789, &[1, 2, 3]).unwrap();
        w.write(1_700_000_001_000_000_000, &[4; 60]).unwrap();
        w.finish().unwrap();
        let got = read(path).unwrap();
        assert_eq!(
            got,
            vec![
                Captured {
                    time_ns: 1_700_000_000_123_456_789,
                    frame: vec![1, 2, 3]
                },
                Captured {
                    time_ns: 1_700_000_001_000_000_000,
                    frame: vec![4; 60]
                },
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pcapng_reads_with_interface_resolution() {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        use pcap_file::pcapng::PcapNgWriter;
        use std::borrow::Cow;
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 0,
            options: vec![],
        })
        .unwrap();
        // Microseconds by default: pcap-file reads the raw count 5 as 5 ns.
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(5),
            original_len: 2,
            data: Cow::Borrowed(&[9, 9]),
            options: vec![],
        })
        .unwrap();
        let bytes = w.into_inner();
        let got = read_pcapng(&bytes[..]).unwrap();
        assert_eq!(
            got,
            vec![Captured {
                time_ns: 5_000,
                frame: vec![9, 9]
            }]
        );
    }
}
