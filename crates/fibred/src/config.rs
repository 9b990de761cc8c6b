//! fibred's configuration file (`--config FILE`, TOML): the daemon's sockets and state, the
//! log level, the FPM server, mirror mode, metrics, the forwarding workers and port links. The embedded default ([`DEFAULT`],
//! `fibred --print-config`) lists every key with its default value; a key left out takes
//! it, an unknown key or a value of the wrong kind is an error that names the file, the line
//! and the column. The command line's options override the file's (main.rs applies them to
//! the parsed [`File`] before [`File::server_config`]).

use crate::log;
use crate::server::{Access, Config};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The configuration every key of which is at its default, as a file a user starts from.
pub const DEFAULT: &str = include_str!("../fibred.toml");

/// A parsed configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct File {
    pub daemon: Daemon,
    pub log: Log,
    pub fpm: Fpm,
    pub mirror: Mirror,
    pub metrics: Metrics,
    pub workers: Workers,
    pub port: Vec<Port>,
}

/// The forwarding workers (`[workers]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workers {
    /// How many; one per CPU fibred may run on when left out.
    pub count: Option<usize>,
    /// The CPUs to pin them to: one, or a list (worker i on the i-th, round the list).
    pub cpu: Option<Cpus>,
}

/// `cpu = 1` or `cpu = [1, 2]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Cpus {
    One(usize),
    List(Vec<usize>),
}

/// A port link made at the start (`[[port]]`), as `fibre link add NAME type port dev DEV io
/// IO [punt TAPNAME]` makes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Port {
    pub name: String,
    pub dev: String,
    #[serde(default = "default_io")]
    pub io: String,
    /// The TAP device carrying the host's own traffic (`punt TAPNAME`); none by default.
    pub punt: Option<String>,
}

fn default_io() -> String {
    fibre_fib::PortIo::AfXdp.name().into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Daemon {
    pub socket: Option<PathBuf>,
    pub dgram: Option<PathBuf>,
    pub dgram_enabled: bool,
    pub state: Option<PathBuf>,
    pub state_discard_corrupt: bool,
    pub max_clients: usize,
    pub admin_group: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    pub level: String,
    pub format: String,
    pub burst: u32,
    pub per_second: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Fpm {
    pub listen: Option<SocketAddr>,
    pub relay: Vec<SocketAddr>,
    pub sweep_quiet: f64,
    pub sweep_max: f64,
    pub offload: bool,
    pub kernel_routes: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mirror {
    pub enabled: bool,
    pub netns: Option<PathBuf>,
    pub rcvbuf: usize,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Metrics {
    pub listen: Option<SocketAddr>,
}

impl Default for Daemon {
    fn default() -> Self {
        Daemon {
            socket: None,
            dgram: None,
            dgram_enabled: true,
            state: None,
            state_discard_corrupt: false,
            max_clients: crate::server::MAX_CLIENTS,
            admin_group: None,
        }
    }
}

impl Default for Log {
    fn default() -> Self {
        Log {
            level: "info".into(),
            format: "text".into(),
            burst: log::DEFAULT_BURST,
            per_second: log::DEFAULT_PER_SECOND,
        }
    }
}

impl Default for Fpm {
    fn default() -> Self {
        let s = crate::fpm::Settings::default();
        Fpm {
            listen: None,
            relay: Vec::new(),
            sweep_quiet: s.sweep_quiet.as_secs_f64(),
            sweep_max: s.sweep_max.as_secs_f64(),
            offload: s.offload,
            kernel_routes: s.kernel_routes,
        }
    }
}

impl Default for Mirror {
    fn default() -> Self {
        Mirror {
            enabled: false,
            netns: None,
            rcvbuf: crate::mirror::RCVBUF,
        }
    }
}

/// Parses a configuration; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<File, String> {
    toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| {
                let before = &text[..s.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!(":{line}:{col}")
            })
            .unwrap_or_default();
        format!("{origin}{at}: {}", e.message())
    })
}

/// Reads and parses a configuration file.
pub fn load(path: &Path) -> Result<File, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, &path.display().to_string())
}

impl File {
    /// What the logger is set up with, if the file's values are valid.
    pub fn log_settings(&self) -> Result<log::Settings, String> {
        let l = &self.log;
        let level = log::parse_level(&l.level).ok_or_else(|| {
            format!(
                "log.level: {:?} is none of error, warn, info, debug",
                l.level
            )
        })?;
        let format = log::Format::parse(&l.format)
            .ok_or_else(|| format!("log.format: {:?} is neither text nor json", l.format))?;
        if !(l.per_second.is_finite() && l.per_second >= 0.0) {
            return Err(format!("log.per_second: {} is not a rate", l.per_second));
        }
        Ok(log::Settings {
            level,
            format,
            burst: l.burst,
            per_second: l.per_second,
        })
    }

    /// What the daemon serves, from the file and the options applied to it.
    pub fn server_config(&self) -> Result<Config, String> {
        let d = &self.daemon;
        let socket = d
            .socket
            .clone()
            .unwrap_or_else(fibre_proto::client::default_socket);
        let dgram = d.dgram_enabled.then(|| {
            d.dgram
                .clone()
                .unwrap_or_else(|| Config::dgram_beside(&socket))
        });
        let mut access = Access {
            max_clients: d.max_clients,
            ..Access::default()
        };
        if let Some(g) = &d.admin_group {
            access.admin_group = Some(
                fibre_sys::group_members(g).map_err(|e| format!("daemon.admin_group {g}: {e}"))?,
            );
        }
        let seconds = |what: &str, v: f64| {
            (v >= 0.0 && v.is_finite())
                .then(|| Duration::from_secs_f64(v))
                .ok_or_else(|| format!("{what}: {v} is not a number of seconds"))
        };
        let fpm = match self.fpm.listen {
            Some(listen) => Some(crate::fpm::Config {
                listen,
                settings: crate::fpm::Settings {
                    sweep_quiet: seconds("fpm.sweep_quiet", self.fpm.sweep_quiet)?,
                    sweep_max: seconds("fpm.sweep_max", self.fpm.sweep_max)?,
                    offload: self.fpm.offload,
                    kernel_routes: self.fpm.kernel_routes,
                },
                relay: self.fpm.relay.clone(),
            }),
            None => None,
        };
        let ports = self
            .port
            .iter()
            .map(|p| {
                let io = fibre_fib::PortIo::from_name(&p.io).ok_or_else(|| {
                    format!(
                        "port {}: io {:?} is none of af_xdp, af_packet, tap",
                        p.name, p.io
                    )
                })?;
                Ok(crate::ports::PortLink {
                    name: p.name.clone(),
                    spec: fibre_fib::PortSpec {
                        dev: p.dev.clone(),
                        io,
                        punt: p.punt.clone(),
                    },
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Config {
            ports,
            workers: crate::ports::Settings {
                count: self.workers.count,
                cpus: match &self.workers.cpu {
                    None => Vec::new(),
                    Some(Cpus::One(c)) => vec![*c],
                    Some(Cpus::List(l)) => l.clone(),
                },
            },
            socket,
            dgram,
            state: d.state.clone(),
            access,
            fpm,
            mirror: self.mirror.enabled.then(|| crate::mirror::Config {
                netns: self.mirror.netns.clone(),
                rcvbuf: self.mirror.rcvbuf,
            }),
            metrics: self.metrics.listen,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_default_is_the_default() {
        let f = parse(DEFAULT, "default").unwrap();
        let d = File::default();
        assert_eq!(format!("{f:?}"), format!("{d:?}"));
        assert_eq!(f.log_settings().unwrap(), log::Settings::default());
    }

    #[test]
    fn errors_name_the_line_and_column() {
        let e = parse(
            "[fpm]\nlisten = \"127.0.0.1:2620\"\nsweep_quiet = \"soon\"\n",
            "f.toml",
        )
        .unwrap_err();
        assert!(e.starts_with("f.toml:3:15: "), "{e}");
        let e = parse("[daemon]\nsokcet = \"/x\"\n", "f.toml").unwrap_err();
        assert!(e.starts_with("f.toml:2:1: ") && e.contains("sokcet"), "{e}");
        let e = parse("[metrics]\nlisten = \"localhost\"\n", "f.toml").unwrap_err();
        assert!(e.starts_with("f.toml:2:10: "), "{e}");
    }

    #[test]
    fn a_file_sets_what_it_names() {
        let f = parse(
            "[daemon]\nsocket = \"/tmp/s\"\ndgram_enabled = false\n\
             [fpm]\nlisten = \"127.0.0.1:2620\"\nsweep_quiet = 1.5\n\
             [mirror]\nenabled = true\nnetns = \"router\"\n\
             [metrics]\nlisten = \"[::1]:9101\"\n\
             [workers]\ncpu = 1\n\
             [[port]]\nname = \"p0\"\ndev = \"veth0\"\n\
             [[port]]\nname = \"p1\"\ndev = \"veth1\"\nio = \"af_packet\"\npunt = \"cp1\"\n",
            "f",
        )
        .unwrap();
        let c = f.server_config().unwrap();
        assert_eq!(c.socket, PathBuf::from("/tmp/s"));
        assert_eq!(c.dgram, None);
        let fpm = c.fpm.unwrap();
        assert_eq!(fpm.settings.sweep_quiet, Duration::from_millis(1500));
        assert_eq!(fpm.settings.sweep_max, Duration::from_secs(120));
        assert_eq!(c.mirror.unwrap().netns, Some(PathBuf::from("router")));
        assert_eq!(c.metrics, Some("[::1]:9101".parse().unwrap()));
        assert_eq!((c.workers.count, c.workers.cpus), (None, vec![1]));
        let w = parse("[workers]\ncount = 3\ncpu = [2, 0]\n", "f")
            .unwrap()
            .server_config()
            .unwrap()
            .workers;
        assert_eq!((w.count, w.cpus), (Some(3), vec![2, 0]));
        let io: Vec<_> = c
            .ports
            .iter()
            .map(|p| (p.name.as_str(), p.spec.io, p.spec.punt.as_deref()))
            .collect();
        assert_eq!(
            io,
            [
                ("p0", fibre_fib::PortIo::AfXdp, None),
                ("p1", fibre_fib::PortIo::AfPacket, Some("cp1"))
            ]
        );
        let e = parse("[[port]]\nname = \"p0\"\ndev = \"v\"\nio = \"dpdk\"\n", "f")
            .unwrap()
            .server_config()
            .unwrap_err();
        assert!(e.contains("dpdk"), "{e}");
    }
}
