"""The torch-compatibility suite: every test leaves torch's modules as it found them."""

from __future__ import annotations

import gc
import sys

import pytest


@pytest.fixture(autouse=True)
def torch_worker_info_is_restored():
    """After each test (and a collection), ``torch.utils.data.get_worker_info`` is torch's again."""
    bridge = sys.modules.get("dataloader.torch._worker_info")
    before = bridge is not None and bridge.installed()
    yield
    bridge = sys.modules.get("dataloader.torch._worker_info")
    if before or bridge is None or not bridge.installed():
        return
    gc.collect()
    assert not bridge.installed(), "an epoch of dataloader.torch.DataLoader was left open"
