"""HttpDataset's ranged GETs (dataloader/io/ranges.py) against a local server that honours
``Range`` and counts, on its side, every plain GET and every range it was asked for:
reassembly around chunk boundaries, servers that ignore ``Range``, ``max_bytes``, a failing
range, per-attempt time-outs of a range, an object that changes between parts."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("aiohttp")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests._http_server import FaultServer  # noqa: E402
from dataloader import DataLoader  # noqa: E402
from dataloader.io import HttpDataset, Retry  # noqa: E402
from dataloader.io.ranges import RangeSettings, parse_content_range  # noqa: E402

FAST = Retry(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02, attempt_timeout_s=5.0)
_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


def content(size: int) -> bytes:
    """``size`` bytes in which every 4-byte word is its own index: a misplaced part shows."""
    return b"".join(i.to_bytes(4, "big") for i in range(size // 4 + 1))[:size]


class RangeServer(FaultServer):
    """``/obj/K?size=N&mode=M``: N bytes (``content``).  ``mode``: ``honour`` (the default:
    ``Accept-Ranges: bytes``, 206 to a ``Range``), ``ignore`` (says ``Accept-Ranges: bytes``
    but answers 200 with the whole body), ``silent`` (no ``Accept-Ranges``, ``Range``
    ignored), ``drift`` (ranges carry another ``ETag``), ``ignore-drift`` (a range answered
    200 with a whole body of the same size under another ``ETag``: the object changed).
    ``fail=A&status=S&fails=F``: the range starting at byte A is answered S (500) for its
    first F (1) requests; ``stall=A&s=T``:
    that range waits T seconds the first time.  ``plain[K]`` counts GETs without ``Range``,
    ``ranges[K]`` lists the ``(a, b)`` (inclusive) asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.plain: dict[str, int] = {}
        self.ranges: dict[str, list[tuple[int, int]]] = {}

    def handle(self, h) -> None:
        parts = urlsplit(h.path)
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        key, mode = parts.path, q.get("mode", "honour")
        data = content(int(q["size"]))
        asked = _RANGE.fullmatch(h.headers.get("Range", ""))
        with self.lock:
            if asked is None:
                self.plain[key] = self.plain.get(key, 0) + 1
            else:
                self.ranges.setdefault(key, []).append((int(asked[1]), int(asked[2])))
                n = sum(1 for a, _ in self.ranges[key] if a == int(asked[1]))
        if asked is not None and q.get("fail") == asked[1] and n <= int(q.get("fails", 1)):
            self.send(h, int(q.get("status", 500)), b"no", 2)
            return
        if asked is not None and q.get("stall") == asked[1] and n == 1:
            time.sleep(float(q.get("s", 1.0)))
        h.protocol_version = "HTTP/1.1"
        if asked is None or mode in ("ignore", "silent"):
            self.answer(h, 200, data, mode, {})
            return
        if mode == "ignore-drift":
            self.answer(h, 200, bytes(len(data)), mode, {"ETag": '"v2"'})
            return
        a, b = int(asked[1]), min(int(asked[2]), len(data) - 1)
        self.answer(h, 206, data[a : b + 1], mode, {"Content-Range": f"bytes {a}-{b}/{len(data)}"})

    @staticmethod
    def answer(h, status: int, body: bytes, mode: str, headers: dict[str, str]) -> None:
        h.send_response(status)
        if mode != "silent":
            h.send_header("Accept-Ranges", "bytes")
        h.send_header("ETag", headers.pop("ETag", '"v2"' if mode == "drift" and status == 206 else '"v1"'))
        for name, value in headers.items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        try:
            for i in range(0, len(body), 65536):
                h.wfile.write(body[i : i + 65536])
        except OSError:  # the client closed: it had the part it wanted
            h.close_connection = True


@pytest.fixture(scope="module")
def server():
    s = RangeServer()
    yield s
    s.close()


_keys = iter(range(1 << 30))
_keys_lock = threading.Lock()


def new_key() -> str:
    with _keys_lock:
        return f"/obj/{next(_keys)}"


def fetch(ds: HttpDataset, indices=None) -> list[object]:
    """Each item's bytes or exception, fetched on one event loop (then the session closed)."""
    async def main():
        try:
            return await asyncio.gather(*(ds[i] for i in (indices or range(len(ds)))), return_exceptions=True)
        finally:
            await ds.aclose()

    return asyncio.run(main())


@pytest.mark.timeout(120)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(0, 300), chunk=st.integers(1, 40), threshold=st.integers(1, 120))
def test_parts_are_reassembled_exactly_around_chunk_boundaries(server, size, chunk, threshold):
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size={size}")], retry=FAST, range_parallel_threshold=threshold,
                     range_chunk_bytes=chunk)
    assert fetch(ds) == [content(size)]
    parts = RangeSettings(threshold, chunk).parts(size)
    split = size >= threshold and size > chunk
    assert server.plain[key] == 1  # the first part comes from the item's own GET
    # A set: under load a part's attempt may fail (a reset connection) and be asked again by Retry.
    asked = sorted(set(server.ranges.get(key, [])))
    assert asked == ([(a, b - 1) for a, b in parts[1:]] if split else [])


@pytest.mark.timeout(60)
def test_through_the_loader_a_large_object_is_fetched_in_ranges_and_a_small_one_in_one_get(server):
    big, small = new_key(), new_key()
    ds = HttpDataset([server.url(f"{big}?size=1000003"), server.url(f"{small}?size=5000")], retry=FAST,
                     range_parallel_threshold=100_000, range_chunk_bytes=65536)
    with DataLoader(ds, batch_size=2, num_workers=2, item_concurrency=2, collate_fn=list) as loader:
        (batch,) = list(loader)
    assert batch == [content(1000003), content(5000)]
    assert len(server.ranges[big]) == 1000003 // 65536 and server.plain[big] == 1
    assert small not in server.ranges and server.plain[small] == 1


@pytest.mark.timeout(60)
def test_a_server_without_accept_ranges_gets_one_plain_get(server):
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size=5000&mode=silent")], retry=FAST, range_parallel_threshold=100,
                     range_chunk_bytes=100)
    assert fetch(ds) == [content(5000)]
    assert server.plain[key] == 1 and key not in server.ranges


@pytest.mark.timeout(60)
def test_a_server_that_answers_a_range_with_the_whole_body_still_gives_the_exact_object(server):
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size=5001&mode=ignore")], retry=FAST, range_parallel_threshold=100,
                     range_chunk_bytes=1000)
    assert fetch(ds) == [content(5001)]
    assert len(server.ranges[key]) == 5  # asked, answered 200: each part read out of the whole body


@pytest.mark.timeout(60)
def test_max_bytes_refuses_a_large_object_before_any_range_is_asked(server):
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size=100000")], retry=FAST, max_bytes=50_000,
                     range_parallel_threshold=1000, range_chunk_bytes=1000)
    (err,) = fetch(ds)
    assert isinstance(err, ValueError) and "100000 bytes" in str(err) and "max_bytes=50000" in str(err)
    assert key in str(err) and key not in server.ranges


@pytest.mark.timeout(60)
def test_a_transient_range_failure_is_retried_alone(server):
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size=4000&fail=2000&status=503&fails=2")], retry=FAST,
                     range_parallel_threshold=1000, range_chunk_bytes=1000)
    assert fetch(ds) == [content(4000)]
    assert sorted(server.ranges[key]) == [(1000, 1999), (2000, 2999), (2000, 2999), (2000, 2999), (3000, 3999)]
    assert server.plain[key] == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("status, kind", [(404, FileNotFoundError), (500, OSError)])
def test_a_failing_range_fails_the_item_naming_its_url_redacted(server, status, kind):
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size=4000&fail=3000&status={status}&fails=99&token=hush")], retry=FAST,
                     range_parallel_threshold=1000, range_chunk_bytes=1000)
    (err,) = fetch(ds)
    assert isinstance(err, kind) and err.status == status
    assert key in str(err) and "token=***" in str(err) and "hush" not in str(err)
    assert err.__cause__ is None and err.__context__ is None
    failed = [r for r in server.ranges[key] if r[0] == 3000]
    assert len(failed) == (1 if status == 404 else FAST.max_attempts)  # final at once; transient retried


@pytest.mark.timeout(60)
def test_each_range_has_its_own_attempt_timeout(server):
    key = new_key()
    retry = Retry(max_attempts=2, initial_backoff_s=0, max_backoff_s=0, attempt_timeout_s=0.5)
    ds = HttpDataset([server.url(f"{key}?size=3000&stall=1000&s=2")], retry=retry,
                     range_parallel_threshold=1000, range_chunk_bytes=1000)
    assert fetch(ds) == [content(3000)]
    assert [r for r in server.ranges[key] if r[0] == 1000] == [(1000, 1999)] * 2  # timed out, then again


@pytest.mark.timeout(60)
def test_timeout_s_bounds_the_item_all_parts_together(server):
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size=3000&stall=2000&s=5")], retry=Retry(attempt_timeout_s=None),
                     timeout_s=0.5, range_parallel_threshold=1000, range_chunk_bytes=1000)
    (err,) = fetch(ds)  # the stalled part is cancelled with the item (fetch closes the session after it)
    assert isinstance(err, TimeoutError) and "timeout_s=0.5" in str(err) and key in str(err)
    assert sorted(server.ranges[key]) == [(1000, 1999), (2000, 2999)]


@pytest.mark.timeout(60)
def test_an_object_that_changes_between_parts_fails_its_item(server):
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size=3000&mode=drift")], retry=FAST, range_parallel_threshold=1000,
                     range_chunk_bytes=1000)
    (err,) = fetch(ds)
    assert isinstance(err, OSError) and "ETag" in str(err) and key in str(err)


@pytest.mark.timeout(60)
def test_a_range_answered_200_with_a_changed_object_fails_its_item(server):
    key = new_key()  # the server ignores Range (and If-Match): a part's whole body is the new object's
    ds = HttpDataset([server.url(f"{key}?size=3000&mode=ignore-drift")], retry=FAST, range_parallel_threshold=1000,
                     range_chunk_bytes=1000)
    (err,) = fetch(ds)
    assert isinstance(err, OSError) and 'its ETag was "v1", now "v2"' in str(err) and key in str(err)


def test_bad_range_settings_name_the_value():
    with pytest.raises(ValueError, match="range_chunk_bytes=0"):
        HttpDataset(["http://127.0.0.1/x"], range_parallel_threshold=10, range_chunk_bytes=0)
    with pytest.raises(ValueError, match="range_parallel_threshold=0"):
        HttpDataset(["http://127.0.0.1/x"], range_parallel_threshold=0)
    with pytest.raises(TypeError, match="range_parallel_threshold must be an int"):
        HttpDataset(["http://127.0.0.1/x"], range_parallel_threshold=1.5)


@pytest.mark.parametrize("value, parsed", [
    ("bytes 0-9/100", (0, 10, 100)), ("bytes 5-5/*", (5, 6, None)), ("BYTES 1-2/3", (1, 3, 3)),
    ("bytes */100", None), ("bytes 1-x/3", None), (None, None), ("items 0-1/2", None),
])
def test_content_range_is_parsed_strictly(value, parsed):
    assert parse_content_range(value) == parsed
