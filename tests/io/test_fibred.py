"""fibred forwarding real traffic between two namespaces, configured over rtnetlink:

    h1 (eth0 10.0.1.2) -- a0 [fibred in namespace r] a1 -- (eth0 10.0.2.2) h2

fibred runs in r with its embedded default configuration; `fibre link add p0 type port dev a0
io KIND` makes fibre link p0 and binds it to r's veth a0 (the link takes a0's MAC), and the
addresses are fibre's. r's own stack has no addresses and does not forward, so whatever
crosses is fibre's doing. For AF_PACKET and AF_XDP: a missing host interface and a fibred
without privileges refuse the link in iproute2's words and leave none; ping across fibre and
of the router; UDP and TCP across; an ICMP error back to the sender (net unreachable for a
destination fibre has no route to); a flap of r's a1 while a flood of UDP crosses, after
which traffic resumes; the counters (`fibre -s link show`, `fibre -s -j link show`, the
metrics, checked by promtool when it is there) moving; an idle fibred using no CPU to speak
of; fibred restarted with `--state`: the configuration is the same and traffic resumes; the
port link deleted: its I/O stops. TAP ports (`type tap`, the devices moved to the hosts):
ping across and of the router, UDP across.

Offloads as in test_live.py (TSO and GSO off on the hosts, transmit checksum offload off too
for AF_XDP). Needs root, `ip netns` and built fibre and fibred; skips with the reason
otherwise.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from binaries import binary
# test_live's namespaces (h1, r, h2), veths (r's a0 and a1, the hosts' eth0) and host
# addresses serve here too.
from test_live import (  # noqa: F401 (topo is a fixture)
    HELP, address_hosts, cpu_seconds, helper, in_ns, move_taps, sh, topo, traffic_across,
    wire_veths)

FIBRE = binary("fibre")
FIBRED = binary("fibred")

CONFIG = """\
link set lo up
link set p0 up
link set p1 up
addr add 10.0.1.1/24 dev p0
addr add 10.0.2.1/24 dev p1
route add 10.0.3.0/24 via 10.0.2.2
"""


def wire(ns: dict) -> None:
    """The veths and the hosts' addresses; skips when fibred is not built."""
    if FIBRED is None:
        pytest.skip("fibred is not built")
    wire_veths(ns)
    address_hosts(ns)


class Router:
    """fibred in namespace `ns`, with its socket, state file and log in `d`."""

    def __init__(self, ns: str, d, *extra: str, user: int | None = None):
        self.ns, self.dir = ns, d
        self.sock = str(d / "fibred.sock")
        self.log = d / "fibred.log"
        pre = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] if user else []
        args = ["ip", "netns", "exec", ns, *pre, FIBRED, "--socket", self.sock, "--no-dgram",
                "--state", str(d / "fibred.state"), "--metrics", "127.0.0.1:0", *extra]
        self.proc = subprocess.Popen(args, stderr=open(self.log, "w"))
        deadline = time.time() + 10
        while not (m := re.search(r"metrics listening address=(\S+)", self.log.read_text())):
            assert time.time() < deadline and self.proc.poll() is None, self.log.read_text()
            time.sleep(0.02)
        self.metrics = m.group(1)

    def fibre(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        r = sh("ip", "netns", "exec", self.ns, FIBRE, "-n", self.sock, *args, check=False)
        if check:
            assert r.returncode == 0, (args, r.stderr)
        return r

    def scrape(self) -> str:
        # The metrics listen in r's namespace: fetched from there.
        code = f"import urllib.request; print(urllib.request.urlopen('http://{self.metrics}/metrics').read().decode())"
        return sh("ip", "netns", "exec", self.ns, sys.executable, "-c", code).stdout

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(10) == 0, self.log.read_text()


def counters(router: Router, link: str) -> dict:
    out = json.loads(router.fibre("-s", "-j", "link", "show", link).stdout)
    return out[0]["stats64"]


def promtool(text: str) -> None:
    if shutil.which("promtool") is None:
        return
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_refusals_leave_no_link(topo, tmp_path):
    wire(topo)
    # fibred without privileges (user nobody, fibred's own user: an administrator of it)
    # cannot open the interface; a missing interface is named.
    # pytest's directories are root's alone: nobody's fibred gets one of its own.
    d = pathlib.Path(tempfile.mkdtemp(prefix="fibred-nobody-"))
    os.chmod(d, 0o777)
    r = Router(topo["r"], d, user=65534)
    try:
        got = r.fibre("link", "add", "p0", "type", "port", "dev", "a0", check=False)
        assert (got.returncode, got.stderr) == (2, "RTNETLINK answers: Operation not permitted\n")
        assert r.fibre("link", "show", "p0", check=False).returncode != 0
    finally:
        r.stop()
        shutil.rmtree(d, ignore_errors=True)
    r = Router(topo["r"], tmp_path)
    try:
        got = r.fibre("link", "add", "p0", "type", "port", "dev", "nope", "io", "af_packet",
                      check=False)
        assert (got.returncode, got.stderr) == (1, 'Cannot find device "nope"\n')
        assert r.fibre("link", "show", "p0", check=False).returncode != 0
    finally:
        r.stop()


@pytest.mark.parametrize("kind", ["af_packet", "af_xdp"])
def test_fibred_forwards(topo, kind, tmp_path):
    wire(topo)
    for h in ("h1", "h2"):
        off = ["offloads-off", "eth0"] + (["tx"] if kind == "af_xdp" else [])
        assert helper(topo[h], *off) == 0
    r = Router(topo["r"], tmp_path)
    try:
        r.fibre("link", "add", "p0", "type", "port", "dev", "a0", "io", kind)
        r.fibre("link", "add", "p1", "type", "port", "dev", "a1", "io", kind)
        batch = tmp_path / "config.batch"
        batch.write_text(CONFIG)
        r.fibre("-batch", str(batch))
        show = json.loads(r.fibre("-d", "-j", "link", "show", "p0").stdout)[0]
        mac = sh("ip", "-n", topo["r"], "-j", "link", "show", "a0").stdout
        assert show["address"] == json.loads(mac)[0]["address"], "p0 takes a0's MAC"
        assert show["linkinfo"] == {"info_kind": "fibre_port",
                                    "info_data": {"dev": "a0", "io": kind}}, show

        traffic_across(topo)
        unreach = sh("ip", "netns", "exec", topo["h1"], sys.executable, HELP, "icmp-error",
                     "10.9.9.9", check=False)
        assert unreach.stdout.strip() == "ENETUNREACH", unreach

        # A flap of r's a1 while a flood crosses: p1 loses its carrier and regains it, and
        # traffic resumes.
        before = counters(r, "p1")["tx"]["packets"]
        flood = in_ns(topo["h1"], sys.executable, HELP, "flood", "10.0.2.2", "9", "2")
        time.sleep(0.5)
        sh("ip", "-n", topo["r"], "link", "set", "a1", "down")
        time.sleep(0.3)
        assert "NO-CARRIER" in r.fibre("link", "show", "p1").stdout
        sh("ip", "-n", topo["r"], "link", "set", "a1", "up")
        flood.wait()
        assert helper(topo["h1"], "ping", "10.0.2.2", "20") == 0, "ping after a flap"
        time.sleep(0.3)
        stats = counters(r, "p1")
        assert stats["tx"]["packets"] > before + 100, stats
        text = r.fibre("-s", "link", "show", "p1").stdout
        assert "RX:" in text and "TX:" in text, text

        metrics = r.scrape()
        promtool(metrics)
        sent = re.search(r'fibre_link_tx_packets_total\{link="p1",dev="a1",io="%s"\} (\d+)' % kind,
                         metrics)
        assert sent and int(sent.group(1)) > 100, metrics
        assert re.search(r'fibre_drops_total\{reason="[A-Z_]+"\} \d+', metrics), metrics
        assert re.search(r"fibre_input_cache_misses_total [1-9]", metrics), metrics

        # Idle, the worker sleeps in poll(2).
        cpu = cpu_seconds(r.proc.pid)
        time.sleep(1)
        assert cpu_seconds(r.proc.pid) - cpu < 0.1, "fibred busy while idle"

        # Restarted with --state: the same configuration, and traffic resumes.
        config = [r.fibre("-d", "link", "show").stdout, r.fibre("addr", "show").stdout,
                  r.fibre("route", "show").stdout]
        r.stop()
        r = Router(topo["r"], tmp_path)
        again = [r.fibre("-d", "link", "show").stdout, r.fibre("addr", "show").stdout,
                 r.fibre("route", "show").stdout]
        assert again == config
        assert helper(topo["h1"], "ping", "10.0.2.2", "20") == 0, "ping after a restart"

        # The port link deleted: its port is closed, nothing crosses any more.
        r.fibre("link", "del", "p1")
        time.sleep(0.3)
        assert helper(topo["h1"], "ping", "10.0.2.2", "2") != 0, "ping after p1 is gone"
        assert "port closed" in r.log.read_text()
        assert helper(topo["h1"], "ping", "10.0.1.1", "4") == 0, "ping of the router after"
    finally:
        if r.proc.poll() is None:
            r.stop()


def test_fibred_tap_ports(topo, tmp_path):
    # `type tap`: fibred creates TAP devices a0 and a1 in r, which go to the hosts as eth0.
    if FIBRED is None:
        pytest.skip("fibred is not built")
    r = Router(topo["r"], tmp_path)
    try:
        r.fibre("link", "add", "p0", "type", "tap", "dev", "a0")
        r.fibre("link", "add", "p1", "type", "tap", "dev", "a1")
        batch = tmp_path / "config.batch"
        batch.write_text(CONFIG)
        r.fibre("-batch", str(batch))
        move_taps(topo)
        address_hosts(topo)
        assert helper(topo["h1"], "ping", "10.0.2.2", "20") == 0, "ping across fibre"
        assert helper(topo["h1"], "ping", "10.0.1.1", "4") == 0, "ping of the router"
        echo = in_ns(topo["h2"], sys.executable, HELP, "udp-echo", "7", "5")
        time.sleep(0.3)
        assert helper(topo["h1"], "udp-ask", "10.0.2.2", "7") == 0, "UDP across fibre"
        echo.kill()
        echo.wait()
        assert counters(r, "p1")["tx"]["packets"] > 0
    finally:
        r.stop()
