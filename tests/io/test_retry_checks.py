"""``Retry`` refuses a jitter that is not a bool and any float field that is not finite."""

from __future__ import annotations

import numpy as np
import pytest

from dataloader.io import Retry


@pytest.mark.parametrize("value", ["no", "False", 0, 1, None, 1.0])
def test_retry_refuses_a_jitter_that_is_not_a_bool_naming_the_value(value):
    with pytest.raises(TypeError, match=rf"jitter must be a bool, got {value!r}"):
        Retry(jitter=value)


def test_retry_takes_a_bool_jitter():
    assert Retry(jitter=False).jitter is False and Retry(jitter=True).jitter is True


@pytest.mark.parametrize("name", ["initial_backoff_s", "max_backoff_s", "multiplier", "attempt_timeout_s"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_retry_refuses_a_float_field_that_is_not_finite_with_value_error(name, value):
    with pytest.raises(ValueError, match=rf"{name}={value!r} must be finite"):
        Retry(**{name: value})


@pytest.mark.parametrize("name", ["initial_backoff_s", "max_backoff_s", "multiplier", "attempt_timeout_s"])
def test_retry_refuses_a_float_field_of_the_wrong_type_with_type_error(name):
    with pytest.raises(TypeError, match=rf"{name} must be a number.*'1'"):
        Retry(**{name: "1"})


def test_retry_takes_numpy_scalars_as_the_python_numbers_they_are():
    r = Retry(max_attempts=np.int64(4), jitter=np.True_, initial_backoff_s=np.float32(0.5), max_backoff_s=np.float64(2))
    assert (r.max_attempts, r.jitter) == (4, True)
    assert type(r.max_attempts) is int and type(r.jitter) is bool
    for flag in (True, np.True_):
        with pytest.raises(TypeError, match="max_attempts must be an int"):
            Retry(max_attempts=flag)
