//! `fibre sysctl [-q] [-w] KEY=VALUE | KEY`: the per-link and global settings that change
//! lookups, named and written as `sysctl(8)` writes the kernel's (the differential tests give
//! the same lines to the kernel through `ip netns exec NS sysctl ...`).
//!
//! Keys: `net.ipv4.conf.{all,default,LINK}.{rp_filter,ignore_routes_with_linkdown}`,
//! `net.ipv6.conf.{all,default,LINK}.ignore_routes_with_linkdown`,
//! `net.ipv{4,6}.conf.all.forwarding` and `net.ipv4.ip_forward`; `/` may separate the parts.
//! A write prints `KEY = VALUE` as sysctl does, unless `-q`.

use crate::{Cli, CmdError};
use fibre_fib::{ConfKey, ConfTarget, Errno, Family};

const USAGE: &str = "Usage: fibre sysctl [ -q ] [ -w ] KEY=VALUE | KEY\n";

/// `sysctl ...`
pub fn run(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let mut quiet = false;
    let mut items = Vec::new();
    for &w in words {
        match w {
            "-q" => quiet = true,
            "-w" => {}
            "-qw" | "-wq" => quiet = true,
            _ if w.starts_with('-') => return Err(CmdError::usage(USAGE)),
            _ => items.push(w),
        }
    }
    if items.is_empty() {
        return Err(CmdError::usage(USAGE));
    }
    for item in items {
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item, None),
        };
        let shown = key.replace('/', ".");
        let (target, k) = resolve(cli, &shown)?;
        match value {
            Some(v) => {
                let n: i32 = v.trim().parse().map_err(|_| {
                    CmdError::fail(
                        1,
                        format!("sysctl: setting key \"{shown}\": Invalid argument\n"),
                    )
                })?;
                cli.fib
                    .set_conf(target, k, n)
                    .map_err(|e| unsupported(&shown, e.errno))?;
                if !quiet {
                    cli.out
                        .extend_from_slice(format!("{shown} = {}\n", v.trim()).as_bytes());
                }
            }
            None => {
                let n = cli
                    .fib
                    .conf(target, k)
                    .map_err(|e| unsupported(&shown, e.errno))?;
                cli.out
                    .extend_from_slice(format!("{shown} = {n}\n").as_bytes());
            }
        }
    }
    Ok(())
}

/// What sysctl says when the file does not exist (a link that is not there), or fibre's
/// refusal of a setting it has no per-link meaning for.
fn unsupported(key: &str, errno: Errno) -> CmdError {
    if errno == Errno::ENODEV {
        return missing(key);
    }
    CmdError::fail(1, format!("fibre: sysctl {key} is not supported\n"))
}

fn missing(key: &str) -> CmdError {
    CmdError::fail(
        1,
        format!(
            "sysctl: cannot stat /proc/sys/{}: No such file or directory\n",
            key.replace('.', "/")
        ),
    )
}

/// The setting a dotted key names.
fn resolve(cli: &mut Cli, key: &str) -> Result<(ConfTarget, ConfKey), CmdError> {
    if key == "net.ipv4.ip_forward" {
        return Ok((ConfTarget::All, ConfKey::Forwarding4));
    }
    let parts: Vec<&str> = key.split('.').collect();
    let [net, fam, conf, dev, name] = parts[..] else {
        return Err(missing(key));
    };
    let family = match (net, fam, conf) {
        ("net", "ipv4", "conf") => Family::Inet,
        ("net", "ipv6", "conf") => Family::Inet6,
        _ => return Err(missing(key)),
    };
    let target = match dev {
        "all" => ConfTarget::All,
        "default" => ConfTarget::Default,
        _ => ConfTarget::Dev(cli.fib.link_index(dev).ok_or_else(|| missing(key))?),
    };
    let k = ConfKey::parse(family, name)
        .ok_or_else(|| CmdError::fail(1, format!("fibre: sysctl {key} is not supported\n")))?;
    Ok((target, k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;
    use fibre_fib::Fib;

    #[test]
    fn settings_are_written_and_read_as_sysctl_does() {
        let mut cli = Cli::new(Fib::default(), Options::default());
        run(&mut cli, &["-w", "net.ipv4.conf.lo.rp_filter=2"]).unwrap();
        run(
            &mut cli,
            &["-q", "net/ipv6/conf/all/ignore_routes_with_linkdown=1"],
        )
        .unwrap();
        run(&mut cli, &["net.ipv4.conf.lo.rp_filter"]).unwrap();
        run(&mut cli, &["net.ipv6.conf.lo.ignore_routes_with_linkdown"]).unwrap();
        assert_eq!(
            String::from_utf8(std::mem::take(&mut cli.out)).unwrap(),
            "net.ipv4.conf.lo.rp_filter = 2\nnet.ipv4.conf.lo.rp_filter = 2\nnet.ipv6.conf.lo.ignore_routes_with_linkdown = 1\n"
        );
        // From `ip netns exec NS sysctl -q -w net.ipv4.conf.d9.rp_filter=1` in a batch.
        assert_eq!(
            run(&mut cli, &["-q", "-w", "net.ipv4.conf.d9.rp_filter=1"]),
            Err(CmdError::fail(
                1,
                "sysctl: cannot stat /proc/sys/net/ipv4/conf/d9/rp_filter: No such file or directory\n"
            ))
        );
        assert!(run(&mut cli, &["net.ipv4.conf.lo.forwarding=0"]).is_err());
    }
}
