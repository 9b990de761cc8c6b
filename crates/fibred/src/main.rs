//! `fibred [--config FILE | --print-config] [OPTION]...`: the options (see USAGE) are those
//! of the configuration file (`fibred::config`), and override it.
//!
//! With no arguments it listens on [`fibre_proto::client::default_socket`] and keeps no state
//! file. The log level comes from the file, then FIBRE_LOG (error, warn, info, debug), then
//! `-v` (debug); the logs go to stderr (`fibred::log`). SIGTERM
//! or SIGINT stops it cleanly: the state is saved and the sockets are removed. Exits 1 when it
//! cannot start (a state file it cannot restore or save to, among others) or when the final
//! save fails.

#![deny(clippy::unwrap_used, clippy::expect_used)]

use fibred::log;
use fibred::Daemon;
use std::path::{Path, PathBuf};

const USAGE: &str = "Usage: fibred [--config FILE | --print-config] [--socket PATH]\n\
              [--dgram PATH | --no-dgram] [--state FILE [--state-discard-corrupt]]\n\
              [--max-clients N] [--admin-group GROUP] [--fpm ADDR:PORT\n\
              [--fpm-sweep QUIET[,MAX]] [--fpm-offload] [--fpm-kernel-routes]\n\
              [--fpm-relay ADDR:PORT]...]\n\
              [--mirror [NETNS] [--mirror-rcvbuf BYTES]] [--metrics ADDR:PORT]\n\
              [--log-format text|json] [-v]\n\
  --config FILE  read the configuration from FILE (TOML; options given here override it)\n\
  --print-config  print the default configuration, every key with its default, and exit\n\
  --socket PATH  SOCK_SEQPACKET socket (netlink and ring); default $FIBRE_SOCKET,\n\
                 $XDG_RUNTIME_DIR/fibre/fibred.sock or /run/fibre/fibred.sock\n\
  --dgram PATH   SOCK_DGRAM socket; default beside --socket with the extension .dgram\n\
  --state FILE   restore the configuration from FILE and save it there on change;\n\
                 a FILE that cannot be restored refuses the start\n\
  --state-discard-corrupt  instead, move such a FILE to FILE.corrupt-<time>, start empty\n\
  --max-clients N  connections served at once (default 1024; administrators get 16 more)\n\
  --admin-group GROUP  members of GROUP (name or id) may change the state, as root and\n\
                 fibred's own user may; everyone who can connect may read\n\
  --fpm ADDR:PORT  serve FRR's zebra over FPM (dplane_fpm_nl; its port is 2620)\n\
  --fpm-sweep QUIET[,MAX]  after a reconnect, remove what zebra did not replay once it\n\
                 was quiet QUIET seconds, or MAX seconds after it connected (10,120)\n\
  --fpm-offload  send each route's outcome back to zebra (RTM_F_OFFLOAD; FRR >= 8.5)\n\
  --fpm-kernel-routes  install zebra's connected and local routes too\n\
  --fpm-relay ADDR:PORT  relay zebra's stream to the fibred whose FPM server is there\n\
                 (repeatable: one FRR feeds many data planes)\n\
  --mirror [NETNS]  follow the kernel's links, addresses, next hops, rules, routes and\n\
                 neighbours in network namespace NETNS (default: fibred's own)\n\
  --mirror-rcvbuf BYTES  receive buffer for the kernel's notifications (128 MiB)\n\
  --metrics ADDR:PORT  serve Prometheus metrics at http://ADDR:PORT/metrics\n\
  --log-format text|json  one line per event on stderr, as text or as a JSON object\n\
  -v             debug logs (or FIBRE_LOG=error|warn|info|debug)\n";

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // The file first, so that every other option overrides it.
    let mut file = match args.iter().position(|a| a == "--config") {
        Some(i) => {
            let Some(path) = args.get(i + 1).cloned() else {
                usage_error("--config needs a value")
            };
            args.drain(i..i + 2);
            fibred::config::load(Path::new(&path)).unwrap_or_else(|e| {
                eprintln!("fibred: {e}");
                std::process::exit(2)
            })
        }
        None => fibred::config::File::default(),
    };
    let mut verbose = false;
    let mut args = args.into_iter().peekable();
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage_error(&format!("{name} needs a value")))
        };
        let (d, f) = (&mut file.daemon, &mut file.fpm);
        match a.as_str() {
            "--socket" | "-s" => d.socket = Some(PathBuf::from(value("--socket"))),
            "--dgram" => {
                d.dgram = Some(PathBuf::from(value("--dgram")));
                d.dgram_enabled = true;
            }
            "--no-dgram" => d.dgram_enabled = false,
            "--state" => d.state = Some(PathBuf::from(value("--state"))),
            "--max-clients" => d.max_clients = number(&value("--max-clients")),
            "--admin-group" => d.admin_group = Some(value("--admin-group")),
            "--state-discard-corrupt" => d.state_discard_corrupt = true,
            "--fpm" => f.listen = Some(address("--fpm", &value("--fpm"))),
            "--fpm-sweep" => {
                let v = value("--fpm-sweep");
                let (quiet, max) = v.split_once(',').unwrap_or((&v, ""));
                f.sweep_quiet = seconds(quiet);
                if !max.is_empty() {
                    f.sweep_max = seconds(max);
                }
            }
            "--fpm-offload" => f.offload = true,
            "--fpm-kernel-routes" => f.kernel_routes = true,
            "--fpm-relay" => f.relay.push(address("--fpm-relay", &value("--fpm-relay"))),
            "--mirror" => {
                file.mirror.enabled = true;
                if let Some(ns) = args.next_if(|a| !a.starts_with('-')) {
                    file.mirror.netns = Some(PathBuf::from(ns));
                }
            }
            "--mirror-rcvbuf" => file.mirror.rcvbuf = number(&value("--mirror-rcvbuf")),
            "--metrics" => file.metrics.listen = Some(address("--metrics", &value("--metrics"))),
            "--log-format" => file.log.format = value("--log-format"),
            "-v" | "--verbose" => verbose = true,
            "--print-config" => {
                print!("{}", fibred::config::DEFAULT);
                return;
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                return;
            }
            _ => usage_error(&format!("unknown argument {a:?}")),
        }
    }
    // The file's level, then FIBRE_LOG, then -v.
    let mut logs = file.log_settings().unwrap_or_else(|e| usage_error(&e));
    if let Some(l) = std::env::var("FIBRE_LOG")
        .ok()
        .and_then(|s| log::parse_level(&s))
    {
        logs.level = l;
    }
    if verbose {
        logs.level = tracing::level_filters::LevelFilter::DEBUG;
    }
    if let Err(e) = log::init(&logs) {
        eprintln!("fibred: {e}");
        std::process::exit(1)
    }
    let discard_corrupt = file.daemon.state_discard_corrupt;
    let config = file.server_config().unwrap_or_else(|e| {
        eprintln!("fibred: {e}");
        std::process::exit(2)
    });
    if let Err(e) = fibred::server::block_termination_signals() {
        tracing::error!(error = %e, "cannot block signals");
        std::process::exit(1);
    }
    let daemon = match Daemon::start(config.clone()) {
        Ok(d) => d,
        Err(e) => {
            let discard = config
                .state
                .as_deref()
                .filter(|_| discard_corrupt && is_state_error(&e));
            let Some(path) = discard else {
                tracing::error!(error = %e, "cannot start");
                std::process::exit(1)
            };
            match fibred::state::move_aside(path) {
                Ok(to) => {
                    tracing::warn!(error = %e, moved_to = %to.display(), "state file moved aside, starting empty")
                }
                Err(m) => {
                    tracing::error!(error = %e, move_aside = %m, "cannot start");
                    std::process::exit(1)
                }
            }
            Daemon::start(config).unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot start");
                std::process::exit(1)
            })
        }
    };
    let sig = fibred::server::wait_termination();
    tracing::info!(signal = sig, "shutting down");
    if let Err(e) = daemon.stop_checked() {
        tracing::error!(error = %e, "stopped without saving the state");
        std::process::exit(1);
    }
    tracing::info!("stopped");
}

fn address(option: &str, v: &str) -> std::net::SocketAddr {
    v.parse()
        .unwrap_or_else(|_| usage_error(&format!("{option} {v:?}: not an ADDR:PORT")))
}

fn seconds(s: &str) -> f64 {
    s.parse::<f64>()
        .ok()
        .filter(|v| *v >= 0.0 && v.is_finite())
        .unwrap_or_else(|| usage_error(&format!("{s:?}: not a number of seconds")))
}

fn usage_error(what: &str) -> ! {
    eprint!("fibred: {what}\n{USAGE}");
    std::process::exit(2)
}

fn number(s: &str) -> usize {
    s.parse()
        .unwrap_or_else(|_| usage_error(&format!("not a number: {s:?}")))
}

/// The start failed because of the state file ([`fibred::state::StateError`]).
fn is_state_error(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|i| i.is::<fibred::state::StateError>())
}
