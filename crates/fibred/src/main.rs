//! `fibred [--socket PATH] [--dgram PATH | --no-dgram] [--state FILE [--state-discard-corrupt]]
//! [--max-clients N] [--admin-group GROUP] [--fpm ADDR:PORT [--fpm-sweep QUIET[,MAX]]
//! [--fpm-offload] [--fpm-kernel-routes]] [--mirror [NETNS] [--mirror-rcvbuf BYTES]]
//! [--metrics ADDR:PORT] [-v]...`
//!
//! With no arguments it listens on [`fibre_proto::client::default_socket`] and keeps no state
//! file. The log level comes from `-v` (debug) or FIBRE_LOG (error, warn, info, debug); SIGTERM
//! or SIGINT stops it cleanly: the state is saved and the sockets are removed. Exits 1 when it
//! cannot start (a state file it cannot restore or save to, among others) or when the final
//! save fails.

#![deny(clippy::unwrap_used, clippy::expect_used)]

use fibred::log::{self, Level};
use fibred::server::Access;
use fibred::{Config, Daemon};
use std::path::PathBuf;

const USAGE: &str =
    "Usage: fibred [--socket PATH] [--dgram PATH | --no-dgram] [--state FILE] [-v]\n\
              [--state-discard-corrupt] [--max-clients N] [--admin-group GROUP]\n\
  --socket PATH  SOCK_SEQPACKET socket (netlink and ring); default $FIBRE_SOCKET,\n\
                 $XDG_RUNTIME_DIR/fibre/fibred.sock or /run/fibre/fibred.sock\n\
  --dgram PATH   SOCK_DGRAM socket; default beside --socket with the extension .dgram\n\
  --state FILE   restore the configuration from FILE and save it there on change;\n\
                 a FILE that cannot be restored refuses the start\n\
  --state-discard-corrupt  instead, move such a FILE to FILE.corrupt-<time>, start empty\n\
  --max-clients N  connections served at once (default 1024; administrators get 16 more)\n\
  --admin-group GROUP  members of GROUP (name or id) may change the state, as root and\n\
                 fibred's own user may; everyone who can connect may read\n\
  -v             debug logs (or FIBRE_LOG=error|warn|info|debug)\n";

fn main() {
    let mut socket: Option<PathBuf> = None;
    let mut dgram: Option<Option<PathBuf>> = None;
    let mut state = None;
    let mut access = Access::default();
    let mut discard_corrupt = false;
    let mut fpm: Option<std::net::SocketAddr> = None;
    let mut fpm_settings = fibred::fpm::Settings::default();
    let mut mirror: Option<fibred::mirror::Config> = None;
    let mut mirror_rcvbuf = fibred::mirror::RCVBUF;
    let mut metrics: Option<std::net::SocketAddr> = None;
    if let Some(l) = std::env::var("FIBRE_LOG")
        .ok()
        .and_then(|s| Level::parse(&s))
    {
        log::set_level(l);
    }
    let mut args = std::env::args().skip(1).peekable();
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprint!("fibred: {name} needs a value\n{USAGE}");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--socket" | "-s" => socket = Some(PathBuf::from(value("--socket"))),
            "--dgram" => dgram = Some(Some(PathBuf::from(value("--dgram")))),
            "--no-dgram" => dgram = Some(None),
            "--state" => state = Some(PathBuf::from(value("--state"))),
            "--max-clients" => access.max_clients = number(&value("--max-clients")),
            "--admin-group" => {
                let g = value("--admin-group");
                match fibre_sys::group_members(&g) {
                    Ok(group) => access.admin_group = Some(group),
                    Err(e) => {
                        eprintln!("fibred: --admin-group {g}: {e}");
                        std::process::exit(2);
                    }
                }
            }
            "--state-discard-corrupt" => discard_corrupt = true,
            "--fpm" => fpm = Some(address("--fpm", &value("--fpm"))),
            "--fpm-sweep" => {
                let v = value("--fpm-sweep");
                let (quiet, max) = v.split_once(',').unwrap_or((&v, ""));
                fpm_settings.sweep_quiet = seconds(quiet);
                if !max.is_empty() {
                    fpm_settings.sweep_max = seconds(max);
                }
            }
            "--fpm-offload" => fpm_settings.offload = true,
            "--mirror" => {
                let netns = args.peek().filter(|a| !a.starts_with('-')).cloned();
                if netns.is_some() {
                    args.next();
                }
                mirror = Some(fibred::mirror::Config {
                    netns: netns.map(PathBuf::from),
                    rcvbuf: 0,
                });
            }
            "--mirror-rcvbuf" => mirror_rcvbuf = number(&value("--mirror-rcvbuf")),
            "--metrics" => metrics = Some(address("--metrics", &value("--metrics"))),
            "--fpm-kernel-routes" => fpm_settings.kernel_routes = true,
            "-v" | "--verbose" => log::set_level(Level::Debug),
            "-h" | "--help" => {
                print!("{USAGE}");
                return;
            }
            _ => {
                eprint!("fibred: unknown argument {a:?}\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    let socket = socket.unwrap_or_else(fibre_proto::client::default_socket);
    let dgram = dgram.unwrap_or_else(|| Some(Config::dgram_beside(&socket)));
    if let Err(e) = fibred::server::block_termination_signals() {
        fibred::log!(Level::Error, "cannot block signals", error = e);
        std::process::exit(1);
    }
    let config = Config {
        socket,
        dgram,
        state,
        access,
        fpm: fpm.map(|listen| fibred::fpm::Config {
            listen,
            settings: fpm_settings,
        }),
        mirror: mirror.map(|m| fibred::mirror::Config {
            rcvbuf: mirror_rcvbuf,
            ..m
        }),
        metrics,
    };
    let daemon = match Daemon::start(config.clone()) {
        Ok(d) => d,
        Err(e) => {
            let discard = config
                .state
                .as_deref()
                .filter(|_| discard_corrupt && is_state_error(&e));
            let Some(path) = discard else {
                fibred::log!(Level::Error, "cannot start", error = e);
                std::process::exit(1)
            };
            match fibred::state::move_aside(path) {
                Ok(to) => fibred::log!(
                    Level::Warn,
                    "state file moved aside, starting empty",
                    error = e,
                    moved_to = to.display()
                ),
                Err(m) => {
                    fibred::log!(Level::Error, "cannot start", error = e, move_aside = m);
                    std::process::exit(1)
                }
            }
            Daemon::start(config).unwrap_or_else(|e| {
                fibred::log!(Level::Error, "cannot start", error = e);
                std::process::exit(1)
            })
        }
    };
    let sig = fibred::server::wait_termination();
    fibred::log!(Level::Info, "shutting down", signal = sig);
    if let Err(e) = daemon.stop_checked() {
        fibred::log!(Level::Error, "stopped without saving the state", error = e);
        std::process::exit(1);
    }
    fibred::log!(Level::Info, "stopped");
}

fn address(option: &str, v: &str) -> std::net::SocketAddr {
    v.parse().unwrap_or_else(|_| {
        eprint!("fibred: {option} {v:?}: not an ADDR:PORT\n{USAGE}");
        std::process::exit(2)
    })
}

fn seconds(s: &str) -> std::time::Duration {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => std::time::Duration::from_secs_f64(v),
        _ => {
            eprint!("fibred: {s:?}: not a number of seconds\n{USAGE}");
            std::process::exit(2)
        }
    }
}

fn number(s: &str) -> usize {
    s.parse().unwrap_or_else(|_| {
        eprint!("fibred: not a number: {s:?}\n{USAGE}");
        std::process::exit(2)
    })
}

/// The start failed because of the state file ([`fibred::state::StateError`]).
fn is_state_error(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|i| i.is::<fibred::state::StateError>())
}
