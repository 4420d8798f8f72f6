"""Brace patterns of shard names: ``train-{000000..000999}.tar``, ``{a,b}/part-{0..3}.tar``.

The rules are the ``braceexpand`` package's (which ``webdataset`` uses) for what shard lists
need: ``{a..b}`` is the integers from ``a`` to ``b`` inclusive (descending when ``a > b``),
zero-padded to the wider of the two when either has a leading zero; ``{x,y,z}`` is each
alternative in turn; braces nest and combine left to right (the first group varies slowest).
A brace without a match, ``{}`` or ``{a..}`` is taken literally by ``braceexpand``; here it is
a ``ValueError``, since a shard list with a stray brace is a typo, not a file name.

Bound: a pattern may stand for at most ``MAX_SHARD_NAMES`` (1,000,000) names.  The count is
worked out from the pattern before any name is made, so ``"{0..9999999}"`` (10 million names,
about 1 GB of strings) is a ``ValueError`` at once rather than minutes of expansion; a list of
patterns shares the bound (``limit``).
"""

from __future__ import annotations

import re

__all__ = ["MAX_SHARD_NAMES", "count_braces", "expand_braces"]

# The most names a shard list expands to: 1,000,000 shards of the usual 0.1 to 1 GB hold 100 TB
# to 1 PB, past the largest public WebDataset corpora (LAION-5B: about 230,000 shards), while
# the tuple of names stays near 100 MB.
MAX_SHARD_NAMES = 1_000_000

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")


def expand_braces(pattern: str, limit: int = MAX_SHARD_NAMES) -> list[str]:
    """Every name ``pattern`` stands for, in order (see the module); at most ``limit`` of them.

    Raises:
        ValueError: an unbalanced brace, an empty group, a group that is neither a range nor
            a list of alternatives, or more than ``limit`` names (the pattern named).
    """
    count = count_braces(pattern)
    if count > limit:
        shown = f"{count:,}" if count < 10**18 else "more than 10**18"  # str() of a huge int raises
        left = "" if limit == MAX_SHARD_NAMES else f"the {limit:,} left of "
        raise ValueError(
            f"shard pattern {pattern!r} stands for {shown} names, over {left}the {MAX_SHARD_NAMES:,} a shard "
            "list may hold (MAX_SHARD_NAMES): write fewer, larger shards"
        )
    return _expand(pattern)


def count_braces(pattern: str) -> int:
    """How many names ``pattern`` stands for, worked out without making them.

    Raises:
        ValueError: a brace without its match (a malformed group is left to ``expand_braces``).
    """
    total, at = 1, 0
    while (start := pattern.find("{", at)) >= 0:  # a loop over the groups: no recursion per group
        end = _closing(pattern, start)
        body = pattern[start + 1 : end]
        match = _RANGE.match(body)
        if match is not None:
            total *= abs(int(match.group(2)) - int(match.group(1))) + 1
        else:
            total *= sum(count_braces(choice) for choice in _split_top(body))
        at = end + 1
    return total


def _expand(pattern: str) -> list[str]:
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
    rest = _expand(tail)
    return [head + c + r for choice in choices for c in _expand(choice) for r in rest]


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
