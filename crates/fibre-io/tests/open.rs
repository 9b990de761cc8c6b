//! Opening ports: iproute2's messages for a missing interface and for a caller without
//! privileges, and nothing left behind (descriptors, the XDP program) after an open that
//! fails half-way or after a port is dropped.
//!
//! One test function, so that no other test of this binary opens descriptors while it counts
//! them. Needs root and `ip netns`; says why and passes without them.

mod common;

use common::{can_run, ip, Ns};
use fibre_io::{xdp, Kind, OpenError, Port};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// Runs `f` on a thread whose user ids are 65534 and which therefore has no capabilities; the
/// raw system call changes only that thread (glibc's setresuid would change every thread).
fn unprivileged<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setresuid takes no pointers; as a raw system call it applies to the
            // calling thread only.
            let r = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
            assert_eq!(r, 0, "setresuid: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("unprivileged thread")
    })
}

fn message(r: Result<Port, OpenError>) -> String {
    match r {
        Ok(p) => panic!("opened {p:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn open_errors_and_cleanup() {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("open_errors_and_cleanup: skipped: needs root");
        return;
    }
    for kind in [Kind::AfPacket, Kind::AfXdp] {
        assert_eq!(
            message(Port::open(kind, "fibre-nope0")),
            "Cannot find device \"fibre-nope0\"",
            "{}",
            kind.name()
        );
    }
    for kind in [Kind::AfPacket, Kind::AfXdp, Kind::Tap] {
        let m = unprivileged(|| message(Port::open(kind, "lo")));
        assert_eq!(m, "Operation not permitted", "{}", kind.name());
    }

    if can_run("open_errors_and_cleanup (the cleanup part)") {
        cleanup(&Ns::new());
    }
}

fn cleanup(ns: &Ns) {
    let n = ns.0.as_str();
    ip(&[
        "-n", n, "link", "add", "ve0", "type", "veth", "peer", "name", "ve1",
    ]);
    ip(&["-n", n, "link", "set", "ve0", "up"]);
    ip(&["-n", n, "link", "set", "ve1", "up"]);
    let has_xdp = || ip(&["-n", n, "-d", "link", "show", "ve0"]).contains("prog/xdp");
    ns.run(|| {
        let before = open_fds();
        // Queue 5 does not exist on a veth: bind fails after the UMEM, the socket and the
        // rings are made.
        let bad = xdp::Config {
            queue: 5,
            ..xdp::Config::default()
        };
        let e = xdp::open("ve0", &bad).expect_err("queue 5");
        assert!(e.to_string().starts_with("bind:"), "{e}");
        assert_eq!(open_fds(), before, "descriptors left by a failed open");
        assert!(!has_xdp());

        let port = Port::open(Kind::AfXdp, "ve0").expect("open af_xdp");
        assert!(has_xdp(), "the program is attached while the port is open");
        assert_eq!(
            port.detail, "copy, native XDP",
            "veth: copy mode, native XDP"
        );
        drop(port);
        assert!(!has_xdp(), "the program goes with the port");
        assert_eq!(open_fds(), before, "descriptors left by a dropped port");

        for kind in [Kind::AfPacket, Kind::Tap] {
            let dev = if kind == Kind::Tap { "t0" } else { "ve0" };
            let port = Port::open(kind, dev).expect("open");
            drop(port);
            assert_eq!(open_fds(), before, "{}: descriptors left", kind.name());
        }
        assert!(
            !ip(&["-n", n, "link", "show"]).contains("t0"),
            "the TAP device goes with its port"
        );
    });
}
