//! The objects of the routing model, shaped like the rtnetlink messages that carry them.
//!
//! Every request into [`crate::Fib`] and every answer out of it is one of these types. They
//! mirror `rtmsg`/`ifinfomsg`/`ifaddrmsg`/`fib_rule_hdr`/`nhmsg` plus their attributes, with
//! numeric codes kept as the kernel defines them, so that:
//! - the CLI (`fibre-cli`) fills them in exactly as iproute2 fills in its netlink requests
//!   (iproute2's client-side defaults live there, not here);
//! - the netlink codec converts them to and from wire bytes without any semantic decisions;
//! - the FIB applies the kernel's server-side rules to them.
//!
//! `None` means "attribute absent", which the kernel often treats differently from zero.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Address family (`AF_INET`, `AF_INET6`), with the kernel's numeric values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Family {
    Inet = 2,
    Inet6 = 10,
}

impl Family {
    pub fn of(addr: &IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::Inet,
            IpAddr::V6(_) => Family::Inet6,
        }
    }

    /// Bits in an address of this family.
    pub fn max_len(self) -> u8 {
        match self {
            Family::Inet => 32,
            Family::Inet6 => 128,
        }
    }
}

/// An address and a prefix length. Host bits may be set (the kernel rejects that for route
/// destinations with EINVAL "Invalid prefix for given prefix length"; addresses keep them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

/// `rtm_type`: RTN_* codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum RouteType {
    Unspec = 0,
    Unicast = 1,
    Local = 2,
    Broadcast = 3,
    Anycast = 4,
    Multicast = 5,
    Blackhole = 6,
    Unreachable = 7,
    Prohibit = 8,
    Throw = 9,
    Nat = 10,
    Xresolve = 11,
}

/// `rtm_scope` values (RT_SCOPE_*); any u8 is legal on the wire.
pub mod scope {
    pub const UNIVERSE: u8 = 0;
    pub const SITE: u8 = 200;
    pub const LINK: u8 = 253;
    pub const HOST: u8 = 254;
    pub const NOWHERE: u8 = 255;
}

/// `rtm_protocol` values (RTPROT_*); any u8 is legal on the wire.
pub mod protocol {
    pub const UNSPEC: u8 = 0;
    pub const REDIRECT: u8 = 1;
    pub const KERNEL: u8 = 2;
    pub const BOOT: u8 = 3;
    pub const STATIC: u8 = 4;
    pub const RA: u8 = 9;
}

/// Well-known table ids (RT_TABLE_*).
pub mod table {
    pub const UNSPEC: u32 = 0;
    pub const DEFAULT: u32 = 253;
    pub const MAIN: u32 = 254;
    pub const LOCAL: u32 = 255;
}

/// Next-hop flags (RTNH_F_*), found in `rtm_flags` and `rtnh_flags`.
pub mod nh_flags {
    pub const DEAD: u32 = 1;
    pub const PERVASIVE: u32 = 2;
    pub const ONLINK: u32 = 4;
    pub const OFFLOAD: u32 = 8;
    pub const LINKDOWN: u32 = 16;
    pub const UNRESOLVED: u32 = 32;
    pub const TRAP: u32 = 64;
}

/// Route message flags (RTM_F_*), found in `rtm_flags`.
pub mod rtm_flags {
    pub const NOTIFY: u32 = 0x100;
    pub const CLONED: u32 = 0x200;
    pub const EQUALIZE: u32 = 0x400;
    pub const PREFIX: u32 = 0x800;
    pub const LOOKUP_TABLE: u32 = 0x1000;
    pub const FIB_MATCH: u32 = 0x2000;
}

/// The NLM_F_* modifiers of a "new" request, as iproute2 sets them:
/// `add` = create+excl, `change` = replace, `replace` = create+replace, `prepend` = create,
/// `append` = create+append, `del` and `set` = none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReqFlags {
    pub create: bool,
    pub excl: bool,
    pub replace: bool,
    pub append: bool,
}

impl ReqFlags {
    pub const ADD: ReqFlags = ReqFlags {
        create: true,
        excl: true,
        replace: false,
        append: false,
    };
    pub const CHANGE: ReqFlags = ReqFlags {
        create: false,
        excl: false,
        replace: true,
        append: false,
    };
    pub const REPLACE: ReqFlags = ReqFlags {
        create: true,
        excl: false,
        replace: true,
        append: false,
    };
    pub const PREPEND: ReqFlags = ReqFlags {
        create: true,
        excl: false,
        replace: false,
        append: false,
    };
    pub const APPEND: ReqFlags = ReqFlags {
        create: true,
        excl: false,
        replace: false,
        append: true,
    };
    pub const NONE: ReqFlags = ReqFlags {
        create: false,
        excl: false,
        replace: false,
        append: false,
    };
}

/// An error as the kernel reports it: a positive errno and, where the kernel sets one, the
/// extended-ACK message ("Error: ..." in iproute2's output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtError {
    pub errno: Errno,
    pub extack: Option<String>,
}

impl RtError {
    pub fn new(errno: Errno) -> Self {
        RtError {
            errno,
            extack: None,
        }
    }
    pub fn msg(errno: Errno, extack: impl Into<String>) -> Self {
        RtError {
            errno,
            extack: Some(extack.into()),
        }
    }
}

/// EINVAL with an extended-ACK text: the most common refusal of a request.
pub(crate) fn einval(msg: &str) -> RtError {
    RtError::msg(Errno::EINVAL, msg)
}

impl std::fmt::Display for RtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.extack {
            Some(m) => write!(f, "{} ({})", m, self.errno.name()),
            None => write!(f, "{}", self.errno.name()),
        }
    }
}

impl std::error::Error for RtError {}

/// A positive Linux errno value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    pub const EPERM: Errno = Errno(1);
    pub const ENOENT: Errno = Errno(2);
    pub const ESRCH: Errno = Errno(3);
    pub const ENXIO: Errno = Errno(6);
    pub const E2BIG: Errno = Errno(7);
    pub const EAGAIN: Errno = Errno(11);
    pub const ENOMEM: Errno = Errno(12);
    pub const EACCES: Errno = Errno(13);
    pub const EBUSY: Errno = Errno(16);
    pub const EEXIST: Errno = Errno(17);
    pub const EXDEV: Errno = Errno(18);
    pub const ENODEV: Errno = Errno(19);
    pub const EINVAL: Errno = Errno(22);
    pub const ENOSPC: Errno = Errno(28);
    pub const ERANGE: Errno = Errno(34);
    pub const EMSGSIZE: Errno = Errno(90);
    pub const EPROTONOSUPPORT: Errno = Errno(93);
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const EAFNOSUPPORT: Errno = Errno(97);
    pub const EADDRINUSE: Errno = Errno(98);
    pub const EADDRNOTAVAIL: Errno = Errno(99);
    pub const ENETDOWN: Errno = Errno(100);
    pub const ENETUNREACH: Errno = Errno(101);
    pub const ENOBUFS: Errno = Errno(105);
    pub const EHOSTUNREACH: Errno = Errno(113);

    /// The C library's `strerror` text, which iproute2 prints after "RTNETLINK answers: ".
    pub fn strerror(self) -> &'static str {
        match self.0 {
            1 => "Operation not permitted",
            2 => "No such file or directory",
            3 => "No such process",
            6 => "No such device or address",
            7 => "Argument list too long",
            11 => "Resource temporarily unavailable",
            12 => "Cannot allocate memory",
            13 => "Permission denied",
            16 => "Device or resource busy",
            17 => "File exists",
            18 => "Invalid cross-device link",
            19 => "No such device",
            22 => "Invalid argument",
            28 => "No space left on device",
            34 => "Numerical result out of range",
            90 => "Message too long",
            93 => "Protocol not supported",
            95 => "Operation not supported",
            97 => "Address family not supported by protocol",
            98 => "Address already in use",
            99 => "Cannot assign requested address",
            100 => "Network is down",
            101 => "Network is unreachable",
            105 => "No buffer space available",
            113 => "No route to host",
            _ => "Unknown error",
        }
    }

    /// The symbolic name, for logs and test reports.
    pub fn name(self) -> &'static str {
        match self.0 {
            1 => "EPERM",
            2 => "ENOENT",
            3 => "ESRCH",
            6 => "ENXIO",
            7 => "E2BIG",
            11 => "EAGAIN",
            12 => "ENOMEM",
            13 => "EACCES",
            16 => "EBUSY",
            17 => "EEXIST",
            18 => "EXDEV",
            19 => "ENODEV",
            22 => "EINVAL",
            28 => "ENOSPC",
            34 => "ERANGE",
            90 => "EMSGSIZE",
            93 => "EPROTONOSUPPORT",
            95 => "EOPNOTSUPP",
            97 => "EAFNOSUPPORT",
            98 => "EADDRINUSE",
            99 => "EADDRNOTAVAIL",
            100 => "ENETDOWN",
            101 => "ENETUNREACH",
            105 => "ENOBUFS",
            113 => "EHOSTUNREACH",
            _ => "E?",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Links (RTM_NEWLINK / RTM_DELLINK / RTM_GETLINK)
// ---------------------------------------------------------------------------------------------

/// Kinds of link fibre can create (`IFLA_INFO_KIND`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LinkKind {
    Loopback,
    Dummy,
    /// A link bound to a host interface, through which fibred forwards real frames
    /// (`fibre link add NAME type port dev HOSTIF io KIND`). In the model it is an Ethernet
    /// link that resolves its neighbours; the binding itself is the daemon's business.
    Port(PortSpec),
}

/// How a port link reaches its host interface (fibre-io's port kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortIo {
    AfXdp,
    AfPacket,
    /// A TAP device the port creates (`type tap`).
    Tap,
}

impl PortIo {
    /// The name `fibre link add ... io KIND` takes and `ip -d link show` prints.
    pub fn name(self) -> &'static str {
        match self {
            PortIo::AfXdp => "af_xdp",
            PortIo::AfPacket => "af_packet",
            PortIo::Tap => "tap",
        }
    }

    pub fn from_name(name: &str) -> Option<PortIo> {
        match name {
            "af_xdp" => Some(PortIo::AfXdp),
            "af_packet" => Some(PortIo::AfPacket),
            "tap" => Some(PortIo::Tap),
            _ => None,
        }
    }
}

/// A port link's binding: the host interface and how it is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortSpec {
    /// The host interface's name (for a TAP port, the device it creates).
    pub dev: String,
    pub io: PortIo,
    /// The TAP device that carries the host's own traffic on this port (`punt TAPNAME`):
    /// created in the daemon's namespace with the link's MAC, MTU and addresses.
    pub punt: Option<String>,
}

/// Interface flags (IFF_*), as in `ifi_flags`.
pub mod iff {
    pub const UP: u32 = 0x1;
    pub const BROADCAST: u32 = 0x2;
    pub const LOOPBACK: u32 = 0x8;
    pub const RUNNING: u32 = 0x40;
    pub const NOARP: u32 = 0x80;
    pub const MULTICAST: u32 = 0x1000;
    pub const LOWER_UP: u32 = 0x10000;
}

/// A link request or a link as dumped. In a request, `ifindex == 0` with `ifname` set names the
/// link by name; in a dump every field is filled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub ifname: Option<String>,
    pub kind: Option<LinkKind>,
    /// `ifi_flags` in a dump; in a request only the bits in `change` are applied.
    pub flags: u32,
    /// `ifi_change`: which bits of `flags` a request sets.
    pub change: u32,
    pub mtu: Option<u32>,
    pub address: Option<Vec<u8>>,
    /// Carrier (IFLA_CARRIER); fibre's stand-in for a cable on a dummy link.
    pub carrier: Option<bool>,
    pub txqlen: Option<u32>,
    /// IPv6 address generation mode (IFLA_INET6_ADDR_GEN_MODE): 0 eui64, 1 none.
    pub addr_gen_mode: Option<u8>,
    /// Counters (IFLA_STATS64), in a dump of a link something counts on (fibred's port
    /// links); the FIB itself counts nothing and leaves them out.
    pub stats: Option<LinkStats>,
    /// A port link's punt path's counters, in a dump of one that has a punt TAP.
    pub punt: Option<PuntStats>,
}

/// A link's counters as `ip -s link` shows them (`struct rtnl_link_stats64`'s that fibre
/// keeps).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    /// Frames to a multicast or broadcast MAC.
    pub multicast: u64,
    /// Frames for another station's MAC (`ip -s -s link`'s "otherhost").
    pub rx_otherhost_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
}

/// The punt path's counters of one port link with a punt TAP: frames handed to the host (the
/// router's own traffic, and copies of the neighbour answers the host needs), frames the host
/// sent out by the port, and frames for the host dropped (the worker's budget spent, or the
/// TAP refusing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PuntStats {
    pub to_host: u64,
    pub from_host: u64,
    pub dropped: u64,
}

impl PuntStats {
    /// Adds another worker's counts.
    pub fn add(&mut self, o: &PuntStats) {
        self.to_host += o.to_host;
        self.from_host += o.from_host;
        self.dropped += o.dropped;
    }
}

impl LinkStats {
    /// Adds another counter's counts (another worker's, of the same link).
    pub fn add(&mut self, o: &LinkStats) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.rx_errors += o.rx_errors;
        self.rx_dropped += o.rx_dropped;
        self.multicast += o.multicast;
        self.rx_otherhost_dropped += o.rx_otherhost_dropped;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.tx_errors += o.tx_errors;
        self.tx_dropped += o.tx_dropped;
    }

    /// A frame of `len` bytes came in (bytes over the whole Ethernet frame without its FCS);
    /// `multicast` when its destination MAC has the group bit.
    pub fn received(&mut self, len: usize, multicast: bool) {
        self.rx_packets = self.rx_packets.wrapping_add(1);
        self.rx_bytes = self.rx_bytes.wrapping_add(len as u64);
        if multicast {
            self.multicast = self.multicast.wrapping_add(1);
        }
    }

    /// A frame of `len` bytes went out.
    pub fn sent(&mut self, len: usize) {
        self.tx_packets = self.tx_packets.wrapping_add(1);
        self.tx_bytes = self.tx_bytes.wrapping_add(len as u64);
    }
}

/// RFC 2863 operational states (IF_OPER_*) of IFLA_OPERSTATE.
pub mod oper {
    pub const UNKNOWN: u8 = 0;
    pub const DOWN: u8 = 2;
}

impl Link {
    /// The operational state the kernel reports for a link of a kind fibre models: DOWN
    /// when the link is down or has no carrier, else UNKNOWN. Loopback and dummy devices
    /// never have their state computed by the kernel's link watch (it runs on carrier
    /// changes, which `lo` never has and a dummy has only when told), so an up one stays at
    /// its initial UNKNOWN. After `carrier off` then `on` the kernel would say UP; fibre
    /// keeps no history and says UNKNOWN.
    pub fn operstate(&self) -> u8 {
        if self.flags & iff::UP == 0
            || self.flags & iff::LOWER_UP == 0
            || self.carrier == Some(false)
        {
            oper::DOWN
        } else {
            oper::UNKNOWN
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Addresses (RTM_NEWADDR / RTM_DELADDR / RTM_GETADDR)
// ---------------------------------------------------------------------------------------------

/// Address flags (IFA_F_*).
pub mod ifa_flags {
    pub const SECONDARY: u32 = 0x01;
    pub const NODAD: u32 = 0x02;
    pub const OPTIMISTIC: u32 = 0x04;
    pub const DADFAILED: u32 = 0x08;
    pub const HOMEADDRESS: u32 = 0x10;
    pub const DEPRECATED: u32 = 0x20;
    pub const TENTATIVE: u32 = 0x40;
    pub const PERMANENT: u32 = 0x80;
    pub const MANAGETEMPADDR: u32 = 0x100;
    pub const NOPREFIXROUTE: u32 = 0x200;
    pub const MCAUTOJOIN: u32 = 0x400;
    pub const STABLE_PRIVACY: u32 = 0x800;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub family: Family,
    pub prefixlen: u8,
    /// IFA_F_* flags (IFA_FLAGS when above 8 bits).
    pub flags: u32,
    pub scope: u8,
    pub ifindex: u32,
    /// IFA_LOCAL (the interface's own address). For IPv6 iproute2 sends it as IFA_ADDRESS too.
    pub local: Option<IpAddr>,
    /// IFA_ADDRESS (the peer on point-to-point links, else equal to `local`).
    pub address: Option<IpAddr>,
    pub broadcast: Option<IpAddr>,
    pub label: Option<String>,
    /// IFA_RT_PRIORITY: metric of the prefix route.
    pub metric: Option<u32>,
    /// IFA_CACHEINFO lifetimes in seconds; `None` = forever.
    pub valid_lft: Option<u32>,
    pub preferred_lft: Option<u32>,
}

impl Address {
    /// The request `ip address add LOCAL/PREFIXLEN dev IFINDEX` makes: no peer, broadcast,
    /// label, metric or lifetime.
    pub fn new(ifindex: u32, local: IpAddr, prefixlen: u8) -> Address {
        Address {
            family: Family::of(&local),
            prefixlen,
            flags: 0,
            scope: 0,
            ifindex,
            local: Some(local),
            address: Some(local),
            broadcast: None,
            label: None,
            metric: None,
            valid_lft: None,
            preferred_lft: None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Routes (RTM_NEWROUTE / RTM_DELROUTE / RTM_GETROUTE)
// ---------------------------------------------------------------------------------------------

/// One next hop of a route (RTA_GATEWAY/RTA_VIA + RTA_OIF, or one `rtnexthop` of RTA_MULTIPATH).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// RTA_GATEWAY (same family as the route) or RTA_VIA (IPv4 route via an IPv6 gateway).
    pub gateway: Option<IpAddr>,
    /// Output interface; 0 = absent.
    pub oif: u32,
    /// `rtnh_hops`: weight minus one, as on the wire. `weight = hops + 1`.
    pub hops: u8,
    /// RTNH_F_* (ONLINK in requests; DEAD/LINKDOWN in answers).
    pub flags: u32,
    /// RTA_ENCAP / RTA_ENCAP_TYPE: as requested in a request, as built in answers.
    pub encap: Option<Encap>,
}

// Encapsulations of next hops (RTA_ENCAP): the data; `encap` checks requests and builds the
// form kept.

/// An encapsulation of one next hop.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Encap {
    Seg6(Seg6),
    Seg6Local(Seg6Local),
    Ioam6(Ioam6),
    Rpl(Rpl),
}

/// SRv6 encapsulation (`mode encap|encap.red|l2encap|l2encap.red`) or insertion (`inline`)
/// of a segment routing header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Seg6 {
    /// [`crate::encap::seg6_mode`].
    pub mode: i32,
    /// The SRH pushed, as configured (its segment list stored last segment first).
    pub srh: Vec<u8>,
}

/// An SRv6 endpoint behaviour. A request sets what it was given; the built form keeps what
/// the behaviour takes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Seg6Local {
    /// [`crate::encap::action`].
    pub action: u32,
    /// End.B6 and End.B6.Encaps: the SRH pushed.
    pub srh: Option<Vec<u8>>,
    pub table: Option<u32>,
    pub nh4: Option<Ipv4Addr>,
    pub nh6: Option<Ipv6Addr>,
    pub iif: Option<u32>,
    pub oif: Option<u32>,
    pub vrftable: Option<u32>,
    /// The behaviour counts packets, bytes and errors (SEG6_LOCAL_COUNTERS).
    pub counters: Option<Counters>,
    pub flavors: Option<Flavors>,
    /// End.BPF's program was given (SEG6_LOCAL_BPF).
    pub bpf: bool,
}

/// A behaviour's counters (SEG6_LOCAL_CNT_*).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    pub packets: u64,
    pub bytes: u64,
    pub errors: u64,
}

/// RFC 8986 flavors (PSP, USP, USD) and NEXT-C-SID (SEG6_LOCAL_FLAVORS).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flavors {
    /// `1 << encap::flavor::X` for each flavor (SEG6_LOCAL_FLV_OPERATION); `None` when absent.
    pub ops: Option<u32>,
    /// NEXT-C-SID only: Locator-Block and Locator-Node Function lengths in bits.
    pub lcblock_bits: Option<u8>,
    pub lcnode_fn_bits: Option<u8>,
}

/// IOAM pre-allocated trace insertion.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Ioam6 {
    /// [`crate::encap::ioam6_mode`]; absent in a request means inline.
    pub mode: Option<u8>,
    /// The tunnel destination of the encap and auto modes.
    pub dst: Option<Ipv6Addr>,
    /// `struct ioam6_trace_hdr`: namespace id, node length and flags, remaining length, trace
    /// type (network byte order); any other length is refused.
    pub trace: Option<Vec<u8>>,
    /// "k of every n" packets; both or neither in a request (1 of 1 when neither).
    pub freq_k: Option<u32>,
    pub freq_n: Option<u32>,
}

/// RPL source routing header insertion.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rpl {
    /// The RPL source routing header, uncompressed, as configured.
    pub srh: Vec<u8>,
}

/// Route metrics (RTA_METRICS / RTAX_*). Only those set are present.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Metrics {
    pub lock: u32,
    pub mtu: Option<u32>,
    pub window: Option<u32>,
    pub rtt: Option<u32>,
    pub rttvar: Option<u32>,
    pub ssthresh: Option<u32>,
    pub cwnd: Option<u32>,
    pub advmss: Option<u32>,
    pub reordering: Option<u32>,
    pub hoplimit: Option<u32>,
    pub initcwnd: Option<u32>,
    pub features: Option<u32>,
    pub rto_min: Option<u32>,
    pub initrwnd: Option<u32>,
    pub quickack: Option<u32>,
    pub congctl: Option<String>,
    pub fastopen_no_cookie: Option<u32>,
}

impl Metrics {
    /// True when no metric is set, as in a request without RTA_METRICS. Asked once per route
    /// of a table load: every field is tested, without a branch per field as `==` against
    /// the default takes, and the pattern names every field so that a new one cannot be left out.
    pub fn is_empty(&self) -> bool {
        let Metrics {
            lock,
            mtu,
            window,
            rtt,
            rttvar,
            ssthresh,
            cwnd,
            advmss,
            reordering,
            hoplimit,
            initcwnd,
            features,
            rto_min,
            initrwnd,
            quickack,
            congctl,
            fastopen_no_cookie,
        } = self;
        (*lock == 0)
            & mtu.is_none()
            & window.is_none()
            & rtt.is_none()
            & rttvar.is_none()
            & ssthresh.is_none()
            & cwnd.is_none()
            & advmss.is_none()
            & reordering.is_none()
            & hoplimit.is_none()
            & initcwnd.is_none()
            & features.is_none()
            & rto_min.is_none()
            & initrwnd.is_none()
            & quickack.is_none()
            & congctl.is_none()
            & fastopen_no_cookie.is_none()
    }
}

/// A route: a request (new/del), a dump entry or the answer to a `route get`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub family: Family,
    /// RTA_DST and `rtm_dst_len`.
    pub dst: Prefix,
    /// RTA_SRC and `rtm_src_len` (IPv6 source-specific routes, `from` in iproute2).
    pub src: Option<Prefix>,
    pub tos: u8,
    /// RTA_TABLE (or `rtm_table` when < 256). 0 = unspecified (main for new, any for del).
    pub table: u32,
    pub protocol: u8,
    pub scope: u8,
    pub rtype: RouteType,
    /// RTM_F_* and RTNH_F_* bits.
    pub flags: u32,
    /// RTA_PRIORITY (metric). `None` = absent (0 for IPv4, 1024 for IPv6 on add).
    pub priority: Option<u32>,
    /// RTA_PREFSRC.
    pub prefsrc: Option<IpAddr>,
    /// The single next hop (RTA_GATEWAY/RTA_VIA/RTA_OIF) when `multipath` is empty.
    pub nexthop: NextHop,
    /// RTA_MULTIPATH.
    pub multipath: Vec<NextHop>,
    /// RTA_NH_ID: the route uses a next-hop object.
    pub nhid: Option<u32>,
    pub metrics: Metrics,
    /// RTA_PREF (IPv6 router preference: 0 medium, 1 high, 3 low).
    pub pref: Option<u8>,
    /// RTA_EXPIRES in seconds (IPv6 in the kernel; fibre also takes it for IPv4).
    pub expires: Option<u32>,
    // The fields below appear only in answers to `route get`.
    /// RTA_IIF of an input lookup.
    pub iif: Option<u32>,
    /// RTA_MARK echoed back.
    pub mark: Option<u32>,
    /// RTA_UID.
    pub uid: Option<u32>,
    /// RTA_CACHEINFO's "expires" (seconds) and "error" as printed with `cache`.
    pub cache: Option<CacheInfo>,
}

/// What `route get` prints after `cache`: next-hop exception data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheInfo {
    pub expires: Option<u32>,
    pub error: i32,
    pub used: u32,
}

impl Route {
    /// An empty route of `family` for `dst`, every attribute absent.
    pub fn new(family: Family, dst: Prefix) -> Route {
        Route {
            family,
            dst,
            src: None,
            tos: 0,
            table: table::UNSPEC,
            protocol: protocol::UNSPEC,
            scope: scope::UNIVERSE,
            rtype: RouteType::Unicast,
            flags: 0,
            priority: None,
            prefsrc: None,
            nexthop: NextHop::default(),
            multipath: Vec::new(),
            nhid: None,
            metrics: Metrics::default(),
            pref: None,
            expires: None,
            iif: None,
            mark: None,
            uid: None,
            cache: None,
        }
    }
}

/// A `route get` request (RTM_GETROUTE without NLM_F_DUMP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteQuery {
    pub family: Family,
    pub dst: IpAddr,
    pub src: Option<IpAddr>,
    /// Input interface: an input lookup, as for a packet received on it.
    pub iif: Option<u32>,
    pub oif: Option<u32>,
    pub tos: u8,
    pub mark: u32,
    pub uid: Option<u32>,
    pub ipproto: Option<u8>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// RTM_F_FIB_MATCH: answer with the matching FIB entry instead of the resolved dst.
    pub fibmatch: bool,
    /// RTA_TABLE in a get: look up in this table only (RTM_F_LOOKUP_TABLE).
    pub table: Option<u32>,
}

impl RouteQuery {
    /// An output lookup of `dst` with every selector absent, as `ip route get DST` asks it.
    pub fn to(dst: IpAddr) -> RouteQuery {
        RouteQuery {
            family: Family::of(&dst),
            dst,
            src: None,
            iif: None,
            oif: None,
            tos: 0,
            mark: 0,
            uid: None,
            ipproto: None,
            sport: None,
            dport: None,
            fibmatch: false,
            table: None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Policy rules (RTM_NEWRULE / RTM_DELRULE / RTM_GETRULE)
// ---------------------------------------------------------------------------------------------

/// Rule actions (FR_ACT_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RuleAction {
    Unspec = 0,
    ToTbl = 1,
    Goto = 2,
    Nop = 3,
    Blackhole = 6,
    Unreachable = 7,
    Prohibit = 8,
}

/// Rule flags (FIB_RULE_*).
pub mod rule_flags {
    pub const PERMANENT: u32 = 0x1;
    pub const INVERT: u32 = 0x2;
    pub const UNRESOLVED: u32 = 0x4;
    pub const IIF_DETACHED: u32 = 0x8;
    pub const OIF_DETACHED: u32 = 0x10;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub family: Family,
    pub src: Option<Prefix>,
    pub dst: Option<Prefix>,
    pub tos: u8,
    /// FRA_DSCP (newer kernels); iproute2 6.1 sends `tos` instead.
    pub dscp: Option<u8>,
    pub table: u32,
    pub action: RuleAction,
    pub flags: u32,
    /// FRA_PRIORITY; `None` in a request lets the kernel choose.
    pub priority: Option<u32>,
    pub fwmark: Option<u32>,
    pub fwmask: Option<u32>,
    pub iifname: Option<String>,
    pub oifname: Option<String>,
    pub goto: Option<u32>,
    pub suppress_prefixlen: Option<u32>,
    pub suppress_ifgroup: Option<u32>,
    pub ipproto: Option<u8>,
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
    pub uid_range: Option<(u32, u32)>,
    pub l3mdev: bool,
    pub protocol: u8,
}

impl Rule {
    /// A rule of `family` that looks up `table`, every selector absent and no priority chosen.
    pub fn new(family: Family, table: u32) -> Rule {
        Rule {
            family,
            src: None,
            dst: None,
            tos: 0,
            dscp: None,
            table,
            action: RuleAction::ToTbl,
            flags: 0,
            priority: None,
            fwmark: None,
            fwmask: None,
            iifname: None,
            oifname: None,
            goto: None,
            suppress_prefixlen: None,
            suppress_ifgroup: None,
            ipproto: None,
            sport: None,
            dport: None,
            uid_range: None,
            l3mdev: false,
            protocol: protocol::UNSPEC,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Next-hop objects (RTM_NEWNEXTHOP / RTM_DELNEXTHOP / RTM_GETNEXTHOP)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupMember {
    pub id: u32,
    /// Weight minus one, as in `struct nexthop_grp`.
    pub weight_minus_one: u8,
}

/// A resilient group's parameters (NHA_RES_GROUP_*). Times are in clock_t (1/100 s), as
/// netlink carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResGroup {
    pub buckets: Option<u16>,
    pub idle_timer: Option<u32>,
    pub unbalanced_timer: Option<u32>,
    /// Answers only (None in requests): how long the group has been unbalanced.
    pub unbalanced_time: Option<u64>,
}

/// One bucket of a resilient group (RTM_NEWNEXTHOPBUCKET).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NexthopBucket {
    /// The group's id.
    pub id: u32,
    pub index: u16,
    /// The member the bucket holds.
    pub nhid: u32,
    /// Time since the bucket was last used or moved, in clock_t.
    pub idle_time: u64,
    /// The group's protocol.
    pub protocol: u8,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NexthopObj {
    pub id: u32,
    /// AF_UNSPEC (None) for groups and blackholes without a family.
    pub family: Option<Family>,
    pub gateway: Option<IpAddr>,
    pub oif: u32,
    pub blackhole: bool,
    pub onlink: bool,
    pub fdb: bool,
    pub group: Vec<GroupMember>,
    /// NHA_GROUP_TYPE: 0 multipath, 1 resilient.
    pub group_type: u16,
    /// NHA_RES_GROUP of a resilient group: in requests what was given, in answers all of it.
    pub res: Option<ResGroup>,
    pub protocol: u8,
    /// RTNH_F_* in answers (dead, linkdown).
    pub flags: u32,
    /// The next hop's scope in answers (fib_nh_scope: link through a gateway, host for a
    /// device alone or a gateway that is a local address); requests leave it 0.
    pub scope: u8,
    /// NHA_ENCAP / NHA_ENCAP_TYPE: as requested in a request, as built in answers; routes
    /// through the object report it as their next hop's.
    pub encap: Option<Encap>,
}

/// Route cache flags (RTCF_*) found in the upper bits of `rtm_flags` in `route get` answers;
/// iproute2 prints them after `cache` (`<local,brd>`).
pub mod rtcf {
    pub const NOTIFY: u32 = 0x0001_0000;
    pub const REDIRECTED: u32 = 0x0004_0000;
    pub const DOREDIRECT: u32 = 0x0100_0000;
    pub const DIRECTSRC: u32 = 0x0400_0000;
    pub const BROADCAST: u32 = 0x1000_0000;
    pub const MULTICAST: u32 = 0x2000_0000;
    pub const LOCAL: u32 = 0x8000_0000;
}

/// NUD_* states (`ndm_state`).
pub mod nud {
    pub const NONE: u16 = 0x00;
    pub const INCOMPLETE: u16 = 0x01;
    pub const REACHABLE: u16 = 0x02;
    pub const STALE: u16 = 0x04;
    pub const DELAY: u16 = 0x08;
    pub const PROBE: u16 = 0x10;
    pub const FAILED: u16 = 0x20;
    pub const NOARP: u16 = 0x40;
    pub const PERMANENT: u16 = 0x80;
    /// States with a usable link-layer address.
    pub const VALID: u16 = PERMANENT | NOARP | REACHABLE | PROBE | STALE | DELAY;
}

/// NTF_* flags (`ndm_flags`).
pub mod ntf {
    pub const USE: u8 = 0x01;
    pub const SELF: u8 = 0x02;
    pub const MASTER: u8 = 0x04;
    pub const PROXY: u8 = 0x08;
    pub const EXT_LEARNED: u8 = 0x10;
    pub const OFFLOADED: u8 = 0x20;
    pub const STICKY: u8 = 0x40;
    pub const ROUTER: u8 = 0x80;
}

/// A neighbour or proxy entry, shaped like RTM_NEWNEIGH (`struct ndmsg` + NDA_*). In a request,
/// `ifindex` 0 means no device and `lladdr` `None` no NDA_LLADDR; `kind` is ignored. In an
/// answer, `lladdr` is present exactly when the state is valid, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Neighbour {
    pub family: Family,
    pub ifindex: u32,
    pub dst: IpAddr,
    pub lladdr: Option<Vec<u8>>,
    /// NUD_* state.
    pub state: u16,
    /// NTF_* flags; NTF_PROXY marks a proxy entry.
    pub flags: u8,
    /// `ndm_type`: the RTN_* type of the address.
    pub kind: u8,
    /// NDA_PROTOCOL; 0 = absent.
    pub protocol: u8,
    /// `nda_cacheinfo.ndm_confirmed`: clock ticks since the address was last confirmed.
    /// fibre's clock does not run, so this is 0 after a confirming update and the kernel's
    /// initial "long ago" (twice base_reachable_time) otherwise.
    pub confirmed: u32,
    /// `nda_cacheinfo.ndm_refcnt`: 1 while the kernel would hold a timer on the entry.
    pub refcnt: u32,
}

impl Neighbour {
    /// A request naming `dst` on `ifindex`, in iproute2's defaults (PERMANENT, no flags).
    pub fn new(dst: IpAddr, ifindex: u32) -> Neighbour {
        Neighbour {
            family: Family::of(&dst),
            ifindex,
            dst,
            lladdr: None,
            state: nud::PERMANENT,
            flags: 0,
            kind: 0,
            protocol: 0,
            confirmed: 0,
            refcnt: 0,
        }
    }

    pub fn is_proxy(&self) -> bool {
        self.flags & ntf::PROXY != 0
    }
}

/// A change announced on RTNLGRP_NEIGH: RTM_NEWNEIGH (stamped by the kernel with the
/// requester's port), or RTM_DELNEIGH when `deleted` (stamped with port 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeighEvent {
    pub deleted: bool,
    pub neigh: Neighbour,
}

/// The kernel's limits on the ICMP errors a router sends, as its sysctls hold them (the data
/// plane applies them; their meaning is in fibre-dataplane's `ratelimit` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpLimits {
    /// net.ipv4.icmp_ratelimit: milliseconds between errors to one destination.
    pub ratelimit_ms: u32,
    /// net.ipv4.icmp_ratemask: bit n limits ICMP type n.
    pub ratemask: u32,
    /// net.ipv4.icmp_msgs_per_sec: the global bucket's refill, both families.
    pub msgs_per_sec: u32,
    /// net.ipv4.icmp_msgs_burst: the global bucket's size.
    pub msgs_burst: u32,
    /// net.ipv6.icmp.ratelimit: milliseconds between errors to one destination.
    pub ratelimit6_ms: u32,
}

impl Default for IcmpLimits {
    /// Linux's defaults.
    fn default() -> Self {
        IcmpLimits {
            ratelimit_ms: 1000,
            ratemask: 0x1818,
            msgs_per_sec: 1000,
            msgs_burst: 50,
            ratelimit6_ms: 100,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Metrics;

    /// `is_empty` is `== Metrics::default()`: true for the default, false with any one field set.
    #[test]
    fn metrics_empty_only_without_any_field() {
        assert!(Metrics::default().is_empty());
        let one: [fn(&mut Metrics); 17] = [
            |m| m.lock = 1,
            |m| m.mtu = Some(0),
            |m| m.window = Some(0),
            |m| m.rtt = Some(0),
            |m| m.rttvar = Some(0),
            |m| m.ssthresh = Some(0),
            |m| m.cwnd = Some(0),
            |m| m.advmss = Some(0),
            |m| m.reordering = Some(0),
            |m| m.hoplimit = Some(0),
            |m| m.initcwnd = Some(0),
            |m| m.features = Some(0),
            |m| m.rto_min = Some(0),
            |m| m.initrwnd = Some(0),
            |m| m.quickack = Some(0),
            |m| m.congctl = Some(String::new()),
            |m| m.fastopen_no_cookie = Some(0),
        ];
        for (i, set) in one.iter().enumerate() {
            let mut m = Metrics::default();
            set(&mut m);
            assert_ne!(m, Metrics::default(), "field {i}");
            assert!(!m.is_empty(), "field {i}");
        }
    }
}
