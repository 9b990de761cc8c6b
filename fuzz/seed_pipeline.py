#!/usr/bin/env python3
"""Seeds for the dataplane_pipeline fuzz target: tests/forward's input frames, merged in
capture-time order, eight frames per seed, each as the target reads them (link byte, time
step in milliseconds, 16-bit big-endian length, the frame)."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "forward"))
import pcapio  # noqa: E402

LINKS = ["a0", "b0", "c0", "d0"]
PER_SEED = 8


def main(out_dir: str) -> None:
    frames = []
    for i, name in enumerate(LINKS):
        path = os.path.join(HERE, "..", "tests", "forward", "input", f"{name}.pcap")
        if os.path.exists(path):
            frames.extend((ts, i, fr) for ts, fr in pcapio.read(path))
    frames.sort(key=lambda f: f[0])
    os.makedirs(out_dir, exist_ok=True)
    for k in range(0, len(frames), PER_SEED):
        prev = frames[k][0]
        seed = b""
        for ts, link, fr in frames[k : k + PER_SEED]:
            step = min(255, int((ts - prev) * 1000))
            prev = ts
            seed += bytes([link, step]) + struct.pack(">H", len(fr)) + fr
        with open(os.path.join(out_dir, f"forward-{k // PER_SEED:03d}"), "wb") as f:
            f.write(seed)


if __name__ == "__main__":
    main(sys.argv[1])
