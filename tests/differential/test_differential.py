"""CI instance of the differential test (see run.py): small enough for every CI run (< 1 min).

- the kernel against itself with every feature class: the harness is deterministic (100%);
- the comparator notices injected differences;
- fibre against the kernel for the classes of the `ci` set in features.json, which lists exactly
  what fibre agrees on today (the rest is reported as switched off).
Tests that need root and network namespaces skip with the reason.
"""

import os
import subprocess
import sys

import pytest

import gen
import kernelns

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
