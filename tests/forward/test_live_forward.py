"""The forwarding differential through fibred's real ports (fwdlive.py): config.batch given to
fibred over its socket, the input frames sent on veths at their capture times, and every frame
fibred sends compared byte for byte with the kernel's (live when namespaces are here, else
the recording), for each I/O kind. Needs root, network namespaces and built fibre and fibred;
skips with the reason otherwise.
"""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "differential"))
import fwdcompare  # noqa: E402
import fwdkernel  # noqa: E402
import fwdlive  # noqa: E402
import kernelns  # noqa: E402


def test_translation_binds_ports_and_leaves_address_and_mtu_to_the_host():
    config = ("link add c0 type dummy\nlink set c0 address 02:00:00:00:00:0c\n"
              "link set c0 arp on\nlink set c0 mtu 1280 up\naddr add 10.2.0.1/24 dev c0\n")
    text, host = fwdlive.translate(config, "af_xdp")
    assert text == ("link add c0 type port dev rc0 io af_xdp\nlink set c0 arp on\n"
                    "link set c0 up\naddr add 10.2.0.1/24 dev c0\n")
    assert host == {"c0": {"address": "02:00:00:00:00:0c", "mtu": "1280"}}


@pytest.mark.parametrize("kind", fwdlive.KINDS)
def test_fibred_sends_what_the_kernel_sends(kind):
    why = kernelns.available()
    if why:
        pytest.skip(f"fibred over ports {why}")
    found = fwdlive.binaries()
    if isinstance(found, str):
        pytest.skip(found)
    with tempfile.TemporaryDirectory(prefix=f"fibre-fwdlive-{kind}-") as out:
        fwdlive.run(out, kind)
        report = fwdcompare.compare(fwdkernel.RECORDING, out, HERE, who=f"fibred {kind}")
    assert report.all_agree(), report.summary()
