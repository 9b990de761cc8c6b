//! TAP ports: a TAP device this port creates (IFF_TAP | IFF_NO_PI, non-blocking), for labs,
//! containers, and the host's side of the router's own traffic. What the host sends on the
//! device is what the port receives, and what the port sends arrives at the host as if from a
//! wire.
//!
//! A TAP has no ring to borrow from: each frame is one read(2) into a buffer the receive half
//! allocates once ([`Config::batch`] buffers of [`Config::frame_size`] bytes), and one
//! write(2) to send. The device lives as long as the port (it is not made persistent), created
//! in the network namespace of the thread that opens it; it may be moved to another (a lab's
//! host) while the port uses it. Frames the host sends faster than the port reads are dropped
//! by the kernel and counted on the device (`tx_dropped` in `ip -s link show`), not in the
//! port's counters.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::sys;
use crate::{Counters, Kind, OpenError, Port, PortError, RxQueue, TxQueue};

/// A TAP port's buffers and options.
#[derive(Debug, Clone)]
pub struct Config {
    /// The largest frame received whole; larger ones are dropped and counted in `errors`.
    /// 9216 bytes hold a 9000-byte MTU with its link-layer header and two VLAN tags.
    pub frame_size: usize,
    /// Frames read per `recv` at most: what one batch of system calls returns.
    pub batch: usize,
    /// Set the device up when it is created (a TAP device starts down).
    pub up: bool,
    /// The device's Ethernet address (else the kernel draws one) and MTU (else 1500), set
    /// before it goes up: a punt TAP takes its port link's.
    pub mac: Option<[u8; 6]>,
    pub mtu: Option<u32>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            frame_size: 9216,
            batch: 64,
            up: true,
            mac: None,
            mtu: None,
        }
    }
}

/// Creates TAP device `dev` (or attaches to a persistent one of that name) and opens a port on
/// it.
pub fn open(dev: &str, config: &Config) -> Result<Port, OpenError> {
    let step = |step, e| OpenError::step(step, e, dev);
    if dev.is_empty() || dev.len() >= libc::IFNAMSIZ || config.batch == 0 {
        return Err(step(
            "TUNSETIFF",
            std::io::Error::from_raw_os_error(libc::EINVAL),
        ));
    }
    let path = c"/dev/net/tun";
    // SAFETY: `path` is NUL-terminated; a non-negative result is a descriptor we own.
    let raw = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(step("open /dev/net/tun", std::io::Error::last_os_error()));
    }
    // SAFETY: `raw` was just returned by open(2) and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut req = sys::ifreq(dev);
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: `req` is a valid ifreq with the name and flags TUNSETIFF reads; it writes back
    // the name.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
        return Err(step("TUNSETIFF", std::io::Error::last_os_error()));
    }
    if let Some(mac) = config.mac {
        sys::set_mac(dev, mac).map_err(|e| step("set address", e))?;
    }
    if let Some(mtu) = config.mtu {
        sys::set_mtu(dev, mtu).map_err(|e| step("set mtu", e))?;
    }
    if config.up {
        sys::set_up(dev).map_err(|e| step("set up", e))?;
    }
    let ifindex = sys::ifindex(dev)?;
    let tx_fd = fd.try_clone().map_err(|e| step("dup", e))?;
    let rx = TapRx {
        fd,
        bufs: vec![0; config.frame_size * config.batch],
        lens: vec![0; config.batch],
        frame_size: config.frame_size,
        counters: Counters::default(),
    };
    let tx = TapTx {
        fd: tx_fd,
        counters: Counters::default(),
    };
    Ok(Port {
        dev: dev.to_owned(),
        ifindex,
        kind: Kind::Tap,
        detail: "TAP",
        rx: Box::new(rx),
        tx: Box::new(tx),
    })
}

/// Sets the carrier of the TAP device behind `fd` (a port's descriptor, either half's):
/// the host sees the device's link come and go (TUNSETCARRIER, Linux 5.0).
pub fn set_carrier(fd: BorrowedFd<'_>, on: bool) -> std::io::Result<()> {
    let v = libc::c_int::from(on);
    // SAFETY: TUNSETCARRIER reads one int through the pointer, which is valid for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETCARRIER, &v) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Gives TAP device `dev` of the calling thread's namespace a new Ethernet address.
pub fn set_address(dev: &str, mac: [u8; 6]) -> std::io::Result<()> {
    sys::set_mac(dev, mac)
}

/// Gives TAP device `dev` of the calling thread's namespace a new MTU.
pub fn set_mtu(dev: &str, mtu: u32) -> std::io::Result<()> {
    sys::set_mtu(dev, mtu)
}

/// Another transmit half on the TAP device behind `fd` (a port's descriptor, either half's),
/// for a thread of its own: each write(2) to a TAP is one whole frame, so the halves need no
/// lock between them.
pub fn writer(fd: BorrowedFd<'_>) -> std::io::Result<Box<dyn TxQueue>> {
    Ok(Box::new(TapTx {
        fd: fd.try_clone_to_owned()?,
        counters: Counters::default(),
    }))
}

struct TapRx {
    fd: OwnedFd,
    /// `batch` buffers of `frame_size` bytes, one after another.
    bufs: Vec<u8>,
    /// The length of the frame in each buffer.
    lens: Vec<usize>,
    frame_size: usize,
    counters: Counters,
}

impl RxQueue for TapRx {
    fn recv<'a>(&'a mut self, frames: &mut [&'a [u8]]) -> Result<usize, PortError> {
        let want = frames.len().min(self.lens.len());
        let fs = self.frame_size;
        let mut n = 0;
        while n < want {
            let buf = &mut self.bufs[n * fs..(n + 1) * fs];
            // SAFETY: `buf` is valid for `fs` bytes of writes for the whole call.
            let r = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), fs) };
            if r < 0 {
                match std::io::Error::last_os_error().raw_os_error().unwrap_or(0) {
                    libc::EAGAIN => break,
                    libc::EINTR => continue,
                    e if n == 0 => {
                        self.counters.errors += 1;
                        return Err(PortError::from_errno(e));
                    }
                    _ => break,
                }
            }
            let len = r as usize;
            if len > fs {
                self.counters.errors += 1;
                continue;
            }
            self.lens[n] = len;
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += len as u64;
            n += 1;
        }
        let bufs: &'a [u8] = &self.bufs;
        for (i, slot) in frames[..n].iter_mut().enumerate() {
            *slot = &bufs[i * fs..i * fs + self.lens[i]];
        }
        Ok(n)
    }

    fn release(&mut self) {}

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `Gone` once the device is deleted. The device may live in another namespace than the
    /// one it was created in (moved to a lab's host) and its carrier is this port's, so its
    /// state is not asked by name: a device set down shows as `Down` from `send` (EIO).
    fn check(&mut self) -> Result<(), PortError> {
        let mut req = sys::ifreq("");
        // SAFETY: TUNGETIFF writes the device's name and flags into `req`; EBADFD when the
        // device behind the descriptor is gone.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::TUNGETIFF, &mut req) } < 0 {
            return Err(PortError::last_os_error());
        }
        Ok(())
    }

    fn mtu(&self) -> Option<u32> {
        None
    }

    fn counters(&mut self) -> Counters {
        self.counters
    }
}

struct TapTx {
    fd: OwnedFd,
    counters: Counters,
}

impl TxQueue for TapTx {
    fn send(&mut self, frame: &[u8]) -> Result<(), PortError> {
        loop {
            // SAFETY: `frame` is valid for `frame.len()` bytes of reads for the whole call.
            let r = unsafe { libc::write(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
            if r >= 0 {
                self.counters.tx_packets += 1;
                self.counters.tx_bytes += frame.len() as u64;
                return Ok(());
            }
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(match e {
                libc::EINTR => continue,
                libc::EAGAIN => {
                    self.counters.tx_full += 1;
                    PortError::Full
                }
                // The device is down: the kernel refuses the frame.
                libc::EIO => {
                    self.counters.errors += 1;
                    PortError::Down
                }
                e => {
                    self.counters.errors += 1;
                    PortError::from_errno(e)
                }
            });
        }
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn counters(&mut self) -> Counters {
        self.counters
    }
}
