//! `fibre forward CONFIG --in LINK=FILE ... --out DIR`: the forwarding plane offline, on
//! captures.
//!
//! CONFIG is a batch file (`ip -batch` syntax) applied to a fresh in-process FIB; each input
//! capture's Ethernet frames are received on its link, all inputs merged in capture-time order
//! (a stable merge: equal times keep the order of the `--in` options, then of the file). The
//! clock is the captures': a frame is processed at its own time, and neighbour timers (probes,
//! failures, ageing) fire at theirs in between, so a run is deterministic. What each link
//! sends (forwarded frames, ICMP errors, ARP and NDP) is written to `DIR/LINK.pcap` with the
//! time it was sent; then the counters are printed (`-j`: one JSON object), the input route
//! cache's among them (`input_cache`; `--input-cache` turns it to hints only or off).
//!
//! Frames with the same time form one vector for the pipeline (up to its vector size); after
//! each vector the events it left (neighbours learnt or to resolve) are applied to the FIB, as
//! fibred's writer does between a worker's vectors (fibre-io's `Router`, which the live mode,
//! `--port`, shares: see `live.rs`). After the last input the clock runs on
//! until no neighbour timer is left (at most [`DRAIN_NS`] past the last frame), so that
//! resolutions in progress end as they would.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;

use fibre_dataplane::input_cache::Mode;
use fibre_dataplane::pipeline::{Config, Dataplane, Tx, VECTOR};
use fibre_fib::Fib;
use fibre_io::worker::{Router, Turn};

use crate::online::{offline_fib, Backend};
use crate::pcap::{self, Captured};
use crate::{Cli, Options};

/// How long the clock runs on after the last input frame: long enough for a resolution that
/// started at the end to fail (three probes a second apart) and for a reachable entry to age
/// through DELAY and PROBE.
const DRAIN_NS: u64 = 60_000_000_000;

const USAGE: &str = "Usage: fibre [ -j ] forward CONFIG --in LINK=FILE.pcap [ --in LINK=FILE.pcap ... ] --out DIR\n                         [ --input-cache { on | hints | off } ]\n       fibre [ -j ] forward CONFIG --port LINK=HOSTIF[:KIND] [ --port ... ] [ --duration SECONDS ]\n                         [ --input-cache { on | hints | off } ]\n";

struct Args<'a> {
    config: &'a str,
    inputs: Vec<(&'a str, &'a str)>,
    out: &'a str,
    /// The worker's input route cache (fibre_dataplane::input_cache): the data plane's
    /// default unless asked.
    cache: Option<Mode>,
}

/// The `LINK=WHAT` value of option `opt`, both sides non-empty.
pub(crate) fn link_pair<'a>(
    opt: &str,
    value: Option<&&'a str>,
    what: &str,
) -> Result<(&'a str, &'a str), String> {
    let v = value.ok_or_else(|| format!("{opt} needs LINK={what}"))?;
    v.split_once('=')
        .filter(|(l, r)| !l.is_empty() && !r.is_empty())
        .ok_or_else(|| format!("{opt} \"{v}\": expected LINK={what}"))
}

/// A parse error (empty: help was asked for) and the usage, on stderr; the exit status.
pub(crate) fn usage_error(e: &str, usage: &str, stderr: &mut dyn Write) -> i32 {
    if !e.is_empty() {
        let _ = writeln!(stderr, "fibre forward: {e}");
    }
    let _ = stderr.write_all(usage.as_bytes());
    if e.is_empty() {
        0
    } else {
        255
    }
}

/// The input route cache's mode named by `--input-cache`'s value.
pub(crate) fn cache_mode(word: Option<&str>) -> Result<Mode, String> {
    match word {
        Some("on") => Ok(Mode::Cache),
        Some("hints") => Ok(Mode::Hints),
        Some("off") => Ok(Mode::Off),
        _ => Err("--input-cache needs on, hints or off".into()),
    }
}

fn parse<'a>(words: &[&'a str]) -> Result<Args<'a>, String> {
    let mut config = None;
    let mut inputs = Vec::new();
    let mut out = None;
    let mut cache = None;
    let mut it = words.iter();
    while let Some(&w) = it.next() {
        match w {
            "--in" | "-in" => inputs.push(link_pair("--in", it.next(), "FILE")?),
            "--out" | "-out" => out = Some(*it.next().ok_or("--out needs a directory")?),
            "--input-cache" | "-input-cache" => cache = Some(cache_mode(it.next().copied())?),
            "help" | "--help" | "-h" => return Err(String::new()),
            _ if config.is_none() && !w.starts_with('-') => config = Some(w),
            _ => return Err(format!("unexpected argument \"{w}\"")),
        }
    }
    Ok(Args {
        config: config.ok_or("a configuration file is needed")?,
        inputs,
        out: out.ok_or("--out DIR is needed")?,
        cache,
    })
}

/// Frames sent, into one pcap per link, stamped with the current time.
struct PcapTx<'a> {
    names: &'a BTreeMap<u32, String>,
    dir: &'a str,
    writers: BTreeMap<u32, pcap::Writer>,
    now: u64,
    error: Option<String>,
}

impl Tx for PcapTx<'_> {
    fn send(&mut self, oif: u32, frame: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if !self.writers.contains_key(&oif) {
            let name = self
                .names
                .get(&oif)
                .cloned()
                .unwrap_or_else(|| format!("if{oif}"));
            match pcap::Writer::create(&format!("{}/{name}.pcap", self.dir)) {
                Ok(w) => {
                    self.writers.insert(oif, w);
                }
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
        }
        if let Some(w) = self.writers.get_mut(&oif) {
            if let Err(e) = w.write(self.now, frame) {
                self.error = Some(e);
            }
        }
    }
}

/// Runs the timers due up to `until` (the FIB's neighbour timers and the data plane's own),
/// each at its own time.
fn run_timers(router: &mut Router, dp: &mut Dataplane, tx: &mut PcapTx, until: u64) {
    while let Some(at) = router.next_due(dp, until) {
        tx.now = at;
        router.fire(dp, at, tx);
    }
}

/// The batch file `config` applied to a fresh offline FIB; the batch's exit status if it
/// fails.
pub(crate) fn load(
    config: &str,
    opts: &Options,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Fib, i32> {
    let mut cli = Cli::new(
        Backend::from(offline_fib()),
        Options {
            json: false,
            ..opts.clone()
        },
    );
    let status = crate::batch::run_batch(&mut cli, config, stdout, stderr);
    if status != 0 {
        return Err(status);
    }
    let Backend::Local(fib) = cli.fib else {
        unreachable!("forward runs on an offline FIB")
    };
    Ok(*fib)
}

/// A data plane with the default configuration (its input route cache in `cache` mode when
/// given), and the FIB's link names by index.
pub(crate) fn pipeline(
    fib: &Fib,
    cache: Option<Mode>,
    stderr: &mut dyn Write,
) -> Result<(Dataplane, BTreeMap<u32, String>), i32> {
    let mut cfg = Config::default().with_encap_headroom(fib);
    if let Some(mode) = cache {
        cfg.input_cache.mode = mode;
    }
    let dp = Dataplane::new(&cfg).map_err(|e| {
        let _ = writeln!(stderr, "fibre forward: {e:?}");
        1
    })?;
    let names = fib
        .links()
        .into_iter()
        .filter_map(|l| Some((l.ifindex, l.ifname?)))
        .collect();
    Ok((dp, names))
}

/// `fibre forward`; returns the exit status.
pub fn run(words: &[&str], opts: &Options, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    if words.contains(&"--port") {
        return crate::live::run(words, opts, stdout, stderr);
    }
    let args = match parse(words) {
        Ok(a) => a,
        Err(e) => return usage_error(&e, USAGE, stderr),
    };
    let fib = match load(args.config, opts, stdout, stderr) {
        Ok(f) => f,
        Err(status) => return status,
    };
    let mut frames: Vec<(u64, u32, Captured)> = Vec::new();
    for (link, file) in &args.inputs {
        let Some(ifindex) = fib.link_index(link) else {
            let _ = writeln!(stderr, "Cannot find device \"{link}\"");
            return 1;
        };
        match pcap::read(file) {
            Ok(c) => frames.extend(c.into_iter().map(|c| (c.time_ns, ifindex, c))),
            Err(e) => {
                let _ = writeln!(stderr, "fibre forward: {e}");
                return 1;
            }
        }
    }
    // A stable sort keeps the order of equal times: --in order, then file order.
    frames.sort_by_key(|(t, _, _)| *t);
    if let Err(e) = std::fs::create_dir_all(args.out) {
        let _ = writeln!(stderr, "fibre forward: cannot create \"{}\": {e}", args.out);
        return 1;
    }
    let (mut dp, names) = match pipeline(&fib, args.cache, stderr) {
        Ok(p) => p,
        Err(status) => return status,
    };
    let mut tx = PcapTx {
        names: &names,
        dir: args.out,
        writers: BTreeMap::new(),
        now: 0,
        error: None,
    };
    let mut router = Router::new(fib);
    let mut vector: Vec<(u32, &[u8])> = Vec::with_capacity(VECTOR);
    let mut i = 0;
    while i < frames.len() {
        let t = frames[i].0;
        vector.clear();
        while i < frames.len() && frames[i].0 == t && vector.len() < VECTOR {
            vector.push((frames[i].1, &frames[i].2.frame));
            i += 1;
        }
        run_timers(&mut router, &mut dp, &mut tx, t);
        tx.now = t;
        router.vector(&mut dp, t, &vector, &mut tx);
    }
    if let Some(last) = frames.last() {
        run_timers(&mut router, &mut dp, &mut tx, last.0 + DRAIN_NS);
    }
    if let Some(e) = tx.error.take() {
        let _ = writeln!(stderr, "fibre forward: {e}");
        return 1;
    }
    for (_, w) in std::mem::take(&mut tx.writers) {
        if let Err(e) = w.finish() {
            let _ = writeln!(stderr, "fibre forward: {e}");
            return 1;
        }
    }
    let text = if opts.json {
        report_json(&dp, &names)
    } else {
        report_text(&dp, &names)
    };
    let _ = stdout.write_all(text.as_bytes());
    0
}

pub(crate) fn report_text(dp: &Dataplane, names: &BTreeMap<u32, String>) -> String {
    let c = dp.counters();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "received {} forwarded {} fragments {} delivered {} punted {} reassembly {} waiting {}",
        c.received, c.forwarded, c.fragments, c.delivered, c.punted, c.reasm_queued, c.waiting
    );
    let _ = writeln!(
        s,
        "sent icmp_errors {} echo_replies {} neigh {} icmp_ratelimited {}",
        c.icmp_errors, c.echo_replies, c.neigh_sent, c.icmp_ratelimited
    );
    let ic = c.input_cache;
    let _ = writeln!(
        s,
        "input_cache hits {} hinted {} misses {} evictions {} bypassed {}",
        ic.hits, ic.hinted, ic.misses, ic.evictions, ic.bypassed
    );
    let _ = write!(s, "encap reallocs {}", c.encap_reallocs);
    for (i, e) in dp.encap_stats_used() {
        let _ = write!(s, " [{i}] packets {} reallocs {}", e.packets, e.reallocs);
    }
    s.push('\n');
    let _ = write!(s, "dropped {}", dp.drops().total());
    for (r, n) in dp.drops().nonzero() {
        let _ = write!(s, " {} {n}", r.name());
    }
    s.push('\n');
    for (ifindex, name) in names {
        let l = dp.link_stats(*ifindex);
        if l == Default::default() {
            continue;
        }
        let _ = writeln!(
            s,
            "{name}: rx packets {} bytes {} dropped {} otherhost {} multicast {} tx packets {} bytes {} dropped {}",
            l.rx_packets,
            l.rx_bytes,
            l.rx_dropped,
            l.rx_otherhost_dropped,
            l.multicast,
            l.tx_packets,
            l.tx_bytes,
            l.tx_dropped
        );
    }
    s
}

/// A JSON string literal.
pub(crate) fn quote(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for ch in v.chars() {
        match ch {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

pub(crate) fn report_json(dp: &Dataplane, names: &BTreeMap<u32, String>) -> String {
    let c = dp.counters();
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\"received\":{},\"forwarded\":{},\"fragments\":{},\"delivered\":{},\"punted\":{},\"reassembly\":{},\"waiting\":{},\"sent\":{{\"icmp_errors\":{},\"echo_replies\":{},\"neigh\":{},\"icmp_ratelimited\":{}}},\"input_cache\":{{\"hits\":{},\"hinted\":{},\"misses\":{},\"evictions\":{},\"bypassed\":{}}},\"dropped\":{{\"total\":{}",
        c.received,
        c.forwarded,
        c.fragments,
        c.delivered,
        c.punted,
        c.reasm_queued,
        c.waiting,
        c.icmp_errors,
        c.echo_replies,
        c.neigh_sent,
        c.icmp_ratelimited,
        c.input_cache.hits,
        c.input_cache.hinted,
        c.input_cache.misses,
        c.input_cache.evictions,
        c.input_cache.bypassed,
        dp.drops().total()
    );
    for (r, n) in dp.drops().nonzero() {
        let _ = write!(s, ",{}:{n}", quote(r.name()));
    }
    let _ = write!(
        s,
        "}},\"encap\":{{\"reallocs\":{},\"objects\":[",
        c.encap_reallocs
    );
    for (k, (i, e)) in dp.encap_stats_used().enumerate() {
        let sep = if k == 0 { "" } else { "," };
        let _ = write!(
            s,
            "{sep}{{\"index\":{i},\"packets\":{},\"reallocs\":{}}}",
            e.packets, e.reallocs
        );
    }
    s.push_str("]},\"links\":[");
    let mut first = true;
    for (ifindex, name) in names {
        let l = dp.link_stats(*ifindex);
        if l == Default::default() {
            continue;
        }
        if !first {
            s.push(',');
        }
        first = false;
        let _ = write!(
            s,
            "{{\"ifname\":{},\"rx\":{{\"packets\":{},\"bytes\":{},\"dropped\":{},\"otherhost_dropped\":{},\"multicast\":{}}},\"tx\":{{\"packets\":{},\"bytes\":{},\"dropped\":{}}}}}",
            quote(name),
            l.rx_packets,
            l.rx_bytes,
            l.rx_dropped,
            l.rx_otherhost_dropped,
            l.multicast,
            l.tx_packets,
            l.tx_bytes,
            l.tx_dropped
        );
    }
    s.push_str("]}\n");
    s
}
