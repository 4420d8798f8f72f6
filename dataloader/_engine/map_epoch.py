"""Epoch iterators over a map-style dataset.

``SequentialIterator`` (``num_workers=0``) does everything inside ``next()``.
``WindowedIterator`` (``num_workers > 0``) runs the claim window of
``_native._ring``: the consumer thread advances the batch sampler lazily, only
as the window moves, and publishes each batch's indices; worker threads claim,
build and complete batches; the reorder ring gives them back in epoch order.

Both keep the same contract, so their outputs are identical for every
``(num_workers, prefetch_depth, item_concurrency)``:

- a batch's exception is raised by ``next()`` for that batch, and the next
  ``next()`` continues;
- an exception from the sampler is raised at the position where it happened,
  after every earlier batch, and then the epoch ends (a failure to start the
  epoch is raised by the first ``next()``);
- ``close()`` (also on ``break`` through ``with``, or garbage collection) stops
  the epoch: no worker starts another batch, batches in flight are waited for
  (at most ``SHUTDOWN_JOIN_TIMEOUT_S``) and dropped, and nothing of the epoch
  stays referenced by the pool's threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from dataloader import _context
from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S
from dataloader._engine.errors import timeout_error
from dataloader._engine.fetch import Failure, Fetcher
from dataloader._native._ring import Window
from dataloader._engine.pool import WorkerPool, start_worker

__all__ = ["EpochIterator", "SequentialIterator", "WindowedIterator"]


class EpochIterator:
    """Common surface of one epoch: iteration, ``len``, ``close`` and context management."""

    _length: int | None = None
    _loader: Any = None

    def __iter__(self) -> EpochIterator:
        return self

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError("this epoch has no length (its sampler or dataset has no __len__)")
        return self._length

    def __enter__(self) -> EpochIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # never raise from a finalizer
            pass

    def close(self) -> None:
        raise NotImplementedError

    # Seed 004: a failure to start the epoch is raised once, by the first next(), and
    # then the epoch ends.
    _start_error: BaseException | None = None

    def _start(self, begin: Callable[[], Any]) -> Any:
        """Start the epoch with ``begin()``; keep its exception for the first ``next()``."""
        try:
            return begin()
        except Exception as exc:
            self._start_error = exc
            return None

    def _raise_start_error(self) -> None:
        if self._start_error is not None:
            exc, self._start_error = self._start_error, None
            self.close()
            raise exc

    # An epoch started while another epoch of the same loader is open runs on a pool of
    # its own (as each torch iterator has its own worker processes); it shuts it down
    # when it closes.
    _own_pool: Any = None

    def _release_pool(self) -> None:
        pool, self._own_pool = self._own_pool, None
        if pool is not None:
            pool.shutdown(join=False)


class SequentialIterator(EpochIterator):
    """``num_workers=0``: the sampler, the dataset and collation run inside ``next()``."""

    def __init__(self, make_indices: Callable[[], Iterator[Any]], fetch: Fetcher, length: int | None) -> None:
        self._length = length
        self._fetch: Fetcher | None = fetch
        self._indices: Iterator[Any] | None = self._start(make_indices)

    def __next__(self) -> Any:
        self._raise_start_error()
        indices_it, fetch = self._indices, self._fetch  # close() may run on another thread
        if indices_it is None or fetch is None:
            raise StopIteration
        try:
            indices = next(indices_it)
        except StopIteration:
            self.close()
            raise
        except Exception:
            self.close()
            raise
        return fetch(indices)

    def close(self) -> None:
        self._indices = None
        self._fetch = None


class _Epoch:
    """The part of an epoch that worker threads see: window, slots, fetcher.

    Workers hold this object, never the consumer's iterator, so dropping the
    iterator lets the garbage collector close the epoch.
    """

    def __init__(self, pool: WorkerPool, window: int, fetch: Fetcher, worker_setup: tuple[Any, ...]) -> None:
        self.pool = pool
        self.window = Window(window)
        self.size = window
        self.tasks: list[Any] = [None] * window
        self.results: list[Any] = [None] * window
        self.fetch: Fetcher | None = fetch
        self.worker_setup = worker_setup

    def close(self, wait: bool = True) -> None:
        """Cancel the epoch; with ``wait``, let batches in flight finish (bounded)."""
        window = self.window
        window.cancel()
        if wait and not self.pool.owns_current_thread():
            window.wait_idle(SHUTDOWN_JOIN_TIMEOUT_S)
        self.pool.clear(self)
        self.fetch = None
        self.worker_setup = (0, None, None, False)
        for i in range(self.size):
            self.tasks[i] = None
            self.results[i] = None

    def work(self, worker_id: int) -> None:
        """The worker loop: claim a batch, build it, complete it; until none is left."""
        window = self.window
        fetch = tasks = results = None
        try:
            # worker_init_fn runs on every worker every epoch, even one closed before the
            # worker woke up (close() waits for it), as torch's worker processes do.
            fetch = self.fetch
            seed, dataset, init_fn, persistent = self.worker_setup
            init_error: BaseException | None = None
            init_tb = None
            try:
                start_worker(
                    worker_id,
                    self.pool.num_workers,
                    seed + worker_id,
                    dataset,
                    init_fn,
                    self.pool.needs_init(worker_id, persistent),
                )
            except BaseException as exc:
                # A failing worker_init_fn fails every batch this worker builds.
                init_error, init_tb = exc, exc.__traceback__
            del dataset, init_fn
            tasks, results, size = self.tasks, self.results, self.size
            while (k := window.claim()) >= 0:
                slot = k % size
                if init_error is not None:
                    result: Any = Failure(init_error, init_tb)
                else:
                    try:
                        result = fetch(tasks[slot])  # type: ignore[misc]
                    except BaseException as exc:  # carried to the consumer
                        result = Failure(exc)
                        del exc
                results[slot] = result
                del result
                window.complete(k)
        finally:
            # Drop every reference into the epoch before leave(): close() returns as soon
            # as the last worker leaves, and then nothing may hold the dataset.
            fetch = tasks = results = None
            _context._set_worker(None)
            _context._set_epoch_key(None)
            window.leave()


class WindowedIterator(EpochIterator):
    """``num_workers > 0``: worker threads fill a bounded, ordered window of batches.

    Args:
        pool: the loader's worker pool.
        make_indices: starts the epoch's batch sampler (called here, on the consumer).
        fetch: builds one batch from its indices.
        window: number of batches being built or waiting (``num_workers + prefetch_depth``).
        length: ``len()`` of the epoch, or None.
        timeout_s: seconds ``next()`` waits for one batch; 0 waits without limit.
        in_order: False yields batches in completion order.
        worker_setup: ``(epoch seed, dataset, worker_init_fn, persistent_workers)``.
    """

    def __init__(
        self,
        pool: WorkerPool,
        make_indices: Callable[[], Iterator[Any]],
        fetch: Fetcher,
        window: int,
        length: int | None,
        timeout_s: float,
        in_order: bool,
        worker_setup: tuple[int, Any, Callable[[int], None] | None, bool],
    ) -> None:
        self._closed = False
        self._busy = False  # a thread is inside next()
        self._cleaned = False
        self._close_wait = True
        self._state = threading.Lock()  # guards the four flags above; never held while waiting
        self._length = length
        self._epoch = _Epoch(pool, window, fetch, worker_setup)
        self._timeout_s = timeout_s
        self._in_order = in_order
        self._indices: Iterator[Any] | None = None
        self._exhausted = False
        self._pending_error: tuple[int, BaseException] | None = None
        try:
            self._indices = make_indices()
        except Exception as exc:
            self._pending_error = (0, exc)
            self._exhausted = True
            self._epoch.window.finish()
            return
        self._fill()
        self._epoch.window.enter(pool.num_workers)
        pool.run(self._epoch)

    def _fill(self) -> None:
        """Publish batches until the window is full or the sampler is exhausted."""
        epoch = self._epoch
        window, tasks, size = epoch.window, epoch.tasks, epoch.size
        limit = window.base + size
        while not self._exhausted and not self._closed and window.published < limit:
            try:
                indices = next(self._indices)  # type: ignore[arg-type]
            except StopIteration:
                self._exhausted = True
                window.finish()
                return
            except Exception as exc:
                self._pending_error = (window.published, exc)
                self._exhausted = True
                window.finish()
                return
            tasks[window.published % size] = indices
            if window.publish() < 0:  # cancelled by a close() meanwhile
                return

    def __next__(self) -> Any:
        # close() may come from any thread at any time, also from code that next() runs
        # (the sampler).  It never waits for next(): while next() runs it only cancels the
        # window (waking the wait below) and next() does the clean-up on its way out.
        with self._state:
            if self._closed:
                raise StopIteration
            self._busy = True
        try:
            return self._next()
        finally:
            with self._state:
                self._busy = False
                cleanup = self._closed and not self._cleaned
                self._cleaned = self._cleaned or cleanup
            if cleanup:
                self._cleanup()

    def _next(self) -> Any:
        epoch = self._epoch
        window = epoch.window
        k = window.base
        if k == window.published:
            self._end_of_epoch(k)
        try:
            if self._in_order:
                status = window.wait(k, self._timeout_s)
            else:
                k = window.wait_any(self._timeout_s)
                status = 1 if k >= 0 else (0 if k == -1 else -1)
        except KeyboardInterrupt:
            # Ctrl-C: stop the epoch at once, without waiting for the items in flight.
            self._close(wait=False)
            raise
        if self._closed or status < 0:
            raise StopIteration
        if status == 0:
            k = window.base if not self._in_order else k
            raise timeout_error(self._timeout_s, f"batch {k} was not ready")
        slot = k % epoch.size
        result = epoch.results[slot]
        epoch.results[slot] = None
        epoch.tasks[slot] = None
        window.release(k)
        self._fill()
        if isinstance(result, Failure):
            result.reraise()
        return result

    def _end_of_epoch(self, k: int) -> None:
        pending = self._pending_error
        self._pending_error = None
        self.close()
        if pending is not None and pending[0] == k:
            raise pending[1]
        raise StopIteration

    def close(self) -> None:
        """Stop the epoch; wait (bounded) for batches in flight; drop every reference.

        Thread-safety: may be called from any thread, also while another thread is
        inside ``next()``, which then raises ``StopIteration``.
        """
        self._close(wait=True)

    def _close(self, wait: bool) -> None:
        with self._state:
            if self._closed:
                return
            self._closed = True
            self._close_wait = wait
            busy = self._busy
            self._cleaned = not busy
        self._epoch.window.cancel()  # wakes a next() waiting on another thread
        if not busy:
            self._cleanup()

    def _cleanup(self) -> None:
        self._indices = None
        self._epoch.close(wait=self._close_wait)
        self._release_pool()
