"""fibred checked by clients and decoders nobody here wrote.

- pyroute2 0.9 (`IPRoute(use_socket=...)`) adds, dumps, gets and deletes links, addresses and
  routes on a fibred started by the test. pyroute2 drives its socket with asyncio's datagram
  transport, so it is handed an AF_UNIX SOCK_DGRAM socket, autobound (so fibred can answer)
  and connected to fibred's datagram socket.
- iproute2's `ip monitor file FILE` decodes fibre's raw route dump to the same text as the
  kernel's dump of the same configuration (made in a network namespace; IPv4, whose routes do
  not depend on random link-local addresses).

fibred is taken from beside $FIBRE (the `fibre` binary under test) or target/release. Tests
skip with a message when pyroute2, fibred, ip or network namespaces are unavailable.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time

import pytest

from binaries import binary



@pytest.fixture
def fibred():
    exe = binary("fibred")
    if exe is None:
        pytest.skip("fibred is not built (cargo build --release -p fibred)")
    d = tempfile.mkdtemp(prefix="fibre-online-")
    sock = os.path.join(d, "fibred.sock")
    proc = subprocess.Popen([exe, "--socket", sock], stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while not os.path.exists(os.path.join(d, "fibred.dgram")):
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail("fibred did not start: " + proc.stderr.read().decode())
        time.sleep(0.02)
    yield sock
    proc.terminate()
    proc.wait(timeout=10)
    assert not os.path.exists(sock), "fibred removes its socket on SIGTERM"
    shutil.rmtree(d, ignore_errors=True)


def fibre(sock: str, *args: str) -> str:
    exe = binary("fibre")
    if exe is None:
        pytest.skip("fibre is not built")
    r = subprocess.run([exe, "-n", sock, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_pyroute2_adds_dumps_gets_and_deletes(fibred):
    pr = pytest.importorskip("pyroute2", reason="pyroute2 0.9 is not installed (tests/requirements.txt)")
    from pyroute2.netlink.exceptions import NetlinkError

    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("")
    s.connect(fibred.replace(".sock", ".dgram"))
    ipr = pr.IPRoute(use_socket=s)
    try:
        ipr.link("add", ifname="eth0", kind="dummy")
        (idx,) = ipr.link_lookup(ifname="eth0")
        ipr.link("set", index=idx, state="up")
        ipr.addr("add", index=idx, address="10.0.0.1", prefixlen=24)
        ipr.route("add", dst="10.1.0.0/16", gateway="10.0.0.2")
        links = {l.get("ifname"): l for l in ipr.link("dump")}
        assert links["eth0"]["index"] == idx
        assert links["eth0"]["flags"] & 1, "eth0 is up"
        addrs = [(a.get("address"), a["prefixlen"]) for a in ipr.addr("dump", family=socket.AF_INET)]
        assert ("10.0.0.1", 24) in addrs
        routes = {(r.get("dst"), r["dst_len"], r.get("table")): r for r in ipr.route("dump", family=socket.AF_INET)}
        assert routes[("10.1.0.0", 16, 254)].get("gateway") == "10.0.0.2"
        assert ("10.0.0.0", 24, 254) in routes, "the address made its prefix route"
        got = ipr.route("get", dst="10.1.2.3")[0]
        assert got.get("gateway") == "10.0.0.2" and got.get("oif") == idx
        # fibre sees what pyroute2 did, and the other way round.
        assert "10.1.0.0/16 via 10.0.0.2 dev eth0" in fibre(fibred, "route")
        fibre(fibred, "route", "add", "blackhole", "10.9.0.0/16")
        assert any(r.get("dst") == "10.9.0.0" for r in ipr.route("dump", family=socket.AF_INET))

        ipr.route("del", dst="10.1.0.0/16", gateway="10.0.0.2")
        with pytest.raises(NetlinkError) as e:
            ipr.route("del", dst="10.1.0.0/16", gateway="10.0.0.2")
        assert e.value.code == 3  # ESRCH, as the kernel answers
        ipr.addr("del", index=idx, address="10.0.0.1", prefixlen=24)
        assert not [a for a in ipr.addr("dump", family=socket.AF_INET) if a.get("address") == "10.0.0.1"]
        ipr.link("del", index=idx)
        assert ipr.link_lookup(ifname="eth0") == []
    finally:
        ipr.close()


NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
RTM_GETROUTE, NLMSG_DONE = 26, 3


def raw_route_dump(sock: socket.socket) -> bytes:
    """An IPv4 RTM_GETROUTE dump as a stream of netlink messages (without NLMSG_DONE)."""
    body = struct.pack("=BBBBBBBBI", socket.AF_INET, 0, 0, 0, 0, 0, 0, 0, 0)
    sock.send(struct.pack("=IHHII", 16 + len(body), RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + body)
    out = b""
    while True:
        d = sock.recv(1 << 16)
        off = 0
        while off < len(d):
            ln, t = struct.unpack_from("=IH", d, off)
            if t == NLMSG_DONE:
                return out
            out += d[off:off + ln] + b"\0" * ((-ln) % 4)
            off += (ln + 3) & ~3


COMMANDS = [
    "link set eth0 up",
    "link set eth1 up",
    "addr add 10.0.0.1/24 dev eth0",
    "addr add 192.168.7.1/28 dev eth1",
    "route add 10.1.0.0/16 via 10.0.0.2",
    "route add blackhole 10.9.0.0/16",
    "route add 172.16.0.0/12 via 10.0.0.3 metric 50",
    "route add unreachable 10.10.0.0/16",
    "route add 10.2.0.0/16 dev eth0 src 10.0.0.1",
    "route add 10.3.0.0/16 table 100 via 192.168.7.2",
]


def monitor_file(stream: bytes, ns: str) -> str:
    """`ip monitor file` run in the namespace, so interface names resolve as the kernel's."""
    with tempfile.NamedTemporaryFile() as f:
        f.write(stream)
        f.flush()
        r = subprocess.run(["ip", "netns", "exec", ns, "ip", "monitor", "file", f.name], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout


KERNEL_DUMP = (
    "import socket,struct,sys\n"
    "s=socket.socket(socket.AF_NETLINK,socket.SOCK_RAW,0)\n"
    "body=struct.pack('=BBBBBBBBI',2,0,0,0,0,0,0,0,0)\n"
    "s.send(struct.pack('=IHHII',16+len(body),26,0x301,1,0)+body)\n"
    "out=b''\n"
    "while True:\n"
    "  d=s.recv(1<<16); off=0; done=False\n"
    "  while off<len(d):\n"
    "    ln,t=struct.unpack_from('=IH',d,off)\n"
    "    if t==3: done=True; break\n"
    "    out+=d[off:off+ln]+b'\\0'*((-ln)%4); off+=(ln+3)&~3\n"
    "  if done: break\n"
    "sys.stdout.buffer.write(out)\n"
)


def test_ip_monitor_file_decodes_fibre_dumps_as_the_kernels(fibred):
    if shutil.which("ip") is None:
        pytest.skip("iproute2 is not installed")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    ns = f"fibre-daemon-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
        pytest.skip("cannot create a network namespace")
    try:
        ex = ["ip", "netns", "exec", ns]
        # No dummy driver here: veth pairs whose peers stay up give carrier like a dummy.
        subprocess.run(ex + ["ip", "link", "add", "eth0", "type", "veth", "peer", "name", "p0"], check=True)
        subprocess.run(ex + ["ip", "link", "add", "eth1", "type", "veth", "peer", "name", "p1"], check=True)
        subprocess.run(ex + ["ip", "link", "set", "p0", "up"], check=True)
        subprocess.run(ex + ["ip", "link", "set", "p1", "up"], check=True)
        # fibre's links get the kernel's interface indexes: created in the kernel's order.
        listing = subprocess.run(ex + ["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
        order = sorted(
            (int(line.split(":")[0]), line.split(":")[1].strip().split("@")[0]) for line in listing.splitlines()
        )
        for _, name in order:
            if name != "lo":
                fibre(fibred, "link", "add", name, "type", "dummy")
        for c in COMMANDS:
            subprocess.run(ex + ["ip", *c.split()], check=True)
            fibre(fibred, *c.split())
        time.sleep(0.2)
        kernel_dump = subprocess.run(ex + ["python3", "-c", KERNEL_DUMP], capture_output=True, check=True).stdout
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(fibred)
        ours = monitor_file(raw_route_dump(s), ns)
        theirs = monitor_file(kernel_dump, ns)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    assert sorted(ours.splitlines()) == sorted(theirs.splitlines())
    assert "10.1.0.0/16 via 10.0.0.2 dev eth0 " in ours.splitlines()
