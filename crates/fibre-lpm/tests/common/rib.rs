//! Loads the shared real routing table (`shared/data/rib-2026-06.tsv.gz`, see its README) for
//! tests and examples: next hops are derived as `origin_asn % 64`, as the README suggests.
// Shared by several test targets and an example, each using a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

/// File name of the table inside `shared/data`.
const RIB: &str = "rib-2026-06.tsv.gz";

/// Peers next hops are spread over (`asn % PEERS`).
pub const PEERS: u32 = 64;

pub struct Rib {
    pub v4: Vec<(u32, u8, u32)>,
    pub v6: Vec<(u128, u8, u32)>,
}

/// Where the table is: `$FIBRE_DATA` (the file or its directory), else the first `shared/data`
/// found walking up from this crate (the repository's sibling `shared/`).
pub fn path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FIBRE_DATA") {
        let p = PathBuf::from(p);
        let file = if p.is_dir() { p.join(RIB) } else { p };
        return file.is_file().then_some(file);
    }
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .map(|a| a.join("shared").join("data").join(RIB))
        .find(|f| f.is_file())
}

/// The table, or `None` (after saying why on stderr) when it is not there.
pub fn load() -> Option<Rib> {
    let Some(path) = path() else {
        eprintln!(
            "SKIP: {RIB} not found (set FIBRE_DATA or place shared/data/ beside the repository)"
        );
        return None;
    };
    let file = std::fs::File::open(&path).expect("open routing table");
    let reader = BufReader::new(flate2::read::GzDecoder::new(file));
    let mut rib = Rib {
        v4: Vec::new(),
        v6: Vec::new(),
    };
    for line in reader.lines() {
        let line = line.expect("read routing table");
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (prefix, asn) = line.split_once('\t').expect("prefix<TAB>asn");
        let (addr, len) = prefix.split_once('/').expect("addr/len");
        let len: u8 = len.parse().expect("prefix length");
        let hop = asn.trim().parse::<u32>().expect("asn") % PEERS;
        if addr.contains(':') {
            let a: Ipv6Addr = addr.parse().expect("IPv6 address");
            rib.v6.push((u128::from(a), len, hop));
        } else {
            let a: Ipv4Addr = addr.parse().expect("IPv4 address");
            rib.v4.push((u32::from(a), len, hop));
        }
    }
    Some(rib)
}

/// A small deterministic generator (xorshift64*), so runs are repeatable without extra crates.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `n` IPv4 addresses inside random prefixes of `routes` (random host bits).
pub fn v4_hits(routes: &[(u32, u8, u32)], n: usize, rng: &mut Rng) -> Vec<u32> {
    (0..n)
        .map(|_| {
            let (p, l, _) = routes[rng.below(routes.len())];
            let host = if l >= 32 { 0 } else { u32::MAX >> l };
            p | (rng.next() as u32 & host)
        })
        .collect()
}

/// `n` IPv6 addresses inside random prefixes of `routes` (random host bits).
pub fn v6_hits(routes: &[(u128, u8, u32)], n: usize, rng: &mut Rng) -> Vec<u128> {
    (0..n)
        .map(|_| {
            let (p, l, _) = routes[rng.below(routes.len())];
            let host = if l >= 128 { 0 } else { u128::MAX >> l };
            let r = (u128::from(rng.next()) << 64) | u128::from(rng.next());
            p | (r & host)
        })
        .collect()
}
