//! Each port kind against the kernel, in network namespaces: frames a peer sends arrive at the
//! port byte for byte and in order, frames the port sends arrive at the peer byte for byte, a
//! burst larger than the rings is counted rather than lost silently (by the port, or for a
//! TAP by the kernel on the device), and the host interface removed under an open port gives
//! `Gone` without a hang.
//!
//! The port's side of a veth pair lives in one namespace, the peer's in another, so nothing of
//! the machine's own namespace is touched and concurrent runs do not meet. The peer is a raw
//! AF_PACKET socket (not the kernel's stack), so the frames are exactly those written, and
//! only frames of the local experimental EtherType are counted (the kernels' own IPv6
//! chatter is ignored). For TAP the peer is a raw socket on the TAP device itself.
//!
//! Needs root and `ip netns`; each test says why and passes without them.

mod common;

use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use common::{can_run, ip, Ns};
use fibre_io::{packet, tap, xdp, Kind, Port, PortError};
use fibre_wire::checksum;

/// IEEE 802 local experimental EtherType 1: what the test frames carry.
const TEST_ETHERTYPE: u16 = 0x88B5;

/// Where a test runs: namespace `a` holds the port's interface `port`; for AF_PACKET and
/// AF_XDP a veth pair joins it to `peer` in namespace `b`, for TAP the port creates `port`.
struct Lab {
    a: Ns,
    b: Option<Ns>,
}

impl Lab {
    fn new(kind: Kind) -> Lab {
        let a = Ns::new();
        if kind == Kind::Tap {
            return Lab { a, b: None };
        }
        let b = Ns::new();
        ip(&[
            "-n", &a.0, "link", "add", "port", "type", "veth", "peer", "name", "peer", "netns",
            &b.0,
        ]);
        ip(&["-n", &a.0, "link", "set", "port", "up"]);
        ip(&["-n", &b.0, "link", "set", "peer", "up"]);
        Lab { a, b: Some(b) }
    }

    /// The far side's socket: on the veth peer, or on the TAP device itself.
    fn far_side(&self) -> Raw {
        match &self.b {
            Some(b) => b.run(|| Raw::open("peer")),
            None => self.a.run(|| Raw::open("port")),
        }
    }
}

/// A raw AF_PACKET socket on one interface: the far side of a test.
struct Raw(OwnedFd);

impl Raw {
    /// Opens on `dev` in the calling thread's namespace.
    fn open(dev: &str) -> Raw {
        let proto = 0x0003u16.to_be() as i32;
        // SAFETY: socket(2) takes no pointers.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = std::ffi::CString::new(dev).unwrap();
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(ifindex, 0, "no {dev}");
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = 0x0003u16.to_be();
        sll.sll_ifindex = ifindex as i32;
        let set = |level, name, v: i32| {
            // SAFETY: an int option.
            let r = unsafe {
                libc::setsockopt(fd.as_raw_fd(), level, name, (&v as *const i32).cast(), 4)
            };
            assert_eq!(
                r,
                0,
                "setsockopt {name}: {}",
                std::io::Error::last_os_error()
            );
        };
        set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 32 << 20);
        set(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 32 << 20);
        set(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1);
        // SAFETY: `sll` outlives the call.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        Raw(fd)
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is valid for reads of its length.
        let r = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            r,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// The test frames received until `want` of them or `timeout`.
    fn collect(&self, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while got.len() < want && Instant::now() < deadline {
            let mut pfd = libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 20) };
            // SAFETY: `buf` is valid for writes of its length.
            let r = unsafe {
                libc::recv(
                    self.0.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 && is_test_frame(&buf[..r as usize]) {
                got.push(buf[..r as usize].to_vec());
            }
        }
        got
    }
}

fn is_test_frame(f: &[u8]) -> bool {
    f.len() >= 14 && f[12..14] == TEST_ETHERTYPE.to_be_bytes()
}

/// Test frame `seq`: broadcast, the EtherType, the sequence number, a pattern; sizes vary
/// from 60 to 1514 bytes.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0xFF; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend((f.len()..len).map(|i| (i as u32 ^ seq) as u8));
    f
}

fn size(i: u32) -> usize {
    60 + (i as usize * 37) % (1514 - 60)
}

/// The test frames the port receives until `want` of them or `timeout`.
fn port_collect(port: &mut Port, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        let mut frames: [&[u8]; 64] = [&[]; 64];
        let n = port.rx.recv(&mut frames).expect("recv");
        got.extend(
            frames[..n]
                .iter()
                .filter(|f| is_test_frame(f))
                .map(|f| f.to_vec()),
        );
        if n == 0 {
            let mut pfd = libc::pollfd {
                fd: port.rx.fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 10) };
        }
    }
    port.rx.release();
    got
}

/// Opens a port on the veth pair's `port` side (or, for TAP, creates TAP `port`) in `ns`;
/// `small` rings for a burst to overflow.
fn open(kind: Kind, ns: &Ns, small: bool) -> Port {
    ns.run(|| match kind {
        _ if !small => Port::open(kind, "port"),
        Kind::AfPacket => packet::open(
            "port",
            &packet::Config {
                block_size: 4096,
                block_count: 4,
                tx_slots: 64,
                ..packet::Config::default()
            },
        ),
        Kind::AfXdp => xdp::open(
            "port",
            &xdp::Config {
                rx_frames: 64,
                tx_frames: 64,
                ..xdp::Config::default()
            },
        ),
        Kind::Tap => tap::open("port", &tap::Config::default()),
    })
    .unwrap_or_else(|e| panic!("open {}: {e}", kind.name()))
}

fn frames_both_ways(kind: Kind) {
    let lab = Lab::new(kind);
    let mut port = open(kind, &lab.a, false);
    let far = lab.far_side();
    // Fewer than the default rings hold, so none may be dropped.
    const N: u32 = 40;
    let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, size(i))).collect();
    for f in &sent {
        far.send(f);
    }
    let got = port_collect(&mut port, sent.len(), Duration::from_secs(3));
    assert_eq!(got.len(), sent.len(), "{}: frames received", kind.name());
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(g, s, "{}: received frame {i} differs", kind.name());
    }
    let out: Vec<Vec<u8>> = (0..N).map(|i| frame(1000 + i, size(N - i))).collect();
    for f in &out {
        port.tx.send(f).expect("send");
    }
    port.tx.flush().expect("flush");
    let got = far.collect(out.len(), Duration::from_secs(3));
    assert_eq!(got.len(), out.len(), "{}: frames sent", kind.name());
    for (i, (g, s)) in got.iter().zip(&out).enumerate() {
        assert_eq!(g, s, "{}: sent frame {i} differs", kind.name());
    }
    let c = port.counters();
    assert!(c.rx_packets >= u64::from(N), "{c:?}");
    assert_eq!(c.tx_packets, u64::from(N), "{c:?}");
    assert_eq!(c.rx_ring_drops + c.tx_full + c.errors, 0, "{c:?}");
}

/// A burst far larger than the receive ring, sent while the port does not read: every frame
/// is either received or counted as a ring drop. Then a burst larger than the transmit ring,
/// sent without flushing: every frame is sent or counted full, and the peer sees those sent.
fn burst(kind: Kind) {
    let lab = Lab::new(kind);
    let mut port = open(kind, &lab.a, true);
    let far = lab.far_side();
    const N: u32 = 2000;
    for i in 0..N {
        far.send(&frame(i, 300));
    }
    let got = port_collect(&mut port, N as usize, Duration::from_millis(500));
    let c = port.counters();
    // A TAP has no ring of the port's: the kernel counts what its queue drops on the device.
    let dropped = if kind == Kind::Tap {
        tx_dropped(&lab.a, "port")
    } else {
        c.rx_ring_drops
    };
    assert!(
        dropped > 0,
        "{}: the burst overflowed nothing: {c:?}",
        kind.name()
    );
    assert_eq!(
        got.len() as u64 + dropped,
        u64::from(N),
        "{}: received + dropped = sent: {c:?}",
        kind.name()
    );
    let mut full = 0;
    for i in 0..N {
        match port.tx.send(&frame(i, 100)) {
            Ok(()) => {}
            Err(PortError::Full) => full += 1,
            Err(e) => panic!("send: {e}"),
        }
    }
    port.tx.flush().expect("flush");
    let c = port.counters();
    assert_eq!(c.tx_packets + c.tx_full, u64::from(N), "{c:?}");
    assert_eq!(c.tx_full, full);
    let seen = far.collect(c.tx_packets as usize, Duration::from_secs(3));
    assert_eq!(
        seen.len() as u64,
        c.tx_packets,
        "{}: the peer saw what was sent",
        kind.name()
    );
}

/// The kernel's count of frames interface `dev` in `ns` dropped on transmit (what `ip -s link`
/// shows), read from `ip -j`.
fn tx_dropped(ns: &Ns, dev: &str) -> u64 {
    let json = ip(&["-n", &ns.0, "-s", "-j", "link", "show", dev]);
    // `"tx":{"bytes":N,"packets":N,"errors":N,"dropped":N,...}`: the number after the first
    // "dropped" that follows "tx".
    let tx = &json[json.find("\"tx\"").expect("tx statistics")..];
    let rest = &tx[tx.find("\"dropped\":").expect("dropped") + 10..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().expect("a count")
}

/// The host interface deleted under an open port: `check` says `Gone`, nothing blocks, and
/// dropping the port afterwards releases what is left.
fn interface_removed(kind: Kind) {
    let lab = Lab::new(kind);
    let mut port = open(kind, &lab.a, true);
    assert_eq!(port.rx.check(), Ok(()));
    ip(&["-n", &lab.a.0, "link", "del", "port"]);
    let start = Instant::now();
    let mut pfd = libc::pollfd {
        fd: port.rx.fd().as_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, 100) };
    assert_eq!(port.rx.check(), Err(PortError::Gone), "{}", kind.name());
    let mut frames: [&[u8]; 8] = [&[]; 8];
    let r = port.rx.recv(&mut frames);
    assert!(
        matches!(r, Ok(0) | Err(PortError::Gone)),
        "{}: {r:?}",
        kind.name()
    );
    let r = port.tx.send(&frame(0, 60)).and_then(|()| port.tx.flush());
    assert!(
        matches!(r, Err(PortError::Gone | PortError::Down)),
        "{}: send on a removed interface: {r:?}",
        kind.name()
    );
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "no call may block"
    );
    drop(port);
}

/// The host interface's MTU changed, and the interface set down and up again, under an open
/// port: `mtu` follows, `check` says `Down`, then `Ok` once the carrier is back, and frames
/// flow both ways again.
fn link_flap(kind: Kind) {
    let lab = Lab::new(kind);
    let mut port = open(kind, &lab.a, false);
    let far = lab.far_side();
    assert_eq!(port.rx.mtu(), Some(1500), "{}", kind.name());
    ip(&["-n", &lab.a.0, "link", "set", "port", "mtu", "1400"]);
    assert_eq!(port.rx.mtu(), Some(1400), "{}", kind.name());
    ip(&["-n", &lab.a.0, "link", "set", "port", "down"]);
    assert_eq!(port.rx.check(), Err(PortError::Down), "{}", kind.name());
    ip(&["-n", &lab.a.0, "link", "set", "port", "up"]);
    // The carrier follows a moment later (the kernel's link watch).
    let deadline = Instant::now() + Duration::from_secs(3);
    while port.rx.check() != Ok(()) {
        assert!(
            Instant::now() < deadline,
            "{}: still {:?}",
            kind.name(),
            port.rx.check()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    far.send(&frame(1, 100));
    let got = port_collect(&mut port, 1, Duration::from_secs(2));
    assert_eq!(
        got,
        [frame(1, 100)],
        "{}: received after the flap",
        kind.name()
    );
    port.tx.send(&frame(2, 100)).expect("send");
    port.tx.flush().expect("flush");
    assert_eq!(
        far.collect(1, Duration::from_secs(2)),
        [frame(2, 100)],
        "{}: sent after the flap",
        kind.name()
    );
}

/// One test per kind for each of the checks above, each skipped without root.
macro_rules! per_kind {
    ($($name:ident: $check:ident($kind:expr);)*) => {
        $(
            #[test]
            fn $name() {
                if can_run(stringify!($name)) {
                    $check($kind);
                }
            }
        )*
    };
}

per_kind! {
    af_packet_frames_both_ways: frames_both_ways(Kind::AfPacket);
    af_packet_burst: burst(Kind::AfPacket);
    af_packet_interface_removed: interface_removed(Kind::AfPacket);
    af_packet_link_flap: link_flap(Kind::AfPacket);
    tap_frames_both_ways: frames_both_ways(Kind::Tap);
    tap_burst: burst(Kind::Tap);
    tap_interface_removed: interface_removed(Kind::Tap);
    af_xdp_frames_both_ways: frames_both_ways(Kind::AfXdp);
    af_xdp_burst: burst(Kind::AfXdp);
    af_xdp_interface_removed: interface_removed(Kind::AfXdp);
    af_xdp_link_flap: link_flap(Kind::AfXdp);
}

/// Turns transmit checksum offload off on `dev` (ETHTOOL_STXCSUM, as `ethtool -K DEV tx off`)
/// in the calling thread's namespace.
fn tx_checksum_off(dev: &str) {
    /// `struct ethtool_value`.
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    const ETHTOOL_STXCSUM: u32 = 0x17;
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    let mut v = EthtoolValue {
        cmd: ETHTOOL_STXCSUM,
        data: 0,
    };
    // SAFETY: ifreq is plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(dev.bytes()) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (&mut v as *mut EthtoolValue).cast();
    // SAFETY: socket(2) takes no pointers.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    assert!(s >= 0);
    // SAFETY: a fresh descriptor nothing else owns.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: `req` names the device and points at `v`, both alive for the call.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), SIOCETHTOOL, &mut req) };
    assert_eq!(r, 0, "ETHTOOL_STXCSUM: {}", std::io::Error::last_os_error());
}

/// UDP from the peer namespace's own stack. A veth with transmit checksum offload on (the
/// default) leaves the checksum to "hardware" (CHECKSUM_PARTIAL). AF_PACKET marks such frames
/// and the port completes their checksum (`completed` 1). AF_XDP has no such mark, so its
/// peers must send complete checksums (offload off, `completed` 0); the crate's README says
/// so.
fn udp_checksums(kind: Kind, offload: bool) {
    let lab = Lab::new(kind);
    let b = lab.b.as_ref().expect("a veth lab");
    ip(&["-n", &b.0, "addr", "add", "10.99.0.1/24", "dev", "peer"]);
    ip(&[
        "-n",
        &b.0,
        "neigh",
        "add",
        "10.99.0.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        "peer",
        "nud",
        "permanent",
    ]);
    let mut port = open(kind, &lab.a, false);
    b.run(|| {
        if !offload {
            tx_checksum_off("peer");
        }
        let s = std::net::UdpSocket::bind("10.99.0.1:0").expect("bind");
        s.send_to(b"checksum me, 23 bytes..", "10.99.0.2:9")
            .expect("send");
    });
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut udp = None;
    while udp.is_none() && Instant::now() < deadline {
        let mut frames: [&[u8]; 16] = [&[]; 16];
        let n = port.rx.recv(&mut frames).expect("recv");
        udp = frames[..n]
            .iter()
            .find(|f| f.len() > 34 && f[12..14] == [8, 0] && f[23] == 17)
            .map(|f| f.to_vec());
        std::thread::sleep(Duration::from_millis(5));
    }
    let f = udp.unwrap_or_else(|| panic!("{}: no UDP frame arrived", kind.name()));
    let l4 = &f[34..];
    let pseudo = checksum::pseudo_v4(
        Ipv4Addr::new(10, 99, 0, 1),
        Ipv4Addr::new(10, 99, 0, 2),
        17,
        l4.len() as u16,
    );
    assert!(
        checksum::verifies(checksum::combine(&[pseudo, checksum::sum(l4)])),
        "{}: UDP checksum incomplete: {f:02x?}",
        kind.name()
    );
    assert_eq!(
        port.counters().rx_csum_completed,
        u64::from(offload),
        "{}",
        kind.name()
    );
}

#[test]
fn af_packet_completes_partial_checksums() {
    if can_run("af_packet_completes_partial_checksums") {
        udp_checksums(Kind::AfPacket, true);
    }
}

#[test]
fn af_xdp_checksums_without_offload() {
    if can_run("af_xdp_checksums_without_offload") {
        udp_checksums(Kind::AfXdp, false);
    }
}

/// Two AF_PACKET ports in one fanout group on one interface, as two workers would be: each
/// frame reaches exactly one of them (without the group, each socket would see every frame).
#[test]
fn af_packet_fanout_shares_frames() {
    if !can_run("af_packet_fanout_shares_frames") {
        return;
    }
    let lab = Lab::new(Kind::AfPacket);
    let cfg = packet::Config {
        fanout: Some(7),
        ..packet::Config::default()
    };
    let (mut p1, mut p2) = lab.a.run(|| {
        (
            packet::open("port", &cfg).expect("first"),
            packet::open("port", &cfg).expect("second"),
        )
    });
    let far = lab.far_side();
    const N: u32 = 200;
    for i in 0..N {
        far.send(&frame(i, 100));
    }
    let mut got = port_collect(&mut p1, N as usize, Duration::from_millis(300));
    got.extend(port_collect(
        &mut p2,
        N as usize,
        Duration::from_millis(300),
    ));
    let mut seqs: Vec<u32> = got
        .iter()
        .map(|f| u32::from_be_bytes([f[14], f[15], f[16], f[17]]))
        .collect();
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (0..N).collect::<Vec<_>>(),
        "each frame once across the group"
    );
}
