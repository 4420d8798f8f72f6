"""Brace patterns of shard names: ``train-{000000..000999}.tar``, ``{a,b}/part-{0..3}.tar``.

The rules are the ``braceexpand`` package's (which ``webdataset`` uses) for what shard lists
need: ``{a..b}`` is the integers from ``a`` to ``b`` inclusive (descending when ``a > b``),
zero-padded to the wider of the two when either has a leading zero; ``{x,y,z}`` is each
alternative in turn; braces nest and combine left to right (the first group varies slowest).
A brace without a match, ``{}`` or ``{a..}`` is taken literally by ``braceexpand``; here it is
a ``ValueError``, since a shard list with a stray brace is a typo, not a file name.
"""

from __future__ import annotations

import re

__all__ = ["expand_braces"]

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")


def expand_braces(pattern: str) -> list[str]:
    """Every name ``pattern`` stands for, in order (see the module).

    Raises:
        ValueError: an unbalanced brace, an empty group, or a group that is neither a range nor
            a list of alternatives (the pattern named).
    """
    start = pattern.find("{")
    if start < 0:
        if "}" in pattern:
            raise ValueError(f"shard pattern {pattern!r} has a '}}' without its '{{'")
        return [pattern]
    end = _closing(pattern, start)
    head, body, tail = pattern[:start], pattern[start + 1 : end], pattern[end + 1 :]
    if "}" in head:
        raise ValueError(f"shard pattern {pattern!r} has a '}}' without its '{{'")
    choices = _group(body, pattern)
    rest = expand_braces(tail)
    return [head + c + r for choice in choices for c in expand_braces(choice) for r in rest]


def _closing(pattern: str, start: int) -> int:
    depth = 0
    for i in range(start, len(pattern)):
        if pattern[i] == "{":
            depth += 1
        elif pattern[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"shard pattern {pattern!r} has a '{{' without its '}}'")


def _group(body: str, pattern: str) -> list[str]:
    match = _RANGE.match(body)
    if match is not None:
        a, b = match.group(1), match.group(2)
        lo, hi = int(a), int(b)
        padded = any(s.lstrip("-").startswith("0") and len(s.lstrip("-")) > 1 for s in (a, b))
        width = max(len(a), len(b)) if padded else 0
        step = 1 if hi >= lo else -1
        return [str(i).zfill(width) for i in range(lo, hi + step, step)]
    parts = _split_top(body)
    if len(parts) < 2:
        raise ValueError(
            f"shard pattern {pattern!r}: {{{body}}} is neither a range {{a..b}} nor alternatives {{x,y}}"
        )
    return parts


def _split_top(body: str) -> list[str]:
    """``body`` split at the commas outside nested braces."""
    parts, depth, last = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[last:i])
            last = i + 1
    parts.append(body[last:])
    return parts
