"""CI instance of the differential test (see run.py): small enough for every CI run (< 1 min).

- the kernel against itself with every feature class: the harness is deterministic (100%);
- the comparator notices injected differences;
- fibre against the kernel for the classes of the `ci` set in features.json, which lists exactly
  what fibre agrees on today (the rest is reported as switched off).
Tests that need root and network namespaces skip with the reason.
"""

import json
import os
import subprocess
import sys

import pytest

import gen
import kernelns
import run

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run.py")
REPO = os.path.dirname(os.path.dirname(HERE))
# CI size: a few seeds, ~500 configuration commands and ~5k lookups in all.
SEEDS = "1-2"
ROUTES = 250
LOOKUPS = 2500


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, RUN, "-q", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def netns():
    why = kernelns.available()
    if why:
        pytest.skip(f"differential tests need network namespaces: {why}")


def test_kernel_agrees_with_itself(netns):
    p = _run("--seeds", SEEDS, "--routes", str(ROUTES), "--lookups", str(LOOKUPS),
             "--features", "kernel", "--against", "kernel")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "RESULT: PASS" in p.stdout and "lookups 0 " not in p.stdout


def test_comparator_catches_injected_differences(netns):
    p = _run("--seeds", "1", "--routes", "150", "--lookups", "800", "--features", "kernel",
             "--against", "kernel", "--inject", "6")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "DIFF " in p.stdout and "RESULT: FAIL" in p.stdout


def test_generator_is_deterministic():
    feats = gen.feature_set("all")
    a = gen.generate(7, 120, 300, feats)
    b = gen.generate(7, 120, 300, feats)
    assert [r.text for r in a] == [r.text for r in b]
    assert a[0].text != gen.generate(8, 120, 300, feats)[0].text
    assert a[0].text.startswith("link set lo up\n")


def test_fibre_agrees_with_kernel_on_ci_features(netns):
    feats = gen.feature_set("ci")
    off = sorted(set(gen.load_features()["classes"]) - feats)
    if not feats:
        pytest.skip("the 'ci' feature set in features.json is empty: fibre agrees with the kernel on no class yet")
    fibre = os.environ.get("FIBRE", os.path.join(REPO, "target", "release", "fibre"))
    if not os.access(fibre, os.X_OK):
        pytest.skip(f"no fibre binary at {fibre}")
    p = _run("--seeds", SEEDS, "--routes", str(ROUTES), "--lookups", str(LOOKUPS),
             "--features", "ci", "--fibre", fibre)
    print(f"classes off in CI: {', '.join(off)}")
    assert p.returncode == 0, p.stdout + p.stderr


MP_FILE = """link set lo up
link add d0 address 02:00:00:00:00:01 type dummy
link set d0 up
address add 10.0.0.1/24 dev d0
route add 10.9.0.0/16 nexthop via 10.0.0.2 weight 1 nexthop via 10.0.0.3 weight 1
route get 10.9.1.1
"""


def _with_gateway(side, old: str, new: str):
    return run.Side(side.name,
                    kernelns.Result(side.text.stdout.replace(old, new), side.text.stderr, side.text.status, 0.0),
                    kernelns.Result(side.json.stdout.replace(old, new), side.json.stderr, side.json.status, 0.0))


def test_multipath_choice_is_checked_against_the_route(netns):
    """A different but valid next hop of a multipath route is accepted; one that is not the
    route's is reported."""
    r = gen.Run("mp", [], MP_FILE)
    k = run.run_kernel(r, "mp.batch")
    chosen = json.loads(k.json.stdout.splitlines()[0])[0]["gateway"]
    other = "10.0.0.3" if chosen == "10.0.0.2" else "10.0.0.2"
    for gateway, accepted in ((other, True), ("10.0.0.4", False)):
        rep = run.Report()
        amb = run.compare(r, k, _with_gateway(k, f'"{chosen}"', f'"{gateway}"'), rep, 10, True)
        assert list(amb) == [6]
        run.resolve_multipath(r, amb, rep, 10, "fibre")
        assert rep.ok == accepted, rep.diffs
        assert rep.multipath_resolved == (1 if accepted else 0)


def test_ipv6_tree_leaves_agree_with_kernel(netns):
    """src6fuzz.py at CI size: source routes over a narrow IPv6 space, where the kernel's
    radix-tree leaves (borrowed, repaired, purged) decide which lookups see them."""
    fibre = os.environ.get("FIBRE", os.path.join(REPO, "target", "release", "fibre"))
    if not os.access(fibre, os.X_OK):
        pytest.skip(f"no fibre binary at {fibre}")
    p = subprocess.run([sys.executable, os.path.join(HERE, "src6fuzz.py"), "--seeds", "1-40", "--fibre", fibre],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
