"""``Retry.wait_s``: the backoff, or at least the wait a server asked for (``retry_after_s``,
given as a keyword or carried by the exception), capped by ``max_backoff_s``."""

from __future__ import annotations

from dataloader.io import Retry

R = Retry(initial_backoff_s=0.5, max_backoff_s=10.0, jitter=False)


class _Asks(Exception):
    retry_after_s = 3.0


def test_wait_s_honours_a_retry_after_given_as_a_keyword_capped_by_max_backoff():
    assert R.wait_s(1) == 0.5
    assert R.wait_s(1, retry_after_s=2.0) == 2.0
    assert R.wait_s(1, ConnectionError("cut"), retry_after_s=2.0) == 2.0
    assert R.wait_s(1, retry_after_s=0.1) == 0.5  # a shorter ask leaves the backoff
    assert R.wait_s(1, retry_after_s=1e9) == 10.0


def test_wait_s_keyword_wins_over_the_exceptions_attribute_which_still_counts_alone():
    assert R.wait_s(1, _Asks()) == 3.0
    assert R.wait_s(1, _Asks(), retry_after_s=7.0) == 7.0
    assert R.wait_s(1, _Asks(), retry_after_s=None) == 3.0
