"""fibre-traffic live: the generator's frames counted exactly at the sink, over a bare veth
pair for each I/O kind, through the kernel as a router, and through `fibre forward` on each
I/O kind (topologies in traffic.py). Paced well below any of these paths' capacity, so that
nothing is lost even on a busy machine: every frame sent must arrive, in order, with valid
checksums, once.

Needs root, `ip netns` and a built fibre-traffic (and fibre for the last); skips with the
reason otherwise.
"""

from __future__ import annotations

import struct

import pytest

import traffic

# Frames per check, and their rate: a quarter of a second each.
COUNT = 5000
RATE = "20000"


def topo(tag: str, routed: bool, fibre: bool = False):
    why = traffic.why_not(fibre=fibre)
    if why:
        pytest.skip(why)
    return traffic.Topo(tag, routed)


def exact(t: dict, count: int, wire_bytes: int | None = None) -> None:
    """The sink got each of the `count` frames sent exactly once, in order, intact."""
    s = t["sink"]
    assert t["gen"]["sent"] == count and t["gen"]["dropped"] == 0, t["gen"]
    assert s["probes"] == count, s
    assert (s["gaps"], s["reordered"], s["corrupt"]) == (0, 0, 0), s
    assert (s["first_seq"], s["last_seq"]) == (0, count - 1), s
    assert s["latency_ns"]["samples"] == count and s["latency_ns"]["clock_skewed"] == 0, s
    assert s["latency_ns"]["p50"] <= s["latency_ns"]["p99"] <= s["latency_ns"]["max"], s
    if wire_bytes is not None:
        assert t["gen"]["bytes"] == wire_bytes, t["gen"]
        assert sum(x["bytes"] for x in s["sets"]) == wire_bytes, s


def paced(*args: str, count: int = COUNT) -> list[str]:
    return [*args, "--count", str(count), "--rate", RATE]


def write_pcap(path, frames: list[bytes]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i, 0, len(fr), len(fr)) + fr)


@pytest.mark.parametrize("kind", ["af_xdp", "af_packet"])
def test_gen_veth_sink_counts_exactly(kind, tmp_path):
    t = topo(f"v{kind[3]}", routed=False)
    try:
        # 64-byte IPv4 to two destination sets, counted per set.
        r = traffic.trial(t, kind, paced("--src", "10.0.0.1", "--dst", "198.18.0.0/16",
                                         "--dst", "198.19.0.0/16", "--dsts", "50"), 5)
        exact(r, COUNT, COUNT * 64)
        sets = {x["set"]: x["packets"] for x in r["sink"]["sets"]}
        assert set(sets) == {0, 1} and sum(sets.values()) == COUNT, sets
        assert min(sets.values()) > COUNT // 3, sets
        # IMIX: 7:4:1 of 64, 570 and 1518 bytes in every 12 frames.
        r = traffic.trial(t, kind, paced("--src", "10.0.0.1", "--dst", "198.18.0.0/15",
                                         "--imix", count=1200), 5)
        exact(r, 1200, 100 * (7 * 64 + 4 * 570 + 1518))
        # IPv6, its smallest frame with a probe.
        r = traffic.trial(t, kind, paced("--src", "fd00::2", "--dst", "2001:db8::/32",
                                         "--size", "82"), 5)
        exact(r, COUNT, COUNT * 82)
        # A capture replayed as it is: frames without probes, counted as `other`.
        pcap = tmp_path / "replay.pcap"
        frames = [bytes.fromhex(traffic.SINK_MAC.replace(":", "")) + bytes(6) + b"\x88\xb5"
                  + bytes([i]) * 46 for i in range(10)]
        write_pcap(pcap, frames)
        r = traffic.trial(t, kind, ["--pcap", str(pcap), "--count", "30"], 5)
        assert r["gen"]["sent"] == 30 and r["sink"]["other"] == 30, r
        assert r["sink"]["probes"] == 0 and r["sink"]["bytes"] == 30 * 64, r
    finally:
        t.close()


def test_gen_kernel_router_sink():
    t = topo("k", routed=True)
    try:
        traffic.kernel_router(t, log=lambda _: None)
        for args in (("--src", traffic.HOST4, "--dst", "198.18.0.0/15", "--dsts", "100"),
                     ("--src", traffic.HOST6, "--dst", "2001:db8::/32", "--size", "82")):
            r = traffic.trial(t, "af_xdp", paced(*args), 5)
            exact(r, COUNT)
    finally:
        t.close()


@pytest.mark.parametrize("kind", ["af_xdp", "af_packet"])
def test_gen_fibre_forward_sink(kind, tmp_path):
    t = topo(f"f{kind[3]}", routed=True, fibre=True)
    config = tmp_path / "router.batch"
    traffic.fibre_config(str(config))
    router = None
    try:
        router = traffic.FibreRouter(t, kind, str(config))
        traffic.wait_forwarding(t, router)
        for args in (("--src", traffic.HOST4, "--dst", "198.18.0.0/15", "--dsts", "100"),
                     ("--src", traffic.HOST6, "--dst", "2001:db8::/32", "--size", "82")):
            r = traffic.trial(t, "af_xdp", paced(*args), 5)
            exact(r, COUNT)
    finally:
        report = router.stop() if router else None
        t.close()
    assert report["forwarded"] >= 2 * COUNT, report
    ports = {p["link"]: p for p in report["ports"]}
    assert ports["a0"]["io"] == kind and ports["a1"]["counters"]["tx_full"] == 0, ports

