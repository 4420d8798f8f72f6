"""Epoch iterators over an ``IterableDataset``.

As in PyTorch, every worker runs its own ``iter(dataset)``; the dataset shards
itself with ``get_worker_info()`` (a dataset that does not shard yields its
items once per worker).  Each worker batches and collates its own items.  With
``in_order=True`` the consumer takes batches from the workers in turn (worker
0, 1, ..., skipping workers that are done), which is PyTorch's order; with
``in_order=False`` it takes whichever batch is ready first.

At most ``num_workers + prefetch_depth`` batches (the window) are being built
or wait, as for map-style epochs: a worker takes a permit from a budget before
it builds a batch, and the consumer gives it back when it takes the batch.  In
order, each worker has its own share of the window (``window // num_workers``,
the remainder to the first workers; ``prefetch_factor`` each when it is given,
torch's bound); out of order the workers share one budget.

An exception from the dataset's iterator or from ``collate_fn`` is raised for
its batch; the worker then goes on calling ``next()`` on its iterator (a
generator that raised is finished, which ends that worker), as PyTorch's
workers do.  A stream ends at its first ``StopIteration``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from dataloader import _context
from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S, WAIT_SLICE_S
from dataloader._engine.errors import reported_length, timeout_error, warn_past_length
from dataloader._engine.fetch import Failure
from dataloader._engine.map_epoch import EpochIterator
from dataloader._engine.pool import WorkerPool, start_worker, worker_copy

__all__ = ["IterableBatcher", "IterableSequentialIterator", "IterableWorkerIterator"]

_END = object()


class _Stream:
    """One ``iter(dataset)``, ended for good at its first ``StopIteration``.

    As in PyTorch, an iterator that would yield again after ``StopIteration`` is
    not asked again: the batch cut short by ``StopIteration`` is the last one.
    """

    __slots__ = ("it", "ended")

    def __init__(self, it: Any) -> None:
        self.it = it
        self.ended = False


class IterableBatcher:
    """Cuts one iterator's items into collated batches.

    Args:
        batch_size: items per batch, or None for no auto-batching (one item each).
        drop_last: drop a short final batch.
        collate_fn: called with the list of items (or the single item).
        transform: per-item ``transform(item)``, or None.
        epoch_key: ``(base_seed, epoch)`` for ``item_rng``.
    """

    def __init__(
        self,
        batch_size: int | None,
        drop_last: bool,
        collate_fn: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None,
        epoch_key: tuple[int, int],
    ) -> None:
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.collate_fn = collate_fn
        self.transform = transform
        self.epoch_key = epoch_key

    def next_batch(self, stream: _Stream) -> Any:
        """The next batch (or ``Failure``) from ``stream``, or ``_END`` when it has ended.

        The thread's ``item_rng`` epoch is set for the call and restored afterwards.
        """
        if stream.ended:
            return _END
        saved = _context._swap_epoch_key(self.epoch_key)
        try:
            return self._next_batch(stream)
        finally:
            _context._set_epoch_key(saved)

    def _next_batch(self, stream: _Stream) -> Any:
        it = stream.it
        want = 1 if self.batch_size is None else self.batch_size
        items: list[Any] = []
        try:
            while len(items) < want:
                items.append(next(it))
        except StopIteration:  # the stream ended
            stream.ended = True
            if not items or (self.drop_last and self.batch_size is not None):
                return _END
        except BaseException as exc:
            return Failure(exc)
        try:
            if self.transform is not None:
                items = [self.transform(item) for item in items]
            return self.collate_fn(items[0] if self.batch_size is None else items)
        except StopIteration as exc:
            # Not the end of the stream: a short epoch would hide it (PEP 479).
            return Failure(RuntimeError("transform or collate_fn raised StopIteration").with_traceback(
                exc.__traceback__
            ))
        except BaseException as exc:
            return Failure(exc)


class IterableSequentialIterator(EpochIterator):
    """``num_workers=0``: items are drawn and batched inside ``next()``."""

    def __init__(self, dataset: Any, batcher: IterableBatcher, length: int | None) -> None:
        self._length = length
        self._dataset = dataset
        self._dataset_len = reported_length(dataset)
        self._yielded = 0
        self._batcher: IterableBatcher | None = batcher
        self._it: _Stream | None = self._start(lambda: _Stream(iter(dataset)))

    def __next__(self) -> Any:
        self._raise_start_error()
        if self._it is None or self._batcher is None:
            raise StopIteration
        out = self._batcher.next_batch(self._it)
        if out is _END:
            self.close()
            raise StopIteration
        if isinstance(out, Failure):
            out.reraise()
        self._yielded += 1
        warn_past_length(self._dataset, self._dataset_len, self._yielded, 0)
        return out

    def close(self) -> None:
        self._it = None
        self._batcher = None


class _IterableEpoch:
    """What the worker threads of an iterable epoch share."""

    def __init__(
        self,
        pool: WorkerPool,
        dataset: Any,
        batcher: IterableBatcher,
        window: int,
        in_order: bool,
        worker_setup: tuple[int, Any, Any, bool],
    ) -> None:
        n = pool.num_workers
        self.pool = pool
        self.dataset = dataset
        self.batcher: IterableBatcher | None = batcher
        self.worker_setup = worker_setup
        self.cancelled = threading.Event()
        self.active = n
        self.idle = threading.Condition(threading.Lock())
        # Every entry of a queue holds one permit of its worker's budget (see the
        # module docstring), so the queues need no bound of their own.
        if in_order:
            share, extra = divmod(window, n)
            self.budgets = [threading.Semaphore(share + (w < extra)) for w in range(n)]
            self.queues: list[queue.SimpleQueue[Any]] = [queue.SimpleQueue() for _ in range(n)]
        else:
            self.budgets = [threading.Semaphore(window)] * n
            self.queues = [queue.SimpleQueue()] * n

    def work(self, worker_id: int) -> None:
        try:
            seed, dataset, init_fn, persistent = self.worker_setup
            batcher = self.batcher
            out = self.queues[worker_id]
            budget = self.budgets[worker_id]
            it = None
            try:
                dataset = worker_copy(dataset, persistent)
                # Like a torch worker process, every worker runs worker_init_fn at the
                # start of the epoch, also when the epoch was closed before it woke up.
                start_worker(
                    worker_id, self.pool.num_workers, seed + worker_id, dataset, init_fn,
                    self.pool.needs_init(worker_id, persistent),
                )
                if self.cancelled.is_set():
                    return
                it = _Stream(iter(dataset))
            except BaseException as exc:
                for entry in (Failure(exc), _END):
                    if not (self._acquire(budget) and self._put(out, (worker_id, entry))):
                        break
                return
            del dataset, init_fn
            while self._acquire(budget):
                payload = batcher.next_batch(it)  # type: ignore[union-attr]
                if not self._put(out, (worker_id, payload)) or payload is _END:
                    break
                del payload
        finally:
            # Drop the stream and the batcher before counting this worker out: close()
            # returns when the count reaches 0, and then nothing may hold the dataset.
            it = batcher = dataset = None
            _context._set_worker(None)
            _context._set_epoch_key(None)
            with self.idle:
                self.active -= 1
                self.idle.notify_all()

    def _acquire(self, budget: threading.Semaphore) -> bool:
        """Take a permit to build one batch; False once the epoch is cancelled."""
        while not self.cancelled.is_set():
            if budget.acquire(timeout=WAIT_SLICE_S):
                return not self.cancelled.is_set()
        return False

    def _put(self, out: queue.SimpleQueue[Any], entry: Any) -> bool:
        if self.cancelled.is_set():
            return False
        out.put(entry)
        return True

    def close(self) -> None:
        self.cancelled.set()
        for budget in {id(b): b for b in self.budgets}.values():
            budget.release(self.pool.num_workers)  # wake the workers waiting for a permit
        for q in self.queues:
            _drain(q)
        if not self.pool.owns_current_thread():
            with self.idle:
                self.idle.wait_for(lambda: self.active <= 0, SHUTDOWN_JOIN_TIMEOUT_S)
        self.pool.clear(self)
        for q in self.queues:
            _drain(q)
        self.dataset = None
        self.batcher = None
        self.worker_setup = (0, None, None, False)


def _drain(q: queue.SimpleQueue[Any]) -> None:
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return


class IterableWorkerIterator(EpochIterator):
    """``num_workers > 0`` over an ``IterableDataset``."""

    def __init__(
        self,
        pool: WorkerPool,
        dataset: Any,
        batcher: IterableBatcher,
        window: int,
        length: int | None,
        timeout_s: float,
        in_order: bool,
        worker_setup: tuple[int, Any, Any, bool],
    ) -> None:
        self._closed = False
        self._length = length
        self._dataset = dataset
        self._dataset_len = reported_length(dataset)
        self._timeout_s = timeout_s
        self._in_order = in_order
        self._epoch = _IterableEpoch(pool, dataset, batcher, window, in_order, worker_setup)
        self._live = list(range(pool.num_workers))
        self._num_workers = pool.num_workers
        self._turn = 0
        self._taken = 0  # batches (and errors) returned so far: the next one's number
        pool.run(self._epoch)

    def __next__(self) -> Any:
        while True:
            if self._closed or not self._live:
                self.close()
                raise StopIteration
            if self._in_order:
                worker = self._live[self._turn % len(self._live)]
                q = self._epoch.queues[worker]
                source = f"from worker {worker}"
            else:
                q = self._epoch.queues[0]
                source = "from any worker"
            worker, payload = self._get(q, source)
            if self._closed:  # closed from another thread while we waited
                raise StopIteration
            self._epoch.budgets[worker].release()
            if payload is _END:
                i = self._live.index(worker)
                self._live.remove(worker)
                if self._in_order and self._live:
                    self._turn = i % len(self._live)
                continue
            if self._in_order:
                self._turn = (self._live.index(worker) + 1) % len(self._live)
            self._taken += 1
            if isinstance(payload, Failure):
                payload.reraise()
            warn_past_length(self._dataset, self._dataset_len, self._taken, self._num_workers)
            return payload

    def _get(self, q: queue.SimpleQueue[Any], source: str) -> Any:
        start = time.monotonic()
        while True:
            try:
                return q.get(timeout=WAIT_SLICE_S)
            except queue.Empty:
                if self._closed or self._epoch.cancelled.is_set():
                    raise StopIteration from None
                if self._timeout_s > 0 and time.monotonic() - start >= self._timeout_s:
                    raise timeout_error(self._timeout_s, f"batch {self._taken} ({source}) was not ready") from None

    def close(self) -> None:
        """Stop the epoch (from any thread; a ``next()`` blocked elsewhere then ends)."""
        if self._closed:
            return
        self._closed = True
        self._epoch.close()
        self._release_pool()
