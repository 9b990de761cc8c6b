//! The protocols' numbers, in one place: header views keep these fields as plain integers (so
//! an unknown value is kept, never refused or lost), and the stages above compare them with the
//! names here. Values are IANA's registries; the RFC that defines each is named beside it.

/// EtherType values (IEEE 802 numbers) in the Ethernet II type field and after a VLAN tag.
pub mod ethertype {
    /// IPv4 (RFC 894).
    pub const IPV4: u16 = 0x0800;
    /// ARP (RFC 826).
    pub const ARP: u16 = 0x0806;
    /// An IEEE 802.1Q customer VLAN tag follows.
    pub const VLAN: u16 = 0x8100;
    /// IPv6 (RFC 2464).
    pub const IPV6: u16 = 0x86DD;
    /// An IEEE 802.1ad service VLAN tag (the outer tag of QinQ) follows.
    pub const QINQ: u16 = 0x88A8;
    /// MPLS unicast (RFC 3032); named for the drop counters, not decoded here.
    pub const MPLS: u16 = 0x8847;
    /// Values below this are an IEEE 802.3 length, not a type: such frames are not Ethernet II.
    pub const MIN_TYPE: u16 = 0x0600;
}

/// IP protocol numbers: IPv4's protocol field and IPv6's next-header fields.
pub mod ip_proto {
    /// IPv6 hop-by-hop options (RFC 8200); valid only first in the chain.
    pub const HOP_BY_HOP: u8 = 0;
    pub const ICMP: u8 = 1;
    /// IGMP (RFC 3376), carried with a Router Alert option.
    pub const IGMP: u8 = 2;
    /// IPv4 in IP (RFC 2003).
    pub const IPIP: u8 = 4;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    /// IPv6 encapsulated (RFC 2473).
    pub const IPV6: u8 = 41;
    /// IPv6 routing header (RFC 8200; type 4 is the SRH of RFC 8754).
    pub const IPV6_ROUTING: u8 = 43;
    /// IPv6 fragment header (RFC 8200).
    pub const IPV6_FRAGMENT: u8 = 44;
    /// GRE (RFC 2784).
    pub const GRE: u8 = 47;
    /// Encapsulating Security Payload (RFC 4303): what follows is encrypted.
    pub const ESP: u8 = 50;
    /// Authentication Header (RFC 4302).
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    /// IPv6 "no next header" (RFC 8200): nothing follows.
    pub const IPV6_NONE: u8 = 59;
    /// IPv6 destination options (RFC 8200).
    pub const IPV6_DEST_OPTS: u8 = 60;
    /// SCTP (RFC 9260): has ports at the same offsets as UDP and TCP.
    pub const SCTP: u8 = 132;
    /// An Ethernet frame (RFC 8986's L2 SRv6 encapsulation).
    pub const ETHERNET: u8 = 143;
}

/// ARP field values (RFC 826; hardware types from IANA's ARP parameters).
pub mod arp {
    /// Hardware type Ethernet.
    pub const HTYPE_ETHERNET: u16 = 1;
    pub const OP_REQUEST: u16 = 1;
    pub const OP_REPLY: u16 = 2;
}

/// ICMP for IPv4 (RFC 792 and later): message types and the codes the router sends or reads.
pub mod icmp {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACHABLE: u8 = 3;
    pub const REDIRECT: u8 = 5;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
    pub const PARAM_PROBLEM: u8 = 12;

    /// Destination-unreachable codes (RFC 792, RFC 1812 section 5.2.7.1).
    pub mod unreach {
        pub const NET: u8 = 0;
        pub const HOST: u8 = 1;
        pub const PROTOCOL: u8 = 2;
        pub const PORT: u8 = 3;
        /// Fragmentation needed and DF set; carries the next-hop MTU (RFC 1191).
        pub const FRAG_NEEDED: u8 = 4;
        pub const SOURCE_ROUTE_FAILED: u8 = 5;
        pub const NET_UNKNOWN: u8 = 6;
        pub const HOST_UNKNOWN: u8 = 7;
        pub const NET_PROHIBITED: u8 = 9;
        pub const HOST_PROHIBITED: u8 = 10;
        /// Communication administratively prohibited (RFC 1812): what a `prohibit` route sends.
        pub const ADMIN_PROHIBITED: u8 = 13;
    }

    /// Time-exceeded codes.
    pub mod time_exceeded {
        /// TTL reached zero in transit.
        pub const TTL: u8 = 0;
        /// Fragment reassembly timed out.
        pub const REASSEMBLY: u8 = 1;
    }

    /// Redirect codes (RFC 792); routers send host redirects (RFC 1812 section 5.2.7.2).
    pub mod redirect {
        pub const NET: u8 = 0;
        pub const HOST: u8 = 1;
        pub const TOS_NET: u8 = 2;
        pub const TOS_HOST: u8 = 3;
    }

    /// Parameter-problem codes (RFC 792, RFC 1108).
    pub mod param_problem {
        /// The pointer field names the octet in error.
        pub const POINTER: u8 = 0;
        pub const MISSING_OPTION: u8 = 1;
        pub const BAD_LENGTH: u8 = 2;
    }
}

/// ICMPv6 (RFC 4443) and Neighbor Discovery (RFC 4861) message types and codes.
pub mod icmpv6 {
    pub const DEST_UNREACHABLE: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const PARAM_PROBLEM: u8 = 4;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const ROUTER_SOLICIT: u8 = 133;
    pub const ROUTER_ADVERT: u8 = 134;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;
    pub const REDIRECT: u8 = 137;

    /// Destination-unreachable codes (RFC 4443 section 3.1).
    pub mod unreach {
        pub const NO_ROUTE: u8 = 0;
        pub const ADMIN_PROHIBITED: u8 = 1;
        pub const BEYOND_SCOPE: u8 = 2;
        pub const ADDRESS: u8 = 3;
        pub const PORT: u8 = 4;
        pub const POLICY_FAILED: u8 = 5;
        /// Reject route to destination: what a `prohibit`/`unreachable` IPv6 route may send.
        pub const REJECT_ROUTE: u8 = 6;
    }

    /// Time-exceeded codes (RFC 4443 section 3.3).
    pub mod time_exceeded {
        pub const HOP_LIMIT: u8 = 0;
        pub const REASSEMBLY: u8 = 1;
    }

    /// Parameter-problem codes (RFC 4443 section 3.4).
    pub mod param_problem {
        pub const HEADER_FIELD: u8 = 0;
        pub const NEXT_HEADER: u8 = 1;
        pub const OPTION: u8 = 2;
    }

    /// NDP option types (RFC 4861 section 4.6, RFC 8106 for the ones only named here).
    pub mod ndp_option {
        pub const SOURCE_LL_ADDR: u8 = 1;
        pub const TARGET_LL_ADDR: u8 = 2;
        pub const PREFIX_INFO: u8 = 3;
        pub const REDIRECTED_HEADER: u8 = 4;
        pub const MTU: u8 = 5;
    }
}
