#!/usr/bin/env python3
"""Small random IPv6 command files that stress the kernel's radix-tree leaves: source-specific
and plain routes over a narrow address space (so nodes split, borrow and repair often), added,
appended, replaced, changed and deleted, interleaved with `route get ... from ... iif` probes.
Each file goes through `ip -batch` in a fresh namespace and through `fibre -batch`; the two
outputs must be equal. Gateways carry distinct metrics so that no two routes become multipath
siblings (whose choice depends on the flow hash).

    python3 tests/differential/src6fuzz.py --seeds 1-100 [--ops 60] [--fibre PATH]
    python3 tests/differential/src6fuzz.py --seeds 61 --minimize    # smallest differing file

Needs root and network namespaces (see kernelns.py); exits 1 when any seed differs.
"""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernelns  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAD = ["link add d0 type dummy", "link set d0 up", "address add 2001:db8:ffff::1/64 dev d0"]
SRCS = ["2001:db8:2923::/120", "2001:db8:2923::/64", "2001:db8:5000::/48"]
GWS = ["2001:db8:ffff::2", "2001:db8:ffff::3", "2001:db8:ffff::4"]
METRICS = [1024, 100, 500]


def generate(seed: int, ops: int) -> list[str]:
    r = random.Random(seed)
    base = int(ipaddress.IPv6Address("2001:db8::"))

    def prefix() -> str:
        length = r.choice([32, 33, 34, 35, 36, 38, 40, 44, 48])
        a = base | (r.getrandbits(12) << (128 - 44))
        a &= ~((1 << (128 - length)) - 1) & ((1 << 128) - 1)
        return f"{ipaddress.IPv6Address(a)}/{length}"

    lines, live = list(HEAD), []
    for _ in range(ops):
        if r.random() < 0.45 or not live:
            p, s, g = prefix(), r.choice(SRCS) if r.random() < 0.5 else None, r.randrange(3)
            m = METRICS[g] + r.choice([0, 0, 7])
            verb = r.choice(["add", "add", "add", "append", "replace", "change"])
            lines.append(f"route {verb} {p}" + (f" from {s}" if s else "") + f" via {GWS[g]} metric {m}")
            live.append((p, s, m))
        else:
            p, s, m = r.choice(live)
            lines.append(f"route del {p}" + (f" from {s}" if s else "") + f" metric {m}")
        if r.random() < 0.5:
            for _ in range(4):
                d = ipaddress.IPv6Address(base | (r.getrandbits(16) << (128 - 48)) | 1)
                lines.append(f"route get {d} from {r.choice(['2001:db8:2923::1', '2001:db8:5000::1'])} iif d0")
    return lines


def outputs(lines: list[str], fibre: str) -> tuple[str, str]:
    text = "\n".join(lines) + "\n"
    with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        with kernelns.KernelNS(tag="src6") as k:
            r = k.batch(text, path, options=["-6"])
        ours = subprocess.run([fibre, "-6", "-force", "-batch", path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    return r.stdout + r.stderr, ours.stdout + ours.stderr


def minimize(lines: list[str], fibre: str) -> list[str]:
    """The first differing probe, with as few of the commands before it as still differ."""
    def differs(body: list[str]) -> bool:
        k, f = outputs(HEAD + body, fibre)
        return k != f

    body = lines[len(HEAD):]
    probes = [i for i, line in enumerate(body) if line.startswith("route get")]
    cut = next(i for i in probes if differs(body[: i + 1]))
    target, cur = body[cut], [x for x in body[:cut] if not x.startswith("route get")]
    n = 2
    while len(cur) >= 2:
        chunk = max(1, len(cur) // n)
        for s in range(0, len(cur), chunk):
            cand = cur[:s] + cur[s + chunk:]
            if differs(cand + [target]):
                cur, n = cand, max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(len(cur), n * 2)
    return HEAD + cur + [target]


def seeds(spec: str) -> list[int]:
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1-20")
    ap.add_argument("--ops", type=int, default=60)
    ap.add_argument("--fibre", default=os.path.join(ROOT, "target", "release", "fibre"))
    ap.add_argument("--minimize", action="store_true", help="print the smallest differing file of each differing seed")
    a = ap.parse_args()
    why = kernelns.available()
    if why:
        print(f"skipped: {why}")
        return 0
    bad = 0
    for seed in seeds(a.seeds):
        lines = generate(seed, a.ops)
        k, f = outputs(lines, a.fibre)
        if k == f:
            continue
        bad += 1
        print(f"seed {seed}: differs")
        print("\n".join(list(difflib.unified_diff(k.splitlines(), f.splitlines(), "kernel", "fibre", n=0, lineterm=""))[:12]))
        if a.minimize:
            print("\n".join(minimize(lines, a.fibre)))
    print(f"{len(seeds(a.seeds))} seeds, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
