"""Interop with the ``webdataset`` package: shards its ``TarWriter`` writes read back identically,
and our samples equal ``webdataset.WebDataset(urls, shardshuffle=False)``'s.

webdataset needs PyYAML, which has no cp313t wheel: 3.11 only (installed beside torch from the
``clients`` extra); the tests skip where it is missing.
"""

from __future__ import annotations

import gc

import pytest

from dataloader import DataLoader, TarShardDataset

wds = pytest.importorskip("webdataset", reason="webdataset (the 'clients' extra; PyYAML has no cp313t wheel)")


def _write(root, shards, per_shard):
    written = []
    for s in range(shards):
        with wds.TarWriter(str(root / f"w-{s:03d}.tar")) as sink:
            for i in range(per_shard):
                k = s * per_shard + i
                sample = {"__key__": f"sample{k:05d}", "jpg": bytes([k % 256]) * (50 + k), "cls": str(k % 7).encode(),
                          "seg.png": b"\x89PNG" + bytes(k), "json": f'{{"k": {k}}}'.encode()}
                sink.write(sample)
                written.append(sample)
    return str(root / f"w-{{000..{shards - 1:03d}}}.tar"), written


def _plain(sample):
    return {k: (bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else v) for k, v in sample.items()}


def test_shards_written_by_tarwriter_read_back_identically(tmp_path):
    pattern, written = _write(tmp_path, 3, 5)
    ours = list(TarShardDataset(pattern))
    assert [{k: v for k, v in s.items() if k not in ("__url__", "__local_path__")} for s in ours] == written
    assert [s["__url__"][-9:] for s in ours] == [f"w-{k // 5:03d}.tar" for k in range(15)]


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_our_samples_equal_webdatasets_for_the_same_shards(tmp_path):
    pattern, _ = _write(tmp_path, 3, 5)
    theirs = [_plain(s) for s in wds.WebDataset(pattern, shardshuffle=False, empty_check=False)]
    gc.collect()  # webdataset 1.0.2 leaves its last shard's file open: collected here, not in a later test
    ours = list(TarShardDataset(pattern))
    assert ours == theirs
    loader = DataLoader(TarShardDataset(pattern, shuffle_shards=True, shuffle_buffer=4), batch_size=4, num_workers=2,
                        collate_fn=list)
    shuffled = [s for batch in loader for s in batch]
    assert sorted(shuffled, key=lambda s: s["__key__"]) == theirs  # order aside where it shuffles
