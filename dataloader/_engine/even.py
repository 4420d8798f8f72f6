"""``EvenEpoch``: every rank yields the same number of batches (``even_batches``).

An ``IterableDataset`` sharded across ranks rarely gives each rank the same number of
batches, and DDP/FSDP hang on the collective that a short rank never reaches.  With
``even_batches`` each ``next()`` of every rank makes one vote (``rank_vote.RankVote``: one
``all_reduce(MAX)`` of four int64 flags) before it returns, and all ranks act on the same
answer, so they take the same steps:

- ``"drop"``: a rank takes its next batch, then votes; if any rank's stream has ended, every
  rank ends the epoch at this step (the batches taken for it are dropped).  No rank yields a
  batch another rank does not: each yields as many as the shortest.
- ``"pad"``: a rank takes its next batch, then votes; the epoch ends when no rank has a
  batch of its own stream left.  A rank whose stream ended while others go on pads: it starts
  its epoch again from the beginning (a new pass of the same epoch: same seed and epoch
  number, so an ``IterableDataset``'s ``iter()`` runs again on each worker's fresh copy, or
  on the dataset itself with ``num_workers=0``), as often as needed; from then on it votes
  first and takes a padding batch only when another rank still has one of its own.  Each rank
  yields as many as the longest.  A rank whose stream is empty cannot pad: when one ends
  before its first batch while another still has batches, every rank raises ``ValueError``
  at the same step.

A rank that stops early (``break``) must ``close()`` the epoch (or the loader): ``close()``
then votes once more with ``quit`` set, which ends the epoch on the other ranks at their
next vote (where they drop the batch they took), so no rank waits for it.  If every rank
stops at the same step and each closes, their closing votes meet.  A rank that stops early
without ``close()`` leaves the others waiting in their next vote (until the group's timeout).

Position (``DataLoader.state_dict``): the epoch's ``Progress`` is the current pass's (each
padding pass is tracked like a new epoch start); an epoch ended by the agreement is done (the
next state is the next epoch's start); an epoch ended by a ``quit`` keeps each rank's position
(a batch taken and dropped is not counted).  Resuming a padding rank at position ``k``
replays its pass from batch ``k``, which is what the padding pass held there (padding
repeats the epoch's own batches).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from dataloader._engine.errors import INTERRUPTS
from dataloader._engine.iterator import CLOSED, CLOSING, EpochIterator
from dataloader._engine.outcome import Failure
from dataloader._engine.rank_vote import Flags, RankVote
from dataloader._engine.resume import Progress

__all__ = ["EVEN_MODES", "EvenEpoch"]

EVEN_MODES = ("drop", "pad")

_QUIT = Flags(ended=0, has=0, empty=0, quit=1)


class EvenEpoch(EpochIterator):
    """One epoch whose ranks take the same steps (module docstring); wraps the epoch's pass.

    Args:
        first: the epoch's first pass (its iterator, as ``EpochPlan.start`` returns it).
        progress: that pass's ``Progress``.
        mode: ``"drop"`` or ``"pad"``.
        vote: the ranks' agreement (``RankVote``, or anything with its ``vote``).
        restart: starts a new pass of the same epoch from its beginning; returns its iterator
            and ``Progress`` (``"pad"``).
        keep_alive: kept until the epoch ends (the loader).

    ``len()`` raises ``TypeError``: the epoch's length is agreed as it goes.  Thread-safety:
    ``EpochIterator``'s; ``close()`` from another thread while ``next()`` votes makes that
    ``next()`` vote ``quit`` next (or at once, if it had not voted yet).
    """

    def __init__(
        self, first: EpochIterator, progress: Progress, *, mode: str, vote: RankVote,
        restart: Callable[[], tuple[EpochIterator, Progress]], keep_alive: Any = None,
    ) -> None:
        super().__init__(None, None, None, first.stats, keep_alive)
        self._inner = first
        self._pass = progress
        self._pad = mode == "pad"
        self._vote: RankVote | None = vote
        self._restart: Callable[[], tuple[EpochIterator, Progress]] | None = restart
        self._swap = threading.Lock()  # the pass in use vs close() from another thread
        self._stopped = False  # close() reached _stop: no new pass starts
        self._finished = False  # the ranks agreed on the end (or this rank voted quit)
        self._padding = False  # this rank's stream ended and it repeats its epoch
        self._batches = 0  # batches of its own stream this rank returned

    def __len__(self) -> int:
        raise TypeError(
            "an epoch with even_batches has no length: the ranks agree on it as it goes (len(loader) "
            "is this rank's own count)"
        )

    def _next(self) -> Any:
        if self._finished:
            raise StopIteration
        if self._padding:
            said = self._say(has=False, ended=True)
            if self._ends(said, taken=False):
                raise StopIteration
            return self._pad_batch()
        out, has = self._take()
        said = self._say(has=has, ended=not has)
        if self._ends(said, taken=has):
            raise StopIteration
        if has:
            self._batches += 1
            return out
        self._padding = True
        return self._pad_batch()

    def _say(self, *, has: bool, ended: bool) -> Flags:
        """This step's vote: what this rank has, ``quit`` when ``close()`` came meanwhile."""
        assert self._vote is not None
        quit_ = self._state is CLOSING
        empty = ended and not self._padding and self._batches == 0
        try:
            return self._vote.vote(Flags(int(ended), int(has and not quit_), int(empty), int(quit_)))
        except BaseException:  # the group failed (or Ctrl-C): no later vote could meet the others'
            self._finished = True
            self.close()
            raise

    def _ends(self, said: Flags, *, taken: bool) -> bool:
        """Whether the epoch ends at this step on every rank (then it is closed here).

        Raises:
            ValueError: ``"pad"`` and a rank's stream is empty while another's is not.
        """
        complete = bool(said.ended) if not self._pad else not said.has
        if not complete and self._pad and said.empty:
            self._end(complete=False, taken=taken)
            raise ValueError(
                "even_batches='pad': a rank's stream ended before its first batch of this epoch while "
                "other ranks still have batches; an empty shard cannot be repeated (give every rank "
                "data, or use even_batches='drop')"
            )
        if complete or said.quit:
            self._end(complete=complete, taken=taken)
            return True
        if self._state is CLOSING:  # close() came during the vote: the others vote again
            self._quit(taken=taken)
            return True
        return False

    def _end(self, *, complete: bool, taken: bool) -> None:
        """The epoch ends at this step: done (``complete``), or at this rank's position (a batch
        ``taken`` for it is not counted); then closed."""
        self._finished = True
        progress = self._pass
        progress.done = complete
        if taken and not complete:
            progress.yielded -= 1
        self.close()

    def _quit(self, *, taken: bool) -> None:
        """Vote ``quit`` (the other ranks end at their next vote) and end here."""
        self._finished = True
        assert self._vote is not None
        self._vote.vote(_QUIT)
        self._end(complete=False, taken=taken)

    def withdraw(self) -> None:
        self._finished = True  # never handed out (DataLoader.start's): no step, no vote
        self.close()

    def _take(self) -> tuple[Any, bool]:
        """The current pass's next batch (a ``Failure`` for a batch that raised) and whether
        there was one."""
        try:
            return next(self._inner), True
        except StopIteration:
            return None, False
        except INTERRUPTS:  # Ctrl-C: not a step; the epoch ends without a vote
            self._finished = True
            self.close()
            raise
        except Exception as exc:  # the batch's own error: a step like any batch, raised after the vote
            return Failure(exc, exc.__traceback__), True

    def _pad_batch(self) -> Any:
        """A padding batch: the current pass's next one, or the first of a new pass.

        Raises:
            RuntimeError: a new pass of this rank's epoch yielded no batch (its stream does not
                repeat).
        """
        out, has = self._take()
        if has:
            return out
        if not self._new_pass():  # close() came from another thread
            self._quit(taken=False)
            raise StopIteration
        out, has = self._take()
        if has:
            return out
        self._finished = True
        self.close()
        raise RuntimeError(
            "even_batches='pad': this rank's stream ended and a new pass over it from its start "
            "yielded no batch; padding needs iter(dataset) to give the shard again"
        )

    def _new_pass(self) -> bool:
        """Replace the ended pass with a new one (False: closed meanwhile, none started)."""
        with self._swap:
            if self._stopped or self._restart is None:
                return False
            self._inner.close()
            self._inner, self._pass = self._restart()
        return True

    def _stop(self, timeout_s: float | None) -> None:
        try:
            # close() while no next() runs (else that next() votes): tell the other ranks.
            if self._state is CLOSED and not self._finished and self._vote is not None:
                self._finished = True
                self._pass.done = False
                self._vote.vote(_QUIT)
        finally:
            with self._swap:
                self._stopped = True
                inner = self._inner
            inner.close(timeout_s)

    def _release(self) -> None:
        self._restart = None
        self._vote = None

    def _abandon(self) -> None:
        # After fork(): no vote (the group is the parent's), no lock; the pass ends itself.
        self._finished = self._stopped = True
        self._inner.close()
        self._release()
