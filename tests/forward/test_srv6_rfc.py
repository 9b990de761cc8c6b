"""SRv6 behaviours and RPL insertion the kernel here cannot run, through `fibre forward`,
decoded with scapy and checked against the RFC: End.DT4, End.DT46 and End.DT6 with a VRF table
(RFC 8986 4.5, 4.6, 4.8; the kernel needs a VRF device bound to the table, which this one
lacks), the USP and USD flavors of End, End.X and End.T (RFC 8986 4.16.2, 4.16.3), which it
refuses, `encap rpl` (RFC 6554) and the MTU an `encap ioam6` insertion meets (this kernel
was built without RPL and IOAM6 tunnels).

The router is tests/forward/srv6.batch's with the routes of srv6_rfc.batch: table 100 reaches
the inner destinations through c0, the main table through d0, so which table a behaviour used
shows in the link the packet leaves by. Every case runs alone (`fibre -j forward` on one
frame): what leaves which link, and the drop counted when nothing does.

Needs scapy and the fibre binary (skips without them); no root.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fwdgen  # noqa: E402
import pcapio  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
FIBRE = os.environ.get("FIBRE", os.path.join(REPO, "target", "release", "fibre"))
CONFIG = os.path.join(HERE, "srv6.batch")

SRC6 = "2001:db8:5100::7"
SRC4 = "198.51.100.7"
BEHIND6 = "2001:db8:77::9"
BEHIND4 = "10.77.0.9"
SID = {
    "End.DT4": "2001:db8:f::20",
    "End.DT46": "2001:db8:f::21",
    "End.DT6 vrftable": "2001:db8:f::22",
    "End USD": "2001:db8:f::23",
    "End USP": "2001:db8:f::24",
    "End.X USD": "2001:db8:f::25",
    "End.T USD": "2001:db8:f::26",
    "End USP USD": "2001:db8:f::27",
}
ROUTES = os.path.join(HERE, "srv6_rfc.batch")


@pytest.fixture(scope="module")
def s():
    return pytest.importorskip("scapy.all", reason="the frames are built and decoded with scapy")


@pytest.fixture(scope="module")
def router(tmp_path_factory):
    if not os.access(FIBRE, os.X_OK):
        pytest.skip(f"no fibre binary at {FIBRE}")
    d = tmp_path_factory.mktemp("srv6d-rfc")
    with open(CONFIG) as f, open(ROUTES) as g:
        (d / "router.batch").write_text(f.read() + g.read())
    return d


def forward(router, s, frame, link: str = "a0") -> tuple[dict[str, list], dict]:
    """Sends one frame in on `link`; returns the frames each link sent (scapy) and the
    report."""
    case = router / f"case{len(os.listdir(router))}"
    case.mkdir()
    pcapio.write(str(case / "in.pcap"), [(1_700_000_000.0, bytes(frame))])
    p = subprocess.run([FIBRE, "-j", "forward", str(router / "router.batch"), "--in",
                        f"{link}={case / 'in.pcap'}", "--out", str(case / "out")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    sent = {}
    for name in os.listdir(case / "out"):
        frames = [s.Ether(f) for _, f in pcapio.read(str(case / "out" / name))]
        if frames:
            sent[name[: -len(".pcap")]] = frames
    return sent, json.loads(p.stdout.strip().splitlines()[-1])


def eth(s, link: str = "a0"):
    return s.Ether(dst=fwdgen.ROUTER_MAC[link], src=fwdgen.HOST_MAC[link])


def udp(s):
    return s.UDP(sport=4000, dport=5000) / b"fibre srv6 rfc"


def inner6(s):
    return s.IPv6(src=SRC6, dst=BEHIND6, hlim=50, fl=0x11111) / udp(s)


def inner4(s):
    return s.IP(src=SRC4, dst=BEHIND4, ttl=50, id=9, tos=0x28) / udp(s)


def srv6(s, sid: str, payload, nh: int, left: int = 0, segs: list[str] | None = None, link: str = "a0"):
    """An IPv6 packet to `sid` with an SRH (`segs`, scapy's order: the last segment first;
    default the SID alone) and `payload` behind it, in a frame for `link`."""
    segs = segs or [sid]
    srh = s.IPv6ExtHdrSegmentRouting(addresses=segs, segleft=left, lastentry=len(segs) - 1, nh=nh)
    return eth(s, link) / s.IPv6(src=SRC6, dst=sid, hlim=64) / srh / payload


def plain(s, sid: str, payload, nh: int):
    """An IPv6 packet to `sid` without an SRH."""
    return eth(s) / s.IPv6(src=SRC6, dst=sid, hlim=64, nh=nh) / payload


def only(sent: dict, link: str):
    assert list(sent) == [link], f"sent on {sorted(sent)}, expected {link}"
    assert len(sent[link]) == 1
    return sent[link][0]


def dropped(sent: dict, report: dict, reason: str) -> None:
    """Nothing left, and the one packet counted under `reason`."""
    assert not sent, f"sent on {sorted(sent)}"
    assert report["dropped"].get(reason) == 1, report["dropped"]
    assert report["forwarded"] == 0 and report["delivered"] == 0


def check_inner4(s, frame, link: str) -> None:
    """The inner IPv4 packet, decapsulated and forwarded once: TTL one lower, the rest as
    sent, to the neighbour of `link`'s route."""
    assert frame.dst == fwdgen.HOST_MAC[link]
    ip = frame[s.IP]
    want = inner4(s)
    assert (ip.src, ip.dst, ip.ttl, ip.tos, ip.id) == (want.src, want.dst, 49, 0x28, 9)
    assert bytes(ip.payload) == bytes(want.payload)
    fresh = ip.copy()
    del fresh.chksum
    assert s.IP(bytes(fresh)).chksum == ip.chksum, "checksum updated for the new TTL"


def check_inner6(s, frame, link: str) -> None:
    assert frame.dst == fwdgen.HOST_MAC[link]
    ip = frame[s.IPv6]
    want = inner6(s)
    assert (ip.src, ip.dst, ip.hlim, ip.fl, ip.nh) == (want.src, want.dst, 49, want.fl, 17)
    assert bytes(ip.payload) == bytes(want.payload)


# End.DT4 (RFC 8986 4.6): the outer header and its extension headers removed, the IPv4 packet
# looked up in the table; the SRH, when there is one, must have no segments left.
def test_end_dt4_looks_the_inner_ipv4_packet_up_in_its_table(router, s):
    sent, _ = forward(router, s, srv6(s, SID["End.DT4"], inner4(s), nh=4))
    check_inner4(s, only(sent, "c0"), "c0")
    sent, _ = forward(router, s, plain(s, SID["End.DT4"], inner4(s), nh=4))
    check_inner4(s, only(sent, "c0"), "c0")


def test_end_dt4_refuses_segments_left_and_other_payloads(router, s):
    sent, report = forward(router, s, srv6(s, SID["End.DT4"], inner4(s), nh=4, left=1,
                                           segs=[BEHIND6, SID["End.DT4"]]))
    dropped(sent, report, "SEG6_NO_INNER")
    sent, report = forward(router, s, srv6(s, SID["End.DT4"], inner6(s), nh=41))
    dropped(sent, report, "SEG6_NO_INNER")


# End.DT46 (RFC 8986 4.8): either family, by the header after the outer ones.
def test_end_dt46_takes_either_family(router, s):
    sent, _ = forward(router, s, srv6(s, SID["End.DT46"], inner4(s), nh=4))
    check_inner4(s, only(sent, "c0"), "c0")
    sent, _ = forward(router, s, srv6(s, SID["End.DT46"], inner6(s), nh=41))
    check_inner6(s, only(sent, "c0"), "c0")
    sent, report = forward(router, s, srv6(s, SID["End.DT46"], udp(s), nh=17))
    dropped(sent, report, "SEG6_NO_INNER")


def test_end_dt6_with_a_vrf_table(router, s):
    sent, _ = forward(router, s, srv6(s, SID["End.DT6 vrftable"], inner6(s), nh=41))
    check_inner6(s, only(sent, "c0"), "c0")


# USD (RFC 8986 4.16.3): at the end of the list (Segments Left 0, or no SRH) an IPv6 or IPv4
# payload is decapsulated and forwarded: End by the main table (d0), End.X to its neighbour
# (c0), End.T in its table (c0).
@pytest.mark.parametrize("name,link", [("End USD", "d0"), ("End.X USD", "c0"), ("End.T USD", "c0"),
                                       ("End USP USD", "d0")])
def test_usd_decapsulates_at_the_last_segment(router, s, name, link):
    sent, _ = forward(router, s, srv6(s, SID[name], inner6(s), nh=41))
    check_inner6(s, only(sent, link), link)
    sent, _ = forward(router, s, plain(s, SID[name], inner6(s), nh=41))
    check_inner6(s, only(sent, link), link)


@pytest.mark.parametrize("name,link", [("End USD", "d0"), ("End.T USD", "c0")])
def test_usd_decapsulates_ipv4(router, s, name, link):
    sent, _ = forward(router, s, srv6(s, SID[name], inner4(s), nh=4))
    check_inner4(s, only(sent, link), link)


def test_end_x_usd_cannot_hand_ipv4_to_an_ipv6_neighbour(router, s):
    sent, report = forward(router, s, srv6(s, SID["End.X USD"], inner4(s), nh=4))
    dropped(sent, report, "SEG6_FAMILY_MISMATCH")


def test_usd_with_segments_left_is_a_plain_end(router, s):
    """Segments left: the End behaviour as usual, the next segment the destination."""
    sent, _ = forward(router, s, srv6(s, SID["End USD"], udp(s), nh=17, left=1,
                                      segs=[BEHIND6, SID["End USD"]]))
    ip = only(sent, "d0")[s.IPv6]
    assert ip.dst == BEHIND6 and ip.hlim == 63
    assert ip[s.IPv6ExtHdrSegmentRouting].segleft == 0


# USP (RFC 8986 4.16.2): Segments Left 0 on arrival: the SRH is removed and the next header
# processed by the router itself. fibre has no host stack behind it here, so a UDP datagram
# gets port unreachable, which quotes the packet as the router processed it: without the SRH.
def test_usp_removes_the_srh_and_delivers(router, s):
    sent, report = forward(router, s, srv6(s, SID["End USP"], udp(s), nh=17))
    err = only(sent, "a0")
    assert err[s.IPv6].dst == SRC6
    unreach = err[s.ICMPv6DestUnreach]
    assert unreach.code == 4
    quoted = s.IPv6(bytes(unreach.payload))
    assert (quoted.dst, quoted.nh, quoted.plen) == (SID["End USP"], 17, len(udp(s)))
    assert bytes(quoted.payload)[8:] == bytes(udp(s).payload)
    assert report["delivered"] == 1


def test_usp_answers_an_echo_request(router, s):
    echo = s.ICMPv6EchoRequest(id=7, seq=1, data=b"usp")
    sent, _ = forward(router, s, srv6(s, SID["End USP"], echo, nh=58))
    reply = only(sent, "a0")
    assert reply[s.IPv6].dst == SRC6
    r = reply[s.ICMPv6EchoReply]
    assert (r.id, r.seq, r.data) == (7, 1, b"usp")


def test_usd_without_an_ip_payload_is_delivered_with_its_srh(router, s):
    """USD alone keeps the SRH: RFC 8986 4.1.1's upper-layer processing gets the packet
    whole, and the router takes an SRH addressed to it as the kernel does (ipv6_srh_rcv): on
    a link with seg6_enabled (b0 in srv6.batch; the quote keeps the SRH), not on one without
    (a0: dropped, counted)."""
    sent, _ = forward(router, s, srv6(s, SID["End USD"], udp(s), nh=17, link="b0"), link="b0")
    unreach = only(sent, "a0")[s.ICMPv6DestUnreach]
    quoted = s.IPv6(bytes(unreach.payload))
    assert quoted.nh == 43
    assert quoted[s.IPv6ExtHdrSegmentRouting].segleft == 0
    sent, report = forward(router, s, srv6(s, SID["End USD"], udp(s), nh=17))
    dropped(sent, report, "SEG6_DISABLED")


def test_usp_without_an_srh_delivers_the_packet(router, s):
    """No SRH: the list is done, and the upper layer is the router's (RFC 8986 4.1.1)."""
    sent, report = forward(router, s, plain(s, SID["End USP"], udp(s), nh=17))
    assert report["delivered"] == 1
    quoted = s.IPv6(bytes(only(sent, "a0")[s.ICMPv6DestUnreach].payload))
    assert (quoted.dst, quoted.nh) == (SID["End USP"], 17)


def test_end_without_flavors_still_drops_the_last_segment(router, s):
    """The kernel's End: Segments Left 0 is refused (get_and_validate_srh)."""
    sent, report = forward(router, s, srv6(s, "2001:db8:f::1", udp(s), nh=17))
    dropped(sent, report, "SEG6_BAD_SRH")


# RPL insertion (rpl_iptunnel's rpl_do_srh_inline): iproute2 stores `segs A,B` last first, and
# the kernel sends the packet to the first stored address (B: 2001:db8:d::20, d0's
# neighbour), the header listing the others (A) and then the packet's own destination,
# compressed against the new one (RFC 6554 section 3). By hand: A shares 15 octets with B
# (CmprI 15, one carried), 2001:db8:a9::5 shares 5 (CmprE 5, eleven carried): 8 + 1 + 11 =
# 20 bytes, 4 of padding (Pad 4).
def test_rpl_header_inserted_and_compressed(router, s):
    sent, report = forward(router, s, eth(s) / s.IPv6(src=SRC6, dst="2001:db8:a9::5", hlim=64) / udp(s))
    f = only(sent, "d0")
    assert f.dst == "02:00:00:00:d0:20"
    ip = f[s.IPv6]
    assert (ip.dst, ip.nh, ip.hlim, ip.plen) == ("2001:db8:d::20", 43, 63, 24 + len(udp(s)))
    rh = bytes(ip.payload)[:24]
    assert rh[:8] == bytes([17, 2, 3, 2, 0xF5, 0x40, 0, 0])
    assert rh[8] == 0x21
    assert rh[9:20] == s.inet_pton(s.socket.AF_INET6, "2001:db8:a9::5")[5:]
    assert rh[20:] == bytes(4)
    u = s.UDP(bytes(ip.payload)[24:])
    assert (u.sport, u.dport, bytes(u.payload)) == (4000, 5000, bytes(udp(s).payload))
    assert report["encap"]["reallocs"] == 0


# IOAM insertion past the MTU (ioam6_output checks none; ip6_fragment refuses a forwarded
# packet): c0's MTU is 1280 (srv6.batch) and an inline trace of 8 bytes of data adds 24.
def big(s, dst: str, size: int):
    """A UDP packet to `dst` of `size` bytes of IPv6 packet."""
    return eth(s) / s.IPv6(src=SRC6, dst=dst, hlim=64) / s.UDP(sport=4000, dport=5000) / (b"i" * (size - 48))


def test_ioam6_insertion_that_fits_the_mtu_leaves(router, s):
    sent, _ = forward(router, s, big(s, "2001:db8:aa::5", 1280 - 24))
    ip = only(sent, "c0")[s.IPv6]
    assert ip.nh == 0 and ip.plen + 40 == 1280


def test_ioam6_insertion_past_the_mtu_is_too_big(router, s):
    sent, report = forward(router, s, big(s, "2001:db8:aa::5", 1280))
    err = only(sent, "a0")[s.IPv6]
    ptb = err[s.ICMPv6PacketTooBig]
    assert (err.dst, ptb.mtu) == (SRC6, 1280)
    # The quote is the packet as it grew: the trace inserted, the hop limit lowered.
    quoted = s.IPv6(bytes(ptb.payload))
    assert (quoted.dst, quoted.nh, quoted.hlim) == ("2001:db8:aa::5", 0, 63)
    assert report["dropped"].get("PKT_TOO_BIG") == 1
    assert report["forwarded"] == 1, "forwarded before the insertion, dropped after"


def test_ioam6_encapsulation_past_the_tunnel_mtu_is_dropped(router, s):
    """The outer packet goes through c0 (1280); its source is the router's own address, so the
    kernel's Packet Too Big goes to the router itself: nothing leaves."""
    sent, report = forward(router, s, big(s, "2001:db8:ab::5", 1250))
    assert not sent
    assert report["dropped"].get("PKT_TOO_BIG") == 1
    sent, _ = forward(router, s, big(s, "2001:db8:ab::5", 1280 - 64))
    o = only(sent, "c0")[s.IPv6]
    assert (o.dst, o.nh, o.plen + 40) == ("2001:db8:c::2", 0, 1280)


def seed_cases() -> list[tuple[str, bytes, str | None]]:
    """The frames above as fuzz seeds (fuzz/seed_pipeline.py), in test_srv6._cases' form:
    (name, frame, the link it leaves by or None)."""
    import scapy.all as s

    frames = [
        ("End.DT4", srv6(s, SID["End.DT4"], inner4(s), nh=4), "c0"),
        ("End.DT46, IPv6", srv6(s, SID["End.DT46"], inner6(s), nh=41), "c0"),
        ("End.DT6 vrftable", plain(s, SID["End.DT6 vrftable"], inner6(s), nh=41), "c0"),
        ("End USD", srv6(s, SID["End USD"], inner4(s), nh=4), "d0"),
        ("End USP", srv6(s, SID["End USP"], udp(s), nh=17), "a0"),
        ("End.X USD, IPv4", srv6(s, SID["End.X USD"], inner4(s), nh=4), None),
        ("End.T USD", srv6(s, SID["End.T USD"], inner6(s), nh=41), "c0"),
        ("End USP USD", srv6(s, SID["End USP USD"], udp(s), nh=17), "a0"),
        ("RPL", eth(s) / s.IPv6(src=SRC6, dst="2001:db8:a9::5", hlim=64) / udp(s), "d0"),
        ("IOAM past the MTU", big(s, "2001:db8:aa::5", 1280), "a0"),
        ("IOAM encap past the MTU", big(s, "2001:db8:ab::5", 1250), None),
    ]
    return [(n, bytes(f), link) for n, f, link in frames]
