//! Ports: fibre's links bound to host interfaces, as forwarding workers poll them.
//!
//! A [`Port`] is a receive half ([`RxQueue`]) and a transmit half ([`TxQueue`]) over one host
//! interface, opened by one of three kinds ([`Kind`]): an AF_PACKET socket pair with
//! TPACKET_V3 receive and TPACKET_V2 transmit rings ([`packet`]), an AF_XDP socket with its
//! UMEM and the generated redirect program ([`xdp`], [`bpf`]), or a TAP device ([`tap`]). The
//! halves are separate objects so that a worker ([`worker`]) can receive a vector from one
//! port while it transmits on any port, the same one included.
//!
//! Invariants, for every kind:
//! - Received frames are borrowed from the kernel's ring where the ring allows it (AF_PACKET,
//!   AF_XDP) and stay valid until the next [`RxQueue::recv`] or [`RxQueue::release`] on the
//!   same queue, which give their slots back; the borrow checker enforces it.
//! - Nothing allocates or locks per frame; buffers and rings are sized when the port opens.
//! - Every frame the kernel or the port drops for want of room is counted ([`Counters`]),
//!   never lost silently: the kernel's ring drops are read from the socket's statistics, a
//!   frame that finds the transmit ring full is counted in `tx_full`.
//! - Opening either returns a whole port or releases everything it built (descriptors, maps,
//!   programs, mappings: each is owned by a value whose `Drop` releases it); dropping a port
//!   releases everything too, the XDP program included.
//! - A host interface that disappears under an open port makes the port report
//!   [`PortError::Gone`], one that goes down [`PortError::Down`] (from `flush` or
//!   [`RxQueue::check`], which a worker calls when poll(2) reports an error on the queue's
//!   descriptor, or now and then while idle); no call blocks.
//!
//! Who calls what: one thread owns each half (both are `Send`, neither is `Sync`). Opening
//! needs CAP_NET_RAW for AF_PACKET; CAP_NET_RAW, CAP_BPF and CAP_NET_ADMIN for AF_XDP;
//! CAP_NET_ADMIN for TAP.

#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod bpf;
pub mod csum;
pub mod packet;
mod ring;
mod sys;
pub mod tap;
pub mod worker;
pub mod xdp;

use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;

/// How a port reaches its host interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    AfPacket,
    AfXdp,
    Tap,
}

impl Kind {
    /// The name `fibre link add ... io KIND` uses.
    pub fn name(self) -> &'static str {
        match self {
            Kind::AfPacket => "af_packet",
            Kind::AfXdp => "af_xdp",
            Kind::Tap => "tap",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        match name {
            "af_packet" => Some(Kind::AfPacket),
            "af_xdp" => Some(Kind::AfXdp),
            "tap" => Some(Kind::Tap),
            _ => None,
        }
    }
}

/// Why a queue could not receive or send: small and `Copy`, for the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortError {
    /// The host interface is down or without carrier (ENETDOWN, EIO from a TAP): frames wait
    /// for it to come back up.
    Down,
    /// The host interface is gone (ENXIO, ENODEV, EBADFD): the port is dead and must be opened
    /// again once the interface exists.
    Gone,
    /// The transmit ring has no free slot; the frame was counted in `tx_full` and dropped.
    Full,
    /// The frame does not fit a ring slot; counted in `errors`.
    TooBig,
    /// Another error from the kernel (an errno).
    Os(i32),
}

impl PortError {
    pub(crate) fn from_errno(errno: i32) -> PortError {
        match errno {
            libc::ENETDOWN => PortError::Down,
            libc::ENXIO | libc::ENODEV | libc::EBADFD => PortError::Gone,
            e => PortError::Os(e),
        }
    }

    pub(crate) fn last_os_error() -> PortError {
        PortError::from_errno(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortError::Down => f.write_str("Network is down"),
            PortError::Gone => f.write_str("No such device"),
            PortError::Full => f.write_str("transmit ring full"),
            PortError::TooBig => f.write_str("frame larger than a ring slot"),
            PortError::Os(e) => write!(f, "{}", io::Error::from_raw_os_error(*e)),
        }
    }
}

impl std::error::Error for PortError {}

/// Why a port could not be opened; displayed in iproute2's words.
#[derive(Debug)]
pub enum OpenError {
    /// EPERM or EACCES: not root, or without the capabilities the kind needs.
    NotPermitted,
    /// No host interface by that name.
    NoDevice(String),
    /// A setting the kernel refused, with the step that asked for it.
    Setup {
        step: &'static str,
        error: io::Error,
    },
}

impl OpenError {
    /// The error of a failed step, with EPERM/EACCES and ENODEV turned into their own cases.
    pub(crate) fn step(step: &'static str, error: io::Error, dev: &str) -> OpenError {
        match error.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => OpenError::NotPermitted,
            Some(libc::ENODEV) => OpenError::NoDevice(dev.to_owned()),
            _ => OpenError::Setup { step, error },
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::NotPermitted => f.write_str("Operation not permitted"),
            OpenError::NoDevice(name) => write!(f, "Cannot find device \"{name}\""),
            OpenError::Setup { step, error } => write!(f, "{step}: {error}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Setup { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// What a queue has counted since it opened. Each half fills its own fields; [`Port::counters`]
/// adds them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames the kernel dropped because the receive ring (or AF_XDP's fill ring) had no room.
    pub rx_ring_drops: u64,
    /// Frames received with their transport checksum left to the hardware (a veth peer's
    /// CHECKSUM_PARTIAL), completed by the port before handing them out.
    pub rx_csum_completed: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames dropped because the transmit ring was full.
    pub tx_full: u64,
    /// Frames refused by the kernel or too big for a slot, and failed system calls.
    pub errors: u64,
}

impl Counters {
    /// Each counter with its field's name, for reports.
    pub fn named(&self) -> [(&'static str, u64); 8] {
        [
            ("rx_packets", self.rx_packets),
            ("rx_bytes", self.rx_bytes),
            ("rx_ring_drops", self.rx_ring_drops),
            ("rx_csum_completed", self.rx_csum_completed),
            ("tx_packets", self.tx_packets),
            ("tx_bytes", self.tx_bytes),
            ("tx_full", self.tx_full),
            ("errors", self.errors),
        ]
    }

    pub fn add(&mut self, o: &Counters) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.rx_ring_drops += o.rx_ring_drops;
        self.rx_csum_completed += o.rx_csum_completed;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.tx_full += o.tx_full;
        self.errors += o.errors;
    }
}

/// The receive half of a port.
pub trait RxQueue: Send {
    /// Gives back the slots of the previous batch, then fills `frames` from the front with the
    /// frames waiting (at most `frames.len()`), without blocking; returns how many. The frames
    /// point into the ring and stay valid until the next call on this queue.
    fn recv<'a>(&'a mut self, frames: &mut [&'a [u8]]) -> Result<usize, PortError>;

    /// Gives back the slots of the last batch now (before sleeping, say).
    fn release(&mut self);

    /// The descriptor to poll(2) for POLLIN while idle; POLLERR on it means: call
    /// [`RxQueue::check`].
    fn fd(&self) -> BorrowedFd<'_>;

    /// The host interface's state: `Ok` while it is up with carrier, [`PortError::Down`]
    /// while not, [`PortError::Gone`] once it is removed. Clears a pending socket error (the
    /// cause of POLLERR).
    fn check(&mut self) -> Result<(), PortError>;

    /// The host interface's MTU, where the port can ask (a TAP moved to another namespace
    /// cannot be asked by name).
    fn mtu(&self) -> Option<u32>;

    /// The receive counters, the kernel's ring drops included.
    fn counters(&mut self) -> Counters;
}

/// The transmit half of a port.
pub trait TxQueue: Send {
    /// Queues a copy of `frame` in the transmit ring; the kernel sees it at the next
    /// [`TxQueue::flush`]. [`PortError::Full`] when no slot is free (counted, frame dropped).
    fn send(&mut self, frame: &[u8]) -> Result<(), PortError>;

    /// Hands the queued frames to the kernel and reclaims the slots it has sent.
    fn flush(&mut self) -> Result<(), PortError>;

    /// The descriptor to poll(2) for POLLOUT when the ring was full.
    fn fd(&self) -> BorrowedFd<'_>;

    fn counters(&mut self) -> Counters;
}

/// A fibre link's binding to a host interface.
pub struct Port {
    /// The host interface.
    pub dev: String,
    pub ifindex: u32,
    pub kind: Kind,
    /// How the port runs, for logs and `fibre link show`: its rings, or for AF_XDP its copy
    /// and XDP modes.
    pub detail: &'static str,
    pub rx: Box<dyn RxQueue>,
    pub tx: Box<dyn TxQueue>,
}

impl Port {
    /// Opens a port of `kind` on `dev` with the default settings of its kind: an AF_PACKET or
    /// AF_XDP port binds to an existing interface (queue 0 for AF_XDP), a TAP port creates the
    /// TAP device `dev` in the calling thread's network namespace.
    pub fn open(kind: Kind, dev: &str) -> Result<Port, OpenError> {
        match kind {
            Kind::AfPacket => packet::open(dev, &packet::Config::default()),
            Kind::AfXdp => xdp::open(dev, &xdp::Config::default()),
            Kind::Tap => tap::open(dev, &tap::Config::default()),
        }
    }

    pub fn counters(&mut self) -> Counters {
        let mut c = self.rx.counters();
        c.add(&self.tx.counters());
        c
    }
}

impl fmt::Debug for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Port")
            .field("dev", &self.dev)
            .field("ifindex", &self.ifindex)
            .field("kind", &self.kind)
            .field("detail", &self.detail)
            .finish_non_exhaustive()
    }
}
