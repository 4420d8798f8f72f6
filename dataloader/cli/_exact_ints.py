"""CSV integers past 2**53, read exactly for a part stored as int64 (``convert --dtype int64``).

``numpy.loadtxt`` parses a block of CSV text into float64, which holds every integer up to
2**53 exactly and rounds larger ones: ``9007199254740993`` reads as 9007199254740992.0, which
int64 would then store without complaint (a nanosecond timestamp or a 64-bit id changed).
For a part (features or labels) stored as a 64-bit integer dtype, a block holding a value of
magnitude 2**53 or more is read again from its text: those cells exactly (``int()``, or
``Decimal`` for ``9.007199254740993e15`` and ``9007199254740993.0``), the others from float64
(exact below 2**53), and the part goes on as int64.  A cell that is not a whole number in the
dtype's range is refused as ``NdfWriter.append`` refuses one (``ConversionError``: its data
row, its column, the value as written, the dtype), so ``convert`` names it on one line and
never rounds.  A block without such values costs one comparison per cell.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation

import numpy as np

from dataloader._ndf.format import ConversionError

__all__ = ["EXACT_FLOAT_INT", "exact_int_part", "needs_exact_ints"]

EXACT_FLOAT_INT = 2**53  # float64's 53-bit significand: every integer of smaller magnitude is exact


def needs_exact_ints(dtype: np.dtype | str) -> bool:
    """True for an integer dtype that holds integers float64 cannot (int64, uint64)."""
    dt = np.dtype(dtype)
    return dt.kind in "iu" and dt.itemsize >= 8


_NON_FINITE = frozenset({"inf", "infinity", "nan"})
_SHOWN_MAX = 60  # characters of a value shown in an error


def _shown(written: str) -> str:
    """``written`` as an error shows it: whole up to 60 characters, else its ends and length."""
    if len(written) <= _SHOWN_MAX:
        return written
    return f"{written[:24]}...{written[-12:]} ({len(written)} characters)"


def _exact_int(text: str) -> int | None:
    """The integer ``text`` writes (``"12"``, ``"1.2e17"``, ``"9007199254740993.0"``), or None
    when it is not a whole number."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        numerator, denominator = Decimal(text).as_integer_ratio()
    except (InvalidOperation, ValueError, OverflowError):  # not a number, or inf/nan
        return None
    return numerator if denominator == 1 else None


def exact_int_part(
    part: np.ndarray, text: Callable[[int, int], str], dtype: np.dtype | str, first_row: int,
    what: str, path: str,
) -> np.ndarray:
    """``part`` as ``dtype`` with every cell of magnitude >= 2**53 read exactly from its text.

    Args:
        part: float64 array of shape (k, m), the block's features or labels as parsed.
        text: ``text(i, j)`` is the CSV field that ``part[i, j]`` was parsed from.
        dtype: the part's stored dtype (``needs_exact_ints`` is true for it).
        first_row: data rows converted before this block (the file's row of ``part[0]``).
        what: ``"x_rows"`` or ``"y_rows"`` (``ConversionError.part``).
        path: the input file, for ``ConversionError.path``.

    Returns:
        ``part`` itself when every cell is finite and below 2**53 (``NdfWriter`` converts and
        checks it),
        else a new ``dtype`` array of shape (k, m).

    Raises:
        ConversionError: the first cell (row-major) that is not a whole number in ``dtype``'s
            range; ``value`` is the text as written for a cell of 2**53 or more, or one past
            float64's range (``1e400``, a 400-digit integer: not ``inf``; past 60 characters,
            its ends and length).
    """
    finite = np.isfinite(part)
    big = finite & (np.abs(part) >= EXACT_FLOAT_INT)
    if not big.any() and finite.all():
        return part
    dt = np.dtype(dtype)
    info = np.iinfo(dt)
    whole = finite & (np.trunc(part) == part)
    small = whole & ~big
    out = np.zeros(part.shape, dt)
    out[small] = part[small]
    for i, j in np.argwhere(~small):  # row-major, as the writer looks
        if not finite[i, j]:  # inf/nan as written, or a number past float64's range (1e400)
            written = text(int(i), int(j)).strip()
            overflow = written.lower().lstrip("+-") not in _NON_FINITE
            raise ConversionError(path, what, first_row + int(i), int(j),
                                  _shown(written) if overflow else part[i, j].item(), dt)
        if not big[i, j]:  # a fraction below 2**53: the writer's refusal
            raise ConversionError(path, what, first_row + int(i), int(j), part[i, j].item(), dt)
        written = text(int(i), int(j))
        value = _exact_int(written)
        if value is None or not info.min <= value <= info.max:
            shown = written.strip() if value is None else value
            raise ConversionError(path, what, first_row + int(i), int(j), shown, dt)
        out[i, j] = value
    return out
