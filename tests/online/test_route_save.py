"""`fibre route save` / `route restore` against the kernel's `ip route save` / `ip route restore`:
a file the kernel saves restores into fibred, and a file fibre saves restores into the kernel,
each giving the same `route show table all` (IPv4; links are veth pairs in the namespace and
dummies in fibre, created in the same order so interface indexes agree)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from test_pyroute2 import binary, fibre, fibred  # noqa: F401 (fixture)

SETUP = [
    "link set eth0 up",
    "addr add 10.0.0.1/24 dev eth0",
    "route add 10.1.0.0/16 via 10.0.0.2",
    "route add blackhole 10.9.0.0/16",
    "route add 10.2.0.0/16 dev eth0 src 10.0.0.1 metric 5",
    "route add 10.3.0.0/16 nexthop via 10.0.0.2 weight 2 nexthop via 10.0.0.3",
]



def test_route_save_and_restore_interoperate_with_the_kernel(fibred, tmp_path):  # noqa: F811
    if shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("needs iproute2 and root for a network namespace")
    ns = f"fibre-daemon-save-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
        pytest.skip("cannot create a network namespace")
    ip = ["ip", "-n", ns]
    try:
        subprocess.run(ip + ["link", "add", "eth0", "type", "veth", "peer", "name", "p0"], check=True)
        subprocess.run(ip + ["link", "set", "p0", "up"], check=True)
        for name in ("p0", "eth0"):  # the kernel numbered the peer first
            fibre(fibred, "link", "add", name, "type", "dummy")
        fibre(fibred, "link", "set", "eth0", "up")
        fibre(fibred, "addr", "add", "10.0.0.1/24", "dev", "eth0")
        for c in SETUP:
            subprocess.run(ip + c.split(), check=True)
        kernel_file = tmp_path / "kernel.save"
        with open(kernel_file, "wb") as f:
            subprocess.run(ip + ["route", "save"], stdout=f, check=True)
        assert kernel_file.read_bytes()[:4] == (0x45311224).to_bytes(4, "little")

        # Kernel -> fibre.
        with open(kernel_file, "rb") as f:
            r = subprocess.run([binary("fibre"), "-n", fibred, "route", "restore"], stdin=f, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        want = subprocess.run(ip + ["-4", "route", "show", "table", "all"], capture_output=True, text=True, check=True).stdout
        assert fibre(fibred, "-4", "route", "show", "table", "all") == want

        # Fibre -> kernel.
        fibre_file = tmp_path / "fibre.save"
        with open(fibre_file, "wb") as f:
            r = subprocess.run([binary("fibre"), "-n", fibred, "route", "save"], stdout=f, stderr=subprocess.PIPE)
        assert r.returncode == 0, r.stderr
        # Byte for byte the kernel's file, but for the header fields that name the dump
        # (flags, sequence, port).
        def messages(b: bytes) -> list[bytes]:
            out, off = [], 4
            while off < len(b):
                ln = int.from_bytes(b[off:off + 4], "little")
                out.append(b[off:off + 4] + b[off + 16:off + ln])
                off += (ln + 3) & ~3
            return out

        assert messages(fibre_file.read_bytes()) == messages(kernel_file.read_bytes())
        # Into a fresh namespace with the same links and address.
        subprocess.run(["ip", "netns", "del", ns], check=True)
        subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(ip + ["link", "add", "eth0", "type", "veth", "peer", "name", "p0"], check=True)
        subprocess.run(ip + ["link", "set", "p0", "up"], check=True)
        subprocess.run(ip + ["link", "set", "eth0", "up"], check=True)
        subprocess.run(ip + ["addr", "add", "10.0.0.1/24", "dev", "eth0"], check=True)
        with open(fibre_file, "rb") as f:
            r = subprocess.run(ip + ["route", "restore"], stdin=f, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        got = subprocess.run(ip + ["-4", "route", "show", "table", "all"], capture_output=True, text=True, check=True).stdout
        assert got == want
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


# Routes whose dump order puts a gateway before the route that reaches it, and two routes that
# differ only by their gateway (made with `ip route prepend`).
ORDER = [
    "route add 192.168.0.0/16 dev eth0",
    "route add 10.0.0.0/8 via 192.168.1.1",
    "route add 10.0.0.0/8 via 192.168.1.2 metric 5",
    "route add 172.16.0.0/12 via 192.168.1.1",
    "route prepend 172.16.0.0/12 via 192.168.1.3",
]


def test_route_restore_takes_iproute2s_three_passes(fibred, tmp_path):  # noqa: F811
    """`ip route restore` adds routes without a gateway first, with NLM_F_CREATE alone, and
    prints "File exists" for routes that are there: restoring the same file twice into a link
    with no address gives the kernel's routes, messages and status."""
    if shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("needs iproute2 and root for a network namespace")
    src, dst = f"fibre-restore-src-{os.getpid()}", f"fibre-restore-dst-{os.getpid()}"
    try:
        for ns in (src, dst):
            if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
                pytest.skip("cannot create a network namespace")
            subprocess.run(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "p0"], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "p0", "up"], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)
        for c in ORDER:
            subprocess.run(["ip", "-n", src] + c.split(), check=True)
        saved = tmp_path / "order.save"
        with open(saved, "wb") as f:
            subprocess.run(["ip", "-n", src, "route", "save"], stdout=f, check=True)
        for name in ("p0", "eth0"):
            fibre(fibred, "link", "add", name, "type", "dummy")
        fibre(fibred, "link", "set", "p0", "up")
        fibre(fibred, "link", "set", "eth0", "up")
        for _ in range(2):
            with open(saved, "rb") as f:
                k = subprocess.run(["ip", "-n", dst, "route", "restore"], stdin=f, capture_output=True, text=True)
            with open(saved, "rb") as f:
                r = subprocess.run([binary("fibre"), "-n", fibred, "route", "restore"], stdin=f, capture_output=True, text=True)
            assert (r.returncode, r.stderr) == (k.returncode, k.stderr)
            want = subprocess.run(["ip", "-n", dst, "route", "show"], capture_output=True, text=True, check=True).stdout
            assert fibre(fibred, "route", "show") == want
        # A link that is down: the kernel's error, status 2, and the routes before it kept.
        subprocess.run(["ip", "-n", dst, "link", "set", "eth0", "down"], check=True)
        fibre(fibred, "link", "set", "eth0", "down")
        with open(saved, "rb") as f:
            k = subprocess.run(["ip", "-n", dst, "route", "restore"], stdin=f, capture_output=True, text=True)
        with open(saved, "rb") as f:
            r = subprocess.run([binary("fibre"), "-n", fibred, "route", "restore"], stdin=f, capture_output=True, text=True)
        assert (r.returncode, r.stderr) == (k.returncode, k.stderr)
    finally:
        for ns in (src, dst):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
