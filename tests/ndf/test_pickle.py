"""Pickling and copying `.ndf` files and datasets: reopened by path (dataloader/_ndf/read.py)."""

from __future__ import annotations

import copy
import os
import pickle

import numpy as np
import pytest

from dataloader import DataLoader
from dataloader.ndf import NdfDataset, NdfFile, open_ndf, save_ndf

COPIES = {
    "pickle": lambda obj: pickle.loads(pickle.dumps(obj)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


class TaggedNdf(NdfDataset):
    """A subclass with an attribute of its own (set after construction)."""


@pytest.fixture
def table(tmp_path):
    x = np.arange(40.0).reshape(10, 4)
    y = np.arange(10.0).reshape(10, 1)
    path = tmp_path / "t.ndf"
    save_ndf(path, x, y)
    return path, x, y


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("access", ["mmap", "pread"])
def test_copied_dataset_reopens_the_file_with_the_same_options(table, how, access):
    path, x, y = table
    original = NdfDataset(path, access=access, advice="random")
    twin = COPIES[how](original)
    assert type(twin) is NdfDataset and twin.file is not original.file
    assert (twin.file.access, twin.file.advice) == (access, "random")
    assert len(twin) == 10
    original.close()  # the copy has its own descriptor
    assert original.file.closed and not twin.file.closed
    np.testing.assert_array_equal(twin[3][0], x[3])
    xb, yb = twin.__getitems__([9, 0]).columns
    np.testing.assert_array_equal(xb, x[[9, 0]])
    np.testing.assert_array_equal(yb, y[[9, 0]])
    twin.close()
    assert twin.file.closed  # the copy owns its file


@pytest.mark.parametrize("how", sorted(COPIES))
def test_copied_file_reopens_by_absolute_path(table, how, monkeypatch):
    path, x, _ = table
    monkeypatch.chdir(path.parent)
    original = open_ndf("t.ndf", access="pread")
    monkeypatch.chdir(os.path.dirname(path.parent))  # a relative path would now miss
    with COPIES[how](original) as twin:
        assert isinstance(twin, NdfFile) and twin.access == "pread"
        np.testing.assert_array_equal(twin.read_rows([2])[0], x[[2]])
    assert not original.closed
    original.close()


@pytest.mark.parametrize("how", sorted(COPIES))
def test_dataset_over_a_shared_file_copies_into_one_that_owns_its_file(table, how):
    path, x, _ = table
    shared = open_ndf(path)
    original = NdfDataset(shared)
    twin = COPIES[how](original)
    twin.close()
    assert twin.file.closed and not shared.closed
    original.close()
    assert not shared.closed  # still not closed by the dataset that shares it
    shared.close()


def test_subclass_and_its_attributes_survive_pickling(table):
    ds = TaggedNdf(table[0])
    ds.tag = {"split": "train"}
    twin = pickle.loads(pickle.dumps(ds))
    assert type(twin) is TaggedNdf and twin.tag == {"split": "train"} and len(twin) == 10
    deep = copy.deepcopy(ds)
    assert deep.tag == ds.tag and deep.tag is not ds.tag
    for d in (ds, twin, deep):
        d.close()


def test_pickling_a_closed_dataset_or_file_is_a_clear_value_error(table):
    ds = NdfDataset(table[0])
    ds.close()
    for obj in (ds, ds.file):
        with pytest.raises(ValueError, match="cannot pickle or copy the closed .ndf file"):
            pickle.dumps(obj)
        with pytest.raises(ValueError, match="closed .ndf file"):
            copy.copy(obj)


def test_unpickling_after_the_file_changed_shape_is_a_value_error(table):
    path, _, _ = table
    ds = NdfDataset(path)
    data = pickle.dumps(ds)
    ds.close()
    save_ndf(path, np.zeros((3, 4)), np.zeros((3, 1)))  # another n
    with pytest.raises(ValueError, match=r"changed since it was pickled.*n=3.*expected n=10"):
        pickle.loads(data)
    os.remove(path)
    with pytest.raises(FileNotFoundError):
        pickle.loads(data)


@pytest.mark.timeout(60)
def test_a_loader_over_a_copied_dataset_reads_every_row(table):
    path, x, _ = table
    twin = copy.deepcopy(NdfDataset(path))
    loader = DataLoader(twin, batch_size=4, num_workers=2)
    got = np.concatenate([xb for xb, _ in loader])
    loader.close()
    twin.close()
    np.testing.assert_array_equal(got, x)
