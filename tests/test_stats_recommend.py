"""Recommendations from measured waits, refused without data, and confirmed by replay."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from runner_queue_fallback.cli import main
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.tools.stats.history import History
from runner_queue_fallback.tools.stats.recommend import PoolData, Step, evaluate, recommend
from runner_queue_fallback.tools.stats.report import Report
from runner_queue_fallback.tools.stats.survival import Observation, kaplan_meier
from tests.stats_support import (
    CPU8,
    CPU16,
    GROUP,
    history_world,
    run_stats,
    runners,
    slow_first_spec,
)

_T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)


def pool(labels: str, waits: list[float], censored_at: float = 0.0, censored: int = 0) -> PoolData:
    data = [Observation(w, event=True) for w in waits]
    data += [Observation(censored_at, event=False)] * censored
    curve = kaplan_meier(data)
    return PoolData(GROUP, labels, curve, len(data), len(waits))


def test_evaluate_by_hand():
    """Pool A: half in 60 s, half censored at 600; pool B: all in 120 s; A 10m -> B 10m."""
    a = pool("a", [60] * 20, censored_at=600, censored=20)
    b = pool("b", [120] * 40)
    result = evaluate([Step(GROUP, "a", 10), Step(GROUP, "b", 10)], {"a": a.curve, "b": b.curve})
    assert result is not None
    # half get a runner at 60 s; half at 600 + 30 (overhead) + 120 = 750 s
    assert result.mean_seconds == pytest.approx((60 + 750) / 2)
    assert result.p90_seconds == 750
    assert result.exhausted == 0
    assert evaluate([Step(GROUP, "a", 11)], {"a": a.curve}) is None  # past what A's data see


def test_refuses_pools_with_too_little_data():
    few = pool(CPU16, [30] * 9, censored_at=600, censored=30)  # 39 children, 9 runners
    enough = pool(CPU8, [30] * 30)
    current = [Candidate(GROUP, CPU16, 10), Candidate(GROUP, CPU8, 10)]
    rec = recommend(current, {CPU16: few, CPU8: enough})
    [refused] = rec.refused
    assert refused.labels == CPU16
    assert "9 allocations" in refused.reason
    assert rec.current is None
    assert all(s.labels == CPU8 for e in rec.best for s in e.steps)


def test_recommends_the_faster_pool_first_and_replay_confirms_the_gain(tmp_path, capsys):
    """cpu8 is clearly faster than cpu16: it comes first, and 20 seeded replays agree."""
    world, clock = history_world(slow_first_spec(sequences=300, seed=5))
    current = runners((CPU16, 10), (CPU8, 10))
    assert run_stats(world, clock, "--json", "--runner-type", "cpu", "--runners", current) == 0
    document = json.loads(capsys.readouterr().out)
    best = document["recommendation"]["best"][0]
    now = document["recommendation"]["current"]
    assert best["steps"][0]["labels"] == [CPU8]
    assert best["mean_seconds"] < now["mean_seconds"] / 3
    waits = tmp_path / "stats.json"
    waits.write_text(json.dumps(document))

    def replay(runners_json: str) -> Any:
        args = ["simulate", "--waits", str(waits), "--runner-type", "cpu", "--runners"]
        code = main([*args, runners_json, "--replays", "20", "--seed", "4", "--json"])
        assert code == 0
        return json.loads(capsys.readouterr().out)

    before, after = replay(current), replay(best["runners"])
    assert after["replayed"]["mean"] < before["replayed"]["mean"] / 3
    assert after["replayed"]["exhausted"] <= before["replayed"]["exhausted"] + 0.1
    # the replay agrees with the prediction it checks, within 40%
    assert after["replayed"]["mean"] == pytest.approx(after["predicted"]["mean"], rel=0.4)
    assert before["replayed"]["mean"] == pytest.approx(before["predicted"]["mean"], rel=0.4)


def test_replay_refuses_a_pool_it_has_no_waits_for(tmp_path, capsys):
    world, clock = history_world(slow_first_spec(sequences=60, seed=2))
    run_stats(world, clock, "--json")
    waits = tmp_path / "stats.json"
    waits.write_text(capsys.readouterr().out)
    code = main(["simulate", "--waits", str(waits), "--runner-type", "cpu"])
    assert code == 2
    assert "no measured waits for linux-amd64-cpu32" in capsys.readouterr().out
    assert main(["simulate", "--waits", str(waits), "--runner-type", "cpu", "--replays", "0"]) == 2
    assert "--replays must be" in capsys.readouterr().out


def _flaky_and_steady() -> dict[str, PoolData]:
    """a: quick but 25% never served within 10 min; b: 20 quick runners, half never served."""
    a = pool("a", [30 + 19 * i for i in range(30)], censored_at=600, censored=10)
    b = pool("b", [40 + 10 * i for i in range(20)], censored_at=900, censored=20)
    return {"a": a, "b": b}


def test_a_recommendation_that_raises_the_failure_rate_is_never_ranked_first():
    pools = _flaky_and_steady()
    current = [Candidate(GROUP, "a", 10), Candidate(GROUP, "b", 10)]
    rec = recommend(current, pools)
    assert rec.current is not None
    fastest = rec.best[-1]  # the fastest order of all is exhausted more often: listed last
    assert fastest.raises_failure_rate(rec.current)
    assert fastest.mean() < rec.best[0].mean()
    assert all(not e.raises_failure_rate(rec.current) for e in rec.best[:-1])
    assert rec.best[0].exhausted <= rec.current.exhausted


def test_a_longer_wait_with_fewer_failures_ranks_first_and_shows_the_extra_wait(capsys):
    """From the fast, flaky order, the report ranks the steadier one first and says its cost."""
    pools = _flaky_and_steady()
    current = [Candidate(GROUP, "b", 4), Candidate(GROUP, "a", 7)]
    rec = recommend(current, pools)
    assert rec.current is not None
    best = rec.best[0]
    assert best.exhausted < rec.current.exhausted
    assert best.mean() > rec.current.mean()  # the price: a longer wait
    report = Report("o/r", "w.yml", _T0, _T0, History(), 0, 0, recommendation=rec)
    line = next(line for line in report.text().splitlines() if line.lstrip().startswith("#1:"))
    assert re.search(r"vs current: \d+\.\d min slower; exhausted \d+\.\d points less often", line)


def test_thin_data_is_said_per_pool_and_nothing_is_recommended_on_it(capsys):
    """Twelve sequences: each pool's row says the data are too thin; no empty order is offered."""
    world, clock = history_world(slow_first_spec(sequences=12, seed=8))
    current = runners((CPU16, 10), (CPU8, 10))
    assert run_stats(world, clock, "--runner-type", "cpu", "--runners", current) == 0
    out = capsys.readouterr().out
    rows = [
        line
        for line in out.splitlines()
        if line.startswith(("linux-amd64-cpu16", "linux-amd64-cpu8"))
    ]
    assert len(rows) == 2
    assert all("too few to estimate its waits:" in row and "%" not in row for row in rows)
    assert "nothing rests on linux-amd64-cpu16:" in out
    assert "nothing recommended: no pool of the runner type has enough data" in out
    assert "#1:" not in out
    assert "runners: []" not in out
