"""The inputs of the forwarding differential: a router configuration as an iproute2 batch file
and the frames each link receives, built with scapy.

    python3 tests/forward/fwdgen.py            # rewrite config.batch, input/*.pcap, cases.json
    python3 tests/forward/fwdgen.py --check    # exit 1 if the committed files differ

The router has four Ethernet links (a0, b0, c0, d0; c0 has MTU 1280). Most frames come in on
a0, a few on b0 and d0; every case that draws an ICMP error (but the rate-limit bursts) has its
own source address, so no case spends another's rate-limit tokens (see README.md). Each case is one frame or
a few, at its own capture time, CASE_GAP apart; the frames of the rate-limit bursts are
BURST_GAP apart. The last cases leave a neighbour unresolved, so the kernel's probes and the
ICMP errors that follow its failure come within NEIGH_SETTLE; a last frame (dropped silently)
moves the capture clock past them.

Output, beside this file: `config.batch` (accepted by `ip -batch` and `fibre -batch`),
`input/LINK.pcap` (pcap, Ethernet) and `cases.json` (per case: name, group, link, and the
capture times of its frames, which is how outputs are attributed to cases).

The generator is deterministic: no randomness, fixed MAC addresses and times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pcapio  # noqa: E402

# Capture time of the first case (2023-11-14T22:13:20Z): any fixed time works.
T0 = 1_700_000_000.0
# Between cases: far more than the kernel needs to answer a frame (well under a millisecond on
# veth), and more than the kernel's global ICMP limiter needs to refill (it adds credit only
# after 20 ms: icmp_global_allow).
CASE_GAP = 0.1
# Between the frames of a burst: far less than the per-destination ICMP interval, so the burst
# meets the limiter with only its initial tokens.
BURST_GAP = 0.001
# After the unresolved-neighbour cases: the kernel sends 3 probes 1 s apart (mcast_solicit 3,
# retrans_time 1000 ms), fails the entry after the third and reports each queued packet.
NEIGH_SETTLE = 5.0

ROUTER_MAC = {"a0": "02:00:00:00:00:0a", "b0": "02:00:00:00:00:0b", "c0": "02:00:00:00:00:0c",
              "d0": "02:00:00:00:00:0d"}
# The one host (neighbour, next hop) on each link, and a second host on a (redirect target).
HOST_MAC = {"a0": "02:00:00:00:a0:02", "b0": "02:00:00:00:b0:02", "c0": "02:00:00:00:c0:02",
            "d0": "02:00:00:00:d0:02"}
HOST_A3_MAC = "02:00:00:00:a0:03"
OTHER_MAC = "02:00:00:00:ee:ee"
# A host that answers the router's ARP and NDP probes (on c0 and d0).
HOST_B_MAC = "02:00:00:00:bb:bb"

CONFIG = """\
link set lo up
link add a0 type dummy
link set a0 address 02:00:00:00:00:0a
link set a0 arp on
link set a0 up
link add b0 type dummy
link set b0 address 02:00:00:00:00:0b
link set b0 arp on
link set b0 up
link add c0 type dummy
link set c0 address 02:00:00:00:00:0c
link set c0 arp on
link set c0 mtu 1280
link set c0 up
link add d0 type dummy
link set d0 address 02:00:00:00:00:0d
link set d0 arp on
link set d0 up
addr add 192.0.2.1/24 dev a0
addr add 2001:db8:a::1/64 dev a0
addr add 10.1.0.1/24 dev b0
addr add 2001:db8:b::1/64 dev b0
addr add 10.2.0.1/24 dev c0
addr add 2001:db8:c::1/64 dev c0
addr add 10.3.0.1/24 dev d0
addr add 2001:db8:d::1/64 dev d0
neigh add 192.0.2.2 lladdr 02:00:00:00:a0:02 dev a0 nud permanent
neigh add 2001:db8:a::2 lladdr 02:00:00:00:a0:02 dev a0 nud permanent
neigh add 192.0.2.3 lladdr 02:00:00:00:a0:03 dev a0 nud permanent
neigh add fe80::a03 lladdr 02:00:00:00:a0:03 dev a0 nud permanent
neigh add fe80::2 lladdr 02:00:00:00:a0:02 dev a0 nud permanent
neigh add 10.1.0.2 lladdr 02:00:00:00:b0:02 dev b0 nud permanent
neigh add 2001:db8:b::2 lladdr 02:00:00:00:b0:02 dev b0 nud permanent
neigh add 10.2.0.2 lladdr 02:00:00:00:c0:02 dev c0 nud permanent
neigh add 2001:db8:c::2 lladdr 02:00:00:00:c0:02 dev c0 nud permanent
neigh add 10.3.0.2 lladdr 02:00:00:00:d0:02 dev d0 nud permanent
neigh add 2001:db8:d::2 lladdr 02:00:00:00:d0:02 dev d0 nud permanent
route add 198.51.100.0/24 via 192.0.2.2 dev a0
route add 2001:db8:5100::/48 via 2001:db8:a::2 dev a0
route add 198.51.101.0/24 via 10.3.0.2 dev d0
route add 203.0.113.0/24 via 10.1.0.2 dev b0
route add 2001:db8:2030::/48 via 2001:db8:b::2 dev b0
route add 100.65.0.0/16 via 10.2.0.2 dev c0
route add 2001:db8:c100::/48 via 2001:db8:c::2 dev c0
route add 2001:db8:77::/64 via fe80::a03 dev a0
route add 100.64.0.0/16 nexthop via 10.1.0.2 dev b0 nexthop via 10.3.0.2 dev d0
route add 2001:db8:6400::/48 nexthop via 2001:db8:b::2 dev b0 nexthop via 2001:db8:d::2 dev d0
route add unreachable 198.18.1.0/24
route add prohibit 198.18.2.0/24
route add blackhole 198.18.3.0/24
route add throw 198.18.5.0/24
route add unreachable 2001:db8:ff01::/48
route add prohibit 2001:db8:ff02::/48
route add blackhole 2001:db8:ff03::/48
route add 203.0.113.0/24 via 10.2.0.2 dev c0 table 100
route add 203.0.113.0/24 via 10.3.0.2 dev d0 table 101
rule add from 198.51.100.128/25 lookup 100
rule add to 198.18.10.0/24 prohibit
rule add to 198.18.11.0/24 unreachable
rule add to 198.18.12.0/24 blackhole
rule add tos 0x10 lookup 101
rule add ipproto udp dport 5000 lookup 101
sysctl -q -w net.ipv4.conf.d0.rp_filter=1
sysctl -q -w net.ipv4.fib_multipath_hash_seed=1
"""

# The router's own addresses: packets with one of these as IPv4 source are the router's own
# (their ID and header checksum are masked in the comparison).
ROUTER_V4 = ["192.0.2.1", "10.1.0.1", "10.2.0.1", "10.3.0.1"]


def _scapy():
    # scapy is imported on demand: the comparison and the pytest file run without it.
    import scapy.all as s  # noqa: PLC0415

    s.conf.verb = 0
    return s


class Cases:
    """Collects frames per input link with capture times, and the case each belongs to."""

    def __init__(self) -> None:
        self.t = T0
        self.frames: dict[str, list[tuple[float, bytes]]] = {k: [] for k in ROUTER_MAC}
        self.cases: list[dict] = []
        self._src = 0
        self._src6 = 0

    def src(self) -> str:
        """A fresh source address behind a (198.51.100.1-127: rule `from .128/25` is apart)."""
        self._src += 1
        assert self._src < 128, "out of sources"
        return f"198.51.100.{self._src}"

    def src6(self) -> str:
        self._src6 += 1
        return f"2001:db8:5100::{self._src6:x}"

    def add(self, group: str, name: str, frames, link: str = "a0", gap: float = BURST_GAP) -> None:
        """A case: `frames` (one, or a list `gap` apart) on `link`; a list item `(LINK, frame)`
        comes in on LINK instead."""
        if not isinstance(frames, list):
            frames = [frames]
        times = []
        for i, f in enumerate(frames):
            on, f = f if isinstance(f, tuple) else (link, f)
            ts = round(self.t + i * gap, 6)
            self.frames[on].append((ts, bytes(f)))
            times.append(ts)
        assert all((c["group"], c["name"]) != (group, name) for c in self.cases), f"two cases {group}: {name}"
        self.cases.append({"group": group, "name": name, "link": link, "times": times})
        self.t = round(times[-1] + CASE_GAP, 6)

    def wait(self, seconds: float) -> None:
        self.t = round(self.t + seconds, 6)


def build() -> tuple[str, dict[str, list[tuple[float, bytes]]], list[dict]]:
    s = _scapy()
    c = Cases()

    def eth(link="a0", dst=None, src=None, t=None):
        e = s.Ether(dst=dst or ROUTER_MAC[link], src=src or HOST_MAC[link])
        if t is not None:
            e.type = t
        return e

    def v4(link="a0", edst=None, **ip):
        return eth(link, dst=edst) / s.IP(**ip)

    def v6(link="a0", edst=None, **ip):
        return eth(link, dst=edst) / s.IPv6(**ip)

    def udp(n=8, sport=1024, dport=7):
        return s.UDP(sport=sport, dport=dport) / (b"\x5a" * n)

    def raw(pkt, mutate):
        b = bytearray(bytes(pkt))
        mutate(b)
        return bytes(b)

    far, far6 = "203.0.113.10", "2001:db8:2030::10"

    # --- IPv4 forwarding and TTL -------------------------------------------------------
    c.add("forward", "udp ttl 64 forwarded to b", v4(src=c.src(), dst=far, ttl=64, id=1) / udp())
    c.add("forward", "tcp syn forwarded", v4(src=c.src(), dst=far, id=2) / s.TCP(sport=1000, dport=80, flags="S"))
    c.add("forward", "echo request forwarded", v4(src=c.src(), dst=far, id=3) / s.ICMP(id=7, seq=1) / b"ping")
    c.add("forward", "tos and ecn kept", v4(src=c.src(), dst=far, tos=0x2B, id=4) / udp())
    c.add("forward", "ttl 2 forwarded with ttl 1", v4(src=c.src(), dst=far, ttl=2, id=5) / udp())
    c.add("ttl", "ttl 1: time exceeded", v4(src=c.src(), dst=far, ttl=1, id=6) / udp())
    c.add("ttl", "ttl 0: time exceeded", v4(src=c.src(), dst=far, ttl=0, id=7) / udp())
    c.add("ttl", "ttl 1 with 1000 bytes: quote cut at 576", v4(src=c.src(), dst=far, ttl=1, id=8) / udp(1000))
    c.add("ttl", "ttl 1 for the router itself: echo reply", v4(src=c.src(), dst="192.0.2.1", ttl=1, id=9) / s.ICMP(id=7, seq=2) / b"ttl1")
    c.add("ttl", "ttl 1 on an icmp error: no error about an error",
          v4(src=c.src(), dst=far, ttl=1, id=10) / s.ICMP(type=3, code=1) / s.IP(src=far, dst="198.51.100.200") / udp())
    c.add("ttl", "ttl 1 on a non-first fragment: no error",
          v4(src=c.src(), dst=far, ttl=1, id=11, frag=100) / (b"\x11" * 16))
    c.add("ttl", "ttl 1 with DF and over the MTU: time exceeded first",
          v4(src=c.src(), dst="100.65.0.10", ttl=1, flags="DF", id=12) / udp(1400))

    # --- receive checks ----------------------------------------------------------------
    good = v4(src=c.src(), dst=far, id=20) / udp()
    c.add("rx", "bad header checksum", raw(good, lambda b: b.__setitem__(24, b[24] ^ 0xFF)))
    c.add("rx", "ihl 4", raw(good, lambda b: b.__setitem__(14, 0x44)))
    c.add("rx", "version 5", raw(good, lambda b: b.__setitem__(14, 0x55)))
    c.add("rx", "total length beyond the frame", v4(src=c.src(), dst=far, id=21, len=200) / udp())
    c.add("rx", "total length below the header", v4(src=c.src(), dst=far, id=22, len=16) / udp())
    c.add("rx", "frame shorter than a header", bytes(eth(t=0x0800)) + bytes(s.IP(src="198.51.100.1", dst=far))[:12])
    c.add("rx", "trailing bytes trimmed", v4(src=c.src(), dst=far, id=23) / udp() / s.Padding(b"\xee" * 20))
    c.add("rx", "frame for another host's MAC", v4(edst=OTHER_MAC, src=c.src(), dst=far, id=24) / udp())
    c.add("rx", "unicast packet in a broadcast frame", v4(edst="ff:ff:ff:ff:ff:ff", src=c.src(), dst=far, id=25) / udp())
    c.add("rx", "unicast packet in a multicast frame", v4(edst="01:00:5e:00:00:09", src=c.src(), dst=far, id=26) / udp())

    # --- martians ------------------------------------------------------------------------
    for name, src, dst in [
        ("source loopback", "127.0.0.1", far),
        ("source 0.0.0.0", "0.0.0.0", far),
        ("source in 0.0.0.0/8", "0.1.2.3", far),
        ("source multicast", "224.0.0.5", far),
        ("source limited broadcast", "255.255.255.255", far),
        ("source the subnet broadcast", "192.0.2.255", far),
        ("source the router's own address", "192.0.2.1", far),
        ("destination loopback", "198.51.100.30", "127.0.0.1"),
        ("destination 0.0.0.0", "198.51.100.31", "0.0.0.0"),
    ]:
        c.add("martian", name, v4(src=src, dst=dst, id=30) / udp())
    c.add("martian", "destination class E: no route", v4(src=c.src(), dst="240.0.0.1", id=31) / udp())

    # --- broadcast and multicast destinations -------------------------------------------
    bcast = "ff:ff:ff:ff:ff:ff"
    c.add("broadcast", "udp to the subnet broadcast", v4(edst=bcast, src="192.0.2.2", dst="192.0.2.255", id=40) / udp(dport=9))
    c.add("broadcast", "udp to 255.255.255.255", v4(edst=bcast, src="192.0.2.2", dst="255.255.255.255", id=41) / udp(dport=9))
    c.add("broadcast", "echo to the subnet broadcast: ignored", v4(edst=bcast, src="192.0.2.2", dst="192.0.2.255", id=42) / s.ICMP(id=7, seq=3))
    c.add("broadcast", "udp to b's broadcast arriving on a", v4(src=c.src(), dst="10.1.0.255", id=43) / udp(dport=9))
    c.add("broadcast", "udp to a multicast group", v4(edst="01:00:5e:00:00:fb", src="192.0.2.2", dst="224.0.0.251", ttl=1, id=44) / udp(dport=5353))
    c.add("broadcast", "echo to 224.0.0.1: ignored", v4(edst="01:00:5e:00:00:01", src="192.0.2.2", dst="224.0.0.1", ttl=1, id=45) / s.ICMP(id=7, seq=4))

    # --- the router's own addresses ------------------------------------------------------
    c.add("local", "echo to a's address", v4(src=c.src(), dst="192.0.2.1", id=50) / s.ICMP(id=9, seq=1) / b"hello")
    c.add("local", "echo to b's address from a", v4(src=c.src(), dst="10.1.0.1", id=51) / s.ICMP(id=9, seq=2) / b"hello")
    c.add("local", "echo with 1000 bytes", v4(src=c.src(), dst="192.0.2.1", id=52) / s.ICMP(id=9, seq=3) / (b"\x61" * 1000))
    c.add("local", "echo with options (RR)",
          v4(src=c.src(), dst="192.0.2.1", id=53, options=[s.IPOption(b"\x07\x0b\x04" + b"\0" * 8), s.IPOption(b"\x00")]) / s.ICMP(id=9, seq=4))
    frag_src = c.src()
    big_echo = s.IP(src=frag_src, dst="192.0.2.1", id=54) / s.ICMP(id=9, seq=5) / (b"\x62" * 200)
    c.add("local", "echo in two fragments: reassembled", [eth() / f for f in s.fragment(big_echo, fragsize=128)])
    c.add("local", "udp to a closed port: port unreachable", v4(src=c.src(), dst="192.0.2.1", id=55) / udp(dport=9))

    # --- routes --------------------------------------------------------------------------
    c.add("route", "no route: net unreachable", v4(src=c.src(), dst="192.168.99.1", id=60) / udp())
    c.add("route", "unreachable route: host unreachable", v4(src=c.src(), dst="198.18.1.1", id=61) / udp())
    c.add("route", "prohibit route: administratively prohibited", v4(src=c.src(), dst="198.18.2.1", id=62) / udp())
    c.add("route", "blackhole route: silence", v4(src=c.src(), dst="198.18.3.1", id=63) / udp())
    c.add("route", "throw route: net unreachable", v4(src=c.src(), dst="198.18.5.1", id=64) / udp())

    # --- rules ---------------------------------------------------------------------------
    c.add("rule", "from 198.51.100.128/25: table 100 sends it to c", v4(src="198.51.100.200", dst=far, id=70) / udp())
    c.add("rule", "rule prohibit", v4(src=c.src(), dst="198.18.10.1", id=71) / udp())
    c.add("rule", "rule unreachable", v4(src=c.src(), dst="198.18.11.1", id=72) / udp())
    c.add("rule", "rule blackhole", v4(src=c.src(), dst="198.18.12.1", id=73) / udp())
    c.add("rule", "tos 0x10: table 101 sends it to d", v4(src=c.src(), dst=far, tos=0x10, id=74) / udp())
    c.add("rule", "udp dport 5000: table 101 sends it to d", v4(src=c.src(), dst=far, id=75) / udp(dport=5000))
    c.add("rule", "tcp dport 5000: main table", v4(src=c.src(), dst=far, id=76) / s.TCP(sport=1000, dport=5000, flags="S"))

    # --- redirects and reverse path --------------------------------------------------------
    c.add("redirect", "out the link it came in on: forwarded and redirected",
          v4(src="192.0.2.2", dst="192.0.2.3", id=80) / udp())
    c.add("redirect", "source behind the host, not on-link: forwarded, no redirect",
          v4(src=c.src(), dst="192.0.2.3", id=83) / udp())
    c.add("rp_filter", "strict rp_filter on d, source routed via d: forwarded",
          v4("d0", src="198.51.101.5", dst=far, id=81) / udp(), link="d0")
    c.add("rp_filter", "strict rp_filter on d, source routed via a: dropped",
          v4("d0", src="198.51.100.77", dst=far, id=82) / udp(), link="d0")

    # --- MTU and fragmentation (c: MTU 1280) ------------------------------------------------
    mtu_dst = "100.65.0.10"
    c.add("mtu", "1400 bytes without DF: fragmented", v4(src=c.src(), dst=mtu_dst, id=90) / udp(1372))
    c.add("mtu", "1400 bytes with DF: fragmentation needed", v4(src=c.src(), dst=mtu_dst, flags="DF", id=91) / udp(1372))
    c.add("mtu", "1280 bytes with DF: forwarded", v4(src=c.src(), dst=mtu_dst, flags="DF", id=92) / udp(1252))
    c.add("mtu", "1281 bytes with DF: fragmentation needed", v4(src=c.src(), dst=mtu_dst, flags="DF", id=93) / udp(1253))
    c.add("mtu", "first fragment over the MTU: fragmented again",
          v4(src=c.src(), dst=mtu_dst, flags="MF", id=94) / udp(1400))
    c.add("mtu", "last fragment over the MTU: offsets kept",
          v4(src=c.src(), dst=mtu_dst, frag=200, id=95) / (b"\x33" * 1400))
    c.add("mtu", "small fragment: forwarded as it is",
          v4(src=c.src(), dst=mtu_dst, flags="MF", id=96) / udp(16))
    c.add("mtu", "options and fragmentation: RR only in the first",
          v4(src=c.src(), dst=mtu_dst, id=97, options=[s.IPOption(b"\x07\x0b\x04" + b"\0" * 8), s.IPOption(b"\x00")]) / udp(1372))
    c.add("mtu", "copied option (router alert) in every fragment",
          v4(src=c.src(), dst=mtu_dst, id=98, options=[s.IPOption(b"\x94\x04\x00\x00")]) / udp(1372))
    c.add("mtu", "1400 bytes to a 1500 link: forwarded", v4(src=c.src(), dst=far, flags="DF", id=99) / udp(1372))

    # --- IPv4 options when forwarding ------------------------------------------------------
    def opt(*chunks):
        return [s.IPOption(b) for b in chunks]

    c.add("options", "record route with room: the router's address written",
          v4(src=c.src(), dst=far, id=100, options=opt(b"\x07\x0b\x04" + b"\0" * 8, b"\x00")) / udp())
    c.add("options", "record route full: unchanged",
          v4(src=c.src(), dst=far, id=101, options=opt(b"\x07\x07\x08" + bytes([10, 9, 9, 9]), b"\x00")) / udp())
    c.add("options", "timestamp full: overflow counted",
          v4(src=c.src(), dst=far, id=102, options=opt(b"\x44\x08\x09\x00" + b"\0\0\0\x05")) / udp())
    c.add("options", "timestamp overflow at 15: parameter problem",
          v4(src=c.src(), dst=far, id=103, options=opt(b"\x44\x08\x09\xf0" + b"\0\0\0\x05")) / udp())
    c.add("options", "timestamp with a prespecified address not the router's: unchanged",
          v4(src=c.src(), dst=far, id=104, options=opt(b"\x44\x0c\x05\x03" + bytes([10, 9, 9, 9]) + b"\0\0\0\0")) / udp())
    c.add("options", "loose source route: dropped (accept_source_route 0)",
          v4(src=c.src(), dst=far, id=105, options=opt(b"\x83\x07\x04" + bytes([10, 9, 9, 9]), b"\x00")) / udp())
    c.add("options", "strict source route: dropped (accept_source_route 0)",
          v4(src=c.src(), dst=far, id=106, options=opt(b"\x89\x07\x04" + bytes([10, 9, 9, 9]), b"\x00")) / udp())
    c.add("options", "router alert: forwarded",
          v4(src=c.src(), dst=far, id=107, options=opt(b"\x94\x04\x00\x00")) / udp())
    c.add("options", "unknown option: ignored, forwarded",
          v4(src=c.src(), dst=far, id=108, options=opt(b"\x9e\x04\x00\x00")) / udp())
    c.add("options", "option length below its minimum: parameter problem",
          v4(src=c.src(), dst=far, id=109, options=opt(b"\x07\x02\x00\x00")) / udp())
    c.add("options", "option running past the header: parameter problem",
          v4(src=c.src(), dst=far, id=110, options=opt(b"\x01\x07\x0c\x04")) / udp())
    c.add("options", "nop and end padding: forwarded",
          v4(src=c.src(), dst=far, id=111, options=opt(b"\x01", b"\x01", b"\x01", b"\x00")) / udp())
    c.add("options", "ttl 1 with options: quoted with them",
          v4(src=c.src(), dst=far, ttl=1, id=112, options=opt(b"\x07\x0b\x04" + b"\0" * 8, b"\x00")) / udp())

    # --- multipath (hash policy 0: addresses only; the config sets the hash seed) ----------
    for i in range(16):
        c.add("ecmp", f"flow {i} over the two next hops",
              v4(src=f"198.51.100.{200 + i}" if i % 2 else c.src(), dst=f"100.64.{i}.{7 * i + 1}", id=120 + i) / udp(sport=2000 + i))
    for i in range(4):
        c.add("ecmp", f"ports do not move flow 0 (policy 0), port {i}",
              v4(src="198.51.100.201", dst="100.64.1.8", id=140 + i) / udp(sport=3000 + i, dport=4000 + i))

    # --- errors and replies for packets from another link: which address answers ------------
    c.add("source", "ttl 1 in on b0, sender behind a0: the error leaves a0",
          v4("b0", src=c.src(), dst="100.65.0.10", ttl=1, id=115) / udp(), link="b0")
    c.add("source", "ttl 1 in on b0, sender behind d0: the error leaves d0",
          v4("b0", src="198.51.101.6", dst="100.65.0.10", ttl=1, id=116) / udp(), link="b0")
    c.add("source", "no route, in on b0, sender behind d0",
          v4("b0", src="198.51.101.7", dst="192.168.99.2", id=117) / udp(), link="b0")
    c.add("source", "echo to a0's address in on b0, sender behind d0",
          v4("b0", src="198.51.101.8", dst="192.0.2.1", id=118) / s.ICMP(id=10, seq=1) / b"across", link="b0")
    c.add("source", "hop limit 1 in on b0, sender behind a0",
          v6("b0", src=c.src6(), dst="2001:db8:c100::10", hlim=1) / udp(), link="b0")
    c.add("source", "echo to a0's IPv6 address in on b0, sender behind a0",
          v6("b0", src=c.src6(), dst="2001:db8:a::1") / s.ICMPv6EchoRequest(id=10, seq=2, data=b"across"), link="b0")

    # --- ARP -----------------------------------------------------------------------------
    arp_req = eth(dst=bcast) / s.ARP(op=1, hwsrc=HOST_MAC["a0"], psrc="192.0.2.2", hwdst="00:00:00:00:00:00", pdst="192.0.2.1")
    c.add("arp", "request for a's address: reply", arp_req)
    c.add("arp", "request for b's address on a: reply (arp_ignore 0)",
          eth(dst=bcast) / s.ARP(op=1, hwsrc=HOST_MAC["a0"], psrc="192.0.2.2", pdst="10.1.0.1"))
    c.add("arp", "request for another host: silence",
          eth(dst=bcast) / s.ARP(op=1, hwsrc=HOST_MAC["a0"], psrc="192.0.2.2", pdst="192.0.2.77"))
    c.add("arp", "unsolicited reply: silence",
          eth() / s.ARP(op=2, hwsrc=HOST_MAC["a0"], psrc="192.0.2.2", hwdst=ROUTER_MAC["a0"], pdst="192.0.2.1"))
    c.add("arp", "gratuitous request from a permanent neighbour: silence",
          eth(dst=bcast) / s.ARP(op=1, hwsrc=HOST_MAC["a0"], psrc="192.0.2.2", pdst="192.0.2.2"))

    # --- IPv6 forwarding and hop limit ----------------------------------------------------------
    c.add("forward6", "udp hop limit 64 forwarded to b", v6(src=c.src6(), dst=far6) / udp())
    c.add("forward6", "traffic class and flow label kept", v6(src=c.src6(), dst=far6, tc=0x2B, fl=0x12345) / udp())
    c.add("forward6", "echo request forwarded", v6(src=c.src6(), dst=far6) / s.ICMPv6EchoRequest(id=7, seq=1, data=b"ping"))
    c.add("forward6", "hop limit 2 forwarded with 1", v6(src=c.src6(), dst=far6, hlim=2) / udp())
    c.add("hoplimit", "hop limit 1: time exceeded", v6(src=c.src6(), dst=far6, hlim=1) / udp())
    c.add("hoplimit", "hop limit 0: time exceeded", v6(src=c.src6(), dst=far6, hlim=0) / udp())
    c.add("hoplimit", "hop limit 1 with 1400 bytes: quote cut at 1280", v6(src=c.src6(), dst=far6, hlim=1) / udp(1400))
    c.add("hoplimit", "hop limit 1 for the router itself: echo reply",
          v6(src=c.src6(), dst="2001:db8:a::1", hlim=1) / s.ICMPv6EchoRequest(id=7, seq=2, data=b"hl1"))
    c.add("hoplimit", "hop limit 1 on an icmpv6 error: no error about an error",
          v6(src=c.src6(), dst=far6, hlim=1) / s.ICMPv6DestUnreach(code=3) / s.IPv6(src=far6, dst="2001:db8:5100::ffff") / udp())
    c.add("hoplimit", "hop limit 1 and over the MTU: time exceeded first",
          v6(src=c.src6(), dst="2001:db8:c100::10", hlim=1) / udp(1400))

    for i in range(12):
        c.add("ecmp6", f"flow {i} over the two next hops",
              v6(src=f"2001:db8:5100::{0x100 + i:x}", dst=f"2001:db8:6400::{7 * i + 1:x}") / udp(sport=2000 + i))
    c.add("ecmp6", "flow 0 with a flow label (policy 0 hashes it)",
          v6(src="2001:db8:5100::100", dst="2001:db8:6400::1", fl=0xABCDE) / udp(sport=2000))

    # --- IPv6 receive checks and martians --------------------------------------------------------
    good6 = v6(src=c.src6(), dst=far6) / udp()
    c.add("rx6", "version 4 in an IPv6 frame", raw(good6, lambda b: b.__setitem__(14, 0x40 | (b[14] & 0x0F))))
    c.add("rx6", "payload length beyond the frame", v6(src=c.src6(), dst=far6, plen=200) / udp())
    c.add("rx6", "trailing bytes trimmed", v6(src=c.src6(), dst=far6) / udp() / s.Padding(b"\xee" * 20))
    c.add("rx6", "frame shorter than a header", bytes(eth(t=0x86DD)) + bytes(s.IPv6(src="2001:db8:5100::1", dst=far6))[:30])
    c.add("rx6", "frame for another host's MAC", v6(edst=OTHER_MAC, src=c.src6(), dst=far6) / udp())
    for name, src, dst in [
        ("source loopback", "::1", far6),
        ("source multicast", "ff02::1", far6),
        ("destination loopback", "2001:db8:5100::f1", "::1"),
        ("source unspecified", "::", far6),
        ("source link-local to a global destination", "fe80::2", far6),
        ("destination site-local multicast: not routed", "2001:db8:5100::f3", "ff05::1:3"),
        ("source v4-mapped", "::ffff:198.51.100.1", far6),
    ]:
        e = "33:33:00:01:00:03" if dst.startswith("ff") else None
        c.add("martian6", name, v6(edst=e, src=src, dst=dst) / udp())

    # --- IPv6 extension headers --------------------------------------------------------------
    c.add("ext6", "hop-by-hop padding: forwarded",
          v6(src=c.src6(), dst=far6) / s.IPv6ExtHdrHopByHop(options=[s.PadN(optdata=b"\0\0\0\0")]) / udp())
    c.add("ext6", "hop-by-hop router alert: forwarded",
          v6(src=c.src6(), dst=far6) / s.IPv6ExtHdrHopByHop(options=[s.RouterAlert(value=0), s.PadN(optdata=b"")]) / udp())
    for action, what in [(0x00, "skipped, forwarded"), (0x40, "discarded silently"),
                         (0x80, "parameter problem"), (0xC0, "parameter problem (unicast)")]:
        c.add("ext6", f"hop-by-hop unknown option {action >> 6:02b}: {what}",
              v6(src=c.src6(), dst=far6) / s.IPv6ExtHdrHopByHop(options=[s.HBHOptUnknown(otype=action | 0x1E, optdata=b"\0\0\0\0")]) / udp())
    c.add("ext6", "destination options: forwarded untouched",
          v6(src=c.src6(), dst=far6) / s.IPv6ExtHdrDestOpt(options=[s.HBHOptUnknown(otype=0x9E, optdata=b"\0\0\0\0")]) / udp())
    c.add("ext6", "routing header type 0 through the router: forwarded",
          v6(src=c.src6(), dst=far6) / s.IPv6ExtHdrRouting(type=0, segleft=1, addresses=["2001:db8:2030::11"]) / udp())
    c.add("ext6", "routing header type 0 at the router, segments left: parameter problem",
          v6(src=c.src6(), dst="2001:db8:a::1") / s.IPv6ExtHdrRouting(type=0, segleft=1, addresses=[far6]) / udp())
    c.add("ext6", "routing header, no segments left, echo to the router: reply",
          v6(src=c.src6(), dst="2001:db8:a::1") / s.IPv6ExtHdrRouting(type=0, segleft=0, addresses=[far6]) / s.ICMPv6EchoRequest(id=8, seq=1))
    c.add("ext6", "hop-by-hop after another header at the router: parameter problem",
          v6(src=c.src6(), dst="2001:db8:a::1") / s.IPv6ExtHdrDestOpt() / s.IPv6ExtHdrHopByHop() / s.ICMPv6EchoRequest(id=8, seq=2))
    c.add("ext6", "atomic fragment: forwarded",
          v6(src=c.src6(), dst=far6) / s.IPv6ExtHdrFragment(id=0x1234, offset=0, m=0) / udp())
    c.add("ext6", "first fragment: forwarded",
          v6(src=c.src6(), dst=far6) / s.IPv6ExtHdrFragment(id=0x1235, offset=0, m=1) / udp(64))
    c.add("ext6", "fragment over the MTU: packet too big",
          v6(src=c.src6(), dst="2001:db8:c100::10") / s.IPv6ExtHdrFragment(id=0x1236, offset=0, m=1) / udp(1400))

    # --- IPv6 MTU (c: 1280) -------------------------------------------------------------------
    c.add("mtu6", "1400 bytes: packet too big", v6(src=c.src6(), dst="2001:db8:c100::10") / udp(1352))
    c.add("mtu6", "1280 bytes: forwarded", v6(src=c.src6(), dst="2001:db8:c100::10") / udp(1232))
    c.add("mtu6", "1281 bytes: packet too big", v6(src=c.src6(), dst="2001:db8:c100::10") / udp(1233))

    # --- IPv6 routes and redirect (in one batch file a rule's family comes from `ip -6` only,
    # so the file has no IPv6 rules) -------------------------------------------------------------
    c.add("route6", "no route: no route to destination", v6(src=c.src6(), dst="2001:db8:9999::1") / udp())
    c.add("route6", "unreachable route", v6(src=c.src6(), dst="2001:db8:ff01::1") / udp())
    c.add("route6", "prohibit route", v6(src=c.src6(), dst="2001:db8:ff02::1") / udp())
    c.add("route6", "blackhole route: silence", v6(src=c.src6(), dst="2001:db8:ff03::1") / udp())
    c.add("redirect6", "out the link it came in on: forwarded and redirected",
          v6(src="2001:db8:a::2", dst="2001:db8:77::5") / udp())
    c.add("redirect6", "source behind the host, not a neighbour: forwarded, no redirect",
          v6(src=c.src6(), dst="2001:db8:77::6") / udp())

    # --- the router's own IPv6 addresses -----------------------------------------------------------
    c.add("local6", "echo to a's address", v6(src=c.src6(), dst="2001:db8:a::1") / s.ICMPv6EchoRequest(id=9, seq=1, data=b"hello"))
    c.add("local6", "echo to b's address from a", v6(src=c.src6(), dst="2001:db8:b::1") / s.ICMPv6EchoRequest(id=9, seq=2, data=b"hello"))
    c.add("local6", "echo to the router's link-local address",
          v6(src="fe80::2", dst="fe80::ff:fe00:a") / s.ICMPv6EchoRequest(id=9, seq=3, data=b"hello"))
    c.add("local6", "echo to all nodes (ff02::1): reply",
          v6(edst="33:33:00:00:00:01", src="fe80::2", dst="ff02::1") / s.ICMPv6EchoRequest(id=9, seq=4, data=b"hello"))
    c.add("local6", "echo to the subnet-router anycast address",
          v6(src=c.src6(), dst="2001:db8:a::") / s.ICMPv6EchoRequest(id=9, seq=5, data=b"hello"))
    c.add("local6", "udp to a closed port: port unreachable", v6(src=c.src6(), dst="2001:db8:a::1") / udp(dport=9))

    # --- NDP -----------------------------------------------------------------------------------------
    def ns(target, src, hlim=255):
        snm = s.in6_getnsma(s.inet_pton(s.socket.AF_INET6, target))
        dst = s.inet_ntop(s.socket.AF_INET6, snm)
        return (v6(edst=s.in6_getnsmac(snm), src=src, dst=dst, hlim=hlim)
                / s.ICMPv6ND_NS(tgt=target) / s.ICMPv6NDOptSrcLLAddr(lladdr=HOST_MAC["a0"]))

    c.add("ndp", "solicitation for a's address: advertisement", ns("2001:db8:a::1", "2001:db8:a::2"))
    c.add("ndp", "solicitation for the link-local address: advertisement", ns("fe80::ff:fe00:a", "fe80::2"))
    c.add("ndp", "solicitation for b's address on a: silence", ns("2001:db8:b::1", "2001:db8:a::2"))
    c.add("ndp", "solicitation with hop limit 64: dropped", ns("2001:db8:a::1", "2001:db8:a::2", hlim=64))

    # --- ICMP rate limits (one source, back to back) -------------------------------------------------
    burst = c.src()
    c.add("ratelimit", "8 ttl-expired packets from one source: the first 6 answered",
          [v4(src=burst, dst=far, ttl=1, id=150 + i) / udp() for i in range(8)])
    burst6 = c.src6()
    c.add("ratelimit", "8 hop-limit-expired packets from one source: the first 6 answered",
          [v6(src=burst6, dst=far6, hlim=1) / udp(sport=1024 + i) for i in range(8)])

    # --- next hops resolved by a reply: the queued packet goes, and the next one at once ---------
    # (the entry stays REACHABLE for at least 15 s, beyond the end of the run)
    reply_gap = 0.01
    c.add("resolve", "next hop without an entry, then an ARP reply: queued packet sent", [
        v4(src=c.src(), dst="10.2.0.98", id=161) / udp(),
        ("c0", eth("c0", src=HOST_B_MAC) / s.ARP(op=2, hwsrc=HOST_B_MAC, psrc="10.2.0.98",
                                                hwdst=ROUTER_MAC["c0"], pdst="10.2.0.1")),
        v4(src=c.src(), dst="10.2.0.98", id=162) / udp(),
    ], gap=reply_gap)
    c.add("resolve6", "next hop without an entry, then an advertisement: queued packet sent", [
        v6(src=c.src6(), dst="2001:db8:d::98") / udp(),
        ("d0", v6("d0", src="2001:db8:d::98", dst="2001:db8:d::1", hlim=255)
         / s.ICMPv6ND_NA(tgt="2001:db8:d::98", R=0, S=1, O=1) / s.ICMPv6NDOptDstLLAddr(lladdr=HOST_B_MAC)),
        v6(src=c.src6(), dst="2001:db8:d::98") / udp(sport=1025),
    ], gap=reply_gap)

    # --- unresolved neighbours (last: their timers run for seconds) ------------------------------
    c.add("neigh", "next hop without a neighbour entry: probes, then host unreachable",
          v4(src=c.src(), dst="10.2.0.99", id=160) / udp())
    c.add("neigh6", "next hop without a neighbour entry: solicitations, then address unreachable",
          v6(src=c.src6(), dst="2001:db8:d::99") / udp())
    c.add("neigh6", "link-local destination without a neighbour entry: solicitations, then address unreachable",
          v6(src=c.src6(), dst="fe80::99") / udp())
    c.wait(NEIGH_SETTLE)
    c.add("clock", "a dropped frame that moves the capture clock past the neighbour timers",
          raw(v4(src="198.51.100.1", dst=far, id=170) / udp(), lambda b: b.__setitem__(24, b[24] ^ 0xFF)))

    return CONFIG, c.frames, c.cases


def write(outdir: str) -> None:
    config, frames, cases = build()
    os.makedirs(os.path.join(outdir, "input"), exist_ok=True)
    with open(os.path.join(outdir, "config.batch"), "w") as f:
        f.write(config)
    for link, fr in frames.items():
        if fr:
            pcapio.write(os.path.join(outdir, "input", link + ".pcap"), fr)
    with open(os.path.join(outdir, "cases.json"), "w") as f:
        json.dump({"router_v4": ROUTER_V4, "cases": cases}, f, indent=1)
        f.write("\n")


def differences(a: str, b: str) -> list[str]:
    """The generated files that differ between directories a and b."""
    names = ["config.batch", "cases.json"] + [os.path.join("input", n) for n in sorted(
        set(os.listdir(os.path.join(a, "input"))) | set(os.listdir(os.path.join(b, "input"))))]
    out = []
    for n in names:
        pa, pb = os.path.join(a, n), os.path.join(b, n)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            out.append(n)
            continue
        with open(pa, "rb") as fa, open(pb, "rb") as fb:
            if fa.read() != fb.read():
                out.append(n)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    a = ap.parse_args()
    if not a.check:
        write(HERE)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        write(tmp)
        diff = differences(HERE, tmp)
    for n in diff:
        print(f"differs from the generator: {n}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
