"""A tar shard over HTTP with a huge (finite) ``timeout_s`` or ``Retry.attempt_timeout_s`` (1e10 s,
1e300 s: past the ~292 years a socket takes) reads as with no limit: the socket's time-out is
capped at ``threading.TIMEOUT_MAX``; it was an ``OverflowError`` ("timestamp out of range")
when the shard opened, though ``Retry`` had accepted the value.  Against a local 127.0.0.1
``RangeServer``."""

from __future__ import annotations

import pytest

from tests.formats._range_server import RangeServer
from tests.formats._tars import sample_members, write_tar

from dataloader import TarShardDataset
from dataloader.io import Retry

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tar = write_tar(tmp_path_factory.mktemp("huge") / "s.tar", sample_members(range(3)))
    srv = RangeServer({"/s.tar": tar.read_bytes()})
    yield srv
    srv.close()


@pytest.mark.parametrize("seconds", [1e10, 1e300, 2**64])
def test_a_huge_attempt_timeout_reads_the_shard(server, seconds):
    ds = TarShardDataset(server.url("/s.tar"), timeout_s=seconds, retry=Retry(attempt_timeout_s=seconds))
    assert [s["__key__"] for s in ds] == ["000000", "000001", "000002"]


@pytest.mark.parametrize("seconds", [1e12, float("inf")])
def test_a_huge_timeout_with_no_attempt_limit_reads_the_shard(server, seconds):
    ds = TarShardDataset(server.url("/s.tar"), timeout_s=seconds, retry=Retry(attempt_timeout_s=None))
    assert len(list(ds)) == 3


def test_a_timeout_past_a_floats_range_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="timeout_s is an int past a float's range"):  # not a bare OverflowError
        TarShardDataset("http://127.0.0.1:9/s.tar", timeout_s=10**400)
