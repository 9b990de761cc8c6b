//! Benchmark addresses, drawn repeatably from a fixed seed: inside the table's prefixes (a route
//! chosen uniformly, its host bits random: every address is a hit) or uniformly over the whole
//! address space (hits and misses in the proportion the table covers).

use crate::table::{Addr, Route};

/// SplitMix64, the generator fibre-traffic draws its workloads with: the same seed gives the
/// same addresses here and there.
pub use fibre_traffic::workload::Rng;

/// Draws a random value of the address type.
pub trait RandomAddr: Addr {
    fn random(rng: &mut Rng) -> Self;
}

impl RandomAddr for u32 {
    fn random(rng: &mut Rng) -> u32 {
        (rng.next_u64() >> 32) as u32
    }
}

impl RandomAddr for u128 {
    fn random(rng: &mut Rng) -> u128 {
        (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())
    }
}

/// `n` addresses, each inside a route picked uniformly from `routes`.
pub fn inside<A: RandomAddr>(routes: &[Route<A>], n: usize, rng: &mut Rng) -> Vec<A> {
    (0..n)
        .map(|_| {
            let r = &routes[rng.below(routes.len())];
            r.prefix.or(A::random(rng).host_part(r.len))
        })
        .collect()
}

/// `n` addresses drawn uniformly from the whole address space.
pub fn uniform<A: RandomAddr>(n: usize, rng: &mut Rng) -> Vec<A> {
    (0..n).map(|_| A::random(rng)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_addresses_fall_in_their_prefixes() {
        let routes = [
            Route {
                prefix: 0x0a00_0000u32,
                len: 8,
                next_hop: 1,
            },
            Route {
                prefix: 0xc0a8_0100u32,
                len: 24,
                next_hop: 2,
            },
        ];
        let mut rng = Rng::new(7);
        for a in inside(&routes, 1000, &mut rng) {
            assert!(routes.iter().any(|r| a.masked(r.len) == r.prefix), "{a:#x}");
        }
    }
}
