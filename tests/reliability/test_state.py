"""fibred's `--state` file through the real binary: what a restart keeps, kill -9 during saves,
damaged files refused (and never overwritten), socket paths that never replace a file, and the
temporary file a save goes through. Needs target/release/fibred and fibre (beside $FIBRE or in
target/release); skips without them."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from binaries import binary

HEADER_LEN = 24

# Issue 12's reproduction (with the loopback up: a blackhole next hop sits on it and, as in
# the kernel, needs it up).
REPRO = [
    "link set lo up",
    "link add eth0 type dummy",
    "link set eth0 up",
    "address add 192.0.2.1/24 dev eth0",
    "nexthop add id 1 via 192.0.2.2 dev eth0",
    "nexthop add id 9 blackhole",
    "route add 10.0.0.0/8 nhid 1",
    "route add 10.9.0.0/16 nhid 9",
]

# More of what the CLI makes: groups, a resilient group, a multipath route with a member
# on a link without carrier, other tables, rules, neighbours and a proxy entry, an expiring
# route, metrics, IPv6.
MORE = [
    "link add eth1 type dummy",
    "link set eth1 up",
    "address add 198.51.100.1/24 dev eth1",
    "address add 2001:db8:1::1/64 dev eth1",
    "nexthop add id 2 via 198.51.100.2 dev eth1",
    "nexthop add id 20 group 1/2",
    "nexthop add id 21 group 1,3/2 type resilient buckets 8 idle_timer 10",
    "route add 10.20.0.0/16 nhid 20",
    "route add 10.30.0.0/16 nexthop via 192.0.2.3 dev eth0 nexthop via 198.51.100.3 dev eth1",
    "route add 10.40.0.0/16 via 192.0.2.4 table 100 metric 7 mtu 1400",
    "route add 2001:db8:9::/64 via 2001:db8:1::9 expires 3600",
    "rule add from 203.0.113.0/24 table 100 priority 100",
    "neigh add 192.0.2.50 lladdr 02:00:00:00:00:50 dev eth0",
    "neigh add proxy 2001:db8:1::77 dev eth1",
    "link set eth1 carrier off",
]

SHOWS = [
    ["link", "show"],
    ["address", "show"],
    ["nexthop", "show"],
    ["route", "show", "table", "all"],
    ["-6", "route", "show", "table", "all"],
    ["rule", "show"],
    ["neigh", "show"],
    ["neigh", "show", "proxy"],
]


def need(name: str) -> str:
    p = binary(name)
    if p is None:
        pytest.skip(f"{name} is not built (cargo build --release -p fibred -p fibre-cli)")
    return p


class Fibred:
    """One fibred process on a socket in `d`."""

    def __init__(self, d: str, *args: str):
        self.sock = os.path.join(d, "fibred.sock")
        self.proc = subprocess.Popen(
            [need("fibred"), "--socket", self.sock, *args],
            stderr=subprocess.PIPE,
        )
        deadline = time.time() + 10
        while not self.listening():
            if self.proc.poll() is not None:
                raise RuntimeError("fibred did not start: " + self.proc.stderr.read().decode())
            if time.time() > deadline:
                self.proc.kill()
                raise RuntimeError("fibred did not start in time")
            time.sleep(0.02)

    def listening(self) -> bool:
        # A killed fibred leaves its socket files: wait until one accepts a connection.
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            try:
                s.connect(self.sock)
                return True
            except OSError:
                return False

    def fibre(self, *args: str, check: bool = True) -> str:
        r = subprocess.run([need("fibre"), "-n", self.sock, *args], capture_output=True, text=True)
        if check:
            assert r.returncode == 0, f"fibre {' '.join(args)}: {r.stderr}"
        return r.stdout

    def show(self) -> list[str]:
        return [self.fibre(*s) for s in SHOWS]

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err.decode()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stderr.close()


def refused_start(d: str, *args: str) -> str:
    """Starts fibred with `args`, which must refuse to start; returns its log."""
    sock = os.path.join(d, "refused.sock")
    try:
        r = subprocess.run([need("fibred"), "--socket", sock, *args], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"fibred {' '.join(args)} started")
    assert r.returncode != 0, r.stderr
    assert not os.path.exists(sock)
    return r.stderr


@pytest.fixture
def workdir(tmp_path):
    need("fibred")
    need("fibre")
    return str(tmp_path)


def configure(d: Fibred, lines: list[str]) -> None:
    for line in lines:
        d.fibre(*line.split())


def test_issue_reproduction_survives_restarts(workdir):
    state = os.path.join(workdir, "state")
    d = Fibred(workdir, "--state", state)
    configure(d, REPRO)
    before = d.show()
    assert "nhid 1" in before[3] and "nhid 9" in before[3]
    assert "id 9 blackhole" in before[2]
    assert d.stop()[0] == 0
    saved = open(state, "rb").read()
    for _ in range(2):
        d = Fibred(workdir, "--state", state)
        assert d.show() == before
        assert d.stop()[0] == 0
        # The same state saves to the same bytes: nothing shrinks across restarts.
        assert open(state, "rb").read() == saved


def test_every_object_kind_survives_a_restart(workdir):
    state = os.path.join(workdir, "state")
    d = Fibred(workdir, "--state", state)
    configure(d, REPRO + MORE)
    before = d.show()
    assert "linkdown" in before[3], before[3]
    assert d.stop()[0] == 0
    d = Fibred(workdir, "--state", state)
    after = d.show()
    assert d.stop()[0] == 0
    # Seconds left of the expiring route may differ by one.
    strip = lambda s: [" ".join(w for w in line.split() if not w.endswith("sec")) for line in s.splitlines()]  # noqa: E731
    assert [strip(s) for s in after] == [strip(s) for s in before]


def test_the_payload_reads_with_ip_monitor_file(workdir):
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2's ip")
    state = os.path.join(workdir, "state")
    d = Fibred(workdir, "--state", state)
    configure(d, REPRO)
    assert d.stop()[0] == 0
    payload = os.path.join(workdir, "payload")
    with open(payload, "wb") as f:
        subprocess.run(["tail", "-c", f"+{HEADER_LEN + 1}", state], stdout=f, check=True)
    out = subprocess.run(["ip", "monitor", "file", payload], capture_output=True, text=True, check=True).stdout
    assert "10.0.0.0/8 nhid 1" in out, out
    assert "id 9 blackhole" in out, out


def test_kill_9_during_saves_leaves_the_old_or_the_new_state(workdir):
    """Bursts of routes, each followed by the pause that starts a save; fibred is killed the
    moment a save's temporary file appears (after a first save of the round has completed,
    in even rounds) or at a random moment (odd rounds). Every restart must succeed and hold
    whole bursts only, never fewer than the round before."""
    state = os.path.join(workdir, "state")
    tmp = state + ".fibred-tmp"
    burst = 2000
    rng = random.Random(12)
    d = Fibred(workdir, "--state", state)
    configure(d, ["link add eth0 type dummy", "link set eth0 up"])
    assert d.stop()[0] == 0
    restored = 0
    during = 0  # kills that landed while a save was being written
    for round_ in range(6):
        d = Fibred(workdir, "--state", state)
        routes = d.fibre("route", "show").count("dev eth0 ")
        assert routes % burst == 0, f"round {round_}: {routes} routes, not whole bursts"
        assert routes >= restored, f"round {round_}: {routes} after {restored}"
        restored = routes
        stop = threading.Event()

        def stream(d=d, start=restored // burst):
            for n in range(start, start + 3):
                if stop.is_set():
                    return
                lines = "".join(f"route add 10.{n}.{i >> 8}.{i & 255}/32 dev eth0\n" for i in range(burst))
                r = subprocess.run([need("fibre"), "-n", d.sock, "-batch", "-"], input=lines, capture_output=True, text=True)
                if r.returncode != 0:
                    return  # killed under it
                time.sleep(1.2)  # a save starts after 1 s without changes

        t = threading.Thread(target=stream)
        t.start()
        if round_ % 2 == 0:
            deadline = time.time() + 15
            for appear in (True, False, True):
                while time.time() < deadline and os.path.exists(tmp) != appear:
                    time.sleep(0.0005)
        else:
            time.sleep(rng.uniform(1.0, 4.0))
        during += os.path.exists(tmp)
        d.kill()
        stop.set()
        t.join()
    d = Fibred(workdir, "--state", state)
    assert d.fibre("route", "show").count("dev eth0 ") >= restored > 0
    assert d.stop()[0] == 0
    assert not os.path.exists(tmp)
    assert during >= 1, "no kill landed during a save"



def good_state(workdir: str) -> str:
    state = os.path.join(workdir, "state")
    d = Fibred(workdir, "--state", state)
    configure(d, REPRO)
    assert d.stop()[0] == 0
    return state


@pytest.mark.parametrize("where", ["magic", "version", "checksum", "length", "first", "middle", "last"])
def test_a_flipped_byte_refuses_the_start_and_leaves_the_file(workdir, where):
    state = good_state(workdir)
    data = bytearray(open(state, "rb").read())
    at = {"magic": 0, "version": 8, "checksum": 12, "length": 16, "first": HEADER_LEN,
          "middle": len(data) // 2, "last": len(data) - 1}[where]
    data[at] ^= 0x10
    open(state, "wb").write(data)
    log = refused_start(workdir, "--state", state)
    assert state in log and "byte offset" in log, log
    assert open(state, "rb").read() == bytes(data)


@pytest.mark.parametrize("keep", [0, 10, HEADER_LEN, "half", "all-but-one"])
def test_a_truncated_or_empty_file_refuses_the_start(workdir, keep):
    state = good_state(workdir)
    data = open(state, "rb").read()
    n = {"half": len(data) // 2, "all-but-one": len(data) - 1}.get(keep, keep)
    open(state, "wb").write(data[:n])
    log = refused_start(workdir, "--state", state)
    assert state in log and "byte offset" in log and "truncated" in log, log
    assert open(state, "rb").read() == data[:n]


def test_a_directory_in_place_of_the_file_refuses_the_start(workdir):
    state = os.path.join(workdir, "state")
    os.mkdir(state)
    log = refused_start(workdir, "--state", state)
    assert state in log, log
    assert os.path.isdir(state) and os.listdir(state) == []


def test_an_unreadable_file_refuses_the_start(workdir):
    state = good_state(workdir)
    data = open(state, "rb").read()
    os.chmod(state, 0)
    args = []
    if os.geteuid() == 0:
        # Root reads anything: run fibred as nobody, in a directory nobody may write.
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv to drop root")
        os.chmod(workdir, 0o777)
        args = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    sock = os.path.join(workdir, "refused.sock")
    r = subprocess.run(args + [need("fibred"), "--socket", sock, "--state", state], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0, r.stderr
    assert state in r.stderr and "read" in r.stderr, r.stderr
    os.chmod(state, 0o600)
    assert open(state, "rb").read() == data


def test_a_refused_file_is_moved_aside_only_when_asked(workdir):
    state = good_state(workdir)
    data = bytearray(open(state, "rb").read())
    data[-1] ^= 1
    open(state, "wb").write(data)
    d = Fibred(workdir, "--state", state, "--state-discard-corrupt")
    assert "nhid" not in d.fibre("route", "show")
    assert d.stop()[0] == 0
    aside = [f for f in os.listdir(workdir) if f.startswith("state.corrupt-")]
    assert len(aside) == 1, os.listdir(workdir)
    assert open(os.path.join(workdir, aside[0]), "rb").read() == bytes(data)


@pytest.mark.parametrize("option", ["--socket", "--dgram"])
def test_a_socket_path_never_replaces_a_regular_file(workdir, option):
    state = good_state(workdir)
    data = open(state, "rb").read()
    args = ["--dgram", os.path.join(workdir, "d.dgram")] if option == "--socket" else []
    r = subprocess.run([need("fibred"), *args, option, state], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0, r.stderr
    assert "not a socket" in r.stderr, r.stderr
    assert open(state, "rb").read() == data


def test_a_live_datagram_socket_is_not_taken_over(workdir):
    """A second fibred pointed at the first one's datagram socket refuses to start and leaves it
    working (a socket someone is bound to is not stale, whatever its type)."""
    first = Fibred(workdir)
    try:
        dgram = first.sock.replace(".sock", ".dgram")
        r = subprocess.run(
            [need("fibred"), "--socket", os.path.join(workdir, "second.sock"), "--dgram", dgram],
            capture_output=True, text=True, timeout=20,
        )
        assert r.returncode != 0 and "in use" in r.stderr, r.stderr
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.bind("")
            s.connect(dgram)
            # RTM_GETLINK dump: the first fibred still answers on its datagram socket.
            s.send(bytes.fromhex("20000000120001030100000000000000") + bytes(16))
            s.settimeout(5)
            assert s.recv(65536)
    finally:
        assert first.stop()[0] == 0


def test_a_state_file_has_one_owner(workdir):
    """A second fibred given the first one's state file (on another socket) refuses to start,
    so the two never save over each other; once the first stops, the state is free."""
    state = os.path.join(workdir, "state")
    first = Fibred(workdir, "--state", state)
    configure(first, ["link add eth0 type dummy"])
    err = refused_start(workdir, "--state", state)
    assert "another fibred uses this state file" in err, err
    assert first.stop()[0] == 0
    again = Fibred(workdir, "--state", state)
    assert "eth0" in again.fibre("link", "show")
    assert again.stop()[0] == 0


def test_a_state_named_like_a_temporary_file_is_saved_atomically(workdir):
    state = os.path.join(workdir, "state.tmp")
    d = Fibred(workdir, "--state", state)
    configure(d, REPRO)
    time.sleep(1.5)  # the save after changes stop
    assert sorted(os.listdir(workdir)) == ["fibred.dgram", "fibred.sock", "state.tmp", "state.tmp.fibred-lock"]
    assert d.stop()[0] == 0
    d = Fibred(workdir, "--state", state)
    assert "nhid 9" in d.fibre("route", "show")
    assert d.stop()[0] == 0


def test_a_state_that_cannot_be_written_refuses_the_start(workdir):
    log = refused_start(workdir, "--state", os.path.join(workdir, "missing", "state"))
    assert "missing/state" in log and "cannot create" in log, log


def test_a_failed_final_save_exits_non_zero(workdir):
    sub = os.path.join(workdir, "sub")
    os.mkdir(sub)
    d = Fibred(workdir, "--state", os.path.join(sub, "state"))
    configure(d, REPRO)
    shutil.rmtree(sub)
    rc, log = d.stop()
    assert rc != 0 and "cannot save state" in log, (rc, log)
