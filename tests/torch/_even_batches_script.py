"""One rank of the ``even_batches`` test, run by ``torchrun --standalone --nproc-per-node N``.

Usage: ``python _even_batches_script.py OUT_DIR``.  Rank ``r`` streams its own skewed shard
(``SIZES[world][r]`` rows, ids ``1_000_000 * r + i``) through a loader with
``even_batches``, and ``all_gather``s what each epoch gave:

- ``"drop"`` and ``"pad"``, with 0 and 2 workers (``dataloader.DataLoader``) and once
  through ``dataloader.torch.DataLoader`` (the option forwarded): equal batch counts on every
  rank; ``"drop"`` gives every yielded row exactly once and each rank its stream's first
  batches; ``"pad"`` as many batches as the longest stream;
- a rank that ``close()``s after 2 steps ends the epoch on the others;
- the epoch repeated ``REPEATS`` times in one launch (``"drop"`` and ``"pad"`` alternating,
  2 workers): no hang, equal counts every time.

Every rank checks what it can; rank 0 checks the gathered rows and writes ``OUT_DIR/ok``.  The
process group's own timeout (60 s) turns a hang into an error.
"""

from __future__ import annotations

import datetime
import os
import sys

import numpy as np
import torch.distributed as dist

from dataloader import DataLoader, IterableDataset, get_worker_info

SIZES = {2: [10, 1000], 4: [10, 100, 1000, 100]}
BATCH, REPEATS = 8, 20


class Shard(IterableDataset):
    """Rows ``base .. base + n - 1``, split between worker threads (worker ``w`` of ``k``
    yields every ``k``-th row from ``w``)."""

    def __init__(self, base: int, n: int) -> None:
        self.base, self.n = base, n

    def __iter__(self):
        info = get_worker_info()
        w, k = (info.id, info.num_workers) if info is not None else (0, 1)
        return iter(range(self.base + w, self.base + self.n, k))


def batches(loader):
    return [[int(v) for v in np.asarray(b).ravel()] for b in loader]


def gather(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def alone(shard, workers):
    with DataLoader(shard, batch_size=BATCH, num_workers=workers) as loader:
        return batches(loader)


def check_epoch(mode, got, own, seen):
    """``got``: this rank's batches; ``own``: its stream alone; ``seen``: every rank's ``got``."""
    counts = [len(s) for s in seen]
    assert len(set(counts)) == 1, (mode, "unequal batch counts", counts)
    if mode == "drop":
        assert got == own[: len(got)], (mode, "not the stream's first batches")
        flat = [v for s in seen for b in s for v in b]
        assert len(flat) == len(set(flat)), (mode, "a row yielded twice")
    else:
        assert got == (own * counts[0])[: counts[0]], (mode, "padding is not the stream from its start")


def all_modes(shard, rank):
    for mode in ("drop", "pad"):
        for workers in (0, 2):
            own = alone(shard, workers)
            with DataLoader(shard, batch_size=BATCH, num_workers=workers, even_batches=mode) as loader:
                got = batches(loader)
            seen = gather(got)
            check_epoch(mode, got, own, seen)
            lengths = gather(len(own))
            assert len(got) == (min(lengths) if mode == "drop" else max(lengths)), (mode, workers, len(got))


def torch_face(shard):
    from dataloader.torch import DataLoader as TorchLoader

    loader = TorchLoader(shard, batch_size=BATCH, num_workers=2, even_batches="pad")
    assert loader.even_batches == "pad"
    got = batches(loader)
    loader.close()
    counts = [len(s) for s in gather(got)]
    assert len(set(counts)) == 1, ("torch face", counts)


def early_close(shard, rank):
    with DataLoader(shard, batch_size=BATCH, num_workers=2, even_batches="pad") as loader:
        it = iter(loader)
        got = []
        for b in it:
            got.append(b)
            if rank == 0 and len(got) == 2:
                it.close()  # the others stop at their next step
        counts = gather(len(got))
        assert counts == [2] * len(counts), ("early close", counts)


def repeated(shard):
    with DataLoader(shard, batch_size=BATCH, num_workers=2, even_batches="drop") as drop, \
         DataLoader(shard, batch_size=BATCH, num_workers=2, even_batches="pad") as pad:
        for epoch in range(REPEATS):
            got = sum(1 for _ in (drop if epoch % 2 == 0 else pad))
            counts = gather(got)
            assert len(set(counts)) == 1, ("repeat", epoch, counts)


def main(out_dir):
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = Shard(1_000_000 * rank, SIZES[world][rank])
    all_modes(shard, rank)
    torch_face(shard)
    early_close(shard, rank)
    repeated(shard)
    dist.barrier()
    if rank == 0:
        with open(os.path.join(out_dir, "ok"), "w") as f:
            f.write(f"ok {world}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
