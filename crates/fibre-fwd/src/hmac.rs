//! SRH HMACs (RFC 8754 2.1.2) as Linux computes them (net/ipv6/seg6_hmac.c, functions named
//! below): the keys of `ip sr hmac` compiled once into keyed HMAC states ([`HmacKey`]), the
//! HMAC of an SRH, and the two uses of it: filling an encapsulation's HMAC TLV
//! (seg6_push_hmac) and checking a received one (seg6_hmac_validate_skb's comparison).
//!
//! What is authenticated (seg6_hmac_compute): the IPv6 source address (16 bytes), the SRH's
//! Last Entry (1), its flags (1), the key id (4, big-endian), then every segment of the list
//! (16 each), with HMAC-SHA1 or HMAC-SHA256 over the key's secret. The digest goes into the
//! TLV's 32-byte field: SHA-256's whole, SHA-1's 20 bytes followed by 12 zeros. Linux
//! assembles the input in a 256-byte per-CPU buffer and refuses inputs that do not fit
//! (SEG6_HMAC_RING_SIZE: at most [`MAX_SEGMENTS`] segments), so the HMAC of a longer list
//! fails here too: such packets are dropped, as Linux drops them.
//!
//! The data path calls [`HmacKey::compute`] (and [`HmacKey::fill`], [`HmacKey::verify`]) per
//! packet: the keyed state is cloned on the stack and fed the fields in place, so nothing is
//! allocated or locked. Keys are built by the writer alone ([`HmacKey::new`]).

use core::fmt;

use fibre_fib::seg6_hmac::{self, algo};
use fibre_wire::srh;
use hmac::{Hmac, Mac};

/// The bytes of Linux's HMAC input buffer (SEG6_HMAC_RING_SIZE); an input of this many bytes
/// or more is refused.
const RING_SIZE: usize = 256;
/// The input's bytes before the segment list: source address, Last Entry, flags, key id.
const FIXED_INPUT: usize = 16 + 1 + 1 + 4;
/// The most segments whose HMAC Linux computes: 22 + 16 * 14 = 246 bytes fit its buffer.
pub const MAX_SEGMENTS: usize = (RING_SIZE - 1 - FIXED_INPUT) / srh::SEGMENT_LEN;

/// One key, its HMAC state keyed with the secret once.
#[derive(Clone)]
pub struct HmacKey {
    id: u32,
    algo: u8,
    /// Kept to compare keys: a key set again with the same secret compiles to the same object.
    secret: Vec<u8>,
    mac: Keyed,
}

#[derive(Clone)]
enum Keyed {
    Sha1(Hmac<sha1::Sha1>),
    Sha256(Hmac<sha2::Sha256>),
}

impl PartialEq for HmacKey {
    fn eq(&self, o: &HmacKey) -> bool {
        (self.id, self.algo, &self.secret) == (o.id, o.algo, &o.secret)
    }
}

impl Eq for HmacKey {}

/// Shows the key id and algorithm, never the secret.
impl fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HmacKey")
            .field("id", &self.id)
            .field("algo", &self.algo)
            .finish_non_exhaustive()
    }
}

impl HmacKey {
    /// The compiled form of a model key; `None` for an algorithm Linux has no HMAC of.
    pub fn new(k: &seg6_hmac::HmacKey) -> Option<HmacKey> {
        let mac = match k.algo {
            algo::SHA1 => Keyed::Sha1(Hmac::new_from_slice(&k.secret).ok()?),
            algo::SHA256 => Keyed::Sha256(Hmac::new_from_slice(&k.secret).ok()?),
            _ => return None,
        };
        Some(HmacKey {
            id: k.id,
            algo: k.algo,
            secret: k.secret.clone(),
            mac,
        })
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// seg6_hmac_compute: the HMAC field for SRH `srh` (its fixed header and segment list
    /// read; the TLVs are not part of the input) sent from `src`. `None` for a list longer
    /// than [`MAX_SEGMENTS`] or bytes shorter than the list.
    pub fn compute(&self, src: &[u8; 16], srh: &[u8]) -> Option<[u8; srh::HMAC_FIELD_LEN]> {
        let (last, flags) = (*srh.get(4)?, *srh.get(5)?);
        let n = usize::from(last) + 1;
        if n > MAX_SEGMENTS {
            return None;
        }
        let segs = srh.get(srh::HEADER_LEN..srh::HEADER_LEN + n * srh::SEGMENT_LEN)?;
        let id = self.id.to_be_bytes();
        let mut out = [0u8; srh::HMAC_FIELD_LEN];
        let input = Input {
            src,
            last_flags: [last, flags],
            id: &id,
            segs,
        };
        match &self.mac {
            Keyed::Sha1(m) => input.hmac(m, &mut out),
            Keyed::Sha256(m) => input.hmac(m, &mut out),
        }
        Some(out)
    }

    /// seg6_push_hmac: writes the HMAC into the field of the HMAC TLV at `tlv_at` of `srh`
    /// (`srh::Packet::hmac_tlv_at`), for a packet from `src`. False, the field left as it was,
    /// when the HMAC cannot be computed.
    pub fn fill(&self, src: &[u8; 16], srh: &mut [u8], tlv_at: usize) -> bool {
        let Some(h) = self.compute(src, srh) else {
            return false;
        };
        let at = tlv_at + srh::HMAC_FIELD_AT;
        match srh.get_mut(at..at + srh::HMAC_FIELD_LEN) {
            Some(field) => {
                field.copy_from_slice(&h);
                true
            }
            None => false,
        }
    }

    /// seg6_hmac_validate_skb's comparison: whether the HMAC TLV at `tlv_at` of `srh`, received
    /// from `src`, holds the HMAC this key computes (all 32 bytes compared, SHA-1's padding
    /// included).
    pub fn verify(&self, src: &[u8; 16], srh: &[u8], tlv_at: usize) -> bool {
        let at = tlv_at + srh::HMAC_FIELD_AT;
        match (
            self.compute(src, srh),
            srh.get(at..at + srh::HMAC_FIELD_LEN),
        ) {
            // Every byte compared whatever the first difference, so that the time taken does
            // not tell a sender how much of a forged HMAC was right (Linux uses memcmp here).
            (Some(h), Some(field)) => h.iter().zip(field).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0,
            _ => false,
        }
    }
}

/// seg6_hmac_compute's input, fed in its order.
struct Input<'a> {
    src: &'a [u8; 16],
    last_flags: [u8; 2],
    id: &'a [u8; 4],
    segs: &'a [u8],
}

impl Input<'_> {
    /// The HMAC with keyed state `m` into the front of `out` (the rest stays zero).
    fn hmac<M: Mac + Clone>(&self, m: &M, out: &mut [u8; srh::HMAC_FIELD_LEN]) {
        let mut m = m.clone();
        m.update(self.src);
        m.update(&self.last_flags);
        m.update(self.id);
        m.update(self.segs);
        let d = m.finalize().into_bytes();
        out[..d.len()].copy_from_slice(&d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv6Addr as Ipv6;

    fn key(id: u32, algo: u8, secret: &[u8]) -> HmacKey {
        HmacKey::new(&seg6_hmac::HmacKey {
            id,
            algo,
            secret: secret.to_vec(),
        })
        .expect("a known algorithm")
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    /// The keyed states against RFC 4231 test case 2 (HMAC-SHA-256) and RFC 2202 test case 2
    /// (HMAC-SHA-1): key "Jefe", data "what do ya want for nothing?" fed in the four pieces
    /// the SRH input is fed in.
    #[test]
    fn published_vectors() {
        let data = b"what do ya want for nothing?";
        let src: &[u8; 16] = data[..16].try_into().expect("16 bytes");
        let input = Input {
            src,
            last_flags: [data[16], data[17]],
            id: data[18..22].try_into().expect("4 bytes"),
            segs: &data[22..],
        };
        let mut out = [0u8; srh::HMAC_FIELD_LEN];
        input.hmac(
            &Hmac::<sha2::Sha256>::new_from_slice(b"Jefe").expect("key"),
            &mut out,
        );
        assert_eq!(
            out.to_vec(),
            hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
        let mut out = [0u8; srh::HMAC_FIELD_LEN];
        input.hmac(
            &Hmac::<sha1::Sha1>::new_from_slice(b"Jefe").expect("key"),
            &mut out,
        );
        let mut want = hex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
        want.resize(srh::HMAC_FIELD_LEN, 0);
        assert_eq!(out.to_vec(), want);
    }

    /// The SRH of `encap seg6 mode encap segs 2001:db8:b::10,2001:db8:b::11 hmac ID` as the
    /// kernel sent it (6.18, tunnel source 2001:db8:ff::1), HMAC field zeroed.
    fn kernel_srh(id: u8) -> Vec<u8> {
        let mut s = hex(concat!(
            "2909040101080000",
            "20010db8000b00000000000000000011",
            "20010db8000b00000000000000000010",
            "0526000000000000"
        ));
        s[srh::HEADER_LEN + 2 * 16 + 7] = id;
        s.resize(s.len() + srh::HMAC_FIELD_LEN, 0);
        s
    }

    /// The HMAC fields the kernel wrote (`ip sr hmac set 7 sha256` with secret "secret1",
    /// `set 9 sha1` with "abc"), captured from a namespace: SHA-1's digest padded with zeros.
    #[test]
    fn kernel_bytes() {
        let src: Ipv6 = "2001:db8:ff::1".parse().expect("address");
        for (id, algo, secret, want) in [
            (
                7,
                algo::SHA256,
                &b"secret1"[..],
                "14a99258c7d25db3af633742d1bc327ea649079aa18ce0301c0f4d913eb7aa05",
            ),
            (
                9,
                algo::SHA1,
                &b"abc"[..],
                "9818aad9c218ad752b1165178478393d2662a117000000000000000000000000",
            ),
        ] {
            let k = key(id, algo, secret);
            let mut s = kernel_srh(id as u8);
            let tlv = srh::Packet::new_checked(&s[..])
                .expect("srh")
                .hmac_tlv_at()
                .expect("tlv");
            assert!(!k.verify(&src.octets(), &s, tlv));
            assert!(k.fill(&src.octets(), &mut s, tlv));
            assert_eq!(s[tlv + srh::HMAC_FIELD_AT..].to_vec(), hex(want));
            assert!(k.verify(&src.octets(), &s, tlv));
            // Another source, or any bit of the list, gives another HMAC.
            let other: Ipv6 = "2001:db8:ff::2".parse().expect("address");
            assert!(!k.verify(&other.octets(), &s, tlv));
            s[srh::HEADER_LEN] ^= 1;
            assert!(!k.verify(&src.octets(), &s, tlv));
        }
    }

    /// Linux's 256-byte input buffer: 14 segments are authenticated, 15 are not.
    #[test]
    fn at_most_fourteen_segments() {
        let k = key(1, algo::SHA256, b"k");
        let srh_of = |n: usize| {
            let mut s = vec![0u8; srh::HEADER_LEN + n * srh::SEGMENT_LEN];
            s[4] = (n - 1) as u8;
            s
        };
        assert_eq!(MAX_SEGMENTS, 14);
        assert!(k.compute(&[0; 16], &srh_of(14)).is_some());
        assert!(k.compute(&[0; 16], &srh_of(15)).is_none());
        assert!(k.compute(&[0; 16], &srh_of(2)[..39]).is_none());
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let k = key(3, algo::SHA1, b"topsecret");
        assert!(!format!("{k:?}").contains("topsecret"));
        assert_eq!(k, key(3, algo::SHA1, b"topsecret"));
        assert_ne!(k, key(3, algo::SHA1, b"other"));
    }
}
