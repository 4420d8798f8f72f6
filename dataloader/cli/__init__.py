"""The ``python -m dataloader`` command line: one module per command.

Each command module has ``add_parser(subparsers)``, which registers its
arguments and sets ``run(args) -> int`` as the parser default.  A command
raises :class:`CliError` for bad user input; ``dataloader.__main__.main``
prints it on one line and returns exit status 2.

Commands:

* ``convert``: ``.npy`` / ``.npz`` / ``.csv`` to an ``.ndf`` row file, in bounded memory;
* ``info``: the shape, size, first rows and per-column statistics of an ``.ndf`` file;
* ``bench``: epochs through ``DataLoader(NdfDataset)`` against a plain NumPy loop;
* ``demo``: trains a softmax classifier on real handwritten digits through the loader.
"""

from __future__ import annotations

import argparse

from dataloader.cli import bench, convert, demo, info
from dataloader.cli._common import CliError

__all__ = ["CliError", "build_parser"]

COMMANDS = (convert, info, bench, demo)


def build_parser(version: str) -> argparse.ArgumentParser:
    """The top-level parser with every command registered."""
    parser = argparse.ArgumentParser(
        prog="dataloader",
        description="Tools for the dataloader package: convert tables to .ndf row files, "
        "inspect and benchmark them, and train a small model through the loader (demo).",
        epilog="Run 'dataloader COMMAND --help' for a command's options.",
    )
    parser.add_argument(
        "--version", action="version", version=version, help="print the version and exit"
    )
    subparsers = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    subparsers.required = True
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser
