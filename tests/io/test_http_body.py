"""How ``HttpDataset`` reads a body: whole, in as many chunks as the server sends, and within
``max_bytes`` counted on the decoded bytes (a gzip body whose ``Content-Length`` is small may
decode past the limit).  tests/_http_server.py's RawServer writes each response as it is."""

from __future__ import annotations

import gzip

import pytest

pytest.importorskip("aiohttp")

from tests._http_server import RawServer  # noqa: E402
from tests._support import fetch_each  # noqa: E402
from dataloader.io import HttpDataset, Retry  # noqa: E402

ONCE = Retry(max_attempts=1, attempt_timeout_s=10.0)
HEAD = b"HTTP/1.1 200 OK\r\n"
PAYLOAD = bytes(range(256)) * 800  # 204,800 bytes
PACKED = gzip.compress(PAYLOAD)
CHUNKS = [PAYLOAD[i : i + 7000] for i in range(0, len(PAYLOAD), 7000)]
RESPONSES = {
    "gzip": HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(PACKED) + PACKED,
    "chunked": HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    + b"".join(b"%x\r\n" % len(c) + c + b"\r\n" for c in CHUNKS) + b"0\r\n\r\n",
    "empty": HEAD + b"Content-Length: 0\r\n\r\n",
}


@pytest.fixture
def raw():
    s = RawServer(RESPONSES)
    yield s
    s.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("max_bytes", [None, len(PAYLOAD)])
def test_bodies_come_whole_decoded_and_reassembled(raw, max_bytes):
    urls = [raw.url(name) for name in ("gzip", "chunked", "empty")]
    assert fetch_each(HttpDataset(urls, retry=ONCE, max_bytes=max_bytes)) == [PAYLOAD, PAYLOAD, b""]


@pytest.mark.timeout(60)
def test_max_bytes_counts_the_decoded_body_of_a_small_compressed_one(raw):
    assert len(PACKED) < 2000
    (err,) = fetch_each(HttpDataset([raw.url("gzip")], retry=ONCE, max_bytes=len(PAYLOAD) - 1))
    assert isinstance(err, ValueError) and f"more than {len(PAYLOAD) - 1} bytes" in str(err)
    assert raw.url("gzip") in str(err)


@pytest.mark.timeout(60)
def test_max_bytes_stops_a_chunked_body_without_a_length(raw):
    (err,) = fetch_each(HttpDataset([raw.url("chunked")], retry=ONCE, max_bytes=10_000))
    assert isinstance(err, ValueError) and "more than 10000 bytes" in str(err)
