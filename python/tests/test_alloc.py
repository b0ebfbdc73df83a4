"""gpurt.Device and gpurt.Allocator: PyTorch's caching allocator from Python, errors as gpurt.Error."""
import pytest

import gpurt

MiB = 1 << 20


@pytest.fixture
def alloc():
    with gpurt.Allocator(gpurt.Device("1GiB")) as a:
        yield a


def test_malloc_free_stats(alloc):
    p = alloc.malloc(3 * MiB)
    q = alloc.malloc("512K")
    s = alloc.stats()
    assert s["allocated_bytes.all.current"] == 3 * MiB + 512 * 1024
    assert s["reserved_bytes.all.current"] == 20 * MiB + 2 * MiB  # a 20 MiB large segment, a 2 MiB small one
    assert s["num_device_alloc"] == 2
    alloc.free(p)
    alloc.free(q)
    again = alloc.malloc(3 * MiB)
    assert again == p  # best fit hands the cached block back
    assert alloc.stats()["num_device_alloc"] == 2
    assert alloc.block_info(again) == (3 * MiB, 3 * MiB)
    alloc.check()
    snap = alloc.snapshot()
    assert sorted(seg["total_size"] for seg in snap["segments"]) == [2 * MiB, 20 * MiB]


def test_errors_change_nothing(alloc):
    p = alloc.malloc(MiB)
    alloc.free(p)
    before = alloc.stats()
    with pytest.raises(gpurt.DoubleFreeError) as e:
        alloc.free(p)
    assert e.value.status == "GRT_ERR_DOUBLE_FREE"
    with pytest.raises(gpurt.UnknownPointerError):
        alloc.free(0x1234)
    with pytest.raises(gpurt.InteriorPointerError):
        alloc.free(alloc.malloc(MiB) + 512)
    assert alloc.stats()["allocated_bytes.all.current"] == MiB
    with pytest.raises(gpurt.OutOfMemoryError) as oom:
        alloc.malloc("2GiB")
    assert "2.00 GiB" in str(oom.value) or "2147483648" in str(oom.value), str(oom.value)
    after = alloc.stats()
    # as PyTorch does, the failed malloc flushed the cache and retried before giving up
    assert after["num_ooms"] == before["num_ooms"] + 1
    assert after["num_alloc_retries"] == before["num_alloc_retries"] + 1
    assert after["allocated_bytes.all.current"] == MiB


def test_conf_and_policies():
    assert "caching" in gpurt.policies()
    dev = gpurt.Device("1GiB", model="paged")
    a = gpurt.Allocator(dev, conf="expandable_segments:True")
    a.malloc(3 * MiB)
    assert a.policy == "caching" and a.device is dev
    with pytest.raises(gpurt.ParseError) as e:
        gpurt.Allocator(dev, conf="bogus:1")
    assert "bogus" in str(e.value)
    with pytest.raises(gpurt.NotFoundError):
        gpurt.Allocator(dev, policy="nosuch")
    a.reset_peak_stats()
    a.empty_cache()
    a.close()
    with pytest.raises(gpurt.DestroyedError):
        a.malloc(1)
    with pytest.raises(gpurt.DestroyedError):
        a.empty_cache()


def test_sizes():
    assert gpurt.parse_size("24GiB") == 24 << 30
    assert gpurt.parse_size("512M") == 512 << 20
    assert gpurt.parse_size(1048576) == 1048576
    assert gpurt.parse_size("1.5K") == 1536
    for bad in ("lots", "-1G", 2 ** 64, True, 1.5):
        with pytest.raises(gpurt.InvalidArgError):
            gpurt.parse_size(bad)
    with pytest.raises(gpurt.InvalidArgError):
        gpurt.Device(0)
