//! LWTUNNEL_ENCAP_SEG6_LOCAL: an SRv6 endpoint behaviour (`ip route ... encap seg6local
//! action ...`): SEG6_LOCAL_ACTION and the attributes the behaviour takes, with the nested
//! counters (SEG6_LOCAL_CNT_*) and flavors (SEG6_LOCAL_FLV_*). The kernel emits the counters
//! and flavors nests with NLA_F_NESTED, the others without; [`Nest`] keeps which.

use crate::nla::{attributes, Nest, NestedBytes};
use std::net::{Ipv4Addr, Ipv6Addr};

/// SEG6_LOCAL_* attribute numbers.
#[allow(non_snake_case)]
pub mod SEG6_LOCAL {
    pub const ACTION: u16 = 1;
    pub const SRH: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const NH4: u16 = 4;
    pub const NH6: u16 = 5;
    pub const IIF: u16 = 6;
    pub const OIF: u16 = 7;
    pub const BPF: u16 = 8;
    pub const VRFTABLE: u16 = 9;
    pub const COUNTERS: u16 = 10;
    pub const FLAVORS: u16 = 11;
}

/// SEG6_LOCAL_ACTION_* (RFC 8986 behaviours; the names iproute2 prints are in the CLI).
#[allow(non_snake_case)]
pub mod SEG6_LOCAL_ACTION {
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

/// SEG6_LOCAL_CNT_* attribute numbers.
#[allow(non_snake_case)]
pub mod SEG6_LOCAL_CNT {
    /// Alignment padding for the 64-bit values, on architectures that need it.
    pub const PAD: u16 = 1;
    pub const PACKETS: u16 = 2;
    pub const BYTES: u16 = 3;
    pub const ERRORS: u16 = 4;
}

/// SEG6_LOCAL_FLV_* attribute numbers.
#[allow(non_snake_case)]
pub mod SEG6_LOCAL_FLV {
    /// A bit mask of `1 << SEG6_LOCAL_FLV_OP_*`.
    pub const OPERATION: u16 = 1;
    pub const LCBLOCK_BITS: u16 = 2;
    pub const LCNODE_FN_BITS: u16 = 3;
}

/// SEG6_LOCAL_FLV_OP_*: bit numbers in SEG6_LOCAL_FLV_OPERATION.
#[allow(non_snake_case)]
pub mod SEG6_LOCAL_FLV_OP {
    pub const PSP: u32 = 1;
    pub const USP: u32 = 2;
    pub const USD: u32 = 3;
    pub const NEXT_CSID: u32 = 4;
}

attributes! {
    /// A SEG6_LOCAL_CNT_* attribute.
    pub enum CounterAttr<'a> {
        Pad(&'a [u8]) = SEG6_LOCAL_CNT::PAD,
        Packets(u64) = SEG6_LOCAL_CNT::PACKETS,
        Bytes(u64) = SEG6_LOCAL_CNT::BYTES,
        Errors(u64) = SEG6_LOCAL_CNT::ERRORS,
    }
}

attributes! {
    /// A SEG6_LOCAL_FLV_* attribute.
    pub enum FlavorAttr<'a> {
        Operation(u32) = SEG6_LOCAL_FLV::OPERATION,
        LcblockBits(u8) = SEG6_LOCAL_FLV::LCBLOCK_BITS,
        LcnodeFnBits(u8) = SEG6_LOCAL_FLV::LCNODE_FN_BITS,
    }
}

attributes! {
    /// A SEG6_LOCAL_* attribute.
    pub enum Seg6LocalAttr<'a> {
        /// SEG6_LOCAL_ACTION_*.
        Action(u32) = SEG6_LOCAL::ACTION,
        /// The segment routing header End.B6 and End.B6.Encaps push, as carried.
        Srh(&'a [u8]) = SEG6_LOCAL::SRH,
        Table(u32) = SEG6_LOCAL::TABLE,
        Nh4(Ipv4Addr) = SEG6_LOCAL::NH4,
        Nh6(Ipv6Addr) = SEG6_LOCAL::NH6,
        Iif(u32) = SEG6_LOCAL::IIF,
        Oif(u32) = SEG6_LOCAL::OIF,
        /// End.BPF's program (SEG6_LOCAL_BPF_PROG_*), undecoded.
        Bpf(NestedBytes<'a>) = SEG6_LOCAL::BPF,
        VrfTable(u32) = SEG6_LOCAL::VRFTABLE,
        Counters(Nest<CounterAttr<'a>>) = SEG6_LOCAL::COUNTERS,
        Flavors(Nest<FlavorAttr<'a>>) = SEG6_LOCAL::FLAVORS,
    }
}
