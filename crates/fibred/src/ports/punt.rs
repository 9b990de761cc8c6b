//! Punt paths: the host's own traffic on a port link, through a TAP device per port in
//! fibred's network namespace (as VPP's linux-cp and grout do), so that routing daemons, SSH
//! and DHCP run unchanged beside fibre.
//!
//! A port link gets one with `punt TAPNAME` (`fibre link add NAME type port dev HOSTIF [io
//! KIND] punt TAPNAME`; `FIBRE_PORT::PUNT` over rtnetlink; `punt = "TAPNAME"` in a
//! configuration file's `[[port]]`); none by default, since a TAP is an interface of the
//! host that the user names and owns. A TAP port (`type tap`) has none: its device is the
//! host's already. What the punt path is made of, and who keeps it:
//! - The TAP is created when the link is made (a TAP that cannot be made refuses the link:
//!   nothing half-built stays), with the link's MAC, so that frames pass between the host
//!   and the port unchanged at L2, and goes when the link goes (the worker closes it).
//! - Its MTU, MAC and addresses follow the link's on every publish ([`Punts::sync`]): each of
//!   fibre's addresses on the link (IPv4 with its broadcast, IPv6 link-local and global) is
//!   added to the TAP over the kernel's rtnetlink, so that the host's sockets bind to it and
//!   the host has the connected routes through it; an address fibre loses is deleted from the
//!   TAP. IPv6 addresses are added with `nodad`: fibre owns them and the host must not hold
//!   them tentative. Lifetimes are fibre's business (it deletes an expired address).
//! - Its carrier is the port's host interface's (the worker sets it, see fibre-io's worker).
//! - The host interface's own stack is told to ignore it while the link is bound (the values
//!   before are restored when it goes): with AF_PACKET the host's kernel receives every frame
//!   beside the port, and would take the router's traffic twice and answer ARP for the TAP's
//!   addresses. `rp_filter` 1 drops the IPv4 packets there (their way back is the TAP), unless
//!   `net.ipv4.conf.all.rp_filter` is 2, which takes precedence; `arp_ignore` 8 answers no ARP;
//!   `disable_ipv6` 1 stops IPv6. They are restored when fibred stops too (not when it is
//!   killed: a restart then takes fibre's values for the host's).
//!
//! The data path (fibre-dataplane's `Tx::punt`, fibre-io's worker): the router's own traffic
//! that the data plane does not answer (anything but echo requests, ARP requests and
//! neighbour solicitations for its addresses: TCP, UDP, other ICMP, other protocols) goes to
//! the TAP of the link it came in on as received, and so do copies of ARP replies and
//! neighbour advertisements, from which the host learns the neighbours it resolves itself
//! (its requests and solicitations leave by the port like all its frames). What the host
//! sends on the TAP leaves by the port unchanged, not routed by fibre.
//!
//! Who calls what: only the writer thread, through the [`super::Binder`].

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};

use fibre_fib::types::{ifa_flags, Address, Family, PortIo, PortSpec, ReqFlags, RtError};
use fibre_fib::{Errno, Fib};
use fibre_io::{tap, Port};
use fibre_netlink::message::types as mt;
use fibre_proto::convert::{self, Request};

/// The kernel's answers are short (an ACK, or an error quoting our request).
const ANSWER_BYTES: usize = 8 << 10;

/// The host's stack settings on a punt path's host interface: (path under
/// /proc/sys/net with `{}` for the interface, value).
const HOST_IGNORES: [(&str, &str); 3] = [
    ("ipv4/conf/{}/rp_filter", "1"),
    ("ipv4/conf/{}/arp_ignore", "8"),
    ("ipv6/conf/{}/disable_ipv6", "1"),
];

/// One link's TAP as last given the link's state.
struct HostTap {
    link: u32,
    name: String,
    /// The TAP's index in the host.
    index: u32,
    mac: Option<[u8; 6]>,
    mtu: Option<u32>,
    /// Addresses on the TAP: fibre's, by local address and prefix length.
    copied: Vec<(IpAddr, u8)>,
    /// The host interface's settings before [`HOST_IGNORES`]: (file, value).
    saved: Vec<(String, String)>,
}

/// The punt paths' host side.
#[derive(Default)]
pub(super) struct Punts {
    /// A NETLINK_ROUTE socket of fibred's namespace, opened with the first TAP.
    nl: Option<OwnedFd>,
    seq: u32,
    taps: Vec<HostTap>,
}

/// Creates the punt TAP `spec` names, if any, with the port's MAC `mac`.
pub(super) fn open(spec: &PortSpec, mac: Option<&[u8]>) -> Result<Option<Port>, RtError> {
    let Some(name) = &spec.punt else {
        return Ok(None);
    };
    if spec.io == PortIo::Tap {
        return Err(RtError::msg(
            Errno::EINVAL,
            "a TAP port has no punt path: its device is the host's",
        ));
    }
    let config = tap::Config {
        mac: mac.and_then(|m| m.try_into().ok()),
        ..tap::Config::default()
    };
    tap::open(name, &config)
        .map(Some)
        .map_err(|e| super::open_error(&e))
}

impl Punts {
    /// Link `link`'s punt TAP `tap` (created by [`open`]) is the host's now: the host
    /// interface `spec.dev` is told to ignore what the port takes.
    pub(super) fn add(&mut self, link: u32, spec: &PortSpec, tap: &Port) {
        let mut saved = Vec::new();
        for (path, value) in HOST_IGNORES {
            let file = format!("/proc/sys/net/{}", path.replace("{}", &spec.dev));
            let before = std::fs::read_to_string(&file).map(|s| s.trim().to_string());
            match before.and_then(|b| std::fs::write(&file, value).map(|()| b)) {
                Ok(b) => saved.push((file, b)),
                Err(e) => {
                    tracing::warn!(dev = %spec.dev, file, error = %e, "host interface not ignored by the host's stack")
                }
            }
        }
        tracing::info!(link, tap = %tap.dev, "punt path made");
        self.taps.push(HostTap {
            link,
            name: tap.dev.clone(),
            index: tap.ifindex,
            mac: None,
            mtu: None,
            copied: Vec::new(),
            saved,
        });
    }

    /// Link `link` is gone: its host interface's settings are restored (its TAP goes with the
    /// worker's port).
    pub(super) fn remove(&mut self, link: u32) {
        self.taps.retain(|t| {
            if t.link == link {
                t.restore();
            }
            t.link != link
        });
    }

    /// Gives each TAP its link's MAC, MTU and addresses, where they changed.
    pub(super) fn sync(&mut self, fib: &Fib) {
        if self.taps.is_empty() {
            return;
        }
        let links = fib.links();
        let addrs = fib.addrs(None);
        let mut taps = std::mem::take(&mut self.taps);
        for t in &mut taps {
            let Some(l) = links.iter().find(|l| l.ifindex == t.link) else {
                continue;
            };
            let mac = l.address.as_deref().and_then(|m| m.try_into().ok());
            if let Some(m) = mac.filter(|m| t.mac != Some(*m)) {
                match tap::set_address(&t.name, m) {
                    Ok(()) => t.mac = Some(m),
                    Err(e) => tracing::warn!(tap = %t.name, error = %e, "punt TAP's MAC not set"),
                }
            }
            if let Some(mtu) = l.mtu.filter(|m| t.mtu != Some(*m)) {
                match tap::set_mtu(&t.name, mtu) {
                    Ok(()) => t.mtu = Some(mtu),
                    Err(e) => {
                        tracing::warn!(tap = %t.name, mtu, error = %e, "punt TAP's MTU not set")
                    }
                }
            }
            let want: Vec<&Address> = addrs.iter().filter(|a| a.ifindex == t.link).collect();
            let key = |a: &Address| a.local.or(a.address).map(|ip| (ip, a.prefixlen));
            for a in &want {
                let Some(k) = key(a).filter(|k| !t.copied.contains(k)) else {
                    continue;
                };
                let copy = host_copy(a, t.index);
                match self.kernel(&Request::NewAddr(copy, ReqFlags::ADD)) {
                    Ok(()) => t.copied.push(k),
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => t.copied.push(k),
                    Err(e) => {
                        tracing::warn!(tap = %t.name, addr = %k.0, error = %e, "address not copied to the punt TAP")
                    }
                }
            }
            let gone: Vec<(IpAddr, u8)> = t
                .copied
                .iter()
                .filter(|k| !want.iter().any(|a| key(a) == Some(**k)))
                .copied()
                .collect();
            for (ip, len) in gone {
                let mut a = Address::new(t.index, ip, len);
                a.address = Some(ip);
                match self.kernel(&Request::DelAddr(a)) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {}
                    Err(e) => {
                        tracing::warn!(tap = %t.name, addr = %ip, error = %e, "address not removed from the punt TAP");
                        continue;
                    }
                }
                t.copied.retain(|k| *k != (ip, len));
            }
        }
        self.taps = taps;
    }

    /// Sends `r` to the kernel of fibred's namespace and waits for its answer.
    fn kernel(&mut self, r: &Request) -> io::Result<()> {
        let fd = match &self.nl {
            Some(fd) => fd,
            None => self
                .nl
                .insert(crate::sys::rtnetlink_socket(&[], ANSWER_BYTES)?),
        };
        self.seq = self.seq.wrapping_add(1);
        let bytes = convert::request_message(r, self.seq, 0).to_bytes();
        crate::sys::send(fd.as_fd(), &bytes, &[], 0)?;
        let mut buf = vec![0u8; ANSWER_BYTES];
        loop {
            let got = crate::sys::recv(fd.as_fd(), &mut buf, 0)?;
            let msg = &buf[..got.len.min(buf.len())];
            // nlmsghdr: length, type, flags, sequence, port; then NLMSG_ERROR's error.
            let field = |at: usize| msg.get(at..at + 4).and_then(|b| b.try_into().ok());
            let (Some(ty), Some(seq), Some(err)) = (
                msg.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]])),
                field(8).map(u32::from_ne_bytes),
                field(16).map(i32::from_ne_bytes),
            ) else {
                return Err(io::Error::from_raw_os_error(libc::EPROTO));
            };
            if ty != mt::NLMSG_ERROR || seq != self.seq {
                continue;
            }
            return match err {
                0 => Ok(()),
                e => Err(io::Error::from_raw_os_error(-e)),
            };
        }
    }
}

impl Drop for Punts {
    /// fibred stops: the host interfaces' settings are restored, so that a restart finds
    /// (and later restores) the host's own.
    fn drop(&mut self) {
        for t in &self.taps {
            t.restore();
        }
    }
}

impl HostTap {
    fn restore(&self) {
        for (file, value) in &self.saved {
            if let Err(e) = std::fs::write(file, value) {
                tracing::warn!(file, error = %e, "host interface setting not restored");
            }
        }
    }
}

/// Fibre's address `a` as the host's copy on the TAP with index `index`: the same address,
/// prefix, broadcast and scope, the TAP's own label, no lifetime, and for IPv6 no DAD.
fn host_copy(a: &Address, index: u32) -> Address {
    let mut c = a.clone();
    c.ifindex = index;
    c.label = None;
    c.valid_lft = None;
    c.preferred_lft = None;
    c.flags = a.flags & ifa_flags::NOPREFIXROUTE;
    if a.family == Family::Inet6 {
        c.flags |= ifa_flags::NODAD;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_copy_is_fibres_address_on_the_tap() {
        let mut a = Address::new(3, "2001:db8::1".parse().unwrap(), 64);
        a.label = Some("p0".into());
        a.valid_lft = Some(30);
        a.flags = ifa_flags::PERMANENT | ifa_flags::NOPREFIXROUTE;
        let c = host_copy(&a, 17);
        assert_eq!((c.ifindex, c.local, c.prefixlen), (17, a.local, 64));
        assert_eq!(c.flags, ifa_flags::NOPREFIXROUTE | ifa_flags::NODAD);
        assert_eq!((c.label, c.valid_lft), (None, None));
        let mut v4 = Address::new(3, "10.0.1.1".parse().unwrap(), 24);
        v4.broadcast = Some("10.0.1.255".parse().unwrap());
        let c = host_copy(&v4, 17);
        assert_eq!((c.flags, c.broadcast), (0, v4.broadcast));
    }

    #[test]
    fn a_tap_port_has_no_punt_path() {
        let spec = PortSpec {
            dev: "t0".into(),
            io: PortIo::Tap,
            punt: Some("cp0".into()),
        };
        assert_eq!(
            open(&spec, None).err().map(|e| e.errno),
            Some(Errno::EINVAL)
        );
        let none = PortSpec { punt: None, ..spec };
        assert!(matches!(open(&none, None), Ok(None)));
    }
}
