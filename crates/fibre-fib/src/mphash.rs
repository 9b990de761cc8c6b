//! The kernel's multipath flow hash: the number a multipath route compares with its next hops'
//! upper bounds (fib_select_multipath, fib6_select_path, the next-hop groups), computed as
//! fib_multipath_hash (IPv4) and rt6_multipath_hash (IPv6) compute it, so that fibre and a
//! kernel with the same `net.ipv4.fib_multipath_hash_seed` send a flow the same way.
//!
//! What the kernel does (Linux 6.18; `ip route get ... ipproto P sport S dport D` answers in a
//! namespace confirm it for every policy and family, tests/scenarios/model/multipath_hash_*,
//! and IPv6 packets forwarded by a namespace the flow label's place):
//! - The hashed bytes are the kernel's `struct flow_keys` from its `basic` member on, with every
//!   field the policy leaves out zero: protocol at offset 2, IPv6 flow label 4..8 (network
//!   order), VLAN tags and GRE key 8..28 (always zero here), ports 28..32, ICMP key 32..36
//!   (zero), addresses from 36; 48 bytes for IPv4 (8 of addresses, 4 of the union's zero
//!   tail), 72 for IPv6 (32 and 4). The layout is x86-64's and arm64's (`basic` aligned to 8).
//! - Before hashing, __flow_hash_consistentify orders the addresses and, separately, the ports,
//!   so both directions of a flow hash alike: IPv4 addresses and all ports compared as the
//!   host loads them (little-endian kernels, which this module reproduces), IPv6 addresses
//!   byte-wise.
//! - The hash is SipHash-2-4 keyed with the 32-bit seed repeated into both halves of each
//!   64-bit key word (fib_multipath_hash_construct_key); a zero hash becomes 1
//!   (__flow_hash_from_keys), and the result is shifted right by one (31 bits).
//! - Policy 0 hashes the addresses (IPv6 also the flow label and protocol), 1 adds the ports
//!   and protocol (IPv6 without the label), 2 hashes as 0 does for a packet without
//!   encapsulation, and 3 hashes the fields of `fib_multipath_hash_fields`, nothing when none
//!   of the outer bits is set. With a packet in hand, policy 3 mixes the outer hash with the
//!   inner one through jhash_2words(outer, inner, 0); the inner hash is 0 without
//!   encapsulation.
//! - Without a seed (0) the kernel keys every namespace with one random number drawn at boot.
//!   fibre derives one from the kernel's random boot id (/proc/sys/kernel/random/boot_id), so
//!   every fibre process on a machine (fibred, offline `fibre`) chooses alike until the next
//!   boot, as a kernel's namespaces do, and nobody off the machine can predict the choice;
//!   without a boot id it draws one per process from the operating system's random source.
//!   Runs that must repeat across boots (tests, the differential) set a seed.
//!
//! What [`Flow`] does not carry, and so this hash cannot see: the quoted header of an ICMP
//! error (policies 0 and 2 hash its addresses instead of the outer ones, so an error follows
//! the flow it quotes), the inner headers of encapsulated packets (policy 2, policy 3's inner
//! fields), and the SPI the kernel hashes as ports for ESP and AH. A packet's ports must be
//! zero for fragments, first ones included: the kernel's dissector stops at a fragment header.
//!
//! Cost: one SipHash-2-4 over six (IPv4) or nine (IPv6) 64-bit words, 18 or 24 SipRounds, no
//! allocation and no lock (about 60 and 75 ns on the shared test machine,
//! examples/mphash-results.md); computed only for routes with more than one next hop.
//!
//! Who calls what: `Fib::select_multipath` calls [`flow_hash`] with the settings'
//! [`MultipathHash`]; the data plane may call it for its own load-balance objects.

use std::sync::OnceLock;

use crate::flow::Flow;
use crate::types::Family;

/// FIB_MULTIPATH_HASH_FIELD_* bits of `fib_multipath_hash_fields` (policy 3).
pub mod fields {
    pub const SRC_IP: u32 = 1 << 0;
    pub const DST_IP: u32 = 1 << 1;
    pub const IP_PROTO: u32 = 1 << 2;
    /// IPv6 only.
    pub const FLOWLABEL: u32 = 1 << 3;
    pub const SRC_PORT: u32 = 1 << 4;
    pub const DST_PORT: u32 = 1 << 5;
    /// Bits 6-11 name the same fields of an encapsulated packet's inner headers.
    pub const OUTER_MASK: u32 = 0x3f;
    /// Every bit the kernel accepts.
    pub const ALL_MASK: u32 = 0xfff;
    /// The kernel's default: addresses and protocol.
    pub const DEFAULT: u32 = SRC_IP | DST_IP | IP_PROTO;
}

/// The largest `fib_multipath_hash_policy` (3: custom fields).
pub const MAX_POLICY: u8 = 3;

/// The multipath hash settings, as the kernel's sysctls of the same names hold them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultipathHash {
    /// net.ipv4.fib_multipath_hash_policy, 0..=[`MAX_POLICY`].
    pub policy4: u8,
    /// net.ipv6.fib_multipath_hash_policy, 0..=[`MAX_POLICY`].
    pub policy6: u8,
    /// net.ipv4.fib_multipath_hash_fields: [`fields`] bits, 1..=[`fields::ALL_MASK`].
    pub fields4: u32,
    /// net.ipv6.fib_multipath_hash_fields.
    pub fields6: u32,
    /// net.ipv4.fib_multipath_hash_seed, which keys both families; 0 for a random seed.
    pub seed: u32,
}

impl Default for MultipathHash {
    fn default() -> Self {
        MultipathHash {
            policy4: 0,
            policy6: 0,
            fields4: fields::DEFAULT,
            fields6: fields::DEFAULT,
            seed: 0,
        }
    }
}

impl MultipathHash {
    /// The seed the hash is keyed with: the one set, else the boot's (see the module comment).
    fn effective_seed(&self) -> u32 {
        static BOOT: OnceLock<u32> = OnceLock::new();
        match self.seed {
            0 => *BOOT.get_or_init(boot_seed),
            s => s,
        }
    }
}

/// Where Linux keeps a random identifier drawn at each boot.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// A seed for this boot: SipHash of the boot id under a fixed key (the id itself is readable
/// by local users, as the kernel's own seed is not; a seed that needs keeping from them is set
/// explicitly), else a random one for this process.
fn boot_seed() -> u32 {
    const KEY: [u64; 2] = [0x6669_6272_655f_6d70, 0x6861_7368_5f73_6565];
    match std::fs::read(BOOT_ID) {
        Ok(id) if !id.is_empty() => {
            let mut words = [0u8; 64];
            let n = id.len().min(words.len());
            words[..n].copy_from_slice(&id[..n]);
            match siphash24(&KEY, &words) as u32 {
                0 => 1,
                s => s,
            }
        }
        _ => crate::hash::os_random() as u32,
    }
}

/// The fields of one flow-keys image.
#[derive(Clone, Copy, Default)]
struct Keys {
    src: u128,
    dst: u128,
    proto: u8,
    sport: u16,
    dport: u16,
    flowlabel: u32,
}

/// The multipath hash of `flow` (31 bits). `flow.packet` says whether the kernel would have
/// the packet itself in hand (forwarding; IPv4 `route get`, which builds one) or the flow only.
pub fn flow_hash(cfg: &MultipathHash, family: Family, flow: &Flow) -> u32 {
    let v6 = family == Family::Inet6;
    let (policy, field_bits) = match v6 {
        false => (cfg.policy4, cfg.fields4),
        true => (cfg.policy6, cfg.fields6),
    };
    let addrs = Keys {
        src: flow.src,
        dst: flow.dst,
        ..Keys::default()
    };
    let l3 = match v6 {
        false => addrs,
        true => Keys {
            proto: flow.proto,
            flowlabel: flow.flowlabel,
            ..addrs
        },
    };
    let key = sip_key(cfg.effective_seed());
    let h = match policy {
        1 => siphash_keys(
            &key,
            v6,
            Keys {
                proto: flow.proto,
                sport: flow.sport,
                dport: flow.dport,
                ..addrs
            },
        ),
        3 => {
            let pick = |bit: u32, v: u128| if field_bits & bit != 0 { v } else { 0 };
            let outer = match field_bits & fields::OUTER_MASK {
                0 => 0,
                _ => siphash_keys(
                    &key,
                    v6,
                    Keys {
                        src: pick(fields::SRC_IP, flow.src),
                        dst: pick(fields::DST_IP, flow.dst),
                        proto: pick(fields::IP_PROTO, flow.proto as u128) as u8,
                        sport: pick(fields::SRC_PORT, flow.sport as u128) as u16,
                        dport: pick(fields::DST_PORT, flow.dport as u128) as u16,
                        flowlabel: match v6 {
                            true => pick(fields::FLOWLABEL, flow.flowlabel as u128) as u32,
                            false => 0,
                        },
                    },
                ),
            };
            match flow.packet {
                true => jhash_2words(outer, 0, 0),
                false => outer,
            }
        }
        _ => siphash_keys(&key, v6, l3),
    };
    h >> 1
}

/// The SipHash key: the seed in each half of both words.
fn sip_key(seed: u32) -> [u64; 2] {
    let k = (seed as u64) << 32 | seed as u64;
    [k, k]
}

/// flow_hash_from_keys_seed over one image: ordered, hashed, never zero.
fn siphash_keys(key: &[u64; 2], v6: bool, mut k: Keys) -> u32 {
    let ordered = match v6 {
        false => {
            u32::from_le_bytes((k.dst as u32).to_be_bytes())
                < u32::from_le_bytes((k.src as u32).to_be_bytes())
        }
        true => k.dst < k.src,
    };
    if ordered {
        std::mem::swap(&mut k.src, &mut k.dst);
    }
    if k.dport.swap_bytes() < k.sport.swap_bytes() {
        std::mem::swap(&mut k.sport, &mut k.dport);
    }
    let mut img = [0u8; 72];
    img[2] = k.proto;
    img[4..8].copy_from_slice(&k.flowlabel.to_be_bytes());
    img[28..30].copy_from_slice(&k.sport.to_be_bytes());
    img[30..32].copy_from_slice(&k.dport.to_be_bytes());
    let len = match v6 {
        false => {
            img[36..40].copy_from_slice(&(k.src as u32).to_be_bytes());
            img[40..44].copy_from_slice(&(k.dst as u32).to_be_bytes());
            48
        }
        true => {
            img[36..52].copy_from_slice(&k.src.to_be_bytes());
            img[52..68].copy_from_slice(&k.dst.to_be_bytes());
            72
        }
    };
    match siphash24(key, &img[..len]) as u32 {
        0 => 1,
        h => h,
    }
}

/// SipHash-2-4 (Aumasson and Bernstein) over a whole number of 64-bit little-endian words.
fn siphash24(key: &[u64; 2], data: &[u8]) -> u64 {
    debug_assert!(data.len().is_multiple_of(8));
    let mut v = [
        key[0] ^ 0x736f_6d65_7073_6575,
        key[1] ^ 0x646f_7261_6e64_6f6d,
        key[0] ^ 0x6c79_6765_6e65_7261,
        key[1] ^ 0x7465_6462_7974_6573,
    ];
    let compress = |v: &mut [u64; 4], m: u64| {
        v[3] ^= m;
        sip_round(v);
        sip_round(v);
        v[0] ^= m;
    };
    for w in data.chunks_exact(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        compress(&mut v, u64::from_le_bytes(b));
    }
    compress(&mut v, (data.len() as u64) << 56);
    v[2] ^= 0xff;
    for _ in 0..4 {
        sip_round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[inline(always)]
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// Bob Jenkins' lookup3 final mix of two words, as the kernel's jhash_2words seeds it
/// (JHASH_INITVAL plus the length in bytes plus `initval`).
fn jhash_2words(a: u32, b: u32, initval: u32) -> u32 {
    const JHASH_INITVAL: u32 = 0xdead_beef;
    let iv = initval.wrapping_add(JHASH_INITVAL).wrapping_add(2 << 2);
    let (mut a, mut b, mut c) = (a.wrapping_add(iv), b.wrapping_add(iv), iv);
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c.wrapping_sub(b.rotate_left(24))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_the_reference_vector() {
        // The SipHash paper's test key 00..0f; the reference output for the 8-byte message
        // 00..07 is 0x93f5f5799a932462 (vectors.h, entry 8).
        let key = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
        assert_eq!(
            siphash24(&key, &[0, 1, 2, 3, 4, 5, 6, 7]),
            0x93f5_f579_9a93_2462
        );
    }

    fn v4(s: [u8; 4], d: [u8; 4]) -> Flow {
        Flow {
            src: u32::from_be_bytes(s) as u128,
            dst: u32::from_be_bytes(d) as u128,
            proto: 17,
            sport: 2000,
            dport: 53,
            ..Flow::empty()
        }
    }

    #[test]
    fn both_directions_of_a_flow_hash_alike() {
        for policy in 0..=MAX_POLICY {
            let cfg = MultipathHash {
                policy4: policy,
                fields4: fields::OUTER_MASK,
                seed: 7,
                ..MultipathHash::default()
            };
            let f = v4([198, 51, 100, 9], [100, 64, 1, 8]);
            let r = Flow {
                src: f.dst,
                dst: f.src,
                sport: f.dport,
                dport: f.sport,
                ..f
            };
            assert_eq!(
                flow_hash(&cfg, Family::Inet, &f),
                flow_hash(&cfg, Family::Inet, &r)
            );
        }
    }

    #[test]
    fn policies_hash_only_their_fields() {
        let cfg = |policy4| MultipathHash {
            policy4,
            seed: 1,
            ..MultipathHash::default()
        };
        let f = v4([198, 51, 100, 9], [100, 64, 1, 8]);
        let other_port = Flow { sport: 2001, ..f };
        let h = |c: &MultipathHash, f: &Flow| flow_hash(c, Family::Inet, f);
        assert_eq!(h(&cfg(0), &f), h(&cfg(0), &other_port));
        assert_ne!(h(&cfg(1), &f), h(&cfg(1), &other_port));
        // Policy 3's default fields are addresses and protocol: ports are left out.
        assert_eq!(h(&cfg(3), &f), h(&cfg(3), &other_port));
        assert!(h(&cfg(1), &f) < 1 << 31);
    }

    #[test]
    fn an_unset_seed_is_the_boots() {
        let cfg = MultipathHash::default();
        // What another process on this machine derives too.
        if std::fs::metadata(BOOT_ID).is_ok() {
            assert_eq!(cfg.effective_seed(), boot_seed());
        }
        assert_eq!(cfg.effective_seed(), cfg.effective_seed());
        assert_eq!(MultipathHash { seed: 9, ..cfg }.effective_seed(), 9);
    }

    #[test]
    fn hashes_are_the_kernels() {
        // Values of a model of the kernel's hash that chose the kernel's next hop for every
        // flow of the live checks (tests/scenarios/model/multipath_hash_*), seed 1.
        let cfg = |policy4, policy6| MultipathHash {
            policy4,
            policy6,
            seed: 1,
            ..MultipathHash::default()
        };
        let f = v4([198, 51, 100, 9], [100, 64, 1, 8]);
        assert_eq!(flow_hash(&cfg(0, 0), Family::Inet, &f), 0x3222_ccf8);
        assert_eq!(flow_hash(&cfg(1, 0), Family::Inet, &f), 0x4313_4db9);
        assert_eq!(flow_hash(&cfg(3, 0), Family::Inet, &f), 0x5dcc_48de);
        let f6 = Flow {
            src: 0x2001_0db8_5100_u128 << 80 | 0x100,
            dst: 0x2001_0db8_6400_u128 << 80 | 1,
            ..f
        };
        let labelled = Flow {
            flowlabel: 0xabcde,
            ..f6
        };
        let query = Flow {
            packet: false,
            ..f6
        };
        assert_eq!(flow_hash(&cfg(0, 0), Family::Inet6, &f6), 0x5558_ae2c);
        assert_eq!(flow_hash(&cfg(0, 0), Family::Inet6, &labelled), 0x6db2_660c);
        // Policy 3's default fields without a packet hash what policy 0 does without a label;
        // with one, the outer hash goes through jhash_2words.
        assert_eq!(flow_hash(&cfg(0, 3), Family::Inet6, &query), 0x5558_ae2c);
        assert_eq!(flow_hash(&cfg(0, 3), Family::Inet6, &f6), 0x5ac9_ee14);
    }
}
