"""Transform base class: tuple items, chaining, where random numbers come from."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from dataloader.transforms import Compose, Transform


class AddOne(Transform):
    __slots__ = ()

    def apply(self, value, rng):
        assert rng is None
        return value + 1


class Draw(Transform):
    """Returns (value, one random draw) so tests can see the generator used."""

    __slots__ = ()
    random = True

    def apply(self, value, rng):
        return value + [float(rng.random())]


def test_plain_value_and_tuple_item_pass_the_label_through():
    assert AddOne()(1) == 2
    assert AddOne()((1, "label", 7)) == (2, "label", 7)


def test_namedtuple_item_keeps_its_type():
    Item = collections.namedtuple("Item", "image label")
    out = AddOne()(Item(1, 5))
    assert type(out) is Item and out == Item(2, 5)


def test_empty_tuple_is_an_error():
    with pytest.raises(ValueError, match="empty tuple"):
        AddOne()(())


def test_then_and_compose_apply_in_order_and_flatten():
    double = lambda x: x * 2
    chain = AddOne().then(double).then(AddOne())
    assert isinstance(chain, Compose) and len(chain.transforms) == 3
    assert chain(3) == 9
    nested = Compose([AddOne(), Compose([double, AddOne()])])
    assert len(nested.transforms) == 3 and nested(3) == 9


def test_compose_rejects_non_callables():
    with pytest.raises(TypeError, match="not callable"):
        Compose([AddOne(), 3])


def test_chain_shares_one_generator_so_draws_differ():
    chain = Draw().then(Draw())
    assert chain.random
    out = chain([], rng=np.random.default_rng(7))
    expected = np.random.default_rng(7).random(2).tolist()
    assert out == expected and out[0] != out[1]


def test_same_rng_seed_gives_same_result():
    t = Draw()
    assert t([], rng=np.random.default_rng(3)) == t([], rng=np.random.default_rng(3))


def test_random_transform_outside_loader_without_rng_raises():
    with pytest.raises(RuntimeError):
        Draw()([])
    with pytest.raises(RuntimeError):
        Draw().then(AddOne())([])


def test_deterministic_chain_needs_no_rng_outside_loader():
    assert not Compose([AddOne(), AddOne()]).random
    assert Compose([AddOne(), AddOne()])(0) == 2


def test_repr_names_the_fields():
    assert repr(Compose([AddOne()])) == "Compose([AddOne()])"
