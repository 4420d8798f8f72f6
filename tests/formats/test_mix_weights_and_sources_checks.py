"""MixDataset's inputs at their edges: finite weights whose sum overflows a float keep their
ratios; sources given as an iterator are refused by name (they were read empty)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dataloader import ArrayDataset, IterableDataset, MixDataset


def sources():
    return [ArrayDataset(np.arange(100)), ArrayDataset(np.arange(1000, 1050))]


def test_finite_weights_whose_sum_overflows_mix_by_their_ratios_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        huge = MixDataset(sources(), [1e308, 1e308])
    plain = MixDataset(sources(), [1, 1])
    assert huge.weights.tolist() == [0.5, 0.5] and len(huge) == len(plain)
    assert huge.source_of(np.arange(len(huge)))[0].tolist() == plain.source_of(np.arange(len(plain)))[0].tolist()
    with pytest.raises(ValueError, match=r"weights\[1\]=1e\+290 is below 2\*\*-24 of the total"):
        MixDataset(sources(), [1e308, 1e290])


def test_sources_given_as_an_iterator_are_refused_naming_it():
    class Count(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(TypeError, match=r"must be a sequence \(e.g. a list\), got an iterator \(list_iterator\)"):
        MixDataset(iter(sources()), [1, 1])
    with pytest.raises(TypeError, match=r"got an iterator \(generator\)"):
        MixDataset((d for d in [Count(), Count()]), [1, 1])
    assert len(MixDataset(tuple(sources()), [1, 1])) == len(MixDataset(sources(), [1, 1]))
