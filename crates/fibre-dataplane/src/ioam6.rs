//! IOAM pre-allocated traces filled in by a transit node (RFC 9197 section 4.4, RFC 9486), as
//! the kernel's ipv6_hop_ioam and ioam6_fill_trace_data do it: the checks that drop a packet,
//! the conditions that leave the trace alone, and the node data written at the end of the
//! trace's free space, field by field in trace-type bit order.
//!
//! [`transit`] reads and writes only the option it is given (from its type byte to the end of
//! the hop-by-hop header); every write is bounded by the option, whatever the sender's node
//! length says about the trace type.

use fibre_wire::ioam6;

/// "Not available" in a 32- and a 64-bit field (IOAM6_U32_UNAVAILABLE, IOAM6_U64_UNAVAILABLE),
/// and in a 16-bit interface id.
pub const U32_UNAVAILABLE: u32 = u32::MAX;
pub const U64_UNAVAILABLE: u64 = u64::MAX;
pub const U16_UNAVAILABLE: u16 = u16::MAX;

/// Trace type bit 22, the opaque state snapshot (bit 0 the most significant of 24).
const BIT22: u32 = 1 << (23 - 22);

/// What this node writes: its ids, the packet's links' ids, the namespace's data, the time.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    /// The packet's hop limit as the kernel records it on input: one lower than received.
    pub hop_limit: u8,
    /// net.ipv6.ioam6_id (24 bits) and ioam6_id_wide (56 bits).
    pub id: u32,
    pub id_wide: u64,
    /// The input link's ioam6_id and ioam6_id_wide.
    pub ingress: (u16, u32),
    /// The output link's; `None` when the packet is for the router (the kernel's loopback
    /// route: unavailable ids, no queue).
    pub egress: Option<(u16, u32)>,
    /// The namespace's data and wide data (unavailable when not set).
    pub ns_data: u32,
    pub ns_wide: u64,
    /// The namespace's schema: its id and data (a multiple of 4 bytes).
    pub schema: Option<(u32, &'a [u8])>,
    /// Now, nanoseconds since the epoch (the timestamp fields).
    pub now: u64,
}

/// What became of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The node data was written and the remaining length lowered.
    Filled,
    /// Left as it was: not a pre-allocated trace, an unknown namespace, the Overflow flag
    /// already set; or no room, Overflow now set.
    Untouched,
    /// The option is malformed (ipv6_hop_ioam drops the packet: IP_INHDR).
    Drop,
}

/// ipv6_hop_ioam after its alignment and enabled checks: `opt` starts at the option's type
/// byte; `node` gives what to write when the trace's namespace is known (`ns` looks a
/// namespace id up).
pub fn transit<'a>(opt: &mut [u8], ns: impl Fn(u16) -> Option<Node<'a>>) -> Outcome {
    let Some(&len) = opt.get(1) else {
        return Outcome::Drop;
    };
    let len = usize::from(len);
    if len < 2 || opt.len() < 2 + len {
        return Outcome::Drop;
    }
    if opt[3] != ioam6::PREALLOC_TRACE {
        return Outcome::Untouched;
    }
    if len < ioam6::OPTION_LEN_MIN {
        return Outcome::Drop;
    }
    let mut p = ioam6::Packet::new_unchecked(&mut opt[..2 + len]);
    let rem = usize::from(p.remaining_len());
    if len < ioam6::OPTION_LEN_MIN + rem * 4 {
        return Outcome::Drop;
    }
    let Some(node) = ns(p.namespace_id()) else {
        return Outcome::Untouched;
    };
    if p.overflow() {
        return Outcome::Untouched;
    }
    let ty = p.trace_type();
    let sclen = match (ty & BIT22 != 0, node.schema) {
        (false, _) => 0,
        (true, None) => 1,
        (true, Some((_, d))) => 1 + d.len() / 4,
    };
    let words = usize::from(p.node_len()) + sclen;
    if rem == 0 || rem < words {
        p.set_overflow();
        return Outcome::Untouched;
    }
    let at = (rem - words) * 4;
    write_node(&mut p.data_mut()[at..], ty, &node);
    p.set_remaining_len((rem - words) as u8);
    Outcome::Filled
}

/// __ioam6_fill_trace_data: the fields of trace type `ty` in bit order, from `out[0]`.
fn write_node(out: &mut [u8], ty: u32, n: &Node) {
    let mut w = Writer { out, at: 0 };
    let bit = |b: u32| ty & (1 << (23 - b)) != 0;
    let (eg, eg_wide) = n.egress.unwrap_or((U16_UNAVAILABLE, U32_UNAVAILABLE));
    if bit(0) {
        w.u32((u32::from(n.hop_limit) << 24) | (n.id & 0x00ff_ffff));
    }
    if bit(1) {
        w.u16(n.ingress.0);
        w.u16(eg);
    }
    if bit(2) {
        w.u32((n.now / 1_000_000_000) as u32);
    }
    if bit(3) {
        w.u32((n.now % 1_000_000_000 / 1_000) as u32);
    }
    if bit(4) {
        w.u32(U32_UNAVAILABLE);
    }
    if bit(5) {
        w.u32(n.ns_data);
    }
    if bit(6) {
        // The output queue's backlog: nothing is ever queued behind a fibre worker's
        // transmit; the router itself has no queue.
        w.u32(if n.egress.is_some() {
            0
        } else {
            U32_UNAVAILABLE
        });
    }
    if bit(7) {
        w.u32(U32_UNAVAILABLE);
    }
    if bit(8) {
        w.u64((u64::from(n.hop_limit) << 56) | (n.id_wide & 0x00ff_ffff_ffff_ffff));
    }
    if bit(9) {
        w.u32(n.ingress.1);
        w.u32(eg_wide);
    }
    if bit(10) {
        w.u64(n.ns_wide);
    }
    for b in 11..=21 {
        if bit(b) {
            w.u32(U32_UNAVAILABLE);
        }
    }
    if bit(22) {
        match n.schema {
            None => w.u32(U32_UNAVAILABLE >> 8),
            Some((id, data)) => {
                w.u32(((data.len() as u32 / 4) << 24) | (id & 0x00ff_ffff));
                for b in data {
                    w.bytes(&[*b]);
                }
            }
        }
    }
}

/// Big-endian writes that stop at the end of the buffer.
struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) {
        if let Some(d) = self.out.get_mut(self.at..self.at + b.len()) {
            d.copy_from_slice(b);
        }
        self.at += b.len();
    }
    fn u16(&mut self, v: u16) {
        self.bytes(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IOAM option with a trace of type `ty`, node length `nodelen`, `rem` free words of
    /// `total`.
    fn option(ns: u16, ty: u32, nodelen: u8, rem: u8, total: usize) -> Vec<u8> {
        let mut o = vec![ioam6::OPTION_TYPE, (10 + total * 4) as u8, 0, 0];
        o.extend_from_slice(&ns.to_be_bytes());
        o.extend_from_slice(&((u16::from(nodelen) << 11) | u16::from(rem)).to_be_bytes());
        o.extend_from_slice(&(ty << 8).to_be_bytes());
        o.extend(std::iter::repeat_n(0, total * 4));
        o
    }

    fn node() -> Node<'static> {
        Node {
            hop_limit: 63,
            id: 0x0a0b0c,
            id_wide: 0x11_2233_4455_6677,
            ingress: (1, 0x100),
            egress: Some((2, 0x200)),
            ns_data: 0xdead_beef,
            ns_wide: 0x0102_0304_0506_0708,
            schema: None,
            now: 0,
        }
    }

    #[test]
    fn fills_the_last_free_words_and_lowers_the_remaining_length() {
        // Bits 0, 1 and 5: three words per node, room for two nodes.
        let ty = 0x80_0000 | 0x40_0000 | 0x04_0000;
        let mut o = option(7, ty, 3, 6, 6);
        assert_eq!(transit(&mut o, |ns| (ns == 7).then(node)), Outcome::Filled);
        let p = ioam6::Packet::new_unchecked(&o[..]);
        assert_eq!(p.remaining_len(), 3);
        assert_eq!(
            &p.data()[12..24],
            &[63, 0x0a, 0x0b, 0x0c, 0, 1, 0, 2, 0xde, 0xad, 0xbe, 0xef]
        );
        assert_eq!(&p.data()[..12], &[0; 12]);
        // An unknown namespace: untouched.
        assert_eq!(transit(&mut o, |_| None), Outcome::Untouched);
        // No room for a third node: Overflow, nothing written.
        assert_eq!(transit(&mut o, |_| Some(node())), Outcome::Filled);
        assert_eq!(transit(&mut o, |_| Some(node())), Outcome::Untouched);
        assert!(ioam6::Packet::new_unchecked(&o[..]).overflow());
    }

    #[test]
    fn malformed_options_drop_and_node_lengths_cannot_write_past_the_option() {
        // A remaining length beyond the option.
        let mut o = option(7, 0x80_0000, 1, 9, 2);
        assert_eq!(transit(&mut o, |_| Some(node())), Outcome::Drop);
        // Too short for the trace header.
        let mut o = vec![ioam6::OPTION_TYPE, 4, 0, 0, 0, 0];
        assert_eq!(transit(&mut o, |_| Some(node())), Outcome::Drop);
        // A node length smaller than the type's fields: writes stop at the option's end.
        let mut o = option(7, 0xff_e000, 1, 1, 1);
        assert_eq!(transit(&mut o, |_| Some(node())), Outcome::Filled);
        assert_eq!(o.len(), 4 + 8 + 4);
    }
}
