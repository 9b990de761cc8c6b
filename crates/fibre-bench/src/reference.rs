//! The naive longest-prefix-match model every benchmark answer is checked against: one hash map
//! per prefix length present, probed from the longest length down. Obviously right, and fast
//! enough to answer a few million benchmark addresses.

use std::collections::HashMap;

use crate::table::{Addr, Route};
use crate::NO_ROUTE;

pub struct Reference<A> {
    /// (prefix length, prefix -> next hop), longest length first.
    levels: Vec<(u8, HashMap<A, u32>)>,
}

impl<A: Addr> Reference<A> {
    pub fn new(routes: &[Route<A>]) -> Reference<A> {
        let mut by_len: HashMap<u8, HashMap<A, u32>> = HashMap::new();
        for r in routes {
            by_len
                .entry(r.len)
                .or_default()
                .insert(r.prefix, r.next_hop);
        }
        let mut levels: Vec<_> = by_len.into_iter().collect();
        levels.sort_by_key(|level| std::cmp::Reverse(level.0));
        Reference { levels }
    }

    pub fn lookup(&self, addr: A) -> u32 {
        self.levels
            .iter()
            .find_map(|(len, map)| map.get(&addr.masked(*len)).copied())
            .unwrap_or(NO_ROUTE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_misses_say_so() {
        let routes = [
            Route {
                prefix: 0x0a00_0000u32,
                len: 8,
                next_hop: 1,
            },
            Route {
                prefix: 0x0a01_0000u32,
                len: 16,
                next_hop: 2,
            },
            Route {
                prefix: 0x0a01_0200u32,
                len: 24,
                next_hop: 3,
            },
        ];
        let m = Reference::new(&routes);
        assert_eq!(m.lookup(0x0a01_0203), 3);
        assert_eq!(m.lookup(0x0a01_0303), 2);
        assert_eq!(m.lookup(0x0a02_0000), 1);
        assert_eq!(m.lookup(0x0b00_0000), NO_ROUTE);
    }
}
