//! Model check, under loom, of the input route cache against the publication of the routing
//! state (fibre-publish's left-right protocol, the code fibred runs): a writer removes the
//! egress link of a cached route and publishes while a worker decides packets through its
//! cache, one read guard per vector. In every interleaving, a vector that starts after the
//! publish (it saw the writer's flag, set after `publish` returned) never answers from the
//! entry made before it, and every vector answers as `Fib::route_input` does on the copy it
//! reads. Run with:
//!   RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p fibre-dataplane --test input_cache_loom
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;

use fibre_dataplane::input_cache::{CacheConfig, InputCache, Mode};
use fibre_fib::build::*;
use fibre_fib::*;
use fibre_publish::{Replica, Writer};

/// The routing state in one copy.
struct Routing(Fib);

/// The one change: the egress link of the cached route goes.
#[derive(Clone, Copy)]
struct RemoveEgress;

impl Routing {
    fn remove_egress(&mut self) {
        let i = self.0.link_index("d2").expect("d2");
        self.0
            .link_del(&Link {
                ifindex: i,
                ..Link::default()
            })
            .expect("link del");
    }
}

impl Replica for Routing {
    type Op = RemoveEgress;
    type Output = ();
    type Log = Vec<RemoveEgress>;
    fn apply(&mut self, op: RemoveEgress, log: &mut Vec<RemoveEgress>) {
        self.remove_egress();
        log.push(op);
    }
    fn replay(&mut self, log: &mut Vec<RemoveEgress>) {
        for _ in log.drain(..) {
            self.remove_egress();
        }
    }
}

/// Links d0 (in), d1 and d2; 198.51.100.0/24 through d2, 198.51.0.0/16 through d1.
fn routing() -> Routing {
    let mut f = Fib::default();
    for (l, name) in ["d0", "d1", "d2"].iter().enumerate() {
        let i = link(&mut f, name, [2, 0, 0, 0, 0, l as u8]);
        addr(&mut f, i, &format!("10.{l}.0.1"), 24);
    }
    f.route_new(&route("198.51.100.0", 24, &["10.2.0.2"]), ReqFlags::ADD)
        .expect("route");
    f.route_new(&route("198.51.0.0", 16, &["10.1.0.2"]), ReqFlags::ADD)
        .expect("route");
    Routing(f)
}

#[test]
fn no_vector_after_the_publish_answers_from_an_entry_made_before() {
    loom::model(|| {
        let mut writer = Writer::from_copies(routing(), routing());
        let reader = writer.reader();
        let (d1, d2) = {
            let f = &writer.latest().0;
            (
                f.link_index("d1").expect("d1"),
                f.link_index("d2").expect("d2"),
            )
        };
        let published = Arc::new(AtomicBool::new(false));
        let seen = published.clone();
        let worker = loom::thread::spawn(move || {
            let mut cache = InputCache::new(CacheConfig {
                mode: Mode::Cache,
                entries: 8,
            });
            let k = InputKey {
                dst: ip("198.51.100.7"),
                src: ip("10.0.0.5"),
                iif: 0,
                tos: 0,
                mark: 0,
                proto: 17,
                sport: 1,
                dport: 2,
                flowlabel: 0,
            };
            let mut hits = 0;
            for _ in 0..2 {
                let after = seen.load(Ordering::Acquire);
                let guard = reader.read();
                let fib = &guard.0;
                let k = InputKey {
                    iif: fib.link_index("d0").expect("d0"),
                    ..k
                };
                let mut out = [Err(InputDrop::NoRoute)];
                cache.decide(fib, &[k], &mut out);
                assert_eq!(out[0], fib.route_input(&k));
                let oif = match out[0] {
                    Ok(InputRoute::Forward(r)) => r.oif,
                    other => panic!("{other:?}"),
                };
                if after {
                    assert_eq!(
                        oif, d1,
                        "an entry made before the publish answered after it"
                    );
                } else {
                    assert!(oif == d1 || oif == d2);
                }
                hits = cache.counters().hits;
            }
            hits
        });
        writer.apply(RemoveEgress);
        writer.publish();
        published.store(true, Ordering::Release);
        // The old copy is written next: only once the worker left it.
        writer.catch_up();
        let hits = worker.join().expect("worker");
        assert!(hits <= 1);
    });
}
