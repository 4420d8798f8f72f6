"""The package's version: the one place it is written (``pyproject.toml`` reads it at build
time, ``[tool.setuptools.dynamic]``), so ``import dataloader`` needs no ``importlib.metadata``
(0.06 s on 3.11 and 0.13 s on 3.13t of a 0.23 / 0.44 s import, measured on main before)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
