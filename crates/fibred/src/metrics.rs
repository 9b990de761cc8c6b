//! Metrics (`fibred --metrics ADDR:PORT`): Prometheus's text format (version 0.0.4) at
//! `/metrics`, over plain HTTP/1.0 from a thread of its own.
//!
//! Names follow Prometheus's conventions: the `fibre_` prefix, base units (seconds), `_total`
//! on counters. What is exported:
//! - the routing state, read from the published copy at each scrape (no walk over routes:
//!   each table counts its prefixes as they are inserted): `fibre_fib_prefixes{family,table}`,
//!   `fibre_links`, `fibre_addresses{family}`, `fibre_nexthops`, `fibre_rules{family}`,
//!   `fibre_neighbours{family}`;
//! - rtnetlink requests answered, by message type and result
//!   (`fibre_netlink_requests_total{type,result}`), and clients connected
//!   (`fibre_netlink_clients`);
//! - how long each publication takes the writer (`fibre_fib_publish_duration_seconds`, a
//!   histogram);
//! - the FPM feed (`fibre_fpm_*`) and mirror mode (`fibre_mirror_*`) when they run.
//!
//! Who writes what: client threads and the writer add their requests' tallies, the writer
//! its publication times and the feeds' counters (a copy under a mutex it holds for the
//! copy alone); the metrics thread only reads. A scrape never waits for the writer.

use crate::engine::Tally;
use crate::sys::{self, EventFd};
use crate::view::FibReader;
use fibre_fib::types::Family;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upper bounds of the publication histogram's buckets, in seconds: a small batch publishes
/// in microseconds, a table load's compile takes up to seconds.
const PUBLISH_BUCKETS: [f64; 12] = [
    1e-6, 4e-6, 16e-6, 64e-6, 256e-6, 1e-3, 4e-3, 16e-3, 64e-3, 256e-3, 1.0, 4.0,
];
/// How long a scraper may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes of an HTTP request read before it is refused.
const REQUEST_BYTES: usize = 8 << 10;
/// Request types counted (see `engine::Tally`).
const TYPES: usize = 128;

/// What the threads count, shared.
pub struct Metrics {
    requests: Vec<[AtomicU64; 2]>,
    publish: [AtomicU64; PUBLISH_BUCKETS.len() + 1],
    publish_sum_ns: AtomicU64,
    /// Clients connected (the server's count).
    pub clients: Arc<AtomicUsize>,
    feeds: Mutex<Feeds>,
    /// The forwarding worker's counters.
    ports: Mutex<Option<Arc<crate::ports::Counters>>>,
}

/// The feeds' counters as the writer last copied them.
#[derive(Default, Clone, Copy)]
pub struct Feeds {
    /// The FPM feed's counters and whether zebra is connected.
    pub fpm: Option<(crate::fpm::Counters, bool)>,
    pub mirror: Option<crate::mirror::Counters>,
}

impl Metrics {
    pub fn new(clients: Arc<AtomicUsize>) -> Arc<Metrics> {
        Arc::new(Metrics {
            requests: (0..TYPES).map(|_| Default::default()).collect(),
            publish: Default::default(),
            publish_sum_ns: AtomicU64::new(0),
            clients,
            feeds: Mutex::new(Feeds::default()),
            ports: Mutex::new(None),
        })
    }

    /// Adds a batch's requests.
    pub fn add(&self, tally: &Tally) {
        for (t, ok, failed) in tally.counts() {
            if let Some(c) = self.requests.get(usize::from(t)) {
                c[0].fetch_add(ok, Ordering::Relaxed);
                c[1].fetch_add(failed, Ordering::Relaxed);
            }
        }
    }

    /// Records one publication's duration.
    pub fn published(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let i = PUBLISH_BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(PUBLISH_BUCKETS.len());
        self.publish[i].fetch_add(1, Ordering::Relaxed);
        self.publish_sum_ns
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Replaces the feeds' counters.
    pub fn set_feeds(&self, feeds: Feeds) {
        *self.feeds.lock().unwrap_or_else(|e| e.into_inner()) = feeds;
    }

    /// Where the forwarding worker's counters are read.
    pub fn set_ports(&self, counters: Arc<crate::ports::Counters>) {
        *self.ports.lock().unwrap_or_else(|e| e.into_inner()) = Some(counters);
    }

    /// The exposition: every metric, in Prometheus's text format.
    pub fn render(&self, reader: &FibReader) -> String {
        let mut w = Exposition(String::new());
        w.header("fibre_build_info", "gauge", "fibred's version.");
        w.sample(
            "fibre_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1,
        );
        {
            let guard = reader.read();
            let fib: &fibre_fib::Fib = &guard;
            w.header(
                "fibre_fib_prefixes",
                "gauge",
                "Prefixes in each routing table.",
            );
            for (f, table, n) in fib.table_sizes() {
                w.sample(
                    "fibre_fib_prefixes",
                    &[("family", family_name(f)), ("table", &table.to_string())],
                    n,
                );
            }
            w.header("fibre_links", "gauge", "Links.");
            w.sample("fibre_links", &[], fib.links().len() as u64);
            w.header("fibre_nexthops", "gauge", "Next-hop objects.");
            w.sample("fibre_nexthops", &[], fib.nexthops().len() as u64);
            for (name, help) in [
                ("fibre_addresses", "Addresses."),
                ("fibre_rules", "Policy rules."),
                ("fibre_neighbours", "Neighbour entries (proxies included)."),
            ] {
                w.header(name, "gauge", help);
                for f in [Family::Inet, Family::Inet6] {
                    let n = match name {
                        "fibre_addresses" => fib.addrs(Some(f)).len(),
                        "fibre_rules" => fib.rules(Some(f)).len(),
                        _ => {
                            fib.neighbours(Some(f), false).len()
                                + fib.neighbours(Some(f), true).len()
                        }
                    };
                    w.sample(name, &[("family", family_name(f))], n as u64);
                }
            }
        }
        w.header(
            "fibre_netlink_requests_total",
            "counter",
            "rtnetlink requests answered, by message type and result.",
        );
        for (t, c) in self.requests.iter().enumerate() {
            for (result, v) in [("ok", &c[0]), ("error", &c[1])] {
                let v = v.load(Ordering::Relaxed);
                if v > 0 {
                    let ty = type_name(t as u16);
                    w.sample(
                        "fibre_netlink_requests_total",
                        &[("type", &ty), ("result", result)],
                        v,
                    );
                }
            }
        }
        w.header("fibre_netlink_clients", "gauge", "Clients connected.");
        w.sample(
            "fibre_netlink_clients",
            &[],
            self.clients.load(Ordering::Relaxed) as u64,
        );
        self.render_publish(&mut w);
        let feeds = *self.feeds.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((c, connected)) = feeds.fpm {
            render_fpm(&mut w, &c, connected);
        }
        if let Some(c) = feeds.mirror {
            render_mirror(&mut w, &c);
        }
        let ports = self.ports.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(p) = ports {
            render_ports(&mut w, &p, reader);
        }
        w.0
    }

    fn render_publish(&self, w: &mut Exposition) {
        let name = "fibre_fib_publish_duration_seconds";
        w.header(
            name,
            "histogram",
            "Time the writer takes to make a batch of changes visible to readers.",
        );
        let mut cumulative = 0;
        for (i, b) in PUBLISH_BUCKETS.iter().enumerate() {
            cumulative += self.publish[i].load(Ordering::Relaxed);
            w.sample(
                &format!("{name}_bucket"),
                &[("le", &b.to_string())],
                cumulative,
            );
        }
        cumulative += self.publish[PUBLISH_BUCKETS.len()].load(Ordering::Relaxed);
        w.sample(&format!("{name}_bucket"), &[("le", "+Inf")], cumulative);
        let sum = self.publish_sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(w.0, "{name}_sum {sum}");
        w.sample(&format!("{name}_count"), &[], cumulative);
    }
}

fn render_fpm(w: &mut Exposition, c: &crate::fpm::Counters, connected: bool) {
    w.header(
        "fibre_fpm_connected",
        "gauge",
        "Whether zebra is connected over FPM.",
    );
    w.sample("fibre_fpm_connected", &[], u64::from(connected));
    for (name, help, v) in [
        (
            "fibre_fpm_connections_total",
            "FPM connections accepted.",
            c.connections,
        ),
        ("fibre_fpm_frames_total", "FPM frames applied.", c.frames),
        (
            "fibre_fpm_messages_total",
            "Netlink messages in FPM frames.",
            c.messages,
        ),
        (
            "fibre_fpm_refused_total",
            "FPM messages the routing state refused.",
            c.refused,
        ),
        (
            "fibre_fpm_unknown_link_total",
            "FPM messages naming an interface fibre has no link for.",
            c.unknown_link,
        ),
        (
            "fibre_fpm_skipped_total",
            "FPM messages not for fibre (connected routes, other families and types).",
            c.skipped,
        ),
        (
            "fibre_fpm_held_total",
            "Routes and groups held for a group that had not arrived.",
            c.held_total,
        ),
        (
            "fibre_fpm_feedback_total",
            "Offload feedback messages queued for zebra.",
            c.feedback,
        ),
        (
            "fibre_fpm_feedback_dropped_total",
            "Offload feedback messages dropped because zebra did not read them.",
            c.feedback_dropped,
        ),
    ] {
        w.header(name, "counter", help);
        w.sample(name, &[], v);
    }
    w.header(
        "fibre_fpm_held",
        "gauge",
        "Routes and groups waiting for a group now.",
    );
    w.sample("fibre_fpm_held", &[], c.held);
    for (name, help, what) in [
        (
            "fibre_fpm_routes_total",
            "Routes the FPM feed changed, by operation.",
            [
                ("add", c.routes_added),
                ("delete", c.routes_deleted),
                ("sweep", c.swept_routes),
            ],
        ),
        (
            "fibre_fpm_groups_total",
            "Next-hop groups the FPM feed changed, by operation.",
            [
                ("add", c.groups_added),
                ("delete", c.groups_deleted),
                ("sweep", c.swept_groups),
            ],
        ),
    ] {
        w.header(name, "counter", help);
        for (op, v) in what {
            w.sample(name, &[("op", op)], v);
        }
    }
}

/// The data plane's counters, once it has had a port: per port link, per drop reason, the
/// packets' fates and the input route cache.
fn render_ports(w: &mut Exposition, counters: &crate::ports::Counters, reader: &FibReader) {
    let s = counters.snapshot();
    if s.ports.is_empty() && s.dataplane.received == 0 {
        return;
    }
    let links = {
        let guard = reader.read();
        let fib: &fibre_fib::Fib = &guard;
        fib.links()
    };
    let names: Vec<(u32, String)> = s
        .ports
        .iter()
        .map(|p| {
            let name = links.iter().find(|l| l.ifindex == p.ifindex);
            let name = name.and_then(|l| l.ifname.clone());
            (p.ifindex, name.unwrap_or_else(|| p.ifindex.to_string()))
        })
        .collect();
    type Field = fn(&crate::ports::PortStats) -> u64;
    let links: [(&str, &str, Field); 7] = [
        ("fibre_link_rx_packets_total", "Frames a port link received.", |p| p.port.rx_packets),
        ("fibre_link_rx_bytes_total", "Bytes a port link received.", |p| p.port.rx_bytes),
        ("fibre_link_tx_packets_total", "Frames a port link sent.", |p| p.port.tx_packets),
        ("fibre_link_tx_bytes_total", "Bytes a port link sent.", |p| p.port.tx_bytes),
        (
            "fibre_link_rx_dropped_total",
            "Frames a port link dropped on receive: its ring full, or the data plane's drops counted on the link.",
            |p| p.port.rx_ring_drops + p.link.rx_dropped,
        ),
        (
            "fibre_link_tx_dropped_total",
            "Frames a port link dropped on transmit: its ring full, or the data plane's drops counted on the link.",
            |p| p.port.tx_full + p.link.tx_dropped,
        ),
        (
            "fibre_link_errors_total",
            "Frames a port's host interface refused or that did not fit, and failed system calls.",
            |p| p.port.errors,
        ),
    ];
    for (name, help, field) in links {
        w.header(name, "counter", help);
        for (p, (_, link)) in s.ports.iter().zip(&names) {
            let labels = [
                ("link", link.as_str()),
                ("dev", p.spec.dev.as_str()),
                ("io", p.spec.io.name()),
            ];
            w.sample(name, &labels, field(p));
        }
    }
    type PuntField = fn(&fibre_fib::PuntStats) -> u64;
    let punts: [(&str, &str, PuntField); 3] = [
        (
            "fibre_link_punt_to_host_total",
            "Frames a port link handed to the host through its punt TAP.",
            |c| c.to_host,
        ),
        (
            "fibre_link_punt_from_host_total",
            "Frames the host sent through a port link's punt TAP.",
            |c| c.from_host,
        ),
        (
            "fibre_link_punt_dropped_total",
            "Frames for the host a port link dropped: the worker's budget spent, or the TAP refusing.",
            |c| c.dropped,
        ),
    ];
    if s.ports.iter().any(|p| p.punt.is_some()) {
        for (name, help, field) in punts {
            w.header(name, "counter", help);
            for (p, (_, link)) in s.ports.iter().zip(&names) {
                let Some(c) = &p.punt else { continue };
                let labels = [
                    ("link", link.as_str()),
                    ("dev", p.spec.dev.as_str()),
                    ("io", p.spec.io.name()),
                ];
                w.sample(name, &labels, field(c));
            }
        }
    }
    w.header(
        "fibre_link_up",
        "gauge",
        "Whether a port link's host interface is up with carrier.",
    );
    for (p, (_, link)) in s.ports.iter().zip(&names) {
        let labels = [
            ("link", link.as_str()),
            ("dev", p.spec.dev.as_str()),
            ("io", p.spec.io.name()),
        ];
        w.sample("fibre_link_up", &labels, u64::from(p.state == "up"));
    }
    w.header(
        "fibre_drops_total",
        "counter",
        "Packets the data plane dropped, by reason (the kernel's skb drop reasons).",
    );
    for (reason, n) in s.drops.nonzero() {
        w.sample("fibre_drops_total", &[("reason", reason.name())], n);
    }
    let d = &s.dataplane;
    w.header(
        "fibre_dataplane_packets_total",
        "counter",
        "Packets the data plane received, by what became of them.",
    );
    for (fate, n) in [
        ("received", d.received),
        ("forwarded", d.forwarded),
        ("delivered", d.delivered),
        ("punted", d.punted),
        ("dropped", d.dropped),
    ] {
        w.sample("fibre_dataplane_packets_total", &[("fate", fate)], n);
    }
    w.header(
        "fibre_worker_packets_total",
        "counter",
        "Packets each forwarding worker received and forwarded.",
    );
    for (i, s) in counters.workers().iter().enumerate() {
        let worker = i.to_string();
        let d = &s.dataplane;
        for (fate, n) in [("received", d.received), ("forwarded", d.forwarded)] {
            w.sample(
                "fibre_worker_packets_total",
                &[("worker", worker.as_str()), ("fate", fate)],
                n,
            );
        }
    }
    let c = &d.input_cache;
    for (name, help, n) in [
        (
            "fibre_input_cache_hits_total",
            "Input route decisions answered from the cache.",
            c.hits,
        ),
        (
            "fibre_input_cache_hinted_total",
            "Input route decisions answered from the previous packet's.",
            c.hinted,
        ),
        (
            "fibre_input_cache_misses_total",
            "Input route decisions looked up.",
            c.misses,
        ),
        (
            "fibre_input_cache_evictions_total",
            "Input route cache entries replaced while valid.",
            c.evictions,
        ),
        (
            "fibre_input_cache_bypassed_total",
            "Input route decisions looked up without the cache.",
            c.bypassed,
        ),
        (
            "fibre_dataplane_events_lost_total",
            "Messages from the forwarding worker to the writer lost to a full queue.",
            s.events_lost,
        ),
        (
            "fibre_dataplane_actions_lost_total",
            "Neighbour actions from the writer to the worker lost to a full queue.",
            counters.actions_lost(),
        ),
    ] {
        w.header(name, "counter", help);
        w.sample(name, &[], n);
    }
}

fn render_mirror(w: &mut Exposition, c: &crate::mirror::Counters) {
    for (name, help, v) in [
        (
            "fibre_mirror_syncs_total",
            "Dumps of the kernel applied.",
            c.syncs,
        ),
        (
            "fibre_mirror_resyncs_total",
            "Dumps taken after notifications were lost or to check a dump.",
            c.resyncs,
        ),
        (
            "fibre_mirror_messages_total",
            "Kernel messages read (dumps and notifications).",
            c.messages,
        ),
        (
            "fibre_mirror_refused_total",
            "Mirrored changes the routing state refused.",
            c.refused,
        ),
        (
            "fibre_mirror_corrected_total",
            "Objects a resync removed that fibre held and the kernel did not.",
            c.corrected,
        ),
    ] {
        w.header(name, "counter", help);
        w.sample(name, &[], v);
    }
}

/// Text being written in the exposition format.
struct Exposition(String);

impl Exposition {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                // Label values here are names and numbers fibre makes: nothing to escape.
                let _ = write!(self.0, "{k}=\"{v}\"");
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }
}

fn family_name(f: Family) -> &'static str {
    match f {
        Family::Inet => "inet",
        Family::Inet6 => "inet6",
    }
}

/// The rtnetlink name of message type `t`.
fn type_name(t: u16) -> String {
    use fibre_netlink::message::types::*;
    let name = match t {
        RTM_NEWLINK => "RTM_NEWLINK",
        RTM_DELLINK => "RTM_DELLINK",
        RTM_GETLINK => "RTM_GETLINK",
        RTM_SETLINK => "RTM_SETLINK",
        RTM_NEWADDR => "RTM_NEWADDR",
        RTM_DELADDR => "RTM_DELADDR",
        RTM_GETADDR => "RTM_GETADDR",
        RTM_NEWROUTE => "RTM_NEWROUTE",
        RTM_DELROUTE => "RTM_DELROUTE",
        RTM_GETROUTE => "RTM_GETROUTE",
        RTM_NEWNEIGH => "RTM_NEWNEIGH",
        RTM_DELNEIGH => "RTM_DELNEIGH",
        RTM_GETNEIGH => "RTM_GETNEIGH",
        RTM_NEWRULE => "RTM_NEWRULE",
        RTM_DELRULE => "RTM_DELRULE",
        RTM_GETRULE => "RTM_GETRULE",
        RTM_NEWNEXTHOP => "RTM_NEWNEXTHOP",
        RTM_DELNEXTHOP => "RTM_DELNEXTHOP",
        RTM_GETNEXTHOP => "RTM_GETNEXTHOP",
        RTM_NEWNEXTHOPBUCKET => "RTM_NEWNEXTHOPBUCKET",
        RTM_DELNEXTHOPBUCKET => "RTM_DELNEXTHOPBUCKET",
        RTM_GETNEXTHOPBUCKET => "RTM_GETNEXTHOPBUCKET",
        other => return format!("type_{other}"),
    };
    name.to_owned()
}

/// Binds the metrics socket (before the start is reported: an address in use refuses it).
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let l = TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// The metrics thread: answers scrapes until `shutdown`.
pub fn serve(listener: TcpListener, metrics: &Metrics, reader: &FibReader, shutdown: &EventFd) {
    loop {
        let mut fds = [
            sys::pollfd(shutdown.fd(), libc::POLLIN),
            sys::pollfd(listener.as_fd(), libc::POLLIN),
        ];
        if sys::poll(&mut fds, None).is_err() || fds[0].revents != 0 {
            return;
        }
        match listener.accept() {
            Ok((stream, peer)) => {
                if let Err(e) = answer(stream, metrics, reader) {
                    tracing::debug!(%peer, error = %e, "metrics scrape failed");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => tracing::warn!(error = %e, "metrics accept failed"),
        }
    }
}

/// One HTTP exchange: GET /metrics gets the exposition, anything else 404 or 405.
fn answer(mut stream: TcpStream, metrics: &Metrics, reader: &FibReader) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && !req.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 || req.len() + n > REQUEST_BYTES {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = req.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, path) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let (status, body) = match (method, path) {
        (b"GET", b"/metrics") => ("200 OK", metrics.render(reader)),
        (b"GET", _) => ("404 Not Found", "not found: try /metrics\n".to_owned()),
        _ => ("405 Method Not Allowed", "only GET\n".to_owned()),
    };
    write!(
        stream,
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A sink for the writer: publication times and the feeds' counters.
#[derive(Clone)]
pub struct Recorder(pub Option<Arc<Metrics>>);

impl Recorder {
    pub fn published(&self, took: Duration) {
        if let Some(m) = &self.0 {
            m.published(took);
        }
    }

    pub fn add(&self, tally: &Tally) {
        if let Some(m) = &self.0 {
            m.add(tally);
        }
    }

    pub fn set_feeds(&self, feeds: Feeds) {
        if let Some(m) = &self.0 {
            m.set_feeds(feeds);
        }
    }

    pub fn set_ports(&self, counters: Arc<crate::ports::Counters>) {
        if let Some(m) = &self.0 {
            m.set_ports(counters);
        }
    }
}
