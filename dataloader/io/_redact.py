"""Locations as errors, ``repr`` and logs show them: without credentials.

A URL (a location with ``scheme://``) is shown with its userinfo replaced by ``***``
(``https://***@host/...``: the user name too, which is often a token) and the value of every
query or fragment parameter whose name looks secret replaced by ``***``
(``?X-Amz-Signature=***``).  A name looks secret when, lower-cased and without ``-`` and
``_``, it contains ``token``, ``signature``, ``secret``, ``password``, ``passwd``,
``credential``, ``apikey``, ``accesskey``, ``privatekey``, ``jwt``, ``assertion``,
``sessionid``, ``sessid``, ``authorization``, ``passphrase`` or ``hmac``, or is ``sig``,
``key``, ``auth``, ``pwd``, ``pw``, ``pass``, ``session`` or ``code``: AWS presigned URLs
(``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Amz-Security-Token``), GCS signed URLs
(``X-Goog-Signature``), Azure SAS tokens (``sig``), OAuth's ``access_token``, ``code`` (an
authorization code), ``client_assertion`` and ``jwt``, API keys (``key``, ``api_key``,
``private_key``) and session ids (``session``, ``sessionid``, ``JSESSIONID``,
``PHPSESSID``).  A secret value runs to the next ``&`` or ``;``: a raw ``#`` or ``?`` in it
is hidden with it (``?token=ab#cd&x=1``: ``?token=***&x=1``).
Paths and object keys (no ``://``) are shown as they are.

Where the userinfo ends.  RFC 3986's authority runs from ``://`` to the first ``/``, ``?``
or ``#``, and its userinfo to the authority's last ``@``.  Users also write a raw ``/`` or
``@`` in a password (``https://u:pa/ss@host/x``, ``https://u:p@a/ss@host/x``), which that
reading would show in part.  So: when the authority holds an ``@`` or a ``:`` (credentials
or a port), the userinfo ends at the last ``@`` before the first ``?`` or ``#``, if there is
one (``https://***@host/x`` for both).  The price is paid only by a URL with a port (or
credentials) and an ``@`` in its path: ``http://localhost:5173/@vite/client`` is shown as
``http://***@vite/client`` (too much hidden, never too little).  An authority that is a
bare host keeps an ``@`` in its path (``https://cdn.jsdelivr.net/gh/u/r@v1/x``): a password
needs a ``:`` before it.  Not covered: a raw ``?`` or ``#`` in a password (every client
reads the query from there; percent-encode it as ``%3F`` / ``%23``) and a raw ``/`` in a
user name without a password (``%2F``).

Parsing is by hand, not ``urllib.parse``: a location that ``urlsplit`` refuses
(``http://[::1/x``) must be redacted too, in the very error that says so.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

__all__ = ["SECRET_NAME_PARTS", "SECRET_NAMES", "redact", "redact_text", "redact_url"]

SECRET_NAME_PARTS = (
    "token", "signature", "secret", "password", "passwd", "credential", "apikey", "accesskey",
    "privatekey", "jwt", "assertion", "sessionid", "sessid", "authorization", "passphrase", "hmac",
)
SECRET_NAMES = frozenset({"sig", "key", "auth", "pwd", "pw", "pass", "session", "code"})
MASK = "***"
# A URL inside free text (a client's error message): scheme://, then up to white space or a quote.
# The scheme is at most 64 characters (its last 64 when longer: the URL is still found): an
# unbounded one made a long run of letters before a "://" cost time quadratic in its length
# (each start in the run scanned to its end), 11 s for 100,000 letters.
_PARAM_END = re.compile(r"[&;?#]|$")  # what ends a query or fragment parameter
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,63}://[^\s'\"<>`]+")


def _secret_name(name: str) -> bool:
    if "%" in name or "+" in name:
        name = unquote_plus(name)
    plain = name.lower().replace("-", "").replace("_", "")
    return plain in SECRET_NAMES or any(part in plain for part in SECRET_NAME_PARTS)


def _params(text: str) -> str:
    """The query and fragment ``text`` (from its first ``?`` or ``#``) with the secret
    parameters' values masked.  Parameters are separated by ``&``, ``;``, ``?`` and ``#`` (a
    second ``#``, or a ``?`` in a fragment, starts one too: ``#/cb?access_token=t``); a secret
    value runs to the next ``&`` or ``;``, a raw ``#`` or ``?`` in it included
    (``?token=ab#cd&x=1``: ``?token=***&x=1``): hidden too much, never too little."""
    out: list[str] = []
    pos, masking = 0, False
    for match in _PARAM_END.finditer(text):
        piece, sep = text[pos : match.start()], match.group()
        if not masking:
            name, eq, _ = piece.partition("=")
            if eq and _secret_name(name):
                piece, masking = f"{name}={MASK}", True
            out.append(piece)
        if sep in "&;" or not masking:
            masking = False
            out.append(sep)
        pos = match.end()
    return "".join(out)


def _first(text: str, chars: str, start: int = 0) -> int:
    """The index of the first of ``chars`` in ``text[start:]``, or ``len(text)``."""
    found = [i for i in (text.find(ch, start) for ch in chars) if i >= 0]
    return min(found, default=len(text))


def redact(location: str) -> str:
    """``location`` as it may be shown: a URL without userinfo and secret parameter values
    (the rules, and where the userinfo ends: the module's docstring).

    Thread-safety: a pure function.
    """
    scheme, sep, rest = location.partition("://")
    if not sep or ("@" not in rest and "?" not in rest and "#" not in rest):
        return location
    head_end = _first(rest, "/?#")  # RFC 3986's authority
    at = rest.rfind("@", 0, _first(rest, "?#"))
    if at >= 0 and ("@" in rest[:head_end] or ":" in rest[:head_end]):
        host_end = _first(rest, "/?#", at + 1)
        authority = MASK + "@" + rest[at + 1 : host_end]
    else:
        host_end = head_end
        authority = rest[:head_end]
    tail = rest[host_end:]
    params = _first(tail, "?#")
    if params < len(tail):
        tail = tail[:params] + _params(tail[params:])
    return f"{scheme}://{authority}{tail}"


def redact_url(location: str) -> str:
    """``location``, meant as a URL (an ``HttpDataset``'s), as it may be shown when refused: as
    ``redact`` shows it, and when it has no ``scheme://`` (``user:pw@host/x``, ``//u:pw@h/x``,
    ``https:/u:pw@h/x``, ``https//u:pw@h``) everything up to its last ``@`` before the first
    ``?`` or ``#`` hidden too (``***@h/x``), with its secret parameters: ``redact`` shows a
    location without ``://`` as it is (a path), which showed a mistyped URL's password.

    Thread-safety: a pure function.
    """
    if "://" in location:
        return redact(location)
    at = location.rfind("@", 0, _first(location, "?#"))
    shown = MASK + location[at:] if at >= 0 else location
    params = _first(shown, "?#")
    return shown[:params] + _params(shown[params:]) if params < len(shown) else shown


def redact_text(text: str) -> str:
    """``text`` (e.g. a client library's error message) with every URL in it redacted."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact(m.group(0)), text)
