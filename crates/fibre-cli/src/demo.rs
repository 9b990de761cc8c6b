//! `fibre demo`: the product on an embedded default, with no root and no files.
//!
//! It configures a small edge router with iproute2 commands (links, addresses, next-hop objects,
//! IPv4/IPv6 routes, multipath, policy rules), loads a synthetic Internet table through the same
//! command path as `fibre -batch`, answers a set of `route get` lookups with what each shows, and
//! measures lookups per second. The synthetic table is generated here, deterministically, with
//! the prefix-length distribution of the 2026 default-free zone (counts below); it never reads
//! the real table.

use crate::batch::{self, run_line};
use crate::{Cli, Options};
use fibre_fib::{Family, Fib, RouteQuery};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

/// IPv4 prefixes per length, /8 to /24, in the 2026-06 table (1,168,945 in all, 63% /24).
const V4_LENGTHS: [(u8, u32); 17] = [
    (8, 16),
    (9, 14),
    (10, 39),
    (11, 97),
    (12, 306),
    (13, 599),
    (14, 1223),
    (15, 2249),
    (16, 14310),
    (17, 9053),
    (18, 15072),
    (19, 27788),
    (20, 49815),
    (21, 57824),
    (22, 122384),
    (23, 126268),
    (24, 741888),
];

/// IPv6 prefixes per length, /19 to /48, in the 2026-06 table (279,855 in all).
const V6_LENGTHS: [(u8, u32); 30] = [
    (19, 1),
    (20, 15),
    (21, 3),
    (22, 6),
    (23, 6),
    (24, 42),
    (25, 13),
    (26, 18),
    (27, 19),
    (28, 173),
    (29, 5532),
    (30, 759),
    (31, 360),
    (32, 27182),
    (33, 5995),
    (34, 5884),
    (35, 2084),
    (36, 10386),
    (37, 1366),
    (38, 2836),
    (39, 1928),
    (40, 24765),
    (41, 4874),
    (42, 3613),
    (43, 1758),
    (44, 26975),
    (45, 5090),
    (46, 8379),
    (47, 9843),
    (48, 129950),
];

/// The router the demo builds, as an operator would type it.
const CONFIG: &str = "\
link set lo up
link add wan0 type dummy
link add wan1 type dummy
link add lan0 type dummy
link add dmz0 type dummy
link set wan0 up
link set wan1 up
link set lan0 up
link set dmz0 up
address add 203.0.113.2/24 dev wan0
address add 198.51.100.2/24 dev wan1
address add 192.168.1.1/24 dev lan0
address add 172.16.0.1/24 dev dmz0
address add 2001:db8:a::2/64 dev wan0 nodad
address add 2001:db8:b::2/64 dev wan1 nodad
address add 2001:db8:1::1/64 dev lan0 nodad
nexthop add id 1 via 203.0.113.1 dev wan0
nexthop add id 2 via 198.51.100.1 dev wan1
nexthop add id 10 group 1,3/2
route add default nhid 10
route add default via 2001:db8:a::1 dev wan0
route add 198.18.0.0/15 nexthop via 203.0.113.1 dev wan0 weight 3 nexthop via 198.51.100.1 dev wan1 weight 1
route add 10.20.0.0/16 via 172.16.0.20 dev dmz0 proto static metric 20
route add blackhole 100.64.0.0/10
route add unreachable 192.0.2.0/24
route add default via 198.51.100.1 dev wan1 table 200
rule add fwmark 7 table 200 pref 100
rule add from 192.168.1.128/25 iif lan0 table 200 pref 110
";

/// The router's state shown after the configuration.
const STATE: &[&str] = &[
    "rule show",
    "nexthop show",
    "route show table all 198.18.0.0/15",
    "route show table 200",
];

/// The lookups the demo answers, each with what it shows.
const LOOKUPS: &[(&str, &str)] = &[
    (
        "route get 192.168.1.20",
        "a host on the LAN: the connected route of lan0, source address chosen from it",
    ),
    (
        "route get 8.8.8.8",
        "an Internet destination: longest match in the full table, then its next hop",
    ),
    (
        "route get fibmatch 8.8.8.8",
        "the same lookup answered with the table entry that matched (fibmatch)",
    ),
    (
        "route get 198.18.7.1",
        "a multipath route: weights 3:1 over both uplinks, one next hop per flow",
    ),
    (
        "route get 198.18.1.1",
        "another flow of the same multipath route, hashed to its own next hop",
    ),
    (
        "route get 203.0.113.77 mark 7",
        "policy routing: fwmark 7 selects table 200, which leaves by wan1",
    ),
    (
        "route get 9.9.9.9 from 192.168.1.200 iif lan0",
        "input lookup (forwarding) for a LAN guest: rule 110 sends it to table 200",
    ),
    (
        "route get 100.64.1.1",
        "a blackhole route: the lookup fails the way the kernel fails it",
    ),
    (
        "route get 2a00:1450:4001::1",
        "an IPv6 Internet destination in the synthetic table",
    ),
];

/// Progress is printed every this many routes while loading.
const PROGRESS_EVERY: usize = 200_000;

/// Lookups timed for the lookups-per-second figure (at most).
const TIMED_LOOKUPS: usize = 1_000_000;

/// The timed lookups stop after this long, so the demo stays short on a slow or busy machine.
const LOOKUP_SECONDS: f64 = 3.0;

/// A small deterministic generator (SplitMix64), so every run builds the same table.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// IPv4 space a public table never carries (and the demo's own networks).
fn v4_reserved(a: u32) -> bool {
    let o = a >> 24;
    o == 0
        || o == 10
        || o == 127
        || o >= 224
        || a >> 22 == (100 << 2 | 1)
        || a >> 16 == (169 << 8 | 254)
        || a >> 20 == (172 << 4 | 1)
        || a >> 16 == (192 << 8 | 168)
        || a >> 17 == (198 << 7 | 9)
        || a >> 8 == (192 << 16 | 2)
        || a >> 8 == (198 << 16 | 51 << 8 | 100)
        || a >> 8 == (203 << 16 | 113)
}

/// A synthetic IPv4 table with `V4_LENGTHS` scaled by `scale`.
fn gen_v4(rng: &mut Rng, scale: f64) -> Vec<(u32, u8)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for &(len, count) in &V4_LENGTHS {
        let want = ((count as f64 * scale).round() as usize).max(1);
        let mask = u32::MAX << (32 - len);
        let mut got = 0;
        while got < want {
            let a = (rng.next() as u32) & mask;
            if !v4_reserved(a) && seen.insert((a, len)) {
                out.push((a, len));
                got += 1;
            }
        }
    }
    out
}

/// A synthetic IPv6 table in 2000::/4 (outside 2001:db8::/32) with `V6_LENGTHS` scaled.
fn gen_v6(rng: &mut Rng, scale: f64) -> Vec<(u128, u8)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for &(len, count) in &V6_LENGTHS {
        let want = ((count as f64 * scale).round() as usize).max(1);
        let mask = u128::MAX << (128 - len);
        let mut got = 0;
        while got < want {
            let hi = (rng.next() as u128) << 64;
            let a = ((hi >> 4) | (0x2u128 << 124)) & mask;
            if a >> 96 != 0x2001_0db8 && seen.insert((a, len)) {
                out.push((a, len));
                got += 1;
            }
        }
    }
    out
}

fn say(out: &mut dyn Write, s: &str) {
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn rate(n: usize, secs: f64) -> String {
    let r = n as f64 / secs.max(1e-9);
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else {
        format!("{:.0}k", r / 1e3)
    }
}

/// Runs one command of the demo, echoing it and its answer.
fn show(cli: &mut Cli, line: &str, out: &mut dyn Write) {
    say(out, &format!("  $ fibre {line}\n"));
    let r = run_line(cli, line);
    let text = String::from_utf8_lossy(&cli.out).into_owned();
    cli.out.clear();
    for l in text.lines() {
        say(out, &format!("    {l}\n"));
    }
    if let Err(e) = r {
        for l in e.message().lines() {
            say(out, &format!("    {l}\n"));
        }
    }
}

/// Loads `chunks` of route commands as `fibre -force -batch` runs them, with progress between
/// chunks; returns (loaded, failed, first error, seconds).
fn load(
    cli: &mut Cli,
    what: &str,
    chunks: &[String],
    out: &mut dyn Write,
) -> (usize, usize, Option<String>, f64) {
    let total: usize = chunks.iter().map(|c| c.lines().count()).sum();
    let force = cli.opts.force;
    cli.opts.force = true;
    let t = Instant::now();
    let (mut done, mut failed, mut first) = (0, 0, None);
    for chunk in chunks {
        let (mut sink, mut errs) = (Vec::new(), Vec::new());
        batch::run_text(cli, what, chunk, &mut sink, &mut errs);
        let errs = String::from_utf8_lossy(&errs);
        let n = errs
            .lines()
            .filter(|l| l.starts_with("Command failed "))
            .count();
        if n > 0 && first.is_none() {
            first = errs.lines().next().map(str::to_string);
        }
        failed += n;
        done += chunk.lines().count();
        if done < total {
            say(
                out,
                &format!(
                    "    {what}: {done}/{total} commands, {:.1} s\n",
                    t.elapsed().as_secs_f64()
                ),
            );
        }
    }
    cli.opts.force = force;
    (done - failed, failed, first, t.elapsed().as_secs_f64())
}

/// `route add` lines for `prefixes`, in chunks of [`PROGRESS_EVERY`] lines.
fn chunks<T>(prefixes: &[T], line: impl Fn(&T, &mut String)) -> Vec<String> {
    prefixes
        .chunks(PROGRESS_EVERY)
        .map(|part| {
            let mut text = String::with_capacity(part.len() * 48);
            for p in part {
                line(p, &mut text);
            }
            text
        })
        .collect()
}

/// `fibre demo [--scale F]`: F (0 < F <= 1) shrinks the synthetic table, for quick runs.
pub fn run(words: &[&str], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let mut scale = 1.0f64;
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match (*w, it.next()) {
            ("--scale", Some(v)) => match v.parse::<f64>() {
                Ok(s) if s > 0.0 && s <= 1.0 => scale = s,
                _ => {
                    let _ = writeln!(
                        err,
                        "fibre demo: --scale takes a number in (0, 1], not \"{v}\""
                    );
                    return 1;
                }
            },
            _ => {
                let _ = writeln!(err, "Usage: fibre demo [ --scale FRACTION ]");
                return 1;
            }
        }
    }
    let mut cli = Cli::new(Fib::default(), Options::default());
    say(out, "fibre demo: an edge router with a full Internet table, built and queried offline with iproute2 commands\n\n");

    say(
        out,
        "1. Router configuration (embedded; the same lines work in `fibre -batch FILE`)\n",
    );
    let mut config_errors = 0;
    for line in CONFIG.lines() {
        match run_line(&mut cli, line) {
            Ok(()) => say(out, &format!("  {line}\n")),
            Err(e) => {
                config_errors += 1;
                say(out, &format!("  {line}\n    ! {}", e.message()));
            }
        }
        cli.out.clear();
    }
    say(out, "  and what the router holds now, as `ip` prints it:\n");
    for cmd in STATE {
        show(&mut cli, cmd, out);
    }
    say(out, "\n");

    say(out, "2. Synthetic Internet table (2026 default-free-zone prefix lengths: IPv4 /8../24, 63% /24; IPv6 /19../48)\n");
    let t = Instant::now();
    let mut rng = Rng(0x6669_6272_6520_6465);
    let v4 = gen_v4(&mut rng, scale);
    let v6 = gen_v6(&mut rng, scale);
    let gw4 = ["via 203.0.113.1 dev wan0", "via 198.51.100.1 dev wan1"];
    let gw6 = ["via 2001:db8:a::1 dev wan0", "via 2001:db8:b::1 dev wan1"];
    let text4 = chunks(&v4, |&(a, l), t| {
        let _ = writeln!(
            t,
            "route add {}/{} {}",
            Ipv4Addr::from(a),
            l,
            gw4[(a >> 8) as usize & 1]
        );
    });
    let text6 = chunks(&v6, |&(a, l), t| {
        let _ = writeln!(
            t,
            "route add {}/{} {}",
            Ipv6Addr::from(a),
            l,
            gw6[(a >> 80) as usize & 1]
        );
    });
    say(
        out,
        &format!(
            "  generated {} IPv4 and {} IPv6 prefixes in {:.1} s\n",
            v4.len(),
            v6.len(),
            t.elapsed().as_secs_f64()
        ),
    );
    let mut total_ok = 0;
    for (what, text) in [("IPv4", &text4), ("IPv6", &text6)] {
        let (ok, failed, first, secs) = load(&mut cli, what, text, out);
        total_ok += ok;
        say(
            out,
            &format!("  {what}: {ok} routes loaded in {secs:.2} s ({} routes/s as `fibre -batch` lines)\n", rate(ok, secs)),
        );
        if failed > 0 {
            say(
                out,
                &format!(
                    "  {what}: {failed} commands failed; the first: {}\n",
                    first.unwrap_or_default()
                ),
            );
        }
    }
    drop(text4);
    drop(text6);
    let routes = cli.fib.routes(None);
    let (n4, n6) = routes.iter().fold((0, 0), |(a, b), r| match r.family {
        Family::Inet => (a + 1, b),
        Family::Inet6 => (a, b + 1),
    });
    say(
        out,
        &format!("  the FIB now holds {n4} IPv4 and {n6} IPv6 routes in all tables\n\n"),
    );

    say(out, "3. Lookups, answered as `ip route get` answers them\n");
    for (cmd, why) in LOOKUPS {
        say(out, &format!("  # {why}\n"));
        show(&mut cli, cmd, out);
    }
    say(out, "\n");

    say(
        out,
        "4. Lookup rate (output lookups of addresses inside the synthetic table's prefixes)\n",
    );
    let mut addrs: Vec<IpAddr> = Vec::with_capacity(TIMED_LOOKUPS);
    for i in 0..TIMED_LOOKUPS {
        let r = rng.next();
        if i % 5 == 4 && !v6.is_empty() {
            let (a, l) = v6[(r as usize) % v6.len()];
            let host = if l == 128 {
                0
            } else {
                (rng.next() as u128) & (u128::MAX >> l)
            };
            addrs.push(IpAddr::V6(Ipv6Addr::from(a | host)));
        } else if !v4.is_empty() {
            let (a, l) = v4[(r as usize) % v4.len()];
            let host = if l == 32 {
                0
            } else {
                (r >> 32) as u32 & (u32::MAX >> l)
            };
            addrs.push(IpAddr::V4(Ipv4Addr::from(a | host)));
        }
    }
    let t = Instant::now();
    let (mut found, mut failed, mut done) = (0usize, 0usize, 0usize);
    let mut next_report = 1.0;
    for a in &addrs {
        let q = RouteQuery::to(*a);
        match cli.fib.route_get(&q) {
            Ok(_) => found += 1,
            Err(_) => failed += 1,
        }
        done += 1;
        // Checking the clock every 1024 lookups keeps its cost out of the figure.
        if done % 1024 == 0 {
            let e = t.elapsed().as_secs_f64();
            if e >= next_report {
                say(out, &format!("    {done} lookups, {e:.1} s\n"));
                next_report += 1.0;
            }
            if e >= LOOKUP_SECONDS {
                break;
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    say(
        out,
        &format!(
            "  {done} lookups (80% IPv4, 20% IPv6) in {secs:.2} s: {} lookups/s on one core, {found} answered, {failed} errors\n",
            rate(done, secs)
        ),
    );
    say(out, "  (`route get` builds a full answer message per lookup; the forwarding path's compiled lookup is faster)\n");
    if config_errors > 0 || total_ok == 0 {
        say(out, "\nSome commands failed: the routing model does not support them yet (see the messages above).\n");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_tables_follow_the_distribution() {
        let mut rng = Rng(1);
        let v4 = gen_v4(&mut rng, 0.01);
        let want: u32 = V4_LENGTHS
            .iter()
            .map(|&(_, c)| ((c as f64 * 0.01).round() as u32).max(1))
            .sum();
        assert_eq!(v4.len() as u32, want);
        assert!(v4.iter().all(|&(a, l)| (8..=24).contains(&l)
            && a & !(u32::MAX << (32 - l)) == 0
            && !v4_reserved(a)));
        let share24 = v4.iter().filter(|p| p.1 == 24).count() as f64 / v4.len() as f64;
        assert!((0.6..0.66).contains(&share24), "share of /24: {share24}");
        let v6 = gen_v6(&mut rng, 0.01);
        assert!(v6
            .iter()
            .all(|&(a, l)| (19..=48).contains(&l) && a >> 124 == 2 && a >> 96 != 0x2001_0db8));
    }

    #[test]
    fn totals_match_the_2026_table() {
        assert_eq!(V4_LENGTHS.iter().map(|p| p.1).sum::<u32>(), 1_168_945);
        assert_eq!(V6_LENGTHS.iter().map(|p| p.1).sum::<u32>(), 279_855);
    }
}
