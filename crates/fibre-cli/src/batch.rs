//! The program's entry: `ip`'s global options, one command, or `-batch FILE`.
//!
//! Batch semantics are `ip -batch`'s: lines are read as `getcmdline` reads them ('#' starts a
//! comment, a backslash before the newline continues the line, line numbers count physical
//! lines), split as `makeargs` splits them (blanks, single or double quotes), blank lines are
//! skipped; a failed command prints "Command failed FILE:LINE" and stops the batch unless
//! `-force`; the exit status is 1 if any command failed; a parser that exits in iproute2 ends
//! the batch at once with its status.
//!
//! Speed: the file is read in large chunks into one reused buffer, lines are sliced from it,
//! words go into one reused vector per chunk, and output is buffered in [`Cli::out`] and
//! written in large pieces.

use crate::args::matches;
use crate::error::CmdError;
use crate::{usage_text, Cli, Options};
use fibre_fib::Family;
use std::io::{Read, Write};

/// Output above this many bytes is written out between commands; below it, it waits, so that
/// a batch of small answers costs a few large writes.
const FLUSH_THRESHOLD: usize = 1 << 20;

/// iproute2's limit on words per batch line: `do_batch` splits a line into 512 slots, one for
/// the terminating NULL (iproute2 6.1: 511 words run, 512 print "Too many arguments to
/// command"); a 16-way multipath route takes about 100.
const MAX_ARGS: usize = 511;

/// Runs `fibre ARGS...` and returns the exit status.
pub fn main_with(args: &[String], stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let mut opts = Options::default();
    let mut batch_file: Option<&str> = None;
    let mut socket: Option<&str> = None;
    let mut offline = false;
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
        // iproute2's option order, so that abbreviations resolve as there ("-h" is -human,
        // "-b" is -batch, "-n" is -netns).
        let value = |i: usize| args.get(i + 1).map(String::as_str);
        if matches(opt, "-loops") {
            if value(i).is_none() {
                let _ = stderr.write_all(usage_text().as_bytes());
                return 255;
            }
            i += 1;
        } else if matches(opt, "-family") {
            let Some(f) = value(i) else {
                let _ = stderr.write_all(usage_text().as_bytes());
                return 255;
            };
            i += 1;
            match crate::args::family_a2n(f) {
                Some(fam) => opts.family = fam,
                None => {
                    let e = CmdError::invarg("invalid protocol family", f);
                    let _ = stderr.write_all(e.message().as_bytes());
                    return 255;
                }
            }
        } else if opt == "-4" {
            opts.family = Some(Family::Inet);
        } else if opt == "-6" {
            opts.family = Some(Family::Inet6);
        } else if opt == "-0" || opt == "-M" {
            let _ = writeln!(
                stderr,
                "fibre: option \"{raw}\" (link/MPLS family) is not supported."
            );
            return 255;
        } else if matches(opt, "-human")
            || matches(opt, "-human-readable")
            || matches(opt, "-iec")
            || matches(opt, "-resolve")
            || matches(opt, "-oneline")
            || matches(opt, "-timestamp")
            || matches(opt, "-tshort")
        {
            // Accepted for compatibility: fibre never resolves names and prints the full form.
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
            let Some(f) = value(i) else {
                let _ = stderr.write_all(usage_text().as_bytes());
                return 255;
            };
            i += 1;
            batch_file = Some(f);
        } else if opt == "-offline" {
            // fibre's own option, never abbreviated ("-o" is iproute2's -oneline): the
            // in-process state even where a fibred answers on the default socket.
            offline = true;
        } else if opt == "-n" || matches(opt, "-netns") {
            // fibre's reading of -n: the fibred socket to use.
            let Some(p) = value(i) else {
                let _ = stderr.write_all(usage_text().as_bytes());
                return 255;
            };
            i += 1;
            socket = Some(p);
        } else if matches(opt, "-brief") {
            // Accepted for compatibility; the full form is printed.
        } else if matches(opt, "-json") {
            opts.json = true;
        } else if matches(opt, "-pretty") {
            opts.pretty = true;
        } else if matches(opt, "-rcvbuf") {
            if value(i).is_none() {
                let _ = stderr.write_all(usage_text().as_bytes());
                return 255;
            }
            i += 1;
        } else if ["-color", "-colour"]
            .iter()
            .any(|c| matches(opt.split('=').next().unwrap_or(opt), c))
        {
            // Colours are never used: output is for comparison and scripts.
        } else if matches(opt, "-help") {
            let _ = stderr.write_all(usage_text().as_bytes());
            return 255;
        } else if matches(opt, "-netns") {
            let _ = writeln!(
                stderr,
                "fibre: -netns is not supported: fibre runs its own routing state."
            );
            return 255;
        } else if matches(opt, "-Numeric") || matches(opt, "-all") {
            // Accepted for compatibility.
        } else {
            let _ = writeln!(stderr, "Option \"{raw}\" is unknown, try \"ip -help\".");
            return 255;
        }
        i += 1;
    }
    let words: Vec<&str> = args[i..].iter().map(String::as_str).collect();
    if offline && socket.is_some() {
        let _ = writeln!(stderr, "fibre: -offline and -n exclude each other");
        return 255;
    }
    let backend = match crate::online::choose(socket, offline) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(stderr, "fibre: {e}");
            return 1;
        }
    };
    let mut cli = Cli::new(backend, opts);
    if let Some(file) = batch_file {
        return run_batch(&mut cli, file, stdout, stderr);
    }
    if words.first().is_some_and(|w| matches(w, "monitor")) {
        let Some(path) = cli.fib.remote().map(|r| r.path().to_path_buf()) else {
            let _ = writeln!(stderr, "fibre: monitor needs a running fibred");
            return 1;
        };
        return crate::monitor::run(&path, &words[1..], &cli.opts, stdout, stderr);
    }
    if words.len() >= 2 && matches(words[0], "route") && matches!(words[1], "save" | "restore") {
        let r = if words[1] == "save" {
            crate::save::save(&mut cli, &words[2..], stdout)
        } else {
            crate::save::restore(&mut cli, &mut std::io::stdin(), stderr)
        };
        let _ = stdout.flush();
        return match r {
            Ok(()) => 0,
            Err(e) => {
                let _ = stderr.write_all(e.message().as_bytes());
                e.status()
            }
        };
    }
    if words.first() == Some(&"demo") {
        return crate::demo::run(&words[1..], stdout, stderr);
    }
    if words.first() == Some(&"forward") {
        return crate::forward::run(&words[1..], &cli.opts, stdout, stderr);
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

/// Bytes read from a batch file at a time: large enough that reads are few, small enough that
/// the buffer is reused instead of mapping (and zeroing) memory for the whole file.
const CHUNK: u64 = 4 << 20;

/// Reads a batch file (`-` is stdin) and runs it on `cli`, a chunk at a time.
pub fn run_batch(cli: &mut Cli, name: &str, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let mut input: Box<dyn Read> = if name == "-" {
        Box::new(std::io::stdin())
    } else {
        match std::fs::File::open(name) {
            Ok(f) => Box::new(f),
            Err(e) => {
                let msg = e
                    .raw_os_error()
                    .map(strerror)
                    .unwrap_or("Input/output error");
                let _ = writeln!(stderr, "Cannot open file \"{name}\" for reading: {msg}");
                return 1;
            }
        }
    };
    run_reader(cli, name, &mut input, CHUNK, stdout, stderr)
}

/// Runs the batch read from `input`, `chunk` bytes at a time.
fn run_reader(
    cli: &mut Cli,
    name: &str,
    input: &mut dyn Read,
    chunk: u64,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    cli.strict_dump = false;
    let mut run = BatchRun::new(name);
    let mut buf: Vec<u8> = Vec::with_capacity(chunk as usize);
    loop {
        let mut eof = match (&mut *input).take(chunk).read_to_end(&mut buf) {
            Ok(n) => n == 0,
            Err(e) => {
                let msg = e
                    .raw_os_error()
                    .map(strerror)
                    .unwrap_or("Input/output error");
                let _ = writeln!(stderr, "Cannot read \"{name}\": {msg}");
                return 1;
            }
        };
        // Whole lines only (all of it at the end), so a chunk never splits a character.
        let cut = if eof {
            buf.len()
        } else {
            buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
        };
        match std::str::from_utf8(&buf[..cut]) {
            Ok(text) => {
                let used = run.feed(cli, text, eof, stdout, stderr);
                buf.drain(..used);
            }
            Err(_) => {
                // Not UTF-8: read the rest and run it all with the bad bytes replaced, as the
                // replacement changes lengths and chunk offsets would no longer line up.
                if !eof && input.read_to_end(&mut buf).is_err() {
                    let _ = writeln!(stderr, "Cannot read \"{name}\"");
                    return 1;
                }
                let text = String::from_utf8_lossy(&buf).into_owned();
                run.feed(cli, &text, true, stdout, stderr);
                buf.clear();
                eof = true;
            }
        }
        if let Some(status) = run.finished {
            run.flush(cli, stdout, stderr);
            return status;
        }
        if eof {
            break;
        }
    }
    run.flush(cli, stdout, stderr);
    run.status
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
    cli.strict_dump = false;
    let mut run = BatchRun::new(name);
    run.feed(cli, text, true, stdout, stderr);
    run.flush(cli, stdout, stderr);
    run.finished.unwrap_or(run.status)
}

/// The state of one batch across the chunks of its file.
struct BatchRun<'n> {
    name: &'n str,
    /// Physical lines read so far (iproute2's `cmdlineno`).
    lineno: usize,
    /// 1 once a command has failed.
    status: i32,
    /// Set when the batch must end now, with this exit status.
    finished: Option<i32>,
}

impl<'n> BatchRun<'n> {
    fn new(name: &'n str) -> Self {
        BatchRun {
            name,
            lineno: 0,
            status: 0,
            finished: None,
        }
    }

    fn flush(&mut self, cli: &mut Cli, stdout: &mut dyn Write, stderr: &mut dyn Write) {
        let _ = stderr.write_all(&cli.err);
        cli.err.clear();
        let _ = stdout.write_all(&cli.out);
        cli.out.clear();
        let _ = stdout.flush();
    }

    /// Runs the complete commands at the start of `text` and returns the bytes they took; a
    /// command continued past the end of `text` waits for the next chunk unless `eof`.
    fn feed(
        &mut self,
        cli: &mut Cli,
        text: &str,
        eof: bool,
        stdout: &mut dyn Write,
        stderr: &mut dyn Write,
    ) -> usize {
        let mut words: Vec<&str> = Vec::with_capacity(16);
        let mut pos = 0;
        while pos < text.len() && self.finished.is_none() {
            // `str::find` of one ASCII byte is the library's word-at-a-time memchr.
            let line_end = |from: usize| text[from..].find('\n').map(|i| from + i + 1);
            let end = match line_end(pos) {
                Some(e) => e,
                None if eof => text.len(),
                None => break,
            };
            let first = strip_comment(&text[pos..end]);
            let result = if let Some(head) = first.strip_suffix("\\\n") {
                // A continued command: join its physical lines (rare, so it may allocate).
                let mut joined = head.to_string();
                let mut p = end;
                let mut lines = 1;
                let complete = loop {
                    if p >= text.len() {
                        break false;
                    }
                    let e = match line_end(p) {
                        Some(e) => e,
                        None if eof => text.len(),
                        None => break false,
                    };
                    let next = strip_comment(&text[p..e]);
                    lines += 1;
                    p = e;
                    if let Some(part) = next.strip_suffix("\\\n") {
                        joined.push_str(part);
                    } else {
                        joined.push_str(next);
                        break true;
                    }
                };
                if !complete {
                    if !eof {
                        break;
                    }
                    let _ = stderr.write_all(b"Missing continuation line\n");
                    self.lineno += lines;
                    self.finished = Some(self.status);
                    return text.len();
                }
                self.lineno += lines;
                pos = p;
                let mut owned = Vec::new();
                match makeargs(&joined, &mut owned) {
                    Ok(()) if owned.is_empty() => continue,
                    Ok(()) => cli.exec(&owned),
                    Err(e) => Err(e),
                }
            } else {
                words.clear();
                cli.batch_secret = None;
                let parsed = makeargs(first, &mut words);
                if parsed.is_ok() && crate::sr::reads_secret(&words) {
                    // The next line is the secret (see `sr`): wait for it whole.
                    let secret_end = match line_end(end) {
                        Some(e) => e,
                        None if eof => text.len(),
                        None => break,
                    };
                    let line = &text[end..secret_end];
                    cli.batch_secret = Some(line.strip_suffix('\n').unwrap_or(line).to_string());
                    pos = secret_end;
                } else {
                    pos = end;
                }
                self.lineno += 1;
                match parsed {
                    Ok(()) if words.is_empty() => continue,
                    Ok(()) => cli.exec(&words),
                    Err(e) => Err(e),
                }
            };
            self.after(cli, result, stdout, stderr);
        }
        pos
    }

    /// Reports one command's result as `ip -batch` does.
    fn after(
        &mut self,
        cli: &mut Cli,
        result: Result<(), CmdError>,
        stdout: &mut dyn Write,
        stderr: &mut dyn Write,
    ) {
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
                let _ = writeln!(stderr, "{msg}Command failed {}:{}", self.name, self.lineno);
                self.status = 1;
                if !cli.opts.force {
                    self.finished = Some(1);
                }
            }
            Err(CmdError::Exit { status, msg }) => {
                let _ = stdout.write_all(&cli.out);
                cli.out.clear();
                let _ = stdout.flush();
                let _ = stderr.write_all(msg.as_bytes());
                self.finished = Some(status);
            }
        }
    }
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
    fn chunk_boundaries_do_not_change_the_answer() {
        // Missing devices make every command fail with a line number: the same lines must come
        // out whatever the chunk size, continuation lines included.
        let text = "route add 1.0.0.0/8 dev a\n# c\nroute add 2.0.0.0/8 \\\n dev b\n\nroute add 3.0.0.0/8 dev c";
        let run = |chunk: u64| {
            let mut cli = Cli::new(
                fibre_fib::Fib::default(),
                Options {
                    force: true,
                    ..Options::default()
                },
            );
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let status = run_reader(
                &mut cli,
                "f",
                &mut text.as_bytes(),
                chunk,
                &mut out,
                &mut err,
            );
            (status, String::from_utf8(err).unwrap())
        };
        let want = (
            1,
            "Cannot find device \"a\"\nCommand failed f:1\nCannot find device \"b\"\nCommand failed f:4\nCannot find device \"c\"\nCommand failed f:6\n"
                .to_string(),
        );
        for chunk in [1, 3, 7, 16, 1 << 20] {
            assert_eq!(run(chunk), want, "chunk {chunk}");
        }
    }

    #[test]
    fn comments_end_the_line() {
        assert_eq!(strip_comment("route show # all\n"), "route show ");
    }
}
