"""Tests of the epoch engine (dataloader/_engine/) through DataLoader: epochs, workers, resume, async, stats."""
