"""``Engine``: the one object a loader face talks to.

A face (``dataloader.DataLoader``, ``dataloader.torch.DataLoader``) resolves its arguments
once (``options.resolve``) and builds an ``Engine`` from them.  The engine owns what lives
as long as the loader: the epoch plan (``plan.EpochPlan``), the shared worker pool
(``handout.SharedPool``), the resume bookkeeping (``resume.Resumer``), the event loop of an
``AsyncDataset`` (``async_loop.AsyncLoop``), ``num_workers="auto"``'s tuner (in the plan),
the base seed and epoch counter, and the epochs open.  It offers what a face needs: start
an epoch (``iter``, or ahead of it: ``start``), ``length``, ``state_dict``/``load_state_dict``,
``seek``, ``continue_from`` (seed and epoch), ``stats`` and ``close``.  With ``even_batches``
each epoch is wrapped in an ``even.EvenEpoch`` (the ranks' agreement), whose padding passes
start here.

An epoch started early (``start``: Grain's ``start_prefetch``) is kept as the *started* epoch:
its workers fill the window while nobody iterates it; the next ``iter`` hands it over (not a
second epoch).  ``load_state_dict`` and ``seek`` close it and put the position back where it
was (``_unstart``), then apply; they return True so that the face starts it again from the new
position.  ``close`` closes it and puts the position back too: nothing was yielded from it, so
the next ``iter`` starts that same epoch (when the position can be saved: ``state_dict``).

Thread-safety: every method may be called from any thread; the epoch counter, the seed,
the sampler's epoch, the pool hand-out and the resume state change under one lock
(recreated in a forked child: a thread of the parent may have held it at the fork).
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dataloader._constants import ASYNC_STOP_RESERVE_S, SHUTDOWN_JOIN_TIMEOUT_S
from dataloader._engine.elastic import ElasticSampler
from dataloader._engine.epoch import Epoch, finalizer_not_at_exit
from dataloader._engine.even import EvenEpoch
from dataloader._engine.failures import FailureRecord
from dataloader._engine.handout import SharedPool
from dataloader._engine.iterator import EpochIterator
from dataloader._engine.options import EngineOptions, resolve
from dataloader._engine.plan import EpochPlan
from dataloader._engine.pool import WorkerPool
from dataloader._engine.resume import EpochResume, Progress, Resumer
from dataloader._engine.resume_checks import Layout
from dataloader._engine.seek import SeekTarget, seek_state
from dataloader._engine.stats import EpochStats, LoaderStats
from dataloader._engine.stream_policy import report_failure

if TYPE_CHECKING:
    from dataloader._engine.async_loop import AsyncLoop
    from dataloader._engine.rank_vote import RankVote

__all__ = ["Engine"]


class Engine:
    """The epochs of one loader (see the module).

    Args:
        owner: the loader; held weakly (its garbage collection signals the worker threads and
            stops the event loop), and kept alive by each epoch it starts.
        dataset: the dataset.
        sampler_state: how to save and restore a work-item source without ``state_dict``
            (``dataloader.torch`` wraps torch's samplers), or None to use it as it is.
        arguments: the rest of ``DataLoader``'s arguments, by name (``options.resolve``).

    Attributes:
        options: the arguments resolved (``EngineOptions``).
        plan: what every epoch is built from (``EpochPlan``; its ``tuner`` for ``"auto"``).
        pools: the shared worker pool's hand-out (``SharedPool``).
        seed, epoch: the base seed and the next epoch's number (change under ``mutex()``).
        last_stats: the statistics of the last epoch started, or None.

    Raises:
        ValueError, TypeError: invalid arguments (``options.resolve``).
    """

    def __init__(
        self, owner: Any, dataset: Any, *, sampler_state: Callable[[Any], Any] | None = None, **arguments: Any
    ) -> None:
        self.options = options = resolve(dataset, **arguments)
        self.seed = options.seed
        self.epoch = 0  # the next epoch's number
        self._async_loop: AsyncLoop | None = None
        if options.is_async:  # an AsyncDataset: coroutines on a loop of its own
            from dataloader._engine.async_loop import AsyncLoop  # lazy: asyncio only for async datasets

            self._async_loop = AsyncLoop(options.dataset, options.loop_count)
            finalizer_not_at_exit(owner, self._async_loop.stop_soon)  # each epoch keeps the loader
        if options.policy is not None and options.iterable:  # a stream that skips its own bad units
            options.dataset.set_failure_sink(report_failure)
        self.plan = _plan(options, self._async_loop)
        self._lock_pid = os.getpid()
        self._lock = threading.Lock()
        self.pools = SharedPool(self.plan, owner)
        # The epochs started and not yet collected (close() ends them): weak, pruned at each iter().
        self._open: list[weakref.ref[EpochIterator]] = []
        root = options.work_items
        if sampler_state is not None and root is not None and not hasattr(root, "state_dict"):
            root = sampler_state(root)
        layout = Layout(options.dataset, options.iterable, options.sampler, options.batch_sampler,
                        options.batch_size, options.drop_last)
        elastic = ElasticSampler.of(options.work_items, options.in_order)
        self._resume = Resumer(root, options.pool_workers, layout, elastic)
        self.last_stats: EpochStats | None = None  # the last epoch started
        self._started: EpochIterator | None = None  # started by start(), not yet handed out

    def mutex(self) -> threading.Lock:
        """The engine's lock (a new one in a forked child)."""
        if self._lock_pid != os.getpid():
            self._lock, self._lock_pid = threading.Lock(), os.getpid()
        return self._lock

    def length(self) -> int:
        """Batches per epoch (PyTorch's rules).

        Raises:
            TypeError: the sampler, batch sampler or IterableDataset has no ``__len__``.
        """
        o = self.options
        if o.iterable:
            n = len(o.dataset)
            if o.batch_size is None:
                return n
            return n // o.batch_size if o.drop_last else math.ceil(n / o.batch_size)
        return len(o.work_items)

    def iter(self, keep_alive: Any, epoch_seed: Callable[[], int] | None = None) -> EpochIterator:
        """Start the next epoch (``DataLoader.__iter__``'s contract).

        Args:
            keep_alive: what each epoch keeps alive (the loader).
            epoch_seed: the epoch's base seed, called under the lock after the resume
                bookkeeping (``dataloader.torch`` draws one per epoch); None: ``seed``.

        Returns the epoch ``start`` started, when there is one (handed out once).

        Raises:
            RuntimeError: worker threads could not be started.
        """
        length = self._length()
        with self.mutex():
            started, self._started = self._started, None
            if started is not None and not started.closed:
                return started
            return self._next_epoch(keep_alive, epoch_seed, length)

    def start(self, keep_alive: Any, epoch_seed: Callable[[], int] | None = None) -> tuple[EpochIterator, bool]:
        """Start the next epoch now and keep it for the next ``iter`` (``DataLoader.start``).

        Returns ``(the started epoch, True)``, or ``(the one started before, False)`` when an
        epoch is started and not yet handed out (``start`` twice starts one epoch).

        Raises:
            RuntimeError: worker threads could not be started.
        """
        length = self._length()
        with self.mutex():
            started = self._started
            if started is not None and not started.closed:
                return started, False
            self._started = self._next_epoch(keep_alive, epoch_seed, length)
            return self._started, True

    def _length(self) -> int | None:
        try:
            return self.length()
        except TypeError:
            return None

    def _next_epoch(self, keep_alive: Any, epoch_seed: Callable[[], int] | None, length: int | None) -> EpochIterator:
        # Under the lock: a new epoch, with the next number and the resume position.
        vote = self._rank_vote()  # before anything starts: its error is iter()'s (or start()'s)
        epoch = self.epoch
        self.epoch += 1
        if self.options.own_sampler is not None:
            self.options.own_sampler.set_epoch(epoch)  # claimed by the sampler's iter() in start()
        resume = self._resume.begin(epoch, self.options.dataset)
        seed = epoch_seed() if epoch_seed is not None else self.seed
        if length is not None:
            length = max(0, length - resume.yielded)
        it, progress = self._start(epoch_key=(seed, epoch), length=length, keep_alive=keep_alive, resume=resume)
        if vote is not None:
            it = self._even(it, progress, vote, (seed, epoch), keep_alive)
        self._open = [r for r in self._open if r() is not None]
        self._open.append(weakref.ref(it))
        self.last_stats = it.stats
        return it

    def _start(self, **kwargs: Any) -> tuple[EpochIterator, Progress]:
        # Under the lock: the epoch on the pool the hand-out gives (shut down if it failed to start).
        pool, owned = self.pools.for_epoch()
        try:
            it, progress = self.plan.start(pool=pool, owns_pool=owned, **kwargs)
        except BaseException:
            if owned and pool is not None:
                pool.shutdown()
            raise
        self._resume.track(progress)
        return it, progress

    def _rank_vote(self) -> RankVote | None:
        """The ranks' agreement of an ``even_batches`` epoch, or None without it.

        Raises:
            RuntimeError: ``torch.distributed`` is missing or not initialised (``RankVote``).
        """
        if self.options.even_batches is None:
            return None
        from dataloader._engine.rank_vote import RankVote  # lazy: only this option reaches torch

        return RankVote(self.options.process_group)

    def _even(
        self, first: EpochIterator, progress: Progress, vote: RankVote, epoch_key: tuple[int, int], keep_alive: Any
    ) -> EvenEpoch:
        """``first`` (an epoch's first pass) with the ranks' agreement (``dataloader._engine.even``)."""

        def restart() -> tuple[EpochIterator, Progress]:  # a new pass of the epoch, from its start
            with self.mutex():
                it, progress = self._start(epoch_key=epoch_key, length=None, keep_alive=keep_alive,
                                           resume=EpochResume(epoch_key[1], 0, 0, None))
                self.last_stats = it.stats
                return it, progress

        assert self.options.even_batches is not None
        return EvenEpoch(first, progress, mode=self.options.even_batches, vote=vote, restart=restart,
                         keep_alive=keep_alive)

    def amend_start_state(self, key: str, value: Any) -> None:
        """Replace ``key`` of the started epoch's saved start state (under the lock, from
        ``epoch_seed``: ``Resumer.amend_start_state``)."""
        self._resume.amend_start_state(key, value)

    def state_dict(self) -> dict[str, Any]:
        """``DataLoader.state_dict``'s dict (its Raises apply)."""
        with self.mutex():
            return self._resume.state_dict(self.seed, self.epoch, self.options.dataset, in_order=self.options.in_order)

    def load_state_dict(self, state_dict: dict[str, Any] | list[dict[str, Any]]) -> bool:
        """``DataLoader.load_state_dict`` (its Raises apply).  Returns True when it closed an
        epoch ``start`` had started (the face starts one again, from the loaded position)."""
        restart = self._unstart()
        with self.mutex():
            sd = self._resume.load(state_dict, self.options.dataset, workers=self.plan.num_workers)
            self._continue_from(sd["seed"], sd["epoch"])
        return restart

    def seek(self, epoch: object, batch: object) -> bool:
        """``DataLoader.seek`` (its Raises apply; ``dataloader._engine.seek``).  Returns True as
        ``load_state_dict`` does."""
        target = SeekTarget(epoch, batch, None if self.options.iterable else self._length())
        restart = self._unstart()
        o = self.options
        with self.mutex():
            sd = seek_state(self._resume, target, seed=self.seed, next_epoch=self.epoch, dataset=o.dataset,
                            iterable=o.iterable, workers=self.plan.num_workers)
            self._resume.load(sd, o.dataset, workers=self.plan.num_workers)
            self._continue_from(self.seed, target.epoch)
        return restart

    def _unstart(self) -> bool:
        """Close the epoch ``start`` started, if it was not handed out, and put the position
        back to that epoch's start (its ``state_dict``, loaded; left as it is where the
        position cannot be saved).  Returns whether there was one.  Not under the lock."""
        with self.mutex():
            started, self._started = self._started, None
            if started is None:
                return False
            try:
                sd: dict[str, Any] | None = self._resume.state_dict(
                    self.seed, self.epoch, self.options.dataset, in_order=self.options.in_order)
            except (TypeError, ValueError, RuntimeError):  # a position that cannot be saved
                sd = None
        started.withdraw()  # never handed out: it took no step (an even_batches epoch does not vote)
        if sd is not None:
            with self.mutex():
                self._resume.load(sd, self.options.dataset, workers=self.plan.num_workers)
                self._continue_from(sd["seed"], sd["epoch"])
        return True

    def position(self) -> tuple[int, int]:
        """``(seed, upcoming epoch)``, read together (``load_state_dict`` sets them together):
        a copy made after ``start`` starts the epoch ``start`` started, not the one after."""
        with self.mutex():
            return self.seed, self._upcoming()

    def upcoming(self) -> int:
        """The epoch the next ``iter`` yields: the one ``start`` started, else ``epoch``."""
        with self.mutex():
            return self._upcoming()

    def _upcoming(self) -> int:
        started = self._started is not None and not self._started.closed
        return self.epoch - 1 if started else self.epoch

    def continue_from(self, seed: int, epoch: int) -> None:
        """Go on at base seed ``seed``, next epoch ``epoch`` (a copy's)."""
        with self.mutex():
            self._continue_from(seed, epoch)

    def _continue_from(self, seed: int, epoch: int) -> None:
        self.seed = seed
        if self.options.own_sampler is not None:
            self.options.own_sampler.generator = seed
        self.epoch = epoch

    def stats(self) -> LoaderStats | None:
        """A snapshot of the last epoch started (``DataLoader.stats``), or None."""
        stats = self.last_stats
        return stats.snapshot() if stats is not None else None

    def failures(self) -> list[FailureRecord]:
        """The last epoch started's failure records (``DataLoader.failures``); [] without a policy."""
        stats = self.last_stats
        log = stats.failures if stats is not None else None
        return log.records() if log is not None else []

    def close(self) -> None:
        """End every open epoch and stop the threads and the event loop (``DataLoader.close``)."""
        deadline = time.monotonic() + SHUTDOWN_JOIN_TIMEOUT_S
        self._unstart()  # an epoch started and never handed out: its position is kept
        with self.mutex():
            epochs = [it for r in self._open if (it := r()) is not None]
            self._open = []
            pool = self.pools.take()
            # Taken with the epochs: an epoch started after this runs on a new loop, and every
            # epoch of this one is closed before it stops (none sees it stop under it).
            run = self._async_loop.detach() if self._async_loop is not None else None
        # The loop's stop keeps a part of the budget (it ends what the epochs left behind).
        until = deadline if run is None else deadline - ASYNC_STOP_RESERVE_S
        _close_all(epochs, pool, until)
        if run is not None:
            run.close(deadline)  # cancels what is left, awaits aclose(), joins: until the deadline


def _close_all(epochs: list[EpochIterator], pool: WorkerPool | None, until: float) -> None:
    """Close ``epochs``, then shut ``pool`` down, within the budget up to ``until``."""
    for it in epochs:
        if isinstance(it, Epoch):
            it.close(timeout_s=max(0.0, until - time.monotonic()))
        else:
            it.close()
    if pool is not None:
        pool.shutdown(join_s=max(0.0, until - time.monotonic()))


def _plan(o: EngineOptions, async_loop: AsyncLoop | None) -> EpochPlan:
    """The plan of ``o``'s epochs."""
    return EpochPlan(
        dataset=o.dataset, iterable=o.iterable, num_workers=o.pool_workers, window=o.window,
        timeout_s=float(o.timeout), in_order=o.in_order, batch_size=o.batch_size, drop_last=o.drop_last,
        auto_collation=o.auto_collation, collate_fn=o.collate_fn, transform=o.transform,
        worker_init_fn=o.worker_init_fn, persistent=o.persistent_workers, item_concurrency=o.item_concurrency,
        num_lanes=_num_lanes(o, async_loop), tuner=o.tuner, async_loop=async_loop, policy=o.policy,
        **o.index_sources,
    )


def _num_lanes(o: EngineOptions, async_loop: AsyncLoop | None) -> int:
    # Lanes fetch the items of one map-style batch (an IterableDataset has no item
    # indices); a batch never uses more than batch_size - 1 helpers.
    if async_loop is not None:
        return 0  # item_concurrency is coroutines on the event loop, not threads
    per_batch = o.item_concurrency
    if o.batch_size is not None:
        per_batch = min(per_batch, o.batch_size)
    return 0 if o.iterable else max(o.pool_workers, 1) * (per_batch - 1)
