"""``dataloader``'s lazily loaded public names (``dataloader/__init__.py``, ``_LAZY``): the image
transforms, the file and remote datasets, the Parquet/Arrow datasets and the ``.ndf`` format load
on first use, and each name is then the same object its module defines, so ``import dataloader``
stays light (issue 21)."""

from __future__ import annotations

import importlib
import json

import pytest
from tests._support import run_python

import dataloader

LAZY_PACKAGES = ["dataloader.image", "dataloader.io", "dataloader.ndf", "dataloader.formats"]


@pytest.mark.timeout(120)
def test_import_dataloader_leaves_the_lazy_packages_unimported():
    code = f"import sys, dataloader; print([m for m in {LAZY_PACKAGES!r} if m in sys.modules])"
    out = run_python("-c", code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.timeout(120)
def test_first_use_loads_the_module_and_caches_the_name():
    code = (
        "import json, sys, dataloader\n"
        "resize = dataloader.Resize\n"
        "print(json.dumps(['dataloader.image' in sys.modules, 'Resize' in vars(dataloader),"
        " resize is sys.modules['dataloader.image'].Resize, 'dataloader.ndf' in sys.modules]))\n"
    )
    out = run_python("-c", code)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [True, True, True, False]


@pytest.mark.parametrize("name", sorted(dataloader._LAZY))
def test_every_lazy_name_is_public_and_its_modules_own(name):
    assert name in dataloader.__all__ and name in dir(dataloader)
    module = importlib.import_module(dataloader._LAZY[name])
    assert getattr(dataloader, name) is getattr(module, name)


def test_subpackages_and_star_import_resolve():
    assert dataloader.image is importlib.import_module("dataloader.image")
    assert dataloader.ndf is importlib.import_module("dataloader.ndf")
    namespace: dict[str, object] = {}
    exec("from dataloader import *", namespace)
    assert set(dataloader.__all__) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        dataloader.NoSuchName  # noqa: B018
    assert not hasattr(dataloader, "NoSuchName")
