"""Tests of collation (dataloader/_collation/)."""
