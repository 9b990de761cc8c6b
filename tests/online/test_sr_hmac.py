"""SRH HMAC keys through fibred (fibre's private key message, `fibre_proto::seg6_hmac`): the
scenario tests/scenarios/cli/sr_hmac.scn run against fibred answers as the kernel's recording
(stdout, stderr, status), its keys then listed to an administrator as set. The fibred fixture
is test_pyroute2.py's; skips like it does.
"""

from __future__ import annotations

import json
import os
import subprocess

from test_pyroute2 import binary, fibre, fibred  # noqa: F401  (fixture)

SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios", "cli")


def test_sr_hmac_through_fibred_answers_as_the_kernel(fibred):  # noqa: F811
    want = json.load(open(os.path.join(SCENARIOS, "sr_hmac.expected.json")))
    r = subprocess.run([binary("fibre"), "-n", fibred, "-force", "-batch", os.path.join(SCENARIOS, "sr_hmac.scn")],
                       capture_output=True, text=True)
    # The batch's name is the recording's: "Command failed NAME:LINE".
    stderr = r.stderr.replace(os.path.join(SCENARIOS, "sr_hmac.scn"), "sr_hmac.scn")
    assert (r.stdout, stderr, r.returncode) == (want["stdout"], want["stderr"], want["status"])
    # The scenario ends with no key; two set now are listed by id, secrets included.
    for key, algo, secret in ((9, "sha1", "abc"), (7, "sha256", "secret1")):
        p = subprocess.run([binary("fibre"), "-n", fibred, "sr", "hmac", "set", str(key), algo],
                           input=secret + "\n", capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    assert json.loads(fibre(fibred, "-j", "sr", "hmac", "show")) == [
        {"hmac": 7, "algo": "sha256", "secret": "secret1"},
        {"hmac": 9, "algo": "sha1", "secret": "abc"},
    ]
