"""``RankVote``: the ranks of a ``torch.distributed`` process group agree, one small collective per call.

``even_batches`` (``dataloader._engine.even``) keeps every rank at the same step: before
``next()`` returns a batch, each rank says what it has (``Flags``) and every rank reads the
same answer, the element-wise maximum over the ranks, from one ``all_reduce(MAX)`` of a
4-element int64 tensor (32 bytes).  That is the only traffic: no side channel, no thread;
the call blocks the consumer thread until every rank of the group has made its own.

torch is imported here, when a loader with ``even_batches`` starts an epoch: ``import
dataloader`` never loads it and torch is never a dependency.

Device: a NCCL group reduces CUDA tensors only, so there the flags go to the current CUDA
device and back (two 32-byte copies and a synchronisation per batch); any other backend
(gloo, the CPU one) reduces a CPU tensor that shares its memory with a NumPy array, so
writing and reading the flags costs no torch call.  To keep a NCCL job's vote on the CPU,
give the loader a gloo group: ``process_group=torch.distributed.new_group(backend="gloo")``.

Thread-safety: one vote at a time per object (the epoch's consumer thread, or ``close()``
when no ``next()`` runs); the collectives of one group must be issued in the same order on
every rank, which the epoch's protocol guarantees (``dataloader._engine.even``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = ["Flags", "RankVote"]


class Flags(NamedTuple):
    """What one rank says (0 or 1 each); the answer is each flag's maximum over the ranks.

    ``ended``: its stream (its first pass over the shard) has ended; ``has``: it holds a batch
    of its own shard for this step; ``empty``: its stream ended before its first batch (it
    cannot pad); ``quit``: it stops the epoch early (``close()`` before the end).
    """

    ended: int
    has: int
    empty: int
    quit: int


class RankVote:
    """One ``all_reduce(MAX)`` of ``Flags`` per ``vote`` over ``process_group``.

    Args:
        process_group: a ``torch.distributed`` process group, or None for the default group
            (``torch.distributed.init_process_group`` must have run).

    Attributes:
        world_size, rank: the group's size and this process's rank in it.

    Raises:
        RuntimeError: torch is not installed, or ``process_group`` is None and
            ``torch.distributed`` is not initialised.
    """

    def __init__(self, process_group: Any = None) -> None:
        try:  # lazy: torch is optional, and only this option needs it
            import torch
            import torch.distributed as dist
        except ImportError as exc:
            raise RuntimeError("even_batches needs torch.distributed (install torch), or use even_batches=None") from exc
        if process_group is None and not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "even_batches='drop'/'pad' agrees between ranks through torch.distributed: call "
                "torch.distributed.init_process_group() before iter(loader), give process_group=..., "
                "or use even_batches=None (a single process has nothing to agree with)"
            )
        self._dist = dist
        self._group = process_group
        self._op = dist.ReduceOp.MAX
        self.world_size = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        self._flags = np.zeros(len(Flags._fields), dtype=np.int64)
        self._cpu = torch.from_numpy(self._flags)  # shares the array's memory
        device = None
        if "nccl" in str(dist.get_backend(process_group)).lower():  # NCCL reduces CUDA tensors only
            device = torch.device("cuda", torch.cuda.current_device())
        self._device = device

    def vote(self, mine: Flags) -> Flags:
        """Say ``mine``; returns each flag's maximum over the group's ranks (the same on every rank).

        Blocks until every rank of the group has voted (the group's timeout applies).

        Raises:
            RuntimeError: what the collective raises (a rank left, the group's timeout).
        """
        self._flags[:] = mine
        if self._device is None:
            self._dist.all_reduce(self._cpu, op=self._op, group=self._group)
        else:
            on_device = self._cpu.to(self._device)
            self._dist.all_reduce(on_device, op=self._op, group=self._group)
            self._cpu.copy_(on_device)
        return Flags(*self._flags.tolist())
