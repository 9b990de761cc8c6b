use super::check::{drain, everything, IFF_UP};
use super::*;
use fibre_netlink::Payload;
use fibre_proto::groups;
use fibre_proto::membership::{MEMBERSHIP_ADD, MEMBERSHIP_DROP};
use std::net::IpAddr;

/// The status an answer carries, read through the codec: the error code of an NLMSG_ERROR
/// (0 for an ACK) or of an NLMSG_DONE.
fn status(m: &[u8]) -> i32 {
    match NetlinkMessage::parse(m, 0)
        .expect("an answer the codec reads")
        .0
        .payload
    {
        Payload::Error(e) => e.error,
        Payload::Done(d) => d.code.expect("a status"),
        other => panic!("not a status: {other:?}"),
    }
}

/// 10.2.0.0/16, through `gateway` if one is given: the route these tests send.
fn route_10_2(gateway: Option<&str>) -> Route {
    let mut r = Route::new(
        Family::Inet,
        Prefix {
            addr: "10.2.0.0".parse().unwrap(),
            len: 16,
        },
    );
    r.nexthop.gateway = gateway.map(|g| g.parse().unwrap());
    r
}

/// The direct ACK is the general encoder's, for requests of any length and flags.
#[test]
fn direct_ack_is_the_encoded_ack() {
    let r = route_10_2(Some("10.1.2.3"));
    for (seq, req) in [
        Request::NewRoute(r.clone(), ReqFlags::ADD),
        Request::DelRoute(r),
    ]
    .iter()
    .enumerate()
    {
        let mut m = convert::request_message(req, 0xdead_0000 + seq as u32, 0);
        m.header.flags |= nf::NLM_F_ACK;
        let b = m.to_bytes();
        let mut want = Vec::new();
        convert::ack(&b, Ok(()), false, 77).emit(&mut want);
        let mut got = Vec::new();
        emit_ack(&NetlinkHeader::parse_bytes(&b, 0).unwrap(), 77, &mut got);
        assert_eq!(got, want);
    }
}

/// Valid requests with bytes flipped, truncated and repeated: the fuzz property on a
/// deterministic sample, so CI checks it on every run.
#[test]
fn mangled_requests_never_change_state_unless_they_succeed() {
    let r = route_10_2(Some("10.1.2.3"));
    let reqs = [
        Request::NewRoute(r.clone(), ReqFlags::ADD),
        Request::DelRoute(r),
        Request::NewLink(
            Link {
                ifname: Some("x".into()),
                kind: Some(LinkKind::Dummy),
                ..Link::default()
            },
            ReqFlags::ADD,
        ),
        Request::DumpRoutes(None),
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..600 {
        let req = &reqs[round % reqs.len()];
        let mut b = convert::request_message(req, 1, 0).to_bytes();
        for _ in 0..(next() % 4) {
            let i = (next() as usize) % b.len();
            b[i] ^= 1 << (next() % 8);
        }
        if next() % 5 == 0 {
            let keep = (next() as usize) % b.len();
            b.truncate(keep);
        }
        check_datagram(&b);
    }
}

/// A datagram whose first message is its longest holds more messages than its read-ahead
/// list is first made for (the list is sized from the first message): the list grows, every
/// message keeps its place, and the datagram is answered as its bytes are.
#[test]
fn read_ahead_list_grows_past_its_first_message_estimate() {
    let mut long = route_10_2(Some("10.1.2.3"));
    long.priority = Some(5);
    long.metrics.mtu = Some(1400);
    let mut b = convert::request_message(&Request::NewRoute(long, ReqFlags::ADD), 1, 0).to_bytes();
    let first = b.len();
    let short = 8;
    for i in 0..short {
        let mut r = route_10_2(None);
        r.dst.len = 17 + i as u8;
        convert::request_message(&Request::DelRoute(r), 2 + i, 0).emit(&mut b);
    }
    assert!(b.len().div_ceil(first) < 1 + short as usize);
    let p = Prepared::new(b.clone().into());
    assert_eq!(p.routes.len(), 1 + short as usize);
    assert!(p
        .routes
        .iter()
        .all(|r| matches!(r, Some(Ok(Request::NewRoute(..) | Request::DelRoute(_))))));
    check_datagram(&b);
}

/// Datagrams read ahead, in batches, answered as their bytes are, with both copies equal
/// after each batch: route adds, deletes and failures among other requests, and a route
/// dump in the middle of a datagram (it publishes, and the replay runs, while the rest of
/// that datagram's read-ahead list is still to be applied).
#[test]
fn read_ahead_batches_match_the_general_path_on_both_copies() {
    let route = |third: u8, gw: Option<&str>| {
        let mut r = Route::new(
            Family::Inet,
            Prefix {
                addr: std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 9, third, 0)),
                len: 24,
            },
        );
        r.nexthop.gateway = gw.map(|g| g.parse().unwrap());
        r.rtype = if gw.is_some() {
            RouteType::Unicast
        } else {
            RouteType::Blackhole
        };
        r
    };
    let link = Link {
        ifname: Some("eth0".into()),
        kind: Some(LinkKind::Dummy),
        flags: IFF_UP,
        change: IFF_UP,
        ..Link::default()
    };
    let addr = Address {
        family: Family::Inet,
        prefixlen: 16,
        flags: 0,
        scope: 0,
        ifindex: 2,
        local: Some("10.1.0.1".parse().unwrap()),
        address: Some("10.1.0.1".parse().unwrap()),
        broadcast: None,
        label: None,
        metric: None,
        valid_lft: None,
        preferred_lft: None,
    };
    let datagram = |reqs: &[Request], seq: u32| {
        let mut b = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            let mut m = convert::request_message(r, seq + i as u32, 0);
            m.header.flags |= nf::NLM_F_ACK;
            m.emit(&mut b);
        }
        b
    };
    let batches = [
        vec![
            datagram(
                &[
                    Request::NewLink(link, ReqFlags::ADD),
                    Request::NewAddr(addr, ReqFlags::ADD),
                ],
                1,
            ),
            datagram(
                &[
                    Request::NewRoute(route(1, Some("10.1.0.2")), ReqFlags::ADD),
                    Request::NewRoute(route(2, None), ReqFlags::ADD),
                    // Exists already: EEXIST.
                    Request::NewRoute(route(1, Some("10.1.0.3")), ReqFlags::ADD),
                    // Unreachable gateway: an error from validation.
                    Request::NewRoute(route(3, Some("192.0.2.1")), ReqFlags::ADD),
                ],
                10,
            ),
        ],
        vec![
            datagram(
                &[
                    Request::NewRoute(route(4, Some("10.1.0.2")), ReqFlags::ADD),
                    Request::DumpRoutes(Some(Family::Inet)),
                    Request::NewRoute(route(5, Some("10.1.0.3")), ReqFlags::ADD),
                    Request::DelRoute(route(2, None)),
                    Request::NewRoute(route(1, Some("10.1.0.3")), ReqFlags::REPLACE),
                    Request::DumpLinks,
                    Request::DelRoute(route(7, None)),
                ],
                20,
            ),
            datagram(
                &[Request::NewRoute(route(6, Some("10.1.0.2")), ReqFlags::ADD)],
                30,
            ),
        ],
    ];
    let (mut plain, mut ahead) = (Engine::default(), Engine::default());
    for batch in &batches {
        let (mut out, mut ahead_out) = (Outcome::default(), Outcome::default());
        let (mut ctx, mut ahead_ctx) = (ClientCtx::default(), ClientCtx::default());
        plain.begin();
        ahead.begin();
        for d in batch {
            plain.handle(d, &mut ctx, u64::MAX, &mut out);
            let p = Prepared::new(d.clone().into_boxed_slice());
            ahead.handle_prepared(p, &mut ahead_ctx, u64::MAX, &mut ahead_out);
        }
        plain.publish();
        ahead.publish();
        assert!(drain(&mut out) == drain(&mut ahead_out));
        // The published copy, then the other one once replayed.
        assert!(everything(plain.fib()) == everything(ahead.fib()));
        ahead.catch_up();
        assert!(everything(plain.fib()) == everything(ahead.fib()));
    }
    // 10.9.1.0/24 replaced, .2 deleted, .3 refused, .7 never there.
    let ours: Vec<(IpAddr, Option<IpAddr>)> = everything(ahead.fib())
        .2
        .iter()
        .filter(|r| r.dst.len == 24)
        .map(|r| (r.dst.addr, r.nexthop.gateway))
        .collect();
    let want: Vec<(IpAddr, Option<IpAddr>)> = [
        (1, "10.1.0.3"),
        (4, "10.1.0.2"),
        (5, "10.1.0.3"),
        (6, "10.1.0.2"),
    ]
    .iter()
    .map(|&(third, gw)| (route(third, None).dst.addr, gw.parse().ok()))
    .collect();
    assert_eq!(ours, want);
}

/// A route dump, read in pieces of every size, is the state's routes encoded one by one
/// (what the templates copy is what encoding gives), then NLMSG_DONE.
#[test]
fn route_dumps_encode_every_route_as_the_model_does() {
    let mut e = Engine::default();
    let mut ctx = ClientCtx::default();
    let mut out = Outcome::default();
    let link = Link {
        ifname: Some("d0".into()),
        kind: Some(LinkKind::Dummy),
        flags: IFF_UP,
        change: IFF_UP,
        ..Link::default()
    };
    let mut reqs = vec![Request::NewLink(link, ReqFlags::ADD)];
    let v4 = |s: &str, len: u8| Prefix {
        addr: s.parse().unwrap(),
        len,
    };
    for i in 0..300u32 {
        let mut r = Route::new(
            Family::Inet,
            v4(&format!("10.{}.{}.0", i / 200, i % 200), 24),
        );
        r.nexthop.oif = 2;
        r.table = [254, 254, 1000, 7][(i % 4) as usize];
        r.tos = [0, 0, 0, 8][(i % 4) as usize];
        r.priority = (i % 5 == 0).then_some(i % 3);
        r.metrics.mtu = (i % 7 == 0).then_some(1400);
        r.rtype = if i % 11 == 0 {
            RouteType::Blackhole
        } else {
            RouteType::Unicast
        };
        if r.rtype == RouteType::Blackhole {
            r.nexthop.oif = 0;
        }
        reqs.push(Request::NewRoute(r, ReqFlags::ADD));
    }
    let mut def = Route::new(Family::Inet, v4("0.0.0.0", 0));
    def.nexthop.oif = 2;
    reqs.push(Request::NewRoute(def, ReqFlags::ADD));
    for i in 0..40u32 {
        let mut r = Route::new(Family::Inet6, v4(&format!("2001:db8:{i:x}::"), 48));
        r.nexthop.oif = 2;
        if i % 3 == 0 {
            r.src = Some(v4(&format!("2001:db8:ff{i:x}::"), 64));
        }
        reqs.push(Request::NewRoute(r, ReqFlags::ADD));
    }
    for (i, r) in reqs.iter().enumerate() {
        let m = convert::request_message(r, i as u32 + 1, 0).to_bytes();
        e.handle(&m, &mut ctx, 0, &mut out);
    }
    let failed = out
        .replies
        .iter()
        .filter_map(|r| match r {
            Reply::Messages(b) => Some(split_messages(b).filter(|m| status(m) != 0)),
            Reply::Dump(_) => None,
        })
        .flatten()
        .count();
    assert_eq!(failed, 0);
    let mut want = Vec::new();
    for mut r in e.fib().routes(None) {
        convert::as_reported(&mut r);
        convert::emit_route(&r, mt::RTM_NEWROUTE, nf::NLM_F_MULTI, 9, 0, &mut want);
        pad4(&mut want);
    }
    convert::done(9, 0).emit(&mut want);
    for limit in [1, 100, 700, 4096, 1 << 20] {
        let mut m = convert::request_message(&Request::DumpRoutes(None), 9, 0);
        m.header.flags = nf::NLM_F_REQUEST | nf::NLM_F_DUMP;
        let mut out = Outcome::default();
        e.handle(&m.to_bytes(), &mut ctx, 0, &mut out);
        let Some(Reply::Dump(d)) = out.replies.last_mut() else {
            panic!("a dump")
        };
        let mut got = Vec::new();
        let mut piece = Vec::new();
        loop {
            piece.clear();
            let more = d.fill(&mut piece, limit);
            got.extend_from_slice(&piece);
            if !more {
                break;
            }
        }
        assert!(got == want, "pieces of {limit} bytes");
    }
}

/// Neighbour notifications are stamped as the kernel stamps them: sequence 0, the
/// requester's port on RTM_NEWNEIGH and port 0 on RTM_DELNEIGH; a delete of a valid entry
/// announces its FAILED state first.
#[test]
fn neighbour_changes_are_announced_as_the_kernel_does() {
    let mut e = Engine::default();
    let mut ctx = ClientCtx {
        port: 77,
        groups: groups::bit(groups::NEIGH),
        ..ClientCtx::default()
    };
    let eth0 = Link {
        ifname: Some("eth0".into()),
        kind: Some(LinkKind::Dummy),
        ..Link::default()
    };
    let mut n = Neighbour::new("192.0.2.10".parse().unwrap(), 2);
    n.lladdr = Some(vec![2, 0, 0, 0, 0, 0x10]);
    let mut stream = Vec::new();
    for (i, req) in [
        Request::NewLink(eth0, ReqFlags::ADD),
        Request::NewNeigh(n.clone(), ReqFlags::ADD),
        Request::DelNeigh(n),
    ]
    .iter()
    .enumerate()
    {
        convert::request_message(req, i as u32 + 1, 0).emit(&mut stream);
    }
    let mut out = Outcome::default();
    let listening = ctx.groups;
    e.handle(&stream, &mut ctx, listening, &mut out);
    let seen: Vec<(u16, u32, u32, u16)> = out
        .notes
        .iter()
        .filter(|n| n.group == groups::NEIGH)
        .map(|n| {
            let (m, _) = NetlinkMessage::parse(&n.bytes, 0).unwrap();
            let Payload::Neighbour(nm) = &m.payload else {
                panic!("a neighbour message")
            };
            let h = m.header;
            (h.message_type, h.sequence, h.port, nm.header.state)
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (mt::RTM_NEWNEIGH, 0, 77, nud::PERMANENT),
            (mt::RTM_NEWNEIGH, 0, 77, nud::FAILED),
            (mt::RTM_DELNEIGH, 0, 0, nud::FAILED),
        ]
    );
}

#[test]
fn membership_requests_join_and_leave_groups() {
    let mut e = Engine::default();
    let mut ctx = ClientCtx::default();
    let mut out = Outcome::default();
    e.handle(
        &membership::request(MEMBERSHIP_ADD, groups::IPV4_ROUTE, 1),
        &mut ctx,
        0,
        &mut out,
    );
    assert!(groups::has(ctx.groups, groups::IPV4_ROUTE));
    e.handle(
        &membership::request(MEMBERSHIP_DROP, groups::IPV4_ROUTE, 2),
        &mut ctx,
        0,
        &mut out,
    );
    assert_eq!(ctx.groups, 0);
    e.handle(
        &membership::request(MEMBERSHIP_ADD, 0, 3),
        &mut ctx,
        0,
        &mut out,
    );
    let Some(Reply::Messages(b)) = out.replies.last() else {
        panic!("an answer")
    };
    let last = split_messages(b).last().expect("a message");
    assert_eq!(status(last), -22);
}

/// A read-only peer: every request other than a GET is refused with EPERM and no text,
/// read ahead or not, and changes nothing; GETs, dumps and memberships are answered.
#[test]
fn read_only_peers_read_but_every_change_gets_eperm() {
    let mut e = Engine::default();
    let link = Link {
        ifname: Some("d0".into()),
        kind: Some(LinkKind::Dummy),
        ..Link::default()
    };
    let mut admin = ClientCtx::default();
    let mut out = Outcome::default();
    let add =
        convert::request_message(&Request::NewLink(link.clone(), ReqFlags::ADD), 1, 0).to_bytes();
    e.handle(&add, &mut admin, 0, &mut out);
    let mut r = route_10_2(None);
    r.rtype = RouteType::Blackhole;
    let before = everything(e.fib());
    let mut changes: Vec<Vec<u8>> = [
        Request::NewRoute(r.clone(), ReqFlags::ADD),
        Request::DelRoute(r),
        Request::NewLink(link.clone(), ReqFlags::ADD),
        Request::DelLink(link),
    ]
    .iter()
    .map(|q| convert::request_message(q, 2, 0).to_bytes())
    .collect();
    // Every other type that is not of the GET kind, up to RTM_MAX, with a family byte.
    for t in (0x10..=RTM_MAX).filter(|t| (t - 0x10) & 3 != 2) {
        let mut m = vec![0u8; 20];
        m[0..4].copy_from_slice(&20u32.to_ne_bytes());
        m[4..6].copy_from_slice(&t.to_ne_bytes());
        m[6..8].copy_from_slice(&(nf::NLM_F_REQUEST | nf::NLM_F_ACK).to_ne_bytes());
        m[16] = 2;
        changes.push(m);
    }
    let mut ctx = ClientCtx {
        read_only: true,
        ..ClientCtx::default()
    };
    for c in &changes {
        for prepared in [false, true] {
            let mut out = Outcome::default();
            e.begin();
            if prepared {
                e.handle_prepared(Prepared::new(c.clone().into()), &mut ctx, 0, &mut out);
            } else {
                e.handle(c, &mut ctx, 0, &mut out);
            }
            e.publish();
            e.catch_up();
            let Some(Reply::Messages(b)) = out.replies.first() else {
                panic!("an answer to type {}", c[4]);
            };
            let (m, _) = NetlinkMessage::parse(b, 0).unwrap();
            let Payload::Error(err) = m.payload else {
                panic!("an error")
            };
            assert_eq!((err.error, err.message()), (-1, None), "type {}", c[4]);
            assert!(
                before == everything(e.fib()),
                "type {} changed the state",
                c[4]
            );
        }
    }
    let mut out = Outcome::default();
    let dump = convert::request_message(&Request::DumpLinks, 3, 0).to_bytes();
    e.handle(&dump, &mut ctx, 0, &mut out);
    e.handle(
        &membership::request(MEMBERSHIP_ADD, groups::LINK, 4),
        &mut ctx,
        0,
        &mut out,
    );
    let said = drain(&mut out);
    assert!(said.0.len() >= 2, "a dump and an ACK");
    assert!(groups::has(ctx.groups, groups::LINK));
}

/// As the kernel frames them: a GET's answer is a datagram of its own, apart from its
/// ACK; a dump asked with NLM_F_ACK ends at its NLMSG_DONE; a dump whose filter fails says
/// so in an NLMSG_DONE.
#[test]
fn answers_are_framed_as_the_kernel_frames_them() {
    let mut e = Engine::default();
    let mut ctx = ClientCtx::default();
    let with_ack = |r: &Request, seq| {
        let mut m = convert::request_message(r, seq, 0);
        m.header.flags |= nf::NLM_F_ACK;
        m.to_bytes()
    };
    let mut datagram = with_ack(
        &Request::GetLink(Link {
            ifindex: 1,
            ..Link::default()
        }),
        1,
    );
    datagram.extend(with_ack(&Request::DumpLinks, 2));
    // A next-hop dump filtered by NHA_ID, which the kernel's dump policy refuses.
    let mut nh = convert::request_message(&Request::DumpNexthops, 3, 0).to_bytes();
    nh.extend_from_slice(&[8, 0, 1, 0, 5, 0, 0, 0]);
    let len = nh.len() as u32;
    nh[..4].copy_from_slice(&len.to_ne_bytes());
    datagram.extend(nh);
    let mut out = Outcome::default();
    e.handle(&datagram, &mut ctx, 0, &mut out);
    let (answers, _) = drain(&mut out);
    let types: Vec<Vec<u16>> = answers
        .iter()
        .map(|b| {
            split_messages(b)
                .map(|m| {
                    NetlinkHeader::parse_bytes(m, 0)
                        .expect("a header")
                        .message_type
                })
                .collect()
        })
        .collect();
    assert_eq!(
        types,
        [
            vec![mt::RTM_NEWLINK, mt::NLMSG_ERROR],
            vec![mt::RTM_NEWLINK, mt::NLMSG_DONE],
            vec![mt::NLMSG_DONE],
        ]
    );
    let (first, rest) = (&answers[0], &answers[2]);
    assert_eq!(
        fit(first, 1 << 16),
        first.len() - ACK_LEN,
        "the answer goes alone"
    );
    assert_eq!(fit(&first[first.len() - ACK_LEN..], 1 << 16), ACK_LEN);
    assert_eq!(status(rest), -22);
}

/// What a [`PortBinder`] was asked, and what it answers `open` with.
#[derive(Default)]
struct Binder {
    refuse: Option<Errno>,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl PortBinder for Binder {
    fn open(&mut self, spec: &PortSpec) -> Result<Option<Vec<u8>>, RtError> {
        self.log.lock().unwrap().push(format!("open {}", spec.dev));
        match self.refuse {
            Some(e) => Err(RtError::new(e)),
            None => Ok(Some(vec![2, 0, 0, 0, 0, 0x77])),
        }
    }
    fn commit(&mut self, ifindex: Option<u32>) {
        self.log.lock().unwrap().push(format!("commit {ifindex:?}"));
    }
    fn removed(&mut self, ifindex: u32) {
        self.log.lock().unwrap().push(format!("removed {ifindex}"));
    }
    fn published(&mut self, _fib: &Fib) {}
}

/// A port link is made once its host interface is open, with the interface's address; a
/// refused open answers the request and makes no link; deleting the link closes its port;
/// a link that is no port link never asks the binder.
#[test]
fn port_links_are_made_only_with_their_port() {
    let port = |name: &str, dev: &str| Link {
        ifname: Some(name.into()),
        kind: Some(LinkKind::Port(PortSpec {
            dev: dev.into(),
            io: PortIo::AfPacket,
            punt: None,
        })),
        ..Link::default()
    };
    for refuse in [None, Some(Errno::ENODEV), Some(Errno::EPERM)] {
        let mut e = Engine::default();
        let binder = Binder {
            refuse,
            ..Binder::default()
        };
        let log = binder.log.clone();
        e.bind_ports(Box::new(binder));
        let r = e.own_request(Request::NewLink(port("p0", "veth0"), ReqFlags::ADD));
        let made = e
            .fib()
            .links()
            .into_iter()
            .find(|l| l.ifname.as_deref() == Some("p0"));
        match refuse {
            None => {
                assert_eq!(r, Ok(()));
                let made = made.expect("the link is made");
                assert_eq!(made.address, Some(vec![2, 0, 0, 0, 0, 0x77]));
                e.own_request(Request::DelLink(Link {
                    ifname: Some("p0".into()),
                    ..Link::default()
                }))
                .unwrap();
                let i = made.ifindex;
                assert_eq!(
                    *log.lock().unwrap(),
                    [
                        "open veth0".to_string(),
                        format!("commit Some({i})"),
                        format!("removed {i}")
                    ]
                );
            }
            Some(errno) => {
                assert_eq!(r.map_err(|e| e.errno), Err(errno));
                assert!(made.is_none(), "no link after a refused open");
                assert_eq!(*log.lock().unwrap(), ["open veth0"]);
            }
        }
        let dummy = Link {
            ifname: Some("d0".into()),
            kind: Some(LinkKind::Dummy),
            ..Link::default()
        };
        log.lock().unwrap().clear();
        e.own_request(Request::NewLink(dummy, ReqFlags::ADD))
            .unwrap();
        assert!(log.lock().unwrap().is_empty());
    }
}
