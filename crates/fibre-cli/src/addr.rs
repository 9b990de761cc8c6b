//! `ip address`: add/change/replace/del, show/list, flush; and the link printer that
//! `ip link show` shares with it (iproute2's `print_linkinfo` and `print_addrinfo`).

use crate::args::{get_addr, get_prefix, get_u32, matches, Args, Inet};
use crate::names::scope_a2n;
use crate::out::Printer;
use crate::route::scope_name;
use crate::{Cli, CmdError};
use fibre_fib::{ifa_flags, iff, Address, Family, Link, LinkKind, LinkStats, ReqFlags};
use std::net::{IpAddr, Ipv4Addr};

const USAGE: &str = "Usage: fibre address { add | change | replace } IFADDR dev IFNAME [ LIFETIME ] [ CONFFLAG-LIST ]\n       fibre address del IFADDR dev IFNAME\n       fibre address { show | flush } [ dev IFNAME ] [ scope SCOPE-ID ] [ to PREFIX ] [ label LABEL ] [ up ]\nIFADDR := PREFIX [ peer PREFIX ] [ broadcast ADDR ] [ label IFNAME ] [ scope SCOPE-ID ] [ metric METRIC ]\nCONFFLAG := [ home | nodad | mngtmpaddr | noprefixroute | autojoin ]\nLIFETIME := [ valid_lft LFT ] [ preferred_lft LFT ]\n";

/// `valid_lft`/`preferred_lft` "forever" (INFINITY_LIFE_TIME).
const FOREVER: u32 = u32::MAX;

/// `ip address ...`
pub fn run(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let Some((&verb, rest)) = words.split_first() else {
        return list(cli, &[], false, false);
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
    if matches(verb, "list") || matches(verb, "show") || matches(verb, "lst") {
        return list(cli, rest, false, false);
    }
    if matches(verb, "flush") {
        return list(cli, rest, false, true);
    }
    if matches(verb, "help") {
        return Err(CmdError::usage(USAGE));
    }
    Err(CmdError::exit(
        255,
        format!("Command \"{verb}\" is unknown, try \"ip address help\".\n"),
    ))
}

/// An address flag word and its IFA_F_* bit (iproute2's `ifa_flag_data`, settable ones).
const SETTABLE_FLAGS: &[(&str, u32)] = &[
    ("home", ifa_flags::HOMEADDRESS),
    ("nodad", ifa_flags::NODAD),
    ("optimistic", ifa_flags::OPTIMISTIC),
    ("mngtmpaddr", ifa_flags::MANAGETEMPADDR),
    ("noprefixroute", ifa_flags::NOPREFIXROUTE),
    ("autojoin", ifa_flags::MCAUTOJOIN),
];

fn lifetime(s: &str) -> Option<u32> {
    if s == "forever" {
        Some(FOREVER)
    } else {
        get_u32(s, 0)
    }
}

/// iproute2's `ipaddr_modify`; `flags` is `None` for a delete.
fn modify(cli: &mut Cli, words: &[&str], flags: Option<ReqFlags>) -> Result<(), CmdError> {
    let del = flags.is_none();
    let mut family = cli.opts.family;
    let mut local: Option<Inet> = None;
    let mut local_arg = "";
    let mut peer: Option<Inet> = None;
    let mut brd: Option<IpAddr> = None;
    let mut brd_auto: Option<bool> = None;
    let mut label: Option<&str> = None;
    let mut metric = None;
    let mut scope: Option<u8> = None;
    let mut dev: Option<&str> = None;
    let mut fl = 0u32;
    let (mut valid, mut preferred) = (None, None);
    let mut a = Args::new(words);
    while let Some(w) = a.peek() {
        if w == "peer" || w == "remote" {
            let v = a.next_arg()?;
            if peer.is_some() {
                return Err(CmdError::duparg("peer", v));
            }
            let p = get_prefix(v, family)?;
            family = family.or(p.family);
            peer = Some(p);
        } else if matches(w, "broadcast") || w == "brd" {
            let v = a.next_arg()?;
            if brd.is_some() || brd_auto.is_some() {
                return Err(CmdError::duparg("broadcast", v));
            }
            match v {
                "+" => brd_auto = Some(true),
                "-" => brd_auto = Some(false),
                _ => {
                    let ad = get_addr(v, family)?;
                    family = family.or(ad.family);
                    brd = ad.addr;
                }
            }
        } else if w == "valid_lft" {
            let v = a.next_arg()?;
            if valid.is_some() {
                return Err(CmdError::duparg("valid_lft", w));
            }
            valid = Some(lifetime(v).ok_or_else(|| CmdError::invarg("valid_lft value", v))?);
        } else if w == "preferred_lft" {
            let v = a.next_arg()?;
            if preferred.is_some() {
                return Err(CmdError::duparg("preferred_lft", w));
            }
            preferred =
                Some(lifetime(v).ok_or_else(|| CmdError::invarg("preferred_lft value", v))?);
        } else if w == "label" {
            label = Some(a.next_arg()?);
        } else if matches(w, "metric") || matches(w, "priority") || matches(w, "preference") {
            let v = a.next_arg()?;
            metric = Some(
                get_u32(v, 0)
                    .ok_or_else(|| CmdError::invarg("\"metric\" value is invalid\n", v))?,
            );
        } else if matches(w, "scope") {
            let v = a.next_arg()?;
            scope = Some(scope_a2n(v).ok_or_else(|| CmdError::invarg("invalid scope value.", v))?);
        } else if w == "dev" {
            dev = Some(a.next_arg()?);
        } else if let Some((_, bit)) = SETTABLE_FLAGS.iter().find(|(n, _)| *n == w) {
            fl |= bit;
        } else {
            let mut v = w;
            if v == "local" {
                v = a.next_arg()?;
            }
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            if local.is_some() {
                return Err(CmdError::duparg2("local", v));
            }
            let p = get_prefix(v, family)?;
            family = family.or(p.family);
            local = Some(p);
            local_arg = v;
        }
        a.advance();
    }
    let Some(d) = dev else {
        return Err(CmdError::fail(
            1,
            "Not enough information: \"dev\" argument is required.\n",
        ));
    };
    let family = family.unwrap_or(Family::Inet);
    let mut warning = String::new();
    let mut address = peer.and_then(|p| p.addr);
    let mut prefixlen = peer.map_or(0, |p| p.len);
    if peer.is_none() {
        if let Some(l) = &local {
            if del && l.family == Some(Family::Inet) && !l.len_given {
                warning = format!(
                    "Warning: Executing wildcard deletion to stay compatible with old scripts.\n         Explicitly specify the prefix length ({}/{}) to avoid this warning.\n         This special behaviour is likely to disappear in further releases,\n         fix your scripts!\n",
                    local_arg,
                    l.bytelen() * 8
                );
            } else {
                address = l.addr;
            }
        }
    }
    if prefixlen == 0 {
        prefixlen = local.map_or(0, |l| l.len);
    }
    if let (Some(auto), false) = (brd_auto, del) {
        if family != Family::Inet {
            return Err(CmdError::fail(
                1,
                "Broadcast can be set only for IPv4 addresses\n",
            ));
        }
        let base = peer.or(local);
        if let Some(IpAddr::V4(b)) = base.and_then(|p| p.addr) {
            let len = base.map_or(32, |p| p.len);
            if len <= 30 {
                let host = if len == 0 { u32::MAX } else { u32::MAX >> len };
                let v = u32::from(b);
                brd = Some(IpAddr::V4(Ipv4Addr::from(if auto {
                    v | host
                } else {
                    v & !host
                })));
            }
        }
    }
    let scope = match scope {
        Some(s) => s,
        None if !del => match local.and_then(|l| l.addr) {
            Some(IpAddr::V4(v)) if v.octets()[0] == 127 => fibre_fib::scope::HOST,
            _ => 0,
        },
        None => 0,
    };
    if valid.is_some() || preferred.is_some() {
        // iproute2 checks the lifetimes itself before asking the kernel.
        let (v, p) = (valid.unwrap_or(FOREVER), preferred.unwrap_or(FOREVER));
        if v == 0 {
            return Err(CmdError::fail(1, "valid_lft is zero\n"));
        }
        if v < p {
            return Err(CmdError::fail(
                1,
                "preferred_lft is greater than valid_lft\n",
            ));
        }
    }
    let ifindex = cli.dev(d)?;
    let req = Address {
        family,
        prefixlen,
        flags: fl,
        scope,
        ifindex,
        local: local.and_then(|l| l.addr),
        address,
        broadcast: brd,
        label: label.map(str::to_string),
        metric,
        valid_lft: valid.or(preferred.map(|_| FOREVER)),
        preferred_lft: preferred.or(valid),
    };
    if !warning.is_empty() {
        // iproute2 prints the warning and carries on.
        cli.err.extend_from_slice(warning.as_bytes());
    }
    let r = match flags {
        Some(f) => cli.fib.addr_new(&req, f),
        None => cli.fib.addr_del(&req),
    };
    r.map_err(|e| CmdError::rtnl(&e))
}

/// The selector of `ip address show|flush` and `ip link show`.
#[derive(Default)]
struct Sel<'a> {
    dev: Option<&'a str>,
    up: bool,
    scope: Option<u8>,
    to: Option<Inet>,
    label: Option<&'a str>,
}

/// `ip address show|flush` (`link_only` for `ip link show`).
pub fn list(cli: &mut Cli, words: &[&str], link_only: bool, flush: bool) -> Result<(), CmdError> {
    if flush && words.is_empty() {
        return Err(CmdError::fail(1, "Flush requires arguments.\n"));
    }
    if link_only {
        cli.sticky_link_show = true;
    }
    let link_only = link_only || cli.sticky_link_show;
    let mut sel = Sel::default();
    let mut a = Args::new(words);
    while let Some(w) = a.peek() {
        if w == "to" {
            let v = a.next_arg()?;
            sel.to = Some(get_prefix(v, cli.opts.family)?);
        } else if w == "scope" {
            let v = a.next_arg()?;
            sel.scope = match scope_a2n(v) {
                Some(s) => Some(s),
                None if v == "all" => None,
                None => return Err(CmdError::invarg("invalid \"scope\"\n", v)),
            };
        } else if w == "up" {
            sel.up = true;
        } else if w == "label" {
            sel.label = Some(a.next_arg()?);
        } else {
            let mut v = w;
            if v == "dev" {
                v = a.next_arg()?;
            } else if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            if sel.dev.is_some() {
                return Err(CmdError::duparg2("dev", v));
            }
            sel.dev = Some(v);
        }
        a.advance();
    }
    let only = match sel.dev {
        Some(d) => match cli.ifindex(d) {
            Some(i) => Some(i),
            None => {
                return Err(CmdError::fail(
                    1,
                    format!("Device \"{d}\" does not exist.\n"),
                ))
            }
        },
        None => None,
    };
    let family = cli.opts.family;
    let links: Vec<Link> = cli
        .fib
        .links()
        .into_iter()
        .filter(|l| only.is_none_or(|i| l.ifindex == i))
        .filter(|l| !sel.up || l.flags & iff::UP != 0)
        .collect();
    let addrs: Vec<Address> = if link_only {
        Vec::new()
    } else {
        cli.fib.addrs(family)
    };
    let addr_ok = |ad: &Address| {
        family.is_none_or(|f| f == ad.family)
            && sel.scope.is_none_or(|s| s == ad.scope)
            && sel
                .label
                .is_none_or(|l| ad.label.as_deref().is_some_and(|al| fnmatch(l, al)))
            && sel
                .to
                .is_none_or(|t| match (t.addr, ad.local.or(ad.address)) {
                    (Some(ta), Some(aa)) => {
                        Family::of(&ta) == Family::of(&aa) && same_prefix(ta, aa, t.len)
                    }
                    (None, _) => true,
                    _ => false,
                })
    };
    if flush {
        for ad in addrs
            .iter()
            .filter(|ad| only.is_none_or(|i| ad.ifindex == i) && addr_ok(ad))
        {
            let _ = cli.fib.addr_del(ad);
        }
        return Ok(());
    }
    let filtering =
        family.is_some() || sel.scope.is_some() || sel.to.is_some() || sel.label.is_some();
    let details = cli.opts.details > 0;
    let mut p = cli.printer();
    for l in &links {
        let mine: Vec<&Address> = addrs
            .iter()
            .filter(|ad| ad.ifindex == l.ifindex && addr_ok(ad))
            .collect();
        if !link_only && filtering && mine.is_empty() {
            continue;
        }
        p.open_obj(None);
        // iproute2 leaves the link out when selecting by label.
        if sel.label.is_none() || link_only {
            print_link(
                &mut p,
                l,
                link_only,
                !link_only && family.is_some(),
                details,
            );
            if let (true, Some(st)) = (cli.opts.stats > 0, &l.stats) {
                print_stats(&mut p, st, l.punt.as_ref());
            }
        }
        if !link_only {
            p.open_arr(Some("addr_info"));
            let name = l.ifname.clone().unwrap_or_default();
            for ad in mine {
                print_addr(&mut p, ad, &name);
            }
            p.close_arr();
        }
        p.close_obj();
    }
    cli.emit(p);
    Ok(())
}

/// `fnmatch(pattern, s, 0)` for the `*` and `?` wildcards `ip address show label` takes.
fn fnmatch(pattern: &str, s: &str) -> bool {
    let (p, s) = (pattern.as_bytes(), s.as_bytes());
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

fn same_prefix(a: IpAddr, b: IpAddr, len: u8) -> bool {
    let (x, y): (u128, u128) = match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            ((u32::from(a) as u128) << 96, (u32::from(b) as u128) << 96)
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
        _ => return false,
    };
    len == 0 || (x ^ y) >> (128 - len as u32) == 0
}

/// iproute2's link flag words, in its order (`print_link_flags`).
const LINK_FLAGS: &[(u32, &str)] = &[
    (0x8, "LOOPBACK"),
    (0x2, "BROADCAST"),
    (0x10, "POINTOPOINT"),
    (0x1000, "MULTICAST"),
    (0x80, "NOARP"),
    (0x200, "ALLMULTI"),
    (0x100, "PROMISC"),
    (0x400, "MASTER"),
    (0x800, "SLAVE"),
    (0x4, "DEBUG"),
    (0x8000, "DYNAMIC"),
    (0x4000, "AUTOMEDIA"),
    (0x2000, "PORTSEL"),
    (0x20, "NOTRAILERS"),
    (0x1, "UP"),
    (0x10000, "LOWER_UP"),
    (0x20000, "DORMANT"),
    (0x40000, "ECHO"),
];

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

/// iproute2's `print_linkinfo` for a dummy, loopback or port link. `mode` prints "mode
/// DEFAULT" (as `ip link` does); `no_l2` leaves out the link/ether line (as `ip -4 address`
/// does); `details` (`-d`) adds a port's binding as IFLA_LINKINFO's kind and data.
pub fn print_link(p: &mut Printer, l: &Link, mode: bool, no_l2: bool, details: bool) {
    let name = l.ifname.as_deref().unwrap_or("");
    p.num(Some("ifindex"), "", l.ifindex as i64, ": ");
    p.str(Some("ifname"), "", name, ": ");
    let mut flags = l.flags;
    p.open_arr(Some("flags"));
    p.text("<");
    if flags & iff::UP != 0 && flags & iff::RUNNING == 0 {
        p.str(None, "", "NO-CARRIER", if flags != 0 { "," } else { "" });
    }
    flags &= !iff::RUNNING;
    for (bit, word) in LINK_FLAGS {
        if flags & bit != 0 {
            flags &= !bit;
            p.str(None, "", word, if flags != 0 { "," } else { "" });
        }
    }
    if flags != 0 {
        p.str(None, "", &format!("{flags:x}"), "");
    }
    p.close_arr();
    p.text("> ");
    p.num(Some("mtu"), "mtu ", l.mtu.unwrap_or(0) as i64, " ");
    let up = l.flags & iff::UP != 0;
    p.str(
        Some("qdisc"),
        "qdisc ",
        if up { "noqueue" } else { "noop" },
        " ",
    );
    let state = if l.operstate() == fibre_fib::types::oper::DOWN {
        "DOWN"
    } else {
        "UNKNOWN"
    };
    p.str(Some("operstate"), "state ", state, " ");
    if mode {
        p.str(Some("linkmode"), "mode ", "DEFAULT", " ");
    }
    p.str(Some("group"), "group ", "default", " ");
    p.num(Some("txqlen"), "qlen ", l.txqlen.unwrap_or(1000) as i64, "");
    if !no_l2 {
        let lo = l.kind == Some(LinkKind::Loopback);
        p.str(
            Some("link_type"),
            "\n    link/",
            if lo { "loopback" } else { "ether" },
            " ",
        );
        let addr = l.address.clone().unwrap_or_else(|| vec![0; 6]);
        p.str(Some("address"), "", &mac(&addr), "");
        let brd = if lo {
            vec![0u8; addr.len()]
        } else {
            vec![0xffu8; addr.len()]
        };
        p.str(Some("broadcast"), " brd ", &mac(&brd), "");
    }
    if let (true, Some(LinkKind::Port(port))) = (details, &l.kind) {
        p.open_obj(Some("linkinfo"));
        p.str(
            Some("info_kind"),
            "\n    ",
            fibre_netlink::link::PORT_KIND,
            " ",
        );
        p.open_obj(Some("info_data"));
        p.str(Some("dev"), "dev ", &port.dev, " ");
        p.str(Some("io"), "io ", port.io.name(), " ");
        if let Some(t) = &port.punt {
            p.str(Some("punt"), "punt ", t, " ");
        }
        p.close_obj();
        p.close_obj();
    }
    p.text("\n");
}

/// iproute2's `print_link_stats` for the counters fibre keeps (the error counters it does
/// not keep are 0): RX and TX lines, or `stats64` in JSON.
pub fn print_stats(p: &mut Printer, s: &LinkStats, punt: Option<&fibre_fib::PuntStats>) {
    p.open_obj(Some("stats64"));
    /// The JSON key, the title line and the counters (JSON key, value) of one direction.
    type Row<'a> = (&'a str, &'a str, [(&'a str, u64); 6]);
    let rows: [Row<'_>; 2] = [
        (
            "rx",
            "    RX:  bytes packets errors dropped  missed   mcast\n",
            [
                ("bytes", s.rx_bytes),
                ("packets", s.rx_packets),
                ("errors", s.rx_errors),
                ("dropped", s.rx_dropped),
                ("missed", 0),
                ("multicast", s.multicast),
            ],
        ),
        (
            "tx",
            "    TX:  bytes packets errors dropped carrier collsns\n",
            [
                ("bytes", s.tx_bytes),
                ("packets", s.tx_packets),
                ("errors", s.tx_errors),
                ("dropped", s.tx_dropped),
                ("carrier_errors", 0),
                ("collisions", 0),
            ],
        ),
    ];
    for (key, title, values) in rows {
        p.open_obj(Some(key));
        p.text(title);
        p.text("    ");
        for (i, (name, v)) in values.iter().enumerate() {
            // Right-aligned under the titles.
            let width: usize = if i == 0 { 10 } else { 7 };
            let digits = v.to_string().len();
            p.text(&" ".repeat(width.saturating_sub(digits)));
            p.num(Some(name), "", *v as i64, " ");
        }
        p.text("\n");
        p.close_obj();
    }
    if let Some(c) = punt {
        // fibre's own line, in the RX and TX lines' manner: the port's punt path.
        p.open_obj(Some("punt"));
        p.text("    punt: to host from host dropped\n    ");
        // Right-aligned under the titles.
        for (name, v, width) in [
            ("to_host", c.to_host, 13),
            ("from_host", c.from_host, 9),
            ("dropped", c.dropped, 7),
        ] {
            let digits = v.to_string().len();
            p.text(&" ".repeat(width - digits.min(width)));
            p.num(Some(name), "", v as i64, " ");
        }
        p.text("\n");
        p.close_obj();
    }
    p.close_obj();
}

/// iproute2's address flag words, in its order (`ifa_flag_names`).
const ADDR_FLAGS: &[(u32, &str)] = &[
    (ifa_flags::SECONDARY, "secondary"),
    (ifa_flags::NODAD, "nodad"),
    (ifa_flags::OPTIMISTIC, "optimistic"),
    (ifa_flags::DADFAILED, "dadfailed"),
    (ifa_flags::HOMEADDRESS, "home"),
    (ifa_flags::DEPRECATED, "deprecated"),
    (ifa_flags::TENTATIVE, "tentative"),
    (ifa_flags::PERMANENT, "permanent"),
    (ifa_flags::MANAGETEMPADDR, "mngtmpaddr"),
    (ifa_flags::NOPREFIXROUTE, "noprefixroute"),
    (ifa_flags::MCAUTOJOIN, "autojoin"),
    (ifa_flags::STABLE_PRIVACY, "stable-privacy"),
];

/// iproute2's `print_addrinfo`.
pub fn print_addr(p: &mut Printer, ad: &Address, devname: &str) {
    p.open_obj(None);
    let fam = if ad.family == Family::Inet {
        "inet"
    } else {
        "inet6"
    };
    p.jstr(Some("family"), fam);
    p.text("    ");
    p.text(fam);
    p.text(" ");
    let local = ad.local.or(ad.address);
    p.str(
        Some("local"),
        "",
        &local.map(|a| a.to_string()).unwrap_or_default(),
        "",
    );
    if let (Some(peer), Some(l)) = (ad.address, ad.local) {
        if peer != l {
            p.text(" peer ");
            p.str(Some("address"), "", &peer.to_string(), "");
        }
    }
    p.num(Some("prefixlen"), "/", ad.prefixlen as i64, " ");
    if let Some(b) = ad.broadcast {
        p.str(Some("broadcast"), "brd ", &b.to_string(), " ");
    }
    if let Some(m) = ad.metric {
        p.num(Some("metric"), "metric ", m as i64, " ");
    }
    p.str(Some("scope"), "scope ", &scope_name(ad.scope), " ");
    let mut flags = ad.flags;
    for (bit, word) in ADDR_FLAGS {
        if *bit == ifa_flags::PERMANENT {
            if flags & bit == 0 {
                p.boolean("dynamic", "dynamic ", true);
            }
        } else if flags & bit != 0 {
            if *bit == ifa_flags::SECONDARY && ad.family == Family::Inet6 {
                p.boolean("temporary", "temporary ", true);
            } else {
                p.boolean(word, &format!("{word} "), true);
            }
        }
        flags &= !bit;
    }
    if flags != 0 {
        p.str(Some("ifa_flags"), "flags ", &format!("{flags:02x}"), " ");
    }
    if ad.family == Family::Inet {
        p.str(
            Some("label"),
            "",
            ad.label.as_deref().unwrap_or(devname),
            "",
        );
    }
    let valid = ad.valid_lft.unwrap_or(FOREVER);
    let preferred = ad.preferred_lft.unwrap_or(FOREVER);
    p.jnum(Some("valid_life_time"), valid as i64);
    p.jnum(Some("preferred_life_time"), preferred as i64);
    let lft = |v: u32| {
        if v == FOREVER {
            "forever".to_string()
        } else {
            format!("{v}sec")
        }
    };
    p.text(&format!(
        "\n       valid_lft {} preferred_lft {}\n",
        lft(valid),
        lft(preferred)
    ));
    p.close_obj();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d0() -> Link {
        Link {
            ifindex: 2,
            ifname: Some("d0".into()),
            kind: Some(LinkKind::Dummy),
            flags: iff::BROADCAST | iff::NOARP | iff::UP | iff::RUNNING | iff::LOWER_UP,
            mtu: Some(1500),
            address: Some(vec![0x72, 0x8a, 0xe5, 0xdc, 0x6a, 0x83]),
            txqlen: Some(1000),
            ..Link::default()
        }
    }

    #[test]
    fn label_patterns_match_like_fnmatch() {
        assert!(fnmatch("d0", "d0"));
        assert!(fnmatch("d0:*", "d0:x"));
        assert!(fnmatch("*", ""));
        assert!(fnmatch("d?:x", "d0:x"));
        assert!(!fnmatch("d0", "d0:x"));
        assert!(!fnmatch("d1*", "d0:x"));
    }

    #[test]
    fn link_prints_like_iproute2() {
        // A dummy link as `ip link show` prints it (iproute2 6.1).
        let mut p = Printer::new(false, false);
        print_link(&mut p, &d0(), true, false, false);
        assert_eq!(
            String::from_utf8(p.finish()).unwrap(),
            "2: d0: <BROADCAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\n    link/ether 72:8a:e5:dc:6a:83 brd ff:ff:ff:ff:ff:ff\n"
        );
        let mut l = d0();
        l.flags &= !(iff::RUNNING | iff::LOWER_UP);
        let mut p = Printer::new(false, false);
        print_link(&mut p, &l, false, true, false);
        assert_eq!(
            String::from_utf8(p.finish()).unwrap(),
            "2: d0: <NO-CARRIER,BROADCAST,NOARP,UP> mtu 1500 qdisc noqueue state DOWN group default qlen 1000\n"
        );
    }

    #[test]
    fn a_ports_punt_counters_print_under_its_titles() {
        let s = LinkStats::default();
        let punt = fibre_fib::PuntStats {
            to_host: 12,
            from_host: 3456,
            dropped: 0,
        };
        let mut p = Printer::new(false, false);
        print_stats(&mut p, &s, Some(&punt));
        let text = String::from_utf8(p.finish()).unwrap();
        let lines: Vec<&str> = text.lines().skip(4).collect();
        assert_eq!(
            lines,
            [
                "    punt: to host from host dropped",
                "               12      3456       0 "
            ]
        );
        let mut p = Printer::new(true, false);
        print_stats(&mut p, &s, Some(&punt));
        let json = String::from_utf8(p.finish()).unwrap();
        assert!(
            json.contains(r#""punt":{"to_host":12,"from_host":3456,"dropped":0}"#),
            "{json}"
        );
    }

    #[test]
    fn addresses_print_like_iproute2() {
        // From `ip address show dev d0` / `ip -j address show` (iproute2 6.1).
        let ad = Address {
            family: Family::Inet,
            prefixlen: 24,
            flags: ifa_flags::PERMANENT | ifa_flags::SECONDARY,
            scope: 0,
            ifindex: 2,
            local: Some("10.0.0.5".parse().unwrap()),
            address: Some("10.0.0.5".parse().unwrap()),
            broadcast: Some("10.0.0.255".parse().unwrap()),
            label: Some("d0:1".into()),
            metric: None,
            valid_lft: None,
            preferred_lft: None,
        };
        let mut p = Printer::new(false, false);
        print_addr(&mut p, &ad, "d0");
        assert_eq!(
            String::from_utf8(p.finish()).unwrap(),
            "    inet 10.0.0.5/24 brd 10.0.0.255 scope global secondary d0:1\n       valid_lft forever preferred_lft forever\n"
        );
        let ad6 = Address {
            family: Family::Inet6,
            prefixlen: 64,
            flags: ifa_flags::NODAD | ifa_flags::NOPREFIXROUTE,
            local: Some("2001:db8:9::1".parse().unwrap()),
            address: Some("2001:db8:9::1".parse().unwrap()),
            broadcast: None,
            label: None,
            valid_lft: Some(100),
            preferred_lft: Some(50),
            ..ad.clone()
        };
        let mut p = Printer::new(false, false);
        print_addr(&mut p, &ad6, "d1");
        assert_eq!(
            String::from_utf8(p.finish()).unwrap(),
            "    inet6 2001:db8:9::1/64 scope global nodad dynamic noprefixroute \n       valid_lft 100sec preferred_lft 50sec\n"
        );
        let mut p = Printer::new(true, false);
        let mut plain = ad.clone();
        plain.flags = ifa_flags::PERMANENT;
        plain.broadcast = None;
        plain.label = Some("d1".into());
        print_addr(&mut p, &plain, "d1");
        assert_eq!(
            String::from_utf8(p.finish()).unwrap(),
            "[{\"family\":\"inet\",\"local\":\"10.0.0.5\",\"prefixlen\":24,\"scope\":\"global\",\"label\":\"d1\",\"valid_life_time\":4294967295,\"preferred_life_time\":4294967295}]\n"
        );
    }
}
