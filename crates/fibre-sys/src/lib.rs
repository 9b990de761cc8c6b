//! Thin, safe wrappers over the Linux system calls fibre's daemon (fibred) and its ring
//! transport (fibre-ring) make beyond std: AF_UNIX SOCK_SEQPACKET and SOCK_DGRAM sockets with
//! SCM_RIGHTS and peer credentials, poll(2), eventfds, delivery of termination signals to
//! one thread (sigwait), and, for the CLI, a secret read from a terminal with its echo off
//! (getpass).
//!
//! Invariants: every wrapper checks its result and owns or borrows its descriptors through
//! `OwnedFd`/`BorrowedFd`, so no descriptor leaks or is used after close; descriptors a peer
//! passes with a message are taken into ownership (and closed when dropped), so a peer cannot
//! make a receiver leak descriptors; sends never raise SIGPIPE (MSG_NOSIGNAL); EINTR is
//! retried. Any thread may call any function.

#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
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

    /// The path or abstract name, for logs (and as a key: see [`describe_name`]).
    pub fn describe(&self) -> String {
        let n = (self.len as usize).saturating_sub(size_of::<libc::sa_family_t>());
        let raw: Vec<u8> = self.addr.sun_path[..n.min(self.addr.sun_path.len())]
            .iter()
            .map(|c| *c as u8)
            .collect();
        describe_name(&raw)
    }
}

/// A socket's name as its `sun_path` bytes hold it: `@` and the abstract name, or the path.
pub fn describe_name(raw: &[u8]) -> String {
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

/// Calls `f` with the name ([`describe_name`]) of every bound AF_UNIX datagram socket of this
/// network namespace and whether datagrams wait in its receive queue, as sock_diag reports
/// them (UDIAG_SHOW_RQLEN: for a datagram socket, the length of the first waiting one).
pub fn unix_dgram_queues(mut f: impl FnMut(String, bool)) -> io::Result<()> {
    const NETLINK_SOCK_DIAG: libc::c_int = 4;
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const UDIAG_SHOW_NAME: u32 = 0x01;
    const UDIAG_SHOW_RQLEN: u32 = 0x10;
    const UNIX_DIAG_NAME: u16 = 0;
    const UNIX_DIAG_RQLEN: u16 = 4;
    // SAFETY: socket() takes no pointers; the descriptor is new and owned here.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    })?;
    // SAFETY: fd was just returned by socket() and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // nlmsghdr, then unix_diag_req: family, protocol, pad, states, ino, show, cookie[2].
    let mut req = Vec::with_capacity(40);
    req.extend_from_slice(&40u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&[0; 8]);
    req.extend_from_slice(&[libc::AF_UNIX as u8, 0, 0, 0]);
    req.extend_from_slice(&u32::MAX.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(&(UDIAG_SHOW_NAME | UDIAG_SHOW_RQLEN).to_ne_bytes());
    req.extend_from_slice(&[0; 8]);
    send(fd.as_fd(), &req, &[], 0)?;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = recv(fd.as_fd(), &mut buf, 0)?.len.min(buf.len());
        let mut off = 0;
        while off + 16 <= n {
            let word =
                |at: usize| u32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
            let len = word(off) as usize;
            let kind = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
            if len < 16 || off + len > n {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "sock_diag framing",
                ));
            }
            match kind as libc::c_int {
                libc::NLMSG_DONE => return Ok(()),
                libc::NLMSG_ERROR => {
                    let errno = -(word(off + 16) as i32);
                    return Err(io::Error::from_raw_os_error(errno));
                }
                _ => {}
            }
            // unix_diag_msg: family, type, state, pad, ino, cookie[2]; then attributes.
            let msg = &buf[off + 16..off + len];
            if msg.len() >= 16 && msg[1] == libc::SOCK_DGRAM as u8 {
                let (mut name, mut waiting) = (None, false);
                let mut at = 16;
                while at + 4 <= msg.len() {
                    let alen = u16::from_ne_bytes([msg[at], msg[at + 1]]) as usize;
                    let atype = u16::from_ne_bytes([msg[at + 2], msg[at + 3]]);
                    if alen < 4 || at + alen > msg.len() {
                        break;
                    }
                    let value = &msg[at + 4..at + alen];
                    match atype {
                        UNIX_DIAG_NAME => name = Some(value),
                        UNIX_DIAG_RQLEN if value.len() >= 4 => {
                            waiting = value[..4] != [0; 4];
                        }
                        _ => {}
                    }
                    at += alen.next_multiple_of(4);
                }
                if let Some(name) = name {
                    f(describe_name(name), waiting);
                }
            }
            off += len.next_multiple_of(4);
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
pub fn seqpacket_listen(path: &Path, backlog: i32) -> io::Result<OwnedFd> {
    let fd = socket(libc::SOCK_SEQPACKET)?;
    bind(&fd, path)?;
    // SAFETY: fd is a live, bound socket.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
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

/// Sends one datagram to `to` (a SOCK_DGRAM peer).
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

/// One received datagram: its full length (which exceeds the buffer when truncated) and the
/// descriptors that came with it.
pub struct Received {
    pub len: usize,
    pub truncated: bool,
    pub fds: Vec<OwnedFd>,
}

/// recvmsg(2) with MSG_TRUNC (the datagram's full length is returned) and close-on-exec
/// descriptors, retried on EINTR.
///
/// # Safety
/// Every pointer in `msg` must be valid for writes of the length it is given with.
unsafe fn recvmsg(
    fd: BorrowedFd<'_>,
    msg: &mut libc::msghdr,
    flags: libc::c_int,
) -> io::Result<usize> {
    loop {
        // SAFETY: the caller's promise about msg; fd is live.
        let ret = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                msg,
                flags | libc::MSG_TRUNC | libc::MSG_CMSG_CLOEXEC,
            )
        };
        match cvt_size(ret) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
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
    // SAFETY: msg points at iov (over buf) and cbuf, both valid for writes of the given sizes.
    let len = unsafe { recvmsg(fd, &mut msg, flags) }?;
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

/// Takes an exclusive advisory lock (`flock`) on `file` without waiting: `Ok(false)` when
/// another open file description holds it. The lock lasts while `file` is open.
pub fn try_lock_exclusive(file: &std::fs::File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor the caller keeps open; no memory is passed.
    match cvt(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

/// Asks the kernel to attach the sender's credentials (SCM_CREDENTIALS) to every datagram
/// this socket receives, whether or not the sender sent them.
pub fn set_pass_credentials(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_int_option(fd, libc::SO_PASSCRED, 1)
}

/// setsockopt(2) of an int option at SOL_SOCKET.
fn set_int_option(fd: BorrowedFd<'_>, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: v is a valid c_int for the duration of the call.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Sets a socket's send buffer to `bytes`: beyond net.core.wmem_max when the process may
/// (SO_SNDBUFFORCE, CAP_NET_ADMIN), else as far as wmem_max allows (SO_SNDBUF).
pub fn set_send_buffer(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int_option(fd, libc::SO_SNDBUFFORCE, v).or_else(|_| set_int_option(fd, libc::SO_SNDBUF, v))
}

/// One datagram received by [`recv_from_credentials`].
pub struct FromPeer {
    /// Its full length (more than the buffer when truncated).
    pub len: usize,
    pub from: UnixAddr,
    /// The sender's credentials as the kernel checked them (SCM_CREDENTIALS); `None` when the
    /// socket does not have [`set_pass_credentials`].
    pub credentials: Option<Credentials>,
}

/// Receives one datagram without waiting, with its sender's address and credentials.
/// Descriptors a sender attached are closed.
pub fn recv_from_credentials(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<FromPeer> {
    // SAFETY: sockaddr_un is plain old data.
    let mut addr: libc::sockaddr_un = unsafe { zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one ucred and MAX_FDS descriptors, u64-aligned as cmsghdr requires.
    let mut cbuf = [0u64; 16];
    // SAFETY: msghdr is plain old data.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_un).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_un>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 16]>() as _;
    // SAFETY: msg points at addr, iov (over buf) and cbuf, valid for writes of the sizes given.
    let len = unsafe { recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) }?;
    let mut credentials = None;
    // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_FIRSTHDR/NXTHDR only walk
    // inside that buffer; SCM_CREDENTIALS data is one ucred, SCM_RIGHTS data descriptors the
    // kernel installed for us (taken into ownership and closed here).
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let data_len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
            if (*cmsg).cmsg_level == libc::SOL_SOCKET {
                if (*cmsg).cmsg_type == libc::SCM_CREDENTIALS
                    && data_len >= size_of::<libc::ucred>()
                {
                    let c = (libc::CMSG_DATA(cmsg) as *const libc::ucred).read_unaligned();
                    credentials = Some(Credentials {
                        pid: c.pid as u32,
                        uid: c.uid,
                        gid: c.gid,
                    });
                } else if (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                    for i in 0..data_len / size_of::<RawFd>() {
                        drop(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(FromPeer {
        len,
        from: UnixAddr {
            addr,
            len: msg.msg_namelen,
        },
        credentials,
    })
}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The effective group id of this process.
pub fn effective_gid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

/// A group of the group database (/etc/group or NSS) by name or number: its id and the user
/// ids of the members it lists (names no user has are left out).
pub fn group_members(group: &str) -> io::Result<(u32, Vec<u32>)> {
    let name = std::ffi::CString::new(group)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "group name contains NUL"))?;
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: group is plain old data.
    let mut grp: libc::group = unsafe { zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; buf outlives the uses of grp's strings below.
    let r = unsafe {
        match group.parse::<u32>() {
            Ok(gid) => libc::getgrgid_r(
                gid,
                &mut grp,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            ),
            Err(_) => libc::getgrnam_r(
                name.as_ptr(),
                &mut grp,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            ),
        }
    };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    if found.is_null() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no group {group:?}"),
        ));
    }
    let mut names = Vec::new();
    // SAFETY: getgr*_r filled grp; gr_mem is a NULL-terminated array of C strings in buf.
    unsafe {
        let mut m = grp.gr_mem;
        while !m.is_null() && !(*m).is_null() {
            names.push(std::ffi::CStr::from_ptr(*m).to_owned());
            m = m.add(1);
        }
    }
    let uids = names.iter().filter_map(|n| user_id(n)).collect();
    Ok((grp.gr_gid, uids))
}

fn user_id(name: &std::ffi::CStr) -> Option<u32> {
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: passwd is plain old data.
    let mut pw: libc::passwd = unsafe { zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call.
    let r = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    (r == 0 && !found.is_null()).then_some(pw.pw_uid)
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

/// An eventfd used as a level-triggered wake-up between threads.
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        eventfd().map(EventFd)
    }

    pub fn signal(&self) {
        eventfd_signal(self.0.as_fd());
    }

    pub fn drain(&self) {
        eventfd_drain(self.0.as_fd());
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
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

/// The name of network interface `index` in the calling thread's network namespace
/// (if_indextoname(3)); ENXIO when no interface has that index.
pub fn interface_name(index: u32) -> io::Result<String> {
    let mut buf = [0u8; libc::IF_NAMESIZE];
    // SAFETY: buf has the IF_NAMESIZE bytes if_indextoname writes at most (name and NUL).
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(io::Error::last_os_error());
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..len]).into_owned())
}

/// A NETLINK_ROUTE socket of the calling thread's network namespace, joined to the rtnetlink
/// multicast `groups` (RTNLGRP_* numbers), with a receive buffer of `rcvbuf` bytes
/// (SO_RCVBUFFORCE, which passes net.core.rmem_max for a privileged caller; else SO_RCVBUF,
/// which the kernel caps there).
pub fn rtnetlink_socket(groups: &[u32], rcvbuf: usize) -> io::Result<OwnedFd> {
    const SOL_NETLINK: libc::c_int = 270;
    const NETLINK_ADD_MEMBERSHIP: libc::c_int = 1;
    // SAFETY: socket() takes no pointers; the descriptor is new and owned here.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    })?;
    // SAFETY: fd was just returned by socket() and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let size = rcvbuf.min(i32::MAX as usize / 2) as libc::c_int;
    if setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, size).is_err() {
        setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, size)?;
    }
    // SAFETY: an all-zero sockaddr_nl is valid (family set below, port 0: the kernel picks).
    let mut addr: libc::sockaddr_nl = unsafe { zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: addr is a valid sockaddr_nl of the given size; fd is a live socket.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    })?;
    for &g in groups {
        setsockopt_int(&fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, g as libc::c_int)?;
    }
    Ok(fd)
}

fn setsockopt_int(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Moves the calling thread into the network namespace at `path` (a file under
/// /var/run/netns, or /proc/PID/ns/net); sockets it opens afterwards belong to that namespace.
pub fn enter_netns(path: &Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    // SAFETY: setns takes a live descriptor and a flag; it changes only this thread.
    cvt(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// Pins the calling thread to CPU `cpu` (sched_setaffinity).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain old data, zero is its empty set; CPU_SET writes inside it
    // (`cpu` is below CPU_SETSIZE); sched_setaffinity reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    cvt(rc).map(|_| ())
}

/// getpass(3) on standard input, as glibc runs it when there is no controlling terminal to
/// open: `prompt` on stderr, then one line of stdin, its newline removed; when stdin is a
/// terminal its echo is off while the line is typed (and a newline goes to stderr after).
pub fn read_secret(prompt: &str) -> io::Result<Vec<u8>> {
    use std::io::{BufRead, Write};
    let mut err = io::stderr();
    err.write_all(prompt.as_bytes())?;
    err.flush()?;
    let stdin = io::stdin();
    let fd = stdin.as_raw_fd();
    // SAFETY: termios is plain data; tcgetattr fills it or fails (not a terminal), and it
    // is read only after a success.
    let saved = unsafe {
        let mut t: libc::termios = zeroed();
        (libc::tcgetattr(fd, &mut t) == 0).then_some(t)
    };
    if let Some(t) = saved {
        let mut quiet = t;
        quiet.c_lflag &= !libc::ECHO;
        // SAFETY: `quiet` is a termios tcgetattr filled, with one flag cleared.
        if unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, &quiet) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let mut line = Vec::new();
    let read = stdin.lock().read_until(b'\n', &mut line);
    if let Some(t) = saved {
        // SAFETY: `t` is the state tcgetattr returned, restored as it was.
        unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, &t) };
        let _ = err.write_all(b"\n");
    }
    read?;
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn paths_too_long_or_with_nul_are_refused() {
        let long = PathBuf::from("/".repeat(200));
        assert!(UnixAddr::from_path(&long).is_err());
        assert!(UnixAddr::from_path(Path::new("/tmp/a\0b")).is_err());
        let a = UnixAddr::from_path(Path::new("/run/fibre/x.sock")).unwrap();
        assert!(a.is_named());
        assert_eq!(a.describe(), "/run/fibre/x.sock");
    }

    /// Descriptors sent with a datagram arrive owned, and the datagram's real length is
    /// reported when the buffer is too small.
    #[test]
    fn descriptors_and_truncation_survive_a_round_trip() {
        let (a, b) = UnixDatagram::pair().unwrap();
        let e = EventFd::new().unwrap();
        send(a.as_fd(), b"hello", &[e.fd()], 0).unwrap();
        let mut buf = [0u8; 3];
        let got = recv(b.as_fd(), &mut buf, 0).unwrap();
        assert_eq!((got.len, got.truncated, &buf), (5, true, b"hel"));
        assert_eq!(got.fds.len(), 1);
        // The received descriptor is the same eventfd: signalling it wakes a poll on ours.
        eventfd_signal(got.fds[0].as_fd());
        let mut fds = [pollfd(e.fd(), libc::POLLIN)];
        assert_eq!(poll(&mut fds, Some(Duration::ZERO)).unwrap(), 1);
        e.drain();
        let mut fds = [pollfd(e.fd(), libc::POLLIN)];
        assert_eq!(poll(&mut fds, Some(Duration::ZERO)).unwrap(), 0);
    }

    #[test]
    fn peer_credentials_are_ours_on_a_local_pair() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let c = peer_credentials(a.as_fd()).unwrap();
        assert_eq!(c.pid, std::process::id());
        set_nonblocking(a.as_fd(), true).unwrap();
        let e = recv(a.as_fd(), &mut [0u8; 4], 0).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    /// SCM_CREDENTIALS arrive with every datagram once SO_PASSCRED is on, naming the sender
    /// as the kernel knows it, with the sender's address.
    #[test]
    fn datagrams_carry_their_senders_credentials() {
        let dir = std::env::temp_dir().join(format!("fibre-sys-cred-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let server = dgram_bind(&dir.join("s")).unwrap();
        set_pass_credentials(server.as_fd()).unwrap();
        let client = dgram_bind(&dir.join("c")).unwrap();
        let to = UnixAddr::from_path(&dir.join("s")).unwrap();
        send_to(client.as_fd(), b"hi", &to, 0).unwrap();
        let mut buf = [0u8; 8];
        let got = recv_from_credentials(server.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..got.len], b"hi");
        assert_eq!(got.from.describe(), dir.join("c").display().to_string());
        let c = got.credentials.expect("credentials");
        assert_eq!(
            (c.pid, c.uid, c.gid),
            (std::process::id(), effective_uid(), effective_gid())
        );
        let e = recv_from_credentials(server.as_fd(), &mut buf)
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// sock_diag tells whether datagrams wait for a socket, by its name.
    #[test]
    fn unix_dgram_queues_show_unread_datagrams() {
        let dir = std::env::temp_dir().join(format!("fibre-sys-diag-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let reader = dgram_bind(&dir.join("r")).unwrap();
        let writer = dgram_bind(&dir.join("w")).unwrap();
        let name = dir.join("r").display().to_string();
        let waiting = || {
            let mut found = None;
            unix_dgram_queues(|n, q| {
                if n == name {
                    found = Some(q);
                }
            })
            .unwrap();
            found
        };
        assert_eq!(waiting(), Some(false));
        let to = UnixAddr::from_path(&dir.join("r")).unwrap();
        send_to(writer.as_fd(), b"unread", &to, 0).unwrap();
        assert_eq!(waiting(), Some(true));
        recv(reader.as_fd(), &mut [0u8; 16], 0).unwrap();
        assert_eq!(waiting(), Some(false));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn groups_are_found_by_name_or_number() {
        assert_eq!(group_members("root").unwrap().0, 0);
        assert_eq!(group_members("0").unwrap().0, 0);
        let e = group_members("fibre-no-such-group").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
