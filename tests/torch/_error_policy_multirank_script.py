"""One rank of the error-policy multi-rank test, run by ``torchrun --standalone --nproc-per-node 2``.

Usage: ``python _error_policy_multirank_script.py OUT_DIR``.  Each rank iterates one epoch of
a dataset whose items ``i % 7 == 3`` always fail (more of them on one rank's shard than on the
other's), through ``dataloader.torch.DataLoader`` with ``on_error="replace"`` and a
``DistributedSampler``, rank 0 with ``num_workers=0`` and rank 1 with 2 workers; after each
batch the ranks ``all_reduce`` a step counter, as a training step's gradient all-reduce would
(a rank that ran short would hang it).  Rank 0 checks the batch counts and sizes of both ranks
and writes ``OUT_DIR/ok``; any failed check raises (a non-zero exit).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from dataloader.distributed import DistributedSampler
from dataloader.torch import DataLoader

N, BATCH = 90, 8


def bad(index):
    return index % 7 == 3 or (index > 45 and index % 5 == 0)


class Flaky(torch.utils.data.Dataset):
    def __len__(self):
        return N

    def __getitem__(self, index):
        if bad(index):
            raise OSError(f"corrupt item {index}")
        return torch.tensor(index)


def main(out_dir):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)  # the torch face's per-epoch seed (the substitutes) differs by rank
    ds = Flaky()
    sampler = DistributedSampler(ds, seed=5, shuffle=True)  # 13 failing items on rank 0, 7 on rank 1
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=0 if rank == 0 else 2,
                        on_error="replace", max_failures=0.5)
    sizes = []
    step = torch.zeros(1)
    for batch in loader:
        sizes.append(len(batch))
        assert not any(bad(int(i)) for i in batch), batch
        step += 1
        dist.all_reduce(step)  # every rank reaches it once per batch, or the run hangs
        step /= dist.get_world_size()
    mine = sum(bad(i) for i in sampler)  # the failing items of this rank's shard
    assert loader.stats.replaced == mine and loader.stats.skipped == 0, (loader.stats, mine)
    assert loader.stats.failed == len(loader.failures) >= mine
    everything = [None] * dist.get_world_size()
    dist.all_gather_object(everything, (sizes, mine))
    if rank == 0:
        (s0, m0), (s1, m1) = everything
        assert s0 == s1 == [BATCH] * (len(ds) // 2 // BATCH) + [len(ds) // 2 % BATCH], (s0, s1)
        assert m0 != m1, everything  # unequal failures, equal steps
        with open(os.path.join(out_dir, "ok"), "w") as f:
            f.write("ok\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
