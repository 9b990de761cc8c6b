//! The real 2026 Internet table through `Lpm4` and `Lpm6`: bulk and incremental builds, a large
//! sample of lookups checked against a naive model, then incremental removal of half the table.
//! Prints load rates and memory. Skips (with a message) when the table is absent.

#[path = "common/rib.rs"]
mod rib;

use std::collections::HashMap;
use std::time::Instant;

use fibre_lpm::v4::Lpm4;
use fibre_lpm::v6::Lpm6;
use fibre_lpm::NO_ROUTE;
use rib::Rng;

/// Lookups checked per family and kind (inside prefixes / uniformly random).
const SAMPLE: usize = if cfg!(debug_assertions) {
    50_000
} else {
    400_000
};

/// The naive model: one hash map per prefix length, probed longest first.
struct Model<A> {
    by_len: Vec<HashMap<A, u32>>,
}

macro_rules! model {
    ($addr:ty, $bits:expr) => {
        impl Model<$addr> {
            fn new(routes: &[($addr, u8, u32)]) -> Self {
                let mut by_len = vec![HashMap::new(); $bits + 1];
                for &(p, l, v) in routes {
                    by_len[l as usize].insert(p, v);
                }
                Model { by_len }
            }
            fn remove(&mut self, p: $addr, l: u8) {
                self.by_len[l as usize].remove(&p);
            }
            fn lookup(&self, a: $addr) -> u32 {
                (0..=$bits)
                    .rev()
                    .find_map(|l: u32| {
                        let m = if l == 0 {
                            0
                        } else {
                            a & (<$addr>::MAX << ($bits - l))
                        };
                        self.by_len[l as usize].get(&m).copied()
                    })
                    .unwrap_or(NO_ROUTE)
            }
        }
    };
}
model!(u32, 32);
model!(u128, 128);

fn mib(b: usize) -> f64 {
    b as f64 / (1 << 20) as f64
}

macro_rules! check_family {
    ($name:literal, $lpm:ty, $addr:ty, $routes:expr, $hits:expr, $random:expr) => {{
        let routes = $routes;
        let t = Instant::now();
        let bulk = <$lpm>::from_routes(routes.iter().copied()).unwrap();
        let bulk_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut inc = <$lpm>::new();
        for &(p, l, v) in routes.iter() {
            inc.insert(p, l, v).unwrap();
        }
        let inc_s = t.elapsed().as_secs_f64();
        println!(
            "{}: {} routes; bulk build {:.0} ms ({:.2} M routes/s), incremental {:.0} ms ({:.2} M routes/s); \
             memory {:.1} MiB ({:.1} MiB read by lookups); {:?}",
            $name, routes.len(), bulk_s * 1e3, routes.len() as f64 / bulk_s / 1e6,
            inc_s * 1e3, routes.len() as f64 / inc_s / 1e6,
            mib(bulk.memory_bytes()), mib(bulk.lookup_bytes()), bulk.shape(),
        );
        assert_eq!(bulk.len(), routes.len());
        assert_eq!(bulk.shape(), inc.shape());

        let mut model = Model::<$addr>::new(&routes);
        let mut rng = Rng(0x5EED_0F_F1B2E);
        let check = |lpm: &$lpm, model: &Model<$addr>, rng: &mut Rng| {
            for addrs in [$hits(&routes, SAMPLE, rng), $random(SAMPLE, rng)] {
                let mut out = vec![0; addrs.len()];
                lpm.lookup_batch(&addrs, &mut out);
                for (&a, &b) in addrs.iter().zip(&out) {
                    let want = model.lookup(a);
                    assert_eq!(b, want, "{} batch lookup {:#x}", $name, a);
                    assert_eq!(lpm.lookup(a).unwrap_or(NO_ROUTE), want, "{} lookup {:#x}", $name, a);
                }
            }
        };
        check(&bulk, &model, &mut rng);
        check(&inc, &model, &mut rng);

        // Remove every other route, one by one, from the incrementally built table.
        let t = Instant::now();
        for &(p, l, v) in routes.iter().step_by(2) {
            assert_eq!(inc.remove(p, l), Some(v));
        }
        let rm_s = t.elapsed().as_secs_f64();
        for &(p, l, _) in routes.iter().step_by(2) {
            model.remove(p, l);
        }
        println!("{}: removed {} routes in {:.0} ms ({:.2} M routes/s)", $name,
                 routes.len().div_ceil(2), rm_s * 1e3, routes.len() as f64 / 2.0 / rm_s / 1e6);
        check(&inc, &model, &mut rng);
        let rest = <$lpm>::from_routes(routes.iter().skip(1).step_by(2).copied()).unwrap();
        assert_eq!(inc.shape(), rest.shape(), "{}: canonical form after removals", $name);
    }};
}

#[test]
fn real_table_v4() {
    let Some(rib) = rib::load() else { return };
    check_family!(
        "IPv4",
        Lpm4,
        u32,
        rib.v4,
        rib::v4_hits,
        |n, rng: &mut Rng| { (0..n).map(|_| rng.next() as u32).collect::<Vec<u32>>() }
    );
}

#[test]
fn real_table_v6() {
    let Some(rib) = rib::load() else { return };
    check_family!(
        "IPv6",
        Lpm6,
        u128,
        rib.v6,
        rib::v6_hits,
        |n, rng: &mut Rng| {
            // Uniform over 2000::/3, where announced space is; uniform over all of it would miss.
            (0..n)
                .map(|_| {
                    ((u128::from(rng.next()) << 64 | u128::from(rng.next())) >> 3) | (1u128 << 125)
                })
                .collect::<Vec<u128>>()
        }
    );
}
