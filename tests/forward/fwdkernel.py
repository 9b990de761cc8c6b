"""The kernel side of the forwarding differential: the Linux kernel as the router.

    python3 tests/forward/fwdkernel.py OUTDIR          # run once, write OUTDIR/LINK.pcap
    python3 tests/forward/fwdkernel.py --record        # run, write kernel/ and recording.json
    python3 tests/forward/fwdkernel.py --repeat 5 DIR  # run 5 times, say what differs

A router namespace gets config.batch through tests/differential/kernelns.py (the same
translation the scenarios use: each `type dummy` link is a veth whose peer, of the same name,
sits in a capture namespace; fibre's sysctls; `sysctl` lines run in the namespace) and the
settings in EXTRA_SYSCTLS. Offloads are turned off on both ends of every veth, each peer gets
its host's MAC address and promiscuous mode. A helper in the capture namespace then sends each
input frame (input/LINK.pcap, all links merged in capture-time order) on the peer of its link
with an AF_PACKET socket, at its capture time relative to the first frame (so the kernel's
clock-driven behaviour -- rate limits, neighbour timers -- sees the capture's time, as
`fibre forward` does), and captures every frame the router sends on any link. An output frame
gets the capture time of the last input frame sent before it arrived: that is how outputs are
attributed to cases, and it keeps the recording free of scheduling jitter. Frames the capture
namespace itself sends (the injected ones) are not captured.

Exit status 77 when root or network namespaces are missing.
"""

from __future__ import annotations

import argparse
import array
import fcntl
import json
import os
import platform
import select
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "differential"))
import fwdgen  # noqa: E402
import kernelns  # noqa: E402
import pcapio  # noqa: E402

RECORDING = os.path.join(HERE, "kernel")

# Settings beyond fibre's (kernelns.SYSCTLS), in the router namespace, before the config runs.
EXTRA_SYSCTLS = [
    # With the default (1) the kernel gives the IPv6 packets it originates (ICMPv6 errors, echo
    # replies) a flow label hashed with a boot-time secret (ip6_make_flowlabel); off, they
    # carry 0, which fibre can reproduce.
    ("net.ipv6.auto_flowlabels", "0"),
    # The kernel's MLD reports for the groups a link joins at link-up (all-routers, solicited-node)
    # repeat after up to this many ms: kept short so they are over before the first frame.
    ("net.ipv6.conf.all.mldv1_unsolicited_report_interval", "10"),
    ("net.ipv6.conf.default.mldv1_unsolicited_report_interval", "10"),
    ("net.ipv6.conf.all.mldv2_unsolicited_report_interval", "10"),
    ("net.ipv6.conf.default.mldv2_unsolicited_report_interval", "10"),
]
# How long the MLD reports of link-up may take, with EXTRA_SYSCTLS (robustness 2 at 10 ms).
SETTLE = 0.5
# How long after the last input frame the capture keeps listening.
TAIL = 1.0
# Real time before the first frame is sent, once the sockets are open.
LEAD = 0.05

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SIOCETHTOOL = 0x8946
# Legacy ethtool set commands (linux/ethtool.h): tx and rx checksumming, scatter-gather, TSO,
# GSO, GRO.
ETHTOOL_OFFLOADS = {"tx": 0x17, "rx": 0x15, "sg": 0x19, "tso": 0x1F, "gso": 0x24, "gro": 0x2C}
# struct ifreq: 16-byte name, then a union as large as the largest member (struct ifmap).
IFREQ_SIZE = 40


def offloads_off(links: list[str]) -> None:
    """Turns the ethtool offloads off on `links` of the current namespace (ETHTOOL_S* ioctls,
    so no ethtool program is needed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for link in links:
            for cmd in ETHTOOL_OFFLOADS.values():
                val = array.array("I", [cmd, 0])
                ifr = struct.pack("16sP", link.encode(), val.buffer_info()[0])
                fcntl.ioctl(s, SIOCETHTOOL, ifr.ljust(IFREQ_SIZE, b"\0"))


def inject_and_capture(indir: str, outdir: str) -> None:
    """In the capture namespace: send every input frame on its link at its time, capture what
    comes back, write OUTDIR/LINK.pcap for every link that received anything."""
    inputs = []
    for name in sorted(os.listdir(os.path.join(indir, "input"))):
        link = name[: -len(".pcap")]
        for ts, frame in pcapio.read(os.path.join(indir, "input", name)):
            inputs.append((ts, link, frame))
    inputs.sort(key=lambda x: x[0])
    links = sorted({i[1] for i in inputs} | set(fwdgen.ROUTER_MAC))
    socks = {}
    for link in links:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((link, 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        socks[link] = s
    by_fd = {s.fileno(): link for link, s in socks.items()}
    out: dict[str, list[tuple[float, bytes]]] = {link: [] for link in links}
    early: list[str] = []
    # The capture time of the last frame sent, None before the first.
    current: float | None = None

    def drain(until: float) -> None:
        while True:
            left = until - time.monotonic()
            ready, _, _ = select.select(list(socks.values()), [], [], max(left, 0))
            if not ready:
                if left <= 0:
                    return
                continue
            for s in ready:
                data, addr = s.recvfrom(65536)
                if addr[2] == PACKET_OUTGOING:
                    continue
                link = by_fd[s.fileno()]
                if current is None:
                    early.append(f"{link}: {data.hex()}")
                else:
                    out[link].append((current, data))

    start = time.monotonic() + LEAD
    t_first = inputs[0][0]
    drain(start)
    for ts, link, frame in inputs:
        drain(start + (ts - t_first))
        socks[link].send(frame)
        current = ts
    drain(time.monotonic() + TAIL)
    if early:
        raise RuntimeError("the router sent frames before the first input (set-up not settled):\n  "
                           + "\n  ".join(early))
    os.makedirs(outdir, exist_ok=True)
    for link, frames in out.items():
        if frames:
            pcapio.write(os.path.join(outdir, link + ".pcap"), frames)


def _ns_python(ns: str, *args: str) -> None:
    p = subprocess.run(["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__), *args],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"helper in {ns} failed ({p.returncode}): {p.stderr.strip()}")


def _run(args: list[str]) -> None:
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip()}")


# iproute2's prompt for an `sr hmac set` secret.
HMAC_PROMPT = "Enter secret for HMAC key ID (blank to delete): "


def run(outdir: str, indir: str = HERE) -> None:
    """Runs the kernel router on indir's config.batch and input/*.pcap, writing outdir/LINK.pcap
    (outdir is emptied of pcaps first)."""
    with open(os.path.join(indir, "config.batch")) as f:
        config = f.read()
    os.makedirs(outdir, exist_ok=True)
    for name in os.listdir(outdir):
        if name.endswith(".pcap"):
            os.unlink(os.path.join(outdir, name))
    links = sorted(fwdgen.ROUTER_MAC)
    with kernelns.KernelNS("fwd") as ns:
        _run(["ip", "netns", "exec", ns.name, "sysctl", "-qw", *[f"{k}={v}" for k, v in EXTRA_SYSCTLS]])
        r = ns.batch(config, "config.batch")
        # `sr hmac set` prompts for its secret (getpass) on stderr: not an error.
        stderr = r.stderr.replace(HMAC_PROMPT, "").strip()
        if r.status != 0 or stderr:
            raise RuntimeError(f"the kernel refused config.batch: {stderr}")
        for link in links:
            _run(["ip", "-n", ns.peer, "link", "set", link, "address", fwdgen.HOST_MAC[link], "promisc", "on",
                  "arp", "off"])
        _ns_python(ns.name, "--offloads-off", *links)
        _ns_python(ns.peer, "--offloads-off", *links)
        time.sleep(SETTLE)
        _ns_python(ns.peer, "--inject", indir, os.path.abspath(outdir))


def how() -> dict:
    """How a recording was made, for recording.json."""
    ipv = subprocess.run(["ip", "-V"], capture_output=True, text=True).stdout.strip()
    return {
        "kernel": platform.release(),
        "iproute2": ipv,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "how": "tests/forward/fwdkernel.py: config.batch in a router namespace (kernelns.py), "
               "veth peers in a capture namespace, offloads off, input frames sent with AF_PACKET "
               "at their capture times; each output frame carries the capture time of the last "
               "input frame sent before it",
        "sysctls": {k.format(dev="all|default|lo"): v for k, v in kernelns.SYSCTLS}
        | dict(kernelns.GLOBAL_SYSCTLS) | dict(EXTRA_SYSCTLS),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", nargs="?", help="where LINK.pcap go")
    ap.add_argument("--record", action="store_true", help="write the recording (kernel/, recording.json)")
    ap.add_argument("--repeat", type=int, default=0, help="run N times into OUTDIR/N and compare")
    ap.add_argument("--inject", nargs=2, metavar=("INDIR", "OUTDIR"), help=argparse.SUPPRESS)
    ap.add_argument("--offloads-off", nargs="+", metavar="LINK", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inject:
        inject_and_capture(*a.inject)
        return 0
    if a.offloads_off:
        offloads_off(a.offloads_off)
        return 0
    why = kernelns.available()
    if why:
        print(f"SKIP: {why}")
        return 77
    if a.record:
        run(RECORDING)
        with open(os.path.join(RECORDING, "recording.json"), "w") as f:
            json.dump(how(), f, indent=1)
            f.write("\n")
        print(f"recorded: {', '.join(sorted(os.listdir(RECORDING)))}")
        return 0
    if not a.outdir:
        ap.error("OUTDIR is needed unless --record")
    if a.repeat:
        import fwdcompare  # noqa: PLC0415

        dirs = [os.path.join(a.outdir, str(i)) for i in range(a.repeat)]
        for d in dirs:
            run(d)
        bad = 0
        for d in dirs[1:]:
            report = fwdcompare.compare(dirs[0], d, HERE, who="run " + os.path.basename(d))
            print(report.summary())
            bad += not report.all_agree()
        return 1 if bad else 0
    run(a.outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
