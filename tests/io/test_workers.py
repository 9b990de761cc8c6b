"""fibred with two forwarding workers on AF_PACKET ports:

    h1 (eth0 10.0.1.2) -- a0 [fibred in namespace r, [workers] count = 2] a1 -- (eth0 10.0.2.2) h2

Each worker opens its own AF_PACKET sockets on a0 and a1, the receive sockets in one fanout
group per interface, so the kernel hands each flow to one worker. Checked: 64 UDP flows from
h1 to h2 at about 1000 datagrams a second all arrive (nothing lost at a low rate); both
workers received some (`fibre_worker_packets_total` in the metrics); the links' counters
(`fibre -s -j link show`) are the workers' summed: every frame the ports received entered
one worker's data plane; TCP still crosses; and fibred idle uses no CPU to speak of, both
workers asleep in poll(2) (/proc/PID/stat over two seconds).

Needs root, `ip netns` and built fibre and fibred; skips with the reason otherwise.
"""

from __future__ import annotations

import json
import re
import sys
import time

from test_fibred import CONFIG, Router, wire
from test_live import HELP, cpu_seconds, helper, in_ns, sh, topo  # noqa: F401 (topo: fixture)

FLOWS, EACH = 64, 20


def test_two_workers_share_the_flows(topo, tmp_path):
    wire(topo)
    for h in ("h1", "h2"):
        assert helper(topo[h], "offloads-off", "eth0") == 0
    config = tmp_path / "fibred.toml"
    config.write_text("[workers]\ncount = 2\n")
    r = Router(topo["r"], tmp_path, "--config", str(config))
    try:
        r.fibre("link", "add", "p0", "type", "port", "dev", "a0", "io", "af_packet")
        r.fibre("link", "add", "p1", "type", "port", "dev", "a1", "io", "af_packet")
        batch = tmp_path / "config.batch"
        batch.write_text(CONFIG)
        r.fibre("-batch", str(batch))
        assert "workers=2" in r.log.read_text()
        # Resolves h2 first: what follows must not wait for a neighbour.
        assert helper(topo["h1"], "ping", "10.0.2.2", "20") == 0, "ping across fibre"

        sink = in_ns(topo["h2"], sys.executable, HELP, "udp-count", "9", "1")
        time.sleep(0.3)
        assert helper(topo["h1"], "flows", "10.0.2.2", "9", str(FLOWS), str(EACH)) == 0
        out, _ = sink.communicate(timeout=30)
        assert int(out) == FLOWS * EACH, f"{out} of {FLOWS * EACH} datagrams arrived"

        tcp = in_ns(topo["h2"], sys.executable, HELP, "tcp-echo", "7", "10")
        time.sleep(0.3)
        assert helper(topo["h1"], "tcp-ask", "10.0.2.2", "7", "200000") == 0, "TCP across"
        tcp.kill()
        tcp.wait()

        # Both workers' counters are copied out at most 100 ms after they change.
        time.sleep(0.3)
        metrics = r.scrape()
        received = {w: int(n) for w, n in re.findall(
            r'fibre_worker_packets_total\{worker="(\d)",fate="received"\} (\d+)', metrics)}
        assert set(received) == {"0", "1"} and min(received.values()) > 0, received
        total = re.search(r'fibre_dataplane_packets_total\{fate="received"\} (\d+)', metrics)
        assert int(total.group(1)) == sum(received.values()), metrics
        links = json.loads(r.fibre("-s", "-j", "link", "show").stdout)
        ports = [l["stats64"]["rx"]["packets"] for l in links if l["ifname"] in ("p0", "p1")]
        assert sum(ports) == sum(received.values()), (ports, received)
        assert ports[0] >= FLOWS * EACH, ports

        cpu = cpu_seconds(r.proc.pid)
        time.sleep(2)
        assert cpu_seconds(r.proc.pid) - cpu < 0.1, "fibred busy while idle"
    finally:
        r.stop()
