//! NHA_GROUP: an array of `struct nexthop_grp`.

use crate::nla::{RawNla, Value};
use crate::wire::fixed_header;

fixed_header! {
    /// `struct nexthop_grp`.
    pub struct GroupEntry;
    /// View of `struct nexthop_grp`.
    pub struct GroupEntryPacket;
    len = 8, what = "nexthop_grp";
    {
        id, set_id: u32 = 0;
        /// Weight minus one (low 8 bits).
        weight, set_weight: u8 = 4;
        /// High 8 bits of weight minus one (kernels from 6.12; reserved and zero before).
        weight_high, set_weight_high: u8 = 5;
        resvd2, set_resvd2: u16 = 6;
    }
}

impl<'a> Value<'a> for Vec<GroupEntry> {
    fn decode(nla: RawNla<'a>) -> Option<Self> {
        if nla.kind != nla.number()
            || !nla
                .value
                .chunks_exact(GroupEntry::LEN)
                .remainder()
                .is_empty()
        {
            return None;
        }
        Some(
            nla.value
                .chunks_exact(GroupEntry::LEN)
                .map(|c| GroupEntry::parse(&GroupEntryPacket::new_unchecked(c)))
                .collect(),
        )
    }
    fn emit_value(&self, out: &mut Vec<u8>) {
        for e in self {
            e.emit(out);
        }
    }
}
