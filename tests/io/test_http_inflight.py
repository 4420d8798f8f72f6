"""HttpDataset requests in flight across batch boundaries, seen from the server: the requests
of batch k + 1 start before batch k is collated, never more than ``num_workers *
item_concurrency`` at once, and ending the epoch closes every request of every batch."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("aiohttp")

from tests._http_server import FaultServer  # noqa: E402
from dataloader import DataLoader  # noqa: E402
from dataloader.io import HttpDataset, Retry  # noqa: E402

FAST = Retry(max_attempts=1, attempt_timeout_s=10.0)


class Counting(FaultServer):
    """``/item/I?s=T``: answers after T seconds; counts the requests being answered."""

    def __init__(self) -> None:
        super().__init__()
        self.now = self.peak = 0
        self.arrived: dict[int, float] = {}

    def handle(self, h) -> None:
        parts = urlsplit(h.path)
        if not parts.path.startswith("/item/"):
            super().handle(h)
            return
        index = int(parts.path.split("/")[2])
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.arrived[index] = time.monotonic()
        try:
            time.sleep(float(parse_qs(parts.query)["s"][0]))
            self.send(h, 200, b"x", 8)
        finally:
            with self.lock:
                self.now -= 1


@pytest.fixture
def server():
    s = Counting()
    yield s
    s.close()


def wait_until(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


@pytest.mark.timeout(60)
def test_the_server_sees_the_next_batch_before_a_slow_batch_is_collated(server):
    delays = [0.01] * 16
    delays[3] = 0.5  # batch 0's last item
    ds = HttpDataset([server.url(f"/item/{i}?s={s}") for i, s in enumerate(delays)], retry=FAST)
    collated: list[float] = []

    def collate(items):
        collated.append(time.monotonic())
        return len(items)

    with DataLoader(ds, batch_size=4, num_workers=1, item_concurrency=4, prefetch_depth=3,
                    collate_fn=collate) as loader:
        assert list(loader) == [4, 4, 4, 4]
    assert server.arrived[4] < server.arrived[3] + 0.4 < collated[0]  # batch 1 asked for while item 3 waited
    assert server.peak <= 4


@pytest.mark.timeout(60)
def test_ending_the_epoch_closes_the_requests_of_every_batch_in_flight(server):
    # Batch 0: three quick items and one that hangs; batch 1 (started in the free slots) hangs.
    urls = [server.url(f"/item/{i}?s=0.001") for i in range(3)] + [server.url(f"/hang/{i}") for i in range(3, 40)]
    loader = DataLoader(HttpDataset(urls, retry=FAST), batch_size=4, num_workers=1, item_concurrency=8,
                        collate_fn=list)
    it = iter(loader)
    assert wait_until(lambda: server.hanging == 5)
    it.close()
    assert wait_until(lambda: server.hanging == 0)  # every hung request's connection closed by the client
    time.sleep(0.1)
    assert server.count("/hang/9") == 0  # nothing started after the epoch ended
    loader.close()
