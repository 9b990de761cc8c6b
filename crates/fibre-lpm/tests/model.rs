//! Property tests of `Lpm4` and `Lpm6` against a naive model: a list of routes scanned per lookup.

use std::collections::BTreeMap;

use fibre_lpm::v4::Lpm4;
use fibre_lpm::v6::Lpm6;
use fibre_lpm::{LpmError, MAX_VALUE, NO_ROUTE};
use proptest::prelude::*;

/// Proptest cases per property: fewer in debug builds, which run the naive model ~20x slower.
const CASES: u32 = if cfg!(debug_assertions) { 64 } else { 256 };

/// The naive model: exact routes in a map, longest match by scanning all of them.
#[derive(Default, Clone)]
struct Model<A> {
    routes: BTreeMap<(A, u8), u32>,
}

macro_rules! family {
    ($modname:ident, $lpm:ty, $addr:ty, $bits:expr, $lens:expr) => {
        mod $modname {
            use super::*;

            pub type Addr = $addr;
            pub const BITS: u32 = $bits;

            pub fn mask(a: Addr, len: u8) -> Addr {
                if len == 0 {
                    0
                } else {
                    a & (Addr::MAX << (BITS - u32::from(len)))
                }
            }

            pub fn last(a: Addr, len: u8) -> Addr {
                match u32::from(len) {
                    0 => Addr::MAX,
                    l if l == BITS => a,
                    l => mask(a, len) | (Addr::MAX >> l),
                }
            }

            impl Model<Addr> {
                pub fn insert(&mut self, p: Addr, l: u8, v: u32) -> Option<u32> {
                    self.routes.insert((mask(p, l), l), v)
                }
                pub fn remove(&mut self, p: Addr, l: u8) -> Option<u32> {
                    self.routes.remove(&(mask(p, l), l))
                }
                pub fn lookup(&self, a: Addr) -> Option<u32> {
                    self.routes
                        .iter()
                        .filter(|(&(p, l), _)| mask(a, l) == p)
                        .max_by_key(|(&(_, l), _)| l)
                        .map(|(_, &v)| v)
                }
            }

            /// Addresses clustered around a few bases so that generated prefixes nest and
            /// share nodes; lengths spread over the whole range, weighted at node boundaries.
            pub fn prefix() -> impl Strategy<Value = (Addr, u8)> {
                let bases: Vec<Addr> = (0..4u32)
                    .map(|i| (Addr::from(0x9E37_79B9u32.wrapping_mul(i + 1))) << (BITS - 32))
                    .collect();
                (0..bases.len(), any::<Addr>(), prop::sample::select($lens.to_vec()), 0u32..BITS)
                    .prop_map(move |(b, noise, len, keep)| {
                        // Keep the base's top bits and randomise the rest below `keep`.
                        let hi = mask(bases[b], keep as u8);
                        let lo = if keep == 0 { noise } else { noise & (Addr::MAX >> keep) };
                        (hi | lo, len)
                    })
            }

            #[derive(Clone, Debug)]
            pub enum Op {
                Insert(Addr, u8, u32),
                /// Remove the route at this index of the current route list (modulo its size).
                RemoveExisting(usize),
                /// Remove a random prefix, usually absent.
                RemoveRandom(Addr, u8),
            }

            pub fn op() -> impl Strategy<Value = Op> {
                prop_oneof![
                    5 => (prefix(), 0u32..16).prop_map(|((p, l), v)| Op::Insert(p, l, v)),
                    3 => any::<usize>().prop_map(Op::RemoveExisting),
                    1 => prefix().prop_map(|(p, l)| Op::RemoveRandom(p, l)),
                ]
            }

            /// Addresses worth probing: each route's first and last address and their
            /// neighbours, plus the given random ones.
            pub fn probes(model: &Model<Addr>, random: &[Addr]) -> Vec<Addr> {
                let mut out = random.to_vec();
                for &(p, l) in model.routes.keys() {
                    let e = last(p, l);
                    out.extend([p, e, p.wrapping_sub(1), e.wrapping_add(1)]);
                }
                out
            }

            pub fn check(lpm: &$lpm, model: &Model<Addr>, probes: &[Addr]) -> Result<(), TestCaseError> {
                prop_assert_eq!(lpm.len(), model.routes.len());
                let mut batch = vec![0u32; probes.len()];
                lpm.lookup_batch(probes, &mut batch);
                for (&a, &b) in probes.iter().zip(&batch) {
                    let want = model.lookup(a);
                    prop_assert_eq!(lpm.lookup(a), want, "lookup {:#x}", a);
                    prop_assert_eq!(b, want.unwrap_or(NO_ROUTE), "lookup_batch {:#x}", a);
                }
                for (&(p, l), &v) in &model.routes {
                    prop_assert_eq!(lpm.get(p, l), Some(v));
                }
                Ok(())
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(CASES))]

                #[test]
                fn matches_model(ops in prop::collection::vec(op(), 1..120),
                                 random in prop::collection::vec(any::<Addr>(), 32)) {
                    let mut lpm = <$lpm>::new();
                    let mut model = Model::<Addr>::default();
                    for op in ops {
                        match op {
                            Op::Insert(p, l, v) => {
                                prop_assert_eq!(lpm.insert(p, l, v), Ok(model.insert(p, l, v)));
                            }
                            Op::RemoveExisting(i) => {
                                if model.routes.is_empty() { continue; }
                                let &(p, l) = model.routes.keys().nth(i % model.routes.len()).unwrap();
                                prop_assert_eq!(lpm.remove(p, l), model.remove(p, l));
                            }
                            Op::RemoveRandom(p, l) => {
                                prop_assert_eq!(lpm.remove(p, l), model.remove(p, l));
                            }
                        }
                    }
                    check(&lpm, &model, &probes(&model, &random))?;
                    // Removing everything leaves the shape of an empty table.
                    let routes: Vec<_> = model.routes.keys().copied().collect();
                    for (p, l) in routes {
                        prop_assert_eq!(lpm.remove(p, l), model.remove(p, l));
                    }
                    prop_assert_eq!(lpm.shape(), <$lpm>::new().shape());
                    check(&lpm, &model, &random)?;
                }

                #[test]
                fn batches_match_model(ops in prop::collection::vec(op(), 1..150),
                                       cuts in prop::collection::vec(1usize..40, 1..8),
                                       random in prop::collection::vec(any::<Addr>(), 32)) {
                    // The same ops through batches (cut at random points) and one by one.
                    let mut batched = <$lpm>::new();
                    let mut single = <$lpm>::new();
                    let mut model = Model::<Addr>::default();
                    let mut ops = ops.into_iter().peekable();
                    for cut in cuts.iter().cycle() {
                        if ops.peek().is_none() { break; }
                        {
                            let mut batch = batched.batch();
                            for op in ops.by_ref().take(*cut) {
                                match op {
                                    Op::Insert(p, l, v) => {
                                        let want = model.insert(p, l, v);
                                        prop_assert_eq!(batch.insert(p, l, v), Ok(want));
                                        prop_assert_eq!(batch.get(p, l), Some(v));
                                        single.insert(p, l, v).unwrap();
                                    }
                                    Op::RemoveExisting(i) => {
                                        if model.routes.is_empty() { continue; }
                                        let &(p, l) = model.routes.keys().nth(i % model.routes.len()).unwrap();
                                        prop_assert_eq!(batch.remove(p, l), model.remove(p, l));
                                        single.remove(p, l);
                                    }
                                    Op::RemoveRandom(p, l) => {
                                        prop_assert_eq!(batch.remove(p, l), model.remove(p, l));
                                        single.remove(p, l);
                                    }
                                }
                            }
                        }
                        check(&batched, &model, &random)?;
                    }
                    check(&batched, &model, &probes(&model, &random))?;
                    prop_assert_eq!(batched.shape(), single.shape());
                }

                #[test]
                fn order_independent(routes in prop::collection::vec((prefix(), 0u32..16), 1..80),
                                     junk in prop::collection::vec(prefix(), 0..40),
                                     seed in any::<u64>(),
                                     random in prop::collection::vec(any::<Addr>(), 32)) {
                    // Final set: the last value for each prefix.
                    let mut model = Model::<Addr>::default();
                    for &((p, l), v) in &routes {
                        model.insert(p, l, v);
                    }
                    let set: Vec<(Addr, u8, u32)> =
                        model.routes.iter().map(|(&(p, l), &v)| (p, l, v)).collect();

                    // A: inserted in address order.
                    let mut a = <$lpm>::new();
                    for &(p, l, v) in &set {
                        a.insert(p, l, v).unwrap();
                    }
                    // B: shuffled, with junk routes and stale values inserted then removed.
                    let mut order = set.clone();
                    let mut x = seed | 1;
                    for i in (1..order.len()).rev() {
                        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                        order.swap(i, (x % (i as u64 + 1)) as usize);
                    }
                    let mut b = <$lpm>::new();
                    for &(p, l) in &junk {
                        b.insert(p, l, 99).unwrap();
                    }
                    for &(p, l, v) in &order {
                        b.insert(p, l, v ^ 1).unwrap();
                        b.insert(p, l, v).unwrap();
                    }
                    for &(p, l) in &junk {
                        if !model.routes.contains_key(&(mask(p, l), l)) {
                            b.remove(p, l);
                        }
                    }
                    // C: bulk-built, in reverse order, with duplicates (the later one wins).
                    let c = <$lpm>::from_routes(
                        set.iter().rev().map(|&(p, l, v)| (p, l, v ^ 2)).chain(set.iter().copied()),
                    ).unwrap();

                    let probes = probes(&model, &random);
                    for t in [&a, &b, &c] {
                        check(t, &model, &probes)?;
                    }
                    prop_assert_eq!(a.shape(), b.shape());
                    prop_assert_eq!(a.shape(), c.shape());
                }
            }

            #[test]
            fn rejects_bad_input() {
                let mut lpm = <$lpm>::new();
                let too_long = BITS as u8 + 1;
                assert_eq!(lpm.insert(0, too_long, 1), Err(LpmError::InvalidLength(too_long)));
                assert_eq!(lpm.insert(0, 8, MAX_VALUE + 1), Err(LpmError::ValueTooLarge(MAX_VALUE + 1)));
                assert_eq!(lpm.insert(0, 8, MAX_VALUE), Ok(None));
                assert_eq!(lpm.lookup(1), Some(MAX_VALUE));
                assert_eq!(lpm.remove(0, too_long), None);
                assert!(<$lpm>::from_routes([(0, too_long, 1)]).is_err());
                assert_eq!(lpm.len(), 1);
            }

            /// A node with 64 leaf runs (the largest record), turned into an internal node and
            /// back by a longer route, then thinned out.
            #[test]
            fn dense_node() {
                let base: Addr = (0x0A00_0000 as Addr) << (BITS - 32);
                // The direct level's length: 18 bits for IPv4, 16 for IPv6.
                let node_len: u8 = if BITS == 32 { 18 } else { 16 };
                let step: Addr = 1 << (BITS - u32::from(node_len) - 6);
                let mut lpm = <$lpm>::new();
                let mut model = Model::<Addr>::default();
                let mut probes = Vec::new();
                for i in 0..64 {
                    let p = base + step * i as Addr;
                    lpm.insert(p, node_len + 6, i).unwrap();
                    model.insert(p, node_len + 6, i);
                    probes.extend([p, p + step / 2, p + step - 1]);
                }
                let check = |lpm: &$lpm, model: &Model<Addr>| {
                    let mut out = vec![0; probes.len()];
                    lpm.lookup_batch(&probes, &mut out);
                    for (&a, &b) in probes.iter().zip(&out) {
                        assert_eq!(lpm.lookup(a), model.lookup(a), "{a:#x}");
                        assert_eq!(b, model.lookup(a).unwrap_or(NO_ROUTE), "{a:#x}");
                    }
                };
                check(&lpm, &model);
                let deep = base + step * 37 + step / 4;
                lpm.insert(deep, node_len + 9, 99).unwrap();
                model.insert(deep, node_len + 9, 99);
                check(&lpm, &model);
                assert_eq!(lpm.remove(deep, node_len + 9), model.remove(deep, node_len + 9));
                check(&lpm, &model);
                for i in (0..64).step_by(2) {
                    let p = base + step * i as Addr;
                    assert_eq!(lpm.remove(p, node_len + 6), model.remove(p, node_len + 6));
                    check(&lpm, &model);
                }
            }

            #[test]
            fn default_route_and_host_routes() {
                let mut lpm = <$lpm>::new();
                assert_eq!(lpm.lookup(0), None);
                lpm.insert(0, 0, 7).unwrap();
                let host: Addr = Addr::MAX - 5;
                lpm.insert(host, BITS as u8, 8).unwrap();
                assert_eq!(lpm.lookup(host), Some(8));
                assert_eq!(lpm.lookup(host - 1), Some(7));
                assert_eq!(lpm.lookup(host + 1), Some(7));
                assert_eq!(lpm.remove(0, 0), Some(7));
                assert_eq!(lpm.lookup(host + 1), None);
                assert_eq!(lpm.lookup(host), Some(8));
            }
        }
    };
}

family!(
    v4,
    Lpm4,
    u32,
    32,
    [0u8, 1, 7, 8, 12, 16, 17, 18, 19, 20, 23, 24, 25, 28, 30, 31, 32]
);
family!(
    v6,
    Lpm6,
    u128,
    128,
    [0u8, 3, 15, 16, 17, 21, 22, 23, 28, 29, 32, 40, 47, 48, 52, 64, 100, 124, 125, 127, 128]
);

/// `Lpm6` buckets deep enough to split their nodes several times: hundreds of prefixes in two
/// /16s (one bucket each, or a table once a prefix is longer than /48), inserted in random
/// order, half removed, then all removed; against the model, a bulk build, and the empty table.
mod v6_buckets {
    use super::*;

    const BASES: [u128; 2] = [0x2a00 << 112, 0x2a01 << 112];
    /// Mostly the lengths of the real table, a few longer than a /16 bucket's window (/48),
    /// and a few at or above the root's /16.
    const LENS: [u8; 20] = [
        0, 8, 16, 17, 20, 24, 29, 32, 32, 36, 40, 44, 47, 48, 48, 48, 48, 56, 64, 128,
    ];
    const BUCKET_CASES: u32 = if cfg!(debug_assertions) { 8 } else { 48 };

    fn route() -> impl Strategy<Value = (u128, u8, u32)> {
        (
            0..BASES.len(),
            any::<u128>(),
            prop::sample::select(LENS.to_vec()),
            0u32..50,
        )
            .prop_map(|(b, noise, len, v)| (v6::mask(BASES[b] | noise >> 16, len), len, v))
    }

    fn check(lpm: &Lpm6, model: &Model<u128>, probes: &[u128]) -> Result<(), TestCaseError> {
        let mut out = vec![0u32; probes.len()];
        lpm.lookup_batch(probes, &mut out);
        for (&a, &b) in probes.iter().zip(&out) {
            let want = model.lookup(a);
            prop_assert_eq!(lpm.lookup(a), want, "lookup {:#x}", a);
            prop_assert_eq!(b, want.unwrap_or(NO_ROUTE), "lookup_batch {:#x}", a);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(BUCKET_CASES))]

        #[test]
        fn deep_buckets(routes in prop::collection::vec(route(), 200..700),
                        keep in prop::collection::vec(any::<bool>(), 700),
                        random in prop::collection::vec(any::<u128>(), 64)) {
            let mut lpm = Lpm6::new();
            let mut model = Model::<u128>::default();
            for &(p, l, v) in &routes {
                prop_assert_eq!(lpm.insert(p, l, v), Ok(model.insert(p, l, v)));
            }
            let random: Vec<u128> = random.iter().map(|&r| BASES[(r & 1) as usize] | r >> 16).collect();
            check(&lpm, &model, &v6::probes(&model, &random))?;
            let bulk = Lpm6::from_routes(model.routes.iter().map(|(&(p, l), &v)| (p, l, v))).unwrap();
            prop_assert_eq!(lpm.shape(), bulk.shape());
            check(&bulk, &model, &v6::probes(&model, &random))?;

            // Remove about half, in insertion order, then compare with a fresh build.
            for (&(p, l, _), &k) in routes.iter().zip(&keep) {
                if !k {
                    prop_assert_eq!(lpm.remove(p, l), model.remove(p, l));
                }
            }
            check(&lpm, &model, &v6::probes(&model, &random))?;
            let rest = Lpm6::from_routes(model.routes.iter().map(|(&(p, l), &v)| (p, l, v))).unwrap();
            prop_assert_eq!(lpm.shape(), rest.shape());

            // And the rest, in reverse order: back to the empty table.
            for &(p, l, _) in routes.iter().rev() {
                prop_assert_eq!(lpm.remove(p, l), model.remove(p, l));
            }
            prop_assert_eq!(lpm.shape(), Lpm6::new().shape());
            check(&lpm, &model, &random)?;
        }
    }
}
