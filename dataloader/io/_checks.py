"""Argument checks shared by the built-in datasets."""

from __future__ import annotations

from typing import Any

from dataloader.io.retry import Retry

__all__ = ["check_max_bytes", "check_retry", "over_max_bytes"]


def check_max_bytes(max_bytes: Any) -> int | None:
    """``max_bytes`` validated: None, or an int >= 0.

    Raises:
        TypeError, ValueError: it is neither.
    """
    if max_bytes is None:
        return None
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
        raise TypeError(f"max_bytes must be an int or None, got {type(max_bytes).__name__}")
    if max_bytes < 0:
        raise ValueError(f"{max_bytes=} must be >= 0")
    return max_bytes


def check_retry(retry: Any) -> Retry:
    """``retry`` validated (None: the defaults).

    Raises:
        TypeError: it is not a ``Retry``.
    """
    if retry is None:
        return Retry()
    if not isinstance(retry, Retry):
        raise TypeError(f"retry must be a dataloader.io.Retry or None, got {type(retry).__name__}")
    return retry


def over_max_bytes(location: str, size: int | str, limit: int) -> ValueError:
    """The error of an item larger than ``max_bytes`` (``size``: bytes, or a phrase)."""
    return ValueError(f"{location!r} is {size} bytes, over max_bytes={limit}")
