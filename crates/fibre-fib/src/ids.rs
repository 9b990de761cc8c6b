//! Typed indices, so that an index of one kind cannot be used where another is meant (a
//! table id where an interface index is expected, ...). Inside the crate they name:
//! - [`InfoId`]: the route-info arena's slots;
//! - [`TableId`]: the tables (`Fib`'s table maps, `fibtable::Table::id`, a route info's table,
//!   lookup results, every `tb` parameter);
//! - [`NhId`]: the next-hop object store's keys, the resilient groups' buckets and the object
//!   a route info uses;
//! - [`IfIndex`]: the link store's keys, the device of a next hop (`route::NhSpec::oif`) and of
//!   a gateway resolution, the per-link settings, neighbour keys, exception buckets, the
//!   linkdown sets and the link event paths (`sync`, `dst::Reason`).
//!
//! The request and answer types of [`crate::types`] (and the public `Dst` and `Flow`) keep
//! plain numbers, as netlink has them: the entry points wrap them on the way in and unwrap them
//! on the way out. So do the values stored as their request type: policy rules (`Rule::table`)
//! and next-hop objects (`NexthopObj::id`, `oif` and its group's member ids), which are wrapped
//! where they are used as keys.
//!
//! The crate's lowest layer: this module uses nothing of the crate.

/// A slot of the route-info arena (`route::Infos`). A slot is reused after its info is freed;
/// with the info's serial ([`crate::expiry::InfoRef`]) it names one info for as long as it
/// lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct InfoId(u32);

impl InfoId {
    #[inline]
    pub fn new(slot: usize) -> InfoId {
        InfoId(u32::try_from(slot).expect("fewer than 2^32 route infos"))
    }

    /// The slot, as the arena indexes it.
    #[inline]
    pub fn slot(self) -> usize {
        self.0 as usize
    }

    /// The slot as a plain number, for answers that name an info outside the crate.
    #[inline]
    pub fn raw(self) -> u32 {
        self.0
    }
}

/// An interface index (ifindex), as the crate keys its links and names the device of a next
/// hop, a neighbour or a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct IfIndex(pub u32);

impl IfIndex {
    /// No device: a reject route's next hop, a request that names none.
    pub const NONE: IfIndex = IfIndex(0);
    /// `lo`, which the kernel creates first in every namespace.
    pub const LOOPBACK: IfIndex = IfIndex(1);
}

/// A routing table's id (RT_TABLE_*), as the crate keys its tables and stores the table a
/// route or rule names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TableId(pub u32);

impl TableId {
    pub const UNSPEC: TableId = TableId(0);
    pub const DEFAULT: TableId = TableId(253);
    pub const MAIN: TableId = TableId(254);
    pub const LOCAL: TableId = TableId(255);

    /// The table a route request names: 0 (none given) is main.
    #[inline]
    pub fn or_main(table: u32) -> TableId {
        if table == 0 {
            TableId::MAIN
        } else {
            TableId(table)
        }
    }
}

/// A next-hop object's id (NHA_ID), as the crate keys its next-hop objects and stores the
/// object a route or group member names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct NhId(pub u32);
