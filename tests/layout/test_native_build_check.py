"""``dataloader._native`` refuses to import, with what to run, where this interpreter's
compiled modules are missing (a checkout built for another interpreter)."""

from __future__ import annotations

import os
from importlib.machinery import EXTENSION_SUFFIXES

import dataloader._native as native


def test_a_folder_without_this_interpreters_build_is_named_with_the_commands_to_run(tmp_path):
    (tmp_path / "_permute.cpython-399-x86_64-linux-gnu.so").write_bytes(b"")  # another interpreter's
    why = native.missing_build(str(tmp_path))
    assert why is not None and str(tmp_path) in why and EXTENSION_SUFFIXES[0] in why
    assert "python -m pip install ." in why and "build_ext --inplace" in why


def test_the_installed_folder_has_its_build():
    assert native.missing_build(os.path.dirname(native.__file__)) is None
