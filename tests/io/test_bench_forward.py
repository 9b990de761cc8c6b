"""The forwarding benchmark's smoke run (`bench_forward.py --quick`): every router and the
copy path set up, measured once and reported, so that the benchmark keeps working. Its figures
are not checked: a smoke run on a shared machine measures nothing.

Needs root, `ip netns`, built fibre and fibre-traffic; skips with the reason otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import traffic

HERE = os.path.dirname(os.path.abspath(__file__))


def test_bench_forward_quick():
    why = traffic.why_not(fibre=True)
    if why:
        pytest.skip(why)
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs")
    r = subprocess.run([sys.executable, os.path.join(HERE, "bench_forward.py"), "--quick"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    for router in ("kernel", "fibre af_xdp", "fibre af_packet"):
        for size in ("64", "imix"):
            assert any(line.startswith(f"| {router} ") and f"| {size} " in line
                       for line in out.splitlines()), (router, size, out)
    assert "Bar: fibre >= 1x" in out and out.count("default routes:") == 4, out
    assert "The instrument alone" in out, out
