"""The native status vocabulary (``_native/_status``): one enum, two ranges."""

from __future__ import annotations

import ast
from pathlib import Path

from dataloader._native._status import Status

STUB = Path(__file__).resolve().parents[2] / "dataloader" / "_native" / "_status.pyi"


def test_window_statuses_are_negative_and_gather_statuses_positive():
    window = {Status.END, Status.TIMED_OUT, Status.CANCELLED, Status.GATED, Status.EMPTY}
    assert all(s < 0 for s in window)  # a batch number is >= 0
    assert all(s > 0 for s in Status if s.name.startswith("GATHER_"))  # a failed read is -errno
    assert Status.OK == 0 and len({int(s) for s in Status}) == len(Status)


def test_statuses_are_ints_that_compare_with_what_kernels_return():
    assert isinstance(Status.GATED, int) and Status.GATED == -4 and -1 == Status.END
    assert Status(-2) is Status.TIMED_OUT


def test_the_stub_lists_every_status_with_its_value():
    tree = ast.parse(STUB.read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Status"]
    stubbed = {
        n.targets[0].id: ast.literal_eval(n.value)
        for n in cls.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
    }
    assert stubbed == {s.name: int(s) for s in Status}
