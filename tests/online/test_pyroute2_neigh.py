"""Neighbours on fibred through pyroute2 0.9 (`IPRoute(use_socket=...)`), a client nobody here
wrote: add, dump, get, replace and delete ARP/NDP and proxy entries, with the kernel's errors.
The fibred fixture and the socket set-up are test_pyroute2.py's. Skips like it does.
"""

from __future__ import annotations

import socket

import pytest

from test_pyroute2 import fibred  # noqa: F401  (fixture)


RTM_NEWNEIGH = 28


def get(ipr, **kw):
    """The answers to a get; pyroute2 asks for an ACK too and returns it with them."""
    return [m for m in ipr.neigh("get", **kw) if m["header"]["type"] == RTM_NEWNEIGH]


def test_pyroute2_neighbours(fibred):  # noqa: F811
    pr = pytest.importorskip("pyroute2", reason="pyroute2 0.9 is not installed (tests/requirements.txt)")
    from pyroute2.netlink.exceptions import NetlinkError
    from pyroute2.netlink.rtnl.ndmsg import NTF_PROXY, states

    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("")
    s.connect(fibred.replace(".sock", ".dgram"))
    ipr = pr.IPRoute(use_socket=s)
    try:
        ipr.link("add", ifname="eth0", kind="dummy")
        (idx,) = ipr.link_lookup(ifname="eth0")
        ipr.link("set", index=idx, state="up")
        ipr.addr("add", index=idx, address="192.0.2.1", prefixlen=24)

        ipr.neigh("add", dst="192.0.2.10", lladdr="02:00:00:00:00:10", ifindex=idx,
                  state=states["permanent"])
        ipr.neigh("add", dst="2001:db8::10", lladdr="02:00:00:00:00:11", ifindex=idx,
                  state=states["reachable"])
        ipr.neigh("add", dst="192.0.2.20", ifindex=idx, flags=NTF_PROXY)
        with pytest.raises(NetlinkError) as e:
            ipr.neigh("add", dst="192.0.2.10", lladdr="02:00:00:00:00:10", ifindex=idx,
                      state=states["permanent"])
        assert e.value.code == 17  # EEXIST
        with pytest.raises(NetlinkError) as e:
            ipr.neigh("add", dst="192.0.2.30", ifindex=idx, state=states["permanent"])
        assert e.value.code == 22  # "No link layer address given"

        dumped = {(n.get_attr("NDA_DST"), n.get_attr("NDA_LLADDR"), n["state"])
                  for n in ipr.neigh("dump") if n["state"] != states["none"]}
        assert dumped == {
            ("192.0.2.10", "02:00:00:00:00:10", states["permanent"]),
            ("2001:db8::10", "02:00:00:00:00:11", states["reachable"]),
        }

        (got,) = get(ipr, dst="192.0.2.10", ifindex=idx)
        assert got.get_attr("NDA_LLADDR") == "02:00:00:00:00:10"
        assert got["ifindex"] == idx

        ipr.neigh("replace", dst="192.0.2.10", lladdr="02:00:00:00:00:99", ifindex=idx,
                  state=states["stale"])
        (got,) = get(ipr, dst="192.0.2.10", ifindex=idx)
        assert (got.get_attr("NDA_LLADDR"), got["state"]) == ("02:00:00:00:00:99", states["stale"])

        ipr.neigh("del", dst="192.0.2.10", ifindex=idx)
        with pytest.raises(NetlinkError) as e:
            ipr.neigh("del", dst="192.0.2.10", ifindex=idx)
        assert e.value.code == 2  # ENOENT
        with pytest.raises(NetlinkError) as e:
            ipr.neigh("get", dst="192.0.2.10", ifindex=idx)
        assert e.value.code == 2

        ipr.link("set", index=idx, state="down")
        assert [n for n in ipr.neigh("dump") if n["state"] != states["none"]] == []
    finally:
        ipr.close()
