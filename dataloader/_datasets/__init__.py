"""Datasets (private): the base classes and the in-memory datasets built on them.

``base`` (``Dataset``, ``IterableDataset``, ``ChainDataset``, ``fetch_items``), ``batched``
(``BatchedItems``), ``concat`` (``ConcatDataset``), ``array`` (``ArrayDataset``), ``subset``
(``Subset``, ``random_split``).  Public through :mod:`dataloader.dataset`; see docs/design.md
("Layout").
"""
