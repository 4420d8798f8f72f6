"""Tests of the .ndf format (dataloader/_ndf/)."""
