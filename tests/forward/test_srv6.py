"""SRv6 and IOAM on the forwarding path, fibre forward against the kernel, frame for frame.

The router of `srv6.batch` (the four links of the forwarding differential, `ip sr tunsrc`
pinned) has a seg6 route for every mode the kernel accepts (encap, encap.red, inline, l2encap,
l2encap.red; IPv4 and IPv6 payloads) and a seg6local SID for End (plain, with PSP and with
NEXT-C-SID), End.X (plain and with NEXT-C-SID), End.T, End.DX4, End.DX6, End.DT6, End.B6 and
End.B6.Encaps. The cases below (built with
scapy) go through the kernel as a router in a namespace (fwdkernel.run: veth, offloads off,
the flow label of originated packets 0, `net.ipv6.seg6_flowlabel` at its default 0, so an
IPv6 payload lends its flow label to the outer header and an IPv4 one gives 0) and through
`fibre forward`; what each link sends is compared byte for byte, per case. Malformed SRHs
(segments left beyond the list, segments left 0 at an End, a header length the list does not
fit) must be dropped by both, silently. IOAM pre-allocated traces (the kernel's transit node,
`ioam6_enabled` on a0, node and interface ids and namespaces set) are filled in as the kernel
fills them, with the fields whose values do not depend on the clock. SRH HMACs (RFC 8754
2.1.2; `ip sr hmac` keys 7, HMAC-SHA-256, and 9, HMAC-SHA-1, set in both): encapsulations,
insertions and End.B6 behaviours fill the HMAC TLV as the kernel does (seg6_push_hmac; an
unknown key id drops the packet), and SRHs received on c0 (`seg6_require_hmac` 1) or b0 (0,
check when present) are checked as seg6_hmac_validate_skb checks them.

Needs scapy, root and network namespaces (skips without them) and the fibre binary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "differential"))
import fwdgen  # noqa: E402
import fwdkernel  # noqa: E402
import kernelns  # noqa: E402
import pcapio  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
FIBRE = os.environ.get("FIBRE", os.path.join(REPO, "target", "release", "fibre"))
CONFIG = os.path.join(HERE, "srv6.batch")

# The first case's capture time and the gap between cases (as fwdgen's: far more than either
# router needs to answer a frame).
T0 = 1_700_000_000.0
GAP = 0.1

SRC6 = "2001:db8:5100::7"
SRC4 = "198.51.100.7"

# The seg6 routes of srv6.batch by mode and destination.
ENCAP6 = {
    "encap": "2001:db8:e1::5",
    "encap.red": "2001:db8:e2::5",
    "encap.red one segment": "2001:db8:e3::5",
    "inline": "2001:db8:e4::5",
    "l2encap": "2001:db8:e5::5",
    "l2encap.red": "2001:db8:e6::5",
}
ENCAP4 = {
    "encap": "203.0.113.1",
    "encap.red": "203.0.113.2",
    "l2encap": "203.0.113.5",
    "l2encap.red": "203.0.113.6",
}
# The inner destination behind the End SIDs, reached through table 100 or main.
BEHIND = "2001:db8:77::9"
SID = {
    "End": "2001:db8:f::1",
    "End.X": "2001:db8:f::2",
    "End.T": "2001:db8:f::3",
    "End.DX4": "2001:db8:f::4",
    "End.DX6": "2001:db8:f::5",
    "End.DT6": "2001:db8:f::6",
    "End.B6": "2001:db8:f::7",
    "End.B6.Encaps": "2001:db8:f::8",
    "End PSP": "2001:db8:f::9",
}


def _cases() -> list[tuple[str, bytes, str | None]]:
    """(case name, frame received on a0, the link the packet leaves by or None when it is
    dropped), in order."""
    s = pytest.importorskip("scapy.all", reason="the inputs are built with scapy")
    from scapy.layers.inet6 import IPv6ExtHdrSegmentRouting as SRH

    eth = s.Ether(dst=fwdgen.ROUTER_MAC["a0"], src=fwdgen.HOST_MAC["a0"])
    udp = s.UDP(sport=4000, dport=5000) / (b"fibre srv6 " * 4)
    out = []
    for mode, dst in ENCAP6.items():
        p = eth / s.IPv6(src=SRC6, dst=dst, hlim=64, tc=0x28, fl=0x12345) / udp
        out.append((f"seg6 {mode}, IPv6", bytes(p), "b0"))
    for mode, dst in ENCAP4.items():
        p = eth / s.IP(src=SRC4, dst=dst, ttl=64, tos=0x28, id=7) / udp
        out.append((f"seg6 {mode}, IPv4", bytes(p), "b0"))
    # Past b0's MTU once encapsulated: forwarding the outer packet finds it too big and tells
    # its source, the tunnel source (routed back through a0), whatever the payload's DF says.
    big = s.UDP(sport=4000, dport=5000) / (b"x" * 1420)
    out.append(("seg6 encap past the MTU, IPv6",
                bytes(eth / s.IPv6(src="2001:db8:5100::73", dst=ENCAP6["encap"], hlim=64) / big), "a0"))
    out.append(("seg6 encap past the MTU, IPv4 DF",
                bytes(eth / s.IP(src="198.51.100.73", dst=ENCAP4["encap"], flags="DF") / big), "a0"))
    out.append(("seg6 encap past the MTU, IPv4",
                bytes(eth / s.IP(src="198.51.100.74", dst=ENCAP4["encap"]) / big), "a0"))
    hl2 = eth / s.IPv6(src=SRC6, dst=ENCAP6["encap"], hlim=1) / udp
    # The outer header takes the hop limit; forwarding it then finds it spent and reports to
    # the tunnel source.
    out.append(("seg6 encap, inner hop limit 1", bytes(hl2), "a0"))

    def srv6(sid: str, segs: list[str], left: int, nh: int = 17, payload=None, **kw):
        srh = SRH(addresses=segs, segleft=left, lastentry=len(segs) - 1, nh=nh)
        for k, v in kw.items():
            setattr(srh, k, v)
        return eth / s.IPv6(src=SRC6, dst=sid, hlim=64, fl=0x54321) / srh / (payload if payload is not None else udp)

    # The SRH lists segments last first, scapy as given.
    # Table 100 reaches BEHIND through c0, main through d0.
    for name, link in (("End", "d0"), ("End.X", "c0"), ("End.T", "c0"), ("End.B6", "d0"),
                       ("End.B6.Encaps", "d0"), ("End PSP", "d0")):
        out.append((f"{name}", bytes(srv6(SID[name], [BEHIND, SID[name]], 1)), link))
    # The next segment is End.X's SID: the packet runs two behaviours.
    out.append(("End, two segments left", bytes(srv6(SID["End"], [BEHIND, SID["End.X"], SID["End"]], 2)), "c0"))
    inner6 = s.IPv6(src=SRC6, dst=BEHIND, hlim=50, fl=0x11111) / udp
    inner4 = s.IP(src=SRC4, dst="10.3.0.9", ttl=50, id=9) / udp
    out.append(("End.DX6", bytes(srv6(SID["End.DX6"], [SID["End.DX6"]], 0, nh=41, payload=inner6)), "c0"))
    out.append(("End.DT6", bytes(srv6(SID["End.DT6"], [SID["End.DT6"]], 0, nh=41, payload=inner6)), "c0"))
    # Looked up by nh4 (10.2.0.2, on c0), sent to the packet's own destination on that link.
    out.append(("End.DX4", bytes(srv6(SID["End.DX4"], [SID["End.DX4"]], 0, nh=4, payload=inner4)), "c0"))
    plain = eth / s.IPv6(src=SRC6, dst=SID["End.DT6"], hlim=64, nh=41) / inner6
    out.append(("End.DT6 without an SRH", bytes(plain), "c0"))
    # Malformed: dropped by the End behaviour (get_and_validate_srh).
    out.append(("End, segments left 0", bytes(srv6(SID["End"], [BEHIND, SID["End"]], 0)), None))
    out.append(("End, segments left beyond the list", bytes(srv6(SID["End"], [BEHIND, SID["End"]], 5)), None))
    out.append(("End, last entry beyond the header",
                bytes(srv6(SID["End"], [BEHIND, SID["End"]], 1, lastentry=4)), None))
    out.append(("End, no SRH", bytes(eth / s.IPv6(src=SRC6, dst=SID["End"], hlim=64) / udp), None))
    out.append(("End.DX6, segments left", bytes(srv6(SID["End.DX6"], [BEHIND, SID["End.DX6"]], 1, nh=41,
                                                     payload=inner6)), None))
    # NEXT-C-SID (lblen 32, nflen 16): an Argument left moves up into the Function; none left,
    # the SRH's next segment as for End.
    out.append(("End NEXT-C-SID, argument left",
                bytes(eth / s.IPv6(src=SRC6, dst="2001:db8:fa:77::", hlim=64) / udp), "d0"))
    out.append(("End NEXT-C-SID, argument left, SRH untouched",
                bytes(srv6("2001:db8:fa:77::", [BEHIND, "2001:db8:fa:77::"], 1)), "d0"))
    out.append(("End NEXT-C-SID, no argument", bytes(srv6("2001:db8:fa::", [BEHIND, "2001:db8:fa::"], 1)), "d0"))
    out.append(("End.X NEXT-C-SID, argument left",
                bytes(eth / s.IPv6(src=SRC6, dst="2001:db8:fc:77::", hlim=64) / udp), "c0"))
    # SRHs for the router's own addresses (ipv6_srh_rcv): srv6.batch enables seg6 on b0 (and
    # all), not on a0.
    out.append(("SRH for the router, seg6 disabled on the link",
                bytes(eth / s.IPv6(src=SRC6, dst="2001:db8:a::1", hlim=64)
                      / SRH(addresses=[BEHIND, "2001:db8:a::1"], segleft=1, lastentry=1, nh=17) / udp), None))
    eth_b = s.Ether(dst=fwdgen.ROUTER_MAC["b0"], src=fwdgen.HOST_MAC["b0"])

    def to_router(segs: list[str], left: int, src: str = SRC6, nh: int = 17, payload=None, **kw):
        srh = SRH(addresses=segs, segleft=left, lastentry=len(segs) - 1, nh=nh)
        for k, v in kw.items():
            setattr(srh, k, v)
        return bytes(eth_b / s.IPv6(src=src, dst=segs[left], hlim=64) / srh / (payload if payload is not None else udp))

    out.append(("SRH for the router, next segment", to_router([BEHIND, "2001:db8:b::1"], 1), "d0"))
    out.append(("SRH for the router, its own segment next",
                to_router([BEHIND, "2001:db8:d::1", "2001:db8:b::1"], 2), "d0"))
    # Answered from b0's address, back through a0.
    out.append(("SRH for the router, no segment left", to_router(["2001:db8:b::1"], 0, src="2001:db8:5100::71"), "a0"))
    out.append(("SRH for the router, no segment left, inner IPv6",
                to_router(["2001:db8:b::1"], 0, nh=41, payload=inner6), "d0"))
    out.append(("SRH for the router, segments left beyond the list",
                to_router([BEHIND, "2001:db8:b::1"], 1, src="2001:db8:5100::72", segleft=5), "a0"))
    out.extend(_ioam_cases(s, eth, eth_b, udp))
    out.extend(_hmac_cases(s, eth, eth_b, udp))
    return out


# The HMAC keys of srv6.batch.
HMAC_KEYS = {7: ("sha256", b"fibre-hmac-secret-7"), 9: ("sha1", b"abc")}


def _srh_hmac(src: str, segs: list[str], left: int, nh: int, key: int, good: bool = True) -> bytes:
    """An SRH listing `segs` (last segment first, as the header stores them) with an HMAC
    TLV of key `key` last: the HMAC of RFC 8754 2.1.2 as seg6_hmac_compute feeds it (source,
    Last Entry, flags, key id, segments), SHA-1's padded with zeros; `good` False flips a bit."""
    import hashlib
    import hmac
    import ipaddress

    flags = 0x08
    n = len(segs)
    packed = b"".join(ipaddress.IPv6Address(a).packed for a in segs)
    algo, secret = HMAC_KEYS.get(key, ("sha256", b"unknown"))
    msg = ipaddress.IPv6Address(src).packed + bytes([n - 1, flags]) + key.to_bytes(4, "big") + packed
    mac = hmac.new(secret, msg, getattr(hashlib, algo)).digest().ljust(32, b"\0")
    if not good:
        mac = bytes([mac[0] ^ 1]) + mac[1:]
    tlv = bytes([5, 38, 0, 0]) + key.to_bytes(4, "big") + mac
    return bytes([nh, 2 * n + 5, 4, left, n - 1, flags, 0, 0]) + packed + tlv


def _hmac_cases(s, eth, eth_b, udp) -> list[tuple[str, bytes, str | None]]:
    out = []
    for name, dst in (("encap, sha256", "2001:db8:e7::5"), ("inline, sha256", "2001:db8:e8::5"),
                      ("encap.red, sha1", "2001:db8:e9::5"), ("l2encap, sha1", "2001:db8:ea::5"),
                      ("encap.red one segment, sha256", "2001:db8:ec::5")):
        p = eth / s.IPv6(src=SRC6, dst=dst, hlim=64, tc=0x28, fl=0x12345) / udp
        out.append((f"seg6 {name} HMAC, IPv6", bytes(p), "b0"))
    out.append(("seg6 encap HMAC, unknown key",
                bytes(eth / s.IPv6(src=SRC6, dst="2001:db8:eb::5", hlim=64) / udp), None))
    # The kernel authenticates at most 14 segments (its 256-byte HMAC input buffer): 15 drop.
    out.append(("seg6 encap HMAC, 14 segments",
                bytes(eth / s.IPv6(src=SRC6, dst="2001:db8:ed::5", hlim=64) / udp), "b0"))
    out.append(("seg6 encap HMAC, 15 segments",
                bytes(eth / s.IPv6(src=SRC6, dst="2001:db8:ee::5", hlim=64) / udp), None))
    out.append(("seg6 encap sha1 HMAC, IPv4",
                bytes(eth / s.IP(src=SRC4, dst="203.0.113.7", ttl=64, id=7) / udp), "b0"))
    for name, sid in (("End.B6", "2001:db8:f::a"), ("End.B6.Encaps", "2001:db8:f::b")):
        srh = s.IPv6ExtHdrSegmentRouting(addresses=[BEHIND, sid], segleft=1, lastentry=1, nh=17)
        out.append((f"{name} with an HMAC SRH",
                    bytes(eth / s.IPv6(src=SRC6, dst=sid, hlim=64, fl=0x54321) / srh / udp), "d0"))

    def srh_pkt(e, dst: str, segs: list[str], left: int, key: int, good: bool = True, src: str = SRC6):
        raw = _srh_hmac(src, segs, left, 17, key, good)
        return bytes(e / s.IPv6(src=src, dst=dst, hlim=64, nh=43) / s.Raw(raw + bytes(udp)))

    eth_c = s.Ether(dst=fwdgen.ROUTER_MAC["c0"], src=fwdgen.HOST_MAC["c0"])
    c1 = "2001:db8:c::1"
    # c0 requires an HMAC (seg6_require_hmac 1): SRHs for the router's address and for End.
    out.append(("HMAC required, SRH for the router, good sha256",
                srh_pkt(eth_c, c1, [BEHIND, c1], 1, 7), "d0"))
    out.append(("HMAC required, SRH for the router, good sha1",
                srh_pkt(eth_c, c1, [BEHIND, c1], 1, 9), "d0"))
    out.append(("HMAC required, SRH for the router, bad", srh_pkt(eth_c, c1, [BEHIND, c1], 1, 7, good=False), None))
    out.append(("HMAC required, SRH for the router, unknown key", srh_pkt(eth_c, c1, [BEHIND, c1], 1, 8), None))
    out.append(("HMAC required, SRH for the router, none",
                bytes(eth_c / s.IPv6(src=SRC6, dst=c1, hlim=64)
                      / s.IPv6ExtHdrSegmentRouting(addresses=[BEHIND, c1], segleft=1, lastentry=1, nh=17) / udp), None))
    out.append(("HMAC required, End, good", srh_pkt(eth_c, SID["End"], [BEHIND, SID["End"]], 1, 7), "d0"))
    out.append(("HMAC required, End, bad", srh_pkt(eth_c, SID["End"], [BEHIND, SID["End"]], 1, 9, good=False), None))
    out.append(("HMAC required, End, none",
                bytes(eth_c / s.IPv6(src=SRC6, dst=SID["End"], hlim=64)
                      / s.IPv6ExtHdrSegmentRouting(addresses=[BEHIND, SID["End"]], segleft=1, lastentry=1, nh=17)
                      / udp), None))
    # b0 checks an HMAC when one is there (seg6_require_hmac 0).
    b1 = "2001:db8:b::1"
    out.append(("HMAC when present, SRH for the router, good", srh_pkt(eth_b, b1, [BEHIND, b1], 1, 9), "d0"))
    out.append(("HMAC when present, SRH for the router, bad",
                srh_pkt(eth_b, b1, [BEHIND, b1], 1, 9, good=False), None))
    out.append(("HMAC when present, End.DT6, good",
                bytes(eth_b / s.IPv6(src=SRC6, dst=SID["End.DT6"], hlim=64, nh=43)
                      / s.Raw(_srh_hmac(SRC6, [SID["End.DT6"]], 0, 41, 7)
                              + bytes(s.IPv6(src=SRC6, dst=BEHIND, hlim=50) / udp))), "c0"))
    out.append(("HMAC when present, End.DT6, bad",
                bytes(eth_b / s.IPv6(src=SRC6, dst=SID["End.DT6"], hlim=64, nh=43)
                      / s.Raw(_srh_hmac(SRC6, [SID["End.DT6"]], 0, 41, 7, good=False)
                              + bytes(s.IPv6(src=SRC6, dst=BEHIND, hlim=50) / udp))), None))
    return out


# IOAM trace types (bit 0 the most significant of 24): every field a node fills the same way
# each time (hop limit and node id, interface ids, namespace data, checksum complement, the
# wide ids and data, buffer occupancy), and the opaque state snapshot (bit 22). Timestamps and
# queue depth are left out: the kernel's are the clock's and its qdisc's.
IOAM_FIXED = 0x800000 | 0x400000 | 0x040000 | 0x010000 | 0x008000 | 0x004000 | 0x002000 | 0x001000
IOAM_FIXED_WORDS = 11


def _ioam_hbh(ns: int, ty: int, nodelen: int, rem: int, total: int, pad: int = 2, nh: int = 17) -> bytes:
    """A hop-by-hop header: PadN of `pad` bytes (2: the option 4-byte aligned), an IOAM
    pre-allocated trace (`total` words of data, `rem` free), padding to 8 bytes."""
    trace = ns.to_bytes(2, "big") + ((nodelen << 11) | rem).to_bytes(2, "big") + (ty << 8).to_bytes(4, "big")
    opt = bytes([0x31, 2 + 8 + 4 * total, 0, 0]) + trace + bytes(4 * total)
    body = (bytes([1, pad - 2]) + bytes(pad - 2) if pad >= 2 else bytes(pad)) + opt
    body += bytes([1, 0]) + bytes((-(len(body) + 4)) % 8) if (len(body) + 2) % 8 else b""
    hdr = bytes([nh, (2 + len(body)) // 8 - 1]) + body
    assert len(hdr) % 8 == 0, len(hdr)
    return hdr


def _ioam_cases(s, eth, eth_b, udp) -> list[tuple[str, bytes, str | None]]:
    def pkt(e, hbh: bytes, dst: str = BEHIND, src: str = SRC6):
        return bytes(e / s.IPv6(src=src, dst=dst, hlim=64) / s.IPv6ExtHdrHopByHop(hbh) / udp)

    two = IOAM_FIXED_WORDS * 2
    return [
        ("IOAM transit, namespace with data", pkt(eth, _ioam_hbh(123, IOAM_FIXED, IOAM_FIXED_WORDS, two, two)), "d0"),
        ("IOAM transit, namespace without data", pkt(eth, _ioam_hbh(124, IOAM_FIXED, IOAM_FIXED_WORDS, two, two)), "d0"),
        ("IOAM transit, second node",
         pkt(eth, _ioam_hbh(123, IOAM_FIXED, IOAM_FIXED_WORDS, IOAM_FIXED_WORDS, two)), "d0"),
        ("IOAM transit, opaque state without a schema", pkt(eth, _ioam_hbh(123, 0x800002, 1, 4, 4)), "d0"),
        ("IOAM transit, unknown namespace", pkt(eth, _ioam_hbh(999, IOAM_FIXED, IOAM_FIXED_WORDS, two, two)), "d0"),
        ("IOAM transit, no room (overflow)", pkt(eth, _ioam_hbh(123, IOAM_FIXED, IOAM_FIXED_WORDS, 3, 4)), "d0"),
        ("IOAM transit, link without IOAM",
         pkt(eth_b, _ioam_hbh(123, IOAM_FIXED, IOAM_FIXED_WORDS, two, two)), "d0"),
        ("IOAM, option not 4-byte aligned", pkt(eth, _ioam_hbh(123, 0x800000, 1, 2, 2, pad=0)), None),
        ("IOAM, remaining length beyond the option", pkt(eth, _ioam_hbh(123, 0x800000, 1, 9, 2)), None),
        # For the router: no output link (unavailable ids); UDP port unreachable quotes the trace.
        ("IOAM for the router", pkt(eth, _ioam_hbh(123, IOAM_FIXED, IOAM_FIXED_WORDS, two, two),
                                    dst="2001:db8:a::1", src="2001:db8:5100::75"), "a0"),
    ]


def _write_inputs(d: str, cases: list[tuple[str, bytes, str | None]]) -> None:
    os.makedirs(os.path.join(d, "input"), exist_ok=True)
    by_link: dict[str, list[tuple[float, bytes]]] = {}
    for i, (_, f, _) in enumerate(cases):
        by_link.setdefault(_in_link(f), []).append((T0 + i * GAP, f))
    for link, frames in by_link.items():
        pcapio.write(os.path.join(d, "input", link + ".pcap"), frames)
    with open(CONFIG) as f, open(os.path.join(d, "config.batch"), "w") as g:
        g.write(f.read())


def _in_link(frame: bytes) -> str:
    """The link a case's frame comes in on: the one whose router MAC it is sent to."""
    mac = ":".join(f"{b:02x}" for b in frame[:6])
    return next(link for link, m in fwdgen.ROUTER_MAC.items() if m == mac)


def _by_case(outdir: str, n: int) -> dict[int, dict[str, list[bytes]]]:
    """Per case index, per link, the frames sent (attributed by capture time)."""
    got: dict[int, dict[str, list[bytes]]] = {i: {} for i in range(n)}
    for name in sorted(os.listdir(outdir)):
        if not name.endswith(".pcap"):
            continue
        for ts, frame in pcapio.read(os.path.join(outdir, name)):
            i = min(max(round((ts - T0) / GAP), 0), n - 1)
            got[i].setdefault(name[: -len(".pcap")], []).append(frame)
    return got


@pytest.fixture(scope="module")
def runs():
    cases = _cases()
    why = kernelns.available()
    if why:
        pytest.skip(f"no namespaces for the kernel router: {why}")
    if not os.access(FIBRE, os.X_OK):
        pytest.skip(f"no fibre binary at {FIBRE}")
    with tempfile.TemporaryDirectory(prefix="srv6-diff-") as d:
        _write_inputs(d, cases)
        kdir, fdir = os.path.join(d, "kernel"), os.path.join(d, "fibre")
        fwdkernel.run(kdir, d)
        args = [FIBRE, "-j", "forward", CONFIG]
        for name in sorted(os.listdir(os.path.join(d, "input"))):
            args += ["--in", f"{name[:-len('.pcap')]}={os.path.join(d, 'input', name)}"]
        args += ["--out", fdir]
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        yield cases, _by_case(kdir, len(cases)), _by_case(fdir, len(cases)), p.stdout


def _names():
    try:
        return [n for n, _, _ in _cases()]
    except pytest.skip.Exception:
        return []


@pytest.mark.parametrize("name", _names())
def test_fibre_sends_what_the_kernel_sends(runs, name):
    cases, kernel, fibre, _ = runs
    i = [n for n, _, _ in cases].index(name)
    k, f = kernel[i], fibre[i]
    leaves = cases[i][2]
    # What the case is about happened in the kernel: one frame out of the expected link, or
    # nothing at all.
    assert {link: len(x) for link, x in k.items()} == ({leaves: 1} if leaves else {})
    assert set(k) == set(f), f"links: kernel {sorted(k)}, fibre {sorted(f)}"
    for link in k:
        assert [x.hex() for x in f[link]] == [x.hex() for x in k[link]], f"on {link}"


def test_no_packet_was_copied(runs):
    """The pool's headroom is sized from the routes: no encapsulation copied a packet."""
    import json

    # The batch echoes its sysctl writes first, as sysctl -w does; the report is the last line.
    report = json.loads(runs[3].strip().splitlines()[-1])
    assert report["encap"]["objects"], "no encapsulation object saw a packet"
    assert report["encap"]["reallocs"] == 0


# IOAM insertion (`encap ioam6`): the kernel here has no ioam6 lightweight tunnel, so fibre's
# frames are decoded with scapy and checked against RFC 9197/9486 and the layout
# ioam6_build_state and ioam6_output give them (net/ipv6/ioam6_iptunnel.c): a hop-by-hop
# header of PadN(2), the IOAM option, the trace header as configured and the node data (a
# PadN(4) after it when it leaves the header short of 8 bytes); the first node's data written
# by the router itself with the forwarded packet's hop limit (already one lower); inline when
# the packet has no hop-by-hop header, else in an outer header to the tunnel destination.
IOAM_ROUTES = """\
route add 2001:db8:a6::/64 encap ioam6 trace prealloc type 0x800000 ns 123 size 8 via 2001:db8:d::2 dev d0
route add 2001:db8:a7::/64 encap ioam6 mode encap tundst 2001:db8:c::2 trace prealloc type 0xc00000 ns 123 size 12 via 2001:db8:d::2 dev d0
route add 2001:db8:a8::/64 encap ioam6 freq 1/2 trace prealloc type 0x800000 ns 124 size 4 via 2001:db8:d::2 dev d0
"""


def _trace(hbh: bytes) -> tuple[int, int, int, int, int, bytes]:
    """(option type, namespace, node length, remaining length, trace type, data) of the IOAM
    option a hop-by-hop header carries after its PadN(2)."""
    assert hbh[2:4] == b"\x01\x00", hbh.hex()
    opt = hbh[4:]
    n = opt[1]
    t = opt[4:12]
    nodelen_rem = int.from_bytes(t[2:4], "big")
    return opt[0], int.from_bytes(t[0:2], "big"), nodelen_rem >> 11, nodelen_rem & 0x7F, \
        int.from_bytes(t[4:8], "big") >> 8, opt[12:2 + n]


def test_ioam6_insertion_decodes(tmp_path):
    s = pytest.importorskip("scapy.all", reason="the frames are decoded with scapy")
    if not os.access(FIBRE, os.X_OK):
        pytest.skip(f"no fibre binary at {FIBRE}")
    with open(CONFIG) as f:
        config = f.read() + IOAM_ROUTES
    (tmp_path / "ioam.batch").write_text(config)
    eth = s.Ether(dst=fwdgen.ROUTER_MAC["a0"], src=fwdgen.HOST_MAC["a0"])
    udp = s.UDP(sport=4000, dport=5000) / b"ioam"
    frames = [
        eth / s.IPv6(src=SRC6, dst="2001:db8:a6::5", hlim=64, fl=0x123) / udp,
        eth / s.IPv6(src=SRC6, dst="2001:db8:a7::5", hlim=64, fl=0x123) / udp,
        eth / s.IPv6(src=SRC6, dst="2001:db8:a8::5", hlim=64) / udp,
        eth / s.IPv6(src=SRC6, dst="2001:db8:a8::6", hlim=64) / udp,
        # Already a hop-by-hop header: inline leaves the packet alone.
        eth / s.IPv6(src=SRC6, dst="2001:db8:a6::5", hlim=64) / s.IPv6ExtHdrHopByHop() / udp,
    ]
    pcapio.write(str(tmp_path / "a0.pcap"), [(T0 + i * GAP, bytes(f)) for i, f in enumerate(frames)])
    out = tmp_path / "out"
    p = subprocess.run([FIBRE, "-j", "forward", str(tmp_path / "ioam.batch"), "--in", f"a0={tmp_path / 'a0.pcap'}",
                        "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    d0 = [s.Ether(f) for _, f in pcapio.read(str(out / "d0.pcap"))]
    c0 = [s.Ether(f) for _, f in pcapio.read(str(out / "c0.pcap"))]
    assert len(d0) == 4 and len(c0) == 1, (len(d0), len(c0))

    # Inline: the trace right after the IPv6 header, the router's node data last.
    ip = d0[0][s.IPv6]
    assert (ip.nh, ip.hlim, ip.fl, ip.plen) == (0, 63, 0x123, 24 + 8 + 4)
    hbh = bytes(ip.payload)[:24]
    assert hbh[0] == 17 and hbh[1] == 2
    kind, ns, nodelen, rem, ty, data = _trace(hbh)
    assert (kind, ns, nodelen, rem, ty) == (0x31, 123, 1, 1, 0x800000)
    # Hop limit 63 (not lowered again: the router writes on output) and ioam6_id 0x0a0b0c.
    assert data == bytes(4) + bytes([63, 0x0A, 0x0B, 0x0C])
    assert bytes(ip.payload)[24:] == bytes(frames[0][s.UDP])

    # Encap: an outer header copied from the packet to the tunnel destination through c0, the
    # hop-by-hop header (3 words of data: a PadN(4) after it) and the packet unchanged within.
    o = c0[0][s.IPv6]
    assert (o.dst, o.nh, o.hlim, o.fl) == ("2001:db8:c::2", 0, 63, 0x123)
    assert c0[0].dst == fwdgen.HOST_MAC["c0"]
    hbh = bytes(o.payload)[:32]
    assert (hbh[0], hbh[1]) == (41, 3)
    kind, ns, nodelen, rem, ty, data = _trace(hbh)
    assert (kind, ns, nodelen, rem, ty) == (0x31, 123, 2, 1, 0xC00000)
    # Hop limit and node id, then the interface ids: a0 has 1, d0 4 (srv6.batch).
    assert data == bytes(4) + bytes([63, 0x0A, 0x0B, 0x0C]) + bytes([0, 1, 0, 4])
    assert hbh[28:32] == b"\x01\x02\x00\x00"
    inner = s.IPv6(bytes(o.payload)[32:])
    assert (inner.dst, inner.hlim, inner.fl) == ("2001:db8:a7::5", 63, 0x123)

    # Freq 1/2: the first of two packets only; namespace 124 has no data.
    first, second = d0[1][s.IPv6], d0[2][s.IPv6]
    assert first.nh == 0 and second.nh == 17
    # A packet with its own hop-by-hop header: forwarded as it is.
    assert d0[3][s.IPv6].nh == 0 and bytes(d0[3][s.IPv6].payload)[1] == 0
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["encap"]["reallocs"] == 0
