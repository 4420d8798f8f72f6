"""Tests of images (dataloader/image/)."""
