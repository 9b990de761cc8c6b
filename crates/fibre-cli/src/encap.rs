//! `encap seg6|seg6local|ioam6|rpl ...` on routes and next hops: iproute2's parser
//! (ip/iproute_lwtunnel.c: lwt_parse_encap and the per-type parsers, with their messages and
//! the headers they build) and its printer (lwt_print_encap), text and JSON.
//!
//! The parser leaves the argument cursor on the last word it consumed, as iproute2's parsers
//! leave `argv` for their caller's `NEXT_ARG`. Headers are built as iproute2 builds them: a
//! seg6 SRH keeps a slot for the final destination except in the encap modes (segment 0 left
//! `::`), an HMAC key id adds the HMAC flag and a 40-byte TLV, an RPL header carries its
//! addresses uncompressed, an IOAM trace header its type, namespace and size (the node length is
//! the FIB's to compute).

use std::net::{IpAddr, Ipv6Addr};

use fibre_fib::encap::{
    action, flavor, hmac, ioam6_mode, seg6_mode, segments, Counters, Encap, Flavors, Ioam6, Rpl,
    Seg6, Seg6Local,
};
use fibre_fib::types::Family;
use fibre_wire::srh;

use crate::args::{get_addr, get_u16, get_u32, get_u8, Args};
use crate::error::CmdError;
use crate::names::{table_a2n, table_n2a};
use crate::out::Printer;
use crate::{Cli, Names};

/// Encapsulation type names, LWTUNNEL_ENCAP_* order (format_encap_type / read_encap_type).
const TYPES: [&str; 10] = [
    "mpls",
    "ip",
    "ila",
    "ip6",
    "seg6",
    "bpf",
    "seg6local",
    "rpl",
    "ioam6",
    "xfrm",
];

/// seg6 mode names by SEG6_IPTUN_MODE_* value.
const SEG6_MODES: [&str; 5] = ["inline", "encap", "l2encap", "encap.red", "l2encap.red"];

/// seg6local behaviour names by SEG6_LOCAL_ACTION_* value.
const ACTIONS: [(u32, &str); 16] = [
    (action::END, "End"),
    (action::END_X, "End.X"),
    (action::END_T, "End.T"),
    (action::END_DX2, "End.DX2"),
    (action::END_DX6, "End.DX6"),
    (action::END_DX4, "End.DX4"),
    (action::END_DT6, "End.DT6"),
    (action::END_DT4, "End.DT4"),
    (action::END_B6, "End.B6"),
    (action::END_B6_ENCAP, "End.B6.Encaps"),
    (action::END_BM, "End.BM"),
    (action::END_S, "End.S"),
    (action::END_AS, "End.AS"),
    (action::END_AM, "End.AM"),
    (action::END_BPF, "End.BPF"),
    (action::END_DT46, "End.DT46"),
];

/// Flavor names by SEG6_LOCAL_FLV_OP_* bit.
const FLAVORS: [(u32, &str); 4] = [
    (flavor::PSP, "psp"),
    (flavor::USP, "usp"),
    (flavor::USD, "usd"),
    (flavor::NEXT_CSID, "next-csid"),
];

/// IOAM6 mode names by IOAM6_IPTUNNEL_MODE_* value.
const IOAM6_MODES: [(u8, &str); 3] = [
    (ioam6_mode::INLINE, "inline"),
    (ioam6_mode::ENCAP, "encap"),
    (ioam6_mode::AUTO, "auto"),
];

/// The largest pre-allocated trace iproute2 accepts (IOAM6_TRACE_DATA_SIZE_MAX).
const TRACE_SIZE_MAX: u16 = 244;

/// IOAM6_IPTUNNEL_FREQ_MIN / _MAX.
const FREQ_MIN: u32 = 1;
const FREQ_MAX: u32 = 1_000_000;

/// iproute2's `missarg`.
fn missarg(key: &str) -> CmdError {
    CmdError::exit(255, format!("Error: argument \"{key}\" is required\n"))
}

/// lwt_parse_encap, the cursor on "encap".
pub fn parse(cli: &mut Cli, a: &mut Args) -> Result<Encap, CmdError> {
    let t = a.next_arg()?;
    let Some(kind) = TYPES.iter().position(|n| *n == t) else {
        return Err(CmdError::invarg("\"encap type\" value is invalid\n", t));
    };
    a.next_arg()?;
    if a.rest().len() <= 1 {
        return Err(CmdError::exit(
            255,
            "Error: unexpected end of line after \"encap\"\n",
        ));
    }
    match TYPES[kind] {
        "seg6" => parse_seg6(a),
        "seg6local" => parse_seg6local(cli, a),
        "rpl" => parse_rpl(a),
        "ioam6" => parse_ioam6(a),
        other => Err(CmdError::fail(
            1,
            format!("Error: fibre does not support \"encap {other}\" yet.\n"),
        )),
    }
}

/// iproute2's parse_srh: `segs A,B,...` as the SRH the route pushes; `room_for_dst` keeps
/// segment 0 for the packet's own destination (inline, End.B6).
fn build_srh(segs: &str, hmac: u32, room_for_dst: bool) -> Result<Vec<u8>, CmdError> {
    let mut nsegs = segs.matches(',').count() + 1;
    if room_for_dst {
        nsegs += 1;
    }
    let len =
        srh::HEADER_LEN + srh::SEGMENT_LEN * nsegs + if hmac != 0 { srh::HMAC_TLV_LEN } else { 0 };
    let mut b = vec![0u8; len];
    // Written by hand rather than through `srh::Repr`: iproute2 builds any number of
    // segments, letting the length byte wrap, and the kernel is the one to refuse it.
    b[1] = (len / 8 - 1) as u8;
    b[2] = srh::ROUTING_TYPE;
    b[3] = (nsegs - 1) as u8;
    b[4] = (nsegs - 1) as u8;
    if hmac != 0 {
        b[5] = srh::FLAG_HMAC;
    }
    let mut i = nsegs - 1;
    for s in segs.split(',').filter(|s| !s.is_empty()) {
        let ad = get_addr(s, Some(Family::Inet6))?;
        let IpAddr::V6(v6) = ad.addr_or_zero(Family::Inet6) else {
            return Err(CmdError::invarg("invalid address\n", s));
        };
        let at = srh::HEADER_LEN + srh::SEGMENT_LEN * i;
        b[at..at + srh::SEGMENT_LEN].copy_from_slice(&v6.octets());
        i = i.saturating_sub(1);
    }
    if hmac != 0 {
        let t = len - srh::HMAC_TLV_LEN;
        b[t] = srh::tlv::HMAC;
        // The TLV's length byte counts what follows it; the HMAC field the kernel fills.
        b[t + 1] = (srh::HMAC_TLV_LEN - 2) as u8;
        let id = t + srh::HMAC_KEY_ID_AT;
        b[id..id + 4].copy_from_slice(&hmac.to_be_bytes());
    }
    Ok(b)
}

fn parse_seg6(a: &mut Args) -> Result<Encap, CmdError> {
    let (mut mode, mut segs, mut hmac) = (None::<i32>, None::<&str>, None::<u32>);
    while let Some(w) = a.peek() {
        if w == "mode" {
            let v = a.next_arg()?;
            if mode.is_some() {
                return Err(CmdError::duparg2("mode", v));
            }
            let m = SEG6_MODES.iter().position(|n| *n == v);
            mode =
                Some(m.ok_or_else(|| CmdError::invarg("\"mode\" value is invalid\n", v))? as i32);
        } else if w == "segs" {
            let v = a.next_arg()?;
            if segs.is_some() {
                return Err(CmdError::duparg2("segs", v));
            }
            if mode.is_none() {
                return Err(CmdError::invarg("\"segs\" provided before \"mode\"\n", v));
            }
            segs = Some(v);
        } else if w == "hmac" {
            let v = a.next_arg()?;
            if hmac.is_some() {
                return Err(CmdError::duparg2("hmac", v));
            }
            // iproute2 ignores a key id that does not parse (leaving 0: no HMAC).
            hmac = Some(get_u32(v, 0).unwrap_or(0));
        } else {
            break;
        }
        a.advance();
    }
    a.back();
    let mode = mode.unwrap_or(-1);
    let srh = build_srh(
        segs.unwrap_or(""),
        hmac.unwrap_or(0),
        mode == seg6_mode::INLINE,
    )?;
    Ok(Encap::Seg6(Seg6 { mode, srh }))
}

fn parse_rpl(a: &mut Args) -> Result<Encap, CmdError> {
    let mut segs = None::<&str>;
    while let Some(w) = a.peek() {
        if w != "segs" {
            break;
        }
        let v = a.next_arg()?;
        if segs.is_some() {
            return Err(CmdError::duparg2("segs", v));
        }
        segs = Some(v);
        a.advance();
    }
    a.back();
    // parse_rpl_srh: segments-left the address count, the addresses last first.
    let list: Vec<&str> = segs.unwrap_or("").split(',').collect();
    let n = list.len();
    let mut b = vec![0u8; 8 + 16 * n];
    b[1] = (2 * n) as u8;
    b[2] = fibre_wire::rpl::ROUTING_TYPE;
    b[3] = n as u8;
    for (k, s) in list.iter().enumerate().filter(|(_, s)| !s.is_empty()) {
        let ad = get_addr(s, Some(Family::Inet6))?;
        if let IpAddr::V6(v6) = ad.addr_or_zero(Family::Inet6) {
            let i = n - 1 - k;
            b[8 + 16 * i..8 + 16 * (i + 1)].copy_from_slice(&v6.octets());
        }
    }
    Ok(Encap::Rpl(Rpl { srh: b }))
}

/// parse_seg6local_flavors: a comma list of flavor names, none twice.
fn flavor_mask(list: &str) -> Option<u32> {
    if list.is_empty() {
        return None;
    }
    let mut mask = 0u32;
    for name in list.split(',') {
        let (bit, _) = FLAVORS.iter().find(|(_, n)| n.eq_ignore_ascii_case(name))?;
        if mask & (1 << bit) != 0 {
            return None;
        }
        mask |= 1 << bit;
    }
    Some(mask)
}

fn parse_seg6local(cli: &mut Cli, a: &mut Args) -> Result<Encap, CmdError> {
    let mut s = Seg6Local::default();
    let (mut srh_segs, mut hmac) = (None::<&str>, None::<u32>);
    let mut seen: Vec<&str> = Vec::new();
    let mut once = |key: &'static str, v: &str| -> Result<(), CmdError> {
        if seen.contains(&key) {
            return Err(CmdError::duparg2(key, v));
        }
        seen.push(key);
        Ok(())
    };
    while let Some(w) = a.peek() {
        match w {
            "action" => {
                let v = a.next_arg()?;
                once("action", v)?;
                let act = ACTIONS.iter().find(|(_, n)| *n == v);
                s.action = act
                    .ok_or_else(|| CmdError::invarg("\"action\" value is invalid\n", v))?
                    .0;
            }
            "table" => {
                let v = a.next_arg()?;
                once("table", v)?;
                s.table =
                    Some(table_a2n(v).ok_or_else(|| CmdError::invarg("invalid table id\n", v))?);
            }
            "vrftable" => {
                let v = a.next_arg()?;
                once("vrftable", v)?;
                s.vrftable = Some(
                    table_a2n(v).ok_or_else(|| CmdError::invarg("invalid vrf table id\n", v))?,
                );
            }
            "nh4" => {
                let v = a.next_arg()?;
                once("nh4", v)?;
                if let IpAddr::V4(x) = get_addr(v, Some(Family::Inet))?.addr_or_zero(Family::Inet) {
                    s.nh4 = Some(x);
                }
            }
            "nh6" => {
                let v = a.next_arg()?;
                once("nh6", v)?;
                if let IpAddr::V6(x) = get_addr(v, Some(Family::Inet6))?.addr_or_zero(Family::Inet6)
                {
                    s.nh6 = Some(x);
                }
            }
            "iif" | "oif" => {
                let key = if w == "iif" { "iif" } else { "oif" };
                let v = a.next_arg()?;
                once(key, v)?;
                let i = cli.ifindex(v).ok_or_else(|| CmdError::nodev(v))?;
                if key == "iif" {
                    s.iif = Some(i);
                } else {
                    s.oif = Some(i);
                }
            }
            "count" => {
                once("count", w)?;
                s.counters = Some(Counters::default());
            }
            "flavors" => {
                let v = a.next_arg()?;
                once("flavors", v)?;
                let bad = || CmdError::invarg("invalid \"flavors\" attribute\n", v);
                let ops = flavor_mask(v).ok_or_else(bad)?;
                let mut f = Flavors {
                    ops: Some(ops),
                    ..Flavors::default()
                };
                if ops & (1 << flavor::NEXT_CSID) != 0 {
                    if a.rest().get(1) == Some(&"lblen") {
                        a.advance();
                        let l = a.next_arg()?;
                        f.lcblock_bits = Some(get_u8(l, 0).ok_or_else(|| {
                            CmdError::invarg("\"locator-block length\" value is invalid\n", l)
                        })?);
                    }
                    if a.rest().get(1) == Some(&"nflen") {
                        a.advance();
                        let l = a.next_arg()?;
                        f.lcnode_fn_bits = Some(get_u8(l, 0).ok_or_else(|| {
                            CmdError::invarg(
                                "\"locator-node function length\" value is invalid\n",
                                l,
                            )
                        })?);
                    }
                }
                s.flavors = Some(f);
            }
            "srh" => {
                let v = a.next_arg()?;
                once("srh", v)?;
                if v != "segs" {
                    return Err(CmdError::invarg("missing \"segs\" attribute for srh\n", v));
                }
                let segs = a.next_arg()?;
                srh_segs = Some(segs);
                if a.rest().get(1) == Some(&"hmac") {
                    a.advance();
                    let k = a.next_arg()?;
                    once("hmac", k)?;
                    hmac = Some(get_u32(k, 0).unwrap_or(0));
                }
            }
            "endpoint" => {
                return Err(CmdError::fail(
                    1,
                    "Error: fibre does not support \"endpoint\" (End.BPF) yet.\n",
                ))
            }
            _ => break,
        }
        a.advance();
    }
    if s.action == 0 {
        return Err(CmdError::exit(255, "Missing action type\n"));
    }
    if let Some(segs) = srh_segs {
        let room = s.action != action::END_B6_ENCAP;
        s.srh = Some(build_srh(segs, hmac.unwrap_or(0), room)?);
    }
    a.back();
    Ok(Encap::Seg6Local(s))
}

fn parse_ioam6(a: &mut Args) -> Result<Encap, CmdError> {
    let mut s = Ioam6::default();
    let mut w = a.peek().unwrap_or("");
    if w == "freq" {
        let v = a.next_arg()?;
        if v.len() > 15 {
            return Err(CmdError::invarg("Invalid frequency (too long)", v));
        }
        let parts: Vec<&str> = v.split('/').collect();
        let (k, n) = match parts[..] {
            [k, n] => (get_u32(k, 10), get_u32(n, 10)),
            _ => (None, None),
        };
        let (Some(k), Some(n)) = (k, n) else {
            return Err(CmdError::invarg("Invalid frequency (malformed)", v));
        };
        if !(FREQ_MIN..=FREQ_MAX).contains(&k) {
            return Err(CmdError::invarg("Out of bound \"k\" frequency", v));
        }
        if !(FREQ_MIN..=FREQ_MAX).contains(&n) {
            return Err(CmdError::invarg("Out of bound \"n\" frequency", v));
        }
        if k > n {
            return Err(CmdError::invarg("Frequency with k > n is forbidden", v));
        }
        (s.freq_k, s.freq_n) = (Some(k), Some(n));
        w = a.next_arg()?;
    } else {
        (s.freq_k, s.freq_n) = (Some(FREQ_MIN), Some(FREQ_MIN));
    }
    let mode = if w == "mode" {
        let v = a.next_arg()?;
        let m = IOAM6_MODES.iter().find(|(_, n)| *n == v);
        let m = m.ok_or_else(|| CmdError::invarg("Invalid mode", v))?.0;
        w = a.next_arg()?;
        m
    } else {
        ioam6_mode::INLINE
    };
    s.mode = Some(mode);
    if w == "tundst" {
        if mode == ioam6_mode::INLINE {
            return Err(CmdError::invarg("Inline mode does not need tundst", w));
        }
        let v = a.next_arg()?;
        match get_addr(v, Some(Family::Inet6))?.addr_or_zero(Family::Inet6) {
            IpAddr::V6(d) => s.dst = Some(d),
            IpAddr::V4(_) => return Err(CmdError::invarg("Invalid IPv6 address for tundst", v)),
        }
        w = a.next_arg()?;
    } else if mode != ioam6_mode::INLINE {
        return Err(missarg("tundst"));
    }
    if w != "trace" {
        return Err(missarg("trace"));
    }
    if a.next_arg()? != "prealloc" {
        return Err(missarg("prealloc"));
    }
    let (mut ty, mut ns, mut size) = (0u32, None::<u16>, 0u16);
    while a.rest().len() > 1 {
        a.advance();
        let Some(w) = a.peek() else { break };
        match w {
            "type" => {
                let v = a.next_arg()?;
                if ty != 0 {
                    return Err(CmdError::duparg2("type", v));
                }
                ty = get_u32(v, 0)
                    .filter(|t| *t != 0)
                    .ok_or_else(|| CmdError::invarg("Invalid trace type", v))?;
            }
            "ns" => {
                let v = a.next_arg()?;
                if ns.is_some() {
                    return Err(CmdError::duparg2("ns", v));
                }
                ns =
                    Some(get_u16(v, 0).ok_or_else(|| CmdError::invarg("Invalid namespace ID", v))?);
            }
            "size" => {
                let v = a.next_arg()?;
                if size != 0 {
                    return Err(CmdError::duparg2("size", v));
                }
                size = get_u16(v, 0)
                    .filter(|s| *s != 0)
                    .ok_or_else(|| CmdError::invarg("Invalid trace size", v))?;
                if size % 4 != 0 {
                    return Err(CmdError::invarg("Trace size must be a 4-octet multiple", v));
                }
                if size > TRACE_SIZE_MAX {
                    return Err(CmdError::invarg("Trace size is too big", v));
                }
            }
            _ => {
                a.back();
                break;
            }
        }
    }
    if ty == 0 {
        return Err(missarg("type"));
    }
    let Some(ns) = ns else {
        return Err(missarg("ns"));
    };
    if size == 0 {
        return Err(missarg("size"));
    }
    let mut trace = vec![0u8; 8];
    trace[0..2].copy_from_slice(&ns.to_be_bytes());
    trace[3] = (size / 4) as u8;
    trace[4..8].copy_from_slice(&(ty << 8).to_be_bytes());
    s.trace = Some(trace);
    Ok(Encap::Ioam6(s))
}

/// lwt_print_encap: " encap TYPE " and the type's fields. `stats` is `-s` (seg6local
/// counters).
pub fn print(p: &mut Printer, e: &Encap, names: &Names, stats: bool) {
    let kind = match e {
        Encap::Seg6(_) => "seg6",
        Encap::Seg6Local(_) => "seg6local",
        Encap::Ioam6(_) => "ioam6",
        Encap::Rpl(_) => "rpl",
    };
    p.str(Some("encap"), " encap ", kind, " ");
    match e {
        Encap::Seg6(s) => {
            let mode = usize::try_from(s.mode)
                .ok()
                .and_then(|m| SEG6_MODES.get(m))
                .copied()
                .unwrap_or("<unknown>");
            p.str(Some("mode"), "mode ", mode, " ");
            print_srh(p, &s.srh);
        }
        Encap::Seg6Local(s) => print_seg6local(p, s, names, stats),
        Encap::Ioam6(s) => print_ioam6(p, s),
        Encap::Rpl(s) => {
            let segs = s.segments();
            print_segs(p, &segs);
        }
    }
}

fn print_segs(p: &mut Printer, segs: &[Ipv6Addr]) {
    if p.is_json() {
        p.open_arr(Some("segs"));
        for a in segs {
            p.jstr(None, &a.to_string());
        }
        p.close_arr();
    } else {
        p.text(&format!("segs {} [ ", segs.len()));
        for a in segs {
            p.text(&format!("{a} "));
        }
        p.text("] ");
    }
}

/// print_srh: the segments, first of the path first, and the HMAC key id (hex).
fn print_srh(p: &mut Printer, srh: &[u8]) {
    print_segs(p, &segments(srh));
    if let Some(k) = hmac(srh) {
        if p.is_json() {
            p.jstr(Some("hmac"), &format!("{k:#x}"));
        } else {
            p.text(&format!("hmac {k:X} "));
        }
    }
}

fn print_seg6local(p: &mut Printer, s: &Seg6Local, names: &Names, stats: bool) {
    let name = ACTIONS
        .iter()
        .find(|(a, _)| *a == s.action)
        .map_or("<unknown>", |(_, n)| n);
    p.str(Some("action"), "action ", name, " ");
    if let Some(srh) = &s.srh {
        p.open_obj(Some("srh"));
        print_srh(p, srh);
        p.close_obj();
    }
    if let Some(t) = s.table {
        p.str(Some("table"), "table ", &table_n2a(t), " ");
    }
    if let Some(t) = s.vrftable {
        p.str(Some("vrftable"), "vrftable ", &table_n2a(t), " ");
    }
    if let Some(a) = s.nh4 {
        p.str(Some("nh4"), "nh4 ", &a.to_string(), " ");
    }
    if let Some(a) = s.nh6 {
        p.str(Some("nh6"), "nh6 ", &a.to_string(), " ");
    }
    if let Some(i) = s.iif {
        p.str(Some("iif"), "iif ", &names.get(i), " ");
    }
    if let Some(i) = s.oif {
        p.str(Some("oif"), "oif ", &names.get(i), " ");
    }
    if let Some(c) = s.counters.filter(|_| stats) {
        if p.is_json() {
            p.open_obj(Some("stats64"));
            p.jnum(Some("packets"), c.packets as i64);
            p.jnum(Some("bytes"), c.bytes as i64);
            p.jnum(Some("errors"), c.errors as i64);
            p.close_obj();
        } else {
            p.text(&format!(
                "packets {} bytes {} errors {} ",
                c.packets, c.bytes, c.errors
            ));
        }
    }
    if let Some(f) = s.flavors {
        if let Some(ops) = f.ops {
            let on: Vec<&str> = FLAVORS
                .iter()
                .filter(|(b, _)| ops & (1 << b) != 0)
                .map(|(_, n)| *n)
                .collect();
            if p.is_json() {
                p.open_arr(Some("flavors"));
                for n in &on {
                    p.jstr(None, n);
                }
                p.close_arr();
            } else {
                p.text(&format!("flavors {} ", on.join(",")));
            }
        }
        if let Some(b) = f.lcblock_bits {
            p.num(Some("lblen"), "lblen ", i64::from(b), " ");
        }
        if let Some(b) = f.lcnode_fn_bits {
            p.num(Some("nflen"), "nflen ", i64::from(b), " ");
        }
    }
}

/// print_encap_ioam6: nothing past the frequency unless the fields are all there.
fn print_ioam6(p: &mut Printer, s: &Ioam6) {
    let (Some(k), Some(n), Some(mode), Some((ns, ty, size))) =
        (s.freq_k, s.freq_n, s.mode, s.trace_fields())
    else {
        return;
    };
    p.num(Some("freqk"), "freq ", i64::from(k), "");
    p.num(Some("freqn"), "/", i64::from(n), " ");
    if s.dst.is_none() && mode != ioam6_mode::INLINE {
        return;
    }
    let name = IOAM6_MODES
        .iter()
        .find(|(m, _)| *m == mode)
        .map_or("<unknown>", |(_, n)| n);
    p.str(Some("mode"), "mode ", name, " ");
    if mode != ioam6_mode::INLINE {
        if let Some(d) = s.dst {
            p.str(Some("tundst"), "tundst ", &d.to_string(), " ");
        }
    }
    p.null("trace", "trace ");
    p.null("prealloc", "prealloc ");
    if p.is_json() {
        p.jstr(Some("type"), &format!("{ty:x}"));
    } else {
        p.text(&format!("type {ty:#08x} "));
    }
    p.num(Some("ns"), "ns ", i64::from(ns), " ");
    p.num(Some("size"), "size ", i64::from(size), " ");
}
