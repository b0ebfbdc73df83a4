"""gpurt.doctor, whatif, diff and report answer as the gpurt command does."""
import pickle

import gpurt
from conftest import MiB, cli_json, shared_snapshot, trusted_dict


def test_doctor_built(snapshot):
    d = gpurt.doctor(snapshot)
    assert d["verdict"] == "healthy" and d["oom"] is None
    assert d["peak"]["allocated"] == 8 * MiB
    top = d["peak_sites"][0]
    assert top["frames"][0] == {"name": "forward", "filename": "/work/model.py", "line": 11}
    assert top["bytes"] == 5 * MiB
    assert {c["rule"] for c in d["contract"]} >= {"steady-state-mallocs", "empty-cache", "oom-retries"}


def test_doctor_and_whatif_equal_cli(snapshot, tmp_path):
    path = tmp_path / "built.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    assert gpurt.doctor(str(path)) == cli_json("doctor", "--json", str(path))
    assert gpurt.whatif(str(path), capacity="60MiB") == cli_json("whatif", "--json", "--capacity", "60M", str(path))


def test_shared_doctor_equals_cli():
    path = shared_snapshot("MAGMA27_memory_snapshot.pickle")
    d = gpurt.doctor(gpurt.load(path))
    assert d == cli_json("doctor", "--json", str(path))
    assert d["recommendation"] == "expandable_segments:True"
    user = [f for s in d["peak_sites"] for f in s["frames"] if f["filename"].endswith(".py")]
    assert user, "a user frame names the memory at the peak"


def test_shared_whatif_from_dict_equals_cli():
    path = shared_snapshot("MercuryB1_empty_cache_loop.pickle")
    w = gpurt.whatif(gpurt.load(trusted_dict(path)))
    cli = cli_json("whatif", "--json", str(path))
    assert w["rows"] == cli["rows"] and w["best"] == cli["best"] == "expandable_segments:True"
    assert w["snapshot"] == "<dict>" and cli["snapshot"] == path.name


def test_goal_and_capacity_errors(snapshot):
    import pytest

    with pytest.raises(gpurt.InvalidArgError):
        gpurt.whatif(snapshot, goal="fastest")
    with pytest.raises(gpurt.InvalidArgError):
        gpurt.whatif(snapshot, capacity="lots")


def test_diff(snapshot):
    after = pickle.loads(pickle.dumps(snapshot))
    for e in after["device_traces"][0]:
        if e["action"] == "alloc" and e["size"] == 5 * MiB:
            e["size"] = 6 * MiB
    blocks = after["segments"][0]["blocks"]
    blocks[1].update(size=6 * MiB, requested_size=6 * MiB)
    blocks[2].update(address=blocks[2]["address"] + MiB, size=11 * MiB)
    d = gpurt.diff(snapshot, after)
    assert d["figures"]["requested_peak"] == (8 * MiB, 9 * MiB)
    grown = d["sites"][0]
    assert grown["change"] == MiB and "model.py:11" in grown["site"]
    assert d["segments_only_a"] == d["segments_only_b"] == []


def test_report(snapshot, tmp_path):
    out = tmp_path / "page.html"
    assert gpurt.report(snapshot, out) == str(out)
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "gpurt report: &lt;dict&gt;" in page
    assert '"allocs":' in page
