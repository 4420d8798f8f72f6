"""Who may replace a ``CachedDataset``'s ``path``: a cache built while another dataset's
cache was completed at the same path refuses to replace it.

A cache file is renamed onto ``path`` when its last row is written (``_ndf/slots``).  Two
``CachedDataset`` objects over *different* data (different keys) given the same ``path``
and building at the same time (two threads, two processes) would each rename its file onto
``path``: the last one wins silently, and the other, finding the winner's file when it
opens ``path`` after its own rename, could neither read its cache nor build it again.  So
each build remembers what ``path`` was when it started (``PathGuard``: device, inode, size,
modification time; or absent) and, just before its rename, under an exclusive ``flock`` of
the directory (``RowSlots``, so checks and renames of one directory do not interleave,
across threads and processes), checks it again: unchanged, or now a complete cache of the
same key (the same dataset built beside it, e.g. on another rank), it renames; otherwise
another dataset's cache was completed there meanwhile and the build fails with
``FileExistsError`` (its temporary file removed, ``path`` left as it is).

A stale file found when the build started (another key: the dataset changed) is replaced
as before: only a cache *completed during* this build is refused.
"""

from __future__ import annotations

import os

from dataloader._ndf.cache_items import CACHE_KEY
from dataloader._ndf.read import NdfFile

__all__ = ["PathGuard", "path_identity"]


def path_identity(path: str) -> tuple[int, int, int, int] | None:
    """``path``'s ``(st_dev, st_ino, st_size, st_mtime_ns)``, or None when it does not exist;
    a symbolic link's own (``lstat``: the rename replaces the link, and a link loop or a
    dangling link is a file the cache replaces, not an error)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class PathGuard:
    """What ``path`` was when a build of the cache ``key`` (``n`` rows) started; called just
    before the build's rename (see the module).

    Raises (on call):
        FileExistsError: another dataset's cache (another key, or not a cache) was completed
            at ``path`` since the build started.
    """

    __slots__ = ("path", "key", "n", "seen")

    def __init__(self, path: str, key: str, n: int) -> None:
        self.path, self.key, self.n = path, key, n
        self.seen = path_identity(path)

    def __call__(self) -> None:
        now = path_identity(self.path)
        if now is None or now == self.seen or self._same_cache():
            return
        raise FileExistsError(
            f"CachedDataset: {self.path!r} was replaced while this cache was being built, by another "
            "dataset's cache (two CachedDatasets with different data share one path) or another file; this "
            "cache was not kept and "
            f"{self.path!r} was left as it is: give each dataset a path of its own"
        )

    def _same_cache(self) -> bool:
        """``path`` is now a complete cache of this key and length (built beside this one)."""
        try:
            file = NdfFile(self.path)
        except (OSError, ValueError):
            return False
        try:
            record = file.metadata.get(CACHE_KEY)
            return isinstance(record, dict) and record.get("key") == self.key and file.n == self.n
        finally:
            file.close()
