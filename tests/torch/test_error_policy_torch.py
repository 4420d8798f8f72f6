"""``dataloader.torch.DataLoader`` takes ``on_error`` / ``max_failures`` (forwarded to the
engine) and reports failures as ours does; skipped where torch is absent (3.13t)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from dataloader import TooManyFailures  # noqa: E402
from dataloader.torch import DataLoader  # noqa: E402


class Flaky(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, index):
        if index in (2, 5):
            raise OSError(f"corrupt {index}")
        return torch.tensor(index)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_torch_face_skips_failing_items_and_reports_them(num_workers):
    loader = DataLoader(Flaky(), batch_size=4, num_workers=num_workers, on_error="skip")
    assert [b.tolist() for b in loader] == [[0, 1, 3], [4, 6, 7], [8, 9]]
    assert [r.index for r in loader.failures] == [2, 5]
    assert (loader.on_error, loader.stats.skipped) == ("skip", 2)
    with pytest.raises(TooManyFailures):
        list(DataLoader(Flaky(), batch_size=4, num_workers=num_workers, on_error="replace", max_failures=1))
