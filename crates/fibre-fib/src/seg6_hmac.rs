//! SRH HMAC keys (`ip sr hmac`; the kernel's net/ipv6/seg6_hmac.c, configured over generic
//! netlink with SEG6_CMD_SETHMAC): the secret and algorithm of each key id an SRH's HMAC TLV
//! (RFC 8754 2.1.2) may name, for encapsulations to fill the TLV and for received SRHs to be
//! checked against (`net.ipv6.conf.X.seg6_require_hmac`).
//!
//! The kernel's rules, which [`Keys::set`] follows (seg6_genl_sethmac): key id 0 is refused;
//! a secret longer than [`SECRET_MAX`] bytes is refused; an empty secret deletes the key
//! (ENOENT when there is none); any other set replaces the key whole.
//!
//! Invariants: every key held has a non-zero id, an algorithm of [`algo`] and a secret of 1 to
//! [`SECRET_MAX`] bytes. [`Keys::gen`] moves on every change, so compiled forms (the
//! forwarding objects' precomputed HMACs) know when to follow.

use std::collections::BTreeMap;

use crate::types::{Errno, RtError};

/// SEG6_ATTR_ALGID values (SEG6_HMAC_ALGO_*).
pub mod algo {
    pub const SHA1: u8 = 1;
    pub const SHA256: u8 = 2;
}

/// The longest secret the kernel keeps (SEG6_HMAC_SECRET_LEN).
pub const SECRET_MAX: usize = 64;

/// One HMAC key.
#[derive(Clone, PartialEq, Eq)]
pub struct HmacKey {
    pub id: u32,
    /// One of [`algo`].
    pub algo: u8,
    pub secret: Vec<u8>,
}

/// Shows the key id, the algorithm and the secret's length, never the secret: debug output
/// reaches logs.
impl std::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HmacKey")
            .field("id", &self.id)
            .field("algo", &self.algo)
            .field("secret_len", &self.secret.len())
            .finish()
    }
}

/// The namespace's HMAC keys, by id.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    keys: BTreeMap<u32, HmacKey>,
    gen: u64,
}

impl Keys {
    /// `ip sr hmac set ID ALGO` with `secret` (empty: delete).
    pub fn set(&mut self, id: u32, algo: u8, secret: &[u8]) -> Result<(), RtError> {
        if id == 0 || secret.len() > SECRET_MAX {
            return Err(RtError::new(Errno::EINVAL));
        }
        if secret.is_empty() {
            self.keys
                .remove(&id)
                .ok_or_else(|| RtError::new(Errno::ENOENT))?;
        } else {
            if algo != algo::SHA1 && algo != algo::SHA256 {
                return Err(RtError::new(Errno::EINVAL));
            }
            let secret = secret.to_vec();
            self.keys.insert(id, HmacKey { id, algo, secret });
        }
        self.gen += 1;
        Ok(())
    }

    /// The key of id `id`.
    pub fn get(&self, id: u32) -> Option<&HmacKey> {
        self.keys.get(&id)
    }

    /// Every key, by id.
    pub fn iter(&self) -> impl Iterator<Item = &HmacKey> + '_ {
        self.keys.values()
    }

    /// Moves on every change.
    pub fn gen(&self) -> u64 {
        self.gen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replace_delete_as_the_kernel() {
        let mut k = Keys::default();
        assert_eq!(k.set(0, algo::SHA1, b"x").unwrap_err().errno, Errno::EINVAL);
        assert_eq!(
            k.set(1, algo::SHA1, &[b'x'; 65]).unwrap_err().errno,
            Errno::EINVAL
        );
        assert_eq!(k.set(1, 3, b"x").unwrap_err().errno, Errno::EINVAL);
        assert_eq!(k.set(1, algo::SHA1, b"").unwrap_err().errno, Errno::ENOENT);
        k.set(7, algo::SHA256, &[b'x'; 64]).unwrap();
        k.set(7, algo::SHA1, b"abc").unwrap();
        assert_eq!(
            k.get(7).map(|h| (h.algo, h.secret.as_slice())),
            Some((algo::SHA1, &b"abc"[..]))
        );
        let g = k.gen();
        // A delete names an algorithm too (iproute2 sends one), which is not looked at.
        k.set(7, 9, b"").unwrap();
        assert!(k.get(7).is_none() && k.gen() > g);
        assert_eq!(k.iter().count(), 0);
    }
}
