//! FRA_UID_RANGE and FRA_SPORT_RANGE / FRA_DPORT_RANGE structures.

use crate::nla::struct_value;
use crate::wire::fixed_header;

fixed_header! {
    /// `struct fib_rule_uid_range`.
    pub struct UidRange;
    /// View of `struct fib_rule_uid_range`.
    pub struct UidRangePacket;
    len = 8, what = "fib_rule_uid_range";
    {
        start, set_start: u32 = 0;
        end, set_end: u32 = 4;
    }
}

fixed_header! {
    /// `struct fib_rule_port_range`, host byte order.
    pub struct PortRange;
    /// View of `struct fib_rule_port_range`.
    pub struct PortRangePacket;
    len = 4, what = "fib_rule_port_range";
    {
        start, set_start: u16 = 0;
        end, set_end: u16 = 2;
    }
}

struct_value!(UidRange, UidRangePacket);
struct_value!(PortRange, PortRangePacket);
