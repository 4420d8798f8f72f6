"""The epoch engine (private): how one ``iter(loader)`` runs on worker threads.

A loader face builds one ``Engine`` (``dataloader._engine.engine``) from its arguments and
calls only it.  See docs/design.md ("The engine") for the contract and how the modules fit
together.
"""

from dataloader._engine.engine import Engine

__all__ = ["Engine"]
