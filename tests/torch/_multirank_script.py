"""One rank of the multi-rank test, run by ``torchrun --standalone --nproc-per-node 3``.

Usage: ``python _multirank_script.py PATH.ndf OUT_DIR PHASE`` with PHASE ``run`` (epochs 0
and 1 whole, then epoch 2 stopped after ``HEAD`` batches, its state saved per rank) or
``resume`` (each rank loads its saved state and finishes epoch 2).

Each rank reads the ``.ndf`` file (``y`` of row ``i`` is ``i``) through our ``DataLoader``
with 2 workers, once with a ``DistributedSampler`` and once with a ``ShardSampler`` (both
from ``WORLD_SIZE`` / ``RANK``), and ``all_gather``s the row ids it saw.  Rank 0 checks
them and writes ``OUT_DIR/PHASE.ok``; any failed check raises (a non-zero exit).
"""

from __future__ import annotations

import collections
import json
import os
import sys

import numpy as np
import torch.distributed as dist

from dataloader.distributed import DistributedSampler
from dataloader.loader import DataLoader
from dataloader.ndf import NdfDataset
from dataloader.shard import ShardSampler

SEED, BATCH, HEAD = 7, 4, 3


def make(kind, ds):
    sampler = DistributedSampler(ds, seed=SEED) if kind == "distributed" else ShardSampler(ds, seed=SEED)
    return DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=2)


def rows(batches):
    return [int(i) for _, y in batches for i in np.asarray(y).ravel()]


def epoch_rows(loader, epoch, limit=None):
    loader.sampler.set_epoch(epoch)
    out = []
    it = iter(loader)
    for batch in it:
        out.append(batch)
        if limit is not None and len(out) == limit:
            break
    it.close()
    return rows(out)


def gather(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def check_union(kind, per_rank, n, epoch):
    """Every row once per epoch; a DistributedSampler pads with the first rows of its order."""
    world = len(per_rank)
    counts = collections.Counter(i for r in per_rank for i in r)
    assert set(counts) == set(range(n)), (kind, epoch, "rows missing", sorted(set(range(n)) - set(counts)))
    if kind == "shard":
        assert all(c == 1 for c in counts.values()), (kind, epoch, "a row twice")
        return
    per = -(-n // world)
    assert all(len(r) == per for r in per_rank), (kind, epoch, [len(r) for r in per_rank])
    twice = sorted(i for i, c in counts.items() if c == 2)
    assert len(twice) == per * world - n and all(c <= 2 for c in counts.values()), (kind, epoch, twice)
    # PyTorch's padding: the global order is extended by its own first indices, rank r takes r::world.
    order = [None] * (per * world)
    for r, seen in enumerate(per_rank):
        order[r::world] = seen
    assert order[n:] == order[: per * world - n], (kind, epoch, "padding is not the order's head")
    assert sorted(order[:n]) == list(range(n)), (kind, epoch, "one permutation on every rank")


def main(path, out_dir, phase):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ds = NdfDataset(path)
    n = len(ds)
    for kind in ("distributed", "shard"):
        loader = make(kind, ds)
        state_path = os.path.join(out_dir, f"{kind}-{rank}.json")
        if phase == "run":
            orders = []
            for epoch in (0, 1):
                seen = gather(epoch_rows(loader, epoch))
                if rank == 0:
                    check_union(kind, seen, n, epoch)
                orders.append(seen)
            if rank == 0:
                assert orders[0] != orders[1], (kind, "epoch 1 repeats epoch 0's order")
            # Epoch 2, whole (the reference), then again stopped after HEAD batches, state saved.
            whole = epoch_rows(make(kind, ds), 2)
            head_loader = make(kind, ds)
            head = epoch_rows(head_loader, 2, HEAD)
            assert head == whole[: len(head)]
            with open(state_path, "w") as f:
                json.dump({"state": head_loader.state_dict(), "head": head, "whole": whole}, f)
        else:
            with open(state_path) as f:
                saved = json.load(f)
            loader.load_state_dict(saved["state"])
            it = iter(loader)  # the saved epoch (2) continues; no set_epoch needed
            rest = rows(list(it))
            assert saved["head"] + rest == saved["whole"], (kind, rank, "resumed epoch differs")
            seen = gather(saved["head"] + rest)
            if rank == 0:
                check_union(kind, seen, n, 2)
        dist.barrier()
    ds.close()
    if rank == 0:
        with open(os.path.join(out_dir, f"{phase}.ok"), "w") as f:
            f.write("ok\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:4])
