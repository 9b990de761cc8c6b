//! iproute2 as a second decoder: `ip monitor file FILE` (which reads a raw stream of netlink
//! messages, as captured) prints the same text for bytes fibre emits from its model as for the
//! kernel's capture of the same state. Skips when `ip` is not installed.

use fibre_netlink::{Messages, NetlinkMessage, Payload};
use fibre_proto::convert;
use std::path::{Path, PathBuf};
use std::process::Command;

fn captures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fibre-netlink/tests/captures")
}

fn ip_available() -> bool {
    Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn monitor(path: &Path) -> String {
    let out = Command::new("ip")
        .args(["monitor", "file"])
        .arg(path)
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip monitor file {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Re-encodes every object the model describes through the model; other messages (the seg6
/// route, NLMSG_DONE) through the codec alone.
fn through_model(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in Messages::new(bytes) {
        let (_, msg) = r.unwrap();
        let h = msg.header;
        let encoded = match &msg.payload {
            Payload::Link(m) => convert::link_from(m).ok().map(|l| {
                let m = convert::message(
                    h.message_type,
                    h.flags,
                    h.sequence,
                    h.port,
                    Payload::Link(convert::link_message(&l)),
                );
                m.to_bytes()
            }),
            Payload::Address(m) => convert::address_from(m).ok().map(|a| {
                convert::message(
                    h.message_type,
                    h.flags,
                    h.sequence,
                    h.port,
                    Payload::Address(convert::address_message(&a)),
                )
                .to_bytes()
            }),
            Payload::Route(m) => convert::route_from(m).ok().map(|r| {
                convert::message(
                    h.message_type,
                    h.flags,
                    h.sequence,
                    h.port,
                    Payload::Route(convert::route_message(&r)),
                )
                .to_bytes()
            }),
            Payload::Rule(m) => convert::rule_from(m).ok().map(|r| {
                convert::message(
                    h.message_type,
                    h.flags,
                    h.sequence,
                    h.port,
                    Payload::Rule(convert::rule_message(&r)),
                )
                .to_bytes()
            }),
            Payload::Nexthop(m) => convert::nexthop_from(m).ok().map(|n| {
                convert::message(
                    h.message_type,
                    h.flags,
                    h.sequence,
                    h.port,
                    Payload::Nexthop(convert::nexthop_message(&n)),
                )
                .to_bytes()
            }),
            Payload::Neighbour(m) => convert::neighbour_from(m).ok().map(|n| {
                convert::message(
                    h.message_type,
                    h.flags,
                    h.sequence,
                    h.port,
                    Payload::Neighbour(convert::neighbour_message(&n)),
                )
                .to_bytes()
            }),
            _ => None,
        };
        out.resize(fibre_netlink::nla::align(out.len()), 0);
        out.extend_from_slice(&encoded.unwrap_or_else(|| msg.to_bytes()));
    }
    out
}

/// Link lines print attributes fibre's model does not carry (qdisc, group, the veth peer and
/// the M-DOWN flag derived from it): on them only the index, name, flags and MTU are compared.
fn comparable(line: &str) -> String {
    let is_link = line
        .split_whitespace()
        .next()
        .is_some_and(|w| w.ends_with(':') && w[..w.len() - 1].parse::<u32>().is_ok())
        && line.contains('<');
    if is_link {
        let name = line.split_whitespace().nth(1).unwrap_or("");
        let name = name.split('@').next().unwrap_or(name).trim_end_matches(':');
        let flags = line
            .split_whitespace()
            .find(|w| w.starts_with('<'))
            .unwrap_or("")
            .replace(",M-DOWN", "");
        let mtu = line
            .split_whitespace()
            .skip_while(|w| *w != "mtu")
            .nth(1)
            .unwrap_or("");
        format!(
            "{} {name} {flags} mtu {mtu}",
            line.split_whitespace().next().unwrap()
        )
    } else if line.trim_start().starts_with("link/") {
        line.split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        line.trim_end().to_owned()
    }
}

#[test]
fn ip_monitor_prints_the_same_for_our_bytes() {
    if !ip_available() {
        eprintln!("skipped: iproute2's `ip` is not installed");
        return;
    }
    let tmp = std::env::temp_dir().join(format!("fibre-netlink-monitor-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut lines = 0;
    for name in [
        "dump_links.bin",
        "dump_addrs.bin",
        "dump_routes.bin",
        "dump_rules.bin",
        "dump_nexthops.bin",
        "dump_neigh.bin",
        "notify.bin",
    ] {
        let kernel_path = captures_dir().join(name);
        let kernel = std::fs::read(&kernel_path).unwrap();
        // The codec alone: bytes re-emitted from the parse.
        let mut codec = Vec::new();
        let parsed: Vec<NetlinkMessage> = Messages::new(&kernel).map(|r| r.unwrap().1).collect();
        fibre_netlink::emit_stream(&parsed, &mut codec);
        let codec_path = tmp.join(format!("codec-{name}"));
        std::fs::write(&codec_path, &codec).unwrap();
        let expected = monitor(&kernel_path);
        assert_eq!(monitor(&codec_path), expected, "{name} (codec)");
        // Through fibre's model.
        let model_path = tmp.join(format!("model-{name}"));
        std::fs::write(&model_path, through_model(&kernel)).unwrap();
        let ours = monitor(&model_path);
        let (e, o): (Vec<_>, Vec<_>) = (
            expected.lines().map(comparable).collect(),
            ours.lines().map(comparable).collect(),
        );
        for (i, (a, b)) in e.iter().zip(&o).enumerate() {
            assert_eq!(b, a, "{name} line {i}");
        }
        assert_eq!(o.len(), e.len(), "{name}: line count");
        lines += e.len();
    }
    std::fs::remove_dir_all(&tmp).ok();
    assert!(lines > 200, "{lines}");
}
