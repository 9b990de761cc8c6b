#!/usr/bin/env python3
"""Writes the FPM seed frames (the fpm fuzz target's seeds, replayed by tests/fpm.rs) from the
kernel captures: netlink frames (version 1, type 1, big-endian length including the 4-byte
header) around captured RTM_NEWROUTE and RTM_NEWNEXTHOP messages, laid out as zebra sends them:
one route; an update (RTM_DELROUTE then RTM_NEWROUTE in one frame); several frames of one and
of several routes; next-hop objects before a route."""
import pathlib
import struct

HERE = pathlib.Path(__file__).parent
CAPTURES = HERE.parent / "captures"


def messages(name, kind):
    data = (CAPTURES / name).read_bytes()
    out, i = [], 0
    while i + 16 <= len(data):
        length, t = struct.unpack_from("<IH", data, i)
        if length < 16:
            break
        if t == kind:
            out.append(data[i:i + length])
        i = (i + length + 3) & ~3
    return out


def frame(*msgs):
    payload = b"".join(m + b"\0" * (-len(m) % 4) for m in msgs)
    return struct.pack(">BBH", 1, 1, 4 + len(payload)) + payload


routes = messages("dump_routes.bin", 24)
nexthops = messages("dump_nexthops.bin", 104)
delete = bytearray(routes[0])
struct.pack_into("<H", delete, 4, 25)
(HERE / "route.bin").write_bytes(frame(routes[0]))
(HERE / "update.bin").write_bytes(frame(bytes(delete), routes[0]))
(HERE / "routes.bin").write_bytes(
    b"".join(frame(r) for r in routes[:6]) + frame(*routes[6:12]))
(HERE / "nexthops_then_route.bin").write_bytes(frame(*nexthops[:3]) + frame(routes[-1]))
