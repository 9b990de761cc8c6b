//! IFLA_LINKINFO: the link's kind and kind-specific data (kept as bytes).
//!
//! One kind is fibre's own: `fibre_port`, a link bound to a host interface (the daemon
//! forwards its frames), whose IFLA_INFO_DATA holds [`PortAttr`]s. The kernel knows no such
//! kind and refuses it; a reader that does not know it keeps the data as bytes.

use crate::nla::{attributes, parse_attrs, Nest, NestedBytes, NlStr};

/// IFLA_INFO_* attribute numbers.
#[allow(non_snake_case)]
pub mod IFLA_INFO {
    pub const KIND: u16 = 1;
    pub const DATA: u16 = 2;
    pub const XSTATS: u16 = 3;
    pub const SLAVE_KIND: u16 = 4;
    pub const SLAVE_DATA: u16 = 5;
}

/// IFLA_INFO_KIND of a fibre port link.
pub const PORT_KIND: &str = "fibre_port";

/// The attribute numbers inside a `fibre_port` link's IFLA_INFO_DATA.
#[allow(non_snake_case)]
pub mod FIBRE_PORT {
    /// The host interface's name (string).
    pub const DEV: u16 = 1;
    /// How it is reached (u8): [`IO_AF_XDP`](super::IO_AF_XDP), ...
    pub const IO: u16 = 2;
    /// The TAP device carrying the host's own traffic (string).
    pub const PUNT: u16 = 3;
    /// The punt path's counters (u64 each), in dumps: frames to the host, from the host,
    /// and dropped on their way to it.
    pub const PUNT_TO_HOST: u16 = 4;
    pub const PUNT_FROM_HOST: u16 = 5;
    pub const PUNT_DROPPED: u16 = 6;
}

/// `FIBRE_PORT::IO` values.
pub const IO_AF_XDP: u8 = 0;
pub const IO_AF_PACKET: u8 = 1;
pub const IO_TAP: u8 = 2;

attributes! {
    /// An IFLA_INFO_* attribute inside IFLA_LINKINFO.
    pub enum LinkInfoAttr<'a> {
        /// "veth", "dummy", ...
        Kind(NlStr<'a>) = IFLA_INFO::KIND,
        /// Kind-specific attributes, undecoded (their space depends on the kind).
        Data(NestedBytes<'a>) = IFLA_INFO::DATA,
        /// A `fibre_port`'s IFLA_INFO_DATA, for writing; a reader gets [`LinkInfoAttr::Data`]
        /// (the first variant of the number) and decodes it with [`port_data`].
        PortData(Nest<PortAttr<'a>>) = IFLA_INFO::DATA,
        SlaveKind(NlStr<'a>) = IFLA_INFO::SLAVE_KIND,
        SlaveData(NestedBytes<'a>) = IFLA_INFO::SLAVE_DATA,
    }
}

attributes! {
    /// An attribute of a `fibre_port` link's IFLA_INFO_DATA.
    pub enum PortAttr<'a> {
        Dev(NlStr<'a>) = FIBRE_PORT::DEV,
        Io(u8) = FIBRE_PORT::IO,
        Punt(NlStr<'a>) = FIBRE_PORT::PUNT,
        PuntToHost(u64) = FIBRE_PORT::PUNT_TO_HOST,
        PuntFromHost(u64) = FIBRE_PORT::PUNT_FROM_HOST,
        PuntDropped(u64) = FIBRE_PORT::PUNT_DROPPED,
    }
}

/// A `fibre_port`'s IFLA_INFO_DATA decoded; `None` when it is malformed.
pub fn port_data<'a>(data: &NestedBytes<'a>) -> Option<Vec<PortAttr<'a>>> {
    parse_attrs(data.bytes, 0).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nla::Attr;

    #[test]
    fn port_data_written_is_read_back() {
        let info = LinkInfoAttr::PortData(Nest::new(vec![
            PortAttr::Dev(NlStr::new("veth0")),
            PortAttr::Io(IO_AF_PACKET),
            PortAttr::Punt(NlStr::new("cp0")),
            PortAttr::PuntToHost(7),
        ]));
        let mut out = Vec::new();
        info.emit(&mut out);
        let attrs: Vec<LinkInfoAttr<'_>> = parse_attrs(&out, 0).unwrap();
        let [LinkInfoAttr::Data(data)] = attrs.as_slice() else {
            panic!("{attrs:?}");
        };
        let port = port_data(data).unwrap();
        assert_eq!(
            port,
            vec![
                PortAttr::Dev(NlStr::new("veth0")),
                PortAttr::Io(IO_AF_PACKET),
                PortAttr::Punt(NlStr::new("cp0")),
                PortAttr::PuntToHost(7),
            ]
        );
    }
}
