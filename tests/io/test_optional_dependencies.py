"""A remote dataset whose optional client is not installed says what to install, by name."""

from __future__ import annotations

import sys

import pytest

from dataloader import DataLoader
from dataloader.io import HttpDataset, Locations, Template
from dataloader.io._optional import optional_import


def test_optional_import_names_the_dataset_the_package_and_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # as if not installed: import raises
    with pytest.raises(ModuleNotFoundError, match=r"HttpDataset needs aiohttp.*pip install 'dataloader\[remote\]'") as info:
        optional_import("aiohttp", "HttpDataset")
    assert info.value.name == "aiohttp"
    with pytest.raises(ModuleNotFoundError, match=r"ObjectStoreDataset needs no_such_package_25,") as info:
        optional_import("no_such_package_25.store", "ObjectStoreDataset")  # a submodule of a missing package
    assert info.value.name == "no_such_package_25"


def test_a_module_missing_inside_an_installed_package_is_raised_as_it_was():
    with pytest.raises(ModuleNotFoundError) as info:
        optional_import("json.no_such_module", "HttpDataset")
    assert info.value.name == "json.no_such_module" and "needs" not in str(info.value)


@pytest.mark.timeout(60)
def test_an_http_epoch_without_aiohttp_fails_with_the_hint_not_a_bare_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiohttp", None)
    ds = HttpDataset(Locations(Template("http://127.0.0.1:9/{index}"), length=2))  # never contacted
    with DataLoader(ds, batch_size=2) as loader, pytest.raises(ModuleNotFoundError, match="HttpDataset needs aiohttp"):
        next(iter(loader))
