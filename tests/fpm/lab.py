"""A network namespace in which FRR's zebra (with `dplane_fpm_nl`) and fibred meet over FPM.

The namespace holds a veth pair (`eth1`, up with 10.0.1.1/24 and 2001:db8:1::1/64, and its
peer `p1`), so zebra has connected routes to resolve static routes through; fibred runs in
the same namespace (so that zebra's interface indexes name the same interfaces for it) with a
link `eth1` of its own, configured alike. zebra and staticd run with `-N NS`, so their state
lives in /var/run/frr/NS and their vty answers `vtysh -N NS`.

`feed_from_routes` and `frr_routes` turn fibre's and FRR's JSON route tables into one form:
(prefix, kind, sorted gateways) for every route zebra installs (FRR: protocol static,
installed; fibre: zebra's protocol numbers, metric 20).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from binaries import binary

ZEBRA = "/usr/lib/frr/zebra"
STATICD = "/usr/lib/frr/staticd"
FPM_PORT = 2620
ETH1 = [("10.0.1.1/24", []), ("2001:db8:1::1/64", ["nodad"])]
#: RTPROT_ZSTATIC, as zebra stamps static routes (`zebra2proto`).
ZSTATIC = "196"


def can_run() -> str | None:
    """Why the lab cannot run here, or None."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return "needs root and iproute2 for a network namespace"
    if binary("fibred") is None or binary("fibre") is None:
        return "fibre and fibred are not built (cargo build --release)"
    return None


def frr_missing() -> str | None:
    if not (os.access(ZEBRA, os.X_OK) and os.access(STATICD, os.X_OK) and shutil.which("vtysh")):
        return "FRR is not installed (apt-get install frr; scripts/setup does it)"
    return None


class Lab:
    def __init__(self, tag: str):
        self.ns = f"fibre-fpm-{tag}-{os.getpid()}"
        # zebra and staticd read their files as user frr: a directory of their own, outside
        # the private temporary directories of test runners.
        self.dir = tempfile.mkdtemp(prefix=f"{self.ns}-")
        tmp = self.dir
        os.chmod(tmp, 0o777)
        # fibreds by name (the first is "fibred"), each with its process, or None when stopped.
        self.fibreds: dict[str, subprocess.Popen | None] = {}
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        for c in [
            "link set lo up",
            "link add eth1 type veth peer name p1",
            "link set p1 up",
            "link set eth1 up",
        ] + [f"addr add {a} dev eth1 {' '.join(o)}" for a, o in ETH1]:
            self.ip(*c.split())

    def ip(self, *args: str) -> str:
        return subprocess.run(["ip", "-n", self.ns, *args], check=True, capture_output=True, text=True).stdout

    def exec(self, *cmd: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.ns, *cmd], **kw)

    # fibred

    def sock(self, name: str = "fibred") -> str:
        return os.path.join(self.dir, f"{name}.sock")

    def start_fibred(self, *extra: str, name: str = "fibred", port: int = FPM_PORT) -> None:
        """fibred `name` in the namespace, FPM on 127.0.0.1:`port`, keeping its state in the
        lab's directory; on a fresh state its link eth1 is configured as the kernel's."""
        state = os.path.join(self.dir, f"{name}.state")
        fresh = not os.path.exists(state)
        logfile = os.path.join(self.dir, f"{name}.log")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, binary("fibred"), "--socket", self.sock(name), "--no-dgram",
             "--state", state, "--fpm", f"127.0.0.1:{port}", "--fpm-sweep", "1,20", *extra],
            stdout=subprocess.DEVNULL, stderr=open(logfile, "a"),
        )
        self.fibreds[name] = proc
        deadline = time.time() + 10
        while not os.path.exists(self.sock(name)):
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("fibred did not start: " + open(logfile).read())
            time.sleep(0.02)
        if fresh:
            # zebra's blackhole next hops hang off the loopback, which must be up (as the
            # kernel's is in the namespace).
            self.fibre("link", "set", "lo", "up", on=name)
            self.fibre("link", "add", "eth1", "type", "dummy", on=name)
            self.fibre("link", "set", "eth1", "up", on=name)
            for a, _ in ETH1:
                self.fibre("addr", "add", a, "dev", "eth1", on=name)

    def stop_fibred(self, name: str = "fibred") -> None:
        proc = self.fibreds.get(name)
        if proc is not None:
            proc.terminate()
            proc.wait(10)
            self.fibreds[name] = None

    def fibre(self, *args: str, on: str = "fibred") -> str:
        r = subprocess.run([binary("fibre"), "-n", self.sock(on), *args], capture_output=True, text=True)
        assert r.returncode == 0, f"fibre {' '.join(args)}: {r.stderr}"
        return r.stdout

    def fibre_routes(self, on: str = "fibred") -> set:
        out = set()
        for fam in ("-4", "-6"):
            for r in json.loads(self.fibre("-j", fam, "route", "show", on=on)):
                if r.get("protocol") != ZSTATIC:
                    continue
                gws = [h["gateway"] for h in r.get("nexthops", [])] or ([r["gateway"]] if "gateway" in r else [])
                assert r.get("metric") == 20, r
                out.add((r["dst"], r.get("type", "unicast"), tuple(sorted(gws))))
        return out

    # FRR

    def start_frr(self, statics: list[str], fpm_port: int = FPM_PORT, staticd: bool = True) -> None:
        """zebra (with dplane_fpm_nl, pointed at `fpm_port`) and, unless told not to, staticd
        with `statics`."""
        zconf = os.path.join(self.dir, "zebra.conf")
        sconf = os.path.join(self.dir, "staticd.conf")
        with open(zconf, "w") as f:
            f.write(f"hostname fibre-lab\nfpm address 127.0.0.1 port {fpm_port}\n!\n")
        with open(sconf, "w") as f:
            f.write("\n".join(statics) + "\n!\n")
        for p in (zconf, sconf):
            os.chmod(p, 0o644)
        daemons = [("zebra", ZEBRA, zconf, ["-M", "dplane_fpm_nl"]), ("staticd", STATICD, sconf, [])]
        for name, exe, conf, extra in daemons[:2 if staticd else 1]:
            self.exec(exe, "-d", "-N", self.ns, "-f", conf, "-i", os.path.join(self.dir, f"{name}.pid"),
                      "--log", f"file:{self.dir}/{name}.log", *extra, check=True, capture_output=True)

    def kill_frr(self) -> None:
        """zebra and staticd die (SIGKILL: zebra withdraws nothing, as after a crash). What
        zebra had installed in the namespace's kernel is cleared too: zebra 8.4 reads such
        leftovers at its next start and sends them over FPM as its own, then drops them from
        its RIB without withdrawing them, which leaves FRR's own two views at odds (seen in
        about one run in six); a daemon starting on a clean kernel, as after a reboot, is
        what is tested."""
        for name in ("staticd", "zebra"):
            pid = os.path.join(self.dir, f"{name}.pid")
            try:
                os.kill(int(open(pid).read()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
            try:
                os.unlink(pid)
            except OSError:
                pass
        time.sleep(0.2)
        for family in ("-4", "-6"):
            subprocess.run(["ip", "-n", self.ns, family, "route", "flush", "proto", ZSTATIC], capture_output=True)
        subprocess.run(["ip", "-n", self.ns, "nexthop", "flush"], capture_output=True)

    def vtysh(self, *cmds: str) -> str:
        args = []
        for c in cmds:
            args += ["-c", c]
        r = self.exec("vtysh", "-N", self.ns, *args, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    def frr_routes(self) -> set:
        return frr_routes(self.vtysh("show ip route json"), self.vtysh("show ipv6 route json"))

    def fpm_counters(self) -> dict:
        return json.loads(self.vtysh("show fpm counters json"))

    def close(self) -> None:
        self.kill_frr()
        for name in list(self.fibreds):
            self.stop_fibred(name)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        shutil.rmtree(f"/var/run/frr/{self.ns}", ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self) -> str:
        """fibred's and FRR's logs, for a failure's message."""
        out = []
        for name in [*self.fibreds, "zebra", "staticd"]:
            try:
                out.append(f"--- {name}.log\n" + open(os.path.join(self.dir, f"{name}.log")).read()[-4000:])
            except OSError:
                pass
        return "\n".join(out)


def frr_routes(*tables: str) -> set:
    """zebra's installed static routes from `show ip[v6] route json` texts."""
    out = set()
    for t in tables:
        for prefix, entries in json.loads(t).items():
            for e in entries:
                if e.get("protocol") != "static" or not e.get("installed"):
                    continue
                hops = [h for h in e["nexthops"] if h.get("fib") or h.get("active")]
                kind = "blackhole" if any(h.get("unreachable") or h.get("blackhole") for h in hops) else "unicast"
                gws = tuple(sorted(h["ip"] for h in hops if "ip" in h))
                out.add((prefix, kind, gws))
    return out


def wait_for(what: str, cond, timeout: float = 20.0, logs=None) -> None:
    deadline = time.time() + timeout
    while True:
        last = cond()
        if last is True:
            return
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {last}\n{logs() if logs else ''}")
        time.sleep(0.2)


def main_prefixes(port: int) -> int:
    """The IPv4 main table's prefixes in the metrics of the fibred serving them on `port` (of
    the calling namespace's loopback); -1 while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return -1
    m = re.search(r'^fibre_fib_prefixes\{family="inet",table="254"\} (\d+)$', text, re.M)
    return int(m.group(1)) if m else 0
