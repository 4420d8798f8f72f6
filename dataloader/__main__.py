"""``python -m dataloader`` (and the ``dataloader`` console script): dispatch to a command.

The commands live in :mod:`dataloader.cli`, one module each.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status.

    0 on success, 2 for bad input (a one-line message on stderr, no
    traceback; argparse's usage errors too), 130 on Ctrl-C.
    """
    # lazy: `import dataloader.__main__` (the console script's entry) defines main() only
    from dataloader import __version__
    from dataloader.cli import CliError, build_parser

    parser = build_parser(__version__)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    try:
        return args.run(args)
    except CliError as exc:
        print(f"dataloader {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"dataloader {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `dataloader info f.ndf | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
