//! `fibre -batch` end to end: the built binary on small command files, compared with what
//! iproute2 6.1's `ip -batch` prints for the same files (stderr texts, line numbers, status).

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
fn json_show_of_an_empty_table_is_an_empty_array() {
    let r = fibre(&["-j", "-batch", "-"], "route show table 100\n");
    assert_eq!((r.stdout.as_str(), r.status), ("[]\n", 0));
}

#[test]
fn demo_runs_without_root_or_files() {
    let r = fibre(&["demo", "--scale", "0.002"], "");
    assert_eq!(r.status, 0, "stderr: {}", r.stderr);
    assert!(r.stdout.contains("Synthetic Internet table"));
    assert!(r.stdout.contains("lookups/s"));
}
