//! `ip nexthop`: add/replace/del/show/get/flush, parsed as iproute2 6.1's `ipnh_modify` and
//! printed as its `print_nexthop`.

use crate::args::{get_addr, get_u16, get_u32, matches, read_family, Args};
use crate::names::{proto_a2n, proto_n2a, scope_n2a};
use crate::out::Printer;
use crate::route::print_rt_flags;
use crate::{Cli, CmdError, Names};
use fibre_fib::{
    nh_flags, scope, Errno, Family, GroupMember, NexthopBucket, NexthopObj, ReqFlags, ResGroup,
    RtError,
};

const USAGE: &str = "Usage: fibre nexthop { list | flush } [ id ID ] [ dev DEV ] [ groups ] [ fdb ]\n       fibre nexthop { add | replace } id ID NH [ protocol ID ]\n       fibre nexthop { get | del } id ID\n       fibre nexthop bucket list [ id ID ] [ nhid ID ] [ dev DEV ]\n       fibre nexthop bucket get id ID index INDEX\nNH := { group ID[,WEIGHT][/ID[,WEIGHT]]... [ type { mpath | resilient [ buckets BUCKETS ]\n          [ idle_timer SECONDS ] [ unbalanced_timer SECONDS ] } ] |\n        [ via ADDRESS ] [ dev DEV ] [ onlink ] | blackhole } [ fdb ]\n";

/// NHA_GROUP_TYPE values.
const GROUP_MPATH: u16 = 0;
const GROUP_RES: u16 = 1;

/// `ip nexthop ...`
pub fn run(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let Some((&verb, rest)) = words.split_first() else {
        return list(cli, &[], false);
    };
    if matches(verb, "add") || matches(verb, "replace") {
        let flags = if matches(verb, "add") {
            ReqFlags::ADD
        } else {
            ReqFlags::REPLACE
        };
        let nh = parse(cli, rest)?;
        return cli
            .fib
            .nexthop_new(&nh, flags)
            .map_err(|e| CmdError::rtnl(&e));
    }
    if matches(verb, "delete") {
        // iproute2 sends whatever id it was given, or none: the kernel refuses both.
        let Some(id) = id_arg(rest)? else {
            let e = RtError::msg(Errno::EINVAL, "Nexthop id is missing");
            return Err(CmdError::rtnl(&e));
        };
        return cli.fib.nexthop_del(id).map_err(|e| CmdError::rtnl(&e));
    }
    if matches(verb, "get") {
        let id = id_arg(rest)?
            .filter(|&i| i != 0)
            .ok_or_else(|| CmdError::usage(USAGE))?;
        return get(cli, id);
    }
    if matches(verb, "list") || matches(verb, "show") || matches(verb, "lst") {
        return list(cli, rest, false);
    }
    if matches(verb, "flush") {
        return list(cli, rest, true);
    }
    if matches(verb, "bucket") {
        return bucket(cli, rest);
    }
    help_or_unknown(verb)
}

/// `id N` of `get`/`del`, if given.
fn id_arg(words: &[&str]) -> Result<Option<u32>, CmdError> {
    let mut a = Args::new(words);
    let mut id = None;
    while let Some(w) = a.peek() {
        if w == "id" {
            let v = a.next_arg()?;
            id = Some(get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid id value", v))?);
        } else {
            return Err(CmdError::usage(USAGE));
        }
        a.advance();
    }
    Ok(id)
}

/// RTM_GETNEXTHOP for one id, answered from the dump as the kernel answers it.
fn get(cli: &mut Cli, id: u32) -> Result<(), CmdError> {
    let Some(nh) = cli.fib.nexthops().into_iter().find(|n| n.id == id) else {
        return Err(CmdError::rtnl(&RtError::new(Errno::ENOENT)));
    };
    let names = cli.names();
    let mut p = cli.printer();
    print_nexthop(&mut p, &nh, &names, cli.opts.details > 0);
    cli.emit(p);
    Ok(())
}

/// iproute2's `add_nh_group_attr`: `ID[,WEIGHT]/ID[,WEIGHT]...`. Its errors name what C's
/// in-place tokenizing leaves of the word: a bad id shows the word up to its first ',' or '/',
/// a bad weight shows that weight.
fn group(s: &str) -> Result<Vec<GroupMember>, CmdError> {
    let head = &s[..s.find([',', '/']).unwrap_or(s.len())];
    let bad_group = || CmdError::invarg("\"group\" value is invalid\n", head);
    if s.is_empty() {
        return Err(bad_group());
    }
    let mut out = Vec::new();
    for part in s.split('/') {
        let (id, w) = match part.split_once(',') {
            Some((i, w)) => (i, Some(w)),
            None => (part, None),
        };
        let id = get_u32(id, 0).ok_or_else(bad_group)?;
        let weight_minus_one = match w {
            Some(w) => {
                let v = get_u32(w, 0).filter(|v| (1..=256).contains(v));
                (v.ok_or_else(|| CmdError::invarg("\"weight\" is invalid\n", w))? - 1) as u8
            }
            None => 0,
        };
        out.push(GroupMember {
            id,
            weight_minus_one,
        });
    }
    Ok(out)
}

/// iproute2's `parse_nh_group_type_res`, given the words from `resilient` on: the resilient
/// arguments that follow and how many words they took. Any word after `resilient` makes
/// iproute2 send the (possibly empty) NHA_RES_GROUP nest; the first word that is not a
/// resilient argument ends them. Timers are given in seconds and sent in clock_t.
fn res_args(words: &[&str]) -> Result<(Option<ResGroup>, usize), CmdError> {
    if words.len() < 2 {
        return Ok((None, 0));
    }
    let mut res = ResGroup::default();
    let mut i = 1;
    // UINT32_MAX / 100: a larger number of seconds would overflow clock_t.
    let timer = |v: &str, what: &str| {
        get_u32(v, 0)
            .filter(|&t| t < u32::MAX / 100)
            .map(|t| t * 100)
            .ok_or_else(|| CmdError::invarg(what, v))
    };
    while let Some(&w) = words.get(i) {
        let value = || words.get(i + 1).copied().ok_or_else(CmdError::incomplete);
        match w {
            "buckets" => {
                let v = value()?;
                res.buckets = Some(
                    get_u16(v, 0).ok_or_else(|| CmdError::invarg("invalid buckets value", v))?,
                );
            }
            "idle_timer" => res.idle_timer = Some(timer(value()?, "invalid idle timer value")?),
            "unbalanced_timer" => {
                res.unbalanced_timer = Some(timer(value()?, "invalid unbalanced timer value")?)
            }
            _ => break,
        }
        i += 2;
    }
    Ok((Some(res), i - 1))
}

/// `ip nexthop bucket { list | show | get } ...` (iproute2's `do_ipnh_bucket`).
fn bucket(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let Some((&verb, rest)) = words.split_first() else {
        return bucket_list(cli, &[]);
    };
    if matches(verb, "list") || matches(verb, "show") || matches(verb, "lst") {
        return bucket_list(cli, rest);
    }
    if matches(verb, "get") {
        return bucket_get(cli, rest);
    }
    help_or_unknown(verb)
}

/// `ip nexthop bucket list [dev D] [id N] [nhid N]`: a dump with iproute2's selector, which
/// shares (and leaves set) the one of `ip nexthop show`.
fn bucket_list(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let mut a = Args::new(words);
    while let Some(w) = a.peek() {
        if matches(w, "dev") {
            cli.nh_filter.ifindex = filter_dev(cli, a.next_arg()?)?;
        } else if w == "id" {
            let v = a.next_arg()?;
            cli.nh_filter.id =
                get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid id value", v))?;
        } else if w == "nhid" {
            let v = a.next_arg()?;
            cli.nh_filter.nhid =
                get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid id value", v))?;
        } else if matches(w, "help") {
            return Err(CmdError::usage(USAGE));
        } else {
            return Err(CmdError::invarg("", w));
        }
        a.advance();
    }
    let f = cli.nh_filter.clone();
    let found = if f.groups || f.fdb {
        // The selectors persist, and the bucket dump's policy has no NHA_GROUPS or NHA_FDB:
        // the kernel refuses the request (EINVAL, no message).
        Err(RtError::new(Errno::EINVAL))
    } else {
        cli.fib.nexthop_buckets(
            (f.id != 0).then_some(f.id),
            (f.nhid != 0).then_some(f.nhid),
            f.ifindex,
        )
    };
    // A failed dump prints what the kernel said (nothing for ENOENT) and "Dump terminated".
    if found.is_err() && cli.opts.json {
        // iproute2 has opened its JSON array when the error arrives.
        cli.out.push(b'[');
    }
    let buckets = found.map_err(|e| {
        let text = match e.extack {
            Some(m) => format!("Error: {m}.\nDump terminated\n"),
            None if e.errno == Errno::ENOENT => "Dump terminated\n".to_string(),
            None => format!("{}Dump terminated\n", crate::error::rtnl_text(&e)),
        };
        CmdError::fail(2, text)
    })?;
    let mut p = cli.printer();
    for b in &buckets {
        print_bucket(&mut p, b);
    }
    cli.emit(p);
    Ok(())
}

/// `ip nexthop bucket get id N index I`.
fn bucket_get(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let mut a = Args::new(words);
    let (mut id, mut index) = (0, None);
    while let Some(w) = a.peek() {
        if w == "id" {
            let v = a.next_arg()?;
            id = get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid id value", v))?;
        } else if w == "index" {
            let v = a.next_arg()?;
            index = Some(
                get_u16(v, 0).ok_or_else(|| CmdError::invarg("invalid bucket index value", v))?,
            );
        } else {
            return Err(CmdError::usage(USAGE));
        }
        a.advance();
    }
    let (Some(index), true) = (index, id != 0) else {
        return Err(CmdError::usage(USAGE));
    };
    let b = cli
        .fib
        .nexthop_bucket(id, index)
        .map_err(|e| CmdError::rtnl(&e))?;
    let mut p = cli.printer();
    print_bucket(&mut p, &b);
    cli.emit(p);
    Ok(())
}

/// iproute2's `print_nexthop_bucket`.
pub fn print_bucket(p: &mut Printer, b: &NexthopBucket) {
    p.open_obj(None);
    p.num(Some("id"), "id ", b.id as i64, " ");
    p.open_obj(Some("bucket"));
    p.num(Some("index"), "index ", b.index as i64, " ");
    p.float(
        Some("idle_time"),
        "idle_time ",
        clock_t_secs(b.idle_time),
        " ",
    );
    p.num(Some("nhid"), "nhid ", b.nhid as i64, " ");
    p.close_obj();
    print_rt_flags(p, 0);
    p.text("\n");
    p.close_obj();
}

/// iproute2's `__jiffies_to_tv` and `print_tv`: clock_t ticks as seconds.
fn clock_t_secs(ticks: u64) -> f64 {
    let usec = ticks * 10_000;
    (usec / 1_000_000) as f64 + (usec % 1_000_000) as f64 / 1e6
}

/// Parses `ip nexthop add|replace` words.
pub fn parse(cli: &mut Cli, words: &[&str]) -> Result<NexthopObj, CmdError> {
    let mut nh = NexthopObj {
        id: 0,
        family: cli.opts.family,
        gateway: None,
        oif: 0,
        blackhole: false,
        onlink: false,
        fdb: false,
        group: Vec::new(),
        group_type: GROUP_MPATH,
        res: None,
        protocol: 0,
        flags: 0,
        scope: 0,
        encap: None,
    };
    let mut a = Args::new(words);
    while let Some(w) = a.peek() {
        if w == "id" {
            let v = a.next_arg()?;
            nh.id = get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid id value", v))?;
        } else if w == "dev" {
            let v = a.next_arg()?;
            nh.oif = cli
                .ifindex(v)
                .ok_or_else(|| CmdError::invarg("Device does not exist\n", v))?;
            nh.family = nh.family.or(Some(Family::Inet));
        } else if w == "via" {
            let mut v = a.next_arg()?;
            let fam = match read_family(v) {
                Some(f) => {
                    v = a.next_arg()?;
                    Some(f)
                }
                None => nh.family,
            };
            let ad = get_addr(v, fam)?;
            match nh.family {
                None => nh.family = ad.family,
                Some(f) if Some(f) != ad.family => {
                    return Err(CmdError::invarg("address family mismatch\n", v))
                }
                Some(_) => {}
            }
            nh.gateway = ad.addr;
        } else if w == "encap" {
            nh.encap = Some(crate::encap::parse(cli, &mut a)?);
        } else if w == "blackhole" {
            nh.blackhole = true;
            nh.family = nh.family.or(Some(Family::Inet));
        } else if w == "fdb" {
            nh.fdb = true;
        } else if w == "onlink" {
            nh.onlink = true;
            nh.flags |= nh_flags::ONLINK;
        } else if w == "group" {
            let v = a.next_arg()?;
            nh.group = group(v)?;
        } else if w == "type" {
            let v = a.next_arg()?;
            nh.group_type = match v {
                "mpath" => GROUP_MPATH,
                "resilient" => GROUP_RES,
                _ => return Err(CmdError::invarg("\"type\" value is invalid\n", v)),
            };
            if nh.group_type == GROUP_RES {
                let (res, used) = res_args(a.rest())?;
                nh.res = res;
                for _ in 0..used {
                    a.advance();
                }
            }
        } else if matches(w, "protocol") {
            let v = a.next_arg()?;
            nh.protocol = proto_a2n(v)
                .ok_or_else(|| CmdError::invarg("\"protocol\" value is invalid\n", v))?;
        } else if w == "help" {
            return Err(CmdError::usage(USAGE));
        } else {
            return Err(CmdError::invarg("", w));
        }
        a.advance();
    }
    Ok(nh)
}

/// The selector of `ip nexthop show|flush`. iproute2 keeps it in a static that nothing resets,
/// so within a batch each selector word stays in force for the later commands (and the count
/// of flushed next hops keeps growing); [`Cli`] keeps one for the same answers.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    ifindex: u32,
    groups: bool,
    /// `fdb`: sent as NHA_FDB, which selects nothing in a next-hop dump but makes the kernel
    /// refuse a later bucket dump (as `groups` does).
    fdb: bool,
    proto: u32,
    flushed: u32,
    /// `ip nexthop bucket list id N` / `nhid N`.
    id: u32,
    nhid: u32,
}

impl Filter {
    /// The kernel's nh_dump_filtered (6.18): `groups` keeps groups only; a device or a
    /// family keeps single next hops only, of that family, on that device (a blackhole is on
    /// `lo`, an fdb next hop on none). The `fdb` selector iproute2 sends filters nothing.
    fn selects(&self, n: &NexthopObj, family: Option<Family>) -> bool {
        if self.groups && n.group.is_empty() {
            return false;
        }
        if self.ifindex == 0 && family.is_none() {
            return true;
        }
        if !n.group.is_empty() || (family.is_some() && n.family != family) {
            return false;
        }
        let dev = if n.blackhole {
            fibre_fib::LOOPBACK_IFINDEX
        } else {
            n.oif
        };
        self.ifindex == 0 || dev == self.ifindex
    }
}

/// The device of a `dev D` selector.
fn filter_dev(cli: &mut Cli, v: &str) -> Result<u32, CmdError> {
    cli.ifindex(v)
        .ok_or_else(|| CmdError::invarg("Device does not exist\n", v))
}

/// `ip nexthop show|flush [dev D] [groups] [fdb] [protocol P] [id N]`.
fn list(cli: &mut Cli, words: &[&str], flush: bool) -> Result<(), CmdError> {
    let all = words.is_empty();
    let mut a = Args::new(words);
    while let Some(w) = a.peek() {
        if matches(w, "dev") {
            cli.nh_filter.ifindex = filter_dev(cli, a.next_arg()?)?;
        } else if matches(w, "groups") {
            cli.nh_filter.groups = true;
        } else if w == "id" {
            let v = a.next_arg()?;
            let id = get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid id value", v))?;
            if !flush {
                return get(cli, id);
            }
            return cli.fib.nexthop_del(id).map_err(|e| CmdError::rtnl(&e));
        } else if matches(w, "protocol") {
            let v = a.next_arg()?;
            cli.nh_filter.proto =
                get_u32(v, 0).ok_or_else(|| CmdError::invarg("invalid protocol value", v))?;
        } else if matches(w, "fdb") {
            cli.nh_filter.fdb = true;
        } else if matches(w, "help") {
            return Err(CmdError::usage(USAGE));
        } else {
            return Err(CmdError::invarg("", w));
        }
        a.advance();
    }
    let family = cli.opts.family;
    if flush {
        if all {
            cli.nh_filter.groups = true;
            cli.nh_filter.ifindex = 0;
        }
        loop {
            let f = cli.nh_filter.clone();
            for n in cli.fib.nexthops().iter().filter(|n| f.selects(n, family)) {
                if f.proto != 0 && n.protocol as u32 != f.proto {
                    continue;
                }
                if cli.fib.nexthop_del(n.id).is_ok() {
                    cli.nh_filter.flushed += 1;
                }
            }
            // With no selector, groups go first so their members can go after.
            if all && cli.nh_filter.groups {
                cli.nh_filter.groups = false;
                continue;
            }
            break;
        }
        let msg = match cli.nh_filter.flushed {
            0 => "Nothing to flush\n".to_string(),
            n => format!("Flushed {n} nexthops\n"),
        };
        cli.out.extend_from_slice(msg.as_bytes());
        return Ok(());
    }
    let f = cli.nh_filter.clone();
    let all_nh = cli.fib.nexthops();
    let names = cli.names();
    let details = cli.opts.details > 0;
    let mut p = cli.printer();
    for n in all_nh.iter().filter(|n| f.selects(n, family)) {
        print_nexthop(&mut p, n, &names, details);
    }
    cli.emit(p);
    Ok(())
}

/// iproute2's `print_nexthop`.
pub fn print_nexthop(p: &mut Printer, n: &NexthopObj, names: &Names, details: bool) {
    p.open_obj(None);
    p.num(Some("id"), "id ", n.id as i64, " ");
    if !n.group.is_empty() {
        p.open_arr(Some("group"));
        p.text("group ");
        for (i, m) in n.group.iter().enumerate() {
            p.open_obj(None);
            if i > 0 {
                p.text("/");
            }
            p.num(Some("id"), "", m.id as i64, "");
            if m.weight_minus_one != 0 {
                p.num(Some("weight"), ",", m.weight_minus_one as i64 + 1, "");
            }
            p.close_obj();
        }
        p.close_arr();
        p.text(" ");
        if n.group_type == GROUP_RES {
            p.str(Some("type"), "type ", "resilient", " ");
        }
        if let Some(r) = n.res {
            // print_nh_res_group
            p.open_obj(Some("resilient_args"));
            p.num(
                Some("buckets"),
                "buckets ",
                r.buckets.unwrap_or(0) as i64,
                " ",
            );
            for (key, v) in [
                ("idle_timer", r.idle_timer.unwrap_or(0) as u64),
                ("unbalanced_timer", r.unbalanced_timer.unwrap_or(0) as u64),
                ("unbalanced_time", r.unbalanced_time.unwrap_or(0)),
            ] {
                p.float(Some(key), &format!("{key} "), clock_t_secs(v), " ");
            }
            p.close_obj();
        }
    }
    if let Some(e) = &n.encap {
        crate::encap::print(p, e, names, false);
    }
    if let Some(gw) = &n.gateway {
        p.str(Some("gateway"), "via ", &gw.to_string(), " ");
    }
    if n.oif != 0 {
        p.str(Some("dev"), "dev ", &names.get(n.oif), " ");
    }
    let sc = n.scope;
    if sc != scope::UNIVERSE || details {
        p.str(Some("scope"), "scope ", &scope_n2a(sc), " ");
    }
    if n.blackhole {
        p.null("blackhole", "blackhole ");
    }
    if n.protocol != 0 || details {
        p.str(Some("protocol"), "proto ", &proto_n2a(n.protocol), " ");
    }
    let flags = n.flags | if n.onlink { nh_flags::ONLINK } else { 0 };
    print_rt_flags(p, flags);
    if n.fdb {
        p.null("fdb", "fdb");
    }
    p.text("\n");
    p.close_obj();
}

/// `help`, or iproute2's answer to an unknown verb of `ip nexthop`.
fn help_or_unknown(verb: &str) -> Result<(), CmdError> {
    if matches(verb, "help") {
        return Err(CmdError::usage(USAGE));
    }
    Err(CmdError::exit(
        255,
        format!("Command \"{verb}\" is unknown, try \"ip nexthop help\".\n"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;
    use fibre_fib::Fib;

    fn show(n: &NexthopObj, json: bool) -> String {
        let names = Names(vec![
            None,
            Some("lo".into()),
            Some("d0".into()),
            Some("d1".into()),
        ]);
        let mut p = Printer::new(json, false);
        print_nexthop(&mut p, n, &names, false);
        String::from_utf8(p.finish()).unwrap()
    }

    fn parse_str(s: &str) -> NexthopObj {
        let w: Vec<&str> = s.split_whitespace().collect();
        parse(&mut Cli::new(Fib::default(), Options::default()), &w).unwrap()
    }

    /// Kernel 6.18 with iproute2 6.1: `nexthop del id 0` and `nexthop del` reach the kernel,
    /// which refuses them (the batch goes on); `nexthop get id 0` is iproute2's usage error.
    #[test]
    fn delete_without_a_usable_id_is_the_kernels_error() {
        let mut cli = Cli::new(Fib::default(), Options::default());
        let fail = |m: &str| CmdError::fail(2, format!("Error: {m}.\n"));
        assert_eq!(
            run(&mut cli, &["del", "id", "0"]),
            Err(fail("Invalid nexthop id"))
        );
        assert_eq!(run(&mut cli, &["del"]), Err(fail("Nexthop id is missing")));
        assert!(matches!(
            run(&mut cli, &["get", "id", "0"]),
            Err(CmdError::Exit { status: 255, .. })
        ));
    }

    /// iproute2 6.1 with kernel 6.18: `nexthop add id 11 group 1,2/2/3 type resilient buckets
    /// 16 idle_timer 60 unbalanced_timer 30`, then `nexthop show [-j]` and `nexthop bucket
    /// show [-j]`.
    #[test]
    fn resilient_groups_parse_and_print_like_iproute2() {
        let mut n = parse_str(
            "id 11 group 1,2/2/3 type resilient buckets 16 idle_timer 60 unbalanced_timer 30",
        );
        assert_eq!(n.group_type, GROUP_RES);
        assert_eq!(
            n.res,
            Some(ResGroup {
                buckets: Some(16),
                idle_timer: Some(6000),
                unbalanced_timer: Some(3000),
                unbalanced_time: None,
            })
        );
        // Nothing after `resilient`: no NHA_RES_GROUP; a word that is no resilient argument
        // ends them and is parsed as usual.
        assert_eq!(parse_str("id 4 group 1 type resilient").res, None);
        let p = parse_str("id 4 group 1 type resilient protocol 99");
        assert_eq!((p.res, p.protocol), (Some(ResGroup::default()), 99));
        assert_eq!(
            show(&n, false),
            "id 11 group 1,2/2/3 type resilient buckets 16 idle_timer 60 unbalanced_timer 30 unbalanced_time 0 \n"
        );
        assert_eq!(
            show(&n, true),
            "[{\"id\":11,\"group\":[{\"id\":1,\"weight\":2},{\"id\":2},{\"id\":3}],\"type\":\"resilient\",\"resilient_args\":{\"buckets\":16,\"idle_timer\":60,\"unbalanced_timer\":30,\"unbalanced_time\":0},\"flags\":[]}]\n"
        );
        n.res = n.res.map(|r| ResGroup {
            unbalanced_time: Some(9467),
            ..r
        });
        assert!(show(&n, false).contains(" unbalanced_time 94.67 "));
        let b = NexthopBucket {
            id: 10,
            index: 0,
            nhid: 2,
            idle_time: 4,
            protocol: 0,
        };
        for (json, want) in [
            (false, "id 10 index 0 idle_time 0.04 nhid 2 \n"),
            (
                true,
                "[{\"id\":10,\"bucket\":{\"index\":0,\"idle_time\":0.04,\"nhid\":2},\"flags\":[]}]\n",
            ),
        ] {
            let mut p = Printer::new(json, false);
            print_bucket(&mut p, &b);
            assert_eq!(String::from_utf8(p.finish()).unwrap(), want);
        }
        let mut cli = Cli::new(Fib::default(), Options::default());
        let bad = |cli: &mut Cli, w: &str| {
            let words: Vec<&str> = w.split_whitespace().collect();
            parse(cli, &words).unwrap_err().message().to_string()
        };
        assert_eq!(
            bad(&mut cli, "id 4 group 1 type resilient buckets 65536"),
            "Error: argument \"65536\" is wrong: invalid buckets value\n"
        );
        assert_eq!(
            bad(&mut cli, "id 4 group 1 type resilient idle_timer 42949672"),
            "Error: argument \"42949672\" is wrong: invalid idle timer value\n"
        );
    }

    /// Kernel 6.18 with iproute2 6.1: which objects `nexthop show` selects with `dev`,
    /// `-4`/`-6`, `groups` and `fdb` (each a separate `ip` command).
    #[test]
    fn show_selectors_filter_as_the_kernels_dump() {
        let setup = [
            "link set lo up",
            "link add d0 type dummy",
            "link add d1 type dummy",
            "link set d0 up",
            "link set d1 up",
            "address add 10.0.0.1/24 dev d0",
            "nexthop add id 1 via 10.0.0.2 dev d0",
            "nexthop add id 3 dev d1",
            "nexthop add id 4 blackhole",
            "-6 nexthop add id 6 blackhole",
            "nexthop add id 7 via 10.0.0.9 fdb",
            "nexthop add id 9 group 7 fdb",
            "nexthop add id 20 group 1/3",
        ];
        let ids = |cmd: &str| -> Vec<u32> {
            let mut cli = Cli::new(Fib::default(), Options::default());
            for line in setup {
                let mut w: Vec<&str> = line.split_whitespace().collect();
                cli.opts.family = (w[0] == "-6").then_some(Family::Inet6);
                if w[0] == "-6" {
                    w.remove(0);
                }
                cli.exec(&w).unwrap();
            }
            let mut w: Vec<&str> = cmd.split_whitespace().collect();
            cli.opts.family = match w[0] {
                "-6" => Some(Family::Inet6),
                "-4" => Some(Family::Inet),
                _ => None,
            };
            if cli.opts.family.is_some() {
                w.remove(0);
            }
            cli.out.clear();
            cli.exec(&w).unwrap();
            String::from_utf8(std::mem::take(&mut cli.out))
                .unwrap()
                .lines()
                .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
                .collect()
        };
        assert_eq!(ids("nexthop show dev lo"), [4, 6]);
        assert_eq!(ids("nexthop show dev d1"), [3]);
        assert_eq!(ids("nexthop show groups"), [9, 20]);
        assert_eq!(ids("nexthop show fdb"), [1, 3, 4, 6, 7, 9, 20]);
        assert_eq!(ids("-6 nexthop show"), [6]);
        assert_eq!(ids("-4 nexthop show"), [1, 3, 4, 7]);
        assert_eq!(ids("-6 nexthop show groups"), Vec::<u32>::new());
    }

    #[test]
    fn nexthops_print_like_iproute2() {
        // From `ip nexthop show` / `ip -j nexthop show` after the same adds (iproute2 6.1).
        let mut n = parse_str("id 1 via 10.0.0.2");
        n.oif = 2;
        n.scope = scope::LINK;
        assert_eq!(show(&n, false), "id 1 via 10.0.0.2 dev d0 scope link \n");
        assert_eq!(
            show(&n, true),
            "[{\"id\":1,\"gateway\":\"10.0.0.2\",\"dev\":\"d0\",\"scope\":\"link\",\"flags\":[]}]\n"
        );
        let n = parse_str("id 3 blackhole");
        assert_eq!(show(&n, false), "id 3 blackhole \n");
        assert_eq!(
            show(&n, true),
            "[{\"id\":3,\"blackhole\":null,\"flags\":[]}]\n"
        );
        let n = parse_str("id 4 group 1/2,3");
        assert_eq!(
            n.group,
            vec![
                GroupMember {
                    id: 1,
                    weight_minus_one: 0
                },
                GroupMember {
                    id: 2,
                    weight_minus_one: 2
                }
            ]
        );
        assert_eq!(show(&n, false), "id 4 group 1/2,3 \n");
        assert_eq!(
            show(&n, true),
            "[{\"id\":4,\"group\":[{\"id\":1},{\"id\":2,\"weight\":3}],\"flags\":[]}]\n"
        );
        let mut n = parse_str("id 2 via 10.1.0.2 onlink");
        n.oif = 3;
        n.scope = scope::LINK;
        assert_eq!(
            show(&n, false),
            "id 2 via 10.1.0.2 dev d1 scope link onlink \n"
        );
    }
}
