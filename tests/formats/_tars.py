"""Tar shards for the TarShardDataset tests, written with the standard library's ``tarfile``."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def write_tar(path: Path, members: Iterable[tuple[str, bytes]], mode: str = "w") -> Path:
    """A tar at ``path`` with ``members`` (name, data) in order, as regular files."""
    with tarfile.open(path, mode) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def sample_members(keys: Iterable[int]) -> list[tuple[str, bytes]]:
    """Two files per key: ``{key:06d}.jpg`` (``img<key>``) and ``{key:06d}.cls`` (the key)."""
    out = []
    for k in keys:
        out.append((f"{k:06d}.jpg", f"img{k}".encode()))
        out.append((f"{k:06d}.cls", str(k).encode()))
    return out


def write_shards(root: Path, shards: int, per_shard: int) -> str:
    """``shards`` shards ``s-00.tar`` ... of ``per_shard`` samples each (keys numbered across
    shards); returns their brace pattern."""
    for s in range(shards):
        write_tar(root / f"s-{s:02d}.tar", sample_members(range(s * per_shard, (s + 1) * per_shard)))
    return str(root / f"s-{{00..{shards - 1:02d}}}.tar")


def keys_of(loader: Any) -> list[str]:
    """The ``__key__`` of every sample of one epoch of ``loader`` (``collate_fn=list``)."""
    return [sample["__key__"] for batch in loader for sample in batch]
