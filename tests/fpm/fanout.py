"""Scale-out, measured: one FRR feeding eight fibreds over FPM on this machine.

    python3 tests/fpm/fanout.py [--routes N] [--fibreds K] [--runs R]     # root, FRR installed

In the lab's namespace (lab.py): fibred 0 takes zebra's FPM connection and relays it
(`--fpm-relay`) to fibreds 1..K-1; zebra (with dplane_fpm_nl) also installs into the
namespace's kernel, as it always does. staticd then starts with N static routes (spread over
four gateways). Measured from staticd's start: when the kernel holds all N routes (zebra's
own kernel path), and when each fibred does (its metrics' `fibre_fib_prefixes` of the main
table, polled every 10 ms). Then the last fibred restarts empty: how long until it holds the
N routes again (the relay has zebra replay). Prints each figure and the medians of R runs;
`uptime` beside them. staticd is the route source (Debian's FRR has no sharpd) and reads its
configuration slowly, so N stays in the thousands: the figures compare the fibreds with the
kernel fed by the same zebra, not zebra's own pace.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lab  # noqa: E402

METRICS_BASE = 9101


def statics(n: int) -> list[str]:
    out = []
    for i in range(n):
        out.append(f"ip route 10.{64 + i // 65536}.{i // 256 % 256}.{i % 256}/32 10.0.1.{2 + i % 4}")
    return out




def kernel_routes(ns: str) -> int:
    out = subprocess.run(["ip", "-n", ns, "-4", "route", "show", "proto", lab.ZSTATIC],
                         capture_output=True, text=True).stdout
    return out.count("\n")


def inner(args) -> None:
    """Runs inside the namespace (its loopback holds every FPM and metrics port)."""
    ns = args.ns
    l = lab.Lab.__new__(lab.Lab)
    l.ns, l.dir, l.fibreds = ns, args.dir, {}
    k = args.fibreds
    for i in range(k - 1, -1, -1):
        extra = ["--metrics", f"127.0.0.1:{METRICS_BASE + i}"]
        if i == 0:
            for j in range(1, k):
                extra += ["--fpm-relay", f"127.0.0.1:{lab.FPM_PORT + j}"]
        l.start_fibred(*extra, name=f"f{i}", port=lab.FPM_PORT + i)
    # The connected route is in every main table; the statics come on top.
    want = args.routes + 1
    l.start_frr([], fpm_port=lab.FPM_PORT, staticd=False)
    # zebra connects to fibred 0 within a few seconds of its start.
    time.sleep(4)
    t0 = time.time()
    with open(os.path.join(args.dir, "staticd.conf"), "w") as f:
        f.write("\n".join(statics(args.routes)) + "\n!\n")
    l.exec(lab.STATICD, "-d", "-N", ns, "-f", os.path.join(args.dir, "staticd.conf"),
           "-i", os.path.join(args.dir, "staticd.pid"), check=True, capture_output=True)
    done: dict[str, float] = {}
    while len(done) < k + 1 and time.time() - t0 < args.timeout:
        if "kernel" not in done and kernel_routes(ns) >= args.routes:
            done["kernel"] = time.time() - t0
        for i in range(k):
            if f"f{i}" not in done and lab.main_prefixes(METRICS_BASE + i) >= want:
                done[f"f{i}"] = time.time() - t0
        time.sleep(0.01)
    print("load", " ".join(f"{n}={v:.2f}" for n, v in sorted(done.items())), flush=True)
    # The last fibred restarts empty (no state): the relay connects to it again and has zebra
    # replay everything, which every fibred takes as a reconnect.
    last = k - 1
    l.stop_fibred(f"f{last}")
    os.unlink(os.path.join(args.dir, f"f{last}.state"))
    t1 = time.time()
    l.start_fibred("--metrics", f"127.0.0.1:{METRICS_BASE + last}", name=f"f{last}", port=lab.FPM_PORT + last)
    while lab.main_prefixes(METRICS_BASE + last) < want and time.time() - t1 < args.timeout:
        time.sleep(0.01)
    print(f"restart f{last}={time.time() - t1:.2f}", flush=True)
    l.kill_frr()
    for name in list(l.fibreds):
        l.stop_fibred(name)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--routes", type=int, default=1000)
    p.add_argument("--fibreds", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--inner", action="store_true")
    p.add_argument("--ns")
    p.add_argument("--dir")
    args = p.parse_args()
    if args.inner:
        inner(args)
        return 0
    why = lab.can_run() or lab.frr_missing()
    if why:
        print(f"fanout: {why}")
        return 1
    print(f"fanout: {args.routes} static routes, zebra -> fibred f0 -> {args.fibreds - 1} more by --fpm-relay; "
          f"{args.runs} runs; {os.uname().nodename}; {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    loads: dict[str, list[float]] = {}
    for r in range(args.runs):
        l = lab.Lab(f"fanout{r}")
        try:
            out = subprocess.run(
                ["ip", "netns", "exec", l.ns, sys.executable, __file__, "--inner", "--ns", l.ns, "--dir", l.dir,
                 "--routes", str(args.routes), "--fibreds", str(args.fibreds), "--timeout", str(args.timeout)],
                capture_output=True, text=True)
            print(f"run {r}: {out.stdout.strip()} {out.stderr.strip()[-500:]}", flush=True)
            for line in out.stdout.splitlines():
                if line.startswith("load "):
                    for kv in line.split()[1:]:
                        name, v = kv.split("=")
                        loads.setdefault(name, []).append(float(v))
        finally:
            l.close()
    med = {n: sorted(v)[len(v) // 2] for n, v in loads.items()}
    fibreds = [v for n, v in med.items() if n.startswith("f")]
    if "kernel" in med and fibreds:
        print(f"median: kernel {med['kernel']:.2f} s; fibreds first {min(fibreds):.2f} s, last {max(fibreds):.2f} s "
              f"({len(fibreds)} of {args.fibreds}); {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
