"""Shared fixtures of the test suite (the shared fakes and helpers are in ``_support.py``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

from tests._support import RecordingDataset


@pytest.fixture
def recording_dataset() -> type[RecordingDataset]:
    return RecordingDataset


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` during the test, also where the runner ignores it (a
    background job of a shell without job control starts with SIGINT ignored, and
    ``_thread.interrupt_main()``, which simulates a SIGINT, then does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("sends the main thread a Ctrl-C: runs on the main thread only")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
