"""`fibre neigh` against the Linux kernel's `ip neigh`, offline and online.

The same steps (iproute2 batch text) run through `ip -batch` in a network namespace
(tests/differential/kernelns.py: `type dummy` links become veth pairs whose peer is up) and
through fibre. A neighbour request the kernel refuses ends an iproute2 batch (`exit(2)` in
`ipneigh_modify`), so the scenario is a list of steps, each its own batch:

- online: every step goes through `fibre -n SOCK -force -batch` to one fibred, the kernel runs
  every step in one namespace, and each step's stdout, stderr and status are compared;
- offline: the whole scenario as one file through `fibre -force -batch` and `ip -force
  -batch` (both stop at the same refused request).

Compared with the kernel's own quirks in mind: its neighbour tables are hash tables with a
random seed, so each step's lines are compared as sorted lists; it creates NOARP entries for
IPv6 multicast groups it reports by MLD (ff02::/16) by sending packets, which fibre does not,
so those lines are left out; fibre's entries never age, so the scenario uses only states the
kernel keeps for the test's duration (no delay, probe or incomplete).

Skips cleanly without root, network namespaces, iproute2 or the fibre binaries.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "differential"))
sys.path.insert(0, os.path.join(ROOT, "tests", "online"))

import kernelns  # noqa: E402
from test_pyroute2 import binary, fibred  # noqa: E402,F401  (fixture)

STEPS = [
    # Before any address or lo up the kernel's local table does not exist: every IPv4
    # address is "broadcast", and an entry without lladdr gets ff:ff:ff:ff:ff:ff.
    """link add d0 type dummy
link add d1 type dummy
link set d0 address 02:00:00:00:01:00
neigh add 10.0.0.5 lladdr 02:00:00:00:00:05 dev d0
neigh add 10.0.0.6 dev d0
neigh add 10.1.0.1 lladdr 02:00:00:00:00:01 dev d1 nud stale
neigh show nud all
""",
    """link set lo up
link set d0 up
link set d1 up
addr add 10.0.0.1/24 dev d0
neigh add 10.0.0.7 lladdr 02:00:00:00:00:07 dev d0 nud reachable
neigh add 10.0.0.8 lladdr 02:00:00:00:00:08 dev d0 nud stale
neigh add 10.0.0.9 lladdr 02:00:00:00:00:09 dev d0 nud noarp
neigh add 10.0.0.10 dev d0 nud failed
neigh add 10.0.0.14 lladdr 02:00:00:00:00:0e dev d0 nud none
neigh add 10.0.0.15 lladdr 02:00:00:00:00:0f dev d0 router
neigh add 10.0.0.16 lladdr 02:00:00:00:00:10 dev d0 extern_learn proto static
neigh add 2001:db8::5 lladdr 02:00:00:00:00:05 dev d0 router
neigh add 2001:db8::6 lladdr 02:00:00:00:00:06 dev d0 nud reachable
neigh add 10.0.0.17 lladdr 02:00:00:00:00:11:22 dev d0
neigh add 224.0.0.5 lladdr 02:00:00:00:00:05 dev d0
neigh add 10.0.0.19 lladdr 02:00:00:00:00:05 dev lo
neigh add proxy 10.0.0.20 dev d0
neigh add proxy 10.0.0.20 dev d0
neigh add proxy 2001:db8::20 dev d0
neigh add proxy 10.1.0.20 dev d1
neigh show
neigh show nud all
neigh show proxy
neigh show proxy dev d1
neigh show dev d0 nud permanent
neigh show 10.0.0.0/29
neigh show to 10.0.0.5
neigh show nud stale nud reach
neigh show nud 4
neigh show protocol static
neigh show 2001:db8::/32
neigh show default
neigh show 0/0
neigh get 10.0.0.5 dev d0
neigh get proxy 10.0.0.20 dev d0
""",
    "-6 neigh show\n",
    "-4 neigh show nud all\n",
    "-j neigh show nud all\n",
    "-j neigh show proxy\n",
    "-s neigh show\n",
    # Entries a failed request created stay, in state NONE.
    "neigh add 10.0.0.40 dev d0\n",
    "neigh add 10.0.0.40 dev d0\n",
    "neigh add 10.0.0.5 lladdr 02:00:00:00:00:05 dev d0\n",
    "neigh change 10.0.0.99 lladdr 02:00:00:00:00:99 dev d0\n",
    "neigh del 10.0.0.98 dev d0\n",
    "neigh del proxy 10.0.0.98 dev d0\n",
    "neigh get 10.0.0.77 dev d0\n",
    "neigh get proxy 10.0.0.77 dev d0\n",
    "neigh add 10.0.0.41 lladdr 02:00 dev d0\n",
    "neigh add 10.0.0.42 lladdr 02:00:00:00:00:05 dev nope\n",
    "neigh add 10.0.0.43 lladdr zz dev d0\n",
    "neigh add 10.0.0.44 lladdr 02:00:00:00:00:05\n",
    "neigh add 10.0.0.45 lladdr 02:00:00:00:00:05 dev d0 nud bogus\n",
    "neigh add 10.0.0.46 lladdr 02:00:00:00:00:05 dev d0 bogus\n",
    "neigh get 10.0.0.5\n",
    "neigh flush\n",
    "neigh show dev d0 dev d1\n",
    "neigh frob\n",
    """neigh change 10.0.0.15 lladdr 02:00:00:00:00:0f dev d0
neigh replace 10.0.0.5 lladdr 02:00:00:00:00:56 dev d0 nud stale
neigh replace 10.0.0.7 dev d0 nud failed
neigh replace 10.0.0.99 lladdr 02:00:00:00:00:99 dev d0
neigh replace 10.0.0.8 lladdr 02:00:00:00:00:88 dev d0 router nud reachable
neigh change 10.0.0.16 lladdr 02:00:00:00:00:10 dev d0
neigh del 10.0.0.99 dev d0
neigh del proxy 10.0.0.20 dev d0
neigh show nud all
neigh show proxy
""",
    "neigh replace 10.0.0.7 dev d0 nud permanent\n",
    "neigh show 10.0.0.7\n",
    # Carrier loss keeps PERMANENT entries and proxies; link down and deleting the last
    # IPv4 address drop everything of the link (the address: IPv4 only).
    """link set d0 carrier off
neigh show nud all
neigh show proxy
link set d0 carrier on
addr add 10.1.0.100/24 dev d1
neigh add 10.1.0.9 lladdr 02:00:00:00:00:09 dev d1
neigh add 2001:db8:1::9 lladdr 02:00:00:00:00:09 dev d1
addr del 10.1.0.100/24 dev d1
neigh show nud all dev d1
link set d0 down
neigh show nud all
neigh show proxy
link set d0 up
neigh add 10.0.0.50 lladdr 02:00:00:00:00:50 dev d0
neigh add proxy 10.0.0.51 dev d0
link del d0
neigh show nud all
neigh show proxy
""",
    "-s neigh flush dev d1\n",
    "neigh show nud all\n",
    "-s -s neigh flush to 2001:db8::/16 nud all\n",
    "-s neigh flush all\n",
    "neigh show nud all\n",
]


def comparable(out: str) -> list[str]:
    """Lines (or JSON objects) of one step, sorted, without the kernel's MLD multicast
    entries."""
    if out.startswith("["):
        objs = json.loads(out)
        return sorted(json.dumps(o, sort_keys=True) for o in objs
                      if not o.get("dst", "").startswith("ff02::"))
    return sorted(line for line in out.splitlines() if not line.startswith("ff02::"))


def need_kernel():
    why = kernelns.available()
    if why:
        pytest.skip(why)


def write(text: str) -> str:
    f = tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False)
    f.write(text)
    f.close()
    return f.name


def split_options(step: str) -> tuple[list[str], str]:
    """A step starting with options ("-j neigh show") is run as `ip -j -batch`."""
    opts = []
    words = step.split(" ")
    while words and words[0].startswith("-"):
        opts.append(words.pop(0))
    return opts, " ".join(words)


def test_steps_agree_with_the_kernel_online(fibred):  # noqa: F811
    need_kernel()
    exe = binary("fibre")
    if exe is None:
        pytest.skip("fibre is not built")
    failures = []
    with kernelns.KernelNS("neigh") as ns:
        for i, step in enumerate(STEPS):
            opts, text = split_options(step)
            k = ns.batch(text, "step.batch", options=opts)
            path = write(text)
            try:
                f = subprocess.run([exe, "-n", fibred, *opts, "-force", "-batch", path],
                                   capture_output=True, text=True)
            finally:
                os.unlink(path)
            ferr = f.stderr.replace(path, "step.batch")
            if (comparable(k.stdout), k.stderr, k.status) != (comparable(f.stdout), ferr, f.returncode):
                failures.append(f"step {i}: {step!r}\n--- kernel (status {k.status})\n{k.stdout}{k.stderr}"
                                f"--- fibre (status {f.returncode})\n{f.stdout}{ferr}")
    assert not failures, "\n".join(failures)


def test_whole_scenario_agrees_with_the_kernel_offline():
    need_kernel()
    exe = binary("fibre")
    if exe is None:
        pytest.skip("fibre is not built")
    text = "".join(s for s in STEPS if not s.startswith("-"))
    with kernelns.KernelNS("neigh") as ns:
        k = ns.batch(text, "all.batch")
    path = write(text)
    try:
        f = subprocess.run([exe, "-force", "-batch", path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    ferr = f.stderr.replace(path, "all.batch")
    assert (k.status, k.stderr) == (f.returncode, ferr)
    assert comparable(k.stdout) == comparable(f.stdout)


MONITORED = """link add d0 type dummy
link set lo up
link set d0 up
neigh add 10.0.0.2 lladdr 02:00:00:00:00:02 dev d0 router
neigh change 10.0.0.2 lladdr 02:00:00:00:00:02 dev d0
neigh change 10.0.0.2 lladdr 02:00:00:00:00:02 dev d0
neigh replace 10.0.0.2 lladdr 02:00:00:00:00:03 dev d0 nud stale
neigh replace 10.0.0.2 dev d0 nud reachable
neigh replace 10.0.0.2 dev d0 nud failed
neigh add 10.0.0.9 lladdr 02:00:00:00:00:09 dev d0 nud noarp
neigh del 10.0.0.9 dev d0
neigh add 10.0.0.10 dev d0 nud failed
neigh del 10.0.0.10 dev d0
neigh add proxy 10.0.0.20 dev d0
neigh add 2001:db8::1 lladdr 02:00:00:00:00:01 dev d0
neigh add 2001:db8::2 lladdr 02:00:00:00:00:02 dev d0 nud stale
neigh add 10.0.0.30 lladdr 02:00:00:00:00:30 dev d0 proto static extern_learn
neigh change 10.0.0.30 lladdr 02:00:00:00:00:30 dev d0
link set d0 carrier off
link set d0 carrier on
neigh add 10.0.0.31 lladdr 02:00:00:00:00:31 dev d0 nud reachable
link set d0 down
"""


def monitored(start: list[str], run) -> list[str]:
    """What a monitor started with `start` prints while `run()` changes the state."""
    mon = subprocess.Popen(start, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        run()
        time.sleep(0.5)
    finally:
        mon.terminate()
        out, _ = mon.communicate(timeout=10)
    return [line for line in out.splitlines() if "ff02::" not in line]


def same_notifications(kernel: list[str], ours: list[str]) -> bool:
    """The same lines, and for each address the same sequence (the kernel announces the
    entries a link event flushes in hash-table order)."""
    def per_dst(lines):
        d: dict[str, list[str]] = {}
        for line in lines:
            words = line.split()
            key = words[1] if words[0] == "Deleted" else words[0]
            d.setdefault(key, []).append(line)
        return d
    return sorted(kernel) == sorted(ours) and per_dst(kernel) == per_dst(ours)


def test_monitor_prints_what_ip_monitor_prints(fibred):  # noqa: F811
    need_kernel()
    exe = binary("fibre")
    if exe is None:
        pytest.skip("fibre is not built")
    with kernelns.KernelNS("neighmon") as ns:
        kernel = monitored(["ip", "-n", ns.name, "monitor", "neigh"],
                           lambda: ns.batch(MONITORED, "mon.batch"))
    path = write(MONITORED)
    try:
        ours = monitored([exe, "-n", fibred, "monitor", "neigh"],
                         lambda: subprocess.run([exe, "-n", fibred, "-force", "-batch", path],
                                                capture_output=True, check=True))
    finally:
        os.unlink(path)
    assert len(kernel) > 10
    assert same_notifications(kernel, ours), "\n".join(["--- kernel"] + kernel + ["--- fibre"] + ours)


def random_steps(seed: int, n: int) -> list[str]:
    """`n` random neighbour commands over a small pool of addresses and two links, with link
    and address events between them and a full `show` after every few: one step each."""
    import random
    rnd = random.Random(seed)
    steps = ["link add d0 type dummy\nlink add d1 type dummy\nlink set lo up\n"
             "link set d0 up\nlink set d1 up\naddr add 10.0.0.1/24 dev d0\n"]
    addrs = [f"10.0.0.{i}" for i in range(2, 8)] + [f"2001:db8::{i}" for i in range(2, 5)]
    states = ["permanent", "noarp", "reachable", "stale", "failed", "none"]
    has_addr = False
    for i in range(n):
        r = rnd.random()
        dev = rnd.choice(["d0", "d1"])
        a = rnd.choice(addrs)
        if r < 0.55:
            verb = rnd.choice(["add", "add", "replace", "change"])
            words = ["neigh", verb, a]
            if rnd.random() < 0.8:
                words += ["lladdr", f"02:00:00:00:00:{rnd.randrange(4):02x}"]
            if rnd.random() < 0.6:
                words += ["nud", rnd.choice(states)]
            if rnd.random() < 0.2:
                words.append("router")
            if rnd.random() < 0.15:
                words.append("extern_learn")
            words += ["dev", dev]
            step = " ".join(words)
        elif r < 0.7:
            step = f"neigh del {a} dev {dev}"
        elif r < 0.78:
            step = f"neigh {rnd.choice(['add', 'del'])} proxy {a} dev {dev}"
        elif r < 0.86:
            step = rnd.choice([f"link set {dev} down", f"link set {dev} up",
                               f"link set {dev} carrier off", f"link set {dev} carrier on"])
        elif r < 0.9:
            step = f"addr {'del' if has_addr else 'add'} 10.0.1.1/24 dev d1"
            has_addr = not has_addr
        else:
            # (No -s: the kernel's use ages grow with time, fibre's clock does not run.)
            step = rnd.choice(["neigh show nud all", "neigh show proxy",
                               "neigh show dev d0", "-j neigh show nud all"])
        steps.append(step + "\n")
        if i % 5 == 4:
            steps.append("neigh show nud all\nneigh show proxy\n")
    return steps


def test_random_steps_agree_with_the_kernel_online(fibred):  # noqa: F811
    """Random neighbour commands, link and address events (seeds from NEIGH_SEEDS, default
    "1"; NEIGH_STEPS commands each, default 120), step by step against the kernel."""
    need_kernel()
    exe = binary("fibre")
    if exe is None:
        pytest.skip("fibre is not built")
    seeds = [int(s) for s in os.environ.get("NEIGH_SEEDS", "1").split(",")]
    n = int(os.environ.get("NEIGH_STEPS", "120"))
    failures = []
    for seed in seeds:
        # Each seed on a fresh daemon state: delete what the previous seed made.
        subprocess.run([exe, "-n", fibred, "link", "del", "d0"], capture_output=True)
        subprocess.run([exe, "-n", fibred, "link", "del", "d1"], capture_output=True)
        subprocess.run([exe, "-n", fibred, "link", "set", "lo", "down"], capture_output=True)
        with kernelns.KernelNS("neighrnd") as ns:
            for i, step in enumerate(random_steps(seed, n)):
                opts, text = split_options(step)
                k = ns.batch(text, "step.batch", options=opts)
                path = write(text)
                try:
                    f = subprocess.run([exe, "-n", fibred, *opts, "-force", "-batch", path],
                                       capture_output=True, text=True)
                finally:
                    os.unlink(path)
                ferr = f.stderr.replace(path, "step.batch")
                if (comparable(k.stdout), k.stderr, k.status) != (comparable(f.stdout), ferr, f.returncode):
                    failures.append(f"seed {seed} step {i}: {step!r}\n--- kernel (status {k.status})\n"
                                    f"{k.stdout}{k.stderr}--- fibre (status {f.returncode})\n{f.stdout}{ferr}")
                    break
    assert not failures, "\n".join(failures)
