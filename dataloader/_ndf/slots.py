"""Writing an `.ndf` file by row index: ``RowSlots``, for rows that arrive in any order.

A shuffled epoch hands rows over in the sampler's order, from several threads.  ``RowSlots``
allocates the whole file at once (header + n rows: ``ftruncate``, then ``posix_fallocate``
so that a full disk is an ``OSError`` here, never a SIGBUS later) under a temporary name
beside ``path`` (``.<name>.<random>.tmp``), and copies row ``i`` to its own place (a batch's
rows in one NumPy assignment, no system call per row: a ``pwrite`` per row cost ~10% of a
30 µs item).  Threads write disjoint rows at once; only the bookkeeping (which rows are
claimed, how many are written) takes a lock.

Where the rows go: a file of at most ``BUFFER_MAX_BYTES`` (64 MiB) keeps them in anonymous
memory, faulted in at once (``MAP_POPULATE``), and writes them to the file in order, once, when
the last row arrives; a larger one maps the file and copies row ``i`` to ``data_offset + i *
row_bytes`` (memory: page cache the kernel writes back).  For 20,000 rows of 264 bytes the
first costs ~8 ms CPU from allocation to rename, the mapped file ~18 ms (first-touch page
faults through the file's mapping, ``msync``, the copy in order below).  Memory besides: one
byte per row (the claimed flags).

Completeness is marked twice.  While rows are missing, the header's magic is
``PARTIAL_MAGIC`` (``b"NDF~"``): no ``.ndf`` reader opens the file.  When the last row is
written, the real version-2 header is written over it, the file is fsync'ed and renamed onto
``path`` (``os.replace``, atomic on POSIX; with a ``check``, it first, both under an
exclusive ``flock`` of the directory: ``CachedDataset``'s guard, ``_ndf/cache_path``), then
the directory is fsync'ed.  So ``path`` is
either absent, its previous version, or a complete file; a killed process leaves only its
temporary file (removed by ``abort()``, or when the writer is dropped or the interpreter exits).
Before that, a mapped file the reader will map (at most ``MMAP_AUTO_MAX_BYTES``) is copied in
order to a new temporary file (``RowSlots._rewrite``: it then reads as fast as a file written
in order); a file written from memory is written in order already.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import secrets
import threading
import weakref
from collections.abc import Callable

import numpy as np

from dataloader._ndf.format import MMAP_AUTO_MAX_BYTES, WRITE_CHUNK_BYTES, Layout, pack_header
from dataloader._ndf.write import fsync_directory

__all__ = ["BUFFER_MAX_BYTES", "PARTIAL_MAGIC", "RowSlots"]

PARTIAL_MAGIC = b"NDF~"
BUFFER_MAX_BYTES = 64 * 2**20  # a file up to this size: rows kept in anonymous memory, written once


class _Mapped:
    """The temporary file's descriptor, the rows' writable mapping and the rows' array over it.

    The mapping is the file's (``MAP_SHARED``), or anonymous memory (``in_memory``) whose
    rows ``write_out`` writes to the file once, in order."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path = fd, path
        self.map: mmap.mmap | None = None
        self.rows: np.ndarray | None = None
        self.in_memory = False

    def map_rows(self, size: int, offset: int, n: int, row_bytes: int, in_memory: bool) -> None:
        self.in_memory = in_memory
        if in_memory:
            # Faulted in at once (MAP_POPULATE, Linux): 1.5 ms for 5 MB, where first touches
            # row by row cost ~7 ms (~9 ms through the file's mapping).
            flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0)
            self.map = mmap.mmap(-1, max(n * row_bytes, 1), flags=flags)
            offset = 0
        else:
            self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.rows = np.frombuffer(self.map, np.uint8, count=n * row_bytes, offset=offset).reshape(n, row_bytes)

    def write_out(self, offset: int) -> None:
        """Write the anonymous mapping's rows to the file at ``offset`` (in chunks), then drop it."""
        mapping = self.map
        assert mapping is not None and self.in_memory
        size = len(self.rows) * self.rows.shape[1] if self.rows is not None else 0
        self.rows = None
        with memoryview(mapping) as view:
            done = 0
            while done < size:
                done += os.pwrite(self.fd, view[done:min(done + WRITE_CHUNK_BYTES, size)], offset + done)
        self.unmap(flush=False)

    def copy(self, indices: np.ndarray, rows: np.ndarray) -> None:
        """Copy ``rows`` (uint8, (k, row_bytes)) to the rows ``indices`` (int64, (k,)) of the file."""
        target = self.rows
        assert target is not None  # mapped until the last write is done
        target[indices] = rows

    def unmap(self, flush: bool) -> None:
        """Drop the mapping (idempotent), first writing its pages out (``msync``) if ``flush``."""
        self.rows = None
        mapping, self.map = self.map, None
        if mapping is not None:
            if flush:
                mapping.flush()
            try:
                mapping.close()
            except BufferError:  # a view another thread has not released yet: unmapped when it goes
                pass


def _replace(tmp_path: str, path: str, check: Callable[[], None] | None) -> None:
    """``os.replace(tmp_path, path)``, ``check()`` first, both under an exclusive ``flock``
    of the directory when there is a check (and ``fcntl``: POSIX; a filesystem that refuses
    ``flock`` has the check and the rename unlocked, as without ``fcntl``)."""
    if check is None:
        os.replace(tmp_path, path)
        return
    try:
        import fcntl

        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_CLOEXEC)
    except (ImportError, OSError):  # no flock (Windows), or no directory: the rename's error
        check()
        os.replace(tmp_path, path)
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by the close (this open file description's)
        except OSError:  # a filesystem with no flock (ENOLCK: NFS without lockd; EOPNOTSUPP): unlocked
            pass
        check()
        os.replace(tmp_path, path)
    finally:
        os.close(fd)


def _discard(file: _Mapped) -> None:
    """Unmap, close and delete an unfinished temporary file (errors ignored)."""
    file.rows = None
    tmp_path = file.path
    mapping = file.map
    for step in (mapping.close if mapping is not None else None, lambda: os.close(file.fd),
                 lambda: os.unlink(tmp_path)):
        try:
            if step is not None:
                step()
        except (OSError, BufferError, ValueError):
            pass


class RowSlots:
    """A version-2 `.ndf` file of ``layout.n`` rows, written row by row at any index.

    Args:
        path: the destination; its directory must exist.  An existing file is replaced
            (atomically) only when every row is written.
        layout: the file's header (version 2; ``n`` rows, ``d``/``l``, dtypes, ``extra``
            metadata); ``data_offset`` is computed here.
        check: called just before the rename onto ``path``, under an exclusive ``flock`` of
            ``path``'s directory (checks and renames of one directory never interleave,
            across threads and processes); an ``OSError`` it raises fails the finish (the
            file removed, ``path`` untouched).  None: no check.

    Thread-safety: ``write`` from any number of threads at once (each row claimed once
    under a lock, copied into the mapping outside it); ``abort`` from any
    thread (a write in flight finishes first, then the file is removed).

    Raises:
        OSError: the temporary file cannot be created or sized (e.g. no space).
    """

    def __init__(self, path: str | os.PathLike[str], layout: Layout, check: Callable[[], None] | None = None) -> None:
        header = pack_header(dataclasses.replace(layout, version=2))
        self.layout = dataclasses.replace(layout, version=2, data_offset=len(header))
        self.path = os.fspath(path)
        self._header = header
        self._check = check
        self._row_bytes = self.layout.row_bytes
        self._claimed = np.zeros(layout.n, dtype=np.uint8)  # 1: a write claimed the row
        self._written = 0
        self._inflight = 0
        self._closed = False  # finished or aborted: no new write starts
        self._aborted = False
        self._lock = threading.Lock()
        head, tail = os.path.split(os.path.abspath(self.path))
        self._tmp_path = os.path.join(head, f".{tail}.{secrets.token_hex(8)}.tmp")
        fd = os.open(self._tmp_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        self._file = _Mapped(fd, self._tmp_path)
        self._finalizer = weakref.finalize(self, _discard, self._file)
        size = len(header) + layout.n * self._row_bytes
        try:
            os.pwrite(fd, PARTIAL_MAGIC + header[4:], 0)
            os.ftruncate(fd, size)
            if hasattr(os, "posix_fallocate"):  # Linux; elsewhere a full disk may SIGBUS a write
                os.posix_fallocate(fd, 0, size)
            self._file.map_rows(size, len(header), layout.n, self._row_bytes, size <= BUFFER_MAX_BYTES)
        except BaseException:
            self._finalizer()
            raise

    @property
    def written(self) -> int:
        """Rows written so far (each counted once)."""
        return self._written

    @property
    def closed(self) -> bool:
        """True once the file is finished (renamed onto ``path``) or aborted."""
        return self._closed

    def missing(self, indices: np.ndarray) -> np.ndarray:
        """The ``indices`` (1-D int64, in ``[0, n)``) whose rows no write has claimed yet."""
        with self._lock:
            claimed = self._claimed[indices]
        return indices[claimed == 0]

    def write(self, indices: np.ndarray, rows: np.ndarray) -> bool:
        """Write the rows at ``indices`` that no call wrote or is writing yet.

        Args:
            indices: 1-D int64 array of k row indices in ``[0, n)`` (checked by the caller).
            rows: uint8 array of shape (k, row_bytes), C-contiguous: row ``j`` is the file's
                bytes of row ``indices[j]`` (little-endian x then y).

        Returns:
            True when this call wrote the last missing row: the file is then complete
            and renamed onto ``path``.  False otherwise, also after ``abort()``.

        Raises:
            OSError: a write or the finish failed; the rows of this call are unclaimed
                again (another call may write them), a failed finish aborts the file.
        """
        with self._lock:
            if self._closed:
                return False
            mine = self._claim(indices)
            self._inflight += 1
        try:
            if mine is None:
                self._file.copy(indices, rows)
            elif mine.size:
                self._file.copy(indices[mine], rows[mine])
        except BaseException:
            with self._lock:
                self._claimed[indices if mine is None else indices[mine]] = 0
                self._leave()
            raise
        count = indices.size if mine is None else mine.size
        with self._lock:
            self._written += count
            last = count > 0 and self._written == self._claimed.size and not self._aborted
            if last:
                self._closed = True
            self._leave()
        if last:
            self._finish()
        return last

    def _claim(self, indices: np.ndarray) -> np.ndarray | None:
        """Claim the rows of ``indices`` that no call has claimed (lock held): None when that
        is all of them, else the positions in ``indices`` of the rows to write (a repeated
        index once).  In NumPy: a Python loop over a batch's rows cost ~60 µs a batch of 64."""
        claimed = self._claimed
        free = claimed[indices] == 0
        if free.all() and _distinct(indices):
            claimed[indices] = 1
            return None
        mine = np.flatnonzero(free)
        _, first = np.unique(indices[mine], return_index=True)
        mine = mine[np.sort(first)]
        claimed[indices[mine]] = 1
        return mine

    def _leave(self) -> None:
        """One write call is over (lock held); the last one out of an aborted file removes it."""
        self._inflight -= 1
        if self._aborted and self._inflight == 0:
            self._finalizer()

    def _finish(self) -> None:
        file = self._file
        try:
            size = self.layout.data_offset + self.layout.n * self._row_bytes
            rewrite = not file.in_memory and size <= MMAP_AUTO_MAX_BYTES
            if file.in_memory:
                file.write_out(self.layout.data_offset)
            else:
                # A file copied in order needs no msync of its mapping (~8 ms for 5 MB: the pages
                # would be written out twice): the copy reads them from the page cache, which the
                # mapping shares, and the copy is the file that is fsync'ed.
                file.unmap(flush=not rewrite)
            if rewrite:
                self._rewrite(size)
            os.pwrite(file.fd, self._header, 0)
            os.fsync(file.fd)
        except BaseException:
            self._finalizer()
            raise
        self._finalizer.detach()
        try:
            os.close(file.fd)
            _replace(file.path, self.path, self._check)
        except BaseException:
            try:
                os.unlink(file.path)
            except OSError:
                pass
            raise
        fsync_directory(os.path.dirname(os.path.abspath(self.path)))

    def _rewrite(self, size: int) -> None:
        """Copy the file, in order, to a new temporary file that replaces it (in ``_file``).

        A file the reader will map (``MMAP_AUTO_MAX_BYTES``) is read ~8% slower when its pages
        were written through a mapping (small page-cache folios) than after sequential writes
        (benchmarks/bench_cache.py): one in-kernel copy (``copy_file_range``) at completion
        gives it the layout of a file written in order.  Needs the file's size again in free
        space for a moment.
        """
        file = self._file
        head, tail = os.path.split(file.path)
        new_path = os.path.join(head, f"{tail[:-4]}.{secrets.token_hex(4)}.tmp")
        new = os.open(new_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            _copy_range(file.fd, new, size)
        except BaseException:
            os.close(new)
            os.unlink(new_path)
            raise
        old_fd, old_path = file.fd, file.path
        file.fd, file.path = new, new_path
        os.close(old_fd)
        os.unlink(old_path)

    def abort(self) -> None:
        """Give the file up: ``path`` is left untouched and the temporary file removed (once
        no write is in flight).  Idempotent; nothing after a finish."""
        with self._lock:
            if self._closed:
                return
            self._closed = self._aborted = True
            self._inflight += 1
            self._leave()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"RowSlots({self.path!r}, {self._written}/{self._claimed.size} rows, {state})"


def _distinct(indices: np.ndarray) -> bool:
    """True when no value of the 1-D ``indices`` repeats."""
    ordered = np.sort(indices)
    return bool((ordered[1:] != ordered[:-1]).all())


def _copy_range(src: int, dst: int, size: int) -> None:
    """Copy bytes ``[0, size)`` of ``src`` to ``dst`` (in the kernel where it can)."""
    done = 0
    while done < size:
        try:
            k = os.copy_file_range(src, dst, size - done, done, done)
        except (OSError, AttributeError):  # another filesystem, an old kernel, not Linux
            k = 0
        if k == 0:
            k = os.pwrite(dst, os.pread(src, min(WRITE_CHUNK_BYTES, size - done), done), done)
        done += k
