//! `ioam namespace add|del|set|show` and `ioam schema add|del|show`: iproute2's ip/ipioam6.c
//! (its parser, messages and printer), on the FIB's IOAM namespaces and schemas (offline only:
//! the kernel answers these over generic netlink, which fibred does not speak).

use fibre_fib::ioam::SCHEMA_DATA_MAX;

use crate::args::{get_u16, get_u32, Args};
use crate::out::Printer;
use crate::{Cli, CmdError};

const USAGE: &str = "Usage:\tip ioam { COMMAND | help }\n\tip ioam namespace show\n\tip ioam namespace add ID [ data DATA32 ] [ wide DATA64 ]\n\tip ioam namespace del ID\n\tip ioam schema show\n\tip ioam schema add ID DATA\n\tip ioam schema del ID\n\tip ioam namespace set ID schema { ID | none }\n";

/// `get_u64(.., 16)`: hexadecimal, with or without `0x`.
fn hex_u64(s: &str) -> Option<u64> {
    let d = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if d.is_empty() {
        return None;
    }
    u64::from_str_radix(d, 16).ok()
}

/// `ioam ...`
pub fn run(cli: &mut Cli, words: &[&str]) -> Result<(), CmdError> {
    let mut a = Args::new(words);
    let obj = match a.peek() {
        None | Some("help") => return Err(CmdError::exit(255, USAGE)),
        Some(w) => w,
    };
    let verb = a.next_arg()?;
    let rtnl = |e: fibre_fib::RtError| CmdError::rtnl(&e);
    match (obj, verb) {
        ("namespace", "show") => show_namespaces(cli),
        ("schema", "show") => show_schemas(cli),
        ("namespace", "add") => {
            let v = a.next_arg()?;
            let id = get_u16(v, 0).ok_or_else(|| CmdError::invarg("Invalid namespace ID", v))?;
            let (mut data, mut wide) = (None, None);
            if a.rest().len() > 1 {
                a.advance();
                match a.peek().unwrap_or("") {
                    "data" => {
                        let d = a.next_arg()?;
                        data =
                            Some(get_u32(d, 0).ok_or_else(|| CmdError::invarg("Invalid data", d))?);
                    }
                    "wide" => {
                        let d = a.next_arg()?;
                        wide = Some(
                            hex_u64(d).ok_or_else(|| CmdError::invarg("Invalid wide data", d))?,
                        );
                    }
                    w => return Err(CmdError::invarg("Invalid argument", w)),
                }
            }
            if a.rest().len() > 1 {
                a.advance();
                let w = a.peek().unwrap_or("");
                if data.is_none() || w != "wide" {
                    return Err(CmdError::invarg("Unexpected argument", w));
                }
                let d = a.next_arg()?;
                wide = Some(hex_u64(d).ok_or_else(|| CmdError::invarg("Invalid wide data", d))?);
            }
            cli.fib
                .ioam_mut()
                .map_err(rtnl)?
                .add_namespace(id, data, wide)
                .map_err(rtnl)
        }
        ("namespace", "del") => {
            let v = a.next_arg()?;
            let id = get_u16(v, 0).ok_or_else(|| CmdError::invarg("Invalid namespace ID", v))?;
            cli.fib
                .ioam_mut()
                .map_err(rtnl)?
                .del_namespace(id)
                .map_err(rtnl)
        }
        ("namespace", "set") => {
            let v = a.next_arg()?;
            let id = get_u16(v, 0).ok_or_else(|| CmdError::invarg("Invalid namespace ID", v))?;
            let k = a.next_arg()?;
            if k != "schema" {
                return Err(CmdError::invarg("Unknown", k));
            }
            let s = a.next_arg()?;
            let sc = match s {
                "none" => None,
                _ => Some(get_u32(s, 0).ok_or_else(|| CmdError::invarg("Invalid schema ID", s))?),
            };
            cli.fib
                .ioam_mut()
                .map_err(rtnl)?
                .set_schema(id, sc)
                .map_err(rtnl)
        }
        ("schema", "add") => {
            let v = a.next_arg()?;
            let id = get_u32(v, 0).ok_or_else(|| CmdError::invarg("Invalid schema ID", v))?;
            let d = a.next_arg()?;
            if d.len() > SCHEMA_DATA_MAX {
                return Err(CmdError::invarg("Schema DATA too big", d));
            }
            cli.fib
                .ioam_mut()
                .map_err(rtnl)?
                .add_schema(id, d.as_bytes())
                .map_err(rtnl)
        }
        ("schema", "del") => {
            let v = a.next_arg()?;
            let id = get_u32(v, 0).ok_or_else(|| CmdError::invarg("Invalid schema ID", v))?;
            cli.fib
                .ioam_mut()
                .map_err(rtnl)?
                .del_schema(id)
                .map_err(rtnl)
        }
        ("namespace", w) | ("schema", w) => Err(CmdError::invarg("Unknown", w)),
        (w, _) => Err(CmdError::invarg("Unknown", w)),
    }
}

/// print_namespace: id, its schema, then the data words.
fn show_namespaces(cli: &mut Cli) -> Result<(), CmdError> {
    let mut p = Printer::new(cli.opts.json, cli.opts.pretty);
    let io = cli.fib.ioam().map_err(|e| CmdError::rtnl(&e))?;
    for (id, ns) in io.namespaces() {
        p.open_obj(None);
        p.num(Some("namespace"), "namespace ", i64::from(id), "");
        if let Some(s) = ns.schema {
            p.num(Some("schema"), " [schema ", i64::from(s), "]");
        }
        if let Some(d) = ns.data {
            if p.is_json() {
                p.jstr(Some("data"), &format!("{d:x}"));
            } else {
                p.text(&format!(", data {d:#010x}"));
            }
        }
        if let Some(w) = ns.wide {
            if p.is_json() {
                p.jstr(Some("wide"), &format!("{w:#x}"));
            } else {
                p.text(&format!(", wide {w:#018x}"));
            }
        }
        p.text("\n");
        p.close_obj();
    }
    cli.emit(p);
    Ok(())
}

/// print_schema: id, its namespace, then the data bytes in hexadecimal.
fn show_schemas(cli: &mut Cli) -> Result<(), CmdError> {
    let mut p = Printer::new(cli.opts.json, cli.opts.pretty);
    let io = cli.fib.ioam().map_err(|e| CmdError::rtnl(&e))?;
    for (id, sc) in io.schemas() {
        p.open_obj(None);
        p.num(Some("schema"), "schema ", i64::from(id), "");
        if let Some(n) = sc.namespace {
            p.num(Some("namespace"), " [namespace ", i64::from(n), "]");
        }
        p.null("data", ", data:");
        for b in &sc.data {
            // print_hhu with an empty key: JSON repeats "" (iproute2's own output).
            if p.is_json() {
                p.jnum(Some(""), i64::from(*b));
            } else {
                p.text(&format!(" {b:02x}"));
            }
        }
        p.text("\n");
        p.close_obj();
    }
    cli.emit(p);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::hex_u64;

    #[test]
    fn wide_data_is_hexadecimal() {
        assert_eq!(hex_u64("cafec00010ff"), Some(0xcafe_c000_10ff));
        assert_eq!(hex_u64("0x10"), Some(16));
        assert_eq!(hex_u64("0x"), None);
    }
}
