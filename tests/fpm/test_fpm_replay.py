"""Replays a byte stream recorded from FRR's zebra (record.py) into fibred, so that CI
checks the FPM server against real zebra output where FRR is absent: fibre ends with the
routes FRR reported installed when the stream was recorded. The stream names zebra's
interfaces by index, so it replays in a namespace built as the recording's was (lab.py).
Skips without root."""

from __future__ import annotations

import glob
import json
import os
import socket
import time

import pytest

import lab

HERE = os.path.dirname(os.path.abspath(__file__))
STREAMS = sorted(glob.glob(os.path.join(HERE, "zebra-*.fpm")))


@pytest.mark.parametrize("stream", STREAMS, ids=[os.path.basename(s) for s in STREAMS])
def test_a_recorded_zebra_stream_gives_frrs_routes(stream):
    why = lab.can_run()
    if why:
        pytest.skip(why)
    want = json.load(open(stream[:-len(".fpm")] + ".json"))
    expected = {(p, kind, tuple(gws)) for p, kind, gws in want["routes"]}
    l = lab.Lab("replay")
    try:
        l.start_fibred()
        data = open(stream, "rb").read()
        code = (
            "import socket, sys; s = socket.create_connection(('127.0.0.1', %d)); "
            "s.sendall(sys.stdin.buffer.read()); s.shutdown(socket.SHUT_WR); s.recv(1)" % lab.FPM_PORT
        )
        import subprocess
        import sys
        l.exec(sys.executable, "-c", code, input=data, check=True)

        def check():
            got = l.fibre_routes()
            return got == expected or {"fibre": sorted(got), "frr": sorted(expected)}

        lab.wait_for("the replay", check, timeout=10)
    finally:
        l.close()
