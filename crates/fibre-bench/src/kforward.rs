//! The forwarding benchmark, the kernel's side: the same table, links, neighbours and frames
//! as fibre's (`frames.rs`), forwarded by the Linux kernel in a router namespace.
//!
//! Set-up: namespace R (the router) holds `fbi0` and `fbk0`, veth ends whose peers `fbi1` and
//! `fbk1` are in namespace S (the sender and the sink); the MACs, addresses and permanent
//! gateway neighbours are fibre's; forwarding on, rp_filter 0; the ethtool offloads (checksums,
//! scatter-gather, TSO, GSO, GRO) off on all four ends; the table through `ip -batch` (the
//! table-load benchmark's lines).
//!
//! How the kernel's cost is accounted: a thread in S, pinned to one CPU, sends the frames on
//! `fbi1` with `sendmmsg` on an AF_PACKET socket. A veth transmit hands the frame to its peer
//! with `__netif_rx` while bottom halves are off, so the receive softirq runs when they are
//! turned back on, in the sending thread, on its CPU: R's ip_rcv, the route lookup,
//! ip_forward, the neighbour output and R's transmit on `fbk0`, then S's receive of the
//! forwarded frame on `fbk1` (dropped there as PACKET_OTHERHOST: it is addressed to a
//! gateway). This kernel has no IRQ_TIME_ACCOUNTING, so softirq time spent in a task is that
//! task's CPU time: the thread's CPU clock plus what `ksoftirqd` of its CPU ran meanwhile (its
//! schedstat; the softirq work it was left) is everything the kernel spent, and nothing other
//! processes ran. Each run sends the frames twice: addressed to R (forwarded), then to a MAC
//! nobody has (the baseline: the same sending, veth and receive work, dropped at the start of
//! R's ip_rcv / ipv6_rcv, where S's sink also drops the forwarded copy). The forwarding cost
//! is their difference per frame: R's IP receive checks, route decision, forwarding and
//! transmit, plus S's early drop of the forwarded frame (one more early drop, left in: it
//! makes the kernel's figure slightly higher than its forwarding alone).
//!
//! Every forwarded pass must raise R's ForwDatagrams (IPv4) or Ip6OutForwDatagrams (IPv6) by
//! the number of frames, and a baseline pass must leave it alone.
//!
//! Memory: /proc/meminfo's SUnreclaim + VmallocUsed + Percpu before and after the table load
//! (routes are unreclaimable slab and kmalloc memory, large trie nodes vmalloc), and the
//! route caches' slabs of /proc/slabinfo. The machine is shared: other tenants move these
//! counters too, by a few MiB.

use std::ffi::CString;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::forward::Options;
use crate::frames::{self, Family, FRAME_LEN};
use crate::kernel;
use crate::stats::{median, thread_cpu};
use crate::table::Route;
use crate::{sys, BenchError};

/// Frames per `sendmmsg` call.
const SEND_BATCH: usize = 64;

/// The sink's MAC on `fbk1`: not a gateway's, so forwarded frames are dropped there early.
const SINK_MAC: [u8; 6] = [0x02, 0xfb, 0, 0, 1, 0x02];

/// Time for the links' own start-up traffic (IPv6 router and MLD messages) to pass before
/// counting.
const SETTLE: Duration = Duration::from_millis(1500);

pub struct KernelFigures {
    pub frames: usize,
    pub runs: usize,
    pub cpu: usize,
    /// CPU per frame when forwarded, in the baseline, and their difference (medians).
    pub forward_ns: f64,
    pub baseline_ns: f64,
    pub cost_ns: f64,
    pub load: String,
    /// The meminfo delta of the table load, and after the traffic (IPv6 routes grow per-CPU
    /// dst entries when used).
    pub memory_bytes: usize,
    pub memory_after_traffic: usize,
    pub memory_detail: String,
}

fn err(m: impl Into<String>) -> BenchError {
    BenchError::Kernel(m.into())
}

/// Runs `ip ARGS`, which must succeed; its output.
fn ip(args: &[&str]) -> Result<String, BenchError> {
    let mut all = vec!["ip"];
    all.extend_from_slice(args);
    kernel::sh(&all)
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The two namespaces, deleted when dropped.
struct Namespaces {
    r: String,
    s: String,
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in [&self.r, &self.s] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn set_up(dir: &std::path::Path) -> Result<Namespaces, BenchError> {
    let pid = std::process::id();
    let ns = Namespaces {
        r: format!("fibre-bench-fwd-{pid}-r"),
        s: format!("fibre-bench-fwd-{pid}-s"),
    };
    ip(&["netns", "add", &ns.r])?;
    ip(&["netns", "add", &ns.s])?;
    let (r, s) = (ns.r.as_str(), ns.s.as_str());
    for (dev, peer) in [
        (frames::IN_DEV, frames::IN_PEER),
        (frames::OUT_DEV, frames::OUT_PEER),
    ] {
        ip(&[
            "-n", r, "link", "add", dev, "type", "veth", "peer", "name", peer, "netns", s,
        ])?;
    }
    for (n, dev, m) in [
        (r, frames::IN_DEV, frames::ROUTER_IN_MAC),
        (r, frames::OUT_DEV, frames::ROUTER_OUT_MAC),
        (s, frames::IN_PEER, frames::HOST_MAC),
        (s, frames::OUT_PEER, SINK_MAC),
    ] {
        ip(&["-n", n, "link", "set", dev, "address", &mac(m)])?;
    }
    let sysctls = [
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        "net.ipv4.conf.fbi0.rp_filter=0",
        "net.ipv4.conf.fbk0.rp_filter=0",
    ];
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", r, "sysctl", "-qw"])
        .args(sysctls);
    let st = cmd.status().map_err(|e| err(format!("sysctl: {e}")))?;
    if !st.success() {
        return Err(err("sysctl in the router namespace failed"));
    }
    let mut batch = String::new();
    for (dev, a4, a6) in [
        (frames::IN_DEV, frames::IN_ADDR4, frames::IN_ADDR6),
        (frames::OUT_DEV, frames::OUT_ADDR4, frames::OUT_ADDR6),
    ] {
        let _ = writeln!(batch, "link set {dev} up");
        let _ = writeln!(batch, "address add {a4} dev {dev}");
        let _ = writeln!(batch, "address add {a6} dev {dev} nodad");
    }
    let _ = writeln!(batch, "link set lo up");
    for (gw, m) in frames::gateways() {
        let _ = writeln!(
            batch,
            "neigh add {gw} lladdr {} dev {} nud permanent",
            mac(m),
            frames::OUT_DEV
        );
    }
    let file = dir.join("router.batch");
    fs::write(&file, batch).map_err(|e| err(format!("{}: {e}", file.display())))?;
    ip(&["-n", r, "-batch", &file.to_string_lossy()])?;
    for dev in [frames::IN_PEER, frames::OUT_PEER] {
        ip(&["-n", s, "link", "set", dev, "up"])?;
    }
    in_netns(r, || offloads_off(&[frames::IN_DEV, frames::OUT_DEV]))??;
    in_netns(s, || offloads_off(&[frames::IN_PEER, frames::OUT_PEER]))??;
    Ok(ns)
}

/// Runs `f` on a thread that entered network namespace `name` first.
fn in_netns<R: Send>(name: &str, f: impl FnOnce() -> R + Send) -> Result<R, BenchError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_netns(name)?;
            Ok(f())
        })
        .join()
        .map_err(|_| err("a namespace thread panicked"))?
    })
}

fn enter_netns(name: &str) -> Result<(), BenchError> {
    let f = File::open(format!("/run/netns/{name}"))
        .map_err(|e| err(format!("/run/netns/{name}: {e}")))?;
    // SAFETY: setns on a namespace file this thread holds open; it changes only this thread's
    // network namespace.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(err(format!(
            "setns {name}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// SIOCETHTOOL and the legacy ethtool set commands (linux/ethtool.h): tx and rx
/// checksumming, scatter-gather, TSO, GSO, GRO.
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_OFFLOADS: [u32; 6] = [0x17, 0x15, 0x19, 0x1f, 0x24, 0x2c];

/// Turns the offloads off on `links` of the calling thread's namespace.
fn offloads_off(links: &[&str]) -> Result<(), BenchError> {
    // SAFETY: a plain socket call; the descriptor is owned right away.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(err("socket for ethtool"));
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    for link in links {
        for cmd in ETHTOOL_OFFLOADS {
            let mut value = [cmd, 0u32];
            // struct ifreq: the 16-byte name, then ifr_data (a pointer to the command).
            let mut ifr = [0u8; 40];
            ifr[..link.len()].copy_from_slice(link.as_bytes());
            let p = value.as_mut_ptr() as usize;
            ifr[16..16 + std::mem::size_of::<usize>()].copy_from_slice(&p.to_ne_bytes());
            // SAFETY: `ifr` is an ifreq whose ifr_data points at `value`, a live ethtool_value
            // the kernel reads; both outlive the call.
            let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, ifr.as_mut_ptr()) };
            if rc != 0 {
                return Err(err(format!(
                    "ethtool {cmd:#x} on {link}: {}",
                    std::io::Error::last_os_error()
                )));
            }
        }
    }
    Ok(())
}

/// The /proc/meminfo fields that hold the kernel's routes: unreclaimable slab and kmalloc
/// memory, vmalloc (large trie nodes) and per-CPU memory (per-CPU route caches).
const MEMINFO: [&str; 3] = ["SUnreclaim", "VmallocUsed", "Percpu"];

/// The [`MEMINFO`] fields now, in bytes.
fn kernel_memory() -> [usize; 3] {
    let text = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    MEMINFO.map(|name| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<usize>().ok())
            .unwrap_or(0)
            * 1024
    })
}

/// The growth from `a` to `b`: the total, and each field's in MiB.
fn growth(a: &[usize; 3], b: &[usize; 3]) -> (usize, String) {
    let d: Vec<i64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| *y as i64 - *x as i64)
        .collect();
    let text = MEMINFO
        .iter()
        .zip(&d)
        .map(|(n, v)| format!("{n} {:+.1}", *v as f64 / (1 << 20) as f64))
        .collect::<Vec<_>>()
        .join(", ");
    (d.iter().sum::<i64>().max(0) as usize, text)
}

/// Bytes in the route caches' slabs (IPv4 trie nodes and aliases, IPv6 tree nodes and
/// route entries' dst caches), by cache.
fn route_slabs() -> Vec<(String, usize)> {
    let text = fs::read_to_string("/proc/slabinfo").unwrap_or_default();
    text.lines()
        .filter(|l| {
            ["ip_fib_", "fib6_", "ip6_dst_cache", "ip_dst_cache"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let objs: usize = f.get(2)?.parse().ok()?;
            let size: usize = f.get(3)?.parse().ok()?;
            Some((f[0].to_owned(), objs * size))
        })
        .collect()
}

/// R's forwarded-packet counter for the family.
fn forwarded(r: &str, v4: bool) -> Result<u64, BenchError> {
    let (file, key) = if v4 {
        ("/proc/net/snmp", "ForwDatagrams")
    } else {
        ("/proc/net/snmp6", "Ip6OutForwDatagrams")
    };
    let out = Command::new("ip")
        .args(["netns", "exec", r, "cat", file])
        .output()
        .map_err(|e| err(format!("{file}: {e}")))?;
    snmp_counter(&String::from_utf8_lossy(&out.stdout), key)
        .ok_or_else(|| err(format!("no {key} in R's {file}")))
}

/// Counter `key` of /proc/net/snmp (a line of `Ip:` names, then one of values) or
/// /proc/net/snmp6 (a name and a value per line).
fn snmp_counter(text: &str, key: &str) -> Option<u64> {
    let ip: Vec<&str> = text.lines().filter(|l| l.starts_with("Ip:")).collect();
    if let [names, values, ..] = ip[..] {
        let i = names.split_whitespace().position(|w| w == key)?;
        return values.split_whitespace().nth(i)?.parse().ok();
    }
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next()? == key).then(|| it.next()?.parse().ok())?
    })
}

/// The pid of `ksoftirqd/<cpu>`.
fn ksoftirqd(cpu: usize) -> Option<u32> {
    let want = format!("ksoftirqd/{cpu}");
    fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = fs::read_to_string(e.path().join("comm")).ok()?;
        (comm.trim() == want).then_some(pid)
    })
}

/// On-CPU nanoseconds of task `pid` (its schedstat's first field).
fn task_ns(pid: Option<u32>) -> u64 {
    pid.and_then(|p| {
        fs::read_to_string(format!("/proc/{p}/schedstat"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
    .unwrap_or(0)
}

/// An AF_PACKET socket bound to `dev` of the calling thread's namespace, for sending only
/// (protocol 0: it receives nothing).
fn packet_socket(dev: &str) -> Result<OwnedFd, BenchError> {
    let name = CString::new(dev).map_err(|_| err("device name"))?;
    // SAFETY: `name` is a valid C string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(err(format!("no {dev} in the sender's namespace")));
    }
    // SAFETY: a plain socket call; the descriptor is owned right away.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    if fd < 0 {
        return Err(err(format!(
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
    let rc = unsafe {
        libc::bind(
            sock.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if rc != 0 {
        return Err(err(format!(
            "bind {dev}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(sock)
}

fn pin_to(cpu: usize) -> Result<(), BenchError> {
    // SAFETY: cpu_set_t is plain old data; CPU_SET writes inside it; sched_setaffinity reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(err(format!(
            "pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Sends every frame of `frames` on `sock`, `SEND_BATCH` per call; the kernel's CPU
/// nanoseconds for it (this thread's and `ksoftirqd`'s of its CPU).
fn send_all(sock: &OwnedFd, frames: &[u8], softirqd: Option<u32>) -> Result<u64, BenchError> {
    let mut iov: Vec<libc::iovec> = frames
        .chunks_exact(FRAME_LEN)
        .map(|f| libc::iovec {
            iov_base: f.as_ptr() as *mut libc::c_void,
            iov_len: f.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain old data; all-zero is a valid value (no name, no control).
    let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; iov.len()];
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let k0 = task_ns(softirqd);
    let t0 = thread_cpu();
    let mut at = 0;
    while at < msgs.len() {
        let n = (msgs.len() - at).min(SEND_BATCH);
        // SAFETY: `msgs[at..at + n]` are valid mmsghdrs whose iovecs point into `frames`,
        // which outlives the call; the kernel only reads them and writes `msg_len`.
        let sent =
            unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs[at..].as_mut_ptr(), n as u32, 0) };
        if sent < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOBUFS) {
                std::thread::yield_now();
                continue;
            }
            return Err(err(format!("sendmmsg: {e}")));
        }
        at += sent as usize;
    }
    let cpu = thread_cpu().saturating_sub(t0).as_nanos() as u64;
    Ok(cpu + task_ns(softirqd).saturating_sub(k0))
}

/// The kernel's figures for one family (see the module documentation).
pub fn run<A: Family>(
    routes: &[Route<A>],
    frame_bytes: &[u8],
    opts: &Options,
) -> Result<KernelFigures, BenchError> {
    let dir = std::env::temp_dir().join(format!("fibre-bench-fwd-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| err(format!("{}: {e}", dir.display())))?;
    let result = run_in(&dir, routes, frame_bytes, opts);
    let _ = fs::remove_dir_all(&dir);
    result
}

fn run_in<A: Family>(
    dir: &std::path::Path,
    routes: &[Route<A>],
    frame_bytes: &[u8],
    opts: &Options,
) -> Result<KernelFigures, BenchError> {
    let v4 = A::NAME == "IPv4";
    let ns = set_up(dir)?;
    let mem0 = kernel_memory();
    let slabs0 = route_slabs();
    let (text, n, _) = A::route_lines(routes);
    let file = dir.join("routes.batch");
    fs::write(&file, &text).map_err(|e| err(format!("{}: {e}", file.display())))?;
    drop(text);
    eprintln!("  kernel: ip -n {} -batch of {n} routes ...", ns.r);
    let t = Instant::now();
    ip(&["-n", &ns.r, "-batch", &file.to_string_lossy()])?;
    eprintln!(
        "  kernel: table loaded in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let mem1 = kernel_memory();
    let slabs1 = route_slabs();
    let (load_bytes, load_text) = growth(&mem0, &mem1);
    let mut memory_detail = format!("MiB: {load_text}; route slabs");
    for (name, b1) in &slabs1 {
        let b0 = slabs0.iter().find(|(n0, _)| n0 == name).map_or(0, |s| s.1);
        let _ = write!(
            memory_detail,
            " {name} +{:.1} MiB",
            b1.saturating_sub(b0) as f64 / (1 << 20) as f64
        );
    }
    std::thread::sleep(SETTLE);

    let cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    let softirqd = ksoftirqd(cpu);
    let baseline_bytes = frames::readdressed(frame_bytes, frames::NOBODY_MAC);
    let count = frame_bytes.len() / FRAME_LEN;
    let r_ns = ns.r.clone();
    let s_ns = ns.s.clone();
    let runs = opts.runs;
    let (fwd, base) = std::thread::scope(|s| {
        s.spawn(|| -> Result<(Vec<f64>, Vec<f64>), BenchError> {
            enter_netns(&s_ns)?;
            pin_to(cpu)?;
            let sock = packet_socket(frames::IN_PEER)?;
            // Untimed warm-up: caches, and the IPv6 routes' per-CPU dst entries.
            let f0 = forwarded(&r_ns, v4)?;
            send_all(&sock, frame_bytes, softirqd)?;
            let f1 = forwarded(&r_ns, v4)?;
            eprintln!(
                "  kernel: warm-up forwarded {} of {count} frames",
                f1.saturating_sub(f0)
            );
            let (mut fwd, mut base) = (Vec::new(), Vec::new());
            for run in 0..runs {
                let f0 = forwarded(&r_ns, v4)?;
                let a = send_all(&sock, frame_bytes, softirqd)?;
                let f1 = forwarded(&r_ns, v4)?;
                let b = send_all(&sock, &baseline_bytes, softirqd)?;
                let f2 = forwarded(&r_ns, v4)?;
                if f1 - f0 != count as u64 || f2 != f1 {
                    return Err(err(format!(
                        "run {}: {count} frames sent, {} forwarded; baseline: {} forwarded",
                        run + 1,
                        f1 - f0,
                        f2 - f1
                    )));
                }
                let (a, b) = (a as f64 / count as f64, b as f64 / count as f64);
                eprintln!(
                    "  kernel run {}/{runs}: forwarded {a:.1} ns/frame, baseline {b:.1} ns/frame; {}",
                    run + 1,
                    sys::loadavg()
                );
                fwd.push(a);
                base.push(b);
            }
            Ok((fwd, base))
        })
        .join()
        .map_err(|_| err("the sender thread panicked"))?
    })?;
    let diffs: Vec<f64> = fwd.iter().zip(&base).map(|(a, b)| a - b).collect();
    let (traffic_bytes, traffic_text) = growth(&mem0, &kernel_memory());
    let _ = write!(memory_detail, "; after the traffic: {traffic_text}");
    Ok(KernelFigures {
        frames: count,
        runs,
        cpu,
        forward_ns: median(&fwd),
        baseline_ns: median(&base),
        cost_ns: median(&diffs),
        load: sys::loadavg(),
        memory_bytes: load_bytes,
        memory_after_traffic: traffic_bytes,
        memory_detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_counters_are_read_from_both_layouts() {
        let snmp = "Ip: Forwarding DefaultTTL InReceives ForwDatagrams\nIp: 1 64 10 7\n\
                    Icmp: InMsgs\nIcmp: 0\n";
        assert_eq!(snmp_counter(snmp, "ForwDatagrams"), Some(7));
        let snmp6 = "Ip6InReceives                   \t10\nIp6OutForwDatagrams             \t9\n";
        assert_eq!(snmp_counter(snmp6, "Ip6OutForwDatagrams"), Some(9));
        assert_eq!(snmp_counter(snmp6, "Ip6InDiscards"), None);
    }

    #[test]
    fn memory_growth_is_summed_and_shown_per_field() {
        let (total, text) = growth(&[1 << 20, 0, 0], &[3 << 20, 1 << 20, 0]);
        assert_eq!(total, 3 << 20);
        assert_eq!(text, "SUnreclaim +2.0, VmallocUsed +1.0, Percpu +0.0");
    }
}
