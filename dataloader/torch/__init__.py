"""``dataloader.torch``: the PyTorch face of the loader (imports torch; ``import dataloader`` does not).

``from dataloader.torch import DataLoader`` is the one-line swap for
``torch.utils.data.DataLoader``: the same thread engine as :class:`dataloader.DataLoader`,
torch's argument list, and batches collated by torch's rules into ``torch.Tensor`` s.

* :class:`DataLoader` — torch's signature; ``generator`` may be a ``torch.Generator``.
* :func:`default_collate` / :func:`default_convert` — torch's collation (tensors), with a
  zero-copy path for ``ArrayDataset`` / ``.ndf`` batches (``torch.from_numpy``).
* :func:`get_worker_info` — the calling worker thread's info (ours), or torch's / None.
  While an epoch with workers is open, ``torch.utils.data.get_worker_info()`` answers the
  same inside our threads (see ``dataloader/torch/_worker_info.py``).

* torch's samplers and ``random_split``, re-exported (``RandomSampler``, ``SequentialSampler``,
  ``SubsetRandomSampler``, ``WeightedRandomSampler``, ``BatchSampler``,
  ``DistributedSampler``, ``random_split``): the loader's ``shuffle=True`` uses torch's
  ``RandomSampler`` and draws as torch does, so one ``torch.manual_seed`` or
  ``torch.Generator`` state gives torch's sample order (``dataloader.torch._draws``); the
  library's constant-memory samplers stay in ``dataloader.sampler`` (``shuffle_order="feistel"``).

Every torch dataset (``Dataset``, ``IterableDataset``, ``TensorDataset``, ``Subset``,
``ConcatDataset``, ``StackDataset``) and sampler works as it is.
"""

from __future__ import annotations

from torch.utils.data import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
    random_split,
)

from dataloader._context import WorkerInfo, item_rng
from dataloader.torch._loader import DataLoader
from dataloader.torch._worker_info import get_worker_info
from dataloader.torch.collate import default_collate, default_convert

__all__ = [
    "BatchSampler",
    "DataLoader",
    "DistributedSampler",
    "RandomSampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "WorkerInfo",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "item_rng",
    "random_split",
]
assert sorted(__all__) == __all__, "keep __all__ sorted"
