//! `fibre-traffic gen|sink`: the generator and the sink on a host interface of the caller's
//! network namespace; each prints one JSON object when it stops (the usage below says how).

#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fibre_io::{Counters, Kind, Port};
use fibre_traffic::frame::{Flow, Macs};
use fibre_traffic::gen::{self, Frames};
use fibre_traffic::sink;
use fibre_traffic::workload::{self, Prefix, Rng, Sizes};

const USAGE: &str = "\
Usage: fibre-traffic gen --port DEV[:{ af_xdp | af_packet }] [ --dst-mac MAC ] [ --src-mac MAC ]
                         { --dst PREFIX[,PREFIX...] [ --dst ... ] [ --dsts N ] --src ADDR [ --tos TOS ]
                         | --dst-file FILE [ --dsts N ] --src ADDR [ --tos TOS ]
                         | --seed000 --src ADDR [ --all-queues ] [ --family { 4 | 6 } ] [ --table FILE ]
                         | --flood [ --sources PREFIX ] [ --family { 4 | 6 } ] [ --table FILE ]
                         | --pcap FILE }
                         [ --size BYTES | --imix ] [ --rate PPS ] [ --duration SECONDS ] [ --count N ]
                         [ --seed N ]
       fibre-traffic sink --port DEV[:KIND] [ --duration SECONDS ] [ --count N ] [ --idle SECONDS ]

gen sends UDP frames (64 bytes by default, FCS included; --imix: 7:4:1 of 64/570/1518) each with
a probe (set, sequence number, CLOCK_MONOTONIC send time): to destinations inside the prefixes of
each --dst (a set each; --dsts destinations drawn per set, by default one per prefix), seed 000's
workload (5000 destinations from the 2026 table, 4 sources from --src, 4 tos values; the share of
one of 20 receive queues unless --all-queues), or a flood of unique sources and destinations; or
replays a capture unchanged. Flat out unless --rate; until SIGINT/SIGTERM, --duration or --count.
sink counts, checks and times what arrives, until --duration, --count probes, or --idle seconds
without a probe once one has arrived. The port kind defaults to af_xdp.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match words.first() {
        Some(&"gen") => run_gen(&words[1..]),
        Some(&"sink") => run_sink(&words[1..]),
        Some(&("help" | "--help" | "-h")) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => Err(Failure::Usage(String::new())),
    };
    match result {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(e)) => {
            if !e.is_empty() {
                eprintln!("fibre-traffic: {e}");
            }
            eprint!("{USAGE}");
            ExitCode::from(255)
        }
        Err(Failure::Run(e)) => {
            eprintln!("fibre-traffic: {e}");
            ExitCode::from(1)
        }
    }
}

/// A command line it cannot use (exit 255, with the usage), or a failure while running.
enum Failure {
    Usage(String),
    Run(String),
}

fn usage(e: impl Into<String>) -> Failure {
    Failure::Usage(e.into())
}

fn fail(e: impl std::fmt::Display) -> Failure {
    Failure::Run(e.to_string())
}

/// The words of a command line as options and their values.
struct Words<'a> {
    it: std::slice::Iter<'a, &'a str>,
}

impl<'a> Words<'a> {
    fn value(&mut self, opt: &str) -> Result<&'a str, Failure> {
        self.it
            .next()
            .copied()
            .ok_or_else(|| usage(format!("{opt} needs a value")))
    }

    fn number<T: std::str::FromStr>(&mut self, opt: &str) -> Result<T, Failure> {
        let v = self.value(opt)?;
        v.parse()
            .map_err(|_| usage(format!("{opt} \"{v}\": not a number")))
    }

    fn seconds(&mut self, opt: &str) -> Result<Duration, Failure> {
        let s: f64 = self.number(opt)?;
        Duration::try_from_secs_f64(s).map_err(|_| usage(format!("{opt}: expected seconds")))
    }
}

fn port_arg(v: &str) -> Result<(String, Kind), Failure> {
    match v.split_once(':') {
        Some((dev, k)) => match Kind::from_name(k) {
            Some(kind @ (Kind::AfXdp | Kind::AfPacket)) => Ok((dev.to_owned(), kind)),
            _ => Err(usage(format!("port kind \"{k}\": af_xdp or af_packet"))),
        },
        None => Ok((v.to_owned(), Kind::AfXdp)),
    }
}

fn mac_arg(v: &str) -> Result<[u8; 6], Failure> {
    let bad = || usage(format!("\"{v}\": not a MAC address"));
    let mut m = [0u8; 6];
    let mut parts = v.split(':');
    for b in &mut m {
        *b = u8::from_str_radix(parts.next().ok_or_else(bad)?, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(m)
}

/// `dev`'s own MAC, as sysfs of the caller's namespace shows it.
fn own_mac(dev: &str) -> Option<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{dev}/address")).ok()?;
    mac_arg(text.trim()).ok()
}

/// SIGINT and SIGTERM set the returned flag (blocked here, before any other thread starts,
/// and taken by a thread of their own).
fn stop_on_signals() -> Result<Arc<AtomicBool>, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    fibre_sys::block_termination_signals().map_err(fail)?;
    let s = stop.clone();
    std::thread::spawn(move || {
        fibre_sys::wait_termination();
        s.store(true, Ordering::Relaxed);
    });
    Ok(stop)
}

fn open(dev: &str, kind: Kind) -> Result<Port, Failure> {
    Port::open(kind, dev).map_err(|e| fail(format!("{dev}: {e}")))
}

/// `s` as a JSON string.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn counters_json(c: &Counters) -> String {
    let mut s = String::from("{");
    for (i, (name, v)) in c.named().into_iter().enumerate() {
        let _ = write!(s, "{}\"{name}\":{v}", if i > 0 { "," } else { "" });
    }
    s.push('}');
    s
}

/// What `gen` sends to.
enum Dests {
    Sets(Vec<Vec<Prefix>>),
    File(PathBuf),
    Seed000 { all_queues: bool },
    Flood { sources: Option<Prefix> },
    Pcap(PathBuf),
}

fn run_gen(words: &[&str]) -> Result<String, Failure> {
    let mut w = Words { it: words.iter() };
    let mut port = None;
    let (mut src_mac, mut dst_mac) = (None, [0xff; 6]);
    let mut dests = None;
    let mut sets = Vec::new();
    let mut all_queues = false;
    let mut sources = None;
    let (mut n_dsts, mut src, mut tos, mut v6, mut table) = (None, None, 0u8, false, None);
    let mut sizes = Sizes::Fixed(64);
    let mut cfg = gen::Config {
        rate: None,
        duration: None,
        count: None,
    };
    let mut seed = 1u64;
    while let Some(&opt) = w.it.next() {
        match opt {
            "--port" => port = Some(port_arg(w.value(opt)?)?),
            "--src-mac" => src_mac = Some(mac_arg(w.value(opt)?)?),
            "--dst-mac" => dst_mac = mac_arg(w.value(opt)?)?,
            "--dst" => {
                let v = w.value(opt)?;
                let set = v
                    .split(',')
                    .map(|p| {
                        Prefix::parse(p).ok_or_else(|| usage(format!("\"{p}\": not a prefix")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                sets.push(set);
            }
            "--dst-file" => dests = Some(Dests::File(w.value(opt)?.into())),
            "--seed000" => dests = Some(Dests::Seed000 { all_queues: false }),
            "--all-queues" => all_queues = true,
            "--flood" => dests = Some(Dests::Flood { sources: None }),
            "--sources" => {
                let v = w.value(opt)?;
                sources =
                    Some(Prefix::parse(v).ok_or_else(|| usage(format!("\"{v}\": not a prefix")))?);
            }
            "--pcap" => dests = Some(Dests::Pcap(w.value(opt)?.into())),
            "--dsts" => n_dsts = Some(w.number::<usize>(opt)?),
            "--src" => {
                let v = w.value(opt)?;
                src = Some(
                    v.parse::<IpAddr>()
                        .map_err(|_| usage(format!("\"{v}\": not an address")))?,
                );
            }
            "--tos" => tos = w.number(opt)?,
            "--family" => {
                v6 = match w.value(opt)? {
                    "4" | "inet" => false,
                    "6" | "inet6" => true,
                    f => return Err(usage(format!("family \"{f}\": 4 or 6"))),
                }
            }
            "--table" => table = Some(PathBuf::from(w.value(opt)?)),
            "--size" => sizes = Sizes::Fixed(w.number(opt)?),
            "--imix" => sizes = Sizes::Imix,
            "--rate" => {
                let r: f64 = w.number(opt)?;
                if !(r.is_finite() && r > 0.0) {
                    return Err(usage("--rate needs frames per second above 0"));
                }
                cfg.rate = Some(r);
            }
            "--duration" => cfg.duration = Some(w.seconds(opt)?),
            "--count" => cfg.count = Some(w.number(opt)?),
            "--seed" => seed = w.number(opt)?,
            _ => return Err(usage(format!("unexpected argument \"{opt}\""))),
        }
    }
    let (dev, kind) = port.ok_or_else(|| usage("--port is needed"))?;
    let dests = match dests {
        Some(Dests::Seed000 { .. }) => Dests::Seed000 { all_queues },
        Some(Dests::Flood { .. }) => Dests::Flood { sources },
        Some(d) if sets.is_empty() => d,
        None if !sets.is_empty() => Dests::Sets(sets),
        _ => {
            return Err(usage(
                "one of --dst, --dst-file, --seed000, --flood or --pcap is needed",
            ))
        }
    };
    let macs = Macs {
        src: src_mac
            .or_else(|| own_mac(&dev))
            .unwrap_or([0x02, 0, 0, 0, 0, 1]),
        dst: dst_mac,
    };
    let mut rng = Rng::new(seed);
    let need_src = || src.ok_or_else(|| usage("--src ADDR is needed"));
    let load_table = |v6: bool| -> Result<Vec<Prefix>, Failure> {
        let path = table
            .clone()
            .or_else(workload::locate_table)
            .ok_or_else(|| {
                fail(format!(
                    "no {} (set FIBRE_DATA or --table)",
                    workload::RIB_FILE
                ))
            })?;
        eprintln!("fibre-traffic: reading {} ...", path.display());
        workload::read_prefixes(&path, v6).map_err(fail)
    };
    let to_flows = |set: &[Prefix], src: IpAddr, rng: &mut Rng| -> Vec<Flow> {
        workload::destinations(set, n_dsts.unwrap_or(set.len()), false, rng)
            .into_iter()
            .map(|dst| Flow { src, dst, tos })
            .collect()
    };
    let (flow_sets, in_order, name) = match dests {
        Dests::Pcap(path) => {
            let frames = fibre_traffic::pcap::read(&path)
                .map_err(|e| fail(format!("{}: {e}", path.display())))?;
            let n = frames.len();
            return send(
                &dev,
                kind,
                Frames::Replay(frames),
                &cfg,
                format!("pcap {} ({n} frames)", path.display()),
                0,
            );
        }
        Dests::Sets(sets) => {
            let src = need_src()?;
            let flows = sets
                .iter()
                .map(|s| to_flows(s, src, &mut rng))
                .collect::<Vec<_>>();
            (flows, false, format!("{} destination sets", sets.len()))
        }
        Dests::File(path) => {
            let src = need_src()?;
            let set = workload::read_prefixes(&path, src.is_ipv6()).map_err(fail)?;
            (
                vec![to_flows(&set, src, &mut rng)],
                false,
                format!("prefixes of {}", path.display()),
            )
        }
        Dests::Seed000 { all_queues } => {
            let src = need_src()?;
            let t = load_table(src.is_ipv6())?;
            let flows = workload::seed000(&t, src, !all_queues, &mut rng);
            let share = if all_queues {
                "all queues"
            } else {
                "queue 0 of 20"
            };
            (vec![flows], false, format!("seed 000 ({share})"))
        }
        Dests::Flood { sources } => {
            let t = load_table(v6)?;
            let default = if v6 { "fd00:aa::/32" } else { "100.64.0.0/10" };
            let sources = sources
                .or_else(|| Prefix::parse(default))
                .ok_or_else(|| fail("sources"))?;
            let flows = workload::flood(&t, &sources, workload::CYCLE, &mut rng);
            (vec![flows], true, format!("flood (sources {sources})"))
        }
    };
    let flows: usize = flow_sets.iter().map(Vec::len).sum();
    let (templates, raised) =
        workload::cycle(&flow_sets, sizes, &macs, in_order, &mut rng).map_err(fail)?;
    let size = match sizes {
        Sizes::Fixed(s) => s.to_string(),
        Sizes::Imix => "imix".into(),
    };
    let name = format!(
        "{name}, {flows} flows, size {size}, {} frames in the cycle",
        templates.len()
    );
    send(&dev, kind, Frames::Stamped(templates), &cfg, name, raised)
}

fn send(
    dev: &str,
    kind: Kind,
    mut frames: Frames,
    cfg: &gen::Config,
    workload: String,
    raised: usize,
) -> Result<String, Failure> {
    let stop = stop_on_signals()?;
    let mut port = open(dev, kind)?;
    eprintln!("fibre-traffic gen: {dev} ({}): {workload}", port.detail);
    let r = gen::run(port.tx.as_mut(), &mut frames, cfg, &stop).map_err(fail)?;
    let secs = r.elapsed_ns as f64 / 1e9;
    Ok(format!(
        "{{\"dev\":{},\"io\":\"{}\",\"workload\":{},\"raised_to_min\":{raised},\"sent\":{},\"bytes\":{},\"dropped\":{},\"errors\":{},\"seconds\":{secs:.6},\"pps\":{:.0},\"port\":{}}}",
        quote(dev),
        kind.name(),
        quote(&workload),
        r.sent,
        r.bytes,
        r.dropped,
        r.errors,
        r.sent as f64 / secs.max(1e-9),
        counters_json(&port.counters()),
    ))
}

fn run_sink(words: &[&str]) -> Result<String, Failure> {
    let mut w = Words { it: words.iter() };
    let mut port = None;
    let mut cfg = sink::Config::default();
    while let Some(&opt) = w.it.next() {
        match opt {
            "--port" => port = Some(port_arg(w.value(opt)?)?),
            "--duration" => cfg.duration = Some(w.seconds(opt)?),
            "--count" => cfg.count = Some(w.number(opt)?),
            "--idle" => cfg.idle = Some(w.seconds(opt)?),
            _ => return Err(usage(format!("unexpected argument \"{opt}\""))),
        }
    }
    let (dev, kind) = port.ok_or_else(|| usage("--port is needed"))?;
    let stop = stop_on_signals()?;
    let mut port = open(&dev, kind)?;
    // The line a harness waits for before it starts sending.
    eprintln!("fibre-traffic sink: {dev} ({}) ready", port.detail);
    let r = sink::run(port.rx.as_mut(), &cfg, &stop).map_err(fail)?;
    let secs = r.last_ns.saturating_sub(r.first_ns) as f64 / 1e9;
    let pps = if secs > 0.0 {
        (r.probes.saturating_sub(1)) as f64 / secs
    } else {
        0.0
    };
    let mut sets = String::new();
    for (i, s) in r.sets.iter().enumerate().filter(|(_, s)| s.packets > 0) {
        let _ = write!(
            sets,
            "{}{{\"set\":{i},\"packets\":{},\"bytes\":{}}}",
            if sets.is_empty() { "" } else { "," },
            s.packets,
            s.bytes
        );
    }
    let l = &r.latency;
    Ok(format!(
        "{{\"dev\":{},\"io\":\"{}\",\"frames\":{},\"bytes\":{},\"probes\":{},\"corrupt\":{},\"stale\":{},\"other\":{},\"gaps\":{},\"reordered\":{},\"first_seq\":{},\"last_seq\":{},\"seconds\":{secs:.6},\"pps\":{pps:.0},\"latency_ns\":{{\"samples\":{},\"p50\":{},\"p99\":{},\"p999\":{},\"max\":{},\"clock_skewed\":{}}},\"sets\":[{sets}],\"port\":{}}}",
        quote(&dev),
        kind.name(),
        r.frames,
        r.bytes,
        r.probes,
        r.corrupt,
        r.stale,
        r.other,
        r.gaps,
        r.reordered,
        r.first_seq.map_or("null".into(), |s| s.to_string()),
        r.last_seq,
        l.count(),
        l.quantile(0.5),
        l.quantile(0.99),
        l.quantile(0.999),
        l.max(),
        r.clock_skewed,
        counters_json(&port.counters()),
    ))
}
