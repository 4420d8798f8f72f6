"""Tests of the Cython kernels (dataloader/_native/): window, gather, row jobs, statuses."""
