//! The system calls every port kind makes: sockets and their options, shared mappings,
//! interface names and flags. Each libc call is checked; descriptors are `OwnedFd`, mappings
//! [`Mmap`], so an early return releases what was built. Only this crate's port modules call
//! these.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use crate::{OpenError, PortError};

/// Plain data the kernel may fill byte for byte: integers and `repr(C)` structs of them, for
/// which every bit pattern is a valid value.
pub(crate) trait Pod: Copy {}
impl Pod for i32 {}
impl Pod for u32 {}
impl Pod for libc::tpacket_stats_v3 {}
impl Pod for libc::xdp_mmap_offsets {}
impl Pod for libc::xdp_statistics {}
impl Pod for libc::xdp_options {}

pub(crate) fn socket(domain: i32, ty: i32, protocol: i32) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; a non-negative result is a new descriptor we own.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn setsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: i32,
    name: i32,
    value: &T,
) -> io::Result<()> {
    // SAFETY: the pointer and length describe `value`, which outlives the call; the kernel
    // only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub(crate) fn getsockopt<T: Pod>(fd: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<T> {
    // SAFETY: `T: Pod`: all zeroes is a valid value.
    let mut value: T = unsafe { zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the pointer and length describe `value`; the kernel writes at most `len` bytes,
    // any of which make a valid `T` (`Pod`).
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(value)
    }
}

/// The socket's pending error, cleared by reading it (SO_ERROR), as a port error.
pub(crate) fn take_error(fd: BorrowedFd<'_>) -> Result<(), PortError> {
    match getsockopt::<i32>(fd, libc::SOL_SOCKET, libc::SO_ERROR) {
        Ok(0) => Ok(()),
        Ok(e) => Err(PortError::from_errno(e)),
        Err(e) => Err(PortError::from_errno(e.raw_os_error().unwrap_or(0))),
    }
}

/// Binds an AF_PACKET socket to an interface; protocol 0 receives nothing (a socket that
/// only transmits), `ETH_P_ALL` everything.
pub(crate) fn bind_packet(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all zeroes is valid.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: the pointer and length describe `sll`, which outlives the call.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Asks the kernel to send what a transmit ring holds (AF_PACKET, AF_XDP): a zero-length
/// non-blocking sendto. `Ok(false)` when the kernel stopped before the end (EAGAIN: AF_XDP's
/// copy mode sends a bounded batch per call; ENOBUFS, EBUSY: the device is busy): the next
/// kick sends the rest.
pub(crate) fn kick(fd: BorrowedFd<'_>) -> Result<bool, PortError> {
    // SAFETY: no buffer and no address: the kernel reads nothing from user memory.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r >= 0 {
        return Ok(true);
    }
    match io::Error::last_os_error().raw_os_error().unwrap_or(0) {
        libc::EAGAIN | libc::ENOBUFS | libc::EBUSY | libc::EINTR => Ok(false),
        e => Err(PortError::from_errno(e)),
    }
}

/// The size of a memory page, which ring blocks and UMEM chunks are measured against.
pub(crate) fn page_size() -> u32 {
    // SAFETY: sysconf takes no pointers.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(p).unwrap_or(4096)
}

/// The index of interface `name` in the calling thread's network namespace.
pub(crate) fn ifindex(name: &str) -> Result<u32, OpenError> {
    let missing = || OpenError::NoDevice(name.to_owned());
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(missing());
    }
    let c = CString::new(name).map_err(|_| missing())?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(missing()),
        i => Ok(i),
    }
}

/// An `ifreq` naming `name` (shorter than IFNAMSIZ, checked by the caller).
pub(crate) fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data; all zeroes is valid.
    let mut req: libc::ifreq = unsafe { zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    req
}

/// Sets interface `name` administratively up (SIOCSIFFLAGS with IFF_UP).
pub(crate) fn set_up(name: &str) -> io::Result<()> {
    let s = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let mut req = ifreq(name);
    // SAFETY: `req` is a valid ifreq naming the interface; SIOCGIFFLAGS fills its flags.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member of the union.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: as above; SIOCSIFFLAGS reads the flags.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives interface `name` the Ethernet address `mac` (SIOCSIFHWADDR).
pub(crate) fn set_mac(name: &str, mac: [u8; 6]) -> io::Result<()> {
    let s = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let mut req = ifreq(name);
    // SAFETY: writes the `ifru_hwaddr` member of the union: an Ethernet family and its bytes.
    unsafe {
        req.ifr_ifru.ifru_hwaddr.sa_family = libc::ARPHRD_ETHER;
        for (d, b) in req.ifr_ifru.ifru_hwaddr.sa_data.iter_mut().zip(mac) {
            *d = b as libc::c_char;
        }
    }
    // SAFETY: `req` is a valid ifreq naming the interface; SIOCSIFHWADDR reads the address.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFHWADDR, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives interface `name` the MTU `mtu` (SIOCSIFMTU).
pub(crate) fn set_mtu(name: &str, mtu: u32) -> io::Result<()> {
    let s = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_mtu =
        i32::try_from(mtu).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `req` is a valid ifreq naming the interface; SIOCSIFMTU reads `ifru_mtu`.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFMTU, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A memory mapping, unmapped when dropped.
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving it to another thread moves
// that ownership. Concurrent access with the kernel goes through the rings' atomics.
unsafe impl Send for Mmap {}
// SAFETY: a shared `&Mmap` only hands out the address and length; every access through the
// address is an `unsafe` block of its owner, which keeps threads to disjoint parts (AF_XDP's
// halves to their own chunks).
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Maps `len` bytes of what `fd` offers at `offset` (a packet ring, an XDP ring), shared
    /// with the kernel and populated now so the data path takes no page faults.
    pub(crate) fn shared(fd: BorrowedFd<'_>, len: usize, offset: i64) -> io::Result<Mmap> {
        Self::map(
            len,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            offset,
        )
    }

    /// `len` bytes of zeroed private memory (an AF_XDP UMEM), populated now.
    pub(crate) fn anonymous(len: usize) -> io::Result<Mmap> {
        Self::map(
            len,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
    }

    fn map(len: usize, flags: i32, fd: i32, offset: i64) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at an address the kernel chooses aliases no Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        NonNull::new(p.cast())
            .map(|ptr| Mmap { ptr, len })
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly one mapping this value owns; nothing borrowed from
        // it outlives `self` (borrows are tied to the owners' lifetimes).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Asks after one interface by index in the network namespace the port was opened in (a
/// socket keeps the namespace it was created in, whatever thread later asks).
pub(crate) struct LinkProbe {
    sock: OwnedFd,
    ifindex: u32,
}

impl LinkProbe {
    pub(crate) fn new(ifindex: u32) -> io::Result<LinkProbe> {
        Ok(LinkProbe {
            sock: socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?,
            ifindex,
        })
    }

    /// An `ifreq` naming the interface, or `Gone` once it is removed.
    fn named(&self) -> Result<libc::ifreq, PortError> {
        // SAFETY: ifreq is plain data; all zeroes is valid.
        let mut req: libc::ifreq = unsafe { zeroed() };
        req.ifr_ifru.ifru_ifindex = self.ifindex as i32;
        // SAFETY: `req` is a valid ifreq carrying an index; SIOCGIFNAME writes the name.
        if unsafe { libc::ioctl(self.sock.as_raw_fd(), libc::SIOCGIFNAME, &mut req) } < 0 {
            return Err(PortError::Gone);
        }
        Ok(req)
    }

    /// `Ok` while the interface is up with carrier, `Down` while not, `Gone` once removed.
    pub(crate) fn state(&self) -> Result<(), PortError> {
        let mut req = self.named()?;
        // SAFETY: `req` names the interface; SIOCGIFFLAGS writes the flags.
        if unsafe { libc::ioctl(self.sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
            return Err(PortError::Gone);
        }
        // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member of the union.
        let flags = i32::from(unsafe { req.ifr_ifru.ifru_flags }) as u32 & 0xFFFF;
        let up = (libc::IFF_UP | libc::IFF_RUNNING) as u32;
        if flags & up == up {
            Ok(())
        } else {
            Err(PortError::Down)
        }
    }

    /// The interface's MTU; `None` once it is removed.
    pub(crate) fn mtu(&self) -> Option<u32> {
        let mut req = self.named().ok()?;
        // SAFETY: `req` names the interface; SIOCGIFMTU writes the MTU.
        if unsafe { libc::ioctl(self.sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } < 0 {
            return None;
        }
        // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
        u32::try_from(unsafe { req.ifr_ifru.ifru_mtu }).ok()
    }
}
