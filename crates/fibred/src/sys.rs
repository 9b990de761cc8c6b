//! The few system calls the daemon makes beyond std: AF_UNIX SOCK_SEQPACKET and SOCK_DGRAM
//! sockets, poll(2), eventfds, and signal delivery to one thread (sigwait).
//!
//! Every function checks its result and owns the descriptors it creates (`OwnedFd`).

use std::ffi::OsStr;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cvt_size(ret: libc::ssize_t) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// A Unix socket address: a path, or unnamed (an unbound client).
#[derive(Clone, Copy)]
pub struct UnixAddr {
    addr: libc::sockaddr_un,
    len: libc::socklen_t,
}

impl UnixAddr {
    pub fn from_path(path: &Path) -> io::Result<UnixAddr> {
        // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
        let mut addr: libc::sockaddr_un = unsafe { zeroed() };
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = OsStr::as_bytes(path.as_os_str());
        if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "unix socket path too long or contains NUL",
            ));
        }
        for (dst, src) in addr.sun_path.iter_mut().zip(bytes) {
            *dst = *src as libc::c_char;
        }
        let len = size_of::<libc::sa_family_t>() + bytes.len() + 1;
        Ok(UnixAddr {
            addr,
            len: len as libc::socklen_t,
        })
    }

    /// True when the peer has an address replies can be sent to.
    pub fn is_named(&self) -> bool {
        self.len as usize > size_of::<libc::sa_family_t>()
    }

    /// The path or abstract name, for logs.
    pub fn describe(&self) -> String {
        let n = (self.len as usize).saturating_sub(size_of::<libc::sa_family_t>());
        let raw: Vec<u8> = self.addr.sun_path[..n.min(self.addr.sun_path.len())]
            .iter()
            .map(|c| *c as u8)
            .collect();
        match raw.first() {
            None => "(unnamed)".into(),
            Some(0) => format!("@{}", String::from_utf8_lossy(&raw[1..])),
            Some(_) => {
                let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                PathBuf::from(OsStr::from_bytes(&raw[..end]))
                    .display()
                    .to_string()
            }
        }
    }
}

fn socket(kind: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket() takes no pointers; the returned descriptor is new and owned by us.
    let fd = cvt(unsafe { libc::socket(libc::AF_UNIX, kind | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd was just returned by socket() and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: &OwnedFd, path: &Path) -> io::Result<()> {
    let a = UnixAddr::from_path(path)?;
    // SAFETY: a.addr is a valid sockaddr_un of length a.len; fd is a live socket.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&a.addr as *const libc::sockaddr_un).cast(),
            a.len,
        )
    })?;
    Ok(())
}

/// A listening SOCK_SEQPACKET socket bound to `path`.
pub fn seqpacket_listen(path: &Path) -> io::Result<OwnedFd> {
    let fd = socket(libc::SOCK_SEQPACKET)?;
    bind(&fd, path)?;
    // SAFETY: fd is a live, bound socket.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), 128) })?;
    Ok(fd)
}

/// A SOCK_SEQPACKET socket connected to `path`.
pub fn seqpacket_connect(path: &Path) -> io::Result<OwnedFd> {
    let fd = socket(libc::SOCK_SEQPACKET)?;
    let a = UnixAddr::from_path(path)?;
    // SAFETY: a.addr is a valid sockaddr_un of length a.len; fd is a live socket.
    cvt(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&a.addr as *const libc::sockaddr_un).cast(),
            a.len,
        )
    })?;
    Ok(fd)
}

/// A SOCK_DGRAM socket bound to `path`.
pub fn dgram_bind(path: &Path) -> io::Result<OwnedFd> {
    let fd = socket(libc::SOCK_DGRAM)?;
    bind(&fd, path)?;
    Ok(fd)
}

/// Accepts one connection.
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: null address pointers are allowed; the listener is a live socket.
        let ret = unsafe {
            libc::accept4(
                listener.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        match cvt(ret) {
            // SAFETY: accept4 returned a new descriptor nobody else owns.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The peer's process id (SO_PEERCRED).
pub fn peer_pid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    // SAFETY: ucred is plain old data.
    let mut cred: libc::ucred = unsafe { zeroed() };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for writes of the sizes given.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    })?;
    Ok(cred.pid as u32)
}

pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on a live descriptor with integer arguments.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    Ok(())
}

pub fn send(fd: BorrowedFd<'_>, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for reads of its length.
        let r = cvt_size(unsafe {
            libc::send(
                fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        });
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

pub fn send_to(
    fd: BorrowedFd<'_>,
    buf: &[u8],
    to: &UnixAddr,
    flags: libc::c_int,
) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for reads of its length; to.addr is a valid address of to.len.
        let r = cvt_size(unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                flags | libc::MSG_NOSIGNAL,
                (&to.addr as *const libc::sockaddr_un).cast(),
                to.len,
            )
        });
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// The size of the next datagram (0 at end of stream), without taking it.
pub fn next_len(fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<usize> {
    loop {
        // SAFETY: a zero-length read into a null-free empty buffer; MSG_TRUNC reports the size.
        let r = cvt_size(unsafe {
            libc::recv(
                fd.as_raw_fd(),
                std::ptr::NonNull::<u8>::dangling().as_ptr().cast(),
                0,
                flags | libc::MSG_PEEK | libc::MSG_TRUNC,
            )
        });
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for writes of its length.
        let r = cvt_size(unsafe {
            libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags)
        });
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Receives one datagram and its sender's address.
pub fn recv_from(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, UnixAddr)> {
    loop {
        // SAFETY: sockaddr_un is plain old data.
        let mut addr: libc::sockaddr_un = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_un>() as libc::socklen_t;
        // SAFETY: buf, addr and len are valid for writes of the sizes given.
        let r = cvt_size(unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
                (&mut addr as *mut libc::sockaddr_un).cast(),
                &mut len,
            )
        });
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
            Ok(n) => return Ok((n, UnixAddr { addr, len })),
        }
    }
}

pub fn pollfd(fd: BorrowedFd<'_>, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    }
}

/// poll(2); `timeout_ms` < 0 waits forever. EINTR counts as a wake-up with nothing ready.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: fds is a valid array of pollfd of the length given.
    match cvt(unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) }) {
        Ok(n) => Ok(n as usize),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e),
    }
}

/// An eventfd used as a level-triggered wake-up between threads.
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes no pointers; the descriptor is new and ours.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: fd was just returned and nothing else owns it.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64; a full counter (EAGAIN) is already signalled.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64; EAGAIN means nothing was pending.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.0.as_fd()
    }
}

fn termination_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialised by sigemptyset before use.
    let mut set: libc::sigset_t = unsafe { zeroed() };
    // SAFETY: set is a valid sigset_t.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
    }
    set
}

/// Blocks SIGTERM and SIGINT in the calling thread and in every thread it spawns afterwards,
/// so that only [`wait_termination`] receives them.
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_set();
    // SAFETY: set is a valid signal set; the old mask is not wanted.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    // SIGPIPE is never wanted: sends use MSG_NOSIGNAL, and stdout/stderr errors are handled.
    // SAFETY: installing SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    Ok(())
}

/// Waits for SIGTERM or SIGINT (blocked beforehand) and returns its number.
pub fn wait_termination() -> i32 {
    let set = termination_set();
    let mut sig: libc::c_int = 0;
    loop {
        // SAFETY: set and sig are valid; sigwait only writes sig.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
            return sig;
        }
    }
}
