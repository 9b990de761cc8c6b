"""Multicast notifications on fibred's SOCK_DGRAM socket, decoded by iproute2.

A bound AF_UNIX datagram socket joins RTNLGRP_NEIGH with fibred's membership request
(FIBRE_MEMBERSHIP, 0x0e: operation 1 = join, then the group number), then `fibre -n` makes
neighbour changes. The notifications fibred sends to that socket, written to a file, are
decoded by `ip monitor file` to the same text as the notifications the kernel sends for the
same commands (recorded in a network namespace with a raw NETLINK_ROUTE socket joined to
RTNLGRP_NEIGH). Skips without fibred, root, network namespaces or iproute2.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

import pytest

from test_pyroute2 import binary, fibred  # noqa: F401  (fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "differential"))
import kernelns  # noqa: E402

FIBRE_MEMBERSHIP = 0x0E
MEMBERSHIP_ADD = 1
RTNLGRP_NEIGH = 3
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4

COMMANDS = [
    "link add d0 type dummy",
    "link set lo up",
    "link set d0 up",
    "neigh add 192.0.2.10 lladdr 02:00:00:00:00:10 dev d0",
    "neigh replace 192.0.2.10 lladdr 02:00:00:00:00:11 dev d0 nud stale router",
    "neigh add 2001:db8::10 lladdr 02:00:00:00:00:12 dev d0 nud reachable",
    "neigh del 192.0.2.10 dev d0",
]

# Records the kernel's RTNLGRP_NEIGH notifications while the commands run; run inside the
# namespace, prints them hex-encoded.
RECORDER = r"""
import binascii, socket, subprocess, sys, time
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
s.bind((0, 0))
s.setsockopt(270, 1, 3)  # SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, RTNLGRP_NEIGH
subprocess.run(["ip", "-force", "-batch", sys.argv[1]], check=False)
time.sleep(0.3)
s.setblocking(False)
out = b""
while True:
    try:
        out += s.recv(65536)
    except BlockingIOError:
        break
print(binascii.hexlify(out).decode())
"""


def monitor_file(data: bytes) -> list[str]:
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
    try:
        r = subprocess.run(["ip", "monitor", "file", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if "ff02::" not in line]


def test_dgram_members_get_neighbour_notifications(fibred):  # noqa: F811
    why = kernelns.available()
    if why:
        pytest.skip(why)
    exe = binary("fibre")
    if exe is None:
        pytest.skip("fibre is not built")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("")
    s.connect(fibred.replace(".sock", ".dgram"))
    s.settimeout(5)
    s.send(struct.pack("=IHHIIII", 24, FIBRE_MEMBERSHIP, NLM_F_REQUEST | NLM_F_ACK, 1, 0,
                       MEMBERSHIP_ADD, RTNLGRP_NEIGH))
    ack = s.recv(65536)
    assert struct.unpack_from("=H", ack, 4)[0] == 2 and struct.unpack_from("=i", ack, 16)[0] == 0
    with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as f:
        f.write("\n".join(COMMANDS) + "\n")
    try:
        subprocess.run([exe, "-n", fibred, "-batch", f.name], check=True, capture_output=True)
        ours = b""
        s.settimeout(0.5)
        while True:
            try:
                ours += s.recv(65536)
            except socket.timeout:
                break
        with kernelns.KernelNS("neighdgram") as ns:
            # The namespace's links: the same translation `ip -batch` gets in the other tests.
            klines, _ = kernelns.translate(COMMANDS, ns.name, ns.peer)
            with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as k:
                k.write("\n".join(klines) + "\n")
            try:
                r = subprocess.run(["ip", "netns", "exec", ns.name, sys.executable, "-c", RECORDER,
                                    k.name], capture_output=True, text=True, check=True)
            finally:
                os.unlink(k.name)
        kernel = bytes.fromhex(r.stdout.strip().splitlines()[-1])
    finally:
        os.unlink(f.name)
    expected = monitor_file(kernel)
    assert len(expected) >= 4
    assert monitor_file(ours) == expected
