"""The full Internet table from FRR's zebra into fibred over FPM, beside zebra installing the
same routes into the kernel.

    python3 tests/fpm/bench_fpm.py [--routes N] [--runs R] [--plot FILE.svg]   # root, FRR and BIRD

The route source is BGP, as in production: BIRD 2, in a namespace of its own, announces the
2026 table (../shared/data/rib-2026-06.tsv.gz, IPv4, or its first N prefixes) to FRR's bgpd
over a veth pair; bgpd hands the routes to zebra, which installs them into its namespace's
kernel and sends them over FPM (`dplane_fpm_nl`) to fibred. Per run:

1. **Live**: from BIRD's start, the kernel's route count (its main table's prefixes in
   /proc/net/fib_triestat) and fibred's (`fibre_fib_prefixes` of its metrics), polled every
   50 ms, until both hold the table. zebra's data plane hands a route to its FPM provider after
   its kernel provider, so fibred cannot finish before the kernel here: this part shows the
   pipeline end to end (and the curve the plot draws).
2. **The same bytes, each sink at its own speed**: fibred relays zebra's stream
   (`--fpm-relay`) to a recorder, so the run keeps exactly what zebra sent. zebra and bgpd are
   then stopped and their routes flushed, and the recording is replayed
   - into a fresh fibred over FPM, as fast as TCP carries it, until its metrics show the
     table (visible to lookups: the count is of the published FIB);
   - into the namespace's kernel: the netlink messages inside the FPM frames (zebra encodes
     them for the kernel and for FPM alike: next-hop groups first, then routes using them)
     sent on a NETLINK_ROUTE socket, 32 KiB per sendmsg (rtnetlink applies a message before
     sendmsg returns), until the last is applied; every error reply is counted.

Reported: each figure's median over the runs and the ratios: fibred's replay against zebra's
live install into the kernel (the issue's bar: >= 10x) and against the kernel taking the same
bytes at full speed. `uptime` is printed beside the figures; progress lines go to stderr.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lab  # noqa: E402
import svgplot  # noqa: E402

BGPD = "/usr/lib/frr/bgpd"
TABLE = os.path.join(HERE, "..", "..", "..", "shared", "data", "rib-2026-06.tsv.gz")
RTPROT_BGP = "186"
LIVE_PORT, REPLAY_PORT, RECORD_PORT = 2620, 2621, 2629
LIVE_METRICS, REPLAY_METRICS = 9101, 9102
#: How often the live part samples both counts.
POLL = 0.05
#: rtnetlink messages per sendmsg in the kernel replay: iproute2's batch buffer size.
NETLINK_CHUNK = 32 << 10


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def prefixes(n: int | None) -> list[str]:
    out = []
    with gzip.open(TABLE, "rt") as f:
        for line in f:
            if line.startswith("#") or ":" in line:
                continue
            out.append(line.split("\t", 1)[0])
            if n is not None and len(out) == n:
                break
    return out




def kernel_prefixes() -> int:
    """The main table's prefixes in the calling namespace's kernel."""
    text = open("/proc/net/fib_triestat").read()
    m = re.search(r"^Main:\n(?:\t.*\n)*?\tPrefixes:\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


class Recorder:
    """Accepts one FPM connection (fibred's relay) and keeps every byte it sends."""

    def __init__(self, port: int):
        self.listener = socket.create_server(("127.0.0.1", port))
        self.data = bytearray()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            while chunk := conn.recv(1 << 20):
                self.data += chunk


def netlink_messages(stream: bytes) -> list[bytes]:
    """The netlink messages inside a stream of FPM frames."""
    out, i = [], 0
    while i + 4 <= len(stream):
        _version, _type, length = struct.unpack(">BBH", stream[i:i + 4])
        body, i = stream[i + 4:i + length], i + length
        j = 0
        while j + 16 <= len(body):
            n = struct.unpack("<I", body[j:j + 4])[0]
            out.append(body[j:j + n])
            j += (n + 3) & ~3
    return out


def kernel_replay(messages: list[bytes]) -> tuple[float, int]:
    """Sends `messages` to the kernel; (seconds, error replies)."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.bind((0, 0))
    chunks, cur = [], bytearray()
    for m in messages:
        if len(cur) + len(m) > NETLINK_CHUNK:
            chunks.append(bytes(cur))
            cur = bytearray()
        cur += m + b"\0" * (-len(m) % 4)
    chunks.append(bytes(cur))
    errors = 0
    t = time.perf_counter()
    for c in chunks:
        s.send(c)
        errors += drain_errors(s)
    took = time.perf_counter() - t
    s.close()
    return took, errors


def drain_errors(s: socket.socket) -> int:
    """Error replies waiting on `s` (zebra's messages ask for no ack: only failures answer)."""
    n = 0
    while True:
        try:
            data = s.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return n
        j = 0
        while j + 20 <= len(data):
            length, kind = struct.unpack("<IH", data[j:j + 6])
            if kind == 2 and struct.unpack("<i", data[j + 16:j + 20])[0] != 0:
                n += 1
            j += (length + 3) & ~3


def wait_for(what: str, count, want: int, timeout: float, t0: float) -> float:
    deadline = time.time() + timeout
    last = 0.0
    while (n := count()) < want:
        if time.time() > deadline:
            raise RuntimeError(f"{what}: {n} of {want} after {timeout} s")
        if time.time() - last > 5:
            log(f"{what}: {n} of {want}")
            last = time.time()
        time.sleep(0.01)
    return time.time() - t0


def bird_conf(routes: list[str]) -> str:
    head = ("router id 10.0.1.2;\nprotocol device {}\n"
            "protocol bgp frr {\n  local 10.0.1.2 as 65002;\n  neighbor 10.0.1.1 as 65001;\n"
            "  ipv4 { import none; export all; next hop self; };\n}\nprotocol static internet {\n  ipv4;\n")
    return head + "".join(f"  route {p} blackhole;\n" for p in routes) + "}\n"


BGPD_CONF = """hostname fibre-bench
router bgp 65001
 bgp router-id 10.0.1.1
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.0.1.2 remote-as 65002
 address-family ipv4 unicast
  neighbor 10.0.1.2 activate
 exit-address-family
!
"""


def inner(args) -> None:
    """One run, inside the lab's namespace (its loopback holds the FPM and metrics ports)."""
    l = lab.Lab.__new__(lab.Lab)
    l.ns, l.dir, l.fibreds = args.ns, args.dir, {}
    bird: list[subprocess.Popen] = []
    try:
        run(args, l, bird)
    finally:
        for b in bird:
            b.kill()
        l.kill_frr()
        for name in list(l.fibreds):
            l.stop_fibred(name)


def run(args, l: lab.Lab, birds: list[subprocess.Popen]) -> None:
    routes = prefixes(args.routes)
    want = len(routes)
    # The connected route of eth1 is in both main tables beside the table's.
    rec = Recorder(RECORD_PORT)
    l.start_fibred("--metrics", f"127.0.0.1:{LIVE_METRICS}", "--fpm-relay", f"127.0.0.1:{RECORD_PORT}",
                   name="live", port=LIVE_PORT)
    l.start_frr([], fpm_port=LIVE_PORT, staticd=False)
    conf = os.path.join(l.dir, "bgpd.conf")
    with open(conf, "w") as f:
        f.write(BGPD_CONF)
    os.chmod(conf, 0o644)
    l.exec(BGPD, "-d", "-N", l.ns, "-f", conf, "-i", os.path.join(l.dir, "bgpd.pid"),
           "--log", f"file:{l.dir}/bgpd.log", check=True, capture_output=True)
    # zebra connects to fibred within a few seconds of its start.
    time.sleep(4)
    bconf = os.path.join(l.dir, "bird.conf")
    with open(bconf, "w") as f:
        f.write(bird_conf(routes))
    t0 = time.time()
    bird = subprocess.Popen(["ip", "netns", "exec", args.bird_ns, "bird", "-f", "-c", bconf,
                             "-s", os.path.join(l.dir, "bird.ctl")], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(l.dir, "bird.log"), "w"))
    birds.append(bird)
    base_k, base_f = kernel_prefixes(), lab.main_prefixes(LIVE_METRICS)
    samples: list[tuple[float, int, int]] = []
    done: dict[str, float] = {}
    last = 0.0
    while "kernel" not in done or "fibred" not in done:
        t = time.time() - t0
        k, f = kernel_prefixes() - base_k, lab.main_prefixes(LIVE_METRICS) - base_f
        samples.append((t, k, f))
        if "first" not in done and k + f > 0:
            done["first"] = t
        if "kernel" not in done and k >= want:
            done["kernel"] = t
        if "fibred" not in done and f >= want:
            done["fibred"] = t
        if t - last > 5:
            log(f"live: {t:.0f} s, kernel {k}, fibred {f} of {want}")
            last = t
        if t > args.timeout or bird.poll() is not None:
            raise RuntimeError(f"live: kernel {k}, fibred {f} of {want} after {t:.0f} s")
        time.sleep(POLL)
    first = done["first"]
    print(f"live first={first:.3f} kernel={done['kernel'] - first:.3f} fibred={done['fibred'] - first:.3f}",
          flush=True)
    with open(os.path.join(l.dir, "samples.tsv"), "w") as f:
        f.writelines(f"{t - first:.3f}\t{k}\t{f}\n" for t, k, f in samples)
    # The recording holds zebra's whole stream once fibred holds the table: give the relay's
    # last writes a moment, then stop zebra before BIRD, whose goodbye would withdraw it all.
    time.sleep(1)
    kill_pidfile(os.path.join(l.dir, "zebra.pid"))
    kill_pidfile(os.path.join(l.dir, "bgpd.pid"))
    bird.terminate()
    bird.wait(10)
    l.stop_fibred("live")
    rec.thread.join(10)
    stream = bytes(rec.data)
    log(f"recorded {len(stream)} bytes of FPM")
    if args.keep_stream:
        with open(args.keep_stream, "wb") as f:
            f.write(stream)
    # zebra killed leaves its routes in the kernel: cleared for the kernel's replay.
    time.sleep(0.5)
    flush_bgp(l)
    # fibred: a fresh one, the recording sent as fast as TCP carries it.
    l.start_fibred("--metrics", f"127.0.0.1:{REPLAY_METRICS}", name="replay", port=REPLAY_PORT)
    base_f = lab.main_prefixes(REPLAY_METRICS)
    s = socket.create_connection(("127.0.0.1", REPLAY_PORT))
    t0 = time.time()
    s.sendall(stream)
    fib = wait_for("replay into fibred", lambda: lab.main_prefixes(REPLAY_METRICS) - base_f, want, args.timeout, t0)
    s.close()
    l.stop_fibred("replay")
    messages = netlink_messages(stream)
    base_k = kernel_prefixes()
    took, errors = kernel_replay(messages)
    held = kernel_prefixes() - base_k
    print(f"replay fibred={fib:.3f} kernel={took:.3f} kernel_errors={errors} kernel_routes={held} "
          f"messages={len(messages)} bytes={len(stream)}", flush=True)
    flush_bgp(l)


def flush_bgp(l: lab.Lab) -> None:
    """Removes zebra's routes and next-hop groups from the namespace's kernel."""
    # Groups first: the kernel removes the routes that use them (iproute2 cannot flush those).
    for cmd in (["nexthop", "flush"], ["-4", "route", "flush", "proto", RTPROT_BGP]):
        r = subprocess.run(["ip", "-n", l.ns, *cmd], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"ip {' '.join(cmd)}: {r.stderr.strip()}")


def kill_pidfile(path: str) -> None:
    try:
        os.kill(int(open(path).read()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


def median(v: list[float]) -> float:
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--routes", type=int, default=None, help="the table's first N IPv4 prefixes (default: all)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--plot", help="write the live part's curves (first run) to this SVG file")
    p.add_argument("--keep-stream", help="write zebra's recorded FPM stream (first run) to this file")
    p.add_argument("--inner", action="store_true")
    p.add_argument("--ns")
    p.add_argument("--bird-ns")
    p.add_argument("--dir")
    args = p.parse_args()
    if args.inner:
        inner(args)
        return 0
    why = lab.can_run() or lab.frr_missing()
    if why is None and not os.access(BGPD, os.X_OK):
        why = "FRR's bgpd is missing"
    if why is None and subprocess.run(["which", "bird"], capture_output=True).returncode != 0:
        why = "BIRD 2 is not installed (apt-get install bird2; scripts/setup does it)"
    if why is None and not os.path.exists(TABLE):
        why = f"the table is absent ({TABLE})"
    if why:
        print(f"bench_fpm: {why}")
        return 1
    uptime = lambda: subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()  # noqa: E731
    n = len(prefixes(args.routes))
    print(f"bench_fpm: {n} IPv4 routes, BIRD -> bgpd -> zebra (FRR) -> kernel and -> fibred over FPM; "
          f"{args.runs} runs; {os.uname().nodename}; {uptime()}", flush=True)
    figures: dict[str, list[float]] = {}
    for r in range(args.runs):
        l = lab.Lab(f"bench{r}")
        bird_ns = f"{l.ns}-bird"
        try:
            subprocess.run(["ip", "netns", "add", bird_ns], check=True)
            subprocess.run(["ip", "-n", l.ns, "link", "set", "p1", "netns", bird_ns], check=True)
            for c in ("link set lo up", "link set p1 up", "addr add 10.0.1.2/24 dev p1"):
                subprocess.run(["ip", "-n", bird_ns, *c.split()], check=True)
            log(f"run {r}: starting")
            out = subprocess.run(
                ["ip", "netns", "exec", l.ns, sys.executable, __file__, "--inner", "--ns", l.ns,
                 "--bird-ns", bird_ns, "--dir", l.dir, "--timeout", str(args.timeout)]
                + (["--routes", str(args.routes)] if args.routes else [])
                + (["--keep-stream", args.keep_stream] if args.keep_stream and r == 0 else []),
                stdout=subprocess.PIPE, text=True)
            print(f"run {r}: {' | '.join(out.stdout.split(chr(10))).strip(' |')} ({uptime()})", flush=True)
            if out.returncode != 0:
                print(l.logs()[-3000:])
                return 1
            for line in out.stdout.splitlines():
                part, *kvs = line.split()
                for kv in kvs:
                    k, v = kv.split("=")
                    figures.setdefault(f"{part}.{k}", []).append(float(v))
            if r == 0 and args.plot:
                plot(os.path.join(l.dir, "samples.tsv"), args.plot, n)
        finally:
            kill_pidfile(os.path.join(l.dir, "bgpd.pid"))
            l.close()
            subprocess.run(["ip", "netns", "del", bird_ns], capture_output=True)
    m = {k: median(v) for k, v in figures.items()}
    print(f"\nmedians of {args.runs} runs, {n} routes ({uptime()}):")
    print(f"  live, from zebra's first route: kernel holds the table after {m['live.kernel']:.2f} s "
          f"({n / m['live.kernel']:,.0f} routes/s), fibred after {m['live.fibred']:.2f} s")
    print(f"  replay of zebra's {m['replay.messages']:,.0f} messages: fibred {m['replay.fibred']:.2f} s "
          f"({n / m['replay.fibred']:,.0f} routes/s), kernel {m['replay.kernel']:.2f} s "
          f"({n / m['replay.kernel']:,.0f} routes/s, {m['replay.kernel_errors']:.0f} errors)")
    print(f"  fibred (replay) vs zebra's install into the kernel: {m['live.kernel'] / m['replay.fibred']:.1f}x "
          f"(bar: >= 10x); vs the kernel taking the same bytes: {m['replay.kernel'] / m['replay.fibred']:.1f}x")
    return 0


def plot(samples: str, path: str, n: int) -> None:
    kernel, fibred = [], []
    for line in open(samples):
        t, k, f = line.split()
        if float(t) >= 0:
            kernel.append((float(t), int(k)))
            fibred.append((float(t), int(f)))
    svgplot.lines(path, f"{n:,} IPv4 routes from BGP: zebra into the kernel and into fibred over FPM",
                  "seconds from zebra's first route", "routes held",
                  {"kernel (zebra's netlink)": kernel, "fibred (zebra's FPM)": fibred})


if __name__ == "__main__":
    sys.exit(main())
