//! IFLA_AF_SPEC: per-address-family link settings, one nest per family.

use crate::nla::{attributes, Nest};

/// AF_INET6, the only family decoded here; others stay raw.
const AF_INET6: u16 = 10;

/// IFLA_INET6_* attribute numbers.
pub mod inet6 {
    pub const IFLA_INET6_FLAGS: u16 = 1;
    pub const IFLA_INET6_ADDR_GEN_MODE: u16 = 8;
}

attributes! {
    /// A family's nest inside IFLA_AF_SPEC, keyed by address family.
    pub enum AfSpecAttr<'a> {
        Inet6(Nest<Inet6Attr<'a>>) = AF_INET6,
    }
}

attributes! {
    /// An IFLA_INET6_* attribute.
    pub enum Inet6Attr<'a> {
        Flags(u32) = inet6::IFLA_INET6_FLAGS,
        /// IN6_ADDR_GEN_MODE_*: 0 eui64, 1 none, 2 stable privacy, 3 random.
        AddrGenMode(u8) = inet6::IFLA_INET6_ADDR_GEN_MODE,
    }
}
