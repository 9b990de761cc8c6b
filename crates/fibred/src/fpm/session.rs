//! The writer's side of the FPM feed: zebra's messages made into the engine's requests, and
//! what fibred remembers of the feed across connections.
//!
//! zebra speaks netlink over FPM as if it programmed a kernel of its own; what it means is not
//! quite what the same bytes mean on rtnetlink, so each message is translated before the
//! engine sees it (FRR 8.4's `dplane_fpm_nl` and `rt_netlink.c` are the sources):
//! - every RTM_NEWROUTE replaces the route of its key (family, table, destination, source,
//!   tos), whatever its flags say: zebra 8.4 sets NLM_F_REPLACE on IPv4 routes only, and an
//!   IPv6 add without it would append next hops;
//! - next-hop group ids are zebra's own: they live in a space apart from the `nexthop`
//!   objects users create, so each is given a fibre id of its own ([`FIRST_ID`] upwards, one
//!   nobody uses: a new id is created with NLM_F_EXCL, never replacing a user's object);
//! - interface indexes are those of zebra's host; they are mapped to fibre links by name
//!   ([`Names`]). A route through an interface fibre has no link of that name is refused;
//! - a route whose group has not arrived is held (counted) and applied right after the group,
//!   and so is a group whose members have not: zebra walks its groups in no order of
//!   dependency (FRR 8.4 sends a group before some of its members);
//! - routes zebra installs as RTPROT_KERNEL (connected and local routes) are fibre's own to
//!   derive from its addresses, and are skipped unless [`Settings::kernel_routes`] is set;
//! - a reconnect replays everything with no end marker: every route and group the feed
//!   installed carries the number of the connection that last sent it, and once a connection
//!   has been quiet for [`Settings::sweep_quiet`] (or open for [`Settings::sweep_max`]) what
//!   an earlier connection installed and this one did not replay is removed. A disconnect
//!   removes nothing.
//!
//! Invariants: only the writer thread owns a [`Session`], and it applies the messages of a
//! call to [`Session::frames`] inside one engine batch (the caller publishes after it), so
//! readers never see an update's RTM_DELROUTE without its RTM_NEWROUTE; a message that fails
//! changes nothing (the engine's requests are atomic) and is counted under its errno.

use crate::engine::{Applied, Engine};
use fibre_fib::hash::KeyedMap;
use fibre_netlink::message::{flags as nf, types as mt};
use fibre_netlink::nexthop::{GroupEntry, NexthopAttr, NexthopMessage};
use fibre_netlink::route::{RouteAttr, RouteHeader, RouteMessage, RouteNextHop};
use fibre_netlink::{NetlinkHeader, NetlinkMessage, Payload};
use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// First fibre id given to zebra's next-hop groups: far above the small ids people and
/// scripts choose, so that the two spaces rarely meet (and when they do, the next free id is
/// taken).
pub const FIRST_ID: u32 = 0x7000_0000;
/// Routes and groups held for groups that have not arrived; one more is refused (and
/// counted).
pub const MAX_HELD: usize = 1 << 20;
/// Fresh ids tried for one group before it is refused: each failed try met an object a user
/// created in the feed's id space.
const ID_TRIES: u32 = 64;

const RTPROT_KERNEL: u8 = 2;
const RTPROT_ZEBRA: u8 = 11;
/// The metric zebra gives every route it installs (`ROUTE_INSTALLATION_METRIC`).
const ZEBRA_METRIC: u32 = 20;
const RT_TABLE_UNSPEC: u8 = 0;
const RT_SCOPE_NOWHERE: u8 = 255;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// `rtm_flags` of offload feedback (`RTM_F_OFFLOAD`, `RTM_F_OFFLOAD_FAILED`).
const RTM_F_OFFLOAD: u32 = 0x4000;
const RTM_F_OFFLOAD_FAILED: u32 = 0x2000_0000;

/// How the feed is applied.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// A connection quiet this long has replayed what it will: the sweep runs.
    pub sweep_quiet: Duration,
    /// The sweep runs this long after a connection started even if it never went quiet.
    pub sweep_max: Duration,
    /// Send each route's outcome back (RTM_F_OFFLOAD or RTM_F_OFFLOAD_FAILED), which zebra
    /// reads from FRR 8.5 on (`--asic-offload=notify_on_offload`).
    pub offload: bool,
    /// Install zebra's RTPROT_KERNEL routes too.
    pub kernel_routes: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            sweep_quiet: Duration::from_secs(10),
            // SONiC's fpmsyncd reconciles after the same time.
            sweep_max: Duration::from_secs(120),
            offload: false,
            kernel_routes: false,
        }
    }
}

/// Interface names of zebra's host, by index.
pub trait Names {
    fn name(&mut self, ifindex: u32) -> Option<String>;
}

/// The names of the namespace fibred runs in (if_indextoname).
pub struct HostNames;

impl Names for HostNames {
    fn name(&mut self, ifindex: u32) -> Option<String> {
        fibre_sys::interface_name(ifindex).ok()
    }
}

/// What the feed did, since fibred started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub connections: u64,
    pub frames: u64,
    pub messages: u64,
    pub routes_added: u64,
    pub routes_deleted: u64,
    pub groups_added: u64,
    pub groups_deleted: u64,
    /// Messages the engine refused (any errno).
    pub refused: u64,
    /// Messages naming an interface that is no fibre link.
    pub unknown_link: u64,
    /// Messages left alone: RTPROT_KERNEL routes, other families, other message types.
    pub skipped: u64,
    /// Routes and groups held for a group now (read off the held messages by
    /// [`Session::counters`]), and ever.
    pub held: u64,
    pub held_total: u64,
    pub swept_routes: u64,
    pub swept_groups: u64,
    /// Offload feedback messages queued for zebra, and dropped because zebra did not read
    /// them.
    pub feedback: u64,
    pub feedback_dropped: u64,
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "connections={} frames={} messages={} routes_added={} routes_deleted={} \
             groups_added={} groups_deleted={} refused={} unknown_link={} skipped={} held={} \
             held_total={} swept_routes={} swept_groups={} feedback={} feedback_dropped={}",
            self.connections,
            self.frames,
            self.messages,
            self.routes_added,
            self.routes_deleted,
            self.groups_added,
            self.groups_deleted,
            self.refused,
            self.unknown_link,
            self.skipped,
            self.held,
            self.held_total,
            self.swept_routes,
            self.swept_groups,
            self.feedback,
            self.feedback_dropped
        )
    }
}

/// What names a route for replacement and deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct RouteKey {
    family: u8,
    table: u32,
    dst: Option<IpAddr>,
    dst_len: u8,
    src: Option<IpAddr>,
    src_len: u8,
    tos: u8,
}

impl RouteKey {
    fn of(m: &RouteMessage<'_>) -> RouteKey {
        let h = &m.header;
        let mut k = RouteKey {
            family: h.family,
            table: u32::from(h.table),
            dst: None,
            dst_len: h.dst_len,
            src: None,
            src_len: h.src_len,
            tos: h.tos,
        };
        for a in &m.attributes {
            match a {
                RouteAttr::Table(t) => k.table = *t,
                RouteAttr::Dst(d) => k.dst = Some(*d),
                RouteAttr::Src(s) => k.src = Some(*s),
                _ => {}
            }
        }
        k
    }
}

/// A route the feed installed: by which connection, and what deletes exactly it.
#[derive(Debug, Clone, Copy)]
struct Installed {
    epoch: u64,
    protocol: u8,
    metric: Option<u32>,
}

/// One of zebra's groups: its fibre id and the connection that last sent it.
#[derive(Debug, Clone, Copy)]
struct Group {
    id: u32,
    epoch: u64,
}

/// What waits for a group: a route (by its key) or a group (by zebra's id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Waiter {
    Route(RouteKey),
    Group(u32),
}

/// A held message: what it is and its bytes as zebra sent them.
type HeldMessage = (Waiter, Box<[u8]>);

/// Why a message was not made into a request.
enum Untranslated {
    /// Not for fibre (counted as skipped).
    Skip,
    /// Names an interface fibre has no link for.
    UnknownLink(u32),
    /// Names a group that has not arrived.
    NoGroup(u32),
}

/// The feed's state across connections.
pub struct Session {
    settings: Settings,
    /// The connection now (or last) feeding; starts at 1, so 0 marks nothing.
    epoch: u64,
    routes: KeyedMap<RouteKey, Installed>,
    groups: KeyedMap<u32, Group>,
    /// Routes waiting for a group, by zebra's group id, as zebra sent them.
    held: KeyedMap<u32, Vec<HeldMessage>>,
    /// What each held message waits for.
    held_by: KeyedMap<Waiter, u32>,
    /// Interface names by zebra's index, filled on a miss, emptied at every connection.
    names: KeyedMap<u32, String>,
    /// zebra's interfaces without a fibre link already logged on this connection.
    unknown_warned: std::collections::HashSet<u32>,
    next_id: u32,
    /// Objects of the feed's id space an earlier run of fibred made ([`Session::adopt`]),
    /// swept at the first sweep; largest id (a group's, made after its members) first.
    orphans: Vec<u32>,
    /// When the connection to sweep for started and last sent a frame; `None` once swept.
    pending_sweep: Option<(Instant, Instant)>,
    counters: Counters,
    /// Offload feedback for zebra, netlink messages back to back.
    feedback: Vec<u8>,
    seq: u32,
}

impl Session {
    pub fn new(settings: Settings) -> Session {
        Session {
            settings,
            epoch: 0,
            routes: KeyedMap::default(),
            groups: KeyedMap::default(),
            held: KeyedMap::default(),
            held_by: KeyedMap::default(),
            names: KeyedMap::default(),
            unknown_warned: Default::default(),
            next_id: FIRST_ID,
            orphans: Vec::new(),
            pending_sweep: None,
            counters: Counters::default(),
            feedback: Vec::new(),
            seq: 0,
        }
    }

    pub fn counters(&self) -> Counters {
        Counters {
            held: self.held_by.len() as u64,
            ..self.counters
        }
    }

    /// A connection started at `now`: what it does not replay is swept later.
    pub fn connected(&mut self, now: Instant) {
        self.epoch += 1;
        self.counters.connections += 1;
        self.names.clear();
        self.unknown_warned.clear();
        self.pending_sweep = Some((now, now));
    }

    /// Takes as the feed's, from an earlier run of fibred (a restored `--state`), the routes
    /// zebra would have sent (metric 20 and one of FRR's protocols) and the objects of the
    /// feed's id space that zebra made (protocol RTPROT_ZEBRA): a connection that does not
    /// replay them sweeps them as it sweeps its own.
    pub fn adopt(&mut self, fib: &fibre_fib::Fib) {
        for r in fib.routes(None) {
            if r.priority != Some(ZEBRA_METRIC) || !is_frr_protocol(r.protocol) {
                continue;
            }
            let key = RouteKey {
                family: if r.dst.addr.is_ipv4() {
                    AF_INET
                } else {
                    AF_INET6
                },
                table: r.table,
                dst: (r.dst.len > 0 || !r.dst.addr.is_unspecified()).then_some(r.dst.addr),
                dst_len: r.dst.len,
                src: r.src.map(|p| p.addr),
                src_len: r.src.map_or(0, |p| p.len),
                tos: r.tos,
            };
            let inst = Installed {
                epoch: 0,
                protocol: r.protocol,
                metric: r.priority,
            };
            self.routes.insert(key, inst);
        }
        self.orphans = fib
            .nexthops()
            .into_iter()
            .filter(|n| n.id >= FIRST_ID && n.protocol == RTPROT_ZEBRA)
            .map(|n| n.id)
            .collect();
        // Groups first in the sweep's order: a group goes before the members it holds.
        self.orphans.sort_by_key(|id| std::cmp::Reverse(*id));
        self.next_id = self
            .orphans
            .first()
            .map_or(FIRST_ID, |&m| m.checked_add(1).unwrap_or(FIRST_ID));
    }

    /// The connection went away before its sweep: nothing is removed until a later one has
    /// replayed.
    pub fn disconnected(&mut self) {
        self.pending_sweep = None;
    }

    /// When [`Session::sweep`] is due, if a sweep waits.
    pub fn sweep_due(&self) -> Option<Instant> {
        let (start, last) = self.pending_sweep?;
        Some((last + self.settings.sweep_quiet).min(start + self.settings.sweep_max))
    }

    /// Counts offload feedback the connection had no room for.
    pub fn feedback_dropped(&mut self, n: u64) {
        self.counters.feedback_dropped += n;
    }

    /// The offload feedback gathered since the last call.
    pub fn take_feedback(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.feedback)
    }

    /// Applies the netlink messages of whole frames (each frame's payload in `frames`), in
    /// order, inside the caller's engine batch.
    pub fn frames<'f>(
        &mut self,
        engine: &mut Engine,
        names: &mut dyn Names,
        frames: impl IntoIterator<Item = &'f [u8]>,
        now: Instant,
        listening: u64,
    ) -> Applied {
        let mut out = Applied::default();
        for payload in frames {
            self.counters.frames += 1;
            if let Some((_, last)) = &mut self.pending_sweep {
                *last = now;
            }
            for (_, msg) in fibre_netlink::message::Messages::new(payload).flatten() {
                self.counters.messages += 1;
                self.message(engine, names, &msg, listening, &mut out);
            }
        }
        out
    }

    /// Removes what earlier connections installed and this one did not replay: routes
    /// first, then the groups (whose removal would take routes with them).
    pub fn sweep(&mut self, engine: &mut Engine, listening: u64) -> Applied {
        let mut out = Applied::default();
        self.pending_sweep = None;
        let epoch = self.epoch;
        let stale: Vec<(RouteKey, Installed)> = self
            .routes
            .iter()
            .filter(|(_, i)| i.epoch < epoch)
            .map(|(k, i)| (*k, *i))
            .collect();
        for (key, inst) in stale {
            let req = delete_route(&key, &inst, self.next_seq());
            let errno = self.apply(engine, &req, listening, &mut out);
            self.routes.remove(&key);
            if errno == 0 {
                self.counters.swept_routes += 1;
            }
        }
        // Objects an earlier run made, unless the replay took their ids again.
        let reused: std::collections::HashSet<u32> = self.groups.values().map(|g| g.id).collect();
        for id in std::mem::take(&mut self.orphans) {
            if reused.contains(&id) {
                continue;
            }
            let req = delete_group(id, self.next_seq());
            if self.apply(engine, &req, listening, &mut out) == 0 {
                self.counters.swept_groups += 1;
            }
        }
        let stale: Vec<(u32, Group)> = self
            .groups
            .iter()
            .filter(|(_, g)| g.epoch < epoch)
            .map(|(z, g)| (*z, *g))
            .collect();
        for (zid, g) in stale {
            let req = delete_group(g.id, self.next_seq());
            let errno = self.apply(engine, &req, listening, &mut out);
            self.groups.remove(&zid);
            if errno == 0 {
                self.counters.swept_groups += 1;
            }
        }
        out
    }

    /// An id of the feed's space not given before (once the space's 2.4 billion ids are
    /// used up it starts again; an id still in use is then refused with EEXIST and the next
    /// one tried).
    fn fresh_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id = id.checked_add(1).unwrap_or(FIRST_ID);
        id
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn message(
        &mut self,
        engine: &mut Engine,
        names: &mut dyn Names,
        msg: &NetlinkMessage<'_>,
        listening: u64,
        out: &mut Applied,
    ) {
        match (&msg.payload, msg.header.message_type) {
            (Payload::Route(r), mt::RTM_NEWROUTE) => {
                self.new_route(engine, names, r, listening, out)
            }
            (Payload::Route(r), mt::RTM_DELROUTE) => self.del_route(engine, r, listening, out),
            (Payload::Nexthop(n), mt::RTM_NEWNEXTHOP) => {
                self.new_group(engine, names, n, listening, out)
            }
            (Payload::Nexthop(n), mt::RTM_DELNEXTHOP) => self.del_group(engine, n, listening, out),
            _ => self.counters.skipped += 1,
        }
    }

    fn new_route(
        &mut self,
        engine: &mut Engine,
        names: &mut dyn Names,
        r: &RouteMessage<'_>,
        listening: u64,
        out: &mut Applied,
    ) {
        let key = RouteKey::of(r);
        self.unhold(Waiter::Route(key));
        let req = match self.translate_route(engine, names, r) {
            Ok(req) => req,
            Err(Untranslated::Skip) => return self.counters.skipped += 1,
            Err(Untranslated::UnknownLink(i)) => {
                self.unknown_link(i);
                return self.offload_feedback(r, -libc::ENODEV);
            }
            Err(Untranslated::NoGroup(zid)) => {
                return self.hold(Waiter::Route(key), zid, Payload::Route(r.clone()))
            }
        };
        let errno = self.apply(engine, &req, listening, out);
        if errno == 0 {
            self.counters.routes_added += 1;
            let metric = r.attributes.iter().find_map(|a| match a {
                RouteAttr::Priority(p) => Some(*p),
                _ => None,
            });
            self.routes.insert(
                key,
                Installed {
                    epoch: self.epoch,
                    protocol: r.header.protocol,
                    metric,
                },
            );
        }
        self.offload_feedback(r, errno);
    }

    fn del_route(
        &mut self,
        engine: &mut Engine,
        r: &RouteMessage<'_>,
        listening: u64,
        out: &mut Applied,
    ) {
        let key = RouteKey::of(r);
        let held = self.unhold(Waiter::Route(key));
        let Some(inst) = self.routes.remove(&key) else {
            if !held {
                self.counters.skipped += 1;
            }
            return;
        };
        let req = delete_route(&key, &inst, self.next_seq());
        if self.apply(engine, &req, listening, out) == 0 {
            self.counters.routes_deleted += 1;
        }
    }

    fn new_group(
        &mut self,
        engine: &mut Engine,
        names: &mut dyn Names,
        n: &NexthopMessage<'_>,
        listening: u64,
        out: &mut Applied,
    ) {
        let Some(zid) = n.attributes.iter().find_map(|a| match a {
            NexthopAttr::Id(i) => Some(*i),
            _ => None,
        }) else {
            return self.counters.skipped += 1;
        };
        self.unhold(Waiter::Group(zid));
        let known = self.groups.get(&zid).map(|g| g.id);
        let mut id = known.unwrap_or_else(|| self.fresh_id());
        let mut errno;
        let mut tries = 1;
        loop {
            let req = match self.translate_group(engine, names, n, id, known.is_some()) {
                Ok(req) => req,
                Err(Untranslated::UnknownLink(i)) => {
                    return self.unknown_link(i);
                }
                Err(Untranslated::NoGroup(member)) => {
                    return self.hold(Waiter::Group(zid), member, Payload::Nexthop(n.clone()))
                }
                Err(Untranslated::Skip) => return self.counters.skipped += 1,
            };
            errno = self.apply(engine, &req, listening, out);
            // A fresh id met an object of somebody else's: the next one.
            if errno != -libc::EEXIST || known.is_some() || tries == ID_TRIES {
                break;
            }
            id = self.fresh_id();
            tries += 1;
        }
        if errno != 0 {
            return;
        }
        self.counters.groups_added += 1;
        self.groups.insert(
            zid,
            Group {
                id,
                epoch: self.epoch,
            },
        );
        // What waited for this group, in the order it came.
        for (waiter, bytes) in self.held.remove(&zid).unwrap_or_default() {
            self.held_by.remove(&waiter);
            if let Ok((m, _)) = NetlinkMessage::parse(&bytes, 0) {
                self.message(engine, names, &m, listening, out);
            }
        }
    }

    fn del_group(
        &mut self,
        engine: &mut Engine,
        n: &NexthopMessage<'_>,
        listening: u64,
        out: &mut Applied,
    ) {
        let zid = n.attributes.iter().find_map(|a| match a {
            NexthopAttr::Id(i) => Some(*i),
            _ => None,
        });
        let held = zid.is_some_and(|z| self.unhold(Waiter::Group(z)));
        let Some(g) = zid.and_then(|z| self.groups.remove(&z)) else {
            if !held {
                self.counters.skipped += 1;
            }
            return;
        };
        let req = delete_group(g.id, self.next_seq());
        if self.apply(engine, &req, listening, out) == 0 {
            self.counters.groups_deleted += 1;
        }
    }

    /// Counts a message through zebra's interface `ifindex`, which fibre has no link for;
    /// logged once per interface and connection (a table through it would log every route).
    fn unknown_link(&mut self, ifindex: u32) {
        self.counters.unknown_link += 1;
        if self.unknown_warned.insert(ifindex) {
            tracing::warn!(%ifindex, name = %self.names.get(&ifindex).map_or("?", String::as_str), "fpm: zebra names an interface fibre has no link for; its routes are refused");
        }
    }

    /// Holds a message (zebra's route or group, as `payload`) until group `awaited` arrives.
    fn hold(&mut self, waiter: Waiter, awaited: u32, payload: Payload<'_>) {
        if self.held_by.len() >= MAX_HELD {
            self.counters.refused += 1;
            return;
        }
        let message_type = match payload {
            Payload::Route(_) => mt::RTM_NEWROUTE,
            _ => mt::RTM_NEWNEXTHOP,
        };
        let msg = NetlinkMessage {
            header: header(message_type, nf::NLM_F_REQUEST, 0),
            payload,
        };
        self.held
            .entry(awaited)
            .or_default()
            .push((waiter, msg.to_bytes().into()));
        self.held_by.insert(waiter, awaited);
        self.counters.held_total += 1;
    }

    /// Forgets the held message of `waiter`; whether one was held.
    fn unhold(&mut self, waiter: Waiter) -> bool {
        let Some(awaited) = self.held_by.remove(&waiter) else {
            return false;
        };
        if let Some(list) = self.held.get_mut(&awaited) {
            list.retain(|(w, _)| *w != waiter);
            if list.is_empty() {
                self.held.remove(&awaited);
            }
        }
        true
    }

    /// The link index fibre has for zebra's interface `ifindex`.
    fn link(&mut self, engine: &Engine, names: &mut dyn Names, ifindex: u32) -> Option<u32> {
        let name = match self.names.entry(ifindex) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(names.name(ifindex)?),
        };
        engine.fib().link_index(name)
    }

    fn map_oif(
        &mut self,
        engine: &Engine,
        names: &mut dyn Names,
        ifindex: u32,
    ) -> Result<u32, Untranslated> {
        self.link(engine, names, ifindex)
            .ok_or(Untranslated::UnknownLink(ifindex))
    }

    /// zebra's route as a request of fibre's: links and groups mapped, a replace.
    fn translate_route(
        &mut self,
        engine: &Engine,
        names: &mut dyn Names,
        r: &RouteMessage<'_>,
    ) -> Result<Vec<u8>, Untranslated> {
        let h = &r.header;
        if !matches!(h.family, AF_INET | AF_INET6)
            || (h.protocol == RTPROT_KERNEL && !self.settings.kernel_routes)
        {
            return Err(Untranslated::Skip);
        }
        let mut attributes = Vec::with_capacity(r.attributes.len());
        for a in &r.attributes {
            attributes.push(match a {
                RouteAttr::Oif(i) => RouteAttr::Oif(self.map_oif(engine, names, *i)?),
                RouteAttr::NhId(z) => match self.groups.get(z) {
                    Some(g) => RouteAttr::NhId(g.id),
                    None => return Err(Untranslated::NoGroup(*z)),
                },
                RouteAttr::Multipath(hops) => {
                    let mut mapped = Vec::with_capacity(hops.len());
                    for hop in hops {
                        let mut hop: RouteNextHop<'_> = hop.clone();
                        let i = u32::try_from(hop.header.ifindex).unwrap_or(0);
                        if i != 0 {
                            hop.header.ifindex = self.map_oif(engine, names, i)? as i32;
                        }
                        mapped.push(hop);
                    }
                    RouteAttr::Multipath(mapped)
                }
                other => other.clone(),
            });
        }
        let msg = NetlinkMessage {
            header: header(
                mt::RTM_NEWROUTE,
                nf::NLM_F_REQUEST | nf::NLM_F_ACK | nf::NLM_F_CREATE | nf::NLM_F_REPLACE,
                self.next_seq(),
            ),
            payload: Payload::Route(RouteMessage {
                header: r.header,
                attributes,
            }),
        };
        Ok(msg.to_bytes())
    }

    /// zebra's next hop or group as fibre's object `id`: links and members mapped; a known
    /// group is replaced, a new one created only where no object is.
    fn translate_group(
        &mut self,
        engine: &Engine,
        names: &mut dyn Names,
        n: &NexthopMessage<'_>,
        id: u32,
        known: bool,
    ) -> Result<Vec<u8>, Untranslated> {
        let mut attributes = Vec::with_capacity(n.attributes.len());
        for a in &n.attributes {
            attributes.push(match a {
                NexthopAttr::Id(_) => NexthopAttr::Id(id),
                NexthopAttr::Oif(i) => NexthopAttr::Oif(self.map_oif(engine, names, *i)?),
                NexthopAttr::Group(members) => {
                    let mut mapped = Vec::with_capacity(members.len());
                    for m in members {
                        let g = self.groups.get(&m.id).ok_or(Untranslated::NoGroup(m.id))?;
                        mapped.push(GroupEntry { id: g.id, ..*m });
                    }
                    NexthopAttr::Group(mapped)
                }
                other => other.clone(),
            });
        }
        let how = if known {
            nf::NLM_F_REPLACE
        } else {
            nf::NLM_F_EXCL
        };
        let msg = NetlinkMessage {
            header: header(
                mt::RTM_NEWNEXTHOP,
                nf::NLM_F_REQUEST | nf::NLM_F_ACK | nf::NLM_F_CREATE | how,
                self.next_seq(),
            ),
            payload: Payload::Nexthop(NexthopMessage {
                header: n.header,
                attributes,
            }),
        };
        Ok(msg.to_bytes())
    }

    /// Hands one request to the engine; its errno (0: done). Failures are counted and
    /// logged.
    fn apply(&mut self, engine: &mut Engine, req: &[u8], listening: u64, out: &mut Applied) -> i32 {
        let (errno, text) = engine.apply_own(req, listening, &mut out.notes);
        if errno != 0 {
            self.counters.refused += 1;
            tracing::debug!(errno = -errno, why = %text.unwrap_or_default(), "fpm request refused");
        } else {
            out.changed = true;
        }
        errno
    }

    /// zebra's route back with its outcome in `rtm_flags` (FRR's `fpm_listener -r` and
    /// SONiC's fpmsyncd answer so).
    fn offload_feedback(&mut self, r: &RouteMessage<'_>, errno: i32) {
        if !self.settings.offload {
            return;
        }
        let mut r = r.clone();
        r.header.flags |= if errno == 0 {
            RTM_F_OFFLOAD
        } else {
            RTM_F_OFFLOAD_FAILED
        };
        NetlinkMessage {
            header: header(mt::RTM_NEWROUTE, nf::NLM_F_REQUEST, 0),
            payload: Payload::Route(r),
        }
        .emit(&mut self.feedback);
        self.counters.feedback += 1;
    }
}

/// The protocols zebra stamps on routes (`zebra2proto` in FRR's `zebra/rt_netlink.c`):
/// RTPROT_ZEBRA and FRR's block from RTPROT_BGP (186) to RTPROT_SRTE (198).
fn is_frr_protocol(p: u8) -> bool {
    p == RTPROT_ZEBRA || (186..=198).contains(&p)
}

/// A request's header (the engine answers port 0, the daemon itself).
fn header(message_type: u16, flags: u16, sequence: u32) -> NetlinkHeader {
    NetlinkHeader {
        length: 0,
        message_type,
        flags,
        sequence,
        port: 0,
    }
}

/// The RTM_DELROUTE that removes exactly the route the feed installed under `key`.
fn delete_route(key: &RouteKey, inst: &Installed, seq: u32) -> Vec<u8> {
    let mut attributes = vec![RouteAttr::Table(key.table)];
    attributes.extend(key.dst.map(RouteAttr::Dst));
    attributes.extend(key.src.map(RouteAttr::Src));
    attributes.extend(inst.metric.map(RouteAttr::Priority));
    NetlinkMessage {
        header: header(mt::RTM_DELROUTE, nf::NLM_F_REQUEST | nf::NLM_F_ACK, seq),
        payload: Payload::Route(RouteMessage {
            header: RouteHeader {
                family: key.family,
                dst_len: key.dst_len,
                src_len: key.src_len,
                tos: key.tos,
                table: RT_TABLE_UNSPEC,
                protocol: inst.protocol,
                scope: RT_SCOPE_NOWHERE,
                kind: 0,
                flags: 0,
            },
            attributes,
        }),
    }
    .to_bytes()
}

fn delete_group(id: u32, seq: u32) -> Vec<u8> {
    NetlinkMessage {
        header: header(mt::RTM_DELNEXTHOP, nf::NLM_F_REQUEST | nf::NLM_F_ACK, seq),
        payload: Payload::Nexthop(NexthopMessage {
            header: Default::default(),
            attributes: vec![NexthopAttr::Id(id)],
        }),
    }
    .to_bytes()
}

/// Names for the fuzz check: index `i` is link `eth{i}`.
struct CheckNames;

impl Names for CheckNames {
    fn name(&mut self, ifindex: u32) -> Option<String> {
        Some(format!("eth{ifindex}"))
    }
}

/// The FPM feed's robustness property, for the fuzzer and the tests: any bytes as zebra's
/// stream (cut into frames by fibre-netlink's decoder, up to the first framing error), over
/// two connections with a sweep between them, applied to a state with links `eth1` and
/// `eth2`, never panic, and the held-message count stays what the held lists hold. Panics
/// when the property fails.
pub fn check_stream(data: &[u8]) {
    use fibre_netlink::fpm::FrameDecoder;
    let mut engine = Engine::default();
    for (i, name) in ["eth1", "eth2"].iter().enumerate() {
        let link = fibre_fib::types::Link {
            ifindex: i as u32 + 2,
            ifname: Some((*name).into()),
            kind: Some(fibre_fib::types::LinkKind::Dummy),
            flags: 1,
            change: 1,
            ..Default::default()
        };
        let add = fibre_proto::convert::Request::NewLink(link, fibre_fib::types::ReqFlags::ADD);
        let req = fibre_proto::convert::request_message(&add, 1, 0).to_bytes();
        engine.apply_own(&req, 0, &mut Vec::new());
    }
    let mut session = Session::new(Settings {
        offload: true,
        ..Settings::default()
    });
    let now = std::time::Instant::now();
    for round in 0..2 {
        session.connected(now);
        let mut decoder = FrameDecoder::new();
        let mut input = data;
        let mut frames = Vec::new();
        while !input.is_empty() {
            match decoder.decode(&mut input) {
                Ok(Some(f)) => frames.push(f.payload.to_vec()),
                Ok(None) => {}
                Err(e) if e.is_fatal() => break,
                Err(_) => {}
            }
        }
        engine.begin();
        session.frames(
            &mut engine,
            &mut CheckNames,
            frames.iter().map(Vec::as_slice),
            now,
            0,
        );
        if round == 1 {
            session.sweep(&mut engine, 0);
        }
        engine.publish();
        let held: usize = session.held.values().map(Vec::len).sum();
        assert_eq!(held as u64, session.counters().held);
        assert_eq!(held, session.held_by.len());
        assert!(session.counters().held <= session.counters.held_total);
        session.take_feedback();
    }
}
