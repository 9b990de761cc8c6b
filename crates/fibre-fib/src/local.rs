//! What the data plane asks about the router's own links and addresses when it answers or
//! originates a packet: a link's MAC, the source address the kernel would pick, whether an
//! IPv6 address is configured on a link, the route a packet it makes takes. Reads only; none
//! of these allocate.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::dst::{Dst, LookupError};
use crate::flow::Flow;
use crate::ids::IfIndex;
use crate::prefix::ip_u128;
use crate::srcsel;
use crate::types::{ifa_flags, scope, Family, RouteType};
use crate::Fib;

impl Fib {
    /// The link's 6-byte MAC address, if it has one.
    pub fn link_mac(&self, ifindex: u32) -> Option<[u8; 6]> {
        let l = self.links.get(IfIndex(ifindex))?;
        l.mac.get(..6)?.try_into().ok()
    }

    /// inet_select_addr(dev, dst, scope): the IPv4 source for a packet the router sends on
    /// `dev` toward `dst` (an ARP request's sender address with `scope::LINK`).
    pub fn select_src4(&self, dev: u32, dst: Ipv4Addr, within: u8) -> Option<Ipv4Addr> {
        srcsel::select_v4(&self.links, IfIndex(dev), u32::from(dst), within).map(Ipv4Addr::from)
    }

    /// ipv6_dev_get_saddr: the IPv6 source for a packet to `dst` leaving by `dev`.
    pub fn select_src6(&self, dev: Option<u32>, dst: &Ipv6Addr) -> Option<Ipv6Addr> {
        srcsel::select_v6(&self.links, dev.map(IfIndex), dst)
    }

    /// The `IFA_F_*` flags of `a` when it is configured on `dev` (ipv6_get_ifaddr with a
    /// device: the address must be on that link).
    pub fn addr6_flags_on(&self, dev: u32, a: &Ipv6Addr) -> Option<u32> {
        let l = self.links.get(IfIndex(dev))?;
        l.v6.iter().find(|x| x.addr == *a).map(|x| x.flags)
    }

    /// ipv6_get_lladdr: the link's first usable link-local address (not tentative), the
    /// source of its neighbour solicitations.
    pub fn link_local6(&self, dev: u32) -> Option<Ipv6Addr> {
        let l = self.links.get(IfIndex(dev))?;
        l.v6.iter()
            .find(|a| {
                a.scope == scope::LINK
                    && a.flags & (ifa_flags::TENTATIVE | ifa_flags::DADFAILED) == 0
            })
            .map(|a| a.addr)
    }

    /// inet_addr_type_dev_table(dev, a): the local table's type for `a` as seen from `dev`
    /// (LOCAL only for an address whose local route is on `dev`); with `dev` 0, as from any
    /// link (inet_addr_type).
    pub fn addr_type4_on(&self, dev: u32, a: Ipv4Addr) -> RouteType {
        self.neigh_addr_type4(IfIndex(dev), a)
    }

    /// The route a packet the router originates takes to `dst` (from `src` when the packet
    /// has a source already, with `tos`): icmp_route_lookup / icmpv6_route_lookup's output
    /// lookup.
    pub fn route_output(
        &self,
        dst: IpAddr,
        src: Option<IpAddr>,
        tos: u8,
    ) -> Result<&Dst, LookupError> {
        let flow = Flow {
            dst: ip_u128(dst),
            src: src.map_or(0, ip_u128),
            tos,
            ..Flow::empty()
        };
        self.lookup_output(Family::of(&dst), &flow)
    }

    /// ipv6_chk_addr without a device: whether `a` is one of the router's IPv6 addresses.
    pub fn is_own_addr6(&self, a: &Ipv6Addr) -> bool {
        self.links.iter().any(|l| l.v6.iter().any(|x| x.addr == *a))
    }
}
