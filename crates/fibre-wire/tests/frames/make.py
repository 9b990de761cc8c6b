#!/usr/bin/env python3
"""Writes the known frames the fibre-wire tests parse, re-emit byte for byte and compare with
etherparse, and that seed the wire_* fuzz targets (scripts/fuzz copies them). Each file is
one Ethernet frame as scapy builds it, checksums included. Rerun after a change here:
`python3 crates/fibre-wire/tests/frames/make.py` (needs scapy, `pip install scapy`; the
tests read the committed frames and need no Python)."""

import os

from scapy.all import (
    ARP, ICMP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPOption_LSRR, IPOption_NOP,
    IPOption_Router_Alert, IPOption_RR, IPOption_SSRR, IPOption_Timestamp, IPv6,
    IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting,
    IPv6ExtHdrSegmentRouting, IPv6ExtHdrSegmentRoutingTLV, IPv6ExtHdrSegmentRoutingTLVPadN,
    HBHOptUnknown, ICMPv6DestUnreach, ICMPv6EchoReply, ICMPv6EchoRequest,
    ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6ND_RA, ICMPv6ND_Redirect, ICMPv6ND_RS, ICMPv6NDOptMTU,
    ICMPv6NDOptPrefixInfo, ICMPv6NDOptRedirectedHdr, ICMPv6NDOptSrcLLAddr,
    ICMPv6NDOptDstLLAddr, ICMPv6PacketTooBig, ICMPv6ParamProblem, ICMPv6TimeExceeded,
    RouterAlert, PadN, Raw, raw,
)

A, B = "02:00:00:00:00:01", "02:00:00:00:00:02"
E = Ether(src=A, dst=B)
V4 = dict(src="192.0.2.1", dst="198.51.100.7")
V6 = dict(src="2001:db8::1", dst="2001:db8:1::7")
LL = dict(src="fe80::1", dst="fe80::2")
INNER4 = IP(src="198.51.100.7", dst="192.0.2.1", ttl=1) / UDP(sport=33434, dport=33435)
INNER6 = IPv6(src="2001:db8:1::7", dst="2001:db8::1", hlim=1) / UDP(sport=33434, dport=33435)

FRAMES = {
    "arp_request": Ether(src=A, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=A, psrc="192.0.2.1", pdst="192.0.2.9"),
    # Padded to Ethernet's 60-byte minimum, as on the wire.
    "arp_reply_padded": Ether(src=B, dst=A) / ARP(op=2, hwsrc=B, psrc="192.0.2.9", hwdst=A, pdst="192.0.2.1") / Raw(b"\0" * 18),
    "ipv4_udp": E / IP(ttl=64, id=7, flags="DF", **V4) / UDP(sport=1234, dport=53) / b"query",
    "ipv4_tcp_syn": E / IP(ttl=2, **V4) / TCP(sport=40000, dport=443, flags="S", options=[("MSS", 1460), ("SAckOK", b""), ("WScale", 7)]),
    "ipv4_options_rr_ts": E / IP(ttl=9, options=[IPOption_NOP(), IPOption_RR(routers=["0.0.0.0"] * 3), IPOption_Timestamp(flg=0, timestamp=0)], **V4) / UDP(sport=1, dport=2),
    "ipv4_options_lsrr_ra": E / IP(options=[IPOption_LSRR(routers=["203.0.113.1", "203.0.113.2"]), IPOption_Router_Alert()], **V4) / UDP(sport=3, dport=4),
    "ipv4_options_ssrr": E / IP(options=[IPOption_SSRR(routers=["203.0.113.9"])], **V4) / TCP(sport=5, dport=6, flags="A"),
    "ipv4_fragment_first": E / IP(id=99, flags="MF", frag=0, **V4) / UDP(sport=7, dport=8) / (b"x" * 16),
    "ipv4_fragment_later": E / IP(id=99, proto=17, frag=3, **V4) / (b"y" * 24),
    "ipv4_icmp_echo": E / IP(**V4) / ICMP(type=8, id=0x77, seq=1) / b"ping",
    "ipv4_icmp_frag_needed": E / IP(src="192.0.2.254", dst="192.0.2.1") / ICMP(type=3, code=4, nexthopmtu=1400) / INNER4,
    "ipv4_icmp_time_exceeded": E / IP(src="192.0.2.254", dst="192.0.2.1") / ICMP(type=11, code=0) / INNER4,
    "ipv4_icmp_redirect": E / IP(src="192.0.2.254", dst="192.0.2.1") / ICMP(type=5, code=1, gw="192.0.2.253") / INNER4,
    "ipv4_icmp_param_problem": E / IP(src="192.0.2.254", dst="192.0.2.1") / ICMP(type=12, code=0, ptr=20) / INNER4,
    "ipv4_icmp_unknown_type": E / IP(**V4) / ICMP(type=42, code=1) / (b"\0" * 12),
    "vlan_ipv4_udp": Ether(src=A, dst=B) / Dot1Q(vlan=10, prio=3) / IP(**V4) / UDP(sport=9, dport=10),
    "qinq_ipv6_tcp": Ether(src=A, dst=B) / Dot1AD(vlan=100) / Dot1Q(vlan=200) / IPv6(**V6) / TCP(sport=11, dport=12, flags="PA") / b"data",
    "ipv6_udp": E / IPv6(hlim=64, tc=0xb8, fl=0x12345, **V6) / UDP(sport=1234, dport=53) / b"query",
    "ipv6_ext_chain_udp": E / IPv6(**V6) / IPv6ExtHdrHopByHop(options=[RouterAlert(value=0), PadN(optdata=b"")]) / IPv6ExtHdrDestOpt(options=[PadN(optdata=b"\0\0\0\0")]) / IPv6ExtHdrRouting(addresses=["2001:db8:2::1"], segleft=1) / IPv6ExtHdrFragment(id=5, m=1, offset=0) / IPv6ExtHdrDestOpt() / UDP(sport=13, dport=14),
    "ipv6_srh_tcp": E / IPv6(**V6) / IPv6ExtHdrSegmentRouting(addresses=["2001:db8:3::1", "2001:db8:3::2"], segleft=1) / TCP(sport=15, dport=16, flags="S"),
    # An SRH as Linux's seg6 encap with `hmac 7` builds it: the HMAC flag and a 40-octet HMAC TLV
    # (key id 7, the HMAC itself left zero), after a PadN TLV. scapy 2.8's own HMAC TLV class
    # writes a 16-bit length, so the HMAC TLV is its generic TLV.
    "ipv6_srh_hmac_udp": E / IPv6(**V6) / IPv6ExtHdrSegmentRouting(addresses=["2001:db8:3::1"], segleft=0, lastentry=0, tag=9, hmac=1, tlv_objects=[IPv6ExtHdrSegmentRoutingTLVPadN(padding=b"\0" * 6), IPv6ExtHdrSegmentRoutingTLV(type=5, len=38, value=bytes(2) + (7).to_bytes(4, "big") + bytes(32))]) / UDP(sport=17, dport=18),
    # An RPL source routing header (RFC 6554) as iproute2's `encap rpl` sends it: CmprI = CmprE =
    # 0, so every address whole; scapy's generic routing header with type 3 writes it.
    "ipv6_rpl_udp": E / IPv6(**V6) / IPv6ExtHdrRouting(type=3, segleft=2, addresses=["2001:db8:4::1", "2001:db8:4::2"]) / UDP(sport=19, dport=20),
    # An IOAM pre-allocated trace option (RFC 9486, type 0x31) in a hop-by-hop header: namespace
    # 1, trace type 0x800000, 8 octets pre-allocated, one node (hop limit 64, node id 1) written.
    "ipv6_hbh_ioam_udp": E / IPv6(**V6) / IPv6ExtHdrHopByHop(options=[HBHOptUnknown(otype=0x31, optdata=bytes([0, 0, 0, 1, 0x08, 0x01, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 1])), PadN(optdata=b"\0" * 2)]) / UDP(sport=21, dport=22),
    "ipv6_fragment_later": E / IPv6(**V6) / IPv6ExtHdrFragment(id=6, m=0, offset=10, nh=17) / (b"z" * 16),
    "ipv6_esp": E / IPv6(nh=50, **V6) / (b"\x00\x00\x01\x00" + b"\x00\x00\x00\x01" + b"e" * 24),
    "ipv6_no_next": E / IPv6(**V6) / IPv6ExtHdrDestOpt(nh=59),
    "ipv6_icmpv6_echo": E / IPv6(**V6) / ICMPv6EchoRequest(id=0x42, seq=3, data=b"ping6"),
    "ipv6_icmpv6_echo_reply": E / IPv6(**V6) / ICMPv6EchoReply(id=0x42, seq=3, data=b"ping6"),
    "ipv6_icmpv6_unreach": E / IPv6(src="2001:db8::fe", dst="2001:db8::1") / ICMPv6DestUnreach(code=4) / INNER6,
    "ipv6_icmpv6_too_big": E / IPv6(src="2001:db8::fe", dst="2001:db8::1") / ICMPv6PacketTooBig(mtu=1280) / INNER6,
    "ipv6_icmpv6_time_exceeded": E / IPv6(src="2001:db8::fe", dst="2001:db8::1") / ICMPv6TimeExceeded(code=0) / INNER6,
    "ipv6_icmpv6_param_problem": E / IPv6(src="2001:db8::fe", dst="2001:db8::1") / ICMPv6ParamProblem(code=1, ptr=40) / INNER6,
    "ndp_rs": Ether(src=A, dst="33:33:00:00:00:02") / IPv6(src="fe80::1", dst="ff02::2", hlim=255) / ICMPv6ND_RS() / ICMPv6NDOptSrcLLAddr(lladdr=A),
    "ndp_ra": Ether(src=B, dst="33:33:00:00:00:01") / IPv6(src="fe80::2", dst="ff02::1", hlim=255) / ICMPv6ND_RA(chlim=64, M=1, routerlifetime=1800) / ICMPv6NDOptSrcLLAddr(lladdr=B) / ICMPv6NDOptMTU(mtu=1500) / ICMPv6NDOptPrefixInfo(prefix="2001:db8:1::", prefixlen=64),
    "ndp_ns": Ether(src=A, dst="33:33:ff:00:00:02") / IPv6(src="fe80::1", dst="ff02::1:ff00:2", hlim=255) / ICMPv6ND_NS(tgt="fe80::2") / ICMPv6NDOptSrcLLAddr(lladdr=A),
    "ndp_na": E / IPv6(hlim=255, **LL) / ICMPv6ND_NA(tgt="fe80::1", R=1, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=A),
    "ndp_redirect": E / IPv6(hlim=255, **LL) / ICMPv6ND_Redirect(tgt="fe80::3", dst="2001:db8:9::1") / ICMPv6NDOptDstLLAddr(lladdr=B) / ICMPv6NDOptRedirectedHdr(pkt=INNER6),
    # An option type NDP does not define (25, RDNSS) must be kept, not dropped.
    "ndp_ra_unknown_option": Ether(src=B, dst="33:33:00:00:00:01") / IPv6(src="fe80::2", dst="ff02::1", hlim=255) / ICMPv6ND_RA() / Raw(bytes([25, 3, 0, 0, 0, 0, 0, 60]) + bytes(16)),
}

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for name, pkt in FRAMES.items():
        with open(os.path.join(here, name + ".bin"), "wb") as f:
            f.write(raw(pkt))
