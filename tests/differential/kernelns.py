"""Runs iproute2 batch files in throw-away Linux network namespaces: the kernel side of fibre's
differential and scenario tests.

A command file is written for fibre, where links are `type dummy` and `link set DEV carrier
on|off` exists. This kernel has no dummy driver, so `translate` rewrites the file for the kernel:
- `link add NAME ... type dummy` becomes a veth pair whose peer, also called NAME, lives in a
  separate peer namespace, followed by a helper line that brings the peer up (a veth has carrier
  only while its peer is up, so the pair then behaves like a dummy: carrier on, one device in the
  routing namespace);
- `link set NAME carrier off|on` becomes `ip link set NAME down|up` on the peer, which drops or
  restores the carrier of NAME exactly as `carrier off|on` does on a dummy.
- after `link set NAME ... up`, carrier changes and address adds, a helper line waits for the kernel's deferred
  link-watch work (see settle.sh), which a following command could otherwise overtake.
- fibre's `clock advance SECONDS` (offline time for expiring routes and exceptions) becomes a
  helper that sleeps that long and then forces the kernel's IPv6 GC pass
  (net.ipv6.route.flush=1), as fibre runs its GC when the clock moves;
- fibre's `route exception add DST mtu MTU` becomes a helper that makes the kernel receive an
  ICMP "fragmentation needed" / ICMPv6 "packet too big" for DST (see icmp_inject.py).
- fibre's `sysctl ARGS` (its per-link and global settings) becomes `netns exec NS sysctl ARGS`,
  which sets the namespace's own sysctl of that name.
Helper lines are appended to the line they serve; `KernelRun` maps stderr back to the original
line numbers, drops what helpers printed, and substitutes the original file name, so the kernel's
answer reads as if `ip -batch` had been given the untranslated file.

Namespaces get fibre's settings (SYSCTLS) before the first command runs. Names start with
`fibre-diff-` and the process id, and are deleted when the context ends.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

# The sysctls that change what routing commands and lookups answer, set to fibre's defaults.
# Set on `all`, `default` and `lo` (which exists before `default` is changed).
SYSCTLS = [
    # fibre is a router: forwarding on (this also makes IPv6 add subnet-router anycast routes).
    ("net.ipv4.conf.{dev}.forwarding", "1"),
    ("net.ipv6.conf.{dev}.forwarding", "1"),
    # No duplicate address detection, so no address is ever tentative (deterministic answers).
    ("net.ipv6.conf.{dev}.accept_dad", "0"),
    # Input lookups are not filtered by reverse path.
    ("net.ipv4.conf.{dev}.rp_filter", "0"),
    # The kernel's defaults, written out because they change answers.
    ("net.ipv6.conf.{dev}.keep_addr_on_down", "0"),
    ("net.ipv4.conf.{dev}.ignore_routes_with_linkdown", "0"),
    ("net.ipv6.conf.{dev}.ignore_routes_with_linkdown", "0"),
    ("net.ipv4.conf.{dev}.accept_local", "0"),
    ("net.ipv4.conf.{dev}.route_localnet", "0"),
    ("net.ipv4.conf.{dev}.src_valid_mark", "0"),
    ("net.ipv6.conf.{dev}.addr_gen_mode", "0"),
    ("net.ipv6.conf.{dev}.disable_ipv6", "0"),
    # Nobody sends router advertisements here; make sure none would be acted on or asked for.
    ("net.ipv6.conf.{dev}.accept_ra", "0"),
    ("net.ipv6.conf.{dev}.router_solicitations", "0"),
]
GLOBAL_SYSCTLS = [
    ("net.ipv4.fib_multipath_hash_policy", "0"),
    ("net.ipv6.fib_multipath_hash_policy", "0"),
    # A fixed seed makes the kernel's multipath choice the same in every namespace, so two kernel
    # runs of one file agree exactly (fibre's choice is checked statistically instead).
    ("net.ipv4.fib_multipath_hash_seed", "1"),
]
# The peer namespace only holds the far ends of the veth pairs: keep it silent.
PEER_SYSCTLS = [
    ("net.ipv6.conf.all.disable_ipv6", "1"),
    ("net.ipv6.conf.default.disable_ipv6", "1"),
]

_LINK_ADD = re.compile(r"^(\s*)link\s+add\s+(?:(?:dev|name)\s+)?(\S+)(.*)\stype\s+dummy\s*$")
_CARRIER = re.compile(r"^\s*link\s+set\s+(?:dev\s+)?(\S+)\s+carrier\s+(on|off)\s*$")
_LINK_UP = re.compile(r"^\s*link\s+set\s+(?:dev\s+)?(\S+)\s.*\bup\b")
_ADDR_ADD = re.compile(r"^\s*(?:-[46]\s+)?addr(?:ess)?\s+(?:add|replace|change)\s.*\bdev\s+(\S+)")
_CLOCK = re.compile(r"^\s*clock\s+advance\s+([0-9.]+)\s*$")
_SYSCTL = re.compile(r"^\s*sysctl\s+(.*\S)\s*$")
_EXCEPTION = re.compile(r"^\s*(?:-[46]\s+)?route\s+exception\s+add\s+(\S+)\s+mtu\s+(\d+)\s*$")
_SETTLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "settle.sh")
_INJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "icmp_inject.py")
_FAILED = re.compile(r"^Command failed (.*):(\d+)$")

_counter = 0


def available() -> str | None:
    """None when namespaces can be used here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if subprocess.run(["which", "ip"], capture_output=True).returncode != 0:
        return "iproute2 (ip) is not installed"
    name = _new_name("probe")
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if r.returncode != 0:
        return "cannot create a network namespace: " + r.stderr.strip()
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def _new_name(tag: str) -> str:
    global _counter
    _counter += 1
    return f"fibre-diff-{os.getpid()}-{tag}{_counter}"


def translate(lines: list[str], ns: str, peer_ns: str) -> tuple[list[str], list[int]]:
    """The kernel's version of a fibre command file and, for each of its lines, the 1-based
    number of the original line it serves (0 for a helper line, whose errors are dropped)."""
    out: list[str] = []
    origin: list[int] = []
    for n, line in enumerate(lines, 1):
        body = line.split("#", 1)[0]
        m = _LINK_ADD.match(body)
        if m:
            indent, name, attrs = m.groups()
            out.append(f"{indent}link add {name}{attrs} type veth peer name {name} netns {peer_ns}")
            origin.append(n)
            out.append(_in_peer(peer_ns, f"ip link set {name} up"))
            origin.append(0)
            continue
        m = _SYSCTL.match(body)
        if m:
            out.append(f"netns exec {ns} sysctl {m.group(1)}")
            origin.append(n)
            continue
        m = _CLOCK.match(body)
        if m:
            out.append(f'netns exec {ns} sh -c "sleep {m.group(1)}; sysctl -qw net.ipv6.route.flush=1"')
            origin.append(0)
            continue
        m = _EXCEPTION.match(body)
        if m:
            out.append(f"netns exec {ns} python3 {_INJECT} {m.group(1)} {m.group(2)}")
            origin.append(0)
            continue
        m = _CARRIER.match(body)
        if m:
            name, state = m.groups()
            # A missing link must fail as on fibre: check the routing namespace's side first.
            out.append(f"link set dev {name}")
            origin.append(n)
            out.append(_in_peer(peer_ns, f"ip link set {name} {'up' if state == 'on' else 'down'}"))
            origin.append(0)
            out.append(_settle(ns, name))
            origin.append(0)
            continue
        out.append(line)
        origin.append(n)
        m = _LINK_UP.match(body) or _ADDR_ADD.match(body)
        if m and m.group(1) != "lo":
            out.append(_settle(ns, m.group(1)))
            origin.append(0)
    return out, origin


def _settle(ns: str, name: str) -> str:
    return f"netns exec {ns} sh {_SETTLE} {name}"


def _in_peer(peer_ns: str, cmd: str) -> str:
    # Helper lines never fail: their errors would not be the original file's.
    return f'netns exec {peer_ns} sh -c "{cmd} 2>/dev/null; true"'


@dataclass
class Result:
    """What `ip -batch` answered: stdout, stderr (original line numbers and file name), status,
    and the wall time of the run."""

    stdout: str
    stderr: str
    status: int
    seconds: float
    commands: int = 0


@dataclass
class KernelNS:
    """A routing namespace and its peer namespace, with fibre's settings. Use as a context."""

    tag: str = "ns"
    name: str = field(init=False, default="")
    peer: str = field(init=False, default="")

    def __enter__(self) -> "KernelNS":
        self.name = _new_name(self.tag)
        self.peer = self.name + "p"
        for ns in (self.name, self.peer):
            _run(["ip", "netns", "add", ns])
        settings = [f"{k.format(dev=d)}={v}" for k, v in SYSCTLS for d in ("all", "default", "lo")]
        settings += [f"{k}={v}" for k, v in GLOBAL_SYSCTLS]
        _run(["ip", "netns", "exec", self.name, "sysctl", "-qw", *settings])
        _run(["ip", "netns", "exec", self.peer, "sysctl", "-qw", *[f"{k}={v}" for k, v in PEER_SYSCTLS]])
        return self

    def __exit__(self, *exc) -> None:
        for ns in (self.name, self.peer):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def batch(self, text: str, display_name: str, json: bool = False,
              options: list[str] | None = None) -> Result:
        """Runs `ip [OPTIONS] [-j] -force -batch` on the translated `text` in this namespace.
        `display_name` replaces the temporary file's name in "Command failed NAME:LINE"."""
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        klines, origin = translate(lines, self.name, self.peer)
        with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as f:
            f.write("\n".join(klines) + "\n")
            path = f.name
        try:
            args = ["ip", "-n", self.name] + (options or []) + (["-j"] if json else []) + ["-force", "-batch", path]
            t0 = time.perf_counter()
            p = subprocess.run(args, capture_output=True, text=True)
            seconds = time.perf_counter() - t0
        finally:
            os.unlink(path)
        stderr = _remap_stderr(p.stderr, path, display_name, origin)
        return Result(p.stdout, stderr, p.returncode, seconds, len(lines))


def _remap_stderr(stderr: str, path: str, display: str, origin: list[int]) -> str:
    """stderr with each error block (the lines up to "Command failed FILE:LINE") moved to the
    original line number. Helper lines cannot fail (see `_in_peer`): if one did, the namespaces
    are broken and the run means nothing."""
    out: list[str] = []
    block: list[str] = []
    for line in stderr.splitlines():
        m = _FAILED.match(line)
        if not m:
            block.append(line)
            continue
        n = int(m.group(2))
        orig = origin[n - 1] if 0 < n <= len(origin) else n
        if orig == 0:
            raise RuntimeError("a helper line failed: " + " / ".join(block + [line]))
        out.extend(block)
        out.append(f"Command failed {display}:{orig}")
        block = []
    out.extend(block)
    return "".join(s + "\n" for s in out)


def _run(args: list[str]) -> None:
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(args)}: {p.stderr.strip()}")
