"""Datasets (private): the base classes and the in-memory datasets built on them.

``base`` (``Dataset``, ``IterableDataset``, ``ChainDataset``, ``ConcatDataset``), ``concat`` (the
batched ``__getitems__`` of ``ConcatDataset``), ``fetch`` (``fetch_items``: a batch via
``__getitems__``), ``batched`` (``BatchedItems``), ``array`` (``ArrayDataset``), ``subset``
(``Subset``, ``random_split``), ``asyncds`` (``AsyncDataset``: coroutine items) and ``kind``
(``check_dataset_kind``: which of the two kinds a dataset is, the loader's rule).  Public through
:mod:`dataloader.dataset` (``AsyncDataset`` through :mod:`dataloader.io`); see docs/design.md
("Layout").
"""
