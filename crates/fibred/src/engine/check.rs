//! The engine's robustness property, [`check_datagram`], for the fuzz target
//! (`fuzz/fuzz_targets/server.rs`) and the tests.
//!
//! It drives fresh [`Engine`]s directly, with no I/O, and panics when the property fails; it
//! changes no state outside the engines it makes.

use super::{ClientCtx, Engine, Outcome, Prepared, Reply};
use fibre_fib::types::*;
use fibre_fib::Fib;
use fibre_proto::convert::{self, Request};

/// `IFF_UP`, for the links the checks bring up.
pub(super) const IFF_UP: u32 = 1;

/// Every object of a state, as dumps show them.
type Everything = (
    Vec<Link>,
    Vec<Address>,
    Vec<Route>,
    Vec<Rule>,
    Vec<NexthopObj>,
    Vec<Neighbour>,
);

/// Everything a dump shows, for comparing states.
pub(super) fn everything(fib: &Fib) -> Everything {
    (
        fib.links(),
        fib.addrs(None),
        fib.routes(None),
        fib.rules(None),
        fib.nexthops(),
        // A neighbour request that fails can leave the entry it created, in state NONE, as
        // the kernel does; every other entry and every proxy entry must be unchanged.
        fib.neighbours(None, false)
            .into_iter()
            .filter(|n| n.state != nud::NONE)
            .chain(fib.neighbours(None, true))
            .collect(),
    )
}

/// The engine's robustness property, for the fuzzer and the tests: on a small configured
/// state, handling `datagram` never panics, every dump it starts encodes to NLMSG_DONE, if no
/// request in it succeeded the state is unchanged, and the datagram read ahead ([`Prepared`])
/// gets the same answers, notifications and state. Panics when the property fails.
pub fn check_datagram(datagram: &[u8]) {
    let mut e = Engine::default();
    let mut setup = ClientCtx::default();
    let mut ignored = Outcome::default();
    let eth0 = Link {
        ifname: Some("eth0".into()),
        kind: Some(LinkKind::Dummy),
        flags: IFF_UP,
        change: IFF_UP,
        ..Link::default()
    };
    let mut r = Route::new(
        Family::Inet,
        Prefix {
            addr: std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 1, 0, 0)),
            len: 16,
        },
    );
    r.rtype = RouteType::Blackhole;
    let mut stream = Vec::new();
    for (i, req) in [
        Request::NewLink(eth0, ReqFlags::ADD),
        Request::NewRoute(r, ReqFlags::ADD),
    ]
    .iter()
    .enumerate()
    {
        convert::request_message(req, i as u32 + 1, 0).emit(&mut stream);
    }
    e.handle(&stream, &mut setup, 0, &mut ignored);
    let before = everything(e.fib());
    // The same datagram read ahead (as the daemon's client threads do) on an equal engine.
    let mut ahead = Engine::default();
    ahead.handle(
        &stream,
        &mut ClientCtx::default(),
        0,
        &mut Outcome::default(),
    );
    let mut ctx = ClientCtx::default();
    let mut out = Outcome::default();
    e.handle(datagram, &mut ctx, u64::MAX, &mut out);
    let mut ahead_ctx = ClientCtx::default();
    let mut ahead_out = Outcome::default();
    ahead.handle_prepared(
        Prepared::new(datagram.into()),
        &mut ahead_ctx,
        u64::MAX,
        &mut ahead_out,
    );
    let answers = drain(&mut out);
    assert!(
        answers == drain(&mut ahead_out),
        "a datagram read ahead is answered as its bytes are"
    );
    assert!(everything(e.fib()) == everything(ahead.fib()));
    // The other copy, brought up to date by replaying the log (route changes read ahead are
    // applied where they lie in the kept list).
    ahead.publish();
    ahead.catch_up();
    assert!(
        everything(e.fib()) == everything(ahead.fib()),
        "the replayed copy is the applied one"
    );
    assert_eq!(ctx.groups, ahead_ctx.groups);
    if !out.changed {
        assert!(
            everything(e.fib()) == before,
            "a datagram with no success changed the state"
        );
    }
    // From a peer that may only read, read ahead or not, nothing changes the state.
    for read_ahead in [false, true] {
        let mut guarded = Engine::default();
        guarded.handle(&stream, &mut ClientCtx::default(), 0, &mut ignored);
        let mut ro = ClientCtx {
            read_only: true,
            ..ClientCtx::default()
        };
        let mut out = Outcome::default();
        if read_ahead {
            guarded.handle_prepared(Prepared::new(datagram.into()), &mut ro, u64::MAX, &mut out);
        } else {
            guarded.handle(datagram, &mut ro, u64::MAX, &mut out);
        }
        drain(&mut out);
        assert!(
            !out.changed && everything(guarded.fib()) == before,
            "a reader changed the state"
        );
    }
}

/// What an outcome says: every answer as bytes, and every notification with its group.
type Said = (Vec<Vec<u8>>, Vec<(u32, Vec<u8>)>);

/// Every answer of an outcome as bytes (dumps read to their end) and its notifications.
pub(super) fn drain(out: &mut Outcome) -> Said {
    let mut answers = Vec::new();
    for r in &mut out.replies {
        match r {
            Reply::Messages(m) => answers.push(m.clone()),
            Reply::Dump(d) => {
                let mut buf = Vec::new();
                while d.fill(&mut buf, 16 << 10) {
                    answers.push(std::mem::take(&mut buf));
                }
                answers.push(buf);
            }
        }
    }
    let notes = out
        .notes
        .iter()
        .map(|n| (n.group, n.bytes.clone()))
        .collect();
    (answers, notes)
}
