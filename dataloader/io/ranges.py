"""Ranged GETs: one large object fetched as concurrent byte ranges, reassembled in order.

One connection is often limited well below the link (a server's or a proxy's per-connection
rate, TCP's window at a long round trip; S3 serves ~85-90 MB/s per connection, its guidance
being one request per ~85 MB/s wanted).  An object at least ``range_parallel_threshold``
bytes large is therefore fetched as ``ceil(size / range_chunk_bytes)`` parts at once:

1. The item's GET is sent as always, without ``Range``.  Its headers decide: when the body is
   at least the threshold large (``Content-Length``), the server says ``Accept-Ranges:
   bytes``, the body is not content-encoded and it fits ``max_bytes``, the parts after the
   first are requested at once (``Range: bytes=a-b``, ``If-Match`` with a strong ``ETag``,
   ``Accept-Encoding: identity``), and the first part is read from this same response, which
   is then closed (its connection dropped) after ``range_chunk_bytes`` bytes.  So the size
   costs no round trip of its own (no HEAD: the AWS CRT's S3 client learns it from its first
   part too), and an object below the threshold, or from a server without ranges, is one
   GET as before.
2. Each part is a request of its own, tried again by ``Retry`` as a whole item is (its
   ``attempt_timeout_s`` bounds each attempt of each part); ``timeout_s`` bounds the item,
   all parts together.  At most ``RANGES_IN_FLIGHT`` requests of one item run at once, and
   as many asyncio tasks: the first part's response and ``RANGES_IN_FLIGHT - 1`` runners,
   each taking the next part not started (in order) when its last one is in, so a tiny
   ``range_chunk_bytes`` (65,536 parts of 1 KiB for 64 MiB) costs 8 tasks, not one per part.
3. A part answered ``206`` must say ``Content-Range: bytes a-b/size`` exactly as asked (and
   the first response's ``ETag``, when both have one); anything else fails the item with
   ``OSError`` (the object changed, or the server is broken), final.  A part answered
   ``200`` (a server that advertises ranges but ignores ``Range``) is read up to the part's
   end and its bytes kept: correct, at the cost of the bytes before the part.
4. The first part that fails finally cancels the others and fails the item with its own
   error (naming the URL, redacted); cancelling the item cancels every part.

Reassembly: each part is a list of the chunks aiohttp received, and the item is one
``b"".join`` over all of them in order: one copy, as for a plain GET of several chunks (a
preallocated ``bytearray`` would need a second copy into the ``bytes`` an item is).

``ObjectStoreDataset`` does the same through obstore: ``get_async`` learns the size, its
stream gives the first part, and ``get_async(range=(a, b), if_match=e_tag)`` each other part
(obstore's own ``get_ranges`` would merge adjacent ranges into one request).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dataloader.io._checks import over_max_bytes
from dataloader.io.retry import Retry

__all__ = [
    "DEFAULT_RANGE_CHUNK_BYTES", "RANGES_IN_FLIGHT", "HttpRangedGet", "RangeSettings", "parse_content_range",
    "store_ranged_get",
]

# boto3's (and the AWS CLI's) multipart_chunksize, 8 MiB; S3's guidance is 8-16 MiB parts.
DEFAULT_RANGE_CHUNK_BYTES = 8 << 20
# Requests (and asyncio tasks) of one item at once: 8 x ~85 MB/s (S3's per-connection rate) is
# ~5.7 Gb/s for one object, and item_concurrency items of 8 stay within a few hundred connections.
RANGES_IN_FLIGHT = 8

T = TypeVar("T")

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", re.ASCII | re.IGNORECASE)

# get(headers, reader): one attempt of the item's GET with extra headers; reader(resp) reads
# a final 2xx response.  read_body(resp): the dataset's plain reading of a whole body.
Get = Callable[[Mapping[str, str] | None, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class RangeSettings:
    """When and how an object is fetched in ranges (see the module).

    Args:
        threshold: bytes; an object at least this large (and larger than ``chunk_bytes``)
            is fetched in parts.  None: never (one GET per item).
        chunk_bytes: bytes of each part (the last one may be shorter), >= 1.

    Raises:
        TypeError, ValueError: a value that is not an int of the range above (naming it).
    """

    threshold: int | None
    chunk_bytes: int = DEFAULT_RANGE_CHUNK_BYTES

    def __post_init__(self) -> None:
        if self.threshold is not None:
            _check_bytes("range_parallel_threshold", self.threshold, "; None: no ranges")
        _check_bytes("range_chunk_bytes", self.chunk_bytes, "")

    def splits(self, size: int) -> bool:
        """True when an object of ``size`` bytes is fetched in more than one part."""
        return self.threshold is not None and size >= self.threshold and size > self.chunk_bytes

    def parts(self, size: int) -> list[tuple[int, int]]:
        """The parts of an object of ``size`` bytes: ``(start, end)``, end exclusive, in order."""
        step = self.chunk_bytes
        return [(a, min(a + step, size)) for a in range(0, size, step)]


def _check_bytes(name: str, value: Any, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int (bytes), got {type(value).__name__} ({value!r})")
    if value < 1:
        raise ValueError(f"{name}={value!r} must be >= 1 (bytes){hint}")


def parse_content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """``Content-Range: bytes a-b/size`` as ``(a, b + 1, size)`` (``size`` None for ``*``);
    None when absent or not of that form."""
    match = _CONTENT_RANGE.fullmatch(value or "")
    if match is None:
        return None
    total = None if match[3] == "*" else int(match[3])
    return int(match[1]), int(match[2]) + 1, total


def _strong(etag: str | None) -> str | None:
    """``etag`` when it is a strong validator (``If-Match`` compares strongly), else None."""
    return etag if etag and not etag.startswith("W/") else None


async def _read_part(resp: Any, skip: int, want: int) -> list[bytes]:
    """``want`` bytes of ``resp``'s body after its first ``skip``, as received (trimmed)."""
    chunks: list[bytes] = []
    at, end = 0, skip + want
    async for chunk in resp.content.iter_any():
        lo, hi = at, at + len(chunk)
        at = hi
        if hi <= skip:
            continue
        chunks.append(chunk if lo >= skip and hi <= end else chunk[max(skip - lo, 0) : end - lo])
        if at >= end:
            break
    return chunks


def _runners(group: asyncio.TaskGroup, parts: Sequence[tuple[int, int]],
             fetch: Callable[[int, int], Awaitable[list[Any]]]) -> list[list[Any]]:
    """``parts`` fetched by ``RANGES_IN_FLIGHT - 1`` tasks of ``group`` at most (the first part
    is read beside them; one task however small the constant is set), each taking the next part
    not started, in order.  Returns the list
    each part's chunks land in at its position, complete once ``group`` has ended without
    an error."""
    got: list[list[Any]] = [[] for _ in parts]
    todo: Iterator[tuple[int, tuple[int, int]]] = iter(enumerate(parts))

    async def runner() -> None:
        for i, (a, b) in todo:  # one iterator shared by the runners, all on this loop's thread
            got[i] = await fetch(a, b)

    # one runner at least: RANGES_IN_FLIGHT set to 1 (or less) must not leave the parts unfetched
    for _ in range(min(max(RANGES_IN_FLIGHT - 1, 1), len(parts))):
        group.create_task(runner())
    return got


async def _in_group(body: Callable[[asyncio.TaskGroup], Coroutine[Any, Any, T]]) -> T:
    """``body(group)`` run as a task of a new ``TaskGroup`` that it may add parts to; the first
    task to fail cancels the others and its exception is raised as it is (not in a group)."""
    failed: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
            task: asyncio.Task[T] = group.create_task(body(group))
    except BaseExceptionGroup as errors:
        failed = errors.exceptions[0]
    if failed is not None:
        raise failed  # outside the handler: the error chains nothing (see dataloader.io.http)
    return task.result()


class HttpRangedGet:
    """One item of an ``HttpDataset`` with ranges on: ``await HttpRangedGet(...).fetch()``.

    Args:
        settings: when to split (``RangeSettings``).
        get: ``get(headers, reader)``, one attempt of the item's GET with ``headers`` added,
            redirects followed and statuses >= 300 raised; ``reader(resp)`` reads the final
            response (aiohttp's ``ClientResponse``).
        read_body: the dataset's reading of a whole body (``max_bytes`` enforced).
        retry, transient: the dataset's ``Retry`` and its rule for a transient failure.
        name: the URL as shown (redacted), made when an error needs it.
        max_bytes: the largest object, bytes; None: no limit.

    Not thread-safe: one per item, on the item's event loop.

    Raises:
        Whatever ``get`` raises for the first request or a part (the first to fail).
        ValueError: the object is over ``max_bytes`` (before its body is read).
        OSError: a part answered with another range, size or ``ETag`` (final).
    """

    def __init__(self, settings: RangeSettings, get: Get, read_body: Callable[[Any], Awaitable[bytes]],
                 retry: Retry, transient: Callable[[BaseException], bool], name: Callable[[], str],
                 max_bytes: int | None) -> None:
        self.settings, self.get, self.read_body = settings, get, read_body
        self.retry, self.transient, self.name, self.max_bytes = retry, transient, name, max_bytes
        self.size: int | None = None  # set once the first response said to split
        self.etag: str | None = None
        self.rest: list[list[bytes]] = []  # the chunks of the parts after the first, in order

    async def fetch(self) -> bytes:
        """The object's bytes, in parts when the first response allows (see the module)."""
        first = await _in_group(self._first)
        if self.size is None:
            return first
        return b"".join([chunk for part in [first, *self.rest] for chunk in part])

    async def _first(self, group: asyncio.TaskGroup) -> Any:
        async def attempt() -> Any:
            if self.size is None:
                return await self.get(None, lambda resp: self._decide(group, resp))
            a, b = self.settings.parts(self.size)[0]  # a retry of the first part: a range of its own
            return await self.get(self._headers(a, b), lambda resp: self._read_range(resp, a, b))

        return await self.retry.run_async(attempt, self.transient, self.name)

    async def _decide(self, group: asyncio.TaskGroup, resp: Any) -> Any:
        """The first response: its whole body, or (splitting) the first part's chunks, the
        other parts started beside it."""
        size = resp.content_length
        encoded = resp.headers.get("Content-Encoding", "identity").lower() != "identity"
        ranges = "bytes" in resp.headers.get("Accept-Ranges", "").lower()
        if resp.status != 200 or size is None or encoded or not ranges or not self.settings.splits(size):
            return await self.read_body(resp)
        if self.max_bytes is not None and size > self.max_bytes:
            raise over_max_bytes(self.name(), size, self.max_bytes)
        self.size, self.etag = size, resp.headers.get("ETag")
        parts = self.settings.parts(size)
        self.rest = _runners(group, parts[1:], self._part)
        a, b = parts[0]
        chunks = await _read_part(resp, 0, b - a)
        resp.close()  # the rest of the body is the other parts': drop the connection
        return self._whole(chunks, a, b)

    async def _part(self, a: int, b: int) -> list[bytes]:
        return await self.retry.run_async(
            lambda: self.get(self._headers(a, b), lambda resp: self._read_range(resp, a, b)),
            self.transient, lambda: f"{self.name()} (bytes {a}-{b - 1})",
        )

    def _headers(self, a: int, b: int) -> dict[str, str]:
        headers = {"Range": f"bytes={a}-{b - 1}", "Accept-Encoding": "identity"}
        if _strong(self.etag):
            headers["If-Match"] = str(self.etag)
        return headers

    async def _read_range(self, resp: Any, a: int, b: int) -> list[bytes]:
        """Part ``[a, b)`` from ``resp``: a 206 of exactly that range, or a 200 (Range ignored);
        either with the first response's ``ETag`` (when both have one)."""
        etag = resp.headers.get("ETag")
        if self.etag and etag and etag != self.etag:  # a 200 too: a whole body of another object
            raise self._changed(f"its ETag was {self.etag}, now {etag}")
        if resp.status == 206:
            said = parse_content_range(resp.headers.get("Content-Range"))
            if said is None or said[:2] != (a, b) or said[2] not in (None, self.size):
                raise self._changed(f"asked bytes {a}-{b - 1} of {self.size}, got Content-Range "
                                    f"{resp.headers.get('Content-Range')!r}")
            return self._whole(await _read_part(resp, 0, b - a), a, b)
        if resp.status == 200 and resp.content_length in (None, self.size):
            chunks = await _read_part(resp, a, b - a)  # the server ignored Range: skip to the part
            resp.close()
            return self._whole(chunks, a, b)
        raise self._changed(f"asked bytes {a}-{b - 1} of {self.size}, got HTTP {resp.status} "
                            f"with Content-Length {resp.content_length}")

    def _whole(self, chunks: list[bytes], a: int, b: int) -> list[bytes]:
        got = sum(map(len, chunks))
        if got != b - a:
            raise self._changed(f"bytes {a}-{b - 1}: the body ended after {got} of {b - a} bytes")
        return chunks

    def _changed(self, why: str) -> OSError:
        return OSError(f"{self.name()}: ranged GET refused: {why} (the object changed, or the server "
                       "answers ranges wrongly)")


async def store_ranged_get(store: Any, key: str, first: Any, settings: RangeSettings) -> bytes:
    """The object ``key`` of an obstore ``store`` in parts, its ``get_async`` result ``first``
    giving the size and the first part (see the module).

    Raises:
        obstore's exceptions, as they are (the dataset maps them), the first part to fail's;
        OSError: a part's length is not the one asked (the object changed).
    """
    import obstore  # lazy: an optional dependency, on first use

    size = first.meta["size"]
    etag = _strong(first.meta.get("e_tag"))
    parts = settings.parts(size)

    async def part(a: int, b: int) -> list[Any]:
        options: Any = {"range": (a, b)}  # obstore.GetOptions (a TypedDict only its stubs have)
        if etag:
            options["if_match"] = etag
        data = await (await obstore.get_async(store, key, options=options)).bytes_async()
        return _exact([data], a, b, key)

    rest: list[list[Any]] = []

    async def body(group: asyncio.TaskGroup) -> list[Any]:
        nonlocal rest
        rest = _runners(group, parts[1:], part)
        a, b = parts[0]
        chunks: list[Any] = []
        got = 0
        async for chunk in first.stream(min_chunk_size=b - a):
            chunks.append(memoryview(chunk)[: b - a - got])
            got += len(chunks[-1])
            if got >= b - a:
                break
        return _exact(chunks, a, b, key)

    first_chunks = await _in_group(body)  # the group ended: every part of ``rest`` is in
    return b"".join([chunk for part_chunks in [first_chunks, *rest] for chunk in part_chunks])


def _exact(chunks: list[Any], a: int, b: int, key: str) -> list[Any]:
    got = sum(len(memoryview(c)) for c in chunks)
    if got != b - a:
        raise OSError(f"{key}: bytes {a}-{b - 1}: got {got} of {b - a} bytes (the object changed)")
    return chunks
