"""Random routing command files in iproute2 batch syntax, deterministic by seed.

`generate(seed, routes, lookups, features)` returns the runs of one seed: a mixed IPv4/IPv6
file run as `ip -batch`, and an IPv6 file run as `ip -6 -batch` (in a batch file, a rule's
family comes from the command line only, so IPv6 rules need their own file). Each run carries a
manifest of multipath flow blocks: lookups into a multipath route that no other command touches,
whose answers must split over the route's next hops as its weights say.

A file has phases: links and addresses, configuration (routes, next-hop objects, rules, with
deletes, replaces and invalid commands mixed in), link events (down, carrier, mtu, address
deletion), then lookups and dumps. Lookups also run between phases, so the effect of each phase
is observed. Feature classes (features.json) switch kinds of commands on and off; a switched-off
class emits nothing, so a file for a narrow feature set is a valid file on its own.

Invariants the runner relies on:
- every link is created with an explicit MAC address (IPv6 link-local addresses are then the
  same on both sides) and `lo` is brought up by the first line;
- links d0 and d1 are never taken down, deleted or changed, and the flow-block prefixes (inside
  STABLE4 / STABLE6) are touched by no other command, no rule selects them, and no route in a
  table other than main covers them (default routes go to main only), so a flow block's answers
  come from its route;
- no line is a syntax error for iproute2 (which would end its batch), except the optional last.

Run as a command to print a file: `python3 gen.py --seed 3 --routes 100 --lookups 50 [-6]`.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
FEATURES_FILE = os.path.join(HERE, "features.json")

# Address plan. Link i has 10.(100+i).0.0/24 and 2001:db8:i::/64 (first address .1 / ::1).
# Route prefixes come from POOL4/POOL6; multipath flow blocks use STABLE4/STABLE6 only.
POOL4 = [ipaddress.ip_network(p) for p in ("10.0.0.0/10", "172.16.0.0/12", "192.168.0.0/16")]
POOL6 = [ipaddress.ip_network(p) for p in ("2001:db8:1000::/36", "2001:db8:2000::/36", "fd00::/16")]
STABLE4 = ipaddress.ip_network("198.18.0.0/15")
STABLE6 = ipaddress.ip_network("2001:db8:f000::/36")
# Tables routes go to: main most often, then a few numbered ones the rules point at.
TABLES = ["main"] * 6 + ["100", "101", "102", "200"]
PROTOS = ["static", "boot", "zebra", "bird", "99", "kernel"]
SCOPES4 = ["global", "link", "host", "253"]
TOS = ["0x10", "0x08", "0x04", "0x0c", "0x1c", "0x18"]
BAD_TOS = ["0x03", "0x11"]
# SRv6 segments and seg6 modes (inline only for IPv6 routes: the kernel refuses it on IPv4).
SEGS = [f"2001:db8:5e6::{i:x}" for i in range(1, 17)]
SEG6_MODES4 = ["encap", "encap.red", "l2encap", "l2encap.red"]
SEG6_MODES6 = SEG6_MODES4 + ["inline"]
# Sizes: the number of links grows slowly with the number of routes.
MIN_LINKS, MAX_LINKS = 4, 12
FLOW_BLOCK = 400  # lookups per multipath flow block: enough for a weight check at ~5 sigma
MAX_FLOW_BLOCKS = 4


def load_features(path: str | None = None) -> dict:
    with open(path or FEATURES_FILE) as f:
        return json.load(f)


def feature_set(name: str, path: str | None = None) -> set[str]:
    """The classes enabled by `name`: "all", "none", a set listed in features.json, a class
    name, or a comma-separated union of these (e.g. "ci,rules,show_rules")."""
    data = load_features(path)
    classes = data["classes"]
    out: set[str] = set()
    for part in name.split(","):
        if part == "all":
            out |= set(classes)
        elif part in classes:
            out.add(part)
        elif part != "none":
            out |= {c for c, d in classes.items() if part in d.get("sets", [])}
    return out


@dataclass
class Run:
    name: str
    options: list[str]
    text: str
    flow_blocks: list[dict] = field(default_factory=list)

    @property
    def lines(self) -> int:
        return self.text.count("\n")


class _Gen:
    def __init__(self, seed: int, routes: int, lookups: int, features: set[str], v6only: bool):
        self.r = random.Random(seed * 2 + (1 if v6only else 0))
        self.seed = seed
        self.routes = routes
        self.lookups = lookups
        self.f = features
        self.v6only = v6only
        self.out: list[str] = []
        self.nlinks = max(MIN_LINKS, min(MAX_LINKS, 2 + routes // 500))
        self.links_alive: set[int] = set()
        self.prefixes4: list[ipaddress.IPv4Network] = []
        self.prefixes6: list[ipaddress.IPv6Network] = []
        # Routes added: (prefix with type and `from`, the whole spec after the verb, family, table,
        # attributes).
        self.added: list[tuple[str, str, bool, str, str]] = []
        # IPv6 attributes by (prefix, table, metric), when route_modify is on (see `route`).
        self.slot_attrs6: dict[tuple[str, str, int], str] = {}
        self.next_nh = 1
        self.nh_all: list[int] = []  # every next-hop id ever given
        self.nh_free: list[int] = []  # single objects no route or group uses yet
        self.group_free: list[int] = []  # groups no route uses yet
        # Resilient groups: id -> bucket count. Those with a non-zero idle timer are never
        # given to a route: a lookup marks its bucket busy, and which buckets the kernel's
        # flow hash touched would then decide what a later change moves.
        self.resilient: dict[int, int] = {}
        # Those that routes may use: every replace of them keeps (or, where a replace creates
        # the group anew after a deletion, sets) idle_timer 0.
        self.res_idle0: set[int] = set()
        self.fdb_ids: list[int] = []  # fdb next hops (no route can use them)
        self.flow_blocks: list[dict] = []

    # -- helpers ---------------------------------------------------------------------------
    def on(self, cls: str) -> bool:
        return cls in self.f

    def emit(self, line: str) -> None:
        self.out.append(line)

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def mac(self, i: int) -> str:
        return f"02:00:{self.seed % 256:02x}:{(self.seed >> 8) % 256:02x}:{i // 256:02x}:{i % 256:02x}"

    def link(self, stable_ok: bool = True) -> int:
        return self.r.randrange(0 if stable_ok else 2, self.nlinks)

    def gw4(self, i: int) -> str:
        return f"10.{100 + i}.0.{self.r.randrange(2, 250)}"

    def gw6(self, i: int) -> str:
        if self.chance(0.3):
            return f"fe80::{self.r.randrange(2, 0xffff):x}"
        return f"2001:db8:{i:x}::{self.r.randrange(2, 0xffff):x}"

    def prefix(self, v6: bool, default_ok: bool = True) -> str:
        """A random prefix from the pools (or the default route, when `default_ok`)."""
        if v6:
            pool = self.r.choice(POOL6)
            plen = self.r.choice([0, 40, 48, 48, 56, 60, 64, 64, 64, 96, 120, 127, 128]) if self.chance(0.97) else self.r.randrange(36, 129)
        else:
            pool = self.r.choice(POOL4)
            plen = self.r.choice([0, 12, 16, 20, 22, 24, 24, 24, 26, 28, 30, 32])
        if plen == 0 and not default_ok:
            plen = pool.prefixlen
        if plen == 0:
            net = ipaddress.ip_network("::/0" if v6 else "0.0.0.0/0")
        else:
            plen = max(plen, pool.prefixlen)
            span = 1 << (pool.max_prefixlen - plen)
            k = self.r.randrange(pool.num_addresses // span)
            net = ipaddress.ip_network((int(pool.network_address) + k * span, plen))
        (self.prefixes6 if v6 else self.prefixes4).append(net)
        return str(net)

    def local4(self) -> str:
        return f"10.{100 + self.link()}.0.1"

    def local6(self) -> str:
        return f"2001:db8:{self.link():x}::1"

    # -- phases ----------------------------------------------------------------------------
    def build(self) -> str:
        self.emit("link set lo up")
        dflt = self.on("link_conf") and self.chance(0.3)
        if dflt:
            # Links created after a write to `default` start from it.
            self.emit(f"sysctl -q -w net.ipv4.conf.default.rp_filter={self.r.choice([1, 2])}")
        self.links()
        if dflt:
            # The flow blocks' input lookups come in on d1 from sources no route leads back
            # to: d0 and d1 never filter (nor does `all`).
            self.emit("sysctl -q -w net.ipv4.conf.d0.rp_filter=0")
            self.emit("sysctl -q -w net.ipv4.conf.d1.rp_filter=0")
        self.link_conf()
        self.addresses()
        n_cfg = self.routes
        self.config(n_cfg // 2)
        self.lookup_block(self.lookups // 4)
        self.config(n_cfg - n_cfg // 2)
        self.dumps()
        self.lookup_block(self.lookups // 4)
        self.events()
        self.dumps()
        self.flow_block_phase()
        self.group_flow_block_phase()
        self.lookup_block(self.lookups - 2 * (self.lookups // 4) - sum(b["count"] for b in self.flow_blocks))
        self.dumps()
        if self.on("nexthop_filters") and self.on("nexthop_objects"):
            # iproute2 keeps each selector for the rest of the batch: the last dumps.
            # A bucket dump after `fdb` or `groups` is refused (its policy has neither).
            for dev in ("lo", f"d{self.r.randrange(2)}"):
                self.emit(f"nexthop show dev {dev}")
                if self.on("nexthop_resilient"):
                    self.emit("nexthop bucket show")
            self.emit("nexthop show fdb")
            if self.on("nexthop_resilient"):
                self.emit("nexthop bucket show")
            self.emit("nexthop show groups")
        if self.on("parse_error_tail"):
            self.emit(self.r.choice(["route add 10.0.0.0/8 via", "rule add pref x table 5", "route get"]))
        return "\n".join(self.out) + "\n"

    def links(self) -> None:
        for i in range(self.nlinks):
            mtu = f" mtu {self.r.choice([1280, 1400, 1500, 9000])}" if self.chance(0.3) else ""
            self.emit(f"link add d{i} address {self.mac(i)}{mtu} type dummy")
            self.links_alive.add(i)
        for i in range(self.nlinks):
            if i < 2 or self.chance(0.85):
                self.emit(f"link set d{i} up")
        if self.on("invalid"):
            self.emit("link add d0 type dummy")
            self.emit(f"link set d{self.nlinks + 3} up")

    def link_conf(self) -> None:
        """Per-link settings (class link_conf): reverse-path filtering of input lookups and
        ignoring routes whose next hop lost its carrier, per link and for all."""
        if not self.on("link_conf"):
            return
        for i in range(self.nlinks):
            if i >= 2 and self.chance(0.3):
                self.emit(f"sysctl -q -w net.ipv4.conf.d{i}.rp_filter={self.r.choice([0, 1, 2])}")
            if self.chance(0.3) and not self.v6only:
                self.emit(f"sysctl -q -w net.ipv4.conf.d{i}.ignore_routes_with_linkdown=1")
            if self.chance(0.3):
                self.emit(f"sysctl -q -w net.ipv6.conf.d{i}.ignore_routes_with_linkdown=1")
        if self.chance(0.2) and not self.v6only:
            self.emit("sysctl -q -w net.ipv4.conf.all.ignore_routes_with_linkdown=1")
        if self.chance(0.15):
            # Written through to every link and to `default` (addrconf_linkdown_change).
            self.emit(f"sysctl -q -w net.ipv6.conf.all.ignore_routes_with_linkdown={self.r.choice([0, 1])}")

    def addresses(self) -> None:
        for i in range(self.nlinks):
            if self.on("addr4") and not self.v6only:
                self.emit(f"address add 10.{100 + i}.0.1/24 dev d{i}")
                if self.chance(0.3):
                    self.emit(f"address add 10.{100 + i}.{self.r.randrange(1, 200)}.1/{self.r.choice([16, 24, 28, 32])} dev d{i}")
            if self.on("addr6"):
                self.emit(f"address add 2001:db8:{i:x}::1/64 dev d{i}")
                if self.chance(0.3):
                    self.emit(f"address add 2001:db8:{i:x}:{self.r.randrange(1, 200):x}::1/{self.r.choice([48, 64, 80, 128])} dev d{i}")
        if self.on("invalid") and self.on("addr4") and not self.v6only:
            self.emit("address add 10.100.0.1/24 dev d0")

    def config(self, n: int) -> None:
        kinds = []
        if not self.v6only:
            kinds += [("route4", 6)]
        kinds += [("route6", 3 if not self.v6only else 8)]
        if self.on("nexthop_objects"):
            kinds += [("nexthop", 1)]
        if self.on("rules"):
            kinds += [("rule", 1)]
        if self.on("route_modify") and self.added:
            kinds += [("modify", 2)]
        if self.on("route_del"):
            kinds += [("delete", 1)]
        names = [k for k, _ in kinds]
        weights = [w for _, w in kinds]
        for _ in range(n):
            k = self.r.choices(names, weights)[0]
            if k == "route4":
                self.route("add", v6=False)
            elif k == "route6":
                self.route("add", v6=True)
            elif k == "nexthop":
                self.nexthop()
            elif k == "rule":
                self.rule()
            elif k == "modify" and self.added:
                verb = self.r.choice(["replace", "change", "append", "prepend", "replace"])
                head, _, v6, table, attrs = self.r.choice(self.added)
                # IPv6 appends and prepends join the route as multipath siblings. Siblings whose
                # own attributes differ (metric spelling aside: pref, mtu, src ...) make the
                # kernel's route get answer depend on its lookup history, so they copy them.
                same = v6 and verb in ("append", "prepend")
                self.route(verb, v6=v6, head=head, table=table, attrs=attrs if same else None)
            elif k == "delete":
                self.delete()
            if self.on("link_conf") and self.chance(0.005):
                dev = self.r.choice([f"d{i}" for i in sorted(self.links_alive) if i >= 2])
                self.emit(f"sysctl -q -w net.ipv4.conf.{dev}.rp_filter={self.r.choice([0, 1, 2])}")
            if self.on("invalid") and self.chance(0.02):
                self.invalid()

    def segs(self) -> str:
        return ",".join(self.r.sample(SEGS, self.r.randrange(1, 5)))

    def seg6(self, v6: bool) -> str:
        """`encap seg6 ...` for one next hop (class route_encap_seg6), or nothing."""
        if not (self.on("route_encap_seg6") and self.chance(0.12)):
            return ""
        mode = self.r.choice(SEG6_MODES6 if v6 else SEG6_MODES4)
        hmac = f" hmac {self.r.randrange(1, 300)}" if self.chance(0.2) else ""
        return f"encap seg6 mode {mode} segs {self.segs()}{hmac} "

    def seg6local(self) -> str:
        """`encap seg6local ...` for an IPv6 route (class route_encap_seg6local): one of the
        behaviours this kernel builds, with counters and flavors at times, or nothing."""
        if not (self.on("route_encap_seg6local") and self.chance(0.1)):
            return ""
        i = self.link(stable_ok=True)
        act = self.r.choice([
            "End", "End flavors psp", "End flavors next-csid", "End.X nh6 " + self.gw6(i),
            f"End.X nh6 {self.gw6(i)} flavors next-csid lblen 48 nflen 16",
            f"End.T table {self.r.choice(TABLES[-4:])}", f"End.DX4 nh4 {self.gw4(i)}",
            f"End.DX6 nh6 {self.gw6(i)}", f"End.DT6 table {self.r.choice(TABLES[-4:])}",
            f"End.B6 srh segs {self.segs()}", f"End.B6.Encaps srh segs {self.segs()}",
        ])
        count = " count" if self.chance(0.2) else ""
        return f"encap seg6local action {act}{count} "

    def route_body(self, v6: bool) -> str:
        """Next hops and attributes of a unicast route."""
        parts = []
        local = self.seg6local() if v6 else ""
        if local:
            return f"{local}dev d{self.link(stable_ok=True)}"
        i = self.link(stable_ok=True)
        style = self.r.random()
        nhid = self.take_nhid() if self.on("nexthop_objects") and style < 0.1 else None
        if nhid is not None:
            parts.append(f"nhid {nhid}")
        elif self.on("route_multipath") and style < 0.25:
            for _ in range(self.r.randrange(2, 5)):
                j = self.link()
                gw = self.gw6(j) if v6 else self.gw4(j)
                w = f" weight {self.r.randrange(1, 5)}" if self.chance(0.7) else ""
                dev = f" dev d{j}" if (v6 and gw.startswith("fe80")) or self.chance(0.5) else ""
                parts.append(f"nexthop {self.seg6(v6)}via {gw}{dev}{w}")
        elif style < 0.45:
            parts.append(f"{self.seg6(v6)}dev d{i}")
        elif not v6 and self.on("route_via6_for4") and style < 0.52:
            parts.append(f"via inet6 {self.gw6(i)} dev d{i}")
        elif self.on("route_onlink") and style < 0.6:
            g = f"192.0.2.{self.r.randrange(1, 255)}" if not v6 else f"2001:db8:ffff::{self.r.randrange(1, 999)}"
            parts.append(f"via {g} dev d{i} onlink")
        else:
            gw = self.gw6(i) if v6 else self.gw4(i)
            dev = f" dev d{i}" if (v6 and gw.startswith("fe80")) or self.chance(0.5) else ""
            parts.append(f"{self.seg6(v6)}via {gw}{dev}")
        return " ".join(parts)

    def attrs(self, v6: bool, table: str) -> str:
        a = []
        if table != "main":
            a.append(f"table {table}")
        if self.on("route_attrs"):
            if not v6 and self.chance(0.1):
                a.append(f"tos {self.r.choice(TOS)}")
            if self.chance(0.3):
                a.append(f"metric {self.r.choice([0, 1, 10, 100, 1024, 4000000000])}")
            if self.chance(0.15):
                a.append(f"proto {self.r.choice(PROTOS)}")
            if not v6 and self.chance(0.05):
                a.append(f"scope {self.r.choice(SCOPES4)}")
            if v6 and self.chance(0.05):
                a.append(f"pref {self.r.choice(['low', 'medium', 'high'])}")
        if self.on("route_prefsrc") and self.chance(0.08):
            a.append(f"src {self.local6() if v6 else self.local4()}")
        if self.on("route_metrics") and self.chance(0.08):
            m = self.r.choice(["mtu 1400", "mtu lock 1300", "advmss 1200", "hoplimit 17", "mtu 1280 advmss 1000"])
            a.append(m)
        return " ".join(a)

    def route(self, verb: str, v6: bool, head: str | None = None, table: str | None = None,
              attrs: str | None = None) -> None:
        """Emits `route VERB ...`: a new random route, or (given `head` and `table`) a route with
        that prefix in that table (changes keep a route in its table: see the invariants)."""
        if table is None:
            table = self.r.choice(TABLES)
        if head is None:
            typ = ""
            if self.on("route_types") and self.chance(0.1):
                typ = self.r.choice(["blackhole", "unreachable", "prohibit", "throw"]) + " "
            elif self.on("route_local_types") and self.chance(0.04):
                typ = self.r.choice(["local", "anycast"] + ([] if v6 else ["broadcast", "multicast"])) + " "
            # Default routes only in main (local, anycast and broadcast routes go to the local
            # table): the other tables must not cover the flow blocks.
            local = typ.strip() in ("local", "anycast", "broadcast")
            head = typ + self.prefix(v6, default_ok=table == "main" and not local)
            if v6 and self.on("route_v6_from") and self.chance(0.05):
                head += f" from {self.prefix(True)}"
        kind = head.split()[0]
        if kind in ("blackhole", "unreachable", "prohibit", "throw"):
            body = ""
        elif kind in ("local", "anycast", "broadcast", "multicast"):
            body = f"dev d{self.link()}"
        else:
            body = self.route_body(v6)
        if attrs is None:
            attrs = self.attrs(v6, table)
        if v6 and self.on("route_modify"):
            # Appended and prepended IPv6 gateway routes join the routes of their metric as
            # multipath siblings; siblings whose attributes differ answer `route get` with the
            # chosen sibling's own attributes (see the README). Every IPv6 command for one
            # prefix, table and metric therefore carries the same attributes, whichever of
            # them the kernel accepted.
            words = attrs.split()
            metric = int(words[words.index("metric") + 1]) if "metric" in words else 0
            typed = head.split()[0] in ("blackhole", "unreachable", "prohibit", "throw", "local", "anycast")
            prefix = head.split(maxsplit=1)[1] if typed else head
            attrs = self.slot_attrs6.setdefault((prefix, table, metric or 1024), attrs)
        # iproute2 reads `nexthop` groups up to the end of the line: attributes go first.
        spec = " ".join(s for s in ((head, attrs, body) if body.startswith("nexthop") else (head, body, attrs)) if s)
        self.emit(f"route {verb} {spec}")
        if verb == "add":
            self.added.append((head, spec, v6, table, attrs))

    def delete(self) -> None:
        if self.added and self.chance(0.8):
            head, spec, _, _, _ = self.added.pop(self.r.randrange(len(self.added)))
            if self.chance(0.5):
                # Delete by prefix (and table) only: other attributes act as wildcards.
                words = spec.split()
                spec = head + (f" table {words[words.index('table') + 1]}" if "table" in words else "")
            self.emit(f"route del {spec}")
        else:
            v6 = self.v6only or self.chance(0.3)
            self.emit(f"route del {self.prefix(v6)}")

    def nexthop(self) -> None:
        """A next-hop object or group. Each object is used by at most one route or group (see
        `take_nhid`); ids are new except for deliberate duplicates, replaces and deletes."""
        v6 = self.v6only or self.chance(0.3)
        if self.nh_all and self.chance(0.05):
            nid, verb = self.r.choice(self.nh_all), "add"  # duplicate id: EEXIST
        elif self.nh_all and self.on("route_modify") and self.chance(0.1):
            nid, verb = self.r.choice(self.nh_all), "replace"
        else:
            nid, verb = self.next_nh, "add"
            self.next_nh += 1
        if verb == "add" and self.on("nexthop_resilient") and self.resilient and self.chance(0.1):
            self.resilient_change()
        if verb == "add" and self.on("nexthop_filters") and self.chance(0.1):
            # An fdb next hop (a VXLAN FDB gateway: no device), or a group of them.
            if len(self.fdb_ids) >= 2 and self.chance(0.3) and not self.v6only:
                self.emit(f"nexthop add id {nid} group {'/'.join(map(str, self.r.sample(self.fdb_ids, 2)))} fdb")
            else:
                gw = self.gw6(0).replace("fe80", "2001:db8") if v6 else self.gw4(self.link())
                self.emit(f"nexthop add id {nid} via {gw} fdb")
                self.fdb_ids.append(nid)
            self.nh_all.append(nid)
            return
        if verb == "add" and self.on("nexthop_groups") and len(self.nh_free) >= 2 and self.chance(0.3):
            members = self.r.sample(self.nh_free, self.r.randrange(1, min(4, len(self.nh_free)) + 1))
            grp = "/".join(f"{m},{self.r.randrange(1, 5)}" if self.chance(0.6) else str(m) for m in members)
            kind, idle = "", 0
            if self.on("nexthop_resilient") and self.chance(0.5):
                buckets = self.r.choice([1, 2, 3, 8, 16, 32, 64, 100, 128])
                idle = self.r.choice([0, 0, 0, 30, 120])
                kind = f" type resilient buckets {buckets}" + (f" idle_timer {idle}" if idle != 120 or self.chance(0.5) else "")
                if self.chance(0.3):
                    kind += f" unbalanced_timer {self.r.choice([0, 10, 300])}"
                self.resilient[nid] = buckets
                if not idle:
                    self.res_idle0.add(nid)
            self.emit(f"nexthop add id {nid} group {grp}{kind}")
            for m in members:
                self.nh_free.remove(m)
            # A deliberate duplicate that the kernel accepts (its id was deleted since) is
            # not handed to a route: routes sharing an id report each other (see take_nhid).
            if not idle and nid == self.next_nh - 1:
                self.group_free.append(nid)
        else:
            i = self.link()
            style = self.r.random()
            if style < 0.15:
                body = "blackhole"
            elif style < 0.35:
                body = f"dev d{i}"
            else:
                body = f"{self.seg6(v6)}via {self.gw6(i) if v6 else self.gw4(i)} dev d{i}"
                if self.on("route_onlink") and self.chance(0.1):
                    body += " onlink"
            self.emit(f"nexthop {verb} id {nid} {body}")
            if nid == self.next_nh - 1 and verb == "add":
                self.nh_free.append(nid)
        self.nh_all.append(nid)
        if self.on("route_del") and self.chance(0.05):
            self.emit(f"nexthop del id {self.r.choice(self.nh_all)}")

    def resilient_change(self) -> None:
        """A replace of a resilient group (new members or weights, timers, or a refused change
        of size or type), or a bucket query."""
        gid = self.r.choice(sorted(self.resilient))
        idle0 = " idle_timer 0" if gid in self.res_idle0 else ""
        x = self.r.random()
        if x < 0.55 and self.nh_free:
            members = self.r.sample(self.nh_free, self.r.randrange(1, min(4, len(self.nh_free)) + 1))
            grp = "/".join(f"{m},{self.r.randrange(1, 9)}" if self.chance(0.6) else str(m) for m in members)
            extra = f" buckets {self.resilient[gid]}" if self.chance(0.3) else ""
            if idle0 or self.chance(0.3):
                extra += " idle_timer 0"
            self.emit(f"nexthop replace id {gid} group {grp} type resilient{extra}")
            for m in members:
                self.nh_free.remove(m)
        elif x < 0.65:
            self.emit(f"nexthop replace id {gid} group {self.r.choice(self.nh_all)} type resilient buckets {self.resilient[gid] + 1}{idle0}")
        elif x < 0.7:
            self.emit(f"nexthop replace id {gid} group {self.r.choice(self.nh_all)}")
        elif x < 0.75:
            self.emit(f"nexthop add id {self.next_nh + 500} group {self.r.choice(self.nh_all)} type resilient")
        elif x < 0.85:
            # (`bucket show id G` of a group that is gone or not resilient fails as a dump,
            # which in JSON mode leaves a stray "[" before the next command's output; the
            # member selector cannot fail.) iproute2's selector persists: cleared after.
            self.emit(f"nexthop bucket show nhid {self.r.choice(self.nh_all)}")
            self.emit("nexthop bucket show nhid 0")
        else:
            self.emit(f"nexthop bucket get id {gid} index {self.r.randrange(self.resilient[gid] + 1)}")

    def take_nhid(self) -> int | None:
        """An unused next-hop object or group for a route, then marked used. The kernel caches
        IPv6 (and IPv4) dsts per next hop: when routes share a next-hop object, `route get`
        reports the metric, protocol and metrics of whichever route filled that CPU's cache
        first, so the kernel's answer would depend on its history and CPU."""
        pool = self.nh_free + (self.group_free if self.on("nexthop_groups") else [])
        if not pool:
            return None
        nid = self.r.choice(pool)
        (self.nh_free if nid in self.nh_free else self.group_free).remove(nid)
        return nid

    def rule(self) -> None:
        v6 = self.v6only
        if self.on("route_del") and self.chance(0.1):
            self.emit(f"rule del pref {self.r.randrange(1000, 1100)}")
            return
        sel = []
        pref = f"pref {self.r.randrange(1000, 1100)}" if self.chance(0.9) else ""
        if self.chance(0.2):
            sel.append("not")
        # Every rule selects by source or destination inside the route pools, so rules never
        # redirect the multipath flow blocks (STABLE4/STABLE6 lie outside the pools).
        p = self.prefix(v6)
        if p in ("0.0.0.0/0", "::/0"):
            p = str(POOL6[0] if v6 else POOL4[0])
        sel.append(f"{self.r.choice(['from', 'to'])} {p}")
        for s, make in (
            ("iif", lambda: f"iif d{self.link()}"),
            ("oif", lambda: f"oif d{self.link()}"),
            ("tos", lambda: f"tos {self.r.choice(TOS)}"),
            ("fwmark", lambda: f"fwmark 0x{self.r.randrange(1, 16):x}" + (f"/0x{self.r.choice([0xf, 0xff]):x}" if self.chance(0.5) else "")),
            ("ipproto", lambda: f"ipproto {self.r.choice(['tcp', 'udp', 'icmp' if not v6 else 'ipv6-icmp'])}"),
            ("sport", lambda: f"sport {self.r.randrange(1, 2000)}" + (f"-{self.r.randrange(2000, 4000)}" if self.chance(0.3) else "")),
            ("dport", lambda: f"dport {self.r.randrange(1, 2000)}"),
        ):
            if self.chance(0.12):
                sel.append(make())
        if sel[0] == "not":
            # "not" inverts the pool match and so catches the flow blocks: let it only look up
            # tables that hold no route covering them.
            action = f"table {self.r.choice(['100', '101', '102'])}"
        else:
            action = self.r.choice([f"table {self.r.choice(['100', '101', '102', '200', 'main'])}"] * 4 + ["blackhole", "unreachable", "prohibit"])
        self.emit(" ".join(x for x in ("rule add", pref, " ".join(sel), action) if x))

    def invalid(self) -> None:
        v6 = self.v6only
        choices = [
            lambda: f"route add {self.prefix(v6)} via {'2001:db8:eeee::1' if v6 else '10.250.0.1'}",
            lambda: f"route add {self.prefix(v6)} dev d{self.nlinks + 5}",
            lambda: f"route del {self.prefix(v6)} table 4242",
            lambda: f"route add {self.prefix(v6)} via {self.gw6(0) if v6 else self.gw4(0)} dev d0 src {'2001:db8:eeee::9' if v6 else '10.250.0.9'}",
            lambda: f"route replace {self.prefix(v6)} nhid 4000",
        ]
        if not v6:
            choices.append(lambda: f"route add {self.prefix(False)} tos {self.r.choice(BAD_TOS)} dev d1")
        if self.on("route_encap_seg6") and not v6:
            choices.append(lambda: f"route add {self.prefix(False)} encap seg6 mode inline segs {self.segs()} dev d1")
        if self.on("route_encap_seg6local"):
            # A behaviour without the attribute it needs, flavors it does not take, bad
            # NEXT-C-SID lengths, End.DT4 without its VRF table, End.DT6 without a table,
            # IPv4. (End.DT4 with a VRF table and the USP/USD flavors are fibre's alone: this
            # kernel has no VRF device and refuses those flavors.)
            choices += [
                lambda: f"route add {self.prefix(True)} encap seg6local action End.X dev d1",
                lambda: f"route add {self.prefix(True)} encap seg6local action End.X nh6 2001:db8:1::2 flavors psp,usd dev d1",
                lambda: f"route add {self.prefix(True)} encap seg6local action End.X nh6 {self.gw6(1)} flavors psp dev d1",
                lambda: f"route add {self.prefix(True)} encap seg6local action End flavors next-csid lblen 4 dev d1",
                lambda: f"route add {self.prefix(True)} encap seg6local action End.DT4 dev d1",
                lambda: f"route add {self.prefix(True)} encap seg6local action End.DT6 dev d1",
            ]
            if not v6:
                choices.append(lambda: f"route add {self.prefix(False)} encap seg6local action End dev d1")
        if self.on("nexthop_objects"):
            # (`nexthop ... dev MISSING` is a parse error for iproute2: it would end the batch.)
            choices.append(lambda: f"nexthop add id {self.r.choice(self.nh_all or [1])} dev d{self.link()}")
            choices.append(lambda: "nexthop add id 4001 group 4002/4003")
        self.emit(self.r.choice(choices)())

    def events(self) -> None:
        if not self.on("link_events"):
            return
        for _ in range(max(1, self.nlinks // 3)):
            i = self.r.randrange(2, self.nlinks)
            e = self.r.random()
            if e < 0.3:
                self.emit(f"link set d{i} down")
            elif e < 0.45:
                self.emit(f"link set d{i} up")
            elif e < 0.6 and self.on("carrier"):
                self.emit(f"link set d{i} carrier off")
            elif e < 0.7:
                self.emit(f"link set d{i} mtu {self.r.choice([1280, 1400, 1500, 9000])}")
            elif e < 0.8 and self.on("addr_del"):
                fams = ([6] if self.on("addr6") else []) + ([4] if self.on("addr4") and not self.v6only else [])
                if fams and self.r.choice(fams) == 6:
                    self.emit(f"address del 2001:db8:{i:x}::1/64 dev d{i}")
                elif fams:
                    self.emit(f"address del 10.{100 + i}.0.1/24 dev d{i}")
            elif e < 0.9 and self.on("link_del"):
                self.emit(f"link del d{i}")
            else:
                self.emit(f"link set d{i} address {self.mac(i + 100)}")
        if self.on("carrier") and self.chance(0.5):
            self.emit(f"link set d{self.r.randrange(2, self.nlinks)} carrier on")

    def flow_block_phase(self) -> None:
        """Multipath routes in STABLE4/6 through d0/d1, then lookups spread over each."""
        if not self.on("route_multipath"):
            return
        n_blocks = min(MAX_FLOW_BLOCKS, self.lookups // (4 * FLOW_BLOCK))
        for b in range(n_blocks):
            v6 = self.v6only or b % 2 == 1
            stable = STABLE6 if v6 else STABLE4
            plen = 64 if v6 else 24
            sub = ipaddress.ip_network((int(stable.network_address) + (b << (stable.max_prefixlen - plen)), plen))
            hops = []
            parts = []
            for k in range(self.r.randrange(2, 4)):
                j = k % 2
                gw = f"2001:db8:{j:x}::{0xf00 + b * 8 + k:x}" if v6 else f"10.{100 + j}.0.{200 + b * 8 + k}"
                w = self.r.randrange(1, 5)
                hops.append({"gateway": str(ipaddress.ip_address(gw)), "dev": f"d{j}", "weight": w})
                parts.append(f"nexthop via {gw} dev d{j} weight {w}")
            self.emit(f"route add {sub} {' '.join(parts)}")
            first = len(self.out) + 1
            hosts = max(2, min(sub.num_addresses - 2, 1 << 20))
            for _ in range(FLOW_BLOCK):
                dst = sub.network_address + self.r.randrange(1, hosts)
                if self.chance(0.5) and not v6:
                    src = f"10.{100 + self.r.randrange(2, self.nlinks)}.{self.r.randrange(0, 256)}.{self.r.randrange(1, 255)}"
                    self.emit(f"route get {dst} from {src} iif d1")
                else:
                    self.emit(f"route get {dst}")
            self.flow_blocks.append({"first": first, "last": len(self.out), "count": FLOW_BLOCK, "route": str(sub), "nexthops": hops})

    def group_flow_block_phase(self) -> None:
        """Routes in STABLE4/6 through next-hop groups of weighted objects on d0/d1, then
        lookups spread over each (after any `route_multipath` blocks, on their own prefixes).
        Only in the mixed file: `ip -6` cannot create a group. The objects are new, so no
        route or group shares them, and no later command touches them."""
        if not self.on("nexthop_groups") or self.v6only:
            return
        fams = ([False] if self.on("addr4") else []) + [True]
        n_blocks = min(len(fams), self.lookups // (4 * FLOW_BLOCK))
        for b, v6 in enumerate(fams[:n_blocks], start=MAX_FLOW_BLOCKS):
            stable = STABLE6 if v6 else STABLE4
            plen = 64 if v6 else 24
            sub = ipaddress.ip_network((int(stable.network_address) + (b << (stable.max_prefixlen - plen)), plen))
            hops = []
            members = []
            for k in range(self.r.randrange(2, 5)):
                j = k % 2
                # Link-local IPv6 gateways need no address on the link (addr6 may be off).
                gw = f"fe80::{0xf00 + b * 8 + k:x}" if v6 else f"10.{100 + j}.0.{200 + b * 8 + k}"
                w = self.r.randrange(1, 9)
                nid = self.next_nh
                self.next_nh += 1
                self.emit(f"nexthop add id {nid} via {gw} dev d{j}")
                hops.append({"gateway": gw, "dev": f"d{j}", "weight": w})
                members.append(f"{nid},{w}")
            gid = self.next_nh
            self.next_nh += 1
            self.emit(f"nexthop add id {gid} group {'/'.join(members)}")
            self.emit(f"route add {sub} nhid {gid}")
            first = len(self.out) + 1
            hosts = max(2, min(sub.num_addresses - 2, 1 << 20))
            for _ in range(FLOW_BLOCK):
                self.emit(f"route get {sub.network_address + self.r.randrange(1, hosts)}")
            self.flow_blocks.append({"first": first, "last": len(self.out), "count": FLOW_BLOCK, "route": str(sub), "nexthops": hops})

    def lookup_target(self, v6: bool) -> str:
        nets = self.prefixes6 if v6 else self.prefixes4
        if not nets or (self.on("lookup_local") and self.chance(0.05)):
            # An address in a link's subnet: the link's own address (local table) or a neighbour.
            if v6:
                return f"2001:db8:{self.r.randrange(0, self.nlinks):x}::{self.r.randrange(1, 0xffff):x}"
            return f"10.{100 + self.r.randrange(0, self.nlinks)}.0.{self.r.randrange(1, 255)}"
        net = self.r.choice(nets)
        base = int(net.network_address)
        size = net.num_addresses
        x = self.r.random()
        if x < 0.6:
            a = base + self.r.randrange(size)
        elif x < 0.7:
            a = base
        elif x < 0.8:
            a = base + size - 1
        elif x < 0.9:
            a = base - 1
        else:
            a = base + size
        a %= 1 << net.max_prefixlen
        if not v6 and (a >> 24) in (0, 127) or (a >> 28) >= 14:
            a = base + 1 if size > 1 else base
        return str(ipaddress.ip_address(a) if not v6 else ipaddress.IPv6Address(a))

    def lookup_block(self, n: int) -> None:
        if not self.on("lookup_out") and not self.on("lookup_in"):
            return
        for _ in range(max(0, n)):
            v6 = self.v6only or self.chance(0.35)
            dst = self.lookup_target(v6)
            opts = []
            if self.on("lookup_in") and (not self.on("lookup_out") or self.chance(0.35)):
                src = self.lookup_target(v6)
                opts.append(f"from {src} iif d{self.link()}")
            elif self.on("lookup_opts") and self.chance(0.3):
                if self.chance(0.4):
                    opts.append(f"from {self.local6() if v6 else self.local4()}")
                if self.chance(0.3):
                    opts.append(f"oif d{self.link()}")
            if self.on("lookup_opts") and self.chance(0.15):
                opts.append(f"mark 0x{self.r.randrange(1, 16):x}")
            if self.on("lookup_opts") and not v6 and self.chance(0.1):
                opts.append(f"tos {self.r.choice(TOS)}")
            if self.on("lookup_opts") and self.chance(0.05):
                opts.append(f"ipproto udp sport {self.r.randrange(1, 4000)} dport {self.r.randrange(1, 2000)}")
            if self.on("fibmatch") and self.chance(0.1):
                opts.append("fibmatch")
            self.emit(" ".join(["route get", dst] + opts))

    def dumps(self) -> None:
        if self.on("show_routes"):
            if self.v6only:
                self.emit("route show")
                self.emit("route show table all")
            else:
                self.emit("route show")
                self.emit("route show table all")
                self.emit(f"route show table {self.r.choice(['100', '101', '200', 'local'])}")
        if self.on("show_rules") and self.on("rules"):
            self.emit("rule show")
        if self.on("show_nexthops") and self.on("nexthop_objects"):
            self.emit("nexthop show")
        if self.on("nexthop_resilient"):
            self.emit("nexthop bucket show")


def generate(seed: int, routes: int, lookups: int, features: set[str]) -> list[Run]:
    """The runs of one seed (see the module documentation)."""
    runs = []
    if "mixed" in features:
        g = _Gen(seed, routes, lookups, features, v6only=False)
        runs.append(Run(f"seed{seed}-mixed", [], g.build(), g.flow_blocks))
    if "v6file" in features:
        g = _Gen(seed, max(1, routes // 4), max(1, lookups // 4), features, v6only=True)
        runs.append(Run(f"seed{seed}-v6", ["-6"], g.build(), g.flow_blocks))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--routes", type=int, default=200)
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--features", default="all", help="feature set name from features.json, or 'all'")
    ap.add_argument("-6", dest="v6", action="store_true", help="print the IPv6 (-6) file")
    a = ap.parse_args()
    runs = generate(a.seed, a.routes, a.lookups, feature_set(a.features))
    for run in runs:
        if (run.options == ["-6"]) == a.v6:
            print(run.text, end="")


if __name__ == "__main__":
    main()
