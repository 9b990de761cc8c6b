//! `fibre route save [table ID|all]` and `fibre route restore`, in iproute2's format.
//!
//! The format is `ip route save`'s: a native-endian u32 magic (0x45311224), then the raw
//! RTM_NEWROUTE messages of a route dump, each padded to 4 bytes. So a file saved by
//! `ip route save` on a Linux host restores into fibre, and a file fibre saves restores into
//! a kernel with `ip route restore`. As iproute2 does, save writes the main table unless a table
//! is named, refuses to write binary to a terminal, and restore adds every route with
//! NLM_F_CREATE | NLM_F_EXCL, taking "File exists" as success and stopping at any other error.

use crate::error::CmdError;
use crate::Cli;
use fibre_fib::types::*;
use fibre_netlink::convert;
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::{Messages, Payload};
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
        while buf.len() % 4 != 0 {
            buf.push(0);
        }
    }
    out.write_all(&buf)
        .map_err(|e| CmdError::fail(1, format!("fibre: cannot write: {e}\n")))
}

/// `route restore`: reads a saved stream from `input` and adds its routes.
pub fn restore(cli: &mut Cli, input: &mut dyn Read) -> Result<(), CmdError> {
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
    for item in Messages::new(&bytes[4..]) {
        let (_, msg) =
            item.map_err(|e| CmdError::fail(255, format!("fibre: corrupt route dump: {e}\n")))?;
        let Payload::Route(m) = &msg.payload else {
            continue;
        };
        let route = convert::route_from(m).map_err(|e| CmdError::rtnl(&e.error))?;
        match cli.fib.route_new(&route, ReqFlags::ADD) {
            Ok(()) => {}
            Err(e) if e.errno == Errno::EEXIST => {}
            Err(e) => return Err(CmdError::rtnl(&e)),
        }
    }
    Ok(())
}
