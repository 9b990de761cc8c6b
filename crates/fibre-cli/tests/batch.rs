//! `fibre` as a process: batch files without `-force`, standard input, single commands, exit
//! statuses and iproute2's own refusals, compared with what iproute2 6.1 prints for the same
//! input. What `ip -force -batch` prints for routing commands is recorded in
//! `tests/scenarios/` instead.

use std::io::Write;
use std::process::{Command, Stdio};

struct Run {
    stdout: String,
    stderr: String,
    status: i32,
}

fn fibre(args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fibre"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run fibre");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status: out.status.code().unwrap_or(-1),
    }
}

fn batch_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fibre-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write batch");
    p
}

#[test]
fn missing_device_fails_the_line_and_stops_the_batch() {
    // `ip -batch` on these lines: "Cannot find device", "Command failed FILE:2", status 1, and the
    // third line never runs.
    let p = batch_file(
        "nodev.txt",
        "# comment only\nroute add 10.0.0.0/8 dev nope\nroute add 10.0.0.0/8 dev nope2\n",
    );
    let r = fibre(&["-batch", p.to_str().unwrap()], "");
    assert_eq!(
        r.stderr,
        format!(
            "Cannot find device \"nope\"\nCommand failed {}:2\n",
            p.display()
        )
    );
    assert_eq!(r.status, 1);
    assert_eq!(r.stdout, "");
}

#[test]
fn force_goes_on_after_failures() {
    let r = fibre(
        &["-force", "-batch", "-"],
        "route add 10.0.0.0/8 dev a\n\nroute add 10.0.0.0/8 dev b\n",
    );
    assert_eq!(
        r.stderr,
        "Cannot find device \"a\"\nCommand failed -:1\nCannot find device \"b\"\nCommand failed -:3\n"
    );
    assert_eq!(r.status, 1);
}

#[test]
fn parser_exits_end_the_batch_with_their_status() {
    // iproute2 calls exit() from get_prefix (status 1) and invarg (status 255): no
    // "Command failed" line, nothing after runs even with -force.
    let r = fibre(
        &["-force", "-batch", "-"],
        "route add 1.2.3.0/244 via 10.0.0.2\nroute add x\n",
    );
    assert_eq!(
        r.stderr,
        "Error: any valid prefix is expected rather than \"1.2.3.0/244\".\n"
    );
    assert_eq!(r.status, 1);
    let r = fibre(
        &["-batch", "-"],
        "route add 1.2.3.0/24 via 10.0.0.2 metric x\n",
    );
    assert_eq!(
        r.stderr,
        "Error: argument \"x\" is wrong: \"metric\" value is invalid\n\n"
    );
    assert_eq!(r.status, 255);
}

#[test]
fn continuation_lines_count_physical_lines() {
    let r = fibre(&["-batch", "-"], "route add 10.0.0.0/8 \\\n  dev nope\n");
    assert_eq!(
        r.stderr,
        "Cannot find device \"nope\"\nCommand failed -:2\n"
    );
}

#[test]
fn single_commands_exit_like_ip() {
    // `ip route add 10.0.0.0/8 dev nope` exits 1; unknown objects exit 1; bad options 255.
    let r = fibre(&["route", "add", "10.0.0.0/8", "dev", "nope"], "");
    assert_eq!(
        (r.status, r.stderr.as_str()),
        (1, "Cannot find device \"nope\"\n")
    );
    let r = fibre(&["bogus"], "");
    assert_eq!(
        (r.status, r.stderr.as_str()),
        (1, "Object \"bogus\" is unknown, try \"ip help\".\n")
    );
    let r = fibre(&["-z", "route"], "");
    assert_eq!(
        (r.status, r.stderr.as_str()),
        (255, "Option \"-z\" is unknown, try \"ip -help\".\n")
    );
}

#[test]
fn missing_batch_file_is_reported() {
    let r = fibre(&["-batch", "/nonexistent/fibre-batch"], "");
    assert_eq!(
        r.stderr,
        "Cannot open file \"/nonexistent/fibre-batch\" for reading: No such file or directory\n"
    );
    assert_eq!(r.status, 1);
}

#[test]
fn demo_runs_without_root_or_files() {
    let r = fibre(&["demo", "--scale", "0.002"], "");
    assert_eq!(r.status, 0, "stderr: {}", r.stderr);
    assert!(r.stdout.contains("Synthetic Internet table"));
    assert!(r.stdout.contains("lookups/s"));
}

#[test]
fn a_table_never_created_fails_only_outside_a_batch() {
    // `ip route show table 100` in a fresh namespace: strict dump, the kernel refuses (status 2,
    // `-j` has printed its "["); `ip -batch` dumps without strict checking and prints nothing.
    let r = fibre(&["-j", "route", "show", "table", "100"], "");
    assert_eq!(r.stdout, "[");
    assert_eq!(
        r.stderr,
        "Error: ipv4: FIB table does not exist.\nDump terminated\n"
    );
    assert_eq!(r.status, 2);
    let r = fibre(&["-batch", "-"], "route show table 100\n");
    assert_eq!(
        (r.stdout.as_str(), r.stderr.as_str(), r.status),
        ("", "", 0)
    );
}

#[test]
fn long_lines_run_up_to_iproute2s_limit() {
    // A 16-way multipath route (about 100 words) runs; iproute2 6.1 runs lines of 511 words
    // and refuses 512 with "Too many arguments to command".
    let mut text = String::from(
        "link add d0 type dummy\nlink set d0 up\naddress add 10.0.0.1/16 dev d0\nroute add 192.0.2.0/24",
    );
    for i in 0..16 {
        text += &format!(" nexthop via 10.0.0.{} dev d0 weight {}", i + 2, i + 1);
    }
    text += "\nroute show 192.0.2.0/24\n";
    let r = fibre(&["-batch", "-"], &text);
    assert_eq!((r.status, r.stderr.as_str()), (0, ""));
    assert_eq!(r.stdout.matches("nexthop via").count(), 16, "{}", r.stdout);

    let words = |n: usize| format!("link show lo {}\n", vec!["x"; n - 3].join(" "));
    let r = fibre(&["-batch", "-"], &words(511));
    assert!(!r.stderr.contains("Too many arguments"), "{}", r.stderr);
    let r = fibre(&["-batch", "-"], &words(512));
    assert_eq!(r.stderr, "Too many arguments to command\n");
    assert_eq!(r.status, 1);
}

#[test]
fn interface_names_are_checked_as_iproute2_checks_them() {
    // iproute2 6.1 refuses these before asking the kernel (status 255, no "Command failed").
    for (line, arg, what) in [
        ("link set eth0 name \"eth1 \"", "eth1 ", "name"),
        ("link set eth0 name a/b", "a/b", "name"),
        (
            "link set eth0 name abcdefghijklmnop",
            "abcdefghijklmnop",
            "name",
        ),
        ("link set eth0 name \"\"", "", "name"),
        ("link add \"x y\" type dummy", "x y", "dev"),
        ("link del x/y", "x/y", "dev"),
    ] {
        let r = fibre(
            &["-batch", "-"],
            &format!("link add eth0 type dummy\n{line}\n"),
        );
        assert_eq!(
            (r.status, r.stderr.as_str()),
            (
                255,
                format!("Error: argument \"{arg}\" is wrong: \"{what}\" not a valid ifname\n")
                    .as_str()
            ),
            "{line}"
        );
    }
}

/// Offline a port link is a link like any other (no I/O): created with its binding, shown
/// with it under `-d` (text and JSON), usable by addresses; its own words are checked.
#[test]
fn port_links_are_links_offline() {
    let setup = "link add p0 type port dev veth0 io af_packet\nlink add p1 type port dev veth1\nlink add t0 type tap\nlink set p0 up\naddress add 10.0.0.1/24 dev p0\n";
    let r = fibre(&["-d", "-batch", "-"], &format!("{setup}link show p0\n"));
    assert_eq!(r.stderr, "");
    assert_eq!(
        r.stdout,
        "2: p0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\n    link/ether 02:66:00:00:00:02 brd ff:ff:ff:ff:ff:ff\n    fibre_port dev veth0 io af_packet \n"
    );
    let r = fibre(
        &["-d", "-j", "-batch", "-"],
        &format!("{setup}link show p1\nlink show t0\n"),
    );
    assert!(
        r.stdout.contains(
            r#""linkinfo":{"info_kind":"fibre_port","info_data":{"dev":"veth1","io":"af_xdp"}}"#
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(r#""info_data":{"dev":"t0","io":"tap"}"#),
        "{}",
        r.stdout
    );
    for (line, err) in [
        (
            "link add p0 type port\n",
            "Not enough information: \"dev\" argument is required.\n",
        ),
        (
            "link add p0 type port dev x io foo\n",
            "Error: argument \"foo\" is wrong: \"io\" must be af_xdp, af_packet or tap\n",
        ),
    ] {
        let r = fibre(&["-batch", "-"], line);
        assert!(r.stderr.starts_with(err), "{line}: {}", r.stderr);
        assert_ne!(r.status, 0);
    }
}
