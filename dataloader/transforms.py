"""Per-item transforms: the base class, chaining and where randomness comes from.

A transform is called once per item, on the loader's worker thread, right after
the item is fetched (``DataLoader(transform=...)``).  ``t(item)`` applies ``t`` to
``item``; when ``item`` is a tuple such as ``(image, label)`` it applies to the
first element and passes the rest through unchanged.

Random transforms draw from ``dataloader._context.item_rng()``, a NumPy
``Generator`` seeded from ``(loader seed, epoch, item index)``, so an item is
transformed identically whatever ``num_workers``/``item_concurrency`` are and
whichever thread runs it.  Outside a loader pass ``rng=`` explicitly:
``t(item, rng=np.random.default_rng(0))``.  A chain (``a.then(b)``,
``Compose([...])``) resolves the generator once per item and hands the same one
to every step, so its steps draw successive, independent numbers.

Image transforms live in ``dataloader.image``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dataloader._context import item_rng

__all__ = ["Compose", "Transform", "resolve_rng"]


def resolve_rng(rng: np.random.Generator | None) -> np.random.Generator:
    """Return ``rng``, or the current item's ``item_rng()`` when it is ``None``.

    Raises:
        RuntimeError: ``rng`` is ``None`` outside a DataLoader.
    """
    return item_rng() if rng is None else rng


class Transform:
    """Base class of per-item transforms.

    Subclasses implement :meth:`apply` on the bare value (an image, bytes...) and
    set ``random = True`` when they draw random numbers.  Instances are immutable
    after construction and therefore safe to share between worker threads.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        # Read-only per instance: a subclass sets a class attribute, Compose computes it.
        @property
        def random(self) -> bool:
            """Whether :meth:`apply` draws from its ``rng`` argument."""
    else:
        #: Whether :meth:`apply` draws from its ``rng`` argument.
        random = False

    def apply(self, value: Any, rng: np.random.Generator | None) -> Any:
        """Transform one bare value (not a tuple).

        Args:
            value: the value to transform.
            rng: the item's generator when ``random`` is true, else ``None``.
        """
        raise NotImplementedError

    def __call__(self, item: Any, rng: np.random.Generator | None = None) -> Any:
        """Transform ``item``, or ``item[0]`` when ``item`` is a tuple.

        Args:
            item: a value, or a tuple (or namedtuple) whose first element is
                transformed and whose other elements (labels...) pass through.
            rng: generator to draw from; ``None`` means the current item's
                ``dataloader.item_rng()`` (only available inside a DataLoader).

        Raises:
            RuntimeError: a random transform ran outside a loader without ``rng``.
            ValueError: ``item`` is an empty tuple.
        """
        if self.random:
            rng = resolve_rng(rng)
        if isinstance(item, tuple):
            if not item:
                raise ValueError("cannot transform an empty tuple item")
            first = self.apply(item[0], rng)
            if type(item) is tuple:
                return (first, *item[1:])
            return cast(Any, item)._make((first, *item[1:]))  # a namedtuple keeps its type
        return self.apply(item, rng)

    def then(self, other: Callable[..., Any]) -> Compose:
        """Return the chain "``self``, then ``other``" (``other`` may be any callable)."""
        return Compose([self, other])

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _slot_names(self))
        return f"{type(self).__name__}({fields})"


class Compose(Transform):
    """Apply transforms one after the other.

    Args:
        transforms: ``Transform`` instances (called as ``t(item, rng=rng)``) or
            plain callables (called as ``f(item)`` on the whole item, tuple
            included).  Nested ``Compose`` chains are flattened.
    """

    __slots__ = ("transforms",)

    def __init__(self, transforms: Iterable[Callable[..., Any]]) -> None:
        steps: list[Callable[..., Any]] = []
        for t in transforms:
            if not callable(t):
                raise TypeError(f"transform {t!r} is not callable")
            steps.extend(t.transforms if isinstance(t, Compose) else (t,))
        self.transforms: tuple[Callable[..., Any], ...] = tuple(steps)

    @property
    def random(self) -> bool:
        """Whether any of the steps draws random numbers."""
        return any(isinstance(t, Transform) and t.random for t in self.transforms)

    def __call__(self, item: Any, rng: np.random.Generator | None = None) -> Any:
        if self.random:
            rng = resolve_rng(rng)
        for t in self.transforms:
            item = t(item, rng=rng) if isinstance(t, Transform) else t(item)
        return item

    def apply(self, value: Any, rng: np.random.Generator | None) -> Any:
        return self(value, rng=rng)

    def then(self, other: Callable[..., Any]) -> Compose:
        return Compose([*self.transforms, other])

    def __repr__(self) -> str:
        inner = ", ".join(repr(t) for t in self.transforms)
        return f"Compose([{inner}])"


def _slot_names(obj: object) -> list[str]:
    names: list[str] = []
    for cls in type(obj).__mro__:
        names.extend(n for n in getattr(cls, "__slots__", ()) if not n.startswith("_"))
    return names
