"""Namespaces, routers and trials for fibre-traffic's tests and the forwarding benchmark.

    direct:  gen (trg0) ------------------------------------ (trs0) sink
    routed:  gen (trg0) -- (tri0) router (tro0) -- (trs0) sink

Each box is a network namespace named `<prefix>-<pid>-<tag>-<role>` (the prefix `traffic`, or
$TRAFFIC_NETNS_PREFIX to tell one user's from another's); the links are veth pairs
with every offload off (checksums, scatter-gather, TSO, GSO, GRO), so that each frame crosses
as one frame with a complete checksum, and IPv6 off in the generator's and the sink's
namespaces (their stacks stay quiet: the sink's `other` counts only what the router sends of
its own). The router is the kernel (`kernel_router`: addresses, forwarding on, rp_filter off,
the 64 gateways as permanent neighbours, default routes through gateway 0, optionally the
2026 table through `ip -batch`) or `fibre forward` on ports bound to tri0 and tro0
(`FibreRouter`, the same configuration as a fibre batch file). Routes send table prefixes to
gateway n = `asn % 64` (10.255.0.2 + n and fd00:fb::2 + n, MAC 02:fb:01:00:00:(2 + n), on
tro0's link): the sink receives frames to every MAC (its port sees all of them).

A trial (`trial`) starts a sink, waits for it to say it is ready, runs the generator for a
count or a duration at a rate, and returns both sides' JSON with the CPU time spent meanwhile
by each CPU and by fibre.

The sink's veth (trs0) runs its XDP program, and so the copy into the sink's socket, in NAPI
as softirq unless `trial` is asked otherwise: on the CPU whose transmit fills it, right after
that transmit (the kernel router's forwarding softirq, fibre's sendto). A threaded NAPI
there waits its turn behind the softirq that fills its 256-frame ring: the kernel router,
forwarding a softirq's budget (300 packets) or more at a time, overflowed it (`ip -s link`
showed the drops as tro0's TX drops) and was held at a quarter of its rate.

Run as `python3 traffic.py offloads-off DEV...` inside a namespace to turn a link's offloads
off (the harness does so through `ip netns exec`).
"""

from __future__ import annotations

import gzip
import json
import os
import select
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from binaries import binary  # noqa: E402

TRAFFIC = binary("fibre-traffic")
FIBRE = binary("fibre")

GEN_DEV, RIN_DEV, ROUT_DEV, SINK_DEV = "trg0", "tri0", "tro0", "trs0"
GEN_MAC = "02:fb:00:00:00:02"
RIN_MAC = "02:fb:00:00:00:01"
ROUT_MAC = "02:fb:00:00:01:01"
SINK_MAC = "02:fb:00:00:01:02"
RIN4, RIN6 = "10.254.0.1/24", "fd00:fe::1/64"
ROUT4, ROUT6 = "10.255.0.1/24", "fd00:fb::1/64"
HOST4, HOST6 = "10.254.0.2", "fd00:fe::2"
GATEWAYS = 64
# ethtool's legacy set commands (linux/ethtool.h): tx and rx checksumming, scatter-gather,
# TSO, GSO, GRO.
OFFLOADS = (0x17, 0x15, 0x19, 0x1F, 0x24, 0x2C)
# A sink quiet this long after the generator's last frame has everything the router will send.
SINK_IDLE = 0.3
USER_HZ = os.sysconf("SC_CLK_TCK")
NETNS_PREFIX = os.environ.get("TRAFFIC_NETNS_PREFIX", "traffic")


def sh(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


def why_not(fibre: bool = False) -> str | None:
    """Why the live tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if TRAFFIC is None:
        return "fibre-traffic is not built"
    if fibre and FIBRE is None:
        return "fibre is not built"
    if sh("ip", "netns", "list", check=False).returncode != 0:
        return "`ip netns` is not available"
    return None


def gateway(n: int, v6: bool) -> str:
    return f"fd00:fb::{2 + n:x}" if v6 else f"10.255.0.{2 + n}"


def gateway_mac(n: int) -> str:
    return f"02:fb:01:00:00:{2 + n:02x}"


def in_ns(ns: str, *args: str, cpu: int | None = None) -> list[str]:
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    return pin + ["ip", "netns", "exec", ns, *args]


class Topo:
    """The namespaces and veth pairs of one topology; `close` deletes them."""

    def __init__(self, tag: str, routed: bool):
        base = f"{NETNS_PREFIX}-{os.getpid()}-{tag}"
        self.routed = routed
        self.gen, self.sink = f"{base}-gen", f"{base}-sink"
        self.r = f"{base}-r" if routed else None
        self.names = [n for n in (self.gen, self.r, self.sink) if n]
        try:
            for n in self.names:
                sh("ip", "netns", "add", n)
                sh("ip", "-n", n, "link", "set", "lo", "up")
            for n in (self.gen, self.sink):
                for k in ("all", "default"):
                    sh("ip", "netns", "exec", n, "sysctl", "-qw",
                       f"net.ipv6.conf.{k}.disable_ipv6=1")
            if routed:
                self._pair(self.gen, GEN_DEV, GEN_MAC, self.r, RIN_DEV, RIN_MAC)
                self._pair(self.r, ROUT_DEV, ROUT_MAC, self.sink, SINK_DEV, SINK_MAC)
            else:
                self._pair(self.gen, GEN_DEV, GEN_MAC, self.sink, SINK_DEV, SINK_MAC)
        except BaseException:
            self.close()
            raise

    def _pair(self, a: str, adev: str, amac: str, b: str, bdev: str, bmac: str) -> None:
        sh("ip", "-n", a, "link", "add", adev, "address", amac, "type", "veth",
           "peer", "name", bdev, "address", bmac, "netns", b)
        for ns, dev in ((a, adev), (b, bdev)):
            sh("ip", "netns", "exec", ns, sys.executable, __file__, "offloads-off", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")

    def close(self) -> None:
        for n in self.names:
            sh("ip", "netns", "del", n, check=False)


def route_lines(table: str, out, progress=None) -> int:
    """Writes `route add PREFIX via GATEWAY` for every prefix of the 2026 table (gateway
    asn % 64; prefixes of length 0 and those overlapping the topology's own networks left
    out) to `out`; the number written."""
    n = 0
    with gzip.open(table, "rt") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            prefix, asn = line.split("\t")
            if prefix.endswith("/0") or prefix.startswith(("10.", "fd")):
                continue
            out.write(f"route add {prefix} via {gateway(int(asn) % GATEWAYS, ':' in prefix)}\n")
            n += 1
            if progress and n % 250_000 == 0:
                progress(f"  {n} route lines written")
    return n


def base_lines(in_dev: str, out_dev: str) -> list[str]:
    """What both routers are given besides the table: addresses, the gateways as permanent
    neighbours, default routes through gateway 0."""
    lines = [
        f"address add {RIN4} dev {in_dev}",
        f"address add {RIN6} dev {in_dev} nodad",
        f"address add {ROUT4} dev {out_dev}",
        f"address add {ROUT6} dev {out_dev} nodad",
    ]
    for n in range(GATEWAYS):
        for v6 in (False, True):
            lines.append(f"neigh add {gateway(n, v6)} lladdr {gateway_mac(n)} dev {out_dev} "
                         "nud permanent")
    lines += [f"route add default via {gateway(0, False)}",
              f"route add default via {gateway(0, True)}"]
    return lines


def kernel_router(topo: Topo, routes: str | None = None, log=print) -> None:
    """The kernel as the router in topo.r, with the table's routes file if given."""
    sh("ip", "netns", "exec", topo.r, "sysctl", "-qw", "net.ipv4.ip_forward=1",
       "net.ipv6.conf.all.forwarding=1", "net.ipv4.conf.all.rp_filter=0",
       "net.ipv4.conf.default.rp_filter=0", f"net.ipv4.conf.{RIN_DEV}.rp_filter=0",
       f"net.ipv4.conf.{ROUT_DEV}.rp_filter=0")
    batch = f"/tmp/{topo.r}.batch"
    with open(batch, "w") as f:
        f.write("\n".join(base_lines(RIN_DEV, ROUT_DEV)) + "\n")
    try:
        sh("ip", "-n", topo.r, "-batch", batch)
    finally:
        os.unlink(batch)
    if routes:
        t = time.monotonic()
        log(f"  kernel: ip -batch of the table into {topo.r} ...")
        sh("ip", "-n", topo.r, "-batch", routes)
        log(f"  kernel: table loaded in {time.monotonic() - t:.1f} s")


def fibre_config(path: str, routes: str | None = None) -> None:
    """fibre forward's configuration: links a0 (bound to tri0) and a1 (tro0) with the veths'
    MACs, then what `kernel_router` gives the kernel."""
    lines = ["link set lo up"]
    for link, mac in (("a0", RIN_MAC), ("a1", ROUT_MAC)):
        lines += [f"link add {link} type dummy", f"link set {link} address {mac}",
                  f"link set {link} arp on", f"link set {link} up"]
    lines += base_lines("a0", "a1")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
        if routes:
            with open(routes) as r:
                for chunk in iter(lambda: r.read(1 << 20), ""):
                    f.write(chunk)


class FibreRouter:
    """`fibre forward` in topo.r on tri0 and tro0 through ports of `kind`, until `stop`."""

    def __init__(self, topo: Topo, kind: str, config: str, cpu: int | None = None,
                 cache: str | None = None):
        args = [FIBRE, "-j", "forward", config, "--port", f"a0={RIN_DEV}:{kind}",
                "--port", f"a1={ROUT_DEV}:{kind}"]
        if cache:
            args += ["--input-cache", cache]
        self.proc = subprocess.Popen(in_ns(topo.r, *args, cpu=cpu), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def cpu_seconds(self) -> float:
        return task_seconds([self.proc.pid])

    def stop(self) -> dict:
        if self.proc.poll() is None:
            self.proc.terminate()
        out, err = self.proc.communicate(timeout=60)
        if self.proc.returncode != 0:
            raise RuntimeError(f"fibre forward failed ({self.proc.returncode}): {err.strip()}")
        return json.loads(out)


def task_seconds(pids: list[int]) -> float:
    """On-CPU seconds of every thread of processes `pids` (their schedstat, to the
    nanosecond; softirq work that ran in a thread's context included). `ip netns exec`
    and taskset exec, so a pid started through them is the program's."""
    ns = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                ns += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return ns / 1e9


def cpu_times() -> tuple[float, dict[int, dict[str, float]]]:
    """The monotonic clock and, per CPU, from /proc/stat (whole machine: namespaces do not
    divide it), seconds: `idle` (with iowait), `softirq`, `nice` and `steal`. Idle time is
    measured (the idle loop's entry and exit, NO_HZ), the others are tick-sampled (this
    kernel has no IRQ time accounting). Busy time is therefore taken as the wall time less
    idle, steal (the hypervisor's) and nice (niced tasks' user time: never the harness's,
    which runs nothing niced; other users' builds on a shared machine, whose system time
    /proc/stat does not tell apart and counts as busy) (`cpu_busy`): summing the
    ticks' user, system and softirq would miss most of the short softirq spells in which a
    CPU forwards a few packets between idle spells: the tick is stopped while a CPU idles
    and does not restart for an interrupt's spell, so few ticks land in them."""
    now = time.monotonic()
    out = {}
    for line in open("/proc/stat"):
        name, *v = line.split()
        if name.startswith("cpu") and name != "cpu":
            _user, nice, _system, idle, iowait, _irq, softirq, steal = (int(x) for x in v[:8])
            out[int(name[3:])] = {"idle": (idle + iowait) / USER_HZ, "softirq": softirq / USER_HZ,
                                  "nice": nice / USER_HZ, "steal": steal / USER_HZ}
    return now, out


def cpu_busy(before, after) -> dict[int, dict[str, float]]:
    """Per CPU, between two `cpu_times`: `busy` seconds and the differences of the others."""
    (t0, c0), (t1, c1) = before, after
    out = {}
    for c in c0:
        d = {k: c1[c][k] - c0[c][k] for k in c0[c]}
        d["busy"] = max(t1 - t0 - d["idle"] - d["steal"] - d["nice"], 0.0)
        out[c] = d
    return out


def link_drops(topo: Topo) -> dict[str, tuple[int, int]]:
    """Each veth's receive and transmit drops (`ip -s link`), by name: where a trial's lost
    frames went. On a veth, a frame its peer's XDP ring had no room for counts as a transmit
    drop of the sender, one the XDP program could not redirect (the socket's ring full) as a
    receive drop."""
    out = {}
    for ns in topo.names:
        for link in json.loads(sh("ip", "-n", ns, "-j", "-s", "link", "show").stdout):
            st = link.get("stats64")
            if link["ifname"] != "lo" and st:
                out[link["ifname"]] = (st["rx"]["dropped"], st["tx"]["dropped"])
    return out


def others_seconds() -> float:
    """CPU seconds (user and system, their reaped children's included) of every process of
    another session than this one's: other users' work on a shared machine. Kernel threads
    (session 0) are left out: the NAPI threads and ksoftirqd work for the benchmark."""
    ours = os.getsid(0)
    ticks = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            stat = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        # The fields after the command name (which may hold spaces), from the state on.
        f = stat[stat.rfind(")") + 2:].split()
        if int(f[3]) in (0, ours):
            continue
        ticks += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return ticks / USER_HZ


def napi_threads(dev: str) -> list[int]:
    """The pids of the threaded NAPI kthreads of `dev` (named napi/DEV-ID)."""
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                comm = open(f"/proc/{p}/comm").read().strip()
            except OSError:
                continue
            if comm.startswith(f"napi/{dev}-"):
                pids.append(int(p))
    return pids


# The real-time priority of threaded NAPI kthreads: above every ordinary task, as the softirq
# they stand for is (chrt's default range is 1..99; 50 is what threaded-NAPI guides use).
NAPI_PRIORITY = 50


def place_napi(ns: str, dev: str, cpu: int) -> bool:
    """Runs `dev`'s NAPI (where veth runs XDP, and so an AF_XDP port's receive copy) in a
    kthread pinned to `cpu` at SCHED_FIFO priority NAPI_PRIORITY, so that it preempts tasks
    as the softirq it replaces would; False when the device has no NAPI (no XDP program on
    it)."""
    if sh("ip", "netns", "exec", ns, "sh", "-c", f"echo 1 > /sys/class/net/{dev}/threaded",
          check=False).returncode != 0:
        return False
    pids = napi_threads(dev)
    for p in pids:
        sh("taskset", "-pc", str(cpu), str(p), check=False)
        sh("chrt", "-f", "-p", str(NAPI_PRIORITY), str(p), check=False)
    return bool(pids)


def place_rps(ns: str, dev: str, cpu: int) -> None:
    """Receive packet steering of `dev`'s queue to `cpu`: what arrives there without NAPI
    (veth without XDP queues on the sender's CPU otherwise) is processed on `cpu`."""
    sh("ip", "netns", "exec", ns, "sh", "-c",
       f"echo {1 << cpu:x} > /sys/class/net/{dev}/queues/rx-0/rps_cpus")


# How long to retry a port the kernel still holds: an AF_XDP socket's buffer pool is released
# by deferred work after its process exits, and a new socket on the same queue gets EBUSY
# until then.
BUSY_RETRY = 3.0


def start_sink(topo: Topo, kind: str, seconds: float, cpu: int | None = None,
               extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """A sink on trs0, returned once it has said it is ready."""
    deadline = time.monotonic() + BUSY_RETRY
    while True:
        try:
            return _start_sink(topo, kind, seconds, cpu, extra)
        except RuntimeError as e:
            if "busy" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _start_sink(topo: Topo, kind: str, seconds: float, cpu: int | None,
                extra: tuple[str, ...]) -> subprocess.Popen:
    p = subprocess.Popen(in_ns(topo.sink, TRAFFIC, "sink", "--port", f"{SINK_DEV}:{kind}",
                               "--duration", str(seconds), *extra, cpu=cpu),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    said = ""
    while "ready" not in said:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([p.stderr], [], [], left)[0]:
            p.kill()
            raise RuntimeError(f"the sink did not get ready: {said.strip()}")
        line = p.stderr.readline()
        said += line
        if not line and p.poll() is not None:
            raise RuntimeError(f"the sink failed: {said.strip()}")
    return p


def gen(topo: Topo, kind: str, args: list[str], cpu: int | None = None) -> dict:
    """Runs the generator on trg0 to the router's input MAC (direct: the sink's) until it is
    done; its report."""
    mac = RIN_MAC if topo.routed else SINK_MAC
    deadline = time.monotonic() + BUSY_RETRY
    while True:
        r = sh(*in_ns(topo.gen, TRAFFIC, "gen", "--port", f"{GEN_DEV}:{kind}", "--dst-mac",
                      mac, *args, cpu=cpu), check=False)
        if "busy" not in r.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if r.returncode != 0:
        raise RuntimeError(f"fibre-traffic gen failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def trial(topo: Topo, kind: str, args: list[str], seconds: float, cpus=(None, None),
          router: FibreRouter | None = None, sink_kind: str | None = None,
          sink_napi: int | None = None) -> dict:
    """One run of the generator (`args` say what and how long: at most `seconds`) into a
    fresh sink; both reports, the loss, and the CPU seconds spent meanwhile per CPU
    (`cpu_times`), by fibre and by other sessions' processes (`others_seconds`), and the
    wall time they were taken over. `cpus` = (the generator's and sink's CPU, the router's);
    `sink_napi`: a CPU to run the sink veth's NAPI on in a thread (`place_napi`) once the
    sink's program is attached, for a sink fed from another CPU with nothing in softirq
    beside it (the copy path). `drops`: the veths' drops meanwhile (`link_drops`), those
    that are not zero."""
    sink = start_sink(topo, sink_kind or kind, seconds + 10, cpu=cpus[0],
                      extra=("--idle", str(SINK_IDLE)))
    try:
        if sink_napi is not None:
            place_napi(topo.sink, SINK_DEV, sink_napi)
        d0, o0 = link_drops(topo), others_seconds()
        c0, f0 = cpu_times(), router.cpu_seconds() if router else 0.0
        g = gen(topo, kind, args, cpu=cpus[0])
        c1, f1 = cpu_times(), router.cpu_seconds() if router else 0.0
        o1, d1 = others_seconds(), link_drops(topo)
        out, err = sink.communicate(timeout=seconds + 20)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
    if sink.returncode != 0:
        raise RuntimeError(f"fibre-traffic sink failed: {err.strip()}")
    s = json.loads(out)
    sent = g["sent"]
    return {
        "gen": g,
        "sink": s,
        "sent": sent,
        "received": s["probes"],
        "loss": (sent - s["probes"]) / sent if sent else 0.0,
        "seconds": g["seconds"],
        "cpu": cpu_busy(c0, c1),
        "fibre_cpu": f1 - f0,
        "others_cpu": o1 - o0,
        "drops": {f"{dev} {way}": d1[dev][i] - d0[dev][i] for dev in d1 if dev in d0
                  for i, way in enumerate(("rx", "tx")) if d1[dev][i] != d0[dev][i]},
        "wall": c1[0] - c0[0],
    }


def wait_forwarding(topo: Topo, router: FibreRouter, timeout: float = 900, log=None) -> float:
    """Waits until fibre forwards (its configuration loaded, its ports bound): a few frames
    sent until they all arrive; the seconds it took."""
    t0 = time.monotonic()
    while True:
        if router.proc.poll() is not None:
            raise RuntimeError(f"fibre forward exited: {router.proc.stderr.read().strip()}")
        r = trial(topo, "af_xdp", ["--src", HOST4, "--dst", "198.18.0.0/15", "--count", "20",
                                   "--rate", "1000"], 2)
        waited = time.monotonic() - t0
        if r["received"] == 20:
            return waited
        if waited > timeout:
            raise RuntimeError(f"fibre forwards nothing after {waited:.0f} s")
        if log:
            log(f"  fibre: loading its configuration, {waited:.0f} s")
        time.sleep(1)


def offloads_off(dev: str) -> None:
    from nethelp import ethtool_set
    for cmd in OFFLOADS:
        ethtool_set(dev, cmd, 0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["offloads-off"]:
        for d in sys.argv[2:]:
            offloads_off(d)
        sys.exit(0)
    print(__doc__, file=sys.stderr)
    sys.exit(2)
