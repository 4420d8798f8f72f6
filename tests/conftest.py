"""Shared fixtures of the test suite (the shared fakes and helpers are in ``_support.py``)."""

from __future__ import annotations

import pytest

from _support import RecordingDataset


@pytest.fixture
def recording_dataset() -> type[RecordingDataset]:
    return RecordingDataset
