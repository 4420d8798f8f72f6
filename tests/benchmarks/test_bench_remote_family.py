"""The remote benches (bench_remote, bench_event_loops, bench_ranges, bench_error_policy) run at
CI size against their server process (benchmarks._harness) and report every contender
(no measurement: tiny sizes, the figures are not checked).  SPDL's contenders appear only where
``spdl.pipeline`` imports (spdl-core is not a dependency: CI has none)."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("aiohttp", reason="the remote benches' reference is plain aiohttp (the 'test' extra)")

from benchmarks import bench_event_loops, bench_ranges, bench_remote  # noqa: E402 - after the skip

SPDL = importlib.util.find_spec("spdl") is not None and importlib.util.find_spec("spdl.pipeline") is not None


def summary(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.timeout(120)
def test_bench_remote_reports_loaders_plain_aiohttp_and_the_thread_pool(capsys):
    bench_remote.main(["--items", "128", "--rounds", "1", "--latency-s", "0.002", "--size", "1024"])
    out = summary(capsys)
    for name in ("http_w1_c64", "http_w2_c64", "plain_aiohttp_64", "threadpool_64"):
        assert out[name]["items_per_s"] > 0 and len(out[name]["rounds"]) == 1
    assert set(out["threads_by_item_concurrency"]) == {"16", "64", "256"}


@pytest.mark.timeout(120)
def test_bench_remote_across_batches_reports_every_contender_as_a_ratio(capsys):
    bench_remote.main(["--across-batches", "--items", "256", "--rounds", "2", "--latency-s", "0.002"])
    out = summary(capsys)
    names = {"w1_c64", "w2_c32", "dataset_alone_64", "threadpool_64"} | ({"spdl_64"} if SPDL else set())
    assert names <= set(out) and ("spdl_64" in out) == SPDL
    assert all(out[n]["ratio"] > 0 and len(out[n]["rounds"]) == 2 for n in names)
    assert out["plain_aiohttp_64"] > 0 and len(out["load_average_end"]) == 3


@pytest.mark.timeout(120)
def test_bench_event_loops_reports_loops_and_peers(capsys):
    bench_event_loops.main(["--items", "512", "--rounds", "1", "--loops", "1", "2", "--latency-s", "0.002",
                            "--size", "1024", "--pool-threads", "8"])
    out = summary(capsys)
    names = {"loader_event_loops_1", "loader_event_loops_2", "plain_aiohttp_2_loops", "threadpool_8"}
    assert names | ({"spdl_256"} if SPDL else set()) == {k for k in out if isinstance(out[k], dict)} - {
        "plain_aiohttp_1_loop"}
    assert all(out[n]["items_per_s"] > 0 and out[n]["cpu_us_per_item"] > 0 for n in names)


@pytest.mark.timeout(120)
def test_bench_ranges_checks_every_contender_byte_for_byte(capsys):
    bench_ranges.main(["--size", str(1 << 20), "--rounds", "1", "--rtt-s", "0.001", "--conn-mb-s", "1000"])
    out = summary(capsys)
    names = {"one_get", "ranges", "plain_aiohttp", "plain_aiohttp_ranges", "threadpool_ranges"}
    assert names | ({"spdl_ranges"} if SPDL else set()) == {k for k in out if isinstance(out[k], dict)}
    assert all(out[n]["median_s"] > 0 for n in names) and out["speedup"] > 0


@pytest.mark.timeout(120)
def test_bench_error_policy_reports_both_workloads(capsys):
    pytest.importorskip("PIL", reason="bench_error_policy writes JPEGs with Pillow (the 'image' extra)")
    from benchmarks import bench_error_policy

    bench_error_policy.main(["--images", "100", "--urls", "200", "--rounds", "1"])
    out = summary(capsys)
    for workload in ("images", "http"):
        assert set(out[workload]) == {"clean, raise", "clean, skip", "1% bad, skip", "1% bad, replace"}
        assert out[workload]["clean, raise"]["ratio"] == 1.0
