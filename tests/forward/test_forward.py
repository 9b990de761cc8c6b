"""The forwarding differential (README.md): `fibre forward` against the Linux kernel, frame for
frame, on the generated inputs.

- The committed inputs are what fwdgen.py builds (needs scapy).
- The recording in kernel/ is what the live kernel sends (needs root, network namespaces and
  the recording's kernel release).
- `fibre forward config.batch --in LINK=input/LINK.pcap ... --out DIR` sends, case by case,
  what the kernel sends: the live kernel's outputs when namespaces are available here, else the
  recording. Each case is one test; cases listed in known.json (case name -> reason) are
  expected to differ, strictly, so a case fibre starts getting right fails until it is removed
  from the list.
"""

from __future__ import annotations

import json
import os
import platform
import struct
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "differential"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scenarios"))
import fwdcompare  # noqa: E402
import fwdgen  # noqa: E402
import fwdkernel  # noqa: E402
import kernelns  # noqa: E402
import pcapio  # noqa: E402
import scenario  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
FIBRE = os.environ.get("FIBRE", os.path.join(REPO, "target", "release", "fibre"))
CASES, _ = fwdcompare.load_cases(HERE)
with open(os.path.join(HERE, "known.json")) as _f:
    KNOWN: dict[str, str] = json.load(_f)


def case_id(c: dict) -> str:
    return f"{c['group']}: {c['name']}"


def _recorded_here() -> bool:
    with open(os.path.join(fwdkernel.RECORDING, "recording.json")) as f:
        return json.load(f)["kernel"] == platform.release()


@pytest.fixture(scope="module")
def live_kernel():
    """The directory of the live kernel's outputs, or None when namespaces are unavailable."""
    if kernelns.available():
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="fibre-fwd-kernel-") as d:
        fwdkernel.run(d)
        yield d


@pytest.fixture(scope="module")
def fibre_report(request):
    """fibre forward's outputs compared with the kernel's (live, else recorded)."""
    if not os.access(FIBRE, os.X_OK):
        pytest.skip(f"no fibre binary at {FIBRE}")
    probe = subprocess.run([FIBRE, "forward", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("fibre has no `forward` subcommand yet (`fibre forward --help` exited "
                    f"{probe.returncode}: {(probe.stderr or probe.stdout).strip()[:200]})")
    inputs = sorted(os.listdir(os.path.join(HERE, "input")))
    with tempfile.TemporaryDirectory(prefix="fibre-fwd-out-") as out:
        args = [FIBRE, "forward", os.path.join(HERE, "config.batch")]
        for name in inputs:
            args += ["--in", f"{name[:-len('.pcap')]}={os.path.join(HERE, 'input', name)}"]
        args += ["--out", out]
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"{' '.join(args)} exited {p.returncode}: {p.stderr.strip()}"
        kernel_dir = request.getfixturevalue("live_kernel") or fwdkernel.RECORDING
        report = fwdcompare.compare(kernel_dir, out, HERE, who="fibre")
    print("\n" + report.summary(details=0))
    return {case_id(r.case): r for r in report.results}


def test_inputs_are_the_generators():
    pytest.importorskip("scapy", reason="fwdgen.py builds the inputs with scapy")
    with tempfile.TemporaryDirectory() as tmp:
        fwdgen.write(tmp)
        diff = fwdgen.differences(HERE, tmp)
    assert not diff, f"the committed inputs differ from fwdgen.py's (run it): {diff}"


def _pcapng_block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def test_pcapio_reads_pcap_and_pcapng(tmp_path):
    """fibre forward may write either format: pcapio reads both, with their timestamps."""
    frames = [(1_700_000_000.25, bytes(range(60))), (1_700_000_001.000001, b"\xff" * 14)]
    pcap = tmp_path / "x.pcap"
    pcapio.write(str(pcap), frames)
    assert [(pytest.approx(ts, abs=1e-6), f) for ts, f in frames] == pcapio.read(str(pcap))
    # Section header, an Ethernet interface with nanosecond timestamps (if_tsresol 9), then
    # each frame as an enhanced packet block.
    ng = _pcapng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    ng += _pcapng_block(1, struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HHB", 9, 1, 9) + b"\0\0\0" + b"\0" * 4)
    for ts, f in frames:
        t = round(ts * 1e9)
        ng += _pcapng_block(6, struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF, len(f), len(f)) + f)
    path = tmp_path / "x.pcapng"
    path.write_bytes(ng)
    assert [(pytest.approx(ts, abs=1e-6), f) for ts, f in frames] == pcapio.read(str(path))


def test_comparison_masks_only_the_ids_of_the_routers_own_packets(tmp_path):
    """Against a copy of the recording with one change of each kind, the comparison flags
    exactly the cases changed, and passes over a new ID (and header checksum) in a packet the
    router originates."""
    router_v4 = fwdcompare.load_cases(HERE)[1]
    rec = fwdcompare.load_outputs(fwdkernel.RECORDING)
    a0 = list(rec["a0"])
    own = [i for i, (_, f) in enumerate(a0) if fwdcompare.masked(f, router_v4) != f]
    other = [i for i, (_, f) in enumerate(a0) if fwdcompare.masked(f, router_v4) == f]
    i_id, i_byte, i_drop = own[0], other[0], own[-1]
    flip = {fwdcompare.IPV4_ID: 0x5A, fwdcompare.IPV4_CSUM: 0xA5}
    ts, f = a0[i_id]
    a0[i_id] = (ts, bytes(b ^ flip.get(k, 0) for k, b in enumerate(f)))
    ts, f = a0[i_byte]
    a0[i_byte] = (ts, f[:-1] + bytes([f[-1] ^ 1]))
    extra_ts = rec["b0"][0][0]
    changed = {i_byte: a0[i_byte][0], i_drop: a0[i_drop][0]}
    del a0[i_drop]
    for link, frames in rec.items():
        if link == "a0":
            frames = a0
        elif link == "b0":
            frames = frames + [(extra_ts, b"\x00" * 60)]
            frames.sort(key=lambda x: x[0])
        pcapio.write(str(tmp_path / f"{link}.pcap"), frames)
    report = fwdcompare.compare(fwdkernel.RECORDING, str(tmp_path), HERE, who="copy")
    starts = [c["times"][0] for c in CASES]
    want = {fwdcompare.attribute(starts, ts) for ts in [*changed.values(), extra_ts]}
    got = {i for i, r in enumerate(report.results) if not r.agrees}
    assert got == want, report.summary()


def test_known_names_are_cases():
    unknown = sorted(set(KNOWN) - {case_id(c) for c in CASES})
    assert not unknown, f"known.json names cases that do not exist: {unknown}"


# What the configuration leaves behind, as dumps. Neighbours are compared as a set: the
# kernel lists a family's entries in its hash table's order.
DUMPS = "route show table all\nrule show\nneigh show\n"


def test_config_means_the_same_to_both():
    """config.batch builds the same tables in fibre as in the kernel."""
    if not os.access(FIBRE, os.X_OK):
        pytest.skip(f"no fibre binary at {FIBRE}")
    why = kernelns.available()
    if why:
        pytest.skip(f"comparing with the kernel {why}")
    with open(os.path.join(HERE, "config.batch")) as f:
        text = f.read() + DUMPS
    with kernelns.KernelNS("fwdcfg") as ns:
        r = ns.batch(text, "config.batch")
    want = scenario.answer(r.stdout, r.stderr, r.status)
    with tempfile.NamedTemporaryFile("w", suffix=".batch") as f:
        f.write(text)
        f.flush()
        p = subprocess.run([FIBRE, "-batch", f.name], capture_output=True, text=True, timeout=60)
    got = scenario.answer(p.stdout, p.stderr, p.returncode)
    for a in (want, got):
        lines = a["stdout"].splitlines(keepends=True)
        neigh = [x for x in lines if " lladdr " in x]
        a["stdout"] = "".join([x for x in lines if " lladdr " not in x] + sorted(neigh))
    diffs = scenario.differences(want, got)
    assert not diffs, "fibre reads config.batch differently:\n  " + "\n  ".join(diffs)


def test_recording_is_the_live_kernels(live_kernel):
    if live_kernel is None:
        pytest.skip(f"re-checking the recording {kernelns.available()}")
    if not _recorded_here():
        pytest.skip(f"recorded on another kernel release, this is {platform.release()}")
    report = fwdcompare.compare(fwdkernel.RECORDING, live_kernel, HERE, who="the live kernel")
    assert report.all_agree(), "the live kernel no longer sends what kernel/ recorded:\n" + report.summary()


def _params():
    out = []
    for c in CASES:
        cid = case_id(c)
        marks = [pytest.mark.xfail(reason=KNOWN[cid], strict=True)] if cid in KNOWN else []
        out.append(pytest.param(cid, id=cid, marks=marks))
    return out


@pytest.mark.parametrize("cid", _params())
def test_fibre_forward_sends_what_the_kernel_sends(fibre_report, cid):
    r = fibre_report[cid]
    lines = [f"{l} kernel only: {fwdcompare.describe(f)}" for l, f in r.unmatched_kernel]
    lines += [f"{l} fibre only: {fwdcompare.describe(f)}" for l, f in r.unmatched_other]
    assert r.agrees, f"{cid}: fibre differs from the kernel:\n  " + "\n  ".join(lines)


def test_input_cache_on_hints_and_off_send_the_same_frames(tmp_path):
    """The worker's input route cache changes no frame: every case's outputs are the same
    with the cache on (the default), with the route hints only and off, and `-j` reports the
    cache's counters (`input_cache`), with hits when it is on."""
    if not os.access(FIBRE, os.X_OK):
        pytest.skip(f"no fibre binary at {FIBRE}")
    inputs = sorted(os.listdir(os.path.join(HERE, "input")))
    sent, reports = {}, {}
    for mode in ["on", "hints", "off"]:
        out = tmp_path / mode
        args = [FIBRE, "-j", "forward", os.path.join(HERE, "config.batch")]
        for name in inputs:
            args += ["--in", f"{name[:-len('.pcap')]}={os.path.join(HERE, 'input', name)}"]
        args += ["--out", str(out), "--input-cache", mode]
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"{' '.join(args)} exited {p.returncode}: {p.stderr.strip()}"
        reports[mode] = json.loads(p.stdout)
        sent[mode] = {f: pcapio.read(str(out / f)) for f in sorted(os.listdir(out))}
    assert sent["on"] == sent["off"]
    assert sent["hints"] == sent["off"]
    cache = reports["on"]["input_cache"]
    assert set(cache) == {"hits", "hinted", "misses", "evictions", "bypassed"}
    assert cache["hits"] > 0, cache
    assert reports["off"]["input_cache"] == dict.fromkeys(cache, 0)
    without = {k: v for k, v in reports["on"].items() if k != "input_cache"}
    assert without == {k: v for k, v in reports["off"].items() if k != "input_cache"}
