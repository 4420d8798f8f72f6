"""dataloader: a PyTorch-style training DataLoader whose workers are threads.

Built for free-threaded CPython (3.13t), where worker threads run Python in
parallel; on ordinary CPython the native parts (row gathering, collation) still
run in parallel because they release the GIL.  Batches are NumPy arrays.

Public names are re-exported here; everything in a module whose name starts
with an underscore (and all of ``dataloader._native``) is private.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from dataloader._context import WorkerInfo, get_worker_info, item_rng
from dataloader._engine.errors import ItemCancelledError
from dataloader._engine.failures import FailureRecord, TooManyFailures
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
from dataloader.loader import DataLoader
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

# The image transforms, the file and remote datasets, the Parquet/Arrow datasets and the .ndf row
# format load on first use: a loader over arrays needs none of them, and ``import dataloader``
# stays within 1.3x ``import numpy`` (issue 21; measured by benchmarks/import_time.py).  Each name is the module's own.
_LAZY_MODULES = {
    "dataloader.image": (
        "CenterCrop", "Decode", "ImageBatch", "ImageCollator", "ImageFiles", "ImageFolder", "Normalize",
        "PadTo", "RandomCrop", "RandomHorizontalFlip", "RandomResizedCrop", "Resize", "ToCHW", "ToFloat",
    ),
    "dataloader.io": (
        "AsyncDataset", "FileDataset", "HttpDataset", "Locations", "ObjectStoreDataset", "Retry", "Template",
    ),
    "dataloader.ndf": ("CachedDataset", "NdfDataset", "NdfFile", "NdfWriter", "open_ndf", "save_ndf"),
    "dataloader.formats": (
        "ArrowDataset", "HFDataset", "HFIterableDataset", "MixDataset", "MixStream", "ParquetDataset",
        "TarShardDataset",
    ),
    "dataloader._engine.stats": ("LoaderStats",),  # with the engine, which loads with the first loader
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}

if TYPE_CHECKING:
    from dataloader._engine.stats import LoaderStats
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
    from dataloader.formats import (
        ArrowDataset,
        HFDataset,
        HFIterableDataset,
        MixDataset,
        MixStream,
        ParquetDataset,
        TarShardDataset,
    )
    from dataloader.ndf import CachedDataset, NdfDataset, NdfFile, NdfWriter, open_ndf, save_ndf


def __getattr__(name: str) -> Any:
    """A lazily loaded public name (``_LAZY``) or subpackage (``image``, ``io``, ``ndf``).

    Thread-safe: the import system serializes the import; the name is then cached in the
    package's namespace (every thread stores the same object).

    Raises:
        AttributeError: ``name`` is not a public name of the package.
    """
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(_load(module), name)
    elif f"dataloader.{name}" in _LAZY_MODULES:
        value = _load(f"dataloader.{name}")
    else:
        raise AttributeError(f"module 'dataloader' has no attribute {name!r}")
    globals()[name] = value
    return value


def _load(module: str) -> ModuleType:
    """One of ``_LAZY_MODULES``, imported by a statement the layout tests' import graph reads."""
    if module == "dataloader.image":
        import dataloader.image  # lazy: on first use (see _LAZY_MODULES)

        return dataloader.image
    if module == "dataloader.io":
        import dataloader.io  # lazy: on first use (see _LAZY_MODULES)

        return dataloader.io
    if module == "dataloader.formats":
        import dataloader.formats  # lazy: on first use (see _LAZY_MODULES)

        return dataloader.formats
    if module == "dataloader._engine.stats":
        import dataloader._engine.stats  # lazy: on first use (see _LAZY_MODULES)

        return dataloader._engine.stats
    import dataloader.ndf  # lazy: on first use (see _LAZY_MODULES)

    return dataloader.ndf


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {m.split(".")[1] for m in _LAZY_MODULES if m.count(".") == 1})


__all__ = [
    "ArrayDataset",
    "ArrowDataset",
    "AsyncDataset",
    "BatchRows",
    "BatchSampler",
    "BatchedItems",
    "CachedDataset",
    "CenterCrop",
    "ChainDataset",
    "Compose",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "Decode",
    "DistributedSampler",
    "FailureRecord",
    "FileDataset",
    "HFDataset",
    "HFIterableDataset",
    "HttpDataset",
    "ImageBatch",
    "ImageCollator",
    "ImageFiles",
    "ImageFolder",
    "ItemCancelledError",
    "IterableDataset",
    "LoaderStats",
    "Locations",
    "MixDataset",
    "MixStream",
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
    "TarShardDataset",
    "Template",
    "ToCHW",
    "ToFloat",
    "TooManyFailures",
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
