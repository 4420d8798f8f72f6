"""``dataloader.torch.DataLoader``: our engine with torch's argument list and torch batches."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils.data as tud

from dataloader._datasets.base import is_iterable_dataset
from dataloader._engine.options import check_sampling_args
from dataloader._reduce import finish_init, reduce_loader, remember_init
from dataloader.loader import DataLoader as _NumpyLoader
from dataloader.torch import _worker_info
from dataloader.torch._draws import TorchDraws, TorchSamplerState, draw_seed
from dataloader.torch._epoch import TorchEpoch
from dataloader.torch._pin import PinnedCollate, pinning_available
from dataloader.torch._threads import limit_this_thread
from dataloader.torch.collate import default_collate, default_convert

__all__ = ["DataLoader"]


class DataLoader(_NumpyLoader, tud.DataLoader):
    """``torch.utils.data.DataLoader`` on our thread engine (a subclass of it); batches are tensors.

    The one-line swap: ``from dataloader.torch import DataLoader``.  Arguments mean what they
    mean in torch and in :class:`dataloader.DataLoader` (which documents the keyword-only
    extras ``prefetch_depth``, ``item_concurrency``, ``transform``, ``seed``, ``even_batches``,
    ``process_group``, ``on_error``, ``max_failures`` and ``event_loops``, passed on as they are; ``failures`` lists
    the items an error policy skipped or replaced).  torch's
    public attributes read as torch's do (``sampler`` and ``batch_sampler`` are torch's
    samplers, ``prefetch_factor`` is 2 with workers, ``worker_init_fn`` the user's), so a
    client that rebuilds a torch loader from them (Lightning, Accelerate, HF ``Trainer``)
    gets ours back with its own sampler.  Differences (docs/usage.md "Deviations from PyTorch"):

    * ``collate_fn=None`` uses :func:`dataloader.torch.default_collate` (torch's rules, torch
      tensors) or, with ``batch_size=None``, torch's ``default_convert``.
    * Randomness is torch's (``shuffle_order="torch"``, the default): each epoch draws its base
      seed from ``generator`` (torch's default generator when None) and ``shuffle=True`` uses
      torch's ``RandomSampler`` seeded as torch seeds it, so the sample order for one
      ``torch.manual_seed`` / ``torch.Generator`` state is torch's (``dataloader.torch._draws``).
      ``shuffle_order="feistel"``, ``seed=`` or a ``numpy.random.Generator`` use the library's
      constant-memory samplers instead (:class:`dataloader.DataLoader`'s order); with
      ``shuffle_order="feistel"`` and neither ``seed`` nor ``generator``, the loader's ``seed``
      is one int64 drawn from torch's default generator at construction, so
      ``torch.manual_seed`` makes that order reproducible too.
    * ``pin_memory=True`` pins each batch on its worker when CUDA is available, else it is a
      no-op; ``pin_memory_device`` is accepted (torch's deprecated argument).
    * ``multiprocessing_context`` is validated as torch does and otherwise ignored (workers are
      threads).
    * While an epoch with ``num_workers > 0`` is open, torch's ``get_worker_info()`` answers
      inside our worker threads (``dataloader.torch._worker_info``).
    * Each worker thread gets one intra-op thread before ``worker_init_fn``, as torch's
      worker processes do (that thread's OpenMP count only: torch's process-wide default, the
      main thread's pool and later threads' are unchanged).
    * Workers are threads: they share torch's one global RNG; ``torch.initial_seed()`` is
      the process's.  Seed per-worker generators from
      ``get_worker_info().seed`` or use ``dataloader.item_rng()``.
    * Pickling and ``copy.deepcopy`` rebuild the loader from its arguments, at the same seed
      and epoch counter (as :class:`dataloader.DataLoader`); torch's copy its attributes.

    Thread-safety: as :class:`dataloader.DataLoader`.

    Raises:
        ValueError, TypeError: invalid arguments (torch's messages where torch has one);
            ``shuffle_order`` other than ``"torch"`` / ``"feistel"``.
    """

    _auto_collation: bool = False  # a plain attribute here, not torch's read-only property

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Iterable[Any] | None = None,
        batch_sampler: Iterable[Any] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        shuffle_order: str = "torch",
        **extras: Any,
    ) -> None:
        _check_torch_args(shuffle_order, multiprocessing_context, num_workers)
        iterable = is_iterable_dataset(dataset)
        size, drop = check_sampling_args(
            iterable=iterable, shuffle=bool(shuffle), sampler=sampler, batch_sampler=batch_sampler,
            batch_size=batch_size, drop_last=drop_last,
        )
        torch_rng = _torch_rng(shuffle_order, generator, extras)
        # What a pickled copy is built from (with that seed: a copy draws nothing from torch).
        remember_init(self, DataLoader, locals())
        args = _torch_sampling(dataset, iterable, torch_rng, bool(shuffle), sampler, batch_sampler, size, drop, generator)
        if collate_fn is None:  # torch's defaults (torch tensors)
            collate_fn = default_collate if batch_sampler is not None or batch_size is not None else default_convert
        self.pin_memory_device = pin_memory_device
        self._epochs: weakref.WeakSet[TorchEpoch] = weakref.WeakSet()  # open epochs with workers
        self._epochs_lock = threading.Lock()
        self._started: TorchEpoch | None = None  # start()'s epoch with its bridge (under _epochs_lock)
        self._draws = TorchDraws(generator, args.own_generator) if torch_rng else None
        pinned = PinnedCollate(collate_fn, pin_memory_device) if pin_memory and pinning_available() else collate_fn
        super().__init__(
            dataset, args.batch_size, args.shuffle, args.sampler, args.batch_sampler, num_workers, pinned,
            bool(pin_memory), args.drop_last, timeout, _TorchWorkerInit(worker_init_fn),
            None if torch_rng else generator, prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers, in_order=in_order, **extras,
        )
        self._set_torch_attributes(args, size, drop, generator, collate_fn, prefetch_factor, multiprocessing_context)
        finish_init(self, DataLoader)

    def _set_torch_attributes(
        self, args: _Sampling, size: int | None, drop: bool, generator: Any, collate_fn: Any,
        prefetch_factor: int | None, multiprocessing_context: Any,
    ) -> None:
        """torch's attributes, as torch's ``__init__`` leaves them (the engine has its own copies)."""
        for name, value in (("batch_size", size), ("drop_last", drop), ("generator", generator),
                            ("collate_fn", collate_fn)):
            object.__setattr__(self, name, value)
        if args.shown_sampler is not None:
            object.__setattr__(self, "sampler", args.shown_sampler)
        if args.shown_batch_sampler is not None:
            object.__setattr__(self, "batch_sampler", args.shown_batch_sampler)
        self._auto_collation = self._engine.options.auto_collation  # what torch's _index_sampler reads
        workers = self.num_workers
        if prefetch_factor is None and isinstance(workers, int) and workers > 0:
            self.prefetch_factor = 2  # torch's default, read by clients that rebuild the loader
        if isinstance(workers, int):
            tud.DataLoader.multiprocessing_context.fset(self, multiprocessing_context)  # torch's checks
        else:
            object.__setattr__(self, "_DataLoader__multiprocessing_context", multiprocessing_context)

    def _sampler_state(self, source: Any) -> Any:
        """torch's sampler (no ``state_dict``) saved with torch's draws (``TorchSamplerState``)."""
        return TorchSamplerState(source, self._draws)

    def _epoch_seed(self) -> int:
        draws = self._draws
        if draws is None:
            return self.seed
        seed = draws.epoch_start()
        if draws.current is not None:  # the state begin() kept was taken before these draws
            self._engine.amend_start_state("draws", draws.current["draws"])
        return seed

    @property
    def worker_init_fn(self) -> Callable[[int], None] | None:
        """The user's ``worker_init_fn`` (None if none); assigning it applies from the next epoch
        (torch's rule), as Lightning's ``seed_everything(workers=True)`` does."""
        init = self.__dict__.get("_worker_init")
        return init.fn if init is not None else None

    @worker_init_fn.setter
    def worker_init_fn(self, fn: Any) -> None:
        if isinstance(fn, _TorchWorkerInit):  # the engine's wrapper, set by the base __init__
            self.__dict__["_worker_init"] = fn
            return
        if fn is not None and not callable(fn):
            raise TypeError(f"worker_init_fn must be callable or None, got {type(fn).__name__}")
        self.__dict__["_worker_init"].fn = fn

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle / copy as a new loader of the same arguments, with the ``worker_init_fn`` now
        set (``dataloader._reduce``)."""
        return reduce_loader(self, {"worker_init_fn": self.worker_init_fn})

    def __iter__(self) -> Any:
        """Start an epoch (or take the one ``start()`` started); with workers,
        ``torch.utils.data.get_worker_info()`` answers in them.

        The bridge is held until the epoch ends, is closed (also by ``close()`` or a new
        epoch closing it), or is garbage-collected.
        """
        if self.num_workers == 0:
            return super().__iter__()
        return self._bridged(super().__iter__)[1]

    def start(self) -> None:
        """As :meth:`dataloader.DataLoader.start`; with workers, torch's ``get_worker_info()``
        answers in them from now on (the bridge is held by the started epoch)."""
        if self.num_workers == 0:
            super().start()
            return
        self._bridged(lambda: self._engine.start(self, self._epoch_seed)[0], starting=True)

    def seek(self, epoch: int, batch: int = 0) -> None:
        """As :meth:`dataloader.DataLoader.seek`.  With torch's randomness (``shuffle_order=
        "torch"`` without ``seed``) each epoch draws from torch's generators, whose state for a
        later epoch depends on every draw before it: only the next epoch can be sought.

        Raises:
            ValueError: with torch's randomness, ``epoch`` is not the next epoch; as
                :meth:`dataloader.DataLoader.seek`.
        """
        if self._draws is not None:
            next_epoch = self._engine.upcoming()
            if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0 and epoch != next_epoch:
                raise ValueError(
                    f"seek(epoch={epoch}, ...): with torch's randomness (shuffle_order='torch') only the next "
                    f"epoch ({next_epoch}) can be sought; use shuffle_order='feistel' or seed= to seek any epoch"
                )
        super().seek(epoch, batch)

    def _bridged(self, begin: Callable[[], Any], starting: bool = False) -> tuple[Any, TorchEpoch]:
        """``begin()``'s epoch (``iter``, or ``start`` when ``starting``) with torch's
        worker-info bridge held from before its workers start: ``(the engine's epoch, its
        TorchEpoch)``; the started one is kept for the next ``iter``, which takes it once.
        Workers only (``num_workers=0`` never calls this)."""
        for old in self._open_epochs():
            old.release_if_closed()
        _worker_info.acquire()
        try:
            inner = begin()
        except BaseException:
            _worker_info.release()
            raise
        with self._epochs_lock:
            started, self._started = self._started, None
            if started is not None and started.engine_epoch is inner:  # start() twice, or iter() after start()
                _worker_info.release()  # the started epoch holds the bridge already
                epoch = started
            else:
                epoch = TorchEpoch(inner)
                self._epochs.add(epoch)
            if starting:
                self._started = epoch
            return inner, epoch

    def _open_epochs(self) -> list[TorchEpoch]:
        with self._epochs_lock:  # close() may run on another thread
            return list(self._epochs)

    def close(self) -> None:
        """As :meth:`dataloader.DataLoader.close`; also lets go of torch's worker-info bridge."""
        super().close()
        for epoch in self._open_epochs():
            epoch.close()


def _check_torch_args(shuffle_order: str, multiprocessing_context: Any, num_workers: Any) -> None:
    """``shuffle_order``'s values, and torch's rule for ``multiprocessing_context``.

    Raises:
        ValueError: ``shuffle_order`` other than ``"torch"``/``"feistel"``; a
            ``multiprocessing_context`` with ``num_workers=0`` (torch's message).
    """
    if shuffle_order not in ("torch", "feistel"):
        raise ValueError(f"shuffle_order must be 'torch' or 'feistel', got {shuffle_order!r}")
    if multiprocessing_context is not None and num_workers == 0:
        raise ValueError(
            "multiprocessing_context can only be used with multi-process loading "
            f"(num_workers > 0), but got num_workers={num_workers}"
        )


def _torch_rng(shuffle_order: str, generator: Any, extras: dict[str, Any]) -> bool:
    """Whether randomness is torch's (``shuffle_order="torch"``, no ``seed``, no NumPy
    generator).  The Feistel order without ``seed`` or ``generator`` gets a ``seed`` in
    ``extras``: one int64 from torch's default generator, so ``torch.manual_seed`` fixes it."""
    torch_rng = shuffle_order == "torch" and extras.get("seed") is None and (
        generator is None or isinstance(generator, torch.Generator)
    )
    if not torch_rng and generator is None and extras.get("seed") is None:
        extras["seed"] = draw_seed(None)
    return torch_rng


class _TorchWorkerInit:
    """Each worker thread first sets one intra-op thread for itself, as torch's workers do.

    Only the worker thread's own OpenMP count is set (``dataloader.torch._threads``):
    ``torch.set_num_threads(1)`` would also change torch's process-wide default, which the main
    thread (before its first torch op) and every later thread pick up.  Measured: 2 worker
    threads running torch ops were 1.5-1.8x faster than with the default pool
    (benchmarks/torch_intraop_threads.py).  The user's ``worker_init_fn`` runs after it and may
    set another size.
    """

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[int], None] | None) -> None:
        if fn is not None and not callable(fn):
            raise TypeError(f"worker_init_fn must be callable or None, got {type(fn).__name__}")
        self.fn = fn

    @property
    def per_thread_only(self) -> bool:
        """True without a user function: only the worker thread's own set-up, which batches
        built on the consumer thread need not run (``num_workers="auto"`` may build inline)."""
        return self.fn is None

    def __call__(self, worker_id: int) -> None:
        limit_this_thread(1)
        if self.fn is not None:
            self.fn(worker_id)


@dataclass
class _Sampling:
    """What the torch face gives the engine (``sampler`` ... ``shuffle``) and what it shows as
    torch's attributes (``shown_*``; None: the engine's own)."""

    sampler: Any
    batch_sampler: Any
    batch_size: int | None
    drop_last: bool
    shuffle: bool
    own_generator: Any = None
    shown_sampler: Any = None
    shown_batch_sampler: Any = None


def _torch_sampling(
    dataset: Any, iterable: bool, torch_rng: bool, shuffle: bool, sampler: Any, batch_sampler: Any,
    batch_size: int | None, drop_last: bool, generator: Any,
) -> _Sampling:
    """torch's default samplers (torch's randomness), and torch's ``BatchSampler`` over a sampler.

    Left to the engine (its own constant-memory samplers): the Feistel order
    (``torch_rng=False``) without a user sampler.
    """
    if iterable:  # torch shows an infinite constant sampler (and a BatchSampler over it)
        shown = tud.dataloader._InfiniteConstantSampler()
        shown_bs = tud.BatchSampler(shown, batch_size, drop_last) if batch_size is not None else None
        return _Sampling(None, None, batch_size, drop_last, False, None, shown, shown_bs)
    if batch_sampler is not None:
        return _Sampling(None, batch_sampler, 1, False, False, None, tud.SequentialSampler(dataset))
    own = None
    if sampler is None:
        if not torch_rng:
            return _Sampling(None, None, batch_size, drop_last, shuffle)
        if shuffle:
            own = torch.Generator() if generator is None else None
            sampler = tud.RandomSampler(dataset, generator=generator if generator is not None else own)
        else:
            sampler = tud.SequentialSampler(dataset)
    if batch_size is None:
        return _Sampling(sampler, None, None, False, False, own)
    batches = tud.BatchSampler(sampler, batch_size, drop_last)
    return _Sampling(None, batches, 1, False, False, own, sampler)
