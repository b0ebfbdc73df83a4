"""gpurt.load: files, dicts and bytes give one trace; the dict path agrees with the file it would be dumped to."""
import pickle

import pytest

import gpurt
from conftest import MiB, cli_json, shared_snapshot, trusted_dict


def test_dict_replays_exactly(snapshot):
    t = gpurt.load(snapshot)
    assert t.name == "<dict>"
    assert t.info["format"] == "pytorch" and t.info["events"] == 5
    r = gpurt.replay(t)
    assert r.peak_reserved == 20 * MiB
    assert r.peak_allocated == 8 * MiB
    assert r.final_allocated == 5 * MiB
    assert r.ooms == 0 and r.first_oom is None
    f = gpurt.fidelity(t)
    assert (f["exact"], f["allocs"]) == (2, 2)
    assert f["final_layout_equal"]


def test_dict_equals_its_file_and_the_cli(snapshot, tmp_path):
    path = tmp_path / "built.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    from_dict, from_file = gpurt.replay(gpurt.load(snapshot)), gpurt.replay(str(path))
    cli = cli_json("replay", "--json", str(path))
    for key in ("events", "allocs", "frees", "capacity", "peak_reserved", "peak_allocated", "peak_requested",
                "peak_live", "final_reserved", "final_allocated", "device_mallocs", "device_frees", "syncs", "ooms",
                "min_capacity"):
        assert getattr(from_dict, key) == getattr(from_file, key) == cli[key], key
    assert from_dict.series(pandas=False)["reserved"] == cli["series"]["reserved"]


def test_bytes_and_paths(snapshot, tmp_path):
    data = pickle.dumps(snapshot)
    assert gpurt.load(data).info["events"] == 5
    path = tmp_path / "s.pickle"
    path.write_bytes(data)
    assert gpurt.load(path).info == gpurt.load(str(path)).info


def test_series_lists(snapshot):
    s = gpurt.replay(snapshot).series(pandas=False)
    assert s["reserved"] == [0] + [20 * MiB] * 4  # the first alloc makes the recorded segment
    assert s["allocated"] == [0, 3 * MiB, 8 * MiB, 8 * MiB, 5 * MiB]
    assert set(s) >= {"requested", "active", "cached", "largest_free", "live", "fragmentation"}


def test_missing_file():
    with pytest.raises(gpurt.IOError) as e:
        gpurt.load("/nonexistent/snap.pickle")
    assert e.value.status == "GRT_ERR_IO" and "/nonexistent/snap.pickle" in str(e.value)


def test_shared_snapshot_dict_matches_cli():
    path = shared_snapshot("MAGMA27_memory_snapshot.pickle")
    r = gpurt.replay(gpurt.load(trusted_dict(path)))
    cli = cli_json("replay", "--json", str(path))
    for key in ("events", "allocs", "frees", "unmatched_frees", "capacity", "peak_reserved", "peak_allocated",
                "peak_requested", "peak_active", "peak_live", "peak_cached", "peak_largest_free", "final_reserved",
                "final_allocated", "device_mallocs", "device_frees", "syncs", "ooms", "min_capacity"):
        assert getattr(r, key) == cli[key], key
    assert abs(r.max_fragmentation - cli["max_fragmentation"]) < 1e-6
    assert r.series(pandas=False)["largest_free"] == cli["series"]["largest_free"]


def test_shared_fidelity_is_exact():
    path = shared_snapshot("MAGMA27_memory_snapshot.pickle")
    f = gpurt.fidelity(gpurt.load(trusted_dict(path)))
    assert f["allocs"] > 1000 and f["exact"] == f["allocs"]


def test_gzip_file_equals_plain(snapshot, tmp_path):
    import gzip

    plain, packed = tmp_path / "s.pickle", tmp_path / "s.pickle.gz"
    plain.write_bytes(pickle.dumps(snapshot))
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert gpurt.replay(str(packed)).as_dict() | {"trace": ""} == gpurt.replay(str(plain)).as_dict() | {"trace": ""}


def test_replay_device_must_match_the_loaded_one(snapshot):
    t = gpurt.load(snapshot)
    assert gpurt.replay(t, device=0).events == 5
    with pytest.raises(gpurt.InvalidArgError) as e:
        gpurt.replay(t, device=1)
    assert "loaded for device 0" in str(e.value)
