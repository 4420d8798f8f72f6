"""Where a ``DataLoader`` is in its run, and how to move it: ``start``, ``seek``,
``state_dict`` and ``load_state_dict`` (the methods ``DataLoader`` takes from ``LoaderPosition``;
the engine does the work: ``dataloader._engine.engine``, ``resume``, ``seek``, ``elastic``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dataloader._engine.engine import Engine

__all__ = ["LoaderPosition"]


class LoaderPosition:
    """``DataLoader``'s position methods, over its ``_engine`` and its ``_epoch_seed``."""

    _engine: Engine
    _epoch_seed: Callable[[], int]

    def start(self) -> None:
        """Start the next epoch now, before the first ``next()`` (Grain's ``start_prefetch``).

        The workers begin building its first batches (up to the window: ``num_workers +
        prefetch_depth`` batches) while the caller does something else, e.g. loads the model's
        checkpoint; the next ``iter(loader)`` returns this epoch (not a second one), so its first
        ``next()`` finds batches ready.  Start after ``load_state_dict`` / ``seek``: the epoch
        starts at that position.  ``worker_init_fn`` runs as for ``iter(loader)`` (each epoch,
        or once per thread with ``persistent_workers=True``).

        - ``start()`` twice (before ``iter``): one epoch; the second call does nothing.
        - ``num_workers=0``: the epoch is started (its number, its sampler's position) but
          nothing is built: there is no worker, and building on the calling thread would make
          ``start()`` as slow as the first ``next()``.  Use ``num_workers >= 1`` to overlap.
        - ``load_state_dict`` / ``seek`` after ``start()``: the started epoch is closed and
          started again at the new position (its batches built so far are dropped).
        - ``close()`` after ``start()`` without ``iter``: the epoch is closed and its threads
          stop; nothing was yielded, so the position is kept (``state_dict()`` and the next
          ``iter(loader)`` give that epoch again, from where it would have started).
        - Dropping the loader without ``iter`` or ``close()``: the started epoch keeps the loader
          alive until the cyclic garbage collector frees both (then its threads stop); call
          ``close()``.

        Thread-safety: any thread; ``start()`` and ``iter(loader)`` take and hand over the
        started epoch atomically (one of two concurrent ``iter`` calls gets it, the other starts
        the following epoch).

        Raises:
            RuntimeError: worker threads could not be started.
        """
        self._engine.start(self, self._epoch_seed)

    def seek(self, epoch: int, batch: int = 0) -> None:
        """Position the loader so that the next ``iter(loader)`` yields epoch ``epoch`` from its
        batch ``batch`` on: exactly the batches an uninterrupted run yields from there (as
        ``load_state_dict`` of the ``state_dict()`` saved at that point; the seed is kept).

        O(1) for the built-in samplers (the shuffle is a permutation evaluated from any
        position): a seek into batch 10^9 builds nothing and draws nothing.  Other samplers
        draw and drop ``batch`` index batches at the next ``iter`` (no item is fetched); a
        sampler drawing from a ``numpy.random.Generator`` / ``torch.Generator`` can only seek
        within the next epoch; an ``IterableDataset`` only to an epoch's start, or by building
        and dropping batches (no ``state_dict``, ``num_workers=0``): see
        ``dataloader._engine.seek``.  A built-in seeded sampler is given ``set_epoch(epoch)``.

        An epoch already iterated is not changed (it goes on; the seek applies to the next
        ``iter``), as with ``load_state_dict``; an epoch ``start()`` started and not yet
        iterated is started again at the new position.  ``state_dict()`` right after gives the
        sought position.

        Args:
            epoch: the epoch (int >= 0; its order, worker seeds and ``item_rng`` are that
                epoch's).
            batch: batches of that epoch to pass over (int in ``[0, len(loader)]``; 0: the
                epoch's start; ``len(loader)``: an epoch with nothing left).

        Thread-safety: any thread; do not race it with ``iter(loader)`` (which of the two
        comes first decides which epoch the seek applies to).

        Raises:
            TypeError: ``epoch`` or ``batch`` is not an int; an ``IterableDataset`` that cannot
                be sought mid-epoch.
            ValueError: a negative value, ``batch`` beyond the epoch's length (naming both), a
                sampler whose order cannot be reproduced (``generator=None``), or another epoch
                than the next for a sampler drawing from a generator.
        """
        if self._engine.seek(epoch, batch):
            self.start()

    def state_dict(self) -> dict[str, Any]:
        """The loader's position for exact resume: a small JSON-serialisable dict.

        Keys ``version``, ``seed``, ``epoch``, ``yielded`` (batches ``next()`` returned or
        raised in that epoch, counted at the consumer; a batch interrupted by Ctrl-C is not
        counted), ``sampler``, ``dataset``, ``loader`` (how this loader cuts its epochs, which
        ``load_state_dict`` checks), ``elastic`` (what a resume on another world size needs;
        None unless the sampler is a built-in ``DistributedSampler`` / ``ShardSampler``) and,
        mid-epoch under ``on_error="skip"``/``"replace"``, ``failures`` (the epoch's failure
        counts): see ``dataloader._engine.resume``.  It describes the
        epoch started last; after its end (or before any), the next one.  O(1) in the epoch's
        length.  The dict is new, the caller's own (it shares nothing with the loader).

        Raises:
            ValueError: mid-epoch with ``in_order=False``, or a sampler that cannot be
                reproduced (``generator=None``).
            TypeError: mid-epoch over an ``IterableDataset`` without ``state_dict`` /
                ``load_state_dict`` and with ``num_workers > 0``.
        """
        return self._engine.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Resume from ``state_dict()``'s output (possibly another process's).

        The next ``iter(loader)`` continues the saved epoch at its first batch not yet yielded;
        later epochs follow as in the saved run; the saved seed replaces this loader's.
        ``num_workers``, ``prefetch_depth``, ``item_concurrency``, ``drop_last`` and a
        distributed sampler's rank may differ; the dataset's length, ``batch_size``, the
        sampler kinds and the world size may not (``dataloader._engine.resume_checks``),
        except for an elastic resume: with a ``DistributedSampler`` / ``ShardSampler``, a
        state saved at another world size (all old ranks at the same step), or the list of
        all old ranks' states, continues the saved epoch with this rank's share of what the
        old ranks left (``dataloader._engine.elastic``).
        A state of the previous format (``version`` 1) loads, without those checks.  An epoch
        ``start()`` started and not yet iterated is started again from the loaded position.

        Args:
            state_dict: ``state_dict()``'s dict, or a list of every old rank's dict.

        Thread-safety: any thread; do not race it with ``iter(loader)`` (which of the two
        comes first decides which epoch the loaded position applies to), as for ``seek``.

        Raises:
            TypeError, ValueError: a malformed state, naming the bad key and value.
            ValueError: a state saved by a loader that cuts its epochs otherwise (naming both
                values), or whose ``yielded`` is past the end of this loader's epoch; a state
                at another world size, or a list, that cannot be resumed elastically (saying
                why: another sampler, ``in_order=False``, an inconsistent list).
        """
        if self._engine.load_state_dict(state_dict):
            self.start()
