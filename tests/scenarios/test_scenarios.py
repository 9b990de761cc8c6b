"""Replays the kernel's routing scenarios (NAME.scn) through `fibre -batch` and compares stdout,
stderr and exit status with the kernel's recorded answer (NAME.expected.json). Needs no root.

Scenarios marked `# xfail: REASON` are expected to fail, strictly: when fibre starts passing
one, the test fails until the mark is removed, so a fix is noticed. With root and the kernel
release the recordings were made on, the recordings are also checked against the live kernel.
"""

import os
import platform

import pytest

import scenario

REPO = os.path.dirname(os.path.dirname(scenario.HERE))
FIBRE = os.environ.get("FIBRE", os.path.join(REPO, "target", "release", "fibre"))
SCENARIOS = scenario.load_all()


def _params():
    out = []
    for s in SCENARIOS:
        hint = (" -- passing now? run: python3 tests/scenarios/record.py --mark-xfail "
                "target/release/fibre")
        marks = [pytest.mark.xfail(reason=s.xfail + hint, strict=True)] if s.xfail else []
        out.append(pytest.param(s, id=s.name, marks=marks))
    return out


@pytest.mark.parametrize("s", _params())
def test_fibre_matches_kernel(s):
    want = s.expected()
    assert want is not None, f"{s.name} has no recording: run tests/scenarios/record.py {s.name}"
    if not os.access(FIBRE, os.X_OK):
        pytest.skip(f"no fibre binary at {FIBRE}")
    got = scenario.run_fibre(FIBRE, s)
    diffs = scenario.differences(want, got)
    assert not diffs, f"{s.name}: fibre differs from the kernel:\n  " + "\n  ".join(diffs)


@pytest.mark.parametrize("s", [pytest.param(s, id=s.name) for s in SCENARIOS])
def test_recording_matches_live_kernel(s):
    why = scenario.kernelns.available()
    if why:
        pytest.skip(f"re-checking the recordings {why}")
    want = s.expected()
    if want is None:
        pytest.skip("not recorded")
    recorded_on = want["recorded_with"]["kernel"]
    if recorded_on != platform.release():
        pytest.skip(f"recorded on kernel {recorded_on}, this is {platform.release()}")
    diffs = scenario.differences(want, scenario.run_kernel(s), "live kernel")
    assert not diffs, f"{s.name}: the live kernel no longer answers as recorded:\n  " + "\n  ".join(diffs)
