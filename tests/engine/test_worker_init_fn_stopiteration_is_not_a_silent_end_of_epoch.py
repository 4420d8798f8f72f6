"""A worker_init_fn that raises StopIteration must not end the epoch silently.

Observed: the epoch yields no batch and ends without an error (map-style and
iterable datasets).  Expected: as for __getitem__/collate_fn, StopIteration is
turned into a RuntimeError raised by next()
(also when an IterableDataset's __iter__ raises StopIteration, num_workers=0 too;
torch lets it escape iter(loader)) (or the batches are built by the
workers whose init succeeded) -- never a silently empty epoch.
"""
import pytest

from dataloader import DataLoader, IterableDataset


def _init(worker_id):
    raise StopIteration


class _Stream(IterableDataset):
    def __iter__(self):
        return iter(range(8))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kw", [dict(num_workers=1), dict(num_workers=2), dict(num_workers=1, item_concurrency=2)])
def test_map_style(kw):
    loader = DataLoader(list(range(8)), batch_size=2, worker_init_fn=_init, **kw)
    with pytest.raises(RuntimeError):
        list(loader)
    loader.close()


@pytest.mark.timeout(30)
def test_iterable():
    loader = DataLoader(_Stream(), batch_size=2, num_workers=2, worker_init_fn=_init)
    with pytest.raises(RuntimeError):
        list(loader)
    loader.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_iterable_dataset_iter_raising_stopiteration(num_workers):
    class Bad(IterableDataset):
        def __iter__(self):
            raise StopIteration
    loader = DataLoader(Bad(), batch_size=2, num_workers=num_workers)
    with pytest.raises(RuntimeError):
        list(loader)
    loader.close()
