"""``HttpDataset``: items are the bodies of HTTP(S) GET responses, on aiohttp.

aiohttp (the ``remote`` extra: ``pip install '.[remote]'`` in the checkout, imported on first use) is the
client: it is maintained, asyncio-native, ships a wheel for every interpreter
we support (a pure-Python one on 3.13t), keeps a pool of keep-alive connections
(``TCPConnector(limit=max_connections)``) and streams bodies, so ``max_bytes``
stops a large body after at most ``max_bytes`` bytes.  httpx was the other
candidate; its async client runs on anyio and httpcore, a longer path per
request for the thousands of small requests a loader makes.

Failures: statuses 408, 429, 500, 502, 503 and 504, connection and transport
errors (refused, reset, a body cut short) and the per-attempt time-out are
transient and tried again by ``retry``; other statuses are final: 404 and 410
raise ``FileNotFoundError``, 401 and 403 ``PermissionError``, others ``OSError``.
A response that is not HTTP (a garbage or HTTP/0.9 status line, status 9999 or
000, a bad or duplicate ``Content-Length``, a header over aiohttp's 8,190 bytes
or too many headers, a bad chunk size) is a protocol error: ``OSError`` with
``errno.EPROTO`` and ``status`` None, final (aiohttp's own ``ClientResponseError``
says ``status=400``, which no server sent, and is no ``OSError``).  No aiohttp
exception leaves a dataset as it is.  Each error names the URL and, for a
status, the status (``exc.status``).

URLs are shown without credentials, in every error (message, ``filename``)
and in ``repr``: userinfo (``user:password@``) and the values of secret-looking
query parameters (``token``, ``sig``, ``X-Amz-Signature``, ...) become ``***``
(the rule: ``dataloader.io._redact``).  No error chains the exception it was
made from (``__cause__`` and ``__context__`` are None): aiohttp's exceptions
hold the request's URL and headers (``ClientResponseError.request_info``, with
the ``Authorization`` header that URL credentials become), and a log handler or
error reporter may walk a chain, hidden or not.  Each error is raised outside the
handler that caught aiohttp's, and names its type and its (redacted) message
instead.  A URL with credentials and an ``Authorization`` header in ``headers``
is refused (``ValueError``, final): aiohttp cannot send both.
A 429 or 503 with ``Retry-After`` (seconds or an HTTP date) waits at least that
long before the next attempt, capped by ``Retry.max_backoff_s`` (``Retry.wait_s``).

Redirects (301, 302, 303, 307, 308) are followed, at most ``MAX_REDIRECTS`` (10,
aiohttp's default), only to the scheme, host and port of the item's own URL: a
redirect to another origin fails the item with ``PermissionError`` naming both
URLs (final, not retried), so a server cannot send the loader, with the
dataset's ``headers``, to a host its locations do not name (the rule a
``Template`` keeps for its values).  More redirects raise ``OSError``.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any
from urllib.parse import urlsplit

from dataloader.io._checks import check_max_bytes, check_retry, over_max_bytes
from dataloader.io._clients import RemoteDataset
from dataloader.io._http_errors import (
    TRANSIENT_STATUSES, Transport, client_error, protocol_error, redirect_refused, status_error, transient,
)
from dataloader.io._optional import optional_import
from dataloader.io._redact import redact, redact_text, redact_url
from dataloader.io.hedge import check_hedge
from dataloader.io.ranges import DEFAULT_RANGE_CHUNK_BYTES, HttpRangedGet, RangeSettings
from dataloader.io.retry import Retry
from dataloader.io.template import plain_url

__all__ = ["HttpDataset", "TRANSIENT_STATUSES"]

# aiohttp's own defaults, kept: TCPConnector(limit=100); ClientTimeout(total=300 s).
DEFAULT_MAX_CONNECTIONS = 100
DEFAULT_TIMEOUT_S = 300.0
MAX_REDIRECTS = 10  # aiohttp's default max_redirects
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _same_origin_redirect(url: str, resp: Any) -> str:
    """The URL a redirect response points to, if it has the origin of ``url``.

    Raises:
        PermissionError: the redirect leaves ``url``'s scheme, host and port, or adds
            credentials (``user:password@``) that ``url`` does not have (naming both URLs,
            redacted).
        ValueError: its ``Location`` is not a URL.
    """
    import yarl  # lazy: aiohttp's dependency, on first use

    try:
        target = resp.url.join(yarl.URL(resp.headers["Location"]))
    except ValueError as exc:
        bad: str | None = redact_text(str(exc))
    else:
        bad = None
    if bad is not None:  # raised here, not in the handler: nothing chained (see the module)
        raise ValueError(f"{redact(url)}: redirect to an invalid URL {redact(resp.headers['Location'])!r} ({bad})")
    origin = yarl.URL(url)
    why = ""
    if (target.scheme, target.host, target.port) != (origin.scheme, origin.host, origin.port):
        why = f"redirects are followed only to the same scheme, host and port ({origin.origin()})"
    elif target.raw_user is not None and (target.raw_user, target.raw_password) != (
        origin.raw_user, origin.raw_password
    ):
        why = "a redirect may not add or change credentials (user:password@) in the URL"
    if why:
        text = f"{redact(url)}: HTTP {resp.status} redirect to {redact(str(target))} refused: {why}"
        raise redirect_refused(redact(url), resp.status, text)
    return str(target)


def _has_userinfo(url: str) -> bool:
    """True when ``url`` has a user name or password (``user:password@``)."""
    if "@" not in url:
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False  # aiohttp refuses it by itself (an invalid URL)
    return bool(parts.username or parts.password)


def _check_url(location: str) -> str:
    if location.startswith(("http://", "https://")) and plain_url(location):
        # urlsplit would take it as it is: its scheme http(s), its host up to the first "/?#"
        host = location[location.index("//") + 2 :]
        if host[:1] not in ("", "/", "?", "#"):
            return location
    try:
        parts = urlsplit(location)
    except ValueError as exc:  # "Invalid IPv6 URL", a bad port
        bad: str | None = str(exc)
    else:
        bad = None
    if bad is not None:  # raised here, not in the handler: nothing chained (see the module)
        raise ValueError(f"location {redact_url(location)!r} is not a valid URL ({bad})")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"location {redact_url(location)!r} is not an http:// or https:// URL with a host")
    return location


class HttpDataset(RemoteDataset[Any]):
    """The body of one HTTP(S) GET per item.

    Args:
        locations: URLs: a sequence, a callable or a ``Template`` (values are
            percent-encoded; see ``Locations``).  ``len(dataset)`` is their number.
        retry: when to try again (see the module); its ``attempt_timeout_s`` bounds
            one attempt, body included.
        max_bytes: the largest body, bytes; a larger one fails with ``ValueError``
            naming the URL and size, after reading at most ``max_bytes`` bytes (at
            once when ``Content-Length`` says so).  None: no limit.
        timeout_s: seconds for one item, every attempt and backoff included
            (aiohttp's default total time-out, 300 s); None: no limit beyond ``retry``.
        headers: sent with every request (e.g. ``Authorization``).
        max_connections: open connections at most, per loader event loop
            (aiohttp's default, 100); 0 for no limit.  Requests beyond it wait for a
            free connection, so size it with ``item_concurrency``.
        range_parallel_threshold: bytes; a body at least this large, from a server that says
            ``Accept-Ranges: bytes``, is fetched as concurrent ``Range`` requests of
            ``range_chunk_bytes`` each (at most 8 at once per item), reassembled in order
            (``dataloader.io.ranges``; e.g. ``32 << 20``).  None (the default): one GET per
            item, as without ranges.
        range_chunk_bytes: bytes of each range (8 MiB, boto3's multipart chunk size).
        hedge_delay: seconds after which a slow item is requested a second time, the
            first answer winning (``dataloader.io.hedge``); ``"auto"`` (default): 2x the
            95th percentile of the last 1,000 latencies, once 50 are known; 0, False or
            None: never (exactly the requests made without hedging).  With
            ``range_parallel_threshold`` set no item is hedged, not even one below the
            threshold (a delay in seconds is then refused: ``ValueError``).
        hedge_budget: hedges per item requested at most, a share in [0, 1] (default
            0.05: at most 5% extra requests); 0: never hedge.  Counted in ``loader.stats``
            (``hedges_sent``, ``hedges_won``) and ``request_counts()``.

    Attribute ``hedge``: the dataset's ``dataloader.io.hedge.Hedge``, None with hedging off;
    ``ds.hedge.delay_s()`` is the delay in force (seconds; None while ``"auto"`` has fewer
    than 50 latencies), what to size ``prefetch_depth`` by (docs/usage.md, "Hedged requests").

    Items are ``bytes``.  Redirects are followed within the URL's scheme, host and
    port (at most 10); one to another origin fails with ``PermissionError``.
    Cookies are neither kept nor sent (unless given in ``headers``): an item's bytes
    depend on its URL and ``headers`` only, never on which items were fetched before.
    Thread-safety: the coroutines run on event loops; one session (connection
    pool) per loop and process, created on first use and closed by ``aclose()``
    (``dataloader.io._clients``).  The hedging state (latency window, tokens, counts) has
    one lock per dataset, shared by every loop.  ``copy.copy`` shares the sessions;
    ``pickle`` and ``copy.deepcopy`` raise ``TypeError`` (a copy would carry ``headers``'
    credentials).

    Raises (for that item's batch; every URL shown without credentials, see the module):
        IndexError: the index is out of range.
        ValueError: a refused or invalid location, a body over ``max_bytes``, or a URL
            with credentials while ``headers`` has an ``Authorization`` header (and from
            the constructor: a bad argument, e.g. ``hedge_budget`` outside [0, 1]).
        TimeoutError: the last attempt timed out, or ``timeout_s`` passed.
        FileNotFoundError, PermissionError, ConnectionError, OSError: see the module
            (``PermissionError`` also for a redirect to another origin; ``OSError`` with
            ``errno.EPROTO`` and ``status`` None for a response that is not HTTP).
    """

    pickles = False  # a copy would carry the headers' credentials; build a new one instead

    def __init__(
        self,
        locations: Any,
        *,
        retry: Retry | None = None,
        max_bytes: int | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        headers: dict[str, str] | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        range_parallel_threshold: int | None = None,
        range_chunk_bytes: int = DEFAULT_RANGE_CHUNK_BYTES,
        hedge_delay: float | str | None = "auto",
        hedge_budget: float = 0.05,
    ) -> None:
        self.retry = check_retry(retry)
        self.max_bytes = check_max_bytes(max_bytes)
        if timeout_s is not None and (isinstance(timeout_s, bool) or not timeout_s > 0):
            raise ValueError(f"timeout_s={timeout_s!r} must be > 0 or None")
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 0:
            raise ValueError(f"max_connections={max_connections!r} must be an int >= 0")
        self.timeout_s = timeout_s
        self.headers = dict(headers or {})
        self._authorization = any(str(name).lower() == "authorization" for name in self.headers)
        self.max_connections = max_connections
        self.ranges = RangeSettings(range_parallel_threshold, range_chunk_bytes)
        self.hedge = check_hedge(hedge_delay, hedge_budget, self.ranges.threshold)
        super().__init__(locations, target="url", check=_check_url)

    def _new_client(self) -> Any:
        """This loop's ``aiohttp.ClientSession`` (see ``dataloader.io._clients``)."""
        aiohttp = optional_import("aiohttp", "HttpDataset")  # lazy: on first use

        connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0)
        return aiohttp.ClientSession(  # no cookie jar: an item is its URL's, whatever came before
            connector=connector, headers=self.headers, timeout=aiohttp.ClientTimeout(total=None),
            cookie_jar=aiohttp.DummyCookieJar(),
        )

    async def _fetch(self, session: Any, url: str) -> bytes:
        """The body at ``url``, every attempt on ``session`` (see the module for the errors)."""
        import asyncio

        if self._authorization and _has_userinfo(url):
            raise ValueError(
                f"{redact(url)}: has credentials (user:password@) and headers= has an Authorization "
                "header: aiohttp sends one or the other, give one"
            )
        failed: Exception
        try:
            if self.ranges.threshold is not None:  # a ranged GET is not hedged (docs/usage.md)
                async with asyncio.timeout(self.timeout_s):
                    return await HttpRangedGet(
                        self.ranges, lambda headers, reader: self._attempt(session, url, headers, reader),
                        lambda resp: self._read_body(url, resp), self.retry, transient, lambda: redact(url),
                        self.max_bytes,
                    ).fetch()
            # timeout_s as a deadline each attempt's own timer keeps: one asyncio timer per
            # attempt, not one more around them all (Retry.run_async; docs/benchmarks.md).
            deadline = None if self.timeout_s is None else asyncio.get_running_loop().time() + self.timeout_s

            def fetch() -> Coroutine[Any, Any, bytes]:  # errors name redact(url), made only when one is raised
                return self.retry.run_async(
                    lambda: self._attempt(session, url), transient, lambda: redact(url), deadline,
                )

            return await (fetch() if self.hedge is None else self.hedge.run(fetch))
        except Transport as exc:  # the last attempt's: a plain ConnectionError for the user
            failed = ConnectionError(str(exc))
        except TimeoutError as exc:
            failed = TimeoutError(str(exc) or f"{redact(url)}: not fetched within timeout_s={self.timeout_s}")
        raise failed  # outside the handlers: it chains nothing (see the module)

    async def _attempt(self, session: Any, url: str, headers: Any = None, reader: Any = None) -> Any:
        """One GET of ``url``, redirects followed; errors name ``redact(url)``.  ``headers``:
        added to this request's; ``reader(resp)`` reads the final response (default: its body).

        Every aiohttp exception is mapped here (none leaves as it is): see the module.
        """
        import aiohttp  # lazy: optional; its session was made by _new_client, which imported it

        at = url
        failed: Exception
        try:
            for _ in range(MAX_REDIRECTS + 1):
                async with session.get(at, allow_redirects=False, headers=headers) as resp:
                    if resp.status in _REDIRECTS and "Location" in resp.headers:
                        at = _same_origin_redirect(url, resp)
                        continue
                    if resp.status < 200:  # "HTTP/1.1 000": no final status at all
                        raise protocol_error(redact(url), f"status {resp.status} is not a final response status")
                    if resp.status >= 300:
                        raise status_error(redact(url), resp.status, resp.reason, resp.headers.get("Retry-After"))
                    return await (self._read_body(url, resp) if reader is None else reader(resp))
            failed = OSError(f"{redact(url)}: too many redirects (more than {MAX_REDIRECTS}; the last to {redact(at)})")
        except UnicodeError as exc:  # yarl: a host IDNA cannot encode ("a..b", a label over 63)
            failed = ValueError(f"{redact(url)}: invalid URL (its host: {exc})")
        except aiohttp.ClientError as exc:
            failed = client_error(redact(url), exc)
        raise failed  # outside the handlers: aiohttp's exception (its request_info) is not chained

    async def _read_body(self, url: str, resp: Any) -> bytes:
        limit = self.max_bytes
        if limit is not None and resp.content_length is not None and resp.content_length > limit:
            raise over_max_bytes(redact(url), resp.content_length, limit)
        chunks = []
        got = 0
        read = resp.content.readany  # what iter_any() iterates, without its iterator's frames
        while chunk := await read():
            if limit is not None:
                got += len(chunk)
                if got > limit:
                    raise over_max_bytes(redact(url), f"more than {limit}", limit)
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def __repr__(self) -> str:
        return f"HttpDataset({self.locations!r}, max_bytes={self.max_bytes}, timeout_s={self.timeout_s})"
