//! `fibre sysctl [-q] [-w] KEY=VALUE | KEY`: the per-link and global settings that change
//! lookups, named and written as `sysctl(8)` writes the kernel's (the differential tests give
//! the same lines to the kernel through `ip netns exec NS sysctl ...`).
//!
//! Keys: `net.ipv4.conf.{all,default,LINK}.{rp_filter,ignore_routes_with_linkdown}`,
//! `net.ipv6.conf.{all,default,LINK}.ignore_routes_with_linkdown`,
//! `net.ipv{4,6}.conf.all.forwarding`, `net.ipv4.ip_forward`,
//! `net.ipv{4,6}.fib_multipath_hash_{policy,fields}` and `net.ipv4.fib_multipath_hash_seed`;
//! `net.ipv4.icmp_{ratelimit,ratemask,msgs_per_sec,msgs_burst}`, `net.ipv6.icmp.ratelimit`;
//! `/` may separate the parts. Values are read as the kernel's proc handlers read them
//! (`0x` hexadecimal, a leading `0` octal, else decimal). A write prints `KEY = VALUE` as sysctl
//! does, unless `-q`; a value the kernel refuses fails as sysctl reports EINVAL.

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
                let n = parse_value(v.trim()).ok_or_else(|| invalid(&shown))?;
                cli.fib.set_conf(target, k, n).map_err(|e| match e.errno {
                    Errno::EINVAL => invalid(&shown),
                    errno => unsupported(&shown, errno),
                })?;
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

/// A number as the kernel's proc handlers parse one (base 0 of strtoul, with a sign).
fn parse_value(v: &str) -> Option<i64> {
    let (neg, digits) = match v.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, v),
    };
    let n = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        i64::from_str_radix(h, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        i64::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse::<i64>().ok()?
    };
    Some(if neg { -n } else { n })
}

/// What sysctl says when the kernel refuses a value.
fn invalid(key: &str) -> CmdError {
    CmdError::fail(
        1,
        format!("sysctl: setting key \"{key}\": Invalid argument\n"),
    )
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
    let parts: Vec<&str> = key.split('.').collect();
    if let ["net", "ipv6", "icmp", name] = parts[..] {
        let k = ConfKey::parse_global(Family::Inet6, &format!("icmp.{name}"))
            .ok_or_else(|| missing(key))?;
        return Ok((ConfTarget::All, k));
    }
    if let ["net", fam, name] = parts[..] {
        let family = match fam {
            "ipv4" => Family::Inet,
            "ipv6" => Family::Inet6,
            _ => return Err(missing(key)),
        };
        let k = ConfKey::parse_global(family, name).ok_or_else(|| missing(key))?;
        return Ok((ConfTarget::All, k));
    }
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

    #[test]
    fn multipath_hash_settings_take_the_kernels_values() {
        let mut cli = Cli::new(Fib::default(), Options::default());
        run(&mut cli, &["-w", "net.ipv4.fib_multipath_hash_policy=1"]).unwrap();
        run(
            &mut cli,
            &["-q", "-w", "net/ipv6/fib_multipath_hash_fields=0x3f"],
        )
        .unwrap();
        run(
            &mut cli,
            &["-q", "-w", "net.ipv4.fib_multipath_hash_seed=4294967295"],
        )
        .unwrap();
        run(&mut cli, &["net.ipv6.fib_multipath_hash_fields"]).unwrap();
        run(&mut cli, &["net.ipv6.fib_multipath_hash_policy"]).unwrap();
        assert_eq!(
            String::from_utf8(std::mem::take(&mut cli.out)).unwrap(),
            "net.ipv4.fib_multipath_hash_policy = 1\nnet.ipv6.fib_multipath_hash_fields = 63\nnet.ipv6.fib_multipath_hash_policy = 0\n"
        );
        assert_eq!(
            cli.fib.conf(ConfTarget::All, ConfKey::MultipathHashSeed),
            Ok(u32::MAX as i64)
        );
        // What the kernel refuses, sysctl reports as EINVAL; IPv6 has no seed of its own.
        for bad in [
            "net.ipv4.fib_multipath_hash_policy=4",
            "net.ipv4.fib_multipath_hash_policy=-1",
            "net.ipv4.fib_multipath_hash_fields=0",
            "net.ipv6.fib_multipath_hash_fields=0x1000",
            "net.ipv4.fib_multipath_hash_seed=4294967296",
        ] {
            let key = bad.split('=').next().unwrap();
            assert_eq!(
                run(&mut cli, &["-w", bad]),
                Err(CmdError::fail(
                    1,
                    format!("sysctl: setting key \"{key}\": Invalid argument\n")
                ))
            );
        }
        assert_eq!(
            run(&mut cli, &["net.ipv6.fib_multipath_hash_seed"]),
            Err(missing("net.ipv6.fib_multipath_hash_seed"))
        );
    }

    #[test]
    fn icmp_limits_are_written_read_and_refused_as_the_kernel_does() {
        let mut cli = Cli::new(Fib::default(), Options::default());
        run(&mut cli, &["-w", "net.ipv4.icmp_ratelimit=250"]).unwrap();
        run(&mut cli, &["-q", "-w", "net/ipv6/icmp/ratelimit=0"]).unwrap();
        run(&mut cli, &["net.ipv4.icmp_ratemask"]).unwrap();
        run(&mut cli, &["net.ipv6.icmp.ratelimit"]).unwrap();
        assert_eq!(
            String::from_utf8(std::mem::take(&mut cli.out)).unwrap(),
            "net.ipv4.icmp_ratelimit = 250\nnet.ipv4.icmp_ratemask = 6168\nnet.ipv6.icmp.ratelimit = 0\n"
        );
        assert_eq!(
            run(&mut cli, &["-w", "net.ipv4.icmp_msgs_burst=-1"]),
            Err(CmdError::fail(
                1,
                "sysctl: setting key \"net.ipv4.icmp_msgs_burst\": Invalid argument\n".to_string()
            ))
        );
    }
}
