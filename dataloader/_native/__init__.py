"""Native (Cython) primitives. Private: nothing here is public API.

Importing this package checks that its compiled modules exist for the running interpreter:
a checkout built for one interpreter (``cpython-311``) and run from its root with another
(``cpython-313t``) shadows the installed package, and without the check the first error
would be a bare ``No module named 'dataloader._native._permute'``.
"""

from __future__ import annotations

import os
from importlib.machinery import EXTENSION_SUFFIXES


def missing_build(folder: str, probe: str = "_permute") -> str | None:
    """Why ``folder`` holds no compiled ``probe`` module for this interpreter (a message), or
    None when it does (any of ``EXTENSION_SUFFIXES``)."""
    if any(os.path.exists(os.path.join(folder, probe + suffix)) for suffix in EXTENSION_SUFFIXES):
        return None
    return (
        f"dataloader's compiled modules are not built for this interpreter ({EXTENSION_SUFFIXES[0]}) "
        f"in {folder}: run `python -m pip install .` with this interpreter, or `python setup.py "
        "build_ext --inplace` in the checkout (a checkout's own dataloader/ shadows an installed one "
        "when Python runs from its root)"
    )


_why = missing_build(os.path.dirname(os.path.abspath(__file__)))
if _why is not None:
    raise ImportError(_why)
