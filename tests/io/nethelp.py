"""Small network tools for the live forwarding tests, run inside a namespace with
`ip netns exec NS python3 nethelp.py ...` (this machine has no ping or ethtool):

  ping DST [TRIES]        one ICMP echo answered within TRIES half-second tries; exit 0 if so
  udp-echo PORT SECONDS [ADDR]
                          answers each UDP datagram on PORT (of ADDR, else any address) with
                          the same bytes, for SECONDS
  udp-ask DST PORT        sends a datagram to DST:PORT and waits for it back; exit 0 if so
  tcp-echo PORT SECONDS [ADDR]
                          echoes one TCP connection on PORT (of ADDR, else any address), for at
                          most SECONDS
  tcp-ask DST PORT BYTES  sends BYTES over TCP to DST:PORT and reads them back; exit 0 if equal
  icmp-error DST          sends a UDP datagram to DST:9 and prints the errno an ICMP error
                          turned into (ENETUNREACH, ...); exit 0 if one came
  flood DST PORT SECONDS  sends UDP datagrams to DST:PORT for SECONDS (about 2000 a second);
                          prints how many
  flows DST PORT FLOWS EACH
                          sends EACH datagrams on each of FLOWS flows (source ports) to
                          DST:PORT, one flow after another in turn, about 1000 a second
  udp-count PORT SECONDS  counts the UDP datagrams arriving on PORT until none came for
                          SECONDS (5 at least before the first); prints how many
  pmtu DST SIZE           sends SIZE-byte UDP datagrams with DF to DST until the path MTU
                          learnt from an ICMP "fragmentation needed" is below SIZE; prints it
  offloads-off DEV [tx]   segmentation offloads (TSO, GSO) off on DEV, and with `tx` transmit
                          checksum offload too (ethtool -K DEV tso off gso off [tx off])
"""

from __future__ import annotations

import array
import errno
import fcntl
import os
import socket
import struct
import sys
import time


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def ping(dst: str, tries: int) -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.settimeout(0.5)
    ident = os.getpid() & 0xFFFF
    for seq in range(tries):
        payload = b"fibre-io live test"
        hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        c = checksum(hdr + payload)
        s.sendto(struct.pack("!BBHHH", 8, 0, c, ident, seq) + payload, (dst, 0))
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            try:
                pkt, (src, _) = s.recvfrom(2048)
            except socket.timeout:
                break
            ihl = (pkt[0] & 0x0F) * 4
            t, _, _, i, q = struct.unpack("!BBHHH", pkt[ihl:ihl + 8])
            if src == dst and t == 0 and i == ident and q == seq:
                return True
    return False


def udp_echo(port: int, seconds: float, addr: str = "0.0.0.0") -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    s.settimeout(0.2)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data, peer = s.recvfrom(2048)
        except socket.timeout:
            continue
        s.sendto(data, peer)


def udp_ask(dst: str, port: int) -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.5)
    for i in range(10):
        msg = f"fibre-io {i}".encode()
        s.sendto(msg, (dst, port))
        try:
            data, _ = s.recvfrom(2048)
        except socket.timeout:
            continue
        if data == msg:
            return True
    return False


def tcp_echo(port: int, seconds: float, addr: str = "0.0.0.0") -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    s.settimeout(seconds)
    try:
        c, _ = s.accept()
    except socket.timeout:
        return
    c.settimeout(seconds)
    while True:
        data = c.recv(65536)
        if not data:
            break
        c.sendall(data)
    c.close()


def tcp_ask(dst: str, port: int, n: int) -> bool:
    payload = bytes((i * 7) & 0xFF for i in range(n))
    s = socket.create_connection((dst, port), timeout=5)
    s.settimeout(5)
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    got = bytearray()
    while True:
        data = s.recv(65536)
        if not data:
            break
        got += data
    return bytes(got) == payload


def icmp_error(dst: str) -> str | None:
    IP_RECVERR = 11
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Without it Linux reports only the "fatal" ICMP errors (port and protocol unreachable).
    s.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
    s.settimeout(0.5)
    s.connect((dst, 9))
    for _ in range(10):
        try:
            s.send(b"fibre-io icmp")
            s.recv(2048)
        except socket.timeout:
            continue
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno))
    return None


def flood(dst: str, port: int, seconds: float) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            s.sendto(b"f" * 64, (dst, port))
            n += 1
        except OSError:
            pass
        time.sleep(0.0005)
    return n


def flows(dst: str, port: int, n: int, each: int) -> None:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for i in range(each):
        for s in socks:
            s.sendto(f"flow {i}".encode(), (dst, port))
            time.sleep(0.001)


def udp_count(port: int, quiet: float) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind(("0.0.0.0", port))
    n = 0
    while True:
        # The first datagram may be some time in coming (the sender starting).
        s.settimeout(quiet if n else max(quiet, 5.0))
        try:
            s.recv(2048)
        except socket.timeout:
            return n
        n += 1


def pmtu(dst: str, size: int) -> int | None:
    IP_MTU_DISCOVER, IP_PMTUDISC_DO, IP_MTU = 10, 2, 14
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
    s.connect((dst, 9))
    for _ in range(20):
        try:
            s.send(b"m" * (size - 28))
        except OSError:
            pass
        time.sleep(0.1)
        mtu = s.getsockopt(socket.IPPROTO_IP, IP_MTU)
        if mtu < size:
            return mtu
    return None


def ethtool_set(dev: str, cmd: int, value: int) -> None:
    SIOCETHTOOL = 0x8946
    buf = array.array("B", struct.pack("II", cmd, value))
    addr, _ = buf.buffer_info()
    ifr = struct.pack("16sP", dev.encode(), addr)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifr)


def offloads_off(dev: str, tx: bool) -> None:
    ETHTOOL_STXCSUM, ETHTOOL_STSO, ETHTOOL_SGSO = 0x17, 0x1F, 0x24
    ethtool_set(dev, ETHTOOL_STSO, 0)
    ethtool_set(dev, ETHTOOL_SGSO, 0)
    if tx:
        ethtool_set(dev, ETHTOOL_STXCSUM, 0)


def main(argv: list[str]) -> int:
    cmd = argv[0]
    if cmd == "ping":
        return 0 if ping(argv[1], int(argv[2]) if len(argv) > 2 else 10) else 1
    if cmd == "udp-echo":
        udp_echo(int(argv[1]), float(argv[2]), *argv[3:4])
        return 0
    if cmd == "udp-ask":
        return 0 if udp_ask(argv[1], int(argv[2])) else 1
    if cmd == "tcp-echo":
        tcp_echo(int(argv[1]), float(argv[2]), *argv[3:4])
        return 0
    if cmd == "tcp-ask":
        return 0 if tcp_ask(argv[1], int(argv[2]), int(argv[3])) else 1
    if cmd == "icmp-error":
        err = icmp_error(argv[1])
        print(err)
        return 0 if err is not None else 1
    if cmd == "flood":
        print(flood(argv[1], int(argv[2]), float(argv[3])))
        return 0
    if cmd == "flows":
        flows(argv[1], int(argv[2]), int(argv[3]), int(argv[4]))
        return 0
    if cmd == "udp-count":
        print(udp_count(int(argv[1]), float(argv[2])))
        return 0
    if cmd == "pmtu":
        mtu = pmtu(argv[1], int(argv[2]))
        print(mtu)
        return 0 if mtu is not None else 1
    if cmd == "offloads-off":
        offloads_off(argv[1], argv[2:] == ["tx"])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
