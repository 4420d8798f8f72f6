"""``DataLoader``: PyTorch's API, thread workers, NumPy batches.

A loader combines a dataset, a sampler and a collate function, like
``torch.utils.data.DataLoader``; its workers are threads of one pool kept for
the loader's life.  Each ``iter(loader)`` is one epoch (see ``dataloader._engine``
for how an epoch runs, and ``docs/design.md``).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import numpy as np

from dataloader._constants import DEFAULT_PREFETCH_DEPTH, SHUTDOWN_JOIN_TIMEOUT_S
from dataloader._engine.epoch import Epoch
from dataloader._engine.iterator import EpochIterator
from dataloader._engine.options import LoaderOptions
from dataloader._engine.plan import EpochPlan, index_source
from dataloader._engine.handout import SharedPool
from dataloader._rng import check_seed
from dataloader.collate import default_collate, default_convert
from dataloader.dataset import IterableDataset
from dataloader.io.asyncds import check_dataset_kind
from dataloader.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)
_FIXED_AFTER_INIT = frozenset({"batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"})


class DataLoader(Generic[T_co]):
    """Iterate over a dataset in batches, with worker threads.

    Arguments and their rules are PyTorch's (``torch.utils.data.DataLoader``);
    the keyword-only ones after ``*`` are this library's.

    Args:
        dataset: a map-style dataset (``__getitem__``; ``__len__`` for the default
            samplers; optional batched ``__getitems__(indices)``) or an
            ``IterableDataset``.  ``__getitem__``/``__getitems__`` must be
            thread-safe when ``num_workers > 0`` or ``item_concurrency > 1``.
            An ``AsyncDataset`` (``async def __getitem__``, e.g. ``HttpDataset``)
            runs its coroutines on an event loop thread the loader owns
            (``dataloader-asyncio``, one per loader, stopped by ``close()``, which
            also awaits the dataset's ``aclose()``, at most 5 s).
        batch_size: items per batch (>= 1), or None to disable auto-batching (each
            sampler index yields one item passed through ``collate_fn``, by default
            ``default_convert``).
        shuffle: reshuffle every epoch (a ``RandomSampler`` seeded by ``seed``).
        sampler: an iterable of indices (mutually exclusive with ``shuffle``).
        batch_sampler: an iterable of lists of indices (mutually exclusive with
            ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last``).
        num_workers: worker threads; 0 builds every batch on the calling thread
            inside ``next()``.  Threads are created on the first epoch and kept.
        collate_fn: turns a list of items into a batch; default
            ``default_collate`` (NumPy arrays), or ``default_convert`` with
            ``batch_size=None``.
        pin_memory: accepted for compatibility; a no-op (there is no GPU transfer
            here: batches are NumPy arrays in ordinary memory).
        drop_last: drop the last batch if it is smaller than ``batch_size``.
        timeout: seconds ``next()`` waits for one batch from the workers before
            ``LoaderTimeoutError`` (a ``TimeoutError`` and a ``RuntimeError``, what
            torch raises); 0 waits without limit.  Like PyTorch, it has no
            effect with ``num_workers=0`` (the batch is built by ``next()`` itself).
        worker_init_fn: called as ``worker_init_fn(worker_id)`` on each worker
            thread at the start of every epoch, after ``get_worker_info()`` is set;
            with ``persistent_workers=True`` once per thread for the loader's life
            (tried again next epoch if it raised), and the worker keeps the seed of
            that epoch, as a torch worker process does.  Its exception is raised by
            ``next()`` for each batch that worker would have built.  For an
            ``IterableDataset`` each worker thread iterates its own shallow copy
            (``copy.copy``), which ``worker_init_fn`` may configure through
            ``get_worker_info().dataset``.
        generator: a ``numpy.random.Generator`` or a ``torch.Generator``; the loader
            draws its base seed from it once, at construction (from a
            ``torch.Generator`` as torch draws its base seed: one int64 ``random_``),
            mutually exclusive with ``seed``.
        prefetch_factor: PyTorch's batches in flight per worker: sets the window to
            ``num_workers * prefetch_factor`` batches; needs ``num_workers > 0``.
        persistent_workers: run ``worker_init_fn`` once per thread for the loader's
            life instead of every epoch (the threads are kept either way); needs
            ``num_workers > 0``.
        in_order: yield batches in epoch order (True) or as they complete.
        prefetch_depth: batches allowed beyond one per worker: at most
            ``num_workers + prefetch_depth`` batches are being built or wait.  Raise
            it when batch times vary a lot; each batch held costs its memory.
        item_concurrency: threads fetching the items of one batch (>= 1).  Useful
            when items wait on I/O or per-item work dominates; ``__getitems__`` is
            then not used.  For an ``AsyncDataset`` it is the item coroutines in
            flight per batch (no threads): at most ``max(num_workers, 1) *
            item_concurrency`` requests run at once.
        transform: ``transform(item) -> item``, run on the worker for every item
            before collation.  Random transforms should draw from
            ``dataloader.item_rng()`` so batches do not depend on scheduling.
        seed: base seed (int >= 0) for shuffling, worker seeds and ``item_rng``;
            epoch ``e``'s order is a pure function of ``(seed, e)``.  None draws one
            from the OS at construction.

    Thread-safety: epochs are independent (nested loops, ``zip(loader, loader)``
    and several threads each iterating the loader work, as in PyTorch): each
    ``iter(loader)`` takes the next epoch number atomically and its order is that
    epoch's.  The loader's threads serve one epoch at a time; an epoch started
    while another is open gets threads of its own.  Iterate each epoch from one
    thread (``next()`` from two threads at once raises ``RuntimeError``);
    ``close()`` may be called from any thread.  After ``os.fork()`` the child
    starts new threads for its epochs; an iterator started before the fork raises
    ``RuntimeError`` from ``next()`` in the child.

    Raises:
        ValueError, TypeError: for invalid arguments; the message names the value.
            Assigning ``batch_size``, ``sampler``, ``batch_sampler``, ``drop_last``,
            ``dataset`` or ``persistent_workers`` after construction raises
            ``ValueError``, as in PyTorch.

    Warns:
        UserWarning: ``num_workers`` exceeds the CPUs this process may use (PyTorch's
            warning; threads beyond the CPU count help only I/O-bound items).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = False,
        sampler: Sampler[Any] | Iterable[Any] | None = None,
        batch_sampler: Iterable[Any] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        in_order: bool = True,
        prefetch_depth: int = DEFAULT_PREFETCH_DEPTH,
        item_concurrency: int = 1,
        transform: Callable[[Any], Any] | None = None,
        seed: int | None = None,
    ) -> None:
        opts = LoaderOptions(
            batch_size=batch_size, shuffle=shuffle, num_workers=num_workers, pin_memory=pin_memory,
            drop_last=drop_last, timeout=timeout, prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers, in_order=in_order,
            prefetch_depth=prefetch_depth, item_concurrency=item_concurrency,
        )
        for name, fn in (("collate_fn", collate_fn), ("worker_init_fn", worker_init_fn), ("transform", transform)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable or None, got {type(fn).__name__}")
        self.dataset = dataset
        self._iterable = _is_iterable_dataset(dataset)
        self._async_loop: Any = None
        if check_dataset_kind(dataset):  # an AsyncDataset: coroutines on a loop of its own
            from dataloader._engine.async_loop import AsyncLoop  # lazy: asyncio only for async datasets

            self._async_loop = AsyncLoop(dataset)
            weakref.finalize(self, self._async_loop.stop_soon).atexit = False
        if not self._iterable and not hasattr(dataset, "__getitem__"):
            raise TypeError(
                f"dataset must be map-style (define __getitem__) or an IterableDataset, "
                f"got {type(dataset).__name__}"
            )
        self.num_workers = opts.num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = opts.pin_memory
        self.timeout = opts.timeout
        self.worker_init_fn = worker_init_fn
        self.persistent_workers = opts.persistent_workers
        self.in_order = opts.in_order
        self.prefetch_depth = opts.prefetch_depth
        self.item_concurrency = opts.item_concurrency
        self.transform = transform
        self.generator = generator
        self.seed = _base_seed(seed, generator)

        shuffle = bool(shuffle)
        if self._iterable:
            _check_iterable_options(shuffle, sampler, batch_sampler)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
            )

        self._own_sampler: RandomSampler | None = None
        if sampler is None and not self._iterable:
            if shuffle:
                sampler = self._own_sampler = RandomSampler(dataset, generator=self.seed)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None or (self._iterable and batch_size is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._plan = EpochPlan(
            dataset=dataset, iterable=self._iterable, num_workers=opts.num_workers, window=opts.window,
            timeout_s=float(opts.timeout), in_order=opts.in_order, batch_size=batch_size,
            drop_last=self.drop_last, auto_collation=self._auto_collation, collate_fn=collate_fn,
            transform=transform, worker_init_fn=worker_init_fn, persistent=opts.persistent_workers,
            item_concurrency=opts.item_concurrency, num_lanes=self._num_lanes(),
            indices=None if self._iterable else index_source(dataset, self._auto_collation, sampler, batch_sampler),
            async_loop=self._async_loop,
        )
        # Guards the epoch counter, the sampler's epoch and the pool hand-out; recreated in a
        # forked child (a thread of the parent may have held it at the fork).
        self._lock_pid = os.getpid()
        self._lock = threading.Lock()
        self._epoch = 0
        self._pools = SharedPool(self._plan, self)
        self._current: weakref.ref[Epoch] | None = None  # the open epoch on the shared pool
        self._initialized = True

    def __setattr__(self, name: str, value: Any) -> None:
        # PyTorch's rule: what fixed the batches cannot change after construction.
        if name in _FIXED_AFTER_INIT and self.__dict__.get("_initialized", False):
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    def _num_lanes(self) -> int:
        # Lanes fetch the items of one map-style batch (an IterableDataset has no item
        # indices); a batch never uses more than batch_size - 1 helpers.
        if self._async_loop is not None:
            return 0  # item_concurrency is coroutines on the event loop, not threads
        per_batch = self.item_concurrency
        if self.batch_size is not None:
            per_batch = min(per_batch, self.batch_size)
        return 0 if self._iterable else max(self.num_workers, 1) * (per_batch - 1)

    # -- length --------------------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch (exact; PyTorch's rules).

        Raises:
            TypeError: the sampler, batch sampler or IterableDataset has no ``__len__``.
        """
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
        indices: Any = self.batch_sampler if self._auto_collation else self.sampler
        return len(indices)

    # -- epochs ----------------------------------------------------------------------

    def _mutex(self) -> threading.Lock:
        if self._lock_pid != os.getpid():
            self._lock, self._lock_pid = threading.Lock(), os.getpid()
        return self._lock

    def __iter__(self) -> EpochIterator:
        """Start the next epoch and return its iterator.

        Epochs are independent, as in PyTorch: nested loops over one loader,
        ``zip(loader, loader)`` and several threads iterating it work; the epoch
        number, the sampler's epoch and the pool are taken atomically.  The loader's
        thread pool serves one epoch at a time; an epoch started while another is
        still open gets a pool of its own, shut down when that epoch closes.

        Raises:
            RuntimeError: worker threads could not be started.
        """
        try:
            length: int | None = len(self)
        except TypeError:
            length = None
        with self._mutex():
            epoch = self._epoch
            self._epoch += 1
            if self._own_sampler is not None:
                self._own_sampler.set_epoch(epoch)  # claimed by the sampler's iter() in start()
            pool, owned = self._pools.for_epoch()
            try:
                it = self._plan.start(
                    epoch_key=(self.seed, epoch), pool=pool, owns_pool=owned, length=length, keep_alive=self
                )
            except BaseException:
                if owned and pool is not None:
                    pool.shutdown()
                raise
            if isinstance(it, Epoch) and not owned:
                self._current = weakref.ref(it)
            return it

    def close(self) -> None:
        """End the current epoch and stop the worker threads.

        Waits for the epoch's batches in flight and then joins the threads, at most
        ``SHUTDOWN_JOIN_TIMEOUT_S`` (5 s) in all, in slices that run signal handlers
        (Ctrl-C works); returns at once when called from a worker thread (inside
        ``worker_init_fn`` or ``collate_fn``).  A later ``iter(loader)`` starts a new
        pool.  Also happens, without waiting, when the loader is garbage-collected.
        """
        deadline = time.monotonic() + SHUTDOWN_JOIN_TIMEOUT_S
        with self._mutex():
            current = self._current() if self._current is not None else None
            self._current = None
            pool = self._pools.take()
        if current is not None:
            current._close(wait_s=SHUTDOWN_JOIN_TIMEOUT_S)
        if pool is not None:
            pool.shutdown(join_s=max(0.0, deadline - time.monotonic()))
        if self._async_loop is not None:
            self._async_loop.close()  # awaits the dataset's aclose() (at most 5 s of its own)

    def __enter__(self) -> DataLoader[T_co]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"DataLoader(dataset={type(self.dataset).__name__}, batch_size={self.batch_size}, "
            f"num_workers={self.num_workers}, prefetch_depth={self.prefetch_depth}, "
            f"item_concurrency={self.item_concurrency})"
        )


def _check_iterable_options(shuffle: bool, sampler: Any, batch_sampler: Any) -> None:
    if shuffle:
        raise ValueError(
            f"DataLoader with IterableDataset: expected unspecified shuffle option, but got {shuffle=}"
        )
    if sampler is not None:
        raise ValueError(
            f"DataLoader with IterableDataset: expected unspecified sampler option, but got {sampler=}"
        )
    if batch_sampler is not None:
        raise ValueError(
            "DataLoader with IterableDataset: expected unspecified batch_sampler option, "
            f"but got {batch_sampler=}"
        )


def _is_iterable_dataset(dataset: Any) -> bool:
    """Ours or torch's ``IterableDataset`` (torch's only if torch is imported already)."""
    if isinstance(dataset, IterableDataset):
        return True
    tud = sys.modules.get("torch.utils.data")
    return tud is not None and isinstance(dataset, tud.IterableDataset)


def _base_seed(seed: int | None, generator: Any) -> int:
    if seed is not None and generator is not None:
        raise ValueError("pass either seed or generator, not both")
    if generator is not None:
        torch = sys.modules.get("torch")  # a torch.Generator exists only if torch is imported
        if torch is not None and isinstance(generator, torch.Generator):
            # torch's own draw of a loader's base seed: one int64 in [0, 2**63).
            return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())
        if not isinstance(generator, np.random.Generator):
            raise TypeError(
                "generator must be a numpy.random.Generator, a torch.Generator or None, "
                f"got {type(generator).__name__}"
            )
        return int(generator.integers(0, 2**63))
    if seed is not None:
        seed = check_seed(seed)
        if seed >= 2**63:
            raise ValueError(f"{seed=} must be < 2**63")
        return seed
    entropy: Any = np.random.SeedSequence().entropy
    return int(entropy) % 2**63
