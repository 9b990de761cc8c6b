//! `fibre forward CONFIG --port LINK=HOSTIF[:KIND] ... [--duration SECONDS] [--input-cache
//! MODE]`: the forwarding plane live, on host interfaces.
//!
//! CONFIG is applied to a fresh in-process FIB as for captures; each `--port` binds fibre link
//! LINK to host interface HOSTIF of the caller's network namespace through a port of KIND
//! (`af_packet`, the default here; `af_xdp`; `tap`, which creates HOSTIF as a TAP device).
//! One worker forwards on the monotonic clock (fibre-io's `worker`), taking the writer's
//! turn itself between vectors, until SIGINT or SIGTERM or until SECONDS have passed; then
//! the counters are printed as for captures, followed by one line per port. Each bound link
//! follows its host interface: no carrier while that is down or gone, and its MTU (which
//! replaces the configuration's from the start).
//!
//! The host's own stack still sees what arrives on an AF_PACKET port (a packet socket is a
//! tap, not a diversion), so the host interfaces should carry no addresses of their own; an
//! AF_XDP port diverts its queue's frames from the host.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fibre_io::worker::{monotonic_ns, Router, Worker};
use fibre_io::{Kind, OpenError, Port, PortError};

use fibre_dataplane::input_cache::Mode;

use crate::forward::{
    cache_mode, link_pair, load, pipeline, quote, report_json, report_text, usage_error,
};
use crate::Options;

const USAGE: &str = "Usage: fibre [ -j ] forward CONFIG --port LINK=HOSTIF[:{ af_packet | af_xdp | tap }] [ --port ... ]\n                        [ --duration SECONDS ] [ --input-cache { on | hints | off } ]\n";

struct Binding<'a> {
    link: &'a str,
    dev: &'a str,
    kind: Kind,
}

struct Args<'a> {
    config: &'a str,
    ports: Vec<Binding<'a>>,
    duration: Option<Duration>,
    cache: Option<Mode>,
}

fn parse<'a>(words: &[&'a str]) -> Result<Args<'a>, String> {
    let mut config = None;
    let mut ports = Vec::new();
    let mut duration = None;
    let mut cache = None;
    let mut it = words.iter();
    while let Some(&w) = it.next() {
        match w {
            "--port" | "-port" => {
                let (link, rest) = link_pair("--port", it.next(), "HOSTIF[:KIND]")?;
                let (dev, kind) = match rest.split_once(':') {
                    Some((d, k)) => (
                        d,
                        Kind::from_name(k).ok_or_else(|| format!("unknown port kind \"{k}\""))?,
                    ),
                    None => (rest, Kind::AfPacket),
                };
                ports.push(Binding { link, dev, kind });
            }
            "--duration" | "-duration" => {
                let v = it.next().ok_or("--duration needs SECONDS")?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                    .ok_or_else(|| format!("--duration \"{v}\": expected seconds"))?;
                duration = Some(Duration::from_secs_f64(secs));
            }
            "--input-cache" | "-input-cache" => cache = Some(cache_mode(it.next().copied())?),
            "help" | "--help" | "-h" => return Err(String::new()),
            _ if config.is_none() && !w.starts_with('-') => config = Some(w),
            _ => return Err(format!("unexpected argument \"{w}\"")),
        }
    }
    Ok(Args {
        config: config.ok_or("a configuration file is needed")?,
        ports,
        duration,
        cache,
    })
}

/// Live `fibre forward`; returns the exit status.
pub fn run(words: &[&str], opts: &Options, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let args = match parse(words) {
        Ok(a) => a,
        Err(e) => return usage_error(&e, USAGE, stderr),
    };
    let fib = match load(args.config, opts, stdout, stderr) {
        Ok(f) => f,
        Err(status) => return status,
    };
    let (dp, names) = match pipeline(&fib, args.cache, stderr) {
        Ok(p) => p,
        Err(status) => return status,
    };
    let mut worker = Worker::new(dp);
    let mut bound = Vec::new();
    for b in &args.ports {
        let Some(ifindex) = fib.link_index(b.link) else {
            let _ = writeln!(stderr, "Cannot find device \"{}\"", b.link);
            return 1;
        };
        match Port::open(b.kind, b.dev) {
            Ok(port) => {
                bound.push((b.link, b.dev, port.kind, port.detail));
                worker.add(ifindex, port);
            }
            Err(e) => {
                let _ = writeln!(stderr, "{e}");
                // As ip: 1 for a name it cannot resolve, 2 for what the kernel refused.
                return if matches!(e, OpenError::NoDevice(_)) {
                    1
                } else {
                    2
                };
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    // Signals are blocked before any thread starts, so only the waiter takes them.
    if let Err(e) = fibre_sys::block_termination_signals() {
        let _ = writeln!(stderr, "fibre forward: {e}");
        return 1;
    }
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            fibre_sys::wait_termination();
            stop.store(true, Ordering::Relaxed);
        });
    }
    if let Some(d) = args.duration {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(d);
            stop.store(true, Ordering::Relaxed);
        });
    }
    let mut router = Router::new(fib);
    worker.run(&mut router, &stop, &monotonic_ns);
    let ports = worker.ports();
    let text = if opts.json {
        let mut s = report_json(worker.dataplane(), &names);
        // The captures' report is one object ending in "}\n": the ports go inside it.
        s.truncate(s.trim_end().len() - 1);
        s.push_str(",\"ports\":[");
        for (i, ((link, dev, kind, detail), (_, c, state))) in bound.iter().zip(&ports).enumerate()
        {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "{{\"link\":{},\"dev\":{},\"io\":{},\"mode\":{},\"state\":{},\"counters\":{{",
                quote(link),
                quote(dev),
                quote(kind.name()),
                quote(detail),
                quote(state_name(*state)),
            );
            for (j, (name, v)) in c.named().into_iter().enumerate() {
                let _ = write!(s, "{}\"{name}\":{v}", if j > 0 { "," } else { "" });
            }
            s.push_str("}}");
        }
        let _ = writeln!(s, "],\"unrouted\":{}}}", worker.unrouted());
        s
    } else {
        let mut s = report_text(worker.dataplane(), &names);
        for ((link, dev, kind, detail), (_, c, state)) in bound.iter().zip(&ports) {
            let _ = write!(
                s,
                "port {link} dev {dev} io {} ({detail}) {}:",
                kind.name(),
                state_name(*state)
            );
            for (name, v) in c.named() {
                let _ = write!(s, " {name} {v}");
            }
            s.push('\n');
        }
        if worker.unrouted() > 0 {
            let _ = writeln!(s, "sent on links without a port {}", worker.unrouted());
        }
        s
    };
    let _ = stdout.write_all(text.as_bytes());
    0
}

fn state_name(s: Result<(), PortError>) -> &'static str {
    match s {
        Ok(()) => "up",
        Err(PortError::Gone) => "gone",
        Err(_) => "down",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_cache_mode_is_parsed_beside_the_ports() {
        let a = parse(&["c", "--port", "a0=veth0:af_xdp", "--input-cache", "hints"]).unwrap();
        assert_eq!(a.cache, Some(Mode::Hints));
        assert_eq!(a.ports[0].kind, Kind::AfXdp);
        assert_eq!(parse(&["c", "--port", "a0=veth0"]).unwrap().cache, None);
        assert!(parse(&["c", "--port", "a0=veth0", "--input-cache", "sometimes"]).is_err());
    }
}
