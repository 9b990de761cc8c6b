//! Benchmark addresses, drawn repeatably from a fixed seed: inside the table's prefixes (a route
//! chosen uniformly, its host bits random: every address is a hit) or uniformly over the whole
//! address space (hits and misses in the proportion the table covers).

use crate::table::{Addr, Route};

/// SplitMix64: tiny, fast, and good enough to spread benchmark addresses; keeps the crate free of
/// a random-number dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is below 2^-40 for the sizes used here.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

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
