//! Where commands go: the in-process [`Fib`] (offline) or a running `fibred` (online).
//!
//! [`Backend`] has the FIB's entry points with the FIB's signatures, so every command module
//! is written once against it. Online, each call is one rtnetlink exchange with fibred over
//! the shared-memory ring (fibre-ring), which carries requests, ACKs and dumps alike: a request
//! with NLM_F_ACK waits for its ACK or NLMSG_ERROR, a dump reads to NLMSG_DONE, a GET reads
//! its answer. The daemon's errno and extended-ACK text come back as the same [`RtError`] the
//! offline FIB returns, so output is identical.
//!
//! Choosing: `-n PATH` or FIBRE_SOCKET names a daemon that must answer; otherwise fibred's
//! default socket is used when a daemon listens there, and the in-process FIB when none does.
//!
//! A lost connection in the middle of a command is fatal for the process (the command's
//! outcome is unknown): the message is printed and `fibre` exits with status 2.

use fibre_fib::seg6_hmac::HmacKey;
use fibre_fib::types::*;
use fibre_fib::Fib;
use fibre_netlink::{Messages, Payload};
use fibre_proto::convert::{self, NeighDump, Request};
use fibre_proto::seg6_hmac::{Seg6Hmac, HMAC_KEY, HMAC_SET};
use fibre_proto::sysctl::{Sysctl, SYSCTL_GET, SYSCTL_SET, SYSCTL_VALUE};
use fibre_ring::{Client, ClientConfig};
use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// The routing state commands act on.
#[allow(
    clippy::large_enum_variant,
    reason = "one per process; boxing the connection buys nothing"
)]
pub enum Backend {
    Local(Box<Fib>),
    Remote(Remote),
}

impl From<Fib> for Backend {
    fn from(f: Fib) -> Backend {
        Backend::Local(Box::new(f))
    }
}

impl From<Remote> for Backend {
    fn from(r: Remote) -> Backend {
        Backend::Remote(r)
    }
}

/// Chooses the backend: offline when `offline` (from `-offline`); else `explicit` (from `-n`)
/// or FIBRE_SOCKET must answer; the default socket is used if a daemon answers there; else
/// offline.
pub fn choose(explicit: Option<&str>, offline: bool) -> Result<Backend, String> {
    if offline {
        return Ok(Backend::from(offline_fib()));
    }
    let named = explicit.map(PathBuf::from).or_else(|| {
        std::env::var_os("FIBRE_SOCKET")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    });
    if let Some(path) = named {
        return Remote::connect(&path).map(Backend::Remote);
    }
    let default = fibre_proto::client::default_socket();
    if default.exists() {
        if let Ok(r) = Remote::connect(&default) {
            return Ok(Backend::Remote(r));
        }
    }
    Ok(Backend::from(offline_fib()))
}

/// The in-process FIB of offline runs: its clock stands still until `clock advance` moves
/// it, so a batch's output never depends on how fast it ran.
pub fn offline_fib() -> Fib {
    let mut f = Fib::default();
    f.set_clock(std::sync::Arc::new(fibre_fib::ManualClock::new(0)));
    f
}

fn offline_only() -> RtError {
    RtError::msg(
        Errno::EOPNOTSUPP,
        "fibre: exceptions and the clock are driven offline only",
    )
}

/// A connection to fibred.
pub struct Remote {
    client: RefCell<Client>,
    seq: Cell<u32>,
    path: PathBuf,
}

fn lost(path: &Path, e: impl std::fmt::Display) -> ! {
    eprintln!(
        "fibre: lost the connection to fibred at {}: {e}",
        path.display()
    );
    std::process::exit(2)
}

/// What one exchange collected: the answer messages' bytes, one vector per message.
type Answers = Vec<Vec<u8>>;

impl Remote {
    pub fn connect(path: &Path) -> Result<Remote, String> {
        let client = Client::connect(path, ClientConfig::default())
            .map_err(|e| format!("cannot connect to fibred at {}: {e}", path.display()))?;
        Ok(Remote {
            client: RefCell::new(client),
            seq: Cell::new(1),
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn next_seq(&self) -> u32 {
        let s = self.seq.get();
        self.seq.set(s.wrapping_add(1).max(1));
        s
    }

    /// Sends raw request bytes and collects the answers to sequence `seq` until the exchange
    /// ends: an ACK or error, NLMSG_DONE, or (`single`) the first answer.
    pub fn exchange_raw(&self, bytes: &[u8], seq: u32, single: bool) -> Result<Answers, RtError> {
        let mut answers = Vec::new();
        let mut error: Option<RtError> = None;
        let mut client = self.client.borrow_mut();
        let r = client.transact(std::iter::once(bytes), |m| {
            for item in Messages::new(m.bytes) {
                let Ok((off, msg)) = item else { break };
                if msg.header.sequence != seq {
                    continue;
                }
                match &msg.payload {
                    Payload::Error(e) => {
                        if e.error < 0 {
                            let mut err = RtError::new(Errno(-e.error));
                            err.extack = e.message().map(str::to_owned);
                            error = Some(err);
                        }
                        return ControlFlow::Break(());
                    }
                    Payload::Done(d) => {
                        if let Some(code) = d.code.filter(|c| *c < 0) {
                            error = Some(RtError::new(Errno(-code)));
                        }
                        return ControlFlow::Break(());
                    }
                    _ => {
                        let len = msg.header.length as usize;
                        answers.push(m.bytes[off..off + len].to_vec());
                        if single {
                            return ControlFlow::Break(());
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        });
        if let Err(e) = r {
            lost(&self.path, e);
        }
        match error {
            Some(e) => Err(e),
            None => Ok(answers),
        }
    }

    fn exchange(&self, req: &Request) -> Result<Answers, RtError> {
        let seq = self.next_seq();
        let bytes = convert::request_message(req, seq, 0).to_bytes();
        let single = matches!(
            req,
            Request::GetLink(_)
                | Request::GetRoute(_)
                | Request::GetNexthop(_)
                | Request::GetBucket(..)
                | Request::GetNeigh(_)
        );
        self.exchange_raw(&bytes, seq, single)
    }

    /// A settings message (`op` a write or a read) and the value the daemon answers (for a
    /// write, the value written).
    fn sysctl(
        &self,
        op: u32,
        target: fibre_fib::ConfTarget,
        key: fibre_fib::ConfKey,
        value: i64,
    ) -> Result<i64, RtError> {
        let seq = self.next_seq();
        let s = Sysctl {
            op,
            target,
            key,
            value,
        };
        let answers = self.exchange_raw(&s.request(seq), seq, false)?;
        if op == SYSCTL_SET {
            return Ok(value);
        }
        answers
            .iter()
            .find_map(|m| Sysctl::parse(m).ok().filter(|a| a.op == SYSCTL_VALUE))
            .map(|a| a.value)
            .ok_or_else(|| RtError::msg(Errno::EINVAL, "fibred answered no value"))
    }

    /// One HMAC key message and its answers.
    fn seg6_hmac(&self, m: &Seg6Hmac) -> Result<Answers, RtError> {
        let seq = self.next_seq();
        self.exchange_raw(&m.request(seq), seq, false)
    }

    fn change(&self, req: Request) -> Result<(), RtError> {
        self.exchange(&req).map(|_| ())
    }

    /// A dump, decoded with `decode`; undecodable entries are skipped.
    fn dump<T>(&self, req: Request, decode: impl Fn(&Payload<'_>) -> Option<T>) -> Vec<T> {
        match self.exchange(&req) {
            Ok(msgs) => msgs.iter().filter_map(|m| decode_one(m, &decode)).collect(),
            Err(e) => lost(&self.path, e),
        }
    }
}

fn decode_one<T>(bytes: &[u8], decode: &impl Fn(&Payload<'_>) -> Option<T>) -> Option<T> {
    let (msg, _) = fibre_netlink::NetlinkMessage::parse(bytes, 0).ok()?;
    decode(&msg.payload)
}

fn as_link(p: &Payload<'_>) -> Option<Link> {
    match p {
        Payload::Link(m) => convert::link_from(m).ok(),
        _ => None,
    }
}

fn as_addr(p: &Payload<'_>) -> Option<Address> {
    match p {
        Payload::Address(m) => convert::address_from(m).ok(),
        _ => None,
    }
}

fn as_route(p: &Payload<'_>) -> Option<Route> {
    match p {
        Payload::Route(m) => convert::route_from(m).ok(),
        _ => None,
    }
}

fn as_rule(p: &Payload<'_>) -> Option<Rule> {
    match p {
        Payload::Rule(m) => convert::rule_from(m).ok(),
        _ => None,
    }
}

fn as_nexthop(p: &Payload<'_>) -> Option<NexthopObj> {
    match p {
        Payload::Nexthop(m) => convert::nexthop_from(m).ok(),
        _ => None,
    }
}

fn as_bucket(p: &Payload<'_>) -> Option<fibre_fib::NexthopBucket> {
    match p {
        Payload::Nexthop(m) => convert::bucket_from(m),
        _ => None,
    }
}

fn as_neigh(p: &Payload<'_>) -> Option<Neighbour> {
    match p {
        Payload::Neighbour(m) => convert::neighbour_from(m).ok(),
        _ => None,
    }
}

impl Backend {
    pub fn link_new(&mut self, link: &Link, flags: ReqFlags) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.link_new(link, flags),
            Backend::Remote(r) => r.change(Request::NewLink(link.clone(), flags)),
        }
    }

    pub fn link_del(&mut self, link: &Link) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.link_del(link),
            Backend::Remote(r) => r.change(Request::DelLink(link.clone())),
        }
    }

    pub fn links(&self) -> Vec<Link> {
        match self {
            Backend::Local(f) => f.links(),
            Backend::Remote(r) => r.dump(Request::DumpLinks, as_link),
        }
    }

    pub fn link_index(&self, name: &str) -> Option<u32> {
        match self {
            Backend::Local(f) => f.link_index(name),
            Backend::Remote(r) => {
                let q = Link {
                    ifname: Some(name.to_owned()),
                    ..Link::default()
                };
                let msgs = r.exchange(&Request::GetLink(q)).ok()?;
                msgs.first()
                    .and_then(|m| decode_one(m, &as_link))
                    .map(|l| l.ifindex)
            }
        }
    }

    pub fn addr_new(&mut self, a: &Address, flags: ReqFlags) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.addr_new(a, flags),
            Backend::Remote(r) => r.change(Request::NewAddr(a.clone(), flags)),
        }
    }

    pub fn addr_del(&mut self, a: &Address) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.addr_del(a),
            Backend::Remote(r) => r.change(Request::DelAddr(a.clone())),
        }
    }

    pub fn addrs(&self, family: Option<Family>) -> Vec<Address> {
        match self {
            Backend::Local(f) => f.addrs(family),
            Backend::Remote(r) => r.dump(Request::DumpAddrs(family), as_addr),
        }
    }

    pub fn route_new(&mut self, route: &Route, flags: ReqFlags) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.route_new(route, flags),
            Backend::Remote(r) => r.change(Request::NewRoute(route.clone(), flags)),
        }
    }

    pub fn route_del(&mut self, route: &Route) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.route_del(route),
            Backend::Remote(r) => r.change(Request::DelRoute(route.clone())),
        }
    }

    pub fn routes(&self, family: Option<Family>) -> Vec<Route> {
        match self {
            Backend::Local(f) => f.routes(family),
            Backend::Remote(r) => r.dump(Request::DumpRoutes(family), as_route),
        }
    }

    pub fn route_get(&self, query: &RouteQuery) -> Result<Route, RtError> {
        match self {
            Backend::Local(f) => f.route_get(query),
            Backend::Remote(r) => {
                let msgs = r.exchange(&Request::GetRoute(query.clone()))?;
                msgs.first()
                    .and_then(|m| decode_one(m, &as_route))
                    .ok_or_else(|| RtError::msg(Errno::EINVAL, "fibred sent no route"))
            }
        }
    }

    pub fn rule_new(&mut self, rule: &Rule, flags: ReqFlags) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.rule_new(rule, flags),
            Backend::Remote(r) => r.change(Request::NewRule(rule.clone(), flags)),
        }
    }

    pub fn rule_del(&mut self, rule: &Rule) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.rule_del(rule),
            Backend::Remote(r) => r.change(Request::DelRule(rule.clone())),
        }
    }

    pub fn rules(&self, family: Option<Family>) -> Vec<Rule> {
        match self {
            Backend::Local(f) => f.rules(family),
            Backend::Remote(r) => r.dump(Request::DumpRules(family), as_rule),
        }
    }

    pub fn nexthop_new(&mut self, nh: &NexthopObj, flags: ReqFlags) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.nexthop_new(nh, flags),
            Backend::Remote(r) => r.change(Request::NewNexthop(nh.clone(), flags)),
        }
    }

    pub fn nexthop_del(&mut self, id: u32) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.nexthop_del(id),
            Backend::Remote(r) => r.change(Request::DelNexthop(id)),
        }
    }

    pub fn nexthops(&self) -> Vec<NexthopObj> {
        match self {
            Backend::Local(f) => f.nexthops(),
            Backend::Remote(r) => r.dump(Request::DumpNexthops, as_nexthop),
        }
    }

    /// `sysctl -w`: a setting of the kernel's meaning (fibred takes it as fibre's private
    /// settings message, `fibre_proto::sysctl`).
    pub fn set_conf(
        &mut self,
        target: fibre_fib::ConfTarget,
        key: fibre_fib::ConfKey,
        value: i64,
    ) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.set_conf(target, key, value),
            Backend::Remote(r) => r.sysctl(SYSCTL_SET, target, key, value).map(|_| ()),
        }
    }

    /// `sr tunsrc show` (offline only: fibred speaks no generic netlink, where the kernel
    /// answers it).
    pub fn seg6_tunsrc(&self) -> Result<std::net::Ipv6Addr, RtError> {
        match self {
            Backend::Local(f) => Ok(f.seg6_tunsrc()),
            Backend::Remote(_) => Err(offline_only()),
        }
    }

    /// `sr tunsrc set ADDR` (offline only).
    pub fn set_seg6_tunsrc(&mut self, a: std::net::Ipv6Addr) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => {
                f.set_seg6_tunsrc(a);
                Ok(())
            }
            Backend::Remote(_) => Err(offline_only()),
        }
    }

    /// `sr hmac show`: every key, by id (fibred answers fibre's private key message,
    /// `fibre_proto::seg6_hmac`).
    pub fn seg6_hmac(&self) -> Result<Vec<HmacKey>, RtError> {
        match self {
            Backend::Local(f) => Ok(f.seg6_hmac().iter().cloned().collect()),
            Backend::Remote(r) => r.seg6_hmac(&Seg6Hmac::dump()).map(|answers| {
                answers
                    .iter()
                    .filter_map(|m| Seg6Hmac::parse(m).ok())
                    .filter(|a| a.op == HMAC_KEY)
                    .map(|a| a.key)
                    .collect()
            }),
        }
    }

    /// `sr hmac set ID ALGO` with `secret` (empty: delete).
    pub fn set_seg6_hmac(&mut self, id: u32, algo: u8, secret: &[u8]) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.set_seg6_hmac(id, algo, secret),
            // The kernel's refusal (seg6_genl_sethmac), answered here: the message's field
            // holds no longer secret.
            Backend::Remote(_) if secret.len() > fibre_fib::seg6_hmac::SECRET_MAX => {
                Err(RtError::new(Errno::EINVAL))
            }
            Backend::Remote(r) => {
                let key = HmacKey {
                    id,
                    algo,
                    secret: secret.to_vec(),
                };
                r.seg6_hmac(&Seg6Hmac { op: HMAC_SET, key }).map(|_| ())
            }
        }
    }

    /// `ioam ... show` (offline only, like `sr`).
    pub fn ioam(&self) -> Result<&fibre_fib::ioam::Ioam, RtError> {
        match self {
            Backend::Local(f) => Ok(f.ioam()),
            Backend::Remote(_) => Err(offline_only()),
        }
    }

    /// `ioam namespace|schema add|del|set` (offline only).
    pub fn ioam_mut(&mut self) -> Result<&mut fibre_fib::ioam::Ioam, RtError> {
        match self {
            Backend::Local(f) => Ok(f.ioam_mut()),
            Backend::Remote(_) => Err(offline_only()),
        }
    }

    /// `sysctl KEY`.
    pub fn conf(
        &self,
        target: fibre_fib::ConfTarget,
        key: fibre_fib::ConfKey,
    ) -> Result<i64, RtError> {
        match self {
            Backend::Local(f) => f.conf(target, key),
            Backend::Remote(r) => r.sysctl(SYSCTL_GET, target, key, 0),
        }
    }

    /// The buckets of resilient groups (RTM_GETNEXTHOPBUCKET dump).
    pub fn nexthop_buckets(
        &self,
        id: Option<u32>,
        nhid: Option<u32>,
        dev: u32,
    ) -> Result<Vec<fibre_fib::NexthopBucket>, RtError> {
        match self {
            Backend::Local(f) => f.nexthop_buckets(id, nhid, dev),
            Backend::Remote(r) => {
                let req = Request::DumpBuckets(convert::BucketDump { id, nhid, dev });
                let msgs = r.exchange(&req)?;
                Ok(msgs
                    .iter()
                    .filter_map(|m| decode_one(m, &as_bucket))
                    .collect())
            }
        }
    }

    /// One bucket of a resilient group.
    pub fn nexthop_bucket(&self, id: u32, index: u16) -> Result<fibre_fib::NexthopBucket, RtError> {
        match self {
            Backend::Local(f) => f.nexthop_bucket(id, index),
            Backend::Remote(r) => {
                let msgs = r.exchange(&Request::GetBucket(id, index))?;
                msgs.first()
                    .and_then(|m| decode_one(m, &as_bucket))
                    .ok_or_else(|| RtError::msg(Errno::EINVAL, "fibred sent no bucket"))
            }
        }
    }

    /// Next-hop exceptions as cached routes (`route show cache`). fibred does not dump them
    /// (the kernel's cache dump has no request of its own): online this is empty.
    pub fn exceptions(&self, family: Option<Family>) -> Vec<Route> {
        match self {
            Backend::Local(f) => f.exceptions(family),
            Backend::Remote(_) => Vec::new(),
        }
    }

    /// `route flush cache`.
    pub fn flush_exceptions(&mut self, family: Option<Family>) -> Result<usize, RtError> {
        match self {
            Backend::Local(f) => Ok(f.flush_exceptions(family)),
            Backend::Remote(_) => Err(offline_only()),
        }
    }

    /// fibre's `route exception add DST mtu N`: what an ICMP "packet too big" does.
    pub fn pmtu_update(
        &mut self,
        family: Family,
        dst: std::net::IpAddr,
        mtu: u32,
    ) -> Result<fibre_fib::ExceptionOutcome, RtError> {
        match self {
            Backend::Local(f) => f.pmtu_update(family, dst, mtu).map_err(RtError::from),
            Backend::Remote(_) => Err(offline_only()),
        }
    }

    /// fibre's `route exception add DST via GW`: what an ICMP redirect does.
    pub fn redirect(
        &mut self,
        family: Family,
        dst: std::net::IpAddr,
        gw: std::net::IpAddr,
    ) -> Result<fibre_fib::ExceptionOutcome, RtError> {
        match self {
            Backend::Local(f) => f.redirect(family, dst, gw).map_err(RtError::from),
            Backend::Remote(_) => Err(offline_only()),
        }
    }

    /// fibre's `clock advance`: moves the offline clock forward by `ms` and runs a GC pass,
    /// as the kernel's GC timer would. From then on the clock stands still until moved again.
    pub fn advance_clock(&mut self, ms: u64) -> Result<fibre_fib::GcStats, RtError> {
        match self {
            Backend::Local(f) => {
                let now = f.clock().now_ms();
                f.set_clock(std::sync::Arc::new(fibre_fib::ManualClock::new(now + ms)));
                Ok(f.expire())
            }
            Backend::Remote(_) => Err(offline_only()),
        }
    }

    pub fn neigh_new(&mut self, n: &Neighbour, flags: ReqFlags) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.neigh_new(n, flags),
            Backend::Remote(r) => r.change(Request::NewNeigh(n.clone(), flags)),
        }
    }

    pub fn neigh_del(&mut self, n: &Neighbour) -> Result<(), RtError> {
        match self {
            Backend::Local(f) => f.neigh_del(n),
            Backend::Remote(r) => r.change(Request::DelNeigh(n.clone())),
        }
    }

    pub fn neigh_get(&self, n: &Neighbour) -> Result<Neighbour, RtError> {
        match self {
            Backend::Local(f) => f.neigh_get(n),
            Backend::Remote(r) => {
                let msgs = r.exchange(&Request::GetNeigh(n.clone()))?;
                msgs.first()
                    .and_then(|m| decode_one(m, &as_neigh))
                    .ok_or_else(|| RtError::msg(Errno::EINVAL, "fibred sent no neighbour"))
            }
        }
    }

    /// Neighbours (or proxy entries) of `family`, of link `ifindex` when not 0.
    pub fn neighbours(&self, family: Option<Family>, proxy: bool, ifindex: u32) -> Vec<Neighbour> {
        match self {
            Backend::Local(f) => f
                .neighbours(family, proxy)
                .into_iter()
                .filter(|n| ifindex == 0 || n.ifindex == ifindex)
                .collect(),
            Backend::Remote(r) => {
                let d = NeighDump {
                    family,
                    proxy,
                    ifindex,
                };
                r.dump(Request::DumpNeighs(d), as_neigh)
            }
        }
    }

    /// The daemon connection, when online.
    pub fn remote(&self) -> Option<&Remote> {
        match self {
            Backend::Local(_) => None,
            Backend::Remote(r) => Some(r),
        }
    }
}
