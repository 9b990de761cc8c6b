#!/usr/bin/env python3
"""Seeds for the dataplane_pipeline fuzz target: tests/forward's input frames, merged in
capture-time order, eight frames per seed, each as the target reads them (link byte, time
step in milliseconds, 16-bit big-endian length, the frame); then, when scapy is there, the
frames of tests/forward/test_srv6.py's and test_srv6_rfc.py's cases, eight per seed, the first
link byte with the bit that runs them on the SRv6 router."""
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
    srv6_seeds(out_dir)


# The first byte's bit that runs a seed on tests/forward/srv6.batch (dataplane_pipeline.rs).
SRV6_BIT = 0x80


def srv6_seeds(out_dir: str) -> None:
    try:
        import test_srv6
        import test_srv6_rfc
        cases = test_srv6._cases() + test_srv6_rfc.seed_cases()
    except Exception as e:  # scapy missing: pytest.skip raises its own exception type
        print(f"seed_pipeline: no SRv6 seeds ({type(e).__name__})", file=sys.stderr)
        return
    for k in range(0, len(cases), PER_SEED):
        seed = b""
        for j, (_, fr, _) in enumerate(cases[k : k + PER_SEED]):
            link = LINKS.index(test_srv6._in_link(fr)) | (SRV6_BIT if j == 0 else 0)
            seed += bytes([link, 100]) + struct.pack(">H", len(fr)) + fr
        with open(os.path.join(out_dir, f"srv6-{k // PER_SEED:03d}"), "wb") as f:
            f.write(seed)


if __name__ == "__main__":
    main(sys.argv[1])
