"""Tests of datasets, transforms and ArrayDataset (dataloader/_datasets/, transforms.py)."""
