"""Checking that an ``.ndf`` file's single label column holds class ids (for ``demo --data``)."""

from __future__ import annotations

import numpy as np

from dataloader.cli._common import CliError
from dataloader.cli._stats import block_rows
from dataloader.ndf import NdfFile

__all__ = ["check_class_labels"]


def check_class_labels(file: NdfFile, max_classes: int) -> int:
    """Stream the labels of ``file`` (an ``NdfFile``) and return the number of classes C.

    Labels must be integers in ``[0, max_classes)``; C is the largest plus one,
    and at least two distinct classes must occur.

    Raises:
        CliError: ``l != 1``, no rows, or the first bad label (its row named).
    """
    n, d, l, path = file.n, file.d, file.l, file.path
    if l != 1:
        raise CliError(
            f"{path}: has l={l} label columns; the demo needs exactly one, "
            "holding class ids 0..C-1 (convert with --label-columns NAME)"
        )
    if n < 2:
        raise CliError(f"{path}: has {n} rows; the demo needs at least 2")
    block = block_rows(d, l)
    top = -1
    seen = np.zeros(max_classes, dtype=bool)
    for start in range(0, n, block):
        k = min(block, n - start)
        _, y = file.read_rows(np.arange(start, start + k))
        y = y[:, 0]
        bad = ~((y >= 0) & (y < max_classes) & (y == np.floor(y)))
        if bad.any():
            i = int(np.argmax(bad))
            raise CliError(
                f"{path}: row {start + i}: label {float(y[i])!r} is not a class id "
                f"(an integer in [0, {max_classes}))"
            )
        ids = y.astype(np.int64)
        seen[ids] = True
        top = max(top, int(ids.max()))
    if np.count_nonzero(seen) < 2:
        raise CliError(
            f"{path}: every row has the same label {top}; the demo needs at least 2 classes"
        )
    return top + 1
