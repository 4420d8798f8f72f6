"""Samplers (private): which indices an epoch visits, and in what order.

``base`` (the ``Sampler`` base and the int64 index-chunk machinery), ``batch`` (``BatchSampler``
and its index-array fast path), ``samplers`` (PyTorch's four index samplers), ``distributed``,
``shard``.  Public through :mod:`dataloader.sampler`, :mod:`dataloader.distributed` and
:mod:`dataloader.shard`; see docs/design.md ("Layout").
"""
