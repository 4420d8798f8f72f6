"""Template, Locations and Retry: target-aware writing, build-time and item-time checks, backoff."""

from __future__ import annotations

import asyncio

import pytest

from dataloader.io import Locations, Retry, Template
from dataloader.io.retry import AttemptTimeout


def bound(source, target, length=None, check=lambda loc: loc):
    return Locations(source, length=length).bind(target, check)


def test_template_writes_index_with_its_format_spec_and_constant_values():
    locs = bound(Template("https://h/{split}/{index:08d}.jpg", split="train"), "url", length=3)
    assert [locs[i] for i in range(3)] == [f"https://h/train/{i:08d}.jpg" for i in range(3)]
    assert len(locs) == 3


def test_url_values_are_percent_encoded_so_they_cannot_add_components_or_a_query():
    locs = bound(Template("https://h/x/{name}?v={v}", name=lambda i: "a/b?c#d", v="1&x=2"), "url", length=1)
    assert locs[0] == "https://h/x/a%2Fb%3Fc%23d?v=1%26x%3D2"


@pytest.mark.parametrize("pattern", ["https://{host}/x", "{scheme}://h/x", "https://h{port}/x"])
def test_url_template_fields_may_not_choose_scheme_or_host(pattern):
    values = {k: "v" for k in ("host", "scheme", "port") if "{" + k + "}" in pattern}
    with pytest.raises(ValueError, match="may only follow"):
        bound(Template(pattern, **values), "url", length=1)


def test_object_url_template_fields_may_not_choose_the_bucket():
    with pytest.raises(ValueError, match="bucket"):
        bound(Template("s3://{b}/k/{index}", b="x"), "key", length=1)


@pytest.mark.parametrize("target", ["key", "path"])
@pytest.mark.parametrize("value", ["a/b", ".", ".."])
def test_constant_values_that_would_leave_the_root_are_refused_when_bound(target, value):
    with pytest.raises(ValueError, match="template value split="):
        bound(Template("data/{split}/{index}.bin", split=value), target, length=1)


@pytest.mark.parametrize("value", ["a\\b", "a\x00b"])
def test_backslash_and_nul_are_refused_in_paths_but_a_backslash_is_a_plain_key_character(value):
    with pytest.raises(ValueError, match="template value"):
        bound(Template("d/{v}", v=value), "path", length=1)
    if "\x00" not in value:
        assert bound(Template("d/{v}", v=value), "key", length=1)[0] == "d/" + value


@pytest.mark.parametrize("target", ["key", "path"])
def test_a_per_item_value_that_would_leave_the_root_fails_that_item_only(target):
    names = ["ok", "..", "a/b", "fine"]
    locs = bound(Template("d/{name}.bin" if target == "key" else "d/{name}", name=names.__getitem__), target, length=4)
    assert locs[0].endswith("ok.bin" if target == "key" else "ok")
    for i in (1, 2):
        with pytest.raises(ValueError):
            locs[i]
    assert "fine" in locs[3]


def test_values_that_compose_a_dot_dot_component_fail_the_item():
    locs = bound(Template("d/..{b}/x", b=lambda i: "" if i else "y"), "path", length=2)
    assert locs[0] == "d/..y/x"
    with pytest.raises(ValueError, match="'..' component"):
        locs[1]


def test_url_sequence_with_encoded_dot_dot_is_refused_when_bound():
    for spelling in ("..", "%2e%2e", "%2E.", ".%2e", "."):
        with pytest.raises(ValueError, match="component"):
            bound([f"https://h/a/{spelling}/b"], "url")
    assert bound(["https://h/a/..b/c"], "url")[0] == "https://h/a/..b/c"  # not a component


def test_a_url_value_spelling_dot_dot_fails_the_item():
    locs = bound(Template("https://h/a/{v}/b", v=lambda i: ["ok", ".."][i]), "url", length=2)
    assert locs[0] == "https://h/a/ok/b"
    with pytest.raises(ValueError, match="component"):
        locs[1]


def test_template_rejects_bad_patterns_and_values():
    with pytest.raises(ValueError, match="has no value"):
        Template("x/{missing}")
    with pytest.raises(ValueError, match="must be a name"):
        Template("x/{}")
    with pytest.raises(ValueError, match="must be a name"):
        Template("x/{a.b}", a="1")
    with pytest.raises(ValueError, match="does not use"):
        Template("x/{index}", extra="1")
    with pytest.raises(ValueError, match="item's index"):
        Template("x/{index}", index=3)
    with pytest.raises(TypeError, match="must be a str, int, float or callable"):
        Template("x/{a}", a=[1])
    with pytest.raises(ValueError, match="does not parse"):
        Template("x/{a")


def test_locations_kinds_lengths_and_indexing():
    seq = bound(["a", "b"], "path")
    assert (len(seq), seq[1]) == (2, "b")
    with pytest.raises(IndexError, match="out of range"):
        seq[2]
    with pytest.raises(IndexError):
        seq[-1]
    fn = bound(lambda i: f"f{i}", "path", length=5)
    assert fn[4] == "f4"
    with pytest.raises(TypeError, match="length=N"):
        Locations(lambda i: "x")
    with pytest.raises(TypeError, match="length=N"):
        Locations(Template("x/{index}"))
    with pytest.raises(TypeError, match="not one string"):
        Locations("abc")
    with pytest.raises(TypeError, match="location 1 must be a str"):
        Locations(["a", 3])
    with pytest.raises(ValueError, match="disagrees"):
        Locations(["a"], length=2)
    bad = bound(lambda i: 7, "path", length=1)
    with pytest.raises(TypeError, match="must return a str"):
        bad[0]


def test_a_sequence_is_checked_whole_when_bound_naming_the_item():
    with pytest.raises(ValueError, match="item 1"):
        bound(["ok", "a/../b"], "path")


# -- Retry ------------------------------------------------------------------------


def test_retry_defaults_and_validation():
    r = Retry()
    assert (r.max_attempts, r.initial_backoff_s, r.max_backoff_s, r.multiplier, r.jitter, r.attempt_timeout_s) == (
        3, 0.1, 15.0, 2.0, True, 30.0
    )
    for kwargs in ({"max_attempts": 0}, {"initial_backoff_s": -1}, {"multiplier": 0.5},
                   {"max_backoff_s": 0.01, "initial_backoff_s": 1}, {"attempt_timeout_s": 0}):
        with pytest.raises(ValueError):
            Retry(**kwargs)
    with pytest.raises(TypeError):
        Retry(max_attempts=2.0)


def test_backoff_grows_exponentially_to_its_cap_and_jitter_stays_below_it():
    r = Retry(initial_backoff_s=0.1, max_backoff_s=1.0, multiplier=2.0, jitter=False)
    assert [r.backoff_s(n) for n in range(1, 6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0])
    j = Retry(initial_backoff_s=0.1, max_backoff_s=1.0, multiplier=2.0)
    draws = [j.backoff_s(3) for _ in range(200)]
    assert all(0 <= d <= 0.4 for d in draws) and len(set(draws)) > 1


@pytest.mark.parametrize("multiplier", [2.0, 2, 1.5, 1e300])
def test_backoff_stays_at_its_cap_for_any_number_of_attempts(multiplier):
    r = Retry(max_attempts=2000, initial_backoff_s=0.1, max_backoff_s=15.0, multiplier=multiplier, jitter=False)
    waits = [r.backoff_s(n) for n in (1, 2, 40, 1024, 1025, 1026, 2000, 10**6, 10**18)]
    assert waits[0] == 0.1 and waits[-1] == 15.0 and all(0.1 <= w <= 15.0 for w in waits)
    assert waits == sorted(waits)
    tiny = Retry(initial_backoff_s=5e-324, max_backoff_s=1e300, multiplier=2, jitter=False)
    assert tiny.backoff_s(1100) == pytest.approx(2.0**25)  # 2**-1074 * 2**1099: 2**1099 alone overflows
    assert tiny.backoff_s(10**9) == 1e300
    assert Retry(initial_backoff_s=0, max_backoff_s=0).backoff_s(5000) == 0


@pytest.mark.timeout(60)
def test_run_and_run_async_survive_thousands_of_attempts():
    r = Retry(max_attempts=2000, initial_backoff_s=0, max_backoff_s=0, attempt_timeout_s=None)
    calls = []

    def fail():
        calls.append(1)
        raise ConnectionError(f"attempt {len(calls)}")

    async def fail_async():
        return fail()

    with pytest.raises(ConnectionError, match="attempt 2000$"):
        r.run(fail, lambda e: True)
    with pytest.raises(ConnectionError, match="attempt 4000$"):
        asyncio.run(r.run_async(fail_async, lambda e: True, "item x"))


@pytest.mark.parametrize("name", ["initial_backoff_s", "max_backoff_s", "multiplier"])
def test_retry_refuses_infinite_backoffs(name):
    with pytest.raises(ValueError, match=f"{name}=inf must be finite"):
        Retry(**{name: float("inf"), **({"max_backoff_s": float("inf")} if name == "initial_backoff_s" else {})})


@pytest.mark.parametrize("name", ["initial_backoff_s", "max_backoff_s", "multiplier", "attempt_timeout_s"])
@pytest.mark.parametrize("value", [10**400, -(10**400), 10**5000, -(10**5000)], ids=["10**400", "-10**400", "10**5000", "-10**5000"])
def test_retry_refuses_ints_past_a_floats_range_naming_the_argument(name, value):
    kwargs = {name: value}
    if name == "initial_backoff_s" and value > 0:
        kwargs["max_backoff_s"] = 1e300
    with pytest.raises(ValueError, match=f"{name}") as info:
        Retry(**kwargs)
    assert len(str(info.value)) < 300  # the size, not thousands of digits


def test_retry_takes_ints_that_a_float_holds():
    r = Retry(initial_backoff_s=1, max_backoff_s=10**300, multiplier=3, attempt_timeout_s=10**300, jitter=False)
    assert r.backoff_s(2) == 3.0 and r.store_config()["retry_timeout"].days > 365 * 2000


def test_store_config_of_huge_retries_stays_in_range():
    cfg = Retry(max_attempts=10**30, initial_backoff_s=1e299, max_backoff_s=1e300, attempt_timeout_s=1e300).store_config()
    assert cfg["max_retries"] == (1 << 63) - 1
    assert cfg["retry_timeout"].days > 365 * 2000 and cfg["backoff"]["max_backoff"].days > 365 * 2000


def test_run_retries_transient_failures_only_and_raises_the_last():
    r = Retry(max_attempts=3, initial_backoff_s=0, max_backoff_s=0)
    calls = []

    def flaky():
        calls.append(1)
        raise OSError(5, "EIO")

    with pytest.raises(OSError):
        r.run(flaky, lambda e: True)
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(OSError):
        r.run(flaky, lambda e: False)
    assert len(calls) == 1
    seq = iter([OSError("x"), 42])

    def once():
        v = next(seq)
        if isinstance(v, Exception):
            raise v
        return v

    assert r.run(once, lambda e: True) == 42


@pytest.mark.timeout(10)
def test_run_async_times_out_each_attempt_and_counts_it_as_transient():
    r = Retry(max_attempts=2, initial_backoff_s=0, max_backoff_s=0, attempt_timeout_s=0.05)
    calls = []

    async def slow():
        calls.append(1)
        await asyncio.sleep(10)

    with pytest.raises(TimeoutError, match="attempt 2 of 2 timed out") as info:
        asyncio.run(r.run_async(slow, lambda e: False, "item x"))
    assert isinstance(info.value, AttemptTimeout) and len(calls) == 2


def test_run_async_names_the_item_with_a_function_called_only_on_a_time_out():
    named = []

    def what():
        named.append(1)
        return "item y"

    async def fast():
        return 7

    async def slow():
        await asyncio.sleep(10)

    r = Retry(max_attempts=1, attempt_timeout_s=0.05)
    assert asyncio.run(r.run_async(fast, lambda e: False, what)) == 7 and named == []
    with pytest.raises(AttemptTimeout, match="^item y: attempt 1 of 1 timed out"):
        asyncio.run(r.run_async(slow, lambda e: False, what))
    assert named == [1]


def test_store_config_maps_attempts_and_backoff():
    cfg = Retry(max_attempts=4, initial_backoff_s=0.2, max_backoff_s=3.0, multiplier=3.0).store_config()
    assert cfg["max_retries"] == 3
    assert cfg["backoff"]["init_backoff"].total_seconds() == pytest.approx(0.2)
    assert cfg["backoff"]["max_backoff"].total_seconds() == pytest.approx(3.0)
    assert cfg["backoff"]["base"] == 3.0


def test_importing_dataloader_imports_neither_http_nor_object_store_client():
    import subprocess
    import sys

    code = "import sys, dataloader, dataloader.io; print(sorted({'aiohttp', 'obstore'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("client", ["aiohttp", "obstore"])
def test_the_remote_clients_keep_the_gil_disabled_on_free_threaded_builds(client):
    import subprocess
    import sys
    import sysconfig

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("a build with the GIL")
    pytest.importorskip(client)
    code = f"import sys, {client}, {client}.{'web' if client == 'aiohttp' else 'store'}; print(sys._is_gil_enabled())"
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
