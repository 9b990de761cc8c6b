//! Thin, safe wrappers over the system calls the transport needs: AF_UNIX SOCK_SEQPACKET
//! sockets with SCM_RIGHTS, peer credentials, eventfd and poll. Every wrapper owns or borrows
//! its descriptors through `OwnedFd`/`BorrowedFd`, so no descriptor leaks or is used after close.

use std::ffi::OsStr;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// Credentials of a peer process as the kernel reports them (SO_PEERCRED), so they cannot be
/// forged by the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Credentials {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Most descriptors one control message may carry here (memfd and two eventfds).
pub const MAX_FDS: usize = 3;

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

fn sockaddr_un(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
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
    Ok((addr, len as libc::socklen_t))
}

fn seqpacket_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() takes no pointers; the returned descriptor is new and owned by us.
    let fd =
        cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd was just returned by socket() and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A listening SOCK_SEQPACKET socket bound to `path`.
pub fn listen(path: &Path, backlog: i32) -> io::Result<OwnedFd> {
    let fd = seqpacket_socket()?;
    let (addr, len) = sockaddr_un(path)?;
    // SAFETY: addr is a valid sockaddr_un of length len, fd is a live socket.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    })?;
    // SAFETY: fd is a live, bound socket.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
    Ok(fd)
}

/// A SOCK_SEQPACKET socket connected to `path`.
pub fn connect(path: &Path) -> io::Result<OwnedFd> {
    let fd = seqpacket_socket()?;
    let (addr, len) = sockaddr_un(path)?;
    // SAFETY: addr is a valid sockaddr_un of length len, fd is a live socket.
    cvt(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    })?;
    Ok(fd)
}

/// Accepts one connection (blocking unless the listener is non-blocking).
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

/// The kernel's record of who is at the other end of a connected socket.
pub fn peer_credentials(fd: BorrowedFd<'_>) -> io::Result<Credentials> {
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
    Ok(Credentials {
        pid: cred.pid as u32,
        uid: cred.uid,
        gid: cred.gid,
    })
}

pub fn set_nonblocking(fd: BorrowedFd<'_>, nonblocking: bool) -> io::Result<()> {
    // SAFETY: fcntl on a live descriptor with integer arguments.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    let flags = if nonblocking {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) })?;
    Ok(())
}

/// Bounds how long a blocking receive waits (used for the setup handshake, so a peer that
/// connects and says nothing cannot hold the accepting thread).
pub fn set_recv_timeout(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<()> {
    let tv = match timeout {
        Some(t) => libc::timeval {
            tv_sec: t.as_secs() as libc::time_t,
            tv_usec: t.subsec_micros() as libc::suseconds_t,
        },
        None => libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
    };
    // SAFETY: tv is a valid timeval for the duration of the call.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Sends one datagram, with `fds` attached as SCM_RIGHTS when non-empty. MSG_NOSIGNAL: a
/// vanished peer is an error to handle, never a signal.
pub fn send(
    fd: BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
    flags: libc::c_int,
) -> io::Result<usize> {
    assert!(fds.len() <= MAX_FDS);
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // Control buffer sized for MAX_FDS descriptors, u64-aligned as cmsghdr requires.
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain old data.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let data_len = (fds.len() * size_of::<RawFd>()) as u32;
        // SAFETY: CMSG_SPACE is arithmetic.
        let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
        debug_assert!(space <= size_of::<[u64; 8]>());
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: msg_control points at cbuf, large enough for one cmsghdr with data_len bytes
        // (checked above), so CMSG_FIRSTHDR is non-null and CMSG_DATA stays inside cbuf.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
            let data = libc::CMSG_DATA(cmsg) as *mut RawFd;
            for (i, fd) in fds.iter().enumerate() {
                data.add(i).write_unaligned(fd.as_raw_fd());
            }
        }
    }
    loop {
        // SAFETY: msg points at iov/cbuf, which outlive the call; bytes is only read.
        let ret = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, flags | libc::MSG_NOSIGNAL) };
        match cvt_size(ret) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// One received datagram: its full length (which exceeds the buffer when truncated) and the
/// descriptors that came with it.
pub struct Received {
    pub len: usize,
    pub truncated: bool,
    pub fds: Vec<OwnedFd>,
}

/// Receives one datagram into `buf`. Descriptors passed with it are taken into ownership (and
/// closed when dropped), so a peer cannot make us leak descriptors by sending unwanted ones.
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8], flags: libc::c_int) -> io::Result<Received> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain old data.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 8]>() as _;
    let len = loop {
        // SAFETY: msg points at iov (over buf) and cbuf, both valid for writes of the given sizes.
        let ret = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                &mut msg,
                flags | libc::MSG_TRUNC | libc::MSG_CMSG_CLOEXEC,
            )
        };
        match cvt_size(ret) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => break other?,
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_FIRSTHDR/NXTHDR only walk
    // inside that buffer, and SCM_RIGHTS data holds the descriptor numbers it installed for us.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                let n =
                    ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / size_of::<RawFd>();
                for i in 0..n {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(Received {
        len,
        truncated: len > buf.len() || msg.msg_flags & libc::MSG_TRUNC != 0,
        fds,
    })
}

/// A non-blocking, close-on-exec eventfd used as a doorbell.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers and returns a new descriptor.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: fd is new and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd's counter. A full counter (EAGAIN) already means "wake up".
pub fn eventfd_signal(fd: BorrowedFd<'_>) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Resets an eventfd's counter so the next poll waits again.
pub fn eventfd_drain(fd: BorrowedFd<'_>) {
    let mut count: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64; the fd is non-blocking.
    unsafe { libc::read(fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
}

/// poll(2), retried on EINTR. `timeout` None waits without limit.
pub fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as libc::c_int);
    loop {
        // SAFETY: fds is a valid, writable array of fds.len() pollfd structures.
        let ret = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        match cvt(ret) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other.map(|n| n as usize),
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
