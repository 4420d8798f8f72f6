"""Integer arguments and integer environment variables: one validator and one reader.

A shared leaf: imports nothing from the package, so every layer may use it.
"""

from __future__ import annotations

import operator
import os
from typing import SupportsIndex, cast

__all__ = ["check_int", "env_int"]


def check_int(
    value: object, name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Return ``value`` as a Python int after checking its type and range.

    Args:
        value: any object with ``__index__`` (Python or NumPy integers); ``bool`` is refused.
        name: the argument's name, for the messages.
        minimum, maximum: inclusive bounds; ``None`` means unbounded.

    Raises:
        TypeError: ``value`` is not an integer, naming its type and value.
        ValueError: ``value`` is outside ``[minimum, maximum]``, as ``f"{name}={value} must be
            >= {minimum}"`` (or ``<= {maximum}``).
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got bool {value!r}")
    try:
        number = operator.index(cast(SupportsIndex, value))
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}") from None
    if minimum is not None and number < minimum:
        raise ValueError(f"{name}={number} must be >= {minimum}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{name}={number} must be <= {maximum}")
    return number


def env_int(var: str, default: int) -> int:
    """The integer in environment variable ``var``; ``default`` when it is unset or blank.

    Raises:
        ValueError: the variable holds something else, naming it and its value.
    """
    raw = os.environ.get(var)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"environment variable {var}={raw!r} is not an integer") from None
