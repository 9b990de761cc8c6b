//! What the fibred examples share: the 2026 table, its gateways, reading answers, and the
//! environment a results file records.

use fibre_fib::types::RouteQuery;
use fibre_netlink::route::RouteAttr;
use fibre_netlink::{Messages, Payload};
use fibre_proto::client::SocketClient;
use fibre_proto::convert::{self, Request};
use fibred::Daemon;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};

/// Gateways the routes are spread over (a realistic peer count).
pub const PEERS: u32 = 64;

pub fn read_table(path: &str) -> Vec<(Ipv4Addr, u8, u32)> {
    let mut child = Command::new("zcat")
        .arg(path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("zcat runs");
    let out = child.stdout.take().expect("piped");
    let mut v4 = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.expect("readable");
        let mut it = line.split('\t');
        let (Some(p), Some(asn)) = (it.next(), it.next()) else {
            continue;
        };
        let Some((a, l)) = p.split_once('/') else {
            continue;
        };
        let (Ok(IpAddr::V4(addr)), Ok(len)) = (a.parse::<IpAddr>(), l.parse::<u8>()) else {
            continue;
        };
        v4.push((addr, len, asn.trim().parse::<u32>().unwrap_or(0) % PEERS));
    }
    let _ = child.wait();
    v4
}

pub fn gateway(peer: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 128, 0, 2 + peer as u8)
}

/// Whether a lookup through `d` finds the route of prefix `p` itself (`route get fibmatch`):
/// answered from the published state, so every change before it is visible too.
pub fn route_visible(d: &Daemon, p: &(Ipv4Addr, u8, u32)) -> bool {
    let Ok(mut c) = SocketClient::connect(d.socket()) else {
        return false;
    };
    let q = RouteQuery {
        fibmatch: true,
        ..RouteQuery::to(IpAddr::V4(p.0))
    };
    if c.send(&convert::request_message(&Request::GetRoute(q), 1, 0).to_bytes())
        .is_err()
    {
        return false;
    }
    let Ok(reply) = c.recv().map(<[u8]>::to_vec) else {
        return false;
    };
    Messages::new(&reply)
        .flatten()
        .any(|(_, m)| match &m.payload {
            Payload::Route(r) => {
                r.header.dst_len == p.1
                    && r.attributes
                        .iter()
                        .any(|a| matches!(a, RouteAttr::Dst(IpAddr::V4(d)) if *d == p.0))
            }
            _ => false,
        })
}

/// Counts the routes in a datagram and whether NLMSG_DONE ended it, walking the message
/// headers only: a dump reader's minimum (`ip route save` writes the bytes out unparsed).
pub fn count_routes(datagram: &[u8]) -> (usize, bool) {
    let mut n = 0;
    let mut off = 0;
    while let Some(h) = datagram.get(off..off + 16) {
        let len = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize;
        match u16::from_ne_bytes([h[4], h[5]]) {
            RTM_NEWROUTE => n += 1,
            NLMSG_DONE => return (n, true),
            _ => {}
        }
        if len < 16 {
            break;
        }
        off += len.next_multiple_of(4);
    }
    (n, false)
}

pub const RTM_NEWROUTE: u16 = fibre_netlink::message::types::RTM_NEWROUTE;
pub const NLMSG_DONE: u16 = fibre_netlink::message::types::NLMSG_DONE;

/// What a results file records beside the figures: the machine, its load, the date.
pub fn environment() -> Vec<String> {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_string();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / (1 << 20) as f64);
    let kernel = read("/proc/sys/kernel/osrelease");
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    vec![
        format!(
            "machine: {model}, {cpus} CPUs, {mem_gib:.0} GiB, Linux {}",
            kernel.trim()
        ),
        format!("date: {date}; {}", load_average()),
        format!(
            "command: cargo run --release -p fibred --example {} -- {}",
            std::env::current_exe()
                .ok()
                .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .unwrap_or_default(),
            std::env::args().skip(1).collect::<Vec<_>>().join(" ")
        ),
    ]
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg has them.
pub fn load_average() -> String {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let v: Vec<&str> = l.split_whitespace().take(3).collect();
    format!("load average {}", v.join(" "))
}

/// The median of some figures.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `ip` with `args`, quietly; whether it succeeded.
pub fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Sets namespace `ns` up as the examples' kernel side: a veth whose address (10.128.0.1/16)
/// makes the gateways of [`gateway`] reachable. Whether it worked.
pub fn gateways_namespace(ns: &str) -> bool {
    [
        vec!["-n", ns, "link", "set", "lo", "up"],
        vec![
            "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "p0",
        ],
        vec!["-n", ns, "link", "set", "p0", "up"],
        vec!["-n", ns, "link", "set", "v0", "up"],
        vec!["-n", ns, "addr", "add", "10.128.0.1/16", "dev", "v0"],
    ]
    .iter()
    .all(|a| ip(a))
}
