"""``AsyncDataset``: a map-style dataset whose items are coroutines.

The loader runs an ``AsyncDataset``'s ``__getitem__`` (and ``__getitems__``) on
asyncio event loop threads of its own (``dataloader-asyncio``; one, or
``event_loops`` of them), keeps at most
``max(num_workers, 1) * item_concurrency`` item coroutines in flight, and runs
``transform`` and ``collate_fn`` on its worker threads (see
``dataloader._engine.async_build``).  ``check_dataset_kind``
(:mod:`dataloader._datasets.kind`) is the rule the loader applies when it is built.

Public as ``dataloader.AsyncDataset`` and ``dataloader.io.AsyncDataset`` (its home there:
the remote datasets of :mod:`dataloader.io` derive from it).
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["AsyncDataset"]

T_co = TypeVar("T_co", covariant=True)


class AsyncDataset(Generic[T_co]):
    """Base class of map-style datasets whose ``__getitem__`` is ``async def``.

    Subclasses define ``async def __getitem__(self, index)``, ``__len__`` and
    optionally ``async def __getitems__(self, indices)`` (used when
    ``item_concurrency=1``: one coroutine per batch, returning one item per index)
    and ``async def aclose(self)``, which the loader awaits on each of its event
    loops when it is closed (at most 5 s).

    The coroutines run on the loader's event loop threads, never on a worker:
    ``get_worker_info()`` is None there and ``item_rng()`` needs an explicit
    index.  Do CPU work in the loader's ``transform``, which runs on the workers
    as each item arrives.  Coroutines of many items run interleaved on one
    thread; a coroutine that blocks (a synchronous read, ``time.sleep``) stalls
    them all.  With ``DataLoader(event_loops=n)``, ``n > 1``, item ``i`` runs on loop
    ``i % n`` (an ``__getitems__`` batch ``k`` on loop ``k % n``) and ``aclose()`` is
    awaited ``n`` times, once on each loop: on a free-threaded build those loops run
    in parallel, so what these methods change on ``self`` needs a lock, and objects
    bound to a loop (futures, client sessions) must be made per loop.

    An item's exception fails its batch (``next()`` raises it for that batch), also
    ``KeyboardInterrupt`` and ``SystemExit``; a coroutine that ends cancelled although
    the loader did not cancel it (it awaited a request another task cancelled) fails
    its batch with ``dataloader.ItemCancelledError``.  Closing the epoch or the loader
    cancels the coroutines in flight; those that ignore cancellation are dropped once
    ``DataLoader.close()``'s 5 s are spent (with a ``RuntimeWarning`` naming them).

    Raises (from ``DataLoader(...)``):
        TypeError: ``__getitem__``/``__getitems__`` is a plain method, the class
            also derives from ``Dataset``, or it has no ``__len__``.
    """

    async def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must define async def __getitem__")

    def __len__(self) -> int:
        raise TypeError(f"{type(self).__name__} has no __len__")

