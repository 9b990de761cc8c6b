//! `fibre route save [table ID|all]` and `fibre route restore`, in iproute2's format.
//!
//! The format is `ip route save`'s: a native-endian u32 magic (0x45311224), then the raw
//! RTM_NEWROUTE messages of a route dump, each padded to 4 bytes. So a file saved by
//! `ip route save` on a Linux host restores into fibre, and a file fibre saves restores into
//! a kernel with `ip route restore`. As iproute2 does, save writes the main table unless a table
//! is named and refuses to write binary to a terminal. Restore reads the file three times, as
//! `iproute_restore` does, so that a route comes after the routes its gateway depends on,
//! whatever the dump order: first routes with no gateway and no preferred source (or a default
//! route), then routes with no gateway and a preferred source, then routes with a gateway. Each
//! is added with NLM_F_CREATE alone (`ip route prepend`'s flags: a route that differs from an
//! existing one only by its next hop goes in front of it); "File exists" is printed and
//! skipped, any other error stops the restore with status 2.

use crate::error::CmdError;
use crate::Cli;
use fibre_fib::types::*;
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::{Messages, Payload};
use fibre_proto::convert;
use std::io::{IsTerminal, Read, Write};

/// iproute2's `_SAVE_MAGIC`.
pub const SAVE_MAGIC: u32 = 0x4531_1224;

/// `route save [table ID|all]`: writes the stream to `out`.
pub fn save(cli: &mut Cli, words: &[&str], out: &mut dyn Write) -> Result<(), CmdError> {
    let mut table = Some(254u32);
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match *w {
            "table" => {
                let Some(t) = it.next() else {
                    return Err(CmdError::fail(
                        255,
                        "Command line is not complete. Try option \"help\"\n",
                    ));
                };
                table = match *t {
                    "all" => None,
                    t => Some(
                        crate::names::table_a2n(t)
                            .ok_or_else(|| CmdError::invarg("table id value is invalid", t))?,
                    ),
                };
            }
            other => {
                return Err(CmdError::fail(
                    1,
                    format!("fibre: route save selector \"{other}\" is not supported.\n"),
                ));
            }
        }
    }
    if std::io::stdout().is_terminal() {
        return Err(CmdError::fail(1, "Not sending a binary stream to stdout\n"));
    }
    // iproute2 dumps IPv4 only when a table is selected and no family is named.
    let family = match (cli.opts.family, table) {
        (None, Some(_)) => Some(Family::Inet),
        (f, _) => f,
    };
    let mut buf = SAVE_MAGIC.to_ne_bytes().to_vec();
    for (i, r) in cli
        .fib
        .routes(family)
        .iter()
        .filter(|r| table.is_none_or(|t| r.table == t))
        .enumerate()
    {
        let m = convert::message(
            mt::RTM_NEWROUTE,
            nf::NLM_F_MULTI,
            i as u32 + 1,
            0,
            Payload::Route(convert::route_message(r)),
        );
        m.emit(&mut buf);
        buf.resize(buf.len().next_multiple_of(4), 0);
    }
    out.write_all(&buf)
        .map_err(|e| CmdError::fail(1, format!("fibre: cannot write: {e}\n")))
}

/// `route restore`: reads a saved stream from `input` and adds its routes, printing the
/// answers iproute2 prints for routes that exist to `stderr`.
pub fn restore(
    cli: &mut Cli,
    input: &mut dyn Read,
    stderr: &mut dyn Write,
) -> Result<(), CmdError> {
    let mut bytes = Vec::new();
    input
        .read_to_end(&mut bytes)
        .map_err(|e| CmdError::fail(1, format!("fibre: cannot read: {e}\n")))?;
    let magic = bytes
        .get(..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    if magic != Some(SAVE_MAGIC) {
        return Err(CmdError::fail(255, "Not a route dump\n"));
    }
    for pass in [Pass::Local, Pass::Prefsrc, Pass::Gateway] {
        for item in Messages::new(&bytes[4..]) {
            let (_, msg) =
                item.map_err(|e| CmdError::fail(255, format!("fibre: corrupt route dump: {e}\n")))?;
            let Payload::Route(m) = &msg.payload else {
                continue;
            };
            if Pass::of(m) != pass {
                continue;
            }
            let route = convert::route_from(m).map_err(|e| CmdError::rtnl(&e.error))?;
            match cli.fib.route_new(&route, ReqFlags::PREPEND) {
                Ok(()) => {}
                Err(e) if e.errno == Errno::EEXIST => {
                    let _ = stderr.write_all(crate::error::rtnl_text(&e).as_bytes());
                }
                Err(e) => return Err(CmdError::rtnl(&e)),
            }
        }
    }
    Ok(())
}

/// The pass of `route restore` that adds a route (iproute2's `restore_handler` order).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// No gateway, and no preferred source or a default route: routes for local addresses
    /// and through devices.
    Local,
    /// No gateway and a preferred source: routes for local networks.
    Prefsrc,
    /// Through a gateway (RTA_GATEWAY at the top level; multipath routes count as local).
    Gateway,
}

impl Pass {
    fn of(m: &fibre_netlink::route::RouteMessage<'_>) -> Pass {
        use fibre_netlink::route::RouteAttr;
        let has = |f: fn(&RouteAttr<'_>) -> bool| m.attributes.iter().any(f);
        if has(|a| matches!(a, RouteAttr::Gateway(_))) {
            Pass::Gateway
        } else if has(|a| matches!(a, RouteAttr::PrefSrc(_))) && m.header.dst_len != 0 {
            Pass::Prefsrc
        } else {
            Pass::Local
        }
    }
}
