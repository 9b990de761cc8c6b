"""The comparison of the forwarding differential: the frames a router sent, per link, against the
kernel's.

    python3 tests/forward/fwdcompare.py KERNELDIR OTHERDIR   # compare, print the results
    python3 tests/forward/fwdcompare.py --show DIR [--brief] # what DIR's router sent, per case

Both directories hold LINK.pcap per link that sent anything. Per link, the two frame
sequences are aligned (difflib, so one missing or extra frame does not shift the rest) and
compared byte for byte, with one mask: in an IPv4 packet the router originates (its source is
one of the router's addresses, `router_v4` in cases.json), the identification field and the
header checksum, because the kernel draws the ID of such packets from a keyed hash with a
boot-time secret (ip_select_ident: ICMP errors and echo replies are sent without DF). Nothing
else is masked; capture times are not compared.

Each output frame belongs to the case whose frame was the last sent before it (see
fwdkernel.py); for OTHERDIR's frames, the case with the latest input time not after the
frame's time. A case agrees when each of its kernel frames has its equal in OTHERDIR at the
aligned place and OTHERDIR sent nothing more for it. The report lists each case with what the
kernel sent, and the cases that disagree with both sides' frames.
"""

from __future__ import annotations

import argparse
import bisect
import difflib
import ipaddress
import json
import os
import sys
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pcapio  # noqa: E402

ETH_IPV4 = 0x0800
# Offsets in an Ethernet frame carrying IPv4: ID, header checksum, source address.
IPV4_ID = 14 + 4
IPV4_CSUM = 14 + 10
IPV4_SRC = 14 + 12


def load_cases(casedir: str = HERE) -> tuple[list[dict], set[bytes]]:
    with open(os.path.join(casedir, "cases.json")) as f:
        d = json.load(f)
    return d["cases"], {ipaddress.IPv4Address(a).packed for a in d["router_v4"]}


def masked(frame: bytes, router_v4: set[bytes]) -> bytes:
    """`frame` with the fields the kernel randomises zeroed (see the module doc)."""
    if len(frame) < 34 or int.from_bytes(frame[12:14], "big") != ETH_IPV4 or frame[14] >> 4 != 4:
        return frame
    if frame[IPV4_SRC:IPV4_SRC + 4] not in router_v4:
        return frame
    b = bytearray(frame)
    b[IPV4_ID:IPV4_ID + 2] = b"\0\0"
    b[IPV4_CSUM:IPV4_CSUM + 2] = b"\0\0"
    return bytes(b)


def load_outputs(d: str) -> dict[str, list[tuple[float, bytes]]]:
    out = {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".pcap"):
            out[name[: -len(".pcap")]] = pcapio.read(os.path.join(d, name))
    return out


@dataclass
class CaseResult:
    case: dict
    kernel: list[tuple[str, bytes]] = field(default_factory=list)  # (link, frame)
    other: list[tuple[str, bytes]] = field(default_factory=list)
    unmatched_kernel: list[tuple[str, bytes]] = field(default_factory=list)
    unmatched_other: list[tuple[str, bytes]] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return not self.unmatched_kernel and not self.unmatched_other


@dataclass
class Report:
    who: str
    results: list[CaseResult]

    def all_agree(self) -> bool:
        return all(r.agrees for r in self.results)

    def summary(self, details: int = 10) -> str:
        lines = []
        groups: dict[str, list[CaseResult]] = {}
        for r in self.results:
            groups.setdefault(r.case["group"], []).append(r)
        lines.append(f"{'group':<12} {'cases':>5} {'agree':>5}  kernel frames")
        for g, rs in groups.items():
            lines.append(f"{g:<12} {len(rs):>5} {sum(r.agrees for r in rs):>5}  {sum(len(r.kernel) for r in rs)}")
        n = len(self.results)
        ok = sum(r.agrees for r in self.results)
        frames = sum(len(r.kernel) for r in self.results)
        matched = frames - sum(len(r.unmatched_kernel) for r in self.results)
        lines.append(f"{self.who} agrees with the kernel on {ok}/{n} cases ({100 * ok / max(n, 1):.1f}%), "
                     f"{matched}/{frames} kernel frames")
        bad = [r for r in self.results if not r.agrees]
        for r in bad[:details]:
            lines.append(f"DIFF {r.case['group']}: {r.case['name']} (input on {r.case['link']})")
            for link, fr in r.unmatched_kernel:
                lines.append(f"     kernel only on {link}: {describe(fr)}")
            for link, fr in r.unmatched_other:
                lines.append(f"     {self.who} only on {link}: {describe(fr)}")
        if len(bad) > details:
            lines.append(f"... and {len(bad) - details} more cases differ")
        return "\n".join(lines)


def attribute(starts: list[float], ts: float) -> int:
    """The case a frame at capture time `ts` belongs to: the last case starting at or before
    it (the first case for anything earlier)."""
    return max(bisect.bisect_right(starts, ts + 1e-7) - 1, 0)


def compare(kernel_dir: str, other_dir: str, casedir: str = HERE, who: str = "fibre") -> Report:
    cases, router_v4 = load_cases(casedir)
    starts = [c["times"][0] for c in cases]
    assert starts == sorted(starts), "cases.json must list cases in time order"
    results = [CaseResult(c) for c in cases]
    kern, other = load_outputs(kernel_dir), load_outputs(other_dir)
    for link in sorted(set(kern) | set(other)):
        ks, os_ = kern.get(link, []), other.get(link, [])
        km = [masked(f, router_v4) for _, f in ks]
        om = [masked(f, router_v4) for _, f in os_]
        for ts, f in ks:
            results[attribute(starts, ts)].kernel.append((link, f))
        for ts, f in os_:
            results[attribute(starts, ts)].other.append((link, f))
        k_ok = [False] * len(ks)
        o_ok = [False] * len(os_)
        for blk in difflib.SequenceMatcher(None, km, om, autojunk=False).get_matching_blocks():
            for i in range(blk.size):
                k_ok[blk.a + i] = True
                o_ok[blk.b + i] = True
        for (ts, f), ok in zip(ks, k_ok):
            if not ok:
                results[attribute(starts, ts)].unmatched_kernel.append((link, f))
        for (ts, f), ok in zip(os_, o_ok):
            if not ok:
                results[attribute(starts, ts)].unmatched_other.append((link, f))
    return Report(who, results)


def describe(frame: bytes, brief: bool = False) -> str:
    """A one-line description of `frame`: scapy's summary when scapy is installed, and (unless
    `brief`) the frame in hex."""
    try:
        import scapy.all as s  # noqa: PLC0415

        s.conf.verb = 0
        text = s.Ether(frame).summary()
    except ImportError:
        text = ""
    return f"{text} [{len(frame)} bytes]" + ("" if brief else f" {frame.hex()}")


def show(d: str, casedir: str = HERE, brief: bool = False) -> str:
    cases, _ = load_cases(casedir)
    starts = [c["times"][0] for c in cases]
    per_case: list[list[str]] = [[] for _ in cases]
    for link, frames in load_outputs(d).items():
        for ts, f in frames:
            per_case[attribute(starts, ts)].append(f"{link}: {describe(f, brief)}")
    lines = []
    for c, outs in zip(cases, per_case):
        lines.append(f"{c['group']}: {c['name']} (in on {c['link']}, {len(c['times'])} frame(s))")
        lines.extend("    " + o for o in outs or ["(nothing)"])
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--show", metavar="DIR", help="list what DIR's router sent, per case")
    ap.add_argument("--brief", action="store_true", help="with --show: no hex")
    ap.add_argument("dirs", nargs="*", metavar="DIR", help="KERNELDIR OTHERDIR")
    a = ap.parse_args()
    if a.show:
        print(show(a.show, brief=a.brief))
        return 0
    if len(a.dirs) != 2:
        ap.error("give KERNELDIR and OTHERDIR")
    report = compare(a.dirs[0], a.dirs[1], who=os.path.basename(os.path.normpath(a.dirs[1])))
    print(report.summary())
    return 0 if report.all_agree() else 1


if __name__ == "__main__":
    sys.exit(main())
