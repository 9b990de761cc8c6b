//! Policy rules: RTM_NEWRULE / RTM_DELRULE / RTM_GETRULE, `struct fib_rule_hdr` + FRA_*.

mod attribute;
mod ranges;

pub use attribute::{RuleAttr, FRA};
pub use ranges::{PortRange, PortRangePacket, UidRange, UidRangePacket};

use crate::nla::object_message;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct fib_rule_hdr`.
    pub struct RuleHeader;
    /// View of `struct fib_rule_hdr`.
    pub struct RuleHeaderPacket;
    len = 12, what = "fib_rule_hdr";
    {
        family, set_family: u8 = 0;
        dst_len, set_dst_len: u8 = 1;
        src_len, set_src_len: u8 = 2;
        tos, set_tos: u8 = 3;
        /// Table id when below 256 (FRA_TABLE holds it in full).
        table, set_table: u8 = 4;
        res1, set_res1: u8 = 5;
        res2, set_res2: u8 = 6;
        /// FR_ACT_*.
        action, set_action: u8 = 7;
        /// FIB_RULE_*.
        flags, set_flags: u32 = 8;
    }
}

object_message! {
    /// A rule message.
    pub struct RuleMessage<'a> { RuleHeader, RuleAttr }
}
