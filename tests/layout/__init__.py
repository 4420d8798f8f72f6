"""Tests of the package's layout: layers and imports, docs, the GIL staying off."""
