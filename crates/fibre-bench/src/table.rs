//! The routing table the benchmarks load: `../shared/data/rib-2026-06.tsv.gz` (one
//! `prefix<TAB>origin_asn` per line after a `#` header), read where the data README says it lives,
//! never copied into the repository. Next hops are `asn % 64`, as that README suggests: repeatable,
//! and a realistic number of distinct next hops.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

/// The file name inside the shared data directory.
pub use fibre_traffic::workload::RIB_FILE;

/// Distinct next hops the benchmark spreads routes over (`asn % NEXT_HOPS`).
pub const NEXT_HOPS: u32 = 64;

/// An address family's key: `u32` for IPv4, `u128` for IPv6, both in host order.
pub trait Addr: Copy + Eq + std::hash::Hash + Ord + fmt::Debug + 'static {
    /// `self` with every bit past the first `len` cleared.
    fn masked(self, len: u8) -> Self;
    /// The bits past the first `len` of `self`, kept; the first `len` cleared.
    fn host_part(self, len: u8) -> Self;
    fn or(self, other: Self) -> Self;
}

impl Addr for u32 {
    fn masked(self, len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            self & (u32::MAX << (32 - u32::from(len)))
        }
    }
    fn host_part(self, len: u8) -> u32 {
        self & !u32::MAX.masked(len)
    }
    fn or(self, other: u32) -> u32 {
        self | other
    }
}

impl Addr for u128 {
    fn masked(self, len: u8) -> u128 {
        if len == 0 {
            0
        } else {
            self & (u128::MAX << (128 - u32::from(len)))
        }
    }
    fn host_part(self, len: u8) -> u128 {
        self & !u128::MAX.masked(len)
    }
    fn or(self, other: u128) -> u128 {
        self | other
    }
}

/// One route: canonical prefix (host bits zero), length, next hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<A> {
    pub prefix: A,
    pub len: u8,
    pub next_hop: u32,
}

/// The whole table, in file order (family, address, prefix length).
pub struct Table {
    pub v4: Vec<Route<u32>>,
    pub v6: Vec<Route<u128>>,
}

#[derive(Debug)]
pub enum LoadError {
    Io(PathBuf, io::Error),
    Parse { line: usize, text: String },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            LoadError::Parse { line, text } => {
                write!(f, "{RIB_FILE}:{line}: cannot parse {text:?}")
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// Where the table is: `$FIBRE_DATA` (the file itself or its directory), else `shared/data/`
/// beside the repository or beside any directory above it (the repository may be a worktree
/// nested below the shared directory's parent). `None` when it is nowhere.
pub use fibre_traffic::workload::locate_table as locate;

/// Reads and parses the whole table.
pub fn load(path: &Path) -> Result<Table, LoadError> {
    let file = File::open(path).map_err(|e| LoadError::Io(path.to_owned(), e))?;
    let reader = BufReader::with_capacity(1 << 20, GzDecoder::new(file));
    let mut table = Table {
        v4: Vec::with_capacity(1_200_000),
        v6: Vec::with_capacity(300_000),
    };
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| LoadError::Io(path.to_owned(), e))?;
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let bad = || LoadError::Parse {
            line: i + 1,
            text: line.clone(),
        };
        let (prefix, asn) = line.split_once('\t').ok_or_else(bad)?;
        let asn: u32 = asn.trim().parse().map_err(|_| bad())?;
        let (addr, len) = prefix.split_once('/').ok_or_else(bad)?;
        let len: u8 = len.parse().map_err(|_| bad())?;
        let next_hop = asn % NEXT_HOPS;
        if let Ok(a) = addr.parse::<Ipv4Addr>() {
            if len > 32 {
                return Err(bad());
            }
            table.v4.push(Route {
                prefix: u32::from(a).masked(len),
                len,
                next_hop,
            });
        } else if let Ok(a) = addr.parse::<Ipv6Addr>() {
            if len > 128 {
                return Err(bad());
            }
            table.v6.push(Route {
                prefix: u128::from(a).masked(len),
                len,
                next_hop,
            });
        } else {
            return Err(bad());
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_gz(name: &str, text: &str) -> PathBuf {
        use std::io::Write;
        let path = std::env::temp_dir().join(format!("fibre-bench-{}-{name}", std::process::id()));
        let mut gz =
            flate2::write::GzEncoder::new(File::create(&path).unwrap(), Default::default());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap();
        path
    }

    #[test]
    fn load_reads_both_families_and_derives_next_hops_from_the_asn() {
        let path = write_gz(
            "ok.tsv.gz",
            "# prefix\torigin_asn\n1.0.0.0/24\t13335\n10.1.2.0/23\t64\n2001:db8::/32\t65\n",
        );
        let t = load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            t.v4,
            [
                Route {
                    prefix: 0x0100_0000,
                    len: 24,
                    next_hop: 13335 % 64
                },
                Route {
                    prefix: 0x0a01_0200,
                    len: 23,
                    next_hop: 0
                },
            ]
        );
        assert_eq!(
            t.v6,
            [Route {
                prefix: 0x2001_0db8u128 << 96,
                len: 32,
                next_hop: 1
            }]
        );
    }

    #[test]
    fn load_names_the_line_it_cannot_parse() {
        let path = write_gz("bad.tsv.gz", "# header\n1.0.0.0/24\t1\n1.0.0.0/33\t1\n");
        let err = load(&path).err().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(err, LoadError::Parse { line: 3, .. }), "{err}");
    }

    #[test]
    fn masks_keep_the_prefix_and_the_host_part_apart() {
        let a: u32 = 0xc0a8_01ff;
        assert_eq!(a.masked(24), 0xc0a8_0100);
        assert_eq!(a.host_part(24), 0xff);
        assert_eq!(a.masked(0), 0);
        assert_eq!(a.masked(32), a);
        let b: u128 = u128::MAX;
        assert_eq!(b.masked(48), u128::MAX << 80);
        assert_eq!(b.masked(48).or(b.host_part(48)), b);
    }
}
