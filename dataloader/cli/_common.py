"""What the commands share: the user-error exception, progress bars, formatting.

A command signals a problem with the user's input by raising :class:`CliError`;
``python -m dataloader`` prints its one-line message on stderr and exits with
status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from dataloader.cli._constants import PROGRESS_MIN_INTERVAL_S
from dataloader.loader import DataLoader
from dataloader.ndf import open_ndf

__all__ = [
    "CliError",
    "add_command",
    "add_progress_flag",
    "check_output_path",
    "describe",
    "format_bytes",
    "format_count",
    "make_loader",
    "open_ndf_or_fail",
    "progress",
]


class CliError(Exception):
    """Bad input from the user: the message is printed on one line; exit status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def describe(doc: str | None) -> str | None:
    """A command's ``--help`` text: its module docstring after the first line, without RST."""
    if not doc:
        return None
    body = doc.split("\n\n", 1)[-1]
    return body.replace("``", "")


def add_command(
    subparsers: argparse._SubParsersAction,
    name: str,
    summary: str,
    doc: str | None,
    *,
    raw: bool = False,
) -> argparse.ArgumentParser:
    """Register command ``name``: ``summary`` in the command list, ``describe(doc)`` in its
    ``--help`` (with ``raw``, the description keeps its line breaks)."""
    if raw:
        return subparsers.add_parser(
            name,
            help=summary,
            description=describe(doc),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    return subparsers.add_parser(name, help=summary, description=describe(doc))


def add_progress_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--progress/--no-progress`` (default: a bar when stderr is a terminal)."""
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a tqdm progress bar on stderr (default: only when stderr is a terminal)",
    )


def progress(enabled: bool | None, **kwargs: Any) -> Any:
    """A tqdm progress bar on stderr; ``enabled=None`` shows it only on a terminal."""
    from tqdm import tqdm  # lazy: only commands that show progress pay for importing tqdm

    if enabled is None:
        enabled = sys.stderr.isatty()
    kwargs.setdefault("mininterval", PROGRESS_MIN_INTERVAL_S)
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("leave", False)
    return tqdm(file=sys.stderr, disable=not enabled, **kwargs)


def format_count(n: float) -> str:
    """``1234567`` -> ``'1,234,567'``; floats keep three significant digits."""
    if isinstance(n, int):
        return f"{n:,}"
    return f"{n:,.3g}" if abs(n) < 1000 else f"{n:,.0f}"


def format_bytes(n: float) -> str:
    """A byte count with a binary unit: ``'921.1 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def open_ndf_or_fail(path: str, **kwargs: Any) -> Any:
    """``open_ndf(path)``, turning a missing or malformed file into a :class:`CliError`."""
    try:
        return open_ndf(path, **kwargs)
    except OSError as exc:
        raise CliError(f"cannot open {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        message = str(exc)
        raise CliError(message if path in message else f"{path}: {message}") from None


def make_loader(dataset: Any, **kwargs: Any) -> Any:
    """``DataLoader(dataset, **kwargs)``, turning a rejected option into a :class:`CliError`.

    The loader bounds its options (e.g. ``num_workers``, ``prefetch_depth``); its
    ``ValueError``/``TypeError`` names the option and the limit.
    """
    try:
        return DataLoader(dataset, **kwargs)
    except (ValueError, TypeError) as exc:
        raise CliError(str(exc)) from None


def check_output_path(output: str, inputs: list[str], force: bool) -> None:
    """Refuse to overwrite an input, an existing file (without ``--force``), or a missing folder."""
    out = os.path.abspath(output)
    for inp in inputs:
        if (
            inp is not None
            and os.path.exists(inp)
            and os.path.exists(out)
            and os.path.samefile(inp, out)
        ):
            raise CliError(f"output {output} is the same file as input {inp}")
    if os.path.isdir(out):
        raise CliError(f"output {output} is a directory")
    if os.path.exists(out) and not force:
        raise CliError(f"output {output} exists (use --force to replace it)")
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise CliError(f"output folder {os.path.dirname(output) or '.'} does not exist")
