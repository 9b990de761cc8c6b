"""fibre forwarding live between two namespaces, for each I/O kind:

    h1 (eth0 10.0.1.2) -- a0 [fibre in namespace r] a1 -- (eth0 10.0.2.2) h2

`fibre forward CONFIG --port a0=a0:KIND --port a1=a1:KIND` binds fibre's links to r's veths
(fibre's links are `type dummy` with ARP turned on, as a dummy is NOARP otherwise); for TAP,
fibre creates TAP devices a0 and a1 in r, which the test moves to the hosts as their eth0.
r's own stack has no addresses and does not forward, so whatever crosses is fibre's doing.
Checked: ping across fibre, ping of the router's address, UDP and TCP across, ping again
after a flap of r's link towards h2 and a path MTU learnt from fibre after that link's MTU
is lowered (veth kinds: fibre's link follows its host interface), that fibre uses no CPU to
speak of while idle, that it carries on when a1's host interface is removed and says so, and
the counters it prints when it stops (SIGTERM).

Offloads: the hosts' veths keep transmit checksum offload for AF_PACKET (whose port completes
CHECKSUM_PARTIAL frames) but have it off for AF_XDP (which cannot tell such frames; the
fibre-io README says why); TSO and GSO are off for both, since the hosts would otherwise hand
fibre 64 KiB TCP super-frames that no wire carries. A TAP without IFF_VNET_HDR offers the
host no offloads, so its frames arrive complete.

Needs root, `ip netns` and a built fibre; skips with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from binaries import binary

HERE = os.path.dirname(os.path.abspath(__file__))
HELP = os.path.join(HERE, "nethelp.py")
FIBRE = binary("fibre")

CONFIG = """\
link set lo up
link add a0 type dummy
link set a0 address 02:00:00:00:00:0a
link set a0 arp on
link set a0 up
link add a1 type dummy
link set a1 address 02:00:00:00:00:0b
link set a1 arp on
link set a1 up
addr add 10.0.1.1/24 dev a0
addr add 10.0.2.1/24 dev a1
"""


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


def why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if FIBRE is None:
        return "fibre is not built"
    if sh("ip", "netns", "list", check=False).returncode != 0:
        return "`ip netns` is not available"
    return None


@pytest.fixture
def topo():
    why = why_not()
    if why:
        pytest.skip(why)
    tag = f"fibre-io-{os.getpid()}"
    ns = {n: f"{tag}-{n}" for n in ("h1", "r", "h2")}
    try:
        for name in ns.values():
            sh("ip", "netns", "add", name)
            for k in ("all", "default"):
                sh("ip", "netns", "exec", name, "sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1")
            sh("ip", "-n", name, "link", "set", "lo", "up")
        yield ns
    finally:
        for name in ns.values():
            sh("ip", "netns", "del", name, check=False)


# Each host's link: (host, fibre's link and r's interface, fibre's MAC, host address, gateway).
HOSTS = (("h1", "a0", "02:00:00:00:00:0a", "10.0.1.2/24", "10.0.1.1"),
         ("h2", "a1", "02:00:00:00:00:0b", "10.0.2.2/24", "10.0.2.1"))


def wire_veths(ns: dict) -> None:
    """A veth pair per host: r's end named as fibre's link, the host's eth0."""
    for h, link, mac, _, _ in HOSTS:
        sh("ip", "-n", ns["r"], "link", "add", link, "address", mac, "type", "veth",
           "peer", "name", "eth0", "netns", ns[h])
        sh("ip", "-n", ns["r"], "link", "set", link, "up")


def move_taps(ns: dict) -> None:
    """The TAP devices fibre created in r, moved to the hosts as their eth0."""
    deadline = time.monotonic() + 5
    for h, link, _, _, _ in HOSTS:
        while sh("ip", "-n", ns["r"], "link", "show", link, check=False).returncode != 0:
            assert time.monotonic() < deadline, f"fibre did not create TAP {link}"
            time.sleep(0.05)
        sh("ip", "-n", ns["r"], "link", "set", link, "netns", ns[h])
        sh("ip", "-n", ns[h], "link", "set", link, "name", "eth0")


def address_hosts(ns: dict) -> None:
    for h, _, _, addr, gw in HOSTS:
        sh("ip", "-n", ns[h], "link", "set", "eth0", "up")
        sh("ip", "-n", ns[h], "addr", "add", addr, "dev", "eth0")
        sh("ip", "-n", ns[h], "route", "add", "default", "via", gw)


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_ns(ns: str, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(("ip", "netns", "exec", ns) + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def helper(ns: str, *args: str) -> int:
    return sh("ip", "netns", "exec", ns, sys.executable, HELP, *args, check=False).returncode


def traffic_across(ns: dict) -> None:
    """Ping across the router both ways and of the router (10.0.1.1), UDP and TCP across."""
    assert helper(ns["h1"], "ping", "10.0.2.2", "20") == 0, "ping across fibre"
    assert helper(ns["h1"], "ping", "10.0.1.1", "4") == 0, "ping of the router"
    assert helper(ns["h2"], "ping", "10.0.1.2", "4") == 0, "ping back across fibre"
    echo = in_ns(ns["h2"], sys.executable, HELP, "udp-echo", "7", "10")
    tcp = in_ns(ns["h2"], sys.executable, HELP, "tcp-echo", "7", "10")
    time.sleep(0.3)
    assert helper(ns["h1"], "udp-ask", "10.0.2.2", "7") == 0, "UDP across fibre"
    assert helper(ns["h1"], "tcp-ask", "10.0.2.2", "7", "200000") == 0, "TCP across fibre"
    for p in (echo, tcp):
        p.kill()
        p.wait()


@pytest.mark.parametrize("kind", ["af_packet", "af_xdp", "tap"])
def test_traffic_through_fibre(topo, kind, tmp_path):
    config = tmp_path / "config.batch"
    config.write_text(CONFIG)
    if kind != "tap":
        wire_veths(topo)
        for h in ("h1", "h2"):
            off = ["offloads-off", "eth0"] + (["tx"] if kind == "af_xdp" else [])
            assert helper(topo[h], *off) == 0
    fibre = in_ns(topo["r"], FIBRE, "-j", "forward", str(config),
                  "--port", f"a0=a0:{kind}", "--port", f"a1=a1:{kind}", "--duration", "60")
    try:
        if kind == "tap":
            move_taps(topo)
        address_hosts(topo)
        # The first ping also waits for fibre to have bound its ports.
        traffic_across(topo)
        if kind != "tap":
            # A flap of r's link towards h2: fibre's a1 loses its carrier and regains it (its
            # neighbours flushed), and traffic resumes.
            sh("ip", "-n", topo["r"], "link", "set", "a1", "down")
            time.sleep(0.3)
            sh("ip", "-n", topo["r"], "link", "set", "a1", "up")
            assert helper(topo["h1"], "ping", "10.0.2.2", "20") == 0, "ping after a flap"
            # r's link towards h2 gets a smaller MTU: fibre's a1 follows, and answers a larger
            # datagram with "fragmentation needed" naming it.
            sh("ip", "-n", topo["r"], "link", "set", "a1", "mtu", "1400")
            time.sleep(0.3)
            learnt = sh("ip", "netns", "exec", topo["h1"], sys.executable, HELP, "pmtu",
                        "10.0.2.2", "1450", check=False)
            assert learnt.stdout.strip() == "1400", learnt
        # Idle, the worker sleeps in poll(2): well under a tenth of a core.
        before = cpu_seconds(fibre.pid)
        time.sleep(1)
        assert cpu_seconds(fibre.pid) - before < 0.1, "fibre busy while idle"
        # The host side of a1 removed (for TAP, the device itself): fibre carries on, and its
        # port says the interface is gone.
        if kind == "tap":
            sh("ip", "-n", topo["h2"], "link", "del", "eth0")
        else:
            sh("ip", "-n", topo["r"], "link", "del", "a1")
        time.sleep(0.3)
        assert helper(topo["h1"], "ping", "10.0.1.1", "4") == 0, "ping of the router after"
    finally:
        fibre.send_signal(signal.SIGTERM)
        out, err = fibre.communicate(timeout=10)
    assert fibre.returncode == 0, err
    report = json.loads(out)
    assert report["forwarded"] > 100, report
    assert report["sent"]["echo_replies"] >= 1, report
    ports = {p["link"]: p for p in report["ports"]}
    assert set(ports) == {"a0", "a1"}
    assert ports["a0"]["state"] == "up" and ports["a1"]["state"] == "gone", ports
    for p in ports.values():
        assert p["io"] == kind, p
        c = p["counters"]
        assert c["rx_packets"] > 0 and c["tx_packets"] > 0, p
        assert c["rx_ring_drops"] == 0 and c["tx_full"] == 0, p
    if kind == "af_packet":
        assert ports["a0"]["counters"]["rx_csum_completed"] > 0, "UDP and TCP from h1 left partial"
    if kind == "tap":
        assert p["mode"] == "TAP", p
