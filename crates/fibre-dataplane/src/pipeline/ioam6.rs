//! IOAM traces in the pipeline: a received IPv6 packet whose hop-by-hop header carries an IOAM
//! pre-allocated trace gets this node's data once its route decision is known (ipv6_hop_ioam
//! routes the packet first to know its output link), on a link with
//! `net.ipv6.conf.LINK.ioam6_enabled`.

use fibre_fib::{InputDrop, InputRoute};
use fibre_packet::Buf;

use super::{Dataplane, View};
use crate::drop::DropReason;
use crate::ioam6::{self, Node, Outcome, U32_UNAVAILABLE, U64_UNAVAILABLE};
use crate::rx::Meta;

impl Dataplane {
    /// Fills the trace of the packet in `buf` (its IP header at `meta.l3`, its IOAM option
    /// at `meta.ioam` from there), given its route decision. `Err` with the reason when the
    /// option is malformed and the packet is to be dropped.
    pub(super) fn ioam6_transit(
        &mut self,
        v: View<'_>,
        now: u64,
        iif: u32,
        buf: &Buf,
        meta: &Meta,
        route: &Result<InputRoute, InputDrop>,
    ) -> Result<(), DropReason> {
        let ingress = v.fib.ioam6_link(iif);
        if !ingress.enabled {
            return Ok(());
        }
        let egress = match route {
            Ok(InputRoute::Forward(f)) => {
                let l = v.fib.ioam6_link(f.oif);
                Some((l.id, l.id_wide))
            }
            _ => None,
        };
        let s = v.fib.settings();
        let ioam = v.fib.ioam();
        let node = |id: u16| {
            let ns = ioam.namespace(id)?;
            let schema = ns
                .schema
                .and_then(|sc| Some((sc, &ioam.schema(sc)?.data[..])));
            Some(Node {
                hop_limit: meta.ttl.wrapping_sub(1),
                id: s.ioam6_id,
                id_wide: s.ioam6_id_wide,
                ingress: (ingress.id, ingress.id_wide),
                egress,
                ns_data: ns.data.unwrap_or(U32_UNAVAILABLE),
                ns_wide: ns.wide.unwrap_or(U64_UNAVAILABLE),
                schema,
                now,
            })
        };
        let at = usize::from(meta.l3) + usize::from(meta.ioam);
        let hbh_end = usize::from(meta.l3) + 40 + {
            let d = buf.data(&self.pool);
            (usize::from(d.get(usize::from(meta.l3) + 41).copied().unwrap_or(0)) + 1) * 8
        };
        let opt = buf
            .data_mut(&mut self.pool)
            .get_mut(at..hbh_end)
            .unwrap_or_default();
        match ioam6::transit(opt, node) {
            Outcome::Drop => Err(DropReason::IpInhdr),
            Outcome::Filled | Outcome::Untouched => Ok(()),
        }
    }
}
