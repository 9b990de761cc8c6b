#!/usr/bin/env python3
"""Captures real rtnetlink traffic from this machine's kernel for fibre-netlink's tests.

Run as root from this directory:  python3 capture.py
It creates the network namespace `fibre-netlink-cap`, re-runs itself inside it, builds a small
routing state there with iproute2 while a raw AF_NETLINK socket listens to every rtnetlink
multicast group (notify.bin), then dumps each object kind (dump_*.bin), asks one `route get`
(get_route.bin), provokes ACKs and errors with extended-ACK attributes (ack_*.bin, err_*.bin),
records what `ip -j` prints for the same state (*.json) and deletes the namespace.

Each .bin file is the concatenation of the datagrams the kernel sent, unchanged: a stream of
netlink messages, which is also what `ip monitor file FILE` reads. Only the standard library.
"""

import json
import os
import socket
import struct
import subprocess
import sys

NS = "fibre-netlink-cap"
HERE = os.path.dirname(os.path.abspath(__file__))

SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
NETLINK_CAP_ACK = 10
NETLINK_EXT_ACK = 11

NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
NLM_F_DUMP = 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_MULTI = 0x2

RTM_GETLINK, RTM_GETADDR, RTM_NEWROUTE, RTM_GETROUTE = 18, 22, 24, 26
RTM_GETNEIGH, RTM_GETRULE, RTM_NEWNEXTHOP, RTM_GETNEXTHOP = 30, 34, 104, 106

# rtnetlink multicast groups (RTNLGRP_*): link, neigh, ipv4 ifaddr/route/rule,
# ipv6 ifaddr/route, ipv6 rule, nexthop.
GROUPS = [1, 3, 5, 7, 8, 9, 11, 19, 32]

# The state, built command by command while notifications are recorded.
STATE = [
    "ip link set lo up",
    "ip link add veth0 type veth peer name veth1",
    "ip link add veth2 type veth peer name veth3",
    "ip link set veth1 address 02:00:00:00:00:02",
    "ip link set veth0 mtu 1400",
    "ip link set veth2 addrgenmode none",
    "ip link set veth0 up",
    "ip link set veth1 up",
    "ip link set veth2 up",
    "ip link set veth3 up",
    "ip addr add 192.0.2.1/24 dev veth0",
    "ip addr add 192.0.2.2/24 dev veth0",
    "ip addr add 198.51.100.1/24 brd + dev veth2 label veth2:1",
    "ip addr add 2001:db8:1::1/64 dev veth0 nodad",
    "ip addr add 2001:db8:2::1/64 dev veth2 nodad valid_lft 3600 preferred_lft 1800",
    "ip route add 10.0.0.0/8 via 192.0.2.254 metric 10",
    "ip route add 10.1.0.0/16 via 192.0.2.254 mtu lock 1300 advmss 1200 hoplimit 32 initcwnd 10",
    "ip route add 10.2.0.0/16 nexthop via 192.0.2.254 weight 1 nexthop via 198.51.100.254 weight 3",
    "ip route add blackhole 10.3.0.0/16",
    "ip route add unreachable 10.4.0.0/16 metric 5",
    "ip route add prohibit 10.5.0.0/16 table 100",
    "ip route add 10.6.0.0/16 via inet6 2001:db8:1::fe dev veth0",
    "ip route add 10.7.0.0/16 dev veth0 scope link src 192.0.2.1 proto static",
    "ip route add 10.8.0.0/16 via 192.0.2.254 table 1000",
    "ip route add throw 10.9.0.0/16 table 100",
    "ip route add 10.10.0.0/16 via 192.0.2.254 dev veth0 onlink tos 0x10",
    "ip route add 10.11.0.0/16 encap seg6 mode encap segs 2001:db8::1,2001:db8::2 dev veth0",
    "ip -6 route add 2001:db8:10::/48 via 2001:db8:1::fe metric 100 pref high",
    "ip -6 route add 2001:db8:11::/48 via 2001:db8:1::fe expires 600",
    "ip -6 route add 2001:db8:12::/48 nexthop via 2001:db8:1::fe dev veth0 nexthop via 2001:db8:2::fe dev veth2",
    "ip -6 route add 2001:db8:13::/48 from 2001:db8:ff::/48 via 2001:db8:1::fe",
    "ip -6 route add unreachable 2001:db8:14::/48",
    "ip nexthop add id 1 via 192.0.2.254 dev veth0",
    "ip nexthop add id 2 via 198.51.100.254 dev veth2",
    "ip nexthop add id 3 group 1/2,3",
    "ip nexthop add id 4 blackhole",
    "ip nexthop add id 5 via 2001:db8:1::fe dev veth0",
    "ip route add 10.20.0.0/16 nhid 3",
    "ip -6 route add 2001:db8:20::/48 nhid 5",
    "ip rule add from 10.0.0.0/8 table 100 priority 100",
    "ip rule add to 10.1.0.0/16 fwmark 0x10/0xff iif veth0 lookup 1000 priority 200",
    "ip rule add ipproto tcp dport 80-90 sport 1000 table 100 priority 300",
    "ip rule add not from 10.0.0.0/8 iif veth1 priority 40000 unreachable",
    "ip rule add uidrange 1000-2000 suppress_prefixlength 0 table main priority 500",
    "ip -6 rule add from 2001:db8::/32 table 100 priority 100",
    "ip neigh add 192.0.2.10 lladdr 02:00:00:00:00:10 dev veth0 nud permanent",
    "ip neigh add 192.0.2.11 lladdr 02:00:00:00:00:11 dev veth0 nud noarp",
    "ip neigh add 2001:db8:1::10 lladdr 02:00:00:00:00:12 dev veth0 nud permanent",
    # Changes whose notifications matter: deletions, a link going down and up.
    "ip route add 10.99.0.0/16 via 192.0.2.254",
    "ip route del 10.99.0.0/16",
    "ip addr add 192.0.2.99/24 dev veth0",
    "ip addr del 192.0.2.99/24 dev veth0",
    "ip neigh add 192.0.2.99 lladdr 02:00:00:00:00:99 dev veth0 nud permanent",
    "ip neigh del 192.0.2.99 dev veth0",
    "ip nexthop add id 99 via 192.0.2.254 dev veth0",
    "ip nexthop del id 99",
    "ip rule add from 10.99.0.0/16 table 99 priority 999",
    "ip rule del priority 999",
    "ip link set veth3 down",
    "ip link set veth3 up",
]

# What `ip -j` prints for the final state, keyed by output file.
JSON = {
    "links.json": "ip -j -d link show",
    "addrs.json": "ip -j addr show",
    "routes4.json": "ip -j -4 route show table all",
    "routes6.json": "ip -j -6 route show table all",
    "rules4.json": "ip -j -4 rule show",
    "rules6.json": "ip -j -6 rule show",
    "nexthops.json": "ip -j nexthop show",
    "neigh.json": "ip -j neigh show nud all",
}


def nlmsg(msg_type, flags, seq, body):
    return struct.pack("=IHHII", 16 + len(body), msg_type, flags, seq, 0) + body


def nla(kind, value):
    pad = (4 - len(value) % 4) % 4
    return struct.pack("=HH", 4 + len(value), kind) + value + b"\0" * pad


def open_socket(cap_ack=False):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    s.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
    if cap_ack:
        s.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)
    s.bind((0, 0))
    return s


def transact(sock, request):
    """Sends one request and returns every datagram of the answer: up to NLMSG_DONE or
    NLMSG_ERROR, or a single message without NLM_F_MULTI."""
    sock.send(request)
    out = b""
    while True:
        data = sock.recv(1 << 20)
        out += data
        off = 0
        while off + 16 <= len(data):
            length, msg_type, flags = struct.unpack_from("=IHH", data, off)
            if msg_type in (NLMSG_DONE, NLMSG_ERROR) or not flags & NLM_F_MULTI:
                return out
            off += (length + 3) & ~3


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    print(f"{name}: {len(data)} bytes")


def inside():
    listener = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    listener.bind((0, 0))
    for group in GROUPS:
        listener.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)
    listener.setblocking(False)

    log = []
    notify = b""
    for cmd in STATE:
        rc = subprocess.run(cmd.split(), capture_output=True, text=True)
        log.append(f"{rc.returncode} {cmd}" + (f"   # {rc.stderr.strip()}" if rc.returncode else ""))
        while True:
            try:
                notify += listener.recv(1 << 20)
            except BlockingIOError:
                break
    write("notify.bin", notify)

    sock = open_socket()
    af_unspec = 0
    dumps = {
        "dump_links.bin": (RTM_GETLINK, struct.pack("=BxHiII", af_unspec, 0, 0, 0, 0)),
        "dump_addrs.bin": (RTM_GETADDR, struct.pack("=BBBBI", af_unspec, 0, 0, 0, 0)),
        "dump_routes.bin": (RTM_GETROUTE, struct.pack("=BBBBBBBBI", af_unspec, 0, 0, 0, 0, 0, 0, 0, 0)),
        "dump_rules.bin": (RTM_GETRULE, struct.pack("=BBBBBBBBI", af_unspec, 0, 0, 0, 0, 0, 0, 0, 0)),
        "dump_nexthops.bin": (RTM_GETNEXTHOP, struct.pack("=BBBBI", af_unspec, 0, 0, 0, 0)),
        "dump_neigh.bin": (RTM_GETNEIGH, struct.pack("=BxHiHBB", af_unspec, 0, 0, 0, 0, 0)),
    }
    for seq, (name, (msg_type, body)) in enumerate(dumps.items(), start=1):
        write(name, transact(sock, nlmsg(msg_type, NLM_F_REQUEST | NLM_F_DUMP, seq, body)))

    for name, cmd in JSON.items():
        out = subprocess.run(cmd.split(), capture_output=True, text=True, check=True).stdout
        with open(os.path.join(HERE, name), "w") as f:
            json.dump(json.loads(out), f, indent=1, sort_keys=True)
            f.write("\n")

    # route get 10.0.0.1 (rtmsg AF_INET, dst_len 32, RTA_DST).
    rtmsg_get = struct.pack("=BBBBBBBBI", socket.AF_INET, 32, 0, 0, 0, 0, 0, 0, 0)
    get = nlmsg(RTM_GETROUTE, NLM_F_REQUEST, 100, rtmsg_get + nla(1, socket.inet_aton("10.0.0.1")))
    write("get_route.bin", transact(sock, get))

    # A successful request with NLM_F_ACK: 10.98.0.0/16 via 192.0.2.254 (RTA_DST, RTA_GATEWAY).
    rtmsg_new = struct.pack("=BBBBBBBBI", socket.AF_INET, 16, 0, 0, 254, 4, 0, 1, 0)
    new = rtmsg_new + nla(1, socket.inet_aton("10.98.0.0")) + nla(5, socket.inet_aton("192.0.2.254"))
    create = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    write("ack_ok.bin", transact(sock, nlmsg(RTM_NEWROUTE, create, 101, new)))
    # The same again: EEXIST, the request echoed back in full.
    write("err_eexist.bin", transact(sock, nlmsg(RTM_NEWROUTE, create, 102, new)))
    # Host bits set: EINVAL with an extended-ACK message.
    bad = rtmsg_new + nla(1, socket.inet_aton("10.98.1.0")) + nla(5, socket.inet_aton("192.0.2.254"))
    capped = open_socket(cap_ack=True)
    write("err_extack_capped.bin", transact(capped, nlmsg(RTM_NEWROUTE, create, 103, bad)))
    # A next-hop object with an attribute type the kernel does not know: strict validation
    # answers with a message and the offset of the attribute (NLMSGERR_ATTR_OFFS).
    nhmsg = struct.pack("=BBBBI", socket.AF_INET, 0, 4, 0, 0)
    nh = nhmsg + nla(1, struct.pack("=I", 50)) + nla(200, b"\1\2\3\4")
    write("err_extack_offs.bin", transact(sock, nlmsg(RTM_NEWNEXTHOP, create, 104, nh)))

    with open(os.path.join(HERE, "commands.txt"), "w") as f:
        f.write("# exit status and command, in order, while notify.bin was recorded\n")
        f.write("\n".join(log) + "\n")


def in_namespace(ns, script, inside_fn, after=None):
    """Runs `inside_fn` in a fresh network namespace `ns` (re-running `script` there with
    --inside), then `after` outside it; the namespace is deleted in any case."""
    if len(sys.argv) > 1 and sys.argv[1] == "--inside":
        inside_fn()
        return
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, sys.executable, os.path.abspath(script), "--inside"], check=True)
        if after:
            after()
    finally:
        subprocess.run(["ip", "netns", "del", ns])


def write_kernel_txt():
    with open(os.path.join(HERE, "kernel.txt"), "w") as f:
        f.write(" ".join(os.uname()) + "\n")
        f.write(subprocess.run(["ip", "-V"], capture_output=True, text=True).stdout)


def main():
    in_namespace(NS, __file__, inside, write_kernel_txt)


if __name__ == "__main__":
    main()
