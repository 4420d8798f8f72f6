"""Generic collation (private): PyTorch's ``default_collate`` rules over NumPy.

``default`` (``collate``, ``default_collate``, ``default_convert``), ``errors`` (field paths in
collation errors).  Public through :mod:`dataloader.collate`.  Image batches are collated by
:mod:`dataloader.image.collator` into reused buffers (native ``_native/_imgcopy``).
"""
