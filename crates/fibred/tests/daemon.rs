//! fibred end to end, in-process: requests over the socket and the ring, errors with extended
//! ACK that leave the state unchanged, notifications, bounded queues, the state file.

use fibre_fib::types::*;
use fibre_netlink::message::types as mt;
use fibre_netlink::{Messages, NetlinkMessage, Payload};
use fibre_proto::client::SocketClient;
use fibre_proto::convert::{self, Request};
use fibre_proto::groups;
use fibre_proto::membership::{self, MEMBERSHIP_ADD};
use fibred::{Config, Daemon};
use std::ops::ControlFlow;
use std::path::PathBuf;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fibred-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start(dir: &std::path::Path, state: Option<PathBuf>) -> Daemon {
    let socket = dir.join("fibred.sock");
    Daemon::start(Config {
        dgram: Some(Config::dgram_beside(&socket)),
        socket,
        state,
        access: Default::default(),
        fpm: None,
        mirror: None,
        metrics: None,
        workers: Default::default(),
        ports: Vec::new(),
    })
    .unwrap()
}

fn route(dst: &str, len: u8) -> Route {
    let mut r = Route::new(
        Family::Inet,
        Prefix {
            addr: dst.parse().unwrap(),
            len,
        },
    );
    r.rtype = RouteType::Blackhole;
    r
}

/// Sends one request and collects every message answering `seq` up to the ACK, error or DONE.
fn talk(c: &mut SocketClient, req: &[u8]) -> Vec<Vec<u8>> {
    let seq = u32::from_ne_bytes(req[8..12].try_into().unwrap());
    c.send(req).unwrap();
    let mut out = Vec::new();
    loop {
        let d = c.recv().unwrap().to_vec();
        assert!(!d.is_empty(), "daemon closed");
        for item in Messages::new(&d) {
            let (off, m) = item.unwrap();
            if m.header.sequence != seq {
                continue;
            }
            out.push(d[off..off + m.header.length as usize].to_vec());
            if matches!(m.payload, Payload::Error(_) | Payload::Done(_)) {
                return out;
            }
        }
    }
}

fn dump_routes(c: &mut SocketClient, seq: u32) -> Vec<Route> {
    let req = convert::request_message(&Request::DumpRoutes(None), seq, 0).to_bytes();
    talk(c, &req)
        .iter()
        .filter_map(|m| match NetlinkMessage::parse(m, 0).unwrap().0.payload {
            Payload::Route(r) => Some(convert::route_from(&r).unwrap()),
            _ => None,
        })
        .collect()
}

fn error_of(msg: &[u8]) -> (i32, Option<String>) {
    match NetlinkMessage::parse(msg, 0).unwrap().0.payload {
        Payload::Error(e) => (e.error, e.message().map(str::to_owned)),
        other => panic!("not an error message: {other:?}"),
    }
}

#[test]
fn socket_requests_ack_dump_and_fail_without_changing_state() {
    let dir = tempdir("socket");
    let d = start(&dir, None);
    let mut c = SocketClient::connect(d.socket()).unwrap();
    let add_req = Request::NewRoute(route("10.1.0.0", 16), ReqFlags::ADD);
    let add = convert::request_message(&add_req, 1, 0);
    let ans = talk(&mut c, &add.to_bytes());
    assert_eq!(error_of(ans.last().unwrap()).0, 0);
    let before = dump_routes(&mut c, 2);
    assert!(before.iter().any(|r| r.dst.len == 16));

    // The same add again: EEXIST, and the state is unchanged.
    let again = convert::request_message(&add_req, 3, 0);
    assert_eq!(
        error_of(talk(&mut c, &again.to_bytes()).last().unwrap()).0,
        -17
    );
    // A malformed attribute: EINVAL with text and offset.
    // An attribute header claiming more bytes than the message has.
    let mut bad = again.to_bytes();
    bad.extend_from_slice(&200u16.to_ne_bytes());
    bad.extend_from_slice(&1u16.to_ne_bytes());
    let n = bad.len() as u32;
    bad[0..4].copy_from_slice(&n.to_ne_bytes());
    bad[8..12].copy_from_slice(&4u32.to_ne_bytes());
    let (code, text) = error_of(talk(&mut c, &bad).last().unwrap());
    assert_eq!(code, -22);
    assert!(text.is_some(), "malformed messages get extended-ACK text");
    assert_eq!(dump_routes(&mut c, 5), before);
    d.stop();
    assert!(
        !dir.join("fibred.sock").exists(),
        "socket removed at shutdown"
    );
}

#[test]
fn ring_clients_are_served_and_notified() {
    let dir = tempdir("ring");
    let d = start(&dir, None);
    // A monitor on the socket, joined to the IPv4 route group.
    let mut mon = SocketClient::connect(d.socket()).unwrap();
    let join = membership::request(MEMBERSHIP_ADD, groups::IPV4_ROUTE, 7);
    assert_eq!(error_of(talk(&mut mon, &join).last().unwrap()).0, 0);

    let mut ring =
        fibre_ring::Client::connect(d.socket(), fibre_ring::ClientConfig::default()).unwrap();
    let reqs: Vec<Vec<u8>> = (0..100u32)
        .map(|i| {
            let r = route(&format!("10.{}.{}.0", i / 256, i % 256), 24);
            convert::request_message(&Request::NewRoute(r, ReqFlags::ADD), i + 1, 0).to_bytes()
        })
        .collect();
    let mut acks = 0;
    ring.transact(reqs.iter().map(Vec::as_slice), |m| {
        for item in Messages::new(m.bytes) {
            let (_, msg) = item.unwrap();
            if let Payload::Error(e) = msg.payload {
                assert_eq!(e.error, 0);
                acks += 1;
            }
        }
        if acks == 100 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    let mut seen = 0;
    while seen < 100 {
        let d = mon
            .recv_timeout(5000)
            .unwrap()
            .expect("notification")
            .to_vec();
        for item in Messages::new(&d) {
            let (_, msg) = item.unwrap();
            assert_eq!(msg.header.message_type, mt::RTM_NEWROUTE);
            seen += 1;
        }
    }
    d.stop();
}

/// A ring client streaming changes and reads of what it just changed: the daemon reads
/// batches ahead of the writer, yet every answer comes back in order and every read sees the
/// change sent before it (read-only batches wait for the changes before them).
#[test]
fn ring_answers_stay_in_order_and_reads_see_earlier_changes() {
    let dir = tempdir("ring-order");
    let d = start(&dir, None);
    let mut ring =
        fibre_ring::Client::connect(d.socket(), fibre_ring::ClientConfig::default()).unwrap();
    const PAIRS: u32 = 3000;
    /// After every this many pairs, a run of gets only (batches that only read, taken while
    /// changes before them are at the writer).
    const BLOCK: u32 = 100;
    let prefix = |i: u32| format!("10.{}.{}.0", (i / 256) % 256, i % 256);
    let get = |i: u32, seq: u32| {
        let q = Request::GetRoute(RouteQuery::to(prefix(i).parse().unwrap()));
        convert::request_message(&q, seq, 0).to_bytes()
    };
    // Requests, and whether each answer is an ACK (else a get's answer).
    let (mut reqs, mut acked) = (Vec::new(), Vec::new());
    for i in 0..PAIRS {
        let add = Request::NewRoute(route(&prefix(i), 24), ReqFlags::ADD);
        let mut m = convert::request_message(&add, reqs.len() as u32 + 1, 0);
        m.header.flags |= fibre_netlink::message::flags::NLM_F_ACK;
        reqs.push(m.to_bytes());
        acked.push(true);
        reqs.push(get(i, reqs.len() as u32 + 1));
        acked.push(false);
        if i % BLOCK == BLOCK - 1 {
            for j in 0..2 * BLOCK {
                reqs.push(get(i - j % BLOCK, reqs.len() as u32 + 1));
                acked.push(false);
            }
        }
    }
    let mut next_seq = 1;
    ring.transact(reqs.iter().map(Vec::as_slice), |m| {
        for item in Messages::new(m.bytes) {
            let (_, msg) = item.unwrap();
            assert_eq!(msg.header.sequence, next_seq, "answers in request order");
            if acked[next_seq as usize - 1] {
                assert!(matches!(msg.payload, Payload::Error(ref e) if e.error == 0));
            } else {
                // A route get that finds the blackhole route answers EINVAL, as the kernel's
                // does; without the route it would be ENETUNREACH.
                assert!(
                    matches!(msg.payload, Payload::Error(ref e) if e.error == -22),
                    "the get of seq {next_seq} sees the route added before it: {:?}",
                    msg.payload
                );
            }
            next_seq += 1;
        }
        if next_seq as usize > reqs.len() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    d.stop();
}

#[test]
fn a_monitor_that_never_reads_costs_bounded_memory_and_learns_of_the_loss() {
    let dir = tempdir("slow");
    let d = start(&dir, None);
    let mut mon = SocketClient::connect(d.socket()).unwrap();
    let join = membership::request(MEMBERSHIP_ADD, groups::IPV4_ROUTE, 7);
    assert_eq!(error_of(talk(&mut mon, &join).last().unwrap()).0, 0);
    let mut ring =
        fibre_ring::Client::connect(d.socket(), fibre_ring::ClientConfig::default()).unwrap();
    // Far more notifications than the socket buffer and the bounded queue hold.
    let n = 20_000u32;
    let reqs: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let r = route(&format!("10.{}.{}.0", i / 256, i % 256), 24);
            let req = Request::NewRoute(r, ReqFlags::ADD);
            let mut m = convert::request_message(&req, i + 1, 0);
            m.header.flags &= !fibre_netlink::message::flags::NLM_F_ACK;
            if i == n - 1 {
                m.header.flags |= fibre_netlink::message::flags::NLM_F_ACK;
            }
            m.to_bytes()
        })
        .collect();
    ring.transact(reqs.iter().map(Vec::as_slice), |m| {
        let done = Messages::new(m.bytes)
            .filter_map(Result::ok)
            .any(|(_, msg)| matches!(msg.payload, Payload::Error(_)));
        if done {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    let mut notes = 0;
    let mut enobufs = false;
    while let Some(d) = mon.recv_timeout(500).unwrap() {
        let d = d.to_vec();
        for item in Messages::new(&d) {
            let (_, msg) = item.unwrap();
            match msg.payload {
                Payload::Error(e) if e.error == -105 => enobufs = true,
                _ => notes += 1,
            }
        }
    }
    assert!(enobufs, "the lost notifications are reported");
    assert!(
        notes < n as usize,
        "notifications were dropped, not queued without bound"
    );
    d.stop();
}

#[test]
fn state_file_survives_a_restart() {
    let dir = tempdir("state");
    let state = dir.join("state");
    let d = start(&dir, Some(state.clone()));
    let mut c = SocketClient::connect(d.socket()).unwrap();
    for (i, req) in [
        Request::NewLink(
            Link {
                ifname: Some("eth0".into()),
                kind: Some(LinkKind::Dummy),
                flags: 1,
                change: 1,
                ..Link::default()
            },
            ReqFlags::ADD,
        ),
        Request::NewRoute(route("10.7.0.0", 16), ReqFlags::ADD),
    ]
    .iter()
    .enumerate()
    {
        let m = convert::request_message(req, i as u32 + 1, 0).to_bytes();
        assert_eq!(error_of(talk(&mut c, &m).last().unwrap()).0, 0);
    }
    let before = dump_routes(&mut c, 10);
    drop(c);
    d.stop();
    assert!(state.exists());
    let d = start(&dir, Some(state.clone()));
    let mut c = SocketClient::connect(d.socket()).unwrap();
    assert_eq!(dump_routes(&mut c, 1), before);
    d.stop();
}

/// Expiring routes are reclaimed by the writer's timer, not at the next change: a monitor
/// hears RTM_DELROUTE for each at its deadline with no request in between, as the kernel's
/// fib6 GC announces aged-out routes, and the routes are gone from dumps.
#[test]
fn expired_routes_are_reclaimed_and_announced_on_time() {
    let dir = tempdir("gc");
    let d = start(&dir, None);
    let mut mon = SocketClient::connect(d.socket()).unwrap();
    let join = membership::request(MEMBERSHIP_ADD, groups::IPV6_ROUTE, 1);
    assert_eq!(error_of(talk(&mut mon, &join).last().unwrap()).0, 0);
    let mut c = SocketClient::connect(d.socket()).unwrap();
    for (i, dst) in ["2001:db8:1::", "2001:db8:2::"].iter().enumerate() {
        let mut r = Route::new(
            Family::Inet6,
            Prefix {
                addr: dst.parse().unwrap(),
                len: 48,
            },
        );
        r.rtype = RouteType::Blackhole;
        r.expires = Some(1 + i as u32);
        let req = convert::request_message(&Request::NewRoute(r, ReqFlags::ADD), 10 + i as u32, 0)
            .to_bytes();
        let answer = talk(&mut c, &req);
        assert_eq!(error_of(answer.last().unwrap()).0, 0);
    }
    let started = std::time::Instant::now();
    let mut deleted = Vec::new();
    while deleted.len() < 2 {
        let Some(d) = mon.recv_timeout(5000).unwrap().map(<[u8]>::to_vec) else {
            panic!("no RTM_DELROUTE within 5 s; got {deleted:?}");
        };
        for item in Messages::new(&d) {
            let (_, m) = item.unwrap();
            if m.header.message_type != mt::RTM_DELROUTE {
                continue;
            }
            let Payload::Route(r) = m.payload else {
                panic!("RTM_DELROUTE without a route")
            };
            let r = convert::route_from(&r).unwrap();
            deleted.push((r.dst.addr.to_string(), started.elapsed()));
        }
    }
    assert_eq!(deleted[0].0, "2001:db8:1::");
    assert_eq!(deleted[1].0, "2001:db8:2::");
    // At the deadline (the second one expires a second after the first), not much later.
    assert!(
        deleted[1].1 < std::time::Duration::from_millis(4000),
        "{deleted:?}"
    );
    assert!(
        deleted[1].1 >= std::time::Duration::from_millis(1500),
        "{deleted:?}"
    );
    assert!(dump_routes(&mut c, 20)
        .iter()
        .all(|r| r.family != Family::Inet6 || r.dst.len != 48));
    d.stop();
}

/// IPv6 routes are dumped as the kernel dumps them (`rt6_fill_node`): RTA_CACHEINFO on every
/// route, the remaining lifetime in its `rta_expires` (clock ticks), never RTA_EXPIRES (what
/// `ip monitor` and pyroute2 decode as the route's expiry).
#[test]
fn ipv6_routes_report_expiry_in_cacheinfo() {
    use fibre_netlink::route::RouteAttr;
    let dir = tempdir("cacheinfo");
    let d = start(&dir, None);
    let mut c = SocketClient::connect(d.socket()).unwrap();
    for (i, (dst, expires)) in [("2001:db8:1::", Some(600)), ("2001:db8:2::", None)]
        .into_iter()
        .enumerate()
    {
        let mut r = Route::new(
            Family::Inet6,
            Prefix {
                addr: dst.parse().unwrap(),
                len: 48,
            },
        );
        r.rtype = RouteType::Blackhole;
        r.expires = expires;
        let req = convert::request_message(&Request::NewRoute(r, ReqFlags::ADD), 1 + i as u32, 0)
            .to_bytes();
        let answer = talk(&mut c, &req);
        assert_eq!(error_of(answer.last().unwrap()).0, 0);
    }
    let req = convert::request_message(&Request::DumpRoutes(Some(Family::Inet6)), 5, 0).to_bytes();
    let mut seen = 0;
    for m in talk(&mut c, &req) {
        let Payload::Route(r) = NetlinkMessage::parse(&m, 0).unwrap().0.payload else {
            continue;
        };
        assert!(!r
            .attributes
            .iter()
            .any(|a| matches!(a, RouteAttr::Expires(_))));
        let ticks: Vec<i32> = r
            .attributes
            .iter()
            .filter_map(|a| match a {
                RouteAttr::CacheInfo(ci) => Some(ci.expires),
                _ => None,
            })
            .collect();
        assert_eq!(ticks.len(), 1, "one RTA_CACHEINFO per route: {r:?}");
        if r.header.dst_len == 48 {
            seen += 1;
            let dst = convert::route_from(&r).unwrap().dst.addr.to_string();
            if dst == "2001:db8:1::" {
                assert!((59_000..=60_000).contains(&ticks[0]), "{ticks:?}");
                let back = convert::route_from(&r).unwrap();
                assert!(back.cache.unwrap().expires.is_some_and(|s| s > 590));
            } else {
                assert_eq!(ticks[0], 0);
            }
        }
    }
    assert_eq!(seen, 2);
    d.stop();
}
