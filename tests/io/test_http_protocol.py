"""HttpDataset against responses that are not HTTP (tests/_http_server.py's RawServer writes
the broken bytes): each fails its item with an ``OSError`` (a protocol error: ``errno.EPROTO``,
``status`` None) naming the URL, never with aiohttp's own ``ClientResponseError`` (which says
``status=400``, a status no server sent).  Both of aiohttp's response parsers are tried: its C
one (where built, as on 3.11) and its pure-Python one (the only one on 3.13t)."""

from __future__ import annotations

import errno

import pytest

aiohttp = pytest.importorskip("aiohttp")

from tests._http_server import RawServer  # noqa: E402
from aiohttp import client_proto, http_parser  # noqa: E402
from dataloader import DataLoader  # noqa: E402
from dataloader.io import HttpDataset, Retry  # noqa: E402
from tests._support import fetch_each

FAST = Retry(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02, attempt_timeout_s=5.0)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
HEAD = b"HTTP/1.1 200 OK\r\n"

# Responses both parsers refuse: a protocol error each, final (asked once).
BROKEN = {
    "garbage": b"garbage\r\n\r\n",
    "status9999": b"HTTP/1.1 9999 Odd\r\nContent-Length: 2\r\n\r\nok",
    "status000": b"HTTP/1.1 000 Zero\r\nContent-Length: 2\r\n\r\nok",  # parsed, but no status at all
    "negative-length": HEAD + b"Content-Length: -5\r\n\r\nok",
    "200kb-header": HEAD + b"X-Big: " + b"a" * 200_000 + b"\r\nContent-Length: 2\r\n\r\nok",
    "20000-headers": HEAD + b"".join(b"X-H%d: v\r\n" % i for i in range(20_000)) + b"Content-Length: 2\r\n\r\nok",
    "bad-chunk-size": HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n",
    "bad-second-chunk": HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\nzz\r\nok\r\n0\r\n\r\n",
    "length-and-chunked": HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "undecodable-gzip": HEAD + b"Content-Encoding: gzip\r\nContent-Length: 4\r\n\r\nabcd",
    "undecodable-br": HEAD + b"Content-Encoding: br\r\nContent-Length: 4\r\n\r\nabcd",
}
# Responses the parsers tell apart (each outcome is an OSError or the body, never aiohttp's).
DISPUTED = {
    "http09": b"hello world, no status line at all",  # C: protocol error; Python: a disconnect
    "duplicate-length": HEAD + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nok",  # Python: the first
    "binary": bytes(range(256)) * 4,
}
PARSERS = ["c", "python"]


@pytest.fixture
def raw():
    s = RawServer({**BROKEN, **DISPUTED, "ok": OK})
    yield s
    s.close()


@pytest.fixture(params=PARSERS)
def parser(request, monkeypatch):
    """aiohttp's C or pure-Python response parser (client_proto looks it up per connection)."""
    if request.param == "c":
        if not hasattr(http_parser, "HttpResponseParserC"):
            pytest.skip("aiohttp without its C extension here")
        monkeypatch.setattr(client_proto, "HttpResponseParser", http_parser.HttpResponseParserC)
    else:
        monkeypatch.setattr(client_proto, "HttpResponseParser", http_parser.HttpResponseParserPy)
    return request.param


@pytest.mark.timeout(60)
def test_a_response_that_is_not_http_fails_with_a_protocol_error_naming_the_url(raw, parser):
    names = list(BROKEN)
    out = fetch_each(HttpDataset([raw.url(n) + "?token=SECRET" for n in names] + [raw.url("ok")], retry=FAST))
    assert out[-1] == b"ok"
    for name, exc in zip(names, out):
        assert isinstance(exc, OSError) and not isinstance(exc, aiohttp.ClientError), (name, repr(exc))
        assert exc.errno == errno.EPROTO and exc.status is None, (name, repr(exc))
        assert f"127.0.0.1:{raw.port}/{name}?token=***: malformed HTTP response: " in str(exc), name
        assert "SECRET" not in str(exc) and exc.__cause__ is None and "\n" not in str(exc)
        assert len(str(exc)) < 400  # the parser's complaint is cut (it quotes the response)
        assert raw.count(name) == 1, name  # final: the server answers a retry no better


@pytest.mark.timeout(60)
def test_responses_the_parsers_disagree_on_are_a_body_or_an_oserror_never_aiohttps(raw, parser):
    names = list(DISPUTED)
    out = fetch_each(HttpDataset([raw.url(n) for n in names], retry=FAST))
    for name, exc in zip(names, out):
        if isinstance(exc, bytes):
            assert (name, parser) == ("duplicate-length", "python") and exc == b"ok"
            continue
        assert isinstance(exc, OSError) and not isinstance(exc, aiohttp.ClientError), (name, repr(exc))
        assert raw.url(name) in str(exc)
        if not isinstance(exc, ConnectionError):  # a disconnect is transient; a protocol error is not
            assert exc.errno == errno.EPROTO and exc.status is None and raw.count(name) == 1


@pytest.mark.timeout(60)
def test_a_protocol_error_is_caught_as_oserror_through_the_loader(raw):
    ds = HttpDataset([raw.url("status9999"), raw.url("ok")], retry=FAST)
    with DataLoader(ds, batch_size=None) as loader:
        it = iter(loader)
        with pytest.raises(OSError, match="malformed HTTP response") as info:
            next(it)
        assert info.value.status is None
        assert next(it) == b"ok"  # the epoch goes on
