//! An IPv4 input cache key and its memo packed into one 64-byte cache line.
//!
//! Why: a cache of input decisions pays for itself only when a hit costs less than the
//! decision it saves. For IPv4 without rules, the batch decision is about 550 instructions on a
//! table whose hot lines stay in L2, and a hit of the family-neutral entry ([`InputCacheKey`]
//! with its [`InputMemo`], two lines) saves half of them but brings two lines from L3 per
//! packet when a worker holds thousands of keys (crates/fibre-bench/RESULTS.md counts it). An
//! IPv4 key needs 17 bytes, so the whole decision fits beside it: a hit reads one line and
//! nothing else (no route info, no next-hop slot), the forwarding objects it names being few
//! and shared by every key.
//!
//! Contract: [`InputLine4::pack`] accepts every memo an IPv4 key's decision makes, so an IPv4
//! key is never left out of a cache for want of room; [`InputLine4::memo_for`] gives back the
//! memo packed, exactly, for that key only. A line packed from nothing
//! ([`InputLine4::BLANK`]) holds no key.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{DstRef, ForwardRoute, InputCacheKey, InputDrop, InputMemo, InputRoute, Memo};
use crate::ids::TableId;

/// What a line's memo is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    /// No key: a line never written.
    Blank,
    Local,
    /// The limited broadcast (no table).
    Broadcast,
    /// A broadcast route of `table`.
    BroadcastIn,
    Forward,
    Drop,
    /// A multipath group (`Memo::Group4`).
    Group,
}

/// `flags` bits.
const REDIRECT: u8 = 1;
const GATEWAY: u8 = 1 << 1;
/// The gateway is IPv6 (an IPv4 route through an `inet6` gateway, RFC 5549).
const GATEWAY6: u8 = 1 << 2;
/// A group's source check was the local-address scan.
const SCAN: u8 = 1 << 3;
/// A group's source check passed (else it gave the drop in `drop`).
const CHECKED: u8 = 1 << 4;
/// A group's passed check found the source directly connected.
const DIRECT: u8 = 1 << 5;

/// Every input drop, at the index of its code in a line.
const DROPS: [InputDrop; 10] = [
    InputDrop::MartianSource,
    InputDrop::LocalSource,
    InputDrop::ReversePath,
    InputDrop::MartianDestination,
    InputDrop::Multicast,
    InputDrop::NoRoute,
    InputDrop::Unreachable,
    InputDrop::Prohibit,
    InputDrop::Blackhole,
    InputDrop::ForwardingOff,
];

fn drop_code(d: InputDrop) -> u8 {
    match d {
        InputDrop::MartianSource => 0,
        InputDrop::LocalSource => 1,
        InputDrop::ReversePath => 2,
        InputDrop::MartianDestination => 3,
        InputDrop::Multicast => 4,
        InputDrop::NoRoute => 5,
        InputDrop::Unreachable => 6,
        InputDrop::Prohibit => 7,
        InputDrop::Blackhole => 8,
        InputDrop::ForwardingOff => 9,
    }
}

/// An IPv4 [`InputCacheKey`] and its [`InputMemo`] in one line (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct InputLine4 {
    dst: u32,
    src: u32,
    iif: u32,
    mark: u32,
    tos: u8,
    kind: Kind,
    flags: u8,
    drop: u8,
    /// The table of a local, broadcast, forward or group decision.
    table: u32,
    oif: u32,
    mtu: u32,
    /// The next hop's handle (a forward decision's, a group's first usable next hop).
    slot: u32,
    hop: u32,
    gen: u64,
    /// The gateway: an IPv4 one in the first four bytes.
    gw: [u8; 16],
}

impl InputLine4 {
    pub const BLANK: InputLine4 = InputLine4 {
        dst: 0,
        src: 0,
        iif: 0,
        mark: 0,
        tos: 0,
        kind: Kind::Blank,
        flags: 0,
        drop: 0,
        table: 0,
        oif: 0,
        mtu: 0,
        slot: 0,
        hop: 0,
        gen: 0,
        gw: [0; 16],
    };

    /// `memo` for `key` in one line; `None` for a key that is not IPv4 (source and
    /// destination) or a memo no IPv4 decision makes.
    pub fn pack(key: &InputCacheKey, memo: &InputMemo) -> Option<InputLine4> {
        if key.families != 0 {
            return None;
        }
        let mut l = InputLine4 {
            dst: key.dst as u32,
            src: key.src as u32,
            iif: key.iif,
            mark: key.mark,
            tos: key.tos,
            ..InputLine4::BLANK
        };
        match memo.0 {
            Memo::Fixed(Ok(InputRoute::Local { table })) => {
                l.kind = Kind::Local;
                l.table = table;
            }
            Memo::Fixed(Ok(InputRoute::Broadcast { table: None })) => l.kind = Kind::Broadcast,
            Memo::Fixed(Ok(InputRoute::Broadcast { table: Some(t) })) => {
                l.kind = Kind::BroadcastIn;
                l.table = t;
            }
            Memo::Fixed(Ok(InputRoute::Forward(f))) => {
                l.kind = Kind::Forward;
                l.table = f.table;
                l.oif = f.oif;
                l.mtu = f.mtu;
                l.set_hop(f.dst);
                if f.redirect {
                    l.flags |= REDIRECT;
                }
                match f.gateway {
                    None => {}
                    Some(IpAddr::V4(a)) => {
                        l.flags |= GATEWAY;
                        l.gw[..4].copy_from_slice(&a.octets());
                    }
                    Some(IpAddr::V6(a)) => {
                        l.flags |= GATEWAY | GATEWAY6;
                        l.gw = a.octets();
                    }
                }
            }
            Memo::Fixed(Err(d)) => {
                l.kind = Kind::Drop;
                l.drop = drop_code(d);
            }
            Memo::Group4 {
                first,
                table,
                checked,
                scan,
            } => {
                l.kind = Kind::Group;
                l.table = table.0;
                l.set_hop(first);
                if scan {
                    l.flags |= SCAN;
                }
                match checked {
                    Ok(direct) => l.flags |= CHECKED | if direct { DIRECT } else { 0 },
                    Err(d) => l.drop = drop_code(d),
                }
            }
            Memo::Group6 { .. } => return None,
        }
        Some(l)
    }

    fn set_hop(&mut self, r: DstRef) {
        self.slot = r.slot;
        self.hop = r.hop;
        self.gen = r.gen;
    }

    fn hop_ref(&self) -> DstRef {
        DstRef {
            slot: self.slot,
            hop: self.hop,
            gen: self.gen,
        }
    }

    /// Whether the line holds `key`.
    #[inline]
    pub fn holds(&self, key: &InputCacheKey) -> bool {
        // An IPv4 key's addresses have no bits above the low 32.
        self.kind != Kind::Blank
            && key.families == 0
            && key.dst as u32 == self.dst
            && key.src as u32 == self.src
            && self.iif == key.iif
            && self.mark == key.mark
            && self.tos == key.tos
    }

    /// The memo packed for `key`; `None` when the line holds another key (or none).
    #[inline]
    pub fn memo_for(&self, key: &InputCacheKey) -> Option<InputMemo> {
        self.holds(key).then(|| self.memo())
    }

    #[inline]
    fn memo(&self) -> InputMemo {
        let gateway = || {
            (self.flags & GATEWAY != 0).then(|| {
                if self.flags & GATEWAY6 != 0 {
                    IpAddr::V6(Ipv6Addr::from(self.gw))
                } else {
                    IpAddr::V4(Ipv4Addr::new(
                        self.gw[0], self.gw[1], self.gw[2], self.gw[3],
                    ))
                }
            })
        };
        let drop = || DROPS[usize::from(self.drop)];
        InputMemo(match self.kind {
            Kind::Blank | Kind::Drop => Memo::Fixed(Err(drop())),
            Kind::Local => Memo::Fixed(Ok(InputRoute::Local { table: self.table })),
            Kind::Broadcast => Memo::Fixed(Ok(InputRoute::Broadcast { table: None })),
            Kind::BroadcastIn => Memo::Fixed(Ok(InputRoute::Broadcast {
                table: Some(self.table),
            })),
            Kind::Forward => Memo::Fixed(Ok(InputRoute::Forward(ForwardRoute {
                oif: self.oif,
                gateway: gateway(),
                mtu: self.mtu,
                redirect: self.flags & REDIRECT != 0,
                table: self.table,
                dst: self.hop_ref(),
            }))),
            Kind::Group => Memo::Group4 {
                first: self.hop_ref(),
                table: TableId(self.table),
                checked: if self.flags & CHECKED != 0 {
                    Ok(self.flags & DIRECT != 0)
                } else {
                    Err(drop())
                },
                scan: self.flags & SCAN != 0,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::InputKey;

    fn key4(dst: [u8; 4], src: [u8; 4], tos: u8) -> InputCacheKey {
        InputKey {
            dst: IpAddr::from(dst),
            src: IpAddr::from(src),
            iif: 7,
            tos,
            mark: 0x55,
            proto: 17,
            sport: 1,
            dport: 2,
            flowlabel: 0,
        }
        .cache_key()
    }

    fn hop() -> DstRef {
        DstRef {
            slot: 123_456,
            hop: 3,
            gen: u64::MAX - 5,
        }
    }

    /// Every kind of memo an IPv4 decision makes: fixed answers of each route type, each
    /// drop, forwards with no, IPv4 and IPv6 gateways, groups with each check outcome.
    fn memos() -> Vec<InputMemo> {
        let fwd = |gateway, redirect| {
            Memo::Fixed(Ok(InputRoute::Forward(ForwardRoute {
                oif: 9,
                gateway,
                mtu: 1400,
                redirect,
                table: 254,
                dst: hop(),
            })))
        };
        let mut m = vec![
            Memo::Fixed(Ok(InputRoute::Local { table: 255 })),
            Memo::Fixed(Ok(InputRoute::Broadcast { table: None })),
            Memo::Fixed(Ok(InputRoute::Broadcast { table: Some(100) })),
            fwd(None, false),
            fwd(Some(IpAddr::from([10, 0, 0, 1])), true),
            fwd(
                Some(IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 1, 2, 3, 4))),
                false,
            ),
        ];
        m.extend(DROPS.iter().map(|&d| Memo::Fixed(Err(d))));
        for checked in [Ok(true), Ok(false), Err(InputDrop::ReversePath)] {
            for scan in [false, true] {
                m.push(Memo::Group4 {
                    first: hop(),
                    table: TableId(1000),
                    checked,
                    scan,
                });
            }
        }
        m.into_iter().map(InputMemo).collect()
    }

    #[test]
    fn a_line_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<InputLine4>(), 64);
        assert_eq!(std::mem::align_of::<InputLine4>(), 64);
    }

    #[test]
    fn every_ipv4_memo_packs_and_comes_back_for_its_key_only() {
        let k = key4([192, 0, 2, 1], [198, 51, 100, 7], 0x10);
        let others = [
            key4([192, 0, 2, 2], [198, 51, 100, 7], 0x10),
            key4([192, 0, 2, 1], [198, 51, 100, 8], 0x10),
            key4([192, 0, 2, 1], [198, 51, 100, 7], 0x14),
        ];
        for m in memos() {
            let l = InputLine4::pack(&k, &m).expect("an IPv4 memo packs");
            assert_eq!(l.memo_for(&k), Some(m));
            for o in &others {
                assert_eq!(l.memo_for(o), None, "{m:?} answered {o:?}");
            }
        }
        for (i, &d) in DROPS.iter().enumerate() {
            assert_eq!(usize::from(drop_code(d)), i);
        }
    }

    #[test]
    fn ipv6_keys_and_ipv6_groups_do_not_pack_and_a_blank_line_holds_nothing() {
        let k6 = InputKey {
            dst: "2001:db8::1".parse().unwrap(),
            src: "2001:db8::2".parse().unwrap(),
            iif: 1,
            tos: 0,
            mark: 0,
            proto: 0,
            sport: 0,
            dport: 0,
            flowlabel: 0,
        }
        .cache_key();
        let local = InputMemo(Memo::Fixed(Ok(InputRoute::Local { table: 255 })));
        assert_eq!(InputLine4::pack(&k6, &local), None);
        let g6 = InputMemo(Memo::Group6 {
            first: hop(),
            table: TableId::MAIN,
        });
        let k4 = key4([0; 4], [0; 4], 0);
        assert_eq!(InputLine4::pack(&k4, &g6), None);
        assert_eq!(InputLine4::BLANK.memo_for(&k4), None);
    }
}
