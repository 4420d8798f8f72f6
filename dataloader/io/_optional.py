"""Optional dependencies (the ``remote`` extra), imported on first use with a hint when absent."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["optional_import"]


def optional_import(module: str, who: str) -> ModuleType:
    """``import module`` for ``who`` (e.g. ``"HttpDataset"``); thread-safe as ``import`` is.

    Raises:
        ModuleNotFoundError: ``module`` (or its top-level package) is not installed, saying
            that ``who`` needs it and how to install it (``pip install 'dataloader[remote]'``).
            A module missing inside an installed package is raised as it was.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.partition(".")[0]
        if exc.name != top:
            raise
        raise ModuleNotFoundError(
            f"{who} needs {top}, an optional dependency that is not installed: "
            f"pip install 'dataloader[remote]' (or '.[remote]' in a checkout), or pip install {top}",
            name=top,
        ) from None
