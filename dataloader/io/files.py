"""``FileDataset``: items are the bytes of files.

A plain map-style dataset (its reads block, so it runs on the loader's worker
threads and lanes: ``item_concurrency`` reads at once per worker).  With a
``root``, relative locations are joined to it and nothing leaves it: a location
with a ``..`` component is refused, and the file actually opened must lie under
the real path of ``root`` (checked on the open file descriptor, through
``/proc/self/fd`` where it exists, so a symlink swapped in between cannot
escape).

Transient errors, tried again by ``retry``: ``EINTR``, ``EAGAIN``/``EWOULDBLOCK``,
``EIO``, ``ETIMEDOUT`` and ``ESTALE`` — what network filesystems (NFS, SMB,
FUSE mounts of object stores) return for a failure that may pass; every other
error (missing file, permission, a directory) is final.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING, Any

from dataloader._datasets.base import Dataset
from dataloader.io.locations import Locations
from dataloader.io._checks import check_max_bytes, check_retry, over_max_bytes

if TYPE_CHECKING:
    from dataloader.io.retry import Retry

__all__ = ["FileDataset", "TRANSIENT_ERRNOS"]

TRANSIENT_ERRNOS = frozenset({errno.EINTR, errno.EAGAIN, errno.EWOULDBLOCK, errno.EIO, errno.ETIMEDOUT, errno.ESTALE})
_READ_CHUNK = 1 << 20
_PROC_FD = "/proc/self/fd"


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and not isinstance(exc, ValueError) and exc.errno in TRANSIENT_ERRNOS


class FileDataset(Dataset[bytes]):
    """The bytes of one file per item.

    Args:
        locations: paths: a sequence, a callable or a ``Template`` (see
            ``Locations``); ``len(dataset)`` is their number.
        root: a directory relative locations are joined to; nothing read leaves it
            (symlinks inside it are followed only while they stay inside).  None:
            locations are used as they are.
        retry: when to try a read again (transient errno only, see the module).
        max_bytes: the largest item, bytes; a larger file fails with ``ValueError``
            naming its path and size, before it is read.  None: no limit.

    Items are ``bytes``.  Thread-safety: ``__getitem__`` may run on any number of
    threads at once.

    Raises (from ``__getitem__``, for that item's batch):
        IndexError: the index is out of range.
        ValueError: a refused location (``..``, outside ``root``), a file that is
            not a regular file, or one larger than ``max_bytes``.
        FileNotFoundError, PermissionError, IsADirectoryError, OSError: from the
            operating system, naming the path.
    """

    def __init__(
        self,
        locations: Any,
        *,
        root: str | os.PathLike[str] | None = None,
        retry: Retry | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.root = None if root is None else os.fspath(root)
        if self.root is not None and not os.path.isdir(self.root):
            raise ValueError(f"root={self.root!r} is not a directory")
        self._real_root = None if self.root is None else os.path.realpath(self.root)
        self.retry = check_retry(retry)
        self.max_bytes = check_max_bytes(max_bytes)
        self.locations = Locations(locations).bind("path", self._check_path)

    def _check_path(self, location: str) -> str:
        if "\x00" in location:  # os.open would raise "embedded null byte", naming nothing
            raise ValueError(f"location {location!r} contains a NUL character ('\\x00'), which a path may not")
        if self.root is None:
            return location
        if os.path.isabs(location):
            if not _under(os.path.normpath(location), os.path.normpath(self.root)):
                raise ValueError(f"location {location!r} is outside root={self.root!r}")
            return location
        return os.path.join(self.root, location)

    def __len__(self) -> int:
        return len(self.locations)

    def location(self, index: int) -> str:
        """The path of item ``index`` (the loader's ``on_error`` reports name it).

        Raises:
            IndexError, ValueError: as ``__getitem__`` for a bad index or location.
        """
        return self.locations[index]

    def __getitem__(self, index: int) -> bytes:
        path = self.locations[index]
        return self.retry.run(lambda: self._read(path), _transient)

    def _read(self, path: str) -> bytes:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if self._real_root is not None:
                real = _opened_path(fd, path)
                if not _under(real, self._real_root):
                    raise ValueError(f"{path!r} resolves to {real!r}, outside root={self.root!r}")
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{path!r} is not a regular file")
            limit = self.max_bytes
            if limit is not None and st.st_size > limit:
                raise over_max_bytes(path, st.st_size, limit)
            return _read_all(fd, path, st.st_size, limit)
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"FileDataset({self.locations!r}, root={self.root!r}, max_bytes={self.max_bytes})"


def _read_all(fd: int, path: str, size: int, limit: int | None) -> bytes:
    """Read to the end, the whole file in one call when it did not change; a file that
    grew past ``limit`` meanwhile fails (never more than ``limit + 1`` bytes are read)."""
    cap = None if limit is None else limit + 1
    chunks: list[bytes] = []
    got = 0
    n = size + 1
    while True:
        chunk = os.read(fd, n if cap is None else min(n, cap - got))
        if not chunk:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.append(chunk)
        got += len(chunk)
        if cap is not None and got >= cap:
            raise ValueError(f"{path!r} has more than max_bytes={limit} bytes (it grew while being read)")
        n = _READ_CHUNK


def _opened_path(fd: int, path: str) -> str:
    try:
        return os.readlink(f"{_PROC_FD}/{fd}")
    except OSError:
        return os.path.realpath(path)


def _under(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives, or a relative and an absolute path
        return False
