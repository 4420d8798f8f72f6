"""TarShardDataset over HTTP with retries: a connection cut mid-shard resumes by ``Range`` from
the byte reached (guarded by the ETag), failed requests are retried per ``Retry``, and an early
break leaves no connection, thread or unclosed response behind.  Against a local 127.0.0.1
server that counts requests (``tests/formats/_range_server.py``)."""

from __future__ import annotations

import gc
import sys
import threading
import time
import warnings

import pytest

from tests.formats._range_server import RangeServer
from tests.formats._tars import sample_members, write_tar

from dataloader import DataLoader, TarShardDataset
from dataloader.io import Retry

FAST = Retry(initial_backoff_s=0.0, max_backoff_s=0.0)  # 3 attempts, no wait: the tests stay quick
SHARD = "/d/s-1.tar"


@pytest.fixture
def server(tmp_path):
    files = {}
    for s in range(3):
        path = write_tar(tmp_path / f"s-{s}.tar", sample_members(range(s * 1000, s * 1000 + 300)))
        files[f"/d/s-{s}.tar"] = path.read_bytes()
    srv = RangeServer(files)
    yield srv
    srv.close()


def _epoch(ds, num_workers=0):
    """Every sample of one epoch, whole (key, url and bytes), in the loader's order."""
    return [s for batch in DataLoader(ds, batch_size=7, num_workers=num_workers, collate_fn=list) for s in batch]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_shard_cut_once_resumes_from_the_byte_reached(server, num_workers):
    pattern = server.url("/d/s-{0..2}.tar")
    uncut = _epoch(TarShardDataset(pattern), num_workers)
    cut = len(server.files[SHARD]) // 3 + 123  # inside a member
    server.cuts[SHARD] = [cut]
    with server.lock:
        server.requests.clear()
    assert _epoch(TarShardDataset(pattern, retry=FAST), num_workers) == uncut
    assert len(uncut) == 900
    assert server.ranges(SHARD) == [None, f"bytes={cut}-"]
    assert [m for p, _, m in server.requests if p == SHARD][1] is not None  # If-Match: the first ETag


@pytest.mark.timeout(60)
def test_a_shard_cut_more_often_than_retry_allows_is_named_without_secrets(server):
    server.cuts[SHARD] = [10_000, 20_000, 30_000]
    url = server.url(SHARD + "?token=hunter2")
    with pytest.raises(ValueError, match=r"tar shard 'http://127\.0\.0\.1:\d+/d/s-1\.tar\?token=\*\*\*'") as err:
        list(TarShardDataset(url, retry=Retry(max_attempts=3, initial_backoff_s=0.0)))
    assert "cut at byte 30000" in str(err.value) and "max_attempts=3" in str(err.value)
    assert "hunter2" not in str(err.value)
    assert len(server.ranges(SHARD)) == 3

    server.cuts[SHARD] = [100_000]
    ds = TarShardDataset(url, retry=Retry(max_attempts=1), on_error="skip")  # no retry: a cut is final
    assert 0 < len(list(ds)) < 300
    [(shard, message)] = ds.skipped_shards
    assert "token=***" in shard and "hunter2" not in message and "cut at byte 100000" in message
    assert "Retry.max_attempts=1: no retry, no resume" in message and "starts the count again" not in message


@pytest.mark.timeout(60)
def test_an_object_changed_between_requests_is_an_error_never_a_splice(server):
    body = server.files[SHARD]
    server.changes[SHARD] = body[: len(body) - 10240]  # another version, another ETag
    server.cuts[SHARD] = [len(body) // 2]
    with pytest.raises(ValueError, match=r"s-1\.tar'.*not resumed: the object changed since the first request"):
        list(TarShardDataset(server.url(SHARD), retry=FAST))
    assert len(server.ranges(SHARD)) == 2


@pytest.mark.timeout(60)
def test_a_server_ignoring_range_restarts_the_shard_without_duplicates(server):
    uncut = _epoch(TarShardDataset(server.url(SHARD)))
    server.ignore_range = True
    server.cuts[SHARD] = [len(server.files[SHARD]) // 2 + 7]
    assert _epoch(TarShardDataset(server.url(SHARD), retry=FAST)) == uncut
    assert len(server.ranges(SHARD)) == 3  # the uncut epoch, the cut one, its restart


@pytest.mark.timeout(60)
def test_a_cut_shard_without_an_etag_is_an_error(server):
    server.no_etag = True
    server.cuts[SHARD] = [50_000]
    with pytest.raises(ValueError, match=r"cut at byte 50000 .*no strong ETag"):
        list(TarShardDataset(server.url(SHARD), retry=FAST))
    assert len(server.ranges(SHARD)) == 1  # nothing to resume against: no second request


@pytest.mark.timeout(60)
def test_a_read_stalled_past_the_attempt_timeout_resumes(server):
    uncut = _epoch(TarShardDataset(server.url(SHARD)))
    stall = len(server.files[SHARD]) // 2 + 5
    server.stalls[SHARD] = [stall]
    # the server sends the rest after STALL_S = 10 s: only the 2 s time-out makes a Range request
    retry = Retry(max_attempts=5, initial_backoff_s=0.0, max_backoff_s=0.0, attempt_timeout_s=2.0)
    assert _epoch(TarShardDataset(server.url(SHARD), retry=retry, timeout_s=60)) == uncut
    assert server.ranges(SHARD)[:2] == [None, None] and f"bytes={stall}-" in server.ranges(SHARD)


@pytest.mark.timeout(60)
def test_a_transient_status_is_retried_and_a_final_one_is_not(server):
    server.statuses[SHARD] = [503, 429]
    assert len(list(TarShardDataset(server.url(SHARD), retry=FAST))) == 300
    assert len(server.ranges(SHARD)) == 3
    with pytest.raises(OSError, match=r"tar shard .*/d/gone\.tar'.*404"):
        list(TarShardDataset(server.url("/d/gone.tar"), retry=FAST))
    assert len(server.ranges("/d/gone.tar")) == 1
    server.statuses[SHARD] = [503, 503, 503]
    with pytest.raises(OSError, match=r"503"):
        list(TarShardDataset(server.url(SHARD), retry=FAST))


def test_retry_must_be_a_retry():
    with pytest.raises(TypeError, match="retry must be a dataloader.io.Retry or None, got int"):
        TarShardDataset("x.tar", retry=3)


def _wait_closed(server, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with server.lock:
            if server.open_connections == 0:
                return True
        time.sleep(0.02)
    return False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_early_break_leaks_no_connection_thread_or_response(tmp_path, num_workers):
    big = [(f"{k:04d}.bin", bytes(1 << 19)) for k in range(48)]  # 24 MiB a shard: more than the
    server = RangeServer({f"/b/{s}.tar": write_tar(tmp_path / f"{s}.tar", big).read_bytes() for s in range(2)})
    try:  # socket buffers hold, so the server writes until the client closes its connection
        _break_early(server, num_workers)
    finally:
        server.close()


def _break_early(server, num_workers):
    unraisable = []
    old_hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    threads = threading.active_count()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)  # an unclosed response: raised, or unraisable
            ds = TarShardDataset(server.url("/b/{0..1}.tar"), retry=FAST)
            for _batch in DataLoader(ds, batch_size=3, num_workers=num_workers, collate_fn=list):
                break
            del _batch, ds
            gc.collect()
            assert _wait_closed(server)
    finally:
        sys.unraisablehook = old_hook
    assert unraisable == []
    deadline = time.monotonic() + 10
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.02)
    assert threading.active_count() <= threads


@pytest.mark.timeout(60)
def test_obstore_resumes_a_cut_object_store_shard_itself(server):
    store_mod = pytest.importorskip("obstore.store", reason="obstore (the 'remote' extra) is not installed")
    store = store_mod.HTTPStore.from_url(server.url("/d"), client_options={"allow_http": True})
    uncut = _epoch(TarShardDataset(server.url(SHARD)))
    server.cuts[SHARD] = [len(server.files[SHARD]) // 2]
    got = _epoch(TarShardDataset("s-1.tar", store=store))
    assert [{**s, "__url__": None} for s in got] == [{**s, "__url__": None} for s in uncut]
    assert server.ranges(SHARD)[2].startswith(f"bytes={len(server.files[SHARD]) // 2}-")


@pytest.mark.timeout(60)
def test_retry_after_of_a_503_reaches_the_backoff_when_opening_and_when_resuming(server, monkeypatch):
    asked = []

    def wait_s(self, failures, exc=None, *, retry_after_s=None):
        asked.append(retry_after_s)
        return 0.0

    monkeypatch.setattr(Retry, "wait_s", wait_s)
    uncut = _epoch(TarShardDataset(server.url(SHARD)))
    server.retry_after = "2"
    cut = len(server.files[SHARD]) // 2
    server.statuses[SHARD] = [503, None, 503]  # the first request, then the resume's first
    server.cuts[SHARD] = [None, cut]  # popped by every request: the second one is cut
    assert _epoch(TarShardDataset(server.url(SHARD), retry=Retry(max_attempts=5))) == uncut
    assert asked == [2.0, None, 2.0]  # the 503, the cut, the resume's 503
    server.statuses[SHARD] = [503, 503]
    with pytest.raises(OSError, match="503") as err:  # the HTTPError itself: nothing set on it
        list(TarShardDataset(server.url(SHARD), retry=Retry(max_attempts=2)))
    assert not hasattr(err.value.__cause__ or err.value, "retry_after_s")
