"""Tests of remote and file datasets (dataloader/io/)."""
