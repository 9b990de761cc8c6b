"""FRR 8.4's zebra drives fibred over FPM (`dplane_fpm_nl`), in a network namespace: static
routes (single next hop, ECMP, blackhole, IPv6) through zebra's next-hop groups, changes made
through vtysh, zebra killed and restarted with fewer routes (fibred sweeps what the replay
left out), and fibred restarted on its state file (zebra reconnects and replays; what the
earlier run installed and zebra no longer has is swept). At every quiet point fibre's routes
equal the routes FRR reports installed (`show ip route json`). Skips without root or FRR."""

from __future__ import annotations

import json

import pytest

import lab
from record import CHANGES, STATICS, converged


@pytest.fixture
def frr_lab():
    why = lab.can_run() or lab.frr_missing()
    if why:
        pytest.skip(why)
    l = lab.Lab("frr")
    yield l
    l.close()


def test_zebra_drives_fibred_through_changes_and_restarts(frr_lab):
    l = frr_lab
    l.start_fibred()
    l.start_frr(STATICS)
    lab.wait_for("the first load", converged(l, 7), logs=l.logs)
    assert l.fpm_counters()["connection-errors"] == 0

    l.vtysh("configure terminal", *CHANGES)
    lab.wait_for("the changes", converged(l, 6), logs=l.logs)

    # zebra dies (it withdraws nothing) and comes back without two routes: the replay
    # leaves them out and fibred's sweep removes them once zebra is quiet.
    kept = [s for s in STATICS if "10.20.0.0" not in s and "203.0.113.0" not in s]
    l.kill_frr()
    l.start_frr(kept)
    lab.wait_for("the sweep after zebra's restart", converged(l, 5), logs=l.logs)

    # fibred restarts on its state file; zebra reconnects and replays.
    l.stop_fibred()
    l.start_fibred()
    assert len(l.fibre_routes()) == 5, "the state file keeps the feed's routes"
    lab.wait_for("zebra's replay into the restarted fibred", converged(l, 5), logs=l.logs)

    # ... and what the restored state holds that zebra no longer has is swept too: routes,
    # and every object of the earlier run (the replay gives zebra's groups new ids).
    def ids() -> list[int]:
        return [n["id"] for n in json.loads(l.fibre("-j", "nexthop", "show"))]

    l.kill_frr()
    before = ids()
    l.stop_fibred()
    l.start_fibred()
    l.start_frr([s for s in kept if "192.0.2.0" not in s])
    lab.wait_for("the sweep of the restored state", converged(l, 4), logs=l.logs)
    lab.wait_for("the sweep of the earlier run's objects", lambda: min(ids()) > max(before) or (before, ids()))
