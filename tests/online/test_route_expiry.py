"""IPv6 route expiry as fibred reports it: dumps carry the remaining lifetime in RTA_CACHEINFO,
as the kernel's do (RTA_EXPIRES is for requests), so iproute2 decodes `expires` from fibre's
raw dump (`fibre route save` read back by `ip route showdump`) to the text it prints for the
kernel's own dump of the same route."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from test_pyroute2 import binary, fibre, fibred  # noqa: F401 (fixture)

ROUTE = "2001:db8:11::/48 dev eth0 expires 600"


def showdump(saved: bytes) -> list[str]:
    """The 2001:db8 routes of a saved dump as `ip -6 route showdump` prints them, with the
    seconds left (which depend on when each side was dumped) and the device (named by index
    in this namespace, not the dump's) masked."""
    r = subprocess.run(["ip", "-6", "route", "showdump"], input=saved, capture_output=True, check=True)
    lines = [line for line in r.stdout.decode().splitlines() if line.startswith("2001:db8:")]
    return [re.sub(r"dev \S+", "dev D", re.sub(r"expires \d+sec", "expires Nsec", line)) for line in lines]


def fibre_save(sock: str) -> bytes:
    r = subprocess.run([binary("fibre"), "-n", sock, "-6", "route", "save"], capture_output=True, check=True)
    return r.stdout


def test_ipv6_expiry_is_decoded_from_fibres_dumps(fibred, tmp_path):  # noqa: F811
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2")
    fibre(fibred, "link", "add", "eth0", "type", "dummy")
    fibre(fibred, "link", "set", "eth0", "up")
    fibre(fibred, "-6", "route", "add", *ROUTE.split())
    shown = showdump(fibre_save(fibred))
    assert shown == ["2001:db8:11::/48 dev D metric 1024 expires Nsec pref medium"], shown
    secs = int(re.search(r"expires (\d+)sec", fibre(fibred, "-6", "route", "show", "2001:db8:11::/48")).group(1))
    assert 590 <= secs <= 600

    if os.geteuid() != 0:
        return
    ns = f"fibre-ring-expiry-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
        return
    ip = ["ip", "-n", ns]
    try:
        subprocess.run(ip + ["link", "add", "eth0", "type", "veth", "peer", "name", "p0"], check=True)
        for name in ("p0", "eth0"):
            subprocess.run(ip + ["link", "set", name, "up"], check=True)
        subprocess.run(ip + ["-6", "route", "add", *ROUTE.split()], check=True)
        kernel = subprocess.run(ip + ["-6", "route", "save"], capture_output=True, check=True).stdout
        assert showdump(kernel) == shown
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
