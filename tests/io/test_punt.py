"""The host's own traffic through fibred's punt path:

    h1 (eth0 10.0.1.2) -- a0 [fibred in namespace r, TAP cp0 10.0.1.1] a1 -- (eth0 10.0.2.2) h2

`fibre link add p0 type port dev a0 io KIND punt cp0` binds fibre link p0 to r's veth a0 and
creates TAP cp0 in r with p0's MAC; fibre's addresses on p0 are copied to cp0, so r's own
stack (the host's) owns 10.0.1.1 through cp0 while fibre forwards. Checked, for AF_PACKET and
AF_XDP: a TCP connection from h1 to a server in r bound to 10.0.1.1 exchanges data, and UDP
too; ping of the router stays fibre's; an address added to p0 later appears on cp0 and goes
when it is deleted; cp0's carrier follows a0; the punt counters move (`fibre -s -j link
show`, the metrics); r's stack ignores a0 while p0 is bound, and p0 deleted takes cp0 away
and gives a0's settings back. Then a BGP session of BIRD 2 in h1 with BIRD in r over cp0 (hold time 3
seconds): Established, a route exchanged each way, and still Established, not restarted,
after a few seconds of UDP crossing fibre; fibred stopped gives a0's settings back.

Needs root, `ip netns`, built fibre and fibred, and for the BGP test BIRD 2; skips with the
reason otherwise.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time

import pytest

from test_fibred import FIBRED, Router, counters, wire
from test_live import HELP, helper, in_ns, sh, topo  # noqa: F401 (topo is a fixture)

CONFIG = """\
link set lo up
link set p0 up
link set p1 up
addr add 10.0.1.1/24 dev p0
addr add 10.0.2.1/24 dev p1
"""


def start(ns: dict, tmp_path, kind: str) -> Router:
    wire(ns)
    for h in ("h1", "h2"):
        off = ["offloads-off", "eth0"] + (["tx"] if kind == "af_xdp" else [])
        assert helper(ns[h], *off) == 0
    r = Router(ns["r"], tmp_path)
    r.fibre("link", "add", "p0", "type", "port", "dev", "a0", "io", kind, "punt", "cp0")
    r.fibre("link", "add", "p1", "type", "port", "dev", "a1", "io", kind)
    batch = tmp_path / "config.batch"
    batch.write_text(CONFIG)
    r.fibre("-batch", str(batch))
    return r


def tap_addrs(ns: str) -> set:
    out = json.loads(sh("ip", "-n", ns, "-j", "addr", "show", "cp0").stdout)[0]
    return {f"{a['local']}/{a['prefixlen']}" for a in out["addr_info"] if a["family"] == "inet"}


def until(what, seconds: float = 3.0):
    deadline = time.monotonic() + seconds
    while not (got := what()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


@pytest.mark.parametrize("kind", ["af_packet", "af_xdp"])
def test_host_traffic_through_the_punt_tap(topo, kind, tmp_path):
    r = start(topo, tmp_path, kind)
    try:
        show = json.loads(r.fibre("-d", "-j", "link", "show", "p0").stdout)[0]
        assert show["linkinfo"]["info_data"] == {"dev": "a0", "io": kind, "punt": "cp0"}, show
        cp0 = json.loads(sh("ip", "-n", topo["r"], "-j", "link", "show", "cp0").stdout)[0]
        assert cp0["address"] == show["address"], "cp0 has p0's MAC"
        assert until(lambda: "10.0.1.1/24" in tap_addrs(topo["r"])), tap_addrs(topo["r"])

        tcp = in_ns(topo["r"], sys.executable, HELP, "tcp-echo", "7", "10", "10.0.1.1")
        udp = in_ns(topo["r"], sys.executable, HELP, "udp-echo", "7", "10", "10.0.1.1")
        time.sleep(0.3)
        assert helper(topo["h1"], "tcp-ask", "10.0.1.1", "7", "100000") == 0, "TCP to the host"
        assert helper(topo["h1"], "udp-ask", "10.0.1.1", "7") == 0, "UDP to the host"
        for p in (tcp, udp):
            p.kill()
            p.wait()
        assert helper(topo["h1"], "ping", "10.0.1.1", "4") == 0, "ping of the router"
        assert helper(topo["h1"], "ping", "10.0.2.2", "10") == 0, "ping across fibre"

        # Addresses follow p0's.
        r.fibre("addr", "add", "10.0.1.5/24", "dev", "p0")
        assert until(lambda: "10.0.1.5/24" in tap_addrs(topo["r"])), tap_addrs(topo["r"])
        r.fibre("addr", "del", "10.0.1.5/24", "dev", "p0")
        assert until(lambda: "10.0.1.5/24" not in tap_addrs(topo["r"])), tap_addrs(topo["r"])

        # The carrier follows a0's.
        def carrier(ns: str) -> bool:
            flags = sh("ip", "-n", ns, "link", "show", "cp0").stdout
            return "NO-CARRIER" not in flags

        sh("ip", "-n", topo["r"], "link", "set", "a0", "down")
        assert until(lambda: not carrier(topo["r"])), "cp0 keeps its carrier"
        sh("ip", "-n", topo["r"], "link", "set", "a0", "up")
        assert until(lambda: carrier(topo["r"])), "cp0 without carrier"

        time.sleep(0.2)
        punt = counters(r, "p0")["punt"]
        assert punt["to_host"] > 10 and punt["from_host"] > 10, punt
        assert "punt" not in counters(r, "p1")
        assert "punt: to host" in r.fibre("-s", "link", "show", "p0").stdout
        metrics = r.scrape()
        sent = re.search(r'fibre_link_punt_from_host_total\{link="p0",dev="a0",io="%s"\} (\d+)'
                         % kind, metrics)
        assert sent and int(sent.group(1)) > 10, metrics

        # While p0 is bound, r's stack ignores a0 (it would take the router's traffic a
        # second time); p0 deleted, cp0 goes and a0's settings are r's again.
        assert arp_ignore(topo["r"]) == "8"
        r.fibre("link", "del", "p0")
        assert until(lambda: sh("ip", "-n", topo["r"], "link", "show", "cp0",
                                check=False).returncode != 0), "cp0 stays"
        assert arp_ignore(topo["r"]) == "0"
    finally:
        r.stop()


def arp_ignore(ns: str) -> str:
    return sh("ip", "netns", "exec", ns, "cat", "/proc/sys/net/ipv4/conf/a0/arp_ignore").stdout.strip()


BIRD_CONF = """\
router id {me};
log "{log}" all;
protocol device {{ scan time 1; }}
protocol static {{ ipv4; route {mine} blackhole; }}
protocol bgp peer {{
    local {me} as {asn};
    neighbor {peer} as {peer_asn};
    hold time 3;
    keepalive time 1;
    connect retry time 1;
    ipv4 {{ import all; export where source = RTS_STATIC; }};
}}
"""


class Bird:
    def __init__(self, ns: str, d, me: str, asn: int, peer: str, peer_asn: int, mine: str):
        self.ns, self.sock = ns, str(d / "bird.ctl")
        conf = d / "bird.conf"
        conf.write_text(BIRD_CONF.format(me=me, asn=asn, peer=peer, peer_asn=peer_asn,
                                         mine=mine, log=d / "bird.log"))
        sh("ip", "netns", "exec", ns, "bird", "-c", str(conf), "-s", self.sock,
           "-P", str(d / "bird.pid"))
        self.pid = int(until(lambda: (d / "bird.pid").exists() and (d / "bird.pid").read_text()))

    def ask(self, *args: str) -> str:
        return sh("ip", "netns", "exec", self.ns, "birdc", "-s", self.sock, *args,
                  check=False).stdout

    def session(self) -> str:
        return self.ask("show", "protocols", "all", "peer")

    def stop(self) -> None:
        sh("kill", str(self.pid), check=False)


def test_bgp_session_through_the_punt_tap(topo, tmp_path):
    if shutil.which("bird") is None or shutil.which("birdc") is None:
        pytest.skip("BIRD 2 (bird, birdc) is not installed")
    if FIBRED is None:
        pytest.skip("fibred is not built")
    (tmp_path / "r").mkdir()
    r = start(topo, tmp_path / "r", "af_packet")
    birds = []
    try:
        assert until(lambda: "10.0.1.1/24" in tap_addrs(topo["r"])), tap_addrs(topo["r"])
        for ns, sub, me, asn, peer, peer_asn, mine in (
                (topo["r"], "bird-r", "10.0.1.1", 65001, "10.0.1.2", 65002, "192.0.2.0/24"),
                (topo["h1"], "bird-h1", "10.0.1.2", 65002, "10.0.1.1", 65001, "198.51.100.0/24")):
            (tmp_path / sub).mkdir()
            birds.append(Bird(ns, tmp_path / sub, me, asn, peer, peer_asn, mine))
        bird_r, bird_h1 = birds
        assert until(lambda: "Established" in bird_r.session(), 15), bird_r.session()
        assert until(lambda: "198.51.100.0/24" in bird_r.ask("show", "route"), 5), \
            bird_r.ask("show", "route")
        assert until(lambda: "192.0.2.0/24" in bird_h1.ask("show", "route"), 5), \
            bird_h1.ask("show", "route")
        since = re.search(r"peer\s+BGP\s+\S+\s+up\s+(\S+)", bird_r.session())
        assert since, bird_r.session()

        # Traffic across fibre for a few seconds, with keepalives due every second and the
        # session held for 3: it stays up, never restarted.
        flood = in_ns(topo["h1"], sys.executable, HELP, "flood", "10.0.2.2", "9", "3")
        assert helper(topo["h1"], "ping", "10.0.2.2", "10") == 0, "ping across fibre"
        flood.wait()
        session = bird_r.session()
        assert "Established" in session, session
        again = re.search(r"peer\s+BGP\s+\S+\s+up\s+(\S+)", session)
        assert again and again.group(1) == since.group(1), (since.group(0), session)
        assert "Established" in bird_h1.session(), bird_h1.session()
        assert counters(r, "p1")["tx"]["packets"] > 1000, counters(r, "p1")
    finally:
        for b in birds:
            b.stop()
        r.stop()
    # fibred stopped gives a0's settings back too.
    assert arp_ignore(topo["r"]) == "0", r.log.read_text()
