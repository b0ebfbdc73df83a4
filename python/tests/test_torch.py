"""gpurt.torch: the pluggable allocator, where PyTorch and a CUDA device are."""
import pytest

import gpurt
import gpurt.torch as gt


def test_use_allocator_or_unsupported():
    if not gt.available():
        with pytest.raises(gpurt.UnsupportedError):
            gt.use_allocator(conf="expandable_segments:True")
        pytest.skip("no PyTorch with CUDA here (or no libgpurt_torch_alloc.so): use_allocator refuses, as tested")
    import torch

    gt.use_allocator(conf="expandable_segments:False")
    x = torch.empty(1 << 20, device="cuda")
    assert x.numel() == 1 << 20
    assert gt.stats()
