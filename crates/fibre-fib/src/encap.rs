//! Encapsulations a next hop applies (the kernel's lightweight tunnels, RTA_ENCAP): SRv6
//! encapsulation and insertion (`seg6`), SRv6 endpoint behaviours (`seg6local`), IOAM
//! pre-allocated trace insertion (`ioam6`) and RPL source routing insertion (`rpl`).
//!
//! A request carries an [`Encap`] as given; [`Encap::build`] checks it as the kernel's
//! build_state functions do (net/ipv6/seg6_iptunnel.c, seg6_local.c, ioam6_iptunnel.c,
//! rpl_iptunnel.c: errno and extended-ACK text) and answers the form the kernel keeps and
//! reports: a seg6local behaviour keeps only the attributes it takes (required or optional),
//! NEXT-C-SID flavors get their default lengths, counters start at zero, an IOAM6 trace gets
//! its node length and the defaults of mode and frequency. Dumps and `route get` answers
//! report that form, and equal forms make equal next hops (the kernel's lwtunnel_cmp_encap).
//!
//! Invariants of a built [`Encap`]: a seg6 SRH or a seg6local SRH passes fibre-wire's
//! `srh::Packet::validate` (Linux's seg6_validate_srh); an RPL header is uncompressed, its
//! segments-left equal to its address count; an IOAM6 trace header has a non-zero type with
//! bits 12-21 clear, a non-zero remaining length of at most 61 words, and its node length set.
//!
//! Where fibre departs from the kernel: IOAM6 and RPL are accepted although the kernel these
//! tests run on was built without them (its answer is EOPNOTSUPP "lwt encapsulation type not
//! supported"); End.DT4, End.DT46 and End.DT6 with a `vrftable` are accepted for any table,
//! where the kernel wants a VRF device bound to it (fibre has no VRF links: the data path
//! looks the inner packet up in the table itself); End, End.X and End.T take the USP and USD
//! flavors of RFC 8986 (4.16.2, 4.16.3), which the kernel refuses ("Unsupported Flavor
//! operation(s)") or, for End.T, ignores; End.BPF is refused (EOPNOTSUPP), as fibre runs no
//! BPF programs.

use std::net::Ipv6Addr;

use fibre_wire::{rpl as rpl_wire, srh as srh_wire};

use crate::types::{einval, Errno, Family, RtError};
pub use crate::types::{Counters, Encap, Flavors, Ioam6, Rpl, Seg6, Seg6Local};

/// SEG6_IPTUN_MODE_* (`mode` of a seg6 route).
pub mod seg6_mode {
    pub const INLINE: i32 = 0;
    pub const ENCAP: i32 = 1;
    pub const L2ENCAP: i32 = 2;
    pub const ENCAP_RED: i32 = 3;
    pub const L2ENCAP_RED: i32 = 4;
}

/// SEG6_LOCAL_ACTION_* (RFC 8986 behaviours).
pub mod action {
    pub const END: u32 = 1;
    pub const END_X: u32 = 2;
    pub const END_T: u32 = 3;
    pub const END_DX2: u32 = 4;
    pub const END_DX6: u32 = 5;
    pub const END_DX4: u32 = 6;
    pub const END_DT6: u32 = 7;
    pub const END_DT4: u32 = 8;
    pub const END_B6: u32 = 9;
    pub const END_B6_ENCAP: u32 = 10;
    pub const END_BM: u32 = 11;
    pub const END_S: u32 = 12;
    pub const END_AS: u32 = 13;
    pub const END_AM: u32 = 14;
    pub const END_BPF: u32 = 15;
    pub const END_DT46: u32 = 16;
}

/// SEG6_LOCAL_FLV_OP_*: bit numbers of [`Flavors::ops`].
pub mod flavor {
    pub const PSP: u32 = 1;
    pub const USP: u32 = 2;
    pub const USD: u32 = 3;
    pub const NEXT_CSID: u32 = 4;
}

/// IOAM6_IPTUNNEL_MODE_*.
pub mod ioam6_mode {
    pub const INLINE: u8 = 1;
    pub const ENCAP: u8 = 2;
    pub const AUTO: u8 = 3;
}

/// The NEXT-C-SID Locator-Block and Locator-Node Function lengths a behaviour gets when none
/// are given (the kernel's SEG6_LOCAL_LCBLOCK_DBITS and SEG6_LOCAL_LCNODE_FN_DBITS).
const LCBLOCK_DEFAULT_BITS: u8 = 32;
const LCNODE_FN_DEFAULT_BITS: u8 = 16;

/// IOAM6_IPTUNNEL_FREQ_MIN and _MAX: "k of every n" packets get a trace, 1 <= k <= n <= 10^6.
const FREQ_MIN: u32 = 1;
const FREQ_MAX: u32 = 1_000_000;

/// The most node data words a trace can pre-allocate (IOAM6_TRACE_DATA_SIZE_MAX / 4).
const TRACE_WORDS_MAX: u8 = (fibre_wire::ioam6::TRACE_DATA_MAX / 4) as u8;

/// IOAM trace type bits 12-21 (of 24, bit 0 the most significant): undefined, refused.
const TRACE_UNDEFINED_BITS: u32 = 0x00_0ffc;

impl Encap {
    /// Checks a requested encapsulation for a next hop of a `family` route and answers the
    /// form kept. `local` says whether an address is one of the namespace's (RPL refuses a
    /// segment list through the router itself).
    pub(crate) fn build(
        &self,
        family: Family,
        local: impl Fn(Ipv6Addr) -> bool,
    ) -> Result<Encap, RtError> {
        match self {
            Encap::Seg6(s) => s.build(family).map(Encap::Seg6),
            Encap::Seg6Local(s) => s.build(family).map(Encap::Seg6Local),
            Encap::Ioam6(s) => s.build(family).map(Encap::Ioam6),
            Encap::Rpl(s) => s.build(family, local).map(Encap::Rpl),
        }
    }
}

impl Seg6 {
    /// seg6_build_state: an SRH of at least one segment, a known mode (inline only for
    /// IPv6), and an SRH Linux accepts.
    fn build(&self, family: Family) -> Result<Seg6, RtError> {
        if self.srh.len() < srh_wire::HEADER_LEN + srh_wire::SEGMENT_LEN {
            return Err(RtError::new(Errno::EINVAL));
        }
        match self.mode {
            seg6_mode::INLINE if family != Family::Inet6 => {
                return Err(RtError::new(Errno::EINVAL))
            }
            seg6_mode::INLINE..=seg6_mode::L2ENCAP_RED => {}
            _ => return Err(RtError::new(Errno::EINVAL)),
        }
        valid_srh(&self.srh)?;
        Ok(self.clone())
    }

    /// The segments in path order (first segment first), as iproute2 lists them.
    pub fn segments(&self) -> Vec<Ipv6Addr> {
        segments(&self.srh)
    }

    /// The HMAC key id of the SRH's HMAC TLV, if it has one.
    pub fn hmac(&self) -> Option<u32> {
        hmac(&self.srh)
    }
}

fn valid_srh(b: &[u8]) -> Result<(), RtError> {
    srh_wire::Packet::new_checked(b)
        .and_then(|p| p.validate(b.len(), false))
        .map_err(|_| RtError::new(Errno::EINVAL))
}

/// An SRH's segment list, first segment of the path first; empty for bytes no SRH view
/// accepts (a built encapsulation always has its list).
pub fn segments(srh: &[u8]) -> Vec<Ipv6Addr> {
    let Ok(p) = srh_wire::Packet::new_checked(srh) else {
        return Vec::new();
    };
    (0..p.segment_count())
        .rev()
        .filter_map(|i| p.segment(i))
        .collect()
}

/// An SRH's HMAC key id, when it carries the HMAC flag and TLV (iproute2 prints the key id only
/// then).
pub fn hmac(srh: &[u8]) -> Option<u32> {
    let p = srh_wire::Packet::new_checked(srh).ok()?;
    (p.flags() & srh_wire::FLAG_HMAC != 0)
        .then(|| p.hmac_key_id())
        .flatten()
}

/// What a behaviour takes: its required attributes, its optional ones (seg6_action_table).
#[derive(Clone, Copy)]
struct Takes {
    required: u32,
    optional: u32,
    /// The flavor operations it supports, when it takes flavors.
    flavors: u32,
}

mod attr {
    pub const SRH: u32 = 1 << 2;
    pub const TABLE: u32 = 1 << 3;
    pub const NH4: u32 = 1 << 4;
    pub const NH6: u32 = 1 << 5;
    pub const IIF: u32 = 1 << 6;
    pub const OIF: u32 = 1 << 7;
    pub const BPF: u32 = 1 << 8;
    pub const VRFTABLE: u32 = 1 << 9;
    pub const COUNTERS: u32 = 1 << 10;
    pub const FLAVORS: u32 = 1 << 11;
}

/// USP and USD (RFC 8986 4.16.2, 4.16.3): what End, End.X and End.T do with a packet whose
/// segment list is done, fibre's own (see the module comment).
const ULTIMATE: u32 = 1 << flavor::USP | 1 << flavor::USD;

fn takes(action: u32) -> Option<Takes> {
    use attr::*;
    let t = |required, optional| Takes {
        required,
        optional,
        flavors: 0,
    };
    Some(match action {
        action::END => Takes {
            required: 0,
            optional: COUNTERS | FLAVORS,
            flavors: 1 << flavor::NEXT_CSID | 1 << flavor::PSP | ULTIMATE,
        },
        action::END_X => Takes {
            required: NH6,
            optional: COUNTERS | FLAVORS,
            flavors: 1 << flavor::NEXT_CSID | ULTIMATE,
        },
        action::END_T => Takes {
            required: TABLE,
            optional: COUNTERS | FLAVORS,
            flavors: ULTIMATE,
        },
        action::END_DX2 => t(OIF, COUNTERS),
        action::END_DX6 => t(NH6, COUNTERS),
        action::END_DX4 => t(NH4, COUNTERS),
        action::END_DT4 | action::END_DT46 => t(VRFTABLE, COUNTERS),
        // With CONFIG_NET_L3_MASTER_DEV (as the reference kernel): the table or the VRF
        // table, one of them, checked when the behaviour is built.
        action::END_DT6 => t(0, COUNTERS | TABLE | VRFTABLE),
        action::END_B6 | action::END_B6_ENCAP => t(SRH, COUNTERS),
        action::END_BPF => t(BPF, COUNTERS),
        _ => return None,
    })
}

impl Seg6Local {
    fn given(&self) -> u32 {
        use attr::*;
        [
            (self.srh.is_some(), SRH),
            (self.table.is_some(), TABLE),
            (self.nh4.is_some(), NH4),
            (self.nh6.is_some(), NH6),
            (self.iif.is_some(), IIF),
            (self.oif.is_some(), OIF),
            (self.bpf, BPF),
            (self.vrftable.is_some(), VRFTABLE),
            (self.counters.is_some(), COUNTERS),
            (self.flavors.is_some(), FLAVORS),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |m, (_, bit)| m | bit)
    }

    /// seg6_local_build_state: IPv6 only; a behaviour the kernel builds; each required
    /// attribute present and valid, the optional ones valid where given; the rest dropped.
    fn build(&self, family: Family) -> Result<Seg6Local, RtError> {
        let bare = || RtError::new(Errno::EINVAL);
        if family != Family::Inet6 {
            return Err(bare());
        }
        let Some(t) = takes(self.action) else {
            return Err(bare());
        };
        let given = self.given();
        if given & t.required != t.required {
            return Err(bare());
        }
        let mut keep = given & (t.required | t.optional);
        // The kernel's End.T takes no flavors and ignores the attribute: fibre's takes it only
        // when it names USP or USD, so what the kernel accepts is kept as the kernel keeps it.
        let ultimate = self.flavors.and_then(|f| f.ops).unwrap_or(0) & ULTIMATE;
        if self.action == action::END_T && ultimate == 0 {
            keep &= !attr::FLAVORS;
        }
        let mut out = Seg6Local {
            action: self.action,
            ..Seg6Local::default()
        };
        // Parsed in attribute order, as the kernel does: the first refusal is reported.
        if keep & attr::SRH != 0 {
            let srh = self.srh.clone().unwrap_or_default();
            if srh.len() < srh_wire::HEADER_LEN + srh_wire::SEGMENT_LEN {
                return Err(bare());
            }
            valid_srh(&srh)?;
            out.srh = Some(srh);
        }
        if keep & attr::TABLE != 0 {
            out.table = self.table;
        }
        if keep & attr::NH4 != 0 {
            out.nh4 = self.nh4;
        }
        if keep & attr::NH6 != 0 {
            out.nh6 = self.nh6;
        }
        if keep & attr::OIF != 0 {
            out.oif = self.oif;
        }
        if keep & attr::BPF != 0 {
            return Err(RtError::msg(
                Errno::EOPNOTSUPP,
                "fibre runs no BPF programs",
            ));
        }
        if keep & attr::VRFTABLE != 0 {
            out.vrftable = self.vrftable;
        }
        if keep & attr::COUNTERS != 0 {
            out.counters = Some(Counters::default());
        }
        if keep & attr::FLAVORS != 0 {
            out.flavors = Some(build_flavors(self.flavors.unwrap_or_default(), t.flavors)?);
        }
        // seg6_end_dt6_parse_mode: the legacy table or the VRF table, exactly one.
        if self.action == action::END_DT6 && out.table.is_some() == out.vrftable.is_some() {
            return Err(einval("table or vrftable must be specified"));
        }
        Ok(out)
    }
}

/// parse_nla_flavors: the operation mask is required and must be one the behaviour supports;
/// NEXT-C-SID takes lengths (defaults when absent) that are whole octets, non-zero, at most
/// 120 bits each and 128 together.
fn build_flavors(f: Flavors, supported: u32) -> Result<Flavors, RtError> {
    let Some(ops) = f.ops else {
        return Err(RtError::new(Errno::EINVAL));
    };
    if ops & !supported != 0 || supported == 0 {
        return Err(RtError::msg(
            Errno::EOPNOTSUPP,
            "Unsupported Flavor operation(s)",
        ));
    }
    if ops & (1 << flavor::NEXT_CSID) == 0 {
        return Ok(Flavors {
            ops: Some(ops),
            ..Flavors::default()
        });
    }
    let block = f.lcblock_bits.unwrap_or(LCBLOCK_DEFAULT_BITS);
    let func = f.lcnode_fn_bits.unwrap_or(LCNODE_FN_DEFAULT_BITS);
    let bad = |b: u8| b == 0 || b > 120 || !b.is_multiple_of(8);
    if u32::from(block) + u32::from(func) > 128 || bad(block) || bad(func) {
        return Err(einval("Invalid Locator Block/Node Function lengths"));
    }
    Ok(Flavors {
        ops: Some(ops),
        lcblock_bits: Some(block),
        lcnode_fn_bits: Some(func),
    })
}

impl Ioam6 {
    /// ioam6_build_state.
    fn build(&self, family: Family) -> Result<Ioam6, RtError> {
        if family != Family::Inet6 {
            return Err(RtError::new(Errno::EINVAL));
        }
        let range = |v: Option<u32>, lo: u32, hi: u32| v.is_some_and(|v| v < lo || v > hi);
        if range(self.freq_k, FREQ_MIN, FREQ_MAX)
            || range(self.freq_n, FREQ_MIN, FREQ_MAX)
            || range(self.mode.map(u32::from), 1, 3)
        {
            return Err(RtError::msg(Errno::ERANGE, "integer out of range"));
        }
        if self.trace.as_ref().is_some_and(|t| t.len() != 8) {
            return Err(einval("Attribute failed policy validation"));
        }
        let (freq_k, freq_n) = match (self.freq_k, self.freq_n) {
            (None, None) => (FREQ_MIN, FREQ_MIN),
            (Some(k), Some(n)) if k > n => return Err(einval("freq: k > n is forbidden")),
            (Some(k), Some(n)) => (k, n),
            _ => return Err(einval("freq: missing parameter")),
        };
        let mode = self.mode.unwrap_or(ioam6_mode::INLINE);
        if self.dst.is_none() && mode != ioam6_mode::INLINE {
            return Err(einval("this mode needs a tunnel destination"));
        }
        let Some(trace) = &self.trace else {
            return Err(einval("missing trace"));
        };
        let mut trace = trace.clone();
        let ty = u32::from_be_bytes([trace[4], trace[5], trace[6], trace[7]]) >> 8;
        let words = trace[3] & 0x7f;
        if ty == 0 || words == 0 || words > TRACE_WORDS_MAX || ty & TRACE_UNDEFINED_BITS != 0 {
            return Err(einval("invalid trace validation"));
        }
        // The node length the kernel computes (bits 12-21 refused above, so the wire's
        // count is the kernel's); the flags and remaining length are kept as given.
        let node_len = fibre_wire::ioam6::node_len(ty);
        trace[2] = (node_len << 3) | (trace[2] & 0x07);
        Ok(Ioam6 {
            mode: Some(mode),
            dst: if mode == ioam6_mode::INLINE {
                None
            } else {
                self.dst
            },
            trace: Some(trace),
            freq_k: Some(freq_k),
            freq_n: Some(freq_n),
        })
    }

    /// The trace header's namespace id, trace type (24 bits) and pre-allocated size in bytes.
    pub fn trace_fields(&self) -> Option<(u16, u32, u16)> {
        let t = self.trace.as_ref().filter(|t| t.len() == 8)?;
        let ns = u16::from_be_bytes([t[0], t[1]]);
        let ty = u32::from_be_bytes([t[4], t[5], t[6], t[7]]) >> 8;
        Some((ns, ty, u16::from(t[3] & 0x7f) * 4))
    }
}

impl Rpl {
    /// rpl_build_state: IPv6 only; an uncompressed header whose segments-left counts its
    /// addresses exactly, none of them this router's, the last not multicast.
    fn build(&self, family: Family, local: impl Fn(Ipv6Addr) -> bool) -> Result<Rpl, RtError> {
        let bad = || RtError::new(Errno::EINVAL);
        if family != Family::Inet6 || self.srh.len() < rpl_wire::HEADER_LEN {
            return Err(bad());
        }
        let b = &self.srh;
        let seglen = b.len() - rpl_wire::HEADER_LEN;
        let (ext_len, left, cmpr) = (usize::from(b[1]), usize::from(b[3]), b[4]);
        if ext_len * 8 != seglen || left == 0 || left * 16 != seglen || cmpr != 0 {
            return Err(bad());
        }
        let addrs = self.segments();
        if addrs.iter().any(|a| local(*a)) || addrs.last().is_some_and(Ipv6Addr::is_multicast) {
            return Err(bad());
        }
        Ok(self.clone())
    }

    /// The addresses in path order, as iproute2 lists them (the header stores them last
    /// first, as iproute2 builds it).
    pub fn segments(&self) -> Vec<Ipv6Addr> {
        let Some(body) = self.srh.get(rpl_wire::HEADER_LEN..) else {
            return Vec::new();
        };
        let left = usize::from(self.srh.get(3).copied().unwrap_or(0));
        let mut out: Vec<Ipv6Addr> = body
            .chunks_exact(16)
            .take(left)
            .filter_map(|c| <[u8; 16]>::try_from(c).ok().map(Ipv6Addr::from))
            .collect();
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SRH iproute2 builds for `segs A,B` (encap: no room for the destination).
    fn srh(segs: &[&str], hmac: Option<u32>) -> Vec<u8> {
        let n = segs.len();
        let len = 8 + 16 * n + if hmac.is_some() { 40 } else { 0 };
        let mut b = vec![0u8; len];
        b[1] = (len / 8 - 1) as u8;
        b[2] = 4;
        b[3] = (n - 1) as u8;
        b[4] = (n - 1) as u8;
        for (i, s) in segs.iter().enumerate() {
            let a: Ipv6Addr = s.parse().unwrap();
            let at = 8 + 16 * (n - 1 - i);
            b[at..at + 16].copy_from_slice(&a.octets());
        }
        if let Some(k) = hmac {
            b[5] = srh_wire::FLAG_HMAC;
            let t = len - 40;
            b[t] = srh_wire::tlv::HMAC;
            b[t + 1] = 38;
            b[t + 4..t + 8].copy_from_slice(&k.to_be_bytes());
        }
        b
    }

    #[test]
    fn seg6_modes_and_families() {
        let s = Seg6 {
            mode: seg6_mode::ENCAP,
            srh: srh(&["2001:db8::1", "2001:db8::2"], Some(7)),
        };
        assert_eq!(s.build(Family::Inet).unwrap(), s);
        assert_eq!(s.segments().len(), 2);
        assert_eq!(s.segments()[0], "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(s.hmac(), Some(7));
        let inline = Seg6 {
            mode: seg6_mode::INLINE,
            ..s.clone()
        };
        assert_eq!(inline.build(Family::Inet).unwrap_err().errno, Errno::EINVAL);
        assert!(inline.build(Family::Inet6).is_ok());
        let bad = Seg6 {
            mode: 5,
            ..s.clone()
        };
        assert!(bad.build(Family::Inet6).is_err());
        let mut short = s.clone();
        short.srh.truncate(16);
        assert!(short.build(Family::Inet6).is_err());
    }

    #[test]
    fn seg6local_keeps_what_the_behaviour_takes() {
        let req = Seg6Local {
            action: action::END,
            table: Some(100),
            nh6: Some("2001:db8::9".parse().unwrap()),
            counters: Some(Counters {
                packets: 5,
                ..Counters::default()
            }),
            ..Seg6Local::default()
        };
        let built = req.build(Family::Inet6).unwrap();
        assert_eq!(
            built,
            Seg6Local {
                action: action::END,
                counters: Some(Counters::default()),
                ..Seg6Local::default()
            }
        );
        assert!(req.build(Family::Inet).is_err());
        let x = Seg6Local {
            action: action::END_X,
            ..Seg6Local::default()
        };
        assert_eq!(
            x.build(Family::Inet6).unwrap_err(),
            RtError::new(Errno::EINVAL)
        );
        let dt6 = Seg6Local {
            action: action::END_DT6,
            ..Seg6Local::default()
        };
        assert_eq!(
            dt6.build(Family::Inet6).unwrap_err(),
            einval("table or vrftable must be specified")
        );
        let both = Seg6Local {
            table: Some(100),
            vrftable: Some(100),
            ..dt6.clone()
        };
        assert_eq!(
            both.build(Family::Inet6).unwrap_err(),
            einval("table or vrftable must be specified")
        );
        // The VRF table's behaviours, served by the table itself (no VRF device).
        for action in [action::END_DT4, action::END_DT46, action::END_DT6] {
            let dt = Seg6Local {
                action,
                vrftable: Some(100),
                ..Seg6Local::default()
            };
            assert_eq!(dt.build(Family::Inet6).unwrap(), dt);
        }
    }

    #[test]
    fn end_t_keeps_flavors_only_when_they_name_usp_or_usd() {
        let flavors = |ops: u32| Flavors {
            ops: Some(ops),
            ..Flavors::default()
        };
        let t = |ops: u32| Seg6Local {
            action: action::END_T,
            table: Some(100),
            flavors: Some(flavors(ops)),
            ..Seg6Local::default()
        };
        // What the kernel accepts and ignores.
        assert_eq!(
            t(1 << flavor::PSP).build(Family::Inet6).unwrap().flavors,
            None
        );
        let usd = t(1 << flavor::USD).build(Family::Inet6).unwrap();
        assert_eq!(usd.flavors, Some(flavors(1 << flavor::USD)));
        assert_eq!(
            t(1 << flavor::PSP | 1 << flavor::USP)
                .build(Family::Inet6)
                .unwrap_err()
                .errno,
            Errno::EOPNOTSUPP
        );
    }

    #[test]
    fn flavors() {
        let f = |ops: u32, b: Option<u8>, n: Option<u8>| Flavors {
            ops: Some(ops),
            lcblock_bits: b,
            lcnode_fn_bits: n,
        };
        let end = takes(action::END).unwrap().flavors;
        let end_x = takes(action::END_X).unwrap().flavors;
        assert_eq!(
            build_flavors(f(1 << flavor::NEXT_CSID, None, None), end),
            Ok(f(1 << flavor::NEXT_CSID, Some(32), Some(16)))
        );
        assert_eq!(
            build_flavors(f(1 << flavor::PSP, None, None), end),
            Ok(f(2, None, None))
        );
        let unsupported = RtError::msg(Errno::EOPNOTSUPP, "Unsupported Flavor operation(s)");
        assert_eq!(
            build_flavors(f(1 << flavor::PSP, None, None), end_x),
            Err(unsupported.clone())
        );
        // USP and USD: End, End.X and End.T (RFC 8986 4.16.2, 4.16.3), not End.X's PSP.
        let ultimate = 1 << flavor::USP | 1 << flavor::USD;
        assert_eq!(
            build_flavors(f(ultimate, None, None), end),
            Ok(f(ultimate, None, None))
        );
        assert!(build_flavors(f(ultimate, None, None), end_x).is_ok());
        let end_t = takes(action::END_T).unwrap().flavors;
        assert_eq!(
            build_flavors(f(1 << flavor::PSP | 1 << flavor::USD, None, None), end_t),
            Err(unsupported)
        );
        let lengths = einval("Invalid Locator Block/Node Function lengths");
        for (b, n) in [(4, 16), (64, 72), (32, 0), (128, 8)] {
            assert_eq!(
                build_flavors(f(1 << flavor::NEXT_CSID, Some(b), Some(n)), end),
                Err(lengths.clone())
            );
        }
    }

    #[test]
    fn ioam6_defaults_and_node_length() {
        let req = Ioam6 {
            trace: Some(vec![0, 1, 0, 3, 0x80, 0, 0, 0]),
            ..Ioam6::default()
        };
        let b = req.build(Family::Inet6).unwrap();
        assert_eq!((b.mode, b.freq_k, b.freq_n), (Some(1), Some(1), Some(1)));
        assert_eq!(
            b.trace.as_deref(),
            Some(&[0, 1, 0x08, 3, 0x80, 0, 0, 0][..])
        );
        assert_eq!(b.trace_fields(), Some((1, 0x80_0000, 12)));
        let enc = Ioam6 {
            mode: Some(ioam6_mode::ENCAP),
            ..req.clone()
        };
        assert_eq!(
            enc.build(Family::Inet6).unwrap_err(),
            einval("this mode needs a tunnel destination")
        );
        let undefined = Ioam6 {
            trace: Some(vec![0, 1, 0, 3, 0x00, 0x08, 0, 0]),
            ..req.clone()
        };
        assert_eq!(
            undefined.build(Family::Inet6).unwrap_err(),
            einval("invalid trace validation")
        );
        let freq = Ioam6 {
            freq_k: Some(2),
            ..req
        };
        assert_eq!(
            freq.build(Family::Inet6).unwrap_err(),
            einval("freq: missing parameter")
        );
    }

    #[test]
    fn rpl() {
        let a: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let b: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let mut srh = vec![0u8; 40];
        srh[1] = 4;
        srh[2] = 3;
        srh[3] = 2;
        srh[8..24].copy_from_slice(&b.octets());
        srh[24..40].copy_from_slice(&a.octets());
        let r = Rpl { srh };
        assert_eq!(
            r.build(Family::Inet6, |_| false).unwrap().segments(),
            [a, b]
        );
        assert!(r.build(Family::Inet6, |x| x == b).is_err());
        assert!(r.build(Family::Inet, |_| false).is_err());
    }
}
