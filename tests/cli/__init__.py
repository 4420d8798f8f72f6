"""Tests of python -m dataloader (dataloader/cli/)."""
