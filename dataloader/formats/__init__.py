"""Training data in the field's formats: Parquet / Arrow (read by pyarrow) and tar shards.

``ParquetDataset`` (Parquet files) and ``ArrowDataset`` (Arrow IPC / Feather v2 files,
memory-mapped, or a ``pyarrow.Table``): map-style datasets whose rows are dicts
``{column: value}`` and whose batches are columns, read with projection, row group by row
group, through a bounded cache.  pyarrow is optional (``pip install 'dataloader[formats]'``)
and imported when a dataset is made, never by ``import dataloader``.

``TarShardDataset`` (``dataloader.formats.tar``): an ``IterableDataset`` over WebDataset-style
tar shards (local, HTTP or an object store), streamed with the standard library's ``tarfile``,
split across ranks and worker threads, shuffled by shard order and a bounded buffer, resumable.

``HFDataset`` / ``HFIterableDataset``: Hugging Face ``datasets.Dataset`` (one Arrow take per
batch, its format and indices mapping kept) and ``datasets.IterableDataset`` (split across
ranks and workers as HF splits it, resumed through its ``state_dict``); ``DataLoader`` wraps
either in them by itself.  ``datasets`` is imported only for an object of its own.

``MixDataset`` mixes several datasets by weight (map-style sources: a map-style mix;
``IterableDataset`` s: a ``MixStream``), each sample's source a pure function of
``(seed, epoch, position)``; it needs NumPy only.

Column types and nulls (``dataloader.formats._columns``): integers / floats / bool as their
NumPy dtype ``(B,)``; timestamps / dates / durations as ``datetime64`` / ``timedelta64``; a
fixed-size list of numbers ``(B, k)``; strings / binaries as ``object`` arrays of ``str`` /
``bytes``; other types as ``object`` arrays of Python values.  A null is NaN in a float column
and ``None`` in an object column; in an int / bool / temporal / fixed-size-list column it raises
``ValueError`` (naming the column and file) unless ``nulls="object"``.
"""

from __future__ import annotations

from dataloader.formats.arrow import ArrowDataset
from dataloader.formats.hf import HFDataset
from dataloader.formats.hf_stream import HFIterableDataset
from dataloader.formats.mix import MixDataset
from dataloader.formats.mix_stream import MixStream
from dataloader.formats.parquet import ParquetDataset
from dataloader.formats.tar import TarShardDataset

__all__ = [
    "ArrowDataset", "HFDataset", "HFIterableDataset", "MixDataset", "MixStream", "ParquetDataset", "TarShardDataset",
]

for _obj in (ArrowDataset, HFDataset, HFIterableDataset, MixDataset, MixStream, ParquetDataset, TarShardDataset):
    _obj.__module__ = __name__
del _obj
