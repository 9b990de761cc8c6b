//! `fibre` online: the same command file run offline (in-process FIB) and against a fibred
//! started by the test prints the same bytes, errors included.
//!
//! The daemon is the fibred binary built beside `fibre` (the CLI does not link the daemon):
//! `cargo build --workspace` or `cargo test --workspace` builds it, as `scripts/test` does
//! first. Without it these tests say so and pass.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const COMMANDS: &str = "\
link add eth0 type dummy
link set eth0 up
addr add 10.0.0.1/24 dev eth0
addr add 2001:db8:1::1/64 dev eth0
route add 10.1.0.0/16 via 10.0.0.2
route append 10.1.0.0/16 via 10.0.0.3
route add 10.2.0.0/16 nexthop via 10.0.0.2 weight 2 nexthop via 10.0.0.4
-6 route add 2001:db8::/32 dev eth0 metric 10
route add blackhole 10.9.0.0/16
route add 10.1.0.0/16 via 10.0.0.3
route add 10.5.0.0/16 via 192.0.2.1
route
-6 route
route show table all
route get 10.1.2.3
route get 10.2.2.3 from 10.0.0.1
addr
link
rule add from 1.2.3.4 lookup 100
rule
nexthop add id 1 via 10.0.0.9 dev eth0
nexthop add id 2 group 1
nexthop
route add 10.3.0.0/16 nhid 2
route get 10.3.0.1
-j route
address del 10.0.0.1/24 dev eth0
route
link del eth0
route show table all
link
";

/// The fibred binary beside the `fibre` under test, if it is built.
fn fibred() -> Option<PathBuf> {
    let exe = Path::new(env!("CARGO_BIN_EXE_fibre")).with_file_name("fibred");
    if exe.is_file() {
        Some(exe)
    } else {
        eprintln!(
            "skipped: {} is not built (cargo build -p fibred, in the same profile)",
            exe.display()
        );
        None
    }
}

/// A fibred process, killed when dropped (so a failing test leaves none behind); its clients
/// then see their connections close.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fibred on `socket` (and its datagram socket beside it; no state file), once it serves:
/// it binds the datagram socket after listening on `socket`. `None` when fibred is not built.
fn daemon_on(socket: &Path) -> Option<Daemon> {
    let exe = fibred()?;
    let child = Command::new(&exe)
        .arg("--socket")
        .arg(socket)
        .env("FIBRE_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
    let mut daemon = Daemon(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.with_extension("dgram").exists() {
        if let Ok(Some(status)) = daemon.0.try_wait() {
            panic!("fibred exited at start: {status}");
        }
        assert!(Instant::now() < deadline, "fibred did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(daemon)
}

fn run(args: &[&str]) -> (i32, String, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = fibre_cli::batch::main_with(&args, &mut out, &mut err);
    (
        status,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn online_batch_prints_what_offline_prints() {
    let dir = std::env::temp_dir().join(format!("fibre-online-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("commands");
    std::fs::write(&file, COMMANDS).unwrap();
    let socket = dir.join("fibred.sock");
    let Some(daemon) = daemon_on(&socket) else {
        return;
    };
    let f = file.to_str().unwrap();
    let offline = run(&["-force", "-batch", f]);
    let online = run(&["-n", socket.to_str().unwrap(), "-force", "-batch", f]);
    assert_eq!(offline, online);
    assert!(offline.1.contains("10.1.0.0/16"), "the batch did something");
    // Single commands see the daemon's state from earlier invocations.
    let s = socket.to_str().unwrap();
    assert_eq!(
        run(&["-n", s, "route", "add", "blackhole", "10.8.0.0/16"]).0,
        0
    );
    let shown = run(&["-n", s, "route", "show", "10.8.0.0/16"]);
    assert_eq!(shown.1, "blackhole 10.8.0.0/16 \n");
    let dup = run(&["-n", s, "route", "add", "blackhole", "10.8.0.0/16"]);
    assert_eq!(
        (dup.0, dup.2.as_str()),
        (2, "RTNETLINK answers: File exists\n")
    );
    drop(daemon);
}

#[test]
fn a_named_socket_with_no_daemon_is_an_error() {
    let (status, _, err) = run(&["-n", "/nonexistent/fibred.sock", "route"]);
    assert_eq!(status, 1);
    assert!(err.contains("cannot connect to fibred"), "{err}");
}

#[test]
fn monitor_prints_changes_and_their_side_effects_like_ip_monitor() {
    let dir = std::env::temp_dir().join(format!("fibre-monitor-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("fibred.sock");
    let Some(daemon) = daemon_on(&socket) else {
        return;
    };
    let s = socket.to_str().unwrap().to_owned();
    for cmd in [
        &["link", "add", "v0", "type", "dummy"][..],
        &["link", "set", "v0", "up"],
    ] {
        let mut a = vec!["-n", s.as_str()];
        a.extend_from_slice(cmd);
        assert_eq!(run(&a).0, 0);
    }
    let s2 = s.clone();
    let monitor = std::thread::spawn(move || run(&["-n", &s2, "monitor", "all"]));
    std::thread::sleep(std::time::Duration::from_millis(300));
    for cmd in [
        &["addr", "add", "10.0.0.1/24", "dev", "v0"][..],
        &[
            "route",
            "add",
            "10.2.0.0/16",
            "dev",
            "v0",
            "src",
            "10.0.0.1",
        ],
        &["addr", "del", "10.0.0.1/24", "dev", "v0"],
    ] {
        let mut a = vec!["-n", s.as_str()];
        a.extend_from_slice(cmd);
        assert_eq!(run(&a).0, 0);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(daemon);
    let (status, out, _) = monitor.join().unwrap();
    assert_eq!(status, 0);
    // What the kernel prints for the same commands (ip monitor all, iproute2 6.1), in the
    // kernel's grouping: the address, then the routes it brings or takes away.
    for line in [
        "[ADDR]2: v0    inet 10.0.0.1/24 scope global v0",
        "[ROUTE]10.0.0.0/24 dev v0 proto kernel scope link src 10.0.0.1 ",
        "[ROUTE]local 10.0.0.1 dev v0 table local proto kernel scope host src 10.0.0.1 ",
        "[ROUTE]10.2.0.0/16 dev v0 scope link src 10.0.0.1 ",
        "[ADDR]Deleted 2: v0    inet 10.0.0.1/24 scope global v0",
        "[ROUTE]Deleted 10.2.0.0/16 dev v0 scope link src 10.0.0.1 ",
        "[ROUTE]Deleted local 10.0.0.1 dev v0 table local proto kernel scope host src 10.0.0.1 ",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
    }
}

#[test]
fn offline_forces_the_in_process_state_beside_a_daemon() {
    // A daemon on the default socket ($XDG_RUNTIME_DIR/fibre/fibred.sock) makes plain `fibre`
    // online; `-offline` keeps the in-process state.
    let dir = std::env::temp_dir().join(format!("fibre-offline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let socket = dir.join("fibre").join("fibred.sock");
    let Some(daemon) = daemon_on(&socket) else {
        return;
    };
    let s = socket.to_str().unwrap();
    assert_eq!(
        run(&["-n", s, "route", "add", "blackhole", "10.8.0.0/16"]).0,
        0
    );
    let fibre = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fibre"))
            .args(args)
            .env("XDG_RUNTIME_DIR", &dir)
            .env_remove("FIBRE_SOCKET")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(fibre(&["route", "show"]).1, "blackhole 10.8.0.0/16 \n");
    assert_eq!(
        fibre(&["-offline", "route", "show"]),
        (Some(0), String::new(), String::new())
    );
    assert_eq!(
        fibre(&["-offline", "-n", s, "route", "show"]),
        (
            Some(255),
            String::new(),
            "fibre: -offline and -n exclude each other\n".into()
        )
    );
    drop(daemon);
}
