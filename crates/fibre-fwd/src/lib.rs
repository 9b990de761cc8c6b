//! fibre's forwarding objects: what a forwarded packet needs after the input route decision
//! ([`fibre_fib::Fib::route_input`]), compiled from the FIB beforehand, VPP-style, and reached
//! by typed index.
//!
//! - [`FwdLink`] ([`LinkIdx`]): a link's MAC, MTU, whether it is up (admin up and carrier) and
//!   whether it does ARP.
//! - [`Adjacency`] ([`AdjIdx`]): egress link, neighbour address, the 14-byte link-layer
//!   rewrite string (destination MAC, source MAC, ethertype), MTU and the neighbour's state
//!   (resolved, incomplete, failed). A [`fibre_fib::ForwardRoute`] through a gateway reaches
//!   its adjacency by index (the next hop's place in the FIB, checked by generation); an
//!   on-link destination through a keyed hash of (link, address).
//! - [`EncapObj`] ([`EncapIdx`]): a next hop's SRv6 encapsulation or endpoint behaviour,
//!   its header bytes precomputed and its headroom need known ([`encap`] says how); reached
//!   from a route decision by the next hop's place, checked by generation
//!   ([`FwdTable::encap`]).
//! - [`hmac::HmacKey`]: an `ip sr hmac` key keyed once, for the SRH HMACs encapsulations
//!   write and received SRHs are checked with ([`FwdTable::hmac_key`]).
//!
//! Who calls what:
//! - The writer (the thread that owns the `Fib`) owns the one [`FwdWriter`] and calls
//!   [`FwdWriter::update`] after it applied changes to the FIB: only the objects whose
//!   dependencies changed (a link, a neighbour entry, a next hop's forwarding result) are
//!   recompiled (the `compile` module says how), and the result is published.
//! - Workers each hold a [`Reader`] ([`FwdWriter::reader`], `Clone`, one per thread) and
//!   resolve inside one short [`Reader::read`]: lock-free and wait-free, allocation-free, one
//!   table as of one update (`fibre-publish` states the protocol). The writer keeps both
//!   copies and replays each update's edits into the second.
//!
//! A worker's route decision and its adjacency lookup may see different moments (the FIB is
//! published separately): a decision newer than the objects falls back from the index to the
//! hash, and finds nothing only for a link or gateway the writer has not compiled yet.

#![forbid(unsafe_code)]

mod compile;
pub mod encap;
pub mod hmac;
mod table;

pub use encap::{EncapIdx, EncapObj};
pub use fibre_publish::{ReadGuard, Reader};
pub use table::{
    AdjIdx, Adjacency, Edits, FwdLink, FwdTable, HopEncap, LinkIdx, NeighState, ETHERTYPE_IPV4,
    ETHERTYPE_IPV6, REWRITE_LEN,
};

use fibre_fib::Fib;
use fibre_publish::{TableRef, Writer};

/// The single writer of the forwarding objects (see the crate documentation).
pub struct FwdWriter {
    w: Writer<FwdTable>,
    c: compile::Compiler,
}

impl FwdWriter {
    /// Objects compiled from `fib` and published; the writer and a first reader.
    pub fn new(fib: &Fib) -> (FwdWriter, Reader<FwdTable>) {
        let (w, r) = Writer::new(FwdTable::default());
        let mut fw = FwdWriter {
            w,
            c: compile::Compiler::default(),
        };
        fw.update(fib);
        (fw, r)
    }

    /// Brings the objects up to `fib` and publishes them: called by the writer after it
    /// applied a batch of changes to `fib`. Costs nothing when nothing they depend on changed.
    /// Returns how many edits the tables took (links, adjacencies and their keys, next hops'
    /// places): 0 when nothing changed.
    pub fn update(&mut self, fib: &Fib) -> usize {
        let edits = self.c.update(fib);
        let n = edits.0.len();
        if n != 0 {
            self.w.apply(edits);
            self.w.publish();
        }
        n
    }

    /// A new reader, for a worker thread.
    pub fn reader(&self) -> Reader<FwdTable> {
        self.w.reader()
    }

    /// The objects as of the last update, for the writer's own thread.
    pub fn latest(&self) -> TableRef<'_, FwdTable> {
        self.w.latest()
    }
}
