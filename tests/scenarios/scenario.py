"""The kernel's routing scenarios as data (see README.md): loading, running and comparing.

A scenario is NAME.scn, an iproute2 batch file. Its first line says what fibre does with it:
`# fibre: pass` or `# fibre: xfail: REASON` (fibre does not pass it yet; record.py --mark-xfail
rewrites this line in place, so line numbers never move). A leading `# options: ...` line gives
global `ip` options (such as -6 or -j). An answer that depends on the multipath flow hash (an
IPv6 `route get ... fibmatch` lists the sibling the hash chose first) compares exactly when
the scenario sets `net.ipv4.fib_multipath_hash_seed`: fibre's hash is the kernel's. The
kernel's answer is NAME.expected.json, written by record.py.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "differential"))
import kernelns  # noqa: E402

HOW = ("ip -n NS [OPTIONS] -force -batch NAME.scn in a fresh network namespace with fibre's "
       "sysctls; links `type dummy` stand as veth pairs whose peers are up in a peer namespace, "
       "and `carrier off|on` as that peer down|up (tests/differential/kernelns.py)")


@dataclass
class Scenario:
    path: str
    name: str  # relative to HERE, without .scn
    options: list[str]
    xfail: str | None
    text: str

    @property
    def expected_path(self) -> str:
        return self.path[: -len(".scn")] + ".expected.json"

    @property
    def display(self) -> str:
        """How the file is named in "Command failed NAME:LINE" (fibre runs in its directory)."""
        return os.path.basename(self.path)

    def expected(self) -> dict | None:
        if not os.path.exists(self.expected_path):
            return None
        with open(self.expected_path) as f:
            return json.load(f)


def load_all() -> list[Scenario]:
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "**", "*.scn"), recursive=True)):
        with open(path) as f:
            text = f.read()
        options: list[str] = []
        xfail = None
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            body = line[1:].strip()
            if body.startswith("options:"):
                options = body.split(":", 1)[1].split()
            elif body.startswith("fibre:"):
                verdict = body.split(":", 1)[1].strip()
                if verdict.startswith("xfail:"):
                    xfail = verdict.split(":", 1)[1].strip()
        name = os.path.relpath(path, HERE)[: -len(".scn")]
        out.append(Scenario(path, name, options, xfail, text))
    return out


def answer(stdout: str, stderr: str, status: int) -> dict:
    return {"stdout": stdout, "stderr": stderr, "status": status}


def run_kernel(s: Scenario) -> dict:
    with kernelns.KernelNS("scn") as ns:
        r = ns.batch(s.text, s.display, options=s.options)
    return answer(r.stdout, r.stderr, r.status)


def run_fibre(fibre: str, s: Scenario) -> dict:
    p = subprocess.run([os.path.abspath(fibre), *s.options, "-force", "-batch", s.display], cwd=os.path.dirname(s.path),
                       capture_output=True, text=True, timeout=60)
    return answer(p.stdout, p.stderr, p.returncode)


def recording(s: Scenario, got: dict) -> dict:
    ipv = subprocess.run(["ip", "-V"], capture_output=True, text=True).stdout.strip()
    return {
        "scenario": s.name + ".scn",
        "options": s.options,
        **got,
        "recorded_with": {
            "kernel": platform.release(),
            "iproute2": ipv,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "how": HOW,
            "sysctls": {k.format(dev="all|default|lo"): v for k, v in kernelns.SYSCTLS}
            | dict(kernelns.GLOBAL_SYSCTLS),
        },
    }


# Remaining lifetimes ("expires 599sec", "expires":599) count down while the kernel runs a
# scenario (each helper that stands in for an ICMP message takes up to a second of real time;
# fibre's offline clock stands still), so they compare equal within this many seconds.
EXPIRES_SLACK = 10
_EXPIRES = re.compile(r'(expires |"expires":)(\d+)')


def same_line(x: str, y: str) -> bool:
    if x == y:
        return True
    xs, ys = _EXPIRES.split(x), _EXPIRES.split(y)
    if len(xs) != len(ys) or len(xs) == 1:
        return False
    # split() gives text, prefix, number, text, ...: numbers are every third item from 2.
    for i, (a, b) in enumerate(zip(xs, ys)):
        if i % 3 == 2:
            if abs(int(a) - int(b)) > EXPIRES_SLACK:
                return False
        elif a != b:
            return False
    return True


def differences(want: dict, got: dict, who: str = "fibre") -> list[str]:
    """Line-level differences between the kernel's recorded answer and another."""
    out = []
    for key in ("stdout", "stderr"):
        a, b = want[key].splitlines(), got[key].splitlines()
        if a == b:
            continue
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else "(nothing)"
            y = b[i] if i < len(b) else "(nothing)"
            if not same_line(x, y):
                out.append(f"{key} line {i + 1}: kernel {x!r}, {who} {y!r}")
                if len(out) >= 8:
                    break
    if want["status"] != got["status"]:
        out.append(f"exit status: kernel {want['status']}, {who} {got['status']}")
    return out
