//! The routing table the examples load: the real 2026 table of `../shared/data` (one `prefix
//! TAB origin-AS` line per route, gzip), or the file named as the first argument. Read it from
//! there; it is never part of the repository.

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::{Command, Stdio};

const DEFAULT: &str = "/work/shared/data/rib-2026-06.tsv.gz";

/// The table's path, or `None` after printing why the example skips (the file is absent).
pub fn path_or_skip() -> Option<String> {
    let path = std::env::args().nth(1).unwrap_or_else(|| DEFAULT.into());
    if std::path::Path::new(&path).exists() {
        Some(path)
    } else {
        println!("skip: {path} not found (see ../shared/data/README.md)");
        None
    }
}

/// Every route of the table as (prefix address, length, origin AS; 0 where it is missing),
/// in file order.
pub fn read(path: &str) -> Vec<(IpAddr, u8, u32)> {
    let mut child = Command::new("zcat")
        .arg(path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("zcat runs");
    let out = child.stdout.take().expect("piped");
    let mut routes = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.expect("readable");
        if line.starts_with('#') {
            continue;
        }
        let mut it = line.split('\t');
        let Some((a, l)) = it.next().and_then(|p| p.split_once('/')) else {
            continue;
        };
        if let (Ok(addr), Ok(len)) = (a.parse::<IpAddr>(), l.parse::<u8>()) {
            let asn = it.next().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
            routes.push((addr, len, asn));
        }
    }
    let _ = child.wait();
    routes
}
