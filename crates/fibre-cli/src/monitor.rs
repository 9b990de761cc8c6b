//! `fibre monitor [all | OBJECT...]`: fibred's notifications printed as `ip monitor` prints
//! the kernel's.
//!
//! The monitor connects to fibred's socket (never the ring: it only reads), joins the groups
//! of the objects named (every group when none is named) with fibred's membership request,
//! and prints each notification with the command modules' printers: "Deleted " before
//! deletions, and with `all` a banner per object ("[ROUTE]", "[ADDR]", ...), as iproute2 6.1
//! does. Link names come from a link dump at start, kept current by link notifications.
//! It runs until fibred goes away or stdout closes.

use crate::args::matches;
use crate::out::Printer;
use crate::route::Shown;
use crate::{Names, Options};
use fibre_netlink::message::types as mt;
use fibre_netlink::{Messages, Payload};
use fibre_proto::client::SocketClient;
use fibre_proto::convert;
use fibre_proto::groups;
use fibre_proto::membership::{self, MEMBERSHIP_ADD};
use std::io::Write;
use std::path::Path;

/// Runs the monitor against the daemon at `socket`; returns the exit status.
pub fn run(
    socket: &Path,
    words: &[&str],
    opts: &Options,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    let mut joined: Vec<u32> = Vec::new();
    let mut banners = false;
    for w in words {
        let name = [
            "link", "address", "route", "rule", "nexthop", "neigh", "all",
        ]
        .into_iter()
        .find(|o| matches(w, o));
        match name.and_then(|n| groups::for_object(n).map(|g| (n, g))) {
            Some((n, g)) => {
                banners |= n == "all";
                joined.extend_from_slice(g);
            }
            None => {
                let _ = writeln!(
                    stderr,
                    "Argument \"{w}\" is unknown, try \"ip monitor help\"."
                );
                return 255;
            }
        }
    }
    if joined.is_empty() {
        joined.extend_from_slice(groups::for_object("all").unwrap_or(&[]));
    }
    // Kept to look up links the monitor has not seen, as iproute2's ll_index_to_name asks
    // the kernel on a cache miss.
    let lookup = match crate::online::Remote::connect(socket) {
        Ok(r) => crate::online::Backend::Remote(r),
        Err(e) => {
            let _ = writeln!(stderr, "fibre: {e}");
            return 1;
        }
    };
    let mut names = names_of(&lookup);
    let mut client = match SocketClient::connect(socket) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(
                stderr,
                "fibre: cannot connect to fibred at {}: {e}",
                socket.display()
            );
            return 1;
        }
    };
    let mut join = Vec::new();
    for (i, g) in joined.iter().enumerate() {
        join.extend_from_slice(&membership::request(MEMBERSHIP_ADD, *g, i as u32 + 1));
    }
    if let Err(e) = client.send(&join) {
        let _ = writeln!(stderr, "fibre: cannot subscribe: {e}");
        return 1;
    }
    loop {
        let datagram = match client.recv() {
            Ok(d) if !d.is_empty() => d.to_vec(),
            _ => return 0,
        };
        for item in Messages::new(&datagram) {
            let Ok((_, msg)) = item else { break };
            let mut p = Printer::new(opts.json, opts.pretty);
            let t = msg.header.message_type;
            let deleted = matches!(
                t,
                mt::RTM_DELROUTE
                    | mt::RTM_DELADDR
                    | mt::RTM_DELLINK
                    | mt::RTM_DELRULE
                    | mt::RTM_DELNEXTHOP
                    | mt::RTM_DELNEIGH
            );
            let banner = |p: &mut Printer, b: &str| {
                if banners {
                    p.text(b);
                }
                if deleted {
                    p.text("Deleted ");
                }
            };
            match &msg.payload {
                Payload::Route(m) => {
                    let Ok(r) = convert::route_from(m) else {
                        continue;
                    };
                    banner(&mut p, "[ROUTE]");
                    crate::route::print_route(
                        &mut p,
                        &r,
                        &names,
                        &Shown::default(),
                        opts.details > 0,
                        opts.stats > 0,
                    );
                }
                Payload::Address(m) => {
                    let Ok(a) = convert::address_from(m) else {
                        continue;
                    };
                    banner(&mut p, "[ADDR]");
                    let dev = names.get(a.ifindex).into_owned();
                    p.text(&format!("{}: {dev}", a.ifindex));
                    crate::addr::print_addr(&mut p, &a, &dev);
                }
                Payload::Link(m) => {
                    let Ok(l) = convert::link_from(m) else {
                        continue;
                    };
                    let i = l.ifindex as usize;
                    if names.0.len() <= i {
                        names.0.resize(i + 1, None);
                    }
                    names.0[i] = if deleted { None } else { l.ifname.clone() };
                    banner(&mut p, "[LINK]");
                    crate::addr::print_link(&mut p, &l, false, false, false);
                }
                Payload::Rule(m) => {
                    let Ok(r) = convert::rule_from(m) else {
                        continue;
                    };
                    banner(&mut p, "[RULE]");
                    crate::rule::print_rule(&mut p, &r, opts.details > 0);
                }
                Payload::Nexthop(m) => {
                    let Ok(n) = convert::nexthop_from(m) else {
                        continue;
                    };
                    banner(&mut p, "[NEXTHOP]");
                    crate::nexthop::print_nexthop(&mut p, &n, &names, opts.details > 0);
                }
                Payload::Neighbour(m) => {
                    let Ok(n) = convert::neighbour_from(m) else {
                        continue;
                    };
                    if names.0.get(n.ifindex as usize).is_none_or(Option::is_none) {
                        names = names_of(&lookup);
                    }
                    if banners {
                        p.text("[NEIGH]");
                    }
                    crate::neigh::print_neigh(
                        &mut p,
                        &n,
                        &names,
                        &crate::neigh::Filter::default(),
                        opts.stats,
                        deleted,
                    );
                }
                Payload::Error(e) if e.error == -105 => {
                    let _ = writeln!(
                        stderr,
                        "fibre monitor: notifications lost (No buffer space available)"
                    );
                    continue;
                }
                _ => continue,
            }
            if stdout
                .write_all(&p.finish())
                .and_then(|_| stdout.flush())
                .is_err()
            {
                return 0;
            }
        }
    }
}

fn names_of(b: &crate::online::Backend) -> Names {
    let mut v: Vec<Option<String>> = Vec::new();
    for l in b.links() {
        let i = l.ifindex as usize;
        if v.len() <= i {
            v.resize(i + 1, None);
        }
        v[i] = l.ifname;
    }
    Names(v)
}
