//! Lock-free readers beside one writer: [`Lpm4`] and [`Lpm6`] published left-right through
//! `fibre-publish` (its module comment states the protocol: who may call what, the orderings,
//! what a reader may observe).
//!
//! An update is applied to the standby copy with its compilation deferred, and logged; the
//! publish compiles what the updates since the last one touched ([`Replica::flush`]), so a node
//! touched by many updates is compiled once per publish; the log is replayed into the other
//! copy, deferred likewise, before the writer next changes it. Each update thus costs twice
//! the table's own update, and the table is held twice.

pub use fibre_publish::{ReadGuard, Reader, Replica, Writer};

use crate::v4::Lpm4;
use crate::v6::Lpm6;
use crate::LpmError;

/// One update of a prefix table with addresses of type `A`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update<A> {
    /// Map the prefix to the value.
    Insert(A, u8, u32),
    /// Remove the prefix.
    Remove(A, u8),
}

/// What [`Update`] returns: the previous value of the prefix.
pub type UpdateResult = Result<Option<u32>, LpmError>;

/// Both tables mirror an update by applying it again, its compilation deferred to the flush.
macro_rules! replica {
    ($lpm:ty, $addr:ty) => {
        impl Replica for $lpm {
            type Op = Update<$addr>;
            type Output = UpdateResult;
            type Log = Vec<Update<$addr>>;
            fn apply(&mut self, op: Update<$addr>, log: &mut Self::Log) -> UpdateResult {
                let out = self.apply_deferred(&op);
                log.push(op);
                out
            }
            fn replay(&mut self, log: &mut Self::Log) {
                for op in log.drain(..) {
                    // The same result as on the other copy, which was equal.
                    let _ = self.apply_deferred(&op);
                }
            }
            fn flush(&mut self) {
                <$lpm>::flush(self)
            }
        }
    };
}

replica!(Lpm4, u32);
replica!(Lpm6, u128);

/// `insert` and `remove` on a writer, as on the table itself.
pub trait PrefixWriter<A> {
    /// Maps `prefix/len` to `value` in the next published version; returns the replaced value.
    fn insert(&mut self, prefix: A, len: u8, value: u32) -> UpdateResult;
    /// Removes `prefix/len` from the next published version; returns its value.
    fn remove(&mut self, prefix: A, len: u8) -> Option<u32>;
}

impl<A, T: Replica<Op = Update<A>, Output = UpdateResult>> PrefixWriter<A> for Writer<T> {
    fn insert(&mut self, prefix: A, len: u8, value: u32) -> UpdateResult {
        self.apply(Update::Insert(prefix, len, value))
    }
    fn remove(&mut self, prefix: A, len: u8) -> Option<u32> {
        self.apply(Update::Remove(prefix, len)).ok().flatten()
    }
}
