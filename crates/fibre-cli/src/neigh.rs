//! `ip neigh` (also `neighbour`, `neighbor`): add/change/replace/del/show/flush/get, parsed as
//! iproute2 6.1's `ipneigh_modify`, `do_show_or_flush` and `ipneigh_get`, printed as its
//! `print_neigh`.
//!
//! iproute2 quirks kept on purpose (each checked against `ip` 6.1): a request the kernel
//! rejects ends the program (`exit(2)`), so it also ends a `-batch` even with `-force`;
//! `ip -j neigh get` prints text; `show` without `nud` hides NOARP and NONE entries, while
//! `flush` without `nud` spares PERMANENT and NOARP ones; entries with `extern_learn` pass any
//! `nud` filter; a second `to` prefix replaces the first.

use crate::args::{get_addr, get_prefix, get_u32, matches, Args, Inet};
use crate::names::{proto_a2n, proto_n2a};
use crate::out::Printer;
use crate::{Cli, CmdError, Names};
use fibre_fib::{ntf, nud, Family, Neighbour, ReqFlags};
use std::net::IpAddr;

const USAGE: &str = "Usage: fibre neigh { add | del | change | replace } { ADDR [ lladdr LLADDR ] [ nud STATE ] | proxy ADDR }\n                  [ dev DEV ] [ router ] [ use ] [ extern_learn ] [ protocol PROTO ]\n       fibre neigh { show | flush } [ proxy ] [ to PREFIX ] [ dev DEV ] [ nud STATE ] [ protocol PROTO ]\n       fibre neigh get { ADDR | proxy ADDR } dev DEV\nSTATE := { permanent | noarp | reachable | stale | none | incomplete | delay | probe | failed | all }\n";

/// The state filter bit iproute2 uses for NUD_NONE entries (state 0 cannot be a mask bit).
const FILTER_NONE: u32 = 0x100;
/// Clock ticks per second of `nda_cacheinfo` ages.
const USER_HZ: u32 = 100;
/// iproute2's MAX_ROUNDS for `flush`.
const FLUSH_ROUNDS: u32 = 10;
/// iproute2's `ll_addr_a2n` buffer: the longest link-layer address a command can give.
const LLADDR_MAX: usize = 20;

/// `ip neigh ...`
pub fn run(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let Some((&verb, rest)) = words.split_first() else {
        return show_or_flush(cli, &[], false);
    };
    if matches(verb, "add") {
        return modify(cli, rest, Some(ReqFlags::ADD));
    }
    if matches(verb, "change") || verb == "chg" {
        return modify(cli, rest, Some(ReqFlags::CHANGE));
    }
    if matches(verb, "replace") {
        return modify(cli, rest, Some(ReqFlags::REPLACE));
    }
    if matches(verb, "delete") {
        return modify(cli, rest, None);
    }
    if matches(verb, "get") {
        return get(cli, rest);
    }
    if matches(verb, "show") || matches(verb, "lst") || matches(verb, "list") {
        return show_or_flush(cli, rest, false);
    }
    if matches(verb, "flush") {
        return show_or_flush(cli, rest, true);
    }
    if matches(verb, "help") {
        return Err(CmdError::usage(USAGE));
    }
    Err(CmdError::exit(
        255,
        format!("Command \"{verb}\" is unknown, try \"ip neigh help\".\n"),
    ))
}

/// iproute2's `nud_state_a2n`.
fn nud_a2n(s: &str) -> Option<u16> {
    Some(match s {
        _ if matches(s, "permanent") => nud::PERMANENT,
        _ if matches(s, "reachable") => nud::REACHABLE,
        "noarp" => nud::NOARP,
        "none" => nud::NONE,
        "stale" => nud::STALE,
        "incomplete" => nud::INCOMPLETE,
        "delay" => nud::DELAY,
        "probe" => nud::PROBE,
        _ if matches(s, "failed") => nud::FAILED,
        _ => {
            let v = get_u32(s, 0)?;
            if v >= 0x100 || v & v.wrapping_sub(1) != 0 {
                return None;
            }
            v as u16
        }
    })
}

/// C's `sscanf("%x")` on one component: optional blanks, sign, `0x`, then hex digits; what
/// follows the digits is ignored.
fn scan_hex(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .filter(|r| r.starts_with(|c: char| c.is_ascii_hexdigit()))
        .unwrap_or(t);
    let digits: &str = &t[..t.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(t.len())];
    if digits.is_empty() {
        return None;
    }
    let v = i64::from_str_radix(&digits[..digits.len().min(15)], 16).ok()?;
    Some(if neg { -v } else { v })
}

/// iproute2's `ll_addr_a2n`: colon-separated hex bytes (at most [`LLADDR_MAX`]) or a dotted
/// IPv4 address; the error names the component that failed.
fn ll_addr_a2n(s: &str) -> Result<Vec<u8>, CmdError> {
    let bad = |part: &str| CmdError::fail(1, format!("\"{part}\" is invalid lladdr.\n"));
    if s.contains('.') {
        let a = crate::args::parse_ipv4(s).ok_or_else(|| bad(s))?;
        return Ok(a.octets().to_vec());
    }
    let mut out = Vec::new();
    let mut rest = s;
    while out.len() < LLADDR_MAX {
        let (part, next) = match rest.split_once(':') {
            Some((p, n)) => (p, Some(n)),
            None => (rest, None),
        };
        match scan_hex(part) {
            Some(v) if (0..=255).contains(&v) => out.push(v as u8),
            _ => return Err(bad(part)),
        }
        match next {
            Some(n) => rest = n,
            None => break,
        }
    }
    Ok(out)
}

/// `ip neigh add|change|replace|delete`: `flags` `None` is a delete.
fn modify(cli: &mut Cli, words: &[&str], flags: Option<ReqFlags>) -> Result<(), CmdError> {
    let n = parse(cli, words)?;
    let r = match flags {
        Some(f) => cli.fib.neigh_new(&n, f),
        None => cli.fib.neigh_del(&n),
    };
    // ipneigh_modify exits when the kernel refuses.
    r.map_err(|e| CmdError::exit(2, crate::error::rtnl_text(&e)))
}

/// Parses the words of `ip neigh add|change|replace|delete` into a request.
pub fn parse(cli: &mut Cli, words: &[&str]) -> Result<Neighbour, CmdError> {
    let family = cli.opts.family;
    let mut a = Args::new(words);
    let mut lla: Option<&str> = None;
    let mut state = nud::PERMANENT;
    let mut flags = 0u8;
    let mut protocol = 0u8;
    let mut dst: Option<Inet> = None;
    let mut dev: Option<&str> = None;
    let mut dev_ok = false;
    while let Some(w) = a.peek() {
        if matches(w, "lladdr") {
            let v = a.next_arg()?;
            if lla.is_some() {
                return Err(CmdError::duparg("lladdr", v));
            }
            lla = Some(v);
        } else if w == "nud" {
            let v = a.next_arg()?;
            state = nud_a2n(v).ok_or_else(|| CmdError::invarg("nud state is bad", v))?;
        } else if matches(w, "proxy") {
            let v = a.next_arg()?;
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            if dst.is_some() {
                return Err(CmdError::duparg("address", v));
            }
            dst = Some(get_addr(v, family)?);
            dev_ok = true;
            flags |= ntf::PROXY;
        } else if w == "router" {
            flags |= ntf::ROUTER;
        } else if matches(w, "use") {
            flags |= ntf::USE;
        } else if matches(w, "extern_learn") {
            flags |= ntf::EXT_LEARNED;
        } else if w == "dev" {
            dev = Some(a.next_arg()?);
            dev_ok = true;
        } else if matches(w, "protocol") {
            let v = a.next_arg()?;
            protocol = proto_a2n(v)
                .ok_or_else(|| CmdError::invarg("\"protocol\" value is invalid\n", v))?;
        } else if matches(w, "managed") {
            return Err(CmdError::fail(
                1,
                "fibre: managed neighbours are not supported.\n",
            ));
        } else {
            let mut v = w;
            if v == "to" {
                v = a.next_arg()?;
            }
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            if dst.is_some() {
                return Err(CmdError::duparg2("to", v));
            }
            dst = Some(get_addr(v, family)?);
        }
        a.advance();
    }
    let required = || {
        CmdError::exit(
            255,
            "Device and destination are required arguments.\n".to_string(),
        )
    };
    let Some(Inet {
        addr: Some(addr), ..
    }) = dst
    else {
        return Err(required());
    };
    if !dev_ok {
        return Err(required());
    }
    let lladdr = match lla {
        Some(l) if l != "null" => Some(ll_addr_a2n(l)?),
        _ => None,
    };
    let ifindex = match dev {
        Some(d) => cli.dev(d)?,
        None => 0,
    };
    Ok(Neighbour {
        family: Family::of(&addr),
        ifindex,
        dst: addr,
        lladdr,
        state,
        flags,
        kind: 0,
        protocol,
        confirmed: 0,
        refcnt: 0,
    })
}

/// `ip neigh get { ADDR | proxy ADDR } dev DEV`.
fn get(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let family = cli.opts.family;
    let mut a = Args::new(words);
    let mut dev: Option<&str> = None;
    let mut dst: Option<Inet> = None;
    let mut flags = 0u8;
    while let Some(w) = a.peek() {
        if w == "dev" {
            dev = Some(a.next_arg()?);
        } else if matches(w, "proxy") {
            let v = a.next_arg()?;
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            if dst.is_some() {
                return Err(CmdError::duparg("address", v));
            }
            dst = Some(get_addr(v, family)?);
            flags |= ntf::PROXY;
        } else {
            let mut v = w;
            if v == "to" {
                v = a.next_arg()?;
            }
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            if dst.is_some() {
                return Err(CmdError::duparg2("to", v));
            }
            dst = Some(get_addr(v, family)?);
        }
        a.advance();
    }
    let (
        Some(d),
        Some(Inet {
            addr: Some(addr), ..
        }),
    ) = (dev, dst)
    else {
        return Err(CmdError::fail(
            1,
            "Device and address are required arguments.\n",
        ));
    };
    let ifindex = cli.dev(d)?;
    let mut q = Neighbour::new(addr, ifindex);
    q.state = nud::NONE;
    q.flags = flags;
    let n = cli.fib.neigh_get(&q).map_err(|e| CmdError::rtnl(&e))?;
    let names = cli.names();
    // iproute2 prints the answer without opening a JSON context: text even with -j.
    let mut p = Printer::new(false, false);
    print_neigh(
        &mut p,
        &n,
        &names,
        &Filter::default(),
        cli.opts.stats,
        false,
    );
    cli.emit(p);
    Ok(())
}

/// What `show`/`flush` select, as iproute2's `filter` holds it.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub family: Option<Family>,
    /// NUD_* mask, with [`FILTER_NONE`] for state NONE; 0 = everything (iproute2's reset).
    pub state: u32,
    /// Link index; 0 = every link (and the `dev` column is printed).
    pub index: u32,
    pub prefix: Option<Inet>,
    pub protocol: u8,
}

impl Filter {
    /// Whether `print_neigh` prints (or flushes) `n`.
    fn accepts(&self, n: &Neighbour) -> bool {
        if self.family.is_some_and(|f| f != n.family) {
            return false;
        }
        if self.index != 0 && self.index != n.ifindex {
            return false;
        }
        let state = u32::from(n.state);
        if self.state != 0
            && self.state & state == 0
            && n.flags & (ntf::PROXY | ntf::EXT_LEARNED) == 0
            && (state != 0 || self.state & FILTER_NONE == 0)
        {
            return false;
        }
        if let Some(p) = &self.prefix {
            if let Some(pa) = p.addr.filter(|_| p.len > 0) {
                if Family::of(&pa) != n.family || !prefix_covers(pa, p.len, n.dst) {
                    return false;
                }
            }
        }
        self.protocol == 0 || self.protocol == n.protocol
    }
}

fn prefix_covers(p: IpAddr, len: u8, a: IpAddr) -> bool {
    let (p, a, bits) = match (p, a) {
        (IpAddr::V4(p), IpAddr::V4(a)) => (u32::from(p) as u128, u32::from(a) as u128, 32),
        (IpAddr::V6(p), IpAddr::V6(a)) => (u128::from(p), u128::from(a), 128),
        _ => return false,
    };
    let len = u32::from(len).min(bits);
    if len == 0 {
        return true;
    }
    let shift = bits - len;
    (p >> shift) == (a >> shift)
}

/// `ip neigh show|flush`.
fn show_or_flush(cli: &mut Cli, words: &[&str], flush: bool) -> Result<(), CmdError> {
    let mut f = Filter {
        family: cli.opts.family,
        state: if flush {
            !u32::from(nud::PERMANENT | nud::NOARP)
        } else {
            0xff & !u32::from(nud::NOARP)
        },
        ..Filter::default()
    };
    if flush && words.is_empty() {
        return Err(CmdError::fail(1, "Flush requires arguments.\n"));
    }
    let mut a = Args::new(words);
    let mut dev: Option<&str> = None;
    let mut state_given = false;
    let mut proxy = false;
    while let Some(w) = a.peek() {
        if w == "dev" {
            let v = a.next_arg()?;
            if dev.is_some() {
                return Err(CmdError::duparg("dev", v));
            }
            dev = Some(v);
        } else if w == "vrf" {
            let v = a.next_arg()?;
            return Err(CmdError::invarg("Not a valid VRF name\n", v));
        } else if w == "master" {
            let v = a.next_arg()?;
            return Err(CmdError::invarg("Device does not exist\n", v));
        } else if w == "unused" || w == "nomaster" {
            // fibre keeps no reference counts (every entry is unused) and has no masters.
        } else if w == "nud" {
            let v = a.next_arg()?;
            if !state_given {
                state_given = true;
                f.state = 0;
            }
            let mut s = match nud_a2n(v) {
                Some(s) => u32::from(s),
                None if v == "all" => {
                    if flush {
                        !u32::from(nud::NOARP)
                    } else {
                        !0
                    }
                }
                None => return Err(CmdError::invarg("nud state is bad", v)),
            };
            if s == 0 {
                s = FILTER_NONE;
            }
            f.state |= s;
        } else if w == "proxy" {
            proxy = true;
        } else if matches(w, "protocol") {
            let v = a.next_arg()?;
            f.protocol = proto_a2n(v)
                .ok_or_else(|| CmdError::invarg("\"protocol\" value is invalid\n", v))?;
        } else {
            let mut v = w;
            if v == "to" {
                v = a.next_arg()?;
            }
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            let p = get_prefix(v, f.family)?;
            if f.family.is_none() {
                f.family = p.family;
            }
            f.prefix = Some(p);
        }
        a.advance();
    }
    if let Some(d) = dev {
        f.index = cli.dev(d)?;
    }
    let names = cli.names();
    if flush {
        return do_flush(cli, &mut f, proxy, &names);
    }
    let list = cli.fib.neighbours(f.family, proxy, f.index);
    let mut p = cli.printer();
    for n in list.iter().filter(|n| f.accepts(n)) {
        print_neigh(&mut p, n, &names, &f, cli.opts.stats, false);
    }
    cli.emit(p);
    Ok(())
}

/// iproute2's flush loop: rounds of dump-and-delete until nothing matches.
fn do_flush(cli: &mut Cli, f: &mut Filter, proxy: bool, names: &Names) -> Result<(), CmdError> {
    let stats = cli.opts.stats;
    for round in 0..FLUSH_ROUNDS {
        let doomed: Vec<Neighbour> = cli
            .fib
            .neighbours(f.family, proxy, f.index)
            .into_iter()
            .filter(|n| f.accepts(n))
            .collect();
        if stats >= 2 {
            let mut p = cli.printer();
            for n in &doomed {
                print_neigh(&mut p, n, names, f, stats, false);
            }
            cli.emit(p);
        }
        if doomed.is_empty() {
            if stats > 0 {
                let msg = if round == 0 {
                    "Nothing to flush.\n".to_string()
                } else {
                    format!(
                        "*** Flush is complete after {round} round{} ***\n",
                        if round > 1 { "s" } else { "" }
                    )
                };
                cli.out.extend_from_slice(msg.as_bytes());
            }
            return Ok(());
        }
        // The deletes go out without acknowledgements; failures are not reported.
        for n in &doomed {
            let _ = cli.fib.neigh_del(n);
        }
        if stats > 0 {
            let msg = format!(
                "\n*** Round {}, deleting {} entries ***\n",
                round + 1,
                doomed.len()
            );
            cli.out.extend_from_slice(msg.as_bytes());
        }
        f.state &= !u32::from(nud::FAILED);
    }
    cli.out.extend_from_slice(
        format!("*** Flush not complete bailing out after {FLUSH_ROUNDS} rounds\n").as_bytes(),
    );
    Err(CmdError::fail(1, ""))
}

/// iproute2's `print_neigh_state`.
fn print_state(p: &mut Printer, state: u16) {
    p.open_arr(Some("state"));
    const NAMES: [(u16, &str); 8] = [
        (nud::INCOMPLETE, "INCOMPLETE"),
        (nud::REACHABLE, "REACHABLE"),
        (nud::STALE, "STALE"),
        (nud::DELAY, "DELAY"),
        (nud::PROBE, "PROBE"),
        (nud::FAILED, "FAILED"),
        (nud::NOARP, "NOARP"),
        (nud::PERMANENT, "PERMANENT"),
    ];
    let mut rest = state;
    for (bit, name) in NAMES {
        if rest & bit != 0 {
            rest &= !bit;
            p.str(None, "", name, " ");
        }
    }
    if rest != 0 {
        p.str(None, "", &format!("{rest:x}"), " ");
    }
    p.close_arr();
}

fn mac(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 3);
    for (i, x) in b.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// iproute2's `print_neigh` for one entry; `deleted` prints an RTM_DELNEIGH.
pub fn print_neigh(
    p: &mut Printer,
    n: &Neighbour,
    names: &Names,
    f: &Filter,
    stats: u32,
    deleted: bool,
) {
    p.open_obj(None);
    if deleted {
        p.boolean("deleted", "Deleted ", true);
    }
    p.str(Some("dst"), "", &n.dst.to_string(), " ");
    if f.index == 0 && n.ifindex != 0 {
        p.str(Some("dev"), "dev ", &names.get(n.ifindex), " ");
    }
    if let Some(l) = &n.lladdr {
        p.str(Some("lladdr"), "lladdr ", &mac(l), " ");
    }
    if n.flags & ntf::ROUTER != 0 {
        p.null("router", "router ");
    }
    if n.flags & ntf::PROXY != 0 {
        p.null("proxy", "proxy ");
    }
    if n.flags & ntf::EXT_LEARNED != 0 {
        p.null("extern_learn", "extern_learn ");
    }
    if n.flags & ntf::OFFLOADED != 0 {
        p.null("offload", "offload ");
    }
    if stats > 0 && !n.is_proxy() {
        // iproute2's print_cacheinfo, ages in seconds (USER_HZ ticks / 100).
        if n.refcnt != 0 {
            p.num(Some("refcnt"), " ref ", n.refcnt.into(), "");
        }
        p.num(Some("used"), " used ", 0, "");
        p.num(Some("confirmed"), "/", (n.confirmed / USER_HZ).into(), "");
        p.num(Some("updated"), "/", 0, "");
        p.num(Some("probes"), "probes ", 0, " ");
    }
    if n.state != 0 {
        print_state(p, n.state);
    }
    if n.protocol != 0 {
        p.str(Some("protocol"), "proto ", &proto_n2a(n.protocol), " ");
    }
    p.text("\n");
    p.close_obj();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lladdr_parses_as_iproute2_does() {
        assert_eq!(
            ll_addr_a2n("02:00:00:00:00:0a").unwrap(),
            [2, 0, 0, 0, 0, 10]
        );
        assert_eq!(ll_addr_a2n("0x1g:2:3:4:5:6").unwrap(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(ll_addr_a2n("1.2.3.4").unwrap(), [1, 2, 3, 4]);
        assert_eq!(
            ll_addr_a2n("02:300:00").unwrap_err().message(),
            "\"300\" is invalid lladdr.\n"
        );
        assert_eq!(
            ll_addr_a2n("zz").unwrap_err().message(),
            "\"zz\" is invalid lladdr.\n"
        );
    }

    /// Random word lists never panic the parser, and every failure is a whole line with one
    /// of iproute2's statuses.
    #[test]
    fn random_arguments_fail_cleanly() {
        const WORDS: &[&str] = &[
            "lladdr",
            "02:00:00:00:00:01",
            "zz",
            "null",
            "1.2.3.4",
            "nud",
            "permanent",
            "stale",
            "0x4",
            "3",
            "all",
            "proxy",
            "router",
            "use",
            "extern_learn",
            "dev",
            "d0",
            "nope",
            "protocol",
            "static",
            "to",
            "10.0.0.1",
            "2001:db8::1",
            "default",
            "help",
            "",
            "-1",
        ];
        let mut fib = fibre_fib::Fib::default();
        let d0 = fibre_fib::Link {
            ifname: Some("d0".into()),
            kind: Some(fibre_fib::LinkKind::Dummy),
            ..fibre_fib::Link::default()
        };
        fib.link_new(&d0, ReqFlags::ADD).unwrap();
        let mut cli = Cli::new(fib, crate::Options::default());
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let (mut ok, mut failed) = (0, 0);
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let n = (state % 8) as usize;
            // Half the lines start valid, so that the words after them are parsed too.
            let mut words: Vec<&str> = if state & 1 == 0 {
                vec!["10.0.0.1", "dev", "d0"]
            } else {
                Vec::new()
            };
            words.extend(
                (0..n).map(|i| WORDS[((state >> (8 + 6 * i)) % WORDS.len() as u64) as usize]),
            );
            match parse(&mut cli, &words) {
                Ok(_) => ok += 1,
                Err(e) => {
                    failed += 1;
                    assert!(e.message().ends_with('\n'), "{words:?}: {e:?}");
                    assert!([1, 2, 255].contains(&e.status()), "{words:?}: {e:?}");
                }
            }
        }
        assert!(ok > 100 && failed > 1000, "ok {ok}, failed {failed}");
    }

    #[test]
    fn nud_words_and_numbers() {
        assert_eq!(nud_a2n("perm"), Some(nud::PERMANENT));
        assert_eq!(nud_a2n("0x4"), Some(nud::STALE));
        assert_eq!(nud_a2n("3"), None);
        assert_eq!(nud_a2n("0"), Some(nud::NONE));
    }

    #[test]
    fn filter_passes_extern_learn_and_none_only_when_asked() {
        let mut n = Neighbour::new("10.0.0.1".parse().unwrap(), 2);
        n.state = nud::NONE;
        let show = Filter {
            state: 0xff & !u32::from(nud::NOARP),
            ..Filter::default()
        };
        assert!(!show.accepts(&n));
        let none = Filter {
            state: FILTER_NONE,
            ..Filter::default()
        };
        assert!(none.accepts(&n));
        n.state = nud::NOARP;
        assert!(!show.accepts(&n));
        n.flags = ntf::EXT_LEARNED;
        assert!(show.accepts(&n));
    }
}
