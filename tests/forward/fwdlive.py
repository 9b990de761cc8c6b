"""The live side of the forwarding differential: fibred as the router, over real ports.

    python3 tests/forward/fwdlive.py --io af_packet OUTDIR   # write OUTDIR/LINK.pcap
    python3 tests/forward/fwdlive.py --io af_xdp OUTDIR --compare   # and compare with kernel/

The same configuration, the same input frames at the same times and the same capture as
fwdkernel.py, with fibred in the router namespace in place of the kernel: each of
config.batch's `type dummy` links becomes a port link (`link add LINK type port dev rLINK io
KIND`) bound to a veth `rLINK` whose peer, named LINK, sits in the capture namespace. The
router's veths are given the link's MAC address and MTU before they are bound (a port link
takes its host interface's), so config.batch's `link set LINK address` and `mtu` lines are
left to the host side. The router namespace's own stack has IPv6 disabled and no addresses,
so it sends nothing; every frame captured is fibred's. fwdkernel.py's helper injects and
captures, and attributes each output to the case of the last input sent before it.

fibred runs one forwarding worker (`[workers] count = 1`): each worker keeps its own ICMP rate
limits, where the kernel's are one per peer for the whole host, so with several workers the
packets of one source spread over workers (AF_PACKET's fanout hashes the ports too) get more
errors than the kernel sends (the `ratelimit` cases show it).

What this adds to test_forward.py (which runs `fibre forward` over the same inputs, offline):
the frames go through fibre-io's ports and fibred's worker in real time, so the live path
(its receive, its transmit, its clock for rate limits and neighbour timers, fibred's
configuration over rtnetlink) is held to the kernel's bytes too.

Exit status 77 when root, network namespaces or the binaries are missing.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "differential"))
import fwdcompare  # noqa: E402
import fwdgen  # noqa: E402
import fwdkernel  # noqa: E402
import kernelns  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
KINDS = ("af_packet", "af_xdp")

_LINK_ADD = re.compile(r"^link add (\S+) type dummy$")
_LINK_SET = re.compile(r"^link set (\S+) (.*)$")


def binaries() -> tuple[str, str] | str:
    """fibre and fibred (FIBRE's directory, else target/release), or why they are missing."""
    fibre = os.environ.get("FIBRE", os.path.join(REPO, "target", "release", "fibre"))
    fibred = os.path.join(os.path.dirname(fibre), "fibred")
    for b in (fibre, fibred):
        if not os.access(b, os.X_OK):
            return f"no binary at {b}"
    return fibre, fibred


def translate(config: str, kind: str) -> tuple[str, dict[str, dict[str, str]]]:
    """config.batch for fibred over ports, and each link's host-side settings (address, mtu)
    taken out of it."""
    out, host = [], {}
    for line in config.splitlines():
        if m := _LINK_ADD.match(line):
            link = m.group(1)
            host[link] = {}
            out.append(f"link add {link} type port dev r{link} io {kind}")
            continue
        if (m := _LINK_SET.match(line)) and m.group(1) in host:
            words = m.group(2).split()
            rest = []
            while words:
                w = words.pop(0)
                if w in ("address", "mtu") and words:
                    host[m.group(1)][w] = words.pop(0)
                else:
                    rest.append(w)
            if rest:
                out.append(f"link set {m.group(1)} {' '.join(rest)}")
            continue
        out.append(line)
    return "\n".join(out) + "\n", host


def _sh(*args: str) -> None:
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip()}")


def _ns_python(ns: str, *args: str) -> None:
    p = subprocess.run(["ip", "netns", "exec", ns, sys.executable,
                        os.path.join(HERE, "fwdkernel.py"), *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"helper in {ns} failed ({p.returncode}): {p.stderr.strip()}")


def run(outdir: str, kind: str, indir: str = HERE) -> None:
    """fibred as the router over `kind` ports on indir's config.batch and input/*.pcap,
    writing outdir/LINK.pcap (outdir is emptied of pcaps first)."""
    found = binaries()
    if isinstance(found, str):
        raise RuntimeError(found)
    fibre, fibred = found
    with open(os.path.join(indir, "config.batch")) as f:
        config, host = translate(f.read(), kind)
    os.makedirs(outdir, exist_ok=True)
    for name in os.listdir(outdir):
        if name.endswith(".pcap"):
            os.unlink(os.path.join(outdir, name))
    tag = f"fibre-fwdlive-{os.getpid()}"
    router, capture = f"{tag}-r", f"{tag}-c"
    proc = None
    with tempfile.TemporaryDirectory(prefix=f"{tag}-") as d:
        log = os.path.join(d, "fibred.log")
        try:
            for ns in (router, capture):
                _sh("ip", "netns", "add", ns)
                for k in ("all", "default"):
                    _sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1")
                _sh("ip", "-n", ns, "link", "set", "lo", "up")
            links = sorted(host)
            for link in links:
                mine = host[link]
                _sh("ip", "-n", router, "link", "add", f"r{link}", "type", "veth", "peer", "name", link,
                    "netns", capture)
                settings = [w for k in ("address", "mtu") if k in mine for w in (k, mine[k])]
                _sh("ip", "-n", router, "link", "set", f"r{link}", *settings, "up")
                _sh("ip", "-n", capture, "link", "set", link, "address", fwdgen.HOST_MAC[link],
                    *(["mtu", mine["mtu"]] if "mtu" in mine else []), "promisc", "on", "arp", "off", "up")
            _ns_python(router, "--offloads-off", *[f"r{x}" for x in links])
            _ns_python(capture, "--offloads-off", *links)
            sock = os.path.join(d, "fibred.sock")
            conf = os.path.join(d, "fibred.toml")
            with open(conf, "w") as f:
                f.write("[workers]\ncount = 1\n")
            proc = subprocess.Popen(["ip", "netns", "exec", router, fibred, "--socket", sock,
                                     "--no-dgram", "--config", conf], stderr=open(log, "w"))
            deadline = time.monotonic() + 10
            while not os.path.exists(sock):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"fibred did not start: {open(log).read()}")
                time.sleep(0.02)
            batch = os.path.join(d, "config.batch")
            with open(batch, "w") as f:
                f.write(config)
            p = subprocess.run(["ip", "netns", "exec", router, fibre, "-n", sock, "-batch", batch],
                               capture_output=True, text=True)
            if p.returncode != 0 or p.stderr:
                raise RuntimeError(f"fibred refused the configuration: {p.stderr.strip()}")
            time.sleep(fwdkernel.SETTLE)
            _ns_python(capture, "--inject", indir, os.path.abspath(outdir))
        finally:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            for ns in (router, capture):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", help="where LINK.pcap go")
    ap.add_argument("--io", choices=KINDS, default="af_packet", help="the ports' I/O kind")
    ap.add_argument("--compare", action="store_true", help="compare with the recording in kernel/")
    a = ap.parse_args()
    why = kernelns.available()
    found = binaries()
    if why or isinstance(found, str):
        print(f"SKIP: {why or found}")
        return 77
    run(a.outdir, a.io)
    if a.compare:
        report = fwdcompare.compare(fwdkernel.RECORDING, a.outdir, HERE, who=f"fibred {a.io}")
        print(report.summary())
        return 0 if report.all_agree() else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
