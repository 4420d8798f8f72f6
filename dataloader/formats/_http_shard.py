"""An HTTP(S) tar shard as a readable stream that retries, and resumes a cut by ``Range``.

One ``GET`` per shard, its body read as it arrives (``read1``: whatever the socket has, so the
first sample comes before the shard is downloaded).  With a ``Retry`` (``dataloader.io.retry``,
the policy ``HttpDataset`` takes):

- **Opening**: a failed connect (refused, reset, DNS, a time-out) or a status in
  ``TRANSIENT_STATUSES`` (408, 429, 500, 502, 503, 504) is tried again after ``Retry``'s
  backoff (at least a 429/503's ``Retry-After``, capped by ``max_backoff_s``); any other
  status fails at once (a 404 is ``urllib``'s ``HTTPError``, an ``OSError``).
- **A cut mid-stream** (the connection closes before ``Content-Length`` bytes, a chunked
  body ends early, a read fails or times out): the rest is requested with
  ``Range: bytes=<bytes already read>-``, guarded by the first response's strong ``ETag``
  (``If-Match`` and ``If-Range``).  A ``206`` must start at that byte with the same ETag; a
  ``200`` (the server ignored the Range) with the same ETag is read again from its start, the
  bytes already read dropped (a correct restart: no sample twice); a ``412``, another ETag,
  or a first response without a strong ETag is the shard's error: two versions of an object
  are never spliced.
- **Attempts**: every request of the shard (the first, each retry, each resume) counts
  against ``max_attempts``; the failure past it is the error.  A response that read at least
  ``PROGRESS_BYTES`` (1 MiB) of the body before its cut made progress: the count starts again
  (its cut is the first failure of a new run, backoff from ``initial_backoff_s``), as robust
  downloaders do, so a long shard cut now and then over hours is not lost.  Bounded: each
  reset needs 1 MiB more of the shard, so at most ``size / 1 MiB`` resets, and a server that
  always cuts sooner fails after ``max_attempts`` requests in a row.
- **Deadlines**: each request's connect and every blocking read wait at most
  ``min(timeout_s, Retry.attempt_timeout_s)`` (a read that waits longer is a cut, resumed).
  The body as a whole has no deadline: it streams at the pace of its reader (the shuffle
  buffer, the transform, the training step), which no time limit can tell from a slow server.

Errors: opening raises what ``urllib`` raises (``HTTPError``, ``URLError``: ``OSError``); a cut
that is not resumed raises ``ValueError`` (a shard cut short, as a truncated file is), naming
the byte it stopped at, the attempts made and why (the caller names the shard, redacted).

Why the standard library's client and not aiohttp (``HttpDataset``'s): a shard is read by the
worker thread that iterates it, synchronously, a chunk at a time, for minutes.  aiohttp would
need an event loop thread per process (or per worker) and a bounded chunk queue bridging it,
with cancellation on an early break, a loop thread a forked child does not inherit, and a
connection closed on the loop's side; ``http.client`` is that blocking stream as it is, closed
by the thread that reads it.  Measured (``benchmarks/bench_tar_http.py``, docs/benchmarks.md
"Tar shards over HTTP"): this reader streamed a 32 MiB HTTP tar epoch at 1.09-1.28x the plain
``urlopen`` one, and a prototype aiohttp bridge (loop thread, queue of 1 MiB chunks, no retry)
at 0.86x to 1.62x this reader over four runs on a loaded 2-core machine: no consistent gain
to pay the loop thread for.

Thread-safety: one reader thread (the worker iterating the shard).
"""

from __future__ import annotations

import http.client
import io
import re
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from dataloader.io._http_errors import TRANSIENT_STATUSES, retry_after_s
from dataloader.io.retry import Retry

__all__ = ["HttpShardStream", "PROGRESS_BYTES"]

_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
# What a dropped, refused or stalled connection raises from a read or a request.
_CUTS = (OSError, http.client.HTTPException)
# Bytes a response must read before its cut for the run of failures to start again (see the module).
PROGRESS_BYTES = 1 << 20


class _Final(Exception):
    """Internal: a failure no retry mends (the message says why)."""


class HttpShardStream(io.RawIOBase):
    """The body of ``url``, read as it arrives; retried and resumed per ``retry`` (see the module).

    Args:
        url: an ``http://`` or ``https://`` URL.
        retry: the attempts and backoff (``Retry(max_attempts=1)``: no retry, no resume).
        timeout_s: seconds a connect or a read may block (> 0), before ``retry``'s
            ``attempt_timeout_s`` caps it (and ``threading.TIMEOUT_MAX``, ~292 years, the
            most a socket takes).

    Raises (from the constructor, after the retries):
        urllib.error.HTTPError, urllib.error.URLError, OSError: the shard could not be opened.

    Thread-safety: one reader thread.
    """

    def __init__(self, url: str, retry: Retry, timeout_s: float) -> None:
        self._url, self._retry = url, retry
        cap = retry.attempt_timeout_s
        limit = timeout_s if cap is None else min(timeout_s, float(cap))
        # a socket refuses a time-out past ~292 years (OverflowError): that long is no limit
        self._timeout_s = min(float(limit), threading.TIMEOUT_MAX)
        self.requests = 0  # requests made for this shard (the first, retries, resumes)
        self._failures = 0
        self.position = 0  # bytes of the body read so far
        self._since = 0  # position when the current response began (its progress is position - _since)
        self._drop = 0  # bytes of a restarted body to read and drop (a server that ignored Range)
        self._resp: Any = None
        self._lock = threading.Lock()  # close() may come from a collector's thread
        self._resp = self._open_first()
        self._etag = _strong_etag(self._resp)
        self._total = _length(self._resp)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        """Up to ``len(buffer)`` bytes of the body (0 at its end); a cut is resumed here.

        Raises:
            ValueError: a cut not resumed (see the module).
        """
        while True:
            resp = self._resp
            if resp is None:
                raise ValueError("I/O operation on a closed HTTP shard stream")
            try:
                data = resp.read1(len(buffer) if not self._drop else min(len(buffer), self._drop))
            except _CUTS as exc:
                self._resume(exc)
                continue
            if not data and buffer and (self._drop or self._total is not None and self.position < self._total):
                self._resume(ConnectionError(f"the body ended at byte {self.position}{self._of()}"))
                continue
            if self._drop:
                self._drop -= len(data)
                continue
            n = len(data)
            buffer[:n] = data
            self.position += n
            return n

    def close(self) -> None:
        with self._lock:
            resp, self._resp = self._resp, None
        if resp is not None:
            resp.close()
        super().close()

    def _open_first(self) -> Any:
        while True:
            try:
                return self._request({})
            except urllib.error.HTTPError as exc:
                exc.close()  # its response holds the connection
                if exc.code not in TRANSIENT_STATUSES:
                    raise
                self._failed(exc, retry_after_s(exc.headers.get("Retry-After")))
            except _CUTS as exc:
                if isinstance(exc, http.client.InvalidURL) or (
                    isinstance(exc, urllib.error.URLError) and not isinstance(exc.reason, OSError)
                ):
                    raise  # an unknown scheme, a malformed URL: not a connection failure
                self._failed(exc)

    def _request(self, headers: dict[str, str]) -> Any:
        self.requests += 1
        request = urllib.request.Request(self._url, headers=headers)
        return urllib.request.urlopen(request, timeout=self._timeout_s)  # noqa: S310 - the user's URL

    def _failed(self, exc: BaseException, asked_s: float | None = None) -> None:
        """Count a failure; wait the backoff (at least ``asked_s``, a ``Retry-After``, capped by
        ``Retry``), or re-raise ``exc`` when the budget is spent."""
        self._failures += 1
        if self._failures >= self._retry.max_attempts:
            raise exc
        wait = self._retry.wait_s(self._failures, exc, retry_after_s=asked_s)
        time.sleep(min(wait, threading.TIMEOUT_MAX))

    def _resume(self, cut: BaseException) -> None:
        """Replace the cut response by one from ``position`` on (see the module).

        Raises:
            ValueError: not resumable, or the budget of attempts is spent.
        """
        with self._lock:
            old, self._resp = self._resp, None
        if old is not None:
            old.close()
        why, asked = f"{type(cut).__name__}: {cut}", None  # asked: the last 429/503's Retry-After
        if self.position - self._since >= PROGRESS_BYTES:
            self._failures = 0  # the cut response made progress: a new run of failures
        try:
            if self._etag is None:
                raise _Final("the first response had no strong ETag to check the rest against")
            while self._resp is None:
                self._failed(cut, asked)
                try:
                    self._resp, self._since = self._continue(), self.position
                except urllib.error.HTTPError as exc:
                    exc.close()
                    if exc.code == 412:
                        raise _Final(f"the object changed since the first request (HTTP 412 for If-Match {self._etag})") from None
                    if exc.code not in TRANSIENT_STATUSES:
                        raise _Final(f"the request for the rest failed: HTTP {exc.code} {exc.reason}") from None
                    why = f"HTTP {exc.code} {exc.reason}"
                    cut = ConnectionError(why)  # not the HTTPError: it holds the URL (chained, it would show)
                    asked = retry_after_s(exc.headers.get("Retry-After"))
                except _CUTS as exc:
                    cut, why, asked = exc, f"{type(exc).__name__}: {exc}", None
        except _Final as exc:
            raise ValueError(f"HTTP body cut at byte {self.position}{self._of()} ({why}); not resumed: {exc}") from cut
        except Exception as exc:  # the budget is spent: _failed re-raised the last failure
            if self._retry.max_attempts == 1:
                rule = "Retry.max_attempts=1: no retry, no resume"
            else:
                rule = (f"{self._failures} counted against Retry.max_attempts={self._retry.max_attempts}: a response "
                        f"that reads {PROGRESS_BYTES} bytes starts the count again")
            raise ValueError(
                f"HTTP body cut at byte {self.position}{self._of()}, not resumed after {self.requests} request(s) "
                f"({rule}); the last: {why}"
            ) from exc

    def _continue(self) -> Any:
        """A response for the body from ``position`` on, checked (``_Final`` when unusable)."""
        etag = str(self._etag)
        resp = self._request({"Range": f"bytes={self.position}-", "If-Match": etag, "If-Range": etag})
        try:
            got = resp.headers.get("ETag")
            if got is not None and got != etag:
                raise _Final(f"the object changed since the first request (ETag {etag}, then {got})")
            if resp.status == 200:  # Range ignored: the whole body again, read past what we have
                if got is None:
                    raise _Final("the server ignored the Range and sent no ETag to check the object against")
                self._drop = self.position
                return resp
            found = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
            if resp.status != 206 or found is None or int(found.group(1)) != self.position:
                raise _Final(
                    f"the response to Range bytes={self.position}- was HTTP {resp.status} with "
                    f"Content-Range {resp.headers.get('Content-Range')!r}"
                )
            if self._total is None and found.group(3).isdigit():
                self._total = int(found.group(3))  # a chunked first response did not say
            self._drop = 0
            return resp
        except BaseException:
            resp.close()
            raise

    def _of(self) -> str:
        return "" if self._total is None else f" of {self._total}"


def _strong_etag(resp: Any) -> str | None:
    """The response's ``ETag`` if strong (a weak one, ``W/"..."``, cannot guard a Range)."""
    etag = resp.headers.get("ETag")
    return None if etag is None or etag.startswith("W/") else str(etag)


def _length(resp: Any) -> int | None:
    """The body's size from ``Content-Length`` (None: chunked or unknown)."""
    value = resp.headers.get("Content-Length")
    if value is None or resp.headers.get("Transfer-Encoding") is not None or not value.isdigit():
        return None
    return int(value)

