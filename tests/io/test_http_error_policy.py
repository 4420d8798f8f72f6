"""A flaky ``HttpDataset`` (1% of its URLs always 404 or 500, on a real local server) under
``on_error="skip"`` / ``"replace"``: the epoch completes and ``loader.failures`` names exactly
the bad URLs, their secret parameters redacted."""

from __future__ import annotations

import pytest

pytest.importorskip("aiohttp")

from tests._http_server import FaultServer  # noqa: E402
from dataloader import DataLoader  # noqa: E402
from dataloader.io import HttpDataset, Retry  # noqa: E402

FAST = Retry(max_attempts=2, initial_backoff_s=0.001, max_backoff_s=0.002, attempt_timeout_s=5.0)
N = 200
BAD = {17: "404", 133: "500"}  # 1%


@pytest.fixture(scope="module")
def server():
    s = FaultServer()
    yield s
    s.close()


def _urls(server):
    return [server.url(f"/status/{BAD[i]}?item={i}&token=s3cret") if i in BAD else server.url(f"/ok/k{i}?size=64")
            for i in range(N)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("policy", ["skip", "replace"])
def test_permanently_failing_urls_are_reported_exactly_and_the_epoch_completes(server, policy, num_workers):
    urls = _urls(server)
    with DataLoader(HttpDataset(urls, retry=FAST), batch_size=20, shuffle=True, seed=2, collate_fn=list,
                    num_workers=num_workers, item_concurrency=4, on_error=policy) as loader:
        batches = list(loader)
        failures = loader.failures
    expected = sorted(urls[i].replace("s3cret", "***") for i in BAD)
    assert sorted({r.location for r in failures}) == expected
    assert not any("s3cret" in (r.location or "") + r.message for r in failures)
    assert {r.index for r in failures} <= set(BAD) | set(range(N))
    sizes = [len(b) for b in batches]
    if policy == "skip":
        assert sum(sizes) == N - len(BAD) and len(failures) == len(BAD)
    else:
        assert sizes == [20] * (N // 20)
        assert all(not b.startswith(b"/status") for batch in batches for b in batch)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_under_skip_each_url_is_requested_once_per_attempt_and_no_batch_is_narrowed(server, num_workers):
    # paths of their own (the server counts per path); one attempt a request (no retry)
    once = Retry(max_attempts=1, attempt_timeout_s=5.0)
    bad = {3, 40, 41, 77}
    urls = [server.url(f"/status/404/once{num_workers}-{i}" if i in bad else f"/ok/once{num_workers}-{i}?size=8")
            for i in range(80)]
    with DataLoader(HttpDataset(urls, retry=once), batch_size=16, collate_fn=list, num_workers=num_workers,
                    item_concurrency=8, on_error="skip") as loader:
        assert sum(map(len, loader)) == len(urls) - len(bad)
        assert sorted(r.index for r in loader.failures) == sorted(bad)
    paths = [u[u.index("/", len("http://")):].split("?")[0] for u in urls]
    assert {p: server.count(p) for p in paths} == {p: 1 for p in paths}
