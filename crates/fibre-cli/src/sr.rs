//! `sr tunsrc show | set ADDR`: the source address of SRv6 encapsulation (iproute2's ip/ipseg6.c,
//! which the kernel answers over generic netlink; offline only here). `sr hmac` (keys for the
//! SRH HMAC) is not supported.

use std::net::IpAddr;

use fibre_fib::Family;

use crate::args::{get_addr, matches, Args};
use crate::out::Printer;
use crate::{Cli, CmdError};

const USAGE: &str = "Usage: ip sr { COMMAND | help }\n       ip sr hmac show\n       ip sr hmac set KEYID ALGO\n       ip sr tunsrc show\n       ip sr tunsrc set ADDRESS\nwhere  ALGO := { sha1 | sha256 }\n";

/// `sr ...`
pub fn run(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let mut a = Args::new(words);
    let Some(w) = a.peek() else {
        return Err(CmdError::exit(255, USAGE));
    };
    if matches(w, "help") {
        return Err(CmdError::exit(255, USAGE));
    }
    if matches(w, "hmac") {
        return Err(CmdError::fail(
            1,
            "Error: fibre does not support \"sr hmac\" yet.\n",
        ));
    }
    if !matches(w, "tunsrc") {
        return Err(CmdError::invarg("unknown", w));
    }
    let verb = a.next_arg()?;
    if matches(verb, "show") {
        let addr = cli.fib.seg6_tunsrc().map_err(|e| CmdError::rtnl(&e))?;
        let mut p = Printer::new(cli.opts.json, cli.opts.pretty);
        p.open_obj(None);
        p.str(Some("tunsrc"), "tunsrc addr ", &addr.to_string(), "\n");
        p.close_obj();
        cli.emit(p);
        Ok(())
    } else if matches(verb, "set") {
        let v = a.next_arg()?;
        let IpAddr::V6(addr) = get_addr(v, Some(Family::Inet6))?.addr_or_zero(Family::Inet6) else {
            return Err(CmdError::invarg("unknown", v));
        };
        cli.fib
            .set_seg6_tunsrc(addr)
            .map_err(|e| CmdError::rtnl(&e))
    } else {
        Err(CmdError::invarg("unknown", verb))
    }
}
