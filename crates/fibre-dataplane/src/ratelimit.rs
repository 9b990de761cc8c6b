//! The kernel's limits on the ICMP messages a router originates, on a clock the caller passes
//! in (nanoseconds: the capture's time offline, a monotonic clock live), so that offline runs
//! are deterministic.
//!
//! Three limiters, applied in the order `icmp_send`/`icmp6_send` apply them:
//! 1. the global bucket (`icmp_global_allow`): `icmp_msgs_per_sec` credits a second up to
//!    `icmp_msgs_burst`, shared by ICMP and ICMPv6, for the types in the family's ratemask
//!    (`icmp_ratemask` 0x1818: destination unreachable but fragmentation needed, source quench,
//!    time exceeded, parameter problem; IPv6's `ratemask` 0-1,3-127: every error but packet
//!    too big). A sent message then consumes 0, 1 or 2 credits, drawn at random by the kernel
//!    (`icmp_global_consume`, against the CVE-2020-25705 side channel): the caller draws them;
//! 2. the per-destination token bucket of the destination's `inet_peer`
//!    (`inet_peer_xrlim_allow`): one message per `icmp_ratelimit` (IPv4, 1000 ms) or
//!    `ratelimit` (IPv6, 100 ms, shorter for destinations reached by wider routes), bursts of
//!    six, applied only when the type is in the ratemask;
//! 3. on the same peer, before both: `ip_error`'s own bucket for the unreachable errors of
//!    reject routes (one a second, bursts of five), and `ip_rt_send_redirect`'s backoff for
//!    redirects (at most nine, spaced 20 ms << n, reset after 20 s of silence).
//!
//! Time is counted in jiffies at [`Settings::hz`] (this machine's kernel has `CONFIG_HZ` 250;
//! the sysctls in milliseconds are converted as `msecs_to_jiffies` does), so rounding matches
//! the kernel's. Peers live in a fixed table allocated once, keyed by a seeded
//! hash (the addresses come from outside); a full set evicts its least recently used peer,
//! which then starts afresh as a new `inet_peer` would. Nothing here allocates after
//! [`RateLimiter::new`].

use core::net::{Ipv4Addr, Ipv6Addr};
use std::hash::BuildHasher;

use fibre_fib::hash::KeyedState;

/// The limits, as sysctls with the kernel's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// `CONFIG_HZ`: the tick the kernel counts time in.
    pub hz: u32,
    /// `net.ipv4.icmp_ratelimit`, milliseconds.
    pub icmp_ratelimit_ms: u32,
    /// `net.ipv4.icmp_ratemask`: bit n limits ICMP type n.
    pub icmp_ratemask: u32,
    /// `net.ipv4.icmp_msgs_per_sec`.
    pub icmp_msgs_per_sec: u32,
    /// `net.ipv4.icmp_msgs_burst`.
    pub icmp_msgs_burst: u32,
    /// `net.ipv6.icmp.ratelimit`, milliseconds.
    pub icmpv6_ratelimit_ms: u32,
    /// `net.ipv6.icmp.ratemask`: bit n of the 256 limits ICMPv6 type n.
    pub icmpv6_ratemask: [u64; 4],
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            hz: 250,
            icmp_ratelimit_ms: 1000,
            icmp_ratemask: 0x1818,
            icmp_msgs_per_sec: 1000,
            icmp_msgs_burst: 50,
            icmpv6_ratelimit_ms: 100,
            // Types 0-1 and 3-127: the errors but packet too big (2).
            icmpv6_ratemask: [!0b100, u64::MAX, 0, 0],
        }
    }
}

impl Settings {
    fn jiffies(&self, now_ns: u64) -> u64 {
        (u128::from(now_ns) * u128::from(self.hz) / 1_000_000_000) as u64
    }

    /// `msecs_to_jiffies`: rounded up.
    fn ms_to_jiffies(&self, ms: u32) -> u64 {
        (u64::from(ms) * u64::from(self.hz)).div_ceil(1000)
    }

    fn ticks_per_sec(&self) -> u64 {
        u64::from(self.hz)
    }
}

/// The time after `b` (the kernel's `time_after(a, b)` on wrapping jiffies).
fn time_after(a: u64, b: u64) -> bool {
    (b.wrapping_sub(a) as i64) < 0
}

/// The global bucket's verdict: sent or not, and whether the per-destination limit applies
/// (only to types in the ratemask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Global {
    Denied,
    Allowed { apply_peer_limit: bool },
}

/// One destination's state: `struct inet_peer`'s rate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Peer {
    tokens: u64,
    last: u64,
    redirects: u32,
}

impl Peer {
    /// A new peer's clock starts a minute back, so its first bucket is full.
    fn new(now: u64, hz: u64) -> Peer {
        Peer {
            tokens: 0,
            last: now.wrapping_sub(60 * hz),
            redirects: 0,
        }
    }

    /// `inet_peer_xrlim_allow`: bursts of [`XRLIM_BURST_FACTOR`], one per `timeout` jiffies.
    fn xrlim_allow(&mut self, now: u64, timeout: u64) -> bool {
        let delta = now.wrapping_sub(self.last);
        if delta != 0 {
            self.last = now;
            self.tokens = (self.tokens + delta).min(XRLIM_BURST_FACTOR * timeout);
        }
        if self.tokens >= timeout {
            self.tokens -= timeout;
            true
        } else {
            false
        }
    }
}

/// `XRLIM_BURST_FACTOR`: a peer's bucket holds six messages.
const XRLIM_BURST_FACTOR: u64 = 6;
/// `ip_rt_error_cost` and `ip_rt_error_burst`, in seconds of jiffies: one unreachable a
/// second from `ip_error`, bursts of five.
const ERROR_COST_SECS: u64 = 1;
const ERROR_BURST_SECS: u64 = 5;
/// `ip_rt_redirect_number`: redirects a peer gets before the router stops sending them.
const REDIRECT_NUMBER: u32 = 9;

/// Where peers live: sets of [`WAYS`] slots chosen by a keyed hash of the address.
struct PeerTable {
    slots: Box<[Slot]>,
    sets: usize,
    hasher: KeyedState,
}

/// Slots per set: a destination shares its set with three others before one is evicted.
const WAYS: usize = 4;

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The address (an IPv4 address in the low 32 bits), or `None` for a free slot.
    key: Option<u128>,
    peer: Peer,
}

impl PeerTable {
    /// A table for about `capacity` destinations (rounded up to whole sets).
    fn new(capacity: usize) -> PeerTable {
        let sets = capacity.div_ceil(WAYS).max(1);
        PeerTable {
            slots: vec![
                Slot {
                    key: None,
                    peer: Peer::new(0, 0),
                };
                sets * WAYS
            ]
            .into_boxed_slice(),
            sets,
            hasher: KeyedState::default(),
        }
    }

    /// The peer of `key`, made (or taking the least recently used slot of its set) if absent.
    fn peer(&mut self, key: u128, now: u64, hz: u64) -> &mut Peer {
        let set = (self.hasher.hash_one(key) % self.sets as u64) as usize * WAYS;
        let slots = &mut self.slots[set..set + WAYS];
        let at = match slots.iter().position(|s| s.key == Some(key)) {
            Some(i) => i,
            None => {
                let i = slots
                    .iter()
                    .position(|s| s.key.is_none())
                    .unwrap_or_else(|| {
                        (0..WAYS)
                            .max_by_key(|&i| now.wrapping_sub(slots[i].peer.last))
                            .unwrap_or(0)
                    });
                slots[i] = Slot {
                    key: Some(key),
                    peer: Peer::new(now, hz),
                };
                i
            }
        };
        &mut slots[at].peer
    }
}

/// The limiters of one worker (the kernel's are per network namespace; a worker is one).
pub struct RateLimiter {
    pub settings: Settings,
    credit: i64,
    /// `None` until the first refill, which the kernel always grants in full (its stamp starts
    /// at 0, long before the first message).
    stamp: Option<u64>,
    /// The kernel keeps a table per family (`net->ipv4.peers`, `net->ipv6.peers`).
    peers_v4: PeerTable,
    peers_v6: PeerTable,
}

impl RateLimiter {
    /// Allocates the peer tables for about `peers` destinations of each family.
    pub fn new(settings: Settings, peers: usize) -> RateLimiter {
        RateLimiter {
            settings,
            credit: 0,
            stamp: None,
            peers_v4: PeerTable::new(peers),
            peers_v6: PeerTable::new(peers),
        }
    }

    /// `icmp_global_allow`: refills at most once per 20 ms, `icmp_msgs_per_sec` a second.
    fn global_allow(&mut self, now: u64) -> bool {
        if self.credit > 0 {
            return true;
        }
        let hz = self.settings.ticks_per_sec();
        let delta = self.stamp.map_or(hz, |s| now.wrapping_sub(s).min(hz));
        if delta < hz / 50 {
            return false;
        }
        let incr = u64::from(self.settings.icmp_msgs_per_sec) * delta / hz;
        if incr == 0 {
            return false;
        }
        self.stamp = Some(now);
        self.credit = (self.credit + incr as i64).min(i64::from(self.settings.icmp_msgs_burst));
        true
    }

    /// `icmpv4_global_allow` for an ICMPv4 message of `msg_type` and `code`: types outside
    /// `icmp_ratemask` and fragmentation needed (path MTU discovery) pass unlimited.
    pub fn global_v4(&mut self, msg_type: u8, code: u8, now_ns: u64) -> Global {
        let masked = msg_type <= 18
            && !(msg_type == 3 && code == 4)
            && self.settings.icmp_ratemask & (1 << msg_type) != 0;
        self.global(masked, now_ns)
    }

    /// `icmpv6_global_allow` for an ICMPv6 message of `msg_type`.
    pub fn global_v6(&mut self, msg_type: u8, now_ns: u64) -> Global {
        let m = self.settings.icmpv6_ratemask;
        let masked = m[usize::from(msg_type / 64)] & (1 << (msg_type % 64)) != 0;
        self.global(masked, now_ns)
    }

    fn global(&mut self, masked: bool, now_ns: u64) -> Global {
        if !masked {
            return Global::Allowed {
                apply_peer_limit: false,
            };
        }
        let now = self.settings.jiffies(now_ns);
        if self.global_allow(now) {
            Global::Allowed {
                apply_peer_limit: true,
            }
        } else {
            Global::Denied
        }
    }

    /// `icmpv4_xrlim_allow` for a message to `dst` that the global bucket allowed with
    /// `apply_peer_limit`; when sent, consumes `credits` (0, 1 or 2, drawn uniformly by the
    /// caller) from the global bucket. Returns whether the message goes out.
    pub fn peer_v4(
        &mut self,
        dst: Ipv4Addr,
        apply_peer_limit: bool,
        credits: u32,
        now_ns: u64,
    ) -> bool {
        let timeout = self.settings.ms_to_jiffies(self.settings.icmp_ratelimit_ms);
        let key = u128::from(dst.to_bits());
        self.peer_limit(false, key, timeout, apply_peer_limit, credits, now_ns)
    }

    /// `icmpv6_xrlim_allow` for a message to `dst`, whose route back has a prefix of
    /// `route_prefix_len` bits: wider routes divide the interval, by 2 per 32 bits short of
    /// 128 ("more bandwidth to wider prefixes").
    pub fn peer_v6(
        &mut self,
        dst: Ipv6Addr,
        route_prefix_len: u8,
        apply_peer_limit: bool,
        credits: u32,
        now_ns: u64,
    ) -> bool {
        let mut timeout = self
            .settings
            .ms_to_jiffies(self.settings.icmpv6_ratelimit_ms);
        if route_prefix_len < 128 {
            timeout >>= (128 - u32::from(route_prefix_len)) >> 5;
        }
        self.peer_limit(
            true,
            dst.to_bits(),
            timeout,
            apply_peer_limit,
            credits,
            now_ns,
        )
    }

    /// One of the two limits on an IPv6 redirect, one message a second per peer in bursts of
    /// six (`inet_peer_xrlim_allow` with a timeout of HZ): `ip6_forward` asks it of the
    /// packet's destination first, `ndisc_send_redirect` of its source later, with checks of
    /// its own in between; each address has its own bucket in the IPv6 peers.
    pub fn redirect_v6(&mut self, addr: Ipv6Addr, now_ns: u64) -> bool {
        let hz = self.settings.ticks_per_sec();
        self.peer_limit(true, addr.to_bits(), hz, true, 0, now_ns)
    }

    fn peer_limit(
        &mut self,
        v6: bool,
        key: u128,
        timeout: u64,
        apply: bool,
        credits: u32,
        now_ns: u64,
    ) -> bool {
        if !apply {
            return true;
        }
        let (now, hz) = (self.settings.jiffies(now_ns), self.settings.ticks_per_sec());
        let peers = if v6 {
            &mut self.peers_v6
        } else {
            &mut self.peers_v4
        };
        let ok = peers.peer(key, now, hz).xrlim_allow(now, timeout);
        if ok {
            self.credit -= i64::from(credits);
        }
        ok
    }

    /// `ip_error`'s limit on the unreachable errors of reject routes and failed lookups, on
    /// the peer of the offending packet's source `src` (the same peer, and the same tokens,
    /// that [`RateLimiter::peer_v4`] then checks for the message to it).
    pub fn route_error_v4(&mut self, src: Ipv4Addr, now_ns: u64) -> bool {
        let (now, hz) = (self.settings.jiffies(now_ns), self.settings.ticks_per_sec());
        let p = self.peers_v4.peer(u128::from(src.to_bits()), now, hz);
        p.tokens = (p.tokens + now.wrapping_sub(p.last)).min(ERROR_BURST_SECS * hz);
        p.last = now;
        if p.tokens >= ERROR_COST_SECS * hz {
            p.tokens -= ERROR_COST_SECS * hz;
            true
        } else {
            false
        }
    }

    /// `ip_rt_send_redirect`'s backoff for a redirect about a packet from `src`: whether to
    /// send it (redirects are outside the default ratemask: nothing else limits them).
    pub fn redirect_v4(&mut self, src: Ipv4Addr, now_ns: u64) -> bool {
        let (now, hz) = (self.settings.jiffies(now_ns), self.settings.ticks_per_sec());
        // ip_rt_redirect_load and ip_rt_redirect_silence.
        let load = hz / 50;
        let silence = load << (REDIRECT_NUMBER + 1);
        let p = self.peers_v4.peer(u128::from(src.to_bits()), now, hz);
        if time_after(now, p.last.wrapping_add(silence)) {
            p.tokens = 0;
            p.redirects = 0;
        }
        if p.redirects >= REDIRECT_NUMBER {
            p.last = now;
            return false;
        }
        if p.redirects == 0 || time_after(now, p.last.wrapping_add(load << p.redirects)) {
            p.last = now;
            p.redirects += 1;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

    fn limiter() -> RateLimiter {
        RateLimiter::new(Settings::default(), 64)
    }

    /// Sends time exceeded to `dst` at `t` ms, consuming one credit, as icmp_send would.
    fn time_exceeded(r: &mut RateLimiter, dst: Ipv4Addr, t: u64) -> bool {
        match r.global_v4(11, 0, t * MS) {
            Global::Denied => false,
            Global::Allowed { apply_peer_limit } => r.peer_v4(dst, apply_peer_limit, 1, t * MS),
        }
    }

    #[test]
    fn the_mask_exempts_echo_replies_and_frag_needed() {
        let mut r = limiter();
        for (t, c) in [(0, 0), (3, 4), (8, 0), (5, 1)] {
            assert_eq!(
                r.global_v4(t, c, 0),
                Global::Allowed {
                    apply_peer_limit: false
                }
            );
        }
        assert_eq!(
            r.global_v4(3, 1, 0),
            Global::Allowed {
                apply_peer_limit: true
            }
        );
        assert_eq!(
            r.global_v6(2, 0),
            Global::Allowed {
                apply_peer_limit: false
            }
        );
        assert_eq!(
            r.global_v6(129, 0),
            Global::Allowed {
                apply_peer_limit: false
            }
        );
        assert_eq!(
            r.global_v6(3, 0),
            Global::Allowed {
                apply_peer_limit: true
            }
        );
    }

    #[test]
    fn a_peer_gets_six_then_one_per_ratelimit() {
        let mut r = limiter();
        let sent = (0..10).filter(|_| time_exceeded(&mut r, A, 0)).count();
        assert_eq!(sent, 6);
        assert!(!time_exceeded(&mut r, A, 996));
        assert!(time_exceeded(&mut r, A, 1000));
        assert!(!time_exceeded(&mut r, A, 1000));
        // Another destination has its own bucket.
        assert!(time_exceeded(&mut r, Ipv4Addr::new(192, 0, 2, 2), 1000));
    }

    #[test]
    fn the_global_bucket_holds_fifty_and_refills_every_twenty_ms() {
        let mut r = limiter();
        let sent = (0..200u32)
            .filter(|i| time_exceeded(&mut r, Ipv4Addr::from(0x0a00_0000 + i), 0))
            .count();
        assert_eq!(sent, 50);
        // 16 ms is 4 jiffies at 250 Hz, below the 5 of HZ/50; 20 ms grants 20 credits.
        assert!(!time_exceeded(&mut r, Ipv4Addr::new(10, 1, 0, 0), 16));
        let sent = (0..200u32)
            .filter(|i| time_exceeded(&mut r, Ipv4Addr::from(0x0a02_0000 + i), 20))
            .count();
        assert_eq!(sent, 20);
    }

    #[test]
    fn route_errors_share_the_peers_tokens() {
        let mut r = limiter();
        let mut sent = 0;
        for _ in 0..5 {
            if r.route_error_v4(A, 0) && time_exceeded(&mut r, A, 0) {
                sent += 1;
            }
        }
        assert_eq!(sent, 2);
        assert!(!r.route_error_v4(A, 0));
    }

    #[test]
    fn redirects_back_off_and_stop_at_nine() {
        let mut r = limiter();
        assert!(r.redirect_v4(A, 0));
        assert!(!r.redirect_v4(A, 0));
        // The n-th waits more than 20 ms << n since the last one sent.
        let mut t = 0;
        for n in 1..9 {
            let wait = 20 << n;
            assert!(!r.redirect_v4(A, (t + wait) * MS), "{n}");
            t += wait + 4;
            assert!(r.redirect_v4(A, t * MS), "{n}");
        }
        // Nine sent: no more, and each try restarts the 20 s of silence that resets it all.
        t += 20_000;
        assert!(!r.redirect_v4(A, t * MS));
        assert!(!r.redirect_v4(A, (t + 20_480) * MS));
        assert!(r.redirect_v4(A, (t + 20_480 + 20_484) * MS));
    }

    #[test]
    fn a_full_set_forgets_its_least_recently_used_peer() {
        // One set of four: the fifth destination takes the slot of the one used longest ago,
        // which then starts afresh with a full bucket.
        let mut r = RateLimiter::new(Settings::default(), WAYS);
        let addr = |i: u32| Ipv4Addr::from(0x0a00_0000 + i);
        for i in 0..4 {
            let t = u64::from(i) * 100;
            while time_exceeded(&mut r, addr(i), t) {}
        }
        // Address 0, used longest ago, makes room for 4; 1 is still remembered (and empty).
        assert!(time_exceeded(&mut r, addr(4), 400));
        assert!(!time_exceeded(&mut r, addr(1), 400));
        let sent = (0..8)
            .filter(|_| time_exceeded(&mut r, addr(0), 400))
            .count();
        assert_eq!(sent, 6, "address 0 was forgotten, and is new again");
    }

    #[test]
    fn ipv6_wider_routes_shorten_the_interval() {
        let mut r = limiter();
        let d = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        let send = |r: &mut RateLimiter, t: u64, plen| r.peer_v6(d, plen, true, 1, t * MS);
        assert_eq!((0..8).filter(|_| send(&mut r, 0, 128)).count(), 6);
        // 100 ms is 25 jiffies; a /64 route divides it by 4, to 6 jiffies (24 ms).
        assert!(!send(&mut r, 20, 64));
        assert!(send(&mut r, 24, 64));
        assert!(!send(&mut r, 24, 128));
    }
}
