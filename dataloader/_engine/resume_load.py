"""A loader state checked before ``DataLoader.load_state_dict`` applies it (``Resumer.load``).

``check_loaded`` validates what ``dataloader._engine.resume`` describes: the keys, the
version (1 or 2), the ints, the loader's layout (``resume_checks.Layout``), that a sampler or
dataset state has something to load it, and, for an ``IterableDataset``, that a mid-epoch
state holds per-worker states for as many workers as this loader has
(``stream_state.StatefulStreamItems.state``), or, with ``num_workers=0``, the dataset's own.
Nothing is applied here; the result is a deep copy that shares nothing with the caller's dict.
"""

from __future__ import annotations

import copy
from typing import Any

from dataloader._engine.resume_checks import Layout
from dataloader._sampling.state import check_state
from dataloader._validate import check_int

__all__ = ["check_loaded"]

_VERSIONS = (1, 2)  # 1: the first release's, without "loader" (nothing of the loader checked)
_KEYS = ("version", "seed", "epoch", "yielded", "sampler", "dataset")


def check_loaded(sd: object, sampler: Any, dataset: Any, workers: int, layout: Layout | None) -> dict[str, Any]:
    """A checked deep copy of the state ``sd`` for a loader with this ``sampler`` (None for an
    ``IterableDataset``), ``dataset``, ``num_workers`` and ``layout`` (None: not checked).

    A copy: what is loaded (kept until the next epoch, handed to the sampler, the dataset or a
    worker's copy, which may keep it as its live state) shares nothing with ``sd``.

    Raises:
        TypeError: ``sd`` is not a dict or a value has the wrong type (naming the key); a
            saved sampler or dataset state for one without ``load_state_dict``; an
            ``IterableDataset`` without them, mid-epoch, with ``num_workers > 0``.
        ValueError: a missing or unknown key, an unknown version, a value out of range,
            per-worker iterable states saved with another ``num_workers``, or a state saved by
            a loader that cuts its epochs otherwise (``Layout.check``).
    """
    sd = copy.deepcopy(check_state(sd, "DataLoader", _KEYS, ("loader", "elastic", "failures")))
    if type(sd["version"]) is not int or sd["version"] not in _VERSIONS:
        raise ValueError(f"DataLoader state 'version'={sd['version']!r} is not 1 or 2 (unknown format)")
    sd["seed"] = check_int(sd["seed"], "DataLoader state 'seed'", minimum=0, maximum=2**63 - 1)
    sd["epoch"] = check_int(sd["epoch"], "DataLoader state 'epoch'", minimum=0)
    sd["yielded"] = check_int(sd["yielded"], "DataLoader state 'yielded'", minimum=0)
    if layout is not None:  # this loader's epoch must hold the saved position
        layout.check(sd, sd["yielded"])
    _check_loaders(sd, sampler, dataset)
    if sampler is None and sd["yielded"]:
        _check_stream_state(sd["dataset"], workers)
    return sd


def _check_loaders(sd: dict[str, Any], sampler: Any, dataset: Any) -> None:
    """A saved sampler state is a dict, and the sampler and dataset can load what is saved."""
    if sd["sampler"] is not None and not isinstance(sd["sampler"], dict):
        raise TypeError(f"DataLoader state 'sampler' must be a dict or None, got {type(sd['sampler']).__name__}")
    if sd["sampler"] is not None and not hasattr(sampler, "load_state_dict"):
        raise TypeError(
            f"DataLoader state 'sampler' holds a sampler state, but {type(sampler).__name__} "
            "has no load_state_dict"
        )
    if sd["dataset"] is not None and not hasattr(dataset, "load_state_dict"):
        raise TypeError(
            f"DataLoader state 'dataset' holds a dataset state, but {type(dataset).__name__} "
            "has no load_state_dict"
        )


def _check_stream_state(state: Any, workers: int) -> None:
    """A mid-epoch ``IterableDataset`` state: per-worker states for ``workers`` workers, or
    (``num_workers=0``) anything but per-worker states."""
    if workers:
        if state is None:
            raise TypeError(
                "resuming an IterableDataset in the middle of an epoch with "
                f"num_workers={workers} needs per-worker dataset states (a dataset with "
                "state_dict/load_state_dict), or num_workers=0"
            )
        _check_streams(state, workers)
    elif _per_worker(state):
        raise ValueError(
            f"DataLoader state 'dataset' holds per-worker states for {len(state['workers'])} "
            f"workers; this loader has num_workers={workers}: resume an IterableDataset with the "
            "same num_workers"
        )


def _per_worker(state: object) -> bool:
    """``state`` is a per-worker iterable state (``StatefulStreamItems.state``), which only a
    loader with that many workers can resume (the dataset's own state would be one dict)."""
    return (
        isinstance(state, dict) and set(state) == {"workers", "last", "live"}
        and isinstance(state["workers"], list) and isinstance(state["live"], list)
    )


def _check_streams(state: object, workers: int) -> None:
    sd = check_state(state, "DataLoader 'dataset' (per-worker iterable)", ("workers", "last", "live"))
    saved = sd["workers"]
    if not isinstance(saved, list) or len(saved) != workers:
        got = len(saved) if isinstance(saved, list) else type(saved).__name__
        raise ValueError(
            f"DataLoader state 'dataset' holds per-worker states for {got} workers; this loader "
            f"has num_workers={workers}: resume an IterableDataset with the same num_workers"
        )
    check_int(sd["last"], "DataLoader state 'dataset' 'last'", minimum=-1, maximum=workers - 1)
    live = sd["live"]
    if not isinstance(live, list) or any(
        check_int(w, "DataLoader state 'dataset' 'live' item", minimum=0, maximum=workers - 1) != w for w in live
    ) or live != sorted(set(live)):
        raise ValueError(f"DataLoader state 'dataset' 'live'={live!r} must be a sorted list of distinct worker ids")
