"""The local files a ``formats/`` dataset reads: a path, a glob pattern, or a list of them."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["expand_paths"]

_GLOB = "*?["


def expand_paths(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], what: str) -> tuple[str, ...]:
    """The files of ``paths`` in order: each path as given, each glob pattern's matches sorted.

    Raises:
        TypeError: ``paths`` is not a path or a sequence of paths.
        ValueError: no file at all.
        FileNotFoundError: a path that does not exist, or a pattern that matches nothing
            (named).
        IsADirectoryError: a path that is a directory (named).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if isinstance(paths, (bytes, bytearray)) or not isinstance(paths, Sequence):
        raise TypeError(f"{what} takes a path, a glob pattern or a list of them, got {type(paths).__name__}")
    out: list[str] = []
    for p in paths:
        out.extend(_one(p))
    if not out:
        raise ValueError(f"{what} needs at least one file, got an empty list")
    return tuple(out)


def _one(path: Any) -> list[str]:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"a path must be a str or os.PathLike, got {type(path).__name__}")
    text = os.fspath(path)
    if any(c in text for c in _GLOB) and not os.path.exists(text):
        found = sorted(glob.glob(text))
        if not found:
            raise FileNotFoundError(f"no file matches the pattern {text!r}")
        return [f for f in found if not os.path.isdir(f)]
    if not os.path.exists(text):
        raise FileNotFoundError(f"no such file: {text!r}")
    if os.path.isdir(text):
        raise IsADirectoryError(f"{text!r} is a directory, not a file (a glob such as {str(Path(text) / '*.parquet')!r} reads its files)")
    return [text]
