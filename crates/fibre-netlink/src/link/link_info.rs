//! IFLA_LINKINFO: the link's kind and kind-specific data (kept as bytes).

use crate::nla::{attributes, NestedBytes, NlStr};

/// IFLA_INFO_* attribute numbers.
#[allow(non_snake_case)]
pub mod IFLA_INFO {
    pub const KIND: u16 = 1;
    pub const DATA: u16 = 2;
    pub const XSTATS: u16 = 3;
    pub const SLAVE_KIND: u16 = 4;
    pub const SLAVE_DATA: u16 = 5;
}

attributes! {
    /// An IFLA_INFO_* attribute inside IFLA_LINKINFO.
    pub enum LinkInfoAttr<'a> {
        /// "veth", "dummy", ...
        Kind(NlStr<'a>) = IFLA_INFO::KIND,
        /// Kind-specific attributes, undecoded.
        Data(NestedBytes<'a>) = IFLA_INFO::DATA,
        SlaveKind(NlStr<'a>) = IFLA_INFO::SLAVE_KIND,
        SlaveData(NestedBytes<'a>) = IFLA_INFO::SLAVE_DATA,
    }
}
