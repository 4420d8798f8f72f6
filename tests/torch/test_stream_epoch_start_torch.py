"""``dataloader.torch.DataLoader`` over a torch ``IterableDataset`` whose ``state_dict()`` is the
position of its current or last iteration: a state taken at an epoch's start (a second loader
over the same object, ``iter()`` before the first ``next()``; an ended epoch) resumes the whole
epoch, not the ended one's last position (tests/engine/test_stream_epoch_start.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (3.13t)")
tud = pytest.importorskip("torch.utils.data")

import dataloader.torch as dt  # noqa: E402
from tests._support import json_roundtrip  # noqa: E402

pytestmark = pytest.mark.timeout(60)

N = 12


class LastRunStream(tud.IterableDataset):
    """This worker's share of ``range(N)``; its state is where its current or last iteration is."""

    def __init__(self):
        self.position = {"next": 0}
        self.start = None

    def __iter__(self):
        info = tud.get_worker_info()
        wid, step = (info.id, info.num_workers) if info is not None else (0, 1)
        first = wid if self.start is None else self.start["next"]
        self.start, self.position = None, {"next": first}
        for i in range(first, N, step):
            self.position = {"next": i + step}
            yield i

    def state_dict(self):
        return dict(self.start if self.start is not None else self.position)

    def load_state_dict(self, sd):
        self.start = dict(sd)


def epoch(loader):
    return sorted(int(x) for batch in loader for x in batch)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_state_at_an_epochs_start_resumes_the_whole_epoch_on_the_torch_face(num_workers):
    ds = LastRunStream()
    with dt.DataLoader(ds, batch_size=4, num_workers=num_workers) as first:
        assert epoch(first) == list(range(N))
        boundary = json_roundtrip(first.state_dict())
    with dt.DataLoader(ds, batch_size=4, num_workers=num_workers) as second:
        it = iter(second)
        start = json_roundtrip(second.state_dict())
        del it
    for state in (boundary, start):
        with dt.DataLoader(ds, batch_size=4, num_workers=num_workers) as again:
            again.load_state_dict(state)
            assert epoch(again) == list(range(N))
