"""Shared helpers of the torch-compatibility suite (imported only after torch is)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def assert_same(t: Any, o: Any, path: str = "batch") -> None:
    """torch's output ``t`` and ours ``o``: same structure, container types, dtypes, values.

    Tensors must be tensors on both sides with equal dtype, shape and values
    (``torch.equal``); containers of the same type; anything else equal and of one type.
    """
    if isinstance(t, torch.Tensor):
        assert isinstance(o, torch.Tensor), f"{path}: {type(o).__name__} is not a tensor"
        assert (o.dtype, o.shape) == (t.dtype, t.shape), f"{path}: {o.dtype} {o.shape} != {t.dtype} {t.shape}"
        assert torch.equal(o, t), f"{path}: {o} != {t}"
    elif isinstance(t, np.ndarray):
        assert isinstance(o, np.ndarray) and o.dtype == t.dtype, path
        np.testing.assert_array_equal(o, t, err_msg=path)
    elif isinstance(t, dict):
        assert type(o) is type(t) and list(o) == list(t), f"{path}: keys {list(o)} != {list(t)}"
        for k in t:
            assert_same(t[k], o[k], f"{path}[{k!r}]")
    elif isinstance(t, (list, tuple)):
        assert type(o) is type(t) and len(o) == len(t), f"{path}: {type(o).__name__} != {type(t).__name__}"
        for i, (a, b) in enumerate(zip(t, o, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        assert type(o) is type(t) and o == t, f"{path}: {o!r} != {t!r}"


def run(loader: Any, convert: Any = None) -> list[Any]:
    """One epoch: each batch (through ``convert`` if given), or ``("error", exception type
    name)`` for a failed one."""
    keep = convert if convert is not None else (lambda batch: batch)
    out: list[Any] = []
    it = iter(loader)
    while True:
        try:
            out.append(keep(next(it)))
        except StopIteration:
            return out
        except Exception as exc:  # noqa: BLE001 - errors are compared too
            out.append(("error", type(exc).__name__))


def assert_same_epochs(t_out: list[Any], o_out: list[Any]) -> None:
    assert len(o_out) == len(t_out), f"{len(o_out)} batches != torch's {len(t_out)}"
    for k, (t, o) in enumerate(zip(t_out, o_out, strict=True)):
        assert_same(t, o, f"batch {k}")
