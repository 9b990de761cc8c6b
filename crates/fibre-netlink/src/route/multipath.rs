//! RTA_MULTIPATH: a list of `struct rtnexthop`, each followed by its own RTA_* attributes
//! (gateway, via, encapsulation), each aligned to 4 bytes (RTNH_ALIGNTO).

use super::RouteAttr;
use crate::nla::{align, emit_attrs, parse_attrs, RawNla, Value};
use crate::wire::fixed_header;

fixed_header! {
    /// `struct rtnexthop`.
    pub struct NextHopHeader;
    /// View of `struct rtnexthop`.
    pub struct NextHopHeaderPacket;
    len = 8, what = "rtnexthop";
    {
        /// Header plus attributes.
        len, set_len: u16 = 0;
        /// RTNH_F_*.
        flags, set_flags: u8 = 2;
        /// Weight minus one.
        hops, set_hops: u8 = 3;
        ifindex, set_ifindex: i32 = 4;
    }
}

/// One next hop of a multipath route. `header.len` is recomputed on emission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteNextHop<'a> {
    pub header: NextHopHeader,
    pub attributes: Vec<RouteAttr<'a>>,
}

impl<'a> Value<'a> for Vec<RouteNextHop<'a>> {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        if nla.kind != nla.number() {
            return None;
        }
        let mut rest = nla.value;
        let mut hops = Vec::new();
        while !rest.is_empty() {
            let header = NextHopHeader::parse_bytes(rest, 0).ok()?;
            let len = header.len as usize;
            if len < NextHopHeader::LEN || align(len) > rest.len() {
                return None;
            }
            if rest[len..align(len)].iter().any(|&b| b != 0) {
                return None;
            }
            let attributes = parse_attrs(&rest[NextHopHeader::LEN..len], 0).ok()?;
            hops.push(RouteNextHop { header, attributes });
            rest = &rest[align(len)..];
        }
        Some(hops)
    }

    fn emit_value(&self, out: &mut Vec<u8>) {
        for hop in self {
            let start = out.len();
            hop.header.emit(out);
            emit_attrs(&hop.attributes, out);
            let len = (out.len() - start) as u16;
            NextHopHeaderPacket::new_unchecked(&mut out[start..]).set_len(len);
            out.resize(start + align(len as usize), 0);
        }
    }
}
