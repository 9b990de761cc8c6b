//! Neighbour unreachability detection: the states a dynamic entry moves through while the data
//! plane resolves, uses and confirms it, with the kernel's timers (RFC 4861 section 7.3, which
//! Linux applies to ARP as well).
//!
//! The data plane owns packets and frames; this module owns the states. A worker that must
//! send through an entry without a usable address, or through a STALE one, reports it
//! ([`Fib::neigh_event_send`], the kernel's `__neigh_event_send`); what it learns from ARP and
//! NDP arrives as [`Fib::neigh_learn`] (`neigh_update` as `arp_process`, `ndisc_recv_ns` and
//! `ndisc_recv_na` call it); the writer runs [`Fib::neigh_timers`] when the clock passes
//! [`Fib::neigh_next_timer`]. Each returns [`NudAction`]s for the data plane: probes to send,
//! and entries that failed (their queued packets are answered with "host unreachable").
//!
//! States and timers, as Linux 6.18's `neigh_timer_handler` (checked live in a namespace:
//! three broadcast ARP requests one second apart, then FAILED and one ICMP host unreachable per
//! queued packet):
//! - NONE/FAILED + send: INCOMPLETE, the probe counter at `ucast_probes`, a probe now and one
//!   every `retrans`; when the counter reaches `ucast + app + mcast` probes, FAILED. Probes in
//!   INCOMPLETE are broadcast (the counter is past the unicast probes).
//! - STALE + send: DELAY for `delay_first_probe`; then REACHABLE if confirmed meanwhile, else
//!   PROBE: the counter at 0, `ucast_probes` unicast probes to the known address, then FAILED.
//! - REACHABLE lasts `reachable` after the last confirmation, then DELAY if the entry was used
//!   within `delay_first_probe`, else STALE. The kernel draws `reachable` at random between
//!   half and one and a half `base_reachable_time`; fibre uses `base_reachable_time` itself so
//!   that a capture's replay is deterministic.
//!
//! Times are the caller's nanoseconds (a capture's clock offline, the monotonic clock in the
//! daemon); nothing here reads a clock.

use super::{lladdr_of, Entry, Key, Neighs, CONNECTED, LLADDR_LEN};
use crate::ids::IfIndex;
use crate::types::{nud, Family};
use crate::Fib;
use std::net::IpAddr;

const SECOND: u64 = 1_000_000_000;

/// The kernel's per-table defaults (`net.ipv{4,6}.neigh.default.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NudParams {
    /// `retrans_time_ms`: between probes.
    pub retrans_ns: u64,
    /// `base_reachable_time_ms`.
    pub reachable_ns: u64,
    /// `delay_first_probe_time`.
    pub delay_first_probe_ns: u64,
    /// `ucast_solicit`, `app_solicit`, `mcast_solicit`.
    pub ucast_probes: u8,
    pub app_probes: u8,
    pub mcast_probes: u8,
    /// `locktime`: an ARP answer changing an address this soon after the last change is
    /// ignored (IPv4 1 s; NDP has no such rule).
    pub locktime_ns: u64,
}

impl NudParams {
    pub const fn kernel(family: Family) -> NudParams {
        NudParams {
            retrans_ns: SECOND,
            reachable_ns: 30 * SECOND,
            delay_first_probe_ns: 5 * SECOND,
            ucast_probes: 3,
            app_probes: 0,
            mcast_probes: 3,
            locktime_ns: match family {
                Family::Inet => SECOND,
                Family::Inet6 => 0,
            },
        }
    }
}

/// What the data plane must do for an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NudAction {
    /// Send a solicitation for `addr` on `ifindex`: to the known address when `unicast`, else
    /// broadcast (ARP) or to the solicited-node group (NDP).
    Probe {
        ifindex: u32,
        addr: IpAddr,
        unicast: Option<[u8; LLADDR_LEN]>,
    },
    /// Resolution failed: packets held for the entry get "host/address unreachable".
    Failed { ifindex: u32, addr: IpAddr },
    /// The entry has a usable address again (from learning): send what was held.
    Resolved {
        ifindex: u32,
        addr: IpAddr,
        lladdr: [u8; LLADDR_LEN],
    },
}

/// How an address was learned, as the caller of `neigh_update` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learn {
    /// A unicast ARP reply to us, or a solicited NA: the neighbour is REACHABLE.
    Confirmed,
    /// Anything else that names the sender's address (a request, a broadcast reply, an
    /// unsolicited NA): STALE.
    Unconfirmed,
}

/// One thing an ARP or NDP message said about a neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heard<'a> {
    pub ifindex: u32,
    pub addr: IpAddr,
    pub lladdr: &'a [u8],
    pub how: Learn,
    /// A request or solicitation for one of our addresses creates the entry; replies and
    /// advertisements only update one that exists.
    pub create: bool,
    /// Whether a different address replaces a known one.
    pub override_ll: Override,
}

/// When a message naming a different link-layer address replaces the one an entry has
/// (`NEIGH_UPDATE_F_OVERRIDE` and ARP's lock time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Override {
    /// A request for us, a gratuitous ARP, an NDP message with the O flag.
    Always,
    /// Other ARP messages: once `locktime` has passed since the entry last changed.
    AfterLocktime,
    /// An NDP advertisement without the O flag: a connected entry only loses its
    /// confirmation (`NEIGH_UPDATE_F_WEAK_OVERRIDE`).
    Never,
}

/// Timer and probe state of a dynamic entry.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Nud {
    /// When the entry's timer fires, if it runs.
    pub timer: Option<u64>,
    pub probes: u8,
    pub confirmed: u64,
    pub used: u64,
    pub updated: u64,
}

fn params(k: &Key) -> NudParams {
    NudParams::kernel(k.0)
}

impl Neighs {
    fn arm(&mut self, k: Key, at: u64) {
        if let Some(e) = self.entries.get_mut(&k) {
            if let Some(old) = e.nud.timer.replace(at) {
                self.timers.remove(&(old, k));
            }
            self.timers.insert((at, k));
        }
    }

    fn disarm(&mut self, k: Key) {
        if let Some(e) = self.entries.get_mut(&k) {
            if let Some(old) = e.nud.timer.take() {
                self.timers.remove(&(old, k));
            }
        }
    }

    fn set_state(&mut self, k: Key, state: u16, now: u64) {
        if let Some(e) = self.entries.get_mut(&k) {
            if e.state != state {
                e.state = state;
                e.nud.updated = now;
                let e = e.clone();
                self.note(false, &k, &e);
            }
        }
    }

    /// Sends a probe now (`neigh_probe`): the counter goes up first, and the probe is unicast
    /// while the counter is within the unicast probes.
    fn probe(&mut self, k: Key, out: &mut Vec<NudAction>) {
        let Some(e) = self.entries.get_mut(&k) else {
            return;
        };
        e.nud.probes = e.nud.probes.saturating_add(1);
        let unicast = (e.nud.probes <= params(&k).ucast_probes).then_some(e.ha);
        out.push(NudAction::Probe {
            ifindex: k.1 .0,
            addr: k.2,
            unicast,
        });
    }

    fn max_probes(e: &Entry, p: &NudParams) -> u8 {
        let mut max = p.ucast_probes + p.app_probes;
        if e.state & nud::PROBE == 0 {
            max += p.mcast_probes;
        }
        max
    }
}

impl Fib {
    /// A packet is to leave through the entry for `addr` on `ifindex` (`__neigh_event_send`):
    /// returns the address to send to now, or `None` when the packet must wait (the entry is
    /// resolving) or fail (`NudAction::Failed` is pushed when resolution cannot even start).
    /// The entry is created when missing.
    pub fn neigh_event_send(
        &mut self,
        ifindex: u32,
        addr: IpAddr,
        now: u64,
        out: &mut Vec<NudAction>,
    ) -> Option<[u8; LLADDR_LEN]> {
        let family = Family::of(&addr);
        let k = self.neigh_key(family, IfIndex(ifindex), addr);
        self.links.get(k.1)?;
        if !self.neighs.entries.contains_key(&k) {
            let e = self.neigh_construct(&k);
            self.neighs.entries.insert(k, e.clone());
            self.neighs.note(false, &k, &e);
        }
        let p = params(&k);
        let e = self.neighs.entries.get_mut(&k)?;
        e.nud.used = now;
        let state = e.state;
        if state & (CONNECTED | nud::DELAY | nud::PROBE) != 0 {
            return Some(e.ha);
        }
        if state & nud::STALE != 0 {
            let ha = e.ha;
            self.neighs.set_state(k, nud::DELAY, now);
            self.neighs.arm(k, now + p.delay_first_probe_ns);
            return Some(ha);
        }
        if state & nud::INCOMPLETE != 0 {
            return None;
        }
        if p.mcast_probes + p.app_probes == 0 {
            self.neighs.set_state(k, nud::FAILED, now);
            out.push(NudAction::Failed { ifindex, addr: k.2 });
            return None;
        }
        if let Some(e) = self.neighs.entries.get_mut(&k) {
            e.nud.probes = p.ucast_probes;
        }
        self.neighs.set_state(k, nud::INCOMPLETE, now);
        self.neighs.arm(k, now + p.retrans_ns);
        self.neighs.probe(k, out);
        None
    }

    /// What an ARP or NDP message taught (`neigh_update`).
    pub fn neigh_learn(&mut self, h: &Heard, now: u64, out: &mut Vec<NudAction>) {
        let Heard {
            ifindex,
            addr,
            lladdr,
            how,
            create,
            override_ll,
        } = *h;
        let family = Family::of(&addr);
        let k = self.neigh_key(family, IfIndex(ifindex), addr);
        let Some(ll) = lladdr_of(Some(lladdr)) else {
            return;
        };
        if self.links.get(k.1).is_none() {
            return;
        }
        if !self.neighs.entries.contains_key(&k) {
            if !create {
                return;
            }
            let e = self.neigh_construct(&k);
            self.neighs.entries.insert(k, e);
        }
        let p = params(&k);
        let Some(e) = self.neighs.entries.get_mut(&k) else {
            return;
        };
        let old = e.state;
        if old & (nud::NOARP | nud::PERMANENT) != 0 {
            return;
        }
        let override_ll = match override_ll {
            Override::Always => true,
            Override::AfterLocktime => now >= e.nud.updated.saturating_add(p.locktime_ns),
            Override::Never => false,
        };
        let changed = old & nud::VALID == 0 || e.ha != ll;
        let mut new = match how {
            Learn::Confirmed => nud::REACHABLE,
            Learn::Unconfirmed => nud::STALE,
        };
        if old & nud::VALID != 0 && changed && !override_ll {
            // A different address without the right to override: NDP's updates are weak
            // overrides (NEIGH_UPDATE_F_WEAK_OVERRIDE), so a connected entry loses its
            // confirmation; otherwise nothing changes.
            if old & CONNECTED != 0 && family == Family::Inet6 {
                self.neighs.set_state(k, nud::STALE, now);
                self.neighs.disarm(k);
            }
            return;
        }
        if !changed && new == nud::STALE {
            // The same address, unconfirmed, keeps what the entry knew.
            new = if old & nud::VALID != 0 { old } else { new };
        }
        if new & CONNECTED != 0 {
            e.nud.confirmed = now;
        }
        if changed {
            e.ha = ll;
        }
        e.nud.probes = 0;
        if new != old || changed {
            e.state = new;
            e.nud.updated = now;
            let e = e.clone();
            self.neighs.note(false, &k, &e);
        }
        match new {
            nud::REACHABLE => self.neighs.arm(k, now + p.reachable_ns),
            nud::DELAY | nud::PROBE => {}
            _ => self.neighs.disarm(k),
        }
        if old & nud::VALID == 0 {
            out.push(NudAction::Resolved {
                ifindex,
                addr: k.2,
                lladdr: ll,
            });
        }
    }

    /// When the next neighbour timer fires, if one runs.
    pub fn neigh_next_timer(&self) -> Option<u64> {
        self.neighs.timers.first().map(|(at, _)| *at)
    }

    /// Runs every neighbour timer due at `now` (`neigh_timer_handler`).
    pub fn neigh_timers(&mut self, now: u64, out: &mut Vec<NudAction>) {
        while let Some(&(at, k)) = self.neighs.timers.first() {
            if at > now {
                break;
            }
            self.neighs.timers.remove(&(at, k));
            let Some(e) = self.neighs.entries.get_mut(&k) else {
                continue;
            };
            if e.nud.timer != Some(at) {
                continue;
            }
            e.nud.timer = None;
            let p = params(&k);
            let (state, confirmed, used) = (e.state, e.nud.confirmed, e.nud.used);
            if state & nud::REACHABLE != 0 {
                if at < confirmed + p.reachable_ns {
                    self.neighs.arm(k, confirmed + p.reachable_ns);
                } else if at < used + p.delay_first_probe_ns {
                    self.neighs.set_state(k, nud::DELAY, at);
                    self.neighs.arm(k, used + p.delay_first_probe_ns);
                } else {
                    self.neighs.set_state(k, nud::STALE, at);
                }
            } else if state & nud::DELAY != 0 {
                if at < confirmed + p.delay_first_probe_ns {
                    self.neighs.set_state(k, nud::REACHABLE, at);
                    self.neighs.arm(k, confirmed + p.reachable_ns);
                } else {
                    if let Some(e) = self.neighs.entries.get_mut(&k) {
                        e.nud.probes = 0;
                    }
                    self.neighs.set_state(k, nud::PROBE, at);
                    self.neighs.arm(k, at + p.retrans_ns);
                    self.neighs.probe(k, out);
                }
            } else if state & (nud::INCOMPLETE | nud::PROBE) != 0 {
                if e.nud.probes >= Neighs::max_probes(e, &p) {
                    self.neighs.set_state(k, nud::FAILED, at);
                    out.push(NudAction::Failed {
                        ifindex: k.1 .0,
                        addr: k.2,
                    });
                } else {
                    self.neighs.arm(k, at + p.retrans_ns);
                    self.neighs.probe(k, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ReqFlags;

    const NS: u64 = SECOND;

    fn fib() -> (Fib, u32) {
        let mut fib = Fib::default();
        let d0 = crate::build::link(&mut fib, "d0", [2, 0, 0, 0, 0, 1]);
        crate::build::addr(&mut fib, d0, "10.0.1.1", 24);
        (fib, d0)
    }

    /// What an ARP message (not a gratuitous one) says about `addr`.
    #[allow(clippy::too_many_arguments)]
    fn learn(
        fib: &mut Fib,
        d0: u32,
        addr: IpAddr,
        lladdr: [u8; LLADDR_LEN],
        how: Learn,
        create: bool,
        now: u64,
        out: &mut Vec<NudAction>,
    ) {
        let h = Heard {
            ifindex: d0,
            addr,
            lladdr: &lladdr,
            how,
            create,
            override_ll: Override::AfterLocktime,
        };
        fib.neigh_learn(&h, now, out);
    }

    fn state(fib: &Fib, d0: u32, a: &str) -> u16 {
        let n = crate::types::Neighbour::new(a.parse().unwrap(), d0);
        fib.neigh_get(&n).map_or(nud::NONE, |n| n.state)
    }

    /// What the kernel did in a namespace: probes at 0, 1 and 2 s, FAILED at 3 s.
    #[test]
    fn unanswered_resolution_probes_three_times_then_fails() {
        let (mut fib, d0) = fib();
        let addr: IpAddr = "10.0.1.5".parse().unwrap();
        let mut out = Vec::new();
        assert_eq!(fib.neigh_event_send(d0, addr, 0, &mut out), None);
        assert_eq!(state(&fib, d0, "10.0.1.5"), nud::INCOMPLETE);
        // A second packet waits without a probe of its own.
        assert_eq!(fib.neigh_event_send(d0, addr, NS / 2, &mut out), None);
        let mut at = Vec::new();
        for t in (0..=4 * NS).step_by((NS / 10) as usize) {
            let before = out.len();
            fib.neigh_timers(t, &mut out);
            at.extend(std::iter::repeat_n(t, out.len() - before));
        }
        let probe = NudAction::Probe {
            ifindex: d0,
            addr,
            unicast: None,
        };
        let failed = NudAction::Failed { ifindex: d0, addr };
        assert_eq!(out, vec![probe, probe, probe, failed]);
        assert_eq!(at, vec![NS, 2 * NS, 3 * NS]);
        assert_eq!(state(&fib, d0, "10.0.1.5"), nud::FAILED);
        // The next packet starts over.
        out.clear();
        fib.neigh_event_send(d0, addr, 5 * NS, &mut out);
        assert_eq!(out, vec![probe]);
    }

    #[test]
    fn a_reply_resolves_then_reachable_ages_through_delay_and_unicast_probes() {
        let (mut fib, d0) = fib();
        let addr: IpAddr = "10.0.1.5".parse().unwrap();
        let mac = [2, 0, 0, 0, 2, 5];
        let mut out = Vec::new();
        fib.neigh_event_send(d0, addr, 0, &mut out);
        out.clear();
        learn(
            &mut fib,
            d0,
            addr,
            mac,
            Learn::Confirmed,
            false,
            NS / 10,
            &mut out,
        );
        assert_eq!(
            out,
            vec![NudAction::Resolved {
                ifindex: d0,
                addr,
                lladdr: mac
            }]
        );
        assert_eq!(state(&fib, d0, "10.0.1.5"), nud::REACHABLE);
        out.clear();
        // Used continuously: at the end of reachable_time the entry goes to DELAY, then to
        // PROBE with a unicast probe five seconds later.
        let mut t = NS / 10;
        while t < 36 * NS {
            assert_eq!(fib.neigh_event_send(d0, addr, t, &mut out), Some(mac));
            fib.neigh_timers(t, &mut out);
            t += NS / 10;
        }
        assert_eq!(
            out,
            vec![NudAction::Probe {
                ifindex: d0,
                addr,
                unicast: Some(mac)
            }]
        );
        assert_eq!(state(&fib, d0, "10.0.1.5"), nud::PROBE);
        // Three unanswered unicast probes, then FAILED.
        for t in (36 * NS..40 * NS).step_by((NS / 10) as usize) {
            fib.neigh_timers(t, &mut out);
        }
        assert_eq!(out.len(), 4);
        assert_eq!(
            *out.last().unwrap(),
            NudAction::Failed { ifindex: d0, addr }
        );
    }

    #[test]
    fn unused_reachable_entry_goes_stale_and_a_send_starts_delay() {
        let (mut fib, d0) = fib();
        let addr: IpAddr = "10.0.1.6".parse().unwrap();
        let mac = [2, 0, 0, 0, 2, 6];
        let mut out = Vec::new();
        learn(&mut fib, d0, addr, mac, Learn::Confirmed, true, 0, &mut out);
        fib.neigh_timers(31 * NS, &mut out);
        assert_eq!(state(&fib, d0, "10.0.1.6"), nud::STALE);
        assert_eq!(fib.neigh_event_send(d0, addr, 40 * NS, &mut out), Some(mac));
        assert_eq!(state(&fib, d0, "10.0.1.6"), nud::DELAY);
        // Confirmed within the delay: back to REACHABLE without a probe.
        out.clear();
        learn(
            &mut fib,
            d0,
            addr,
            mac,
            Learn::Confirmed,
            false,
            42 * NS,
            &mut out,
        );
        fib.neigh_timers(45 * NS, &mut out);
        assert_eq!(state(&fib, d0, "10.0.1.6"), nud::REACHABLE);
        assert!(out.is_empty());
    }

    #[test]
    fn replies_do_not_create_and_locktime_guards_arp_addresses() {
        let (mut fib, d0) = fib();
        let addr: IpAddr = "10.0.1.7".parse().unwrap();
        let mut out = Vec::new();
        learn(
            &mut fib,
            d0,
            addr,
            [2, 0, 0, 0, 0, 7],
            Learn::Confirmed,
            false,
            0,
            &mut out,
        );
        assert_eq!(state(&fib, d0, "10.0.1.7"), nud::NONE);
        learn(
            &mut fib,
            d0,
            addr,
            [2, 0, 0, 0, 0, 7],
            Learn::Unconfirmed,
            true,
            0,
            &mut out,
        );
        assert_eq!(state(&fib, d0, "10.0.1.7"), nud::STALE);
        // Another address half a second later is ignored (locktime 1 s), after it applies.
        learn(
            &mut fib,
            d0,
            addr,
            [2, 0, 0, 0, 0, 8],
            Learn::Unconfirmed,
            false,
            NS / 2,
            &mut out,
        );
        let n = crate::types::Neighbour::new(addr, d0);
        assert_eq!(
            fib.neigh_get(&n).unwrap().lladdr,
            Some(vec![2, 0, 0, 0, 0, 7])
        );
        learn(
            &mut fib,
            d0,
            addr,
            [2, 0, 0, 0, 0, 8],
            Learn::Unconfirmed,
            false,
            2 * NS,
            &mut out,
        );
        assert_eq!(
            fib.neigh_get(&n).unwrap().lladdr,
            Some(vec![2, 0, 0, 0, 0, 8])
        );
    }

    #[test]
    fn permanent_entries_are_never_touched() {
        let (mut fib, d0) = fib();
        let mut n = crate::types::Neighbour::new("10.0.1.9".parse().unwrap(), d0);
        n.lladdr = Some(vec![2, 0, 0, 0, 0, 9]);
        fib.neigh_new(&n, ReqFlags::ADD).unwrap();
        let mut out = Vec::new();
        learn(
            &mut fib,
            d0,
            n.dst,
            [2, 0, 0, 0, 0, 1],
            Learn::Confirmed,
            true,
            5 * NS,
            &mut out,
        );
        assert_eq!(
            fib.neigh_get(&n).unwrap().lladdr,
            Some(vec![2, 0, 0, 0, 0, 9])
        );
        assert_eq!(
            fib.neigh_event_send(d0, n.dst, 0, &mut out),
            Some([2, 0, 0, 0, 0, 9])
        );
        assert!(out.is_empty());
        assert_eq!(fib.neigh_next_timer(), None);
    }
}
