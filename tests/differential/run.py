#!/usr/bin/env python3
"""Differential test of fibre against the Linux kernel.

    python3 tests/differential/run.py --seeds 1-20 --routes 10000 --lookups 100000

For each seed, gen.py writes command files; each file goes to the kernel (`ip [-j] -force -batch`
in fresh network namespaces, see kernelns.py) and to `fibre [-j] -force -batch`. The runner
compares, command by command: the text lines of every output command, the JSON objects field by
field, the error lines on stderr (by file line) and the exit status.

Multipath: the kernel hashes flows with a per-namespace seed, so which next hop a lookup picks
may differ between two correct implementations. When two `route get` answers differ only in the
chosen next hop's fields, the runner replays the file up to that line in a fresh namespace and
asks the kernel for the matched route (`fibmatch`): fibre's next hop must be one of its next
hops. An IPv6 fibmatch lists the chosen sibling first, so there the next-hop lists may differ by
a rotation. The generator's flow blocks (many lookups into one multipath route) check that each side
splits flows as the weights say (within FLOW_SIGMAS standard deviations).

`--against kernel` compares the kernel with itself (the harness's own check: must be 100%);
`--inject N` changes N answers of the second side to check that the comparator notices.
Exit status: 0 when everything agrees, 1 on disagreement, 77 when skipped (no root/netns).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402
import kernelns  # noqa: E402

SKIP = 77
# Flow-block weight check: allowed deviation of a next hop's share, in binomial standard
# deviations, plus a small absolute slack for tiny expected counts.
FLOW_SIGMAS = 5.0
FLOW_SLACK = 3
# Fields of a `route get` answer that depend on which next hop of a multipath route was chosen
# (an IPv6 sibling keeps its own protocol; a leg its own seg6 encapsulation).
NEXTHOP_FIELDS = {"gateway", "via", "dev", "prefsrc", "flags", "nhid", "protocol",
                  "encap", "mode", "segs", "hmac"}
OUTPUT_VERBS = (("route", "get"), ("route", "show"), ("route", "list"), ("rule", "show"),
                ("rule", "list"), ("nexthop", "show"), ("nexthop", "list"), ("nexthop", "bucket"))
# How long a resilient group's bucket has been idle depends on when the command ran: masked.
_IDLE_TEXT = re.compile(r"\bidle_time \S+")
_IDLE_JSON = re.compile(r'"idle_time": ?[-0-9.e+]+')
_FAILED = re.compile(r"^Command failed (.*):(\d+)$")


# -- running one side ---------------------------------------------------------------------------

@dataclass
class Side:
    """One implementation's answers to one file: text and JSON runs."""

    name: str
    text: kernelns.Result
    json: kernelns.Result


def run_kernel(run: gen.Run, display: str) -> Side:
    results = []
    for as_json in (False, True):
        with kernelns.KernelNS("k") as ns:
            res = ns.batch(run.text, display, json=as_json, options=run.options)
        results.append(res)
    return Side("kernel", results[0], results[1])


def run_fibre(fibre: str, run: gen.Run, display: str) -> Side:
    results = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cmds.batch")
        with open(path, "w") as f:
            f.write(run.text)
        for as_json in (False, True):
            args = [fibre] + run.options + (["-j"] if as_json else []) + ["-force", "-batch", path]
            t0 = time.perf_counter()
            p = subprocess.run(args, capture_output=True, text=True)
            secs = time.perf_counter() - t0
            stderr = p.stderr.replace(f"Command failed {path}:", f"Command failed {display}:")
            results.append(kernelns.Result(p.stdout, stderr, p.returncode, secs, run.lines))
    return Side("fibre", results[0], results[1])


# -- splitting answers per command ---------------------------------------------------------------

def output_lines(text: str) -> list[int]:
    """1-based numbers of the lines whose command prints to stdout."""
    out = []
    for n, line in enumerate(text.split("\n")[:-1], 1):
        w = line.split("#", 1)[0].split()
        if len(w) >= 2 and (w[0], w[1]) in OUTPUT_VERBS:
            out.append(n)
    return out


def error_blocks(stderr: str) -> tuple[dict[int, list[str]], list[str]]:
    """stderr as {file line: its error lines}, and the lines after the last block (a fatal error
    that ended the batch)."""
    blocks: dict[int, list[str]] = {}
    cur: list[str] = []
    for line in stderr.splitlines():
        m = _FAILED.match(line)
        if m:
            blocks[int(m.group(2))] = cur
            cur = []
        else:
            cur.append(line)
    return blocks, cur


def split_json(stdout: str, produced: list[int]) -> dict[int, object]:
    """{line: parsed JSON} for the output commands that produced output, in order."""
    rows = [_IDLE_JSON.sub('"idle_time":"*"', r) for r in stdout.split("\n") if r.strip()]
    out: dict[int, object] = {}
    for n, row in zip(produced, rows):
        try:
            out[n] = json.loads(row)
        except json.JSONDecodeError as e:
            out[n] = {"<invalid JSON>": str(e), "text": row[:200]}
    if len(rows) > len(produced):
        out[-1] = rows[len(produced):]
    return out


def records(stdout: str) -> list[str]:
    """Text output as records: a line and its indented continuation lines."""
    recs: list[str] = []
    for line in _IDLE_TEXT.sub("idle_time *", stdout).split("\n"):
        if not line:
            continue
        if line[0] in " \t" and recs:
            recs[-1] += "\n" + line
        else:
            recs.append(line)
    return recs


def split_text(stdout: str, produced: list[int], counts: dict[int, int]) -> dict[int, list[str]]:
    """{line: its text records}, cut by the record counts of the reference (kernel) JSON run."""
    recs = records(stdout)
    out: dict[int, list[str]] = {}
    i = 0
    for n in produced:
        k = counts.get(n, 1)
        out[n] = recs[i:i + k]
        i += k
    if i < len(recs):
        out[-1] = recs[i:]
    return out


def produced_lines(text: str, stderr: str) -> list[int]:
    """The output commands that did not fail (each prints one JSON row with -j). After an error
    that ends the batch, the list is longer than the output: the pairing stops there."""
    blocks, _ = error_blocks(stderr)
    return [n for n in output_lines(text) if n not in blocks]


# -- comparing -----------------------------------------------------------------------------------

@dataclass
class Report:
    commands: int = 0
    lookups: int = 0
    lookups_agree: int = 0
    outputs: int = 0
    outputs_agree: int = 0
    multipath_resolved: int = 0
    largest_dump: int = 0  # routes in the largest `route show table all` (the table size reached)
    diffs: list[str] = field(default_factory=list)
    flow_checks: list[str] = field(default_factory=list)
    kernel_secs: float = 0.0
    other_secs: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.diffs

    def add(self, msg: str) -> None:
        self.diffs.append(msg)


def field_diff(a: object, b: object, path: str = "", who: str = "fibre") -> list[str]:
    """Per-field differences between two JSON values (the kernel's and `who`'s)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                out.append(f"{path}{k}: kernel {json.dumps(a[k])}, {who} has no such field")
            elif k not in a:
                out.append(f"{path}{k}: kernel has no such field, {who} {json.dumps(b[k])}")
            else:
                out += field_diff(a[k], b[k], f"{path}{k}.", who)
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(max(len(a), len(b))):
            if i >= len(a):
                out.append(f"{path}[{i}]: kernel has no such entry, {who} {json.dumps(b[i])}")
            elif i >= len(b):
                out.append(f"{path}[{i}]: kernel {json.dumps(a[i])}, {who} has no such entry")
            else:
                out += field_diff(a[i], b[i], f"{path}[{i}].", who)
        return out
    if a != b:
        return [f"{path.rstrip('.')}: kernel {json.dumps(a)}, {who} {json.dumps(b)}"]
    return []


def nexthop_only(a: object, b: object) -> bool:
    """True when two route get answers differ only in next-hop-dependent fields. The `redirect`
    cache flag is one: an input lookup sets it when the chosen next hop leaves through the
    input device. So are an IPv6 answer's metrics: each sibling of an IPv6 multipath route has
    its own (a device MTU change moves the `mtu` of the siblings through that device only)."""
    if not (isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == 1):
        return False
    x, y = a[0], b[0]
    if not (isinstance(x, dict) and isinstance(y, dict)):
        return False

    def field(d: dict, k: str) -> object:
        v = d.get(k)
        return [f for f in v if f != "redirect"] if k == "cache" and isinstance(v, list) else v

    keys = set(x) | set(y)
    per_hop = NEXTHOP_FIELDS | ({"metrics"} if ":" in str(x.get("dst", "")) else set())
    return all(field(x, k) == field(y, k) for k in keys - per_hop)


def _is_rotation(a: list, b: list) -> bool:
    return len(a) == len(b) and len(a) > 1 and any(a[i:] + a[:i] == b for i in range(len(a)))


def sibling_rotation(a: object, b: object, ta: list | None, tb: list | None) -> bool:
    """True when two fibmatch answers (JSON a, b; text ta, tb) differ only in where their
    next-hop list starts. The kernel answers an IPv6 fibmatch from the chosen sibling: it first,
    then the others in their circular order, so the start follows the multipath choice."""
    if not (isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == 1):
        return False
    x, y = a[0], b[0]
    if not (isinstance(x, dict) and isinstance(y, dict)):
        return False
    # The header's metrics are the first-listed sibling's own (IPv6 siblings keep their own
    # `mtu`): they follow the choice too.
    chose_apart = (x.get("nexthops") or [None])[0] != (y.get("nexthops") or [None])[0]
    skip = {"nexthops", "metrics"} if chose_apart else {"nexthops"}
    if {k: v for k, v in x.items() if k not in skip} != {k: v for k, v in y.items() if k not in skip}:
        return False
    if not _is_rotation(x.get("nexthops") or [], y.get("nexthops") or []):
        return False
    if not (ta and tb and len(ta) == len(tb) == 1):
        return False
    ha, *hopsa = ta[0].split("\n\tnexthop")
    hb, *hopsb = tb[0].split("\n\tnexthop")
    if chose_apart:
        ha, hb = (_SIBLING_MTU.sub("", h) for h in (ha, hb))
    return ha == hb and _is_rotation(hopsa, hopsb)


_SIBLING_MTU = re.compile(r" mtu (lock )?\d+")


def compare(run: gen.Run, k: Side, o: Side, report: Report, max_diffs: int, use_json: bool,
            other_name: str = "fibre") -> dict[int, tuple]:
    """Compares two sides of one run; returns the route get lines that differ only in the chosen
    next hop, for multipath resolution: {line: (kernel answer, other answer)}."""
    lines = run.text.split("\n")[:-1]
    name = run.name

    def diff(n: int, what: str, detail: list[str]) -> None:
        if len(report.diffs) < max_diffs:
            cmd = lines[n - 1] if 0 < n <= len(lines) else "(end of output)"
            body = "\n      ".join(detail[:12])
            report.add(f"{name}:{n}: `{cmd}`: {what}\n      {body}")
        else:
            report.diffs.append("")

    report.commands += len(lines)
    for label, kr, orr in (("text", k.text, o.text), ("json", k.json, o.json)):
        if label == "json" and not use_json:
            continue
        if kr.status != orr.status:
            diff(0, f"exit status ({label})", [f"kernel {kr.status}, {other_name} {orr.status}"])
    kb, ktail = error_blocks(k.text.stderr)
    ob, otail = error_blocks(o.text.stderr)
    for n in sorted(set(kb) | set(ob)):
        if kb.get(n) != ob.get(n):
            diff(n, "stderr", [f"kernel: {kb.get(n, '(no error)')}", f"{other_name}: {ob.get(n, '(no error)')}"])
    if ktail != otail:
        diff(0, "stderr after the last failed command", [f"kernel: {ktail}", f"{other_name}: {otail}"])

    kprod = produced_lines(run.text, k.json.stderr)
    oprod = produced_lines(run.text, o.json.stderr) if use_json else kprod
    kj = split_json(k.json.stdout, kprod)
    counts = {n: (len(v) if isinstance(v, list) else 1) for n, v in kj.items()}
    kt = split_text(k.text.stdout, produced_lines(run.text, k.text.stderr), counts)
    ot = split_text(o.text.stdout, produced_lines(run.text, o.text.stderr), counts)
    oj = split_json(o.json.stdout, oprod) if use_json else {}

    flow_lines = {}
    for b in run.flow_blocks:
        for n in range(b["first"], b["last"] + 1):
            flow_lines[n] = b
    ambiguous: dict[int, tuple] = {}
    rotated: set[int] = set()
    for n in output_lines(run.text):
        is_get = lines[n - 1].split()[1] == "get"
        if lines[n - 1].strip() == "route show table all" and isinstance(kj.get(n), list):
            report.largest_dump = max(report.largest_dump, len(kj[n]))
        report.outputs += 1
        report.lookups += is_get
        ok = True
        if use_json:
            a, b = kj.get(n), oj.get(n)
            if a != b:
                if is_get and nexthop_only(a, b) and "fibmatch" not in lines[n - 1]:
                    ambiguous[n] = (a, b)
                elif is_get and "fibmatch" in lines[n - 1] and sibling_rotation(a, b, kt.get(n), ot.get(n)):
                    rotated.add(n)
                    report.multipath_resolved += 1
                else:
                    ok = False
                    diff(n, "JSON", field_diff(a, b, who=other_name) or [f"kernel {a}", f"{other_name} {b}"])
        ta, tb = kt.get(n), ot.get(n)
        if ta != tb and not (n in ambiguous or n in rotated or (is_get and not use_json and n in flow_lines)):
            ok = False
            diff(n, "text", [f"kernel: {ta}", f"{other_name}: {tb}"])
        if ok and n not in ambiguous:
            report.outputs_agree += 1
            report.lookups_agree += is_get
    for extra in ("json", "text"):
        src = (kj, oj) if extra == "json" else (kt, ot)
        if src[0].get(-1) != src[1].get(-1):
            diff(0, f"{extra} output after the last command", [f"kernel: {src[0].get(-1)}", f"{other_name}: {src[1].get(-1)}"])
    return ambiguous


def resolve_multipath(run: gen.Run, ambiguous: dict[int, tuple], report: Report, max_diffs: int,
                      other_name: str) -> None:
    """Accepts a next-hop-only difference when the other side's next hop is one of the kernel's
    matched route's next hops (from a replay with `fibmatch`); flow-block lines are checked
    against the generator's manifest instead (the route is known)."""
    lines = run.text.split("\n")[:-1]
    outs = set(output_lines(run.text))
    flow = {}
    for b in run.flow_blocks:
        for n in range(b["first"], b["last"] + 1):
            flow[n] = b
    pending = [n for n in sorted(ambiguous) if n not in flow]
    matched: dict[int, set] = {}
    if pending:
        # One replay per group of lookups with no state change between them.
        groups: dict[int, list[int]] = {}
        last_mut = 0
        j = 0
        for n in range(1, len(lines) + 1):
            if n not in outs and lines[n - 1].strip():
                last_mut = n
            while j < len(pending) and pending[j] == n:
                groups.setdefault(last_mut, []).append(n)
                j += 1
        for upto, qs in groups.items():
            prefix = [l if (i + 1) not in outs else "" for i, l in enumerate(lines[:upto])]
            queries = [lines[q - 1] + " fibmatch" for q in qs] + ["nexthop show"]
            text = "\n".join(prefix + queries) + "\n"
            with kernelns.KernelNS("r") as ns:
                res = ns.batch(text, run.name, json=True, options=run.options)
            rows = [r for r in res.stdout.split("\n") if r.strip()]
            failed, _ = error_blocks(res.stderr)
            nh_objs = {}
            qlines = list(range(len(prefix) + 1, len(prefix) + len(queries) + 1))
            produced = [x for x in qlines if x not in failed]
            by_line = dict(zip(produced, rows))
            try:
                for obj in json.loads(by_line.get(qlines[-1], "[]")):
                    nh_objs[obj.get("id")] = obj
            except json.JSONDecodeError:
                pass
            for q, ql in zip(qs, qlines):
                try:
                    route = json.loads(by_line.get(ql, "[]"))
                except json.JSONDecodeError:
                    route = []
                matched[q] = _route_hops(route[0] if route else {}, nh_objs)
    for n in sorted(ambiguous):
        a, b = ambiguous[n]
        mine = (b[0].get("gateway") or (b[0].get("via") or {}).get("host"), b[0].get("dev"))
        kernels = (a[0].get("gateway") or (a[0].get("via") or {}).get("host"), a[0].get("dev"))
        if n in flow:
            hops = {(h["gateway"], h["dev"]) for h in flow[n]["nexthops"]}
        else:
            hops = matched.get(n, set())
        # Only a route with several next hops leaves the choice open; with one, any
        # difference is a disagreement.
        # The same next hop chosen on both sides leaves nothing open: the answers then differ
        # in a field that does not follow the choice (`redirect` given the same device).
        if mine != kernels and len(hops) > 1 and (mine in hops or (None, mine[1]) in hops):
            report.multipath_resolved += 1
            report.outputs_agree += 1
            report.lookups_agree += 1
        elif len(report.diffs) < max_diffs:
            what = ("JSON (the same next hop on both sides)" if mine == kernels
                    else f"multipath next hop {mine} is not one of the matched route's {sorted(hops, key=str)}"
                    if len(hops) > 1 else f"JSON (the matched route has one next hop: {sorted(hops, key=str)})")
            report.add(f"{run.name}:{n}: `{lines[n - 1]}`: {what}\n      "
                       + "\n      ".join(field_diff(a, b, who=other_name)))
        else:
            report.diffs.append("")


def _route_hops(route: dict, nh_objs: dict) -> set:
    """The (gateway, dev) pairs a route (JSON from fibmatch) can choose from."""
    def one(h: dict) -> tuple:
        return (h.get("gateway") or (h.get("via") or {}).get("host"), h.get("dev"))

    if "nexthops" in route:
        return {one(h) for h in route["nexthops"]}
    if "nhid" in route:
        out = set()
        todo = [route["nhid"]]
        while todo:
            obj = nh_objs.get(todo.pop(), {})
            if "group" in obj:
                todo += [m.get("id") for m in obj["group"]]
            else:
                out.add(one(obj))
        return out
    return {one(route)}


def check_flows(run: gen.Run, side: Side, who: str, report: Report, shadowed: set[int]) -> None:
    """Each flow block's answers must split over its next hops as the weights say. A block the
    kernel answers from some other route (a rule or a multicast route the random commands put
    in front of it) is shadowed: its first line goes into `shadowed` when `who` is the kernel,
    and no side's split is checked there (each answer is still compared with the kernel's)."""
    if not run.flow_blocks:
        return
    prod = produced_lines(run.text, side.json.stderr)
    answers = split_json(side.json.stdout, prod)
    for b in run.flow_blocks:
        hops = [(h["gateway"], h["dev"]) for h in b["nexthops"]]
        weights = [h["weight"] for h in b["nexthops"]]
        counts = {h: 0 for h in hops}
        other = 0
        for n in range(b["first"], b["last"] + 1):
            ans = answers.get(n)
            got = None
            if isinstance(ans, list) and ans and isinstance(ans[0], dict):
                got = (ans[0].get("gateway"), ans[0].get("dev"))
            if got in counts:
                counts[got] += 1
            else:
                other += 1
        if who == "kernel" and other:
            shadowed.add(b["first"])
        if b["first"] in shadowed:
            report.flow_checks.append(f"{run.name} {who} {b['route']}: shadowed "
                                      f"({other} of {b['count']} answers from another route)")
            continue
        total = sum(weights)
        n = b["count"]
        bad = []
        for h, w in zip(hops, weights):
            p = w / total
            expect = n * p
            tol = FLOW_SIGMAS * math.sqrt(n * p * (1 - p)) + FLOW_SLACK
            if abs(counts[h] - expect) > tol:
                bad.append(f"{h[0]} weight {w}: {counts[h]} of {n}, expected {expect:.0f} +- {tol:.0f}")
        shares = ", ".join(f"{h[0]}(w{w})={counts[h]}" for h, w in zip(hops, weights))
        report.flow_checks.append(f"{run.name} {who} {b['route']}: {shares}, elsewhere={other}")
        if other:
            bad.append(f"{other} answers were not one of the route's next hops")
        if bad:
            report.add(f"{run.name}:{b['first']}-{b['last']}: {who}'s multipath split over {b['route']} "
                       f"does not follow the weights\n      " + "\n      ".join(bad))


# -- injected differences (the comparator's own test) ---------------------------------------------

def inject(side: Side, count: int, seed: int) -> Side:
    """A copy of `side` with `count` answers changed: one text record token, one JSON field or one
    error line each, chosen at random."""
    r = random.Random(seed)
    text_out = side.text.stdout.split("\n")
    json_out = side.json.stdout.split("\n")
    err = side.text.stderr.split("\n")
    for _ in range(count):
        what = r.choice(["text", "json", "err"] if any(e.strip() for e in err) else ["text", "json"])
        if what == "text":
            idx = [i for i, l in enumerate(text_out) if l.strip()]
            if idx:
                i = r.choice(idx)
                text_out[i] = text_out[i].replace(" ", "  ", 1) if " " in text_out[i] else text_out[i] + "x"
        elif what == "json":
            idx = [i for i, l in enumerate(json_out) if l.strip() not in ("", "[]")]
            if idx:
                i = r.choice(idx)
                json_out[i] = json_out[i].replace('"dev":"', '"dev":"X', 1) if '"dev":"' in json_out[i] else json_out[i].replace("[{", '[{"injected":1,', 1)
        else:
            idx = [i for i, l in enumerate(err) if l.strip() and not l.startswith("Command failed")]
            if idx:
                i = r.choice(idx)
                err[i] = err[i] + " (injected)"
    return Side(side.name,
                kernelns.Result("\n".join(text_out), "\n".join(err), side.text.status, side.text.seconds),
                kernelns.Result("\n".join(json_out), side.json.stderr, side.json.status, side.json.seconds))


# -- driver ---------------------------------------------------------------------------------------

def parse_seeds(spec: str) -> list[int]:
    out = []
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        else:
            out.append(int(part))
    return out


def run_seed(seed: int, routes: int, lookups: int, features: set[str], against: str,
             injections: int, max_diffs: int, report: Report, keep: str | None, quiet: bool) -> None:
    other_name = "kernel2" if against == "kernel" else "fibre"
    for run in gen.generate(seed, routes, lookups, features):
        display = run.name + ".batch"
        if keep:
            with open(os.path.join(keep, display), "w") as f:
                f.write(run.text)
        k = run_kernel(run, display)
        produced = produced_lines(run.text, k.json.stderr)
        rows = [r for r in k.json.stdout.split("\n") if r.strip()]
        if len(rows) < len(produced):
            raise RuntimeError(f"{run.name}: iproute2 stopped before the end of the file, near "
                               f"line {produced[len(rows)]} (a generator bug): {k.json.stderr[-200:]}")
        o = run_kernel(run, display) if against == "kernel" else run_fibre(against, run, display)
        if injections:
            o = inject(o, injections, seed)
        report.kernel_secs += k.text.seconds
        report.other_secs += o.text.seconds
        ambiguous = compare(run, k, o, report, max_diffs, "json" in features, other_name)
        if ambiguous:
            resolve_multipath(run, ambiguous, report, max_diffs, other_name)
        shadowed: set[int] = set()
        check_flows(run, k, "kernel", report, shadowed)
        check_flows(run, o, other_name, report, shadowed)
        if not quiet:
            print(f"  {run.name}: {run.lines} lines, kernel {k.text.seconds:.2f}s, "
                  f"{other_name} {o.text.seconds:.2f}s", flush=True)


# Class order for --probe: a class is tried on top of the ones before it that passed, so the
# base classes come first and classes that need others (groups need objects) after them.
PROBE_ORDER = ["mixed", "json", "addr4", "lookup_out", "show_routes", "addr6", "lookup_local", "lookup_in",
               "lookup_opts", "fibmatch", "route_attrs", "route_types", "route_local_types",
               "route_prefsrc", "route_metrics", "route_onlink", "route_via6_for4",
               "route_multipath", "route_v6_from", "route_modify", "route_del", "nexthop_objects",
               "nexthop_groups", "rules", "show_rules", "show_nexthops", "invalid",
               "parse_error_tail", "link_events", "carrier", "link_del", "addr_del", "v6file"]
# Classes that emit nothing without another one.
NEEDS = {"nexthop_groups": "nexthop_objects", "show_nexthops": "nexthop_objects",
         "show_rules": "rules", "route_v6_from": "show_routes"}


def probe(fibre: str, seeds: list[int], routes: int, lookups: int) -> set[str]:
    """Finds the classes fibre agrees on: each class is added to the passing set when the set
    with it still agrees 100%. Prints each class's verdict and first disagreement."""
    passing: set[str] = set()
    for c in PROBE_ORDER + sorted(set(gen.load_features()["classes"]) - set(PROBE_ORDER)):
        if c in NEEDS and NEEDS[c] not in passing:
            print(f"skip {c}: needs {NEEDS[c]}")
            continue
        report = Report()
        for seed in seeds:
            run_seed(seed, routes, lookups, passing | {c}, fibre, 0, 1, report, None, True)
        if report.ok:
            passing.add(c)
            print(f"ok   {c}", flush=True)
        else:
            first = report.diffs[0].replace("\n", " ")
            print(f"FAIL {c}: {first[:300]}", flush=True)
    print("agreeing classes (the 'ci' set): " + ", ".join(sorted(passing)))
    return passing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Differential test of fibre against the Linux kernel.")
    ap.add_argument("--seeds", default="1-3", help="e.g. 1-20 or 1,4,9")
    ap.add_argument("--routes", type=int, default=500, help="configuration commands per seed")
    ap.add_argument("--lookups", type=int, default=5000, help="route get lines per seed")
    ap.add_argument("--features", default="ci", help="feature set from features.json ('all', 'kernel', 'ci')")
    ap.add_argument("--fibre", default=os.environ.get("FIBRE", "target/release/fibre"))
    ap.add_argument("--against", choices=["fibre", "kernel"], default="fibre",
                    help="'kernel' compares the kernel with itself (harness self-check)")
    ap.add_argument("--inject", type=int, default=0, help="change N answers of the second side")
    ap.add_argument("--max-diffs", type=int, default=20, help="disagreements printed in full")
    ap.add_argument("--keep", help="directory to write the generated files to")
    ap.add_argument("--probe", action="store_true",
                    help="find the feature classes fibre agrees on (to update the ci set)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)

    why = kernelns.available()
    if why:
        print(f"SKIP: differential test {why}")
        return SKIP
    if a.probe:
        probe(os.path.abspath(a.fibre), parse_seeds(a.seeds), a.routes, a.lookups)
        return 0
    features = gen.feature_set(a.features)
    if not features:
        print(f"SKIP: feature set {a.features!r} enables nothing")
        return SKIP
    against = "kernel" if a.against == "kernel" else os.path.abspath(a.fibre)
    if against != "kernel" and not os.access(against, os.X_OK):
        print(f"SKIP: no fibre binary at {against} (build it, or set FIBRE)")
        return SKIP
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    report = Report()
    t0 = time.perf_counter()
    for seed in parse_seeds(a.seeds):
        if not a.quiet:
            print(f"seed {seed}", flush=True)
        run_seed(seed, a.routes, a.lookups, features, against, a.inject, a.max_diffs, report, a.keep, a.quiet)
    other = "kernel2" if against == "kernel" else "fibre"
    shown = [d for d in report.diffs if d]
    for d in shown:
        print("DIFF " + d)
    if len(report.diffs) > len(shown):
        print(f"... and {len(report.diffs) - len(shown)} more disagreements")
    off = sorted(set(gen.load_features()["classes"]) - features)
    pct = 100.0 * report.lookups_agree / report.lookups if report.lookups else 100.0
    opct = 100.0 * report.outputs_agree / report.outputs if report.outputs else 100.0
    print(f"features: {a.features} (off: {', '.join(off) or 'none'})")
    for line in report.flow_checks[:8]:
        print("flows: " + line)
    print(f"commands {report.commands}, output commands {report.outputs} ({opct:.3f}% agree), "
          f"lookups {report.lookups} ({pct:.3f}% agree, {report.multipath_resolved} multipath "
          f"choices resolved), disagreements {len(report.diffs)}; largest table dump "
          f"{report.largest_dump} routes")
    print(f"time: kernel {report.kernel_secs:.2f}s, {other} {report.other_secs:.2f}s "
          f"(text runs; total wall {time.perf_counter() - t0:.1f}s)")
    print("RESULT: " + ("PASS" if report.ok else "FAIL"))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
