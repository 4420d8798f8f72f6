"""The epoch engine (private): how one ``iter(loader)`` runs on worker threads.

See docs/design.md ("The engine") for the contract and how these modules fit together.
"""
