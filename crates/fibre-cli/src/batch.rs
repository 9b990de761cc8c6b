//! The program's entry: `ip`'s global options, one command, or `-batch FILE`.
//!
//! Batch semantics are `ip -batch`'s: lines are read as `getcmdline` reads them ('#' starts a
//! comment, a backslash before the newline continues the line, line numbers count physical
//! lines), split as `makeargs` splits them (blanks, single or double quotes), blank lines are
//! skipped; a failed command prints "Command failed FILE:LINE" and stops the batch unless
//! `-force`; the exit status is 1 if any command failed; a parser that exits in iproute2 ends
//! the batch at once with its status.
//!
//! Speed: the whole file is read once, lines are sliced from it, words go into one reused
//! vector and output is buffered in [`Cli::out`], written in large chunks.

use crate::args::matches;
use crate::error::CmdError;
use crate::{usage_text, Cli, Options};
use fibre_fib::{Family, Fib};
use std::borrow::Cow;
use std::io::{Read, Write};

/// Output above this many bytes is written out between commands; below it, it waits, so that
/// a batch of small answers costs a few large writes.
const FLUSH_THRESHOLD: usize = 1 << 20;

/// iproute2's limit on words per batch line (`makeargs` with 100 slots, one for NULL).
const MAX_ARGS: usize = 99;

/// Runs `fibre ARGS...` and returns the exit status.
pub fn main_with(args: &[String], stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let mut opts = Options::default();
    let mut batch_file: Option<&str> = None;
    let mut i = 0;
    while i < args.len() {
        let raw = args[i].as_str();
        if raw == "--" {
            i += 1;
            break;
        }
        if !raw.starts_with('-') {
            break;
        }
        let opt = if raw.starts_with("--") {
            &raw[1..]
        } else {
            raw
        };
        if matches(opt, "-family") {
            i += 1;
            let Some(f) = args.get(i) else {
                let _ = stderr.write_all(usage_text().as_bytes());
                return 255;
            };
            match crate::args::family_a2n(f) {
                Some(fam) => opts.family = fam,
                None => {
                    let _ = stderr.write_all(
                        CmdError::invarg("invalid protocol family", f)
                            .message()
                            .as_bytes(),
                    );
                    return 255;
                }
            }
        } else if opt == "-4" {
            opts.family = Some(Family::Inet);
        } else if opt == "-6" {
            opts.family = Some(Family::Inet6);
        } else if matches(opt, "-stats") || matches(opt, "-statistics") {
            opts.stats += 1;
        } else if matches(opt, "-details") {
            opts.details += 1;
        } else if matches(opt, "-Version") {
            let _ = writeln!(stdout, "fibre utility, fibre-{}", env!("CARGO_PKG_VERSION"));
            return 0;
        } else if matches(opt, "-force") {
            opts.force = true;
        } else if matches(opt, "-batch") {
            i += 1;
            let Some(f) = args.get(i) else {
                let _ = stderr.write_all(usage_text().as_bytes());
                return 255;
            };
            batch_file = Some(f);
        } else if matches(opt, "-json") {
            opts.json = true;
        } else if matches(opt, "-pretty") {
            opts.pretty = true;
        } else if matches(opt, "-help") {
            let _ = stderr.write_all(usage_text().as_bytes());
            return 255;
        } else if matches(opt, "-oneline") || matches(opt, "-resolve") || matches(opt, "-Numeric") {
            // Accepted for compatibility; fibre never resolves names and prints one form.
        } else {
            let _ = writeln!(stderr, "Option \"{raw}\" is unknown, try \"ip -help\".");
            return 255;
        }
        i += 1;
    }
    let words: Vec<&str> = args[i..].iter().map(String::as_str).collect();
    let mut cli = Cli::new(Fib::default(), opts);
    if let Some(file) = batch_file {
        return run_batch(&mut cli, file, stdout, stderr);
    }
    if words.first() == Some(&"demo") {
        return crate::demo::run(&words[1..], stdout, stderr);
    }
    if words.is_empty() {
        let _ = stderr.write_all(usage_text().as_bytes());
        return 255;
    }
    let r = cli.exec(&words);
    let _ = stderr.write_all(&cli.err);
    let _ = stdout.write_all(&cli.out);
    let _ = stdout.flush();
    match r {
        Ok(()) => 0,
        Err(e) => {
            let _ = stderr.write_all(e.message().as_bytes());
            e.status()
        }
    }
}

/// Reads a batch file (`-` is stdin) and runs it on `cli`.
pub fn run_batch(cli: &mut Cli, name: &str, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let mut data = Vec::new();
    let read = if name == "-" {
        std::io::stdin().read_to_end(&mut data).map(|_| ())
    } else {
        std::fs::File::open(name).and_then(|mut f| f.read_to_end(&mut data).map(|_| ()))
    };
    if let Err(e) = read {
        let msg = e
            .raw_os_error()
            .map(strerror)
            .unwrap_or("Input/output error");
        let _ = writeln!(stderr, "Cannot open file \"{name}\" for reading: {msg}");
        return 1;
    }
    let text = match String::from_utf8(data) {
        Ok(t) => t,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    run_text(cli, name, &text, stdout, stderr)
}

fn strerror(errno: i32) -> &'static str {
    match errno {
        2 => "No such file or directory",
        13 => "Permission denied",
        21 => "Is a directory",
        _ => fibre_fib::Errno(errno).strerror(),
    }
}

/// Runs the lines of `text` as `ip -batch NAME` would.
pub fn run_text(
    cli: &mut Cli,
    name: &str,
    text: &str,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    let mut status = 0;
    let mut lineno = 0usize;
    let mut words: Vec<&str> = Vec::with_capacity(16);
    let mut lines = text.split_inclusive('\n');
    'lines: while let Some(first) = lines.next() {
        lineno += 1;
        let mut line: Cow<'_, str> = Cow::Borrowed(strip_comment(first));
        while let Some(pos) = line.find("\\\n") {
            let Some(next) = lines.next() else {
                let _ = stderr.write_all(b"Missing continuation line\n");
                break 'lines;
            };
            lineno += 1;
            let mut joined = line[..pos].to_string();
            joined.push_str(strip_comment(next));
            line = Cow::Owned(joined);
        }
        let result = match line {
            Cow::Borrowed(l) => {
                words.clear();
                match makeargs(l, &mut words) {
                    Ok(()) if words.is_empty() => continue,
                    Ok(()) => cli.exec(&words),
                    Err(e) => Err(e),
                }
            }
            Cow::Owned(l) => {
                let mut owned = Vec::new();
                match makeargs(&l, &mut owned) {
                    Ok(()) if owned.is_empty() => continue,
                    Ok(()) => cli.exec(&owned),
                    Err(e) => Err(e),
                }
            }
        };
        if !cli.err.is_empty() {
            let _ = stderr.write_all(&cli.err);
            cli.err.clear();
        }
        if cli.out.len() >= FLUSH_THRESHOLD {
            let _ = stdout.write_all(&cli.out);
            cli.out.clear();
        }
        match result {
            Ok(()) => {}
            Err(CmdError::Fail { msg, .. }) => {
                let _ = stdout.write_all(&cli.out);
                cli.out.clear();
                let _ = stdout.flush();
                let _ = writeln!(stderr, "{msg}Command failed {name}:{lineno}");
                status = 1;
                if !cli.opts.force {
                    break;
                }
            }
            Err(CmdError::Exit { status, msg }) => {
                let _ = stdout.write_all(&cli.out);
                cli.out.clear();
                let _ = stdout.flush();
                let _ = stderr.write_all(msg.as_bytes());
                return status;
            }
        }
    }
    let _ = stdout.write_all(&cli.out);
    cli.out.clear();
    let _ = stdout.flush();
    status
}

/// Runs one command line (no continuation lines) on `cli`, as a batch line is run.
pub fn run_line(cli: &mut Cli, line: &str) -> Result<(), CmdError> {
    let mut words = Vec::with_capacity(16);
    makeargs(strip_comment(line), &mut words)?;
    cli.exec(&words)
}

/// `getcmdline`'s comment rule: everything from the first '#' is dropped (the newline too, which
/// also ends any continuation).
fn strip_comment(line: &str) -> &str {
    match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    }
}

/// iproute2's `makeargs`: words separated by blanks; a word starting with a quote runs to the
/// matching quote.
fn makeargs<'a>(line: &'a str, out: &mut Vec<&'a str>) -> Result<(), CmdError> {
    let b = line.as_bytes();
    let ws = |c: u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let mut i = 0;
    loop {
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            return Ok(());
        }
        if out.len() >= MAX_ARGS {
            return Err(CmdError::exit(1, "Too many arguments to command\n"));
        }
        if b[i] == b'"' || b[i] == b'\'' {
            let q = b[i];
            let start = i + 1;
            match b[start..].iter().position(|&c| c == q) {
                Some(n) => {
                    out.push(&line[start..start + n]);
                    i = start + n + 1;
                }
                None => return Err(CmdError::exit(1, "Unterminated quoted string\n")),
            }
        } else {
            let start = i;
            while i < b.len() && !ws(b[i]) {
                i += 1;
            }
            out.push(&line[start..i]);
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makeargs_splits_like_iproute2() {
        let mut v = Vec::new();
        makeargs("  route add\t10.0.0.0/8 \"a b\" 'c'\n", &mut v).unwrap();
        assert_eq!(v, ["route", "add", "10.0.0.0/8", "a b", "c"]);
        let mut v = Vec::new();
        assert_eq!(
            makeargs("x \"y", &mut v),
            Err(CmdError::exit(1, "Unterminated quoted string\n"))
        );
    }

    #[test]
    fn comments_end_the_line() {
        assert_eq!(strip_comment("route show # all\n"), "route show ");
    }
}
