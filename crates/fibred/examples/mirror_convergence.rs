//! Mirror mode's convergence: how long after the kernel has taken the 2026 IPv4 table fibre
//! holds it too (issue: within 1 s).
//!
//! Run (as root): `cargo run --release -p fibred --example mirror_convergence [-- --runs N] [PATH]`
//!
//! Each run: a fresh network namespace with a veth whose address makes the 64 gateways
//! reachable; an in-process fibred mirroring it (`Config::mirror`, the default 128 MiB
//! notification buffer); `ip -n NS -batch` of every IPv4 route of
//! ../shared/data/rib-2026-06.tsv.gz (`route add P via GW`, gateways by origin AS % 64, as
//! load_dump loads them). Measured from the start of `ip -batch`: when it exits (the kernel
//! holds every route), and when fibred's lookups find the last route of the batch itself
//! (`route get fibmatch`, polled every millisecond; the mirror applies the kernel's
//! notifications in order, and a resync a whole dump, so every route before it is there
//! too, which a dump of fibred's tables then counts beside the kernel's). The lag is the
//! second minus the first. Medians of `--runs` (default 3).
//!
//! Skips with a message without root or the data file.

use fibre_fib::types::Family;
use fibre_netlink::message::flags as nf;
use fibre_proto::client::SocketClient;
use fibre_proto::convert::{self, Request};
use fibred::{Config, Daemon};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

// Each example uses a part of what they share.
#[path = "common/mod.rs"]
#[allow(dead_code)]
mod common;
use common::*;

/// How long fibre may take after the kernel before a run is declared failed.
const GIVE_UP: Duration = Duration::from_secs(600);
/// How often fibre is asked whether the last route has arrived.
const POLL: Duration = Duration::from_millis(1);

/// fibred's IPv4 routes (every table), counted from a dump.
fn fibre_routes(d: &Daemon) -> usize {
    let mut c = SocketClient::connect(d.socket()).expect("connect");
    let mut m = convert::request_message(&Request::DumpRoutes(Some(Family::Inet)), 1, 0);
    m.header.flags = nf::NLM_F_REQUEST | nf::NLM_F_DUMP;
    c.send(&m.to_bytes()).expect("send");
    let mut total = 0;
    loop {
        let (n, done) = count_routes(c.recv().expect("recv"));
        total += n;
        if done {
            return total;
        }
    }
}

/// One run: (kernel seconds, fibre seconds, IPv4 routes fibre holds, IPv4 routes the kernel
/// holds).
fn run(
    table: &[(std::net::Ipv4Addr, u8, u32)],
    batch: &Path,
    dir: &Path,
    i: usize,
) -> Option<(f64, f64, usize, usize)> {
    let ns = format!("fibre-mirror-bench-{}-{i}", std::process::id());
    if !ip(&["netns", "add", &ns]) {
        println!("skip: cannot create a network namespace (run as root)");
        return None;
    }
    let result = (|| {
        if !gateways_namespace(&ns) {
            println!("skip: namespace setup failed");
            return None;
        }
        let d = Daemon::start(Config {
            socket: dir.join(format!("fibred{i}.sock")),
            dgram: None,
            state: None,
            access: Default::default(),
            fpm: None,
            mirror: Some(fibred::mirror::Config {
                netns: Some(ns.clone().into()),
                rcvbuf: fibred::mirror::RCVBUF,
            }),
            metrics: None,
            workers: Default::default(),
            ports: Vec::new(),
        })
        .expect("fibred starts");
        let last = table[table.len() - 1];
        let t = Instant::now();
        let ok = ip(&["-n", &ns, "-batch", batch.to_str()?]);
        let kernel = t.elapsed().as_secs_f64();
        if !ok {
            println!("ip -batch failed");
            return None;
        }
        while !route_visible(&d, &last) {
            if t.elapsed() > GIVE_UP {
                println!("fibre did not converge within {GIVE_UP:?}");
                return None;
            }
            std::thread::sleep(POLL);
        }
        let fibre = t.elapsed().as_secs_f64();
        let routes = fibre_routes(&d);
        d.stop();
        let shown = Command::new("ip")
            .args(["-n", &ns, "-4", "route", "show", "table", "all"])
            .output()
            .ok()?;
        let kernel_routes = shown.stdout.iter().filter(|&&b| b == b'\n').count();
        Some((kernel, fibre, routes, kernel_routes))
    })();
    ip(&["netns", "del", &ns]);
    result
}

fn main() {
    let mut runs = 3;
    let mut path = "/work/shared/data/rib-2026-06.tsv.gz".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => runs = args.next().and_then(|r| r.parse().ok()).expect("--runs N"),
            _ => path = a,
        }
    }
    if !Path::new(&path).exists() {
        println!("skip: {path} not found (see ../shared/data/README.md)");
        return;
    }
    let table = read_table(&path);
    let n = table.len();
    let dir = std::env::temp_dir().join(format!("fibred-mirror-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let batch = dir.join("table.batch");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&batch).expect("batch file"));
        for (a, l, p) in &table {
            writeln!(f, "route add {a}/{l} via {}", gateway(*p)).expect("batch file");
        }
        f.flush().expect("batch file");
    }
    println!("mirror convergence: {n} IPv4 routes by ip -batch into a namespace fibred mirrors, {runs} runs");
    for line in environment() {
        println!("{line}");
    }
    let (mut ks, mut fs, mut lags) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let Some((k, f, routes, kernel_routes)) = run(&table, &batch, &dir, i) else {
            break;
        };
        println!(
            "run {i}: kernel {k:.2} s, fibre {f:.2} s, lag {:.3} s; IPv4 routes: fibre {routes}, kernel {kernel_routes}",
            f - k
        );
        ks.push(k);
        fs.push(f);
        lags.push(f - k);
    }
    if !ks.is_empty() {
        println!(
            "median: kernel {:.2} s ({:.0} routes/s), fibre {:.2} s, lag {:.3} s (bar: <= 1 s)",
            median(ks.clone()),
            n as f64 / median(ks),
            median(fs),
            median(lags)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
