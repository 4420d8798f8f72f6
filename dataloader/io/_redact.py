"""Locations as errors, ``repr`` and logs show them: without credentials.

A URL (a location with ``scheme://``) is shown with its userinfo replaced by ``***``
(``https://***@host/...``: the user name too, which is often a token) and the value of
every query or fragment parameter whose name looks secret replaced by ``***``
(``?X-Amz-Signature=***``).  A name looks secret when, lower-cased and without ``-`` and
``_``, it contains ``token``, ``signature``, ``secret``, ``password``, ``passwd``,
``credential``, ``apikey`` or ``accesskey``, or is ``sig``, ``key``, ``auth`` or ``pwd``:
AWS presigned URLs (``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Amz-Security-Token``),
GCS signed URLs (``X-Goog-Signature``), Azure SAS tokens (``sig``), OAuth's
``access_token`` and API keys (``key``, ``api_key``).  Paths and object keys (no
``://``) are shown as they are.

Parsing is by hand, not ``urllib.parse``: a location that ``urlsplit`` refuses
(``http://[::1/x``) must be redacted too, in the very error that says so.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

__all__ = ["SECRET_NAME_PARTS", "SECRET_NAMES", "redact", "redact_text"]

SECRET_NAME_PARTS = ("token", "signature", "secret", "password", "passwd", "credential", "apikey", "accesskey")
SECRET_NAMES = frozenset({"sig", "key", "auth", "pwd"})
MASK = "***"
# A URL inside free text (a client's error message): scheme://, then up to white space or a quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def _secret_name(name: str) -> bool:
    if "%" in name or "+" in name:
        name = unquote_plus(name)
    plain = name.lower().replace("-", "").replace("_", "")
    return plain in SECRET_NAMES or any(part in plain for part in SECRET_NAME_PARTS)


def _params(text: str) -> str:
    """``a=1&sig=x`` (or ``;``-separated) with the secret parameters' values masked."""
    if ";" in text:
        return ";".join(map(_params, text.split(";")))
    params = text.split("&")
    for i, param in enumerate(params):
        name, eq, _ = param.partition("=")
        if eq and _secret_name(name):
            params[i] = f"{name}={MASK}"
    return "&".join(params)


def redact(location: str) -> str:
    """``location`` as it may be shown: a URL without userinfo and secret parameter values.

    Thread-safety: a pure function.
    """
    scheme, sep, rest = location.partition("://")
    if not sep or ("@" not in rest and "?" not in rest and "#" not in rest):
        return location
    end = len(rest)
    for ch in "/?#":
        i = rest.find(ch)
        if i >= 0:
            end = min(end, i)
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        authority = MASK + "@" + authority.rpartition("@")[2]
    if "?" in tail or "#" in tail:
        tail, hash_, fragment = tail.partition("#")
        path, q, query = tail.partition("?")
        tail = path + q + _params(query) + hash_ + _params(fragment)
    return f"{scheme}://{authority}{tail}"


def redact_text(text: str) -> str:
    """``text`` (e.g. a client library's error message) with every URL in it redacted."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact(m.group(0)), text)
