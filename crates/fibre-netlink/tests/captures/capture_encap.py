#!/usr/bin/env python3
"""Captures the kernel's rtnetlink messages for routes with SRv6 encapsulation (seg6 and
seg6local lightweight tunnels), for fibre-netlink's encapsulation tests.

Run as root from this directory:  python3 capture_encap.py
It creates the network namespace `fibre-netlink-encap`, re-runs itself inside it, adds the
routes and next-hop objects of ENCAP_STATE with iproute2 while a raw AF_NETLINK socket listens
to the IPv4 and IPv6 route groups and the next-hop group (encap_notify.bin), then dumps every
route (encap_dump_routes.bin) and next-hop object (encap_dump_nexthops.bin), asks `route get` for an address under a seg6 route and under a seg6local one (encap_get_route4.bin,
encap_get_route6.bin), records `ip -j -d` output for the same routes (encap_routes4.json,
encap_routes6.json) and deletes the namespace. Shares capture.py's helpers; standard library
only.
"""

import json
import os
import socket
import struct
import subprocess

import capture

NS = "fibre-netlink-encap"
HERE = capture.HERE

# RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, RTNLGRP_NEXTHOP.
GROUPS = [7, 11, 32]

ENCAP_STATE = [
    "ip link set lo up",
    "ip link add veth0 type veth peer name veth1",
    "ip link set veth0 up",
    "ip link set veth1 up",
    "ip addr add 192.0.2.1/24 dev veth0",
    "ip addr add 2001:db8:1::1/64 dev veth0 nodad",
    "ip route add 10.11.0.0/16 encap seg6 mode encap segs 2001:db8::1,2001:db8::2 dev veth0",
    "ip route add 10.12.0.0/16 encap seg6 mode l2encap.red segs 2001:db8::3 via 192.0.2.254",
    "ip route add 10.13.0.0/16 nexthop encap seg6 mode encap segs 2001:db8::4 via 192.0.2.254 nexthop via 192.0.2.253",
    "ip -6 route add 2001:db8:10::/64 encap seg6 mode inline segs 2001:db8::1,2001:db8::2 dev veth0",
    "ip -6 route add 2001:db8:11::/64 encap seg6 mode encap.red segs 2001:db8::1 hmac 7 via 2001:db8:1::fe",
    "ip -6 route add 2001:db8:12::/64 nexthop encap seg6 mode l2encap segs 2001:db8::5 via 2001:db8:1::fe nexthop via 2001:db8:1::fd",
    "ip -6 route add 2001:db8:20::1/128 encap seg6local action End dev veth0",
    "ip -6 route add 2001:db8:20::2/128 encap seg6local action End.X nh6 2001:db8:1::2 flavors next-csid lblen 48 nflen 16 dev veth0",
    "ip -6 route add 2001:db8:20::3/128 encap seg6local action End.T table 100 count dev veth0",
    "ip -6 route add 2001:db8:20::4/128 encap seg6local action End.DX4 nh4 192.0.2.2 dev veth0",
    "ip -6 route add 2001:db8:20::5/128 encap seg6local action End.DX6 nh6 2001:db8:1::2 dev veth0",
    "ip -6 route add 2001:db8:20::6/128 encap seg6local action End.DT6 table 100 dev veth0",
    "ip -6 route add 2001:db8:20::7/128 encap seg6local action End.B6 srh segs 2001:db8::1,2001:db8::2 dev veth0",
    "ip -6 route add 2001:db8:20::8/128 encap seg6local action End.B6.Encaps srh segs 2001:db8::1 hmac 3 dev veth0",
    "ip -6 route add 2001:db8:20::9/128 encap seg6local action End flavors psp dev veth0",
    "ip -6 route add 2001:db8:20::a/128 encap seg6local action End.DX2 oif veth0 dev veth0",
    "ip -6 route del 2001:db8:20::1/128",
    "ip nexthop add id 1 encap seg6 mode encap segs 2001:db8::7 via 2001:db8:1::2 dev veth0",
    "ip nexthop add id 2 encap seg6 mode encap.red segs 2001:db8::8,2001:db8::9 via 192.0.2.2 dev veth0",
    "ip -6 route add 2001:db8:50::/64 nhid 1",
    "ip route add 10.50.0.0/16 nhid 2",
]


def inside():
    listener = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    listener.bind((0, 0))
    for group in GROUPS:
        listener.setsockopt(capture.SOL_NETLINK, capture.NETLINK_ADD_MEMBERSHIP, group)
    listener.setblocking(False)
    notify = b""
    for cmd in ENCAP_STATE:
        subprocess.run(cmd.split(), check=True)
        while True:
            try:
                notify += listener.recv(1 << 20)
            except BlockingIOError:
                break
    capture.write("encap_notify.bin", notify)

    sock = capture.open_socket()
    dump = struct.pack("=BBBBBBBBI", 0, 0, 0, 0, 0, 0, 0, 0, 0)
    flags = capture.NLM_F_REQUEST | capture.NLM_F_DUMP
    capture.write("encap_dump_routes.bin", capture.transact(sock, capture.nlmsg(capture.RTM_GETROUTE, flags, 1, dump)))

    nhdump = struct.pack("=BBBBI", 0, 0, 0, 0, 0)
    capture.write("encap_dump_nexthops.bin", capture.transact(sock, capture.nlmsg(capture.RTM_GETNEXTHOP, flags, 4, nhdump)))

    get4 = struct.pack("=BBBBBBBBI", socket.AF_INET, 32, 0, 0, 0, 0, 0, 0, 0)
    get4 += capture.nla(1, socket.inet_aton("10.11.0.1"))
    capture.write("encap_get_route4.bin", capture.transact(sock, capture.nlmsg(capture.RTM_GETROUTE, capture.NLM_F_REQUEST, 2, get4)))
    get6 = struct.pack("=BBBBBBBBI", socket.AF_INET6, 128, 0, 0, 0, 0, 0, 0, 0)
    get6 += capture.nla(1, socket.inet_pton(socket.AF_INET6, "2001:db8:20::2"))
    capture.write("encap_get_route6.bin", capture.transact(sock, capture.nlmsg(capture.RTM_GETROUTE, capture.NLM_F_REQUEST, 3, get6)))

    for name, cmd in (("encap_routes4.json", "ip -j -d -4 route show"), ("encap_routes6.json", "ip -j -d -6 route show")):
        out = subprocess.run(cmd.split(), capture_output=True, text=True, check=True).stdout
        with open(os.path.join(HERE, name), "w") as f:
            json.dump(json.loads(out), f, indent=1, sort_keys=True)
            f.write("\n")


def main():
    capture.in_namespace(NS, __file__, inside)


if __name__ == "__main__":
    main()
