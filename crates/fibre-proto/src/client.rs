//! Reaching fibred over its Unix socket: where it listens when nothing says otherwise
//! ([`default_socket`], which the daemon binds and clients connect to), and a minimal
//! netlink-over-SOCK_SEQPACKET client, what the CLI's monitor, the tests, the benchmarks and
//! simple tools need to talk to fibred without the ring. One datagram per call.

use fibre_sys as sys;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where fibred listens when nothing says otherwise: $FIBRE_SOCKET, else
/// $XDG_RUNTIME_DIR/fibre/fibred.sock, else /run/fibre/fibred.sock.
pub fn default_socket() -> PathBuf {
    if let Some(p) = std::env::var_os("FIBRE_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|p| !p.is_empty())
        .map(|d| PathBuf::from(d).join("fibre"))
        .unwrap_or_else(|| PathBuf::from("/run/fibre"));
    dir.join("fibred.sock")
}

pub struct SocketClient {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl SocketClient {
    pub fn connect(path: &Path) -> io::Result<SocketClient> {
        Ok(SocketClient {
            fd: sys::seqpacket_connect(path)?,
            buf: Vec::new(),
        })
    }

    /// Sends one datagram (one or more netlink messages).
    pub fn send(&mut self, datagram: &[u8]) -> io::Result<()> {
        sys::send(self.fd.as_fd(), datagram, &[], 0).map(|_| ())
    }

    /// Receives one datagram, waiting for it; an empty slice means the daemon closed.
    pub fn recv(&mut self) -> io::Result<&[u8]> {
        let len = sys::next_len(self.fd.as_fd(), 0)?;
        self.buf.resize(len, 0);
        let got = sys::recv(self.fd.as_fd(), &mut self.buf, 0)?;
        Ok(&self.buf[..got.len.min(len)])
    }

    /// Receives one datagram if one arrives within `timeout_ms` (negative: no limit).
    pub fn recv_timeout(&mut self, timeout_ms: i32) -> io::Result<Option<&[u8]>> {
        let mut fds = [sys::pollfd(self.fd.as_fd(), libc::POLLIN)];
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        if sys::poll(&mut fds, timeout)? == 0 {
            return Ok(None);
        }
        self.recv().map(Some)
    }
}

impl SocketClient {
    /// A second handle on the same connection, for a thread that only sends.
    pub fn try_clone(&self) -> io::Result<SocketClient> {
        Ok(SocketClient {
            fd: self.fd.try_clone()?,
            buf: Vec::new(),
        })
    }
}
