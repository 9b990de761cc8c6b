//! How much room receive leaves in front of every packet, decided once from the configuration
//! so that the common path never copies.
//!
//! # The rule
//! Receive writes a packet's first byte at offset [`Headroom::bytes`] of a base-class frame
//! (the pool's [`alloc`](crate::Pool::alloc) hands out buffers that start there). On the way
//! out a packet only ever grows at the front by at most one encapsulation (SRv6 H.Encaps or
//! H.Insert, an IOAM trace) plus one link-layer header (Ethernet and up to two VLAN tags), so
//! a headroom of at least the largest encapsulation any route needs plus the largest egress
//! link-layer reserve makes every prepend succeed in place. Stripping headers on the way in
//! (`trim_front`) only adds room. The headroom is
//!
//! `round_up(max(largest_encap + largest_l2_reserve, MIN_HEADROOM), CACHE_LINE)`
//!
//! and is computed when the configuration changes, never per packet. A packet that needs
//! more (a route added since the frames were set up, whose encapsulation exceeds their
//! headroom) still leaves: `ensure_headroom` copies it once, within its frame or into a large
//! one, and counts the copy, so an operator sees the cost instead of a drop.
//!
//! # AF_XDP
//! The kernel places received data at `XDP_PACKET_HEADROOM` (256) plus the UMEM's
//! `frame_headroom` into each frame; [`Headroom::umem_frame_headroom`] is the value to
//! register so that data starts at [`Headroom::af_xdp`]`().bytes()`: the configured headroom or
//! 256, whichever is larger.

/// The smallest headroom handed out: room for an L2 rewrite and a small encapsulation with no
/// configuration at all. VPP's `VLIB_BUFFER_PRE_DATA_SIZE` and DPDK's `RTE_PKTMBUF_HEADROOM`
/// both default to this value.
pub const MIN_HEADROOM: usize = 128;

/// Headrooms are rounded up to a cache line so a received packet's first byte starts one when
/// the frame does (frames are powers of two), as the kernel aligns skb data with `NET_SKB_PAD`.
pub const CACHE_LINE: usize = 64;

/// The largest headroom [`Headroom::new`] returns: more than any frame holds (AF_XDP frames are
/// at most a page), so a pool refuses it rather than the arithmetic overflowing.
pub const MAX_HEADROOM: usize = 1 << 16;

/// What the kernel reserves at the start of every AF_XDP UMEM frame before the data
/// (`XDP_PACKET_HEADROOM`, `include/linux/bpf.h`; 256 on every kernel with AF_XDP).
pub const XDP_PACKET_HEADROOM: usize = 256;

/// An Ethernet II header: two addresses and the EtherType.
pub const ETH_HLEN: usize = 14;
/// One 802.1Q or 802.1ad tag.
pub const VLAN_TAG_LEN: usize = 4;
/// Tags an egress link may push: one 802.1Q, or an 802.1ad outer tag over one 802.1Q (QinQ).
pub const MAX_VLAN_TAGS: usize = 2;
/// The largest link-layer header any egress link prepends.
pub const MAX_L2_RESERVE: usize = l2_reserve(MAX_VLAN_TAGS);

/// The fixed IPv6 header an encapsulation prepends as its outer header.
pub const IPV6_HLEN: usize = 40;
/// The fixed part of an SRv6 Segment Routing Header (RFC 8754), before its segment list.
pub const SRH_FIXED_LEN: usize = 8;
/// One SID (an IPv6 address) in an SRH's segment list.
pub const SRV6_SID_LEN: usize = 16;
/// An IOAM pre-allocated trace's fixed part inside a hop-by-hop header (RFC 9486, RFC 9197):
/// the hop-by-hop header's 2 bytes, a 2-byte PadN for alignment, the 4-byte IOAM option
/// header and the 8-byte trace header; the kernel's `ioam6_lwt_encap` lays it out the same way.
pub const IOAM6_TRACE_FIXED_LEN: usize = 2 + 2 + 4 + 8;
/// The most node data a pre-allocated trace may carry (`IOAM6_TRACE_DATA_SIZE_MAX`).
pub const IOAM6_TRACE_DATA_MAX: usize = 244;

/// The link-layer header an egress link with `vlan_tags` tags prepends.
pub const fn l2_reserve(vlan_tags: usize) -> usize {
    ETH_HLEN + VLAN_TAG_LEN * vlan_tags
}

/// One encapsulation a route may apply, by the bytes it adds in front of the packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Encap {
    /// None: the packet leaves as it came, apart from its link-layer header.
    None,
    /// SRv6 H.Encaps (RFC 8986): an outer IPv6 header and an SRH of `sids` segments.
    Srv6Encaps { sids: u8 },
    /// SRv6 H.Insert: an SRH of `sids` segments plus the original destination, inserted
    /// after the packet's own IPv6 header (`insert_after`).
    Srv6Insert { sids: u8 },
    /// An IOAM pre-allocated trace of `data` bytes (capped at [`IOAM6_TRACE_DATA_MAX`]),
    /// inserted in the packet's own hop-by-hop header (`encap: false`) or under an outer IPv6
    /// header (`encap: true`), as the kernel's ioam6 lightweight tunnel modes do.
    Ioam6Trace { data: u8, encap: bool },
}

impl Encap {
    /// The bytes this encapsulation adds in front of (or inside the front of) a packet.
    pub const fn len(self) -> usize {
        match self {
            Encap::None => 0,
            Encap::Srv6Encaps { sids } => IPV6_HLEN + SRH_FIXED_LEN + SRV6_SID_LEN * sids as usize,
            Encap::Srv6Insert { sids } => SRH_FIXED_LEN + SRV6_SID_LEN * (sids as usize + 1),
            Encap::Ioam6Trace { data, encap } => {
                let data = if (data as usize) < IOAM6_TRACE_DATA_MAX {
                    data as usize
                } else {
                    IOAM6_TRACE_DATA_MAX
                };
                IOAM6_TRACE_FIXED_LEN + data + if encap { IPV6_HLEN } else { 0 }
            }
        }
    }

    /// Whether this encapsulation adds nothing.
    pub const fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// The headroom in front of every received packet (see the module comment for the rule).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Headroom(usize);

impl Default for Headroom {
    /// [`MIN_HEADROOM`]: what a configuration without encapsulation or VLANs needs.
    fn default() -> Self {
        Headroom(MIN_HEADROOM)
    }
}

impl Headroom {
    /// The headroom for the given largest encapsulation and largest link-layer reserve, in
    /// bytes (`Encap::len`, [`l2_reserve`]).
    pub const fn new(largest_encap: usize, largest_l2_reserve: usize) -> Headroom {
        let need = largest_encap.saturating_add(largest_l2_reserve);
        let need = if need < MIN_HEADROOM {
            MIN_HEADROOM
        } else if need > MAX_HEADROOM {
            MAX_HEADROOM
        } else {
            need
        };
        Headroom(need.div_ceil(CACHE_LINE) * CACHE_LINE)
    }

    /// The headroom for every route's encapsulation and every egress link's tag count.
    pub fn for_config(
        encaps: impl IntoIterator<Item = Encap>,
        vlan_tags: impl IntoIterator<Item = usize>,
    ) -> Headroom {
        let encap = encaps.into_iter().map(Encap::len).max().unwrap_or(0);
        let l2 = vlan_tags
            .into_iter()
            .map(l2_reserve)
            .max()
            .unwrap_or(ETH_HLEN);
        Headroom::new(encap, l2)
    }

    /// The bytes in front of a received packet.
    pub const fn bytes(self) -> usize {
        self.0
    }

    /// The headroom data gets under AF_XDP: at least `XDP_PACKET_HEADROOM`.
    pub const fn af_xdp(self) -> Headroom {
        if self.0 < XDP_PACKET_HEADROOM {
            Headroom(XDP_PACKET_HEADROOM)
        } else {
            self
        }
    }

    /// The UMEM `frame_headroom` to register so the kernel leaves [`Headroom::af_xdp`] in
    /// front of received data: what this headroom needs beyond `XDP_PACKET_HEADROOM`.
    pub const fn umem_frame_headroom(self) -> usize {
        self.0.saturating_sub(XDP_PACKET_HEADROOM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encapsulation_lengths_match_the_anchors() {
        assert_eq!(Encap::Srv6Encaps { sids: 1 }.len(), 64);
        assert_eq!(Encap::Srv6Encaps { sids: 13 }.len(), 256);
        assert_eq!(Encap::Srv6Insert { sids: 2 }.len(), 8 + 16 * 3);
        assert_eq!(
            Encap::Ioam6Trace {
                data: 244,
                encap: false
            }
            .len(),
            260
        );
        assert_eq!(
            Encap::Ioam6Trace {
                data: 255,
                encap: true
            }
            .len(),
            300
        );
        assert!(Encap::None.is_empty());
        assert_eq!(MAX_L2_RESERVE, 22);
    }

    #[test]
    fn headroom_rounds_to_cache_lines_with_a_floor() {
        assert_eq!(Headroom::default().bytes(), 128);
        assert_eq!(Headroom::new(0, ETH_HLEN).bytes(), 128);
        // Thirteen SIDs fill AF_XDP's 256 exactly; under an Ethernet header (here QinQ) they need
        // one more cache line.
        assert_eq!(
            Headroom::new(Encap::Srv6Encaps { sids: 13 }.len(), 0).bytes(),
            256
        );
        let h = Headroom::for_config([Encap::Srv6Encaps { sids: 13 }, Encap::None], [0, 2]);
        assert_eq!(h.bytes(), 320);
        assert_eq!(h.af_xdp().bytes(), 320);
        assert_eq!(h.umem_frame_headroom(), 64);
        let small = Headroom::for_config([Encap::Srv6Encaps { sids: 2 }], [1]);
        assert_eq!(small.bytes(), 128);
        assert_eq!(small.af_xdp().bytes(), 256);
        assert_eq!(small.umem_frame_headroom(), 0);
        assert_eq!(Headroom::new(usize::MAX, usize::MAX).bytes(), MAX_HEADROOM);
    }
}
