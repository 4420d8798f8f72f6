"""The errors of an ``HttpDataset`` item, typed: each carries the response's ``status``.

A final status raises ``FileNotFoundError`` (404, 410), ``PermissionError`` (401, 403; also a
redirect to another origin) or ``OSError`` (others, and a response that is not HTTP:
``errno.EPROTO``, ``status`` None).  Each is an instance of the built-in type of that name
*and* of ``HttpStatus``, which declares what it carries:

- ``status``: the HTTP status received (int), or None when the response was not HTTP;
- ``retry_after_s``: the wait a 429 or 503 asked for with ``Retry-After``, seconds (None: not
  asked, or not understood), which ``Retry.wait_s`` honours.

The classes below are named as the built-in each extends, so ``except FileNotFoundError``,
``type(exc).__name__`` and ``repr(exc)`` read as they would for the built-in (docs/usage.md,
"Remote data").  Transport failures (``_Transport``: refused, reset, a body cut short) are
transient and leave the dataset as a plain ``ConnectionError``.  See :mod:`dataloader.io.http`
for why no error chains aiohttp's.
"""

from __future__ import annotations

import builtins
import email.utils
import errno
from datetime import datetime, timezone

from dataloader.io._redact import redact_text

__all__ = [
    "HttpStatus", "TRANSIENT_STATUSES", "Transport", "client_error", "protocol_error",
    "redirect_refused", "retry_after_s", "status_error", "transient",
]

TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_MAX_REASON = 200  # characters of a parser's complaint kept in a protocol error (it may quote the response)


class HttpStatus(builtins.OSError):
    """An ``OSError`` of an HTTP response: its ``status`` (None: not HTTP) and ``retry_after_s``.

    Args:
        *args: as ``OSError``'s (``errno, strerror, filename`` or a message).
        status: the status received, or None.
        retry_after_s: seconds a 429 or 503 asked to wait (``Retry-After``), or None.
    """

    status: int | None
    retry_after_s: float | None

    def __init__(self, *args: object, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(*args)
        self.status = status
        self.retry_after_s = retry_after_s


class OSError(HttpStatus):  # noqa: A001 - named as the built-in it is (see the module)
    """A final status other than 401/403/404/410, or a response that is not HTTP (``errno.EPROTO``)."""


class FileNotFoundError(HttpStatus, builtins.FileNotFoundError):  # noqa: A001 - see the module
    """HTTP 404 or 410."""


class PermissionError(HttpStatus, builtins.PermissionError):  # noqa: A001 - see the module
    """HTTP 401 or 403, or a redirect refused (to another origin, or adding credentials)."""



class Transport(ConnectionError):
    """A connection or transport failure (transient)."""


def transient(exc: BaseException) -> bool:
    """True for a failure worth another attempt: a transport failure or a transient status."""
    return isinstance(exc, Transport) or (isinstance(exc, HttpStatus) and exc.status in TRANSIENT_STATUSES)


def status_error(url: str, status: int, reason: str | None, retry_after: str | None = None) -> HttpStatus:
    """The error of a final status; ``url`` as shown (redacted); ``retry_after``: the header."""
    text = f"{url}: HTTP {status} {reason or ''}".rstrip()
    wait_s = retry_after_s(retry_after) if status in (429, 503) else None
    if status in (404, 410):
        return FileNotFoundError(errno.ENOENT, text, url, status=status, retry_after_s=wait_s)
    if status in (401, 403):
        return PermissionError(errno.EACCES, text, url, status=status, retry_after_s=wait_s)
    return OSError(text, status=status, retry_after_s=wait_s)


def redirect_refused(url: str, status: int, text: str) -> PermissionError:
    """The error of a redirect that is not followed (``status``: the redirect's), naming
    ``url`` (as shown) as its ``filename``."""
    return PermissionError(errno.EACCES, text, url, status=status)


def protocol_error(url: str, reason: str) -> HttpStatus:
    """A response that is not HTTP (it did not parse, or its status is not one): ``OSError``
    with ``errno.EPROTO`` and ``status`` None (no status was received), naming ``url`` (as
    shown) and the parser's reason on one line.  Final: a server that answers so is not
    answering a retry better."""
    reason = " ".join(redact_text(reason).split())
    if len(reason) > _MAX_REASON:
        reason = reason[: _MAX_REASON - 3] + "..."
    return OSError(errno.EPROTO, f"{url}: malformed HTTP response: {reason}", status=None)


def client_error(shown: str, exc: Exception) -> Exception:
    """aiohttp's ``exc`` as this module's error, naming ``shown`` (the URL, redacted); the
    caller raises it outside its ``except`` block, so that it chains nothing (see the module)."""
    from aiohttp import (  # lazy: an optional dependency, imported once a request failed
        ClientConnectionError, ClientPayloadError, ClientResponseError, InvalidURL,
    )
    from aiohttp.http_exceptions import ContentEncodingError  # lazy: as aiohttp above

    if isinstance(exc, InvalidURL):
        return ValueError(f"{shown}: invalid URL ({redact_text(exc.description or 'unparsable')})")
    if isinstance(exc, ClientPayloadError) and isinstance(exc.__cause__, ContentEncodingError):
        return protocol_error(shown, exc.__cause__.message)  # a body that does not decode: final
    if isinstance(exc, (ClientConnectionError, ClientPayloadError)):  # refused, reset, cut short
        return Transport(f"{shown}: {type(exc).__name__}: {redact_text(str(exc))}")
    if isinstance(exc, ClientResponseError):  # the response did not parse (its "400" was never sent)
        return protocol_error(shown, exc.message)  # not chained: its str names the URL's query
    return protocol_error(shown, f"{type(exc).__name__}: {exc}")  # none other known to get here (redacted)


def retry_after_s(value: str | None) -> float | None:
    """``Retry-After``'s wait in seconds (RFC 9110 10.2.3: delay-seconds or an HTTP date);
    None when absent or not understood."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # RFC 9110's DIGIT is ASCII ("²".isdigit() too)
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, as HTTP dates are
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
