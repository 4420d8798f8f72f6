"""Remote and file data: built-in datasets whose items are bytes, and their pieces.

- ``FileDataset``: files (a plain dataset: reads run on the worker threads).
- ``HttpDataset``, ``ObjectStoreDataset``: HTTP(S) and object stores (S3, GCS,
  Azure, local), as ``AsyncDataset``s on the loader's event loop.
- ``AsyncDataset``: the base class of datasets whose ``__getitem__`` is ``async def``
  (defined in ``dataloader._datasets.asyncds``; shown and pickled under this module).
- ``Locations``, ``Template``: where item ``i`` is; ``Retry``: when to try again.

Nothing here imports aiohttp or obstore until a dataset first needs them
(the ``remote`` extra: ``pip install '.[remote]'`` in the checkout).
"""

from __future__ import annotations

from dataloader._datasets.asyncds import AsyncDataset
from dataloader.io.files import FileDataset
from dataloader.io.http import HttpDataset
from dataloader.io.locations import Locations
from dataloader.io.objectstore import ObjectStoreDataset
from dataloader.io.retry import Retry
from dataloader.io.template import Template

__all__ = [
    "AsyncDataset",
    "FileDataset",
    "HttpDataset",
    "Locations",
    "ObjectStoreDataset",
    "Retry",
    "Template",
]

AsyncDataset.__module__ = __name__  # defined in a private module; shown (and pickled) here
