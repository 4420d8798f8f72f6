"""``Locations``: where item ``i`` of a built-in dataset is.

One of: a sequence of strings (each checked when the dataset is built), a
callable ``index -> str`` (its result checked when the item is fetched), or a
``Template`` (parsed once, bound to the dataset's target when the dataset is
built, written when the item is fetched).  A callable or a template has no
length of its own: give it with ``Locations(source, length=n)``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from dataloader.io._redact import redact
from dataloader.io.template import Template, check_components

__all__ = ["Locations"]


class Locations:
    """Where each item is: a sequence of strings, a callable, or a ``Template``.

    Args:
        source: ``Sequence[str]``, ``Callable[[int], str]`` or ``Template``.
        length: the number of items (required for a callable or a template; must
            be omitted or equal ``len(source)`` for a sequence).

    Thread-safety: immutable after ``bind``; ``__getitem__`` may run on any thread
    (a callable source must itself be thread-safe).

    Raises:
        TypeError: ``source`` is none of the three kinds, or a sequence entry is not
            a str, or ``length`` is missing for a callable or a template.
        ValueError: ``length`` is negative or disagrees with the sequence.
    """

    __slots__ = ("source", "length", "target", "_check")

    source: Any
    length: int
    target: str | None

    def __init__(self, source: Any, length: int | None = None) -> None:
        if isinstance(source, Locations):
            source, length = source.source, source.length if length is None else length
        if isinstance(source, (str, bytes)):
            raise TypeError("locations must be a sequence of str, a callable or a Template, not one string")
        if isinstance(source, Template) or callable(source):
            if length is None:
                raise TypeError(
                    f"a {type(source).__name__} has no length: pass Locations({source!r}, length=N)"
                )
        elif isinstance(source, Sequence):
            source = tuple(source)
            for i, loc in enumerate(source):
                if not isinstance(loc, str):
                    raise TypeError(f"location {i} must be a str, got {type(loc).__name__}")
            if length is not None and length != len(source):
                raise ValueError(f"{length=} disagrees with the {len(source)} locations given")
            length = len(source)
        else:
            raise TypeError(
                f"locations must be a sequence of str, a callable or a Template, got {type(source).__name__}"
            )
        length = operator.index(length)
        if length < 0:
            raise ValueError(f"{length=} must be >= 0")
        self.source = source
        self.length = length
        self.target = None
        self._check: Callable[[str], str] | None = None

    def bind(self, target: str, check: Callable[[str], str]) -> Locations:
        """A copy bound to ``target``, whose locations pass through ``check``.

        ``check(location) -> location`` is the dataset's own rule (e.g. a path stays
        under its root); it raises ``ValueError`` for a bad location.  A sequence is
        checked whole here.

        Raises:
            ValueError: a location (or a template's constant value) is refused.
        """
        out = Locations(self.source, self.length)
        out.target, out._check = target, check
        if isinstance(out.source, Template):
            out.source.bind(target)
        elif isinstance(out.source, tuple):
            out.source = tuple(_checked(loc, target, check, i) for i, loc in enumerate(out.source))
        return out

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> str:
        """The location of item ``index`` (``0 <= index < len``).

        Raises:
            IndexError: ``index`` is out of range.
            TypeError: ``index`` is not an int.
            ValueError: the item's location is refused.
        """
        i = operator.index(index)
        if not 0 <= i < self.length:
            raise IndexError(f"index {index} is out of range for {self.length} locations")
        source, target, check = self.source, self.target, self._check
        assert target is not None and check is not None, "Locations used before bind()"
        if isinstance(source, tuple):
            return source[i]
        if isinstance(source, Template):
            return check(source.format(i, target))
        loc = source(i)
        if not isinstance(loc, str):
            raise TypeError(f"locations({i}) must return a str, got {type(loc).__name__}")
        return _checked(loc, target, check, i)

    def __repr__(self) -> str:
        """URLs shown without credentials or secret query parameters (``dataloader.io._redact``)."""
        source = tuple(map(redact, self.source)) if isinstance(self.source, tuple) else self.source
        return f"Locations({source!r}, length={self.length})"


def _checked(location: str, target: str, check: Callable[[str], str], index: int) -> str:
    try:
        check_components(location, target)
        return check(location)
    except ValueError as exc:
        raise ValueError(f"item {index}: {exc}") from None
