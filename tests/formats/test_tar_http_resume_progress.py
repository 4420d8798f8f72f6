"""A tar shard over HTTP cut more often than ``Retry.max_attempts`` still arrives whole when each
cut came after progress (>= 1 MiB read since the response began), and a server that cuts sooner
every time fails after ``max_attempts`` requests in a row.  Against a local 127.0.0.1
``RangeServer`` that cuts the body at given offsets."""

from __future__ import annotations

import pytest

from tests.formats._range_server import RangeServer
from tests.formats._tars import write_tar

from dataloader import DataLoader, TarShardDataset
from dataloader.io import Retry

MiB = 1 << 20
RETRY = Retry(max_attempts=3, initial_backoff_s=0.0, max_backoff_s=0.0)
SHARD = "/big/s.tar"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    members = [(f"{k:04d}.bin", bytes([k]) * (256 << 10)) for k in range(40)]  # ~10 MiB
    srv = RangeServer({SHARD: write_tar(tmp_path_factory.mktemp("big") / "s.tar", members).read_bytes()})
    yield srv
    srv.close()


def _samples(ds):
    return [s for batch in DataLoader(ds, batch_size=4, num_workers=0, collate_fn=list) for s in batch]


def _clear(server):
    with server.lock:
        server.requests.clear()
        server.cuts.clear()


@pytest.mark.timeout(60)
def test_a_shard_cut_five_times_each_after_progress_arrives_whole_with_three_attempts(server):
    _clear(server)
    uncut = _samples(TarShardDataset(server.url(SHARD)))
    cuts = [MiB + MiB // 2 * k + 4321 * k for k in (1, 3, 5, 7, 9)]  # each >= 1 MiB past the last
    server.cuts[SHARD] = list(cuts)
    assert _samples(TarShardDataset(server.url(SHARD), retry=RETRY)) == uncut
    assert len(uncut) == 40
    assert server.ranges(SHARD)[1:] == [None] + [f"bytes={c}-" for c in cuts]


@pytest.mark.timeout(60)
def test_cuts_with_less_than_a_mib_of_progress_each_fail_after_max_attempts_in_a_row(server):
    _clear(server)
    server.cuts[SHARD] = [3 * MiB, 3 * MiB + 1, 3 * MiB + 2, 3 * MiB + 3]  # progress, then 1 byte a try
    # the cut after 3 MiB of progress is the first failure of a new run, the next two (1 byte
    # each) spend the 3 attempts: never more requests than max_attempts without progress
    with pytest.raises(ValueError, match=r"cut at byte 3145730 of \d+, not resumed after 3 request\(s\) \(3 counted"):
        list(TarShardDataset(server.url(SHARD), retry=RETRY))
    assert server.ranges(SHARD) == [None, f"bytes={3 * MiB}-", f"bytes={3 * MiB + 1}-"]
