"""``ObjectStoreDataset``: items are objects of a store (S3, GCS, Azure, local, memory).

Runs on obstore (the ``remote`` extra: ``pip install '.[remote]'`` in the checkout, imported on first use),
the Python binding of the Rust ``object_store`` crate: its own async API, its
own connection pool and its own retries.  The dataset's ``Retry`` becomes the
store's ``retry_config`` (``Retry.store_config``) and ``attempt_timeout_s`` its
request time-out, so no second retry loop runs on top: the store retries 5xx
responses, connection errors and time-outs; other errors are final.

Errors: a missing object or bucket raises ``FileNotFoundError``, a refused one
``PermissionError``, a time-out ``TimeoutError``, a key obstore cannot parse
``ValueError``, others ``OSError``, each naming the location; the store's own
exception is the ``__cause__``.  Locations are shown without credentials, in
errors (the cause's message too: obstore names the request's URL) and ``repr``
(see ``HttpDataset``).

``fork()``: obstore runs its requests on one tokio runtime per process, whose
threads a forked child does not inherit; a request there would wait forever.  Once
an ``ObjectStoreDataset`` has fetched in a process, an item fetched in a process
forked from it fails with ``RuntimeError`` (use the ``spawn`` or ``forkserver``
start method, or fetch in the child only).  Other uses of obstore in the parent
are not seen.
"""

from __future__ import annotations

import errno
from typing import Any
from urllib.parse import urlsplit

from dataloader.io._checks import check_max_bytes, check_retry, over_max_bytes
from dataloader.io._clients import ProcessRuntime, RemoteDataset
from dataloader.io._optional import optional_import
from dataloader.io._redact import redact, redact_text
from dataloader.io.hedge import check_hedge
from dataloader.io.locations import Locations
from dataloader.io.ranges import DEFAULT_RANGE_CHUNK_BYTES, RangeSettings, store_ranged_get
from dataloader.io.retry import Retry, seconds_delta
from dataloader.io.template import Template

__all__ = ["ObjectStoreDataset"]

# obstore's one tokio runtime per process: entered when a dataset first fetches in a process.
_RUNTIME = ProcessRuntime("ObjectStoreDataset: obstore's runtime")


def _store_url(location: str) -> str:
    """``scheme://bucket`` of a full object URL.

    Raises:
        ValueError: ``location`` is not ``scheme://bucket/key``.
    """
    try:
        parts = urlsplit(location)
    except ValueError as exc:  # "Invalid IPv6 URL"
        raise ValueError(f"location {redact(location)!r} is not a valid URL ({exc})") from None
    if not parts.scheme or not parts.netloc or not parts.path.strip("/"):
        raise ValueError(f"location {redact(location)!r} is not a scheme://bucket/key URL; or pass url= or store=")
    return f"{parts.scheme}://{parts.netloc}"


def _object_url(url: str | None, key: str) -> str:
    """The object ``key`` of the store at ``url`` as a URL for errors (the key joins the
    path, before a query such as an Azure SAS token); the key alone without ``url``."""
    if url is None:
        return key
    base, q, query = url.partition("?")
    return f"{base if base.endswith('/') else base + '/'}{key}{q}{query}"


class ObjectStoreDataset(RemoteDataset[Any]):
    """The bytes of one object per item.

    Args:
        locations: object keys relative to the store (``url=``/``store=``), or full
            ``scheme://bucket/key`` URLs of one bucket: a sequence, a callable or a
            ``Template`` (see ``Locations``).
        store: an obstore store built by the caller (its own retry and client
            configuration stand; ``retry`` and ``store_options`` must then be left out).
        url: the store's URL, e.g. ``"s3://bucket"``, ``"s3://bucket/prefix"``,
            ``"gs://bucket"``, ``"file:///data"``, ``"memory:///"``.  None: from
            the first location (full URLs).
        retry: the store's retry configuration (see the module).
        max_bytes: the largest object, bytes; a larger one fails with ``ValueError``
            naming its location and size, before its body is read.  None: no limit.
        range_parallel_threshold: bytes; an object at least this large is fetched as
            concurrent ranges of ``range_chunk_bytes`` (at most 8 at once per item), each a
            request of the store with its own retries and time-out, reassembled in order
            (``dataloader.io.ranges``).  None (the default): one GET per object.
        range_chunk_bytes: bytes of each range (8 MiB, boto3's multipart chunk size).
        hedge_delay, hedge_budget: hedged GETs, as ``HttpDataset``'s (default ``"auto"``
            and 0.05; 0, False or None: off): after the delay the object is requested
            again, the first answer wins; each request keeps the store's own time-out
            and retries (see docs/usage.md, "Hedged requests").  With
            ``range_parallel_threshold`` set no object is hedged, not even one below the
            threshold (a delay in seconds is then refused: ``ValueError``).
        **store_options: passed to ``obstore.store.from_url`` (``endpoint``,
            ``region``, ``access_key_id``, ``client_options={...}``, ...).

    Items are ``bytes``, as ``FileDataset``'s and ``HttpDataset``'s: ``Decode()``,
    ``default_collate`` and ``dataloader.torch``'s collation take them as they take
    any bytes.  obstore hands over a buffer in Rust memory (``obstore.Bytes``, which
    both collations refuse, as torch's own does); it is copied once into the
    ``bytes`` (a ``bytes`` object cannot share another object's memory), on the
    event loop thread.  ``Decode()`` then reads the ``bytes`` without a copy.
    Thread-safety: the store may be used from any thread and event loop (it is the
    client of every loop: ``dataloader.io._clients``); the hedging state has one lock per
    dataset.  ``pickle`` and ``copy.deepcopy`` copy the store when it pickles (obstore's
    S3, GCS and Azure stores do).

    Raises (from the constructor):
        ValueError, TypeError: bad arguments or locations (obstore's configuration
            errors come through as they are).
    Raises (for that item's batch):
        IndexError, ValueError, FileNotFoundError, PermissionError, TimeoutError,
        OSError: see the module.
    """

    def __init__(
        self,
        locations: Any,
        *,
        store: Any = None,
        url: str | None = None,
        retry: Retry | None = None,
        max_bytes: int | None = None,
        hedge_delay: float | str | None = "auto",
        hedge_budget: float = 0.05,
        range_parallel_threshold: int | None = None,
        range_chunk_bytes: int = DEFAULT_RANGE_CHUNK_BYTES,
        **store_options: Any,
    ) -> None:
        self.max_bytes = check_max_bytes(max_bytes)
        self.ranges = RangeSettings(range_parallel_threshold, range_chunk_bytes)
        self.hedge = check_hedge(hedge_delay, hedge_budget, self.ranges.threshold)
        locs = Locations(locations)
        if store is not None and (url is not None or retry is not None or store_options):
            raise ValueError("with store=, leave out url=, retry= and store options (the store is configured)")
        self.retry = None if store is not None else check_retry(retry)
        self._prefix = ""
        if store is None and url is None:
            url = _store_url(_first_location(locs))
            self._prefix = url + "/"
        self.url = url
        super().__init__(locs, target="key", check=self._check_key)
        if store is None:
            obstore_store = optional_import("obstore.store", "ObjectStoreDataset")  # lazy: on first use

            assert self.retry is not None and url is not None
            options = dict(store_options)
            client: dict[str, Any] = {"timeout": seconds_delta(self.retry.attempt_timeout_s or 300.0)}
            client.update(options.pop("client_options", None) or {})
            from_url: Any = obstore_store.from_url  # its overloads want literal config keys
            store = from_url(url, retry_config=self.retry.store_config(), client_options=client, **options)
        self.store = store

    def _check_key(self, location: str) -> str:
        if self._prefix:
            if not location.startswith(self._prefix):
                raise ValueError(
                    f"location {redact(location)!r} is not in {redact(self._prefix)!r} (one bucket per dataset)"
                )
            return location[len(self._prefix):]
        if "://" in location:
            raise ValueError(
                f"location {redact(location)!r} is a URL; with url= or store= give keys relative to the store"
            )
        return location

    def _new_client(self) -> Any:
        """The store (one for every loop: obstore's client is thread-safe), once this
        process may use obstore's runtime (see the module: fork)."""
        _RUNTIME.enter()
        return self.store

    async def _fetch(self, store: Any, key: str) -> bytes:
        """The object ``key``'s bytes (see the module for the errors)."""
        import obstore  # lazy: an optional dependency, on first use

        async def get() -> tuple[int, bytes | None]:  # the size, and the body unless over max_bytes
            result = await obstore.get_async(store, key)
            size = result.meta["size"]
            if self.max_bytes is None or size <= self.max_bytes:
                if self.ranges.splits(size):
                    return size, await store_ranged_get(store, key, result, self.ranges)
                return size, bytes(await result.bytes_async())  # obstore.Bytes: see the class docstring
            return size, None

        hedge = self.hedge if self.ranges.threshold is None else None  # a ranged GET is not hedged
        try:
            size, body = await (get() if hedge is None else hedge.run(get))
        except Exception as exc:
            raise _store_error(redact(_object_url(self.url, key)), exc) from exc
        if body is not None:
            return body
        assert self.max_bytes is not None
        raise over_max_bytes(redact(_object_url(self.url, key)), size, self.max_bytes)

    def __repr__(self) -> str:
        url = None if self.url is None else redact(self.url)
        return f"ObjectStoreDataset({self.locations!r}, url={url!r}, max_bytes={self.max_bytes})"


def _first_location(locs: Locations) -> str:
    source = locs.source
    if isinstance(source, Template):
        return source.pattern
    if isinstance(source, tuple):
        if not source:
            raise ValueError("no locations and no url=: cannot tell which store to open")
        return source[0]
    raise ValueError("with a callable location, pass url= or store=")


def _store_error(where: str, exc: BaseException) -> Exception:
    """obstore's ``exc`` as ours, naming ``where`` (redacted); ``exc``'s own message is
    redacted in place, as it stays the ``__cause__`` (obstore names the request's URL, with
    its credentials and query)."""
    from obstore import exceptions as ox  # lazy: an optional dependency

    _scrub(exc)
    text = f"{where}: {type(exc).__name__}: {redact_text(str(exc))}".split("\n")[0]
    if isinstance(exc, ox.NotFoundError) or isinstance(exc, FileNotFoundError):
        return FileNotFoundError(errno.ENOENT, text, where)
    if isinstance(exc, (ox.PermissionDeniedError, ox.UnauthenticatedError, PermissionError)):
        return PermissionError(errno.EACCES, text, where)
    if isinstance(exc, TimeoutError) or "timed out" in str(exc).lower():
        return TimeoutError(text)
    if isinstance(exc, ValueError):  # a key obstore cannot parse ("a//b", a control character)
        return ValueError(text)
    return OSError(text)


def _scrub(exc: BaseException) -> None:
    """Redact the URLs in the messages of ``exc`` and the exceptions it chains (in place)."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if any(isinstance(a, str) and "://" in a for a in at.args):
            at.args = tuple(redact_text(a) if isinstance(a, str) else a for a in at.args)
        at = at.__cause__ or at.__context__
