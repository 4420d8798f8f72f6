"""A loader's arguments, validated and resolved once (PyTorch's rules and messages).

``resolve(dataset, batch_size=..., ...)`` is the one call both faces make: it checks every
argument, resolves ``"auto"``, draws the base seed, picks the default sampler, batch sampler
and collate function, and returns them frozen as ``EngineOptions`` (what ``Engine`` is built
from and what the loader shows as its attributes).  ``LoaderOptions`` checks the scalars.
"""

from __future__ import annotations

import numbers
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dataloader._constants import DEFAULT_PREFETCH_DEPTH, MAX_BATCH_SIZE, MAX_ITEM_CONCURRENCY, MAX_NUM_WORKERS, MAX_WINDOW_BATCHES
from dataloader._datasets.base import is_iterable_dataset
from dataloader._datasets.kind import check_dataset_kind
from dataloader._collation.default import default_collate, default_convert
from dataloader._engine.autotune import AutoTuner, resolve_auto
from dataloader._engine.error_policy import ErrorPolicy, error_policy
from dataloader._engine.stream_policy import accepts_failure_sink
from dataloader._engine.even import EVEN_MODES
from dataloader._engine.event_loops import resolve_event_loops
from dataloader._engine.plan import index_sources
from dataloader._engine.seed import base_seed
from dataloader._sampling.batch import BatchSampler
from dataloader._sampling.samplers import RandomSampler, SequentialSampler
from dataloader._validate import check_int

__all__ = ["EngineOptions", "LoaderOptions", "check_even_batches", "check_sampling_args", "resolve", "warn_many_workers"]


def _bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return value


@dataclass(slots=True, frozen=True)
class LoaderOptions:
    """The loader's scalar settings, validated in ``__post_init__``; ``window`` is
    computed there, once: ``num_workers * prefetch_factor`` when ``prefetch_factor``
    is given (torch's bound), else ``num_workers + prefetch_depth`` (0 without workers).

    Raises:
        TypeError: a value has the wrong type (``bool`` is not accepted as an int).
        ValueError: a value is out of range, or options conflict (PyTorch's rules).
    """

    batch_size: int | None
    shuffle: bool | None
    num_workers: int
    pin_memory: bool
    drop_last: bool
    timeout: float
    prefetch_factor: int | None
    persistent_workers: bool
    in_order: bool
    prefetch_depth: int
    item_concurrency: int
    window: int = field(init=False)

    def __post_init__(self) -> None:
        if isinstance(self.num_workers, numbers.Integral) and not isinstance(self.num_workers, bool):
            if self.num_workers < 0:
                raise ValueError(
                    f"num_workers option should be non-negative; use num_workers=0 to disable "
                    f"worker threads (got num_workers={self.num_workers})"
                )
        check_int(self.num_workers, "num_workers", minimum=0, maximum=MAX_NUM_WORKERS)
        if self.batch_size is not None:
            check_int(self.batch_size, "batch_size", minimum=1, maximum=MAX_BATCH_SIZE)
        # shuffle and drop_last are taken by truth value, as torch does (its conflict checks
        # and BatchSampler's "drop_last should be a boolean value" come later, in the loader).
        _bool("pin_memory", self.pin_memory)
        _bool("persistent_workers", self.persistent_workers)
        _bool("in_order", self.in_order)
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, numbers.Real):
            raise TypeError(f"timeout must be a number of seconds, got {type(self.timeout).__name__}")
        if not self.timeout >= 0:
            raise ValueError(f"timeout option should be non-negative, got timeout={self.timeout}")
        check_int(self.prefetch_depth, "prefetch_depth", minimum=0, maximum=MAX_WINDOW_BATCHES)
        check_int(self.item_concurrency, "item_concurrency", minimum=1, maximum=MAX_ITEM_CONCURRENCY)
        if self.prefetch_factor is not None:
            if self.num_workers == 0:
                raise ValueError(
                    "prefetch_factor option could only be specified with worker threads: let "
                    f"num_workers > 0 to enable them, otherwise set prefetch_factor to None "
                    f"(got prefetch_factor={self.prefetch_factor})"
                )
            check_int(self.prefetch_factor, "prefetch_factor", minimum=1, maximum=MAX_WINDOW_BATCHES)
        window = (
            self.num_workers * self.prefetch_factor
            if self.prefetch_factor is not None
            else self.num_workers + self.prefetch_depth
        )
        if window > MAX_WINDOW_BATCHES:
            raise ValueError(
                f"num_workers={self.num_workers} with prefetch_depth={self.prefetch_depth} / "
                f"prefetch_factor={self.prefetch_factor} gives {window} batches in flight; "
                f"the most is {MAX_WINDOW_BATCHES}"
            )
        object.__setattr__(self, "window", window if self.num_workers > 0 else 0)
        if self.persistent_workers and self.num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        warn_many_workers(self.num_workers)


def warn_many_workers(num_workers: int) -> None:
    """PyTorch's warning when ``num_workers`` exceeds the CPUs this process may use.

    The CPU count respects the affinity mask (``os.sched_getaffinity``) where the OS
    has one, as ``torch._utils.cpu_count`` does.
    """
    if num_workers == 0:
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cpus is not None and num_workers <= cpus:
        return
    warnings.warn(
        f"This DataLoader will create {num_workers} worker threads in total. Our suggested max "
        f"number of worker in current system is {cpus}, which is smaller than what this "
        "DataLoader is going to create. Please be aware that excessive worker creation might get "
        "DataLoader running slow or even freeze, lower the worker number to avoid potential "
        "slowness/freeze if necessary. (Threads beyond the CPU count help only items that wait "
        "on I/O.)",
        UserWarning,
        stacklevel=7,  # the line that built the loader (resolve <- Engine <- DataLoader.__init__)
    )


def check_sampling_args(
    *, iterable: bool, shuffle: bool, sampler: Any, batch_sampler: Any, batch_size: int | None, drop_last: bool
) -> tuple[int | None, bool]:
    """PyTorch's rules for combining the sampling arguments; the effective
    ``(batch_size, drop_last)`` (a ``batch_sampler`` replaces both).

    Raises:
        ValueError: a combination PyTorch refuses, with PyTorch's message.
    """
    if iterable:
        for name, value in (("shuffle", shuffle or None), ("sampler", sampler), ("batch_sampler", batch_sampler)):
            if value is not None:
                shown = shuffle if name == "shuffle" else value
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified {name} option, "
                    f"but got {name}={shown!r}"
                )
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise ValueError(
                "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
            )
        return None, False
    if batch_size is None and drop_last:
        raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
    return batch_size, drop_last


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """A loader's arguments after ``resolve``: what ``Engine`` is built from.

    The first group reads as the loader's public attributes (``public()``): ``num_workers``
    as given (``"auto"`` stays ``"auto"``), ``prefetch_depth`` resolved, ``seed`` the base
    seed drawn, ``batch_size``/``drop_last`` the effective ones (a ``batch_sampler``
    replaces both), ``sampler``/``batch_sampler``/``collate_fn`` the defaults when not given.
    The rest is the engine's: ``iterable`` (an ``IterableDataset``), ``is_async`` (an
    ``AsyncDataset``), ``policy`` (``on_error``'s ``ErrorPolicy``, None for ``"raise"``),
    ``pool_workers`` (threads: ``"auto"``'s cap), ``window`` (batches
    in flight), ``tuner`` (``"auto"``), ``own_sampler`` (the loader's ``RandomSampler``,
    reseeded each epoch), ``auto_collation``, and ``index_sources`` (``plan.index_sources``).
    ``even_batches`` (None, ``"drop"``, ``"pad"``), ``process_group`` and ``event_loops`` (as
    given: ``"auto"`` stays ``"auto"``) are public too; ``loop_count`` is the number of event
    loops resolved (``event_loops``; 1 for a dataset that is not an ``AsyncDataset``).
    """

    dataset: Any
    num_workers: int | str
    prefetch_factor: int | None
    pin_memory: bool
    timeout: float
    worker_init_fn: Callable[[int], None] | None
    persistent_workers: bool
    in_order: bool
    prefetch_depth: int
    item_concurrency: int
    transform: Callable[[Any], Any] | None
    on_error: str
    max_failures: int | float | None
    generator: Any
    seed: int
    batch_size: int | None
    drop_last: bool
    sampler: Any
    batch_sampler: Any
    collate_fn: Callable[[Any], Any]
    iterable: bool
    is_async: bool
    policy: ErrorPolicy | None
    pool_workers: int
    window: int
    tuner: AutoTuner | None
    own_sampler: RandomSampler | None
    auto_collation: bool
    index_sources: dict[str, Any]
    even_batches: str | None = None
    process_group: Any = None
    event_loops: int | str = 1
    loop_count: int = 1

    def public(self) -> dict[str, Any]:
        """The loader's public attributes, by name (``DataLoader`` sets each; ``seed`` is the
        engine's, which changes with ``load_state_dict``)."""
        return {name: getattr(self, name) for name in _PUBLIC}

    @property
    def work_items(self) -> Any:
        """What yields an epoch's work items: the batch sampler, the sampler with
        ``batch_size=None``, or None for an ``IterableDataset``."""
        if self.iterable:
            return None
        return self.batch_sampler if self.auto_collation else self.sampler


_PUBLIC = (
    "dataset", "num_workers", "prefetch_factor", "pin_memory", "timeout", "worker_init_fn", "persistent_workers",
    "in_order", "prefetch_depth", "item_concurrency", "transform", "on_error", "max_failures", "generator",
    "batch_size", "drop_last", "sampler", "batch_sampler", "collate_fn", "even_batches", "process_group",
    "event_loops",
)


def resolve(
    dataset: Any, *, batch_size: int | None = 1, shuffle: bool | None = False, sampler: Any = None,
    batch_sampler: Any = None, num_workers: int | str = 0, collate_fn: Callable[[Any], Any] | None = None,
    pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
    worker_init_fn: Callable[[int], None] | None = None, generator: Any = None, prefetch_factor: int | None = None,
    persistent_workers: bool = False, in_order: bool = True, prefetch_depth: int | str = DEFAULT_PREFETCH_DEPTH,
    item_concurrency: int = 1, transform: Callable[[Any], Any] | None = None, seed: int | None = None,
    on_error: str = "raise", max_failures: int | float | None = None,
    even_batches: str | None = None, process_group: Any = None, event_loops: int | str = 1,
) -> EngineOptions:
    """``DataLoader``'s arguments (same names and meaning) checked and resolved, in PyTorch's
    order of checks.

    Raises:
        ValueError, TypeError: an invalid argument or combination; the message names it.

    Warns:
        UserWarning: ``num_workers`` exceeds the CPUs this process may use.
    """
    iterable = is_iterable_dataset(dataset)
    pool_workers, depth, tuner = resolve_auto(num_workers, prefetch_depth, iterable)
    opts = LoaderOptions(
        batch_size=batch_size, shuffle=shuffle, num_workers=pool_workers, pin_memory=pin_memory,
        drop_last=drop_last, timeout=timeout, prefetch_factor=prefetch_factor,
        persistent_workers=persistent_workers, in_order=in_order, prefetch_depth=depth,
        item_concurrency=item_concurrency,
    )
    for name, fn in (("collate_fn", collate_fn), ("worker_init_fn", worker_init_fn), ("transform", transform)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be callable or None, got {type(fn).__name__}")
    is_async = check_dataset_kind(dataset)  # an AsyncDataset: coroutines on the engine's event loop
    loop_count = resolve_event_loops(event_loops, is_async, max(opts.num_workers, 1) * opts.item_concurrency)
    if not iterable and not hasattr(dataset, "__getitem__"):
        raise TypeError(
            f"dataset must be map-style (define __getitem__) or an IterableDataset, got {type(dataset).__name__}"
        )
    policy = error_policy(on_error, max_failures, iterable, iterable and accepts_failure_sink(dataset))
    if policy is not None and policy.on_error == "replace" and not hasattr(dataset, "__len__"):
        raise TypeError(f"on_error='replace' draws substitutes from range(len(dataset)): "
                        f"{type(dataset).__name__} has no __len__ (use on_error='skip')")
    check_even_batches(even_batches, process_group, iterable)
    base = base_seed(seed, generator)
    sampling = _Sampling.of(dataset, iterable, base, bool(shuffle), sampler, batch_sampler, batch_size, drop_last)
    return EngineOptions(
        dataset=dataset, num_workers=num_workers if tuner is not None else opts.num_workers,
        prefetch_factor=prefetch_factor, pin_memory=opts.pin_memory, timeout=opts.timeout,
        worker_init_fn=worker_init_fn, persistent_workers=opts.persistent_workers, in_order=opts.in_order,
        prefetch_depth=opts.prefetch_depth, item_concurrency=opts.item_concurrency, transform=transform,
        on_error=on_error, max_failures=max_failures, policy=policy,
        generator=generator, seed=base, batch_size=sampling.batch_size, drop_last=sampling.drop_last,
        sampler=sampling.sampler, batch_sampler=sampling.batch_sampler,
        collate_fn=collate_fn if collate_fn is not None else sampling.default_collate(),
        iterable=iterable, is_async=is_async, pool_workers=opts.num_workers, window=opts.window, tuner=tuner,
        own_sampler=sampling.own_sampler, auto_collation=sampling.auto_collation,
        index_sources=index_sources(dataset, iterable, sampling.auto_collation, sampling.sampler, sampling.batch_sampler),
        even_batches=even_batches, process_group=process_group, event_loops=event_loops, loop_count=loop_count,
    )


def check_even_batches(even_batches: object, process_group: object, iterable: bool) -> None:
    """``even_batches``: None, ``"drop"`` or ``"pad"``, for an ``IterableDataset`` only
    (``dataloader._engine.even``); ``process_group`` only with it.

    Raises:
        TypeError, ValueError: another value, a map-style dataset, or a ``process_group``
            without ``even_batches``.
    """
    if even_batches is None:
        if process_group is not None:
            raise ValueError("process_group is used by even_batches only: give even_batches='drop' or 'pad' too")
        return
    if not isinstance(even_batches, str):
        raise TypeError(f"even_batches must be None, 'drop' or 'pad', got {type(even_batches).__name__} {even_batches!r}")
    if even_batches not in EVEN_MODES:
        raise ValueError(f"even_batches must be None, 'drop' or 'pad', got {even_batches!r}")
    if not iterable:
        raise ValueError(
            f"even_batches={even_batches!r} applies to an IterableDataset; a map-style dataset gets equal "
            "steps per rank from its sampler: DistributedSampler pads every rank to ceil(n / world size) "
            "(with drop_last=True it drops instead); leave even_batches=None"
        )


@dataclass(frozen=True, slots=True)
class _Sampling:
    """The effective sampling arguments: PyTorch's defaults filled in."""

    batch_size: int | None
    drop_last: bool
    sampler: Any
    batch_sampler: Any
    own_sampler: RandomSampler | None
    auto_collation: bool

    @staticmethod
    def of(
        dataset: Any, iterable: bool, seed: int, shuffle: bool, sampler: Any, batch_sampler: Any,
        batch_size: int | None, drop_last: bool,
    ) -> _Sampling:
        """Check the combination (``check_sampling_args``) and fill in the defaults: a
        ``RandomSampler`` seeded by ``seed`` (the loader's own) or a ``SequentialSampler``, and a
        ``BatchSampler`` over the sampler when batching."""
        batch_size, drop_last = check_sampling_args(
            iterable=iterable, shuffle=shuffle, sampler=sampler, batch_sampler=batch_sampler,
            batch_size=batch_size, drop_last=drop_last,
        )
        own = None
        if sampler is None and not iterable:
            sampler = own = RandomSampler(dataset, generator=seed) if shuffle else None
            if sampler is None:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and sampler is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        auto = batch_sampler is not None or (iterable and batch_size is not None)
        return _Sampling(batch_size, bool(drop_last), sampler, batch_sampler, own, auto)

    def default_collate(self) -> Callable[[Any], Any]:
        """``default_collate`` when batching, else ``default_convert`` (PyTorch's defaults)."""
        return default_collate if self.auto_collation else default_convert
