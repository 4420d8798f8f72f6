"""Opening a tar shard as a stream of bytes: a local file, an HTTP(S) URL or an object-store key.

Nothing is downloaded before the first sample: a shard is read front to back in chunks
(``SHARD_CHUNK_BYTES``), as ``tarfile``'s stream mode (``r|*``) asks for them.

- A local path (or ``file://`` URL): ``open(path, "rb")`` with a buffer of one chunk.
- ``http://`` / ``https://``: ``HttpShardStream`` (``_http_shard``): one GET per shard with the
  standard library's client, its body read as it arrives; failed requests retried and a
  connection cut mid-stream resumed by ``Range`` from the byte reached, per ``retry``
  (``Retry``), guarded by the first response's ETag.  Why not aiohttp: see that module.
- An object store (``store=``, an obstore store, and keys; or ``s3://``, ``gs://``, ``az://``,
  ``memory://`` URLs, one store per bucket): ``obstore.get(store, key).stream()``, iterated
  synchronously chunk by chunk (obstore's requests run on its own runtime; the calling thread
  waits for each chunk).  obstore retries by itself, mid-stream included: its ``object_store``
  (0.12.2 and later; checked against obstore 0.10.1) requests the rest of a GET cut mid-body
  with a ``Range`` from the byte reached and refuses a response whose ETag changed, within the
  store's ``retry_config``.  A store made here from a URL gets ``retry.store_config()``; a
  ``store=`` keeps its own configuration.

Shown names (errors, ``repr``) are redacted (``dataloader.io._redact.redact``): no userinfo
and no secret query parameters.
"""

from __future__ import annotations

import io
import threading
from typing import Any
from urllib.parse import urlsplit

from dataloader.io._optional import optional_import
from dataloader.io._redact import redact
from dataloader.io.retry import Retry

__all__ = ["SHARD_CHUNK_BYTES", "ShardSource", "StoreStream"]

# One read of a shard: 1 MiB, the size at which a local read stops gaining from larger reads
# here and an HTTP or object-store chunk still arrives well within the default time-out.
SHARD_CHUNK_BYTES = 1 << 20

_STORE_SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss", "azure", "memory")


class StoreStream(io.RawIOBase):
    """A readable raw stream over an iterator of byte chunks (obstore's ``BytesStream``).

    Thread-safety: one reader thread.
    """

    def __init__(self, chunks: Any) -> None:
        self._chunks = iter(chunks)
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(bytes(chunk))
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


class ShardSource:
    """Where the shards are and how to open one (see the module).

    Args:
        store: an obstore store whose keys the shard names are, or None.
        timeout_s: seconds an HTTP connect or read may block (> 0).
        retry: HTTP shards' retries and resumes; the configuration of object stores made from
            URLs (``Retry.store_config``).

    Thread-safety: ``open`` may be called from any thread; obstore stores made from URLs are
    cached per bucket under a lock.
    """

    def __init__(self, store: Any, timeout_s: float, retry: Retry) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self.retry = retry
        self._lock = threading.Lock()
        self._stores: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "timeout_s": self.timeout_s, "retry": self.retry}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.store, self.timeout_s, self.retry = state["store"], state["timeout_s"], state["retry"]
        self._lock = threading.Lock()
        self._stores = {}

    def local_path(self, name: str) -> str | None:
        """The file of a local shard (a path or ``file://`` URL), or None."""
        if self.store is not None:
            return None
        if "://" not in name:
            return name
        parts = urlsplit(name)
        return parts.path if parts.scheme.lower() == "file" else None

    def open(self, name: str) -> Any:
        """A readable binary stream of shard ``name``; close it when done.

        Raises:
            OSError (FileNotFoundError, PermissionError, ...), ValueError: as the client
                raises them (the caller names the shard).
            ImportError: an object-store shard without obstore installed.
        """
        if self.store is not None:
            return self._from_store(self.store, name)
        scheme = urlsplit(name).scheme.lower() if "://" in name else ""
        if scheme in ("http", "https"):
            from dataloader.formats._http_shard import HttpShardStream  # lazy: it imports urllib

            return io.BufferedReader(HttpShardStream(name, self.retry, self.timeout_s), SHARD_CHUNK_BYTES)
        if scheme in _STORE_SCHEMES:
            parts = urlsplit(name)
            return self._from_store(self._bucket(f"{parts.scheme}://{parts.netloc}"), parts.path.lstrip("/"))
        if scheme == "file":
            name = urlsplit(name).path
        elif scheme:
            raise ValueError(f"shard {redact(name)!r}: unknown scheme {scheme!r} (a path, http(s):// or an object store)")
        return open(name, "rb", buffering=SHARD_CHUNK_BYTES)  # noqa: SIM115 - the caller closes it

    def _bucket(self, url: str) -> Any:
        with self._lock:
            store = self._stores.get(url)
            if store is None:
                from_url: Any = optional_import("obstore.store", "TarShardDataset").from_url  # lazy: the 'remote' extra
                store = self._stores[url] = from_url(url, retry_config=self.retry.store_config())
            return store

    @staticmethod
    def _from_store(store: Any, key: str) -> Any:
        result = optional_import("obstore", "TarShardDataset").get(store, key)  # lazy: the 'remote' extra
        return io.BufferedReader(StoreStream(result.stream(min_chunk_size=SHARD_CHUNK_BYTES)), SHARD_CHUNK_BYTES)
