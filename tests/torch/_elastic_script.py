"""One rank of the elastic-resume test, run by ``torchrun --standalone --nproc-per-node W``.

Usage: ``python _elastic_script.py OUT_DIR PHASE`` with PHASE:

- ``four`` (4 ranks): ranks 0 and 1 stop a 2-rank run (``num_replicas=2``) after ``K`` batches
  and save their states; every rank of the 4 resumes them (2 -> 4).  Then each of the 4 ranks
  stops its own epoch after ``K`` batches (``ShardSampler``: ``K + rank % 2``, ranks at
  different steps) and saves its state for the next phases;
- ``two`` / ``three`` (2 or 3 ranks): each rank resumes the 4 ranks' states (4 -> 2, 4 -> 3).

``DistributedSampler`` loaders resume from one state (old rank 0's: ranks in step),
``ShardSampler`` loaders from the list of all old states.  The row ids the new ranks see are
``all_gather``ed; rank 0 checks that the old ranks' rows and the new ranks' cover the epoch
exactly once (plus the padding ``DistributedSampler`` gives the remainder), each rank that its
next epoch is a fresh run's; rank 0 writes ``OUT_DIR/PHASE.ok``.  Any failed check raises.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import sys

import numpy as np
import torch.distributed as dist

from dataloader import ArrayDataset, DataLoader
from dataloader.distributed import DistributedSampler
from dataloader.shard import ShardSampler

N, SEED, BATCH, K, EPOCH = 101, 7, 4, 3, 1


def make(kind, ds, world=None, rank=None):
    """A loader as users build it: the sampler's world size and rank from WORLD_SIZE / RANK."""
    if kind == "distributed":
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, seed=SEED)
    else:
        sampler = ShardSampler(ds, num_shards=world, shard_id=rank, seed=SEED)
    return DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=2)


def run(loader, epoch, limit=None):
    loader.sampler.set_epoch(epoch)
    it = iter(loader)
    rows = [int(i) for (b,) in (it if limit is None else itertools.islice(it, limit)) for i in np.asarray(b)]
    state = json.loads(json.dumps(loader.state_dict()))
    it.close()
    return rows, state


def gather(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def check(kind, old, new):
    """Old ranks' rows + new ranks' rows = the epoch's rows once (+ the remainder's padding)."""
    seen = [i for rows in old for i in rows]
    counts = collections.Counter(seen + [i for rows in new for i in rows])
    assert set(counts) == set(range(N)), (kind, "rows missing", sorted(set(range(N)) - set(counts)))
    assert len(set(seen)) == len(seen), (kind, "an old rank's padding was consumed")
    remainder = N - len(seen)
    lengths = [len(rows) for rows in new]
    if kind == "shard":
        assert all(c == 1 for c in counts.values()), (kind, "a row twice")
        assert max(lengths) - min(lengths) <= 1, (kind, lengths)
    else:  # PyTorch's padding of the remainder: every new rank gets ceil(remainder / M)
        assert lengths == [-(-remainder // len(new))] * len(new), (kind, lengths)
        assert sum(counts.values()) - N == sum(lengths) - remainder and max(counts.values()) <= 2, kind


def resume(kind, ds, states, rank):
    """This rank's rows of the resumed epoch, after checking that the next epoch is fresh."""
    loader = make(kind, ds)
    loader.load_state_dict(states[0] if kind == "distributed" else states)
    rows, _ = run(loader, EPOCH)
    assert run(loader, EPOCH + 1)[0] == run(make(kind, ds), EPOCH + 1)[0], (kind, rank, "next epoch")
    loader.close()
    return rows


def load(out_dir, kind, world):
    saved = []
    for r in range(world):
        with open(os.path.join(out_dir, f"{kind}-{world}-{r}.json")) as f:
            saved.append(json.load(f))
    return [s["rows"] for s in saved], [s["state"] for s in saved]


def save(out_dir, kind, world, rank, rows, state):
    with open(os.path.join(out_dir, f"{kind}-{world}-{rank}.json"), "w") as f:
        json.dump({"rows": rows, "state": state}, f)


def main(out_dir, phase):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ds = ArrayDataset(np.arange(N))
    for kind in ("distributed", "shard"):
        if phase == "four":
            if rank < 2:  # a 2-rank run, stopped (ShardSampler: rank 1 a batch later)
                steps = K + (rank if kind == "shard" else 0)
                save(out_dir, kind, 2, rank, *run(make(kind, ds, 2, rank), EPOCH, steps))
            dist.barrier()
            old_rows, states = load(out_dir, kind, 2)
        else:
            old_rows, states = load(out_dir, kind, 4)
        new = gather(resume(kind, ds, states, rank))
        if rank == 0:
            check(kind, old_rows, new)
        if phase == "four":  # this 4-rank run's own states, for the 4 -> 2 and 4 -> 3 phases
            steps = K + (rank % 2 if kind == "shard" else 0)
            save(out_dir, kind, 4, rank, *run(make(kind, ds), EPOCH, steps))
        dist.barrier()
    if rank == 0:
        with open(os.path.join(out_dir, f"{phase}.ok"), "w") as f:
            f.write("ok\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:3])
