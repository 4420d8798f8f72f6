"""Tests of samplers and index batches (dataloader/_sampling/, _indices.py)."""
