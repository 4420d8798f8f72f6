"""``Retry.wait_s(..., retry_after_s=)`` refuses a wait that is not a number of seconds >= 0,
naming it: nan and a negative wait were ignored silently, a string was parsed ("3" waited 3 s),
True waited 1 s.  ``inf`` is still taken (capped by ``max_backoff_s``)."""

from __future__ import annotations

import pytest

from dataloader.io import Retry

R = Retry(initial_backoff_s=0.5, max_backoff_s=10.0, jitter=False)


@pytest.mark.parametrize("asked, error, message", [
    (float("nan"), ValueError, r"retry_after_s=nan must be >= 0"),
    (-1.0, ValueError, r"retry_after_s=-1.0 must be >= 0"),
    ("3", TypeError, r"retry_after_s must be a number of seconds or None, got '3' \(str\)"),
    (True, TypeError, r"got True \(bool\)"),
    (10**400, ValueError, r"retry_after_s is an int of about 401 digits"),
])
def test_a_bad_retry_after_is_refused_naming_it(asked, error, message):
    with pytest.raises(error, match=message):
        R.wait_s(1, retry_after_s=asked)


def test_an_infinite_zero_or_numpy_float64_retry_after_is_taken():
    np = pytest.importorskip("numpy")
    assert R.wait_s(1, retry_after_s=float("inf")) == 10.0
    assert R.wait_s(1, retry_after_s=0) == 0.5
    assert R.wait_s(1, retry_after_s=np.float64(2.0)) == 2.0
