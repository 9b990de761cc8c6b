//! The writer's generations and the memos of request validation that depend on them.
//!
//! [`Generations`] counts changes: `all` moves on every mutation (what [`crate::Fib::gen`]
//! answers), `resolve` on every change that can alter how a gateway or a plain request
//! validates (links, addresses, rules, routes of link scope or wider). A [`Memo`] is a map
//! valid at one stamp: read or written at another stamp, it forgets everything first. So a
//! memo stamped with the `resolve` generation can never answer from before a change that
//! could alter its answers, and no caller can forget to invalidate it: the fields are
//! private, the only ways in are the methods here.

use std::hash::Hash;

use crate::hash::KeyedMap;

/// The change counters (see the module documentation).
#[derive(Debug, Clone, Default)]
pub(crate) struct Generations {
    all: u64,
    resolve: u64,
}

impl Generations {
    /// Bumped by every mutation.
    #[inline]
    pub fn all(&self) -> u64 {
        self.all
    }

    /// Bumped by every change that can alter a gateway resolution or a request's validation.
    #[inline]
    pub fn resolve(&self) -> u64 {
        self.resolve
    }

    /// A change; `affects_resolve` when it can alter how gateways resolve.
    #[inline]
    pub fn changed(&mut self, affects_resolve: bool) {
        self.all += 1;
        if affects_resolve {
            self.resolve += 1;
        }
    }
}

/// A map valid at one stamp (see the module documentation). Keyed hash: memo keys are fields
/// of requests, as netlink peers sent them.
#[derive(Debug, Clone)]
pub(crate) struct Memo<K, V, S> {
    map: KeyedMap<K, V>,
    at: Option<S>,
}

impl<K, V, S> Default for Memo<K, V, S> {
    fn default() -> Self {
        Memo {
            map: KeyedMap::default(),
            at: None,
        }
    }
}

impl<K: Hash + Eq, V, S: PartialEq + Copy> Memo<K, V, S> {
    /// Whether the memo holds answers of stamp `at`.
    #[inline]
    pub fn is_at(&self, at: S) -> bool {
        self.at == Some(at)
    }

    /// The answer for `k` recorded at stamp `at`; at any other stamp the memo is emptied and
    /// restamped first.
    #[inline]
    pub fn get(&mut self, at: S, k: &K) -> Option<&V> {
        if !self.is_at(at) {
            self.map.clear();
            self.at = Some(at);
        }
        self.map.get(k)
    }

    /// Records `v` for `k` if the memo is at stamp `at` (the stamp of the [`Memo::get`] that
    /// missed); an answer computed at another stamp is dropped.
    #[inline]
    pub fn insert(&mut self, at: S, k: K, v: V) {
        if self.is_at(at) {
            self.map.insert(k, v);
        }
    }
}
