//! What the generator sends: flows (source, destination, tos), the frame sizes, and the order
//! of the frames, drawn once from a seed so that a run is repeatable.
//!
//! Destination sets:
//! - prefixes: `n` destinations, each inside a prefix picked uniformly from a list, its host
//!   bits random;
//! - seed 000's workload ([`seed000`]): the workload of Linux's input route cache series
//!   (netdev, "[PATCH net-next v2 0/4] net: route: improve route hinting", 2024), as
//!   fibre-bench's input cache benchmark builds it: [`SEED_DESTINATIONS`] destinations inside
//!   the 2026 table's prefixes, each sent from [`SEED_SOURCES`] hosts with each of [`SEED_TOS`],
//!   optionally only the share one of [`SEED_QUEUES`] receive queues gets;
//! - a flood ([`flood`]): every frame of the cycle a new source and destination.
//!
//! The generator sends a cycle of at most [`CYCLE`] frames over and over, each frame built
//! once ([`crate::frame::Template`]) and stamped per send. Frames are drawn uniformly from the
//! flows; a flood's cycle has no flow twice. Sizes: one fixed size, or IMIX ([`IMIX`]).
//!
//! The table is read where the shared data's README says it lives and never copied into the
//! repository ([`locate_table`], which fibre-bench uses too, as it uses [`Rng`]: the same
//! seed draws the same addresses in both).

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

use crate::frame::{min_size, BuildError, Flow, Macs, Template};

/// Frames in the generator's cycle at most: far more distinct keys than an input route cache
/// holds (a flood stays a flood), and at most ~100 MB of IMIX templates.
pub const CYCLE: usize = 1 << 16;

/// Seed 000's workload: destinations, sources per destination and tos values (fibre-bench's
/// `cache.rs` has the same numbers), and the receive queues the series' NIC spread flows over.
pub const SEED_DESTINATIONS: usize = 5000;
pub const SEED_SOURCES: u8 = 4;
pub const SEED_TOS: [u8; 4] = [0x00, 0x04, 0x08, 0x10];
pub const SEED_QUEUES: u64 = 20;

/// The simple IMIX: 7 frames of 64 bytes, 4 of 570 and 1 of 1518 (FCS included) in every 12,
/// interleaved so that no burst is made of one size (average 353.8 bytes).
pub const IMIX: [usize; 12] = [64, 570, 64, 64, 570, 64, 1518, 64, 570, 64, 64, 570];

/// The table's file name in the shared data directory.
pub const RIB_FILE: &str = "rib-2026-06.tsv.gz";

/// SplitMix64: small and good enough to spread addresses; keeps the crate free of a
/// random-number dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is below 2^-40 for the sizes used here.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn u128(&mut self) -> u128 {
        (u128::from(self.next_u64()) << 64) | u128::from(self.next_u64())
    }
}

/// SplitMix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An IPv4 or IPv6 prefix, host bits zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

fn bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn width(a: IpAddr) -> u8 {
    if a.is_ipv4() {
        32
    } else {
        128
    }
}

fn from_bits(like: IpAddr, b: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(b as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(b)),
    }
}

/// The mask of the host bits of a `len`-bit prefix of a `w`-bit address.
fn host_mask(w: u8, len: u8) -> u128 {
    let all = if w == 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    };
    if len == 0 {
        all
    } else {
        all >> len
    }
}

impl Prefix {
    /// `ADDR/LEN` or a bare address (a host prefix); host bits are cleared.
    pub fn parse(s: &str) -> Option<Prefix> {
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a.parse::<IpAddr>().ok()?, l.parse::<u8>().ok()?),
            None => {
                let a = s.parse::<IpAddr>().ok()?;
                (a, width(a))
            }
        };
        if len > width(a) {
            return None;
        }
        let net = bits(a) & !host_mask(width(a), len);
        Some(Prefix {
            addr: from_bits(a, net),
            len,
        })
    }

    pub fn contains(&self, a: IpAddr) -> bool {
        a.is_ipv4() == self.addr.is_ipv4()
            && bits(a) & !host_mask(width(a), self.len) == bits(self.addr)
    }

    /// An address inside the prefix, its host bits random.
    pub fn random(&self, rng: &mut Rng) -> IpAddr {
        let m = host_mask(width(self.addr), self.len);
        from_bits(self.addr, bits(self.addr) | (rng.u128() & m))
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Destinations no benchmark topology should be sent: this host's, private, shared, link-local,
/// multicast and reserved space, where the router's own links and hosts live.
const AVOID: [&str; 10] = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "224.0.0.0/3",
    "::/8",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
];

fn avoided(a: IpAddr) -> bool {
    AVOID
        .iter()
        .filter_map(|p| Prefix::parse(p))
        .any(|p| p.contains(a))
}

/// Why a workload could not be made.
#[derive(Debug)]
pub enum WorkloadError {
    Io(PathBuf, io::Error),
    Parse {
        line: usize,
        text: String,
    },
    /// No prefix of the family asked for.
    Empty(&'static str),
    Build(BuildError),
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            WorkloadError::Parse { line, text } => write!(f, "line {line}: cannot parse {text:?}"),
            WorkloadError::Empty(what) => write!(f, "no {what} prefixes to draw from"),
            WorkloadError::Build(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WorkloadError {}

/// Where the table is: `$FIBRE_DATA` (the file or its directory), else `shared/data/` beside
/// the repository or any directory above it.
pub fn locate_table() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FIBRE_DATA") {
        let p = PathBuf::from(p);
        let file = if p.is_dir() { p.join(RIB_FILE) } else { p };
        return file.is_file().then_some(file);
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repo = repo.canonicalize().unwrap_or(repo);
    repo.ancestors()
        .map(|dir| dir.join("shared/data").join(RIB_FILE))
        .find(|f| f.is_file())
}

/// The prefixes of one family (`v6`) in a file of one prefix per line (anything after a tab
/// or a space is ignored, `#` lines skipped), gzip'd when its name ends in `.gz`.
pub fn read_prefixes(path: &Path, v6: bool) -> Result<Vec<Prefix>, WorkloadError> {
    let io_err = |e| WorkloadError::Io(path.to_owned(), e);
    let file = File::open(path).map_err(io_err)?;
    let reader: Box<dyn BufRead> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(BufReader::with_capacity(1 << 20, GzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    };
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(io_err)?;
        let text = line.split(['\t', ' ']).next().unwrap_or("");
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let p = Prefix::parse(text).ok_or_else(|| WorkloadError::Parse {
            line: i + 1,
            text: line.clone(),
        })?;
        if p.addr.is_ipv6() == v6 {
            out.push(p);
        }
    }
    Ok(out)
}

/// `n` destinations, each inside a prefix picked uniformly from `prefixes`; with `avoid`,
/// none in the avoided space (draws there are repeated, up to `4n` draws in all): a table's
/// prefixes may cover the space where the topology's own links are, prefixes a user names
/// are taken as they are.
pub fn destinations(prefixes: &[Prefix], n: usize, avoid: bool, rng: &mut Rng) -> Vec<IpAddr> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..4 * n.max(1) {
        if out.len() == n || prefixes.is_empty() {
            break;
        }
        let a = prefixes[rng.below(prefixes.len())].random(rng);
        if !(avoid && avoided(a)) {
            out.push(a);
        }
    }
    out
}

/// Which of [`SEED_QUEUES`] receive queues a flow lands in: a hash of its addresses, as a
/// NIC's receive side scaling spreads flows.
pub fn queue(f: &Flow) -> u64 {
    let x = bits(f.dst) ^ bits(f.src).rotate_left(64);
    mix((x as u64) ^ ((x >> 64) as u64)) % SEED_QUEUES
}

/// Seed 000's flows: [`SEED_DESTINATIONS`] destinations drawn from `table`, each from the
/// [`SEED_SOURCES`] hosts after `src` and with each tos of [`SEED_TOS`]; with `one_queue`,
/// only the flows queue 0 of [`SEED_QUEUES`] gets (what one of the series' per-queue caches
/// saw).
pub fn seed000(table: &[Prefix], src: IpAddr, one_queue: bool, rng: &mut Rng) -> Vec<Flow> {
    let dsts = destinations(table, SEED_DESTINATIONS, true, rng);
    let mut flows = Vec::with_capacity(dsts.len() * 16);
    for d in dsts {
        for s in 0..SEED_SOURCES {
            for tos in SEED_TOS {
                let src = from_bits(src, bits(src) + u128::from(s));
                flows.push(Flow { src, dst: d, tos });
            }
        }
    }
    if one_queue {
        flows.retain(|f| queue(f) == 0);
    }
    flows
}

/// A flood: `n` flows, each a destination drawn from `table` and a source random inside
/// `sources`, no two alike.
pub fn flood(table: &[Prefix], sources: &Prefix, n: usize, rng: &mut Rng) -> Vec<Flow> {
    let dsts = destinations(table, n, true, rng);
    let mut flows: Vec<Flow> = dsts
        .into_iter()
        .map(|dst| Flow {
            src: sources.random(rng),
            dst,
            tos: 0,
        })
        .collect();
    flows.sort_unstable();
    flows.dedup();
    flows
}

/// The frame sizes of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    Fixed(usize),
    Imix,
}

impl Sizes {
    fn at(self, i: usize) -> usize {
        match self {
            Sizes::Fixed(s) => s,
            Sizes::Imix => IMIX[i % IMIX.len()],
        }
    }
}

/// The cycle of frames: for each position `i`, a flow drawn uniformly from `sets` (each set a
/// list of flows, numbered in the probe; a set is picked in proportion to its flows) unless
/// `in_order`, and the size at `i`. Sizes below the family's smallest frame with a probe are
/// raised to it; the number raised is returned beside the templates.
pub fn cycle(
    sets: &[Vec<Flow>],
    sizes: Sizes,
    macs: &Macs,
    in_order: bool,
    rng: &mut Rng,
) -> Result<(Vec<Template>, usize), WorkloadError> {
    let all: Vec<(u16, &Flow)> = sets
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.iter().map(move |f| (i as u16, f)))
        .collect();
    if all.is_empty() {
        return Err(WorkloadError::Empty("destination"));
    }
    // One flow in one size needs no long cycle; IMIX needs its whole pattern.
    let n = if all.len() == 1 {
        IMIX.len()
    } else if in_order {
        all.len().min(CYCLE)
    } else {
        CYCLE
    };
    let mut raised = 0;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (set, flow) = if in_order || all.len() == 1 {
            all[i % all.len()]
        } else {
            all[rng.below(all.len())]
        };
        let want = sizes.at(i);
        let size = want.max(min_size(flow));
        if size != want {
            raised += 1;
        }
        // Source ports vary over the cycle, as a real mix of flows would.
        let sport = 1024 + (i % 60000) as u16;
        out.push(Template::build(flow, macs, size, sport, set).map_err(WorkloadError::Build)?);
    }
    Ok((out, raised))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{parse, Parsed};

    #[test]
    fn prefixes_parse_canonically_and_draw_inside() {
        let p = Prefix::parse("198.18.7.9/15").unwrap();
        assert_eq!(p.to_string(), "198.18.0.0/15");
        let q = Prefix::parse("2001:db8::1/32").unwrap();
        assert_eq!(q.to_string(), "2001:db8::/32");
        assert_eq!(Prefix::parse("10.0.0.1").unwrap().len, 32);
        assert!(Prefix::parse("10.0.0.0/33").is_none());
        assert!(Prefix::parse("nonsense").is_none());
        let mut rng = Rng::new(1);
        for _ in 0..1000 {
            assert!(p.contains(p.random(&mut rng)));
            assert!(q.contains(q.random(&mut rng)));
        }
        assert!(!p.contains("2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn table_destinations_skip_the_avoided_space_named_ones_do_not() {
        let prefixes = [
            Prefix::parse("10.0.0.0/8").unwrap(),
            Prefix::parse("198.18.0.0/15").unwrap(),
        ];
        let d = destinations(&prefixes, 500, true, &mut Rng::new(7));
        assert_eq!(d.len(), 500);
        assert!(d.iter().all(|a| prefixes[1].contains(*a)));
        let named = destinations(&prefixes[..1], 10, false, &mut Rng::new(7));
        assert!(named.len() == 10 && named.iter().all(|a| prefixes[0].contains(*a)));
    }

    #[test]
    fn seed000_crosses_destinations_sources_and_tos() {
        let table = [Prefix::parse("198.18.0.0/15").unwrap()];
        let src: IpAddr = "10.254.0.2".parse().unwrap();
        let all = seed000(&table, src, false, &mut Rng::new(3));
        assert_eq!(all.len(), SEED_DESTINATIONS * 16);
        let mut keys: Vec<_> = all.iter().map(|f| (f.src, f.tos)).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 16);
        let share = seed000(&table, src, true, &mut Rng::new(3));
        assert!(share.iter().all(|f| queue(f) == 0));
        // About one flow in SEED_QUEUES.
        let want = all.len() / SEED_QUEUES as usize;
        assert!(
            share.len() > want / 2 && share.len() < want * 2,
            "{}",
            share.len()
        );
    }

    #[test]
    fn a_flood_has_no_flow_twice_and_its_cycle_no_frame_twice() {
        let table = [Prefix::parse("2001:db8::/32").unwrap()];
        let sources = Prefix::parse("fd00:aa::/32").unwrap();
        let flows = flood(&table, &sources, 3000, &mut Rng::new(5));
        assert_eq!(flows.len(), 3000);
        let macs = Macs {
            src: [2, 0, 0, 0, 0, 1],
            dst: [2, 0, 0, 0, 0, 2],
        };
        let (frames, raised) =
            cycle(&[flows], Sizes::Fixed(64), &macs, true, &mut Rng::new(5)).unwrap();
        assert_eq!(frames.len(), 3000);
        // IPv6 cannot carry a probe in 64 bytes: every frame was raised.
        assert_eq!(raised, 3000);
        let mut dsts: Vec<&[u8]> = frames.iter().map(|t| &t.bytes[30..62]).collect();
        dsts.sort_unstable();
        dsts.dedup();
        assert_eq!(dsts.len(), 3000);
    }

    #[test]
    fn imix_keeps_its_mix_and_sets_are_numbered() {
        let a = Flow {
            src: "10.254.0.2".parse().unwrap(),
            dst: "198.18.0.1".parse().unwrap(),
            tos: 0,
        };
        let b = Flow {
            dst: "198.19.0.1".parse().unwrap(),
            ..a
        };
        let macs = Macs {
            src: [2, 0, 0, 0, 0, 1],
            dst: [2, 0, 0, 0, 0, 2],
        };
        let (frames, raised) = cycle(
            &[vec![a], vec![b]],
            Sizes::Imix,
            &macs,
            false,
            &mut Rng::new(9),
        )
        .unwrap();
        assert_eq!(raised, 0);
        assert_eq!(frames.len(), CYCLE);
        let sizes: Vec<usize> = frames[..IMIX.len()].iter().map(|t| t.wire_len()).collect();
        assert_eq!(sizes, IMIX);
        let mut per_set = [0usize; 2];
        for t in &frames {
            let Parsed::Probe(p) = parse(&t.bytes) else {
                panic!("a template without its probe")
            };
            per_set[usize::from(p.set)] += 1;
        }
        assert!(per_set.iter().all(|&n| n > CYCLE / 3), "{per_set:?}");
    }
}
