//! Typed indices into the crate's arenas, so that an index of one kind cannot be used where
//! another is meant (a route-info slot where an interface index is expected, ...).
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
