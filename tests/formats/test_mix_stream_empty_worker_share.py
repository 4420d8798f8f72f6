"""A MixStream in a worker whose share of a source is empty (fewer shards than workers) fails
with an error that names the worker and why, not only the source."""

from __future__ import annotations

import pytest

from dataloader import DataLoader, IterableDataset, MixDataset, get_worker_info

pytestmark = pytest.mark.timeout(60)


class Shards(IterableDataset):
    """``shards`` shards of 5 numbers from ``base``, dealt to the workers (shard ``k`` to worker
    ``k % num_workers``), as ``TarShardDataset`` deals its shards."""

    def __init__(self, base: int, shards: int) -> None:
        self.base, self.shards = base, shards

    def __iter__(self):
        info = get_worker_info()
        workers, me = (1, 0) if info is None else (info.num_workers, info.id)
        for k in range(me, self.shards, workers):
            yield from range(self.base + 5 * k, self.base + 5 * k + 5)


def test_a_worker_with_no_shard_of_a_source_names_itself_and_the_reason():
    mix = MixDataset([Shards(0, 2), Shards(100, 3)], [1, 1], stop_on="all_exhausted")
    loader = DataLoader(mix, batch_size=2, num_workers=3)
    with pytest.raises(ValueError, match=r"sources\[0\] yielded nothing when it restarted \(pass 1\), in worker 2 "
                                         r"of 3: .*fewer shards than workers"):
        list(loader)


def test_without_workers_the_message_is_the_sources_alone():
    mix = MixDataset([Shards(0, 0), Shards(100, 3)], [1, 1], stop_on="all_exhausted")
    with pytest.raises(ValueError, match=r"sources\[0\] yielded nothing when it restarted \(pass 1\)$"):
        list(mix)
