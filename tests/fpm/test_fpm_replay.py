"""Replays a byte stream recorded from FRR's zebra (record.py) into fibred, so that CI
checks the FPM server against real zebra output where FRR is absent: fibre ends with the
routes FRR reported installed when the stream was recorded. The stream names zebra's
interfaces by index, so it replays in a namespace built as the recording's was (lab.py).
Then the same through a relaying fibred (`--fpm-relay`): the downstream fibred ends with the
same routes, and one that connects later gets them too (the relay has zebra replay). Skips
without root."""

from __future__ import annotations

import glob
import json
import os
import sys

import pytest

import lab

HERE = os.path.dirname(os.path.abspath(__file__))
STREAMS = sorted(glob.glob(os.path.join(HERE, "zebra-*.fpm")))
RELAYED_PORT = lab.FPM_PORT + 1


def expected(stream: str) -> set:
    want = json.load(open(stream[:-len(".fpm")] + ".json"))
    return {(p, kind, tuple(gws)) for p, kind, gws in want["routes"]}


def feed(l: lab.Lab, stream: str, keep_open: bool = False):
    """Sends the stream as zebra would, to the lab's first fibred; with `keep_open`, stays
    connected (as zebra does) until stdin closes, and sends the stream again each time the
    server closes the connection (zebra's replay)."""
    code = f"""
import socket, sys, time
data = open({stream!r}, "rb").read()
while True:
    s = socket.create_connection(("127.0.0.1", {lab.FPM_PORT}))
    s.sendall(data)
    if not {keep_open}:
        s.shutdown(socket.SHUT_WR); s.recv(1); break
    while s.recv(65536):
        pass
    time.sleep(0.2)
"""
    import subprocess
    args = ["ip", "netns", "exec", l.ns, sys.executable, "-c", code]
    if keep_open:
        return subprocess.Popen(args)
    subprocess.run(args, check=True)
    return None


def converged(l: lab.Lab, want: set, on: str = "fibred"):
    def check():
        got = l.fibre_routes(on=on)
        return got == want or {"fibre": sorted(got), "frr": sorted(want)}
    return check


@pytest.mark.parametrize("stream", STREAMS, ids=[os.path.basename(s) for s in STREAMS])
def test_a_recorded_zebra_stream_gives_frrs_routes(stream):
    why = lab.can_run()
    if why:
        pytest.skip(why)
    l = lab.Lab("replay")
    try:
        l.start_fibred()
        feed(l, stream)
        lab.wait_for("the replay", converged(l, expected(stream)), timeout=10, logs=l.logs)
    finally:
        l.close()


@pytest.mark.parametrize("stream", STREAMS, ids=[os.path.basename(s) for s in STREAMS])
def test_a_relaying_fibred_feeds_another(stream):
    why = lab.can_run()
    if why:
        pytest.skip(why)
    l = lab.Lab("relay")
    zebra = None
    try:
        want = expected(stream)
        l.start_fibred("--fpm-relay", f"127.0.0.1:{RELAYED_PORT}")
        zebra = feed(l, stream, keep_open=True)
        lab.wait_for("the relaying fibred", converged(l, want), timeout=10, logs=l.logs)
        # The downstream starts after the stream was sent: the relay connects to it and has
        # zebra replay everything.
        l.start_fibred(name="downstream", port=RELAYED_PORT)
        lab.wait_for("the downstream fibred", converged(l, want, on="downstream"), timeout=15, logs=l.logs)
        lab.wait_for("the relaying fibred after the replay", converged(l, want), timeout=10, logs=l.logs)
    finally:
        if zebra is not None:
            zebra.kill()
        l.close()
