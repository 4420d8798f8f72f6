"""benchmarks/bench_hedge.py runs at CI size and reports the step time of every contender
at every depth.  aiohttp (the ``remote`` extra) is needed: skipped without it."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiohttp")

from benchmarks import bench_hedge  # noqa: E402


@pytest.mark.timeout(120)
def test_bench_hedge_reports_step_times_within_the_budget(capsys):
    bench_hedge.main(["--items", "384", "--rounds", "1", "--prefetch-depths", "2", "--warmup-s", "0.05"])
    out = capsys.readouterr().out
    summary = json.loads(out[out.index("\n{") :])
    assert set(summary) == {f"{c} depth=2" for c in ("clean", "off", "auto", "fixed")} | {"loadavg_end"}
    for name in ("clean depth=2", "off depth=2"):
        assert summary[name]["extra_requests"] == 0 and summary[name]["delay_s"] == 0
    for name, row in summary.items():
        if name != "loadavg_end":
            assert row["step_p50_s"] >= row["S_s"] > 0  # a step is S plus the next() wait
            assert row["step_max_s"] >= row["step_p99_s"] >= row["step_p50_s"]
            assert row["extra_requests"] <= 0.05  # the default hedge_budget


@pytest.mark.timeout(60)
def test_bench_hedge_defaults_to_depths_2_4_8_and_starts_its_servers_through_the_harness(monkeypatch, capsys):
    import urllib.request

    started, seen = [], {}
    real = bench_hedge.server_process

    def spy(script, *args):
        started.append(args)
        return real(script, *args)

    def no_rounds(args, clean, slow):  # the servers answer; nothing measured
        with urllib.request.urlopen(f"http://127.0.0.1:{clean}/item/0", timeout=10) as resp:
            seen.update(depths=args.prefetch_depths, body=len(resp.read()))
        return {}

    monkeypatch.setattr(bench_hedge, "server_process", spy)
    monkeypatch.setattr(bench_hedge, "rounds", no_rounds)
    bench_hedge.main([])
    assert seen == {"depths": [2, 4, 8], "body": 16384}
    assert started == [
        ("--latency-s=0.02", "--size=16384", f"--slow-share={s}", "--slow-s=2.0") for s in (0.0, 0.01)]
