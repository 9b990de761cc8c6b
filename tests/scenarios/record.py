#!/usr/bin/env python3
"""Records (or verifies) the kernel's answers to the routing scenarios.

    python3 tests/scenarios/record.py            # write NAME.expected.json for every scenario
    python3 tests/scenarios/record.py --verify   # compare the live kernel with the recordings
    python3 tests/scenarios/record.py fib_tests/down   # only these scenarios
    python3 tests/scenarios/record.py --mark-xfail target/release/fibre
        # no kernel needed: replay through fibre and set or clear each scenario's `# xfail:`
        # line (reason: fibre's first difference), so CI shows exactly the gap

Needs root and network namespaces (exit status 77 when they are missing).
"""

import argparse
import json
import sys

import scenario


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--verify", action="store_true", help="compare instead of writing")
    ap.add_argument("--mark-xfail", metavar="FIBRE", help="update the xfail marks from this fibre")
    ap.add_argument("names", nargs="*", help="scenario names (e.g. fib_tests/down); default all")
    a = ap.parse_args()
    if a.mark_xfail:
        return mark_xfail(a.mark_xfail, a.names)
    why = scenario.kernelns.available()
    if why:
        print(f"SKIP: {why}")
        return 77
    bad = 0
    for s in scenario.load_all():
        if a.names and s.name not in a.names:
            continue
        got = scenario.run_kernel(s)
        if a.verify:
            want = s.expected()
            diffs = ["not recorded"] if want is None else scenario.differences(want, got, "live kernel")
            print(f"{'OK  ' if not diffs else 'DIFF'} {s.name}")
            for d in diffs:
                print("     " + d)
            bad += bool(diffs)
        else:
            with open(s.expected_path, "w") as f:
                json.dump(scenario.recording(s, got), f, indent=1)
                f.write("\n")
            print(f"recorded {s.name}: {got['stdout'].count(chr(10))} lines, status {got['status']}")
    return 1 if bad else 0


def mark_xfail(fibre: str, names: list[str]) -> int:
    for s in scenario.load_all():
        if names and s.name not in names:
            continue
        want = s.expected()
        if want is None:
            print(f"unrecorded {s.name}")
            continue
        diffs = scenario.differences(want, scenario.run_fibre(fibre, s))
        reason = f"fibre differs: {diffs[0]}" if diffs else None
        lines = s.text.split("\n")
        if not lines[0].startswith("# fibre:"):
            print(f"{s.name}: the first line must be `# fibre: ...`")
            return 1
        lines[0] = "# fibre: " + (("xfail: " + reason.replace("\n", " ")[:300]) if reason else "pass")
        with open(s.path, "w") as f:
            f.write("\n".join(lines))
        print(f"{'xfail' if reason else 'pass '} {s.name}" + (f": {reason}" if reason else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
