//! The table-load benchmark against the Linux kernel: the full table as `route add` lines, loaded
//! by `ip -batch` into a fresh network namespace, and the same lines by `fibre -batch`.
//!
//! The route lines need a device and reachable gateways: the namespace gets a veth pair (this
//! kernel has no dummy driver) whose first end holds 10.255.0.1/24 and fd00:fb::1/64; next hop `n`
//! is gateway 10.255.0.(n+2) or fd00:fb::(n+2). fibre's file starts with three lines creating the
//! same device and addresses (`link add ... type dummy`, `link set ... up`, `address add`), then
//! holds exactly the kernel's lines. A route equal to the device's own subnet would collide with
//! the connected route; such routes are left out of both files (the count is printed).
//!
//! After the timed loads, an untimed check: `route get` for destinations sampled through the table,
//! asked of the kernel's namespace and of `fibre -batch` (the same file plus those lines), must
//! name the same gateways, so the figure is the time of a load that really happened.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::stats::children_cpu;
use crate::table::{Route, Table};
use crate::BenchError;

pub const DEV: &str = "fbk0";
const PEER_DEV: &str = "fbk1";
pub const NET4: (u32, u8) = (0x0aff_0000, 24);
const ADDR4: &str = "10.255.0.1/24";
/// fibre's `address add` arguments matching the namespace's set-up.
const FIBRE_ADDR4: &str = "10.255.0.1/24 dev fbk0";
pub const NET6: (u128, u8) = (0xfd00_00fb_u128 << 96, 64);
const ADDR6: &str = "fd00:fb::1/64";
const FIBRE_ADDR6: &str = "fd00:fb::1/64 dev fbk0 nodad";

pub fn v4_line(out: &mut String, r: &Route<u32>) {
    let p = std::net::Ipv4Addr::from(r.prefix);
    let _ = writeln!(
        out,
        "route add {p}/{} via 10.255.0.{} dev {DEV}",
        r.len,
        r.next_hop + 2
    );
}

pub fn v6_line(out: &mut String, r: &Route<u128>) {
    let p = std::net::Ipv6Addr::from(r.prefix);
    let _ = writeln!(
        out,
        "route add {p}/{} via fd00:fb::{:x} dev {DEV}",
        r.len,
        r.next_hop + 2
    );
}

/// The route lines of one family; returns the text, the line count and the routes left out.
pub fn route_lines<A: Copy + PartialEq>(
    routes: &[Route<A>],
    net: (A, u8),
    line: fn(&mut String, &Route<A>),
) -> (String, usize, usize) {
    let mut text = String::with_capacity(routes.len() * 56);
    let mut skipped = 0;
    for r in routes {
        if (r.prefix, r.len) == net {
            skipped += 1;
        } else {
            line(&mut text, r);
        }
    }
    (text, routes.len() - skipped, skipped)
}

pub fn sh(args: &[&str]) -> Result<String, BenchError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BenchError::Kernel(format!("{}: {e}", args.join(" "))))?;
    if !out.status.success() {
        return Err(BenchError::Kernel(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A network namespace that is deleted when dropped.
struct Netns(String);

impl Netns {
    fn create() -> Result<Netns, BenchError> {
        let name = format!("fibre-bench-{}", std::process::id());
        sh(&["ip", "netns", "add", &name])?;
        let ns = Netns(name);
        let n = ns.0.as_str();
        sh(&[
            "ip", "-n", n, "link", "add", DEV, "type", "veth", "peer", "name", PEER_DEV,
        ])?;
        sh(&["ip", "-n", n, "link", "set", "lo", "up"])?;
        sh(&["ip", "-n", n, "link", "set", PEER_DEV, "up"])?;
        sh(&["ip", "-n", n, "link", "set", DEV, "up"])?;
        sh(&["ip", "-n", n, "address", "add", ADDR4, "dev", DEV])?;
        sh(&["ip", "-n", n, "address", "add", ADDR6, "dev", DEV, "nodad"])?;
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Wall-clock and CPU (user + system) seconds of one batch load.
#[derive(Clone, Copy)]
struct Timing {
    wall: f64,
    cpu: f64,
}

/// Times `cmd`, which must succeed; its stdout is discarded, its stderr kept for the error. The
/// CPU figure counts the child's user and system time: the kernel inserts routes in the system
/// time of `ip`'s netlink calls, so on a shared machine it is the fairer of the two.
fn time_batch(mut cmd: Command, what: &str) -> Result<Timing, BenchError> {
    let cpu0 = children_cpu();
    let t = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| BenchError::Kernel(format!("{what}: {e}")))?;
    let timing = Timing {
        wall: t.elapsed().as_secs_f64(),
        cpu: children_cpu().saturating_sub(cpu0).as_secs_f64(),
    };
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let head: Vec<&str> = err.lines().take(3).collect();
        return Err(BenchError::Kernel(format!(
            "{what} failed: {}",
            head.join(" | ")
        )));
    }
    Ok(timing)
}

/// Runs the kernel and `fibre -batch` loads for the families asked; `fibre` is the CLI binary,
/// when there is one.
pub fn run(table: &Table, v4: bool, v6: bool, fibre: Option<&Path>) -> Result<(), BenchError> {
    let dir = std::env::temp_dir().join(format!("fibre-bench-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| BenchError::Kernel(format!("{}: {e}", dir.display())))?;
    let result = run_in(&dir, table, v4, v6, fibre);
    let _ = fs::remove_dir_all(&dir);
    result
}

/// One family's batch: route lines, their count, routes left out, fibre's `address add`
/// arguments, and the `route get` probes.
struct Family {
    name: &'static str,
    text: String,
    n: usize,
    skipped: usize,
    addr: &'static str,
    probes: Vec<String>,
}

fn run_in(
    dir: &Path,
    table: &Table,
    v4: bool,
    v6: bool,
    fibre: Option<&Path>,
) -> Result<(), BenchError> {
    let mut families: Vec<Family> = Vec::new();
    if v4 {
        let (text, n, skipped) = route_lines(&table.v4, NET4, v4_line);
        let probes = probes(&table.v4, |r| {
            std::net::Ipv4Addr::from(r.prefix).to_string()
        });
        families.push(Family {
            name: "IPv4",
            text,
            n,
            skipped,
            addr: FIBRE_ADDR4,
            probes,
        });
    }
    if v6 {
        let (text, n, skipped) = route_lines(&table.v6, NET6, v6_line);
        let probes = probes(&table.v6, |r| {
            std::net::Ipv6Addr::from(r.prefix).to_string()
        });
        families.push(Family {
            name: "IPv6",
            text,
            n,
            skipped,
            addr: FIBRE_ADDR6,
            probes,
        });
    }
    for Family {
        name: family,
        text,
        n,
        skipped,
        addr,
        probes,
    } in families
    {
        println!("\n== {family} table load: {n} `route add` lines ({skipped} left out, see kernel.rs) ==");
        let kernel_file = dir.join(format!("{family}.batch"));
        fs::write(&kernel_file, &text)
            .map_err(|e| BenchError::Kernel(format!("{}: {e}", kernel_file.display())))?;

        let ns = Netns::create()?;
        let kernel = {
            eprintln!(
                "  kernel: ip -n {} -batch {} ...",
                ns.0,
                kernel_file.display()
            );
            let mut cmd = Command::new("ip");
            cmd.args(["-n", &ns.0, "-batch"]).arg(&kernel_file);
            let t = time_batch(cmd, "ip -batch")?;
            let fam = if family == "IPv4" { "-4" } else { "-6" };
            let shown = sh(&["ip", "-n", &ns.0, fam, "route", "show", "proto", "boot"])?
                .lines()
                .count();
            println!(
                "  kernel  ip -batch     wall {:7.2} s  cpu {:7.2} s  {:6.3} Mroutes/s (cpu)  ({shown} routes in the namespace afterwards)",
                t.wall,
                t.cpu,
                n as f64 / t.cpu / 1e6
            );
            t
        };
        let mut kernel_vias = Vec::new();
        for p in &probes {
            kernel_vias.extend(vias(&sh(&["ip", "-n", &ns.0, "route", "get", p])?));
        }

        match fibre {
            None => println!("  fibre   -batch        not measured: no fibre binary (build fibre-cli, or set FIBRE)"),
            Some(bin) => {
                let fibre_file = dir.join(format!("{family}.fibre.batch"));
                let head = format!("link add {DEV} type dummy\nlink set {DEV} up\naddress add {addr}\n");
                fs::write(&fibre_file, head + &text).map_err(|e| BenchError::Kernel(format!("{}: {e}", fibre_file.display())))?;
                let mut cmd = Command::new(bin);
                cmd.arg("-batch").arg(&fibre_file);
                match time_batch(cmd, "fibre -batch") {
                    Ok(t) => println!(
                        "  fibre   -batch        wall {:7.2} s  cpu {:7.2} s  {:6.3} Mroutes/s (cpu)  kernel/fibre: {:.1}x wall, {:.1}x cpu",
                        t.wall,
                        t.cpu,
                        n as f64 / t.cpu / 1e6,
                        kernel.wall / t.wall,
                        kernel.cpu / t.cpu
                    ),
                    Err(e) => {
                        println!("  fibre   -batch        not measured: {e}");
                        continue;
                    }
                }
                // Untimed: the same file plus `route get` lines, answered like the kernel's.
                let gets: String = probes.iter().map(|p| format!("route get {p}\n")).collect();
                fs::write(&fibre_file, fs::read_to_string(&fibre_file).unwrap_or_default() + &gets)
                    .map_err(|e| BenchError::Kernel(format!("{}: {e}", fibre_file.display())))?;
                let out = sh(&[&bin.to_string_lossy(), "-batch", &fibre_file.to_string_lossy()])?;
                let fibre_vias = vias(&out);
                if fibre_vias == kernel_vias {
                    println!("  check   route get     fibre and the kernel agree on {} sampled destinations", probes.len());
                } else {
                    println!("  check   route get     DISAGREE: kernel {kernel_vias:?}, fibre {fibre_vias:?}");
                }
            }
        }
    }
    Ok(())
}

/// Destinations sampled evenly through the table for the `route get` check.
const PROBES: usize = 16;

fn probes<A>(routes: &[Route<A>], show: impl Fn(&Route<A>) -> String) -> Vec<String> {
    let step = (routes.len() / PROBES).max(1);
    routes.iter().step_by(step).take(PROBES).map(show).collect()
}

/// The gateways named in `route get` answers, in order.
fn vias(output: &str) -> Vec<String> {
    let words: Vec<&str> = output.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "via")
        .map(|w| w[1].to_owned())
        .collect()
}

/// The `fibre` binary: `$FIBRE`, else the repository's release build, if present.
pub fn fibre_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FIBRE") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/fibre");
    p.is_file().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_lines_name_a_gateway_per_next_hop_and_skip_the_device_subnet() {
        let routes = [
            Route {
                prefix: 0x0100_0000u32,
                len: 24,
                next_hop: 0,
            },
            Route {
                prefix: NET4.0,
                len: NET4.1,
                next_hop: 5,
            },
            Route {
                prefix: 0x0800_0000u32,
                len: 8,
                next_hop: 63,
            },
        ];
        let (text, n, skipped) = route_lines(&routes, NET4, v4_line);
        assert_eq!((n, skipped), (2, 1));
        assert_eq!(
            text,
            "route add 1.0.0.0/24 via 10.255.0.2 dev fbk0\nroute add 8.0.0.0/8 via 10.255.0.65 dev fbk0\n"
        );
        let v6 = [Route {
            prefix: 0x2001_0db8u128 << 96,
            len: 32,
            next_hop: 10,
        }];
        let (text, _, _) = route_lines(&v6, NET6, v6_line);
        assert_eq!(text, "route add 2001:db8::/32 via fd00:fb::c dev fbk0\n");
    }

    #[test]
    fn vias_lists_gateways_in_answer_order() {
        let out = "1.0.0.0 via 10.255.0.2 dev fbk0 src 10.255.0.1 uid 0 \n    cache \n\
                   8.0.0.0 via 10.255.0.65 dev fbk0 src 10.255.0.1 uid 0 \n    cache \n";
        assert_eq!(vias(out), ["10.255.0.2", "10.255.0.65"]);
    }
}
