//! The Linux kernel as a decoder of fibre's requests: requests encoded by
//! `convert::request_message` are sent to the kernel in a fresh network namespace, each must be
//! ACKed with 0, and the kernel's dump of the result converts back to the objects requested.
//! Needs root, `ip` and `python3` (which sends the bytes over a raw netlink socket); skips
//! otherwise.

use fibre_fib::types::*;
use fibre_netlink::{Messages, Payload};
use fibre_proto::convert::{self, Request};
use std::net::IpAddr;
use std::process::Command;

const SEND: &str = r#"
import socket, struct, sys
data = open(sys.argv[1], "rb").read()
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
s.setsockopt(270, 11, 1)
s.bind((0, 0))
s.settimeout(10)
off = 0
while off < len(data):
    length = struct.unpack_from("=I", data, off)[0]
    s.send(data[off:off + length])
    reply = s.recv(65536)
    err = struct.unpack_from("=i", reply, 16)[0]
    print(err)
    off += (length + 3) & ~3
for name, t, body in [("routes", 26, b"\0" * 12), ("rules", 34, b"\0" * 12),
                      ("nexthops", 106, b"\0" * 8), ("buckets", 118, b"\0" * 8),
                      ("addrs", 22, b"\0" * 8),
                      ("neighs", 30, b"\0" * 12),
                      ("proxies", 30, struct.pack("=BxxxiHBB", 0, 0, 0, 0x08, 0))]:
    s.send(struct.pack("=IHHII", 16 + len(body), t, 0x301, 1, 0) + body)
    out = b""
    done = False
    while not done:
        d = s.recv(1 << 20)
        out += d
        at = 0
        while at + 16 <= len(d):
            length, kind = struct.unpack_from("=IH", d, at)
            done = done or kind in (2, 3)
            at += (length + 3) & ~3
    open(sys.argv[2] + "/" + name + ".bin", "wb").write(out)
"#;

fn run(args: &[&str]) -> std::process::Output {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn usable() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let ip = Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let py = Command::new("python3")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    root && ip && py
}

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn prefix(s: &str) -> Prefix {
    let (a, l) = s.split_once('/').unwrap();
    Prefix {
        addr: ip(a),
        len: l.parse().unwrap(),
    }
}

#[test]
fn kernel_accepts_our_requests() {
    if !usable() {
        eprintln!("skipped: needs root, ip and python3");
        return;
    }
    let ns = Netns(format!("fibre-netlink-req-{}", std::process::id()));
    run(&["ip", "netns", "add", &ns.0]);
    let n = ns.0.as_str();
    run(&[
        "ip", "-n", n, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1",
    ]);
    run(&["ip", "-n", n, "link", "set", "veth0", "up"]);
    run(&["ip", "-n", n, "link", "set", "veth1", "up"]);
    let idx =
        String::from_utf8(run(&["ip", "-n", n, "-o", "link", "show", "veth0"]).stdout).unwrap();
    let veth0: u32 = idx.split(':').next().unwrap().trim().parse().unwrap();

    let addr = Address {
        family: Family::Inet,
        prefixlen: 24,
        flags: ifa_flags::PERMANENT,
        scope: scope::UNIVERSE,
        ifindex: veth0,
        local: Some(ip("192.0.2.1")),
        address: Some(ip("192.0.2.1")),
        broadcast: Some(ip("192.0.2.255")),
        label: Some("veth0:a".into()),
        metric: None,
        valid_lft: None,
        preferred_lft: None,
    };
    let mut plain = Route::new(Family::Inet, prefix("10.0.0.0/8"));
    plain.table = table::MAIN;
    plain.protocol = protocol::STATIC;
    plain.priority = Some(10);
    plain.nexthop = NextHop {
        gateway: Some(ip("192.0.2.254")),
        oif: veth0,
        ..NextHop::default()
    };
    plain.metrics.mtu = Some(1300);
    plain.metrics.lock = 1 << 2;
    let mut multi = Route::new(Family::Inet, prefix("10.2.0.0/16"));
    multi.table = 100;
    multi.protocol = protocol::BOOT;
    multi.multipath = vec![
        NextHop {
            gateway: Some(ip("192.0.2.10")),
            oif: veth0,
            hops: 0,
            flags: 0,
            encap: None,
        },
        NextHop {
            gateway: Some(ip("192.0.2.11")),
            oif: veth0,
            hops: 2,
            flags: 0,
            encap: None,
        },
    ];
    let mut black = Route::new(Family::Inet6, prefix("2001:db8:1::/48"));
    black.table = 1000;
    black.rtype = RouteType::Blackhole;
    black.protocol = protocol::BOOT;
    black.priority = Some(1024);
    let nh = NexthopObj {
        id: 7,
        family: Some(Family::Inet),
        gateway: Some(ip("192.0.2.254")),
        oif: veth0,
        protocol: protocol::BOOT,
        ..NexthopObj::default()
    };
    let res = NexthopObj {
        id: 8,
        family: None,
        gateway: None,
        oif: 0,
        group: vec![GroupMember {
            id: 7,
            weight_minus_one: 0,
        }],
        group_type: 1,
        res: Some(ResGroup {
            buckets: Some(8),
            idle_timer: Some(6000),
            unbalanced_timer: Some(300),
            unbalanced_time: None,
        }),
        ..nh.clone()
    };
    let mut via_nh = Route::new(Family::Inet, prefix("10.3.0.0/16"));
    via_nh.table = table::MAIN;
    via_nh.protocol = protocol::BOOT;
    via_nh.nhid = Some(7);
    let rule = Rule {
        src: Some(prefix("10.0.0.0/8")),
        priority: Some(100),
        fwmark: Some(0x10),
        fwmask: Some(0xff),
        iifname: Some("veth0".into()),
        dport: Some((80, 90)),
        protocol: protocol::BOOT,
        ..Rule::new(Family::Inet, 100)
    };
    let mut neigh = Neighbour::new(ip("192.0.2.20"), veth0);
    neigh.lladdr = Some(vec![2, 0, 0, 0, 0, 0x20]);
    neigh.flags = ntf::ROUTER;
    neigh.protocol = protocol::STATIC;
    let mut neigh6 = Neighbour::new(ip("2001:db8::20"), veth0);
    neigh6.lladdr = Some(vec![2, 0, 0, 0, 0, 0x21]);
    neigh6.state = nud::STALE;
    let mut proxy = Neighbour::new(ip("192.0.2.30"), veth0);
    proxy.flags = ntf::PROXY;
    let requests = vec![
        Request::NewAddr(addr.clone(), ReqFlags::ADD),
        Request::NewRoute(plain.clone(), ReqFlags::ADD),
        Request::NewRoute(multi.clone(), ReqFlags::ADD),
        Request::NewRoute(black.clone(), ReqFlags::ADD),
        Request::NewNexthop(nh.clone(), ReqFlags::ADD),
        Request::NewNexthop(res.clone(), ReqFlags::ADD),
        Request::NewRoute(via_nh.clone(), ReqFlags::ADD),
        Request::NewRule(rule.clone(), ReqFlags::ADD),
        Request::NewNeigh(neigh.clone(), ReqFlags::ADD),
        Request::NewNeigh(neigh6.clone(), ReqFlags::ADD),
        Request::NewNeigh(proxy.clone(), ReqFlags::ADD),
    ];
    let mut stream = Vec::new();
    for (seq, r) in requests.iter().enumerate() {
        stream.resize(fibre_netlink::nla::align(stream.len()), 0);
        convert::request_message(r, seq as u32 + 1, 0).emit(&mut stream);
    }
    let dir = std::env::temp_dir().join(&ns.0);
    std::fs::create_dir_all(&dir).unwrap();
    let req_path = dir.join("requests.bin");
    std::fs::write(&req_path, &stream).unwrap();
    let out = run(&[
        "ip",
        "netns",
        "exec",
        n,
        "python3",
        "-c",
        SEND,
        req_path.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    let errors: Vec<i32> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(
        errors,
        vec![0; requests.len()],
        "kernel answers to {requests:?}"
    );

    let dump = |name: &str| std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
    let routes_bytes = dump("routes");
    let routes: Vec<Route> = Messages::new(&routes_bytes)
        .filter_map(|r| match r.unwrap().1.payload {
            Payload::Route(m) => Some(convert::route_from(&m).unwrap()),
            _ => None,
        })
        .collect();
    let find = |want: &Route| {
        routes
            .iter()
            .find(|r| r.dst == want.dst && r.table == want.table)
            .unwrap_or_else(|| panic!("{:?} not in the kernel's dump", want.dst))
            .clone()
    };
    let got = find(&plain);
    assert_eq!(
        (got.priority, got.nexthop.gateway, got.nexthop.oif),
        (plain.priority, plain.nexthop.gateway, veth0)
    );
    assert_eq!(
        (got.metrics.mtu, got.metrics.lock, got.protocol),
        (Some(1300), 1 << 2, protocol::STATIC)
    );
    let got = find(&multi);
    assert_eq!(got.multipath, multi.multipath);
    let got = find(&black);
    assert_eq!(
        (got.rtype, got.priority),
        (RouteType::Blackhole, Some(1024))
    );
    let got = find(&via_nh);
    assert_eq!(
        (got.nhid, got.nexthop.gateway),
        (Some(7), Some(ip("192.0.2.254")))
    );

    let rules_bytes = dump("rules");
    let got: Rule = Messages::new(&rules_bytes)
        .filter_map(|r| match r.unwrap().1.payload {
            Payload::Rule(m) if m.header.family == 2 => convert::rule_from(&m).ok(),
            _ => None,
        })
        .find(|r| r.priority == Some(100))
        .expect("rule 100");
    assert_eq!(
        (got.src, got.table, got.fwmark, got.fwmask),
        (rule.src, 100, Some(0x10), Some(0xff))
    );
    assert_eq!(
        (got.iifname, got.dport, got.protocol),
        (rule.iifname.clone(), Some((80, 90)), protocol::BOOT)
    );

    let nh_bytes = dump("nexthops");
    let nhs: Vec<NexthopObj> = Messages::new(&nh_bytes)
        .filter_map(|r| match r.unwrap().1.payload {
            Payload::Nexthop(m) => Some(convert::nexthop_from(&m).unwrap()),
            _ => None,
        })
        .collect();
    let got = nhs.iter().find(|n| n.id == 7).expect("next hop 7");
    assert_eq!(
        (got.id, got.gateway, got.oif, got.protocol),
        (7, nh.gateway, veth0, protocol::BOOT)
    );
    // The resilient group comes back with its parameters and its imbalance (none).
    let got = nhs.iter().find(|n| n.id == 8).expect("next hop 8");
    let mut want = res.res.unwrap();
    want.unbalanced_time = Some(0);
    assert_eq!((got.group_type, got.res), (1, Some(want)));
    // And fibre emits the group as the kernel did, byte for byte.
    let kernel_msg = Messages::new(&nh_bytes)
        .map(|r| r.unwrap())
        .find(|(_, m)| matches!(&m.payload, Payload::Nexthop(n) if convert::nexthop_from(n).is_ok_and(|o| o.id == 8)))
        .expect("next hop 8");
    let Payload::Nexthop(km) = &kernel_msg.1.payload else {
        unreachable!()
    };
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    convert::nexthop_message(got).emit(&mut ours);
    km.emit(&mut theirs);
    assert_eq!(
        ours, theirs,
        "next hop 8 as fibre emits it vs the kernel's dump"
    );

    // Its eight buckets, all holding next hop 7, each as fibre emits it.
    let bucket_bytes = dump("buckets");
    let mut seen = 0;
    for r in Messages::new(&bucket_bytes) {
        let (_, m) = r.unwrap();
        let Payload::Nexthop(km) = &m.payload else {
            continue;
        };
        assert_eq!(
            m.header.message_type,
            fibre_netlink::message::types::RTM_NEWNEXTHOPBUCKET
        );
        let b = convert::bucket_from(km).expect("a bucket");
        assert_eq!((b.id, b.index, b.nhid), (8, seen, 7));
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        convert::bucket_message(&b).emit(&mut ours);
        km.emit(&mut theirs);
        assert_eq!(
            ours, theirs,
            "bucket {seen} as fibre emits it vs the kernel's dump"
        );
        seen += 1;
    }
    assert_eq!(seen, 8);

    let neigh_bytes = dump("neighs");
    let neighs: Vec<Neighbour> = Messages::new(&neigh_bytes)
        .filter_map(|r| match r.unwrap().1.payload {
            Payload::Neighbour(m) => convert::neighbour_from(&m).ok(),
            _ => None,
        })
        .collect();
    for want in [&neigh, &neigh6] {
        let got = neighs
            .iter()
            .find(|n| n.dst == want.dst)
            .unwrap_or_else(|| panic!("{} not in the kernel's dump", want.dst));
        assert_eq!(
            (got.ifindex, &got.lladdr, got.state, got.flags, got.protocol),
            (veth0, &want.lladdr, want.state, want.flags, want.protocol)
        );
    }
    let proxy_bytes = dump("proxies");
    let got: Neighbour = Messages::new(&proxy_bytes)
        .find_map(|r| match r.unwrap().1.payload {
            Payload::Neighbour(m) => convert::neighbour_from(&m).ok(),
            _ => None,
        })
        .expect("proxy 192.0.2.30");
    assert_eq!(
        (got.dst, got.ifindex, got.flags),
        (proxy.dst, veth0, ntf::PROXY)
    );

    let addr_bytes = dump("addrs");
    let got: Address = Messages::new(&addr_bytes)
        .filter_map(|r| match r.unwrap().1.payload {
            Payload::Address(m) => convert::address_from(&m).ok(),
            _ => None,
        })
        .find(|a| a.local == addr.local)
        .expect("192.0.2.1");
    assert_eq!(
        (got.label, got.broadcast, got.prefixlen),
        (addr.label, addr.broadcast, 24)
    );
    std::fs::remove_dir_all(&dir).ok();
}
