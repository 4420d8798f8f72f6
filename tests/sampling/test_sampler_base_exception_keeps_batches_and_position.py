"""A BaseException (KeyboardInterrupt, SystemExit, a user BaseException subclass)
raised by the sampler with num_workers > 0.

Observed (3.11 and 3.13t): Epoch._fill catches only Exception, and _next calls
_fill after it has taken a finished batch from the window and before returning
it.  So the exception escapes next() in place of a finished batch (batch 6 is
lost), it is raised at position 6 rather than 10, and then the epoch goes on
yielding 7, 8, 9.  If it happens in the first fill, it escapes iter(loader).
Expected: as with num_workers=0 -- batches 0..9 in order, then the exception
at position 10, then the epoch ends; no batch lost.
"""
import pytest

from dataloader import DataLoader


class Boom(BaseException):
    pass


class Sampler:
    def __init__(self, at):
        self.at = at

    def __len__(self):
        return 20

    def __iter__(self):
        for i in range(20):
            if i == self.at:
                raise Boom("from the sampler")
            yield i


def _drain(loader):
    it = iter(loader)
    got, raised = [], []
    for _ in range(40):
        try:
            got.append(int(next(it)[0]))
        except StopIteration:
            break
        except Boom:
            raised.append(len(got))
    loader.close()
    return got, raised


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_no_batch_lost_and_raised_at_its_position(num_workers):
    got, raised = _drain(DataLoader(list(range(20)), batch_size=1, num_workers=num_workers, sampler=Sampler(10)))
    assert got == list(range(10))
    assert raised == [10]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_base_exception_in_first_fill_is_raised_by_next_not_iter(num_workers):
    loader = DataLoader(list(range(20)), batch_size=1, num_workers=num_workers, sampler=Sampler(2))
    it = iter(loader)  # with workers this raises Boom today
    assert int(next(it)[0]) == 0
    assert int(next(it)[0]) == 1
    with pytest.raises(Boom):
        next(it)
    loader.close()
