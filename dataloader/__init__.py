"""dataloader: a PyTorch-style training DataLoader whose workers are threads.

Built for free-threaded CPython (3.13t), where worker threads run Python in
parallel; on ordinary CPython the native parts (row gathering, collation) still
run in parallel because they release the GIL.  Batches are NumPy arrays.

Public names are re-exported here; everything in a module whose name starts
with an underscore (and all of ``dataloader._native``) is private.
"""

from __future__ import annotations


from dataloader._context import WorkerInfo, get_worker_info, item_rng
from dataloader._engine.errors import ItemCancelledError
from dataloader._engine.stats import LoaderStats
from dataloader.collate import default_collate, default_convert
from dataloader.dataset import (
    ArrayDataset,
    BatchRows,
    BatchedItems,
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    random_split,
)
from dataloader.distributed import DistributedSampler
from dataloader.image import (
    CenterCrop,
    Decode,
    ImageBatch,
    ImageCollator,
    ImageFiles,
    ImageFolder,
    Normalize,
    PadTo,
    RandomCrop,
    RandomHorizontalFlip,
    RandomResizedCrop,
    Resize,
    ToCHW,
    ToFloat,
)
from dataloader.io import (
    AsyncDataset,
    FileDataset,
    HttpDataset,
    Locations,
    ObjectStoreDataset,
    Retry,
    Template,
)
from dataloader.formats import ArrowDataset, ParquetDataset
from dataloader.loader import DataLoader
from dataloader.ndf import NdfDataset, NdfFile, NdfWriter, open_ndf, save_ndf
from dataloader.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from dataloader.shard import ShardSampler
from dataloader.transforms import Compose, Transform

from dataloader._version import __version__

__all__ = [
    "ArrayDataset",
    "ArrowDataset",
    "AsyncDataset",
    "BatchRows",
    "BatchSampler",
    "BatchedItems",
    "CenterCrop",
    "ChainDataset",
    "Compose",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "Decode",
    "DistributedSampler",
    "FileDataset",
    "HttpDataset",
    "ImageBatch",
    "ImageCollator",
    "ImageFiles",
    "ImageFolder",
    "ItemCancelledError",
    "IterableDataset",
    "LoaderStats",
    "Locations",
    "NdfDataset",
    "NdfFile",
    "NdfWriter",
    "Normalize",
    "ObjectStoreDataset",
    "PadTo",
    "ParquetDataset",
    "RandomCrop",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomSampler",
    "Resize",
    "Retry",
    "Sampler",
    "SequentialSampler",
    "ShardSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "Template",
    "ToCHW",
    "ToFloat",
    "Transform",
    "WeightedRandomSampler",
    "WorkerInfo",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "item_rng",
    "open_ndf",
    "random_split",
    "save_ndf",
]
assert sorted(__all__) == __all__, "keep __all__ sorted"
