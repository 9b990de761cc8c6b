"""Records what FRR's zebra sends over FPM, for the replay test (test_fpm_replay.py) to feed
fibred where FRR is absent.

    python3 tests/fpm/record.py            # as root, FRR installed, fibre built

It builds the lab of lab.py, starts fibred, puts a recording proxy between zebra and fibred
(zebra connects to the proxy, which forwards both ways and keeps the bytes zebra sent),
starts zebra and staticd with STATICS, waits until fibred holds what zebra installed, then
changes the configuration through vtysh (CHANGES: a delete, an ECMP leg removed, a route
added) and waits again. It writes, beside this file:
- zebra-<version>.fpm: the byte stream zebra sent, FPM frames as they came;
- zebra-<version>.json: FRR's installed static routes at the end (`show ip route json`,
  `show ipv6 route json`, reduced by lab.frr_routes) and FRR's version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lab  # noqa: E402

STATICS = [
    "ip route 192.0.2.0/24 10.0.1.2",
    "ip route 198.51.100.0/24 10.0.1.2",
    "ip route 198.51.100.0/24 10.0.1.3",
    "ip route 198.51.100.0/24 10.0.1.4",
    "ip route 203.0.113.0/24 blackhole",
    "ip route 10.20.0.0/16 10.0.1.5",
    "ip route 10.21.0.0/16 10.0.1.5",
    "ipv6 route 2001:db8:9::/48 2001:db8:1::2",
    "ipv6 route 2001:db8:a::/48 2001:db8:1::2",
    "ipv6 route 2001:db8:a::/48 2001:db8:1::3",
]
CHANGES = [
    "no ip route 10.21.0.0/16 10.0.1.5",
    "no ip route 198.51.100.0/24 10.0.1.4",
    "ip route 10.22.0.0/16 10.0.1.6",
    "no ipv6 route 2001:db8:9::/48 2001:db8:1::2",
]
PROXY_PORT = 2621


def converged(l: lab.Lab, count: int):
    """A condition for lab.wait_for: fibre holds exactly the `count` routes FRR installed."""
    def check():
        f, z = l.fibre_routes(), l.frr_routes()
        return (f == z and len(z) == count) or {"fibre": sorted(f), "frr": sorted(z)}
    return check


def proxy(ns: str, out: str) -> subprocess.Popen:
    """A one-connection recording proxy in namespace `ns`: 127.0.0.1:PROXY_PORT -> FPM_PORT."""
    code = f"""
import socket, threading
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", {PROXY_PORT})); l.listen(1)
print("ready", flush=True)
z, _ = l.accept()
f = socket.create_connection(("127.0.0.1", {lab.FPM_PORT}))
rec = open({out!r}, "wb")
def back():
    while (d := f.recv(65536)):
        z.sendall(d)
threading.Thread(target=back, daemon=True).start()
while (d := z.recv(65536)):
    rec.write(d); rec.flush(); f.sendall(d)
"""
    p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def main() -> int:
    why = lab.can_run() or lab.frr_missing()
    if why:
        print(f"record: {why}", file=sys.stderr)
        return 1
    version = subprocess.run([lab.ZEBRA, "--version"], capture_output=True, text=True).stdout.split()[2]
    stream = os.path.join(HERE, f"zebra-{version}.fpm")
    l = lab.Lab("record")
    rec = None
    try:
        l.start_fibred()
        rec = proxy(l.ns, stream)
        l.start_frr(STATICS, fpm_port=PROXY_PORT)
        lab.wait_for("the first load", converged(l, 7), logs=l.logs)
        l.vtysh("configure terminal", *CHANGES)
        lab.wait_for("the changes", converged(l, 6), logs=l.logs)
        routes = sorted(list(r) for r in l.frr_routes())
        with open(os.path.join(HERE, f"zebra-{version}.json"), "w") as f:
            json.dump({"frr": version, "statics": STATICS, "changes": CHANGES, "routes": routes}, f, indent=1)
            f.write("\n")
    finally:
        l.close()
        if rec is not None:
            rec.kill()
    print(f"record: {os.path.getsize(stream)} bytes in {stream}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
