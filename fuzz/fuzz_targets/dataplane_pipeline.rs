//! Any sequence of frames through the whole forwarding plane of tests/forward's router (its
//! configuration applied as `fibre forward` applies it): each frame is a link byte (which of
//! a0..d0 it comes in on, modulo 4), a time step byte (milliseconds), a 16-bit big-endian length
//! and that many bytes. An input whose first byte has its top bit set runs on the SRv6 router
//! of tests/forward/srv6.batch and srv6_rfc.batch instead (seg6 routes of every mode, seg6local
//! SIDs with every behaviour and flavor, RPL and IOAM6 insertion, seg6 enabled on b0), so the
//! encapsulation and endpoint stages are reached. After every vector and the writer's turn, and
//! after the neighbour timers have run out, no panic, every packet received is accounted for
//! once (forwarded, delivered, punted, dropped or taken into reassembly), and only packets
//! waiting for a neighbour or in reassembly hold a buffer.
#![no_main]

use fibre_cli::online::{offline_fib, Backend};
use fibre_cli::{batch, Cli, Options};
use fibre_dataplane::pipeline::{apply_events, Config, Dataplane, Tx, View};
use fibre_fwd::FwdWriter;
use libfuzzer_sys::fuzz_target;

const CONFIG: &str = include_str!("../../tests/forward/config.batch");
const SRV6: &str = include_str!("../../tests/forward/srv6.batch");
const SRV6_RFC: &str = include_str!("../../tests/forward/srv6_rfc.batch");
/// The first byte's bit that picks [`SRV6`] and [`SRV6_RFC`].
const SRV6_BIT: u8 = 0x80;
const LINKS: [&str; 4] = ["a0", "b0", "c0", "d0"];

struct Discard;

impl Tx for Discard {
    fn send(&mut self, _: u32, _: &[u8]) {}
}

fn check(dp: &Dataplane) {
    let c = dp.counters();
    assert_eq!(
        c.received,
        c.forwarded + c.delivered + c.punted + c.dropped + c.reasm_queued,
        "every packet has one fate: {c:?}"
    );
    assert_eq!(
        dp.frames_held() as u64,
        c.waiting + dp.reassembling() as u64,
        "only waiting packets and packets in reassembly hold a frame"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut cli = Cli::new(Backend::from(offline_fib()), Options::default());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let configs: &[&str] = match data.first() {
        Some(b) if b & SRV6_BIT != 0 => &[SRV6, SRV6_RFC],
        _ => &[CONFIG],
    };
    for config in configs {
        assert_eq!(batch::run_text(&mut cli, "config", config, &mut out, &mut err), 0);
    }
    let Backend::Local(fib) = cli.fib else {
        unreachable!("an offline CLI")
    };
    let mut fib = *fib;
    let ifindex: Vec<u32> = LINKS
        .iter()
        .map(|n| fib.link_index(n).expect("configured link"))
        .collect();
    let (mut fwd, _) = FwdWriter::new(&fib);
    // Half the inputs run with the headroom the routes need, half with the default (copies).
    let cfg = match data.get(1).is_some_and(|b| b & 1 != 0) {
        true => Config::default().with_encap_headroom(&fib),
        false => Config::default(),
    };
    let mut dp = Dataplane::new(&cfg).expect("dataplane");
    let mut now = 1_700_000_000_000_000_000u64;
    let mut rest = data;
    let mut actions = Vec::new();
    while let [link, step, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (frame, next) = tail.split_at(len);
        rest = next;
        now += u64::from(*step) * 1_000_000;
        actions.clear();
        fib.neigh_timers(now, &mut actions);
        fwd.update(&fib);
        {
            let table = fwd.latest();
            let v = View { fib: &fib, fwd: table };
            dp.neigh_actions(v, now, &actions, &mut Discard);
            let iif = ifindex[usize::from(*link) % LINKS.len()];
            dp.receive(v, now, &[(iif, frame)], &mut Discard);
        }
        actions.clear();
        apply_events(&mut fib, dp.take_events(), now, &mut actions);
        fwd.update(&fib);
        let table = fwd.latest();
        dp.neigh_actions(View { fib: &fib, fwd: table }, now, &actions, &mut Discard);
        check(&dp);
    }
    while let Some(at) = [fib.neigh_next_timer(), dp.next_timer()].into_iter().flatten().min() {
        actions.clear();
        fib.neigh_timers(at, &mut actions);
        fwd.update(&fib);
        let v = View { fib: &fib, fwd: fwd.latest() };
        dp.neigh_actions(v, at, &actions, &mut Discard);
        dp.run_timers(v, at, &mut Discard);
        check(&dp);
    }
});
