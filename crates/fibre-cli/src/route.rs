//! `ip route`: add/change/replace/prepend/append/test/del, show/list/flush, get.
//!
//! Parsing follows iproute2 6.1's `iproute_modify`, `parse_nexthops`, `iproute_get` and
//! `iproute_list_flush_or_save` word by word, with their defaults (new routes: protocol boot,
//! table main, type unicast, scope universe, or link for a unicast route with no gateway; deletes:
//! table main, scope nowhere, everything else a wildcard). Printing follows `print_route`,
//! including which fields a `show` filter hides.

use crate::args::{get_addr, get_prefix, get_u32, matches, read_family, strtoul, Args, Inet};
use crate::names::{
    dsfield_a2n, dsfield_n2a, ipproto_a2n, proto_a2n, proto_n2a, rtntype_a2n, rtntype_n2a,
};
use crate::names::{scope_a2n, scope_n2a, table_a2n, table_n2a};
use crate::out::Printer;
use crate::{Cli, CmdError, Names};
use fibre_fib::{
    nh_flags, protocol, rtm_flags, scope, table, Family, Metrics, NextHop, Prefix, ReqFlags, Route,
    RouteQuery, RouteType,
};
use std::net::IpAddr;

/// `ip route help` (fibre's wording of the syntax it accepts).
const USAGE: &str = "Usage: fibre route { list | flush } SELECTOR\n       fibre route get [ fibmatch ] ADDRESS [ from ADDRESS iif STRING ]\n                            [ oif STRING ] [ tos TOS ] [ mark NUMBER ]\n                            [ uid NUMBER ] [ ipproto PROTOCOL ]\n                            [ sport NUMBER ] [ dport NUMBER ]\n       fibre route { add | del | change | append | replace | prepend } ROUTE\nSELECTOR := [ root PREFIX ] [ match PREFIX ] [ exact PREFIX ]\n            [ table TABLE_ID ] [ proto RTPROTO ] [ type TYPE ] [ scope SCOPE ]\nROUTE := [ TYPE ] PREFIX [ tos TOS ] [ table TABLE_ID ] [ proto RTPROTO ]\n         [ scope SCOPE ] [ metric METRIC ] { NH | nhid ID } OPTIONS [ nexthop NH ]...\nNH := [ via [ FAMILY ] ADDRESS ] [ dev STRING ] [ weight NUMBER ] [ onlink ]\n";

/// RTAX_* numbers, for the metrics lock mask.
mod rtax {
    pub const MTU: u32 = 2;
    pub const WINDOW: u32 = 3;
    pub const RTT: u32 = 4;
    pub const RTTVAR: u32 = 5;
    pub const SSTHRESH: u32 = 6;
    pub const CWND: u32 = 7;
    pub const ADVMSS: u32 = 8;
    pub const REORDERING: u32 = 9;
    pub const HOPLIMIT: u32 = 10;
    pub const INITCWND: u32 = 11;
    pub const FEATURES: u32 = 12;
    pub const RTO_MIN: u32 = 13;
    pub const INITRWND: u32 = 14;
    pub const QUICKACK: u32 = 15;
    pub const CC_ALGO: u32 = 16;
    pub const FASTOPEN_NO_COOKIE: u32 = 17;
}

/// RTAX_FEATURE_ECN
const FEATURE_ECN: u32 = 1;

/// `ip route ...`
pub fn run(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let Some((&verb, rest)) = words.split_first() else {
        return list(cli, &[], false);
    };
    let new = |f: ReqFlags| Some(f);
    let flags = if matches(verb, "add") {
        new(ReqFlags::ADD)
    } else if matches(verb, "change") || verb == "chg" {
        new(ReqFlags::CHANGE)
    } else if matches(verb, "replace") {
        new(ReqFlags::REPLACE)
    } else if matches(verb, "prepend") {
        new(ReqFlags::PREPEND)
    } else if matches(verb, "append") {
        new(ReqFlags::APPEND)
    } else if matches(verb, "test") {
        new(ReqFlags {
            excl: true,
            ..ReqFlags::NONE
        })
    } else {
        None
    };
    if let Some(flags) = flags {
        let r = parse_route(cli, rest, false)?;
        if !cli.tables.contains(&(r.family, r.table)) {
            cli.tables.insert((r.family, r.table));
        }
        return cli.fib.route_new(&r, flags).map_err(|e| CmdError::rtnl(&e));
    }
    if matches(verb, "delete") {
        let r = parse_route(cli, rest, true)?;
        return cli.fib.route_del(&r).map_err(|e| CmdError::rtnl(&e));
    }
    if matches(verb, "list") || matches(verb, "show") || matches(verb, "lst") {
        return list(cli, rest, false);
    }
    if matches(verb, "get") {
        return get(cli, rest);
    }
    if matches(verb, "flush") {
        return list(cli, rest, true);
    }
    if verb == "exception" {
        return exception(cli, rest);
    }
    if matches(verb, "help") {
        return Err(CmdError::usage(USAGE));
    }
    Err(CmdError::exit(
        255,
        format!("Command \"{verb}\" is unknown, try \"ip route help\".\n"),
    ))
}

/// One metric keyword: its RTAX number and the text of iproute2's invalid-value error.
fn metric_value(args: &mut Args, lock: &mut u32, ax: u32, what: &str) -> Result<u32, CmdError> {
    let mut w = args.next_arg()?;
    if w == "lock" {
        *lock |= 1 << ax;
        w = args.next_arg()?;
    }
    get_u32(w, 0).ok_or_else(|| CmdError::invarg(&format!("\"{what}\" value is invalid\n"), w))
}

/// iproute2's `get_time_rtt`: milliseconds with an optional `s`/`ms` suffix; `raw` when none.
fn time_rtt(s: &str) -> Option<(u32, bool)> {
    let lower = s.to_ascii_lowercase();
    let (num, scale, raw) = ["msecs", "msec", "ms", "secs", "sec", "s"]
        .iter()
        .find(|suf| lower.len() > suf.len() && lower.ends_with(*suf))
        .map(|suf| {
            (
                &s[..s.len() - suf.len()],
                if suf.starts_with('m') { 1.0 } else { 1000.0 },
                false,
            )
        })
        .unwrap_or((s, 1.0, true));
    let t: f64 = if num.contains('.') {
        num.parse().ok().filter(|v: &f64| *v >= 0.0)?
    } else {
        strtoul(num, 0)? as f64
    };
    let t = t * scale;
    // Rounded up, as iproute2 does; a time that does not fit the 32-bit attribute is invalid.
    let v = t.ceil();
    if v > u32::MAX as f64 {
        return None;
    }
    Some((v as u32, raw))
}

/// Parses the words of `route add|del|...` into a request, with iproute2's defaults.
pub fn parse_route(cli: &mut Cli, words: &[&str], del: bool) -> Result<Route, CmdError> {
    let mut family = cli.opts.family;
    let mut tbl: u32 = table::MAIN;
    let mut scope_v = if del { scope::NOWHERE } else { scope::UNIVERSE };
    let mut proto = if del {
        protocol::UNSPEC
    } else {
        protocol::BOOT
    };
    let mut rtype = if del {
        RouteType::Unspec
    } else {
        RouteType::Unicast
    };
    let (mut gw_ok, mut nhs_ok, mut scope_ok, mut table_ok, mut dst_ok) =
        (false, false, false, false, false);
    let mut dst: Option<Inet> = None;
    let mut src: Option<Inet> = None;
    let mut gateway: Option<IpAddr> = None;
    let mut prefsrc: Option<IpAddr> = None;
    let mut dev: Option<&str> = None;
    let mut tos = 0u8;
    let mut flags = 0u32;
    let mut priority = None;
    let mut nhid = None;
    let mut pref = None;
    let mut expires = None;
    let mut m = Metrics::default();
    let mut lock = 0u32;
    let mut encap = None;

    let mut a = Args::new(words);
    while let Some(w) = a.peek() {
        // No keyword starts with a digit, and no keyword tested before "via" and "dev" in
        // iproute2's order can be abbreviated to them: testing these first changes nothing but
        // the speed of the common `route add PREFIX via GW dev DEV` line.
        let first = w.as_bytes().first().copied().unwrap_or(0);
        if first.is_ascii_digit() {
            if dst_ok {
                return Err(CmdError::duparg2("to", w));
            }
            let p = get_prefix(w, family)?;
            family = family.or(p.family);
            dst = Some(p);
            dst_ok = true;
        } else if w == "dev" || w == "oif" {
            dev = Some(a.next_arg()?);
        } else if w == "src" {
            let v = a.next_arg()?;
            let ad = get_addr(v, family)?;
            family = family.or(ad.family);
            prefsrc = ad.addr;
        } else if w == "via" {
            if gw_ok {
                return Err(CmdError::invarg(
                    "use nexthop syntax to specify multiple via\n",
                    w,
                ));
            }
            gw_ok = true;
            let mut v = a.next_arg()?;
            let fam = match read_family(v) {
                Some(f) => {
                    v = a.next_arg()?;
                    Some(f)
                }
                None => family,
            };
            let ad = get_addr(v, fam)?;
            family = family.or(ad.family);
            gateway = Some(ad.addr_or_zero(ad.family.unwrap_or(Family::Inet)));
        } else if w == "from" {
            let v = a.next_arg()?;
            let p = get_prefix(v, family)?;
            family = family.or(p.family);
            src = Some(p);
        } else if w == "tos" || matches(w, "dsfield") {
            let v = a.next_arg()?;
            tos =
                dsfield_a2n(v).ok_or_else(|| CmdError::invarg("\"tos\" value is invalid\n", v))?;
        } else if w == "expires" {
            let v = a.next_arg()?;
            expires = Some(
                get_u32(v, 0)
                    .ok_or_else(|| CmdError::invarg("\"expires\" value is invalid\n", v))?,
            );
        } else if matches(w, "metric") || matches(w, "priority") || w == "preference" {
            let v = a.next_arg()?;
            priority = Some(
                get_u32(v, 0)
                    .ok_or_else(|| CmdError::invarg("\"metric\" value is invalid\n", v))?,
            );
        } else if w == "scope" {
            let v = a.next_arg()?;
            scope_v =
                scope_a2n(v).ok_or_else(|| CmdError::invarg("invalid \"scope\" value\n", v))?;
            scope_ok = true;
        } else if w == "mtu" {
            m.mtu = Some(metric_value(&mut a, &mut lock, rtax::MTU, "mtu")?);
        } else if w == "hoplimit" {
            let mut v = a.next_arg()?;
            if v == "lock" {
                lock |= 1 << rtax::HOPLIMIT;
                v = a.next_arg()?;
            }
            let h = get_u32(v, 0).filter(|h| *h <= 255);
            m.hoplimit =
                Some(h.ok_or_else(|| CmdError::invarg("\"hoplimit\" value is invalid\n", v))?);
        } else if w == "advmss" {
            m.advmss = Some(metric_value(&mut a, &mut lock, rtax::ADVMSS, "mss")?);
        } else if matches(w, "reordering") {
            m.reordering = Some(metric_value(
                &mut a,
                &mut lock,
                rtax::REORDERING,
                "reordering",
            )?);
        } else if w == "rtt" || matches(w, "rttvar") && w != "r" && w != "rt" {
            let is_rtt = w == "rtt";
            let mut v = a.next_arg()?;
            let ax = if is_rtt { rtax::RTT } else { rtax::RTTVAR };
            if v == "lock" {
                lock |= 1 << ax;
                v = a.next_arg()?;
            }
            let what = if is_rtt {
                "\"rtt\" value is invalid\n"
            } else {
                "\"rttvar\" value is invalid\n"
            };
            let (t, raw) = time_rtt(v).ok_or_else(|| CmdError::invarg(what, v))?;
            let scale = if is_rtt { 8 } else { 4 };
            let val = if raw { t } else { t.wrapping_mul(scale) };
            if is_rtt {
                m.rtt = Some(val);
            } else {
                m.rttvar = Some(val);
            }
        } else if w == "rto_min" {
            let v = a.next_arg()?;
            lock |= 1 << rtax::RTO_MIN;
            let (t, _) =
                time_rtt(v).ok_or_else(|| CmdError::invarg("\"rto_min\" value is invalid\n", v))?;
            m.rto_min = Some(t);
        } else if matches(w, "window") {
            m.window = Some(metric_value(&mut a, &mut lock, rtax::WINDOW, "window")?);
        } else if matches(w, "cwnd") {
            m.cwnd = Some(metric_value(&mut a, &mut lock, rtax::CWND, "cwnd")?);
        } else if matches(w, "initcwnd") {
            m.initcwnd = Some(metric_value(&mut a, &mut lock, rtax::INITCWND, "initcwnd")?);
        } else if matches(w, "initrwnd") {
            m.initrwnd = Some(metric_value(&mut a, &mut lock, rtax::INITRWND, "initrwnd")?);
        } else if matches(w, "features") {
            let v = a.next_arg()?;
            if v != "ecn" {
                return Err(CmdError::invarg("\"features\" value not valid\n", v));
            }
            m.features = Some(m.features.unwrap_or(0) | FEATURE_ECN);
        } else if matches(w, "quickack") {
            let v = a.next_arg()?;
            let q = get_u32(v, 0)
                .ok_or_else(|| CmdError::invarg("\"quickack\" value is invalid\n", v))?;
            if q > 1 {
                return Err(CmdError::invarg("\"quickack\" value should be 0 or 1\n", v));
            }
            m.quickack = Some(q);
        } else if matches(w, "congctl") {
            let mut v = a.next_arg()?;
            if v == "lock" {
                lock |= 1 << rtax::CC_ALGO;
                v = a.next_arg()?;
            }
            m.congctl = Some(v.to_string());
        } else if matches(w, "ssthresh") {
            m.ssthresh = Some(metric_value(&mut a, &mut lock, rtax::SSTHRESH, "ssthresh")?);
        } else if w == "onlink" {
            flags |= nh_flags::ONLINK;
        } else if w == "nexthop" {
            nhs_ok = true;
            break;
        } else if w == "nhid" {
            let v = a.next_arg()?;
            nhid = Some(
                get_u32(v, 0).ok_or_else(|| CmdError::invarg("\"id\" value is invalid\n", v))?,
            );
        } else if matches(w, "protocol") {
            let v = a.next_arg()?;
            proto = proto_a2n(v)
                .ok_or_else(|| CmdError::invarg("\"protocol\" value is invalid\n", v))?;
        } else if matches(w, "table") {
            let v = a.next_arg()?;
            tbl =
                table_a2n(v).ok_or_else(|| CmdError::invarg("\"table\" value is invalid\n", v))?;
            table_ok = true;
        } else if matches(w, "pref") {
            let v = a.next_arg()?;
            pref = Some(match v {
                "low" => 3,
                "medium" => 0,
                "high" => 1,
                _ => return Err(CmdError::invarg("\"pref\" value is invalid\n", v)),
            });
        } else if w == "encap" {
            encap = Some(crate::encap::parse(cli, &mut a)?);
        } else if matches(w, "realms") || w == "as" || w == "ttl-propagate" || matches(w, "vrf") {
            // Valid iproute2 words for attributes the routing model has no field for yet.
            return Err(unsupported(w));
        } else if matches(w, "fastopen_no_cookie") {
            let v = a.next_arg()?;
            let q = get_u32(v, 0)
                .ok_or_else(|| CmdError::invarg("\"fastopen_no_cookie\" value is invalid\n", v))?;
            if q > 1 {
                return Err(CmdError::invarg(
                    "\"fastopen_no_cookie\" value should be 0 or 1\n",
                    v,
                ));
            }
            m.fastopen_no_cookie = Some(q);
        } else {
            let mut v = w;
            if v == "to" {
                v = a.next_arg()?;
            }
            if !v.starts_with(|c: char| c.is_ascii_digit()) {
                if let Some(t) = rtntype_a2n(v) {
                    v = a.next_arg()?;
                    rtype = t;
                }
            }
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            if dst_ok {
                return Err(CmdError::duparg2("to", v));
            }
            let p = get_prefix(v, family)?;
            family = family.or(p.family);
            dst = Some(p);
            dst_ok = true;
        }
        a.advance();
    }
    let Some(dst) = dst else {
        return Err(CmdError::usage(USAGE));
    };
    let oif = match dev {
        Some(d) => cli.dev(d)?,
        None => 0,
    };
    let mut multipath = Vec::new();
    if nhs_ok {
        multipath = parse_nexthops(cli, &mut a, &mut family)?;
    }
    let family = family.unwrap_or(Family::Inet);
    if !table_ok
        && matches!(
            rtype,
            RouteType::Local | RouteType::Broadcast | RouteType::Nat | RouteType::Anycast
        )
    {
        tbl = table::LOCAL;
    }
    if !scope_ok {
        if family == Family::Inet6 {
            scope_v = scope::UNIVERSE;
        } else if matches!(rtype, RouteType::Local | RouteType::Nat) {
            scope_v = scope::HOST;
        } else if matches!(
            rtype,
            RouteType::Broadcast | RouteType::Multicast | RouteType::Anycast
        ) {
            scope_v = scope::LINK;
        } else if matches!(rtype, RouteType::Unicast | RouteType::Unspec) {
            if del {
                scope_v = scope::NOWHERE;
            } else if !gw_ok && !nhs_ok && nhid.is_none() {
                scope_v = scope::LINK;
            }
        }
    }
    let mut r = Route::new(
        family,
        Prefix {
            addr: dst.addr_or_zero(family),
            len: dst.len,
        },
    );
    r.src = src
        .filter(|s| s.len > 0 || s.addr.is_some())
        .map(|s| Prefix {
            addr: s.addr_or_zero(family),
            len: s.len,
        });
    r.tos = tos;
    r.table = tbl;
    r.protocol = proto;
    r.scope = scope_v;
    r.rtype = rtype;
    r.flags = flags;
    r.priority = priority;
    r.prefsrc = prefsrc;
    r.nexthop = NextHop {
        gateway,
        oif,
        hops: 0,
        flags: flags & nh_flags::ONLINK,
        encap,
    };
    r.multipath = multipath;
    r.nhid = nhid;
    m.lock = lock;
    r.metrics = m;
    r.pref = pref;
    r.expires = expires;
    Ok(r)
}

/// A valid iproute2 word fibre cannot carry out yet: the command fails (a batch goes on with
/// `-force`) instead of misreading the word as a destination.
fn unsupported(w: &str) -> CmdError {
    CmdError::fail(1, format!("Error: fibre does not support \"{w}\" yet.\n"))
}

/// iproute2's `parse_nexthops`/`parse_one_nh`: `nexthop via A dev D weight W onlink ...`.
fn parse_nexthops(
    cli: &mut Cli,
    a: &mut Args,
    family: &mut Option<Family>,
) -> Result<Vec<NextHop>, CmdError> {
    let mut out = Vec::new();
    while let Some(w) = a.peek() {
        if w != "nexthop" {
            return Err(CmdError::exit(
                255,
                format!("Error: \"nexthop\" or end of line is expected instead of \"{w}\"\n"),
            ));
        }
        if a.rest().len() <= 1 {
            return Err(CmdError::exit(
                255,
                "Error: unexpected end of line after \"nexthop\"\n",
            ));
        }
        let mut nh = NextHop::default();
        a.advance();
        while let Some(w) = a.peek() {
            if w == "via" {
                let mut v = a.next_arg()?;
                let fam = match read_family(v) {
                    Some(f) => {
                        v = a.next_arg()?;
                        Some(f)
                    }
                    None => *family,
                };
                let ad = get_addr(v, fam)?;
                *family = family.or(ad.family);
                nh.gateway = Some(ad.addr_or_zero(ad.family.unwrap_or(Family::Inet)));
            } else if w == "dev" {
                let v = a.next_arg()?;
                match cli.ifindex(v) {
                    Some(i) => nh.oif = i,
                    None => {
                        return Err(CmdError::exit(
                            255,
                            format!("Cannot find device \"{v}\"\nError: cannot parse nexthop\n"),
                        ))
                    }
                }
            } else if w == "weight" {
                let v = a.next_arg()?;
                let wt = get_u32(v, 0).filter(|w| (1..=256).contains(w));
                nh.hops =
                    (wt.ok_or_else(|| CmdError::invarg("\"weight\" is invalid\n", v))? - 1) as u8;
            } else if w == "onlink" {
                nh.flags |= nh_flags::ONLINK;
            } else if w == "encap" {
                nh.encap = Some(crate::encap::parse(cli, a)?);
            } else {
                break;
            }
            a.advance();
        }
        out.push(nh);
    }
    Ok(out)
}

/// `ip route get`.
fn get(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let mut family = cli.opts.family;
    let mut q = RouteQuery::to(IpAddr::from([0u8; 4]));
    let mut dst: Option<Inet> = None;
    let (mut idev, mut odev) = (None, None);
    let mut a = Args::new(words);
    while let Some(w) = a.peek() {
        if w == "tos" || matches(w, "dsfield") {
            let v = a.next_arg()?;
            q.tos = dsfield_a2n(v).ok_or_else(|| CmdError::invarg("TOS value is invalid\n", v))?;
        } else if matches(w, "from") {
            let v = a.next_arg()?;
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            let p = get_prefix(v, family)?;
            family = family.or(p.family);
            q.src = p.addr;
        } else if matches(w, "iif") {
            idev = Some(a.next_arg()?);
        } else if matches(w, "mark") {
            let v = a.next_arg()?;
            q.mark = get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid mark value", v))?;
        } else if matches(w, "oif") || w == "dev" {
            odev = Some(a.next_arg()?);
        } else if matches(w, "vrf") || w == "as" {
            return Err(unsupported(w));
        } else if matches(w, "notify") || matches(w, "connected") {
        } else if matches(w, "uid") {
            let v = a.next_arg()?;
            q.uid = Some(get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid UID\n", v))?);
        } else if matches(w, "fibmatch") {
            q.fibmatch = true;
        } else if w == "sport" || w == "dport" {
            let v = a.next_arg()?;
            let p = crate::args::get_u16(v, 0).ok_or_else(|| {
                CmdError::invarg(
                    if w == "sport" {
                        "invalid sport\n"
                    } else {
                        "invalid dport\n"
                    },
                    v,
                )
            })?;
            if w == "sport" {
                q.sport = Some(p);
            } else {
                q.dport = Some(p);
            }
        } else if matches(w, "ipproto") {
            let v = a.next_arg()?;
            q.ipproto = Some(
                ipproto_a2n(v).ok_or_else(|| CmdError::invarg("Invalid \"ipproto\" value\n", v))?,
            );
        } else {
            let mut v = w;
            if v == "to" {
                v = a.next_arg()?;
            }
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            let p = get_prefix(v, family)?;
            family = family.or(p.family);
            dst = Some(p);
        }
        a.advance();
    }
    let Some(dst) = dst else {
        return Err(CmdError::fail(1, "need at least a destination address\n"));
    };
    if let Some(d) = idev {
        q.iif = Some(cli.dev(d)?);
    }
    if let Some(d) = odev {
        q.oif = Some(cli.dev(d)?);
    }
    q.family = family.unwrap_or(Family::Inet);
    q.dst = dst.addr_or_zero(q.family);
    let r = cli.fib.route_get(&q).map_err(|e| CmdError::rtnl(&e))?;
    let names = cli.names();
    let mut p = cli.printer();
    print_route(
        &mut p,
        &r,
        &names,
        &Shown::default(),
        cli.opts.details > 0,
        cli.opts.stats > 0,
    );
    cli.emit(p);
    Ok(())
}

/// fibre's `route exception add DST { mtu MTU | via GATEWAY }`: the effect of an ICMP "packet
/// too big" / "fragmentation needed" reporting MTU, or of a redirect to GATEWAY, for DST,
/// without a data plane (how scenario files stand in for ICMP). Prints nothing; an event the
/// kernel would ignore (an MTU not below the path's) is ignored silently too.
fn exception(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    const USAGE_EXC: &str = "Usage: fibre route exception add ADDRESS { mtu MTU | via GATEWAY }\n";
    let mut a = Args::new(words);
    if a.peek() != Some("add") {
        return Err(CmdError::usage(USAGE_EXC));
    }
    let dst_w = a.next_arg()?;
    let dst = get_addr(dst_w, cli.opts.family)?;
    let (Some(family), Some(addr)) = (dst.family, dst.addr) else {
        return Err(CmdError::invarg("an address is expected\n", dst_w));
    };
    let what = a.next_arg()?;
    let v = a.next_arg()?;
    let r = if what == "mtu" {
        let mtu = get_u32(v, 0).ok_or_else(|| CmdError::invarg("\"mtu\" value is invalid\n", v))?;
        cli.fib.pmtu_update(family, addr, mtu)
    } else if what == "via" {
        let gw = get_addr(v, Some(family))?;
        let Some(g) = gw.addr else {
            return Err(CmdError::invarg("an address is expected\n", v));
        };
        cli.fib.redirect(family, addr, g)
    } else {
        return Err(CmdError::usage(USAGE_EXC));
    };
    a.advance();
    if let Some(w) = a.peek() {
        return Err(CmdError::invarg("unexpected argument\n", w));
    }
    r.map(|_| ()).map_err(|e| CmdError::rtnl(&e))
}

/// What a `route show` selector filters on (iproute2's `filter` in iproute.c).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// 0 = all tables.
    pub tb: u32,
    pub cloned: bool,
    pub tos: Option<u8>,
    pub protocol: Option<u8>,
    pub scope: Option<u8>,
    pub types: Option<RouteType>,
    pub rdst: Option<Inet>,
    pub mdst: Option<Inet>,
    pub rsrc: Option<Inet>,
    pub msrc: Option<Inet>,
    pub rvia: Option<Inet>,
    pub rprefsrc: Option<Inet>,
    pub oif: Option<u32>,
    pub iif: Option<u32>,
    pub metric: Option<u32>,
}

/// Which fields `print_route` leaves out because the filter already fixes them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shown {
    pub table_filtered: bool,
    pub tos: bool,
    pub protocol: bool,
    pub scope: bool,
    pub oif: bool,
    pub iif: bool,
    pub metric: bool,
    pub via_host: bool,
    pub prefsrc_host: bool,
}

impl Filter {
    fn shown(&self, host_len: u8) -> Shown {
        Shown {
            table_filtered: self.tb != 0,
            tos: self.tos.is_some(),
            protocol: self.protocol.is_some(),
            scope: self.scope.is_some(),
            oif: self.oif.is_some(),
            iif: self.iif.is_some(),
            metric: self.metric.is_some(),
            via_host: self
                .rvia
                .is_some_and(|v| v.len == host_len && v.addr.is_some()),
            prefsrc_host: self
                .rprefsrc
                .is_some_and(|v| v.len == host_len && v.addr.is_some()),
        }
    }

    /// iproute2's `filter_nlmsg`.
    pub fn accepts(&self, r: &Route, preferred: Option<Family>) -> bool {
        if preferred.is_some_and(|f| f != r.family) {
            return false;
        }
        if self.cloned != (r.flags & rtm_flags::CLONED != 0) {
            return false;
        }
        if self.tb > 0 && self.tb != r.table {
            return false;
        }
        if self.protocol.is_some_and(|p| p != r.protocol)
            || self.scope.is_some_and(|s| s != r.scope)
            || self.types.is_some_and(|t| t != r.rtype)
            || self.tos.is_some_and(|t| t != r.tos)
        {
            return false;
        }
        let dst = r.dst.addr;
        if let Some(f) = &self.rdst {
            if f.family.is_some_and(|fam| fam != r.family)
                || f.len > r.dst.len
                || !prefix_match(dst, f, f.len)
            {
                return false;
            }
        }
        if let Some(f) = &self.mdst {
            if f.family.is_some_and(|fam| fam != r.family)
                || f.len < r.dst.len
                || !prefix_match(dst, f, r.dst.len)
            {
                return false;
            }
        }
        let (src, src_len) = match r.src {
            Some(s) => (s.addr, s.len),
            None => (zero(r.family), 0),
        };
        if let Some(f) = &self.rsrc {
            if f.family.is_some_and(|fam| fam != r.family)
                || f.len > src_len
                || !prefix_match(src, f, f.len)
            {
                return false;
            }
        }
        if let Some(f) = &self.msrc {
            if f.family.is_some_and(|fam| fam != r.family)
                || f.len < src_len
                || !prefix_match(src, f, src_len)
            {
                return false;
            }
        }
        if let Some(f) = &self.rvia {
            let via = if r.multipath.is_empty() {
                r.nexthop.gateway
            } else {
                None
            };
            if !prefix_match(via.unwrap_or(zero(r.family)), f, f.len) {
                return false;
            }
        }
        if let Some(f) = &self.rprefsrc {
            if !prefix_match(r.prefsrc.unwrap_or(zero(r.family)), f, f.len) {
                return false;
            }
        }
        if self.iif.is_some_and(|i| Some(i) != r.iif) {
            return false;
        }
        let oif = if r.multipath.is_empty() {
            r.nexthop.oif
        } else {
            0
        };
        if self.oif.is_some_and(|o| o != oif) {
            return false;
        }
        if self.metric.is_some_and(|m| m != r.priority.unwrap_or(0)) {
            return false;
        }
        true
    }
}

fn zero(f: Family) -> IpAddr {
    match f {
        Family::Inet => IpAddr::from([0u8; 4]),
        Family::Inet6 => IpAddr::from([0u8; 16]),
    }
}

fn addr_bytes(a: &IpAddr) -> ([u8; 16], usize) {
    let mut b = [0u8; 16];
    match a {
        IpAddr::V4(v) => {
            b[..4].copy_from_slice(&v.octets());
            (b, 4)
        }
        IpAddr::V6(v) => (v.octets(), 16),
    }
}

/// iproute2's `inet_addr_match(a, b, bits) == 0`: the first `bits` bits are equal (a missing
/// address, as for `default`, is all zeros).
fn prefix_match(a: IpAddr, f: &Inet, bits: u8) -> bool {
    let (ab, alen) = addr_bytes(&a);
    let (fb, _) = match f.addr {
        Some(x) => addr_bytes(&x),
        None => ([0u8; 16], alen),
    };
    let bits = (bits as usize).min(alen * 8);
    let full = bits / 8;
    if ab[..full] != fb[..full] {
        return false;
    }
    let rem = bits % 8;
    rem == 0 || (ab[full] ^ fb[full]) & (0xffu8 << (8 - rem)) == 0
}

/// `ip route show|list|flush SELECTOR`.
fn list(cli: &mut Cli, words: &[&str], flush: bool) -> Result<(), CmdError> {
    let mut f = Filter {
        tb: table::MAIN,
        ..Filter::default()
    };
    let fam = cli.opts.family;
    if flush && words.is_empty() {
        return Err(CmdError::fail(
            1,
            "\"ip route flush\" requires arguments.\n",
        ));
    }
    let (mut od, mut id) = (None, None);
    let mut a = Args::new(words);
    while let Some(w) = a.peek() {
        if matches(w, "table") {
            let v = a.next_arg()?;
            match table_a2n(v) {
                Some(t) => f.tb = t,
                None if v == "all" => f.tb = 0,
                None if v == "cache" => f.cloned = true,
                None if v == "help" => return Err(CmdError::usage(USAGE)),
                None => return Err(CmdError::invarg("table id value is invalid\n", v)),
            }
        } else if matches(w, "cached") || matches(w, "cloned") {
            f.cloned = true;
        } else if w == "tos" || matches(w, "dsfield") {
            let v = a.next_arg()?;
            f.tos =
                Some(dsfield_a2n(v).ok_or_else(|| CmdError::invarg("TOS value is invalid\n", v))?);
        } else if matches(w, "protocol") {
            let v = a.next_arg()?;
            f.protocol = match proto_a2n(v) {
                Some(p) => Some(p),
                None if v == "all" => None,
                None => return Err(CmdError::invarg("invalid \"protocol\"\n", v)),
            };
        } else if matches(w, "scope") {
            let v = a.next_arg()?;
            f.scope = match scope_a2n(v) {
                Some(s) => Some(s),
                None if v == "all" => None,
                None => return Err(CmdError::invarg("invalid \"scope\"\n", v)),
            };
        } else if matches(w, "type") {
            let v = a.next_arg()?;
            f.types = Some(
                rtntype_a2n(v)
                    .ok_or_else(|| CmdError::invarg("node type value is invalid\n", v))?,
            );
        } else if w == "dev" || w == "oif" {
            od = Some(a.next_arg()?);
        } else if w == "iif" {
            id = Some(a.next_arg()?);
        } else if w == "mark" {
            let v = a.next_arg()?;
            get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid mark value", v))?;
        } else if matches(w, "metric") || matches(w, "priority") || w == "preference" {
            let v = a.next_arg()?;
            f.metric = Some(
                get_u32(v, 0)
                    .ok_or_else(|| CmdError::invarg("\"metric\" value is invalid\n", v))?,
            );
        } else if w == "via" {
            let mut v = a.next_arg()?;
            let vf = match read_family(v) {
                Some(x) => {
                    v = a.next_arg()?;
                    Some(x)
                }
                None => fam,
            };
            f.rvia = Some(get_prefix(v, vf)?);
        } else if w == "src" {
            let v = a.next_arg()?;
            f.rprefsrc = Some(get_prefix(v, fam)?);
        } else if matches(w, "from") {
            let mut v = a.next_arg()?;
            if matches(v, "root") {
                v = a.next_arg()?;
                f.rsrc = Some(get_prefix(v, fam)?);
            } else if matches(v, "match") {
                v = a.next_arg()?;
                f.msrc = Some(get_prefix(v, fam)?);
            } else {
                if matches(v, "exact") {
                    v = a.next_arg()?;
                }
                f.msrc = Some(get_prefix(v, fam)?);
                f.rsrc = f.msrc;
            }
        } else {
            let mut v = w;
            if matches(v, "to") {
                v = a.next_arg()?;
            }
            if matches(v, "root") {
                v = a.next_arg()?;
                f.rdst = Some(get_prefix(v, fam)?);
            } else if matches(v, "match") {
                v = a.next_arg()?;
                f.mdst = Some(get_prefix(v, fam)?);
            } else {
                if matches(v, "exact") {
                    v = a.next_arg()?;
                }
                f.mdst = Some(get_prefix(v, fam)?);
                f.rdst = f.mdst;
            }
        }
        a.advance();
    }
    // A selector's family-less prefix ("default") does not constrain the family.
    for p in [&mut f.rdst, &mut f.mdst, &mut f.rsrc, &mut f.msrc]
        .into_iter()
        .flatten()
    {
        if p.addr.is_none() {
            p.family = None;
        }
    }
    let mut family = fam;
    if family.is_none() && f.tb != 0 {
        family = Some(Family::Inet);
    }
    if let Some(d) = id {
        f.iif = Some(cli.dev(d)?);
    }
    if let Some(d) = od {
        f.oif = Some(cli.dev(d)?);
    }
    if f.cloned && flush {
        // `route flush cache`: every next-hop exception of the family goes at once.
        return cli
            .fib
            .flush_exceptions(family)
            .map(|_| ())
            .map_err(|e| CmdError::rtnl(&e));
    }
    let routes = if f.cloned {
        cli.fib.exceptions(family)
    } else {
        cli.fib.routes(family)
    };
    if let (Some(fam), true) = (family, cli.strict_dump && f.tb != 0 && !f.cloned) {
        if !table_exists(cli, fam, f.tb, &routes) {
            // The kernel's strict dump of a table it never created: iproute2 has already
            // opened its JSON array when the error arrives.
            if cli.opts.json && !flush {
                cli.out.push(b'[');
            }
            let v = if fam == Family::Inet { "ipv4" } else { "ipv6" };
            let end = if flush {
                "Flush terminated"
            } else {
                "Dump terminated"
            };
            return Err(CmdError::fail(
                2,
                format!("Error: {v}: FIB table does not exist.\n{end}\n"),
            ));
        }
    }
    if flush {
        for r in routes.iter().filter(|r| f.accepts(r, family)) {
            // iproute2 sends each dumped route back as RTM_DELROUTE; a route already gone
            // (deleted with an earlier one) is not an error for a flush.
            let _ = cli.fib.route_del(r);
        }
        return Ok(());
    }
    let names = cli.names();
    let details = cli.opts.details > 0;
    let mut p = cli.printer();
    for r in routes.iter().filter(|r| f.accepts(r, family)) {
        print_route(
            &mut p,
            r,
            &names,
            &f.shown(r.family.max_len()),
            details,
            cli.opts.stats > 0,
        );
    }
    cli.emit(p);
    Ok(())
}

/// Whether the kernel would have table `tb` of `family`: main always (and IPv6's local), any
/// table a route add has named, any table holding a route now.
fn table_exists(cli: &Cli, family: Family, tb: u32, routes: &[Route]) -> bool {
    tb == table::MAIN
        || (family == Family::Inet6 && tb == table::LOCAL)
        || cli.tables.contains(&(family, tb))
        || routes.iter().any(|r| r.family == family && r.table == tb)
}

fn addr_str(a: &IpAddr) -> String {
    a.to_string()
}

fn print_gateway(p: &mut Printer, route_family: Family, gw: &IpAddr) {
    if Family::of(gw) == route_family {
        p.str(Some("gateway"), "via ", &addr_str(gw), " ");
    } else {
        let fam = match gw {
            IpAddr::V4(_) => "inet",
            IpAddr::V6(_) => "inet6",
        };
        if p.is_json() {
            p.open_obj(Some("via"));
            p.jstr(Some("family"), fam);
            p.jstr(Some("host"), &addr_str(gw));
            p.close_obj();
        } else {
            p.text("via ");
            p.text(fam);
            p.text(" ");
            p.text(&addr_str(gw));
            p.text(" ");
        }
    }
}

/// iproute2's `print_rt_flags`: the `flags` array, and words in text.
pub fn print_rt_flags(p: &mut Printer, flags: u32) {
    const OFFLOAD: u32 = 0x4000;
    const TRAP: u32 = 0x8000;
    const OFFLOAD_FAILED: u32 = 0x2000_0000;
    p.open_arr(Some("flags"));
    for (bit, name) in [
        (nh_flags::DEAD, "dead"),
        (nh_flags::ONLINK, "onlink"),
        (nh_flags::PERVASIVE, "pervasive"),
        (nh_flags::OFFLOAD, "offload"),
        (nh_flags::TRAP, "trap"),
        (rtm_flags::NOTIFY, "notify"),
        (nh_flags::LINKDOWN, "linkdown"),
        (nh_flags::UNRESOLVED, "unresolved"),
        (OFFLOAD, "rt_offload"),
        (TRAP, "rt_trap"),
        (OFFLOAD_FAILED, "rt_offload_failed"),
    ] {
        if flags & bit != 0 {
            p.str(None, "", name, " ");
        }
    }
    p.close_arr();
}

/// iproute2's `print_cache_flags` for cloned IPv4 answers (RTCF_* bits above 0xffff).
fn print_cache_flags(p: &mut Printer, flags: u32) {
    let mut flags = flags & !0xffff;
    if p.is_json() {
        p.open_arr(Some("cache"));
    } else {
        p.text("\n    cache ");
    }
    if flags != 0 {
        p.text("<");
        for (bit, name) in [
            (0x8000_0000u32, "local"),
            (0x4000_0000, "reject"),
            (0x2000_0000, "mc"),
            (0x1000_0000, "brd"),
            (0x0800_0000, "dst-nat"),
            (0x0080_0000, "src-nat"),
            (0x0040_0000, "masq"),
            (0x0002_0000, "dst-direct"),
            (0x0400_0000, "src-direct"),
            (0x0004_0000, "redirected"),
            (0x0100_0000, "redirect"),
            (0x0020_0000, "fastroute"),
            (0x0001_0000, "notify"),
            (0x0008_0000, "proxy"),
        ] {
            if flags & bit != 0 {
                flags &= !bit;
                p.str(None, "", name, if flags != 0 { "," } else { "> " });
            }
        }
        if flags != 0 {
            p.str(None, "", &format!("{flags:x}"), "> ");
        }
    }
    p.close_arr();
}

fn print_cacheinfo(p: &mut Printer, expires: Option<u32>, error: i32) {
    if let Some(e) = expires.filter(|e| *e != 0) {
        p.num(Some("expires"), "expires ", e as i64, "sec ");
    }
    if error != 0 {
        p.num(Some("error"), "error ", error as u32 as i64, " ");
    }
}

/// iproute2's `print_rta_metrics`.
fn print_metrics(p: &mut Printer, m: &Metrics) {
    let any = m.lock != 0
        || [
            m.mtu,
            m.window,
            m.rtt,
            m.rttvar,
            m.ssthresh,
            m.cwnd,
            m.advmss,
            m.reordering,
            m.hoplimit,
            m.initcwnd,
            m.features,
            m.rto_min,
            m.initrwnd,
            m.quickack,
            m.fastopen_no_cookie,
        ]
        .iter()
        .any(|v| v.is_some())
        || m.congctl.is_some();
    if !any {
        return;
    }
    p.open_arr(Some("metrics"));
    p.open_obj(None);
    let vals: [(u32, &str, Option<u32>); 15] = [
        (rtax::MTU, "mtu", m.mtu),
        (rtax::WINDOW, "window", m.window),
        (rtax::RTT, "rtt", m.rtt),
        (rtax::RTTVAR, "rttvar", m.rttvar),
        (rtax::SSTHRESH, "ssthresh", m.ssthresh),
        (rtax::CWND, "cwnd", m.cwnd),
        (rtax::ADVMSS, "advmss", m.advmss),
        (rtax::REORDERING, "reordering", m.reordering),
        (rtax::HOPLIMIT, "hoplimit", m.hoplimit),
        (rtax::INITCWND, "initcwnd", m.initcwnd),
        (rtax::FEATURES, "features", m.features),
        (rtax::RTO_MIN, "rto_min", m.rto_min),
        (rtax::INITRWND, "initrwnd", m.initrwnd),
        (rtax::QUICKACK, "quickack", m.quickack),
        (
            rtax::FASTOPEN_NO_COOKIE,
            "fastopen_no_cookie",
            m.fastopen_no_cookie,
        ),
    ];
    let emit = |p: &mut Printer, ax: u32, name: &str, v: Option<u32>| {
        let locked = m.lock & (1 << ax) != 0;
        if v.is_none() && !locked {
            return;
        }
        let val = v.unwrap_or(0);
        if ax == rtax::HOPLIMIT && val == u32::MAX {
            return;
        }
        p.text(name);
        p.text(" ");
        if locked {
            p.text("lock ");
        }
        match ax {
            rtax::FEATURES => {
                let mut f = val;
                if f & FEATURE_ECN != 0 {
                    p.null("ecn", "ecn ");
                    f &= !FEATURE_ECN;
                }
                if f != 0 {
                    p.str(Some("features"), "", &format!("{val:#x}"), " ");
                }
            }
            rtax::RTT | rtax::RTTVAR | rtax::RTO_MIN => {
                let v = match ax {
                    rtax::RTT => val / 8,
                    rtax::RTTVAR => val / 4,
                    _ => val,
                };
                p.jnum(Some(name), v as i64);
                if v >= 1000 {
                    p.text(&format!("{}s ", v as f64 / 1e3));
                } else {
                    p.text(&format!("{v}ms "));
                }
            }
            _ => p.num(Some(name), "", val as i64, " "),
        }
    };
    for (ax, name, v) in vals {
        if ax == rtax::FASTOPEN_NO_COOKIE {
            if let Some(cc) = &m.congctl {
                p.text("congctl ");
                if m.lock & (1 << rtax::CC_ALGO) != 0 {
                    p.text("lock ");
                }
                p.str(Some("congestion"), "", cc, " ");
            }
        }
        emit(p, ax, name, v);
    }
    p.close_obj();
    p.close_arr();
}

/// iproute2's `print_route` for one route (a dump entry or a `route get` answer).
pub fn print_route(
    p: &mut Printer,
    r: &Route,
    names: &Names,
    shown: &Shown,
    details: bool,
    stats: bool,
) {
    let host_len = r.family.max_len();
    p.open_obj(None);
    if r.rtype != RouteType::Unicast || details {
        p.str(Some("type"), "", rtntype_n2a(r.rtype), " ");
    }
    if r.dst.len == 0 {
        p.str(Some("dst"), "", "default", " ");
    } else if r.dst.len != host_len {
        p.str(
            Some("dst"),
            "",
            &format!("{}/{}", r.dst.addr, r.dst.len),
            " ",
        );
    } else {
        p.str(Some("dst"), "", &addr_str(&r.dst.addr), " ");
    }
    if let Some(s) = r.src {
        if s.len == host_len {
            p.str(Some("from"), "from ", &addr_str(&s.addr), " ");
        } else if s.len > 0 {
            p.str(Some("from"), "from ", &format!("{}/{}", s.addr, s.len), " ");
        }
    }
    if let Some(id) = r.nhid {
        p.num(Some("nhid"), "nhid ", id as i64, " ");
    }
    let single = r.multipath.is_empty();
    if let Some(e) = r.nexthop.encap.as_ref().filter(|_| single) {
        crate::encap::print(p, e, names, stats);
    }
    if r.tos != 0 && !shown.tos {
        p.str(Some("tos"), "tos ", &dsfield_n2a(r.tos), " ");
    }
    if single {
        if let Some(gw) = &r.nexthop.gateway {
            if !(shown.via_host && Family::of(gw) == r.family) {
                print_gateway(p, r.family, gw);
            }
        }
        if r.nexthop.oif != 0 && !shown.oif {
            p.str(Some("dev"), "dev ", &names.get(r.nexthop.oif), " ");
        }
    }
    if r.table != 0 && (r.table != table::MAIN || details) && !shown.table_filtered {
        p.str(Some("table"), "table ", &table_n2a(r.table), " ");
    }
    if r.flags & rtm_flags::CLONED == 0 {
        if (r.protocol != protocol::BOOT || details) && !shown.protocol {
            p.str(Some("protocol"), "proto ", &proto_n2a(r.protocol), " ");
        }
        if (r.scope != scope::UNIVERSE || details) && !shown.scope {
            p.str(
                Some("scope"),
                "scope ",
                &crate::names::scope_n2a(r.scope),
                " ",
            );
        }
    }
    if let Some(ps) = &r.prefsrc {
        if !shown.prefsrc_host {
            p.str(Some("prefsrc"), "src ", &addr_str(ps), " ");
        }
    }
    if let Some(m) = r.priority {
        if !shown.metric {
            p.num(Some("metric"), "metric ", m as i64, " ");
        }
    }
    const NH_BITS: u32 = 0xff;
    let nh_bits = if single { r.nexthop.flags & NH_BITS } else { 0 };
    print_rt_flags(p, r.flags | nh_bits);
    if let Some(mark) = r.mark.filter(|m| *m != 0) {
        if p.is_json() {
            p.jnum(Some("mark"), mark as i64);
        } else if mark >= 16 {
            p.text(&format!("mark 0x{mark:x} "));
        } else {
            p.text(&format!("mark {mark} "));
        }
    }
    if let Some(uid) = r.uid {
        p.num(Some("uid"), "uid ", uid as i64, " ");
    }
    if r.family == Family::Inet && r.flags & rtm_flags::CLONED != 0 {
        print_cache_flags(p, r.flags);
    }
    match &r.cache {
        Some(c) => print_cacheinfo(p, c.expires.or(r.expires), c.error),
        None => print_cacheinfo(p, r.expires, 0),
    }
    print_metrics(p, &r.metrics);
    if let Some(iif) = r.iif {
        if !shown.iif {
            p.str(Some("iif"), "iif ", &names.get(iif), " ");
        }
    }
    if let Some(pref) = r.pref {
        match pref {
            3 => p.str(Some("pref"), "pref ", "low", ""),
            0 => p.str(Some("pref"), "pref ", "medium", ""),
            1 => p.str(Some("pref"), "pref ", "high", ""),
            n => p.num(Some("pref"), "", n as i64, ""),
        }
    }
    if !single {
        p.open_arr(Some("nexthops"));
        for nh in &r.multipath {
            p.open_obj(None);
            p.text("\n\tnexthop ");
            if let Some(e) = &nh.encap {
                crate::encap::print(p, e, names, stats);
            }
            if let Some(gw) = &nh.gateway {
                print_gateway(p, r.family, gw);
            }
            p.str(Some("dev"), "dev ", &names.get(nh.oif), " ");
            p.num(Some("weight"), "weight ", nh.hops as i64 + 1, " ");
            print_rt_flags(p, nh.flags);
            p.close_obj();
        }
        p.close_arr();
    }
    p.text("\n");
    p.close_obj();
}

/// The scope name, re-exported for other objects' printers.
pub fn scope_name(s: u8) -> String {
    scope_n2a(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;
    use fibre_fib::Fib;

    fn cli() -> Cli {
        Cli::new(Fib::default(), Options::default())
    }

    fn parse(words: &str) -> Result<Route, CmdError> {
        let w: Vec<&str> = words.split_whitespace().collect();
        parse_route(&mut cli(), &w, false)
    }

    #[test]
    fn add_defaults_are_iproute2s() {
        let r = parse("10.0.0.0/8 via 192.0.2.1").unwrap();
        assert_eq!(r.family, Family::Inet);
        assert_eq!(
            (r.table, r.protocol, r.scope, r.rtype),
            (254, 3, 0, RouteType::Unicast)
        );
        assert_eq!(
            r.dst,
            Prefix {
                addr: "10.0.0.0".parse().unwrap(),
                len: 8
            }
        );
        assert_eq!(r.nexthop.gateway, Some("192.0.2.1".parse().unwrap()));
        assert_eq!(r.priority, None);
        // No gateway: scope link.
        let r = parse("blackhole 10.9.0.0/16").unwrap();
        assert_eq!((r.rtype, r.scope), (RouteType::Blackhole, scope::UNIVERSE));
        let r = parse("local 10.1.1.1").unwrap();
        assert_eq!(
            (r.rtype, r.scope, r.table, r.dst.len),
            (RouteType::Local, scope::HOST, 255, 32)
        );
        let r = parse("default via 2001:db8::1").unwrap();
        assert_eq!((r.family, r.dst.len, r.scope), (Family::Inet6, 0, 0));
        let r = parse("10.0.0.0/8 via inet6 2001:db8::1 table 100 metric 7 proto static tos 0x10")
            .unwrap();
        assert_eq!(
            (r.family, r.table, r.priority, r.protocol, r.tos),
            (Family::Inet, 100, Some(7), 4, 0x10)
        );
        assert_eq!(r.nexthop.gateway, Some("2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn delete_is_a_wildcard() {
        let w: Vec<&str> = "10.0.0.0/8".split_whitespace().collect();
        let r = parse_route(&mut cli(), &w, true).unwrap();
        assert_eq!(
            (r.table, r.protocol, r.scope, r.rtype),
            (254, 0, scope::NOWHERE, RouteType::Unspec)
        );
    }

    #[test]
    fn metrics_and_flags() {
        let r =
            parse("10.0.0.0/8 via 1.1.1.1 mtu lock 1400 advmss 1300 rto_min 200ms rtt 1.5s onlink")
                .unwrap();
        assert_eq!(r.metrics.mtu, Some(1400));
        assert_eq!(r.metrics.advmss, Some(1300));
        assert_eq!(r.metrics.rtt, Some(12000));
        assert_eq!(r.metrics.rto_min, Some(200));
        assert_eq!(r.metrics.lock, (1 << rtax::MTU) | (1 << rtax::RTO_MIN));
        assert_eq!(r.flags, nh_flags::ONLINK);
    }

    #[test]
    fn parse_errors_match_iproute2() {
        // All from iproute2 6.1 `ip route add ...` in a network namespace.
        assert_eq!(
            parse("1.2.3.0/24 via 10.0.0.2 metric x").unwrap_err(),
            CmdError::exit(
                255,
                "Error: argument \"x\" is wrong: \"metric\" value is invalid\n\n"
            )
        );
        assert_eq!(
            parse("1.2.3.0/244 via 10.0.0.2").unwrap_err(),
            CmdError::exit(
                1,
                "Error: any valid prefix is expected rather than \"1.2.3.0/244\".\n"
            )
        );
        assert_eq!(
            parse("1.2.3.0/24 via").unwrap_err(),
            CmdError::exit(255, "Command line is not complete. Try option \"help\"\n")
        );
        assert_eq!(
            parse("1.2.3.0/24 via 1.1.1.1 via 2.2.2.2").unwrap_err(),
            CmdError::exit(
                255,
                "Error: argument \"via\" is wrong: use nexthop syntax to specify multiple via\n\n"
            )
        );
        assert_eq!(
            parse("1.2.3.0/24 1.2.4.0/24").unwrap_err(),
            CmdError::exit(
                255,
                "Error: either \"to\" is duplicate, or \"1.2.4.0/24\" is a garbage.\n"
            )
        );
        assert_eq!(
            parse("1.2.3.0/24 dev nope").unwrap_err(),
            CmdError::fail(1, "Cannot find device \"nope\"\n")
        );
    }

    fn show(r: &Route, json: bool, shown: Shown) -> String {
        let names = Names(vec![
            None,
            Some("lo".into()),
            Some("d0".into()),
            Some("d1".into()),
        ]);
        let mut p = Printer::new(json, false);
        print_route(&mut p, r, &names, &shown, false, false);
        String::from_utf8(p.finish()).unwrap()
    }

    fn route(s: &str) -> Route {
        let (a, l) = s.split_once('/').unwrap_or((s, ""));
        let addr: IpAddr = a.parse().unwrap();
        let fam = Family::of(&addr);
        let len = if l.is_empty() {
            fam.max_len()
        } else {
            l.parse().unwrap()
        };
        let mut r = Route::new(fam, Prefix { addr, len });
        r.table = 254;
        r.protocol = 3;
        r
    }

    /// How routes print is recorded from the kernel in `tests/scenarios/cli/`; an expiring
    /// route is not, since its seconds left move while a recording runs. Expected lines from
    /// `ip -6 route show` / `ip -j -6 route show` (iproute2 6.1).
    #[test]
    fn prints_expiry_like_iproute2() {
        let mut r = route("2001:db8:5::/64");
        r.nexthop.oif = 2;
        r.priority = Some(1024);
        r.pref = Some(0);
        r.expires = Some(299);
        let all = Shown::default();
        assert_eq!(
            show(&r, false, all),
            "2001:db8:5::/64 dev d0 metric 1024 expires 299sec pref medium\n"
        );
        assert_eq!(
            show(&r, true, all),
            "[{\"dst\":\"2001:db8:5::/64\",\"dev\":\"d0\",\"metric\":1024,\"flags\":[],\"expires\":299,\"pref\":\"medium\"}]\n"
        );
    }

    #[test]
    fn filters_select_like_iproute2() {
        let mut r = route("10.1.0.0/16");
        r.nexthop.oif = 2;
        let f = |words: &str| {
            let mut f = Filter {
                tb: 254,
                ..Filter::default()
            };
            for (k, v) in words
                .split_whitespace()
                .collect::<Vec<_>>()
                .chunks(2)
                .map(|c| (c[0], c[1]))
            {
                let p = Some(get_prefix(v, None).unwrap());
                match k {
                    "root" => f.rdst = p,
                    "match" => f.mdst = p,
                    _ => {
                        f.mdst = p;
                        f.rdst = p
                    }
                }
            }
            f.accepts(&r, None)
        };
        assert!(f("root 10.0.0.0/8"));
        assert!(!f("root 10.1.2.0/24"));
        assert!(f("match 10.1.2.0/24"));
        assert!(!f("match 10.0.0.0/8"));
        assert!(f("exact 10.1.0.0/16"));
        assert!(!f("exact 10.1.0.0/17"));
        assert!(f("root 0/0"));
    }
}
