"""The FPM benchmark's smoke run (`bench_fpm.py --routes 3000 --runs 1`): BIRD, bgpd, zebra,
the kernel and fibred set up, the live part and both replays measured and reported, so the
benchmark keeps working. What it checks is what must hold at any load: both sinks end up
holding every route, and the kernel refuses none of zebra's messages. Its timings are not
checked: a smoke run on a shared machine measures nothing.

Needs root, FRR (zebra, bgpd), BIRD 2 and the 2026 table; skips with the reason otherwise.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROUTES = 3000


def test_bench_fpm_smoke(tmp_path):
    plot = tmp_path / "fpm.svg"
    r = subprocess.run([sys.executable, os.path.join(HERE, "bench_fpm.py"), "--routes", str(ROUTES),
                        "--runs", "1", "--timeout", "120", "--plot", str(plot)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode == 1 and r.stdout.startswith("bench_fpm: ") and "\n" not in r.stdout.strip():
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run = re.search(r"^run 0: live first=\S+ kernel=\S+ fibred=\S+ \| replay fibred=\S+ kernel=\S+ "
                    r"kernel_errors=(\d+) kernel_routes=(\d+) ", r.stdout, re.M)
    assert run, r.stdout
    assert int(run.group(1)) == 0, r.stdout
    # At least the table's routes (the main table's prefix count may hold one more of zebra's).
    assert int(run.group(2)) >= ROUTES, r.stdout
    assert "(bar: >= 10x)" in r.stdout, r.stdout
    svg = plot.read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 2, svg[:500]
