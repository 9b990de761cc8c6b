"""fibred's metrics (`--metrics ADDR:PORT`): the exposition at /metrics follows the routing
state and the requests answered, `promtool check metrics` (Prometheus's own linter, Debian's
`prometheus` package) accepts it, and the FPM and mirror families appear when those run.
The promtool check skips without promtool; the mirror part without root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import pytest

from binaries import binary


class Fibred:
    def __init__(self, *extra: str):
        if binary("fibred") is None or binary("fibre") is None:
            pytest.skip("fibre and fibred are not built (cargo build --release)")
        self.dir = tempfile.mkdtemp(prefix="fibre-metrics-")
        self.sock = os.path.join(self.dir, "fibred.sock")
        self.log = os.path.join(self.dir, "fibred.log")
        args = [binary("fibred"), "--socket", self.sock, "--no-dgram", "--metrics", "127.0.0.1:0", *extra]
        self.proc = subprocess.Popen(args, stderr=open(self.log, "w"))
        deadline = time.time() + 10
        while not (m := re.search(r"metrics listening address=(\S+)", open(self.log).read())):
            assert time.time() < deadline and self.proc.poll() is None, open(self.log).read()
            time.sleep(0.02)
        self.url = f"http://{m.group(1)}/metrics"

    def fibre(self, *args: str) -> None:
        r = subprocess.run([binary("fibre"), "-n", self.sock, *args], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    def scrape(self) -> str:
        with urllib.request.urlopen(self.url, timeout=5) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return r.read().decode()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def value(text: str, sample: str) -> float:
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no sample {sample}:\n{text}")


def promtool(text: str) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (apt-get install prometheus; scripts/setup does it)")
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_metrics_follow_the_state_and_the_requests():
    d = Fibred()
    try:
        d.fibre("link", "add", "eth1", "type", "dummy")
        d.fibre("link", "set", "eth1", "up")
        d.fibre("addr", "add", "10.0.1.1/24", "dev", "eth1")
        for i in range(5):
            d.fibre("route", "add", f"10.{i}.0.0/16", "via", "10.0.1.2")
        # Refused: the gateway is unreachable.
        assert subprocess.run([binary("fibre"), "-n", d.sock, "route", "add", "10.9.0.0/16", "via", "10.200.0.1"],
                              capture_output=True).returncode != 0
        text = d.scrape()
        # The five routes and the connected one.
        assert value(text, 'fibre_fib_prefixes{family="inet",table="254"}') == 6
        assert value(text, 'fibre_netlink_requests_total{type="RTM_NEWROUTE",result="ok"}') == 5
        assert value(text, 'fibre_netlink_requests_total{type="RTM_NEWROUTE",result="error"}') == 1
        assert value(text, 'fibre_addresses{family="inet"}') == 1
        assert value(text, "fibre_fib_publish_duration_seconds_count") >= 7
        assert "fibre_fpm_connected" not in text and "fibre_mirror_syncs_total" not in text
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(d.url.replace("/metrics", "/other"), timeout=5)
        assert e.value.code == 404
        promtool(text)
    finally:
        d.close()


def test_fpm_and_mirror_metrics():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 for a network namespace")
    ns = f"fibre-metrics-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    d = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        d = Fibred("--mirror", ns, "--fpm", "127.0.0.1:0")
        subprocess.run(["ip", "-n", ns, "route", "add", "blackhole", "192.0.2.0/24"], check=True)
        deadline = time.time() + 10
        while 'fibre_fib_prefixes{family="inet",table="254"} 1' not in (text := d.scrape()):
            assert time.time() < deadline, text
            time.sleep(0.1)
        assert value(text, "fibre_fpm_connected") == 0
        assert value(text, "fibre_mirror_syncs_total") >= 1
        promtool(text)
    finally:
        if d is not None:
            d.close()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
