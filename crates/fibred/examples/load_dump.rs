//! Table load and dump through fibred, over the socket and over the ring, beside the kernel.
//!
//! Run: `cargo run --release -p fibred --example load_dump [-- --no-kernel] [--runs N] [PATH]`
//!
//! 1. Load: the IPv4 table of ../shared/data/rib-2026-06.tsv.gz as RTM_NEWROUTE requests
//!    (`route add P via GW`, 64 gateways chosen by origin AS % 64, NLM_F_ACK on every request,
//!    as many requests per datagram as fit in 4 KiB, the ring's TX frame), into a fresh
//!    in-process fibred, until every ACK is back and a `route get` of the last prefix answers
//!    through it (answered from the published state, so every route is then visible to
//!    lookups). Socket: AF_UNIX SOCK_SEQPACKET, one thread sending, one reading. Ring:
//!    fibre-ring's client with its default geometry. Kernel: `ip -batch` of the same routes
//!    into a network namespace (root only; `--no-kernel` skips it), once.
//! 2. Dump: an IPv4 RTM_GETROUTE dump of the loaded table read to NLMSG_DONE over the socket
//!    and over the ring (the reader walks message headers only, as `ip route save` writes the
//!    bytes out unparsed); the kernel's `ip -4 route save` of the same table into a file.
//!
//! Each fibred figure is the median of `--runs` (default 3) runs, each on a fresh daemon;
//! the kernel's save is the median of as many runs.
//!
//! Skips with a message when the data file is absent.

use fibre_fib::types::*;
use fibre_netlink::message::flags as nf;
use fibre_proto::client::SocketClient;
use fibre_proto::convert::{self, Request};
use fibred::{Config, Daemon};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

// Each example uses a part of what they share.
#[path = "common/mod.rs"]
#[allow(dead_code)]
mod common;
use common::*;

/// Requests are packed into datagrams of at most this many bytes: the ring's TX frame.
const DATAGRAM: usize = 4096;

fn route_of(addr: Ipv4Addr, len: u8, peer: u32) -> Route {
    let mut r = Route::new(
        Family::Inet,
        Prefix {
            addr: IpAddr::V4(addr),
            len,
        },
    );
    r.nexthop.gateway = Some(IpAddr::V4(gateway(peer)));
    r
}

/// Route requests packed into datagrams.
fn datagrams(table: &[(Ipv4Addr, u8, u32)]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for (i, (a, l, p)) in table.iter().enumerate() {
        let req = Request::NewRoute(route_of(*a, *l, *p), ReqFlags::ADD);
        let m = convert::request_message(&req, i as u32 + 1, 0).to_bytes();
        if cur.len() + m.len() > DATAGRAM {
            out.push(std::mem::take(&mut cur));
        }
        cur.extend_from_slice(&m);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn start(dir: &Path, name: &str) -> Daemon {
    let socket = dir.join(format!("{name}.sock"));
    let d = Daemon::start(Config {
        socket,
        dgram: None,
        state: None,
        access: Default::default(),
        fpm: None,
        mirror: None,
        metrics: None,
        workers: Default::default(),
        ports: Vec::new(),
    })
    .expect("fibred starts");
    // The link and address that make the 64 gateways reachable.
    let mut c = SocketClient::connect(d.socket()).expect("connect");
    let setup = [
        Request::NewLink(
            Link {
                ifname: Some("d0".into()),
                kind: Some(LinkKind::Dummy),
                flags: 1,
                change: 1,
                ..Link::default()
            },
            ReqFlags::ADD,
        ),
        Request::NewAddr(
            Address {
                family: Family::Inet,
                prefixlen: 16,
                flags: 0,
                scope: 0,
                ifindex: 2,
                local: Some("10.128.0.1".parse().unwrap()),
                address: Some("10.128.0.1".parse().unwrap()),
                broadcast: None,
                label: None,
                metric: None,
                valid_lft: None,
                preferred_lft: None,
            },
            ReqFlags::ADD,
        ),
    ];
    for (i, r) in setup.iter().enumerate() {
        c.send(&convert::request_message(r, i as u32 + 1, 0).to_bytes())
            .unwrap();
        let reply = c.recv().unwrap().to_vec();
        assert_eq!(errors(&reply), (1, 0), "setup request {i} failed");
    }
    d
}

/// (ACKs and errors, errors) in a datagram of answers, read from the message headers and
/// error codes (a bulk loader's minimum).
fn errors(datagram: &[u8]) -> (usize, usize) {
    let mut n = (0, 0);
    let mut off = 0;
    while let Some(h) = datagram.get(off..off + 20) {
        let len = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize;
        if u16::from_ne_bytes([h[4], h[5]]) == NLMSG_ERROR {
            n.0 += 1;
            if h[16..20] != [0; 4] {
                n.1 += 1;
            }
        }
        if len < 16 {
            break;
        }
        off += len.next_multiple_of(4);
    }
    n
}

const NLMSG_ERROR: u16 = fibre_netlink::message::types::NLMSG_ERROR;

fn load_socket(d: &Daemon, grams: &[Vec<u8>], n: usize) -> f64 {
    let path = d.socket().to_path_buf();
    let mut reader = SocketClient::connect(&path).unwrap();
    let writer_fd = reader.try_clone().unwrap();
    let t = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut w = writer_fd;
            for g in grams {
                w.send(g).unwrap();
            }
        });
        let (mut acks, mut errs) = (0, 0);
        while acks < n {
            let (a, e) = errors(reader.recv().unwrap());
            acks += a;
            errs += e;
        }
        assert_eq!(errs, 0, "every route was accepted");
    });
    t.elapsed().as_secs_f64()
}

/// Loads over a ring; returns the seconds it took and the client, still connected (so that
/// the daemon's thread for it can still be accounted for).
fn load_ring(d: &Daemon, grams: &[Vec<u8>], n: usize) -> (f64, fibre_ring::Client) {
    let mut c =
        fibre_ring::Client::connect(d.socket(), fibre_ring::ClientConfig::default()).expect("ring");
    let t = Instant::now();
    let (mut acks, mut errs) = (0, 0);
    c.transact(grams.iter().map(Vec::as_slice), |m| {
        let (a, e) = errors(m.bytes);
        acks += a;
        errs += e;
        if acks >= n {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(errs, 0, "every route was accepted");
    (t.elapsed().as_secs_f64(), c)
}

fn dump_request() -> Vec<u8> {
    let mut m = convert::request_message(&Request::DumpRoutes(Some(Family::Inet)), 77, 0);
    m.header.flags = nf::NLM_F_REQUEST | nf::NLM_F_DUMP;
    m.to_bytes()
}

fn dump_socket(d: &Daemon) -> (f64, usize) {
    let mut c = SocketClient::connect(d.socket()).unwrap();
    let t = Instant::now();
    c.send(&dump_request()).unwrap();
    let mut total = 0;
    loop {
        let (n, done) = count_routes(c.recv().unwrap());
        total += n;
        if done {
            return (t.elapsed().as_secs_f64(), total);
        }
    }
}

fn dump_ring(d: &Daemon, rx_frame: Option<u32>) -> (f64, usize) {
    let mut c = fibre_ring::Client::connect(d.socket(), dump_config(rx_frame)).expect("ring");
    let req = dump_request();
    let t = Instant::now();
    let mut total = 0;
    c.transact(std::iter::once(req.as_slice()), |m| {
        let (n, done) = count_routes(m.bytes);
        total += n;
        if done {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    (t.elapsed().as_secs_f64(), total)
}

/// The kernel side in a network namespace: (ip -batch load s, ip route save s, routes saved);
/// the load once (it takes minutes), the save `runs` times (median).
fn kernel(table: &[(Ipv4Addr, u8, u32)], dir: &Path, runs: usize) -> Option<(f64, f64, usize)> {
    let ns = format!("fibre-daemon-bench-{}", std::process::id());
    if !ip(&["netns", "add", &ns]) {
        println!("kernel: skipped (cannot create a network namespace; run as root)");
        return None;
    }
    let r = (|| {
        if !gateways_namespace(&ns) {
            println!("kernel: skipped (namespace setup failed)");
            return None;
        }
        let batch: PathBuf = dir.join("kernel.batch");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&batch).ok()?);
        for (a, l, p) in table {
            writeln!(f, "route add {a}/{l} via {}", gateway(*p)).ok()?;
        }
        f.flush().ok()?;
        drop(f);
        let t = Instant::now();
        if !ip(&["-n", &ns, "-batch", batch.to_str()?]) {
            println!("kernel: ip -batch failed");
            return None;
        }
        let load = t.elapsed().as_secs_f64();
        let saved = dir.join("kernel.save");
        let mut saves = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let out = std::fs::File::create(&saved).ok()?;
            let ok = Command::new("ip")
                .args(["-n", &ns, "-4", "route", "save", "table", "main"])
                .stdout(out)
                .status()
                .ok()?
                .success();
            saves.push(t.elapsed().as_secs_f64());
            if !ok {
                return None;
            }
        }
        let bytes = std::fs::read(&saved).ok()?;
        // The file: a 4-byte magic, then RTM_NEWROUTE messages.
        let (n, _) = count_routes(&bytes[4.min(bytes.len())..]);
        Some((load, median(saves), n))
    })();
    ip(&["netns", "del", &ns]);
    r
}

/// CPU seconds used by this process so far (every thread: the daemon's and the client's).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one rusage we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Seconds each live thread of this process has run on a CPU and waited for one (runnable,
/// in a run queue), by thread id, with its name (from /proc/self/task/*/schedstat).
fn thread_cpu() -> Vec<(u32, String, [f64; 2])> {
    let mut v = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return v;
    };
    for e in dir.flatten() {
        let p = e.path();
        let (Some(tid), Ok(stat), Ok(comm)) = (
            e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()),
            std::fs::read_to_string(p.join("schedstat")),
            std::fs::read_to_string(p.join("comm")),
        ) else {
            continue;
        };
        let mut ns = stat
            .split_whitespace()
            .map(|x| x.parse::<f64>().unwrap_or(0.0) * 1e-9);
        let (run, wait) = (ns.next().unwrap_or(0.0), ns.next().unwrap_or(0.0));
        v.push((tid, comm.trim().to_string(), [run, wait]));
    }
    v
}

/// Seconds on a CPU and waiting for one per thread name between two [`thread_cpu`]
/// snapshots.
fn thread_cpu_delta(
    before: &[(u32, String, [f64; 2])],
    after: &[(u32, String, [f64; 2])],
) -> Vec<(String, [f64; 2])> {
    let mut by_name: Vec<(String, [f64; 2])> = Vec::new();
    for (tid, name, t) in after {
        let t0 = before
            .iter()
            .find(|(b, _, _)| b == tid)
            .map_or([0.0; 2], |b| b.2);
        let d = [t[0] - t0[0], t[1] - t0[1]];
        match by_name.iter_mut().find(|(n, _)| n == name) {
            Some(e) => {
                e.1[0] += d[0];
                e.1[1] += d[1];
            }
            None => by_name.push((name.clone(), d)),
        }
    }
    by_name.retain(|(_, t)| t[0] > 0.0005);
    by_name
}

/// RX frames of the ring client that dumps: `--rx-frame BYTES` (default: fibre-ring's).
fn dump_config(rx_frame: Option<u32>) -> fibre_ring::ClientConfig {
    let mut c = fibre_ring::ClientConfig::default();
    if let Some(f) = rx_frame {
        c.rx =
            fibre_ring::geometry::RingGeometry::for_frames(f, c.rx.frame_count).expect("geometry");
    }
    c
}

fn main() {
    let mut kernel_side = true;
    let mut runs = 3;
    let mut rx_frame = None;
    let mut path = "/work/shared/data/rib-2026-06.tsv.gz".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--no-kernel" => kernel_side = false,
            "--runs" => runs = args.next().and_then(|r| r.parse().ok()).expect("--runs N"),
            "--rx-frame" => rx_frame = args.next().and_then(|r| r.parse().ok()),
            _ => path = a,
        }
    }
    if !Path::new(&path).exists() {
        println!("skip: {path} not found (see ../shared/data/README.md)");
        return;
    }
    let table = read_table(&path);
    let n = table.len();
    let grams = datagrams(&table);
    let dir = std::env::temp_dir().join(format!("fibred-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "fibred load and dump: {n} IPv4 routes, {} request datagrams of <= {DATAGRAM} bytes, \
         median of {runs} runs",
        grams.len()
    );
    for line in environment() {
        println!("{line}");
    }

    let (mut ls, mut lr, mut ds, mut dr) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut cs, mut cr) = (Vec::new(), Vec::new());
    let (mut cds, mut cdr) = (Vec::new(), Vec::new());
    let (mut ns, mut nr) = (0, 0);
    let mut ring_threads = Vec::new();
    for i in 0..runs {
        let d = start(&dir, &format!("socket{i}"));
        let (t, c) = (Instant::now(), cpu_seconds());
        load_socket(&d, &grams, n);
        assert!(
            route_visible(&d, &table[n - 1]),
            "the last route is visible to lookups"
        );
        ls.push(t.elapsed().as_secs_f64());
        cs.push(cpu_seconds() - c);
        d.stop();

        let d = start(&dir, &format!("ring{i}"));
        let threads = thread_cpu();
        let (t, c) = (Instant::now(), cpu_seconds());
        let (_, client) = load_ring(&d, &grams, n);
        assert!(
            route_visible(&d, &table[n - 1]),
            "the last route is visible to lookups"
        );
        lr.push(t.elapsed().as_secs_f64());
        cr.push(cpu_seconds() - c);
        ring_threads.push(thread_cpu_delta(&threads, &thread_cpu()));
        drop(client);
        // Dumps of the same table, alternating.
        let cpu = cpu_seconds();
        let (s, c) = dump_socket(&d);
        cds.push(cpu_seconds() - cpu);
        ds.push(s);
        ns = c;
        let cpu = cpu_seconds();
        let (r, c) = dump_ring(&d, rx_frame);
        cdr.push(cpu_seconds() - cpu);
        dr.push(r);
        nr = c;
        d.stop();
    }

    let k = if kernel_side {
        kernel(&table, &dir, runs)
    } else {
        None
    };
    let _ = std::fs::remove_dir_all(&dir);

    let (load_sock, load_ring_s) = (median(ls), median(lr.clone()));
    let (dsa, dra) = (ds.clone(), dr.clone());
    let (ds, dr) = (median(ds), median(dr));
    let (cpu_sock, cpu_ring) = (median(cs), median(cr));
    let rate = |secs: f64| n as f64 / secs / 1e6;
    let us = |secs: f64| secs / n as f64 * 1e6;
    println!("load (until visible to lookups)   seconds   M routes/s   CPU us/route (all threads)");
    println!(
        "  fibred over the socket          {load_sock:7.2}   {:6.3}       {:5.2}",
        rate(load_sock),
        us(cpu_sock)
    );
    println!(
        "  fibred over the ring            {load_ring_s:7.2}   {:6.3}       {:5.2}",
        rate(load_ring_s),
        us(cpu_ring)
    );
    // The threads' shares of the ring load, in the median run.
    let mid = ring_threads
        .iter()
        .zip(&lr)
        .min_by(|a, b| {
            (a.1 - load_ring_s)
                .abs()
                .total_cmp(&(b.1 - load_ring_s).abs())
        })
        .map(|(t, _)| t.clone())
        .unwrap_or_default();
    let shares: Vec<String> = mid
        .iter()
        .map(|(name, t)| format!("{name} {:.2} ({:.2})", us(t[0]), us(t[1])))
        .collect();
    println!(
        "    ring load CPU us/route by thread (waiting for a CPU): {}",
        shares.join(", ")
    );
    // The writer applies every route to both copies, one after the other: with a CPU of its
    // own (the other threads need less than the second CPU), its CPU time is the load's.
    let writer: Vec<f64> = ring_threads
        .iter()
        .filter_map(|run| run.iter().find(|(name, _)| name == "fibred-writer"))
        .map(|(_, t)| t[0])
        .collect();
    if !writer.is_empty() {
        let w = median(writer);
        println!(
            "    the writer's CPU time (median {:.2} us/route) allows {:.3} M routes/s with a CPU \
             of its own",
            us(w),
            rate(w)
        );
    }
    if let Some((kl, _, _)) = k {
        println!(
            "  kernel, ip -batch               {kl:7.2}   {:6.3}",
            rate(kl)
        );
        println!("  ring / kernel: {:.1}x", kl / load_ring_s);
    }
    // The machine's load swings single runs both ways: the median of each run's own ratio
    // (socket and ring dumped back to back) is steadier than the ratio of the medians.
    let run_ratio = |s: &[f64], r: &[f64]| median(s.iter().zip(r).map(|(s, r)| s / r).collect());
    let (wall_runs, cpu_runs) = (run_ratio(&dsa, &dra), run_ratio(&cds, &cdr));
    let (cds, cdr) = (median(cds), median(cdr));
    println!("dump of the table (IPv4)          seconds   routes    CPU ns/route (all threads)");
    println!(
        "  fibred over the socket          {ds:7.3}   {ns}   {:5.0}",
        us(cds) * 1e3
    );
    println!(
        "  fibred over the ring            {dr:7.3}   {nr}   {:5.0}",
        us(cdr) * 1e3
    );
    if let Some((_, ks, kn)) = k {
        println!("  kernel, ip -4 route save        {ks:7.3}   {kn}");
        println!("  ring / kernel: {:.1}x", ks / dr);
    }
    println!("  ring / socket: {:.2}x (CPU: {:.2}x)", ds / dr, cds / cdr);
    let each: Vec<String> = dsa
        .iter()
        .zip(&dra)
        .map(|(s, r)| format!("{:.2}", s / r))
        .collect();
    println!("  ring / socket in each run: {}", each.join(" "));
    println!("  ring / socket, median of the runs' ratios: {wall_runs:.2}x (CPU: {cpu_runs:.2}x)");
    println!("at the end: {}", load_average());
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    println!("against the bars (issue 4)");
    println!(
        "  load over the ring >= 1.45 M routes/s: {:.3} M routes/s, {}",
        rate(load_ring_s),
        met(rate(load_ring_s) >= 1.45)
    );
    println!(
        "  dump, ring >= 1.4x socket: {:.2}x, {}",
        ds / dr,
        met(ds / dr >= 1.4)
    );
    if let Some((_, ks, _)) = k {
        println!(
            "  dump, ring >= 5x the kernel: {:.1}x, {}",
            ks / dr,
            met(ks / dr >= 5.0)
        );
    }
}
