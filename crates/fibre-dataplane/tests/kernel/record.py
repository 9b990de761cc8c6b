#!/usr/bin/env python3
"""Records what a Linux router sends for frames that exercise fibre-dataplane's stages (the
receive checks, forwarding, IPv4 options, fragmentation, ICMP and ICMPv6 errors, echo replies,
rate limits), for tests/kernel.rs to compare the stages with byte for byte; the comment above
each case in CASES says what it shows.

Three network namespaces, veth between them, MACs and neighbours fixed:
  S (s0 02:00:00:00:00:01, 10.0.0.2, 2001:db8::2)
    <-> (r0 02:00:00:00:00:02, 10.0.0.1, 2001:db8::1) R (r1 02:00:00:00:01:02, mtu 1400,
         10.0.1.1, 2001:db8:1::1)
    <-> D (d0 02:00:00:00:01:01, 10.0.1.2, 2001:db8:1::2)
R routes 203.0.113.0/24 via 10.0.1.2, 198.51.100.0/24 back via 10.0.0.3 (on r0),
2001:db8:5::/48 via 2001:db8:1::2, and has 192.0.2.0/24 unreachable. Each case sends one frame
(or a burst) from s0 and writes CASE.txt: the frames sent ("in"), then every unicast frame
captured on s0 ("s") and d0 ("d") within half a second, one hex line each. Run as root with
scapy:
`python3 crates/fibre-dataplane/tests/kernel/record.py` (writes beside itself); the tests read
the committed files and need neither root nor Python."""

import ctypes
import os
import select
import socket
import subprocess
import time

from scapy.all import (
    ICMP, IP, UDP, Ether, HBHOptUnknown, IPOption, ICMPv6EchoRequest, IPOption_NOP, IPOption_RR,
    IPOption_Router_Alert, ICMPv6DestUnreach, IPv6, IPv6ExtHdrHopByHop, Jumbo, PadN, Raw,
    RouterAlert, raw,
)

HERE = os.path.dirname(os.path.abspath(__file__))
NS = {"s": "fibre-dp-s", "r": "fibre-dp-r", "d": "fibre-dp-d"}
S_MAC, R0_MAC, R1_MAC, D_MAC = (
    "02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:01:02", "02:00:00:00:01:01")
ETH = Ether(src=S_MAC, dst=R0_MAC)


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def ns(name, cmd):
    sh(f"ip netns exec {NS[name]} {cmd}")


def setup():
    teardown()
    for n in NS.values():
        sh(f"ip netns add {n}")
    sh(f"ip link add s0 netns {NS['s']} type veth peer name r0 netns {NS['r']}")
    sh(f"ip link add r1 netns {NS['r']} type veth peer name d0 netns {NS['d']}")
    for n, dev, mac in [("s", "s0", S_MAC), ("r", "r0", R0_MAC), ("r", "r1", R1_MAC),
                        ("d", "d0", D_MAC)]:
        ns(n, f"sysctl -qw net.ipv6.conf.{dev}.accept_dad=0 net.ipv6.conf.all.accept_dad=0")
        ns(n, f"ip link set {dev} address {mac} up")
    ns("r", "ip link set r1 mtu 1400")
    ns("r", "sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1")
    ns("r", "sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.r0.rp_filter=0")
    ns("r", "sysctl -qw net.ipv4.conf.all.accept_source_route=0")
    for n, dev, a4, a6 in [("s", "s0", "10.0.0.2/24", "2001:db8::2/64"),
                           ("r", "r0", "10.0.0.1/24", "2001:db8::1/64"),
                           ("r", "r1", "10.0.1.1/24", "2001:db8:1::1/64"),
                           ("d", "d0", "10.0.1.2/24", "2001:db8:1::2/64")]:
        ns(n, f"ip addr add {a4} dev {dev}")
        ns(n, f"ip -6 addr add {a6} dev {dev} nodad")
    for a, dev, mac in [("10.0.0.2", "r0", S_MAC), ("10.0.1.2", "r1", D_MAC),
                        ("10.0.0.20", "r0", S_MAC), ("10.0.0.21", "r0", S_MAC),
                        ("2001:db8::2", "r0", S_MAC), ("fe80::2", "r0", S_MAC),
                        ("2001:db8:1::2", "r1", D_MAC)]:
        ns("r", f"ip neigh replace {a} lladdr {mac} nud permanent dev {dev}")
    ns("r", "ip route add 203.0.113.0/24 via 10.0.1.2")
    ns("r", "ip route add 198.51.100.0/24 via 10.0.0.3")
    ns("r", "ip route add unreachable 192.0.2.0/24")
    ns("r", f"ip neigh replace 10.0.0.3 lladdr 02:00:00:00:00:03 nud permanent dev r0")
    ns("r", "ip -6 route add 2001:db8:5::/48 via 2001:db8:1::2")
    time.sleep(0.5)


def teardown():
    for n in NS.values():
        subprocess.run(f"ip netns del {n}", shell=True, stderr=subprocess.DEVNULL)


libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def packet_socket(name, dev):
    """An AF_PACKET socket on dev in namespace name (setns, then back)."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    fd = os.open(f"/var/run/netns/{NS[name]}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((dev, 0))
    finally:
        libc.setns(home, CLONE_NEWNET)
        os.close(fd)
        os.close(home)
    return s


def drain(socks):
    while select.select(socks, [], [], 0.05)[0]:
        for s in socks:
            try:
                s.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass


def run(name, frames, sock_s, sock_d):
    drain([sock_s, sock_d])
    frames = [raw(f) for f in (frames if isinstance(frames, list) else [frames])]
    for frame in frames:
        sock_s.send(frame)
    got = []
    end = time.time() + 0.5
    while time.time() < end:
        ready = select.select([sock_s, sock_d], [], [], 0.05)[0]
        for s in ready:
            data, addr = s.recvfrom(65536)
            # PACKET_OUTGOING (4): our own frame as s0 sent it. Multicast frames are the
            # namespaces' own MLD reports and solicitations, not answers to the case.
            if addr[2] == 4 or data[0] & 1:
                continue
            got.append(("s" if s is sock_s else "d", data))
    with open(os.path.join(HERE, f"{name}.txt"), "w") as f:
        for frame in frames:
            f.write(f"in {frame.hex()}\n")
        for where, data in got:
            f.write(f"{where} {data.hex()}\n")
    print(name, [(w, len(d)) for w, d in got])


CASES = {
    # TTL 1, TOS 0xff: time exceeded from 10.0.0.1, quote cut at 576 bytes.
    "ttl1": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=1, tos=0xff, id=0x1111)
    / UDP(sport=1000, dport=2000) / (b"a" * 600),
    # DF over r1's MTU: fragmentation needed, MTU 1400.
    "df_too_big": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=64, flags="DF", id=0x2222)
    / UDP(sport=1000, dport=2000) / (b"b" * 1392),
    # No DF, record route and a NOP: fragments at d0, the route recorded in the first.
    "frag_rr": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=64, id=0x3333, tos=0x10,
                        options=[IPOption_NOP(), IPOption_RR(routers=["0.0.0.0"] * 3)])
    / UDP(sport=1000, dport=2000) / (b"c" * 1400),
    # Echo to the router, code 0, TOS 0x28.
    "echo4": ETH / IP(src="10.0.0.2", dst="10.0.0.1", ttl=64, tos=0x28, id=0x4444)
    / ICMP(type=8, code=0, id=7, seq=9) / (b"p" * 56),
    # IPv6 hop limit 1, traffic class 0xb8: hop limit exceeded, quote cut at 1280 bytes.
    "hlim1": ETH / IPv6(src="2001:db8::2", dst="2001:db8:5::5", hlim=1, tc=0xb8, fl=0x12345)
    / UDP(sport=1000, dport=2000) / (b"d" * 1300),
    # IPv6 over r1's MTU: packet too big, MTU 1400.
    "ptb6": ETH / IPv6(src="2001:db8::2", dst="2001:db8:5::5", hlim=64)
    / UDP(sport=1000, dport=2000) / (b"e" * 1400),
    # IPv6 echo to the router, traffic class 0x28.
    "echo6": ETH / IPv6(src="2001:db8::2", dst="2001:db8::1", hlim=64, tc=0x28)
    / ICMPv6EchoRequest(id=7, seq=9, data=b"q" * 56),
    # A small packet's error quotes all of it.
    "ttl1_small": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=1, id=0x6666)
    / ICMP(type=8, id=1, seq=1) / b"hi",
    # No error about an error: silence.
    "ttl1_icmp_error": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=1)
    / ICMP(type=3, code=1) / IP(src="203.0.113.5", dst="10.0.0.2") / UDP(),
    # An echo request with code 5 is answered, the code kept.
    "echo4_code5": ETH / IP(src="10.0.0.2", dst="10.0.0.1", id=0x7777)
    / ICMP(type=8, code=5, id=3, seq=4) / b"abcd",
    # A link-local source leaving its link: beyond scope, from the router's link-local.
    "linklocal6": ETH / IPv6(src="fe80::2", dst="2001:db8:5::5", hlim=64)
    / UDP(sport=1000, dport=2000) / b"f",
    # An unknown hop-by-hop option of action 10: parameter problem code 2 at the option.
    "hbh_unknown": ETH / IPv6(src="2001:db8::2", dst="2001:db8:5::5", hlim=64)
    / IPv6ExtHdrHopByHop(options=[HBHOptUnknown(otype=0x9e, optdata=b"\0\0\0\0")])
    / UDP(sport=1000, dport=2000) / b"g",
    # Time exceeded for a packet with record route (a slot left after the router's), Router
    # Alert and a timestamp with addresses: the error echoes the record route and timestamp.
    "ttl1_options": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=1, id=0x8888,
                             options=[IPOption_RR(routers=["0.0.0.0"] * 3),
                                      IPOption_Router_Alert()])
    / UDP(sport=1000, dport=2000) / b"h",
    # Time exceeded for a packet with a timestamp option with addresses, room for two: the
    # router stamps it on receive, and its error carries a second stamp.
    "ttl1_timestamp": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=1, id=0xcccc,
                               options=[IPOption(b"D\x14\x05\x01" + b"\0" * 16)])
    / UDP(sport=1000, dport=2000) / b"k",
    # Echo with a record route: the reply records the router's address too.
    "echo4_rr": ETH / IP(src="10.0.0.2", dst="10.0.0.1", id=0x9999,
                         options=[IPOption_NOP(), IPOption_RR(routers=["0.0.0.0"] * 2)])
    / ICMP(type=8, id=5, seq=6) / b"rr",
    # A full record route is echoed as it is.
    "ttl1_rr_full": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=1, id=0xaaaa,
                             options=[IPOption_RR(pointer=8, routers=["192.0.2.9"])])
    / UDP(sport=1000, dport=2000) / b"i",
    # Out by the link it came in on: a host redirect to 10.0.0.3, and the packet forwarded.
    "redirect": ETH / IP(src="10.0.0.2", dst="198.51.100.9", ttl=64, id=0xbbbb)
    / UDP(sport=1000, dport=2000) / b"j",
    # The TTL is checked before the MTU: time exceeded, not fragmentation needed.
    "ttl1_df_too_big": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=1, flags="DF",
                                id=0xdddd) / UDP(sport=1000, dport=2000) / (b"l" * 1392),
    # Only a first fragment gets an error.
    "ttl1_later_fragment": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=1, frag=2,
                                    proto=17) / (b"m" * 16),
    # A unicast packet in a broadcast frame is not forwarded, and gets no error.
    "l2_broadcast_ttl1": Ether(src=S_MAC, dst="ff:ff:ff:ff:ff:ff")
    / IP(src="10.0.0.2", dst="203.0.113.5", ttl=1) / UDP(sport=1000, dport=2000) / b"n",
    # A record route whose pointer is below 4: parameter problem at the pointer (22).
    "bad_option": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=64, id=0xeeee,
                           options=[IPOption(b"\x07\x07\x03" + b"\0" * 5)])
    / UDP(sport=1000, dport=2000) / b"o",
    # Link-layer padding after the IP packet is trimmed before forwarding.
    "fwd4_padded": Ether(src=S_MAC, dst=R0_MAC, type=0x0800)
    / Raw(raw(IP(src="10.0.0.2", dst="203.0.113.5", ttl=64, id=0xffff)
              / UDP(sport=1000, dport=2000) / b"p") + b"\xee" * 20),
    # A hop-by-hop Router Alert is forwarded (no socket asks for it), hop limit decremented.
    "hbh_router_alert": ETH / IPv6(src="2001:db8::2", dst="2001:db8:5::5", hlim=64)
    / IPv6ExtHdrHopByHop(options=[RouterAlert(value=0), PadN(optdata=b"")])
    / UDP(sport=1000, dport=2000) / b"q",
    # Padding that is not zeros: dropped, no error.
    "hbh_padn_nonzero": ETH / IPv6(src="2001:db8::2", dst="2001:db8:5::5", hlim=64)
    / IPv6ExtHdrHopByHop(options=[PadN(optdata=b"\x01\x00\x00\x00")])
    / UDP(sport=1000, dport=2000) / b"r",
    # A jumbo option in a packet with a payload length: parameter problem at the option.
    "hbh_jumbo": ETH / IPv6(src="2001:db8::2", dst="2001:db8:5::5", hlim=64)
    / IPv6ExtHdrHopByHop(options=[Jumbo(jumboplen=70000)])
    / UDP(sport=1000, dport=2000) / b"s",
    # A unicast packet in a multicast frame: dropped before its hop limit is looked at.
    "l2_multicast_hlim1": Ether(src=S_MAC, dst="33:33:00:00:00:05")
    / IPv6(src="2001:db8::2", dst="2001:db8:5::5", hlim=1) / UDP(sport=1000, dport=2000)
    / b"t",
    # No ICMPv6 error about an ICMPv6 error.
    "hlim1_icmp6_error": ETH / IPv6(src="2001:db8::2", dst="2001:db8:5::5", hlim=1)
    / ICMPv6DestUnreach(code=3) / IPv6(src="2001:db8:5::5", dst="2001:db8::2") / UDP(),
    # Ten at once from a source nothing else used: the peer's bucket lets six errors out.
    "ttl1_burst": [ETH / IP(src="10.0.0.20", dst="203.0.113.5", ttl=1, id=i)
                   / UDP(sport=1000, dport=2000) for i in range(10)],
    # Ten at once to an unreachable route: ip_error's bucket and the peer's share tokens, and
    # two host unreachables get out.
    "unreachable_burst": [ETH / IP(src="10.0.0.21", dst="192.0.2.9", ttl=64, id=i)
                          / UDP(sport=1000, dport=2000) for i in range(10)],
    # Forwarded untouched but the TTL: the checksum's incremental update.
    "fwd4": ETH / IP(src="10.0.0.2", dst="203.0.113.5", ttl=64, id=0x5555)
    / UDP(sport=1000, dport=2000) / b"x",
}


def main():
    setup()
    try:
        s, d = packet_socket("s", "s0"), packet_socket("d", "d0")
        for name, frame in CASES.items():
            run(name, frame, s, d)
    finally:
        teardown()


if __name__ == "__main__":
    main()
