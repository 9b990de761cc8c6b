//! `fibred [--socket PATH] [--dgram PATH | --no-dgram] [--state FILE] [--max-clients N]
//! [--admin-group GROUP] [-v]...`
//!
//! With no arguments it listens on [`fibred::default_socket`] and keeps no state file. The log
//! level comes from `-v` (debug) or FIBRE_LOG (error, warn, info, debug); SIGTERM or SIGINT
//! stops it cleanly: the state is saved and the sockets are removed.

use fibred::log::{self, Level};
use fibred::server::Access;
use fibred::{Config, Daemon};
use std::path::PathBuf;

const USAGE: &str =
    "Usage: fibred [--socket PATH] [--dgram PATH | --no-dgram] [--state FILE] [--max-clients N]\n\
              [--admin-group GROUP] [-v]\n\
  --socket PATH  SOCK_SEQPACKET socket (netlink and ring); default $FIBRE_SOCKET,\n\
                 $XDG_RUNTIME_DIR/fibre/fibred.sock or /run/fibre/fibred.sock\n\
  --dgram PATH   SOCK_DGRAM socket; default beside --socket with the extension .dgram\n\
  --state FILE   restore the configuration from FILE and save it there on change\n\
  --max-clients N  connections served at once (default 1024; administrators get 16 more)\n\
  --admin-group GROUP  members of GROUP (name or id) may change the state, as root and\n\
                 fibred's own user may; everyone who can connect may read\n\
  -v             debug logs (or FIBRE_LOG=error|warn|info|debug)\n";

fn main() {
    let mut socket: Option<PathBuf> = None;
    let mut dgram: Option<Option<PathBuf>> = None;
    let mut state = None;
    let mut access = Access::default();
    if let Some(l) = std::env::var("FIBRE_LOG")
        .ok()
        .and_then(|s| Level::parse(&s))
    {
        log::set_level(l);
    }
    let mut args = std::env::args().skip(1);
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
    let socket = socket.unwrap_or_else(fibred::default_socket);
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
    };
    let daemon = match Daemon::start(config) {
        Ok(d) => d,
        Err(e) => {
            fibred::log!(Level::Error, "cannot start", error = e);
            std::process::exit(1);
        }
    };
    let sig = fibred::server::wait_termination();
    fibred::log!(Level::Info, "shutting down", signal = sig);
    daemon.stop();
    fibred::log!(Level::Info, "stopped");
}

fn number(s: &str) -> usize {
    s.parse().unwrap_or_else(|_| {
        eprint!("fibred: not a number: {s:?}\n{USAGE}");
        std::process::exit(2)
    })
}
