"""ObjectStoreDataset's ranged GETs (dataloader/io/ranges.py) through obstore: in-memory and
local-file stores (exact bytes around chunk boundaries), and obstore's GCS client against the
local fake of tests/io/test_objectstore.py, which counts the ranges it was asked for (every
interpreter; the S3 case, on moto, is in test_objectstore.py)."""

from __future__ import annotations

import pytest

obstore = pytest.importorskip("obstore")

from tests.io.test_objectstore import CLOUD_OPTIONS, FAST, FakeCloud, fetch_all  # noqa: E402
from dataloader.io import ObjectStoreDataset  # noqa: E402
from dataloader.io.ranges import RangeSettings  # noqa: E402


def content(size: int) -> bytes:
    """``size`` bytes in which every 4-byte word is its own index: a misplaced part shows."""
    return b"".join(i.to_bytes(4, "big") for i in range(size // 4 + 1))[:size]


SIZES = [0, 1, 6, 7, 8, 13, 14, 15, 20, 21, 22, 99]


class FailingCloud(FakeCloud):
    """``FakeCloud`` whose ranges starting at a byte of ``fail_at[key]`` get a 404."""

    def __init__(self) -> None:
        self.fail_at: dict[str, set[int]] = {}
        super().__init__()

    def answer(self, h, path):
        asked = h.headers.get("Range", "")
        if asked.startswith("bytes=") and int(asked[6:].split("-")[0]) in self.fail_at.get(path, ()):
            with self.lock:
                self.ranges.setdefault(path, []).append((int(asked[6:].split("-")[0]), -1))
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        super().answer(h, path)


@pytest.fixture
def cloud():
    c = FailingCloud()
    yield c
    c.close()


@pytest.mark.timeout(60)
def test_memory_store_objects_are_reassembled_exactly_around_chunk_boundaries():
    store = obstore.store.MemoryStore()
    for size in SIZES:
        obstore.put(store, f"k/{size}", content(size))
    ds = ObjectStoreDataset([f"k/{size}" for size in SIZES], store=store, range_parallel_threshold=8,
                            range_chunk_bytes=7)
    out = fetch_all(ds, batch_size=4, num_workers=2, item_concurrency=4)
    assert [x for _, batch in out for x in batch] == [content(size) for size in SIZES]


@pytest.mark.timeout(60)
def test_local_file_store_large_object_in_ranges(tmp_path):
    (tmp_path / "big.bin").write_bytes(content(1_000_001))
    ds = ObjectStoreDataset(["big.bin"], url=tmp_path.as_uri(), range_parallel_threshold=100_000,
                            range_chunk_bytes=65536)
    assert fetch_all(ds) == [("batch", [content(1_000_001)])]


@pytest.mark.timeout(60)
def test_gcs_client_asks_each_range_once_and_a_small_object_in_one_get(cloud):
    cloud.objects["/bkt/big.bin"] = content(300_000)
    cloud.objects["/bkt/small.bin"] = content(5000)
    ds = ObjectStoreDataset(["gs://bkt/big.bin", "gs://bkt/small.bin"], retry=FAST, range_parallel_threshold=100_000,
                            range_chunk_bytes=65536, **CLOUD_OPTIONS["gs"](cloud.endpoint))
    assert fetch_all(ds, batch_size=2) == [("batch", [content(300_000), content(5000)])]
    parts = RangeSettings(100_000, 65536).parts(300_000)
    assert sorted(cloud.ranges["/bkt/big.bin"]) == [(a, b - 1) for a, b in parts[1:]]
    assert cloud.gets["/bkt/big.bin"] == len(parts) and cloud.gets["/bkt/small.bin"] == 1
    assert "/bkt/small.bin" not in cloud.ranges


@pytest.mark.timeout(60)
def test_a_failing_range_fails_the_item_naming_the_object_and_max_bytes_asks_no_range(cloud):
    cloud.objects["/bkt/a.bin"] = content(300_000)
    cloud.objects["/bkt/b.bin"] = content(300_000)
    cloud.fail_at["/bkt/a.bin"] = {131072}
    ds = ObjectStoreDataset(["gs://bkt/a.bin"], retry=FAST, range_parallel_threshold=100_000, range_chunk_bytes=65536,
                            **CLOUD_OPTIONS["gs"](cloud.endpoint))
    ((kind, (name, args)),) = fetch_all(ds)
    assert (kind, name) == ("error", "FileNotFoundError") and "gs://bkt/a.bin" in args[1]
    assert (131072, -1) in cloud.ranges["/bkt/a.bin"]
    capped = ObjectStoreDataset(["gs://bkt/b.bin"], retry=FAST, max_bytes=200_000, range_parallel_threshold=100_000,
                                range_chunk_bytes=65536, **CLOUD_OPTIONS["gs"](cloud.endpoint))
    ((kind, (name, args)),) = fetch_all(capped)
    assert (kind, name) == ("error", "ValueError") and "300000 bytes, over max_bytes=200000" in args[0]
    assert "/bkt/b.bin" not in cloud.ranges


def test_bad_range_settings_name_the_value():
    with pytest.raises(ValueError, match="range_chunk_bytes=-1"):
        ObjectStoreDataset(["k"], store=obstore.store.MemoryStore(), range_parallel_threshold=1, range_chunk_bytes=-1)
