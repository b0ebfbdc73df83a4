"""Replays release the GIL: a thread pool over snapshots gives what one thread gives."""
import copy

import gpurt
from conftest import MiB


def test_pool_equals_sequential(snapshot):
    snaps = []
    for k in range(8):
        s = copy.deepcopy(snapshot)
        s["device_traces"][0][2]["size"] = (k + 1) * MiB
        s["segments"][0]["blocks"][1].update(size=(k + 1) * MiB, requested_size=(k + 1) * MiB)
        snaps.append(s)
    alone = [gpurt.replay(s).peak_allocated for s in snaps]
    pooled = [r.peak_allocated for r in gpurt.map_snapshots(gpurt.replay, snaps, threads=4)]
    assert pooled == alone == [3 * MiB + (k + 1) * MiB for k in range(8)]
    doctors = list(gpurt.map_snapshots(gpurt.doctor, snaps, threads=4))
    assert [d["peak"]["allocated"] for d in doctors] == alone
