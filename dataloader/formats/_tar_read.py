"""Samples of one tar shard, read as a stream and grouped by key as WebDataset groups them.

WebDataset's rules (``webdataset.tariterators`` 1.0.2: ``tar_file_iterator``,
``base_plus_ext``, ``group_by_keys``), kept exactly:

- only regular files count (directories, links and other entries are passed over);
- a top-level name ``__...__`` (metadata) is passed over, and so is every name matching
  ``__[^/]*__($|/)`` at its start;
- a name splits into key and extension at the first dot of its base name
  (``^((?:.*/|)[^.]+)[.]([^/]*)$``: the key keeps the directories, ``a/b.c/000123.seg.png``
  -> ``a/b.c/000123`` + ``seg.png``); a name without a dot in its base name is passed over;
  the extension is lower-cased;
- consecutive files with one key make one sample ``{"__key__": key, "__url__": shard,
  ext: bytes, ...}``, plus ``"__local_path__"``: the file's path for a local shard (as
  WebDataset's local-file opener adds); a key seen again after another key starts a new sample (as in
  WebDataset), and an extension twice in one sample is a ``ValueError``.

One difference: a sample never spans two shards (WebDataset groups the concatenated file
stream, so a key ending one shard and starting the next would merge): here each shard is its
own unit of splitting, shuffling and resume.

Errors: a shard that is not a tar (or a compressed tar), or is cut short, raises
``ValueError`` naming the shard (redacted) and the sample it was reading; an I/O error keeps its
``OSError`` type with the shard named.  The original exception is the ``__cause__``.
"""

from __future__ import annotations

import re
import sys
import tarfile
import tarfile as tarfile_module
from collections.abc import Callable, Iterator
from typing import Any

from dataloader.io._redact import redact, redact_text

__all__ = ["ShardReadError", "shard_samples", "split_key"]

_KEY = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_SKIP_META = re.compile(r"__[^/]*__($|/)")
# The header error of a zero block, a tar's end marker (the other ``HeaderError`` kinds, which
# typeshed does not declare either, are an empty, truncated or invalid header).
_END_BLOCK: type[Exception] = getattr(tarfile, "EOFHeaderError")  # noqa: B009


_READ_ERRORS = (tarfile.TarError, EOFError, OSError, ValueError, RuntimeError)


def _is_http_error(exc: BaseException) -> bool:
    """Whether ``exc`` is ``http.client``'s (``IncompleteRead`` of a chunked body cut short, ...):
    not an ``OSError``, and only raised once an HTTP shard has imported ``http.client``."""
    client = sys.modules.get("http.client")
    return client is not None and isinstance(exc, client.HTTPException)


class ShardReadError(Exception):
    """Internal: the error of shard ``name`` after ``ordinal`` complete samples (re-raised by the
    reader as ``ValueError`` / ``OSError`` naming the shard; see ``named``)."""

    def __init__(self, name: str, ordinal: int, cause: BaseException) -> None:
        super().__init__(name, ordinal, cause)
        self.name, self.ordinal, self.cause = name, ordinal, cause

    def named(self) -> Exception:
        """The exception to raise: the shard and sample named, the cause's kind kept."""
        cause = self.cause
        where = f"tar shard {redact(self.name)!r}, after {self.ordinal} sample(s)"
        if isinstance(cause, (tarfile.TarError, EOFError)):
            return ValueError(f"{where}: not a valid tar stream or cut short ({cause})")
        text = redact_text(str(cause))  # a client's message may name a URL with its secrets
        if isinstance(cause, OSError):
            # the built-in kind (FileNotFoundError, PermissionError, ...) of a client's subclass
            kind = next(k for k in type(cause).__mro__ if k.__module__ == "builtins")
            return kind(f"{where}: {text}")
        if isinstance(cause, ValueError):
            return ValueError(f"{where}: {text}")
        if _is_http_error(cause):
            return ValueError(f"{where}: HTTP response cut short or malformed ({type(cause).__name__}: {text})")
        return RuntimeError(f"{where}: {type(cause).__name__}: {text}")


class _CheckedInfo(tarfile.TarInfo):
    """A ``TarInfo`` whose reading refuses a stream that ends without the end marker.

    ``tarfile`` ends an archive quietly at a header that is missing, cut or invalid after the
    first member: a shard cut at (or inside) a member header, or with a corrupt header, would
    lose its later samples without an error.  Only a zero block (the end marker) ends it here.
    """

    @classmethod
    def fromtarfile(cls, tarfile: tarfile.TarFile) -> _CheckedInfo:
        try:
            return super().fromtarfile(tarfile)
        except tarfile_module.HeaderError as exc:
            if isinstance(exc, _END_BLOCK) or tarfile.offset == 0:
                raise  # the end marker, or the first header (tarfile names that one itself)
            raise tarfile_module.ReadError(
                f"no valid member header at byte {tarfile.offset} ({exc}): cut short or corrupt"
            ) from exc


def split_key(name: str) -> tuple[str, str] | None:
    """``(key, extension)`` of a member name by WebDataset's rule, or None (no dot)."""
    match = _KEY.match(name)
    if match is None:
        return None
    return match.group(1), match.group(2)


def _members(stream: tarfile.TarFile) -> Iterator[tuple[str, bytes]]:
    for info in stream:
        name = info.name
        if not info.isreg() or not name:
            continue
        if "/" not in name and name.startswith("__") and name.endswith("__"):
            continue
        if _SKIP_META.match(name):
            continue
        member = stream.extractfile(info)
        data = member.read() if member is not None else b""
        # Stream mode appends every TarInfo to ``members`` (an attribute typeshed does not
        # declare): dropped after each file, as WebDataset does, so memory stays flat.
        setattr(stream, "members", [])  # noqa: B010
        yield name, data


def shard_samples(open_shard: Callable[[str], Any], name: str, local_path: str | None) -> Iterator[dict[str, Any]]:
    """The samples of shard ``name`` in file order, opened with ``open_shard(name)``
    (``local_path``: the ``"__local_path__"`` of its samples, or None for none).

    Raises:
        ShardReadError: opening or reading failed (``named()`` is the exception to show).
    """
    ordinal = 0
    try:
        fileobj = open_shard(name)
    except Exception as exc:
        close = getattr(exc, "close", None)  # urllib's HTTPError holds the response open
        if callable(close):
            close()
        raise ShardReadError(name, 0, exc) from exc
    try:
        sample: dict[str, Any] | None = None
        with tarfile.open(fileobj=fileobj, mode="r|*", tarinfo=_CheckedInfo) as stream:
            for member, data in _members(stream):
                parts = split_key(member)
                if parts is None:
                    continue
                key, ext = parts[0], parts[1].lower()
                if sample is None or sample["__key__"] != key:
                    if sample is not None:
                        yield sample
                        ordinal += 1
                    sample = {"__key__": key, "__url__": name}
                    if local_path is not None:
                        sample["__local_path__"] = local_path
                if ext in sample:
                    raise ValueError(f"{member}: duplicate file name in tar file {ext} {sorted(sample)}")
                sample[ext] = data
        if sample is not None:
            yield sample
    except Exception as exc:
        if not isinstance(exc, _READ_ERRORS) and not _is_http_error(exc):
            raise
        raise ShardReadError(name, ordinal, exc) from exc
    finally:
        fileobj.close()
