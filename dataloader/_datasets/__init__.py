"""Datasets (private): the base classes and the in-memory datasets built on them.

``base`` (``Dataset``, ``IterableDataset``, ``ChainDataset``, ``ConcatDataset``), ``concat`` (the
batched ``__getitems__`` of ``ConcatDataset``), ``fetch`` (``fetch_items``: a batch via
``__getitems__``), ``batched`` (``BatchedItems``), ``array`` (``ArrayDataset``), ``subset``
(``Subset``, ``random_split``).  Public through :mod:`dataloader.dataset`; see docs/design.md
("Layout").
"""
