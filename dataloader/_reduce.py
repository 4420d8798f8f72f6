"""Pickling and copying a loader: a fresh loader built from the same arguments.

A loader holds what cannot be copied (worker threads, locks, an event loop thread, open
epochs), so ``pickle.dumps(loader)``, ``copy.copy(loader)`` and ``copy.deepcopy(loader)``
reduce it to the arguments its ``__init__`` was called with (the dataset, sampler,
``collate_fn``, ... are then pickled or copied as usual: deep for ``deepcopy`` and pickle,
shared for ``copy.copy``) and build a new loader from them, with no epoch open and no
thread started.  torch's ``DataLoader`` pickles and deep-copies (its dataset and sampler
with it); Lightning and other clients deep-copy loaders, so ours must survive it.

Carried beyond the arguments:

- the base ``seed`` (drawn at construction from the OS, a ``generator`` or, in
  ``dataloader.torch`` with ``shuffle_order="feistel"``, torch's default generator) and the
  epoch counter: the copy's next ``iter()`` starts the epoch the original's next one would,
  with the same order;
- the torch face's ``worker_init_fn`` as it is now (clients assign it after construction);
- attributes the loader's own ``__init__`` did not set (a subclass's, or ones a user set).

Not carried: open epochs and their position (save ``state_dict()`` and load it into the
copy), a ``load_state_dict()`` whose epoch has not started yet, ``stats``, the worker threads
(the copy starts its own at its first epoch) and the count ``num_workers="auto"`` settled on
(the copy tunes again).  A dataset, sampler, ``collate_fn`` or other argument that cannot be
pickled (an ``HttpDataset``, which holds a lock and sessions, refuses naming itself; a lambda for pickle) fails
as pickle and ``deepcopy`` fail on it (``TypeError`` / ``pickle.PicklingError`` /
``AttributeError`` naming it).

Mechanism: each ``__init__`` of ours calls :func:`remember_init` first and :func:`finish_init`
last; the outermost one records (an inner one, reached through ``super().__init__``, finds the
record and leaves it).  ``__reduce__`` is :func:`reduce_loader`, and :func:`rebuild_loader`
makes the copy.
"""

from __future__ import annotations

import inspect
from typing import Any, cast

__all__ = ["finish_init", "rebuild_loader", "reduce_loader", "remember_init"]

_RECORD = "_init_args"
_SIGNATURES: dict[type, list[inspect.Parameter]] = {}


class _InitArgs:
    """What ``owner.__init__`` was called with, and which attributes it set."""

    __slots__ = ("before", "kwargs", "own", "owner")

    def __init__(self, owner: type, kwargs: dict[str, Any], before: frozenset[str]) -> None:
        self.owner = owner
        self.kwargs = kwargs
        self.before = before  # attributes set before (by a subclass's __init__)
        self.own: frozenset[str] | None = None  # attributes owner.__init__ set (finish_init)


def _parameters(owner: type) -> list[inspect.Parameter]:
    params = _SIGNATURES.get(owner)
    if params is None:  # inspect.signature follows __wrapped__ (a client's wrapper of __init__)
        init = owner.__dict__["__init__"]
        params = list(inspect.signature(init).parameters.values())[1:]  # without self
        _SIGNATURES[owner] = params
    return params


def remember_init(loader: Any, owner: type, arguments: dict[str, Any]) -> None:
    """Record the arguments of ``owner.__init__`` unless an outer ``__init__`` of ours did.

    Args:
        loader: the loader being built.
        owner: the class whose ``__init__`` is running (not ``type(loader)``: a user's
            subclass may take other arguments).
        arguments: ``locals()`` of that ``__init__`` while its parameters still hold what the
            caller passed; a ``**kwargs`` dict is copied.
    """
    if _RECORD in loader.__dict__:
        return
    kwargs: dict[str, Any] = {}
    for param in _parameters(owner):
        if param.kind is param.VAR_KEYWORD:
            kwargs.update(arguments[param.name])
        elif param.kind is not param.VAR_POSITIONAL:
            kwargs[param.name] = arguments[param.name]
    loader.__dict__[_RECORD] = _InitArgs(owner, kwargs, frozenset(loader.__dict__))


def finish_init(loader: Any, owner: type) -> None:
    """Note the attributes ``owner.__init__`` set, at its end, if it recorded the arguments
    (an inner ``__init__``, reached through ``super().__init__``, did not)."""
    record: _InitArgs = loader.__dict__[_RECORD]
    if record.owner is owner and record.own is None:
        record.own = frozenset(loader.__dict__) - record.before


def reduce_loader(loader: Any, overrides: dict[str, Any]) -> tuple[Any, ...]:
    """``loader.__reduce__()``: rebuild from the recorded arguments (``overrides`` replacing
    some), then restore the seed and epoch counter and the attributes ``__init__`` did not set.

    Raises:
        TypeError: ``loader`` was not built by its ``__init__`` (nothing recorded).
    """
    record: _InitArgs | None = loader.__dict__.get(_RECORD)
    if record is None or record.own is None:
        raise TypeError(
            f"cannot pickle or copy this {type(loader).__name__}: its __init__ did not run to the end"
        )
    kwargs = {**record.kwargs, **overrides}
    extra = {k: v for k, v in loader.__dict__.items() if k not in record.own and k != _RECORD}
    seed, epoch = loader._engine.position()  # the pair load_state_dict() sets together
    return (rebuild_loader, (type(loader), record.owner, kwargs, seed, epoch), extra or None)


def rebuild_loader(cls: type[Any], owner: type[Any], kwargs: dict[str, Any], seed: int, epoch: int) -> Any:
    """A new ``cls`` built by ``owner.__init__(**kwargs)``, at ``seed`` and epoch ``epoch``."""
    from dataloader._engine.seed import pinned_seed  # lazy: _engine imports much

    loader = cast(Any, cls).__new__(cls)
    with pinned_seed(seed):  # draws nothing from a generator copy.copy shares with the original
        owner.__dict__["__init__"](loader, **kwargs)  # owner's own, not a subclass's
    loader._engine.continue_from(seed, epoch)
    return loader
