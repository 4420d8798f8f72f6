"""Opening a tar shard as a stream of bytes: a local file, an HTTP(S) URL or an object-store key.

Nothing is downloaded before the first sample: a shard is read front to back in chunks
(``SHARD_CHUNK_BYTES``), as ``tarfile``'s stream mode (``r|*``) asks for them.

- A local path (or ``file://`` URL): ``open(path, "rb")`` with a buffer of one chunk.
- ``http://`` / ``https://``: the standard library's ``urllib.request.urlopen`` (one GET per
  shard, its response body read as it arrives; ``timeout_s`` bounds each blocking read).  The
  loader's ``HttpDataset`` client (aiohttp) runs on an event loop and returns whole bodies;
  a shard is read synchronously by the worker thread that iterates it, so a blocking
  response stream is the fitting client here.  No retry: a failed shard is the shard's error.
- An object store (``store=``, an obstore store, and keys; or ``s3://``, ``gs://``, ``az://``,
  ``memory://`` URLs, one store per bucket): ``obstore.get(store, key).stream()``, iterated
  synchronously chunk by chunk (obstore's requests run on its own runtime; the calling thread
  waits for each chunk).

Shown names (errors, ``repr``) are redacted (``dataloader.io._redact.redact``): no userinfo
and no secret query parameters.
"""

from __future__ import annotations

import io
import threading
from typing import Any
from urllib.parse import urlsplit

from dataloader.io._redact import redact

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

    Thread-safety: ``open`` may be called from any thread; obstore stores made from URLs are
    cached per bucket under a lock.
    """

    def __init__(self, store: Any, timeout_s: float) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._stores: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "timeout_s": self.timeout_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.store, self.timeout_s = state["store"], state["timeout_s"]
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
            import urllib.request  # lazy: only HTTP shards need it

            return urllib.request.urlopen(name, timeout=self.timeout_s)  # noqa: S310 - the user's URL
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
                import obstore.store  # lazy: an optional dependency (the 'remote' extra)

                from_url: Any = obstore.store.from_url
                store = self._stores[url] = from_url(url)
            return store

    @staticmethod
    def _from_store(store: Any, key: str) -> Any:
        import obstore  # lazy: an optional dependency (the 'remote' extra)

        result = obstore.get(store, key)
        return io.BufferedReader(StoreStream(result.stream(min_chunk_size=SHARD_CHUNK_BYTES)), SHARD_CHUNK_BYTES)
