"""Validated scalar options of ``DataLoader`` (PyTorch's rules and messages)."""

from __future__ import annotations

import numbers
import os
import warnings
from dataclasses import dataclass, field

from dataloader._constants import MAX_BATCH_SIZE, MAX_ITEM_CONCURRENCY, MAX_NUM_WORKERS, MAX_WINDOW_BATCHES
from dataloader._validate import check_int

__all__ = ["LoaderOptions", "warn_many_workers"]


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
        stacklevel=5,
    )
