//! `fibre`, the command-line tool: iproute2's `ip` client side, run in-process against a
//! [`fibre_fib::Fib`].
//!
//! Each object has its module (`link`, `addr`, `route`, `rule`, `nexthop`, `neigh`) that parses
//! the words of a command into the model's rtnetlink-shaped request types with iproute2 6.1's client-side
//! defaults, calls the [`Fib`], and prints the answer as iproute2 6.1 prints it, in text or `-j`
//! JSON ([`out`]). [`batch`] runs command files as `ip -batch` does; [`demo`] is `fibre demo`.
//!
//! Invariants:
//! - A [`Cli`] owns its `Fib`; commands run one after the other, as lines of a batch do.
//! - Output goes to [`Cli::out`], a byte buffer the caller drains (so a million-line batch never
//!   writes per line); error texts are returned in [`CmdError`] and printed by the caller.
//! - Link names are resolved through a cache in front of `Fib::link_index`, dropped whenever a
//!   link command runs, so a batch of route adds never scans the link table.

#![forbid(unsafe_code)]

pub mod addr;
pub mod args;
pub mod batch;
pub mod demo;
pub mod encap;
pub mod error;
pub mod forward;
pub mod ioam;
pub mod link;
pub mod live;
pub mod monitor;
pub mod names;
pub mod neigh;
pub mod nexthop;
pub mod online;
pub mod out;
pub mod pcap;
pub mod route;
pub mod rule;
pub mod save;
pub mod sr;
pub mod sysctl;

use args::matches;
pub use error::CmdError;
use fibre_fib::Family;

/// Link names remembered by [`Cli::ifindex`]; beyond this the oldest is forgotten.
const NAME_CACHE_SIZE: usize = 32;

/// The global options of `ip` that change how commands behave.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `-4`, `-6`, `-f FAMILY`: iproute2's `preferred_family`.
    pub family: Option<Family>,
    /// `-j`
    pub json: bool,
    /// `-p`
    pub pretty: bool,
    /// `-d`, repeatable.
    pub details: u32,
    /// `-s`, repeatable.
    pub stats: u32,
    /// `-force`: go on after a failed batch line.
    pub force: bool,
}

/// One fibre instance driven by command lines.
pub struct Cli {
    pub fib: online::Backend,
    pub opts: Options,
    /// Output not yet written to stdout.
    pub out: Vec<u8>,
    /// Warnings not yet written to stderr (messages of commands that go on).
    pub err: Vec<u8>,
    /// name -> ifindex, filled on demand from `Fib::link_index`; a short list, since a batch
    /// names few links and comparing a few short names beats hashing one.
    name_cache: Vec<(Box<str>, u32)>,
    /// iproute2's global `do_link`, which `ip link show` sets and nothing clears: later
    /// `address show` commands of the same batch print link lines only (iproute2 6.1 quirk).
    pub(crate) sticky_link_show: bool,
    /// Routing tables a route request has named: the kernel creates a table when a route add
    /// reaches it (even one that then fails) and keeps it when emptied, and a `route show
    /// table N` of a table never created fails ("FIB table does not exist"). std's SipHash:
    /// the ids come from the commands being run.
    pub(crate) tables: std::collections::HashSet<(Family, u32)>,
    /// `ip nexthop`'s selector, which persists across a batch's commands in iproute2.
    pub(crate) nh_filter: nexthop::Filter,
    /// Dumps are "strict" (filtered by the kernel, which then fails for a table it does not
    /// have), as `ip` makes them for a single command; `ip -batch` never asks for strict dumps.
    pub strict_dump: bool,
    /// The secret a batch read for its current `sr hmac set` command (the line after it).
    pub(crate) batch_secret: Option<String>,
}

impl Cli {
    pub fn new(fib: impl Into<online::Backend>, opts: Options) -> Cli {
        Cli {
            fib: fib.into(),
            opts,
            out: Vec::new(),
            err: Vec::new(),
            name_cache: Vec::new(),
            sticky_link_show: false,
            tables: Default::default(),
            strict_dump: true,
            nh_filter: Default::default(),
            batch_secret: None,
        }
    }

    /// iproute2's `ll_name_to_index`: a link name, or `ifN` for an unnamed index.
    pub fn ifindex(&mut self, name: &str) -> Option<u32> {
        if let Some((_, i)) = self.name_cache.iter().find(|(n, _)| **n == *name) {
            return Some(*i);
        }
        if let Some(i) = self.fib.link_index(name) {
            if self.name_cache.len() >= NAME_CACHE_SIZE {
                self.name_cache.remove(0);
            }
            self.name_cache.push((name.into(), i));
            return Some(i);
        }
        name.strip_prefix("if")
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&i| i != 0)
    }

    /// Like [`Cli::ifindex`], failing with iproute2's "Cannot find device".
    pub fn dev(&mut self, name: &str) -> Result<u32, CmdError> {
        self.ifindex(name).ok_or_else(|| CmdError::nodev(name))
    }

    /// The ifindex -> name map for printing, from the current links.
    pub fn names(&self) -> Names {
        let mut v: Vec<Option<String>> = Vec::new();
        for l in self.fib.links() {
            let i = l.ifindex as usize;
            if v.len() <= i {
                v.resize(i + 1, None);
            }
            v[i] = l.ifname.clone();
        }
        Names(v)
    }

    /// Drops the link-name caches; called by every command that may change links.
    pub(crate) fn links_changed(&mut self) {
        self.name_cache.clear();
    }

    /// A printer for the current options.
    pub(crate) fn printer(&self) -> out::Printer {
        out::Printer::new(self.opts.json, self.opts.pretty)
    }

    /// Runs one command line (the words after any global options), as `do_cmd` does.
    pub fn exec(&mut self, words: &[&str]) -> Result<(), CmdError> {
        let Some((&obj, rest)) = words.split_first() else {
            return Ok(());
        };
        // iproute2's object table, in its order, so abbreviations resolve the same way.
        const OBJECTS: &[&str] = &[
            "address",
            "addrlabel",
            "maddress",
            "route",
            "rule",
            "neighbor",
            "neighbour",
            "ntable",
            "ntbl",
            "link",
            "l2tp",
            "fou",
            "ila",
            "macsec",
            "tunnel",
            "tuntap",
            "tap",
            "token",
            "tcpmetrics",
            "tcp_metrics",
            "monitor",
            "xfrm",
            "mroute",
            "mrule",
            "netns",
            "netconf",
            "vrf",
            "sr",
            "nexthop",
            "mptcp",
            "ioam",
            "stats",
            "help",
        ];
        if obj == "clock" {
            return clock(self, rest);
        }
        if obj == "sysctl" {
            return sysctl::run(self, rest);
        }
        // "route" is the common case and resolves to itself in the table's order.
        let found = if obj == "route" {
            Some("route")
        } else {
            OBJECTS.iter().find(|o| matches(obj, o)).copied()
        };
        match found {
            Some("address") => addr::run(self, rest),
            Some("route") => route::run(self, rest),
            Some("rule") => rule::run(self, rest),
            Some("link") => link::run(self, rest),
            Some("nexthop") => nexthop::run(self, rest),
            Some("neighbor") | Some("neighbour") => neigh::run(self, rest),
            Some("sr") => sr::run(self, rest),
            Some("ioam") => ioam::run(self, rest),
            Some("help") => Err(CmdError::exit(255, usage_text())),
            Some(o) => Err(CmdError::fail(
                1,
                format!("fibre: object \"{o}\" is not supported.\n"),
            )),
            None => Err(CmdError::fail(
                1,
                format!("Object \"{obj}\" is unknown, try \"ip help\".\n"),
            )),
        }
    }

    /// Appends a finished printer's bytes to the output.
    pub(crate) fn emit(&mut self, p: out::Printer) {
        let bytes = p.finish();
        self.out.extend_from_slice(&bytes);
    }
}

/// fibre's `clock advance SECONDS`: moves the offline clock (expiring routes and next-hop
/// exceptions count time on it) and runs a GC pass. Offline the clock stands still otherwise.
fn clock(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    const USAGE: &str = "Usage: fibre clock advance SECONDS\n";
    let (Some(&"advance"), Some(v), None) = (words.first(), words.get(1), words.get(2)) else {
        return Err(CmdError::usage(USAGE));
    };
    let secs: f64 = v
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s < 1e12)
        .ok_or_else(|| CmdError::invarg("\"advance\" value is invalid\n", v))?;
    cli.fib
        .advance_clock((secs * 1000.0).round() as u64)
        .map(|_| ())
        .map_err(|e| CmdError::rtnl(&e))
}

/// fibre's own usage text.
pub fn usage_text() -> String {
    "Usage: fibre [ OPTIONS ] OBJECT { COMMAND | help }\n       fibre [ -force ] -batch filename\n       fibre demo\n       fibre [ -j ] forward CONFIG --in LINK=FILE.pcap ... --out DIR\n       fibre clock advance SECONDS\n       fibre sysctl [ -q ] [ -w ] KEY=VALUE | KEY\nwhere  OBJECT := { address | link | neigh | nexthop | route | rule }\n       OPTIONS := { -4 | -6 | -f[amily] { inet | inet6 } | -j[son] | -p[retty] |\n                    -d[etails] | -s[tatistics] | -force | -b[atch] filename |\n                    -n SOCKET | -offline }\n"
        .to_string()
}

/// Link names by ifindex, as iproute2's `ll_index_to_name` answers.
#[derive(Debug, Clone, Default)]
pub struct Names(pub Vec<Option<String>>);

impl Names {
    /// "*" for 0, the name, or "ifN" for an unknown index.
    pub fn get(&self, index: u32) -> std::borrow::Cow<'_, str> {
        if index == 0 {
            return "*".into();
        }
        match self.0.get(index as usize) {
            Some(Some(n)) => n.as_str().into(),
            _ => format!("if{index}").into(),
        }
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;

    /// Words commands are made of, valid and not, for random command lines.
    const WORDS: &[&str] = &[
        "route",
        "add",
        "del",
        "show",
        "get",
        "flush",
        "replace",
        "append",
        "prepend",
        "change",
        "rule",
        "nexthop",
        "link",
        "address",
        "via",
        "dev",
        "d0",
        "lo",
        "nope",
        "table",
        "100",
        "main",
        "all",
        "metric",
        "proto",
        "static",
        "scope",
        "link",
        "host",
        "type",
        "blackhole",
        "unicast",
        "local",
        "10.0.0.0/8",
        "10.0.0.1",
        "2001:db8::/32",
        "2001:db8::1",
        "default",
        "0/0",
        "1.2.3.4/33",
        "inet6",
        "inet",
        "nexthop",
        "weight",
        "2",
        "0",
        "257",
        "onlink",
        "mtu",
        "lock",
        "1400",
        "advmss",
        "rtt",
        "1.5s",
        "tos",
        "0x10",
        "from",
        "iif",
        "oif",
        "mark",
        "fibmatch",
        "id",
        "group",
        "1/2,3",
        "1,0",
        "blackhole",
        "pref",
        "high",
        "expires",
        "nhid",
        "src",
        "to",
        "not",
        "fwmark",
        "0x5/0xff",
        "uidrange",
        "1-2",
        "sport",
        "dport",
        "ipproto",
        "tcp",
        "goto",
        "nop",
        "up",
        "down",
        "carrier",
        "on",
        "off",
        "address",
        "02:00:00:00:00:01",
        "brd",
        "+",
        "label",
        "peer",
        "root",
        "match",
        "exact",
        "x",
        "",
        "-1",
        "help",
    ];

    /// Random argument lists never panic the request parsers (the model is not called), and
    /// every failure carries a message that ends a line and one of iproute2's statuses.
    #[test]
    fn random_arguments_fail_cleanly() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as usize
        };
        let mut cli = Cli::new(fibre_fib::Fib::default(), Options::default());
        let (mut ok, mut failed) = (0, 0);
        for i in 0..30_000 {
            let n = next() % 10;
            let words: Vec<&str> = (0..n).map(|_| WORDS[next() % WORDS.len()]).collect();
            let r = match i % 4 {
                0 => route::parse_route(&mut cli, &words, false).map(|_| ()),
                1 => route::parse_route(&mut cli, &words, true).map(|_| ()),
                2 => rule::parse(&mut cli, &words, false).map(|_| ()),
                _ => nexthop::parse(&mut cli, &words).map(|_| ()),
            };
            match r {
                Ok(()) => ok += 1,
                Err(e) => {
                    failed += 1;
                    assert!(e.message().ends_with('\n'), "{words:?}: {e:?}");
                    assert!([1, 2, 255].contains(&e.status()), "{words:?}: {e:?}");
                }
            }
        }
        // The vocabulary makes both outcomes common; a parser that rejects (or accepts)
        // everything would show here.
        assert!(ok > 1000 && failed > 1000, "ok {ok}, failed {failed}");
    }
}
