"""Remote datasets' clients: one per process and event loop, made on first use, closed on ``aclose``.

Every remote dataset kind of :mod:`dataloader.io` derives from ``RemoteDataset``, which owns
what a connection pool needs to survive a loader's life: threads, several event loops, fork,
copies and closing.  **A new remote kind is one file with one obligation**::

    class MyDataset(RemoteDataset[MyClient]):
        def __init__(self, locations, ...):
            super().__init__(locations)    # len(dataset), locations[i]; target=, check= optional

        def _new_client(self) -> MyClient:              # 1. a client (connection pool)
            ...
        async def _fetch(self, client: MyClient, location: Any) -> bytes:  # 2. one item
            ...

``_new_client()`` is called on the event loop that will use the client (an aiohttp session
wants a running loop), at most once per process and loop while its client is open; a client
whose ``closed`` attribute is true is replaced.  ``_fetch(client, location)`` fetches the item
at ``location`` (``locations[index]``) with that client; its exceptions are the item's.  If the
client's class has an ``async def close()``, the loader's ``aclose()`` (awaited on the loop
when the loader closes, at most 5 s) awaits it for that loop's client.  Nothing else: the rest
is here.

- **Per loop**: a loader runs item coroutines on one event loop thread of its own; two
  loaders over one dataset run two loops, and a connection pool belongs to one loop.
  ``ClientCache`` keeps one client per loop, under a lock (the loops run on different threads).
- **Fork**: a forked child inherits the parent's clients but not their connections' owner:
  at the fork (``os.register_at_fork``, in the child, while it has one thread) every cache
  sets its clients aside, never used nor closed there (closing would shut the parent's
  sockets; collecting them would warn), and makes new locks.  A runtime whose threads a
  child does not inherit (obstore's tokio runtime) is a ``ProcessRuntime``: its use in a
  forked child fails with ``RuntimeError`` instead of waiting forever.
- **Copies**: ``copy.copy`` shares the clients.  ``pickle`` and ``copy.deepcopy`` leave them
  out (the copy makes its own), or refuse with ``TypeError`` naming the dataset (``repr``,
  without credentials) when the kind sets ``pickles = False``.
"""

from __future__ import annotations

import inspect
import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from dataloader._datasets.asyncds import AsyncDataset
from dataloader.io._redact import redact
from dataloader.io.hedge import Hedge
from dataloader.io.locations import Locations

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

__all__ = ["ClientCache", "ProcessRuntime", "RemoteDataset"]

C = TypeVar("C")

_live_lock = threading.Lock()
_live: weakref.WeakSet[ClientCache[Any]] = weakref.WeakSet()  # every cache, for the fork hook
# A forked child's inherited clients: kept referenced, so that they are never closed (their
# sockets are the parent's) nor collected (aiohttp warns of an unclosed session) there.
_forked_away: list[object] = []


class ClientCache(Generic[C]):
    """One client per event loop of this process (see the module).

    Thread-safety: ``get`` and ``pop`` may be called from any thread, each on its own running
    loop; the loop -> client map is changed under one lock (``get`` reads its own loop's
    client without it: only that loop's thread changes that entry).
    """

    def __init__(self) -> None:
        import asyncio  # lazy: `import dataloader` leaves asyncio unimported (made with a dataset)

        self._running_loop = asyncio.get_running_loop  # looked up once, not per item
        self._lock = threading.Lock()
        self._clients: dict[AbstractEventLoop, C] = {}
        with _live_lock:
            _live.add(self)

    def get(self, new_client: Callable[[], C]) -> C:
        """The running loop's client; made with ``new_client()`` when it has none or its
        ``closed`` attribute is true.  Call it on the loop (inside a coroutine).

        Raises:
            RuntimeError: no running event loop.
            Whatever ``new_client()`` raises (nothing is kept then).
        """
        loop = self._running_loop()
        # Without the lock first: only this loop's thread (or a forked child, with one thread)
        # adds or replaces this loop's client, and a dict read is atomic on both builds.
        client = self._clients.get(loop)
        if client is not None and not getattr(client, "closed", False):
            return client
        with self._lock:
            client = self._clients.get(loop)
            if client is None or getattr(client, "closed", False):
                client = new_client()
                self._clients[loop] = client
            return client

    def pop(self) -> C | None:
        """The running loop's client, taken out of the cache (None when it has none)."""
        loop = self._running_loop()
        with self._lock:
            return self._clients.pop(loop, None)

    def __len__(self) -> int:
        """The loops with a client in this process."""
        with self._lock:
            return len(self._clients)

    def _forget_after_fork(self) -> None:
        """In a forked child (one thread): set the parent's clients aside; a new lock."""
        _forked_away.append(self._clients)
        self._clients = {}
        self._lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _live_lock
    _live_lock = threading.Lock()  # a parent thread may have held it at the fork
    for cache in list(_live):
        cache._forget_after_fork()


if hasattr(os, "register_at_fork"):  # POSIX; without it there is no fork to survive
    os.register_at_fork(after_in_child=_after_fork_in_child)


class ProcessRuntime:
    """A runtime started once per process whose threads a forked child does not inherit.

    Args:
        what: its name in errors, e.g. ``"ObjectStoreDataset: obstore's runtime"``.

    Thread-safety: ``enter`` may race with itself; the racers all write the same pid.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.pid: int | None = None  # the process that first entered it

    def enter(self) -> None:
        """Mark the runtime as used by this process.

        Raises:
            RuntimeError: it was started in another process, of which this is a forked child
                (its threads do not exist here: a request would wait forever).
        """
        pid = os.getpid()
        if self.pid is None:
            self.pid = pid
        elif self.pid != pid:
            raise RuntimeError(
                f"{self.what} was started in process {self.pid}, and its threads do not exist in "
                f"this forked one ({pid}); start this process with the 'spawn' or 'forkserver' "
                "method, or fetch only after the fork"
            )


class RemoteDataset(AsyncDataset[bytes], Generic[C]):
    """Base of the remote dataset kinds: items are ``bytes`` fetched with a per-loop client.

    Args:
        locations: where item ``i`` is: a sequence of str, a callable or a ``Template``
            (``Locations``); ``len(dataset)`` is their number.
        target: what a location is, for a ``Template``'s rules and errors (``"url"``, ``"key"``).
        check: ``check(location) -> location``, the kind's rule for a location (raising
            ``ValueError`` for a bad one); ``_fetch`` gets what it returns.  Default: as is.

    The obligation of a kind (see the module): ``_new_client()`` and ``async _fetch(client,
    location) -> bytes``.  Thread-safety: item coroutines may run on several loops at once;
    each loop has its own client (``ClientCache``).

    Raises (from the constructor):
        TypeError, ValueError: see ``Locations``; a location ``check`` refuses.
    Raises (for that item's batch):
        IndexError: the index is out of range.
        Whatever ``_new_client`` or ``_fetch`` raises.
    """

    pickles: ClassVar[bool] = True  # False: pickle and deepcopy raise TypeError (see the module)
    hedge: Hedge | None = None  # a kind with hedged requests sets its own (dataloader.io.hedge)

    def __init__(self, locations: Any, *, target: str = "location", check: Callable[[str], str] = str) -> None:
        self.locations = Locations(locations).bind(target, check)
        self._clients: ClientCache[C] = ClientCache()

    def _new_client(self) -> C:
        raise NotImplementedError(f"{type(self).__name__} must define _new_client()")

    async def _fetch(self, client: C, location: Any) -> bytes:
        raise NotImplementedError(f"{type(self).__name__} must define async def _fetch(client, location)")

    def __len__(self) -> int:
        return len(self.locations)

    def request_counts(self) -> dict[str, int]:
        """``{"requests", "hedges_sent", "hedges_won"}`` of this dataset so far, in this
        process, every loader over it together (``Hedge.counts``); zeros without hedging.
        The loader reports an epoch's share in ``stats``.  Thread-safety: any thread."""
        if self.hedge is None:
            return {"requests": 0, "hedges_sent": 0, "hedges_won": 0}
        return self.hedge.counts()

    def location(self, index: int) -> str:
        """Where item ``index`` is (a URL or an object key), as it may be shown: credentials
        redacted (``_redact.redact``); the loader's ``on_error`` reports name it.

        Raises:
            IndexError, ValueError: as ``__getitem__`` for a bad index or location.
        """
        return redact(str(self.locations[index]))

    async def __getitem__(self, index: int) -> bytes:
        location = self.locations[index]
        return await self._fetch(self._clients.get(self._new_client), location)

    async def aclose(self) -> None:
        """Close this loop's client, if its class has ``async def close()`` (the loader awaits
        ``aclose`` on its loop when it closes)."""
        close = getattr(self._clients.pop(), "close", None)
        if inspect.iscoroutinefunction(close):
            await close()

    def __copy__(self) -> RemoteDataset[C]:
        """A shallow copy: it shares the clients (and everything else) with this one."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        return twin

    def __getstate__(self) -> dict[str, Any]:
        """The state without the clients (for ``pickle`` and ``copy.deepcopy``).

        Raises:
            TypeError: the kind sets ``pickles = False``; the message shows the dataset as
                ``repr`` does (no credentials).
        """
        if not type(self).pickles:
            raise TypeError(
                f"cannot pickle or deep-copy {self!r}: its connection sessions (one per event loop) "
                "belong to this process; build a new one (a loader over it neither pickles nor deep-copies)"
            )
        state = dict(self.__dict__)
        del state["_clients"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A copy's state, with clients of its own (none yet)."""
        self.__dict__.update(state)
        self._clients = ClientCache()
