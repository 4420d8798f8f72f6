"""``DataLoader``: PyTorch's API, thread workers, NumPy batches.

A loader combines a dataset, a sampler and a collate function, like
``torch.utils.data.DataLoader``; its workers are threads of one pool kept for
the loader's life.  Each ``iter(loader)`` is one epoch (see ``dataloader._engine``
for how an epoch runs, and ``docs/design.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dataloader._constants import DEFAULT_PREFETCH_DEPTH
from dataloader._loader_position import LoaderPosition
from dataloader._reduce import finish_init, reduce_loader, remember_init
from dataloader.sampler import Sampler

if TYPE_CHECKING:
    from dataloader._engine.failures import FailureRecord
    from dataloader._engine.iterator import EpochIterator
    from dataloader._engine.stats import LoaderStats

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)
_FIXED_AFTER_INIT = frozenset({"batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"})


class DataLoader(LoaderPosition, Generic[T_co]):
    """Iterate over a dataset in batches, with worker threads.

    Arguments and their rules are PyTorch's (``torch.utils.data.DataLoader``);
    the keyword-only ones after ``*`` are this library's.

    Args:
        dataset: a map-style dataset (``__getitem__``; ``__len__`` for the default
            samplers; optional batched ``__getitems__(indices)``) or an
            ``IterableDataset``.  ``__getitem__``/``__getitems__`` must be
            thread-safe when ``num_workers > 0`` or ``item_concurrency > 1``.
            An ``AsyncDataset`` (``async def __getitem__``, e.g. ``HttpDataset``)
            runs its coroutines on an event loop thread the loader owns
            (``dataloader-asyncio``, one per loader, stopped by ``close()``, which
            also awaits the dataset's ``aclose()``, at most 5 s).
        batch_size: items per batch (>= 1), or None to disable auto-batching (each
            sampler index yields one item passed through ``collate_fn``, by default
            ``default_convert``).
        shuffle: reshuffle every epoch (a ``RandomSampler`` seeded by ``seed``).
        sampler: an iterable of indices (mutually exclusive with ``shuffle``).
        batch_sampler: an iterable of lists of indices (mutually exclusive with
            ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last``).  Each list or
            array it yields is copied when yielded: it may refill one buffer.
        num_workers: worker threads; 0 builds every batch on the calling thread
            inside ``next()``.  Threads are created on the first epoch and kept.
            ``"auto"`` (map-style datasets): start inline (as 0; with a ``worker_init_fn``,
            ``timeout`` or ``AsyncDataset``: one worker), then try 1, 2, ... workers,
            up to the CPUs this process may use (at most 16), while the consumer
            waits and throughput rises; the count settles within the first epoch
            and is kept (rules: ``dataloader._engine.autotune``).  Batches are the
            same as with any fixed count; ``get_worker_info().num_workers`` is the
            pool's size.
        collate_fn: turns a list of items into a batch; default
            ``default_collate`` (NumPy arrays), or ``default_convert`` with
            ``batch_size=None``.
        pin_memory: accepted for compatibility; a no-op (there is no GPU transfer
            here: batches are NumPy arrays in ordinary memory).
        drop_last: drop the last batch if it is smaller than ``batch_size``.
        timeout: seconds ``next()`` waits for one batch from the workers before
            ``LoaderTimeoutError`` (a ``TimeoutError`` and a ``RuntimeError``, what
            torch raises); 0 waits without limit.  Like PyTorch, it has no
            effect with ``num_workers=0`` (the batch is built by ``next()`` itself).
        worker_init_fn: called as ``worker_init_fn(worker_id)`` on each worker
            thread at the start of every epoch, after ``get_worker_info()`` is set;
            with ``persistent_workers=True`` once per thread for the loader's life
            (tried again next epoch if it raised), and the worker keeps the seed of
            that epoch, as a torch worker process does.  Its exception is raised by
            ``next()`` for each batch that worker would have built.  For an
            ``IterableDataset`` each worker thread iterates its own shallow copy
            (``copy.copy``), which ``worker_init_fn`` may configure through
            ``get_worker_info().dataset``.
        generator: a ``numpy.random.Generator`` or a ``torch.Generator``; the loader
            draws its base seed from it once, at construction (from a
            ``torch.Generator`` as torch draws its base seed: one int64 ``random_``),
            mutually exclusive with ``seed``.
        prefetch_factor: PyTorch's batches in flight per worker: sets the window to
            ``num_workers * prefetch_factor`` batches; needs ``num_workers > 0``.
        persistent_workers: run ``worker_init_fn`` once per thread for the loader's
            life instead of every epoch (the threads are kept either way); needs
            ``num_workers > 0``.
        in_order: yield batches in epoch order (True) or as they complete.
        prefetch_depth: batches allowed beyond one per worker: at most
            ``num_workers + prefetch_depth`` batches are being built or wait.  Raise
            it when batch times vary a lot; each batch held costs its memory.
            ``"auto"``: ``max(2, number of worker threads)``.
        item_concurrency: threads fetching the items of one batch (>= 1).  Useful
            when items wait on I/O or per-item work dominates; ``__getitems__`` is
            then not used.  For an ``AsyncDataset`` it is the item coroutines in
            flight per batch (no threads): at most ``max(num_workers, 1) *
            item_concurrency`` requests run at once.
        transform: ``transform(item) -> item``, run on the worker for every item
            before collation.  Random transforms should draw from
            ``dataloader.item_rng()`` so batches do not depend on scheduling.
        seed: base seed (int >= 0) for shuffling, worker seeds and ``item_rng``;
            epoch ``e``'s order is a pure function of ``(seed, e)``.  None draws one
            from the OS at construction.
        on_error: what an item's exception (``__getitem__``, ``__getitems__``, a native
            gather, ``transform``) does to its batch, for a map-style dataset:
            ``"raise"`` (default, PyTorch's behaviour: ``next()`` raises it for its batch,
            and the next ``next()`` goes on); ``"skip"``: the failing items are dropped
            (the batch comes out smaller; a batch whose every item failed is skipped and
            the next one is returned); ``"replace"``: each failing item is replaced by the
            item of another index, a pure function of ``(seed, epoch, batch, place in
            batch, attempt)``, trying at most 16 substitutes before the batch fails with
            ``RuntimeError`` (batches keep their size: ranks keep equal step counts).  A
            failure of a batch-level path is narrowed by fetching the batch's items again
            one by one.  Under both, a ``collate_fn`` error still fails its batch (no item
            is at fault), and interrupts (Ctrl-C, ``sys.exit()``) pass as always.  Output
            is the same for any ``num_workers``, ``prefetch_depth`` and
            ``item_concurrency``; failures are listed in ``failures`` and counted in
            ``stats``.  An ``IterableDataset`` takes ``"skip"`` only when it skips its own
            bad units and says so with ``set_failure_sink(sink)`` (``TarShardDataset``: a
            bad shard is a failure; docs/usage.md, "Streams under the error policy"); else
            ``"skip"`` is refused, and ``"replace"`` always (a stream has no index to draw
            a substitute from).
        max_failures: the most failures an epoch may have under ``"skip"``/``"replace"``:
            an int (a count; 0 allows none), or a float in ``(0, 1)`` (a fraction of the
            items of the batches returned so far, judged from the 10th failure on; for a
            stream, items seen = samples yielded + failures).
            None: 0.1 (10%) under ``"skip"``/``"replace"``; must be None under ``"raise"``.
            Past it, ``next()`` raises ``TooManyFailures`` and the epoch ends.
        even_batches: equal steps on every rank for an ``IterableDataset`` sharded across
            ranks (DDP/FSDP hang when one rank takes fewer steps).  None (default): each rank
            yields its own stream's batches, nothing agreed, no cost.  ``"drop"``: every rank
            ends the epoch when the first rank's stream ends (each yields as many batches as the
            shortest; no rank yields a batch another does not).  ``"pad"``: a rank whose stream
            ended starts its epoch again from the beginning (``iter()`` of its dataset again,
            same seed and epoch) until the longest stream ends (each yields as many as the
            longest; an empty stream cannot pad: every rank raises ``ValueError``).  Agreed by
            one ``all_reduce`` of 4 int64 per batch on the consumer thread before ``next()``
            returns (1-2 ms per batch measured with gloo, 2 ranks on a loaded 2-core machine:
            docs/benchmarks.md), so every rank
            must iterate each epoch to its end, or ``close()`` it when it stops early (which
            tells the others to stop at their next step).  Needs torch and an initialised
            ``torch.distributed`` (or ``process_group``): ``iter()`` raises ``RuntimeError``
            otherwise.  A map-style dataset is refused (``ValueError``): its sampler already
            gives equal steps (``DistributedSampler``).  See ``dataloader._engine.even``.
        process_group: the ``torch.distributed`` group the ranks agree in (``even_batches``
            only); None: the default group.  A loader with a group does not pickle.
        event_loops: event loops (each on a thread of its own) that run an ``AsyncDataset``'s
            item coroutines: an int from 1 to 256, or ``"auto"``.  1 (default): one loop, as before.
            ``n > 1``: item ``i`` (its ``__getitem__`` call and its coroutine) runs on loop
            ``i % n`` (its position in the batch for an index that is not an int; an
            ``async def __getitems__``, one call a batch: batch ``k`` on loop ``k % n``), which
            hands its result to the worker itself, so a loop's CPU work (parsing responses:
            ~310 us per request with aiohttp on 3.13t, ~3,000 requests/s per loop) is shared
            by ``n`` threads; order, outputs, errors, ``on_error``, ``timeout``, cancellation
            and resume are the same for every ``n``.  Worth it on a free-threaded build with
            many requests in flight (``max(num_workers, 1) * item_concurrency`` of 128 and
            more); with the GIL the loops take turns.  A remote dataset makes one client per
            loop, and its ``aclose()`` is awaited on each (``n`` calls, in parallel on a
            free-threaded build).  ``"auto"``: 1 with the GIL, else
            ``min(CPUs, ceil(max(num_workers, 1) * item_concurrency / 64))``.  More than 1
            is refused (``ValueError``) for a dataset that is not an ``AsyncDataset``.

    Thread-safety: epochs are independent (nested loops, ``zip(loader, loader)``
    and several threads each iterating the loader work, as in PyTorch): each
    ``iter(loader)`` takes the next epoch number atomically and its order is that
    epoch's.  The loader's threads serve one epoch at a time; an epoch started
    while another is open gets threads of its own.  Iterate each epoch from one
    thread (``next()`` from two threads at once raises ``RuntimeError``);
    ``close()`` may be called from any thread.  After ``os.fork()`` the child
    starts new threads for its epochs; an iterator started before the fork raises
    ``RuntimeError`` from ``next()`` in the child.

    Pickling and ``copy.copy``/``deepcopy`` give a new loader of the same arguments, seed and
    epoch counter, no epoch open (``dataloader._reduce``; an epoch's position: ``state_dict()``).

    Raises:
        ValueError, TypeError: for invalid arguments; the message names the value.
            Assigning ``batch_size``, ``sampler``, ``batch_sampler``, ``drop_last``,
            ``dataset`` or ``persistent_workers`` after construction raises
            ``ValueError``, as in PyTorch.
        TooManyFailures: (from ``next()``) an epoch's failures passed ``max_failures``.

    Warns:
        UserWarning: ``num_workers`` exceeds the CPUs this process may use (PyTorch's
            warning; threads beyond the CPU count help only I/O-bound items).
    """

    # The arguments as resolved (``Engine.options.public()``), set by ``__init__``.
    dataset: Any
    batch_size: int | None
    sampler: Any
    batch_sampler: Any
    num_workers: int | str
    collate_fn: Callable[[Any], Any]
    pin_memory: bool
    drop_last: bool
    timeout: float
    worker_init_fn: Callable[[int], None] | None
    generator: Any
    prefetch_factor: int | None
    persistent_workers: bool
    in_order: bool
    prefetch_depth: int
    item_concurrency: int
    transform: Callable[[Any], Any] | None
    on_error: str
    max_failures: int | float | None
    even_batches: str | None
    process_group: Any
    event_loops: int | str

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = False,
        sampler: Sampler[Any] | Iterable[Any] | None = None,
        batch_sampler: Iterable[Any] | None = None,
        num_workers: int | str = 0,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        in_order: bool = True,
        prefetch_depth: int | str = DEFAULT_PREFETCH_DEPTH,
        item_concurrency: int = 1,
        transform: Callable[[Any], Any] | None = None,
        seed: int | None = None,
        on_error: str = "raise",
        max_failures: int | float | None = None,
        even_batches: str | None = None,
        process_group: Any = None,
        event_loops: int | str = 1,
    ) -> None:
        remember_init(self, DataLoader, locals())  # what a pickled copy is built from
        from dataloader._engine import Engine  # lazy: the engine's modules load with the first loader

        self._engine = Engine(
            self, _engine_dataset(dataset), sampler_state=self._sampler_state, batch_size=batch_size, shuffle=shuffle,
            sampler=sampler, batch_sampler=batch_sampler, num_workers=num_workers, collate_fn=collate_fn,
            pin_memory=pin_memory, drop_last=drop_last, timeout=timeout, worker_init_fn=worker_init_fn,
            generator=generator, prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
            in_order=in_order, prefetch_depth=prefetch_depth, item_concurrency=item_concurrency,
            transform=transform, seed=seed, on_error=on_error, max_failures=max_failures,
            even_batches=even_batches, process_group=process_group, event_loops=event_loops,
        )
        for name, value in self._engine.options.public().items():  # "auto" workers stay "auto"
            setattr(self, name, value)
        self.dataset = dataset  # the user's object (a Hugging Face dataset is read through its adapter)
        self._initialized = True
        finish_init(self, DataLoader)

    def __setattr__(self, name: str, value: Any) -> None:
        # PyTorch's rule: what fixed the batches cannot change after construction.
        if name in _FIXED_AFTER_INIT and self.__dict__.get("_initialized", False):
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def seed(self) -> int:
        """The base seed (int in ``[0, 2**63)``): the ``seed`` argument, or drawn at construction;
        replaced by ``load_state_dict``.  Assigning it applies from the next epoch."""
        return self._engine.seed

    @seed.setter
    def seed(self, value: int) -> None:
        self._engine.seed = value

    def _sampler_state(self, source: Any) -> Any:
        """What saves and restores ``source``, an epoch's work-item source without ``state_dict``
        (called once, by the engine's construction): ``source`` itself here."""
        return source

    def _epoch_seed(self) -> int:
        """The base seed of the epoch being started (called by the engine under its lock,
        after the resume bookkeeping): the loader's ``seed``; ``dataloader.torch`` draws one
        per epoch from its ``torch.Generator``, as torch does."""
        return self._engine.seed

    def __len__(self) -> int:
        """Batches per epoch (exact; PyTorch's rules).

        Raises:
            TypeError: the sampler, batch sampler or IterableDataset has no ``__len__``.
        """
        return self._engine.length()

    def __iter__(self) -> EpochIterator:
        """Start the next epoch and return its iterator (the one ``start()`` started, if any).

        Epochs are independent, as in PyTorch: nested loops over one loader,
        ``zip(loader, loader)`` and several threads iterating it work; the epoch
        number, the sampler's epoch and the pool are taken atomically.  The loader's
        thread pool serves one epoch at a time; an epoch started while another is
        still open gets a pool of its own, shut down when that epoch closes.

        Raises:
            RuntimeError: worker threads could not be started; with ``even_batches``, torch is
                missing or ``torch.distributed`` is not initialised and no ``process_group``
                was given.
        """
        return self._engine.iter(self, self._epoch_seed)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle / copy as a new loader of the same arguments (see the class docstring)."""
        return reduce_loader(self, {})

    @property
    def stats(self) -> LoaderStats | None:
        """Statistics of the last epoch started (current or finished), or None before the first.

        Always recorded (0.2-0.5 us per batch); each read takes a new snapshot
        (``LoaderStats``: batches delivered, consumer wait, worker fetch/transform/
        collate seconds, batches in flight, build-time percentiles).  With several
        epochs open at once, the one started last.  Thread-safety: any thread, any time.
        """
        return self._engine.stats()

    @property
    def failures(self) -> list[FailureRecord]:
        """The items that failed in the last epoch started, under ``on_error="skip"`` or
        ``"replace"``: ``FailureRecord(epoch, index, location, exc_type, message)`` in epoch
        order (the order of the batches ``next()`` returned, then of places in a batch,
        whatever thread built them), at most 1000 (the counts in ``stats`` stay exact).  Only
        batches ``next()`` returned count: one built ahead (prefetched) appears when it is
        returned.  A resumed epoch lists the failures since the resume.  ``[]`` under
        ``on_error="raise"`` and before the first epoch.  Thread-safety: any thread, any time
        (a new list each read).
        """
        return self._engine.failures()

    def close(self) -> None:
        """End every open epoch of this loader and stop the worker threads.

        An ended epoch's ``next()`` raises ``StopIteration``, whatever its ``num_workers``.
        Waits for the epochs' batches in flight and then joins the threads, at most
        ``SHUTDOWN_JOIN_TIMEOUT_S`` (5 s) in all, in slices that run signal handlers
        (Ctrl-C works); returns at once when called from a worker thread (inside
        ``worker_init_fn`` or ``collate_fn``) or from an ``AsyncDataset``'s item coroutine
        (the event loop thread, which the workers wait on).  A later ``iter(loader)`` starts a new
        epoch (and pool).  Also happens, without waiting, when the loader is garbage-collected.

        An ``AsyncDataset``'s event loop thread stops within the same 5 s: the coroutines
        in flight are cancelled, ``aclose()`` is awaited, and the thread is joined; what
        does not end in time is abandoned (``dataloader._engine.async_loop``).

        Warns:
            RuntimeWarning: coroutines of an ``AsyncDataset`` (or its ``aclose()``) did not
                end within the 5 s after they were cancelled; the message names them, and
                the event loop thread is left to end by itself.
        """
        self._engine.close()

    def __enter__(self) -> DataLoader[T_co]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"DataLoader(dataset={type(self.dataset).__name__}, batch_size={self.batch_size}, "
            f"num_workers={self.num_workers}, prefetch_depth={self.prefetch_depth}, "
            f"item_concurrency={self.item_concurrency})"
        )


def _engine_dataset(dataset: Any) -> Any:
    """What the engine reads: a Hugging Face ``datasets.Dataset`` / ``IterableDataset`` through
    its adapter (``dataloader.formats.hf.from_hf``), anything else as it is.  ``datasets`` is
    never imported for an object whose type does not come from it."""
    if type(dataset).__module__.partition(".")[0] != "datasets":
        return dataset
    from dataloader.formats.hf import from_hf  # lazy: only for an object from `datasets`

    return from_hf(dataset)
