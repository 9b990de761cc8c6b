//! `sr tunsrc show | set ADDR`: the source address of SRv6 encapsulation, and `sr hmac show |
//! set KEYID ALGO`: the keys of the SRH HMAC (iproute2's ip/ipseg6.c, which the kernel answers
//! over generic netlink; tunsrc offline only here, hmac through fibred's own message
//! `fibre_proto::seg6_hmac` too).
//!
//! `sr hmac set` takes the secret as iproute2 takes it with getpass: one line of stdin (typed
//! with echo off when stdin is a terminal); an empty one deletes the key. In a batch file it
//! is the line after the command, as `ip -batch FILE` reads it without a terminal (its batch
//! file is its stdin): taken whole (no comment or word splitting), not counted in the line
//! numbers of "Command failed" messages (iproute2 counts only the lines it reads as commands).
//! `sr hmac show` prints the keys in key id order (the kernel's dump walks its hash table: an
//! order of its own) with their secrets, as iproute2 prints them: at most 63 bytes, a longer
//! one truncated with its warning.

use std::net::IpAddr;

use fibre_fib::seg6_hmac::algo;
use fibre_fib::Family;

use crate::args::{get_addr, get_u32, matches, Args};
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
        return hmac(cli, &mut a);
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

/// getpass's prompt in iproute2's `sr hmac set`.
const HMAC_PROMPT: &str = "Enter secret for HMAC key ID (blank to delete): ";

/// The longest secret iproute2 prints (its 64-byte buffer keeps a terminating zero).
const SHOWN_SECRET_MAX: usize = 63;

/// Whether command `words` is an `sr hmac set` that reads a secret (its key id and algorithm
/// valid): a batch then hands it the next line ([`Cli::batch_secret`]).
pub(crate) fn reads_secret(words: &[&str]) -> bool {
    match words {
        [sr, hmac, set, id, alg, ..] => {
            matches(sr, "sr")
                && matches(hmac, "hmac")
                && !matches(set, "show")
                && matches(set, "set")
                && get_u32(id, 0).is_some_and(|i| i != 0)
                && matches!(*alg, "sha1" | "sha256")
        }
        _ => false,
    }
}

/// `sr hmac show | set KEYID ALGO`.
fn hmac(cli: &mut Cli, a: &mut Args<'_>) -> Result<(), CmdError> {
    let verb = a.next_arg()?;
    if matches(verb, "show") {
        let keys = cli.fib.seg6_hmac().map_err(|e| CmdError::rtnl(&e))?;
        let mut p = Printer::new(cli.opts.json, cli.opts.pretty);
        for k in &keys {
            let mut secret = k.secret.as_slice();
            if secret.len() > SHOWN_SECRET_MAX {
                cli.err.extend_from_slice(
                    format!(
                        "HMAC secret length {} > {SHOWN_SECRET_MAX}, truncated\n",
                        secret.len()
                    )
                    .as_bytes(),
                );
                secret = &secret[..SHOWN_SECRET_MAX];
            }
            let name = match k.algo {
                algo::SHA1 => "sha1",
                algo::SHA256 => "sha256",
                _ => "<unknown>",
            };
            p.open_obj(None);
            p.num(Some("hmac"), "hmac ", i64::from(k.id), " ");
            p.str(Some("algo"), "algo ", name, " ");
            p.str(
                Some("secret"),
                "secret \"",
                &String::from_utf8_lossy(secret),
                "\"\n",
            );
            p.close_obj();
        }
        cli.emit(p);
        return Ok(());
    }
    if !matches(verb, "set") {
        return Err(CmdError::invarg("unknown", verb));
    }
    let v = a.next_arg()?;
    let id = get_u32(v, 0)
        .filter(|&id| id != 0)
        .ok_or_else(|| CmdError::invarg("hmac KEYID value is invalid", v))?;
    let v = a.next_arg()?;
    let algo = match v {
        "sha1" => algo::SHA1,
        "sha256" => algo::SHA256,
        _ => return Err(CmdError::invarg("hmac ALGO value is invalid", v)),
    };
    let secret = match cli.batch_secret.take() {
        Some(s) => {
            cli.err.extend_from_slice(HMAC_PROMPT.as_bytes());
            s.into_bytes()
        }
        None => fibre_sys::read_secret(HMAC_PROMPT)
            .map_err(|e| CmdError::fail(1, format!("Error: cannot read the secret: {e}\n")))?,
    };
    cli.fib
        .set_seg6_hmac(id, algo, &secret)
        // ipseg6.c's command returns 1 on a refused request (rtnl_talk's message printed).
        .map_err(|e| CmdError::fail(1, crate::error::rtnl_text(&e)))
}
