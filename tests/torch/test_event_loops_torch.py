"""``dataloader.torch.DataLoader(event_loops=n)``: the extra passes through torch's face, and
the built-in remote kinds whose items are coroutines (HTTP, object store; ``FileDataset``
reads on threads and refuses ``event_loops > 1``) give the same uint8 tensors on one event
loop or three."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests._remote_items import KINDS, remote_images  # noqa: E402
from dataloader.image import Decode  # noqa: E402
import dataloader.torch as dt  # noqa: E402

pytestmark = [pytest.mark.timeout(60),
              # Decode's arrays are read-only; torch's collate warns once about that (test_io_items.py)
              pytest.mark.filterwarnings("ignore:The given NumPy array is not writable:UserWarning")]


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "file"])
def test_every_remote_kind_gives_the_same_tensors_on_one_loop_or_three(kind, tmp_path):
    with remote_images(kind, tmp_path, 9) as (ds, _):
        def run(loops):
            with dt.DataLoader(ds, batch_size=3, num_workers=2, item_concurrency=3, transform=Decode(),
                               event_loops=loops) as loader:
                assert loader.event_loops == loops
                return [b.clone() for b in loader]

        one, three = run(1), run(3)
    assert len(one) == 3 and all(b.dtype == torch.uint8 for b in one)
    assert all(torch.equal(a, b) for a, b in zip(one, three, strict=True))


def test_a_file_dataset_refuses_more_than_one_loop(tmp_path):
    with remote_images("file", tmp_path, 2) as (ds, _), pytest.raises(ValueError, match="event_loops=2"):
        dt.DataLoader(ds, event_loops=2)
