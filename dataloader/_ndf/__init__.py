"""The `.ndf` row-file format (private): ``format`` (header, constants), ``read``, ``write``.

Public through :mod:`dataloader.ndf` (whose docstring describes the file and its access paths).
"""
