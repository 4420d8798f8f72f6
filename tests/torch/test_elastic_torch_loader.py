"""Elastic resume with ``dataloader.torch.DataLoader``: our samplers inside torch's ``BatchSampler``.

The torch face keeps its sampler state in torch's format (``dataloader.torch._draws``); a
state saved by 4 ranks resumes on 3 with every row of the epoch once (plus the remainder's
``DistributedSampler`` padding), and torch's own ``DistributedSampler`` (``torch.randperm``
order) is refused at load, saying why.  Skipped without torch (3.13t).
"""

from __future__ import annotations

import collections
import json

import pytest

pytest.importorskip("torch")

import torch.utils.data as tud  # noqa: E402

from dataloader.distributed import DistributedSampler  # noqa: E402
from dataloader.shard import ShardSampler  # noqa: E402
from dataloader.torch import DataLoader  # noqa: E402

pytestmark = pytest.mark.timeout(60)
ROWS = list(range(41))


def loader(kind, world, rank, workers=0):
    if kind == "shard":
        sampler = ShardSampler(ROWS, num_shards=world, shard_id=rank, seed=2)
    else:
        sampler = DistributedSampler(ROWS, num_replicas=world, rank=rank, seed=2)
    return DataLoader(ROWS, batch_size=3, sampler=sampler, num_workers=workers)


@pytest.mark.parametrize("kind", ["distributed", "shard"])
def test_a_torch_face_state_of_4_ranks_resumes_on_3_every_row_once(kind):
    seen, states = [], []
    for rank in range(4):
        lo = loader(kind, 4, rank, workers=2)
        it = iter(lo)
        seen += [int(i) for _ in range(2 + rank % 2) for i in next(it)]  # ranks at different steps
        states.append(json.loads(json.dumps(lo.state_dict())))
        it.close()
    assert [s["elastic"]["consumed"] for s in states] == [6, 9, 6, 9]
    new, total = [], 0
    for rank in range(3):
        lo = loader(kind, 3, rank)
        lo.load_state_dict(states)
        total += len(lo.sampler)
        new += [int(i) for batch in lo for i in batch]
    counts = collections.Counter(seen + new)
    assert set(counts) == set(ROWS)
    assert sum(counts.values()) - len(ROWS) == total - (len(ROWS) - len(seen))  # the remainder's padding
    if kind == "shard":
        assert max(counts.values()) == 1


def test_torchs_own_distributed_sampler_is_refused_saying_why():
    def make(world):
        return DataLoader(ROWS, batch_size=3, sampler=tud.DistributedSampler(ROWS, num_replicas=world, rank=0, seed=2))

    lo = make(4)
    it = iter(lo)
    next(it)
    sd = lo.state_dict()
    it.close()
    assert sd["elastic"] is None
    with pytest.raises(ValueError, match="world_size=4; this loader has world_size=2, and it cannot be resumed "
                       "elastically: its sampler is torch.utils.data.distributed.DistributedSampler"):
        make(2).load_state_dict(sd)
