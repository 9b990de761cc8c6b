"""Routes with encapsulation served by fibred, checked by decoders nobody here wrote.

- iproute2's own printer: fibred's dump of seg6, seg6local, IOAM6 and RPL routes (`fibre route
  save`, RTM_NEWROUTE messages as fibred sends them) is read by `ip route showdump` in a network
  namespace whose link of index 2 is named like fibre's, and must print exactly what `fibre
  route show` prints. This kernel was built without IOAM6 and RPL lightweight tunnels, so for
  those iproute2's printer is the only reference: its output is also recorded in
  `encap_iproute2.txt` (how: `python3 tests/online/test_encap.py --record` as root, with
  iproute2 6.1.0), which the test compares fibre with where it cannot run `ip`.
- pyroute2 0.9: a seg6 route it encodes itself is added to fibred, and fibred's dump decodes
  in pyroute2 to the same mode and segments.

Tests skip with a message when fibred, ip, network namespaces or pyroute2 are unavailable.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from binaries import binary
from test_pyroute2 import fibre, fibred  # noqa: F401 (a fixture and its helper)

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDING = os.path.join(HERE, "encap_iproute2.txt")
NS = "fibre-encap-showdump"

# One link (index 2, as in the namespace below), routes with every encapsulation fibre holds.
CONFIG = """link set lo up
link add d0 address 02:00:00:00:00:10 type dummy
link set d0 up
address add 10.0.0.1/24 dev d0
address add 2001:db8:1::1/64 dev d0
route add 10.10.0.0/16 encap seg6 mode encap segs 2001:db8::1,2001:db8::2 dev d0
route add 10.11.0.0/16 encap seg6 mode l2encap.red segs 2001:db8::3 hmac 9 via 10.0.0.2
route add 10.12.0.0/16 nexthop encap seg6 mode encap.red segs 2001:db8::4 via 10.0.0.2 nexthop via 10.0.0.3
route add 2001:db8:10::/64 encap seg6 mode inline segs 2001:db8::1,2001:db8::2 hmac 0x20 dev d0
route add 2001:db8:20::1/128 encap seg6local action End flavors next-csid dev d0
route add 2001:db8:20::2/128 encap seg6local action End.X nh6 2001:db8:1::2 count dev d0
route add 2001:db8:20::3/128 encap seg6local action End.DT6 table 100 dev d0
route add 2001:db8:20::4/128 encap seg6local action End.B6.Encaps srh segs 2001:db8::7,2001:db8::8 hmac 4 dev d0
route add 2001:db8:20::5/128 encap seg6local action End.DX4 nh4 10.0.0.9 dev d0
route add 2001:db8:31::/64 encap ioam6 trace prealloc type 0x800000 ns 1 size 12 dev d0
route add 2001:db8:32::/64 encap ioam6 freq 2/5 mode encap tundst 2001:db8::99 trace prealloc type 0xf00000 ns 7 size 40 via 2001:db8:1::2
route add 2001:db8:33::/64 encap ioam6 mode auto tundst 2001:db8::98 trace prealloc type 0x1 ns 65535 size 244 dev d0
route add 2001:db8:34::/64 encap rpl segs 2001:db8::1 dev d0
route add 2001:db8:35::/64 encap rpl segs 2001:db8::1,2001:db8::2,2001:db8::3 via 2001:db8:1::2
route add 2001:db8:36::/64 nexthop encap rpl segs 2001:db8::7 via 2001:db8:1::2 nexthop encap ioam6 trace prealloc type 0x800000 ns 2 size 8 via 2001:db8:1::3
"""


def configure(sock: str) -> tuple[str, bytes]:
    """Applies CONFIG to fibred; answers `fibre route show` (both families) and `fibre route
    save` of both families as one stream (the IPv6 save's magic dropped)."""
    with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as f:
        f.write(CONFIG)
    try:
        fibre(sock, "-batch", f.name)
    finally:
        os.unlink(f.name)
    shown = fibre(sock, "-4", "route", "show") + fibre(sock, "-6", "route", "show")
    save = b""
    for family in ("-4", "-6"):
        r = subprocess.run([binary("fibre"), "-n", sock, family, "route", "save"],
                           capture_output=True)
        assert r.returncode == 0, r.stderr
        save += r.stdout[4:] if save else r.stdout
    return shown, save


def iproute2_showdump(save: bytes) -> str | None:
    """`ip route showdump` of `save` in a namespace whose index-2 link is d0; None (with the
    reason printed) where that cannot run."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("no root or no ip: compared with the recording only")
        return None
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    if subprocess.run(["ip", "netns", "add", NS], capture_output=True).returncode != 0:
        print("no network namespaces: compared with the recording only")
        return None
    try:
        subprocess.run(["ip", "-n", NS, "link", "add", "d0", "index", "2", "type", "veth",
                        "peer", "name", "d0p", "index", "3"], check=True)
        r = subprocess.run(["ip", "-n", NS, "route", "showdump"], input=save, capture_output=True,
                           check=True)
        return r.stdout.decode()
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


def test_iproute2_prints_fibreds_encapsulated_routes_as_fibre_does(fibred):  # noqa: F811
    shown, save = configure(fibred)
    with open(RECORDING) as f:
        recorded = f.read()
    assert shown == recorded, "fibre route show differs from iproute2's recorded output"
    live = iproute2_showdump(save)
    if live is not None:
        assert live == shown, "ip route showdump of fibred's dump differs from fibre route show"
    # fibred's answers to route get carry the chosen next hop's encapsulation.
    assert fibre(fibred, "route", "get", "10.11.1.1") == (
        "10.11.1.1  encap seg6 mode l2encap.red segs 1 [ 2001:db8::3 ] hmac 9 via 10.0.0.2 dev d0 "
        "src 10.0.0.1 uid 0 \n    cache \n")
    assert fibre(fibred, "route", "get", "2001:db8:34::1") == (
        "2001:db8:34::1 from ::  encap rpl segs 1 [ 2001:db8::1 ] dev d0 src 2001:db8:1::1 "
        "metric 1024 pref medium\n")


def test_pyroute2_encodes_and_decodes_seg6_routes_with_fibred(fibred):  # noqa: F811
    pr = pytest.importorskip("pyroute2", reason="pyroute2 0.9 is not installed (tests/requirements.txt)")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("")
    s.connect(fibred.replace(".sock", ".dgram"))
    ipr = pr.IPRoute(use_socket=s)
    try:
        ipr.link("add", ifname="d0", kind="dummy")
        (idx,) = ipr.link_lookup(ifname="d0")
        ipr.link("set", index=idx, state="up")
        segs = "2001:db8::1,2001:db8::2"
        ipr.route("add", dst="2001:db8:40::/64", oif=idx,
                  encap={"type": "seg6", "mode": "encap", "segs": segs})
        ipr.route("add", dst="10.40.0.0/16", oif=idx,
                  encap={"type": "seg6", "mode": "encap", "segs": "2001:db8::5"})
        text = fibre(fibred, "route", "show") + fibre(fibred, "-6", "route", "show")
        # pyroute2 writes the segments in the order given, as the carried list (last of the
        # path first): iproute2 and fibre print the path, so the other way round.
        assert "10.40.0.0/16  encap seg6 mode encap segs 1 [ 2001:db8::5 ] dev d0 proto static" in text
        assert ("2001:db8:40::/64  encap seg6 mode encap segs 2 [ 2001:db8::2 2001:db8::1 ] dev d0 "
                "proto static metric 1024 pref medium") in text
        got = {}
        for family in (socket.AF_INET, socket.AF_INET6):
            for r in ipr.route("dump", family=family):
                if r.get("encap_type") == 5:
                    srh = r.get("encap").get("SEG6_IPTUNNEL_SRH")
                    got[r.get("dst")] = (srh["mode"], srh["segs"])
        assert got == {
            "10.40.0.0": ("encap", ["2001:db8::5"]),
            "2001:db8:40::": ("encap", ["2001:db8::1", "2001:db8::2"]),
        }
    finally:
        ipr.close()


def record() -> int:
    """Writes encap_iproute2.txt from iproute2's showdump of a fresh fibred's dump."""
    import time

    d = tempfile.mkdtemp(prefix="fibre-encap-")
    sock = os.path.join(d, "fibred.sock")
    proc = subprocess.Popen([binary("fibred"), "--socket", sock, "--no-dgram"])
    try:
        while not os.path.exists(sock):
            time.sleep(0.02)
        _, save = configure(sock)
        live = iproute2_showdump(save)
        if live is None:
            return 77
        with open(RECORDING, "w") as f:
            f.write(live)
        print(f"wrote {RECORDING}: {live.count(chr(10))} lines")
        return 0
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(record() if sys.argv[1:] == ["--record"] else 2)
