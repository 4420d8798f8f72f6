"""The epoch engine (private): how one ``iter(loader)`` runs on worker threads.

A loader face builds one ``Engine`` (``dataloader._engine.engine``) from its arguments and
calls only it.  See docs/design.md ("The engine") for the contract and how the modules fit
together.

``Engine`` is imported on first use (module ``__getattr__``): ``import dataloader`` reads
``_engine.errors`` and ``_engine.stats`` only, and the engine's modules load with the
first loader (issue 21: ``import dataloader`` within 1.3x ``import numpy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dataloader._engine.engine import Engine

__all__ = ["Engine"]


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from dataloader._engine.engine import Engine  # lazy: see the module docstring

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
