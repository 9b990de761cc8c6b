//! `ip link`: add (type dummy, port, tap), set, delete, show.
//!
//! Parsing follows iproute2 6.1's `iplink_parse`/`iplink_modify`; `show` shares the printer of
//! `ip address show` (iproute2's `print_linkinfo`), in the form a dummy or loopback device has.
//! A port link (`type port dev HOSTIF [io af_xdp|af_packet|tap] [punt TAPNAME]`, or `type tap
//! [dev HOSTIF]` for a TAP device named HOSTIF, NAME by default) is fibre's own kind, `fibre_port` in
//! IFLA_LINKINFO with its binding in IFLA_INFO_DATA (fibre-netlink's `link_info`); fibred
//! opens the host interface and forwards through it, offline it is a link like any other.

use crate::addr;
use crate::args::{get_u32, matches, Args};
use crate::{Cli, CmdError};
use fibre_fib::{iff, Errno, Link, LinkKind, PortIo, PortSpec, ReqFlags};

const USAGE: &str = "Usage: fibre link add [ name ] NAME type TYPE [ mtu MTU ] [ address LLADDR ]\n                      [ txqueuelen PACKETS ] [ up ] [ ARGS ]\n       TYPE := { dummy | port dev HOSTIF [ io { af_xdp | af_packet | tap } ]\n                 [ punt TAPNAME ]\n                 | tap [ dev HOSTIF ] }\n       fibre link delete DEVICE\n       fibre link set { DEVICE | dev DEVICE } [ { up | down } ] [ carrier { on | off } ]\n                      [ arp { on | off } ] [ mtu MTU ] [ address LLADDR ]\n                      [ txqueuelen PACKETS ] [ name NEWNAME ]\n       fibre link show [ DEVICE ] [ up ]\n";

/// `ip link ...`
pub fn run(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let Some((&verb, rest)) = words.split_first() else {
        return addr::list(cli, &[], true, false);
    };
    if matches(verb, "add") {
        return modify(cli, rest, Verb::New(ReqFlags::ADD));
    }
    if matches(verb, "set") || matches(verb, "change") {
        return modify(cli, rest, Verb::New(ReqFlags::NONE));
    }
    if matches(verb, "replace") {
        return modify(cli, rest, Verb::New(ReqFlags::REPLACE));
    }
    if matches(verb, "delete") {
        return modify(cli, rest, Verb::Del);
    }
    if matches(verb, "show") || matches(verb, "lst") || matches(verb, "list") {
        return addr::list(cli, rest, true, false);
    }
    if matches(verb, "help") {
        return Err(CmdError::usage(USAGE));
    }
    Err(CmdError::exit(
        255,
        format!("Command \"{verb}\" is unknown, try \"ip link help\".\n"),
    ))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    New(ReqFlags),
    Del,
}

/// iproute2's `ll_addr_a2n`: colon-separated hex bytes.
pub fn lladdr_a2n(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for part in s.split(':') {
        if part.is_empty() || part.len() > 2 {
            return None;
        }
        out.push(u8::from_str_radix(part, 16).ok()?);
    }
    Some(out)
}

/// The kernel's bound on interface names, terminating NUL included.
const IFNAMSIZ: usize = 16;
/// The same for alternative names, which iproute2 accepts wherever a device is named.
const ALTIFNAMSIZ: usize = 128;

/// iproute2's `check_ifname`/`check_altifname`: not empty, shorter than `size`, and free of
/// '/' and C `isspace` characters. (The kernel refuses more -- ".", "..", ':' -- with EINVAL.)
fn valid_ifname(name: &str, size: usize) -> bool {
    !name.is_empty()
        && name.len() < size
        && !name
            .bytes()
            .any(|c| matches!(c, b'/' | b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
}

fn modify(cli: &mut Cli, words: &[&str], verb: Verb) -> Result<(), CmdError> {
    let create = matches!(verb, Verb::New(f) if f.create);
    let mut link = Link::default();
    let (mut dev, mut name, mut kind): (Option<&str>, Option<&str>, Option<&str>) =
        (None, None, None);
    let mut a = Args::new(words);
    while let Some(w) = a.peek() {
        if w == "up" {
            link.change |= iff::UP;
            link.flags |= iff::UP;
        } else if w == "down" {
            link.change |= iff::UP;
            link.flags &= !iff::UP;
        } else if w == "name" {
            let v = a.next_arg()?;
            if !valid_ifname(v, IFNAMSIZ) {
                return Err(CmdError::invarg("\"name\" not a valid ifname", v));
            }
            if name.is_some() {
                return Err(CmdError::duparg("name", v));
            }
            name = Some(v);
            if dev.is_none() {
                dev = Some(v);
            }
        } else if matches(w, "address") {
            let v = a.next_arg()?;
            link.address = Some(
                lladdr_a2n(v)
                    .ok_or_else(|| CmdError::fail(1, format!("\"{v}\" is invalid lladdr.\n")))?,
            );
        } else if matches(w, "txqueuelen") || w == "qlen" || matches(w, "txqlen") {
            let v = a.next_arg()?;
            if link.txqlen.is_some() {
                return Err(CmdError::duparg("txqueuelen", v));
            }
            link.txqlen = Some(
                get_u32(v, 0)
                    .ok_or_else(|| CmdError::invarg("Invalid \"txqueuelen\" value\n", v))?,
            );
        } else if w == "mtu" {
            let v = a.next_arg()?;
            if link.mtu.is_some() {
                return Err(CmdError::duparg("mtu", v));
            }
            link.mtu =
                Some(get_u32(v, 0).ok_or_else(|| CmdError::invarg("Invalid \"mtu\" value\n", v))?);
        } else if w == "carrier" {
            let v = a.next_arg()?;
            link.carrier = Some(match v {
                "on" => true,
                "off" => false,
                _ => {
                    return Err(CmdError::fail(
                        1,
                        format!("Error: argument of \"carrier\" must be one of \"off\", \"on\", not \"{v}\"\n"),
                    ))
                }
            });
        } else if w == "arp" {
            let v = a.next_arg()?;
            link.change |= iff::NOARP;
            match v {
                "on" => link.flags &= !iff::NOARP,
                "off" => link.flags |= iff::NOARP,
                _ => {
                    return Err(CmdError::fail(
                        1,
                        format!(
                            "Error: argument of \"arp\" must be \"on\" or \"off\", not \"{v}\"\n"
                        ),
                    ))
                }
            }
        } else if w == "addrgenmode" {
            let v = a.next_arg()?;
            link.addr_gen_mode = Some(match v {
                "eui64" => 0,
                "none" => 1,
                _ => return Err(CmdError::invarg("Invalid address generation mode\n", v)),
            });
        } else if matches(w, "type") {
            kind = Some(a.next_arg()?);
            a.advance();
            break;
        } else {
            let mut v = w;
            if matches(v, "help") {
                return Err(CmdError::usage(USAGE));
            }
            if v == "dev" {
                v = a.next_arg()?;
            }
            if !valid_ifname(v, ALTIFNAMSIZ) {
                return Err(CmdError::invarg("\"dev\" not a valid ifname", v));
            }
            if dev != name || (dev.is_some() && name.is_none()) {
                return Err(CmdError::duparg2("dev", v));
            }
            dev = Some(v);
        }
        a.advance();
    }
    // Words after `type KIND` belong to the kind's own parser; iproute2 6.1 has none for
    // dummy, so they are ignored, as there.
    match kind {
        Some("dummy") => link.kind = Some(LinkKind::Dummy),
        Some(k @ ("port" | "tap")) => {
            let port = port_args(&mut a, k == "tap", dev)?;
            link.kind = Some(LinkKind::Port(port));
        }
        Some(_) => {
            return Err(CmdError::fail(2, "Error: Unknown device type.\n"));
        }
        None if create => {
            return Err(CmdError::fail(
                1,
                "Not enough information: \"type\" argument is required\n",
            ));
        }
        None => {}
    }
    cli.links_changed();
    if !create {
        let Some(d) = dev else {
            return Err(CmdError::exit(
                255,
                "Not enough information: \"dev\" argument is required.\n",
            ));
        };
        link.ifindex = cli.dev(d)?;
        if name != dev {
            link.ifname = name.map(str::to_string);
        }
    } else {
        if name.is_some() && name != dev {
            return Err(CmdError::exit(
                255,
                "both \"name\" and \"dev\" cannot be used when creating devices.\n",
            ));
        }
        link.ifname = dev.map(str::to_string);
    }
    let r = match verb {
        Verb::New(flags) => cli.fib.link_new(&link, flags),
        Verb::Del => cli.fib.link_del(&link),
    };
    cli.links_changed();
    r.map_err(|e| match (&link.kind, e.errno) {
        // fibred could not find the host interface: iproute2's words for a missing device.
        (Some(LinkKind::Port(p)), Errno::ENODEV) if create => {
            CmdError::fail(1, format!("Cannot find device \"{}\"\n", p.dev))
        }
        _ => CmdError::rtnl(&e),
    })
}

/// A port's own words after `type port` (`dev HOSTIF`, required; `io KIND`, AF_XDP by
/// default; `punt TAPNAME`, none by default) or `type tap` (`dev HOSTIF`, the link's name by
/// default; the I/O is TAP, and the host's traffic is the TAP's own).
fn port_args(a: &mut Args, tap: bool, name: Option<&str>) -> Result<PortSpec, CmdError> {
    let (mut dev, mut io, mut punt) = (None, None, None);
    while let Some(w) = a.peek() {
        let v = a.next_arg()?;
        match w {
            "dev" if dev.is_none() => {
                if !valid_ifname(v, IFNAMSIZ) {
                    return Err(CmdError::invarg("\"dev\" not a valid ifname", v));
                }
                dev = Some(v);
            }
            "io" if io.is_none() && !tap => {
                io = Some(PortIo::from_name(v).ok_or_else(|| {
                    CmdError::invarg("\"io\" must be af_xdp, af_packet or tap", v)
                })?);
            }
            "punt" if punt.is_none() && !tap => {
                if !valid_ifname(v, IFNAMSIZ) {
                    return Err(CmdError::invarg("\"punt\" not a valid ifname", v));
                }
                punt = Some(v.to_string());
            }
            "dev" | "io" | "punt" => return Err(CmdError::duparg(w, v)),
            _ => return Err(CmdError::usage(USAGE)),
        }
        a.advance();
    }
    let dev = match (dev, tap) {
        (Some(d), _) => d,
        (None, true) => name.unwrap_or_default(),
        (None, false) => {
            return Err(CmdError::exit(
                255,
                "Not enough information: \"dev\" argument is required.\n",
            ))
        }
    };
    Ok(PortSpec {
        dev: dev.to_string(),
        io: if tap {
            PortIo::Tap
        } else {
            io.unwrap_or(PortIo::AfXdp)
        },
        punt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lladdr_parses_hex_bytes() {
        assert_eq!(
            lladdr_a2n("02:00:00:00:00:01"),
            Some(vec![2, 0, 0, 0, 0, 1])
        );
        assert_eq!(lladdr_a2n("zz"), None);
        assert_eq!(lladdr_a2n("1::2"), None);
    }
}
