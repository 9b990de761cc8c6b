"""Resilient next-hop groups over netlink: `fibre` online (NHA_RES_GROUP in RTM_NEWNEXTHOP,
RTM_GETNEXTHOPBUCKET gets and filtered dumps) answers as `fibre` offline does for the same
commands. A bucket's idle time is the time since it was last used, so it is left out of the
comparison. The fibred fixture is test_pyroute2.py's; skips like it does.
"""

from __future__ import annotations

import re
import subprocess
import tempfile

from test_pyroute2 import binary, fibred  # noqa: F401  (fixture)

SETUP = [
    "link set lo up",
    "link add d1 type dummy",
    "link set d1 up",
    "address add 192.0.2.1/24 dev d1",
    "nexthop add id 1 via 192.0.2.2 dev d1",
    "nexthop add id 2 via 192.0.2.3 dev d1",
    "nexthop add id 3 blackhole",
    "nexthop add id 10 group 1/2,3 type resilient buckets 8 idle_timer 60 unbalanced_timer 30",
    "nexthop add id 11 group 1/2",
    "nexthop add id 12 group 3 type resilient buckets 4",
]
QUERIES = [
    "nexthop show",
    "nexthop show id 10",
    "nexthop bucket show",
    "nexthop bucket show id 10",
    "nexthop bucket show nhid 1",
    "nexthop bucket show dev lo",
    "nexthop bucket get id 10 index 7",
    "nexthop bucket get id 10 index 8",
    "nexthop bucket show id 11",
    "nexthop bucket show id 99",
    "nexthop replace id 10 group 1,3/2 type resilient",
    "nexthop bucket show id 10",
]


def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True)


def answers(prefix: list[str]) -> list[tuple[str, str, str, int]]:
    out = []
    for q in QUERIES:
        r = run(prefix + q.split())
        out.append((q, r.stdout, r.stderr, r.returncode))
    return out


def test_buckets_online_answer_as_offline(fibred):  # noqa: F811
    exe = binary("fibre")
    for c in SETUP:
        r = run([exe, "-n", fibred, *c.split()])
        assert r.returncode == 0, (c, r.stderr)
    online = [strip(r) for r in answers([exe, "-n", fibred])]
    # Offline: each query in a batch after the set-up and the changes queried before it.
    offline = []
    for i, q in enumerate(QUERIES):
        changes = [c for c in QUERIES[:i] if c.startswith("nexthop replace")]
        with tempfile.NamedTemporaryFile("w", suffix=".batch") as f:
            f.write("\n".join(SETUP + changes + [q]) + "\n")
            f.flush()
            r = run([exe, "-force", "-batch", f.name])
        offline.append(strip((q, r.stdout, r.stderr, r.returncode)))
    assert online == offline
    assert any("nhid 3" in o for q, o, *_ in online if q == "nexthop bucket show dev lo")


def strip(a: tuple[str, str, str, int]) -> tuple[str, str, str, bool]:
    """What the two runs share: idle times and batch line references go, a status is a
    success or not."""
    q, out, err, rc = a
    return (q, re.sub(r"idle_time [0-9.]+", "idle_time T", out), re.sub(r"Command failed \S+\n", "", err), rc == 0)
