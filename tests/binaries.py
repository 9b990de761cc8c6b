"""Where the Python tests find fibre's programs: beside $FIBRE (the `fibre` binary under test,
as scripts/test sets it), else in target/release."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def binary(name: str) -> str | None:
    """The path of the built program `name` (fibre, fibred), or None when it is not built."""
    fibre = os.environ.get("FIBRE")
    for d in ([os.path.dirname(fibre)] if fibre else []) + [os.path.join(ROOT, "target", "release")]:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None
