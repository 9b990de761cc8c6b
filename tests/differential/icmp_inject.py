#!/usr/bin/env python3
"""Makes the kernel of the current network namespace learn a next-hop exception without a data
plane: the stand-in for fibre's `route exception add DST mtu MTU`.

It sends to one of the namespace's own addresses an ICMP "fragmentation needed" (IPv4) or
ICMPv6 "packet too big" quoting an ICMP echo request from that address to DST. The kernel's
ICMP error handler for a quoted echo request (icmp_err / icmpv6_err) updates the path MTU of
DST exactly as for a real router's message, so `ip route get DST` then shows the exception.

    python3 icmp_inject.py DST MTU
"""

import ipaddress
import socket
import struct
import sys


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def local_source(dst: str, family: int) -> str:
    """The address the kernel would send from to DST (its route's source)."""
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((dst, 9))
        return s.getsockname()[0]


def main() -> int:
    dst, mtu = sys.argv[1], int(sys.argv[2])
    if ipaddress.ip_address(dst).version == 6:
        src = local_source(dst, socket.AF_INET6)
        echo = struct.pack("!BBHHH", 128, 0, 0, 1, 1)
        inner = struct.pack("!IHBB16s16s", 6 << 28, len(echo), 58, 64,
                            socket.inet_pton(socket.AF_INET6, src),
                            socket.inet_pton(socket.AF_INET6, dst)) + echo
        # The kernel fills in the ICMPv6 checksum of a raw ICMPv6 socket.
        msg = struct.pack("!BBHI", 2, 0, 0, mtu) + inner
        with socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6) as s:
            s.sendto(msg, (src, 0))
    else:
        src = local_source(dst, socket.AF_INET)
        echo = struct.pack("!BBHHH", 0, 0, 0, 1, 1)
        echo = echo[:2] + struct.pack("!H", checksum(echo)) + echo[4:]
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(echo), 1, 0x4000, 64, 1, 0,
                          socket.inet_aton(src), socket.inet_aton(dst))
        hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
        msg = struct.pack("!BBHHH", 3, 4, 0, 0, mtu) + hdr + echo
        msg = msg[:2] + struct.pack("!H", checksum(msg)) + msg[4:]
        with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
            s.sendto(msg, (src, 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
