#!/usr/bin/env python3
"""Forwarding through the real I/O path, fibre beside the kernel, in one run:

    python3 tests/io/bench_forward.py [--quick] [--runs N] [--seconds S] [--steps N]
                                      [--family 4|6] [--no-table] [--no-cache] [--cache-only]
                                      [--json FILE]

Topology (tests/io/traffic.py): gen -- router -- sink, three network namespaces joined by
veth pairs with every offload off. fibre-traffic generates and sinks over AF_XDP (the same
instrument for every router); the router is (a) the Linux kernel in its namespace, (b)
`fibre forward` with AF_XDP ports, (c) `fibre forward` with AF_PACKET ports, each first with
the default routes only, then with the full 2026 table loaded (the kernel through
`ip -batch`, fibre from its batch file: the same `route add` lines); then (d) fibre's input
route cache through this path (issue 16): `--input-cache off|hints|on` on seed 000's
workload and on a flood of unique addresses, full table, AF_XDP: the rate each mode forwards
without loss, and the router's CPU per packet when every mode is offered the same rate
(CACHE_COMMON_RATE), which the threshold searches' spread does not move. `--cache-only` runs
the copy path and (d) alone.

CPU placement, on this 2-CPU machine: the generator and the sink on CPU 0, the router on CPU
1, all of it. For the kernel, the router's input veth steers its receive processing to CPU 1
(RPS: without XDP a veth queues what it receives on the sending CPU otherwise), so ip_rcv,
the route lookup, ip_forward and the transmit on the output veth run in CPU 1's softirq. For
fibre, the process is pinned to CPU 1, and for AF_XDP so is the input veth's NAPI (threaded
NAPI at SCHED_FIFO, as the softirq it stands for preempts tasks; veth runs the XDP program,
and so the copy into fibre's UMEM, in its NAPI), for AF_PACKET the same RPS as the kernel's
(the packet socket's receive runs where the backlog is processed). The sink's veth runs its
NAPI (the XDP redirect and copy into the sink's UMEM) as softirq on the CPU that transmits
into it, right after the transmit: CPU 1 for every router (the kernel's forwarding softirq,
fibre's sendto). Not in a NAPI thread: the kernel's forwarding softirq, which no thread
preempts, forwards a softirq's budget (net.core.netdev_budget, 300 packets) or more at a
time, and overflowed that thread's 256-frame ring (the kernel was held at a quarter of its
rate, its drops on the output veth). So CPU 1 does, for every router alike: the veth
receive of the input, the forwarding, the veth transmit of the output, and the sink veth's
receive; CPU 0 runs the generator and the sink processes (their system calls included).

Figures, for 64-byte frames (IPv4 UDP, FCS included; with --family 6, IPv6 UDP frames of 82
bytes, the smallest that carry the generator's probe) and the simple IMIX (7:4:1 of
64/570/1518 bytes):
- the rate: the highest offered rate the router forwards with loss below 0.1%, found by
  bisection over trials of --seconds at a paced rate, starting from what it forwards flat
  out (after one flat-out trial, discarded, that warms the router up); a rate fails only if
  two trials in a row lose 0.1% or more, so that one stall of the machine does not end the
  search low. Then --runs trials at that rate: their median, and their minimum and maximum
  (the run-to-run spread). A router that forwards everything the generator can offer is
  marked `>=`: the instrument, not the router, is the limit (the copy path's line says
  where that is).
- CPU 1 per packet: CPU 1's busy time (`traffic.cpu_busy`: the wall time less idle, steal
  and niced tasks' time, idle as the kernel measures it, not tick-sampled) per forwarded
  packet; and the router's share: that less the copy path's CPU 1 per packet (the sink
  veth's receive, the instrument's): the router's input veth receive, its forwarding and
  its output veth transmit, whoever runs them (softirq, NAPI threads, fibre's threads).
- others' CPUs: the CPU time other sessions' processes took during the runs, per second:
  0 on a quiet machine. The run says NOT QUIET at the start when the load average is above
  LOAD_QUIET, and its figures are then diagnostic only; the load average is printed beside
  every figure.
- latency p50/p99 (send to receive, both CLOCK_MONOTONIC) at half the kernel's rate.
- the veth copy path: gen -> veth -> sink, no router, the sink veth's receive on CPU 1 in a
  NAPI thread (nothing there holds it back: `Direct`): the instrument's own ceiling, and
  CPU 1's time per packet for one veth receive into an AF_XDP socket, which every router's
  CPU 1 figure includes once (the sink's side). The thread's wake-ups are in it, where the
  routers' sink receive runs inline after their transmit: the router's share is, if
  anything, understated by them.

Bars (MISSION.md, issue 15): fibre >= 1x the kernel's packets per second at 64 bytes and
IMIX, one worker. Progress goes to stderr, the figures to stdout (and --json). Each trial's
progress line ends with the veths' drops meanwhile (`traffic.link_drops`), which say where
lost frames went: `trg0 tx`, the router's input veth had no room (its XDP ring, or for the
kernel and AF_PACKET the receiving CPU's backlog); `tri0 rx`, fibre's AF_XDP socket was
full; `tro0 tx`, the sink veth's XDP ring was full; `trs0 rx`, the sink's socket was full
(the sink, on CPU 0, fell behind); fibre counts its own drops in its report. --quick: one
short run of each router without the table and without the cache workloads, a smoke test.
Results are recorded in tests/io/RESULTS.md with the machine, load, date and command.

Needs root, `ip netns`, built fibre and fibre-traffic (cargo build --release -p fibre-cli -p
fibre-traffic), and for the table the shared data directory (FIBRE_DATA or ../shared/data).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import traffic  # noqa: E402

LOSS = 0.001
# The 1-minute load average above which the machine is not quiet at the start: a quiet 2-CPU
# guest stays near 0, one build or test beside the benchmark brings it to 1 or more.
LOAD_QUIET = 0.5
# The latency's rate when no rate passed at all.
LATENCY_FLOOR = 10_000
# Trials beyond the bisection's steps to find a first rate that passes.
MAX_DOWN = 6
# The generator's and sink's CPU, the router's.
CPUS = (0, 1)
# Per family: the sizes (IPv6's smallest frame with the generator's probe is 82 bytes, and
# IMIX's 64-byte frames are raised to it), the destinations (1024 inside a benchmark range,
# RFC 2544's for IPv4, the documentation prefix for IPv6: the default route's), and the
# source and family arguments of the cache's workloads.
SIZES = {4: (("64", ["--size", "64"]), ("imix", ["--imix"])),
         6: (("82", ["--size", "82"]), ("imix", ["--imix"]))}
DESTS = {4: ["--src", traffic.HOST4, "--dst", "198.18.0.0/15", "--dsts", "1024"],
         6: ["--src", traffic.HOST6, "--dst", "2001:db8::/32", "--dsts", "1024"]}
CACHE_ARGS = {4: (["--src", traffic.HOST4], ["--family", "4"]),
              6: (["--src", traffic.HOST6], ["--family", "6"])}
CACHE_MODES = ("off", "hints", "on")
CACHE_BARS = (("seed000", 1.17), ("flood", 0.97))
# The offered rate at which every cache mode's CPU per packet is compared, per family: below
# what each mode forwards without loss on either workload (about 60-130 kpps on a quiet
# machine), so that all three forward the same packets and only their cost differs. The loss
# threshold's searches spread by 30% or more between trials (one stall of a few ms in a
# 2-second trial overflows the input veth's 256-frame ring and loses 0.2%, above LOSS), more
# than the bars' margins; the CPU at one rate does not depend on where a search stopped.
CACHE_COMMON_RATE = {4: 40_000, 6: 40_000}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load() -> str:
    return "load " + " ".join(open("/proc/loadavg").read().split()[:3])


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def table_path() -> str | None:
    p = os.environ.get("FIBRE_DATA")
    if p:
        f = os.path.join(p, "rib-2026-06.tsv.gz") if os.path.isdir(p) else p
        return f if os.path.isfile(f) else None
    d = os.path.dirname(os.path.abspath(__file__))
    while d != "/":
        f = os.path.join(d, "shared", "data", "rib-2026-06.tsv.gz")
        if os.path.isfile(f):
            return f
        d = os.path.dirname(d)
    return None


class Router:
    """One router in a routed topology: how to start it, place it, and account for it."""

    def __init__(self, name: str, topo: traffic.Topo, kind: str | None, routes: str | None,
                 tmp: str, cache: str | None = None):
        self.name, self.topo, self.kind = name, topo, kind
        self.fibre = None
        if kind is None:
            traffic.kernel_router(topo, routes, log=log)
            traffic.place_rps(topo.r, traffic.RIN_DEV, CPUS[1])
        else:
            config = os.path.join(tmp, "fibre.batch")
            traffic.fibre_config(config, routes)
            t = time.monotonic()
            self.fibre = traffic.FibreRouter(topo, kind, config, cpu=CPUS[1], cache=cache)
            took = traffic.wait_forwarding(topo, self.fibre, log=log)
            log(f"  {name}: forwarding after {took:.1f} s")
            if kind == "af_xdp":
                for dev in (traffic.RIN_DEV, traffic.ROUT_DEV):
                    if not traffic.place_napi(topo.r, dev, CPUS[1]):
                        raise RuntimeError(f"no NAPI thread for {dev}")
            else:
                traffic.place_rps(topo.r, traffic.RIN_DEV, CPUS[1])
            log(f"  {name}: up in {time.monotonic() - t:.1f} s")

    def trial(self, args: list[str], seconds: float) -> dict:
        return figures(traffic.trial(self.topo, "af_xdp", args + ["--duration", str(seconds)],
                                     seconds, cpus=CPUS, router=self.fibre))

    def stop(self) -> dict | None:
        return self.fibre.stop() if self.fibre else None


def figures(t: dict) -> dict:
    """A trial's rate, CPU 1's and CPU 0's busy time per forwarded packet, and the CPUs other
    users' processes took meanwhile (CPU-seconds per second)."""
    n = max(t["received"], 1)
    absent = {"busy": 0.0}
    t["rx_pps"] = t["received"] / max(t["seconds"], 1e-9)
    t["cpu1_ns"] = t["cpu"].get(CPUS[1], absent)["busy"] * 1e9 / n
    t["cpu0_ns"] = t["cpu"].get(CPUS[0], absent)["busy"] * 1e9 / n
    t["others"] = t["others_cpu"] / max(t["wall"], 1e-9)
    t["load"] = load()
    return t


class Direct:
    """The copy path: gen -> veth -> sink, nothing between. The sink veth's NAPI runs in a
    thread pinned to CPU 1 at SCHED_FIFO (`traffic.place_napi`), so that the split is the
    routed topologies' (the generator and the sink on CPU 0, the sink veth's receive on CPU
    1): here nothing else on CPU 1 runs in softirq to hold that thread back, as the kernel
    router's forwarding would."""

    name = "veth copy path"

    def __init__(self, topo: traffic.Topo):
        self.topo = topo

    def trial(self, args: list[str], seconds: float) -> dict:
        return figures(traffic.trial(self.topo, "af_xdp", args + ["--duration", str(seconds)],
                                     seconds, cpus=CPUS, sink_napi=CPUS[1]))


def progress(who: str, what: str, t: dict, rate: float | None) -> None:
    # What the generator sent beside what was asked: a starved generator falls short.
    sent = t["sent"] / max(t["seconds"], 1e-9)
    offered = "flat out" if rate is None else f"{rate / 1e3:8.1f} kpps"
    log(f"  {who:<22} {what:<8} offered {offered} (sent {sent / 1e3:6.1f}): forwarded "
        f"{t['rx_pps'] / 1e3:8.1f} kpps, "
        f"loss {100 * t['loss']:6.3f}%, CPU 1 {t['cpu1_ns']:7.0f} ns/pkt, others' "
        f"{t['others']:4.2f} CPUs; {t['load']}"
        + "".join(f"; {where} dropped {n}" for where, n in t["drops"].items()))


#: Where the search starts, as a share of the offered rate, when the router forwarded nothing
#: flat out.
START_IF_LIVELOCKED = 0.01


def attempt(router, args: list[str], what: str, rate: float, opts) -> dict:
    """A trial at `rate`, and a second one if the first lost LOSS or more: a rate the router
    cannot carry fails both, where one stall of the machine (the hypervisor's steal, another
    tenant, a timer) fails one. The passing trial, or the second failed one."""
    for _ in range(2):
        t = router.trial(args + ["--rate", f"{rate:.0f}"], opts.seconds)
        progress(router.name, what, t, rate)
        if t["loss"] < LOSS:
            break
    return t


def search(router, args: list[str], what: str, opts) -> tuple[float, bool]:
    """The highest paced rate forwarded with loss below LOSS, and whether the router took
    everything the generator offered flat out (then the rate is the instrument's)."""
    # A router's first packets of a workload meet cold caches, and its first trial a sink and
    # a generator starting beside it for the first time: one trial flat out first, discarded.
    router.trial(args, opts.seconds)
    flat = router.trial(args, opts.seconds)
    progress(router.name, what, flat, None)
    if flat["loss"] < LOSS:
        return flat["rx_pps"], True
    # Between nothing and what the generator offered flat out, starting from what the router
    # forwarded then (a router that livelocks under overload forwards less flat out than it
    # can paced: the bisection then goes up).
    lo, hi = 0.0, flat["sent"] / max(flat["seconds"], 1e-9)
    # A router that forwarded nothing flat out (livelocked) starts the search low instead.
    rate = flat["rx_pps"] or hi * START_IF_LIVELOCKED
    steps = 0
    # Down by 30% until a rate passes (at most MAX_DOWN times), then the bisection's steps.
    while steps < opts.steps or (not lo and steps < opts.steps + opts.down):
        t = attempt(router, args, what, rate, opts)
        steps += 1
        if t["loss"] < LOSS:
            # What the generator managed, if it fell short of the rate asked.
            lo = min(rate, t["sent"] / max(t["seconds"], 1e-9))
        else:
            hi = rate
        if lo and hi - lo < 0.02 * hi:
            break
        rate = (lo + hi) / 2 if lo else rate * 0.7
    return lo, False


def confirm(router, args: list[str], what: str, rate: float, opts) -> list[dict]:
    runs = []
    for _ in range(opts.runs):
        t = router.trial(args + ["--rate", f"{rate:.0f}"], opts.seconds)
        progress(router.name, what, t, rate)
        runs.append(t)
    return runs


def median(runs: list[dict], key) -> float:
    return statistics.median(key(t) for t in runs)


def rate_figures(router, what: str, args: list[str], opts, veth_ns: float | None) -> dict:
    """The search and the runs at its rate: the rate (median, min and max of the runs), the
    loss, CPU 1's time per packet and the router's share of it (CPU 1 less the sink veth's
    receive, `veth_ns`: the copy path's; None without it), and the CPUs other users took
    (medians)."""
    rate, capped = search(router, args, what, opts)
    runs = confirm(router, args, what, rate, opts) if rate else []
    if not runs:
        return {"rate": 0.0, "capped": False, "pps": 0.0, "pps_min": 0.0, "pps_max": 0.0,
                "loss": 1.0, "cpu1_ns": 0.0, "cpu0_ns": 0.0, "router_ns": None, "others": 0.0,
                "load": load()}
    pps = [t["rx_pps"] for t in runs]
    cpu1 = median(runs, lambda t: t["cpu1_ns"])
    return {"rate": rate, "capped": capped, "pps": statistics.median(pps),
            "pps_min": min(pps), "pps_max": max(pps), "loss": median(runs, lambda t: t["loss"]),
            "cpu1_ns": cpu1, "cpu0_ns": median(runs, lambda t: t["cpu0_ns"]),
            "router_ns": None if veth_ns is None else max(cpu1 - veth_ns, 0.0),
            "others": median(runs, lambda t: t["others"]), "load": runs[-1]["load"]}


def measure(router, what: str, args: list[str], opts, latency_rate: float | None,
            veth_ns: float | None) -> dict:
    fig = {"router": router.name, "size": what}
    fig.update(rate_figures(router, what, args, opts, veth_ns))
    fig["latency_rate"] = latency_rate or fig["pps"] / 2 or LATENCY_FLOOR
    lat = confirm(router, args, f"{what} lat", fig["latency_rate"], opts)
    fig["p50_us"] = median(lat, lambda t: t["sink"]["latency_ns"]["p50"]) / 1e3
    fig["p99_us"] = median(lat, lambda t: t["sink"]["latency_ns"]["p99"]) / 1e3
    fig["lat_loss"] = median(lat, lambda t: t["loss"])
    return fig


def ns(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def spread(f: dict) -> str:
    return f"{f['pps_min'] / 1e3:.1f}-{f['pps_max'] / 1e3:.1f}"


def row(f: dict, kernel: dict | None) -> str:
    ge = ">=" if f["capped"] else "  "
    ratio = f"{f['pps'] / kernel['pps']:5.2f}x" if kernel and kernel["pps"] else "   -  "
    return (f"| {f['router']:<22} | {f['size']:<5} | {ge}{f['pps'] / 1e3:8.1f} | "
            f"{spread(f):>13} | {ratio} | {100 * f['loss']:5.3f} | {f['cpu1_ns']:7.0f} | "
            f"{ns(f['router_ns']):>7} | {f['others']:4.2f} | "
            f"{f['latency_rate'] / 1e3:7.1f} | {f['p50_us']:7.1f} | {f['p99_us']:8.1f} | "
            f"{f['load']} |")


HEADER = ("| router | size | kpps (loss < 0.1%) | min-max | vs kernel | loss % | CPU 1 ns/pkt | "
          "router ns/pkt | others' CPUs | latency at kpps | p50 us | p99 us | load |\n"
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
          "| --- |")


def bench_routers(routes: str | None, label: str, opts, tmp: str, out: list,
                  veth: dict[str, float]) -> list[dict]:
    figs = []
    kernel_figs: dict[str, dict] = {}
    for name, kind in (("kernel", None), ("fibre af_xdp", "af_xdp"),
                       ("fibre af_packet", "af_packet")):
        log(f"\n== {name}, {label} ({uptime()})")
        topo = traffic.Topo(name.split()[-1][:6], routed=True)
        router = None
        try:
            router = Router(name, topo, kind, routes, tmp)
            for what, args in SIZES[opts.family]:
                k = kernel_figs.get(what)
                f = measure(router, what, DESTS[opts.family] + args, opts,
                            k["pps"] / 2 if k else None, veth.get(what))
                f["table"] = label
                if kind is None:
                    kernel_figs[what] = f
                figs.append(f)
                out.append(row(f, None if kind is None else k))
                log(out[-1])
        finally:
            if router:
                report = router.stop()
                if report:
                    log(f"  {name}: fibre forwarded {report['forwarded']}, dropped "
                        f"{report['dropped']['total']}")
            topo.close()
    return figs


def bench_cache(routes: str, opts, tmp: str, out: list, veth_ns: float | None) -> list[dict]:
    figs = []
    src, family = CACHE_ARGS[opts.family]
    size = ["--size", SIZES[opts.family][0][0]]
    workloads = (("seed000", ["--seed000", *src, *size]), ("flood", ["--flood", *family, *size]))
    for mode in CACHE_MODES:
        name = f"fibre af_xdp cache {mode}"
        log(f"\n== {name}, full table ({uptime()})")
        topo = traffic.Topo(f"c{mode}", routed=True)
        router = None
        try:
            router = Router(name, topo, "af_xdp", routes, tmp, cache=mode)
            for what, args in workloads:
                f = {"mode": mode, "workload": what}
                f.update(rate_figures(router, what, args, opts, veth_ns))
                common = CACHE_COMMON_RATE[opts.family]
                runs = confirm(router, args, f"{what} @{common // 1000}k", common, opts)
                f["common_ns"] = max(median(runs, lambda t: t["cpu1_ns"]) - (veth_ns or 0.0),
                                     0.0)
                f["common_loss"] = median(runs, lambda t: t["loss"])
                figs.append(f)
        finally:
            if router:
                report = router.stop()
                if report:
                    log(f"  {name}: input_cache {json.dumps(report.get('input_cache'))}")
            topo.close()
    for what in ("seed000", "flood"):
        off = next(f for f in figs if f["workload"] == what and f["mode"] == "off")
        for f in (x for x in figs if x["workload"] == what):
            ratio = f["pps"] / off["pps"] if off["pps"] else 0.0
            cpu = off["router_ns"] / f["router_ns"] if f["router_ns"] and off["router_ns"] else 0.0
            common = off["common_ns"] / f["common_ns"] if f["common_ns"] else 0.0
            out.append(f"| {what:<8} | {f['mode']:<5} | {'>=' if f['capped'] else '  '}"
                       f"{f['pps'] / 1e3:8.1f} | {spread(f):>13} | {ratio:5.3f}x | "
                       f"{ns(f['router_ns']):>7} | {cpu:5.3f}x | {f['common_ns']:7.0f} | "
                       f"{100 * f['common_loss']:5.3f} | {common:5.3f}x | {f['others']:4.2f} | "
                       f"{f['load']} |")
            log(out[-1])
    return figs


def opts_family(figs: dict) -> int:
    return figs.get("family", 4)


def report(figs: dict, out: list[str], cache_out: list[str]) -> None:
    """The tables and the bars' verdicts, on stdout."""
    print("\nThe instrument alone (gen -> veth -> sink over AF_XDP, the veth receive on CPU 1; "
          "its CPU 1 time per packet is the sink veth's receive, taken off every router's):\n")
    print("| size | kpps (loss < 0.1%) | min-max | CPU 1 ns/pkt | CPU 0 ns/pkt | others' CPUs | "
          "load |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for c in figs["copy_path"]:
        print(f"| {c['size']} | {'>=' if c['capped'] else ''}{c['pps'] / 1e3:.1f} | "
              f"{spread(c)} | {c['cpu1_ns']:.0f} | {c['cpu0_ns']:.0f} | "
              f"{c['others']:.2f} | {c['load']} |")
    print("\nRouters (one worker; the generator and sink on CPU 0, the router on CPU 1):\n")
    print(HEADER)
    print("\n".join(out))
    if cache_out:
        print("\nInput route cache through AF_XDP, full table, the smallest frames (issue 16):\n")
        common = CACHE_COMMON_RATE[opts_family(figs)] / 1e3
        print("| workload | cache | kpps (loss < 0.1%) | min-max | vs off | router ns/pkt | "
              f"CPU vs off | router ns/pkt at {common:.0f} kpps | loss % there | "
              "CPU there vs off | others' CPUs | load |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
              "| --- |")
        print("\n".join(cache_out))
    if figs.get("cache"):
        print("\nBars (issue 16): cache on vs off >= 1.17x packets/s on seed 000's workload, "
              ">= 0.97x under the flood:")
        for what, bar in CACHE_BARS:
            on, off = (next(f for f in figs["cache"] if f["workload"] == what and f["mode"] == m)
                       for m in ("on", "off"))
            r = on["pps"] / off["pps"] if off["pps"] else 0.0
            cpu = (off["router_ns"] / on["router_ns"]
                   if on["router_ns"] and off["router_ns"] else 0.0)
            verdict = "met" if r >= bar else f"missed by {100 * (1 - r / bar):.0f}%"
            capped = " (both at the instrument's ceiling)" if on["capped"] and off["capped"] else ""
            common = off["common_ns"] / on["common_ns"] if on["common_ns"] else 0.0
            print(f"  {what:<8} {r:.3f}x, {verdict}{capped}; the router's CPU per packet off/on "
                  f"{cpu:.3f}x at the rates found, {common:.3f}x at "
                  f"{CACHE_COMMON_RATE[opts_family(figs)] // 1000} kpps")
    bars = [f for f in figs["routers"] if f["router"].startswith("fibre")]
    if bars:
        print("\nBar: fibre >= 1x the kernel's packets per second, the smallest frames and IMIX:")
    for f in bars:
        k = next(x for x in figs["routers"] if x["router"] == "kernel"
                 and x["size"] == f["size"] and x["table"] == f["table"])
        if not k["pps"]:
            print(f"  {f['router']:<16} {f['size']:<5} {f['table']}: no kernel figure "
                  "(no rate passed)")
            continue
        r = f["pps"] / k["pps"]
        verdict = "met" if r >= 1 else f"missed by {100 * (1 - r):.0f}%"
        capped = " (both at the instrument's ceiling)" if f["capped"] and k["capped"] else ""
        print(f"  {f['router']:<16} {f['size']:<5} {f['table']}: {r:.2f}x, {verdict}{capped}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: one short trial per step, no table, no cache")
    ap.add_argument("--runs", type=int, help="trials at the found rate (median); default 3")
    ap.add_argument("--seconds", type=float, help="seconds per trial; default 2")
    ap.add_argument("--steps", type=int, help="bisection steps at most; default 6")
    ap.add_argument("--family", type=int, choices=(4, 6), default=4,
                    help="the traffic's address family; default 4")
    ap.add_argument("--no-table", action="store_true", help="without the full table")
    ap.add_argument("--no-cache", action="store_true", help="without the input cache workloads")
    ap.add_argument("--cache-only", action="store_true",
                    help="the copy path and the input cache workloads only, no router comparison")
    ap.add_argument("--json", help="also write every figure to this file")
    opts = ap.parse_args()
    quick = opts.quick
    opts.runs = opts.runs or (1 if quick else 3)
    opts.seconds = opts.seconds or (0.2 if quick else 2.0)
    opts.steps = opts.steps if opts.steps is not None else (1 if quick else 6)
    opts.down = 1 if quick else MAX_DOWN
    why = traffic.why_not(fibre=True)
    if why:
        log(f"bench_forward: skipped: {why}")
        return 0
    if (os.cpu_count() or 1) < 2:
        log("bench_forward: skipped: needs 2 CPUs (the instrument's and the router's)")
        return 0
    table = None if (quick or opts.no_table) else table_path()
    if not (quick or opts.no_table) and table is None:
        log("bench_forward: no rib-2026-06.tsv.gz (FIBRE_DATA or ../shared/data): "
            "running without the table")
    started = time.monotonic()
    print(f"# bench_forward {' '.join(sys.argv[1:])}\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"Linux {os.uname().release}, {os.cpu_count()} CPUs; {uptime()}")
    busy = os.getloadavg()[0]
    if busy > LOAD_QUIET:
        print(f"NOT QUIET: the 1-minute load average is {busy:.2f} at the start (quiet: "
              f"{LOAD_QUIET} or less): other tasks share the CPUs, the figures below are "
              "diagnostic only (\"others' CPUs\": how many CPUs other users' processes took).")
    out: list[str] = []
    figs: dict = {"family": opts.family}
    with tempfile.TemporaryDirectory(prefix="traffic-bench-") as tmp:
        log(f"== veth copy path ({uptime()})")
        topo = traffic.Topo("copy", routed=False)
        try:
            copy = []
            for what, args in SIZES[opts.family]:
                c = {"size": what}
                c.update(rate_figures(Direct(topo), what, DESTS[opts.family] + args, opts, 0.0))
                copy.append(c)
        finally:
            topo.close()
        figs["copy_path"] = copy
        # The sink veth's receive per packet, for the sizes the copy path has a figure for.
        veth = {c["size"]: c["cpu1_ns"] for c in copy if c["pps"]}
        figs["routers"] = ([] if opts.cache_only else
                           bench_routers(None, "default routes", opts, tmp, out, veth))
        cache_out: list[str] = []
        if table:
            routes = os.path.join(tmp, "routes.batch")
            log(f"\n== writing the table's route lines from {table} ...")
            with open(routes, "w") as f:
                n = traffic.route_lines(table, f, progress=log)
            log(f"  {n} routes")
            if not opts.cache_only:
                figs["routers"] += bench_routers(routes, f"full table ({n} routes)", opts, tmp,
                                                 out, veth)
            if not opts.no_cache:
                figs["cache"] = bench_cache(routes, opts, tmp, cache_out,
                                            veth.get(SIZES[opts.family][0][0]))
    report(figs, out, cache_out)
    print(f"\n{uptime()}; {time.monotonic() - started:.0f} s in all")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(figs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
